# SPDX-License-Identifier: Apache-2.0
"""The planted-bug suite (tests/spref/): real sequence-parallel bugs of the
field planted in a one-process NumPy simulation of each method's ranks
(sp.py, bugs.py), dumped per rank as a framework would
(DIR/rank{r}.safetensors through ulysses.save_dump, in bshd, bhsd or thd).

Asserts, for every correct simulation (ulysses, ring, zigzag, allgather;
masks, documents, GQA, uneven N, B = 2): the checker passes it; for every
planted bug: the checker fails it with the expected defect class and a
localisation naming the ranks / tokens / heads where it was planted.  Each
is checked in-process (ulysses.check over the arrays, and over the dump
files read back with ulysses.load_dump) and, where the driver has the
command, by `ulysses check DIR` (exit 0 for the correct ones, 1 for the
bugs, the same defect in --json).  The labels rolled per shard are checked
by `ulysses check --data DIR`.  Prints the table: defect, report, expected
class, the checker's verdict and summary."""

import atexit
import json
import os
import shutil
import tempfile
import time

import ulysses
import sp
import bugs
from util import Failures, run

F = Failures()
W = tempfile.mkdtemp(prefix="uly-spref-")
atexit.register(shutil.rmtree, W, True)
T0 = time.time()

code, out, err = run(["check", "--help"], check=False)
HAVE_CLI = code == 0
if not HAVE_CLI:
    print("ulysses check is not in this driver (%s): the CLI half of the suite is skipped"
          % (err.strip().splitlines() or ["?"])[0])


def cli(case, directory):
    code, out, err = run(["check", directory] + case.cli_args() + ["--json"], check=False)
    try:
        rep = json.loads(out)
    except ValueError:
        rep = {}
    return code, rep, err


rows = []
for case in bugs.correct_cases() + bugs.cases():
    ranks = case.build()
    want_pass = case.expect == "none"
    rep = ulysses.check(case.method, sp.shards_of(ranks, case.layout, case.names, case.tokens), **case.check_args())
    text = rep["where"] + " | " + rep["summary"]
    ok = rep["defect"] == case.expect and (rep["verdict"] == "pass") == want_pass
    F.ok(ok, "%s: the checker says %s (%s), expected %s" % (case.name, rep["verdict"], rep["defect"], case.expect))
    for words in case.where:
        F.ok(words in text, "%s: the localisation lacks %r: %s" % (case.name, words, text))
    # the same through the files a framework writes
    d = os.path.join(W, case.name.replace(" ", "_").replace("/", "_").replace(",", ""))
    sp.dump(d, ranks, case.layout, case.names, case.tokens)
    loaded = [ulysses.load_dump(d, r)[0] for r in range(case.P)]
    rep2 = ulysses.check(case.method, loaded, **case.check_args())
    F.ok(rep2["defect"] == rep["defect"] and rep2["summary"] == rep["summary"],
         "%s: the dump files read back give %s, the arrays %s" % (case.name, rep2["defect"], rep["defect"]))
    cli_verdict = "-"
    if HAVE_CLI:
        code, crep, err = cli(case, d)
        F.ok(code == (0 if want_pass else 1), "%s: ulysses check exit %d, expected %d: %s"
             % (case.name, code, 0 if want_pass else 1, err.strip()))
        F.ok(crep.get("defect") == case.expect, "%s: ulysses check --json names %s" % (case.name, crep.get("defect")))
        F.ok(crep.get("summary") == rep["summary"] and crep.get("where") == rep["where"],
             "%s: ulysses check and ulysses.check report differently: %r, %r" % (case.name, crep.get("summary"),
                                                                             rep["summary"]))
        cli_verdict = "exit %d %s" % (code, crep.get("defect"))
    rows.append((case.name, case.report, case.expect, "%s %s" % (rep["verdict"], rep["defect"]), cli_verdict,
                 rep["summary"]))

# the data pipeline: labels rolled per shard (checked by ulysses check --data)
for roll in (False, True):
    name = "labels rolled per shard" if roll else "data pipeline (correct)"
    report = "Megatron-LM #673, NVIDIA-NeMo/Automodel PR #3544" if roll else "-"
    expect = "rolled-per-shard" if roll else "none"
    d = os.path.join(W, "data_roll" if roll else "data_ok")
    docs = [0, 40, 100, 256]
    for r, t in enumerate(bugs.data_pipeline(4, 256, docs, roll_per_shard=roll)):
        ulysses.save_dump(d, r, **t)
    verdict = summary = "-"
    code, out, err = run(["check", "--data", d, "--method", "zigzag", "--doc-lens",
                          ",".join(str(b - a) for a, b in zip(docs[:-1], docs[1:])), "--json"], check=False) \
        if HAVE_CLI else (2, "", "")
    if HAVE_CLI and code == 2 and "not built" in err:
        print("%s: %s: skipped" % (name, err.strip()))
    elif HAVE_CLI:
        try:
            drep = json.loads(out)
        except ValueError:
            drep = {}
        defects = [c.get("defect") for c in drep.get("checks", []) if c.get("verdict") == "defect"]
        F.ok(code == (1 if roll else 0), "%s: ulysses check --data exit %d: %s" % (name, code, err.strip()))
        F.ok((expect in defects) if roll else not defects, "%s: ulysses check --data names %s" % (name, defects))
        lab = [c for c in drep.get("checks", []) if c.get("check") == "labels"]
        verdict = "exit %d %s" % (code, ",".join(str(x) for x in defects) or "none")
        summary = lab[0].get("message", "") if lab else ""
    rows.append((name, report, expect, "-", verdict, summary))

w = max(len(r[0]) for r in rows)
print("\n%-*s  %-22s  %-24s  %-30s  %s" % (w, "case", "expected class", "ulysses.check", "ulysses check (CLI)", "summary"))
for name, report, expect, verdict, cv, summary in rows:
    print("%-*s  %-22s  %-24s  %-30s  %s" % (w, name, expect, verdict, cv, summary))
print("\nreports:")
for name, report, *_ in rows:
    if report != "-":
        print("  %-*s  %s" % (w, name, report))
print("%.1f s" % (time.time() - T0))
F.exit()
