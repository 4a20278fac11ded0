#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs one Python test (make check's PY_LOG_COMPILER) against this build
# tree: the package from $top_builddir/python, the library it records, the
# built ulysses binary.  In a sanitizer build python loads the ASan runtime
# first (LD_PRELOAD) to load the instrumented libulysses.so; leak detection is
# off for python itself (its own allocations live to exit), and the programs
# the test starts get the environment they had (ULY_CHILD_*).
# Exit 77 (skip) without a python3 with numpy or without libulysses.
: "${top_builddir:?}" "${top_srcdir:?}"
if [ -z "$ULY_PYTHON" ] || [ "$ULY_PYTHON" = : ]; then
    echo "skip: configure found no python3 that imports numpy (Debian: apt-get install python3-numpy)"
    exit 77
fi
lib="$top_builddir/src/.libs/libulysses.so"
if [ ! -f "$lib" ]; then
    echo "skip: $lib is not built (configured --without-mpi)"
    exit 77
fi
ULY_CHILD_LD_PRELOAD="${LD_PRELOAD-}"
ULY_CHILD_ASAN_OPTIONS="${ASAN_OPTIONS-}"
ULY_CHILD_LSAN_OPTIONS="${LSAN_OPTIONS-}"
export ULY_CHILD_LD_PRELOAD ULY_CHILD_ASAN_OPTIONS ULY_CHILD_LSAN_OPTIONS
case "${ULY_SAN_CFLAGS-}" in
*address*)
    if [ -z "$ULY_SAN_PRELOAD" ] || [ ! -f "$ULY_SAN_PRELOAD" ]; then
        echo "skip: sanitizer build, but the compiler gave no libasan.so to preload into python"
        exit 77
    fi
    LD_PRELOAD="$ULY_SAN_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
    # python allocates all the time: the suite's slow-unwinding leak options
    # (LSAN_OPTIONS) stay with the programs it starts
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:fast_unwind_on_malloc=1"
    unset LSAN_OPTIONS
    export LD_PRELOAD ASAN_OPTIONS
    ;;
esac
PYTHONPATH="$top_builddir/python:$top_srcdir/python/tests:$top_srcdir/tests/spref${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
ULYSSES_BIN="$top_builddir/ulysses"
export PYTHONPATH PYTHONDONTWRITEBYTECODE ULYSSES_BIN
unset ULYSSES_LIBRARY
exec "$ULY_PYTHON" "$@"
