/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses.h -- public API of libulysses that does not need MPI.
 *
 * What is here: ulysses_plan.h (status codes, the attention problem
 * description, the partition/plan math shared with the simulator),
 * ulysses_kernels.h (the fp64 reference kernel, the oracle, and the blocked
 * "flash-style" kernel in fp32 and fp64) and ulysses_npy.h (the .npy reader
 * and writer).  The distributed (MPI) calls live in ulysses_dist.h.
 *
 * Tensor conventions (row-major, shapes in comments):
 *   Q, O, dQ, dO  (B, N, Hq, d)    Hq = query heads held by the caller
 *   K, V, dK, dV  (B, N, Hk, d)    Hk = key/value heads held by the caller
 *   LSE           (B, Hq, N)       log-sum-exp of the scaled, masked scores
 * Query head h (global index) uses KV head h / (H / Hkv).
 *
 * Every function returns a uly_status (0 on success).  On failure a one-line
 * description naming the problem is available from uly_last_error() in the
 * calling thread.  Nothing here exits or aborts.
 */
#ifndef ULYSSES_H
#define ULYSSES_H

#include "ulysses_plan.h"
#include "ulysses_kernels.h"
#include "ulysses_npy.h"
#include "ulysses_check.h"
#include "ulysses_infer.h"

#endif /* ULYSSES_H */
