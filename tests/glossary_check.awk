# SPDX-License-Identifier: Apache-2.0
# tests/glossary_check.awk: which terms doc/glossary.md does not define
# (used by tests/glossary.sh; POSIX awk).
#
#   awk -f glossary_terms.awk -f glossary_check.awk doc/glossary.md TERMS
#
# A term is defined when it occurs, whole (not inside a longer word), in a
# **bold** or `code` span of the glossary (markup inside a bold span ignored);
# numbers in the glossary read N as they do in the terms (glossary_terms.awk).
# A term of several words is also defined when it splits at spaces into
# defined terms: a header whose rows' numbers overflowed their columns stays
# whole ("imb. comm imb. exp.").
# Prints "TERM" for every term not defined, then "checked COUNT".
function spans(line,    s, m) {
    s = line
    while (match(s, /\*\*[^*]+\*\*/)) {
        m = substr(s, RSTART + 2, RLENGTH - 4); s = substr(s, RSTART + RLENGTH)
        gsub(/`/, "", m); SP[++ns] = numnorm(m)
    }
    s = line
    while (match(s, /`[^`]+`/)) {
        m = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH)
        SP[++ns] = numnorm(m)
    }
}
function word(c) { return c ~ /[A-Za-z0-9_]/ }
function defined(t,    k, s, p, off, b, a) {
    for (k = 1; k <= ns; k++) {
        s = SP[k]; off = 0
        while ((p = index(s, t)) > 0) {
            b = (off + p > 1) ? substr(SP[k], off + p - 1, 1) : ""
            a = substr(SP[k], off + p + length(t), 1)
            if (!(word(substr(t, 1, 1)) && word(b)) && !(word(substr(t, length(t), 1)) && word(a)))
                return 1
            off += p; s = substr(SP[k], off + 1)
        }
    }
    return 0
}
# t split at its spaces into two or more defined terms (a table header the
# extractor left whole, its rows' numbers overflowing their columns)
function segmented(t,    w, nw, ok, i, j, p, k) {
    nw = split(t, w, / /)
    if (nw < 2) return 0
    ok[0] = 1
    for (j = 1; j <= nw; j++) {
        ok[j] = 0
        for (i = 0; i < j && !ok[j]; i++) {
            if (!ok[i] || (i == 0 && j == nw)) continue
            p = w[i + 1]; for (k = i + 2; k <= j; k++) p = p " " w[k]
            ok[j] = defined(p)
        }
    }
    return ok[nw]
}
FNR == NR { spans($0); next }
$0 != "" && !($0 in seen) { seen[$0] = 1; n++; if (!defined($0) && !segmented($0)) print }
END { print "checked " n + 0 }
