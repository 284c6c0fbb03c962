//! Pure parsers for tool output that users paste or that the live collector captures:
//! `rocminfo`, `rocm-smi`, `amd-smi` (dashboard, `static`/`list` text, `--json`),
//! `nvidia-smi` (dashboard, `-q`, `--query-gpu --format=csv`),
//! `python -m torch.utils.collect_env`, kernel logs (`dmesg`, `journalctl`),
//! `amdgpu_firmware_info`, and small system outputs (`dkms status`, `mokutil --sb-state`,
//! `os-release`, `uname -a`, `/proc/cmdline`, module parameter listings).
//!
//! Every parser is a total function of its input: it never panics, skips leading
//! `# source:` / `# note:` provenance lines, tolerates CRLF, ANSI colour codes and
//! TAB/space differences, and returns [`ParseError::NotRecognized`] only when the text
//! holds nothing of the tool at all. Each parsed type has an `apply` method that merges
//! its facts into a [`gpuprobe_model::Fingerprint`].

pub mod amd_smi;
pub mod buildinfo;
pub mod collect_env;
pub mod firmware_info;
pub mod kernel_log;
pub mod nvidia_smi;
pub mod rocm_smi;
pub mod rocminfo;
pub mod system;

/// Why a parser could not read its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text holds nothing this parser recognises.
    #[error("no {tool} output found: {reason}")]
    NotRecognized {
        /// The tool the parser reads.
        tool: &'static str,
        /// What was missing.
        reason: &'static str,
    },
    /// The text looked like JSON but did not parse.
    #[error("invalid {tool} JSON: {message}")]
    Json {
        /// The tool the parser reads.
        tool: &'static str,
        /// The JSON error.
        message: String,
    },
}
