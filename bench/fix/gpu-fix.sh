#!/usr/bin/env bash
# `gpuprobe fix` on real failures of the GPU host, restricted to framework-switch and layout
# candidates, then the attention training job (bench/fix/attention_job.py) without and with
# the profile it wrote. Everything lands under OUT_DIR.
#
# usage: bench/fix/gpu-fix.sh GPUPROBE_BINARY OUT_DIR [FIX_ARGS...]
# (FIX_ARGS replace the default probe selection and candidates below.)
set -uo pipefail
bin="$1"; out="$2"; shift 2
python="${PYTHON:-python3}"
mkdir -p "$out"
run=/tmp/gpuprobe-fix
rm -rf "$run"
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  args=(
    --only 'nn.sdpa.matrix.bf16.default' --only 'nn.sdpa.matrix.bf16.default.bwd'
    --only 'nn.sdpa.matrix.bf16.cudnn.bwd'
    --only 'sweep.nn.functional.avg_pool2d.fp32' --only 'sweep.nn.functional.embedding_bag.bf16'
    --candidate torch.backends.cuda.enable_cudnn_sdp=False
    --candidate torch.backends.cuda.enable_mem_efficient_sdp=False
    --candidate torch.backends.cuda.enable_flash_sdp=False
    --candidate torch.backends.cudnn.enabled=False
    --candidate gpuprobe.inputs.contiguous=True
  )
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
  "$python" -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
  start=$(date +%s.%N)
  "$bin" fix --tier full --device cuda:0 --run-dir "$run" --max-runs 14 --sentinels 2 "${args[@]}"
  echo "fix rc=$? wall $("$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s"
} > "$out/fix.txt" 2> "$out/fix.stderr"
for name in fix.json profile.toml report.json; do
  [ -f "$run/$name" ] && cp "$run/$name" "$out/"
done
if [ -f "$run/profile.toml" ]; then
  "$bin" profile show "$run/profile.toml" > "$out/profile-show.txt" 2>&1
  "$bin" profile export "$run/profile.toml" --format python > "$out/profile.py" 2>&1
  {
    echo "== without the profile"
    "$python" bench/fix/attention_job.py; echo "rc=$?"
    echo "== gpuprobe run --profile"
    "$bin" run --profile "$run/profile.toml" -- "$python" bench/fix/attention_job.py; echo "rc=$?"
  } > "$out/job.txt" 2>&1
fi
tail -n 60 "$out/fix.txt"; tail -n 5 "$out/fix.stderr"; cat "$out/job.txt" 2>/dev/null
