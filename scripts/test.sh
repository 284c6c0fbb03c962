#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the Python
# probe tests, both against a real CPU PyTorch installed in .venv by python-test-env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-test-env.sh
export GPUPROBE_TEST_PYTHON="$PWD/.venv/bin/python"
# cargo-nextest runs each test in a process of its own (the project's runner); a machine
# without it runs the same tests with cargo's own runner rather than failing to start.
if cargo nextest --version > /dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
else
    echo "cargo-nextest is not installed: running the Rust tests with cargo test (cargo install cargo-nextest --locked for the usual runner)" >&2
    cargo test --workspace --no-fail-fast
fi
.venv/bin/python -m pytest tests/python -q
