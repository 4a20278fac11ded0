#!/bin/sh
# libulysses exports only uly_-prefixed symbols.
set -u
: "${top_builddir:=.}"
lib="$top_builddir/src/.libs/libulysses.so"
[ -f "$lib" ] || { echo "no shared library at $lib: skipped"; exit 77; }
all=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
[ -n "$all" ] || { echo "FAIL: no exported symbols found"; exit 1; }
bad=$(printf '%s\n' "$all" | grep -v '^uly_' | grep -v '^_' )
if [ -n "$bad" ]; then
    echo "FAIL: symbols without the uly_ prefix:"; printf '%s\n' "$bad"; exit 1
fi
echo "ok: $(printf '%s\n' "$all" | grep -c '^uly_') exported symbols, all uly_-prefixed"
