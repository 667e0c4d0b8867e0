# bench_table.py — joins bench_attention's two summary tables (ours: fa2, fa2-fixed, paper, paper-fixed; and
# cuDNN's fused SDPA through the backend API, bench_cudnn_sdpa.cpp) into one markdown table: TFLOP/s per
# configuration, the fix overhead in % ((base / fixed − 1)·100, time-based) and fa2 / cuDNN. Used by ci/gpu.sh.
# `step` rows (one training step's attention: forward then backward, 3.5× the forward's FLOPs) are measured as one
# timed sequence for our kernels; cuDNN's step is derived from its own fwd and bwd rows of the same configuration
# (time_fwd + time_bwd), which is the same sum of two launches timed apart.
# Run: python3 kernels/cuda/bench_table.py bench.log [cudnn.log]
#   (a second file: cuDNN rows from elsewhere, e.g. bench_cudnn.py through PyTorch, in the same row format)
#   Exit 1 with one line on stderr, and no table, when bench.log holds no row of our kernels.
import re
import sys


ROW = r"(fwd|bwd|step) d(\d+) (causal|full)\s+seq(\d+)"


def main(bench_path, cudnn_path=None):
    ours, cudnn = {}, {}
    section = None  # "ours" or "cudnn": which summary table the lines belong to
    for line in open(bench_path):
        if line.startswith("config (TFLOP/s)"):
            section = "cudnn" if "cudnn" in line else "ours"
            continue
        # '-' is a variant that did not run (the backward has no fixed rows): read as 0, shown as '–'. (A pattern of
        # four numbers dropped every bwd row from the joined table once bench_attention printed '-' for them.)
        m = re.match(ROW + r"\s+([\d.]+|-)\s+([\d.]+|-)\s+([\d.]+|-)\s+([\d.]+|-)", line)
        if section == "ours" and m:
            ours[(m[1], int(m[2]), m[3], int(m[4]))] = [0.0 if m[i] == "-" else float(m[i]) for i in range(5, 9)]
        m = re.match(ROW + r"\s+([\d.]+)\s*$", line)
        if section == "cudnn" and m:
            cudnn[(m[1], int(m[2]), m[3], int(m[4]))] = float(m[5])
    for line in open(cudnn_path) if cudnn_path else []:
        m = re.match(ROW + r"\s+([\d.]+)", line)
        if m:
            cudnn.setdefault((m[1], int(m[2]), m[3], int(m[4])), float(m[5]))
    if not ours:  # bench_attention measured nothing (it stopped early): a header alone would pass for a table
        sys.exit(f"bench_table.py: no rows of our kernels in {bench_path} (no 'config (TFLOP/s)' table with fwd, bwd "
                 "or step rows): nothing to join")
    for key in [k for k in ours if k[0] == "step"]:
        f, b = cudnn.get(("fwd",) + key[1:], 0.0), cudnn.get(("bwd",) + key[1:], 0.0)
        if f > 0 and b > 0:
            cudnn.setdefault(key, 3.5 / (1.0 / f + 2.5 / b))
    print("| pass | d | mask | seq | fa2 | fa2-fixed | fa2 fix ovh % | paper | paper-fixed | paper fix ovh % | cuDNN | fa2/cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key in sorted(ours, key=lambda k: (["fwd", "bwd", "step"].index(k[0]), k[1], k[2], k[3])):
        a, af, p, pf = ours[key]
        c = cudnn.get(key, 0.0)
        ovh = lambda base, fixed: f"{100.0 * (base / fixed - 1.0):.1f}" if base > 0 and fixed > 0 else "–"
        cell = lambda x: f"{x:.1f}" if x > 0 else "–"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {cell(a)} | {cell(af)} | {ovh(a, af)} | {cell(p)} | "
              f"{cell(pf)} | {ovh(p, pf)} | {cell(c)} | {a / c:.2f} |" if c > 0 else
              f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {cell(a)} | {cell(af)} | {ovh(a, af)} | {cell(p)} | "
              f"{cell(pf)} | {ovh(p, pf)} | – | – |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
