#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ulysses.pc links a static program: `pkg-config --static --cflags --libs
# ulysses` (the build tree's ulysses.pc with its libdir a scratch directory
# that holds libulysses.a and nothing else, its includedir the source's include/)
# must name every library libulysses.a needs -- OpenMP, OpenBLAS, MPI,
# jansson, libm, threads -- for a program calling the kernels
# (uly_attn_fwd, against uly_ref_fwd) and the distributed attention
# (uly_dist_fwd on one rank, bitwise equal to uly_attn_fwd) to link and run,
# with libulysses linked in statically (no libulysses.so among its needs).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h" && [ -f "$top_builddir/ulysses.pc" ] ||
    { echo "no libulysses in this build (configured --without-mpi): skipped"; exit 77; }
lib=$top_builddir/src/.libs/libulysses.a
[ -f "$lib" ] || { echo "no $lib (configured --disable-static): skipped"; exit 77; }
mkvar() { sed -n "s/^$1 = //p" "$top_builddir/Makefile" | head -n 1; }
CC=$(mkvar CC) PKG_CONFIG=$(mkvar PKG_CONFIG) SAN_CFLAGS=$(mkvar SAN_CFLAGS)
[ -n "$PKG_CONFIG" ] || PKG_CONFIG=pkg-config
command -v "$PKG_CONFIG" >/dev/null 2>&1 || { echo "$PKG_CONFIG not found: skipped"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir "$W/lib"
cp "$lib" "$W/lib/"

# the build tree's ulysses.pc, every line as installed but libdir and includedir
sed -e "s|^libdir=.*|libdir=$W/lib|" -e "s|^includedir=.*|includedir=$top_srcdir/include|" \
    "$top_builddir/ulysses.pc" > "$W/ulysses.pc"
pc() { PKG_CONFIG_PATH="$W${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" "$PKG_CONFIG" "$@" ulysses; }
flags=$(pc --static --cflags --libs) || { echo "FAIL: $PKG_CONFIG --static --cflags --libs ulysses failed"; exit 1; }
echo "pkg-config --static --cflags --libs ulysses: $flags"

cat > "$W/prog.c" <<'CEOF'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "ulysses_dist.h"

enum { B = 1, N = 24, H = 4, HKV = 2, D = 8 };

int main(int argc, char **argv)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = HKV; a.head_dim = D; a.causal = 1; a.dtype = ULY_F32;
    static float q[B * N * H * D], k[B * N * HKV * D], v[B * N * HKV * D];    /* (B, N, H|Hkv, d) */
    static float o[B * N * H * D], od[B * N * H * D], lse[B * H * N];
    static double qd[B * N * H * D], kd[B * N * HKV * D], vd[B * N * HKV * D], oref[B * N * H * D];
    unsigned s = 12345;
    for (int i = 0; i < B * N * H * D; i++) { s = s * 1103515245u + 12345u; q[i] = (float)((s >> 16) % 2001) / 1000.0f - 1.0f; qd[i] = q[i]; }
    for (int i = 0; i < B * N * HKV * D; i++) {
        s = s * 1103515245u + 12345u; k[i] = (float)((s >> 16) % 2001) / 1000.0f - 1.0f; kd[i] = k[i];
        s = s * 1103515245u + 12345u; v[i] = (float)((s >> 16) % 2001) / 1000.0f - 1.0f; vd[i] = v[i];
    }
    int rc = uly_attn_fwd(&a, NULL, q, k, v, o, lse);
    if (rc) { fprintf(stderr, "uly_attn_fwd: %s\n", uly_strerror(rc)); return 1; }
    uly_attn_desc ad = a;
    ad.dtype = ULY_F64;
    if ((rc = uly_ref_fwd(&ad, qd, kd, vd, oref, NULL))) { fprintf(stderr, "uly_ref_fwd: %s\n", uly_strerror(rc)); return 1; }
    double worst = 0;
    for (int i = 0; i < B * N * H * D; i++) {
        double e = fabs(o[i] - oref[i]) / (1e-5 + 1e-5 * fabs(oref[i]));
        if (!(e <= 1)) { fprintf(stderr, "uly_attn_fwd: element %d is %g, the reference %g\n", i, o[i], oref[i]); return 1; }
        if (e > worst) worst = e;
    }
    MPI_Init(&argc, &argv);
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    uly_dist *d = NULL;
    if ((rc = uly_dist_create(MPI_COMM_WORLD, &a, &opts, &d)) || (rc = uly_dist_fwd(d, q, k, v, od))) {
        fprintf(stderr, "uly_dist: %s (%s)\n", uly_strerror(rc), uly_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    uly_dist_free(d);
    MPI_Finalize();
    if (memcmp(o, od, sizeof o) != 0) { fprintf(stderr, "uly_dist_fwd on one rank differs from uly_attn_fwd\n"); return 1; }
    printf("ok: uly_attn_fwd within %.2f of its tolerance of the fp64 reference; uly_dist_fwd on 1 rank bitwise equal\n", worst);
    return 0;
}
CEOF
# shellcheck disable=SC2086
if ! $CC $SAN_CFLAGS -o "$W/prog" "$W/prog.c" $flags > "$W/cc.log" 2>&1; then
    echo "FAIL: $CC $SAN_CFLAGS prog.c \$(pkg-config --static --cflags --libs ulysses) does not link:"
    grep -m 8 'undefined\|error' "$W/cc.log" || head -n 8 "$W/cc.log"
    exit 1
fi
if command -v readelf >/dev/null 2>&1; then
    needed=$(readelf -d "$W/prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | tr '\n' ' ')
    case " $needed" in *" libulysses."*) echo "FAIL: the program needs a shared libulysses ($needed)"; exit 1 ;; esac
    echo "linked statically against libulysses.a; needs: $needed"
fi
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 120 "$W/prog" || { echo "FAIL: the program linked through pkg-config --static failed (exit $?)"; exit 1; }
