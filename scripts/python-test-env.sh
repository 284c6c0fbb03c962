#!/usr/bin/env bash
# Creates .venv with the Python packages the tests need (a real CPU PyTorch among them),
# once; later runs reuse it. Override the interpreter with PYTHON=/path/to/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
stamp=.venv/.requirements.sha256
want=$(sha256sum tests/python/requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "setting up .venv (PyTorch and test packages; takes a few minutes the first time)" >&2
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r tests/python/requirements.txt
echo "$want" > "$stamp"
