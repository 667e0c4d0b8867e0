#!/usr/bin/env python3
"""mut_summary.py LOGDIR MUTANTS_MD — the summary of run_mutants.sh (mutants.txt on standard output).

LOGDIR/<variant>/ holds, per variant (m0 = the unmutated control, m1.. the mutants):
  tests.rc, tests.log, tests.xml        cuda_kernels_test (gtest_brief)
  default.rc/.log/.json, bias.*         attncheck check --suite default|bias on the eight kernels, --no-shrink
  gpu.rc/.log/.json                     attncheck check --suite gpu on the four cuda: kernels, --no-shrink
  verdicts.rc/.log                      ci/compare_verdicts.py default.json bias.json (as ci/gpu.sh runs it)
A .rc holds the exit status, or 'notrun' when the time budget ran out before the step started.
Detectors per mutant, each against m0 (so a flaky or failing control does not make every mutant 'killed'):
  gtest      tests failing here that pass in m0 (names); a crash, a timeout or no test result counts
  cpu-model  compare_verdicts DIFFERS lines (cuda:K vs K) not present in m0's
  vs-m0      cuda:K verdicts (default + bias) that differ from m0's, keyed by (kernel, label, property, family_checked)
  gpu-suite  gpu_matches_cpu_model checks failing here that pass in m0
  steps      a suite step that crashed, timed out or wrote no report
KILLED when any detector fires; SURVIVED otherwise; INCOMPLETE when a step did not run (budget) and nothing fired.
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def rc_of(d, step):
    s = read(os.path.join(d, step + ".rc")).strip()
    if s == "":
        return "missing"
    return s


def rc_word(rc):
    if rc in ("missing", "notrun"):
        return rc
    try:
        n = int(rc)
    except ValueError:
        return rc
    if n == 0:
        return "exit 0"
    if n == 124:
        return "TIMEOUT (124)"
    if n == 137:
        return "KILLED/TIMEOUT (137)"
    if n > 128:
        return f"CRASH (signal {n - 128})"
    return f"exit {n}"


def gtest_results(d):
    """(failed names, passed names, note): from the XML if complete, else from the log."""
    failed, passed, note = set(), set(), ""
    xml = os.path.join(d, "tests.xml")
    ok_xml = False
    if os.path.exists(xml):
        try:
            root = ET.parse(xml).getroot()
            for tc in root.iter("testcase"):
                name = f"{tc.get('classname')}.{tc.get('name')}"
                if tc.find("failure") is not None or tc.find("error") is not None:
                    failed.add(name)
                elif tc.get("result") not in ("skipped", "suppressed") and tc.get("status") == "run":
                    passed.add(name)
            ok_xml = True
        except (ET.ParseError, OSError) as e:
            note = f"tests.xml unreadable ({e})"
    log = read(os.path.join(d, "tests.log"))
    for m in re.finditer(r"^\[  FAILED  \] (\S+?)(?:,| \(|$)", log, re.M):
        if "." in m.group(1):
            failed.add(m.group(1))
    if not ok_xml:
        for m in re.finditer(r"^\[       OK \] (\S+)", log, re.M):
            passed.add(m.group(1))
        started = re.findall(r"^\[ RUN      \] (\S+)", log, re.M)
        if started and started[-1] not in passed and started[-1] not in failed:
            note = (note + "; " if note else "") + f"last test started and not finished: {started[-1]}"
    m = re.search(r"^\[  SKIPPED \] (\d+) tests?", log, re.M)
    skipped = int(m.group(1)) if m else 0
    if skipped and not passed and not failed:
        note = (note + "; " if note else "") + f"{skipped} tests SKIPPED (no usable GPU?)"
    return failed, passed, note


def outcomes(d, step):
    try:
        with open(os.path.join(d, step + ".json")) as f:
            return json.load(f)["outcomes"], ""
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"no report ({type(e).__name__})"


def key(o):
    return (o.get("kernel"), o.get("family_label", ""), o.get("property"),
            o.get("family_checked") or o.get("family_description", ""))


def cuda_verdicts(d):
    v, notes = {}, []
    for step in ("default", "bias"):
        outs, err = outcomes(d, step)
        if outs is None:
            notes.append(f"{step}: {err}, {rc_word(rc_of(d, step))}")
            continue
        for o in outs:
            if str(o.get("kernel", "")).startswith("cuda:"):
                v[(step,) + key(o)] = o.get("status")
    return v, notes


def differs_lines(d):
    return sorted(set(l.strip() for l in read(os.path.join(d, "verdicts.log")).splitlines() if l.startswith("DIFFERS")))


def gpu_fails(d):
    outs, err = outcomes(d, "gpu")
    if outs is None:
        return None, f"gpu: {err}, {rc_word(rc_of(d, 'gpu'))}"
    fails = {}
    for o in outs:
        if o.get("status") == "fail":
            fails[key(o)] = (o.get("message") or "").splitlines()[0][:160] if o.get("message") else ""
    return fails, ""


def short(k):
    step = k[0] + ": " if len(k) == 5 else ""
    kk = k[1:] if len(k) == 5 else k
    return f"{step}{kk[0]} {kk[2]} on {kk[1]}"


def main():
    logdir = sys.argv[1]
    desc = {}
    if len(sys.argv) > 2:
        for line in read(sys.argv[2]).splitlines():
            m = re.match(r"^- \*\*(m\d+)\*\*\s*(.*)", line)
            if m:
                desc[m.group(1)] = m.group(2)
    variants = sorted((v for v in os.listdir(logdir) if re.fullmatch(r"m\d+", v)), key=lambda v: int(v[1:]))
    if "m0" not in variants:
        print("no m0 (control) results: nothing to compare against")
        return 2
    base = os.path.join(logdir, "m0")
    b_failed, b_passed, b_note = gtest_results(base)
    b_verdicts, b_vnotes = cuda_verdicts(base)
    b_differs = set(differs_lines(base))
    b_gpu, b_gnote = gpu_fails(base)
    rows = []
    print("# Mutation testing of the CUDA kernels (run_mutants.sh)\n")
    print("Every check ran with --no-shrink (time); compare_verdicts pairs outcomes by the family as checked, as in")
    print("ci/gpu.sh.\n")
    print("## m0 (control, unmutated)")
    print(f"- cuda_kernels_test: {rc_word(rc_of(base, 'tests'))}, {len(b_passed)} passed, {len(b_failed)} failed"
          + (f" ({', '.join(sorted(b_failed))})" if b_failed else "") + (f"; {b_note}" if b_note else ""))
    for step in ("default", "bias", "gpu"):
        outs, err = outcomes(base, step)
        if outs is None:
            print(f"- suite {step}: {err}, {rc_word(rc_of(base, step))}")
        else:
            n = {s: sum(o.get('status') == s for o in outs) for s in ("pass", "fail", "skip")}
            cu = [o for o in outs if str(o.get('kernel', '')).startswith('cuda:')]
            print(f"- suite {step}: {rc_word(rc_of(base, step))}, {len(outs)} outcomes ({n['pass']} pass, {n['fail']} fail,"
                  f" {n['skip']} skip), {len(cu)} on cuda: kernels ({sum(o.get('status') == 'fail' for o in cu)} fail)")
    vl = read(os.path.join(base, "verdicts.log")).strip().splitlines()
    print(f"- compare_verdicts: {rc_word(rc_of(base, 'verdicts'))}: {vl[-1] if vl else '(no output)'}")
    for l in sorted(b_differs):
        print(f"    {l}")
    if b_gpu:
        print(f"- gpu suite fails in m0: {', '.join(short(k) for k in sorted(b_gpu))}")
    for n in b_vnotes + ([b_gnote] if b_gnote else []):
        print(f"- NOTE: {n}")
    print()

    for v in variants:
        if v == "m0":
            continue
        d = os.path.join(logdir, v)
        fired, incomplete, lines = [], False, []
        # gtest
        trc = rc_of(d, "tests")
        failed, passed, note = gtest_results(d)
        new_fail = sorted(failed - b_failed)
        if trc == "notrun":
            incomplete = True
            lines.append("gtest: not run (time budget)")
        else:
            crashed = trc not in ("0", "1")
            if new_fail or crashed or (not passed and not failed):
                fired.append("gtest")
            lines.append(f"gtest: {rc_word(trc)}; {len(failed)} failed, {len(passed)} passed"
                         + (f"; {note}" if note else ""))
            for t in new_fail:
                lines.append(f"    FAILED {t}")
        # suites: crashes / missing reports
        for step in ("default", "bias", "gpu"):
            rc = rc_of(d, step)
            if rc == "notrun":
                incomplete = True
                lines.append(f"suite {step}: not run (time budget)")
                continue
            outs, err = outcomes(d, step)
            if outs is None or rc not in ("0", "1"):
                fired.append(f"{step}-step")
                lines.append(f"suite {step}: {rc_word(rc)}" + (f", {err}" if outs is None else ""))
        # compare_verdicts (the gpu.sh detector)
        differs = differs_lines(d)
        new_differs = [l for l in differs if l not in b_differs]
        vrc = rc_of(d, "verdicts")
        vl = read(os.path.join(d, "verdicts.log")).strip().splitlines()
        if new_differs:
            fired.append("cpu-model")
        lines.append(f"compare_verdicts (cuda:K vs CPU model K): {rc_word(vrc)}: "
                     f"{vl[-1] if vl else '(no output)'}; {len(new_differs)} new DIFFERS")
        for l in new_differs[:25]:
            lines.append(f"    {l}")
        if len(new_differs) > 25:
            lines.append(f"    ... {len(new_differs) - 25} more")
        # vs m0
        verdicts, vnotes = cuda_verdicts(d)
        changed = sorted(k for k in verdicts if k in b_verdicts and verdicts[k] != b_verdicts[k])
        missing = [k for k in b_verdicts if k not in verdicts]
        if changed:
            fired.append("vs-m0")
        lines.append(f"cuda: verdicts vs m0 (default+bias): {len(changed)} changed of {len(verdicts)}"
                     + (f"; {len(missing)} of m0's absent" if missing else ""))
        for k in changed[:25]:
            lines.append(f"    {short(k)}: m0={b_verdicts[k]} now={verdicts[k]}")
        if len(changed) > 25:
            lines.append(f"    ... {len(changed) - 25} more")
        # gpu suite
        g, gnote = gpu_fails(d)
        if g is not None:
            new_g = sorted(k for k in g if b_gpu is None or k not in b_gpu)
            if new_g:
                fired.append("gpu-suite")
            lines.append(f"gpu suite (gpu_matches_cpu_model): {len(g)} fail, {len(new_g)} new")
            for k in new_g[:25]:
                lines.append(f"    FAIL {short(k)}: {g[k]}")
            if len(new_g) > 25:
                lines.append(f"    ... {len(new_g) - 25} more")
        fired = list(dict.fromkeys(fired))
        verdict = "KILLED" if fired else ("INCOMPLETE" if incomplete else "SURVIVED")
        rows.append((v, verdict, fired))
        print(f"## {v}: {verdict}" + (f" by {', '.join(fired)}" if fired else ""))
        if v in desc:
            print(f"({desc[v]})")
        for l in lines:
            print(f"- {l}" if not l.startswith("    ") else l)
        print()
    print("## Table")
    print("| mutant | result | gtest | cpu-model (compare_verdicts) | vs-m0 | gpu-suite | step crashed/timed out |")
    print("|---|---|---|---|---|---|---|")
    for v, verdict, fired in rows:
        cell = lambda k: "x" if k in fired else ""
        steps = " ".join(f[:-5] for f in fired if f.endswith("-step"))
        print(f"| {v} | {verdict} | {cell('gtest')} | {cell('cpu-model')} | {cell('vs-m0')} | {cell('gpu-suite')} | {steps} |")
    print(f"\n{sum(r[1] == 'KILLED' for r in rows)} of {len(rows)} mutants killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
