#!/usr/bin/env bash
# Second measurement run on the GPU host: the final build, the gpu-tests suite, the
# memtest over the free memory with and without an injected flip. Binaries staged in
# .dev/native/ (native_run example and the gpu-tests test binary); logs to $OUT.
set -u
BIN=${BIN:-.dev/native/native_run}
OUT=${OUT:-native-out}
mkdir -p "$OUT"
LOG="$OUT/h100-run2.txt"
run() { echo; echo "### $*"; "$@"; echo "### exit $?"; }
{
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
run nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo; echo "## 1. env mode, NVRTC from the torch wheels (site-packages)"
run "$BIN" --mode env --option 'site_packages=["/opt/torch/.venv/lib/python3.12/site-packages"]'
echo; echo "## 2. HIP only: the stray distro libamdhip64.so.5, no AMD GPU"
run "$BIN" --mode run --option 'runtime="hip"' --probe native.runtime.load --probe native.memtest.quick
echo; echo "## 3. gpu-tests suite (cargo test --features gpu-tests --test gpu)"
run .dev/native/gpu_tests --test-threads=1
echo; echo "## 4. quick probes"
run "$BIN" --mode run --probe native.runtime.load --probe native.kernel.launch \
  --probe native.copy.roundtrip.pageable --probe native.copy.roundtrip.pinned --probe native.copy.d2d \
  --probe native.memtest.quick --probe native.rtc.compile \
  --option 'site_packages=["/opt/torch/.venv/lib/python3.12/site-packages"]'
for i in 1 2; do
echo; echo "## 5.$i memtest full, defaults (fraction 0.97 of free)"
run "$BIN" --mode run --probe native.memtest.full
done
echo; echo "## 6. memtest full over 0.97 of free with an injected flip (offset 0x2468ACE0, bit 0)"
run "$BIN" --mode run --probe native.memtest.full --option 'inject_error={"offset":610839776,"bit":0}'
echo; echo "## 7. PyTorch copy_ reference, 4 GiB, median of 20 after 3 warm-ups"
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
grep -E '^(##|### exit|speed|memory |errors|diagnosis|torch|test result|test )' "$LOG"
