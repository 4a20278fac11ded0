#!/bin/sh
# Build the .npy fuzzer from the sources (no configure needed).
#
#   fuzz/build.sh            -> fuzz/fuzz_npy       libFuzzer + ASan + UBSan (clang)
#   fuzz/build.sh replay     -> fuzz/fuzz_npy_replay standalone replayer (ASan + UBSan)
#
# CC overrides the compiler (default clang).  Run from anywhere.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
CC=${CC:-clang}
src="$top/src/npy.c $top/src/error.c $here/fuzz_npy.c"
flags="-std=c11 -g -O1 -Wall -Wextra -I$top/include -I$top/src -fno-omit-frame-pointer"
san="address,undefined"

case "${1:-fuzzer}" in
fuzzer)
    # shellcheck disable=SC2086
    $CC $flags -fsanitize=fuzzer,$san -fno-sanitize-recover=all $src -o "$here/fuzz_npy"
    echo "built $here/fuzz_npy"
    ;;
replay)
    # shellcheck disable=SC2086
    $CC $flags -DULY_FUZZ_STANDALONE -fsanitize=$san -fno-sanitize-recover=all $src -o "$here/fuzz_npy_replay"
    echo "built $here/fuzz_npy_replay"
    ;;
*)
    echo "usage: $0 [fuzzer|replay]" >&2
    exit 2
    ;;
esac
