#!/usr/bin/env bash
# Builds the Python source archive (sdist) and checks that it carries everything the build
# embeds: the knowledge base, the probe package, the simulation presets, the tolerance
# table, the license texts and the commit it was made from (docs/packaging.md).
#
#   bash scripts/build-sdist.sh [OUT_DIR]      (default: dist/)
#
# MATURIN names the maturin to run (default: maturin on PATH, else .venv/bin/maturin).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
maturin=${MATURIN:-}
if [ -z "$maturin" ]; then
    if command -v maturin > /dev/null 2>&1; then
        maturin=maturin
    elif [ -x .venv/bin/maturin ]; then
        maturin=.venv/bin/maturin
    else
        echo "maturin is not installed: pip install 'maturin>=1.7,<2' (or set MATURIN)" >&2
        exit 2
    fi
fi
# An sdist has no .git: the commit travels in a file the kb crate's build script reads.
commit_file=crates/gpuprobe-kb/BUILD_COMMIT
if [ ! -e "$commit_file" ] && commit=$(git rev-parse HEAD 2> /dev/null); then
    echo "$commit" > "$commit_file"
    trap 'rm -f "$commit_file"' EXIT
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
archive="$out/gpuprobe-$version.tar.gz"
rm -f "$archive"
log=$(mktemp)
if ! "$maturin" sdist --out "$out" > "$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
python3 scripts/check_sdist.py "$archive"
echo "$archive"
