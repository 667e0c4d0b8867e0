#!/usr/bin/env python3
"""compare_verdicts.py — do the CUDA kernels get the same verdicts as their CPU models? (ci/gpu.sh)

  compare_verdicts.py REPORT.json [REPORT.json ...]

Reads `attncheck check --json` reports holding both a CPU model K and its CUDA kernel cuda:K, pairs their
outcomes by (suite entry label, property, family description) and prints one line per pair that differs.
A check the CUDA kernel skips (a capability it lacks) is counted apart, not as a mismatch, and listed with why.
Exit status 1 when any verdict differs; 2 on unreadable input (missing, truncated, or not a report: said, never a
traceback) and when nothing was compared (no cuda:K beside its K, or no check they share: a CPU-only report must not
read as "0 differ"); else 0. Prints a per-kernel summary table.
Test: ci/ci_scripts_test.sh (ctest -R ci_scripts).
"""
import json
import sys
from collections import defaultdict


def fail(message):
    print(f"compare_verdicts: {message}", file=sys.stderr)
    sys.exit(2)


def load(paths):
    outcomes = []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"cannot read {path}: {e}")
        found = report.get("outcomes") if isinstance(report, dict) else None
        if not isinstance(found, list):
            fail(f"cannot read {path}: not an `attncheck check --json` report (no list \"outcomes\")")
        for i, o in enumerate(found):
            missing = [k for k in ("kernel", "property", "status") if not isinstance(o, dict) or not isinstance(o.get(k), str)]
            if missing:
                fail(f"cannot read {path}: outcome {i} lacks {', '.join(missing)}")
        outcomes += found
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
    mismatches = compared = 0
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
        compared += same + differ
        print(f"| {gpu} | {cpu} | {same} | {differ} | {skipped} |")
    for line in skips:
        print(line)
    if compared == 0:
        fail(f"nothing compared: no check of a cuda:K kernel beside its CPU model K in {' '.join(sys.argv[1:])} "
             f"(kernels: {', '.join(sorted(by_kernel)) or 'none'})")
    print(f"compare_verdicts: {mismatches} differing verdict(s) of {compared} compared")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
