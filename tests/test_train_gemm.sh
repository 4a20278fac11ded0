#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The merged GEMMs' property (tests/test_train_gemm.c) under the OpenBLAS
# core this run selects and, unless OPENBLAS_CORETYPE is already set (then
# only that one), under each x86-64 core type this CPU can run.
set -e
bin="${top_builddir:-.}/tests/test_train_gemm"
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    exec $bin
fi
$bin
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
for core in Sandybridge Haswell SkylakeX; do
    case $core in
    Sandybridge) need=avx ;;
    Haswell) need=avx2 ;;
    SkylakeX) need=avx512f ;;
    esac
    case " $flags " in
    *" $need "*) OPENBLAS_CORETYPE=$core $bin ;;
    *) echo "test_train_gemm: $core skipped (no $need)" ;;
    esac
done
