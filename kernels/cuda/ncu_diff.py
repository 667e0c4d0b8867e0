# ncu_diff.py — two kernels' Nsight Compute source pages compared, SASS instruction by instruction kind: what B (a
# change, or a kernel's fix) executes and stalls on that A (the baseline) does not. Written from session 46's look at
# fa2 against fa2-psum, where it put two thirds of the second row sum's cost at step 5's wgmma waits (barrier stalls
# at WARPGROUP.DEPBAR) and a fifth at issuing its instructions, and showed fa2's descriptor arithmetic (~6 uniform
# instructions per HGMMA).
# Input: `ncu --import R.ncu-rep --page source --csv --print-source sass` of one launch per side (ci/gpu_profile.sh).
# Output (markdown): the totals; the warp-state samples by stall reason; the instructions executed by opcode; and
# where the samples moved, by instruction kind (opcode with its modifiers) and reason. Rows sorted by |B − A|. The
# samples are the page's "# Samples"; those no stall_ column names are "(no column)" (warpgroup_arrive on sm_90). The
# sums are the source page's: its instructions executed read ~0.3% over the details page's (890.2 M against 887.3 M).
# With --details A.txt B.txt (`ncu --import R --page details`, as gpu_profile.sh writes them) it first gives the two
# launches' headline numbers: duration, elapsed cycles, IPC, issue slots busy, registers, occupancy, and the pipe
# Nsight Compute names the busiest (what session 47 read off by hand: the fix's FMNMX made ALU fa2-fixed's busiest).
# A number a page lacks reads "–".
# Run: python3 kernels/cuda/ncu_diff.py A.csv B.csv [--top N] [--details A.txt B.txt]
#   Exit 1 with one line on stderr, and no table, when a file is missing, not such a source page, or several kernels'.
import argparse
import collections
import csv
import re
import sys

PREDICATE = re.compile(r"@!?U?P[T\d]+$")  # "@P0", "@!UP1", "@PT": a guard before the opcode


def number(cell):
    try:
        return int(cell.replace(",", ""))
    except ValueError:
        return 0


def opcode(sass):
    """The instruction's opcode with its modifiers ("WARPGROUP.DEPBAR.LE"), the guard left off ("" if none)."""
    words = sass.split()
    if words and PREDICATE.match(words[0]):
        words = words[1:]
    return words[0].rstrip(";") if words else ""


UNNAMED = "(no column)"  # samples the page counts (# Samples) under no stall_ column: warpgroup_arrive on sm_90


def read(path):
    """(kernel name, {kind: executed}, {reason: samples}, {(kind, reason): samples}, rows left out) of one source page.
    A row's samples that no stall_ column holds (the page has none for some reasons: warpgroup_arrive, 2.6k of fa2's
    163k samples in session 46) go under UNNAMED, so that the reasons add up to the page's total."""
    try:
        rows = list(csv.reader(open(path, newline="", errors="replace")))
    except OSError as e:
        sys.exit(f"ncu_diff.py: cannot read {path}: {e.strerror}")
    except csv.Error as e:
        sys.exit(f"ncu_diff.py: {path} is not CSV: {e}")
    heads = [i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"]]
    if not heads:
        sys.exit(f"ncu_diff.py: {path} is not an Nsight Compute source page (no 'Address','Source' header row; "
                 "want `ncu --import R --page source --csv --print-source sass`)")
    if len(heads) > 1:
        sys.exit(f"ncu_diff.py: {path} holds {len(heads)} kernels' pages: profile one launch (--launch-count 1)")
    head, cols = heads[0], rows[heads[0]]
    for want in ("Instructions Executed", "# Samples"):
        if want not in cols:
            sys.exit(f"ncu_diff.py: {path} has no '{want}' column (profile with --set full)")
    name = next((r[1] for r in rows[:head] if r[:1] == ["Kernel Name"] and len(r) > 1), "?")
    executed, reasons, kind_reasons = collections.Counter(), collections.Counter(), collections.Counter()
    stall_cols = [(i, c[len("stall_"):]) for i, c in enumerate(cols)
                  if c.startswith("stall_") and "Not Issued" not in c]
    src, ex, samples = cols.index("Source"), cols.index("Instructions Executed"), cols.index("# Samples")
    left_out = 0
    for r in rows[head + 1:]:
        if len(r) != len(cols):
            left_out += bool(r)  # (a blank line is no row)
            continue
        kind = opcode(r[src])
        executed[kind] += number(r[ex])
        rest = number(r[samples])
        for i, reason in stall_cols:
            n = number(r[i])
            reasons[reason] += n
            kind_reasons[(kind, reason)] += n
            rest -= n
        reasons[UNNAMED] += rest
        kind_reasons[(kind, UNNAMED)] += rest
    return name, executed, reasons, kind_reasons, left_out


# The details page's headline numbers: (label, metric name as the page prints it), the first line naming each.
HEADLINE = [("duration (ms)", "Duration"), ("elapsed cycles", "Elapsed Cycles"),
            ("IPC (active)", "Executed Ipc Active"), ("issue slots busy (%)", "Issue Slots Busy"),
            ("registers per thread", "Registers Per Thread"), ("achieved occupancy (%)", "Achieved Occupancy")]
# Nsight Compute picks the unit by the size ("us" for a short launch, "Kcycle" where it scales): duration in ms,
# cycles in cycles.
UNITS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3,
         "second": 1e3, "cycle": 1.0, "Kcycle": 1e3, "Mcycle": 1e6, "Gcycle": 1e9}
BUSIEST = re.compile(r"^\s*(?:INF|OPT|WRN)?\s+(\S.*?) is the highest-utilized pipeline \(([\d.]+)%\)")


def details(path):
    """({metric name: value}, "Pipe (n%)" or "–") from a details page; what it lacks is left out."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError as e:
        sys.exit(f"ncu_diff.py: cannot read {path}: {e.strerror}")
    values, busiest = {}, "–"
    for line in lines:
        for _, name in HEADLINE:
            m = re.match(r"\s+" + re.escape(name) + r"\s+(\S+)\s+([\d,.]+)\s*$", line)
            if m and name not in values:
                scale = UNITS.get(m.group(1)) if name in ("Duration", "Elapsed Cycles") else 1.0
                if scale is not None:  # a unit not in UNITS: the number is left out ("–"), not mislabelled
                    values[name] = float(m.group(2).replace(",", "")) * scale
        m = BUSIEST.search(line)
        if m and busiest == "–":
            busiest = f"{m.group(1)} ({m.group(2)}%)"
    return values, busiest


def ratio(x, y):
    """B / A in four decimals, "–" where A is 0 or either is missing."""
    return f"{y / x:.4f}" if x and y is not None else "–"


def headline(side_a, side_b):
    """The headline table of two details() results."""
    (va, pa), (vb, pb) = side_a, side_b
    # Four significant digits below 1,000 (a 4.32 us launch is 0.00432 ms, not 0), whole numbers above.
    cell = lambda v: "–" if v is None else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    print("| (the details pages) | A | B | B / A |\n| --- | --- | --- | --- |")
    for label, name in HEADLINE:
        a, b = va.get(name), vb.get(name)
        print(f"| {label} | {cell(a)} | {cell(b)} | {ratio(a, b)} |")
    print(f"| busiest pipe | {pa} | {pb} | |\n")


def by_base(counter):
    """{opcode without modifiers: count}: HGMMA.64x8x16.F32.BF16 and HGMMA.64x64x16.F32.BF16 are both HGMMA."""
    out = collections.Counter()
    for kind, n in counter.items():
        out[kind.split(".")[0]] += n
    return out


def table(title, head, a, b, top, label=str):
    """Markdown rows of the keys where a and b differ, the largest |b − a| first (top of them; 0: all)."""
    keys = sorted((k for k in set(a) | set(b) if a[k] != b[k]), key=lambda k: (-abs(b[k] - a[k]), str(k)))
    print(f"\n### {title}\n\n| {head} | A | B | B − A |\n| --- | --- | --- | --- |")
    for k in keys[:top or None]:
        print(f"| {label(k)} | {a[k]:,} | {b[k]:,} | {b[k] - a[k]:+,} |")
    if top and len(keys) > top:
        print(f"| ({len(keys) - top} more) | | | |")


def main():
    ap = argparse.ArgumentParser(description="Compare two kernels' Nsight Compute source pages")
    ap.add_argument("a", help="the baseline's source page (CSV)")
    ap.add_argument("b", help="the change's source page (CSV)")
    ap.add_argument("--top", type=int, default=12, help="rows per table (0: all; default 12)")
    ap.add_argument("--details", nargs=2, metavar=("A_TXT", "B_TXT"), help="the two launches' details pages")
    args = ap.parse_args()
    (na, ea, ra, ka, la), (nb, eb, rb, kb, lb) = read(args.a), read(args.b)
    sides = [details(path) for path in args.details] if args.details else None  # read before anything is printed
    ta, tb, sa, sb = sum(ea.values()), sum(eb.values()), sum(ra.values()), sum(rb.values())
    print(f"# ncu_diff: A = {args.a}, B = {args.b}\n\nA: `{na}`\n\nB: `{nb}`\n")
    if sides:
        headline(*sides)
    for side, n in (("A", la), ("B", lb)):
        if n:
            print(f"({n} rows of {side}'s page had another number of cells than its header and are left out.)\n")
    print("| (the source pages' sums) | A | B | B − A | B / A |\n| --- | --- | --- | --- | --- |")
    print(f"| instructions executed | {ta:,} | {tb:,} | {tb - ta:+,} | {ratio(ta, tb)} |")
    print(f"| warp-state samples | {sa:,} | {sb:,} | {sb - sa:+,} | {ratio(sa, sb)} |")
    table("Warp-state samples by stall reason", "reason", ra, rb, args.top)
    table("Instructions executed by opcode", "opcode", by_base(ea), by_base(eb), args.top)
    table("Where the samples moved: instruction kind and stall reason", "instruction, reason", ka, kb, args.top,
          label=lambda k: f"`{k[0]}`, {k[1]}")

if __name__ == "__main__":
    main()
