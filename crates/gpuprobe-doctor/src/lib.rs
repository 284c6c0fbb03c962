//! Judge, engine, diagnosis and workaround search.
//!
//! - [`judge`] turns observations into verdicts by each probe's declared rule;
//! - [`engine`] executes a plan of probes through supervised workers, judges each result
//!   and appends it to the run directory as it arrives;
//! - [`schedule`] decides when each of the engine's lanes starts and how many CPU threads
//!   its workers get;
//! - [`diagnose`] places failures on a layer of the stack with the evidence for it;
//! - [`session`] plans a probe session, runs it and assembles its report (`gpuprobe
//!   check`, and the starting check of `gpuprobe fix`);
//! - [`fix`] searches for the settings that cure a run's failures (`gpuprobe fix`);
//! - [`live_stack`] reads this machine's full fingerprint with the interpreter's view;
//! - [`memtest`] runs the VRAM pattern probe alone in a supervised native worker;
//! - [`profile_file`] reads, checks, writes and exports profile files, and [`stack`]
//!   computes the stack key a profile's proof depends on.

pub mod diagnose;
pub mod engine;
pub mod fix;
pub mod judge;
pub mod lanes;
pub mod live_stack;
pub mod memtest;
pub mod profile_file;
pub mod repro;
pub mod schedule;
pub mod session;
pub mod stack;
pub mod suggest;
#[cfg(test)]
mod test_support;

pub use judge::judge;
