#!/usr/bin/env bash
# What `gpuprobe run` adds to a job's run time: `gpuprobe run -- true` against `true`, and
# with a profile (validation and the stack check: a files-only fingerprint and torch's
# version read by the interpreter). Uses hyperfine when installed, else a timed loop.
#
#   bench/run-overhead.sh [GPUPROBE] [PYTHON]
#
# GPUPROBE defaults to target/release/gpuprobe (built if missing), PYTHON to python3 on PATH
# (the interpreter whose torch the profile's stack is compared with). Prints the numbers;
# the target is under 1 s of added time.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${1:-target/release/gpuprobe}"
python="${2:-$(command -v python3 || true)}"
if [ ! -x "$bin" ]; then
    echo "building $bin" >&2
    cargo build --release -q -p gpuprobe
fi
runs="${RUNS:-50}"
# The program, not the shell builtin: what `gpuprobe run -- true` starts.
true_bin="$(type -P true)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A profile proven on this machine: this machine's stack key plus one catalogue setting.
python_args=()
if [ -n "$python" ]; then
    python_args=(--python "$python")
fi
{
    printf 'profile_version = 1\ncreated_by = "bench"\ncreated_at = "2026-01-01T00:00:00Z"\n\n'
    printf '[env]\nHSA_ENABLE_SDMA = "0"\n\n'
    "$bin" profile stack "${python_args[@]}"
} > "$work/profile.toml"
"$bin" profile check "$work/profile.toml" "${python_args[@]}" >&2

echo "gpuprobe: $bin ($("$bin" --version))"
echo "python:   ${python:-none}"
echo "machine:  $(uname -srm), $(nproc) CPU(s)"
echo

if command -v hyperfine >/dev/null 2>&1; then
    hyperfine --warmup 5 --runs "$runs" -N \
        "$true_bin" \
        "$bin run -- $true_bin" \
        "$bin run --profile $work/profile.toml ${python_args[*]} -- $true_bin" \
        --export-markdown "$work/results.md" >&2
    cat "$work/results.md"
    exit 0
fi

# No hyperfine: time a loop of each command and print the mean per run.
mean_ms() {
    local start end
    start=$(date +%s%N)
    for _ in $(seq "$runs"); do
        "$@" >/dev/null 2>&1
    done
    end=$(date +%s%N)
    echo $(( (end - start) / runs / 1000 ))
}
t_true=$(mean_ms "$true_bin")
t_run=$(mean_ms "$bin" run -- "$true_bin")
t_profile=$(mean_ms "$bin" run --profile "$work/profile.toml" "${python_args[@]}" -- "$true_bin")
printf '%-48s %10s %12s\n' "command ($runs runs each, no hyperfine)" "mean µs" "added µs"
printf '%-48s %10d %12s\n' "$true_bin" "$t_true" "-"
printf '%-48s %10d %12d\n' "gpuprobe run -- true" "$t_run" "$(( t_run - t_true ))"
printf '%-48s %10d %12d\n' "gpuprobe run --profile P -- true" "$t_profile" "$(( t_profile - t_true ))"
