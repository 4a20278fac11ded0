/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.h -- the harnesses' CHECK: a violated promise names itself (and the
 * target's last message, when the harness defines FUZZ_LAST_ERROR() before
 * including this), then aborts so that libFuzzer keeps the input.
 */
#ifndef ULY_FUZZ_CHECK_H
#define ULY_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_LAST_ERROR
#define FUZZ_LAST_ERROR() "-"
#endif

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,   \
                    __LINE__, #cond, FUZZ_LAST_ERROR());                              \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#endif
