//! What sizes a run's lanes before any worker has started: free device memory, read the
//! quickest way there is (amdgpu's sysfs counters, else `nvidia-smi`'s query of one
//! field), and whether NVIDIA's kernel cache is empty (a machine's first run compiles the
//! kernels that later runs read from it).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::Root;

use super::gpus::{is_drm_card, read_bytes};
use super::tools;

/// What the lanes are sized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuHeadroom {
    /// The least free memory, in bytes, over this host's GPUs (every GPU, whatever the
    /// visibility variables say: the least is safe for any of them). `None` when no
    /// source answers, which callers treat as "unknown", never as "plenty".
    pub least_free: Option<u64>,
    /// An NVIDIA host whose driver kernel cache holds nothing yet
    /// ([`cuda_kernel_cache_empty`]); false where not known or not NVIDIA.
    pub kernel_cache_empty: bool,
}

/// Free memory and the kernel cache's state. The cache is looked at only where the free
/// memory came from `nvidia-smi`: amdgpu hosts load their kernels ahead of time.
pub fn gpu_headroom(root: &Root, env: &BTreeMap<String, String>, timeout: Duration) -> GpuHeadroom {
    if let Some(free) = amdgpu_free(root) {
        return GpuHeadroom {
            least_free: Some(free),
            kernel_cache_empty: false,
        };
    }
    let least_free = nvidia_free(env, timeout);
    GpuHeadroom {
        least_free,
        kernel_cache_empty: least_free.is_some() && cuda_kernel_cache_empty(root, env),
    }
}

/// Whether the CUDA driver's cache of compiled kernels (`CUDA_CACHE_PATH`, else
/// `~/.nv/ComputeCache`) holds nothing: missing, empty, unreadable, or switched off with
/// `CUDA_CACHE_DISABLE=1`. On the H100 host it is missing on a fresh machine and holds
/// 85 files (15 MB) after one standard run; that run's attention probes took 48
/// probe-seconds against 14 on the next.
pub fn cuda_kernel_cache_empty(root: &Root, env: &BTreeMap<String, String>) -> bool {
    if env.get("CUDA_CACHE_DISABLE").map(|v| v.trim()) == Some("1") {
        return true;
    }
    let dir = match env.get("CUDA_CACHE_PATH").filter(|p| !p.trim().is_empty()) {
        Some(path) => path.trim_end_matches('/').to_string(),
        None => match env.get("HOME").filter(|h| h.starts_with('/')) {
            Some(home) => format!("{}/.nv/ComputeCache", home.trim_end_matches('/')),
            None => return false,
        },
    };
    root.list(&dir).map_or(true, |entries| entries.is_empty())
}

/// `mem_info_vram_total - mem_info_vram_used` of every DRM card amdgpu exposes.
fn amdgpu_free(root: &Root) -> Option<u64> {
    let entries = root.list("/sys/class/drm").ok()?;
    entries
        .iter()
        .filter(|entry| is_drm_card(entry))
        .filter_map(|entry| {
            let base = format!("/sys/class/drm/{entry}/device");
            let total = read_bytes(root, &format!("{base}/mem_info_vram_total"))?;
            let used = read_bytes(root, &format!("{base}/mem_info_vram_used"))?;
            Some(total.saturating_sub(used))
        })
        .min()
}

/// `nvidia-smi --query-gpu=memory.free` (MiB per line).
fn nvidia_free(env: &BTreeMap<String, String>, timeout: Duration) -> Option<u64> {
    let out = tools::run(
        env,
        "nvidia-smi",
        &["--query-gpu=memory.free", "--format=csv,noheader,nounits"],
        timeout,
    )
    .ok()?;
    parse_nvidia_free(&out)
}

fn parse_nvidia_free(out: &str) -> Option<u64> {
    let mut least: Option<u64> = None;
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // A line that is not a number ("[N/A]", an error) makes the answer unknown.
        let mib: u64 = line.parse().ok()?;
        let bytes = mib.checked_mul(1 << 20)?;
        least = Some(least.map_or(bytes, |l: u64| l.min(bytes)));
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_cache_is_empty_until_it_holds_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let home = env(&[("HOME", "/home/u")]);
        assert!(cuda_kernel_cache_empty(&root, &home), "missing");
        let cache = dir.path().join("home/u/.nv/ComputeCache");
        std::fs::create_dir_all(&cache).unwrap();
        assert!(cuda_kernel_cache_empty(&root, &home), "empty");
        std::fs::create_dir_all(cache.join("0")).unwrap();
        assert!(!cuda_kernel_cache_empty(&root, &home), "holds an entry");
        assert!(
            cuda_kernel_cache_empty(
                &root,
                &env(&[("HOME", "/home/u"), ("CUDA_CACHE_DISABLE", "1")])
            ),
            "switched off: every run compiles"
        );
        let moved = env(&[("HOME", "/home/u"), ("CUDA_CACHE_PATH", "/scratch/cc/")]);
        assert!(cuda_kernel_cache_empty(&root, &moved));
        std::fs::create_dir_all(dir.path().join("scratch/cc/index")).unwrap();
        assert!(!cuda_kernel_cache_empty(&root, &moved));
        assert!(
            !cuda_kernel_cache_empty(&root, &BTreeMap::new()),
            "no home: not known, so not claimed"
        );
    }

    #[test]
    fn an_amdgpu_host_never_counts_as_a_first_kernel_use() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("sys/class/drm/card0/device");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("mem_info_vram_total"), "1000\n").unwrap();
        std::fs::write(base.join("mem_info_vram_used"), "10\n").unwrap();
        let env: BTreeMap<String, String> = [("HOME".to_string(), "/home/u".to_string())].into();
        assert_eq!(
            gpu_headroom(&Root::at(dir.path()), &env, Duration::from_secs(1)),
            GpuHeadroom {
                least_free: Some(990),
                kernel_cache_empty: false
            }
        );
    }

    #[test]
    fn amdgpu_counters_give_the_least_free_card() {
        let dir = tempfile::tempdir().unwrap();
        for (card, total, used) in [
            ("card0", 24u64 << 30, 1u64 << 30),
            ("card1", 8 << 30, 2 << 30),
        ] {
            let base = dir.path().join(format!("sys/class/drm/{card}/device"));
            std::fs::create_dir_all(&base).unwrap();
            std::fs::write(base.join("mem_info_vram_total"), format!("{total}\n")).unwrap();
            std::fs::write(base.join("mem_info_vram_used"), format!("{used}\n")).unwrap();
        }
        // A connector entry and a render node are not cards.
        std::fs::create_dir_all(dir.path().join("sys/class/drm/card0-DP-1")).unwrap();
        std::fs::create_dir_all(dir.path().join("sys/class/drm/renderD128")).unwrap();
        let root = Root::at(dir.path());
        assert_eq!(amdgpu_free(&root), Some(6 << 30));
        assert_eq!(
            gpu_headroom(&root, &BTreeMap::new(), Duration::from_secs(1)).least_free,
            Some(6 << 30)
        );
    }

    #[test]
    fn no_source_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([("PATH".to_string(), dir.path().display().to_string())]);
        assert_eq!(
            gpu_headroom(&Root::at(dir.path()), &env, Duration::from_secs(1)).least_free,
            None
        );
    }

    #[test]
    fn nvidia_smi_lines_give_the_least_and_anything_else_is_unknown() {
        assert_eq!(parse_nvidia_free("81004\n40000\n"), Some(40000 << 20));
        assert_eq!(parse_nvidia_free("81004\n[N/A]\n"), None);
        assert_eq!(parse_nvidia_free(""), None);
        assert_eq!(parse_nvidia_free("99999999999999999999"), None);
    }
}
