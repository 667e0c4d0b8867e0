#!/usr/bin/env python3
"""compare_verdicts.py — do the CUDA kernels get the same verdicts as their CPU models? (ci/gpu.sh)

  compare_verdicts.py REPORT.json [REPORT.json ...]

Reads `attncheck check --json` reports holding both a CPU model K and its CUDA kernel cuda:K (or its CPU twin
twin:cuda:K, which does the GPU's sums in its order: ci/twin_verdicts.sh, without a GPU), pairs their
outcomes by (report, suite entry label, property, family as checked) and prints one line per pair that differs. The family as
checked is the report's `family_checked` (a failure's `family_description` is its shrunk family, which differs between
two kernels that fail differently, and between a failure and a pass: keyed on it, such pairs went unpaired and
uncounted, "0 differing"). An outcome of cuda:K with no outcome of K under its key, or the reverse, is listed as
unpaired and counts as a difference (both ran in one suite run: every check of one has the other's).
A check the CUDA kernel skips (a capability it lacks) is counted apart, not as a mismatch, and listed with why.
Exit status 1 when any verdict differs or any outcome is unpaired; 2 on unreadable input (missing, truncated, or not a report: said, never a
traceback), on a report of an interrupted run (`run.interrupted`: some checks never ran) and when nothing was compared (no cuda:K beside its K, or no check they share: a CPU-only report must not
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
        run = report.get("run")
        if isinstance(run, dict) and run.get("interrupted"):  # some checks never ran: not a comparison to pass
            fail(f"{path}: the run was interrupted by {run['interrupted']}; "
                 f"{len(report.get('not_run') or [])} check(s) did not run")
        for i, o in enumerate(found):
            missing = [k for k in ("kernel", "property", "status") if not isinstance(o, dict) or not isinstance(o.get(k), str)]
            if missing:
                fail(f"cannot read {path}: outcome {i} lacks {', '.join(missing)}")
        outcomes += [(path, o) for o in found]
    return outcomes


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    by_kernel = defaultdict(dict)
    reasons = {}
    skips = []
    for path, o in load(sys.argv[1:]):
        # The report is part of the key: the default and bias suites share entries (same label, property, family),
        # and keyed without it the second report's outcome replaced the first's (216 of 236 pairs compared).
        key = (o.get("family_label", ""), o["property"], o.get("family_checked", o.get("family_description", "")), path)
        by_kernel[o["kernel"]][key] = o["status"]
        reasons[(o["kernel"], key)] = o.get("message", "")
    mismatches = compared = unpaired = 0
    print("| CUDA kernel (or twin) | CPU model | same verdict | differ | skipped on GPU (or twin) | unpaired |")
    print("|---|---|---|---|---|---|")
    for gpu in sorted(k for k in by_kernel if k.startswith(("cuda:", "twin:cuda:"))):
        cpu = gpu.split("cuda:", 1)[1]
        if cpu not in by_kernel:
            continue
        same = differ = skipped = alone = 0
        for kernel, other in ((gpu, cpu), (cpu, gpu)):
            for key in sorted(set(by_kernel[kernel]) - set(by_kernel[other])):
                alone += 1
                print(f"UNPAIRED {kernel}={by_kernel[kernel][key]}, no {other}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}",
                      file=sys.stderr)
        for key, status in by_kernel[gpu].items():
            if key not in by_kernel[cpu]:
                continue
            if status == "skip" and by_kernel[cpu][key] != "skip":  # skipped on both: "does not apply", same
                skipped += 1
                skips.append(f"skipped on {gpu}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}: {reasons[(gpu, key)]}")
            elif status == by_kernel[cpu][key]:
                same += 1
            else:
                differ += 1
                print(f"DIFFERS {gpu}={status} {cpu}={by_kernel[cpu][key]}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}",
                      file=sys.stderr)
        mismatches += differ
        compared += same + differ
        unpaired += alone
        print(f"| {gpu} | {cpu} | {same} | {differ} | {skipped} | {alone} |")
    for line in skips:
        print(line)
    if compared == 0:
        fail(f"nothing compared: no check of a cuda:K kernel (or twin:cuda:K) beside its CPU model K in {' '.join(sys.argv[1:])} "
             f"(kernels: {', '.join(sorted(by_kernel)) or 'none'})")
    print(f"compare_verdicts: {mismatches} differing verdict(s) of {compared} compared"
          + (f"; {unpaired} outcome(s) unpaired" if unpaired else ""))
    return 1 if mismatches or unpaired else 0


if __name__ == "__main__":
    sys.exit(main())
