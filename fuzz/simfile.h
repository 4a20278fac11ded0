/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simfile.h -- pieces shared by the simulator harnesses (fuzz_sim_json.c,
 * fuzz_sim_run.c): a CHECK that names the violated promise and the
 * simulator's last message, and the temporary description files of
 * tmpfile.h (the loaders take a path).  Include after usim.h.
 */
#ifndef ULY_FUZZ_SIMFILE_H
#define ULY_FUZZ_SIMFILE_H

#include <stdio.h>
#include <stdlib.h>

#include "tmpfile.h"

#define FUZZ_LAST_ERROR() usim_last_error()
#include "check.h"

#endif
