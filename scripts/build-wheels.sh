#!/usr/bin/env bash
# Builds the manylinux2014 (glibc 2.17) wheels for x86_64 and aarch64 with maturin and zig,
# then checks each with `auditwheel show` (docs/packaging.md says why zig and what the check
# means).
#
#   bash scripts/build-wheels.sh [OUT_DIR] [TARGET...]
#
# OUT_DIR defaults to dist/; the targets default to x86_64-unknown-linux-gnu and
# aarch64-unknown-linux-gnu. The tools (maturin, ziglang, auditwheel, pinned below) go into a
# virtual environment of their own under target/wheel-tools; rustup adds the Rust targets
# that are missing. Needs network access to PyPI and the Rust distribution server the first
# time. Exits non-zero when a wheel fails to build or is not manylinux2014-compatible.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
fi
policy=manylinux2014

tools=target/wheel-tools
want="maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2"
if [ ! -x "$tools/bin/python" ] || [ "$(cat "$tools/.requirements" 2> /dev/null)" != "$want" ]; then
    echo "setting up $tools ($want)" >&2
    python3 -m venv "$tools"
    # shellcheck disable=SC2086
    "$tools/bin/python" -m pip install --quiet $want
    echo "$want" > "$tools/.requirements"
fi
# maturin finds zig through the ziglang package of the interpreter that runs it.
export PATH="$PWD/$tools/bin:$PATH"

# A wheel carries the commit like the sdist does (the kb crate's build script reads it).
if [ -z "${GPUPROBE_BUILD_COMMIT:-}" ] && commit=$(git rev-parse HEAD 2> /dev/null); then
    export GPUPROBE_BUILD_COMMIT=$commit
fi

mkdir -p "$out"
status=0
for target in "${targets[@]}"; do
    if command -v rustup > /dev/null 2>&1 && ! rustup target list --installed | grep -qx "$target"; then
        rustup target add "$target"
    fi
    echo "== $target: maturin build --release --zig --compatibility $policy" >&2
    maturin build --release --zig --compatibility "$policy" --target "$target" --out "$out" >&2
    arch=${target%%-*}
    wheel=$(ls -t "$out"/gpuprobe-*"$arch".whl | head -n 1)
    echo "== auditwheel show $wheel" >&2
    report=$(auditwheel show "$wheel" 2>&1)
    echo "$report"
    # auditwheel names the most specific policy the wheel satisfies; 2014 is manylinux_2_17.
    if ! grep -Eq "manylinux_2_17_$arch|manylinux2014_$arch" <<< "$report"; then
        echo "$wheel is not $policy-compatible (see above)" >&2
        status=1
    fi
done
exit "$status"
