//! Integration tests for gpuprobe-detect, one binary: parsers on every real fixture,
//! triage on messy pastes, the live collector on fake sysfs trees, the Python merge,
//! the text view, and never-panic properties.

mod collect_fake;
mod common;
mod fixture_files;
mod merge;
mod parse_amd_smi;
mod parse_buildinfo;
mod parse_collect_env;
mod parse_kernel_log;
mod parse_nvidia_smi;
mod parse_rocm_smi;
mod parse_rocminfo;
mod parse_system;
mod properties;
mod render;
mod triage;
