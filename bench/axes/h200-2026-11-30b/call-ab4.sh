#!/usr/bin/env bash
# Call 4 of 2026-11-30b: this change's build with its Python workers forked from the zygote
# (A, the default) against the same build with every worker started (B, GPUPROBE_ZYGOTE=0,
# through a two-line wrapper), interleaved with the floor (bench/ab-standard.sh).
set -uo pipefail
bin="$1"; out="$2"; pairs="${3:-4}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
wrapper="$out/gpuprobe-nozygote"
mkdir -p "$out"
printf '#!/bin/sh\nGPUPROBE_ZYGOTE=0 exec "%s" "$@"\n' "$(realpath "$bin")" > "$wrapper"
chmod +x "$wrapper"
bash "$root/bench/ab-standard.sh" "$bin" "$wrapper" "$out/ab" "$pairs"
