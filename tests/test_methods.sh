#!/bin/sh
# Every sequence-parallel method on 1, 2, 3, 4 and 8 ranks (oversubscribed;
# 8 ranks exercise usp with more ranks than heads), each under a timeout so
# that a hang fails instead of blocking the test run.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
export CK_FORK=no OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
status=0
for np in 1 2 3 4 8; do
    echo "== $np rank(s)"
    shapes=""
    [ "$np" -gt 4 ] && shapes=2   # 8 ranks on a small machine: the first two shapes
    timeout 600 "$MPIRUN" --oversubscribe --mca mpi_yield_when_idle 1 -np "$np" \
        "$top_builddir/tests/test_methods" $shapes || {
        echo "FAILED on $np rank(s) (exit $?)"
        status=1
    }
done
exit $status
