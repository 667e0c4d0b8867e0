# bench_table.py — joins bench_attention's summary table and bench_cudnn.py's output into one markdown table:
# TFLOP/s of cuda:fa2, cuda:fa2-fixed, cuda:paper, cuda:paper-fixed and cuDNN per configuration, the fix
# overhead in % ((base / fixed − 1)·100, time-based) and fa2 / cuDNN. Used by ci/gpu.sh.
# Run: python3 kernels/cuda/bench_table.py bench.log cudnn.log
import re
import sys


def main(bench_path, cudnn_path):
    ours, cudnn = {}, {}
    in_table = False
    for line in open(bench_path):
        if line.startswith("config (TFLOP/s)"):
            in_table = True
            continue
        m = re.match(r"(fwd|bwd) d(\d+) (causal|full)\s+seq(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if in_table and m:
            ours[(m[1], int(m[2]), m[3], int(m[4]))] = [float(m[i]) for i in range(5, 9)]
    for line in open(cudnn_path):
        m = re.match(r"(fwd|bwd) d(\d+) (causal|full)\s+seq(\d+)\s+([\d.]+)", line)
        if m:
            cudnn[(m[1], int(m[2]), m[3], int(m[4]))] = float(m[5])
    print("| pass | d | mask | seq | fa2 | fa2-fixed | fa2 fix ovh % | paper | paper-fixed | paper fix ovh % | cuDNN | fa2/cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key in sorted(ours, key=lambda k: (k[0] == "bwd", k[1], k[2], k[3])):
        a, af, p, pf = ours[key]
        c = cudnn.get(key, 0.0)
        ovh = lambda base, fixed: f"{100.0 * (base / fixed - 1.0):.1f}" if base > 0 and fixed > 0 else "–"
        cell = lambda x: f"{x:.1f}" if x > 0 else "–"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {cell(a)} | {cell(af)} | {ovh(a, af)} | {cell(p)} | "
              f"{cell(pf)} | {ovh(p, pf)} | {cell(c)} | {a / c:.2f} |" if c > 0 else
              f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {cell(a)} | {cell(af)} | {ovh(a, af)} | {cell(p)} | "
              f"{cell(pf)} | {ovh(p, pf)} | – | – |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
