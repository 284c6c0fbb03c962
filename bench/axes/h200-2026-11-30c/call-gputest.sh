#!/usr/bin/env bash
# Call 6 of 2026-11-30c, one H200: the GPU tests of the filling probes (`pytest -m gpu`) on
# the host, with the tree as it is and with alloc/run.py as it was before the mend.
# Prepared here (carried to the host under .dev/): .dev/wheels (pytest and its dependencies,
# `pip download --only-binary=:all: --python-version 3.12 --no-deps pytest pluggy iniconfig
# packaging`), .dev/old-run.py (`git show 56bba0b:python/gpuprobe/worker/probes/alloc/run.py`).
set -u
python3 -m pip install -q --no-index --find-links .dev/wheels --target /tmp/pt pytest >/dev/null 2>&1 || echo "pip failed"
export PYTHONPATH=/tmp/pt
echo "== fixed tree"
python3 -m pytest tests/python/test_families.py -m gpu -k "filling_probe or families_report" -q -p no:cacheprovider 2>&1 | tail -8
cp python/gpuprobe/worker/probes/alloc/run.py /tmp/new-run.py
cp .dev/old-run.py python/gpuprobe/worker/probes/alloc/run.py
echo "== before the fix"
python3 -m pytest tests/python/test_families.py -m gpu -k "filling_probe" -q -p no:cacheprovider 2>&1 | tail -8
cp /tmp/new-run.py python/gpuprobe/worker/probes/alloc/run.py
