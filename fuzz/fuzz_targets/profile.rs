//! libFuzzer target `profile`: a profile file through the parser `--profile FILE`
//! runs, then writing it back and exporting it.
//! The body is `gpuprobe_fuzz_targets::profile`, shared with the stable regression replay
//! CI runs (`crates/gpuprobe-fuzz-targets/tests/replay.rs`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpuprobe_fuzz_targets::profile(data));
