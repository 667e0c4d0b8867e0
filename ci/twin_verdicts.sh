#!/usr/bin/env bash
# twin_verdicts.sh ATTNCHECK — the CPU twins of the CUDA kernels (twin:cuda:K: each GPU kernel's sums in its order,
# kernels/cuda/cuda_twin.h) get their CPU models' verdicts on the default and bias suites. On a GPU host ci/gpu.sh
# compares cuda:K with K (compare_verdicts.py); this predicts that comparison without a GPU, so a model change that
# the GPU's numerics would not follow shows in CI. ctest twin_verdicts (builds with CUDA; ~25 s of checks, 2 cores).
#   twin_verdicts.sh ATTNCHECK [WORKDIR]   WORKDIR: kept, this script's files in it replaced (ctest gives one in the
#                                          build tree, so a run killed by its timeout leaves nothing in /tmp); default
#                                          a temporary folder, removed
# Exit: compare_verdicts.py's (0 equal, 1 a verdict differs or is unpaired, 2 unreadable); 2 if a check run errs.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -x "$1" ]; then
  echo "usage: twin_verdicts.sh ATTNCHECK [WORKDIR] (ATTNCHECK: an attncheck built with CUDA; got: ${1:-nothing})" >&2
  exit 2
fi
bin=$(realpath "$1")
if [ $# -eq 2 ]; then
  dir=$2
  mkdir -p "$dir"
  rm -rf "$dir"/default.json "$dir"/bias.json "$dir"/default.log "$dir"/bias.log "$dir/twin-verdicts-findings"
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
kernels=()
for k in fa2 fa2-fixed paper paper-fixed fa2-psum; do kernels+=(-k "$k" -k "twin:cuda:$k"); done
for suite in default bias; do
  status=0
  (cd "$dir" && "$bin" check -q --suite "$suite" "${kernels[@]}" --findings twin-verdicts-findings --json "$suite.json" \
    >"$suite.log" 2>&1) || status=$?
  if [ "$status" -gt 1 ]; then  # 1: properties failed, as they do on the models; 2 and up: the run itself failed
    echo "twin_verdicts: attncheck check --suite $suite exited $status:" >&2
    tail -20 "$dir/$suite.log" >&2
    exit 2
  fi
done
python3 "$(dirname "$0")/compare_verdicts.py" "$dir/default.json" "$dir/bias.json"
