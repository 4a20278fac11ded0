/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c -- the exit status of a library status (cli.h), the one mapping
 * every subcommand and the drv_* layer use: 2 for bad input, 1 otherwise.
 */
#include "cli.h"

int exit_status_of(int status)
{
    switch (status) {
    case ULY_OK:
        return ULY_EXIT_OK;
    case ULY_EINVAL:
    case ULY_EOVERFLOW:
    case ULY_EFORMAT:
    case ULY_EMISMATCH:
    case ULY_ENONFINITE:
        return ULY_EXIT_BADINPUT;
    default: /* ULY_ENOMEM, ULY_EIO, ULY_EMPI, ULY_EPEER, ULY_EUNAVAIL: the run failed, not its input */
        return ULY_EXIT_RUNTIME;
    }
}
