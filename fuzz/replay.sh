#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Replay every seed corpus through its harness's standalone replayer
# (fuzz/replay_<name>, built by make check from fuzz/fuzz_<name>.c).
# Fails if a replayer crashes, trips a sanitizer or exits non-zero.
# Environment: top_srcdir, top_builddir (set by make check).
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-.}
fail=0
for name in npy sim_json args sim_run agree; do
    replayer="$top_builddir/fuzz/replay_$name"
    corpus="$top_srcdir/fuzz/corpus/$name"
    if [ ! -x "$replayer" ]; then
        echo "FAIL: $replayer not built" >&2
        fail=1
        continue
    fi
    n=0
    for f in "$corpus"/*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        # One process per file, so that a failure names its input.
        if ! "$replayer" "$f" > replay_out.$$ 2>&1; then
            echo "FAIL: $name: $f" >&2
            cat replay_out.$$ >&2
            fail=1
        fi
    done
    rm -f replay_out.$$
    if [ "$n" -eq 0 ]; then
        echo "FAIL: $name: no corpus files in $corpus" >&2
        fail=1
    else
        echo "$name: replayed $n files"
    fi
done
exit $fail
