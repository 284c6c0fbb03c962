//! libFuzzer target `simulate_spec`: a `--simulate FILE` fault file through its parser,
//! then the plan JSON the worker receives.
//! The body is `gpuprobe_fuzz_targets::simulate_spec`, shared with the stable regression replay
//! CI runs (`crates/gpuprobe-fuzz-targets/tests/replay.rs`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpuprobe_fuzz_targets::simulate_spec(data));
