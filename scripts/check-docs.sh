#!/usr/bin/env bash
# Checks that the API documentation of every workspace crate builds without a rustdoc
# warning: no broken intra-doc link, no link from public documentation to a private item,
# no bare URL, no stray HTML tag.
#
#   bash scripts/check-docs.sh
#
# One `cargo doc` for the whole workspace, without the dependencies' documentation (only
# this workspace's docs are ours to fix). --keep-going reports every crate that fails, not
# only the first. The documentation lands in target/doc/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --keep-going
