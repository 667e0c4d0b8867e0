# bench_ab.py — two builds of bench_attention compared from their logs (A: the baseline build, B: a change), run
# alternately on one warm card by ci/bench_ab.sh. Two tables:
# - the paired fix overheads (bench_attention's "ovh" rows: each binary times its fix against its own base in
#   interleaved pairs, so the card's drift cancels within a run): per row and pair, each run's median for A and for
#   B, the median of those, and B − A in points. This is the comparison to trust: the same binary's median moves by
#   up to ~1.5 points between calls (TENSOR_CORES.md), less between runs of one call.
# - the TFLOP/s of each kernel per row (best of 5 iterations, unpaired): the median over runs for A and B, and B / A.
#   cuDNN's rows (bench_attention's second table, where the filter selects them) come last in each row: the vendor
#   kernel, which a change to ours leaves alone, so its B / A is the card's drift between the two sides' runs, the
#   scale for the other ratios (session 46's descriptor change: fa2 1.051 at d128 full, cuDNN 1.000).
# With --filter F (bench_ab.sh passes its own): a filter that asks for paired rows ("ovh") but met none gets a line
# saying how they are named: by the base, ovh/fwd/fa2/... for fa2 → fa2-fixed (session 47's 'ovh/fwd/fa2-fixed'
# matched nothing and cost a GPU call), except ovh/.../fa2-psum/... for fa2 → fa2-psum.
# Run: python3 kernels/cuda/bench_ab.py --a A1.log [A2.log ...] --b B1.log [B2.log ...] [--filter F]
#   Exit 1 with one line on stderr, and no table, when either side's logs hold no row of either table.
import argparse
import re
import statistics
import sys

from bench_table import ROW  # the summary row's "fwd d128 full   seq4096" (this folder's bench_table.py)

PAIRS = ["fa2 → fa2-fixed", "paper → paper-fixed", "fa2 → fa2-psum"]  # print_paired's columns, in order
KERNELS = ["fa2", "fa2-fixed", "paper", "paper-fixed", "fa2-psum"]  # print_summary's TFLOP/s columns 1-4 and 7
VENDOR = "cudnn"  # print_cudnn's one column, in its own table after ours
CELL = r"(-?[\d.]+) \[-?[\d.]+, -?[\d.]+\] n=\d+|-"


def read(path):
    """{(row, pair): median %} and {(row, kernel): TFLOP/s} of one log (a '-' cell: not run, left out)."""
    ovh, tflops = {}, {}
    vendor = False  # inside print_cudnn's table ("config (TFLOP/s)   cudnn   (cuDNN ...)")
    for line in open(path, errors="replace"):
        if line.startswith("config (TFLOP/s)") or not line.strip():  # a table starts, or the last one ended
            vendor = line.split()[2:3] == [VENDOR]
            continue
        m = re.match(ROW + r"\s+([\d.]+)\s*$", line) if vendor else None
        if m:
            tflops[(f"{m[1]} d{m[2]} {m[3]} seq{m[4]}", VENDOR)] = float(m[5])
            continue
        m = re.match(r"ovh " + ROW + r"\s+(.*)$", line)
        if m:
            row = f"{m[1]} d{m[2]} {m[3]} seq{m[4]}"
            for pair, cell in zip(PAIRS, re.finditer(CELL, m[5])):
                if cell[1] is not None:
                    ovh[(row, pair)] = float(cell[1])
            continue
        m = re.match(ROW + r"((?:\s+(?:[\d.]+|-)){6,8})\s*$", line)  # 8 cells (6 before fa2-psum)
        if m:
            row = f"{m[1]} d{m[2]} {m[3]} seq{m[4]}"
            cells = m[5].split()
            for kernel, cell in zip(KERNELS, cells[0:4] + cells[6:7]):
                if cell != "-":
                    tflops[(row, kernel)] = float(cell)
    return ovh, tflops


def side(paths):
    runs = [read(p) for p in paths]
    return [r[0] for r in runs], [r[1] for r in runs]


def main():
    ap = argparse.ArgumentParser(description="Compare two builds' bench_attention logs")
    ap.add_argument("--a", nargs="+", required=True, help="the baseline build's logs, one per run")
    ap.add_argument("--b", nargs="+", required=True, help="the changed build's logs, one per run")
    ap.add_argument("--filter", default="", help="the runs' --benchmark_filter (for the note on paired rows)")
    args = ap.parse_args()
    a_ovh, a_tf = side(args.a)
    b_ovh, b_tf = side(args.b)
    for name, ovh, tf in (("A", a_ovh, a_tf), ("B", b_ovh, b_tf)):
        if not any(ovh) and not any(tf):
            logs = ", ".join(args.a if name == "A" else args.b)
            sys.exit(f"bench_ab.py: no 'ovh' or TFLOP/s row in {name}'s logs ({logs}): nothing to compare (did "
                     "bench_attention run to its end?)")
    # Each side's values of key k, one per run that measured it, and their median (None: no run did).
    values = lambda runs, k: [run[k] for run in runs if k in run]
    median = lambda xs: statistics.median(xs) if xs else None
    cell = lambda x, digits: "–" if x is None else f"{x:.{digits}f}"
    keys = sorted({k for run in a_ovh + b_ovh for k in run})
    if keys:
        print("| row | fix (paired) | A, % per run | B, % per run | A median | B median | B − A, points |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for k in keys:
            a, b = values(a_ovh, k), values(b_ovh, k)
            ma, mb = median(a), median(b)
            runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs) or "–"
            diff = "–" if ma is None or mb is None else f"{mb - ma:+.2f}"
            print(f"| {k[0]} | {k[1]} | {runs(a)} | {runs(b)} | {cell(ma, 2)} | {cell(mb, 2)} | {diff} |")
    elif "ovh" in args.filter and not args.filter.startswith("-"):  # -F: every benchmark but F's (Google Benchmark)
        note = (f"No paired row: the filter '{args.filter}' selects none. They are named by the base: "
                "ovh/<fwd|step>/fa2/<d>/<full|causal>/seq4096 times fa2 → fa2-fixed, "
                ".../paper/... paper → paper-fixed, and .../fa2-psum/... fa2 → fa2-psum.")
        print(note)
        print(f"bench_ab.py: {note}", file=sys.stderr)
    keys = sorted({k for run in a_tf + b_tf for k in run}, key=lambda k: (k[0], (KERNELS + [VENDOR]).index(k[1])))
    if keys:
        print()
        print("| row | kernel | A TFLOP/s (median of runs) | B TFLOP/s | B / A |")
        print("| --- | --- | --- | --- | --- |")
        for k in keys:
            ma, mb = median(values(a_tf, k)), median(values(b_tf, k))
            ratio = "–" if ma is None or mb is None else f"{mb / ma:.3f}"
            print(f"| {k[0]} | {k[1]} | {cell(ma, 1)} | {cell(mb, 1)} | {ratio} |")
        if any(k[1] == VENDOR for k in keys):
            print()
            print(f"{VENDOR}: the vendor kernel, the same library on both sides (unless the change touched our cuDNN "
                  "calls): its B / A is the card's drift between the sides' runs, the scale for the other ratios.")

if __name__ == "__main__":
    main()
