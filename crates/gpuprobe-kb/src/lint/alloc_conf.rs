//! PyTorch caching-allocator configuration: parsing `key:value,...` strings and working out
//! which of the three variables a torch version actually reads (`docs/lint.md`,
//! `LINT-ALLOC-CONF-SHADOWED`).
//!
//! Only one variable is parsed, the first one found in the version's precedence order; the
//! others are ignored, not merged.

use crate::facts::Facts;
use crate::version::Pep440Version;

/// Keys PyTorch's allocator-config parser accepts: the documented ones plus the keys
/// present in torch 2.15's `libc10`/`libc10_cuda` (which reject other keys with
/// "Unrecognized key").
pub(crate) const KNOWN_KEYS: &[&str] = &[
    "backend",
    "expandable_segments",
    "expandable_segments_reserve",
    "expandable_segments_reserve_by_class",
    "garbage_collection_threshold",
    "graph_capture_record_stream_reuse",
    "large_segment_size_mb",
    "max_non_split_rounding_mb",
    "max_split_size_mb",
    "per_process_memory_fraction",
    "pinned_free_catch_all",
    "pinned_max_cached_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "roundup_power2_divisions",
];

/// The canonical variable (torch ≥ 2.9).
pub(crate) const ALLOC_CONF: &str = "PYTORCH_ALLOC_CONF";
/// The CUDA-named variable (deprecated in torch ≥ 2.9).
pub(crate) const CUDA_ALLOC_CONF: &str = "PYTORCH_CUDA_ALLOC_CONF";
/// The ROCm alias.
pub(crate) const HIP_ALLOC_CONF: &str = "PYTORCH_HIP_ALLOC_CONF";
/// All three, in the newest precedence order.
pub(crate) const VARIABLES: [&str; 3] = [ALLOC_CONF, CUDA_ALLOC_CONF, HIP_ALLOC_CONF];

/// One `key:value` item of a configuration string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfItem {
    /// The key, trimmed.
    pub key: String,
    /// The value, trimmed; `None` when there was no `:`.
    pub value: Option<String>,
}

/// Splits a configuration at top-level commas (commas inside `[...]`, as in
/// `roundup_power2_divisions:[256:1,512:2]`, stay with their item).
pub(crate) fn parse(conf: &str) -> Vec<ConfItem> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    let mut push = |text: &str| {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let (key, value) = match text.split_once(':') {
            Some((key, value)) => (key.trim().to_string(), Some(value.trim().to_string())),
            None => (text.to_string(), None),
        };
        items.push(ConfItem { key, value });
    };
    for c in conf.chars() {
        match c {
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => {
                push(&current);
                current.clear();
            }
            _ => current.push(c),
        }
    }
    push(&current);
    items
}

/// The value of a key in a configuration string, when present.
pub(crate) fn value_of(conf: &str, key: &str) -> Option<String> {
    parse(conf)
        .into_iter()
        .rev()
        .find(|item| item.key == key)
        .and_then(|item| item.value)
}

/// Which variables are set, and which one torch reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllocState {
    /// Variables that are set, with their values, in the order they are read (when known).
    pub set: Vec<(&'static str, String)>,
    /// The variable torch reads, when it can be determined.
    pub read: Option<&'static str>,
    /// How `read` was determined.
    pub basis: String,
}

impl AllocState {
    /// The configuration string in effect: the read variable's value, else (precedence
    /// unknown) the value when only one variable is set.
    pub(crate) fn effective(&self) -> Option<(&'static str, &str)> {
        match self.read {
            Some(read) => self
                .set
                .iter()
                .find(|(name, _)| *name == read)
                .map(|(name, value)| (*name, value.as_str())),
            None if self.set.len() == 1 => Some((self.set[0].0, self.set[0].1.as_str())),
            None => None,
        }
    }
}

fn static_name(name: &str) -> Option<&'static str> {
    VARIABLES.into_iter().find(|v| *v == name)
}

/// Works out the allocator-config state of a fingerprint.
pub(crate) fn state(facts: &Facts<'_>) -> AllocState {
    let rocm = facts.torch_is_rocm();
    let reported = facts
        .torch()
        .and_then(|torch| torch.allocator_conf.as_ref())
        .and_then(|conf| static_name(&conf.variable));
    let version = facts.torch_version();
    let (order, basis): (Vec<&'static str>, String) = match (&reported, &version) {
        (Some(variable), _) => (
            std::iter::once(*variable)
                .chain(VARIABLES.into_iter().filter(|v| v != variable))
                .collect(),
            "reported by the torch worker".to_string(),
        ),
        (None, Some(version)) if reads_generic_name(version) => (
            vec![CUDA_ALLOC_CONF, HIP_ALLOC_CONF, ALLOC_CONF],
            format!(
                "torch {version} reads PYTORCH_CUDA_ALLOC_CONF, then PYTORCH_HIP_ALLOC_CONF, then PYTORCH_ALLOC_CONF (measured on torch 2.11 and 2.15)"
            ),
        ),
        (None, Some(version)) => (
            vec![CUDA_ALLOC_CONF, HIP_ALLOC_CONF, ALLOC_CONF],
            format!(
                "torch {version} reads PYTORCH_CUDA_ALLOC_CONF, then (ROCm builds) PYTORCH_HIP_ALLOC_CONF, and ignores PYTORCH_ALLOC_CONF"
            ),
        ),
        (None, None) => (VARIABLES.to_vec(), "torch version unknown".to_string()),
    };
    let set: Vec<(&'static str, String)> = order
        .iter()
        .filter_map(|name| facts.env(name).map(|value| (*name, value.to_string())))
        .collect();
    let read = if reported.is_some() {
        reported
    } else if version.is_some() {
        set.iter()
            .map(|(name, _)| *name)
            // Before 2.9 the HIP alias is read by ROCm builds only, and the generic name
            // not at all.
            .find(|name| {
                let new = version.as_ref().is_some_and(reads_generic_name);
                match *name {
                    HIP_ALLOC_CONF => rocm || new,
                    ALLOC_CONF => new,
                    _ => true,
                }
            })
    } else {
        None
    };
    AllocState { set, read, basis }
}

/// Whether a torch version reads `PYTORCH_ALLOC_CONF` at all (≥ 2.9). Released versions
/// read it last, after both older names (measured on torch 2.11 and 2.15: no deprecation
/// warning either), so setting it beside `PYTORCH_CUDA_ALLOC_CONF` leaves it unread.
pub(crate) fn reads_generic_name(version: &Pep440Version) -> bool {
    Pep440Version::parse("2.9.0.dev0").is_ok_and(|boundary| *version >= boundary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_keep_their_commas() {
        let items = parse(
            "expandable_segments:True, roundup_power2_divisions:[256:1,512:2,>:4],max_split_size_mb:128",
        );
        assert_eq!(items.len(), 3);
        assert_eq!(items[1].key, "roundup_power2_divisions");
        assert_eq!(items[1].value.as_deref(), Some("[256:1,512:2,>:4]"));
        assert_eq!(
            value_of("expandable_segments:True", "expandable_segments").as_deref(),
            Some("True")
        );
        assert_eq!(parse("max_split_size_mb=512")[0].value, None);
    }
}
