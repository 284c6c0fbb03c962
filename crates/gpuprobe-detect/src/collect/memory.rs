//! Free device memory, read the quickest way there is, for sizing a run's lanes before any
//! worker has started: amdgpu's sysfs counters, else `nvidia-smi`'s query of one field.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::Root;

use super::gpus::{is_drm_card, read_bytes};
use super::tools;

/// The least free memory, in bytes, over this host's GPUs (every GPU, whatever the
/// visibility variables say: the least is safe for any of them). `None` when no source
/// answers, which callers treat as "unknown", never as "plenty".
pub fn least_free_gpu_memory(
    root: &Root,
    env: &BTreeMap<String, String>,
    timeout: Duration,
) -> Option<u64> {
    amdgpu_free(root).or_else(|| nvidia_free(env, timeout))
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
            least_free_gpu_memory(&root, &BTreeMap::new(), Duration::from_secs(1)),
            Some(6 << 30)
        );
    }

    #[test]
    fn no_source_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([("PATH".to_string(), dir.path().display().to_string())]);
        assert_eq!(
            least_free_gpu_memory(&Root::at(dir.path()), &env, Duration::from_secs(1)),
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
