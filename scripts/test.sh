#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the Python
# probe tests, both against a real CPU PyTorch installed in .venv by python-test-env.sh.
#
# Both halves always run, even when the first fails: a Rust failure must not hide the state
# of the Python tests (or the reverse). The script ends with one summary line per half and
# exits non-zero when either half failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Keep the colours of an interactive run although the output also goes through tee.
rust_color=()
pytest_color=()
if [ -t 1 ]; then
    rust_color=(--color always)
    pytest_color=(--color=yes)
fi

# The last line of a log that matches a pattern, without colour codes: the runner's own
# count of passed and failed tests.
last_match() {
    sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -E "$2" | tail -n 1 | sed 's/^[[:space:]]*//'
}

env_ok=1
if ! bash scripts/python-test-env.sh; then
    env_ok=0
    echo "scripts/python-test-env.sh failed: the Python tests cannot run, and the Rust tests that start the Python worker will fail" >&2
fi
export GPUPROBE_TEST_PYTHON="$PWD/.venv/bin/python"

# cargo-nextest runs each test in a process of its own (the project's runner); a machine
# without it runs the same tests with cargo's own runner rather than failing to start.
if cargo nextest --version > /dev/null 2>&1; then
    rust_runner="cargo nextest"
    cargo nextest run --workspace --no-fail-fast ${rust_color[@]+"${rust_color[@]}"} 2>&1 | tee "$logs/rust.log"
    rust_rc=${PIPESTATUS[0]}
    rust_counts=$(last_match "$logs/rust.log" '^[[:space:]]*Summary .* tests? run')
else
    echo "cargo-nextest is not installed: running the Rust tests with cargo test (cargo install cargo-nextest --locked for the usual runner)" >&2
    rust_runner="cargo test"
    cargo test --workspace --no-fail-fast ${rust_color[@]+"${rust_color[@]}"} 2>&1 | tee "$logs/rust.log"
    rust_rc=${PIPESTATUS[0]}
    # cargo test prints one result line per test binary; add them up.
    rust_counts=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/rust.log" |
        awk '/^test result:/ { n++; p += $4; f += $6; i += $8 } END { if (n) printf "%d passed, %d failed, %d ignored", p, f, i }')
fi

if [ "$env_ok" = 1 ]; then
    .venv/bin/python -m pytest tests/python -q ${pytest_color[@]+"${pytest_color[@]}"} 2>&1 | tee "$logs/python.log"
    python_rc=${PIPESTATUS[0]}
    python_counts=$(last_match "$logs/python.log" '(passed|failed|error|skipped|no tests ran)')
else
    python_rc=1
    python_counts="not run: .venv could not be set up (scripts/python-test-env.sh)"
fi

# One line per half: its verdict, the runner's exit status and the runner's own counts.
summary() {
    local half=$1 rc=$2 counts=$3
    local verdict=passed
    [ "$rc" -ne 0 ] && verdict=FAILED
    printf '%s %s (exit %d)%s\n' "$half:" "$verdict" "$rc" "${counts:+; $counts}"
}
echo
echo "== test summary =="
summary "rust ($rust_runner)" "$rust_rc" "$rust_counts"
summary "python (pytest)" "$python_rc" "$python_counts"

[ "$rust_rc" -eq 0 ] && [ "$python_rc" -eq 0 ]
