#!/usr/bin/env bash
# Regenerates kernels/gpuprobe_kernels.ptx and checks it with ptxas. Needs an NVRTC and a
# ptxas, e.g. from the pip wheels nvidia-cuda-nvrtc-cu12 and nvidia-cuda-nvcc-cu12 (no GPU
# needed):
#   NVRTC=.../nvidia/cuda_nvrtc/lib/libnvrtc.so.12 PTXAS=.../nvidia/cuda_nvcc/bin/ptxas \
#     crates/gpuprobe-gpu/kernels/regen-ptx.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cargo run -q -p gpuprobe-gpu --example regen_ptx -- "${NVRTC:?set NVRTC to a libnvrtc.so}"
for arch in sm_70 sm_90; do
  "${PTXAS:?set PTXAS to a ptxas binary}" -arch="$arch" -v "$here/gpuprobe_kernels.ptx" -o /dev/null 2>&1 \
    | grep -E 'error|registers' || true
done
