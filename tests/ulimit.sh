#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ulimit.sh KIB COMMAND...: run COMMAND under `ulimit -v KIB` (exit 99 when the
# limit cannot be set).  The reliability tests prefix one rank's command with
# it to make that rank short of address space.
ulimit -v "$1" || exit 99
shift
exec "$@"
