#!/usr/bin/env bash
# install_deps.sh — everything attncheck needs, from Debian packages only. Idempotent; skips apt when all
# packages are already present (so CI on a prepared machine does not touch the network).
set -euo pipefail
pkgs=(cmake ninja-build g++ clang libclang-rt-14-dev librapidcheck-dev libeigen3-dev libgtest-dev libgmock-dev
      libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev libmpfr-dev libgmp-dev
      libdnnl-dev ocl-icd-opencl-dev)  # oneDNN: the third-party CPU attention plugin (harness/plugin/onednn);
# Debian's dnnl-config.cmake requires OpenCL's headers and library, which libdnnl-dev only recommends
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
