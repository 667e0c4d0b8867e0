#!/usr/bin/env python3
"""compare_verdicts.py — do the CUDA kernels get the same verdicts as their CPU models? (ci/gpu.sh)

  compare_verdicts.py REPORT.json [REPORT.json ...]

Reads `attncheck check --json` reports holding both a CPU model K and its CUDA kernel cuda:K, pairs their
outcomes by (suite entry label, property, family description) and prints one line per pair that differs.
A check the CUDA kernel skips (a capability it lacks) is counted apart, not as a mismatch, and listed with why.
Exit status 1 when any verdict differs, 2 on unreadable input, else 0. Prints a per-kernel summary table.
"""
import json
import sys
from collections import defaultdict


def load(paths):
    outcomes = []
    for path in paths:
        try:
            with open(path) as f:
                outcomes += json.load(f)["outcomes"]
        except (OSError, ValueError, KeyError) as e:
            print(f"compare_verdicts: cannot read {path}: {e}", file=sys.stderr)
            sys.exit(2)
    return outcomes


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    by_kernel = defaultdict(dict)
    reasons = {}
    skips = []
    for o in load(sys.argv[1:]):
        key = (o.get("family_label", ""), o["property"], o.get("family_description", ""))
        by_kernel[o["kernel"]][key] = o["status"]
        reasons[(o["kernel"], key)] = o.get("message", "")
    mismatches = 0
    print("| CUDA kernel | CPU model | same verdict | differ | skipped on GPU |")
    print("|---|---|---|---|---|")
    for gpu in sorted(k for k in by_kernel if k.startswith("cuda:")):
        cpu = gpu[len("cuda:"):]
        if cpu not in by_kernel:
            continue
        same = differ = skipped = 0
        for key, status in by_kernel[gpu].items():
            if key not in by_kernel[cpu]:
                continue
            if status == "skip" and by_kernel[cpu][key] != "skip":  # skipped on both: "does not apply", same
                skipped += 1
                skips.append(f"skipped on {gpu}: {key[1]} on {key[0]} ({key[2]}): {reasons[(gpu, key)]}")
            elif status == by_kernel[cpu][key]:
                same += 1
            else:
                differ += 1
                print(f"DIFFERS {gpu}={status} {cpu}={by_kernel[cpu][key]}: {key[1]} on {key[0]} ({key[2]})",
                      file=sys.stderr)
        mismatches += differ
        print(f"| {gpu} | {cpu} | {same} | {differ} | {skipped} |")
    for line in skips:
        print(line)
    print(f"compare_verdicts: {mismatches} differing verdict(s)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
