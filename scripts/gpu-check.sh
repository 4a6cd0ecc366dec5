#!/usr/bin/env bash
# The agent's CUDA path, run for real on a GPU host (issue 27 #5), as one script:
#   1. the CUDA provider libraries for onnxruntime-node (ONNXRUNTIME_NODE_INSTALL=cuda12);
#   2. `gantry-agent doctor` (a row per GPU, the cuda provider, ocr and rmbg loaded on it);
#   3. OCR (PP-OCRv4) through the agent on CUDA against a bare onnxruntime CUDA loop on the
#      same model (bench/ocr-agent.ts --provider cuda);
#   4. rmbg (ISNet) the same way (bench/rmbg-agent.ts --provider cuda);
#   5. a batch that runs out of GPU memory: out_of_memory, a fresh runner child, the batch
#      halved until it fits, every job done (scripts/gpu-oom.ts).
# Every figure is printed; the target is agent >= 0.95 of the bare loop. Exits non-zero at
# the first step that fails (no GPU, no driver, CUDA libraries that do not load) and at the
# end when a ratio misses its target.
#
#   scripts/gpu-check.sh              (GANTRY_GPU_CHECK_TIMEOUT_S: the whole run, default 1500;
#                                      GANTRY_GPU_CHECK_STEP_S: each step, default 600)
set -euo pipefail
cd "$(dirname "$0")/.."

TOTAL_S="${GANTRY_GPU_CHECK_TIMEOUT_S:-1500}"
STEP_S="${GANTRY_GPU_CHECK_STEP_S:-600}"
# The whole run under one timeout: a wedged driver must not hang a CI job for hours.
if [ -z "${GANTRY_GPU_CHECK_INNER:-}" ]; then
  GANTRY_GPU_CHECK_INNER=1 exec timeout --kill-after=10 "$TOTAL_S" "$0" "$@"
fi

say() { printf '[gpu-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/gantry-gpu-check.XXXXXX")"
# Runs one step under the step timeout, its output shown and kept in $LOGS/<name>.log.
step() {
  local name="$1"
  shift
  say "── $name: $*"
  local started=$SECONDS
  if ! timeout --kill-after=10 "$STEP_S" "$@" 2>&1 | tee "$LOGS/$name.log"; then
    fail "$name (see $LOGS/$name.log)"
  fi
  say "── $name done in $((SECONDS - started)) s"
}

say "host: $(uname -srm); node $(node --version); logs in $LOGS"
command -v nvidia-smi >/dev/null 2>&1 ||
  fail "no nvidia-smi on PATH: this check needs an NVIDIA GPU and its driver (none here)"
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total,utilization.gpu,temperature.gpu \
  --format=csv ||
  fail "nvidia-smi is installed but cannot talk to the driver"

ORT_DIR=node_modules/onnxruntime-node
CUDA_LIB="$ORT_DIR/bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so"
if [ -f "$CUDA_LIB" ]; then
  say "CUDA provider libraries already installed: $CUDA_LIB"
else
  step install-cuda env ONNXRUNTIME_NODE_INSTALL=cuda12 node "$ORT_DIR/script/install"
  [ -f "$CUDA_LIB" ] || fail "the install finished without $CUDA_LIB"
fi
ls -l "$(dirname "$CUDA_LIB")"
# What this onnxruntime-node build offers beside CUDA (its TensorRT provider library).
if [ -f "$(dirname "$CUDA_LIB")/libonnxruntime_providers_tensorrt.so" ]; then
  say "TensorRT provider library present (needs TensorRT's libnvinfer on the host to load)"
fi

step doctor env GANTRY_EXECUTION_PROVIDERS=cuda GANTRY_MODELS=ocr,rmbg \
  node bin/gantry-agent.js doctor

step ocr npx tsx bench/ocr-agent.ts --provider cuda --jobs 60 --rounds 3 --threads 1
step rmbg npx tsx bench/rmbg-agent.ts --provider cuda --jobs 20 --rounds 2 --threads 1 --variants medium
step oom npx tsx scripts/gpu-oom.ts
# TensorRT where the host has it (not fatal: the figures above are CUDA's). The doctor's model
# row says whether the model loaded through TensorRT or why it ran on CUDA alone.
if ldconfig -p 2>/dev/null | grep -q libnvinfer; then
  say "── tensorrt: gantry-agent doctor with GANTRY_TENSORRT=true"
  env GANTRY_EXECUTION_PROVIDERS=cuda GANTRY_MODELS=ocr GANTRY_TENSORRT=true \
    timeout --kill-after=10 "$STEP_S" node bin/gantry-agent.js doctor 2>&1 | tee "$LOGS/tensorrt.log" ||
    say "the TensorRT doctor run failed (see $LOGS/tensorrt.log); CUDA's figures stand"
else
  say "TensorRT (libnvinfer) is not installed here: GANTRY_TENSORRT=true would run on CUDA alone"
fi

say "── figures"
grep -h "through the agent\|bare\|ratio\|session.run" "$LOGS/ocr.log" "$LOGS/rmbg.log" || true
grep -h "batches the child ran\|batch limit\|jobs succeeded\|PASS\|FAIL" "$LOGS/oom.log" || true
nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu,temperature.gpu --format=csv

# Each "ratio agent / bare…" line against the 0.95 target.
missed=0
while read -r ratio; do
  if awk -v r="$ratio" 'BEGIN { exit !(r < 0.95) }'; then
    say "ratio $ratio is under the 0.95 target"
    missed=1
  fi
done < <(grep -h "ratio agent / bare" "$LOGS/ocr.log" "$LOGS/rmbg.log" | sed -E 's/.*: ([0-9.]+).*/\1/')
[ "$missed" = 0 ] || fail "the agent reached less than 0.95 of the bare loop"
say "PASS: doctor, OCR and rmbg on CUDA at >= 0.95 of the bare loop, out of memory handled"
