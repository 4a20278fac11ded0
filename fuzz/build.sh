#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the fuzz harnesses from the sources (no configure needed).
#
#   fuzz/build.sh [fuzzer] [HARNESS...]   -> fuzz/fuzz_<h>         libFuzzer + ASan + UBSan (clang)
#   fuzz/build.sh replay [HARNESS...]     -> fuzz/fuzz_<h>_replay  standalone replayer (ASan + UBSan)
#
# HARNESS is npy (src/npy.c), sim_json (the simulator's platform/model JSON
# loaders), args (the command-line parsers), sim_run (the whole simulation:
# platform + model + command line) or agree (the drivers' option agreement);
# default: all five.
# CC overrides the compiler (default clang); the sim_json and args harnesses
# need jansson (pkg-config jansson, else -ljansson).  Run from anywhere.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
CC=${CC:-clang}
flags="-std=c11 -g -O1 -Wall -Wextra -Wno-unused-parameter -I$top/include -I$top/src -fno-omit-frame-pointer"
san="address,undefined"
jansson_cflags=$(pkg-config --cflags jansson 2>/dev/null || true)
jansson_libs=$(pkg-config --libs jansson 2>/dev/null || echo -ljansson)

# libusim and the plan layer it uses (for sim_json and args).
usim="$(for f in "$top"/sim/*.c; do printf '%s ' "$f"; done)$(for f in "$top"/src/plan*.c; do printf '%s ' "$f"; done)$top/src/error.c $top/src/base/base.c"

mode=fuzzer
case "${1:-}" in
fuzzer|replay) mode=$1; shift ;;
-*|help) echo "usage: $0 [fuzzer|replay] [npy|sim_json|args|sim_run|agree]..." >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- npy sim_json args sim_run agree

for h in "$@"; do
    case $h in
    npy)
        src="$top/src/npy.c $top/src/error.c $top/src/base/base.c $here/fuzz_npy.c"
        extra='' libs='' ;;
    sim_json)
        src="$usim $here/fuzz_sim_json.c"   # the loaders parse algorithm names (tuner.c)
        extra="-I$top/sim $jansson_cflags" libs="$jansson_libs -lm" ;;
    args)
        src="$top/src/cli/args.c $top/sim/cli/opts.c $usim $here/fuzz_args.c"
        extra="-I$top/sim -I$top/sim/cli -I$top/src/cli $jansson_cflags" libs="$jansson_libs -lm" ;;
    sim_run)
        src="$top/sim/cli/opts.c $usim $here/fuzz_sim_run.c"
        extra="-I$top/sim -I$top/sim/cli $jansson_cflags" libs="$jansson_libs -lm" ;;
    agree)
        src="$top/src/cli/agree_table.c $top/src/base/base.c $here/fuzz_agree.c"
        extra="-I$top/src/cli" libs='-lm' ;;
    *)
        echo "$0: unknown harness '$h' (npy, sim_json, args, sim_run or agree)" >&2
        exit 2 ;;
    esac
    if [ "$mode" = fuzzer ]; then
        out="$here/fuzz_$h"
        # shellcheck disable=SC2086
        $CC $flags $extra -fsanitize=fuzzer,$san -fno-sanitize-recover=all $src $libs -o "$out"
    else
        out="$here/fuzz_${h}_replay"
        # shellcheck disable=SC2086
        $CC $flags $extra -DULY_FUZZ_STANDALONE -fsanitize=$san -fno-sanitize-recover=all $src $libs -o "$out"
    fi
    echo "built $out"
done
