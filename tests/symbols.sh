#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# libulysses exports only uly_-prefixed symbols of the public headers
# (internal helpers are uly_-prefixed too, for static linking, but hidden).
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
# and every one of them is public API (declared in include/) or a test hook
: "${top_srcdir:=.}"
for sym in $all; do
    case "$sym" in _*|uly_test_*) continue ;; esac
    grep -q "\b$sym(" "$top_srcdir"/include/*.h || { echo "FAIL: $sym is exported but not declared in include/"; exit 1; }
done
echo "ok: $(printf '%s\n' "$all" | grep -c '^uly_') exported symbols, all uly_-prefixed and declared in include/"
