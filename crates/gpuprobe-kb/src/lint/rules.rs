//! The checks behind the lint rules declared in `lint/mod.rs`, grouped by what they read:
//! the arch override, other environment settings, the allocator configuration, kernel
//! parameters / firmware / driver / versions, and devices.

use gpuprobe_model::env_vars;
use gpuprobe_model::{Confidence, Cost, Evidence, Remedy};
use gpuprobe_model::{DriverSource, GpuInfo, Vendor};

use super::Sink;
use super::alloc_conf;
use crate::facts::{Facts, OVERRIDE_VAR};
use crate::isa::{self, GfxIsa};
use crate::version::{DottedReq, DottedVersion, Pep440Version};

pub(super) fn check_all(facts: &Facts<'_>, sink: &mut Sink) {
    check_override(facts, sink);
    check_settings(facts, sink);
    check_alloc_conf(facts, sink);
    check_kernel_params(facts, sink);
    check_stack(facts, sink);
    check_devices(facts, sink);
    check_gpu_resets(facts, sink);
}

fn unset(name: &str, why: &str) -> Remedy {
    Remedy {
        description: format!("Remove {name} ({why})"),
        kind: "unset".to_string(),
        setting: Some(name.to_string()),
        cost: Cost::default(),
    }
}

fn kernel_param(description: &str, setting: &str) -> Remedy {
    Remedy {
        description: description.to_string(),
        kind: "kernel_param".to_string(),
        setting: Some(setting.to_string()),
        cost: Cost {
            needs_root: true,
            needs_reboot: true,
            ..Cost::default()
        },
    }
}

fn setting_evidence(name: &str, value: &str) -> Evidence {
    Evidence::new("setting", format!("{name}={value}"))
}

/// AMD GPUs with their framework index and native ISA (when known).
fn amd_gpus<'a>(facts: &Facts<'a>) -> Vec<(u32, &'a GpuInfo, Option<GfxIsa>)> {
    facts
        .gpus()
        .filter(|(_, gpu)| gpu.vendor == Vendor::Amd)
        .map(|(index, gpu)| (index, gpu, facts.native_isa(gpu)))
        .collect()
}

fn torch_covers(facts: &Facts<'_>, isa: &GfxIsa) -> Option<bool> {
    let list = &facts.torch()?.arch_list;
    if list.is_empty() {
        return None;
    }
    Some(list.iter().any(|target| isa::target_covers(target, isa)))
}

// ---------------------------------------------------------------- arch override

fn check_override(facts: &Facts<'_>, sink: &mut Sink) {
    let Some((value, decoded)) = facts.arch_override() else {
        check_override_at_work(facts, sink);
        return;
    };
    let set = setting_evidence(OVERRIDE_VAR, value);
    if facts.is_windows() {
        sink.emit(
            "LINT-OVERRIDE-WINDOWS",
            format!("{OVERRIDE_VAR}={value} is set on Windows, where nothing reads it"),
            "The Windows HIP runtime (PAL backend) does not read ROCr variables.".to_string(),
            vec![set, Evidence::new("condition", "OS is Windows")],
            vec![unset(OVERRIDE_VAR, "ignored on Windows")],
        );
        return;
    }
    if !facts.is_rocm_stack() {
        // Reported by LINT-ENV-WRONG-STACK.
        return;
    }
    let decoded = match decoded {
        Ok(decoded) => decoded,
        Err(error) => {
            sink.emit(
                "LINT-OVERRIDE-MALFORMED",
                format!("{OVERRIDE_VAR}={value} names no ISA"),
                format!("{error}."),
                vec![set],
                vec![unset(OVERRIDE_VAR, "it names no ISA")],
            );
            return;
        }
    };
    let decoded_evidence = Evidence::new(
        "setting",
        format!("{OVERRIDE_VAR}={value} decodes to {decoded}"),
    );
    let known: Vec<(u32, GfxIsa)> = amd_gpus(facts)
        .into_iter()
        .filter_map(|(index, _, native)| native.map(|n| (index, n)))
        .collect();
    if known.is_empty() {
        sink.emit(
            "LINT-OVERRIDE-UNCHECKED",
            format!("{OVERRIDE_VAR}={value} (→ {decoded}) is set but no GPU's native ISA is known"),
            "Without the native ISA the override cannot be judged.".to_string(),
            vec![decoded_evidence],
            Vec::new(),
        );
        return;
    }
    for (index, native) in known {
        let native_evidence =
            Evidence::new("condition", format!("GPU {index} native ISA {native}"));
        let evidence = vec![decoded_evidence.clone(), native_evidence];
        if decoded == native {
            sink.emit(
                "LINT-OVERRIDE-UNNEEDED",
                format!("{OVERRIDE_VAR}={value} equals GPU {index}'s native ISA {native} (unneeded; remove it)"),
                format!("The override decodes to {decoded}, which is what the hardware already is."),
                evidence,
                vec![unset(OVERRIDE_VAR, "it changes nothing")],
            );
        } else if let Some(reason) = harmful(&native, &decoded) {
            sink.emit(
                "LINT-OVERRIDE-HARMFUL",
                format!(
                    "{OVERRIDE_VAR}={value} maps GPU {index} ({native}) to {decoded}: {reason}"
                ),
                format!("Known failing combination: {reason}."),
                evidence,
                vec![unset(OVERRIDE_VAR, "known to fail on this GPU")],
            );
        } else if torch_covers(facts, &native) == Some(true) {
            sink.emit(
                "LINT-OVERRIDE-NATIVE-SUPPORTED",
                format!("{OVERRIDE_VAR}={value} replaces {native}, which the installed torch supports"),
                format!("{native} is in torch.cuda.get_arch_list(); the override makes the runtime use {decoded} code instead."),
                evidence,
                vec![unset(OVERRIDE_VAR, "the wheel supports the real ISA")],
            );
        } else if !decoded.is_sibling_of(&native) {
            sink.emit(
                "LINT-OVERRIDE-CROSS-ISA",
                format!("{OVERRIDE_VAR}={value} maps GPU {index} ({native}) to {decoded}, another ISA generation"),
                format!("{native} and {decoded} differ in major or minor version, so their code objects are not ISA-compatible."),
                evidence,
                vec![unset(OVERRIDE_VAR, "not ISA-compatible")],
            );
        } else {
            sink.emit(
                "LINT-OVERRIDE-SIBLING",
                format!("{OVERRIDE_VAR}={value} maps GPU {index} ({native}) to its ISA-compatible sibling {decoded}"),
                format!("{native} and {decoded} share major and minor version; this is the legitimate use of the override (Linux only)."),
                evidence,
                Vec::new(),
            );
        }
    }
}

/// Pasted logs seldom show the environment, but they show an override at work: a GPU whose
/// runtime ISA (rocminfo's agent name, torch's gcnArchName) differs from its hardware's
/// (KFD's `GFX VER`, or the ISA its PCI device id or marketing name belongs to). libhsakmt
/// reports the override in place of the real ISA, so the runtime ISA is what it decodes to,
/// and the override rules judge it as they judge a variable that is shown. Only pasted logs:
/// on the live machine the variable itself is read.
fn check_override_at_work(facts: &Facts<'_>, sink: &mut Sink) {
    if facts.is_live() || facts.is_windows() {
        return;
    }
    for (index, gpu, native) in amd_gpus(facts) {
        let runtime = gpu.runtime_isa.as_deref().and_then(GfxIsa::parse);
        let (Some(native), Some(runtime)) = (native, runtime) else {
            continue;
        };
        if native == runtime {
            continue;
        }
        let key = gpu.pci_bus.clone().unwrap_or_else(|| index.to_string());
        let basis = facts
            .fp
            .extra
            .get(&format!("gpu.{key}.native_isa_from"))
            .map(|basis| format!(" (from its {basis})"))
            .unwrap_or_default();
        let evidence = vec![
            Evidence::new("condition", format!("GPU {index} runtime ISA {runtime}")),
            Evidence::new(
                "condition",
                format!("GPU {index} native ISA {native}{basis}"),
            ),
        ];
        let at_work = format!(
            "GPU {index} is {native} but runs as {runtime}: an arch override ({OVERRIDE_VAR}) is in effect"
        );
        let why = format!(
            "The runtime reports {runtime} while the hardware is {native}{basis}; libhsakmt does that only for {OVERRIDE_VAR} (or its per-device form)."
        );
        let remove = |reason: &str| vec![unset(OVERRIDE_VAR, reason)];
        if let Some(reason) = harmful(&native, &runtime) {
            sink.emit(
                "LINT-OVERRIDE-HARMFUL",
                format!("{at_work}, mapping it to an ISA known to fail: {reason}"),
                why,
                evidence,
                remove("known to fail on this GPU"),
            );
        } else if torch_covers(facts, &native) == Some(true) {
            sink.emit(
                "LINT-OVERRIDE-NATIVE-SUPPORTED",
                format!("{at_work}, although the installed torch supports {native}"),
                why,
                evidence,
                remove("the wheel supports the real ISA"),
            );
        } else if !runtime.is_sibling_of(&native) {
            sink.emit(
                "LINT-OVERRIDE-CROSS-ISA",
                format!("{at_work}, mapping it to another ISA generation"),
                format!("{why} {native} and {runtime} differ in major or minor version, so their code objects are not ISA-compatible."),
                evidence,
                remove("not ISA-compatible"),
            );
        } else {
            sink.emit(
                "LINT-OVERRIDE-SIBLING",
                format!("{at_work}, mapping it to its ISA-compatible sibling"),
                why,
                evidence,
                Vec::new(),
            );
        }
    }
}

/// What the GPU-reset events of a pasted kernel log say, in words and with their lines.
/// Only pasted logs: a live machine's log of this boot may hold a reset that is long past,
/// and the probes say whether the GPU computes right now.
fn check_gpu_resets(facts: &Facts<'_>, sink: &mut Sink) {
    if facts.is_live() {
        return;
    }
    let events = &facts.fp.kernel_events;
    let first_of = |kind: &str, what: &dyn Fn(&str) -> bool| {
        events
            .iter()
            .find(|e| e.kind == kind && what(e.details.get("what").map_or("", String::as_str)))
    };
    let lost = first_of("gpu_reset", &|w| w.starts_with("VRAM is lost"));
    let failed = first_of("gpu_reset", &|w| w.contains("failed"));
    let timeout = first_of("ring_timeout", &|_| true);
    let reset = first_of("gpu_reset", &|w| w != "GPU recovery disabled");
    let recovery_off = first_of("gpu_reset", &|w| w == "GPU recovery disabled");
    let line =
        |event: &gpuprobe_model::KernelEvent| Evidence::new("log", event.line.trim().to_string());
    let device = [lost, failed, timeout, reset]
        .into_iter()
        .flatten()
        .find_map(|e| e.pci_bus.clone())
        .map(|bus| format!(" {bus}"))
        .unwrap_or_default();
    if lost.is_some() || failed.is_some() {
        let what = match (lost, failed) {
            (Some(_), Some(_)) => "was reset and lost its memory (VRAM), and a reset failed",
            (Some(_), None) => "was reset and lost its memory (VRAM)",
            _ => "could not be reset (a GPU reset failed)",
        };
        let evidence: Vec<Evidence> = [timeout, lost, failed]
            .into_iter()
            .flatten()
            .map(line)
            .collect();
        sink.emit(
            "LINT-KERNEL-VRAM-LOST",
            format!("Kernel log: GPU{device} {what}"),
            "Every buffer on the GPU was gone after the reset: the processes using it lost their work and must be restarted; a failed reset leaves the GPU unusable until a reboot.".to_string(),
            evidence,
            Vec::new(),
        );
    } else if timeout.is_some() || reset.is_some() || recovery_off.is_some() {
        let what = match (timeout, reset) {
            (Some(t), Some(_)) => format!(
                "a job on ring {} timed out and the GPU was reset",
                t.details.get("ring").map_or("?", String::as_str)
            ),
            (Some(t), None) => format!(
                "a job on ring {} timed out",
                t.details.get("ring").map_or("?", String::as_str)
            ),
            _ => "the GPU was reset".to_string(),
        };
        let evidence: Vec<Evidence> = [timeout, reset.or(recovery_off)]
            .into_iter()
            .flatten()
            .map(line)
            .collect();
        sink.emit(
            "LINT-KERNEL-GPU-RESET",
            format!("Kernel log: GPU{device} hung: {what}"),
            "The driver stops a job that runs past its timeout (amdgpu.lockup_timeout) and resets the GPU; the process that submitted it gets an error, and work on the GPU at that moment is lost.".to_string(),
            evidence,
            Vec::new(),
        );
    }
}

/// Documented failing override combinations (RKB-010).
fn harmful(native: &GfxIsa, decoded: &GfxIsa) -> Option<String> {
    let native_name = native.name();
    let decoded_name = decoded.name();
    match (native_name.as_str(), decoded_name.as_str()) {
        ("gfx1150" | "gfx1151", "gfx1100") => Some(
            "HSA_STATUS_ERROR_INVALID_ISA is reported for 11.0.0 on gfx1150/gfx1151".to_string(),
        ),
        ("gfx1150", "gfx1151") => {
            Some("\"invalid device function\" is reported for 11.5.1 on gfx1150".to_string())
        }
        _ if isa::is_instinct(native) && isa::is_consumer_generation(decoded) => Some(format!(
            "an Instinct part ({native_name}) overridden to a consumer ISA faults (an MI210 reported as gfx1030 gives \"Memory access fault ... on address (nil)\")"
        )),
        _ => None,
    }
}

// ---------------------------------------------------------------- other settings

/// Variables that no component reads, with what was probably meant.
const NONEXISTENT: &[(&str, &str)] = &[
    (
        "HIP_DISABLE_IPC",
        "no ROCm component reads it (it is not in HIP/CLR's flags.hpp; the nearest real flag is PAL_HIP_IPC_FLAG)",
    ),
    (
        "PYTORCH_MAX_SPLIT_SIZE_MB",
        "PyTorch does not read it; max_split_size_mb is a key of PYTORCH_ALLOC_CONF (e.g. PYTORCH_ALLOC_CONF=max_split_size_mb:512)",
    ),
];

fn is_rocm_only_variable(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "HSA_",
        "HSAKMT_",
        "ROCR_",
        "HIP_",
        "AMD_SERIALIZE_",
        "AMD_LOG_",
        "MIOPEN_",
        "ROCBLAS_",
        "HIPBLASLT_",
        "TENSILE_",
        "TORCH_ROCM_",
        "PAL_",
    ];
    const EXACT: &[&str] = &[
        "AMD_DIRECT_DISPATCH",
        "GPU_MAX_HW_QUEUES",
        env_vars::GPU_DEVICE_ORDINAL,
        "ROC_HMM_FLAGS",
        "PYTORCH_NO_HIP_MEMORY_CACHING",
        "PYTORCH_HIP_ALLOC_CONF",
        "TORCH_BLAS_PREFER_HIPBLASLT",
    ];
    (PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || EXACT.contains(&name))
        && !NONEXISTENT.iter().any(|(n, _)| *n == name)
}

fn check_settings(facts: &Facts<'_>, sink: &mut Sink) {
    let env = &facts.fp.env;
    for (name, why) in NONEXISTENT {
        if let Some(value) = env.get(*name) {
            sink.emit(
                "LINT-ENV-NONEXISTENT",
                format!(
                    "{name}={value} is set but {}",
                    why.split(" (").next().unwrap_or(why)
                ),
                format!("{name}: {why}."),
                vec![setting_evidence(name, value)],
                vec![unset(name, "no effect")],
            );
        }
    }
    if facts.is_windows() {
        let ignored: Vec<(&String, &String)> = env
            .iter()
            .filter(|(name, _)| {
                (name.starts_with("HSA_")
                    || name.starts_with("HSAKMT_")
                    || name.as_str() == env_vars::ROCR_VISIBLE_DEVICES)
                    && name.as_str() != OVERRIDE_VAR
            })
            .collect();
        if !ignored.is_empty() {
            let names: Vec<&str> = ignored.iter().map(|(n, _)| n.as_str()).collect();
            sink.emit(
                "LINT-ENV-IGNORED-WINDOWS",
                format!(
                    "{} set on Windows, where the PAL runtime ignores ROCr variables",
                    names.join(", ")
                ),
                "These variables are read only by ROCr/libhsakmt on Linux.".to_string(),
                ignored
                    .iter()
                    .map(|(n, v)| setting_evidence(n, v))
                    .collect(),
                names
                    .iter()
                    .map(|n| unset(n, "ignored on Windows"))
                    .collect(),
            );
        }
    }
    let cuda_stack =
        facts.fp.gpus.iter().any(|gpu| gpu.vendor == Vendor::Nvidia) || facts.torch_is_cuda();
    if !facts.is_rocm_stack() && cuda_stack {
        let stray: Vec<(&String, &String)> = env
            .iter()
            .filter(|(name, _)| is_rocm_only_variable(name))
            .collect();
        if !stray.is_empty() {
            let names: Vec<&str> = stray.iter().map(|(n, _)| n.as_str()).collect();
            sink.emit(
                "LINT-ENV-WRONG-STACK",
                format!(
                    "{} set, but this is a CUDA stack: no effect here",
                    names.join(", ")
                ),
                "No AMD GPU, amdgpu driver, ROCm install or ROCm build of torch was found."
                    .to_string(),
                stray.iter().map(|(n, v)| setting_evidence(n, v)).collect(),
                names
                    .iter()
                    .map(|n| unset(n, "no effect on CUDA"))
                    .collect(),
            );
        }
    }
    let rocm = facts.is_rocm_stack();
    if rocm
        && !facts.is_windows()
        && let Some(value) = facts.env("HSA_SVM_GUARD_PAGES").filter(|v| v.trim() == "0")
    {
        sink.emit(
            "LINT-SVM-GUARD-PAGES",
            "HSA_SVM_GUARD_PAGES=0 hides out-of-bounds reads".to_string(),
            "With the guard pages gone, an over-read returns whatever memory follows instead of faulting at its origin.".to_string(),
            vec![setting_evidence("HSA_SVM_GUARD_PAGES", value)],
            vec![unset("HSA_SVM_GUARD_PAGES", "debugging only")],
        );
    }
    let mut caching_off = Vec::new();
    if let Some(value) = facts
        .env("PYTORCH_NO_CUDA_MEMORY_CACHING")
        .filter(|v| v.trim() == "1")
    {
        caching_off.push(("PYTORCH_NO_CUDA_MEMORY_CACHING", value));
    }
    if rocm
        && let Some(value) = facts
            .env("PYTORCH_NO_HIP_MEMORY_CACHING")
            .filter(|v| v.trim() == "1")
    {
        match rdna4_overread_exposure(facts) {
            Some(evidence) => {
                sink.emit(
                    "LINT-NO-CACHING-RDNA4-MITIGATION",
                    "PYTORCH_NO_HIP_MEMORY_CACHING=1 on RDNA4: the reported mitigation for hipBLASLt's out-of-bounds GEMM reads".to_string(),
                    format!(
                        "{}: hipBLASLt GEMMs for this ISA read past the end of an operand (rocm-libraries#7992), which faults ([gfxhub] page fault, client TCP) when the next page is unmapped; with the caching allocator off the over-read lands on no one's memory, and the LoRA run of ROCm#6647 went from 7/7 failing to 3/3 clean.",
                        evidence
                            .iter()
                            .map(|e| e.text.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                    std::iter::once(setting_evidence("PYTORCH_NO_HIP_MEMORY_CACHING", value))
                        .chain(evidence)
                        .collect(),
                    vec![Remedy {
                        description: "Keep it while training on this GPU faults without it; remove it once the installed hipBLASLt has the bounds fix (rocm-libraries PR #8909), since it costs speed".to_string(),
                        kind: "other".to_string(),
                        setting: None,
                        cost: Cost {
                            slower: true,
                            ..Cost::default()
                        },
                    }],
                );
            }
            None => caching_off.push(("PYTORCH_NO_HIP_MEMORY_CACHING", value)),
        }
    }
    if !caching_off.is_empty() {
        let names: Vec<&str> = caching_off.iter().map(|(n, _)| *n).collect();
        sink.emit(
            "LINT-NO-CACHING-ALLOCATOR",
            format!(
                "{}=1 left on: the caching allocator is off (slow; a debugging aid)",
                names.join("=1, ")
            ),
            "Every tensor gets its own device allocation.".to_string(),
            caching_off
                .iter()
                .map(|(n, v)| setting_evidence(n, v))
                .collect(),
            names
                .iter()
                .map(|n| unset(n, "slow; hides out-of-bounds bugs"))
                .collect(),
        );
    }
    if rocm {
        let mut serializing = Vec::new();
        for name in ["AMD_SERIALIZE_KERNEL", "AMD_SERIALIZE_COPY"] {
            if let Some(value) = facts
                .env(name)
                .filter(|v| matches!(v.trim(), "1" | "2" | "3"))
            {
                serializing.push((name, value));
            }
        }
        if let Some(value) = facts.env("HIP_LAUNCH_BLOCKING").filter(|v| v.trim() == "1") {
            serializing.push(("HIP_LAUNCH_BLOCKING", value));
        }
        if !serializing.is_empty() {
            let names: Vec<&str> = serializing.iter().map(|(n, _)| *n).collect();
            sink.emit(
                "LINT-SERIALIZE-LEFT-ON",
                format!(
                    "{} left on: launches or copies are serialized (slow)",
                    names.join(", ")
                ),
                "Each kernel launch or copy waits for the previous work to finish.".to_string(),
                serializing
                    .iter()
                    .map(|(n, v)| setting_evidence(n, v))
                    .collect(),
                names
                    .iter()
                    .map(|n| unset(n, "slow; a debugging aid"))
                    .collect(),
            );
        }
    }
    if let Some(value) = facts
        .env("CUDA_LAUNCH_BLOCKING")
        .filter(|v| v.trim() == "1")
    {
        sink.emit(
            "LINT-CUDA-LAUNCH-BLOCKING",
            "CUDA_LAUNCH_BLOCKING=1 left on: every kernel launch is synchronous (slow)".to_string(),
            "Launches wait for completion, which serializes the GPU with the host.".to_string(),
            vec![setting_evidence("CUDA_LAUNCH_BLOCKING", value)],
            vec![unset("CUDA_LAUNCH_BLOCKING", "slow; a debugging aid")],
        );
    }
}

// ---------------------------------------------------------------- allocator configuration

fn check_alloc_conf(facts: &Facts<'_>, sink: &mut Sink) {
    let state = alloc_conf::state(facts);
    if state.set.is_empty() {
        return;
    }
    let evidence: Vec<Evidence> = state
        .set
        .iter()
        .map(|(n, v)| setting_evidence(n, v))
        .collect();
    let mut distinct: Vec<String> = state.set.iter().map(|(_, v)| v.replace(' ', "")).collect();
    distinct.sort();
    distinct.dedup();
    if state.set.len() >= 2 && distinct.len() >= 2 {
        let names: Vec<&str> = state.set.iter().map(|(n, _)| *n).collect();
        let (title, explanation, remedies) = match state.read {
            Some(read) => {
                let ignored: Vec<&str> = names.iter().copied().filter(|n| *n != read).collect();
                (
                    format!(
                        "Only {read} is read; {} {} ignored",
                        ignored.join(", "),
                        if ignored.len() == 1 { "is" } else { "are" }
                    ),
                    format!("{} ({}).", state.basis, names.join(", ")),
                    ignored.iter().map(|n| unset(n, "shadowed")).collect(),
                )
            }
            None => (
                format!(
                    "{} are all set with different values; torch reads only one",
                    names.join(", ")
                ),
                "Which one is read depends on the torch version, which is unknown here."
                    .to_string(),
                Vec::new(),
            ),
        };
        sink.emit(
            "LINT-ALLOC-CONF-SHADOWED",
            title,
            explanation,
            evidence.clone(),
            remedies,
        );
    }
    for (name, value) in &state.set {
        let problems: Vec<String> = alloc_conf::parse(value)
            .into_iter()
            .filter_map(|item| match &item.value {
                None => Some(format!("{:?} is not key:value", item.key)),
                Some(_) if !alloc_conf::KNOWN_KEYS.contains(&item.key.as_str()) => {
                    Some(format!("{:?} is not a known key", item.key))
                }
                Some(_) => None,
            })
            .collect();
        if !problems.is_empty() {
            sink.emit(
                "LINT-ALLOC-CONF-UNKNOWN-KEY",
                format!("{name}: {}", problems.join("; ")),
                format!("{name}={value}."),
                vec![setting_evidence(name, value)],
                Vec::new(),
            );
        }
    }
    if facts.torch_is_rocm() {
        let confs: Vec<(&str, &str)> = match state.effective() {
            Some(effective) => vec![effective],
            None => state.set.iter().map(|(n, v)| (*n, v.as_str())).collect(),
        };
        let enabled = confs.iter().find(|(_, conf)| {
            alloc_conf::value_of(conf, "expandable_segments")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        });
        if let (Some((name, conf)), Some(version)) = (enabled, facts.torch_version()) {
            let supported_from = Pep440Version::parse("2.11.0.dev0").ok();
            let rocm7 = DottedVersion::parse("7.0").ok();
            let rocm = facts.rocm();
            let explanation = if supported_from.is_some_and(|boundary| version < boundary) {
                format!(
                    "torch {version} on ROCm ignores it and prints \"expandable_segments not supported on this platform\"."
                )
            } else if let (Some(rocm), Some(rocm7)) = (&rocm, &rocm7)
                && rocm.version < *rocm7
            {
                format!(
                    "torch {version} enables it only for ROCm ≥ 7.0; {} is older, so it is ignored.",
                    rocm.source
                )
            } else {
                format!(
                    "torch {version} enables it on ROCm; known problems (RKB-020): hangs in hsaKmtMemoryVaMap on .to('cuda'), silent NaN in bf16 training, broken graph-capture recovery."
                )
            };
            sink.emit(
                "LINT-EXPANDABLE-SEGMENTS-ROCM",
                format!("expandable_segments:True in {name} on ROCm torch {version}"),
                explanation,
                vec![setting_evidence(name, conf)],
                Vec::new(),
            );
        }
    }
}

// ---------------------------------------------------------------- kernel parameters

/// Why a ROCm stack is exposed to hipBLASLt's transpose-load over-read on RDNA4 (gfx1200,
/// gfx1201): ROCm ≥ 7.2 loads GEMM operands with `global_load_tr`, which has no bounds
/// clamp (7.0.2 used `buffer_load`, whose descriptor clamps). `None` when no GPU is RDNA4 or
/// the stack is known to predate 7.2; an unknown ROCm version counts as exposed, because
/// removing the mitigation on a guess would bring the faults back.
fn rdna4_overread_exposure(facts: &Facts<'_>) -> Option<Vec<Evidence>> {
    let rdna4: Vec<(u32, GfxIsa)> = amd_gpus(facts)
        .into_iter()
        .filter_map(|(index, _, native)| native.map(|isa| (index, isa)))
        .filter(|(_, isa)| isa.major == 12 && isa.minor == 0 && isa.stepping <= 1)
        .collect();
    let (index, isa) = rdna4.first()?;
    let mut evidence = vec![Evidence::new(
        "condition",
        format!("GPU {index} native ISA {isa} (RDNA4)"),
    )];
    match (facts.rocm(), DottedVersion::parse("7.2")) {
        (Some(rocm), Ok(first)) if rocm.version < first => return None,
        (Some(rocm), _) => evidence.push(Evidence::new(
            "condition",
            format!(
                "{} (≥ 7.2 loads GEMM operands without bounds clamps)",
                rocm.source
            ),
        )),
        (None, _) => evidence.push(Evidence::new(
            "condition",
            "ROCm version unknown (the over-read is reported from 7.2 on)",
        )),
    }
    Some(evidence)
}

fn is_cdna_with_xnack(isa: &GfxIsa) -> bool {
    matches!(
        isa.name().as_str(),
        "gfx908" | "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950"
    )
}

fn check_kernel_params(facts: &Facts<'_>, sink: &mut Sink) {
    let tokens = facts.cmdline_tokens().unwrap_or_default();
    let gpus = amd_gpus(facts);
    let natives: Vec<GfxIsa> = gpus.iter().filter_map(|(_, _, native)| *native).collect();

    let cmdline_gttsize = facts.cmdline_value("amdgpu.gttsize");
    let running_gttsize = facts.module_param("amdgpu.gttsize").filter(|v| *v != "-1");
    if let Some(value) = cmdline_gttsize.or(running_gttsize) {
        sink.emit(
            "LINT-KPARAM-GTTSIZE-DEPRECATED",
            format!("amdgpu.gttsize={value} is deprecated; use ttm.pages_limit"),
            "The driver marks gttsize as deprecated and due for removal.".to_string(),
            vec![Evidence::new("setting", format!("amdgpu.gttsize={value}"))],
            vec![kernel_param(
                "Size GTT with ttm.pages_limit (pages of 4 KiB) instead",
                "ttm.pages_limit=<pages>",
            )],
        );
    }
    for token in &tokens {
        let key = token.split('=').next().unwrap_or(token);
        if key == "amdgpu.gtt_size" || key == "gtt_size" {
            sink.emit(
                "LINT-KPARAM-UNKNOWN",
                format!("{token} is not an amdgpu parameter (the kernel ignores it)"),
                "amdgpu has no gtt_size parameter; the real one is the deprecated gttsize."
                    .to_string(),
                vec![Evidence::new(
                    "setting",
                    format!("kernel command line has {token}"),
                )],
                vec![kernel_param(
                    "Remove it; size GTT with ttm.pages_limit",
                    "ttm.pages_limit=<pages>",
                )],
            );
        }
        if let Some(values) = token.strip_prefix("amd_iommu=")
            && values.split(',').any(|v| v == "pt")
        {
            sink.emit(
                "LINT-KPARAM-AMD-IOMMU-PT",
                format!("{token} is invalid; passthrough is iommu=pt"),
                "amd_iommu has no pt option, so passthrough is not enabled.".to_string(),
                vec![Evidence::new(
                    "setting",
                    format!("kernel command line has {token}"),
                )],
                vec![kernel_param("Replace it with iommu=pt", "iommu=pt")],
            );
        }
    }
    if let Some(value) = facts.cmdline_value("amdgpu.mtype_local")
        && !gpus.is_empty()
        && !natives
            .iter()
            .any(|isa| matches!(isa.name().as_str(), "gfx942" | "gfx950"))
    {
        sink.emit(
            "LINT-KPARAM-MTYPE-LOCAL",
            format!("amdgpu.mtype_local={value} has no effect here (MI300/MI350 only)"),
            "None of the detected GPUs is an MI300 or MI350.".to_string(),
            vec![Evidence::new(
                "setting",
                format!("amdgpu.mtype_local={value}"),
            )],
            Vec::new(),
        );
    }
    let noretry = facts
        .cmdline_value("amdgpu.noretry")
        .or_else(|| facts.module_param("amdgpu.noretry"));
    if let Some(value) = noretry.filter(|v| v.trim() == "0")
        && !natives.is_empty()
        && !natives.iter().any(is_cdna_with_xnack)
    {
        sink.emit(
            "LINT-KPARAM-NORETRY-ZERO",
            "amdgpu.noretry=0 enables page-fault retry (it does not disable it)".to_string(),
            "0 means retry enabled, 1 disabled, -1 automatic; retry matters for XNACK on Instinct GPUs, none of which is present.".to_string(),
            vec![Evidence::new("setting", format!("amdgpu.noretry={value}"))],
            Vec::new(),
        );
    }
}

// ---------------------------------------------------------------- firmware, driver, versions

fn check_stack(facts: &Facts<'_>, sink: &mut Sink) {
    let gpus = amd_gpus(facts);
    for (index, gpu, native) in &gpus {
        let Some(native) = native else { continue };
        if !matches!(native.name().as_str(), "gfx1150" | "gfx1151") {
            continue;
        }
        let mes = gpu
            .firmware
            .iter()
            .find(|fw| fw.name.eq_ignore_ascii_case("MES"));
        if let Some(mes) = mes
            && DottedVersion::parse(&mes.version).is_ok_and(|v| v.release() == [0x83])
        {
            sink.emit(
                "LINT-FIRMWARE-MES-0X83",
                format!("GPU {index} ({native}) runs MES firmware {} (RKB-005: page faults, hangs)", mes.version),
                "linux-firmware 20251125 shipped MES 0x83, which causes CPF page faults and hangs; 0x80 is good.".to_string(),
                vec![
                    Evidence::new("condition", format!("GPU {index} native ISA {native}")),
                    Evidence::new("condition", format!("MES firmware version {}", mes.version)),
                ],
                vec![Remedy {
                    description: "Roll back to MES 0x80 (linux-firmware with the 2025-12-01 revert); remove leftover amdgpu-dkms-firmware".to_string(),
                    kind: "firmware".to_string(),
                    setting: None,
                    cost: Cost { needs_root: true, needs_reboot: true, ..Cost::default() },
                }],
            );
        }
    }
    if let Some(kernel) = facts.kernel()
        && DottedReq::parse(">=6.18.2").is_ok_and(|range| range.matches(&kernel.version))
    {
        let rdna: Vec<String> = gpus
            .iter()
            .filter_map(|(index, _, native)| {
                native
                    .filter(|n| matches!(n.major, 11 | 12))
                    .map(|n| format!("GPU {index} {n}"))
            })
            .collect();
        if !rdna.is_empty() {
            sink.emit(
                "LINT-KERNEL-RDNA-FAULTS",
                format!("{} with {} (RKB-008: gfxhub page faults under compute)", kernel.source, rdna.join(", ")),
                "Kernels from 6.18.2 on (reported through 7.0.x, ROCm/amdgpu#225) fault in SDMA0/TCP clients on RDNA3/RDNA4 under compute (ComfyUI VAE, rocFFT); 6.17.9 and 6.12 LTS are good.".to_string(),
                vec![Evidence::new("condition", format!("{} is in >=6.18.2", kernel.source))],
                vec![Remedy {
                    description: "Boot 6.12 LTS (6.17 also avoids it but is end of life); the drm/amd#4776 patches are not shown to cure it".to_string(),
                    kind: "downgrade".to_string(),
                    setting: None,
                    cost: Cost { needs_root: true, needs_reboot: true, ..Cost::default() },
                }],
            );
        }
    }
    if let Some(driver) = &facts.fp.amdgpu
        && driver.source == DriverSource::Dkms
        && let Some((index, _, native)) = gpus
            .iter()
            .find(|(_, _, n)| n.is_some_and(|n| n.name() == "gfx1151"))
    {
        let version = driver
            .version
            .clone()
            .unwrap_or_else(|| "unknown version".to_string());
        sink.emit(
            "LINT-DRIVER-DKMS-STRIX-HALO",
            format!("GPU {index} ({}) runs the DKMS amdgpu driver ({version}) (RKB-007)", native.map(|n| n.name()).unwrap_or_default()),
            "Strix Halo with amdgpu-dkms page-faults on the first copy and hangs or segfaults in torch.randn with ROCm 7.2.".to_string(),
            vec![Evidence::new("condition", format!("amdgpu driver from DKMS ({version})"))],
            vec![Remedy {
                description: "Remove amdgpu-dkms and amdgpu-dkms-firmware; install ROCm with amdgpu-install --usecase=rocm --no-dkms".to_string(),
                kind: "other".to_string(),
                setting: None,
                cost: Cost { needs_root: true, needs_reboot: true, ..Cost::default() },
            }],
        );
    }
    if let Some(rocm) = facts.rocm() {
        for (index, _, native) in &gpus {
            let Some(native) = native else { continue };
            let Some(minimum) = isa::gfx_facts(&native.name()).and_then(|f| f.min_rocm) else {
                continue;
            };
            let Ok(minimum_version) = DottedVersion::parse(minimum) else {
                continue;
            };
            if rocm.version < minimum_version {
                sink.emit(
                    "LINT-ROCM-TOO-OLD",
                    format!("GPU {index} ({native}) needs ROCm ≥ {minimum}; {} is older", rocm.source),
                    format!("{native} is supported from ROCm {minimum}; older releases segfault or lack code objects for it."),
                    vec![
                        Evidence::new("condition", format!("GPU {index} native ISA {native}")),
                        Evidence::new("condition", rocm.source.clone()),
                    ],
                    vec![Remedy {
                        description: format!("Install a torch built on ROCm ≥ {minimum} (or TheRock per-arch wheels)"),
                        kind: "upgrade".to_string(),
                        setting: None,
                        cost: Cost::default(),
                    }],
                );
            }
        }
    }
}

// ---------------------------------------------------------------- devices

/// Parses `sm_90`, `sm_90a`, `compute_90` into (kind, major, minor, arch-specific).
fn cuda_target(target: &str) -> Option<(&'static str, u32, u32, bool)> {
    let (kind, rest) = if let Some(rest) = target.strip_prefix("sm_") {
        ("sm", rest)
    } else if let Some(rest) = target.strip_prefix("compute_") {
        ("compute", rest)
    } else {
        return None;
    };
    let specific = rest.ends_with('a') || rest.ends_with('f');
    let digits = rest.trim_end_matches(['a', 'f']);
    if digits.len() < 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((kind, major.parse().ok()?, minor.parse().ok()?, specific))
}

/// Whether a CUDA arch list covers compute capability `major.minor`: a cubin of the same
/// major and a minor not above it, or PTX of a capability not above it (JIT).
fn cuda_covered(list: &[String], major: u32, minor: u32) -> bool {
    list.iter().filter_map(|t| cuda_target(t)).any(
        |(kind, t_major, t_minor, specific)| match kind {
            "sm" if specific => t_major == major && t_minor == minor,
            "sm" => t_major == major && t_minor <= minor,
            _ => (t_major, t_minor) <= (major, minor),
        },
    )
}

fn compute_capability(gpu: &GpuInfo, torch_arch: Option<&str>) -> Option<(u32, u32)> {
    if let Some(cc) = &gpu.compute_capability {
        let (major, minor) = cc.split_once('.')?;
        return Some((major.trim().parse().ok()?, minor.trim().parse().ok()?));
    }
    let (_, major, minor, _) = cuda_target(torch_arch?)?;
    Some((major, minor))
}

fn check_devices(facts: &Facts<'_>, sink: &mut Sink) {
    let fp = facts.fp;
    let torch = facts.torch();
    let arch_list: &[String] = torch.map(|t| t.arch_list.as_slice()).unwrap_or(&[]);
    let torch_arch = |index: u32| {
        torch
            .and_then(|t| t.devices.iter().find(|d| d.index == index))
            .and_then(|d| d.arch.as_deref())
    };
    if !arch_list.is_empty() {
        for (index, gpu) in facts.gpus() {
            match gpu.vendor {
                Vendor::Amd if facts.torch_is_rocm() => {
                    // What the runtime reports: torch's own view, else the override (which
                    // libhsakmt reports in place of the real ISA), else the runtime's ISA.
                    let runtime = torch_arch(index)
                        .and_then(GfxIsa::parse)
                        .or_else(|| facts.arch_override().and_then(|(_, d)| d.ok()))
                        .or_else(|| gpu.runtime_isa.as_deref().and_then(GfxIsa::parse))
                        .or_else(|| facts.native_isa(gpu));
                    let Some(runtime) = runtime else { continue };
                    if !arch_list
                        .iter()
                        .any(|target| isa::target_covers(target, &runtime))
                    {
                        sink.emit(
                            "LINT-ARCH-NOT-IN-WHEEL",
                            format!("GPU {index} runs as {runtime}, which the installed torch has no kernels for"),
                            format!("torch.cuda.get_arch_list() is [{}]; kernels will fail with \"invalid device function\".", arch_list.join(", ")),
                            vec![Evidence::new("condition", format!("GPU {index} runtime ISA {runtime}"))],
                            Vec::new(),
                        );
                    }
                }
                Vendor::Nvidia if facts.torch_is_cuda() => {
                    let Some((major, minor)) = compute_capability(gpu, torch_arch(index)) else {
                        continue;
                    };
                    if !cuda_covered(arch_list, major, minor) {
                        sink.emit(
                            "LINT-ARCH-NOT-IN-WHEEL",
                            format!("GPU {index} (compute capability {major}.{minor}) is not covered by the installed torch"),
                            format!("torch.cuda.get_arch_list() is [{}]: no cubin of this major version and no PTX to JIT.", arch_list.join(", ")),
                            vec![Evidence::new("condition", format!("GPU {index} compute capability {major}.{minor}"))],
                            Vec::new(),
                        );
                    }
                }
                _ => {}
            }
        }
    }

    // iGPU enumerated first: torch's view when available, else the fingerprint's own order.
    let torch_devices = torch.map(|t| t.devices.as_slice()).unwrap_or(&[]);
    let amd = facts.has_amd_gpu();
    if amd && torch_devices.len() >= 2 && torch_devices.iter().all(|d| d.integrated.is_some()) {
        let first_integrated = torch_devices
            .iter()
            .find(|d| d.index == 0 && d.integrated == Some(true));
        let discrete: Vec<u32> = torch_devices
            .iter()
            .filter(|d| d.integrated == Some(false))
            .map(|d| d.index)
            .collect();
        if let Some(first) = first_integrated
            && !discrete.is_empty()
        {
            emit_igpu_first(facts, sink, &first.name, &discrete);
        }
    } else if amd && fp.gpus.len() >= 2 {
        let filtered = env_vars::GPU_VISIBILITY_LISTS
            .iter()
            .any(|v| facts.env(v).is_some());
        let indexed = fp.gpus.iter().all(|g| g.index.is_some());
        if indexed || !filtered {
            let apu: Vec<(u32, bool, &GpuInfo)> = facts
                .gpus()
                .filter_map(|(index, gpu)| facts.is_apu(gpu).map(|(apu, _)| (index, apu, gpu)))
                .collect();
            let first = apu.iter().find(|(index, apu, _)| *index == 0 && *apu);
            let discrete: Vec<u32> = apu
                .iter()
                .filter(|(_, apu, _)| !*apu)
                .map(|(index, _, _)| *index)
                .collect();
            if let Some((_, _, gpu)) = first
                && !discrete.is_empty()
            {
                let name = gpu
                    .name
                    .clone()
                    .or_else(|| facts.native_isa(gpu).map(|n| n.name()))
                    .unwrap_or_else(|| "integrated GPU".to_string());
                emit_igpu_first(facts, sink, &name, &discrete);
            }
        }
    }

    for (index, gpu) in facts.gpus() {
        if gpu.vendor != Vendor::Amd || facts.is_apu(gpu).map(|(apu, _)| apu) != Some(true) {
            continue;
        }
        let (Some(vram), Some(gtt)) = (gpu.vram_total_bytes, gpu.gtt_total_bytes) else {
            continue;
        };
        let Some(total) = torch_devices
            .iter()
            .find(|d| d.index == index)
            .and_then(|d| d.total_memory)
        else {
            continue;
        };
        let close = (total as f64 - vram as f64).abs() <= 0.10 * vram as f64;
        if vram > 0 && close && gtt >= 2 * vram {
            let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
            sink.emit(
                "LINT-APU-CARVEOUT",
                format!(
                    "GPU {index}: torch sees {:.1} GiB (the carve-out) while GTT is {:.1} GiB",
                    gib(total),
                    gib(gtt)
                ),
                "HIP reports the BIOS carve-out as device memory; allocations beyond it fail early or fall back.".to_string(),
                vec![
                    Evidence::new("condition", format!("torch total_memory {total} bytes")),
                    Evidence::new("condition", format!("VRAM carve-out {vram} bytes, GTT {gtt} bytes")),
                ],
                vec![kernel_param(
                    "Keep a small BIOS carve-out and raise the GTT limit with ttm.pages_limit",
                    "ttm.pages_limit=<pages>",
                )],
            );
        }
    }

    if !fp.host.inaccessible_device_nodes.is_empty() {
        let nodes = fp.host.inaccessible_device_nodes.join(", ");
        let uid = fp
            .host
            .uid
            .map(|u| format!(" (uid {u})"))
            .unwrap_or_default();
        sink.emit(
            "LINT-DEVICE-NODES",
            format!("Cannot open {nodes}{uid}"),
            "The GPU cannot be used by this user until the device nodes are accessible; a missing render/video group membership is the usual cause.".to_string(),
            fp.host.inaccessible_device_nodes.iter().map(|n| Evidence::new("condition", format!("{n} cannot be opened"))).collect(),
            vec![Remedy {
                description: "Add the user to the render and video groups (or pass --group-add video --group-add render to the container)".to_string(),
                kind: "other".to_string(),
                setting: None,
                cost: Cost { needs_root: true, ..Cost::default() },
            }],
        );
    }

    if let (Some(runtime), Some(uid)) = (&fp.host.container, fp.host.uid)
        && uid != 1000
        && facts.has_amd_gpu()
    {
        sink.emit_with_confidence(
            "LINT-CONTAINER-UID",
            format!("Suspected: container ({runtime}) runs as uid {uid}, not 1000"),
            "Two reports tie memory access faults in ROCm containers to a uid other than 1000; this is anecdotal and only worth trying if faults occur.".to_string(),
            vec![Evidence::new("condition", format!("inside {runtime} as uid {uid}"))],
            vec![Remedy {
                description: "Run the container as 1000:1000 with --group-add video --group-add render (anecdotal)".to_string(),
                kind: "other".to_string(),
                setting: None,
                cost: Cost::default(),
            }],
            Confidence::Suspected,
        );
    }
}

fn emit_igpu_first(facts: &Facts<'_>, sink: &mut Sink, name: &str, discrete: &[u32]) {
    let list: Vec<String> = discrete.iter().map(u32::to_string).collect();
    let variable = if facts.is_windows() {
        env_vars::HIP_VISIBLE_DEVICES
    } else {
        env_vars::ROCR_VISIBLE_DEVICES
    };
    sink.emit(
        "LINT-IGPU-FIRST",
        format!(
            "cuda:0 is the integrated GPU ({name}); the discrete GPU is cuda:{}",
            list.join(", cuda:")
        ),
        "Code that uses the default device runs on the iGPU.".to_string(),
        vec![Evidence::new(
            "condition",
            format!(
                "device 0 is integrated ({name}); discrete: {}",
                list.join(", ")
            ),
        )],
        vec![Remedy {
            description: "Expose only the discrete GPU".to_string(),
            kind: "env".to_string(),
            setting: Some(format!("{variable}={}", list.join(","))),
            cost: Cost::default(),
        }],
    );
}
