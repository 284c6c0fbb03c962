//! The live collector: builds a [`Fingerprint`] of a machine from sysfs, procfs, the
//! library directories, the environment, and (optionally) external tools and the kernel
//! log — without root where possible, and saying what could not be read.
//!
//! Every read goes through a [`Root`], so tests run the same code on fake trees.
//! Order matters: sysfs facts are gathered first and win over tool output, which only
//! fills gaps (see `merge`).

mod access;
mod buildenv;
mod drivers;
mod env;
mod gpus;
mod host;
mod kmsg;
mod libs;
mod memory;
mod tools;

use std::collections::BTreeMap;
use std::time::Duration;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

pub use env::{is_relevant_env_var, relevant_env};
pub use gpus::{compute_gpu_count, gpu_device_nodes_present};
pub use kmsg::{KmsgReader, merge_watched_kernel_lines};
pub use libs::scan_python_libraries;
pub use memory::{GpuHeadroom, cuda_kernel_cache_empty, gpu_headroom};
pub use tools::{CaptureError, Captured, capture};

use crate::merge::derive_gpu_facts;
use crate::root::Root;

/// What the collector may do beyond reading files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectOptions {
    /// Run `rocminfo`, `amd-smi`, `nvidia-smi`, `dkms status`, `mokutil --sb-state`
    /// (only on the live root, only those relevant to the GPUs found).
    pub run_tools: bool,
    /// Wall-clock limit for each tool; a tool that runs longer is killed.
    pub tool_timeout: Duration,
    /// Read the kernel log (`/dev/kmsg`, else `dmesg` when tools may run).
    pub read_kernel_log: bool,
}

impl Default for CollectOptions {
    /// Files only: no tools, no kernel log (what tests want).
    fn default() -> Self {
        CollectOptions {
            run_tools: false,
            tool_timeout: Duration::from_secs(5),
            read_kernel_log: false,
        }
    }
}

impl CollectOptions {
    /// What `gpuprobe env` and `gpuprobe check` use: tools with a 5 s limit each, and the
    /// kernel log.
    pub fn live() -> Self {
        CollectOptions {
            run_tools: true,
            tool_timeout: Duration::from_secs(5),
            read_kernel_log: true,
        }
    }
}

/// Collects the fingerprint of the machine under `root`.
///
/// `env` is the process environment (name → value); relevant variables are kept in
/// `Fingerprint::env`, and `PATH`, `LD_LIBRARY_PATH`, `ROCM_PATH`, `VIRTUAL_ENV`,
/// `CONDA_PREFIX`, `WSL_DISTRO_NAME` and `KUBERNETES_SERVICE_HOST` steer detection.
/// Never fails: what cannot be read is listed in `Fingerprint::unreadable`.
pub fn collect(root: &Root, env: &BTreeMap<String, String>, opts: &CollectOptions) -> Fingerprint {
    let mut fp = Fingerprint {
        source: "live".to_owned(),
        ..Fingerprint::default()
    };
    host::collect(root, env, &mut fp);
    buildenv::cpu(root, &mut fp);
    buildenv::libc(root, &mut fp);
    gpus::collect(root, &mut fp);
    drivers::collect(root, &mut fp);
    libs::collect(root, env, &mut fp);
    let includes = buildenv::include_dirs(root, env, &libs::site_packages(root, env));
    buildenv::header_components(root, &includes, &mut fp);
    fp.env = relevant_env(env);
    if opts.run_tools && root.is_live() {
        tools::run_all(root, env, opts.tool_timeout, &mut fp);
        buildenv::run_tools(env, opts.tool_timeout, &mut fp);
    }
    if opts.read_kernel_log {
        kmsg::collect(
            root,
            opts.run_tools && root.is_live(),
            opts.tool_timeout,
            env,
            &mut fp,
        );
    }
    access::collect(root, &mut fp);
    for gpu in &mut fp.gpus {
        derive_gpu_facts(gpu);
    }
    if fp.gpus.iter().all(|g| g.vendor != Vendor::Amd)
        && fp.amdgpu.as_ref().is_some_and(|d| !d.loaded)
    {
        fp.amdgpu = None;
    }
    fp
}
