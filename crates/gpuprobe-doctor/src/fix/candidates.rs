//! What the workaround search tries, and what it only reports.
//!
//! Candidates come from two places, and only from them (so folklore never enters: the
//! knowledge base and the catalogue refuse it at validation):
//! - the testable workarounds of matched knowledge-base entries (confirmed or suspected),
//!   tried first;
//! - the generic catalogue (`kb/catalogue.toml`): its process settings that apply to the
//!   GPUs' vendor and the OS, and whose layer is relevant to the failing probes' families
//!   (a BLAS backend switch only for matmul-bearing families, MIOpen only for `nn`, NCCL
//!   only for `dist`; copy engine, serialization and allocator settings for every family,
//!   because every probe moves its result back to the host and allocates).
//!
//! Kernel parameters, firmware changes, upgrades and code changes (pinned staging buffers)
//! are collected as [`ReportedChange`]s: shown with their cost, never applied.

use std::collections::{BTreeMap, BTreeSet};

use gpuprobe_kb::Facts;
use gpuprobe_kb::Pep440Version;
use gpuprobe_kb::{Catalogue, CatalogueEntry, CatalogueKind};
use gpuprobe_kb::{KbMatch, MatchStatus};
use gpuprobe_kb::{RemedyKind, WorkaroundEvidence};
use gpuprobe_model::Cost;
use gpuprobe_model::Measurement;
use gpuprobe_model::env_vars;
use gpuprobe_model::{Fingerprint, Vendor};
use gpuprobe_model::{ProbeResult, Verdict};
use gpuprobe_model::{ReportedChange, SettingChange};
use thiserror::Error;

/// The arch override variable: only ever tried as a removal (or as a workaround a matched
/// known issue names for an unsupported chip).
pub(super) const OVERRIDE_VAR: &str = "HSA_OVERRIDE_GFX_VERSION";

/// Allocator-configuration variables; torch reads only one of them (`docs/lint.md`,
/// `LINT-ALLOC-CONF-SHADOWED`).
const ALLOC_CONF_VARS: &[&str] = &[
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_HIP_ALLOC_CONF",
];

/// One setting to try in a fresh worker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// The change.
    pub change: SettingChange,
    /// What it is.
    pub title: String,
    /// Knowledge-base and catalogue ids that name it.
    pub sources: Vec<String>,
    /// What applying it costs.
    pub cost: Cost,
    /// Preference, lower first: 0 a documented workaround of a confirmed known issue,
    /// 1 another workaround of a confirmed issue, 2 of a suspected issue, 3 a generic
    /// catalogue setting. Tried in this order and preferred in ties.
    pub rank: u8,
}

/// An applicable setting that is not tried, and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NotTried {
    /// The candidate.
    pub candidate: Candidate,
    /// Why it is not tried.
    pub reason: String,
}

/// Everything the search starts from.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct CandidateSet {
    /// Settings to try, in order.
    pub testable: Vec<Candidate>,
    /// Applicable settings that are not tried (already in effect, machine-specific).
    pub not_tried: Vec<NotTried>,
    /// Changes reported, never applied.
    pub reported: Vec<ReportedChange>,
    /// Remarks (why every vendor's settings are tried, ...).
    pub notes: Vec<String>,
}

/// The facts candidates are chosen from.
#[derive(Debug, Clone, Copy)]
pub(super) struct CandidateContext<'a> {
    /// Knowledge-base matches of the starting run.
    pub matches: &'a [KbMatch],
    /// The workaround catalogue.
    pub catalogue: &'a Catalogue,
    /// The stack.
    pub fingerprint: &'a Fingerprint,
    /// The failing results to cure.
    pub failures: &'a [ProbeResult],
    /// The environment the workers inherit.
    pub env: &'a BTreeMap<String, String>,
}

/// A `--candidate` the search refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CandidateRefused {
    /// Not a catalogue setting (or an unsafe value).
    #[error("--candidate {setting}: {reason}")]
    NotAllowed {
        /// The setting as given.
        setting: String,
        /// Why.
        reason: String,
    },
}

/// Whether a candidate comes only from catalogue entries tried for every family (copy
/// engine, serialization, allocator) rather than from one matched to the failing layer.
fn is_generic(catalogue: &Catalogue, candidate: &Candidate) -> bool {
    candidate.sources.iter().all(|id| {
        // An id the catalogue does not have is tried for every family too.
        id.starts_with("CAT-") && catalogue.get(id).is_none_or(|e| e.families.is_empty())
    })
}

/// The sweep case variants that are layouts of the same values (what
/// `gpuprobe.inputs.contiguous` undoes).
const LAYOUT_VARIANTS: &[&str] = &[
    "noncontig",
    "inplace_noncontig",
    "transposed",
    "channels_last",
    "broadcast",
];

/// Whether a failure's evidence names a layout: a sweep case in another memory layout of
/// the same values failed. Only then can contiguous inputs prove anything.
fn names_a_layout(result: &ProbeResult) -> bool {
    let Some(observation) = &result.observation else {
        return false;
    };
    let Measurement::Sweep(sweep) = &observation.measurement else {
        return false;
    };
    sweep
        .failures
        .iter()
        .map(|f| f.variant.as_str())
        .chain(sweep.errors.iter().map(|e| e.variant.as_str()))
        .any(|variant| LAYOUT_VARIANTS.contains(&variant))
}

/// Whether this torch has the switch (`torch_min`); an unknown version does not exclude it.
fn torch_has(entry: &CatalogueEntry, facts: &Facts<'_>) -> bool {
    let (Some(min), Some(version)) = (&entry.torch_min, facts.torch_version()) else {
        return true;
    };
    Pep440Version::parse(min).is_ok_and(|min| version >= min)
}

fn applies_to_families(entry: &CatalogueEntry, families: &BTreeSet<&str>) -> bool {
    entry.families.is_empty()
        || entry
            .families
            .iter()
            .any(|family| families.contains(family.as_str()))
}

/// Whether a catalogue entry applies to these vendors and this OS.
fn applies_here(
    entry: &CatalogueEntry,
    vendors: &[Vendor],
    os: Option<gpuprobe_kb::OsName>,
) -> bool {
    let vendor_ok = entry.vendors.iter().any(|v| vendors.contains(v));
    let os_ok = entry.os.is_empty() || os.is_none_or(|os| entry.os.contains(&os));
    vendor_ok && os_ok
}

/// The allocator-config variable this torch reads first: `PYTORCH_ALLOC_CONF` from 2.9 on
/// (and when the version is unknown), `PYTORCH_CUDA_ALLOC_CONF` before.
fn alloc_conf_variable(fp: &Fingerprint) -> &'static str {
    let version = fp
        .python
        .as_ref()
        .and_then(|p| p.torch.as_ref())
        .map(|t| t.version.as_str());
    let Some(version) = version else {
        return "PYTORCH_ALLOC_CONF";
    };
    let mut parts = version
        .split(['.', '+'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    if (major, minor) >= (2, 9) || major == 0 {
        "PYTORCH_ALLOC_CONF"
    } else {
        "PYTORCH_CUDA_ALLOC_CONF"
    }
}

fn catalogue_cost(entry: &CatalogueEntry) -> Cost {
    entry.cost.clone()
}

/// Adds or merges a candidate (the same change from a KB entry and the catalogue is one
/// candidate with both sources and the better rank).
fn add(list: &mut Vec<Candidate>, candidate: Candidate) {
    if let Some(existing) = list.iter_mut().find(|c| c.change == candidate.change) {
        for source in candidate.sources {
            if !existing.sources.contains(&source) {
                existing.sources.push(source);
            }
        }
        if candidate.rank < existing.rank {
            existing.rank = candidate.rank;
            existing.title = candidate.title;
            existing.cost = candidate.cost;
        }
        return;
    }
    list.push(candidate);
}

fn add_reported(list: &mut Vec<ReportedChange>, change: ReportedChange) {
    if let Some(existing) = list.iter_mut().find(|r| {
        (r.setting.is_some() && r.setting == change.setting) || r.description == change.description
    }) {
        for source in change.sources {
            if !existing.sources.contains(&source) {
                existing.sources.push(source);
            }
        }
        return;
    }
    list.push(change);
}

/// Whether a change is already in effect in the workers' environment (a switch: named in
/// the inherited switches variable).
fn in_effect(change: &SettingChange, env: &BTreeMap<String, String>) -> bool {
    if change.is_switch() {
        let Some(value) = &change.value else {
            return false;
        };
        let pair = format!("{}={value}", change.variable);
        return env
            .get(gpuprobe_model::SWITCHES_VARIABLE)
            .is_some_and(|all| all.split(';').any(|p| p.trim() == pair));
    }
    match &change.value {
        Some(value) => env.get(&change.variable) == Some(value),
        None => !env.contains_key(&change.variable),
    }
}

/// Gathers the candidates for the failures in `ctx`.
pub(super) fn gather(ctx: &CandidateContext<'_>) -> CandidateSet {
    let mut set = CandidateSet::default();
    let facts = Facts::new(ctx.fingerprint);
    let os = facts.os();
    let mut vendors: Vec<Vendor> = ctx
        .fingerprint
        .gpus
        .iter()
        .map(|g| g.vendor)
        .filter(|v| matches!(v, Vendor::Amd | Vendor::Nvidia))
        .collect();
    vendors.dedup();
    if vendors.is_empty() {
        vendors = vec![Vendor::Amd, Vendor::Nvidia];
        set.notes.push(
            "no AMD or NVIDIA GPU in the fingerprint (the CPU is the device under test): \
             settings of every vendor are tried"
                .into(),
        );
    }
    let families: BTreeSet<&str> = ctx.failures.iter().map(|r| r.probe.family()).collect();
    let alloc_var = alloc_conf_variable(ctx.fingerprint);

    let mut testable: Vec<Candidate> = Vec::new();
    let mut matched_ids: BTreeSet<&str> = BTreeSet::new();

    // Workarounds of matched known issues first.
    for m in ctx.matches {
        if m.status == MatchStatus::NotObserved {
            continue;
        }
        matched_ids.insert(m.entry.id.as_str());
        for workaround in &m.entry.workarounds {
            let is_process = matches!(
                workaround.kind,
                RemedyKind::Env | RemedyKind::Unset | RemedyKind::Switch
            );
            let setting = workaround.setting.as_deref();
            let allowed = match (is_process, setting) {
                (true, Some(text)) => {
                    let change = SettingChange::parse(text);
                    let ok = match &change.value {
                        Some(value) => ctx.catalogue.check_setting(&change.variable, value).is_ok(),
                        None => ctx.catalogue.entry_for_variable(&change.variable).is_some(),
                    };
                    ok.then_some(change)
                }
                _ => None,
            };
            match allowed {
                Some(change) if workaround.testable => {
                    let rank = match (m.status, workaround.evidence) {
                        (MatchStatus::Confirmed, WorkaroundEvidence::Documented) => 0,
                        (MatchStatus::Confirmed, _) => 1,
                        _ => 2,
                    };
                    let mut sources = vec![m.entry.id.clone()];
                    if let Some(entry) = ctx.catalogue.entry_for_variable(&change.variable) {
                        sources.push(entry.id.clone());
                    }
                    add(
                        &mut testable,
                        Candidate {
                            change,
                            title: workaround.description.clone(),
                            sources,
                            cost: workaround.cost.clone(),
                            rank,
                        },
                    );
                }
                _ => add_reported(
                    &mut set.reported,
                    ReportedChange {
                        // Never applied, so never measured: it keeps its evidence words
                        // ("reported to help, not verified").
                        description: workaround.description_with_evidence(),
                        kind: workaround.kind.name().to_string(),
                        setting: workaround.setting.clone(),
                        cost: workaround.cost.clone(),
                        sources: vec![m.entry.id.clone()],
                    },
                ),
            }
        }
    }

    // Then the generic catalogue.
    for entry in &ctx.catalogue.entries {
        if !applies_here(entry, &vendors, os) {
            continue;
        }
        let related = entry
            .related
            .iter()
            .any(|id| matched_ids.contains(id.as_str()));
        match entry.kind {
            CatalogueKind::Process => {
                if !applies_to_families(entry, &families) && !related {
                    continue;
                }
                if entry.id == "CAT-VISIBLE-DEVICES" {
                    if let Some(reported) = visible_devices(entry, ctx.fingerprint, os) {
                        add_reported(&mut set.reported, reported);
                    }
                    continue;
                }
                for text in &entry.candidates {
                    let mut change = SettingChange::parse(text);
                    if ALLOC_CONF_VARS.contains(&change.variable.as_str()) {
                        change.variable = alloc_var.to_string();
                    }
                    if change.variable == OVERRIDE_VAR && change.value.is_some() {
                        continue;
                    }
                    add(
                        &mut testable,
                        Candidate {
                            change,
                            title: entry.title.clone(),
                            sources: vec![entry.id.clone()],
                            cost: catalogue_cost(entry),
                            rank: 3,
                        },
                    );
                }
            }
            CatalogueKind::Switch => {
                if !applies_to_families(entry, &families) && !related {
                    continue;
                }
                let probe_side = entry
                    .variables
                    .iter()
                    .any(|v| gpuprobe_model::is_probe_side_switch(v));
                if probe_side && !ctx.failures.iter().any(names_a_layout) {
                    continue;
                }
                if !torch_has(entry, &facts) {
                    continue;
                }
                for text in &entry.candidates {
                    add(
                        &mut testable,
                        Candidate {
                            change: SettingChange::parse(text),
                            title: entry.title.clone(),
                            sources: vec![entry.id.clone()],
                            cost: catalogue_cost(entry),
                            rank: 3,
                        },
                    );
                }
            }
            CatalogueKind::KernelParam | CatalogueKind::Firmware | CatalogueKind::CodeChange => {
                let relevant = related
                    || (!entry.families.is_empty()
                        && applies_to_families(entry, &families)
                        && (entry.id != "CAT-PINNED-STAGING"
                            || ctx
                                .failures
                                .iter()
                                .any(|r| r.probe.as_str().contains("pageable"))));
                if !relevant {
                    continue;
                }
                let kind = match entry.kind {
                    CatalogueKind::KernelParam => "kernel_param",
                    CatalogueKind::Firmware => "firmware",
                    _ => "code_change",
                };
                add_reported(
                    &mut set.reported,
                    ReportedChange {
                        description: format!("{}: {}", entry.title, entry.changes),
                        kind: kind.to_string(),
                        setting: entry.candidates.first().cloned(),
                        cost: catalogue_cost(entry),
                        sources: vec![entry.id.clone()],
                    },
                );
            }
        }
    }

    // Stable order: by rank; within a rank, settings of the failing families' own layers
    // before those tried for every family (a search that runs out of budget drops the
    // generic ones first); then as gathered (KB order, then catalogue order).
    testable.sort_by_key(|c| (c.rank, is_generic(ctx.catalogue, c)));
    for candidate in testable {
        if in_effect(&candidate.change, ctx.env) {
            // A removal of something not set changes nothing and is dropped silently; a
            // value already set was in effect when the failures happened.
            if candidate.change.value.is_some() {
                set.not_tried.push(NotTried {
                    reason: format!(
                        "already set in this environment (the failures happened with {})",
                        candidate.change
                    ),
                    candidate,
                });
            }
            continue;
        }
        set.testable.push(candidate);
    }
    set
}

/// The visible-devices setting, when this machine mixes an integrated and a discrete GPU:
/// reported with the value that hides the integrated one. It is not tried: hiding a GPU
/// renumbers the devices under test, so before/after results would not compare.
fn visible_devices(
    entry: &CatalogueEntry,
    fp: &Fingerprint,
    os: Option<gpuprobe_kb::OsName>,
) -> Option<ReportedChange> {
    let discrete: Vec<u32> = fp
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.is_apu == Some(false))
        .map(|(i, g)| g.index.unwrap_or(i as u32))
        .collect();
    let integrated = fp.gpus.iter().any(|g| g.is_apu == Some(true));
    if discrete.is_empty() || !integrated {
        return None;
    }
    let vendor = fp
        .gpus
        .iter()
        .find(|g| g.is_apu == Some(false))
        .map(|g| g.vendor)?;
    let variable = match (vendor, os) {
        (Vendor::Nvidia, _) => env_vars::CUDA_VISIBLE_DEVICES,
        (_, Some(gpuprobe_kb::OsName::Windows)) => env_vars::HIP_VISIBLE_DEVICES,
        _ => env_vars::ROCR_VISIBLE_DEVICES,
    };
    let list: Vec<String> = discrete.iter().map(|i| i.to_string()).collect();
    Some(ReportedChange {
        description: format!(
            "{}: hide the integrated GPU so the discrete one is device 0 (not tried: it renumbers the devices under test)",
            entry.title
        ),
        kind: "env".into(),
        setting: Some(format!("{variable}={}", list.join(","))),
        cost: catalogue_cost(entry),
        sources: vec![entry.id.clone()],
    })
}

/// Candidates the user named (`--candidate`), checked against the catalogue. The arch
/// override may only be named as a removal: setting one is what the lint warns about.
pub(super) fn explicit(
    settings: &[String],
    catalogue: &Catalogue,
) -> Result<Vec<Candidate>, CandidateRefused> {
    let mut out: Vec<Candidate> = Vec::new();
    for text in settings {
        let change = SettingChange::parse(text);
        let refused = |reason: String| CandidateRefused::NotAllowed {
            setting: text.clone(),
            reason,
        };
        let entry = match &change.value {
            Some(value) => {
                if change.variable == OVERRIDE_VAR {
                    return Err(refused(
                        "fix tries the arch override only as a removal (`HSA_OVERRIDE_GFX_VERSION` alone); \
                         an override value is a workaround only a matched known issue may name"
                            .into(),
                    ));
                }
                catalogue
                    .check_setting(&change.variable, value)
                    .map_err(|e| refused(e.to_string()))?
            }
            None => catalogue
                .entry_for_variable(&change.variable)
                .ok_or_else(|| {
                    refused(format!(
                        "{} is not a setting of the workaround catalogue",
                        change.variable
                    ))
                })?,
        };
        add(
            &mut out,
            Candidate {
                title: entry.title.clone(),
                sources: vec![entry.id.clone()],
                cost: catalogue_cost(entry),
                rank: 3,
                change,
            },
        );
    }
    Ok(out)
}

/// Whether a result is a failure the search sets out to cure.
pub(super) fn is_target(result: &ProbeResult) -> bool {
    matches!(
        result.verdict,
        Verdict::Fail { .. } | Verdict::Crash { .. } | Verdict::Hang { .. } | Verdict::Error { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::FailClass;
    use gpuprobe_model::GpuInfo;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

    fn failure(probe: &str) -> ProbeResult {
        ProbeResult::new(
            ProbeId::new(probe),
            DeviceRef::Gpu(0),
            Layer::Framework,
            Verdict::Fail {
                class: FailClass::AllZeros,
                detail: "zeros".into(),
            },
        )
    }

    fn amd_linux() -> Fingerprint {
        let mut fp = Fingerprint {
            source: "live".into(),
            ..Default::default()
        };
        fp.host.os = Some("linux".into());
        let mut gpu = GpuInfo::new(Vendor::Amd);
        gpu.native_isa = Some("gfx1100".into());
        fp.gpus.push(gpu);
        fp
    }

    fn settings(set: &CandidateSet) -> Vec<String> {
        set.testable.iter().map(|c| c.change.describe()).collect()
    }

    #[test]
    fn copy_failure_on_amd_gets_copy_engine_and_serialization_but_not_blas() {
        let catalogue = Catalogue::embedded();
        let fp = amd_linux();
        let failures = [failure("copy.h2d.pageable.tiny.nonblocking")];
        let env = BTreeMap::new();
        let set = gather(&CandidateContext {
            matches: &[],
            catalogue: &catalogue,
            fingerprint: &fp,
            failures: &failures,
            env: &env,
        });
        let names = settings(&set);
        for wanted in [
            "HSA_ENABLE_SDMA=0",
            "AMD_SERIALIZE_COPY=3",
            "AMD_SERIALIZE_COPY=2",
            "AMD_SERIALIZE_KERNEL=3",
            "PYTORCH_NO_HIP_MEMORY_CACHING=1",
        ] {
            assert!(names.contains(&wanted.to_string()), "{wanted} in {names:?}");
        }
        for unwanted in [
            "TORCH_BLAS_PREFER_HIPBLASLT=0",
            "MIOPEN_FIND_MODE=2",
            "CUDA_LAUNCH_BLOCKING=1",
            "NCCL_P2P_DISABLE=1",
            "PAL_DISABLE_SDMA=1",
        ] {
            assert!(
                !names.contains(&unwanted.to_string()),
                "{unwanted} in {names:?}"
            );
        }
        // Unsetting a variable that is not set is no candidate.
        assert!(!names.iter().any(|n| n.starts_with("unset")), "{names:?}");
        // Pinned staging is reported as a code change for a pageable copy failure.
        assert!(
            set.reported.iter().any(
                |r| r.kind == "code_change" && r.sources.contains(&"CAT-PINNED-STAGING".into())
            ),
            "{:?}",
            set.reported
        );
        // No kernel parameter is suggested without a known issue naming it.
        assert!(!set.reported.iter().any(|r| r.kind == "kernel_param"));
    }

    fn nvidia_linux(torch: &str) -> Fingerprint {
        let mut fp = Fingerprint {
            source: "live".into(),
            ..Default::default()
        };
        fp.host.os = Some("linux".into());
        fp.gpus.push(GpuInfo::new(Vendor::Nvidia));
        fp.python = Some(gpuprobe_model::PythonEnv {
            torch: Some(gpuprobe_model::TorchInfo {
                version: torch.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        fp
    }

    fn sweep_failure(probe: &str, variant: &str) -> ProbeResult {
        let mut result = failure(probe);
        let stats = gpuprobe_model::SweepStats {
            failures: vec![gpuprobe_model::SweepFailure {
                class: "wrong_value".into(),
                variant: variant.into(),
                direction: "backward".into(),
                sample: 1,
                output: "grad[0]".into(),
                detail: "wrong".into(),
                expected: "1".into(),
                found: "2".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        result.observation = Some(gpuprobe_model::Observation {
            probe: ProbeId::new(probe),
            device: DeviceRef::Gpu(0),
            measurement: Measurement::Sweep(Box::new(stats)),
            metrics: BTreeMap::new(),
            notes: vec![],
            output_digest: None,
        });
        result
    }

    #[test]
    fn framework_switches_follow_the_failing_families_and_the_torch_version() {
        let catalogue = Catalogue::embedded();
        let env = BTreeMap::new();
        let gather_for = |fp: &Fingerprint, failures: &[ProbeResult]| {
            settings(&gather(&CandidateContext {
                matches: &[],
                catalogue: &catalogue,
                fingerprint: fp,
                failures,
                env: &env,
            }))
        };
        let fp = nvidia_linux("2.11.0+cu130");
        let attention = gather_for(&fp, &[failure("nn.sdpa.matrix.bf16.default.bwd")]);
        for wanted in [
            "torch.backends.cuda.enable_cudnn_sdp=False",
            "torch.backends.cuda.enable_flash_sdp=False",
            "torch.backends.cuda.enable_mem_efficient_sdp=False",
            "torch.backends.cudnn.enabled=False",
        ] {
            assert!(
                attention.contains(&wanted.to_string()),
                "{wanted} in {attention:?}"
            );
        }
        // The failing layer's own settings are tried before the ones tried for every family.
        let position = |name: &str| attention.iter().position(|n| n == name).unwrap();
        assert!(
            position("torch.backends.cuda.enable_cudnn_sdp=False")
                < position("CUDA_LAUNCH_BLOCKING=1"),
            "{attention:?}"
        );
        // Compile switches only for compiled paths; copies get no framework switch.
        assert!(!attention.iter().any(|n| n.starts_with("torch._dynamo")));
        let compiled = gather_for(&fp, &[failure("compile.p03.bf16")]);
        assert!(compiled.contains(&"torch._dynamo.config.disable=True".to_string()));
        // A graph another process compiled and cached: tried for compiled and training
        // failures, never for eager ones, and not on a torch older than the setting.
        let cache_off = "torch._functorch.config.enable_autograd_cache=False".to_string();
        assert!(compiled.contains(&cache_off), "{compiled:?}");
        let training = gather_for(&fp, &[failure("train.convnet.fp16.compile")]);
        assert!(training.contains(&cache_off), "{training:?}");
        assert!(!attention.contains(&cache_off));
        let before_setting =
            gather_for(&nvidia_linux("2.4.1+cu124"), &[failure("compile.p03.bf16")]);
        assert!(!before_setting.contains(&cache_off), "{before_setting:?}");
        assert!(before_setting.contains(&"torch._dynamo.config.disable=True".to_string()));
        let copy = gather_for(&fp, &[failure("copy.h2d.pageable.tiny.nonblocking")]);
        assert!(!copy.iter().any(|n| n.starts_with("torch.")), "{copy:?}");
        // A torch older than the switch does not get it.
        let old = gather_for(
            &nvidia_linux("2.1.2+cu121"),
            &[failure("nn.sdpa.matrix.bf16.default.bwd")],
        );
        assert!(!old.contains(&"torch.backends.cuda.enable_cudnn_sdp=False".to_string()));
        assert!(old.contains(&"torch.backends.cuda.enable_flash_sdp=False".to_string()));
        // Contiguous inputs only where the evidence names a layout.
        let plain = gather_for(&fp, &[sweep_failure("sweep.cumsum.fp32", "base")]);
        assert!(!plain.contains(&"gpuprobe.inputs.contiguous=True".to_string()));
        let layout = gather_for(
            &fp,
            &[sweep_failure(
                "sweep.nn.functional.avg_pool2d.fp32",
                "channels_last",
            )],
        );
        assert!(layout.contains(&"gpuprobe.inputs.contiguous=True".to_string()));
        // A switch already passed in GPUPROBE_SWITCHES is in effect: not tried, and said so.
        let inherited = BTreeMap::from([(
            gpuprobe_model::SWITCHES_VARIABLE.to_string(),
            "torch.backends.cudnn.enabled=False".to_string(),
        )]);
        let set = gather(&CandidateContext {
            matches: &[],
            catalogue: &catalogue,
            fingerprint: &fp,
            failures: &[failure("nn.conv2d.bf16")],
            env: &inherited,
        });
        assert!(!settings(&set).contains(&"torch.backends.cudnn.enabled=False".to_string()));
        assert!(
            set.not_tried
                .iter()
                .any(|n| n.candidate.change.describe() == "torch.backends.cudnn.enabled=False")
        );
    }

    #[test]
    fn alternatives_and_overrides() {
        let catalogue = Catalogue::embedded();
        let fp = amd_linux();
        let failures = [failure("ops.matmul.fp32")];
        let mut env = BTreeMap::new();
        env.insert(OVERRIDE_VAR.to_string(), "11.0.0".to_string());
        env.insert("HSA_ENABLE_SDMA".to_string(), "0".to_string());
        let set = gather(&CandidateContext {
            matches: &[],
            catalogue: &catalogue,
            fingerprint: &fp,
            failures: &failures,
            env: &env,
        });
        let names = settings(&set);
        assert!(names.contains(&"TORCH_BLAS_PREFER_HIPBLASLT=0".to_string()));
        assert!(names.contains(&"TORCH_BLAS_PREFER_HIPBLASLT=1".to_string()));
        assert!(names.contains(&format!("unset {OVERRIDE_VAR}")));
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with(&format!("{OVERRIDE_VAR}=")))
        );
        // Already set: not tried, and said so.
        assert!(!names.contains(&"HSA_ENABLE_SDMA=0".to_string()));
        assert!(
            set.not_tried
                .iter()
                .any(|n| n.candidate.change.describe() == "HSA_ENABLE_SDMA=0")
        );
    }

    #[test]
    fn no_gpu_means_every_vendor() {
        let catalogue = Catalogue::embedded();
        let fp = Fingerprint::default();
        let failures = [failure("rng.randn.fp32")];
        let env = BTreeMap::new();
        let set = gather(&CandidateContext {
            matches: &[],
            catalogue: &catalogue,
            fingerprint: &fp,
            failures: &failures,
            env: &env,
        });
        let names = settings(&set);
        assert!(names.contains(&"CUDA_LAUNCH_BLOCKING=1".to_string()));
        assert!(names.contains(&"HIP_LAUNCH_BLOCKING=1".to_string()));
        assert!(!set.notes.is_empty());
    }

    #[test]
    fn explicit_candidates_are_checked() {
        let catalogue = Catalogue::embedded();
        let ok = explicit(&["HSA_ENABLE_SDMA=0".into()], &catalogue).unwrap();
        assert_eq!(ok[0].sources, vec!["CAT-SDMA-OFF".to_string()]);
        for bad in [
            "LD_PRELOAD=/tmp/x.so",
            "HIP_DISABLE_IPC=1",
            "HSA_ENABLE_SDMA=/etc",
            "HSA_OVERRIDE_GFX_VERSION=11.0.0",
        ] {
            assert!(explicit(&[bad.into()], &catalogue).is_err(), "{bad}");
        }
        assert!(explicit(&[OVERRIDE_VAR.into()], &catalogue).is_ok());
    }

    #[test]
    fn no_candidate_is_research_folklore() {
        // Folklore (docs/kb-format.md lists it): these must never be tried or recommended.
        let catalogue = Catalogue::embedded();
        let fp = Fingerprint::default();
        let failures: Vec<ProbeResult> = ["copy.h2d.x", "ops.matmul.x", "nn.sdpa.x", "dist.p2p.x"]
            .iter()
            .map(|p| failure(p))
            .collect();
        let env = BTreeMap::new();
        let set = gather(&CandidateContext {
            matches: &[],
            catalogue: &catalogue,
            fingerprint: &fp,
            failures: &failures,
            env: &env,
        });
        let all: Vec<String> = settings(&set)
            .into_iter()
            .chain(set.reported.iter().filter_map(|r| r.setting.clone()))
            .collect();
        for folklore in [
            "HIP_DISABLE_IPC",
            "gtt_size",
            "amdgpu.noretry",
            "amdgpu.vm_update_mode",
            "amdgpu.mtype_local",
            "amd_iommu=pt",
            "HSA_OVERRIDE_GFX_VERSION=",
        ] {
            assert!(
                !all.iter().any(|s| s.contains(folklore)),
                "{folklore} in {all:?}"
            );
        }
    }
}
