//! Integration tests of the gpuprobe binary: the engine end to end against the real Python
//! worker and a real CPU PyTorch (the interpreter named by `GPUPROBE_TEST_PYTHON`, which
//! `scripts/test.sh` sets up), the protocol under crashes, hangs, garbage and broken
//! interpreters, resume after a kill, the workaround search (`fix`), the job launcher
//! (`run`) and profiles, triage through the knowledge base and the lint, and the other
//! commands.

mod bundle;
mod check;
mod commands;
mod completions;
mod conventions;
mod env_parity;
mod exports;
mod faults;
mod fix;
mod fix_resume;
mod fix_switches;
mod fleet;
mod golden;
#[cfg(feature = "gpu-tests")]
mod gpu_faults;
mod health;
mod hostile_text;
mod kb_native_ids;
mod library_output;
mod outputs_and_arguments;
mod protocol;
mod report;
mod repro;
mod resume_and_interrupt;
mod run;
mod runs;
mod suggested_commands;
mod support;
mod triage;
mod triage_kb;
mod triage_limits;
mod zygote;
