//! Integration tests of the gpuprobe binary: the engine end to end against the real Python
//! worker and a real CPU PyTorch (the interpreter named by `GPUPROBE_TEST_PYTHON`, which
//! `scripts/test.sh` sets up), the protocol under crashes, hangs, garbage and broken
//! interpreters, resume after a kill, and the other commands.

mod check;
mod commands;
mod protocol;
mod support;
