#!/usr/bin/env bash
# Checks that every publishable crate packages for crates.io (`cargo package`) and that each
# package carries the files its build embeds and the license texts (docs/packaging.md).
#
#   bash scripts/check-package.sh [--verify]
#
# Without --verify the packages are listed and archived but not built again from their
# archives (that takes minutes; the sdist test builds the same sources). Packages land in
# target/package/.
set -euo pipefail
cd "$(dirname "$0")/.."
verify=(--no-verify)
if [ "${1:-}" = "--verify" ]; then
    verify=()
fi
# --allow-dirty: a check of the working tree, not a release (a release runs on a clean tree).
cargo package --workspace --exclude gpuprobe-fuzz-targets --allow-dirty --quiet ${verify[@]+"${verify[@]}"}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
status=0
fail() {
    echo "check-package: $*" >&2
    status=1
}
# (grep -q would stop reading early: tar then dies of SIGPIPE and pipefail calls the
# file missing; every grep below reads the whole listing.)
listing() {
    tar tzf "target/package/$1-$version.crate" | sed "s|^$1-$version/||"
}
count_in() {
    # How many of the package's files lie under a directory and end in a suffix.
    listing "$1" | grep -c "^$2/.*$3\$" || true
}

for manifest in crates/*/Cargo.toml; do
    crate=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -n 1)
    grep -q '^publish = false' "$manifest" && continue
    [ -f "target/package/$crate-$version.crate" ] || {
        fail "$crate: no package"
        continue
    }
    for license in LICENSE-MIT LICENSE-APACHE; do
        listing "$crate" | grep -x "$license" > /dev/null || fail "$crate: lacks $license"
    done
done

want=$(find kb -maxdepth 1 -name '*.toml' | wc -l)
got=$(count_in gpuprobe-kb kb .toml)
[ "$got" -eq "$want" ] || fail "gpuprobe-kb carries $got of the $want kb/*.toml files"
want=$(find simulate/presets -name '*.toml' | wc -l)
got=$(count_in gpuprobe-runner presets .toml)
[ "$got" -eq "$want" ] || fail "gpuprobe-runner carries $got of the $want presets"
want=$(git ls-files python/gpuprobe | grep -cE '\.(py|typed|json)$')
got=$(listing gpuprobe-runner | grep -cE '^python-package/.*\.(py|typed|json)$' || true)
[ "$got" -eq "$want" ] || fail "gpuprobe-runner carries $got of the $want probe-package files"
listing gpuprobe-doctor | grep -x tolerances.json > /dev/null || fail "gpuprobe-doctor lacks tolerances.json"

if [ "$status" -eq 0 ]; then
    echo "check-package: every crate packages with its embedded files and license texts" >&2
fi
exit "$status"
