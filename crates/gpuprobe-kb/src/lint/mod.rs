//! The config lint: settings the user made (environment, kernel parameters) and stack
//! combinations that are no-ops, deprecated, invalid, shadowed or harmful here.
//!
//! Each rule has a stable id, a severity, what it means, when it fires, what to do and a
//! citation ([`rules`]); `docs/lint.md` documents the same list. Rules are written to stay
//! quiet on a plainly configured healthy machine: they fire on a specific setting or fact,
//! never on the mere presence of a GPU stack.

pub(crate) mod alloc_conf;
mod rules;

use gpuprobe_model::{Confidence, Evidence, Finding, FindingLayer, Fingerprint, Remedy, Severity};

use crate::facts::Facts;

/// One lint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintRule {
    /// Stable id (`LINT-OVERRIDE-UNNEEDED`).
    pub id: &'static str,
    /// Severity of its findings.
    pub severity: Severity,
    /// Layer of its findings: `config` for settings, `system` for kernel, driver and firmware.
    pub layer: FindingLayer,
    /// What it means, one line.
    pub title: &'static str,
    /// When it fires.
    pub trigger: &'static str,
    /// What to do.
    pub advice: &'static str,
    /// Public sources.
    pub citations: &'static [&'static str],
}

const OVERRIDE_CITES: &[&str] = &[
    "ROCm/ROCm#5238",
    "ROCm/ROCm#5225",
    "Comfy-Org/ComfyUI#8211",
    "likelovewant/ROCmLibs-for-gfx1103-AMD780M-APU#37",
    "rocm-systems PR #3461",
];
const ROCR_FLAGS: &str =
    "ROCm/rocm-systems projects/rocr-runtime/runtime/hsa-runtime/core/util/flag.h";
const CLR_FLAGS: &str = "ROCm/rocm-systems projects/clr/rocclr/utils/flags.hpp";
const AMDGPU_DRV: &str = "ROCm/amdgpu drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c";
const AMDGPU_JOB: &str =
    "torvalds/linux drivers/gpu/drm/amd/amdgpu/amdgpu_job.c (amdgpu_job_timedout)";
const AMDGPU_DEVICE: &str =
    "torvalds/linux drivers/gpu/drm/amd/amdgpu/amdgpu_device.c (amdgpu_device_gpu_recover)";
const TORCH_ALLOC: &str = "pytorch/pytorch c10/core/AllocatorConfig.cpp";
const TORCH_CUDA_NOTES: &str = "https://pytorch.org/docs/stable/notes/cuda.html";

macro_rules! rule {
    ($id:literal, $severity:ident, $layer:ident, $title:literal, $trigger:literal, $advice:literal, $cites:expr) => {
        LintRule {
            id: $id,
            severity: Severity::$severity,
            layer: FindingLayer::$layer,
            title: $title,
            trigger: $trigger,
            advice: $advice,
            citations: $cites,
        }
    };
}

/// Every rule, in the order `docs/lint.md` lists them.
const RULES: &[LintRule] = &[
    rule!(
        "LINT-OVERRIDE-UNNEEDED",
        Warning,
        Config,
        "HSA_OVERRIDE_GFX_VERSION names the GPU's own ISA: it does nothing",
        "The override decodes (M.m.s → gfxMms, minor and stepping in hex) to the native ISA read from the KFD topology.",
        "Remove HSA_OVERRIDE_GFX_VERSION.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-NATIVE-SUPPORTED",
        Warning,
        Config,
        "HSA_OVERRIDE_GFX_VERSION replaces an ISA the installed torch already supports",
        "The override names another ISA while the native ISA is in torch.cuda.get_arch_list().",
        "Remove HSA_OVERRIDE_GFX_VERSION: the wheel has kernels for the real ISA, and the override makes the runtime load code built for a different one.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-HARMFUL",
        Error,
        Config,
        "HSA_OVERRIDE_GFX_VERSION maps this GPU to an ISA known to fail",
        "A documented failing combination: 11.0.0 on gfx1150/gfx1151 (HSA_STATUS_ERROR_INVALID_ISA), 11.5.1 on gfx1150 (invalid device function), an Instinct part overridden to a consumer ISA (memory access faults).",
        "Remove HSA_OVERRIDE_GFX_VERSION; if the native ISA is missing from the wheel, install a build for it (TheRock per-arch wheels) instead.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-CROSS-ISA",
        Warning,
        Config,
        "HSA_OVERRIDE_GFX_VERSION maps this GPU to an ISA of another generation",
        "The decoded ISA differs from the native one in major or minor version, so the code objects are not ISA-compatible.",
        "Remove it, or map only to an ISA-compatible sibling (same major.minor, e.g. gfx1031 → 10.3.0); wrong results and faults are reported otherwise.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-SIBLING",
        Info,
        Config,
        "HSA_OVERRIDE_GFX_VERSION maps an unsupported chip to its ISA-compatible sibling",
        "The decoded ISA has the native ISA's major and minor (gfx1031/1032/1034/1035/1036 → 10.3.0, gfx1152 → 11.5.0) and the native ISA is not known to be in the wheel.",
        "Nothing to do; AMD calls the override an internal debugging aid, so prefer a build with native support once one exists.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-MALFORMED",
        Error,
        Config,
        "HSA_OVERRIDE_GFX_VERSION is not a major.minor.stepping triple that names an ISA",
        "The value is not three decimal numbers, or its minor or stepping is above 15.",
        "Remove it, or write it as major.minor.stepping in decimal (10.3.0, 9.0.10).",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-OVERRIDE-WINDOWS",
        Warning,
        Config,
        "HSA_OVERRIDE_GFX_VERSION is set on Windows, where nothing reads it",
        "The override is set and the OS is Windows: only ROCr/libhsakmt on Linux read it; the Windows (PAL) HIP runtime ignores it.",
        "Remove it; on Windows, select devices with HIP_VISIBLE_DEVICES and use a build for the GPU's ISA.",
        &[ROCR_FLAGS, "ROCm/ROCm#5238"]
    ),
    rule!(
        "LINT-OVERRIDE-UNCHECKED",
        Info,
        Config,
        "HSA_OVERRIDE_GFX_VERSION is set but the native ISA is unknown",
        "The override is set on a ROCm stack and no GPU's native ISA (KFD topology gfx_target_version) could be read.",
        "Make /sys/class/kfd readable (or run gpuprobe on the host) so the override can be compared with the real ISA.",
        OVERRIDE_CITES
    ),
    rule!(
        "LINT-ENV-NONEXISTENT",
        Warning,
        Config,
        "A variable from forum advice that no component reads",
        "HIP_DISABLE_IPC (not in HIP/CLR's flags.hpp; the nearest real flag is PAL_HIP_IPC_FLAG) or PYTORCH_MAX_SPLIT_SIZE_MB (not read by PyTorch; max_split_size_mb is a key of PYTORCH_ALLOC_CONF) is set.",
        "Remove it; it has no effect.",
        &[CLR_FLAGS, TORCH_ALLOC, TORCH_CUDA_NOTES]
    ),
    rule!(
        "LINT-ENV-IGNORED-WINDOWS",
        Warning,
        Config,
        "ROCr (HSA_*) variables are set on Windows, where the PAL runtime ignores them",
        "HSA_*, HSAKMT_* or ROCR_VISIBLE_DEVICES is set and the OS is Windows.",
        "Remove them; on Windows, PAL_DISABLE_SDMA=1 replaces HSA_ENABLE_SDMA=0 and HIP_VISIBLE_DEVICES replaces ROCR_VISIBLE_DEVICES.",
        &[ROCR_FLAGS, CLR_FLAGS]
    ),
    rule!(
        "LINT-ENV-WRONG-STACK",
        Info,
        Config,
        "ROCm-only variables are set on a machine without a ROCm stack",
        "HSA_*, HIP_*, AMD_SERIALIZE_*, MIOPEN_*, ROCBLAS_*, TORCH_ROCM_* or other ROCm-only variables are set, no AMD GPU, amdgpu driver, ROCm or ROCm torch is present, and the stack is CUDA.",
        "Nothing reads them here; remove them to keep the environment honest.",
        &[ROCR_FLAGS, CLR_FLAGS]
    ),
    rule!(
        "LINT-SVM-GUARD-PAGES",
        Warning,
        Config,
        "HSA_SVM_GUARD_PAGES=0 hides out-of-bounds reads",
        "HSA_SVM_GUARD_PAGES is 0: the guard pages that turn an over-read into a fault are gone, so the bug reads garbage silently.",
        "Remove it (debugging only); find the over-read with PYTORCH_NO_HIP_MEMORY_CACHING=1 and HSA_DISABLE_FRAGMENT_ALLOCATOR=1 instead.",
        &["ROCm/rocm-systems projects/rocr-runtime/libhsakmt (HSA_SVM_GUARD_PAGES)"]
    ),
    rule!(
        "LINT-NO-CACHING-ALLOCATOR",
        Warning,
        Config,
        "The PyTorch caching allocator is switched off",
        "PYTORCH_NO_HIP_MEMORY_CACHING=1 or PYTORCH_NO_CUDA_MEMORY_CACHING=1 is set: every tensor gets its own device allocation.",
        "Remove it unless a gpuprobe profile proved it cures a failure here: it is slow, and as a debugging aid it hides or moves out-of-bounds bugs rather than fixing them.",
        &[
            "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp",
            "ROCm/ROCm#5051"
        ]
    ),
    rule!(
        "LINT-NO-CACHING-RDNA4-MITIGATION",
        Info,
        Config,
        "The caching allocator is off on RDNA4, where that is the reported mitigation for hipBLASLt over-reads",
        "PYTORCH_NO_HIP_MEMORY_CACHING=1 on a gfx1200/gfx1201 GPU with ROCm ≥ 7.2 (or an unknown ROCm): hipBLASLt GEMMs read past the end of an operand there, which faults when the next page is unmapped; without the caching allocator's packed pools, the LoRA fine-tuning faults stopped. Replaces LINT-NO-CACHING-ALLOCATOR for that variable on such a stack.",
        "Keep it while this GPU faults without it (a gpuprobe profile can prove it); remove it once the installed hipBLASLt has the bounds fix (rocm-libraries PR #8909). It costs speed.",
        &[
            "ROCm/ROCm#6647",
            "ROCm/rocm-libraries#7992",
            "ROCm/rocm-libraries PR #8909",
            "https://github.com/ROCm/ROCm/issues/6647"
        ]
    ),
    rule!(
        "LINT-SERIALIZE-LEFT-ON",
        Warning,
        Config,
        "HIP kernel or copy serialization is switched on",
        "AMD_SERIALIZE_KERNEL or AMD_SERIALIZE_COPY is 1, 2 or 3, or HIP_LAUNCH_BLOCKING=1.",
        "Remove it unless a gpuprobe profile proved it cures a failure here: every launch or copy waits, which is slow; it is a debugging aid.",
        &[CLR_FLAGS]
    ),
    rule!(
        "LINT-CUDA-LAUNCH-BLOCKING",
        Warning,
        Config,
        "CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous",
        "CUDA_LAUNCH_BLOCKING is 1.",
        "Remove it unless you are locating an asynchronous error: it is slow.",
        &["https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-environment-variables"]
    ),
    rule!(
        "LINT-ALLOC-CONF-SHADOWED",
        Warning,
        Config,
        "Several allocator-config variables are set; torch reads only one",
        "Two or more of PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF are set with different values. They are not merged: the first found in the torch version's precedence order is parsed, the others are ignored.",
        "Keep one variable (PYTORCH_ALLOC_CONF on torch ≥ 2.9) holding every key you need.",
        &[TORCH_ALLOC, TORCH_CUDA_NOTES]
    ),
    rule!(
        "LINT-ALLOC-CONF-UNKNOWN-KEY",
        Warning,
        Config,
        "An allocator-config variable holds an unknown key or a malformed item",
        "An item is not key:value, or its key is not one PyTorch's parser knows (newer versions reject it with \"Unrecognized key\").",
        "Fix the spelling; the format is comma-separated key:value (expandable_segments:True,max_split_size_mb:128).",
        &[TORCH_ALLOC, TORCH_CUDA_NOTES]
    ),
    rule!(
        "LINT-EXPANDABLE-SEGMENTS-ROCM",
        Warning,
        Config,
        "expandable_segments:True on ROCm is ignored (torch ≤ 2.10, ROCm < 7.0) or has known hangs and NaNs",
        "The allocator configuration torch reads sets expandable_segments:True and torch is a ROCm build.",
        "On torch ≤ 2.10 it only prints \"expandable_segments not supported on this platform\"; on newer torch with ROCm ≥ 7.0 it is active and RKB-020 applies: set expandable_segments:False if you see hangs or NaNs.",
        &[
            "pytorch/pytorch#192259",
            "pytorch/pytorch#195202",
            "pytorch/pytorch#179911",
            "pytorch/pytorch PR #173330",
            "pytorch/pytorch PR #177974",
            "pytorch/pytorch PR #179930"
        ]
    ),
    rule!(
        "LINT-KPARAM-GTTSIZE-DEPRECATED",
        Warning,
        System,
        "amdgpu.gttsize is deprecated",
        "amdgpu.gttsize is on the kernel command line (or its running value is not the default -1). The driver marks it deprecated (\"will be removed\").",
        "Use ttm.pages_limit (pages of 4 KiB; amdttm.pages_limit with the DKMS driver) to size GPU-mappable system memory.",
        &[
            AMDGPU_DRV,
            "ROCm docs reference/system-optimization/rdna3-5"
        ]
    ),
    rule!(
        "LINT-KPARAM-UNKNOWN",
        Warning,
        System,
        "A kernel parameter that does not exist",
        "amdgpu.gtt_size (or gtt_size) is on the kernel command line: the driver has no such parameter (the real, deprecated one is gttsize); the kernel ignores it.",
        "Remove it; use ttm.pages_limit to size GTT.",
        &[AMDGPU_DRV]
    ),
    rule!(
        "LINT-KPARAM-AMD-IOMMU-PT",
        Warning,
        System,
        "amd_iommu=pt is not a valid option",
        "amd_iommu=pt is on the kernel command line; the kernel prints \"AMD-Vi: Unknown option - 'pt'\" and IOMMU passthrough is not enabled.",
        "Use iommu=pt (with amd_iommu=on where wanted), as AMD's Instinct guidance does.",
        &[
            "https://www.kernel.org/doc/html/latest/admin-guide/kernel-parameters.html",
            "kyuz0/amd-strix-halo-toolboxes#66"
        ]
    ),
    rule!(
        "LINT-KPARAM-MTYPE-LOCAL",
        Warning,
        System,
        "amdgpu.mtype_local has no effect on these GPUs",
        "amdgpu.mtype_local is on the kernel command line and no detected GPU is an MI300/MI350 (gfx942/gfx950); the parameter applies only to their local memory (and value 2 is marked unsafe).",
        "Remove it; it is not a fix for RDNA page faults.",
        &[AMDGPU_DRV]
    ),
    rule!(
        "LINT-KPARAM-NORETRY-ZERO",
        Warning,
        System,
        "amdgpu.noretry=0 enables retry faults; it does not disable them",
        "amdgpu.noretry is 0 and no detected GPU is a CDNA part that uses XNACK; 0 means page-fault retry ENABLED (1 disables it).",
        "Remove it unless you need XNACK on an Instinct GPU; it is not a fix for RDNA faults.",
        &[AMDGPU_DRV]
    ),
    rule!(
        "LINT-FIRMWARE-MES-0X83",
        Error,
        System,
        "MES firmware 0x83 on Strix Halo / Strix Point causes page faults and hangs",
        "A gfx1151 or gfx1150 GPU reports MES firmware version 0x83 (RKB-005).",
        "Go back to MES 0x80: a distro linux-firmware with the 2025-12-01 revert, and remove leftover amdgpu-dkms-firmware.",
        &[
            "ROCm/ROCm#5724 (AMD TLDR comment 2025-12-11)",
            "ROCm/ROCm#5991",
            "Launchpad 2129150"
        ]
    ),
    rule!(
        "LINT-KERNEL-RDNA-FAULTS",
        Warning,
        System,
        "Kernel 6.18.2 and later have gfxhub page faults on RDNA3/RDNA4",
        "The kernel release is ≥ 6.18.2 (the regression is reported through 7.0.x) and an RDNA3 or RDNA4 GPU (gfx11*, gfx12*) is present (RKB-008).",
        "Boot 6.12 LTS, the only maintained kernel reported to avoid it (6.17 does too but is end of life); the drm/amd#4776 patches are not shown to cure it.",
        &["ROCm/amdgpu#204", "ROCm/amdgpu#225", "ROCm/ROCm#5833"]
    ),
    rule!(
        "LINT-DRIVER-DKMS-STRIX-HALO",
        Warning,
        System,
        "The DKMS amdgpu driver on Strix Halo",
        "The amdgpu driver comes from amdgpu-dkms and a gfx1151 GPU is present; with ROCm 7.2 this stack page-faults on the first copy (RKB-007).",
        "Remove amdgpu-dkms and amdgpu-dkms-firmware, install ROCm with --no-dkms, and run a kernel from the RDNA3.5 support matrix.",
        &[
            "ROCm/ROCm#5890",
            "ROCm/ROCm#6146",
            "ROCm docs reference/system-optimization/rdna3-5"
        ]
    ),
    rule!(
        "LINT-ROCM-TOO-OLD",
        Error,
        Runtime,
        "ROCm is older than the first release that supports this GPU",
        "The ROCm torch runs on (else the system ROCm) is below the minimum for a GPU's ISA: gfx1151 needs 7.2, gfx1200/gfx1201 need 6.4, gfx950 needs 7.0.",
        "Install a torch built on a supported ROCm (or TheRock per-arch wheels).",
        &[
            "ROCm docs reference/system-optimization/rdna3-5",
            "warpfront/hipfire PR #81"
        ]
    ),
    rule!(
        "LINT-ARCH-NOT-IN-WHEEL",
        Error,
        Framework,
        "The installed torch has no kernels for this GPU",
        "The ISA the runtime reports (ROCm) or the compute capability (CUDA) is not covered by torch.cuda.get_arch_list(): the first kernel fails with \"invalid device function\" / \"No compatible code objects found\".",
        "Install a wheel built for this GPU (TheRock gfx110X-all, gfx120X-all, gfx1151 indexes for ROCm); on Linux, an ISA-compatible sibling override is the fallback.",
        &[
            "ROCm/TheRock#5543",
            "ROCm/TheRock#6869",
            "ggml-org/llama.cpp#19949"
        ]
    ),
    rule!(
        "LINT-IGPU-FIRST",
        Warning,
        Config,
        "An integrated GPU is device 0 beside a discrete GPU",
        "Device 0 is an APU/iGPU (e.g. gfx1036) and a discrete GPU is also present, so code that uses cuda:0 runs on the iGPU.",
        "Hide the iGPU: ROCR_VISIBLE_DEVICES (Linux) or HIP_VISIBLE_DEVICES (Windows) set to the discrete GPU's index.",
        &["ROCm/TheRock#5543", "ROCm/TheRock#6869"]
    ),
    rule!(
        "LINT-APU-CARVEOUT",
        Warning,
        System,
        "The framework sees only the BIOS carve-out of this APU",
        "On an APU, torch's total_memory is within 10% of the VRAM carve-out while GTT is at least twice as large (RKB-021).",
        "Use a small BIOS carve-out and raise the GTT limit with ttm.pages_limit (not amdgpu.gttsize).",
        &[
            "ROCm docs reference/system-optimization/rdna3-5",
            "pytorch/pytorch#107605",
            "ROCm/ROCm#5553"
        ]
    ),
    rule!(
        "LINT-DEVICE-NODES",
        Warning,
        System,
        "GPU device nodes cannot be opened by this user",
        "The fingerprint lists device nodes (/dev/kfd, /dev/dri/renderD*, /dev/nvidia*) the current user cannot open.",
        "Add the user to the render and video groups (containers: --device /dev/kfd --device /dev/dri --group-add video --group-add render).",
        &[
            "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/install/prerequisites.html",
            "ROCm/ROCm#5051 (comments 5, 9)"
        ]
    ),
    rule!(
        "LINT-KERNEL-VRAM-LOST",
        Error,
        System,
        "A pasted kernel log shows a GPU reset that lost the GPU's memory, or one that failed",
        "A pasted kernel log has amdgpu's \"VRAM is lost due to GPU reset!\" or a failed reset (\"GPU reset(N) failed\", \"ASIC reset failed\"). Not on the live machine, where the probes say whether the GPU computes now.",
        "Restart the processes that used the GPU (reboot after a failed reset), then find what hung it: the job's ring and process are in the ring-timeout line before the reset; gpuprobe check on that stack shows whether results are wrong as well.",
        &[AMDGPU_DEVICE, AMDGPU_JOB]
    ),
    rule!(
        "LINT-KERNEL-GPU-RESET",
        Warning,
        System,
        "A pasted kernel log shows a GPU hang: a ring timeout or a GPU reset",
        "A pasted kernel log has amdgpu's \"ring <name> timeout\" or a GPU reset (\"GPU reset begin!\", \"MODE1 reset\", \"BACO reset\", \"GPU recovery disabled\") and no lost memory. Not on the live machine.",
        "The job that hung failed; its process is named in the line after the ring timeout. Run gpuprobe check on that stack to see whether results are wrong as well.",
        &[AMDGPU_JOB, AMDGPU_DRV]
    ),
    rule!(
        "LINT-CONTAINER-UID",
        Info,
        Config,
        "Container user is not uid 1000 (suspected, anecdotal)",
        "Inside a container, with an AMD GPU, the uid is not 1000; two reports tie faults to a non-1000 uid (RKB-035).",
        "If you see memory access faults in this container, try running it as 1000:1000 with --group-add video --group-add render.",
        &["ROCm/ROCm#5051 (comments 5, 9)"]
    ),
];

/// Every lint rule.
pub fn rules() -> &'static [LintRule] {
    RULES
}

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static LintRule> {
    RULES.iter().find(|rule| rule.id == id)
}

/// Builds findings for rules.
pub(crate) struct Sink {
    findings: Vec<Finding>,
}

impl Sink {
    /// Adds a finding of `rule_id` with a specific title and explanation.
    pub(crate) fn emit(
        &mut self,
        rule_id: &str,
        title: String,
        explanation: String,
        evidence: Vec<Evidence>,
        remedies: Vec<Remedy>,
    ) {
        self.emit_with_confidence(
            rule_id,
            title,
            explanation,
            evidence,
            remedies,
            Confidence::Observed,
        );
    }

    /// As [`Sink::emit`], with an explicit confidence.
    pub(crate) fn emit_with_confidence(
        &mut self,
        rule_id: &str,
        title: String,
        explanation: String,
        evidence: Vec<Evidence>,
        remedies: Vec<Remedy>,
        confidence: Confidence,
    ) {
        let Some(rule) = rule(rule_id) else {
            return;
        };
        self.findings.push(Finding {
            id: rule.id.to_string(),
            source: "lint".to_string(),
            severity: rule.severity,
            layer: rule.layer,
            title,
            explanation: format!("{explanation} {}", rule.advice).trim().to_string(),
            confidence,
            evidence,
            remedies,
            citations: rule.citations.iter().map(|c| c.to_string()).collect(),
            next_steps: Vec::new(),
            related: RELATED_KB
                .iter()
                .filter(|(lint, _)| *lint == rule.id)
                .map(|(_, kb)| kb.to_string())
                .collect(),
        });
    }
}

/// Lint rules that are the configuration-side face of a known issue: the report merges the
/// two findings when both are raised.
const RELATED_KB: &[(&str, &str)] = &[
    ("LINT-OVERRIDE-HARMFUL", "RKB-010"),
    ("LINT-OVERRIDE-CROSS-ISA", "RKB-010"),
    ("LINT-EXPANDABLE-SEGMENTS-ROCM", "RKB-020"),
    ("LINT-FIRMWARE-MES-0X83", "RKB-005"),
    ("LINT-KERNEL-RDNA-FAULTS", "RKB-008"),
    ("LINT-NO-CACHING-RDNA4-MITIGATION", "RKB-041"),
    ("LINT-DRIVER-DKMS-STRIX-HALO", "RKB-007"),
    ("LINT-ROCM-TOO-OLD", "RKB-031"),
];

/// Lints a fingerprint: one finding per problem, ordered by severity, then rule order.
pub fn lint(fp: &Fingerprint) -> Vec<Finding> {
    let facts = Facts::new(fp);
    let mut sink = Sink {
        findings: Vec::new(),
    };
    rules::check_all(&facts, &mut sink);
    let order = |id: &str| {
        RULES
            .iter()
            .position(|rule| rule.id == id)
            .unwrap_or(usize::MAX)
    };
    sink.findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(order(&a.id).cmp(&order(&b.id)))
    });
    sink.findings
}

/// The rule reference as Markdown (the generated part of `docs/lint.md`).
pub fn rules_markdown() -> String {
    let mut out = String::new();
    for rule in RULES {
        let severity = match rule.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        out.push_str(&format!("### `{}`\n\n", rule.id));
        out.push_str(&format!(
            "*{severity}* · layer `{}` — {}\n\n",
            rule.layer.name(),
            rule.title
        ));
        out.push_str(&format!("- **Fires when:** {}\n", rule.trigger));
        out.push_str(&format!("- **Advice:** {}\n", rule.advice));
        out.push_str(&format!("- **Sources:** {}\n\n", rule.citations.join("; ")));
    }
    out
}
