#!/usr/bin/env bash
# The new axes of the compile, graph, train, optim and width families on the GPU host, in
# one call: compile programs (the first chunks of every dtype, every pass) and one program of
# the entries public compile bugs name, side by side with the full tier of graph, train,
# optim and width through the binary. Everything lands under OUT_DIR.
#
# usage: bench/axes/gpu-call.sh GPUPROBE_BINARY OUT_DIR [LIMIT_S] [CHUNKS]
set -uo pipefail
bin="$1"; out="$2"; limit="${3:-500}"; chunks="${4:-0-2}"
python="${PYTHON:-python3}"
mkdir -p "$out"
keys=diagonal_scatter,slice_scatter,index_add,index_put,index_copy,index_fill,copysign,cumsum,amax,amin,atan2
keys=$keys,max.reduction_with_dim,nn.functional.dropout,clamp,masked_fill,select_scatter
timeout -s INT "$limit" "$python" bench/compile/measure.py --dtypes fp32,bf16,fp16,i64 --chunks "$chunks" --procs 6 \
  --out "$out/compile-chunks.jsonl" > "$out/compile-chunks.txt" 2>&1 &
chunks_pid=$!
timeout -s INT "$limit" "$python" bench/compile/measure.py --dtypes fp32,bf16,fp16 --keys "$keys" --procs 3 \
  --out "$out/compile-keys.jsonl" > "$out/compile-keys.txt" 2>&1 &
keys_pid=$!
bash bench/sweep/full-tier-run.sh "$bin" "$out" axes "$limit" --only 'optim.*' --only 'graph.*' --only 'train.*' --only 'width.*' \
  > /dev/null 2>&1
wait "$chunks_pid" "$keys_pid"
tail -n 80 "$out/axes.txt"
"$python" bench/axes/compile_summary.py "$out/compile-chunks.jsonl" "$out/compile-keys.jsonl"
