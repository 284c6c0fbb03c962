//! libFuzzer target `triage`: a pasted log through triage (every tool parser),
//! then the config lint and the knowledge-base matcher.
//! The body is `gpuprobe_fuzz_targets::triage`, shared with the stable regression replay
//! CI runs (`crates/gpuprobe-fuzz-targets/tests/replay.rs`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpuprobe_fuzz_targets::triage(data));
