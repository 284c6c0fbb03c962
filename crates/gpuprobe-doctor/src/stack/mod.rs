//! What this machine's stack is, read two ways:
//! - the stack key ([`live_key`]): the facts a profile's proof depends on (GPU ISAs,
//!   kernel, driver, runtime, torch), gathered fast enough for `gpuprobe run` to check a
//!   profile before every job: files only (no tools, no kernel log), and torch's version
//!   read from its `version.py` by the interpreter without importing torch (about 30 ms).
//!   `fix` records the key the same way, so the two always compare like with like;
//! - the full fingerprint (`live`: [`live_fingerprint`]), as `gpuprobe env` and `kb match`
//!   show it.

mod live;

pub use live::live_fingerprint;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpuprobe_detect::{CollectOptions, Root};
use gpuprobe_model::StackKey;
use gpuprobe_model::{Fingerprint, Vendor};

/// Reads torch's `version.py` (found with `importlib.util.find_spec`, which does not import
/// torch) and prints `version`, `cuda` and `hip` on three lines.
const TORCH_VERSION_SNIPPET: &str = r#"
import importlib.util, os, re
spec = importlib.util.find_spec("torch")
text = open(os.path.join(os.path.dirname(spec.origin), "version.py")).read()
def field(name):
    m = re.search(r"^" + name + r"\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
    return m.group(1) if m else ""
print(field("__version__")); print(field("cuda")); print(field("hip"))
"#;

/// torch as its files say: version, and the CUDA or HIP version it was built for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TorchFiles {
    /// `torch.__version__`.
    pub version: Option<String>,
    /// `torch.version.cuda`.
    pub cuda: Option<String>,
    /// `torch.version.hip`.
    pub hip: Option<String>,
}

/// torch's version in `interpreter`'s environment, or `None` when it has no torch or does
/// not answer within five seconds.
pub(crate) fn torch_files(interpreter: &Path) -> Option<TorchFiles> {
    let mut command = Command::new(interpreter);
    command.args(["-c", TORCH_VERSION_SNIPPET]);
    let out = gpuprobe_detect::capture(command, Duration::from_secs(5)).ok()?;
    if !out.status.success() {
        return None;
    }
    let text = out.stdout;
    let mut lines = text.lines().map(|l| l.trim().to_string());
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let files = TorchFiles {
        version: nonempty(lines.next()),
        cuda: nonempty(lines.next()),
        hip: nonempty(lines.next()),
    };
    files.version.as_ref()?;
    Some(files)
}

/// The key of a (files-only) fingerprint plus torch.
pub(crate) fn key_of(fp: &Fingerprint, torch: Option<&TorchFiles>) -> StackKey {
    let gpus = fp
        .gpus
        .iter()
        .map(|gpu| {
            gpu.native_isa
                .clone()
                .or_else(|| gpu.runtime_isa.clone())
                .or_else(|| {
                    gpu.compute_capability
                        .as_ref()
                        .map(|cc| format!("sm_{}", cc.replace('.', "")))
                })
                .or_else(|| gpu.name.clone())
                .or_else(|| {
                    Some(format!(
                        "{}:{}",
                        gpu.pci_vendor_id.as_deref().unwrap_or("?"),
                        gpu.pci_device_id.as_deref().unwrap_or("?")
                    ))
                })
                .unwrap_or_default()
        })
        .collect();
    let mut drivers = Vec::new();
    if let Some(version) = fp.amdgpu.as_ref().and_then(|d| d.version.clone()) {
        drivers.push(format!("amdgpu {version}"));
    }
    if let Some(version) = fp.nvidia.as_ref().and_then(|d| d.version.clone()) {
        drivers.push(format!("nvidia {version}"));
    }
    // The runtime the user's jobs run on: the one torch was built for, else the one of the
    // GPUs' vendor. A stray library of the other vendor (a distro HIP package on a CUDA
    // host) must not become the stack's runtime.
    let rocm = fp
        .rocm
        .as_ref()
        .and_then(|r| r.version.clone().or_else(|| r.hip_version.clone()))
        .map(|v| format!("rocm {v}"));
    let cuda = fp
        .cuda
        .as_ref()
        .and_then(|c| c.runtime_version.clone())
        .map(|v| format!("cuda {v}"));
    let torch_hip = torch
        .and_then(|t| t.hip.as_ref())
        .map(|v| format!("hip {v} (torch build)"));
    let torch_cuda = torch
        .and_then(|t| t.cuda.as_ref())
        .map(|v| format!("cuda {v} (torch build)"));
    let has_vendor = |vendor: Vendor| fp.gpus.iter().any(|g| g.vendor == vendor);
    let runtime = if torch_hip.is_some() {
        rocm.or(torch_hip)
    } else if torch_cuda.is_some() {
        cuda.or(torch_cuda)
    } else if has_vendor(Vendor::Nvidia) && !has_vendor(Vendor::Amd) {
        cuda.or(rocm)
    } else {
        rocm.or(cuda)
    };
    StackKey {
        gpus,
        kernel: fp.host.kernel_release.clone(),
        driver: (!drivers.is_empty()).then(|| drivers.join(", ")),
        runtime,
        torch: torch.and_then(|t| t.version.clone()),
    }
}

/// This machine's key, with torch from `python` (or the interpreter gpuprobe would pick).
pub fn live_key(python_path: Option<&Path>, env: &BTreeMap<String, String>) -> StackKey {
    let fp = gpuprobe_detect::collect(&Root::live(), env, &CollectOptions::default());
    let torch = gpuprobe_runner::find_python(python_path, env)
        .ok()
        .and_then(|choice| torch_files(&choice.executable));
    key_of(&fp, torch.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::{CudaInfo, GpuInfo, RocmInfo};

    #[test]
    fn key_prefers_the_native_isa_and_names_each_fact() {
        let mut fp = Fingerprint::default();
        fp.host.kernel_release = Some("6.17.0-19-generic".into());
        let mut amd = GpuInfo::new(Vendor::Amd);
        amd.native_isa = Some("gfx1151".into());
        amd.runtime_isa = Some("gfx1100".into());
        amd.name = Some("Radeon 8060S".into());
        let mut nvidia = GpuInfo::new(Vendor::Nvidia);
        nvidia.compute_capability = Some("9.0".into());
        fp.gpus = vec![amd, nvidia];
        let torch = TorchFiles {
            version: Some("2.11.0+rocm7.2".into()),
            cuda: None,
            hip: Some("7.2.26015".into()),
        };
        let key = key_of(&fp, Some(&torch));
        assert_eq!(key.gpus, vec!["gfx1151".to_string(), "sm_90".to_string()]);
        assert_eq!(key.kernel.as_deref(), Some("6.17.0-19-generic"));
        assert_eq!(key.torch.as_deref(), Some("2.11.0+rocm7.2"));
        assert_eq!(key.runtime.as_deref(), Some("hip 7.2.26015 (torch build)"));
        assert_eq!(key.driver, None);
    }

    #[test]
    fn a_stray_hip_library_on_a_cuda_host_is_not_the_runtime() {
        // The NVIDIA test host carries a distro libamdhip64.so.5 (HIP 5.7).
        let fp = Fingerprint {
            gpus: vec![GpuInfo::new(Vendor::Nvidia)],
            rocm: Some(RocmInfo {
                hip_version: Some("5.7.31921".into()),
                ..RocmInfo::default()
            }),
            cuda: Some(CudaInfo {
                runtime_version: Some("13.0.2".into()),
                ..CudaInfo::default()
            }),
            ..Fingerprint::default()
        };
        let torch = TorchFiles {
            version: Some("2.11.0+cu130".into()),
            cuda: Some("13.0".into()),
            hip: None,
        };
        assert_eq!(
            key_of(&fp, Some(&torch)).runtime.as_deref(),
            Some("cuda 13.0.2")
        );
        assert_eq!(key_of(&fp, None).runtime.as_deref(), Some("cuda 13.0.2"));
    }
}
