//! The shape of one knowledge-base entry (`kb/RKB-NNN-*.toml`), as serde types with a JSON
//! Schema. Unknown fields are errors everywhere, so a typo never silently drops a condition.
//!
//! The entry is data only; `validate` checks the rules serde cannot express (version
//! ranges, globs, settings) and `matcher` evaluates it against a fingerprint.
//!
//! # Conditions are walked in one place
//!
//! [`Conditions::walk`] yields every condition an entry sets as one [`ConditionRef`] (one
//! variant per field; `cmdline_has` and `cmdline_lacks` share [`ConditionRef::Cmdline`]
//! because the matcher reads the command line once for both). The matcher, the validator
//! and the renderer each handle a condition in one arm of an exhaustive `match` on it, so
//! nothing walks the struct's fields by hand.
//!
//! ## Adding a condition
//!
//! 1. Add the field to [`Conditions`] (with its doc comment: it becomes the JSON Schema's
//!    description) and, if it is per GPU, name it in the struct's doc.
//! 2. Build, and follow the compiler. It points at, in this order:
//!    - [`Conditions::walk`] here, which destructures the struct without `..`: yield the
//!      new field as a new [`ConditionRef`] variant (in declaration order) when it is set;
//!    - [`ConditionRef::kind`] and [`ConditionKind::is_gpu_scoped`] here: say whether it
//!      must hold for the same GPU as the other GPU conditions;
//!    - `matcher::eval_condition` (`src/matcher.rs`): how it is evaluated against the
//!      facts, as held / failed / unchecked with the words the user sees (a fact the
//!      fingerprint lacks may need a `facts::Facts` accessor);
//!    - `validate::check_condition` (`src/validate.rs`): what a valid value is (an arm
//!      with `{}` when serde's types already say everything);
//!    - `render::condition_lines` (`src/render.rs`): how `gpuprobe kb show` lists it.
//! 3. Then the tests: add the key to `EVERY_CONDITION` in
//!    `crates/gpuprobe-kb/tests/it/conditions.rs` (whose walk test counts the kinds, and
//!    whose order tests then show the new lines of the matcher, the validator and `kb
//!    show`), and test its matching and validation in `tests/it` (`matching.rs`,
//!    `broken.rs`). Describe the key in `docs/kb-format.md`.
//!    `schema.rs` needs nothing: the JSON Schema is derived from the struct (the schema
//!    test then asks for `kb/kb.schema.json` to be regenerated with
//!    `GPUPROBE_UPDATE_SCHEMA=1 cargo test -p gpuprobe-kb --test it schema`).
//!
//! The three consumers historically list a few conditions in an order other than the
//! declaration order (the renderer shows the NVIDIA driver and uid ranges after torch's,
//! the validator checks them after HIP's, the matcher checks `override_differs` last among
//! the GPU conditions); each keeps its order with a stable sort on [`ConditionKind`], and a
//! new condition simply takes its declaration place.

use gpuprobe_model::Vendor;
use gpuprobe_model::{Cost, FailClass, FindingLayer, Severity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One known issue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KbEntry {
    /// Stable id, `RKB-NNN` for the shipped entries (the file name starts with it).
    pub id: String,
    /// One line: what goes wrong.
    pub title: String,
    /// Class of failure.
    pub kind: IssueKind,
    /// Severity when confirmed.
    pub severity: Severity,
    /// Severity when only suspected; default: the entry severity, capped at `warning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity_if_suspected: Option<Severity>,
    /// Where in the stack the problem sits.
    pub layer: FindingLayer,
    /// What the user sees and what is going on, a few sentences.
    pub summary: String,
    /// Whether it is fixed upstream.
    #[serde(default)]
    pub status: IssueStatus,
    /// When the issue applies; every condition given must hold.
    #[serde(default)]
    pub conditions: Conditions,
    /// Probe outcomes that confirm the issue (any one suffices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirm: Vec<ProbeOutcome>,
    /// Outcomes of related probes the issue predicts alongside a confirmation (the pinned
    /// control of a pageable-copy bug); a control that comes out otherwise means the
    /// failure is broader than this issue explains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control: Vec<ProbeOutcome>,
    /// Probe outcomes that argue against the issue on this machine (the predicted failure
    /// did not happen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradict: Vec<ProbeOutcome>,
    /// Kernel log events that confirm the issue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<LogSignature>,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workarounds: Vec<Workaround>,
    /// Where it was fixed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixed_in: Vec<FixedIn>,
    /// Public sources, exactly as the research cites them, and their URLs.
    pub citations: Vec<String>,
    /// Anything else worth knowing (what the issue is *not*, unverified parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// Class of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IssueKind {
    /// Wrong results without an error.
    SilentWrong,
    /// A crash, abort or fault.
    Crash,
    /// A hang.
    Hang,
    /// Slow, or less memory than expected.
    Perf,
    /// A setting or installation problem.
    Config,
}

impl IssueKind {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            IssueKind::SilentWrong => "silent-wrong",
            IssueKind::Crash => "crash",
            IssueKind::Hang => "hang",
            IssueKind::Perf => "perf",
            IssueKind::Config => "config",
        }
    }
}

/// Upstream state of an issue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IssueStatus {
    /// Not fixed.
    Open,
    /// Fixed (see `fixed_in`).
    Fixed,
    /// Fixed for some configurations or in some trees.
    PartlyFixed,
    /// Closed upstream without a clear fix record.
    Closed,
    /// A platform property (IOMMU, ACS, hardware support), not a bug to be fixed.
    Platform,
    /// Not known.
    #[default]
    Unknown,
}

impl IssueStatus {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            IssueStatus::Open => "open",
            IssueStatus::Fixed => "fixed",
            IssueStatus::PartlyFixed => "partly-fixed",
            IssueStatus::Closed => "closed",
            IssueStatus::Platform => "platform",
            IssueStatus::Unknown => "unknown",
        }
    }
}

/// Operating system as conditions name it; `wsl` is Linux under WSL, not `linux`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OsName {
    /// Linux, not under WSL.
    Linux,
    /// Windows.
    Windows,
    /// Linux under the Windows Subsystem for Linux.
    Wsl,
}

impl OsName {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            OsName::Linux => "linux",
            OsName::Windows => "windows",
            OsName::Wsl => "wsl",
        }
    }
}

/// When an entry applies. All given conditions must hold; lists mean "any of".
/// GPU conditions (`vendor`, `arch`, `apu`, `firmware`, `torch_supports_arch`,
/// `override_differs`, `override_sibling`) must all hold for one and the same GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// GPU vendor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<Vendor>,
    /// Native ISA patterns (`gfx1151`, `gfx11*`); any may match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arch: Vec<String>,
    /// Integrated GPU sharing system memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apu: Option<bool>,
    /// Firmware versions of the GPU; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firmware: Vec<FirmwareCondition>,
    /// Whether the GPU's ISA is in the installed torch's `get_arch_list()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_supports_arch: Option<bool>,
    /// Whether `HSA_OVERRIDE_GFX_VERSION` is set and names an ISA other than the GPU's
    /// native one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_differs: Option<bool>,
    /// Whether `HSA_OVERRIDE_GFX_VERSION` names an ISA-compatible sibling of the GPU's native
    /// ISA (same major and minor version, e.g. gfx1031 → 10.3.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_sibling: Option<bool>,
    /// Operating systems; any may match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<OsName>,
    /// Kernel release range (`>=6.18.2, <6.18.7`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// ROCm release range, against the ROCm torch runs on (the `rocmX.Y.Z` local tag of a
    /// ROCm torch build, else the major.minor of `torch.version.hip`), else the system ROCm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm: Option<String>,
    /// HIP runtime version range (torch's `torch.version.hip`, else the system HIP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<String>,
    /// torch version range, PEP 440 on the public version (`>=2.11.0a0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// Prefixes of torch's local version tag (`rocm7.2`, `cu13`); any may match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub torch_local: Vec<String>,
    /// The amdgpu kernel driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amdgpu_driver: Option<DriverCondition>,
    /// NVIDIA driver version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_driver: Option<String>,
    /// Environment variables; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvCondition>,
    /// Kernel module parameters (`amdgpu.cwsr_enable`); all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub module_params: Vec<ParamCondition>,
    /// Kernel command-line tokens that must all be present (`pci=noacs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmdline_has: Vec<String>,
    /// Kernel command-line tokens that must all be absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmdline_lacks: Vec<String>,
    /// At least this many GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_gpus: Option<u32>,
    /// Running inside a container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<bool>,
    /// Secure Boot enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// User id range (`!=1000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Python packages installed in the probed interpreter; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackageCondition>,
    /// Keys of the caching-allocator configuration in effect; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alloc_conf: Vec<AllocConfCondition>,
    /// Alternatives: at least one group must hold as a whole (in addition to the
    /// conditions above).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<Conditions>,
}

impl Conditions {
    /// Whether any GPU-scoped condition is given (in an `any_of` group too).
    pub fn has_gpu_conditions(&self) -> bool {
        self.walk().into_iter().any(|condition| match condition {
            ConditionRef::AnyOf(groups) => groups.iter().any(Conditions::has_gpu_conditions),
            condition => condition.kind().is_gpu_scoped(),
        })
    }

    /// Every condition that is set, in declaration order, `any_of` last. This is the one
    /// place that reads the fields: see the module header for how to add a condition.
    pub fn walk(&self) -> Vec<ConditionRef<'_>> {
        // Destructured without `..`, so that a new field does not compile until it is
        // walked.
        let Conditions {
            vendor,
            arch,
            apu,
            firmware,
            torch_supports_arch,
            override_differs,
            override_sibling,
            os,
            kernel,
            rocm,
            hip,
            torch,
            torch_local,
            amdgpu_driver,
            nvidia_driver,
            env,
            module_params,
            cmdline_has,
            cmdline_lacks,
            min_gpus,
            container,
            secure_boot,
            uid,
            packages,
            alloc_conf,
            any_of,
        } = self;
        use ConditionRef as C;
        [
            vendor.map(C::Vendor),
            non_empty(arch).map(C::Arch),
            apu.map(C::Apu),
            non_empty(firmware).map(C::Firmware),
            torch_supports_arch.map(C::TorchSupportsArch),
            override_differs.map(C::OverrideDiffers),
            override_sibling.map(C::OverrideSibling),
            non_empty(os).map(C::Os),
            kernel.as_deref().map(C::Kernel),
            rocm.as_deref().map(C::Rocm),
            hip.as_deref().map(C::Hip),
            torch.as_deref().map(C::Torch),
            non_empty(torch_local).map(C::TorchLocal),
            amdgpu_driver.as_ref().map(C::AmdgpuDriver),
            nvidia_driver.as_deref().map(C::NvidiaDriver),
            non_empty(env).map(C::Env),
            non_empty(module_params).map(C::ModuleParams),
            (!cmdline_has.is_empty() || !cmdline_lacks.is_empty()).then_some(C::Cmdline {
                has: cmdline_has,
                lacks: cmdline_lacks,
            }),
            min_gpus.map(C::MinGpus),
            container.map(C::Container),
            secure_boot.map(C::SecureBoot),
            uid.as_deref().map(C::Uid),
            non_empty(packages).map(C::Packages),
            non_empty(alloc_conf).map(C::AllocConf),
            non_empty(any_of).map(C::AnyOf),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// A list condition is set when it has an item.
fn non_empty<T>(items: &[T]) -> Option<&[T]> {
    (!items.is_empty()).then_some(items)
}

/// One condition an entry sets, borrowed from its [`Conditions`] (see
/// [`Conditions::walk`]); each variant is the field of the same name. Lists are never empty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConditionRef<'a> {
    /// `vendor`.
    Vendor(Vendor),
    /// `arch`.
    Arch(&'a [String]),
    /// `apu`.
    Apu(bool),
    /// `firmware`.
    Firmware(&'a [FirmwareCondition]),
    /// `torch_supports_arch`.
    TorchSupportsArch(bool),
    /// `override_differs`.
    OverrideDiffers(bool),
    /// `override_sibling`.
    OverrideSibling(bool),
    /// `os`.
    Os(&'a [OsName]),
    /// `kernel`.
    Kernel(&'a str),
    /// `rocm`.
    Rocm(&'a str),
    /// `hip`.
    Hip(&'a str),
    /// `torch`.
    Torch(&'a str),
    /// `torch_local`.
    TorchLocal(&'a [String]),
    /// `amdgpu_driver`.
    AmdgpuDriver(&'a DriverCondition),
    /// `nvidia_driver`.
    NvidiaDriver(&'a str),
    /// `env`.
    Env(&'a [EnvCondition]),
    /// `module_params`.
    ModuleParams(&'a [ParamCondition]),
    /// `cmdline_has` and `cmdline_lacks` (either may be empty, not both): one condition on
    /// the kernel command line, which the matcher reads once.
    Cmdline {
        /// `cmdline_has`.
        has: &'a [String],
        /// `cmdline_lacks`.
        lacks: &'a [String],
    },
    /// `min_gpus`.
    MinGpus(u32),
    /// `container`.
    Container(bool),
    /// `secure_boot`.
    SecureBoot(bool),
    /// `uid`.
    Uid(&'a str),
    /// `packages`.
    Packages(&'a [PackageCondition]),
    /// `alloc_conf`.
    AllocConf(&'a [AllocConfCondition]),
    /// `any_of`.
    AnyOf(&'a [Conditions]),
}

impl ConditionRef<'_> {
    /// Which condition this is, without its value.
    pub fn kind(&self) -> ConditionKind {
        use ConditionKind as K;
        match self {
            ConditionRef::Vendor(_) => K::Vendor,
            ConditionRef::Arch(_) => K::Arch,
            ConditionRef::Apu(_) => K::Apu,
            ConditionRef::Firmware(_) => K::Firmware,
            ConditionRef::TorchSupportsArch(_) => K::TorchSupportsArch,
            ConditionRef::OverrideDiffers(_) => K::OverrideDiffers,
            ConditionRef::OverrideSibling(_) => K::OverrideSibling,
            ConditionRef::Os(_) => K::Os,
            ConditionRef::Kernel(_) => K::Kernel,
            ConditionRef::Rocm(_) => K::Rocm,
            ConditionRef::Hip(_) => K::Hip,
            ConditionRef::Torch(_) => K::Torch,
            ConditionRef::TorchLocal(_) => K::TorchLocal,
            ConditionRef::AmdgpuDriver(_) => K::AmdgpuDriver,
            ConditionRef::NvidiaDriver(_) => K::NvidiaDriver,
            ConditionRef::Env(_) => K::Env,
            ConditionRef::ModuleParams(_) => K::ModuleParams,
            ConditionRef::Cmdline { .. } => K::Cmdline,
            ConditionRef::MinGpus(_) => K::MinGpus,
            ConditionRef::Container(_) => K::Container,
            ConditionRef::SecureBoot(_) => K::SecureBoot,
            ConditionRef::Uid(_) => K::Uid,
            ConditionRef::Packages(_) => K::Packages,
            ConditionRef::AllocConf(_) => K::AllocConf,
            ConditionRef::AnyOf(_) => K::AnyOf,
        }
    }
}

/// The kinds of [`ConditionRef`], ordered as [`Conditions::walk`] yields them (declaration
/// order), so that a consumer can keep an order of its own with a stable sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionKind {
    /// `vendor`.
    Vendor,
    /// `arch`.
    Arch,
    /// `apu`.
    Apu,
    /// `firmware`.
    Firmware,
    /// `torch_supports_arch`.
    TorchSupportsArch,
    /// `override_differs`.
    OverrideDiffers,
    /// `override_sibling`.
    OverrideSibling,
    /// `os`.
    Os,
    /// `kernel`.
    Kernel,
    /// `rocm`.
    Rocm,
    /// `hip`.
    Hip,
    /// `torch`.
    Torch,
    /// `torch_local`.
    TorchLocal,
    /// `amdgpu_driver`.
    AmdgpuDriver,
    /// `nvidia_driver`.
    NvidiaDriver,
    /// `env`.
    Env,
    /// `module_params`.
    ModuleParams,
    /// `cmdline_has` and `cmdline_lacks`.
    Cmdline,
    /// `min_gpus`.
    MinGpus,
    /// `container`.
    Container,
    /// `secure_boot`.
    SecureBoot,
    /// `uid`.
    Uid,
    /// `packages`.
    Packages,
    /// `alloc_conf`.
    AllocConf,
    /// `any_of`.
    AnyOf,
}

impl ConditionKind {
    /// Whether the condition is about one GPU, so that all such conditions must hold for
    /// one and the same GPU (and only results from the matching GPUs count).
    pub fn is_gpu_scoped(self) -> bool {
        use ConditionKind as K;
        match self {
            K::Vendor
            | K::Arch
            | K::Apu
            | K::Firmware
            | K::TorchSupportsArch
            | K::OverrideDiffers
            | K::OverrideSibling => true,
            K::Os
            | K::Kernel
            | K::Rocm
            | K::Hip
            | K::Torch
            | K::TorchLocal
            | K::AmdgpuDriver
            | K::NvidiaDriver
            | K::Env
            | K::ModuleParams
            | K::Cmdline
            | K::MinGpus
            | K::Container
            | K::SecureBoot
            | K::Uid
            | K::Packages
            | K::AllocConf
            // The groups' own conditions say for themselves.
            | K::AnyOf => false,
        }
    }
}

/// A firmware version condition (`component = "MES"`, `version = "==0x83"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FirmwareCondition {
    /// Component as the fingerprint names it (`MES`, `MES_KIQ`, `SMC`).
    pub component: String,
    /// Version range; hexadecimal values (`0x83`) compare as numbers.
    pub version: String,
}

/// Where the amdgpu driver came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriverSourceName {
    /// Shipped with the kernel.
    Inbox,
    /// amdgpu-dkms.
    Dkms,
}

/// An amdgpu driver condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriverCondition {
    /// Inbox or DKMS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<DriverSourceName>,
    /// DKMS / module version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An environment-variable condition. With no test given, the variable must be set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvCondition {
    /// Variable name.
    pub name: String,
    /// Whether it must be set (`true`) or unset (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<bool>,
    /// Values it may have (exact match); any may match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<String>,
    /// For `HSA_OVERRIDE_GFX_VERSION`: ISA patterns the decoded value may name (`gfx1100`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decodes_to: Vec<String>,
}

/// A kernel module parameter condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamCondition {
    /// `module.parameter` (`amdgpu.cwsr_enable`, `ttm.pages_limit`).
    pub name: String,
    /// Values it may have; any may match. Where the running value cannot be read, the
    /// kernel command line is consulted, then `default`.
    pub one_of: Vec<String>,
    /// The driver's default, used when the parameter is neither readable nor on the
    /// command line (`1` for `amdgpu.cwsr_enable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A Python package condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageCondition {
    /// Distribution name (`flash_attn`); compared case-insensitively with `-` = `_`.
    pub name: String,
    /// PEP 440 version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A caching-allocator configuration key condition (`expandable_segments` = `True`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllocConfCondition {
    /// Key (`expandable_segments`).
    pub key: String,
    /// Values it may have (case-insensitive); any may match.
    pub one_of: Vec<String>,
}

/// A verdict name, as used in outcome patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictName {
    /// PASS.
    Pass,
    /// FAIL.
    Fail,
    /// CRASH.
    Crash,
    /// HANG.
    Hang,
    /// ERROR.
    Error,
    /// SKIP.
    Skip,
    /// NOT-TESTED.
    NotTested,
}

impl VerdictName {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            VerdictName::Pass => "pass",
            VerdictName::Fail => "fail",
            VerdictName::Crash => "crash",
            VerdictName::Hang => "hang",
            VerdictName::Error => "error",
            VerdictName::Skip => "skip",
            VerdictName::NotTested => "not_tested",
        }
    }
}

/// A pattern over probe results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeOutcome {
    /// Probe id globs (`copy.h2d.pageable.tiny*`); any may match.
    pub probes: Vec<String>,
    /// Verdicts; any may match.
    pub verdicts: Vec<VerdictName>,
    /// For `fail`: the failure classes that count (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_classes: Vec<FailClass>,
    /// For crash / error / fail: text one of which must occur (case-insensitive) in the
    /// message, detail, stderr tail or kernel log of the result (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_contains: Vec<String>,
    /// For crash: exit codes that count (Windows `-1073741819` is 0xC0000005).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exit_codes: Vec<i32>,
    /// Why this outcome matters, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ProbeOutcome {
    /// Whether the pattern covers every probe (`probes = ["*"]`): then only its message
    /// texts and exit codes can tie a result to this issue rather than to any failure.
    pub fn is_catch_all(&self) -> bool {
        self.probes.iter().all(|glob| glob.trim() == "*")
    }

    /// Whether the pattern carries a signature of the issue: a probe of its own, an exit
    /// code, or a message text that is not the wording every GPU memory fault prints
    /// (see [`is_generic_fault_text`]). A pattern without one only raises suspicion.
    pub fn has_signature(&self) -> bool {
        !self.is_catch_all()
            || !self.exit_codes.is_empty()
            || self
                .message_contains
                .iter()
                .any(|text| !is_generic_fault_text(text))
    }
}

/// The wording that every GPU memory fault prints, whatever its cause: the runtime's
/// "Memory access fault by GPU ... Page not present or supervisor privilege" and the
/// kernel's "[gfxhub] page fault". Text made only of these names the class of failure,
/// not a known issue.
const GENERIC_FAULT_TEXTS: &[&str] = &[
    "memory access fault",
    "page not present or supervisor privilege",
    "page fault",
    "illegal memory access",
];

/// Whether a message or log text names only the class of a GPU memory fault (it contains,
/// or is part of, one of the generic wordings), so that seeing it cannot tell one known
/// issue from another.
pub(crate) fn is_generic_fault_text(text: &str) -> bool {
    let text = text.trim().to_lowercase();
    text.is_empty()
        || GENERIC_FAULT_TEXTS
            .iter()
            .any(|generic| text.contains(generic) || generic.contains(text.as_str()))
}

/// A kernel log event pattern, matched against the fingerprint's kernel events and the
/// kernel log lines recorded with probe results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogSignature {
    /// Event kind: `page_fault`, `ring_timeout`, `gpu_reset`, `mes_failure`, `segfault`,
    /// `xid`, `queue_evicted`, `hsa_memory_fault` (the runtime's "Memory access fault by GPU"
    /// line found in pasted logs).
    pub kind: String,
    /// Faulting client (`CPF`, `SDMA0`, `TCP`), for page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Text the event's line must contain (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Why this event matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl LogSignature {
    /// Whether the pattern names more than the class of event: a faulting `client`, or a
    /// `contains` text that is not generic fault wording. An event kind alone (any page
    /// fault, any memory access fault, any MES failure) has many causes, so a pattern
    /// without a signature only raises suspicion; it never confirms.
    pub fn has_signature(&self) -> bool {
        self.client.as_ref().is_some_and(|c| !c.trim().is_empty())
            || self
                .contains
                .as_ref()
                .is_some_and(|text| !is_generic_fault_text(text))
    }
}

/// The kind of a workaround (same names as `model::Remedy::kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemedyKind {
    /// Set an environment variable (`NAME=VALUE`).
    Env,
    /// Remove an environment variable (`NAME`).
    Unset,
    /// A kernel command-line or module parameter.
    KernelParam,
    /// Change firmware.
    Firmware,
    /// Upgrade a component.
    Upgrade,
    /// Downgrade a component.
    Downgrade,
    /// Change the user's code.
    CodeChange,
    /// A framework switch set inside the Python process (`NAME=VALUE` with a dotted
    /// `torch.` name, e.g. `torch.backends.cuda.enable_cudnn_sdp=False`).
    Switch,
    /// Anything else.
    Other,
}

impl RemedyKind {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            RemedyKind::Env => "env",
            RemedyKind::Unset => "unset",
            RemedyKind::KernelParam => "kernel_param",
            RemedyKind::Firmware => "firmware",
            RemedyKind::Upgrade => "upgrade",
            RemedyKind::Downgrade => "downgrade",
            RemedyKind::CodeChange => "code_change",
            RemedyKind::Switch => "switch",
            RemedyKind::Other => "other",
        }
    }
}

/// How well a workaround is supported by its sources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkaroundEvidence {
    /// Stated by the vendor or shown by a fix.
    Documented,
    /// Reported to work by those affected.
    #[default]
    Reported,
    /// One or two uncorroborated reports.
    Anecdotal,
    /// Plausible but not shown to cure the issue.
    Unverified,
    /// A debugging aid, not a cure.
    Debug,
}

impl WorkaroundEvidence {
    /// The name as written in the files.
    pub fn name(self) -> &'static str {
        match self {
            WorkaroundEvidence::Documented => "documented",
            WorkaroundEvidence::Reported => "reported",
            WorkaroundEvidence::Anecdotal => "anecdotal",
            WorkaroundEvidence::Unverified => "unverified",
            WorkaroundEvidence::Debug => "debug",
        }
    }

    /// The words shown after a workaround whose sources do not show that it cures the
    /// issue, so that it is never presented as a cure; `None` for a documented one.
    pub fn qualifier(self) -> Option<&'static str> {
        use gpuprobe_model::qualifier;
        match self {
            WorkaroundEvidence::Documented => None,
            WorkaroundEvidence::Reported => Some(qualifier::REPORTED),
            WorkaroundEvidence::Anecdotal => Some(qualifier::ANECDOTAL),
            WorkaroundEvidence::Unverified => Some(qualifier::UNVERIFIED),
            WorkaroundEvidence::Debug => Some(qualifier::DEBUG),
        }
    }
}

// How the knowledge base reads and writes `gpuprobe_model::Cost`, its one cost type: a
// field of type `Cost` says `#[serde(with = "StrictCost")]`. Strictly, as everywhere in an
// entry: a typo in a cost table (`needs_rot`) is an error with its line, where the model's
// `Cost` ignores an unknown key (a report or a profile a newer gpuprobe wrote). The remote
// derive stops the build when these fields and `Cost`'s differ; the JSON Schemas take their
// `Cost` from here, doc comments included.
/// What a workaround costs.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Cost", deny_unknown_fields)]
pub(crate) struct StrictCost {
    /// It makes things slower.
    #[serde(default)]
    slower: bool,
    /// It needs root.
    #[serde(default)]
    needs_root: bool,
    /// It needs a reboot.
    #[serde(default)]
    needs_reboot: bool,
    /// It needs a change to the user's code.
    #[serde(default)]
    code_change: bool,
    /// Anything else about the cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// One thing to do about an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workaround {
    /// What to do, in words.
    pub description: String,
    /// What kind of change it is.
    pub kind: RemedyKind,
    /// The setting: `NAME=VALUE` for `env` and `switch`, `NAME` for `unset`,
    /// `module.param=value` or a command-line token for `kernel_param`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// What it costs.
    #[serde(default, with = "StrictCost")]
    pub cost: Cost,
    /// A process setting `gpuprobe fix` may try in a fresh worker (must be in the
    /// workaround catalogue).
    #[serde(default)]
    pub testable: bool,
    /// How well the sources support it.
    #[serde(default)]
    pub evidence: WorkaroundEvidence,
    /// The source for this workaround when it differs from the entry's citations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Workaround {
    /// The description with its evidence qualifier ("Disable Secure Boot (reported to
    /// help, not verified)"): what every listing of the workaround shows.
    pub fn description_with_evidence(&self) -> String {
        match self.evidence.qualifier() {
            Some(words) => format!("{} ({words})", self.description.trim_end()),
            None => self.description.clone(),
        }
    }
}

/// Where an issue was fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixedIn {
    /// Component (`rocm`, `kernel`, `torch`, `linux-firmware`, `hipblaslt`, ...).
    pub component: String,
    /// First fixed version, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The fix itself (commit, pull request, date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
