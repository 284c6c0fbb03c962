#!/usr/bin/env bash
# Measurements of the native runtime layer on the GPU host (see bench/RESULTS.md).
# Expects the release build of the `native_run` example at .dev/native/native_run
# (cargo build --release -p gpuprobe-gpu --example native_run; copied there because .dev/ is
# not tracked) and writes its logs to $OUT (or ./native-out).
set -u
BIN=${BIN:-.dev/native/native_run}
OUT=${OUT:-native-out}
mkdir -p "$OUT"
LOG="$OUT/h100-run.txt"
run() { echo; echo "### $*"; "$@"; echo "### exit $?"; }
{
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
run nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
run ldconfig -p | grep -E 'libcuda.so|libnvrtc.so|libamdhip64|libhiprtc'
run ldd /lib/x86_64-linux-gnu/libamdhip64.so.5
echo; echo "## 1. env mode (CUDA + HIP discovery)"
run "$BIN" --mode env
echo; echo "## 2. env mode, NVRTC from the torch wheels (site-packages)"
run "$BIN" --mode env --option 'site_packages=["/opt/torch/.venv/lib/python3.12/site-packages"]' --option 'runtime="cuda"'
echo; echo "## 3. HIP only: the stray distro libamdhip64.so.5, no AMD GPU"
run "$BIN" --mode run --option 'runtime="hip"' --probe native.runtime.load
echo; echo "## 4. quick + standard + full probes (CUDA)"
run "$BIN" --mode run --probe native.runtime.load --probe native.kernel.launch \
  --probe native.copy.roundtrip.pageable --probe native.copy.roundtrip.pinned --probe native.copy.d2d \
  --probe native.memtest.quick --probe native.copy.roundtrip.pageable.large \
  --probe native.copy.roundtrip.pinned.large --probe native.rtc.compile \
  --probe native.copy.roundtrip.pageable.huge
echo; echo "## 5. memtest full, defaults (fraction 0.97 of free)"
run "$BIN" --mode run --probe native.memtest.full
echo; echo "## 6. memtest full with an injected bit flip (offset 0x123456789, bit 42), fraction 0.5"
run "$BIN" --mode run --probe native.memtest.full --option 'fraction=0.5' \
  --option 'inject_error={"offset":4886718345,"bit":42}'
echo; echo "## 7. launch-shape sweep (16 GiB, random + moving inversions + own address)"
for block in 256 512 1024; do for waves in 1 2 4; do
  echo "# block=$block waves=$waves"
  "$BIN" --mode run --probe native.memtest.full --option 'max_bytes=17179869184' \
    --option 'patterns=["own_address","moving_inversions","random"]' \
    --option "block=$block" --option "waves=$waves" --option 'copy_reps=5' | grep -E '^speed'
done; done
echo; echo "## 8. kernels from NVRTC instead of the embedded PTX"
run "$BIN" --mode run --option 'kernel_source="nvrtc"' --probe native.kernel.launch --probe native.memtest.quick
echo; echo "## 9. PyTorch copy_ reference, 4 GiB, median of 20 after 3 warm-ups"
run python3 - <<'PY'
import torch
x = torch.empty(1 << 30, dtype=torch.float32, device="cuda").uniform_()
y = torch.empty_like(x)
ts = []
for i in range(23):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); y.copy_(x); e.record(); e.synchronize()
    if i >= 3: ts.append(s.elapsed_time(e))
ts.sort(); ms = ts[len(ts) // 2]
print(f"torch copy_ 4 GiB: {ms:.3f} ms median, {2 * x.numel() * 4 / ms / 1e6:.0f} GB/s (read + write)")
PY
run nvidia-smi --query-gpu=memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
} > "$LOG" 2>&1
grep -E '^(##|### exit|speed|memory |errors|diagnosis|# block|torch)' "$LOG"
