#!/usr/bin/env bash
# apply_test.sh — ctest cuda_mutants_apply: every mutant (README.md here) still applies to the kernels as they are, so
# the mutation testing can be re-run (build.sh). A kernel change that moves a mutated line fails this: refresh the
# patch against the new code (the same bug, the new lines), or drop it and say why in README.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
n=0 bad=0
for p in "$here"/m*.patch; do
  n=$((n + 1))
  git apply --check "$p" 2>/dev/null || { echo "FAIL: $(basename "$p") no longer applies (git apply --check $p)" >&2; bad=$((bad + 1)); }
done
[ "$n" -gt 0 ] || { echo "FAIL: no mutant patches in $here" >&2; exit 1; }
echo "cuda_mutants_apply: $((n - bad)) of $n patches apply"
[ "$bad" -eq 0 ]
