#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the Python
# probe tests, both against a real CPU PyTorch installed in .venv by python-test-env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-test-env.sh
export GPUPROBE_TEST_PYTHON="$PWD/.venv/bin/python"
cargo nextest run --workspace --no-fail-fast
.venv/bin/python -m pytest tests/python -q
