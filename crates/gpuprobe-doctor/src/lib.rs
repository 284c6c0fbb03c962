//! What gpuprobe's commands do, between the command line and the workers: plan a probe
//! session, run it, judge it, diagnose it, search for cures, write repro scripts.
//!
//! One public namespace per command the binary runs, each a small surface over private
//! modules:
//! - [`session`] plans a probe session, runs it and assembles its report (`gpuprobe check`,
//!   and the starting check of `gpuprobe fix`), and says how a signal cut it short
//!   ([`session::Interrupted`]);
//! - [`fix`] searches for the settings that cure a run's failures (`gpuprobe fix`);
//! - [`repro`] turns a failed result into a standalone script and an issue body
//!   (`gpuprobe repro`);
//! - [`memtest`] runs the VRAM pattern probe alone in a supervised native worker;
//! - [`profile`] reads, checks, writes and exports profile files.
//!
//! What the commands share is private, and re-exported here where a caller needs it:
//! - `plan`: which probes a tier and `--only` select ([`select`]), and how they are grouped
//!   into lanes and sized to the host ([`Lane`], [`lanes_for`], [`sized_lanes`]);
//! - `exec`: the engine that runs lanes through supervised workers, judges each result and
//!   appends it to the run directory as it arrives ([`execute`], [`EngineConfig`],
//!   [`Execution`]), and the schedule of lanes and CPU threads ([`worker_threads`]);
//! - `verdict`: the judge ([`judge`]), the diagnosis that places failures on a layer of the
//!   stack, and the follow-up commands findings suggest;
//! - `stack`: this machine's full fingerprint with the interpreter's view
//!   ([`live_fingerprint`]) and the stack key a profile's proof depends on ([`live_key`]).
//!
//! `unreachable_pub` flags a `pub` item no other crate can reach.

mod exec;
pub mod fix;
pub mod memtest;
mod plan;
pub mod profile;
pub mod repro;
pub mod session;
mod stack;
#[cfg(test)]
mod test_support;
mod verdict;

pub use exec::schedule::worker_threads;
pub use exec::{
    EngineConfig, Execution, Expander, HelloRecord, Progress, THREADS_VARIABLE, execute,
};
pub use plan::{Lane, LaneBudget, estimated_seconds, lanes_for, select, sized_lanes};
pub use stack::{live_fingerprint, live_key};
pub use verdict::judge;
