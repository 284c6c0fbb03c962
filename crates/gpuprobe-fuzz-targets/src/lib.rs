//! The bodies of gpuprobe's fuzz targets: one function per target, taking the fuzzer's bytes.
//!
//! The libFuzzer binaries in `fuzz/` (nightly, cargo-fuzz) are one-line wrappers around
//! these functions, and the regression replay in `tests/replay.rs` (stable, run by CI) feeds
//! the checked-in seeds and every minimised crash under `fuzz/regressions/<target>/` through
//! the very same functions, so a bug the fuzzer found stays fixed without nightly.
//!
//! Each function calls the public entry point the CLI uses for that input and then checks
//! invariants that are cheap to state (what is parsed can be written and read back, line
//! numbers lie inside the input); a violated invariant panics, which the fuzzer records as
//! a crash. Inputs are bytes, handed over the way the CLI reads them: pastes for triage and
//! worker output as lossy UTF-8, TOML files only when they are UTF-8 (the CLI reads them
//! with `read_to_string`, which refuses anything else before any parser runs).
//!
//! `fuzz/README.md` says how to run the targets and how a crash becomes a regression input.

mod kb_entry;
mod profile;
mod protocol;
mod simulate_spec;
mod triage;

pub use kb_entry::kb_entry;
pub use profile::profile;
pub use protocol::protocol;
pub use simulate_spec::simulate_spec;
pub use triage::triage;

/// One fuzz target: its name (the binary's and the directories' under `fuzz/`) and body.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Name of the cargo-fuzz binary and of `fuzz/{seeds,regressions,corpus}/<name>/`.
    pub name: &'static str,
    /// The body: runs one input, panics on a bug.
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz.sh build-all` lists them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "triage",
        run: triage,
    },
    Target {
        name: "protocol",
        run: protocol,
    },
    Target {
        name: "kb_entry",
        run: kb_entry,
    },
    Target {
        name: "profile",
        run: profile,
    },
    Target {
        name: "simulate_spec",
        run: simulate_spec,
    },
];

/// A TOML file's text as the CLI gets it: `None` where `read_to_string` would refuse it.
fn utf8(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
