//! Signs that a job is alive on the GPU while it prints nothing: AMD's
//! `gpu_busy_percent` files, else `nvidia-smi`'s utilization (per device, not per process).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where GPU activity can be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ActivitySource {
    /// `/sys/class/drm/cardN/device/gpu_busy_percent` files (AMD).
    AmdSysfs(Vec<PathBuf>),
    /// `nvidia-smi` on PATH.
    NvidiaSmi(PathBuf),
    /// Nothing readable: output is the only sign of life.
    None,
}

impl ActivitySource {
    /// The best source readable here; `search_path` is the `PATH` nvidia-smi is looked
    /// for on.
    pub(crate) fn detect(search_path: Option<&str>) -> ActivitySource {
        let mut files = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/sys/class/drm") {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                let is_card = name
                    .strip_prefix("card")
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
                let path = entry.path().join("device/gpu_busy_percent");
                if is_card && std::fs::read_to_string(&path).is_ok() {
                    files.push(path);
                }
            }
        }
        if !files.is_empty() {
            files.sort();
            return ActivitySource::AmdSysfs(files);
        }
        if let Some(path) = search_path {
            for dir in std::env::split_paths(path) {
                let candidate = dir.join("nvidia-smi");
                if candidate.is_file() {
                    return ActivitySource::NvidiaSmi(candidate);
                }
            }
        }
        ActivitySource::None
    }

    /// What is watched, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            ActivitySource::AmdSysfs(files) => format!(
                "output, and GPU busy percent of {}",
                files
                    .iter()
                    .filter_map(|p| p.ancestors().nth(2))
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ActivitySource::NvidiaSmi(_) => {
                "output, and GPU utilization from nvidia-smi (per device, not per process)".into()
            }
            ActivitySource::None => "output only; no GPU activity source is readable here".into(),
        }
    }

    /// How often to read it.
    pub(crate) fn interval(&self, timeout: f64) -> Duration {
        match self {
            ActivitySource::AmdSysfs(_) => Duration::from_secs(1),
            ActivitySource::NvidiaSmi(_) => Duration::from_secs_f64((timeout / 10.0).max(2.0)),
            ActivitySource::None => Duration::MAX,
        }
    }

    /// Whether any GPU is busy now (`None`: could not tell).
    pub(crate) fn busy(&self) -> Option<bool> {
        match self {
            ActivitySource::AmdSysfs(files) => {
                let values: Vec<u32> = files
                    .iter()
                    .filter_map(|f| std::fs::read_to_string(f).ok())
                    .filter_map(|t| t.trim().parse().ok())
                    .collect();
                (!values.is_empty()).then(|| values.iter().any(|&v| v > 0))
            }
            ActivitySource::NvidiaSmi(program) => {
                let mut command = Command::new(program);
                command.args([
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                ]);
                let text = gpuprobe_detect::capture(command, Duration::from_secs(5))
                    .ok()?
                    .stdout;
                let values: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
                (!values.is_empty()).then(|| values.iter().any(|&v| v > 0))
            }
            ActivitySource::None => None,
        }
    }
}
