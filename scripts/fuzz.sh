#!/usr/bin/env bash
# Fuzzes gpuprobe's parsers and worker-protocol reader with libFuzzer (cargo-fuzz).
#
#   scripts/fuzz.sh TARGET [SECONDS] [JOBS]  fuzz TARGET for SECONDS (default 60) with JOBS
#                                            parallel workers (default 1)
#   scripts/fuzz.sh build-all                build every target (release, debug assertions,
#                                            ASan) and pack fuzz/dist/gpuprobe-fuzz.tar.gz
#   scripts/fuzz.sh list                     name the targets
#
# In a checkout it installs cargo-fuzz when missing, builds the target, and seeds
# fuzz/corpus/TARGET from the checked-in inputs (fuzz/seed-sources.txt, fuzz/seeds/TARGET,
# fuzz/regressions/TARGET) before every run, so the corpus only ever grows. Unpacked from
# the build-all bundle (this script beside bin/ and seeds/) it needs no cargo: it runs the
# prebuilt binaries the same way. Crashes and timeouts land in artifacts/TARGET/; the
# totals are printed at the end, and the exit status is 1 when the run found any.
# fuzz/README.md has the details.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [[ -d "$here/bin" ]]; then
    # The build-all bundle: binaries and seeds beside this script.
    bundle=1
    work="$here"
    bin_dir="$here/bin"
else
    bundle=0
    repo="$(cd "$here/.." && pwd)"
    work="$repo/fuzz"
    bin_dir="$work/target/x86_64-unknown-linux-gnu/release"
fi

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

targets() {
    if ((bundle)); then
        ls "$bin_dir"
    else
        for file in "$work"/fuzz_targets/*.rs; do
            basename "$file" .rs
        done
    fi
}

# Largest input per target: a paste or a worker's event stream can be long; a TOML file
# the CLI reads is small, and longer inputs only slow the fuzzer down.
max_len() {
    case "$1" in
        triage | protocol) echo 1048576 ;;
        *) echo 65536 ;;
    esac
}

need_cargo_fuzz() {
    if ! cargo +nightly fuzz --version > /dev/null 2>&1; then
        echo "cargo-fuzz is not installed: installing it (cargo +nightly install cargo-fuzz --locked)" >&2
        cargo +nightly install cargo-fuzz --locked
    fi
}

# Release build with debug assertions and overflow checks, AddressSanitizer on (the
# cargo-fuzz defaults, spelled out); output in fuzz/target, apart from the workspace's.
build() {
    need_cargo_fuzz
    (cd "$repo" && cargo +nightly fuzz build -O -a "$@")
}

# Copies every checked-in input of target $1 into directory $2, named by content hash (as
# libFuzzer names corpus files), so re-seeding adds nothing twice.
seed() {
    local target="$1" into="$2" name dir pattern file
    mkdir -p "$into"
    {
        while read -r name dir pattern; do
            if [[ "$name" == "$target" ]]; then
                find "$repo/$dir" -type f -name "$pattern"
            fi
        done < "$work/seed-sources.txt"
        for dir in "$work/seeds/$target" "$work/regressions/$target"; do
            if [[ -d "$dir" ]]; then
                find "$dir" -type f
            fi
        done
    } | while read -r file; do
        cp "$file" "$into/$(sha1sum < "$file" | cut -c1-40)"
    done
}

build_all() {
    ((bundle)) && { echo "build-all needs a checkout with cargo, not the bundle" >&2; exit 2; }
    build
    local dist="$work/dist" pack="$work/dist/gpuprobe-fuzz" target
    rm -rf "$dist"
    mkdir -p "$pack/bin" "$pack/seeds"
    for target in $(targets); do
        cp "$bin_dir/$target" "$pack/bin/"
        seed "$target" "$pack/seeds/$target"
    done
    cp "$0" "$pack/fuzz.sh"
    cp "$work/README.md" "$pack/README.md"
    tar -C "$dist" -czf "$dist/gpuprobe-fuzz.tar.gz" gpuprobe-fuzz
    echo "binaries: $bin_dir/{$(targets | paste -sd, -)}"
    echo "bundle:   $dist/gpuprobe-fuzz.tar.gz (bin/, seeds/, fuzz.sh, README.md)"
    echo "on the host: tar xzf gpuprobe-fuzz.tar.gz && cd gpuprobe-fuzz && ./fuzz.sh TARGET 3600 16"
}

run() {
    local target="$1" seconds="$2" jobs="$3"
    local known
    known="$(targets | paste -sd' ' -)"
    if [[ " $known " != *" $target "* ]]; then
        echo "unknown target $target; targets: $known" >&2
        exit 2
    fi
    local corpus="$work/corpus/$target" artifacts="$work/artifacts/$target"
    if ((bundle)); then
        mkdir -p "$corpus"
        cp -n "$work/seeds/$target"/* "$corpus"/ 2> /dev/null || true
    else
        build "$target"
        seed "$target" "$corpus"
    fi
    mkdir -p "$artifacts"
    local log="$artifacts/run-$(date -u +%Y%m%dT%H%M%SZ).log" marker
    marker="$(mktemp)"
    echo "fuzzing $target for ${seconds}s with $jobs job(s); corpus $corpus ($(ls "$corpus" | wc -l) inputs), log $log" >&2
    # Fork mode keeps going past a crash or timeout (each is saved to $artifacts) and prints
    # running totals; -timeout bounds one input, -max_len the input size.
    set +e
    "$bin_dir/$target" \
        -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -max_len="$(max_len "$target")" \
        -artifact_prefix="$artifacts/" \
        "$corpus" 2>&1 | tee "$log" | grep --line-buffered -v '^  NEW_FUNC'
    # (The log keeps the NEW_FUNC lines fork mode prints for every newly covered function.)
    set -e
    local last found
    last="$(grep -E '^#[0-9]+: cov: ' "$log" | tail -n 1)"
    found="$(find "$artifacts" -type f -newer "$marker" ! -name '*.log' | sort)"
    rm -f "$marker"
    echo
    echo "== $target: ${seconds}s, $jobs job(s)"
    if [[ -n "$last" ]]; then
        # `#EXECS: cov: C ft: F corp: N exec/s: R oom/timeout/crash: O/T/X time: Ss job: J ...`
        echo "execs: $(sed -E 's/^#([0-9]+):.*/\1/' <<< "$last")"
        echo "coverage: $(sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/\1 edges, \2 features/' <<< "$last")"
        echo "corpus: $(sed -E 's/.*corp: ([0-9]+).*/\1/' <<< "$last") inputs"
        echo "oom/timeout/crash: $(sed -E 's/.*oom\/timeout\/crash: ([0-9\/]+).*/\1/' <<< "$last")"
    else
        echo "no status line from libFuzzer: see $log"
    fi
    if [[ -n "$found" ]]; then
        echo "new artifacts (fuzz/README.md: reproduce, minimise, add to regressions/):"
        sed 's/^/  /' <<< "$found"
        exit 1
    fi
    echo "no crashes, timeouts or OOMs"
}

case "${1:-}" in
    "" | -h | --help) usage ;;
    list) targets ;;
    build-all) build_all ;;
    *) run "$1" "${2:-60}" "${3:-1}" ;;
esac
