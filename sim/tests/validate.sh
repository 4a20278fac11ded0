#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# validate.sh -- the validation table as a regression test: every published
# reference point of doc/validation.md must stay within its stated error.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
ULYSSES_SIM="$top_builddir/ulysses-sim" exec sh "$top_srcdir/sim/validate.sh" --check
