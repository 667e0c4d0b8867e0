#!/usr/bin/env bash
# build.sh — builds the CUDA kernels' mutants (README.md here) on a machine with the CUDA toolkit (no GPU needed) and
# packs them, with the unmutated control m0 and the run scripts, into gpu-exp/mut/mut.tar.xz (git-ignored, ~25 MB):
#   bash kernels/cuda/mutants/build.sh [mN ...]      default: every mN.patch here
# then on the GPU host, from the repository root (the tarball carried there):
#   tar xJf gpu-exp/mut/mut.tar.xz -C gpu-exp/mut && OUT=out/mut bash gpu-exp/mut/run_mutants.sh
# Uses the build tree build-gpu (configured as ci/gpu_bundle.sh does, sm_90 by default); each mutant is applied to
# the working tree, cuda_kernels_test and attncheck rebuilt (only the patched .cu recompiles), installed stripped into
# gpu-exp/mut/mN/, and reverted (git apply -R: other edits in the tree stay), also on failure. A patch that no longer
# applies stops the build, naming it (refresh it against the kernel; ctest -R cuda_mutants_apply says the same in CI).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
arch=${ATTNCHECK_CUDA_ARCH:-90}
dest=gpu-exp/mut
if [ $# -gt 0 ]; then mutants=("$@"); else mutants=($(cd "$here" && ls m*.patch | sed 's/\.patch$//' | sort -t m -k 2 -n)); fi
for m in "${mutants[@]}"; do
  git apply --check "$here/$m.patch" || { echo "build.sh: $m.patch does not apply to this tree" >&2; exit 2; }
done
bash ci/install_deps.sh
ATTNCHECK_CMAKE_ARGS="-DATTNCHECK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$arch ${ATTNCHECK_CMAKE_ARGS:-}" \
  ATTNCHECK_TARGET=attncheck bash ci/build.sh build-gpu Release
rm -rf "$dest"
mkdir -p "$dest/lib"
build_into() {  # build_into mN: the current tree's two binaries, stripped, into $dest/mN
  cmake --build build-gpu --target cuda_kernels_test attncheck
  mkdir -p "$dest/$1"
  install -s build-gpu/kernels/cuda/cuda_kernels_test build-gpu/harness/attncheck "$dest/$1/"
}
applied=  # the patch in the tree now: reverted by itself (git apply -R), also on failure, so other edits stay
revert() { [ -z "$applied" ] || git apply -R "$applied"; applied=; }
trap revert EXIT
build_into m0
for m in "${mutants[@]}"; do
  git apply "$here/$m.patch"
  applied=$here/$m.patch
  build_into "$m"
  revert
  cp "$here/$m.patch" "$dest/"
done
cmake --build build-gpu --target cuda_kernels_test attncheck  # leave build-gpu as the tree is
bash ci/bundle_libs.sh "$dest/lib" "$dest/m0/attncheck" "$dest/m0/cuda_kernels_test"  # what a bare GPU host lacks
cp "$here/run_mutants.sh" "$here/mut_summary.py" ci/compare_verdicts.py "$dest/"
cp "$here/README.md" "$dest/MUTANTS.md"
git rev-parse HEAD >"$dest/BUILT_FROM"
tar cJf "$dest.tar.xz" -C "$dest" . && mv "$dest.tar.xz" "$dest/mut.tar.xz"  # written beside, not inside, what it packs
echo "build.sh: $dest/mut.tar.xz ($(du -h "$dest/mut.tar.xz" | cut -f1)): m0 ${mutants[*]}"
