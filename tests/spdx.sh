#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file of the project (C, headers, shell, Python, awk, the
# build files) names its license in its first two lines (after a #! line):
# SPDX-License-Identifier: Apache-2.0, the license of LICENSE.  Needs a git
# checkout (the list of files is git's); skipped in a tarball.
set -u
: "${top_srcdir:=.}"
command -v git >/dev/null 2>&1 || { echo "git not installed: skipped"; exit 77; }
git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
grep -q "Apache License" "$top_srcdir/LICENSE" && grep -q "Version 2.0, January 2004" "$top_srcdir/LICENSE" ||
    { echo "FAIL: LICENSE is not the Apache License 2.0"; exit 1; }
n=0 fails=0
list=$(git -C "$top_srcdir" ls-files -- '*.c' '*.h' '*.sh' '*.py' '*.mk' '*.am' '*.m4' '*.awk' '*.toml' '*.supp' configure.ac |
    grep -v '^fuzz/corpus/' | grep -v '^sim/tests/data/')
for f in $list; do
    n=$((n + 1))
    head -n 2 "$top_srcdir/$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' ||
        { echo "FAIL: $f has no SPDX-License-Identifier: Apache-2.0 line at its top"; fails=$((fails + 1)); }
done
[ "$n" -gt 100 ] || { echo "FAIL: only $n source files listed"; exit 1; }
echo "spdx: $n source files, $fails without the license line"
[ "$fails" -eq 0 ]
