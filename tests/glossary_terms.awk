# SPDX-License-Identifier: Apache-2.0
# tests/glossary_terms.awk: the terms a program's output prints, one per line
# (used by tests/glossary.sh; POSIX awk, runs under mawk).
#
#   awk -v kind=text|json|csv -f glossary_terms.awk OUTPUT
#
# json: every object key, at any depth.  csv: the fields of the first line.
# text: (1) the column headers of every table: the lines (one or more) above
#       a table's first row, cut into fields, and at a single space where
#       that row shows a column boundary (cuthead below);
#       (2) the label of every table row (its first field); (3) the "label"
#       of a "label: ..." line.  A field is what lies between runs of two or
#       more spaces (or a '|'); a row is a line of two or more fields, one of
#       them a value; a header line is one of two or more fields, none a
#       value and no formula (' = ') in it.
# Rules that tell a value or a sentence from a term (the only word list is the
# three articles below):
#   - a value starts with a digit (after '[', '(', '#', '+', '-'), or is an
#     index such as r0, t0-3 (one lower-case letter and digits);
#   - a number inside a term reads N ("fits in 40 GiB" -> "fits in N GiB",
#     phase_0_ms -> phase_N_ms), an index letter+N ("from r1" -> "from rN");
#     NAME=number settings ("N=64") are dropped;
#   - a parenthesis with a space or a '_' inside is a note and is dropped
#     ("(over ranks x repetitions)", "(uly_plan_method_volume)"; "(q,k,v)"
#     stays); a trailing "[unit]" is checked as a term of its own;
#   - a label holding a value or a formula (' = '), starting with an article
#     (a, an, the), more than six words long, or on a line that continues a
#     wrapped sentence (deeper than the indented line before, which ends in a
#     word or a comma, or after such a line) is a sentence, not a term (of a
#     label after two spaces, a '; ' or a '. ', the words after them count);
#   - a header field that repeats one phrase ("to r0 to r1 to r2") is that
#     phrase; a table's upper header lines are never indented deeper than the
#     line below them (a deeper one is the end of a paragraph).

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# number runs -> N, index tokens -> letter N
function numnorm(s,    out, pre, c, p, rest, m) {
    out = ""
    while (match(s, /[0-9]+/)) {
        pre = substr(s, 1, RSTART - 1)
        rest = substr(s, RSTART)
        c = (RSTART > 1) ? substr(s, RSTART - 1, 1) : ""
        p = (RSTART > 2) ? substr(s, RSTART - 2, 1) : ""
        if (c == "" || c !~ /[A-Za-z0-9]/) {
            match(rest, /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?[KMGT%]?/)
            out = out pre "N"; s = substr(rest, RLENGTH + 1)
        } else if (c ~ /[a-z]/ && (p == "" || p !~ /[A-Za-z0-9_]/) &&
                   rest !~ /^[0-9]+[A-Za-z]/) {
            match(rest, /^[0-9]+/)
            out = out pre "N"; s = substr(rest, RLENGTH + 1)
        } else {
            match(rest, /^[0-9]+/)
            out = out pre substr(rest, 1, RLENGTH); s = substr(rest, RLENGTH + 1)
        }
    }
    return out s
}

function isval(f) {
    return f ~ /^[[(#+-]*[0-9]/ || f ~ /^[a-z][0-9]+([^A-Za-z0-9]|$)/
}

function dropnotes(s) {
    while (match(s, /(^| )\([^()]*[ _][^()]*\)/))
        s = substr(s, 1, RSTART - 1) substr(s, RSTART + RLENGTH)
    return s
}

function blanknotes(s,    b) {
    while (match(s, /\([^()]*[ _][^()]*\)/)) {
        b = sprintf("%" RLENGTH "s", "")
        s = substr(s, 1, RSTART - 1) b substr(s, RSTART + RLENGTH)
    }
    return s
}

function indent(s) { match(s, /^ */); return RLENGTH }

function hasvaluetoken(s,    n, t, k) {
    n = split(s, t, /[ \t]+/)
    for (k = 1; k <= n; k++) if (t[k] != "" && isval(t[k])) return 1
    return 0
}

function emit(s,    u, n, w, k, m) {
    s = trim(s)
    gsub(/[A-Za-z_]+=[0-9][^ ]*/, "", s)
    s = trim(dropnotes(s))
    if (match(s, /\[[^] ]*\]$/)) {
        u = substr(s, RSTART); s = trim(substr(s, 1, RSTART - 1))
        print u
    }
    sub(/[:,;]+$/, "", s)
    s = trim(numnorm(s))
    gsub(/  +/, " ", s)
    if (s == "" || s !~ /[A-Za-z]/) return
    if (s ~ /^N[^A-Za-z]/ || s == "N") return
    n = split(s, w, / +/)
    if (n > 6) return
    # one phrase repeated ("to rN to rN to rN") is that phrase
    for (k = 1; k < n; k++) {
        if (n % k) continue
        for (m = k + 1; m <= n && w[m] == w[m - k]; m++) ;
        if (m > n) { s = w[1]; for (m = 2; m <= k; m++) s = s " " w[m]; break }
    }
    print s
}

# fields of line i into F[1..NF_], with their end columns E[]
function fields(line,    s, pos, n, m) {
    n = 0; s = line; pos = 0
    while (match(s, /[^ ]+( [^ ]+)*/)) {
        n++; F[n] = substr(s, RSTART, RLENGTH); E[n] = pos + RSTART + RLENGTH - 1
        pos += RSTART + RLENGTH - 1; s = substr(s, RSTART + RLENGTH)
        # a single space inside a field is kept: the match above stops at two
    }
    return n
}

function isrow(i,    n, k) {
    n = fields(L[i]); if (n < 2) return 0
    for (k = 1; k <= n; k++) if (isval(F[k])) return 1
    return 0
}

function ishead(i,    n, k, s) {
    s = dropnotes(L[i])
    if (s ~ / = /) return 0
    n = fields(s); if (n < 2) return 0
    for (k = 1; k <= n; k++) if (isval(F[k])) return 0
    return 1
}

# the header line h cut into its fields (runs of two or more spaces apart),
# and a field also at a single space (column c) where every row of the table
# (lines i, i+1, ... while they are rows) shows a column boundary (boundary
# below); a row whose numbers overflow their columns shows none, and the
# field stays whole ("comm ms exposed ms" over two numbers, "rank method"
# over "1    ring")
function cuthead(h, i,    n, k, f, st, m, c, from, j, ok) {
    h = blanknotes(h)
    n = fields(h)
    for (k = 1; k <= n; k++) { HF[k] = F[k]; HE[k] = E[k] }
    for (k = 1; k <= n; k++) {
        f = HF[k]; st = HE[k] - length(f); from = 1
        for (m = 1; m <= length(f); m++) {
            if (substr(f, m + 1, 1) != " ") continue
            c = st + m + 1
            ok = 1
            for (j = i; ok && j <= nl && isrow(j); j++) ok = boundary(L[j], c, st + from)
            if (ok) { emit(substr(f, from, m - from + 1)); from = m + 2 }
        }
        emit(substr(f, from))
    }
}

# row line r has a column boundary at column c, with something under the
# header part that starts at column a: a row word that starts at or after a
# ends at c-1 (right-aligned) with two spaces after it, or at c-2 (one column
# off) starting after a; or a row word starts at c+1 (left-aligned) with two
# spaces before it
function boundary(r, c, a,    s, pos, end_, beg) {
    s = r; pos = 0
    while (match(s, /[^ ]+/)) {
        beg[pos + RSTART] = 1; end_[pos + RSTART + RLENGTH - 1] = pos + RSTART
        pos += RSTART + RLENGTH - 1; s = substr(s, RSTART + RLENGTH)
    }
    if (substr(r, c, 1) != " " || substr(r, a, c - a) !~ /[^ ]/) return 0
    return (((c - 1) in end_) && end_[c - 1] >= a && substr(r, c + 1, 1) == " ") ||
           (((c - 2) in end_) && end_[c - 2] > a && substr(r, c - 1, 1) == " " && substr(r, c + 1, 1) == " ") ||
           (((c + 1) in beg) && substr(r, c - 1, 1) == " ")
}

function json(s,    i, n, c, instr, esc, buf, j) {
    n = length(s); instr = 0
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (instr) {
            if (esc) { esc = 0; buf = buf c; continue }
            if (c == "\\") { esc = 1; continue }
            if (c == "\"") {
                instr = 0
                for (j = i + 1; j <= n && substr(s, j, 1) ~ /[ \t\n\r]/; j++) ;
                if (substr(s, j, 1) == ":") print numnorm(buf)
                continue
            }
            buf = buf c
        } else if (c == "\"") { instr = 1; buf = "" }
    }
}

kind != "" { L[++nl] = $0 }

END {
    if (kind == "") nl = 0
    if (kind == "json") {
        all = ""; for (i = 1; i <= nl; i++) all = all L[i] "\n"
        json(all); exit 0
    }
    if (kind == "csv") {
        n = split(L[1], t, ","); for (k = 1; k <= n; k++) emit(t[k]); exit 0
    }
    if (kind != "text") nl = 0
    for (i = 1; i <= nl; i++) { gsub(/\|/, " ", L[i]); gsub(/\t/, " ", L[i]) }
    # cont[i]: line i continues a wrapped sentence: the indented line before
    # ends in a word or a comma, and line i is deeper or that line a continuation too
    for (i = 2; i <= nl; i++)
        cont[i] = indent(L[i - 1]) > 0 && L[i - 1] ~ /[A-Za-z,]$/ && (indent(L[i]) > indent(L[i - 1]) || cont[i - 1])
    for (i = 1; i <= nl; i++) {
        if (isrow(i)) {
            if (!isval(F[1])) emit(F[1])
            if (i > 1 && !isrow(i - 1))
                for (j = i - 1; j >= 1 && ishead(j); j--) {
                    if (j < i - 1 && indent(L[j]) > indent(L[j + 1])) break
                    cuthead(L[j], i)
                }
        }
        s = L[i]
        if (match(s, /: |:$/)) {
            lab = substr(s, 1, RSTART - 1)
            gsub(/[A-Za-z_]+=[0-9][^ ]*/, "", lab)
            if (hasvaluetoken(lab) || lab ~ / = /) lab = ""
            if (match(lab, /.*(  +|; |\. )/)) lab = substr(lab, RSTART + RLENGTH)
            if (lab ~ /\([^)]*$/ || lab ~ /^ *(a|an|the) /) lab = ""
            # a sentence wrapped onto this line
            if (cont[i]) lab = ""
            emit(lab)
        }
    }
}
