#!/usr/bin/env python3
"""compare_verdicts.py — do the CUDA kernels get the same verdicts as their CPU models? (ci/gpu.sh)

  compare_verdicts.py REPORT.json [REPORT.json ...]
  compare_verdicts.py --differing-checks REPORT.json [...]      the checks to rerun on the twins, one per line
  compare_verdicts.py --twin TWIN.json [--twin ...] REPORT.json [...]

Reads `attncheck check --json` reports holding both a CPU model K and its CUDA kernel cuda:K (or its CPU twin
twin:cuda:K, which does the GPU's sums in its order: ci/twin_verdicts.sh, without a GPU), pairs their
outcomes by (report, suite entry label, property, family as checked) and prints one line per pair that differs. The family as
checked is the report's `family_checked` (a failure's `family_description` is its shrunk family, which differs between
two kernels that fail differently, and between a failure and a pass: keyed on it, such pairs went unpaired and
uncounted, "0 differing"). An outcome of cuda:K with no outcome of K under its key, or the reverse, is listed as
unpaired and counts as a difference (both ran in one suite run: every check of one has the other's).
A check the CUDA kernel skips (a capability it lacks) is counted apart, not as a mismatch, and listed with why.
A difference the CPU twin predicts is not a failure (--twin: reports of `check -k twin:cuda:K` rerun on the differing
checks, `--differing-checks` lists them as "suite<TAB>cuda:K<TAB>property<TAB>generator"): where the twin, which does
the GPU's sums in the GPU's order, gets the GPU's verdict on the same check (same suite, entry, property, family as
checked), the GPU does what it is modelled to do and the model's verdict differs at a bound's margin (long suite:
cuda:fa2, accurate, tied_max 130x200 d64, on the H200 and the H100). Printed as PREDICTED and counted apart; a
difference the twin does not predict (or that no twin report covers) fails as before. The twins' verdicts on the
default and bias suites are held equal to the models' in CI (ci/twin_verdicts.sh), so there a predicted difference
cannot stay unseen.
Exit status 1 when any verdict differs (unpredicted) or any outcome is unpaired; 2 on unreadable input (missing, truncated, or not a report: said, never a
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


def load(paths, interrupted_ok=False):
    """(path, suite, outcome) of every outcome; with interrupted_ok, a report of an interrupted run gives nothing
    (said on stderr) instead of an error: a twin rerun cut short predicts nothing."""
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
            said = (f"{path}: the run was interrupted by {run['interrupted']}; "
                    f"{len(report.get('not_run') or [])} check(s) did not run")
            if not interrupted_ok:
                fail(said)
            print(f"compare_verdicts: {said}: it predicts nothing", file=sys.stderr)
            continue
        for i, o in enumerate(found):
            missing = [k for k in ("kernel", "property", "status") if not isinstance(o, dict) or not isinstance(o.get(k), str)]
            if missing:
                fail(f"cannot read {path}: outcome {i} lacks {', '.join(missing)}")
            # Keys are strings (a list here raised a TypeError: a traceback and exit 1, read as "differs").
            family = o.get("family")
            wrong = [k for k in ("family_label", "family_checked", "family_description", "message")
                     if k in o and not isinstance(o[k], str)]
            if isinstance(family, dict) and "generator" in family and not isinstance(family["generator"], str):
                wrong.append("family.generator")
            if wrong:
                fail(f"cannot read {path}: outcome {i}: {', '.join(wrong)} not a string")
        suite = run.get("suite", "") if isinstance(run, dict) else ""
        if not isinstance(suite, str):
            fail(f"cannot read {path}: run.suite is not a string")
        outcomes += [(path, suite, o) for o in found]
    return outcomes


def is_error(message):
    """A failure that is no verdict of the property: the harness's error or the kernel's fault (cmd_check.cpp)."""
    return message.startswith("error: ") or message.startswith("kernel fault: ")


def differs(gpu_status, cpu_status):
    """A differing verdict; a check skipped on the GPU (or twin) alone is counted apart, not as one."""
    return gpu_status != cpu_status and gpu_status != "skip"


def check_key(o):
    """One check within one suite run: entry label, property, family as checked."""
    return (o.get("family_label", ""), o["property"], o.get("family_checked", o.get("family_description", "")))


def parse_args(argv):
    twins, reports, list_only = [], [], False
    i = 0
    while i < len(argv):
        if argv[i] == "--twin":
            if i + 1 == len(argv):
                fail("--twin needs a report (TWIN.json)")
            twins.append(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--differing-checks":
            list_only = True
        elif argv[i].startswith("-"):
            fail(f"unknown option {argv[i]} (see the usage: compare_verdicts.py without arguments)")
        else:
            reports.append(argv[i])
        i += 1
    return twins, reports, list_only


def main():
    twin_paths, paths, list_only = parse_args(sys.argv[1:])
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    by_kernel = defaultdict(dict)
    reasons = {}
    suite_of = {}  # report path -> its suite
    generator = {}  # (kernel, key) -> the family's generator (for --differing-checks)
    skips = []
    for path, suite, o in load(paths):
        # The report is part of the key: the default and bias suites share entries (same label, property, family),
        # and keyed without it the second report's outcome replaced the first's (216 of 236 pairs compared).
        key = check_key(o) + (path,)
        by_kernel[o["kernel"]][key] = o["status"]
        reasons[(o["kernel"], key)] = o.get("message", "")
        suite_of[path] = suite
        family = o.get("family")
        generator[(o["kernel"], key)] = family.get("generator") if isinstance(family, dict) else None
    twin_status = {}  # (twin kernel, suite) + check key -> its verdict, from the --twin reports
    for _, suite, o in load(twin_paths, interrupted_ok=True):
        if o["kernel"].startswith("twin:cuda:"):  # an error or fault of the twin's run is its status, no verdict
            twin_status[(o["kernel"], suite) + check_key(o)] = o["message"] if is_error(o.get("message", "")) else o["status"]
    if list_only:
        return list_differing(by_kernel, suite_of, generator)
    mismatches = compared = unpaired = predicted = 0
    print("| CUDA kernel (or twin) | CPU model | same verdict | differ | the twin predicts (of differ) | skipped on GPU (or twin) | unpaired |")
    print("|---|---|---|---|---|---|---|")
    for gpu in sorted(k for k in by_kernel if k.startswith(("cuda:", "twin:cuda:"))):
        cpu = gpu.split("cuda:", 1)[1]
        if cpu not in by_kernel:
            continue
        same = differ = skipped = alone = foreseen = 0
        for kernel, other in ((gpu, cpu), (cpu, gpu)):
            for key in sorted(set(by_kernel[kernel]) - set(by_kernel[other])):
                alone += 1
                print(f"UNPAIRED {kernel}={by_kernel[kernel][key]}, no {other}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}",
                      file=sys.stderr)
        for key, status in by_kernel[gpu].items():
            if key not in by_kernel[cpu]:
                continue
            if status == by_kernel[cpu][key]:  # skipped on both too: "does not apply", the same
                same += 1
            elif not differs(status, by_kernel[cpu][key]):
                skipped += 1
                skips.append(f"skipped on {gpu}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}: {reasons[(gpu, key)]}")
            else:
                differ += 1
                said = f"{gpu}={status} {cpu}={by_kernel[cpu][key]}: {key[1]} on {key[0]} ({key[2]}) in {key[3]}"
                twin = "twin:" + gpu
                by_twin = twin_status.get((twin, suite_of[key[3]]) + key[:3]) if gpu.startswith("cuda:") else None
                if is_error(reasons[(gpu, key)]):  # the GPU's error or fault: no verdict to predict
                    print(f"DIFFERS {said}; {reasons[(gpu, key)]}", file=sys.stderr)
                elif by_twin == status:
                    foreseen += 1
                    print(f"PREDICTED {said}; {twin}={by_twin}: the GPU sums as its twin does")
                elif by_twin is not None:
                    print(f"DIFFERS {said}; not predicted: {twin}={by_twin}", file=sys.stderr)
                else:
                    print(f"DIFFERS {said}", file=sys.stderr)
        mismatches += differ - foreseen
        predicted += foreseen
        compared += same + differ
        unpaired += alone
        print(f"| {gpu} | {cpu} | {same} | {differ} | {foreseen} | {skipped} | {alone} |")
    for line in skips:
        print(line)
    if compared == 0:
        fail(f"nothing compared: no check of a cuda:K kernel (or twin:cuda:K) beside its CPU model K in {' '.join(paths)} "
             f"(kernels: {', '.join(sorted(by_kernel)) or 'none'})")
    print(f"compare_verdicts: {mismatches} differing verdict(s) of {compared} compared"
          + (f"; {predicted} more differ(s) as the CPU twin predicts (PREDICTED)" if predicted else "")
          + (f"; {unpaired} outcome(s) unpaired" if unpaired else ""))
    return 1 if mismatches or unpaired else 0


def list_differing(by_kernel, suite_of, generator):
    """--differing-checks: each CUDA kernel's differing check as the twin's rerun needs it, once."""
    lines = []
    for gpu in sorted(k for k in by_kernel if k.startswith("cuda:")):
        cpu = gpu.split("cuda:", 1)[1]
        for key, status in by_kernel.get(gpu, {}).items():
            other = by_kernel.get(cpu, {}).get(key)
            if other is None or not differs(status, other):
                continue
            gen = generator.get((gpu, key))
            if not gen or not suite_of[key[3]]:
                fail(f"{key[3]}: the outcome of {gpu} ({key[1]} on {key[0]}) names no family generator or suite")
            line = f"{suite_of[key[3]]}\t{gpu}\t{key[1]}\t{gen}"
            if line not in lines:
                lines.append(line)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
