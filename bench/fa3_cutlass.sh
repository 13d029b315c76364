#!/usr/bin/env bash
# FlashAttention-3 (hopper/) from a clean checkout with its CUTLASS submodule, built by
# wheelforge with its own generate_kernels.py as a generate step (issue 19):
#   1. clone + submodule update, then build: the step runs, CUTLASS's commit is in the SBOM;
#   2. build again: nothing runs (no generate, no compile);
#   3. the submodule at another commit: the compiles run again, the SBOM names that commit.
# Usage: bench/fa3_cutlass.sh FLASH_ATTENTION_GIT CUTLASS_GIT WORKDIR [OTHER_COMMIT]
# (the git repositories may be local mirrors; WORKDIR is emptied). One instantiation is
# compiled, with FLASHATTENTION_DISABLE_HDIM64 so it is the headers only: on a CPU-only machine
# the real kernels take many minutes each. WHEELFORGE=... runs another wheelforge;
# BUILD_ARGS=... adds options to its build (--cache-dir DIR).
set -euo pipefail
fa_git=$1 cutlass_git=$2 work=$3 other=${4:-2aee73922ce159fcaf9492a0acb7a301ae135f37}
wheelforge=${WHEELFORGE:-python -m wheelforge}
build_args=${BUILD_ARGS:-}
rm -rf "$work" && mkdir -p "$work"
cd "$work"
git clone -q --no-checkout "$fa_git" fa
cd fa
# hopper/ and the submodule only (a mirror may lack other large blobs)
git sparse-checkout set --no-cone /hopper/ /.gitmodules /csrc/cutlass
git checkout -q
# A mirror without some media blobs fails the full checkout, after setting the submodule's HEAD
git -c protocol.file.allow=always -c submodule.csrc/cutlass.url="$cutlass_git" \
  submodule update --init csrc/cutlass 2>/dev/null || true
git -C csrc/cutlass sparse-checkout set --no-cone /include/
git -C csrc/cutlass checkout -q "$(git ls-tree HEAD csrc/cutlass | awk '{print $3}')"
cat > matrix.yaml <<'EOF'
package:
  name: flash-attn-3-subset
  version: 3.0.0b1
  packages: [hopper/flash_attn_3]
  pyproject: false
header-libraries:
  - name: cutlass
    path: csrc/cutlass
    include: [include]
generate:
  - name: kernels
    run: ["{python}", "{project}/hopper/generate_kernels.py", "-o", "{out}"]
    inputs: [hopper/generate_kernels.py]
    outputs: [flash_fwd_hdim64_bf16_sm90.cu, flash_fwd_hdim64_fp16_sm90.cu]
extension:
  name: flash_attn_3._C
  sources:
    - {files: "{kernels}/flash_fwd_hdim64_bf16_sm90.cu", archs: 9.0a}
  include-dirs: [hopper]
  nvcc-flags: [--use_fast_math, -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED,
               -DCUTLASS_ENABLE_GDC_FOR_SM90, -DCUTLASS_DEBUG_TRACE_LEVEL=0, -DNDEBUG,
               -DFLASHATTENTION_DISABLE_HDIM64, --expt-relaxed-constexpr]
torch: ">=2.10"
arch-sets: "9.0a"
EOF
sbom() {
  python - <<'EOF'
import glob, json, zipfile
wheel = zipfile.ZipFile(glob.glob("dist/*.whl")[0])
member = next(n for n in wheel.namelist() if n.endswith("sboms/wheelforge.cdx.json"))
for c in json.loads(wheel.read(member))["components"]:
    if c["name"] == "cutlass":
        print("SBOM cutlass:", c["version"], c.get("purl"))
EOF
}
for step in clean no-op other-commit; do
  if [ "$step" = other-commit ]; then git -C csrc/cutlass checkout -q "$other"; fi
  echo "== $step (cutlass at $(git -C csrc/cutlass rev-parse HEAD))"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the words of $wheelforge and $build_args
  $wheelforge build $build_args --compile-cache none --report "../report-$step.json" 2>&1 \
    | grep -E "GENERATE|NVCC|CC |compiled|nothing to compile|up to date|error|warning" || true
  echo "   $(( $(date +%s) - start )) s"
  sbom
done
