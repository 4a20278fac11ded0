#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# symbols.sh -- libusim defines only usim_-prefixed global symbols (the plan
# layer it links, uly_*, is checked by its own tests).
set -u
: "${top_builddir:=../..}"
lib="$top_builddir/sim/.libs/libusim.a"
command -v nm > /dev/null 2>&1 || { echo "nm not found: skipped"; exit 77; }
[ -f "$lib" ] || { echo "$lib not found: skipped"; exit 77; }
# (AddressSanitizer adds __odr_asan.NAME beside every global variable NAME:
# instrumentation, not a symbol of ours)
bad=$(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^usim_' | grep -v '^uly_' |
      grep -v '^__odr_asan\.')
if [ -n "$bad" ]; then
    echo "FAIL: symbols without the usim_ prefix:"
    echo "$bad"
    exit 1
fi
echo "ok: every global symbol of libusim is usim_-prefixed"
exit 0
