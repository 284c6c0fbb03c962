//! libFuzzer target `kb_entry`: a user's knowledge-base entry file through the
//! validation `--kb DIR` runs, then the matcher.
//! The body is `gpuprobe_fuzz_targets::kb_entry`, shared with the stable regression replay
//! CI runs (`crates/gpuprobe-fuzz-targets/tests/replay.rs`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpuprobe_fuzz_targets::kb_entry(data));
