//! libFuzzer target `protocol`: a worker's event stream through the supervisor's
//! protocol reader, and as the output tail it quotes.
//! The body is `gpuprobe_fuzz_targets::protocol`, shared with the stable regression replay
//! CI runs (`crates/gpuprobe-fuzz-targets/tests/replay.rs`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpuprobe_fuzz_targets::protocol(data));
