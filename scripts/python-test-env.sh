#!/usr/bin/env bash
# Prepares what the tests need beyond Rust: the system tools some tests run, then .venv with
# the Python packages (a real PyTorch among them), created once and reused by later runs.
# Override the interpreter with PYTHON=/path/to/python3.
#
# The system tools are looked up on every run (a lookup each when present, so nothing is
# installed twice):
# - a C++ compiler: Inductor's CPU backend compiles C++ with it (tests/python/test_compile.py,
#   test_train.py); $CXX, g++, clang++ or c++, as the compile family looks for one;
# - Chromium: the browser tests of the HTML report and of `gpuprobe ui` (tests/python/test_html_browser.py,
#   test_ui_browser.py, both through chromium_driver.py); $CHROMIUM,
#   chromium, chromium-browser or Google Chrome, as that test looks for one;
# - promtool (Debian's prometheus) and xmllint (libxml2-utils): the exports' tests check the
#   Prometheus metrics with `promtool check metrics` and validate the JUnit XML against its
#   schema (crates/gpuprobe-report/src/export/checks.rs, crates/gpuprobe/tests/it/exports.rs);
#   those tests fail without them when CI is set, and skip and say so otherwise;
# - Slurm and MUNGE (Debian's slurm-wlm and munge): tests/python/test_slurm.py starts munged,
#   slurmctld and slurmd on this host and runs deploy/slurm/ against them; it fails without
#   them when CI is set, and skips and says so otherwise;
# - Python's venv module with ensurepip, only while .venv is still to be created (Debian and
#   Ubuntu ship it apart from Python, as python3.X-venv).
# A missing one is installed with apt-get when the script runs as root on a machine that has
# apt-get (Debian, Ubuntu). Elsewhere it says what is missing: the compiler's and Chromium's
# tests then skip and say why; without the venv module .venv cannot be created and the script
# fails with the command that installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"

can_apt() {
    [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1
}

# Installs Debian packages quietly; fails (the caller says what that costs) rather than exits.
apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq > /dev/null || return 1
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null
}

have_any() {
    local name
    for name in "$@"; do
        command -v "$name" > /dev/null 2>&1 && return 0
    done
    return 1
}

# Installs one tool's packages when the tool is missing. $1: whether it is present (a
# command), $2: what it is for, $3: what skips without it, then the Debian packages.
ensure_tool() {
    local present=$1 purpose=$2 skips=$3
    shift 3
    if "$present"; then
        return 0
    fi
    if ! can_apt; then
        echo "$purpose is missing and cannot be installed here (needs root and apt-get; the Debian packages: $*): $skips will skip" >&2
        return 0
    fi
    echo "installing $purpose ($*)" >&2
    if ! apt_install "$@" || ! "$present"; then
        echo "$purpose could not be installed ($*): $skips will skip" >&2
    fi
}

have_compiler() {
    [ -n "${CXX:-}" ] || have_any g++ clang++ c++
}

have_chromium() {
    [ -n "${CHROMIUM:-}" ] || have_any chromium chromium-browser google-chrome google-chrome-stable
}

have_promtool() {
    have_any promtool
}

have_xmllint() {
    have_any xmllint
}

ensure_tool have_compiler "a C++ compiler for Inductor's CPU backend" "the compile and train families' tests" g++
ensure_tool have_chromium "Chromium for the HTML report's browser test" "the browser test" chromium fonts-dejavu-core
ensure_tool have_promtool "promtool for the Prometheus export's check" "the export tests (failing under CI)" prometheus
ensure_tool have_xmllint "xmllint for the JUnit export's schema check" "the export tests (failing under CI)" libxml2-utils

# The Kubernetes deployment's test (tests/python/test_deploy_kubernetes.py) builds
# deploy/kubernetes with `kubectl kustomize` (Debian's kubernetes-client; any kubectl will do)
# and checks its plugin script with shellcheck; it fails without them when CI is set, and
# skips those checks and says so otherwise. (Its schemas come from tests/python/requirements.txt.)
have_kubectl() {
    have_any kubectl
}

have_shellcheck() {
    have_any shellcheck
}

ensure_tool have_kubectl "kubectl for the Kubernetes deployment's kustomize build" "the Kubernetes deployment test (failing under CI)" kubernetes-client
ensure_tool have_shellcheck "shellcheck for the Kubernetes plugin script" "the Kubernetes deployment test (failing under CI)" shellcheck

# The Slurm integration test (tests/python/test_slurm.py) starts munged, slurmctld and slurmd
# on this host; it fails without them when CI is set, and skips and says so otherwise.
have_slurm() {
    have_any slurmctld && have_any slurmd && have_any munged && have_any mungekey
}
ensure_tool have_slurm "Slurm and MUNGE for the Slurm integration test" "tests/python/test_slurm.py (failing under CI)" slurm-wlm munge

stamp=.venv/.requirements.sha256
want=$(sha256sum tests/python/requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

if ! command -v "$python" > /dev/null 2>&1; then
    echo "no Python interpreter '$python': install python3 or set PYTHON=/path/to/python3" >&2
    exit 1
fi

# `python -m venv` needs ensurepip to put pip into .venv; Debian and Ubuntu leave it out of
# their python3 and ship it as python3.X-venv. Only their own interpreter (prefix /usr) can be
# helped by that package.
have_venv() {
    "$python" -c 'import ensurepip, venv' > /dev/null 2>&1
}
if ! have_venv; then
    version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    prefix=$("$python" -c 'import sys; print(sys.base_prefix)')
    package="python$version-venv"
    if [ "$prefix" = /usr ] && can_apt; then
        echo "installing Python's venv module ($package)" >&2
        apt_install "$package" || true
    fi
    if ! have_venv; then
        if [ "$prefix" = /usr ]; then
            echo "$python has no venv module with ensurepip, so .venv cannot be created: install it with 'apt-get install $package' (as root), or set PYTHON to another python3" >&2
        else
            echo "$python has no venv module with ensurepip, so .venv cannot be created: set PYTHON to a python3 that has one" >&2
        fi
        exit 1
    fi
fi

# PyPI's torch wheel for Linux x86_64 is its CUDA build: it runs on the CPU, but it pulls the
# NVIDIA libraries with it (about 3 GB of downloads; .venv then takes about 6 GB of disk).
echo "setting up .venv (PyTorch and test packages: about 3 GB to download, a few minutes the first time)" >&2
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r tests/python/requirements.txt
echo "$want" > "$stamp"
