#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_outputs.sh -- the output files of ulysses-sim (run --trace, sweep --out
# and --plot) follow the rule of both programs (src/base/base_out.h): an
# output is never an input (--platform, --model) or another output, a bad
# output directory is refused before simulating, a failing run leaves the
# previous files byte-identical and no temporary behind, and the temporary of
# a killed run is removed by the next run (but not one a live run holds).
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0

# refused STATUS "pattern" args...: exit STATUS, one line on stderr matching
# pattern, nothing on stdout (nothing was simulated)
refused() {
    want="$1"; pat="$2"; shift 2
    "$SIM" "$@" > "$tmp/out" 2> "$tmp/err"
    st=$?
    if [ $st -ne "$want" ]; then echo "FAIL: $*: exit $st, expected $want"; sed 's/^/  | /' "$tmp/err"; fail=1; return; fi
    if [ "$(wc -l < "$tmp/err")" -ne 1 ]; then echo "FAIL: $*: message is not one line:"; cat "$tmp/err"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL: $*: '$pat' not in: $(cat "$tmp/err")"; fail=1; return; fi
    if [ -s "$tmp/out" ]; then echo "FAIL: $*: wrote to stdout"; fail=1; return; fi
    echo "ok: $* -> exit $st: $(cat "$tmp/err")"
}

# same FILE COPY: FILE is byte-identical to COPY
same() {
    if cmp -s "$1" "$2"; then echo "ok: $1 unchanged"; else echo "FAIL: $1 was changed"; fail=1; fi
}

# no_tmp DIR: no temporary file left in DIR
no_tmp() {
    if ls "$1"/.*.tmp* > /dev/null 2>&1; then
        echo "FAIL: temporary left in $1: $(ls -a "$1" | grep tmp)"; fail=1
    else
        echo "ok: no temporary left in $1"
    fi
}

cp "$top_srcdir/sim/presets/platforms/dgx-a100-40g.json" "$tmp/plat.json"
cp "$top_srcdir/sim/presets/models/gpt-7b.json" "$tmp/model.json"
cp "$tmp/plat.json" "$tmp/plat.keep"
cp "$tmp/model.json" "$tmp/model.keep"

# ---- an output that is an input: refused, the input byte-identical
refused 2 "--trace $tmp/plat.json is also an input (--platform $tmp/plat.json)" \
    --platform "$tmp/plat.json" --method ulysses --trace "$tmp/plat.json"
same "$tmp/plat.json" "$tmp/plat.keep"
refused 2 "--out $tmp/plat.json is also an input (--platform $tmp/plat.json)" \
    sweep --platform "$tmp/plat.json" --seq 8K --out "$tmp/plat.json"
same "$tmp/plat.json" "$tmp/plat.keep"
refused 2 "--trace $tmp/model.json is also an input (--model $tmp/model.json)" \
    --model "$tmp/model.json" --method ulysses --trace "$tmp/model.json"
same "$tmp/model.json" "$tmp/model.keep"
ln -s plat.json "$tmp/link.svg"
refused 2 "--plot $tmp/link.svg: is a symbolic link" \
    sweep --platform "$tmp/plat.json" --seq 8K --plot "$tmp/link.svg"
same "$tmp/plat.json" "$tmp/plat.keep"
# ---- an output that is a symbolic link (to any file): refused -- a rename
# would replace the link itself (/dev/stdout would become a regular file)
"$SIM" sweep --seq 8K --method ulysses --out "$tmp/prev.csv" || { echo "FAIL: sweep"; fail=1; }
cp "$tmp/prev.csv" "$tmp/prev.keep"
ln -s prev.csv "$tmp/link.csv"
refused 2 "--out $tmp/link.csv: is a symbolic link; outputs are replaced by renaming" \
    sweep --seq 16K --out "$tmp/link.csv"
same "$tmp/prev.csv" "$tmp/prev.keep"
if [ -L "$tmp/link.csv" ]; then echo "ok: the link is still a link"; else echo "FAIL: the link was replaced"; fail=1; fi

# ---- two outputs that are one file: refused, the earlier output byte-identical
"$SIM" sweep --seq 8K,16K --method ulysses --out "$tmp/s.svg" || { echo "FAIL: sweep"; fail=1; }
cp "$tmp/s.svg" "$tmp/s.keep"
refused 2 "--out and --plot name the same file ($tmp/s.svg)" sweep --seq 8K --out "$tmp/s.svg" --plot "$tmp/s.svg"
same "$tmp/s.svg" "$tmp/s.keep"
mkdir "$tmp/d"
refused 2 "--out and --plot name the same file" sweep --seq 8K --out "$tmp/x.svg" --plot "$tmp/d/../x.svg"

# ---- a missing output directory: refused before the sweep (nothing on stdout)
refused 2 "--plot $tmp/nodir/p.svg: directory $tmp/nodir: No such file or directory" \
    sweep --seq 8K:1M --gpus 64,128 --plot "$tmp/nodir/p.svg"
refused 2 "--out $tmp/nodir/s.csv: directory $tmp/nodir: No such file or directory" \
    sweep --seq 8K --out "$tmp/nodir/s.csv"
refused 2 "--trace $tmp/nodir/t.json: directory $tmp/nodir" --method ulysses --trace "$tmp/nodir/t.json"
no_tmp "$tmp"

# ---- a killed run's temporary is removed by the next run; a live run's is not
printf 'killed' > "$tmp/.t.json.tmpKILLED"
"$SIM" --method ulysses --trace "$tmp/t.json" > /dev/null 2> "$tmp/err"
st=$?
if [ $st -eq 0 ] && grep -q "note: --trace $tmp/t.json: removed 1 temporary file left by an interrupted run" "$tmp/err" &&
    [ ! -e "$tmp/.t.json.tmpKILLED" ] && grep -q traceEvents "$tmp/t.json"; then
    echo "ok: a stale temporary is removed (and said so), the trace written"
else
    echo "FAIL: stale temporary: exit $st, $(cat "$tmp/err")"; fail=1
fi
no_tmp "$tmp"
if command -v flock > /dev/null 2>&1; then
    : > "$tmp/.t.json.tmpLIVE01"
    flock "$tmp/.t.json.tmpLIVE01" sleep 30 &
    holder=$!
    i=0   # until the holder has its lock
    while flock -n "$tmp/.t.json.tmpLIVE01" true 2> /dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    "$SIM" --method ulysses --trace "$tmp/t.json" > /dev/null 2> "$tmp/err"
    st=$?
    if [ $st -eq 0 ] && [ -e "$tmp/.t.json.tmpLIVE01" ] && ! grep -q removed "$tmp/err"; then
        echo "ok: a temporary held by a live process is left alone"
    else
        echo "FAIL: live temporary: exit $st, exists: $([ -e "$tmp/.t.json.tmpLIVE01" ] && echo yes || echo no)"; fail=1
    fi
    kill "$holder" 2> /dev/null
    wait "$holder" 2> /dev/null
    rm -f "$tmp/.t.json.tmpLIVE01"
else
    echo "skipped: a live run's temporary (no flock command)"
fi

# ---- a full disk: the run fails (exit 1), the previous files stay, no temporary
mkdir "$tmp/mnt"
if mount -t tmpfs -o size=16k tmpfs "$tmp/mnt" 2> /dev/null; then
    MNT="$tmp/mnt"
    # full OPTION FILE args...: exit 1 with one line naming OPTION FILE and the
    # full disk; the previous FILE byte-identical, no temporary left
    full() {
        opt="$1"; f="$2"; shift 2
        printf 'previous %s' "$opt" > "$f"
        cp "$f" "$tmp/full.keep"
        "$SIM" "$@" > "$tmp/out" 2> "$tmp/err"
        st=$?
        if [ $st -eq 1 ] && grep -q -- "$opt $f: cannot write: No space left on device" "$tmp/err" &&
            [ "$(wc -l < "$tmp/err")" -eq 1 ]; then
            echo "ok: $opt on a full disk: exit 1: $(cat "$tmp/err")"
        else
            echo "FAIL: $opt on a full disk: exit $st: $(cat "$tmp/err")"; fail=1
        fi
        same "$f" "$tmp/full.keep"
        no_tmp "$MNT"
    }
    full --trace "$MNT/t.json" --method ulysses --trace "$MNT/t.json"
    full --out "$MNT/s.csv" sweep --seq 8K:1M --gpus 64,128 --out "$MNT/s.csv"
    umount "$MNT"
    MNT=""
else
    echo "skipped: full-disk cases (cannot mount a tmpfs here)"
fi

# ---- a --trace path too long for its per-method name: refused, never truncated
long="$tmp/$(printf 'a%.0s' $(seq 1 1095)).json"
refused 2 "--trace: the path is longer than" --method ulysses,ring --trace "$long"

exit $fail
