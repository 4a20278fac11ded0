#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run the inference suite on 1, 2, 3 and 4 ranks (oversubscribed), each
# under a timeout so that a hang fails instead of blocking the test run.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
export CK_FORK=no OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
status=0
for np in 1 2 3 4; do
    echo "== $np rank(s)"
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$top_builddir/tests/test_infer" || {
        echo "FAILED on $np rank(s) (exit $?)"
        status=1
    }
done
exit $status
