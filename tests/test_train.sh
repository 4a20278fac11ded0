#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Training on DP x SP grids of 1..4 ranks (oversubscribed): every step's
# loss and every parameter after the last step must be bitwise identical for
# every grid (uneven shards and batches, GQA with KV groups cut between
# ranks, shards whose tokens all lack a label, no label at all); resuming
# from a checkpoint equals not stopping; the whole model's gradients match
# finite differences; the tiled loss and the tiled MLP (TEST_TRAIN_TILE)
# give bitwise the untiled losses and parameters on every grid.  Each run is
# under a timeout.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
bin="$top_builddir/tests/test_train"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0

run() { # name dp sp args...
    name=$1 dp=$2 sp=$3
    shift 3
    timeout 300 "$MPIRUN" --oversubscribe ${TEST_TRAIN_DOCS:+-x TEST_TRAIN_DOCS} ${TEST_TRAIN_TILE:+-x TEST_TRAIN_TILE} -np $((dp * sp)) "$bin" "$dp" "$sp" "$@" > "$tmp/$name" 2>&1 || {
        echo "FAIL: $name (dp $dp sp $sp: $*) exited with $?"; cat "$tmp/$name"; status=1; }
}

same() { # reference other...
    ref=$1
    shift
    for o in "$@"; do
        if cmp -s "$tmp/$ref" "$tmp/$o"; then echo "ok: $o == $ref"
        else echo "FAIL: $o differs from $ref"; diff "$tmp/$ref" "$tmp/$o" | head -8; status=1; fi
    done
}

# shape A: N = 23 (uneven over 2, 3, 4), batch 2, GQA 4 heads / 2 KV heads
A="2 23 13 2 16 4 2 3"
run a11 1 1 $A exact
run a12 1 2 $A exact
run a13 1 3 $A exact
run a14 1 4 $A exact
run a21 2 1 $A exact
run a22 2 2 $A exact
same a11 a12 a13 a14 a21 a22
grep -q "count 0" "$tmp/a11" && { echo "FAIL: shape A has no labelled tokens"; status=1; }

# shape B: N = 18, batch 3 (uneven over DP 2), 3 heads, MHA, one layer
B="3 18 11 1 12 3 3 2"
run b11 1 1 $B exact
run b31 3 1 $B exact
run b14 1 4 $B exact
run b21 2 1 $B exact
run b22 2 2 $B exact
same b11 b31 b14 b21 b22

# the first half of every row has no label: SP ranks 0 and 1 (of 4) hold only ignored tokens
run i11 1 1 $A ignored
run i14 1 4 $A ignored
run i22 2 2 $A ignored
same i11 i14 i22
# no label at all: loss 0, nothing NaN (the program checks finiteness)
run n13 1 3 $A none
grep -q "loss 0x0p+0 count 0" "$tmp/n13" || { echo "FAIL: no labels should give loss 0"; cat "$tmp/n13"; status=1; }

# packed documents (3 per row, some empty): still identical for every grid
D="3 23 13 2 16 4 2 2"
run d11 1 1 $D docs
run d13 1 3 $D docs
run d31 3 1 $D docs
run d14 1 4 $D docs
same d11 d13 d31 d14
# a row packing documents A and B gives the losses of A alone and B alone (fp32 rounding)
run p11 1 1 $D packcmp
run p14 1 4 $D packcmp
cat "$tmp/p11" "$tmp/p14" | grep packcmp

# resume from a checkpoint at step 2 of 4 equals running 4 steps
R="2 23 13 2 16 4 2 4"
run r12 1 2 $R exact
run r12resume 1 2 $R resume
run r22resume 2 2 $R resume
same r12 r12resume r22resume

# gradients of the whole model against finite differences of the loss
run g11 1 1 $A gradcheck
run g13 1 3 $A gradcheck
TEST_TRAIN_DOCS=1 run g12docs 1 2 $D gradcheck
cat "$tmp/g11" "$tmp/g13" "$tmp/g12docs" | grep gradcheck

# memory-lean training: the tiled loss (one canonical segment of logits at a
# time) and the tiled MLP (K shards of whole segments, the hidden recomputed
# in the backward) keep every sum's order: bitwise the untiled output, on
# every grid; K = 20 is more shards than any rank's segments (one each)
TEST_TRAIN_TILE=loss run ta11 1 1 $A exact
TEST_TRAIN_TILE=both:3 run ta13 1 3 $A exact
TEST_TRAIN_TILE=mlp:2 run ta22 2 2 $A exact
TEST_TRAIN_TILE=both:20 run ta14 1 4 $A exact
TEST_TRAIN_TILE=mlp:1 run ta21 2 1 $A exact
same a11 ta11 ta13 ta22 ta14 ta21
TEST_TRAIN_TILE=both:2 run tb31 3 1 $B exact
TEST_TRAIN_TILE=both:4 run tb22 2 2 $B exact
same b11 tb31 tb22
TEST_TRAIN_TILE=both:2 run ti14 1 4 $A ignored
same i11 ti14
TEST_TRAIN_TILE=both:3 run td13 1 3 $D docs
TEST_TRAIN_TILE=loss run td11 1 1 $D docs
same d11 td13 td11
TEST_TRAIN_TILE=both:2 run tr22resume 2 2 $R resume
same r12 tr22resume
TEST_TRAIN_TILE=both:2 run tg12 1 2 $A gradcheck
grep gradcheck "$tmp/tg12"

# the fast mode (MPI_Allreduce) runs and stays close to the exact losses
run f14 1 4 $A fast
head -1 "$tmp/a14"; head -1 "$tmp/f14"
exit $status
