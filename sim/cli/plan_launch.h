/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan_launch.h -- the launch flags `plan` prints for a composition
 * (plan_launch.c): Megatron-LM command-line flags and a DeepSpeed config.
 */
#ifndef USIM_CLI_PLAN_LAUNCH_H
#define USIM_CLI_PLAN_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "usim.h"
#include "base/base_json.h"

/* Megatron-LM flags of resolved job j (m: the model with the row's sequence,
 * micro_batch and global_batch: the row's effective ones; vpp: virtual stages
 * per pipeline rank, 1 when none).  Returns 0 with the flags in `flags` and
 * maybe a caveat in `note` (empty if none), or 1 when Megatron-LM cannot run
 * the composition, with the reason in `note` and `flags` empty. */
int plan_megatron_flags(const usim_model *m, const usim_job *j, int64_t micro_batch, int64_t global_batch,
                        int vpp, char *flags, size_t nf, char *note, size_t nn);
/* A DeepSpeed config fragment for resolved job j (a new object, the
 * caller's), or NULL when DeepSpeed cannot run the composition, with the
 * reason in `note` (also out of memory: `note` empty).  A non-NULL result may
 * carry a caveat in `note`. */
json_t *plan_deepspeed_config(const usim_model *m, const usim_job *j, int64_t micro_batch, int micro_steps,
                              int64_t global_batch, char *note, size_t nn);

#endif
