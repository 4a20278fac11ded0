# SPDX-License-Identifier: Apache-2.0
"""Compare what the `ulysses explain --html` page displayed (the DOM Chromium
dumped after the page's #walk moved the step slider through every step) with
`ulysses explain --json`: every number of the holder table, the highlighted
grid cells, the grid, the send matrices, the volume table, the layout blocks
and the closed form.  Usage: explain_html_check.py DOM.html DOC.json NAME.
Prints one line per disagreement and exits 1 if there is any."""
import html
import json
import re
import sys


def seg_text(segs):
    if not segs:
        return "-"
    return ",".join(str(b) if c == 1 else "%d-%d" % (b, b + c - 1) for b, c in segs)


def main():
    dom_path, doc_path, name = sys.argv[1:4]
    doc = json.load(open(doc_path))
    m = re.search(r'<pre id="walk">(.*?)</pre>', open(dom_path).read(), re.S)
    bad = []

    def fail(msg):
        bad.append("FAIL: %s: %s" % (name, msg))

    if not m or not m.group(1).strip():
        print("FAIL: %s: the page wrote no #walk readout (its script failed?)" % name)
        return 1
    lines = html.unescape(m.group(1)).splitlines()
    ring = doc["problem"]["method"] in ("ring", "zigzag", "usp")
    grid = doc["grid"]

    # the slider walk: per step, the holder table and the highlighted cells
    steps, cur = [], None
    for ln in lines:
        if ln.startswith("step "):
            cur = {"step": ln[5:], "hold": [], "hl": None}
            steps.append(cur)
        elif ln.startswith("hold ") and cur is not None:
            cur["hold"].append(ln[5:].split("|"))
        elif ln.startswith("hl ") and cur is not None:
            cur["hl"] = set(x for x in ln[3:].split(" ") if x)
    if len(steps) != len(doc["steps"]):
        fail("the walk showed %d steps, the JSON has %d" % (len(steps), len(doc["steps"])))
    for st, js in zip(steps, doc["steps"]):
        t = js["step"]
        if st["step"] != str(t):
            fail("step shown as %s, expected %d" % (st["step"], t))
        if len(st["hold"]) != len(js["ranks"]):
            fail("step %d: %d table rows for %d ranks" % (t, len(st["hold"]), len(js["ranks"])))
        want_hl = set()
        for row, r in zip(st["hold"], js["ranks"]):
            cells = " ".join("%d,%d" % (q, k) for q, k in r["cells"]) or "-"
            want = ["r%d" % r["rank"]]
            if ring:
                want += [str(r["ring_pos"]), "none" if r["holds"] is None else str(r["holds"]),
                         seg_text(r["kv_segments"])]
            want += [cells, str(r["work"])]
            if row != want:
                fail("step %d rank %d: shown %s, JSON %s" % (t, r["rank"], row, want))
            want_hl |= set("%d,%d" % (q, k) for q, k in r["cells"])
        if not ring:
            want_hl = set()
        if st["hl"] != want_hl:
            fail("step %d: highlighted %s, JSON cells %s" % (t, sorted(st["hl"] or []), sorted(want_hl)))

    # the volume table
    head = [ln[8:].split("|") for ln in lines if ln.startswith("volhead ")]
    vols = [ln[4:].split("|") for ln in lines if ln.startswith("vol ")]
    calls = [c["call"] for c in doc["volumes"][0]["calls"]] if doc["volumes"] else []
    want_head = ["rank"] + [x for c in calls for x in (c + " sent", c + " recv")] + ["forward", "backward"]
    if head != [want_head]:
        fail("volume table header %s, expected %s" % (head, want_head))
    if len(vols) != len(doc["volumes"]):
        fail("volume table has %d rows for %d ranks" % (len(vols), len(doc["volumes"])))
    for row, v in zip(vols, doc["volumes"]):
        want = ["r%d" % v["rank"]] + [str(x) for c in v["calls"] for x in (c["sent"], c["recv"])] + \
            [str(v["forward"]), str(v["backward"])]
        if row != want:
            fail("volumes of r%d: shown %s, JSON %s" % (v["rank"], row, want))

    # the grid: every cell's step number (or masked) and the ranks colouring it
    cells = {}
    for ln in lines:
        if ln.startswith("cell "):
            f = ln.split(" ")
            cells[(int(f[1]), int(f[2]))] = (f[3], f[4] if len(f) > 4 else "")
    nb = grid["blocks"]
    if len(cells) != nb * nb:
        fail("the grid shows %d cells, the JSON has %d x %d" % (len(cells), nb, nb))
    for q in range(nb):
        for k in range(nb):
            c = grid["cells"][q][k]
            if c["group"] is None:
                want = ("masked", "")
            else:
                g = grid["groups"][c["group"]]
                want = (str(c["step"]), ",".join(str(r) for r, h in zip(g["ranks"], g["heads"]) if h))
            if cells.get((q, k)) != want:
                fail("grid cell %d,%d: shown %s, JSON %s" % (q, k, cells.get((q, k)), want))

    # the send matrices
    mats = {}
    for ln in lines:
        if ln.startswith("mat "):
            _, i, row = ln.split(" ", 2)
            mats.setdefault(int(i), []).append(row.split("|"))
    if len(mats) != len(doc["matrices"]):
        fail("%d matrices shown, %d in the JSON" % (len(mats), len(doc["matrices"])))
    for i, mj in enumerate(doc["matrices"]):
        want = [["from r%d" % r] + [("[%d]" if s == r else "%d") % v for s, v in enumerate(row)]
                for r, row in enumerate(mj["elements"])]
        if mats.get(i) != want:
            fail("matrix %d (%s) differs: shown %s" % (i, mj["title"], mats.get(i)))

    # the layout panels: every block
    blks = {}
    for ln in lines:
        if ln.startswith("blk "):
            f = ln.split(" ")
            blks.setdefault(int(f[1]), []).append([int(x) for x in f[2:]])
    for i, p in enumerate(doc["panels"]):
        want = [[b["rank"], b["src"], b["tok_begin"], b["tok_count"], b["head_begin"], b["head_count"]]
                for b in p["blocks"]]
        if blks.get(i, []) != want:
            fail("panel %d (%s): %d blocks shown, %d in the JSON or different" %
                 (i, p["title"], len(blks.get(i, [])), len(want)))

    # the closed form
    closed = [ln for ln in lines if ln.startswith("closed ")]
    cf = doc["closed_form"]
    if not closed or (" = %s bytes" % cf["bytes"]) not in closed[0] or cf["formula"] not in closed[0]:
        fail("closed form shown as %s, JSON %s" % (closed, cf))

    for b in bad:
        print(b)
    n = sum(len(st["hold"]) for st in steps) + len(vols) + len(cells) + sum(len(v) for v in mats.values()) + \
        sum(len(v) for v in blks.values())
    print("%s: %d steps, %d rows and cells compared, %d disagreements" % (name, len(steps), n, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
