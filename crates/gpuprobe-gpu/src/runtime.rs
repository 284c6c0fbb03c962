//! Discovering the runtimes on this machine (CUDA driver, NVRTC, HIP runtime, hipRTC), what
//! each one says about its devices, and opening a [`DeviceRuntime`] for a device. Discovery never
//! fails: every outcome (absent, too old, present without devices) becomes a line of the
//! [`NativeEnv`] report.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::backend::{DeviceInfo, DeviceRuntime, RuntimeKind};
use crate::cuda::{CudaBackend, CudaDriver, format_cuda_version};
use crate::error::{Attempt, GpuError, GpuResult, LoadError};
use crate::hip::{HipBackend, HipRuntime, format_hip_version};
use crate::hiprtc::Hiprtc;
use crate::kernels::Compilers;
use crate::loader::{LoadOutcome, SearchConfig};
use crate::nvrtc::Nvrtc;

/// Which runtime to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RuntimePreference {
    /// The one with devices (CUDA first when both have some).
    #[default]
    Auto,
    /// CUDA only.
    Cuda,
    /// HIP only.
    Hip,
}

/// How one library fared.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LibraryReport {
    /// `loaded`, `absent` or `unusable`.
    pub status: String,
    /// The file in use (real path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it is absent or unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every candidate tried, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<Attempt>,
}

impl LibraryReport {
    fn from_outcome<T>(
        outcome: &LoadOutcome<T>,
        describe: impl Fn(&T) -> (String, String),
    ) -> Self {
        match &outcome.result {
            Ok(value) => {
                let (path, version) = describe(value);
                LibraryReport {
                    status: "loaded".into(),
                    path: Some(path),
                    version: Some(version),
                    error: None,
                    tried: outcome.attempts.clone(),
                }
            }
            Err(error) => LibraryReport {
                status: match error {
                    LoadError::NotFound { .. } => "absent".into(),
                    _ => "unusable".into(),
                },
                path: None,
                version: None,
                error: Some(match error {
                    LoadError::NotFound { tried, .. } => {
                        format!("not found ({} candidates tried)", tried.len())
                    }
                    other => other.to_string(),
                }),
                tried: outcome.attempts.clone(),
            },
        }
    }

    /// One line for tables.
    pub fn summary(&self) -> String {
        if self.status.is_empty() {
            return "not searched (another runtime was asked for)".into();
        }
        match (&self.path, &self.version, &self.error) {
            (Some(path), Some(version), _) => format!("{version} ({path})"),
            (_, _, Some(error)) => format!("{}: {error}", self.status),
            _ => self.status.clone(),
        }
    }
}

/// One runtime (CUDA or HIP) and its compiler, as found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuntimeReport {
    /// The runtime library.
    pub library: LibraryReport,
    /// Its run-time compiler (NVRTC or hipRTC).
    pub compiler: LibraryReport,
    /// Driver version as the runtime reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Devices found.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// Why no device could be listed (`hipErrorNoDevice ...`), when the library loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_error: Option<String>,
}

impl RuntimeReport {
    /// One line for tables: library, devices, errors.
    pub fn summary(&self) -> String {
        if self.library.status != "loaded" {
            return self.library.summary();
        }
        let devices = match &self.device_error {
            Some(error) => format!("present, 0 devices ({error})"),
            None => format!("{} device(s)", self.devices.len()),
        };
        format!("{devices}; {}", self.library.summary())
    }
}

/// What the native worker found on this machine (the `env` mode's structured summary).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NativeEnv {
    /// CUDA driver and NVRTC.
    pub cuda: RuntimeReport,
    /// HIP runtime and hipRTC.
    pub hip: RuntimeReport,
}

impl NativeEnv {
    /// Why no runtime can run probes, or `None` when one can.
    pub fn unusable_reason(&self) -> Option<String> {
        if !self.cuda.devices.is_empty() || !self.hip.devices.is_empty() {
            return None;
        }
        Some(format!(
            "no native GPU runtime with a device: CUDA driver: {}; HIP runtime: {}",
            describe_for_unusable(&self.cuda),
            describe_for_unusable(&self.hip)
        ))
    }
}

fn describe_for_unusable(report: &RuntimeReport) -> String {
    if report.library.status.is_empty() || report.library.status == "loaded" {
        return report.summary();
    }
    let tried: Vec<String> = report
        .library
        .tried
        .iter()
        .map(|a| a.candidate.clone())
        .collect();
    format!(
        "{} (tried: {})",
        report
            .library
            .error
            .as_deref()
            .unwrap_or(&report.library.status),
        tried.join(", ")
    )
}

/// Everything discovery loaded, plus its report.
pub(crate) struct Runtimes {
    /// The CUDA driver, if it loaded.
    pub cuda: Option<Arc<CudaDriver>>,
    /// NVRTC, if it loaded.
    pub nvrtc: Option<Arc<Nvrtc>>,
    /// The HIP runtime, if it loaded.
    pub hip: Option<Arc<HipRuntime>>,
    /// hipRTC, if it loaded.
    pub hiprtc: Option<Arc<Hiprtc>>,
    /// The report.
    pub env: NativeEnv,
}

/// Loads every runtime library the search finds and lists the devices of each runtime.
/// `preference` skips the runtime not asked for.
pub(crate) fn discover(search: &SearchConfig, preference: RuntimePreference) -> Runtimes {
    let mut env = NativeEnv::default();
    let (mut cuda, mut nvrtc, mut hip, mut hiprtc) = (None, None, None, None);
    if preference != RuntimePreference::Hip {
        let outcome = CudaDriver::load(search);
        env.cuda.library = LibraryReport::from_outcome(&outcome, |d| {
            (
                d.library().path().display().to_string(),
                format_cuda_version(d.version()),
            )
        });
        if let Ok(driver) = outcome.result {
            env.cuda.driver_version = Some(format_cuda_version(driver.version()));
            match list_devices(driver.init_and_count(), |i| driver.device_info(i)) {
                Ok(devices) => env.cuda.devices = devices,
                Err(error) => env.cuda.device_error = Some(error.to_string()),
            }
            cuda = Some(driver);
        }
        let outcome = Nvrtc::load(search);
        env.cuda.compiler = LibraryReport::from_outcome(&outcome, |n| {
            let (major, minor) = n.version();
            (
                n.library().path().display().to_string(),
                format!("{major}.{minor}"),
            )
        });
        nvrtc = outcome.result.ok();
    }
    if preference != RuntimePreference::Cuda {
        let outcome = HipRuntime::load(search);
        env.hip.library = LibraryReport::from_outcome(&outcome, |h| {
            (
                h.library().path().display().to_string(),
                h.runtime_version()
                    .map(format_hip_version)
                    .unwrap_or_else(|| "unknown".into()),
            )
        });
        if let Ok(runtime) = outcome.result {
            match list_devices(runtime.init_and_count(), |i| runtime.device_info(i)) {
                Ok(devices) => env.hip.devices = devices,
                Err(error) => env.hip.device_error = Some(error.to_string()),
            }
            env.hip.driver_version = runtime.driver_version().map(|v| v.to_string());
            hip = Some(runtime);
        }
        let outcome = Hiprtc::load(search, hip.as_deref());
        env.hip.compiler = LibraryReport::from_outcome(&outcome, |h| {
            let (major, minor) = h.version();
            (
                h.library().path().display().to_string(),
                format!("{major}.{minor}"),
            )
        });
        hiprtc = outcome.result.ok();
    }
    Runtimes {
        cuda,
        nvrtc,
        hip,
        hiprtc,
        env,
    }
}

fn list_devices(
    count: GpuResult<u32>,
    info: impl Fn(u32) -> GpuResult<DeviceInfo>,
) -> GpuResult<Vec<DeviceInfo>> {
    let count = count?;
    if count == 0 {
        return Err(GpuError::NoDevice {
            runtime: "runtime",
            detail: "the runtime reports 0 devices".into(),
        });
    }
    (0..count).map(info).collect()
}

impl Runtimes {
    /// The runtime the probes should use: the one with devices, CUDA first.
    pub(crate) fn chosen(&self) -> Option<RuntimeKind> {
        if self.cuda.is_some() && !self.env.cuda.devices.is_empty() {
            Some(RuntimeKind::Cuda)
        } else if self.hip.is_some() && !self.env.hip.devices.is_empty() {
            Some(RuntimeKind::Hip)
        } else {
            None
        }
    }

    /// The compilers found.
    pub(crate) fn compilers(&self) -> Compilers {
        Compilers {
            nvrtc: self.nvrtc.clone(),
            hiprtc: self.hiprtc.clone(),
        }
    }

    /// Opens a backend for device `ordinal` of the chosen runtime.
    pub(crate) fn open(&self, ordinal: u32) -> GpuResult<Box<dyn DeviceRuntime>> {
        match self.chosen() {
            Some(RuntimeKind::Cuda) => {
                let driver = self.cuda.clone().ok_or_else(|| no_device(&self.env))?;
                Ok(Box::new(CudaBackend::new(driver, ordinal)?))
            }
            Some(RuntimeKind::Hip) => {
                let runtime = self.hip.clone().ok_or_else(|| no_device(&self.env))?;
                Ok(Box::new(HipBackend::new(runtime, ordinal)?))
            }
            None => Err(no_device(&self.env)),
        }
    }
}

fn no_device(env: &NativeEnv) -> GpuError {
    GpuError::NoDevice {
        runtime: "native",
        detail: env.unusable_reason().unwrap_or_default(),
    }
}
