//! Matching knowledge-base entries against a fingerprint and probe results, with the
//! reasons spelled out.
//!
//! Every condition is three-valued: it *held* (a fact satisfied it), it *failed* (a fact
//! contradicts it) or it is *unchecked* (the fact is missing). An entry with a failed
//! condition does not match; an entry with nothing that held does not match either (no
//! facts, no claim). The rest match with a status:
//! - **confirmed**: every condition held and a probe result or kernel log event shows the
//!   issue's failure pattern with its signature (and no control probe came out otherwise);
//! - **suspected**: the conditions hold (or could not all be checked) but nothing confirms it;
//! - **not observed here**: the conditions hold but the probes that would show it passed.
//!
//! Only evidence that carries the entry's own signature confirms: a faulting client, a
//! message of its own, a probe of its own, an exit code. A pattern that names only the class
//! of failure (a `logs` pattern with `kind` alone, a catch-all probe pattern whose only text
//! is the wording every GPU memory fault prints) matches many unrelated faults; what it
//! matches is kept as a hint that raises suspicion and is shown, but never confirms.
//!
//! GPU conditions (vendor, arch, APU, firmware, ...) must hold for one and the same GPU, and
//! only results from the matching GPUs count as evidence.

use gpuprobe_model::WITHOUT_SIGNATURE;
use gpuprobe_model::{
    Confidence, DeviceRef, Evidence, Finding, Fingerprint, ProbeId, ProbeResult, Remedy, Severity,
    Verdict,
};
use gpuprobe_model::{GpuInfo, Vendor};

use crate::entry::{
    AllocConfCondition, ConditionKind, ConditionRef, Conditions, DriverCondition, DriverSourceName,
    EnvCondition, FirmwareCondition, KbEntry, LogSignature, OsName, PackageCondition,
    ParamCondition, ProbeOutcome, VerdictName, is_generic_fault_text,
};
use crate::facts::{Facts, OVERRIDE_VAR};
use crate::glob::first_match;
use crate::isa;
use crate::kb::KnowledgeBase;
use crate::lint::alloc_conf;
use crate::validate::suspected_severity;
use crate::version::{DottedReq, DottedVersion, Pep440Req, Pep440Version};

/// How strongly an entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchStatus {
    /// Conditions hold and results confirm it.
    Confirmed,
    /// Conditions hold (or could not all be checked); nothing confirms it.
    Suspected,
    /// Conditions hold, but the probes that would show it passed.
    NotObserved,
}

impl MatchStatus {
    /// Lowercase words for tables.
    pub fn name(self) -> &'static str {
        match self {
            MatchStatus::Confirmed => "confirmed",
            MatchStatus::Suspected => "suspected",
            MatchStatus::NotObserved => "not observed here",
        }
    }
}

/// A probe result that bears on a match.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultEvidence {
    /// The probe.
    pub probe: ProbeId,
    /// The device it ran on.
    pub device: DeviceRef,
    /// What it showed, in words.
    pub text: String,
    /// For controls: whether it came out as the issue predicts.
    pub as_predicted: bool,
}

/// One matched entry and why.
#[derive(Debug, Clone, PartialEq)]
pub struct KbMatch {
    /// The entry.
    pub entry: KbEntry,
    /// How strongly it matches.
    pub status: MatchStatus,
    /// The GPUs (framework indices) whose facts satisfied the GPU conditions.
    pub gpus: Vec<u32>,
    /// Conditions that held, each with the fact that satisfied it.
    pub held: Vec<String>,
    /// Conditions that could not be checked, and why.
    pub unchecked: Vec<String>,
    /// Results that show the failure pattern.
    pub confirming: Vec<ResultEvidence>,
    /// Control results (related probes whose outcome the issue predicts).
    pub controls: Vec<ResultEvidence>,
    /// Results where the predicted failure did not happen.
    pub contradicting: Vec<ResultEvidence>,
    /// Kernel log events that match the issue with its signature.
    pub logs: Vec<String>,
    /// Results that match a `confirm` pattern only through what every fault of the kind
    /// shows (a crash with "Memory access fault" under a catch-all pattern): they raise
    /// suspicion, never confirm.
    pub hints: Vec<ResultEvidence>,
    /// Kernel log events that match a `logs` pattern without a signature (an event kind
    /// alone): they raise suspicion, never confirm.
    pub hint_logs: Vec<String>,
    /// Whether the facts come from pasted logs (`gpuprobe triage`), so that a fact missing
    /// means the logs did not show it rather than that it could not be read.
    pub from_paste: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    Held,
    Failed,
    Unchecked,
}

/// The evaluation of a set of conditions.
#[derive(Debug, Clone, Default)]
struct Eval {
    held: Vec<String>,
    failed: Vec<String>,
    unchecked: Vec<String>,
    /// Whether a condition that singles the entry out held: anything but the GPU vendor and
    /// the OS, which hold for every machine of a kind.
    specific_held: bool,
    /// Whether a kernel-release condition held. It singles out an entry about a GPU only
    /// when the GPU is shown: a kernel release is on every Linux paste, with or without
    /// the GPU the entry is about.
    kernel_held: bool,
}

impl Eval {
    fn truth(&self) -> Truth {
        if !self.failed.is_empty() {
            Truth::Failed
        } else if !self.unchecked.is_empty() {
            Truth::Unchecked
        } else {
            Truth::Held
        }
    }

    fn push(&mut self, truth: Truth, text: String) {
        match truth {
            Truth::Held => self.held(text),
            Truth::Failed => self.failed.push(text),
            Truth::Unchecked => self.unchecked.push(text),
        }
    }

    fn held(&mut self, text: String) {
        self.held.push(text);
        self.specific_held = true;
    }

    /// A condition that held but says nothing about this entry in particular (GPU vendor,
    /// OS).
    fn held_broad(&mut self, text: String) {
        self.held.push(text);
    }

    /// The kernel release held (see `kernel_held`).
    fn held_kernel(&mut self, text: String) {
        self.held.push(text);
        self.kernel_held = true;
    }

    fn failed(&mut self, text: String) {
        self.failed.push(text);
    }

    fn unchecked(&mut self, text: String) {
        self.unchecked.push(text);
    }
}

/// Matches every entry of the knowledge base; the result is ordered by status (confirmed
/// first), then severity, then id.
pub fn match_all(kb: &KnowledgeBase, fp: &Fingerprint, results: &[ProbeResult]) -> Vec<KbMatch> {
    let mut matches: Vec<KbMatch> = kb
        .entries()
        .filter_map(|entry| match_entry(entry, fp, results))
        .collect();
    matches.sort_by(|a, b| {
        a.status
            .cmp(&b.status)
            .then(a.severity().cmp(&b.severity()))
            .then(a.entry.id.cmp(&b.entry.id))
    });
    matches
}

/// Matches one entry; `None` when it does not apply.
pub fn match_entry(entry: &KbEntry, fp: &Fingerprint, results: &[ProbeResult]) -> Option<KbMatch> {
    let facts = Facts::new(fp);
    let conditions = &entry.conditions;
    let (eval, gpus) = if conditions.has_gpu_conditions() && !fp.gpus.is_empty() {
        let per_gpu: Vec<(u32, Eval)> = facts
            .gpus()
            .map(|(index, gpu)| {
                (
                    index,
                    eval_group(conditions, &facts, Some((index, gpu)), false),
                )
            })
            .collect();
        let held: Vec<&(u32, Eval)> = per_gpu
            .iter()
            .filter(|(_, eval)| eval.truth() == Truth::Held)
            .collect();
        let chosen: Vec<&(u32, Eval)> = if held.is_empty() {
            per_gpu
                .iter()
                .filter(|(_, eval)| eval.truth() == Truth::Unchecked)
                .collect()
        } else {
            held
        };
        let first = chosen.first()?;
        (
            first.1.clone(),
            chosen.iter().map(|(index, _)| *index).collect(),
        )
    } else {
        (eval_group(conditions, &facts, None, false), Vec::new())
    };
    if eval.truth() == Truth::Failed || eval.held.is_empty() {
        return None;
    }
    let scoped: Vec<&ProbeResult> = results
        .iter()
        .filter(|result| {
            !conditions.has_gpu_conditions()
                || matches!(result.device, DeviceRef::Gpu(index) if gpus.contains(&index))
        })
        .collect();

    let mut confirming = Vec::new();
    let mut hints = Vec::new();
    for result in &scoped {
        let matched: Vec<&ProbeOutcome> = entry
            .confirm
            .iter()
            .filter(|o| outcome_matches(o, result))
            .collect();
        if matched.iter().any(|o| signature_seen(o, result)) {
            confirming.push(evidence_of(result, true));
        } else if !matched.is_empty() {
            hints.push(evidence_of(result, true));
        }
    }
    let (logs, hint_logs) = matching_logs(&entry.logs, fp, &scoped);
    let mut controls = Vec::new();
    let mut contradicting = Vec::new();
    let status = if !confirming.is_empty() || !logs.is_empty() {
        for control in &entry.control {
            let ran = |r: &&&ProbeResult| {
                probe_matches(control, r)
                    && !matches!(r.verdict, Verdict::Skip { .. } | Verdict::NotTested { .. })
            };
            for result in scoped.iter().filter(ran) {
                controls.push(evidence_of(result, verdict_matches(control, result)));
            }
        }
        if eval.truth() == Truth::Unchecked || controls.iter().any(|c| !c.as_predicted) {
            MatchStatus::Suspected
        } else {
            MatchStatus::Confirmed
        }
    } else {
        contradicting = scoped
            .iter()
            .filter(|result| entry.contradict.iter().any(|o| outcome_matches(o, result)))
            .map(|result| evidence_of(result, false))
            .collect();
        if contradicting.is_empty() {
            MatchStatus::Suspected
        } else {
            MatchStatus::NotObserved
        }
    };
    // Suspicion needs a fact that singles the entry out: an entry whose only held
    // conditions are the GPU vendor and the OS would be suspected on every such machine
    // (every NVIDIA host, every Linux paste whose GPU the logs do not show).
    // A kernel release singles out an entry about a GPU only where the paste shows a GPU
    // (a CPU-only collect_env shows the kernel and no GPU).
    let gpu_unseen = conditions.has_gpu_conditions() && fp.gpus.is_empty();
    let singled_out = eval.specific_held || (eval.kernel_held && !gpu_unseen);
    if status == MatchStatus::Suspected && !singled_out && hints.is_empty() && hint_logs.is_empty()
    {
        return None;
    }
    Some(KbMatch {
        entry: entry.clone(),
        status,
        gpus,
        held: eval.held,
        unchecked: eval.unchecked,
        confirming,
        controls,
        contradicting,
        logs,
        hints,
        hint_logs,
        from_paste: fp.source == "triage",
    })
}

fn evidence_of(result: &ProbeResult, as_predicted: bool) -> ResultEvidence {
    let detail = result.verdict.detail();
    let mut text = format!(
        "{} on {}: {}",
        result.probe,
        result.device.torch_name(),
        result.verdict.label()
    );
    if !detail.is_empty() {
        text.push_str(&format!(" ({detail})"));
    }
    if result.simulated {
        text.push_str(" [simulated]");
    }
    ResultEvidence {
        probe: result.probe.clone(),
        device: result.device,
        text,
        as_predicted,
    }
}

fn verdict_name(verdict: &Verdict) -> VerdictName {
    match verdict {
        Verdict::Pass => VerdictName::Pass,
        Verdict::Fail { .. } => VerdictName::Fail,
        Verdict::Crash { .. } => VerdictName::Crash,
        Verdict::Hang { .. } => VerdictName::Hang,
        Verdict::Error { .. } => VerdictName::Error,
        Verdict::Skip { .. } => VerdictName::Skip,
        Verdict::NotTested { .. } => VerdictName::NotTested,
    }
}

fn probe_matches(outcome: &ProbeOutcome, result: &ProbeResult) -> bool {
    first_match(&outcome.probes, result.probe.as_str()).is_some()
}

fn verdict_matches(outcome: &ProbeOutcome, result: &ProbeResult) -> bool {
    let name = verdict_name(&result.verdict);
    if !outcome.verdicts.contains(&name) {
        return false;
    }
    if let (Some(class), false) = (result.verdict.fail_class(), outcome.fail_classes.is_empty())
        && !outcome.fail_classes.contains(&class)
    {
        return false;
    }
    let wants_text = !outcome.message_contains.is_empty();
    let wants_code = !outcome.exit_codes.is_empty();
    if !wants_text && !wants_code {
        return true;
    }
    let text_ok = wants_text && {
        let haystack = searchable_text(result);
        outcome
            .message_contains
            .iter()
            .any(|needle| haystack.contains(&needle.to_lowercase()))
    };
    let code_ok = wants_code
        && matches!(&result.verdict, Verdict::Crash { exit_code: Some(code), .. } if outcome.exit_codes.contains(code));
    text_ok || code_ok
}

/// What `message_contains` searches, lowercased: the verdict's detail, the stderr tail and
/// the kernel log lines recorded with the result.
fn searchable_text(result: &ProbeResult) -> String {
    let mut haystack = result.verdict.detail();
    for line in result.stderr_tail.iter().chain(&result.kernel_log) {
        haystack.push('\n');
        haystack.push_str(line);
    }
    haystack.to_lowercase()
}

fn outcome_matches(outcome: &ProbeOutcome, result: &ProbeResult) -> bool {
    probe_matches(outcome, result) && verdict_matches(outcome, result)
}

/// Whether a result that matches `outcome` shows the issue's own signature rather than only
/// the class of failure: the pattern names its probes, or the result has one of its exit
/// codes, or one of its texts that is not generic fault wording.
fn signature_seen(outcome: &ProbeOutcome, result: &ProbeResult) -> bool {
    if !outcome.is_catch_all() {
        return true;
    }
    if matches!(&result.verdict, Verdict::Crash { exit_code: Some(code), .. } if outcome.exit_codes.contains(code))
    {
        return true;
    }
    let haystack = searchable_text(result);
    outcome
        .message_contains
        .iter()
        .filter(|needle| !is_generic_fault_text(needle))
        .any(|needle| haystack.contains(&needle.to_lowercase()))
}

/// The kernel log events that match the patterns: those of patterns with a signature, and
/// (as hints) those of patterns without one that no pattern with a signature matched.
fn matching_logs(
    signatures: &[LogSignature],
    fp: &Fingerprint,
    results: &[&ProbeResult],
) -> (Vec<String>, Vec<String>) {
    let mut specific = Vec::new();
    let mut generic = Vec::new();
    for signature in signatures {
        let found = if signature.has_signature() {
            &mut specific
        } else {
            &mut generic
        };
        let contains = signature.contains.as_ref().map(|text| text.to_lowercase());
        for event in &fp.kernel_events {
            let kind_ok = event.kind == signature.kind;
            let client_ok = signature.client.as_ref().is_none_or(|client| {
                event
                    .client
                    .as_ref()
                    .is_some_and(|c| c.eq_ignore_ascii_case(client))
            });
            let text_ok = contains
                .as_ref()
                .is_none_or(|text| event.line.to_lowercase().contains(text));
            if kind_ok && client_ok && text_ok {
                found.push(format!("kernel log: {}", event.line.trim()));
            }
        }
        // Raw lines recorded with results carry no kind; they count only through `contains`.
        if let Some(text) = &contains {
            for result in results {
                for line in &result.kernel_log {
                    let lower = line.to_lowercase();
                    let client_ok = signature
                        .client
                        .as_ref()
                        .is_none_or(|client| lower.contains(&client.to_lowercase()));
                    if lower.contains(text) && client_ok {
                        found.push(format!(
                            "kernel log during {}: {}",
                            result.probe,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    specific.dedup();
    generic.dedup();
    generic.retain(|line| !specific.contains(line));
    (specific, generic)
}

fn gpu_label(index: u32) -> String {
    format!("GPU {index}")
}

fn unreadable_reason(fp: &Fingerprint, keywords: &[&str]) -> Option<String> {
    fp.unreadable
        .iter()
        .find(|item| {
            let what = item.what.to_lowercase();
            keywords.iter().any(|k| what.contains(&k.to_lowercase()))
        })
        .map(|item| format!("{}: {}", item.what, item.reason))
}

fn eval_range_dotted(
    eval: &mut Eval,
    what: &str,
    range: &str,
    fact: Option<crate::facts::Sourced<DottedVersion>>,
) {
    let Ok(req) = DottedReq::parse(range) else {
        eval.failed(format!("{what} range {range:?} is invalid"));
        return;
    };
    match fact {
        None => eval.unchecked(format!("{what} unknown (needed: {range})")),
        Some(fact) if req.matches(&fact.version) => {
            eval.held(format!("{} is in {range}", fact.source))
        }
        Some(fact) => eval.failed(format!("{} is not in {range}", fact.source)),
    }
}

fn vendor_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Amd => "amd",
        Vendor::Nvidia => "nvidia",
        Vendor::Intel => "intel",
        Vendor::Other => "other",
    }
}

/// A condition group evaluated for one GPU: the facts about that GPU the GPU conditions
/// read.
struct GpuScope<'f> {
    gpu: &'f GpuInfo,
    label: String,
    native: Option<isa::GfxIsa>,
}

/// What one evaluation of a condition group reads.
struct Group<'f> {
    facts: &'f Facts<'f>,
    /// The GPU the GPU conditions are evaluated for; `None` when there is none.
    gpu: Option<(u32, &'f GpuInfo)>,
    scope: Option<GpuScope<'f>>,
    /// Inside an `any_of` group (whose own `any_of` is a validation error, never
    /// evaluated).
    nested: bool,
}

impl Group<'_> {
    /// Runs a GPU condition's evaluation when there is a GPU; without one, `eval_group` has
    /// already said so once for all of them.
    fn on_gpu(&self, evaluate: impl FnOnce(&GpuScope<'_>)) {
        if let Some(scope) = &self.scope {
            evaluate(scope);
        }
    }
}

/// Evaluates a condition group, for one GPU when given: the GPU conditions first, then the
/// host's, then (at the top level only) the `any_of` alternatives.
fn eval_group(
    conditions: &Conditions,
    facts: &Facts<'_>,
    gpu: Option<(u32, &GpuInfo)>,
    nested: bool,
) -> Eval {
    let mut walked = conditions.walk();
    // GPU conditions first, each kind in declaration order, except that `override_differs`
    // has always been checked last among them (after `override_sibling`).
    walked.sort_by_key(|condition| {
        let kind = condition.kind();
        let (kind, after) = match kind {
            ConditionKind::OverrideDiffers => (ConditionKind::OverrideSibling, 1),
            kind => (kind, 0),
        };
        (!kind.is_gpu_scoped(), kind, after)
    });
    let group = Group {
        facts,
        gpu,
        scope: gpu.map(|(index, gpu)| GpuScope {
            gpu,
            label: gpu_label(index),
            native: facts.native_isa(gpu),
        }),
        nested,
    };
    let mut eval = Eval::default();
    if group.scope.is_none() && walked.iter().any(|c| c.kind().is_gpu_scoped()) {
        // On the live machine an empty GPU list is a fact (no GPU); in pasted logs it
        // only means the logs did not show one.
        if facts.is_live() {
            eval.failed("no GPU on this machine".to_string());
        } else {
            eval.unchecked("no GPU facts in the fingerprint".to_string());
        }
    }
    for condition in walked {
        eval_condition(&mut eval, condition, &group);
    }
    eval
}

/// Evaluates one condition: the single place that says how each kind is checked.
fn eval_condition(eval: &mut Eval, condition: ConditionRef<'_>, group: &Group<'_>) {
    use ConditionRef as C;
    let facts = group.facts;
    let fp = facts.fp;
    match condition {
        C::Vendor(wanted) => group.on_gpu(|gpu| eval_vendor(eval, gpu, wanted)),
        C::Arch(patterns) => group.on_gpu(|gpu| eval_arch(eval, gpu, patterns)),
        C::Apu(wanted) => group.on_gpu(|gpu| eval_apu(eval, facts, gpu, wanted)),
        C::Firmware(conditions) => group.on_gpu(|gpu| {
            for condition in conditions {
                eval_firmware(eval, facts, gpu, condition);
            }
        }),
        C::TorchSupportsArch(wanted) => {
            group.on_gpu(|gpu| eval_torch_supports_arch(eval, facts, gpu, wanted))
        }
        C::OverrideDiffers(wanted) => {
            group.on_gpu(|gpu| eval_override_differs(eval, facts, gpu, wanted))
        }
        C::OverrideSibling(wanted) => {
            group.on_gpu(|gpu| eval_override_sibling(eval, wanted, facts, &gpu.label, gpu.native))
        }
        C::Os(wanted) => eval_os(eval, facts, wanted),
        C::Kernel(range) => {
            let mut kernel = Eval::default();
            eval_range_dotted(&mut kernel, "kernel release", range, facts.kernel());
            for text in kernel.held {
                eval.held_kernel(text);
            }
            eval.failed.extend(kernel.failed);
            eval.unchecked.extend(kernel.unchecked);
        }
        C::Rocm(range) => eval_range_dotted(eval, "ROCm version", range, facts.rocm()),
        C::Hip(range) => eval_range_dotted(eval, "HIP version", range, facts.hip()),
        C::Torch(range) => eval_torch(eval, facts, range),
        C::TorchLocal(prefixes) => eval_torch_local(eval, facts, prefixes),
        C::AmdgpuDriver(condition) => eval_amdgpu_driver(eval, facts, condition),
        C::NvidiaDriver(range) => eval_nvidia_driver(eval, fp, range),
        C::Env(conditions) => {
            for condition in conditions {
                eval_env(eval, facts, condition);
            }
        }
        C::ModuleParams(params) => {
            for param in params {
                eval_module_param(eval, facts, param);
            }
        }
        C::Cmdline { has, lacks } => eval_cmdline(eval, facts, has, lacks),
        C::MinGpus(min) => eval_min_gpus(eval, fp, min),
        C::Container(wanted) => eval_container(eval, fp, wanted),
        C::SecureBoot(wanted) => eval_secure_boot(eval, fp, wanted),
        C::Uid(range) => eval_uid(eval, fp, range),
        C::Packages(packages) => {
            for package in packages {
                eval_package(eval, fp, package);
            }
        }
        C::AllocConf(conditions) => eval_alloc_conf(eval, facts, conditions),
        C::AnyOf(groups) => {
            if !group.nested {
                eval_alternatives(eval, groups, facts, group.gpu);
            }
        }
    }
}

/// `any_of`: the first alternative that holds counts; otherwise the group is unchecked if
/// any alternative is, else failed.
fn eval_alternatives(
    eval: &mut Eval,
    alternatives: &[Conditions],
    facts: &Facts<'_>,
    gpu: Option<(u32, &GpuInfo)>,
) {
    let groups: Vec<Eval> = alternatives
        .iter()
        .map(|group| eval_group(group, facts, gpu, true))
        .collect();
    if let Some(held) = groups.iter().find(|g| g.truth() == Truth::Held) {
        for text in &held.held {
            eval.held.push(format!("one of the alternatives: {text}"));
        }
        eval.specific_held |= held.specific_held;
        eval.kernel_held |= held.kernel_held;
    } else if groups.iter().any(|g| g.truth() == Truth::Unchecked) {
        let reasons: Vec<String> = groups
            .iter()
            .filter(|g| g.truth() == Truth::Unchecked)
            .flat_map(|g| g.unchecked.clone())
            .collect();
        eval.unchecked(format!(
            "no alternative could be confirmed: {}",
            reasons.join("; ")
        ));
    } else {
        let reasons: Vec<String> = groups.iter().flat_map(|g| g.failed.clone()).collect();
        eval.failed(format!("no alternative holds: {}", reasons.join("; ")));
    }
}

fn eval_vendor(eval: &mut Eval, scope: &GpuScope<'_>, vendor: Vendor) {
    let (label, gpu) = (&scope.label, scope.gpu);
    let truth = if gpu.vendor == vendor {
        Truth::Held
    } else {
        Truth::Failed
    };
    let verb = if truth == Truth::Held { "is" } else { "is not" };
    let text = format!(
        "{label} vendor {} {verb} {}",
        vendor_name(gpu.vendor),
        vendor_name(vendor)
    );
    if truth == Truth::Held {
        eval.held_broad(text);
    } else {
        eval.push(truth, text);
    }
}

fn eval_arch(eval: &mut Eval, scope: &GpuScope<'_>, patterns: &[String]) {
    let label = &scope.label;
    let wanted = patterns.join(", ");
    match &scope.native {
        None => eval.unchecked(format!("{label} native ISA unknown (needed: {wanted})")),
        Some(isa) => match first_match(patterns, &isa.name()) {
            Some(pattern) => eval.held(format!("{label} native ISA {isa} matches {pattern}")),
            None => eval.failed(format!("{label} native ISA {isa} does not match {wanted}")),
        },
    }
}

fn eval_apu(eval: &mut Eval, facts: &Facts<'_>, scope: &GpuScope<'_>, wanted: bool) {
    let label = &scope.label;
    match facts.is_apu(scope.gpu) {
        None => eval.unchecked(format!("{label}: whether it is an APU is unknown")),
        Some((apu, basis)) => {
            let words = if apu { "an APU" } else { "not an APU" };
            let truth = if apu == wanted {
                Truth::Held
            } else {
                Truth::Failed
            };
            eval.push(truth, format!("{label} is {words} ({basis})"));
        }
    }
}

fn eval_firmware(
    eval: &mut Eval,
    facts: &Facts<'_>,
    scope: &GpuScope<'_>,
    condition: &FirmwareCondition,
) {
    let label = &scope.label;
    let found = scope
        .gpu
        .firmware
        .iter()
        .find(|fw| fw.name.eq_ignore_ascii_case(&condition.component));
    match found {
        None => {
            let why = unreadable_reason(facts.fp, &[&condition.component, "firmware"])
                .map(|reason| format!(" ({reason})"))
                .unwrap_or_default();
            eval.unchecked(format!(
                "{label} {} firmware version not read{why} (needed: {})",
                condition.component, condition.version
            ));
        }
        Some(fw) => match (
            DottedVersion::parse(&fw.version),
            DottedReq::parse(&condition.version),
        ) {
            (Ok(version), Ok(req)) => {
                let truth = if req.matches(&version) {
                    Truth::Held
                } else {
                    Truth::Failed
                };
                let verb = if truth == Truth::Held {
                    "matches"
                } else {
                    "does not match"
                };
                eval.push(
                    truth,
                    format!(
                        "{label} {} firmware {} {verb} {}",
                        fw.name, fw.version, condition.version
                    ),
                );
            }
            _ => eval.unchecked(format!(
                "{label} {} firmware version {:?} could not be compared with {}",
                fw.name, fw.version, condition.version
            )),
        },
    }
}

fn eval_torch_supports_arch(
    eval: &mut Eval,
    facts: &Facts<'_>,
    scope: &GpuScope<'_>,
    wanted: bool,
) {
    let label = &scope.label;
    let arch_list = facts.torch().map(|torch| &torch.arch_list);
    match (arch_list, &scope.native) {
        (Some(list), Some(isa)) if !list.is_empty() => {
            let covered = list.iter().any(|target| isa::target_covers(target, isa));
            let words = if covered { "is" } else { "is not" };
            let truth = if covered == wanted {
                Truth::Held
            } else {
                Truth::Failed
            };
            eval.push(
                truth,
                format!(
                    "{label} ISA {isa} {words} in torch's arch list ({})",
                    list.join(", ")
                ),
            );
        }
        (_, None) => eval.unchecked(format!(
            "{label} native ISA unknown (needed to check torch's arch list)"
        )),
        _ => eval.unchecked("torch's arch list unknown".to_string()),
    }
}

fn eval_override_differs(eval: &mut Eval, facts: &Facts<'_>, scope: &GpuScope<'_>, wanted: bool) {
    let label = &scope.label;
    match facts.arch_override() {
        None => {
            let truth = if wanted { Truth::Failed } else { Truth::Held };
            eval.push(truth, format!("{OVERRIDE_VAR} is not set"));
        }
        Some((value, decoded)) => match (decoded, &scope.native) {
            (Err(_), _) => {
                let truth = if wanted { Truth::Held } else { Truth::Failed };
                eval.push(truth, format!("{OVERRIDE_VAR}={value} names no ISA"));
            }
            (Ok(_), None) => eval.unchecked(format!(
                "{label} native ISA unknown (needed to compare with {OVERRIDE_VAR}={value})"
            )),
            (Ok(decoded), Some(isa)) => {
                let differs = decoded != *isa;
                let truth = if differs == wanted {
                    Truth::Held
                } else {
                    Truth::Failed
                };
                let relation = if differs { "differs from" } else { "equals" };
                eval.push(
                    truth,
                    format!("{OVERRIDE_VAR}={value} decodes to {decoded}, which {relation} {label}'s native ISA {isa}"),
                );
            }
        },
    }
}

fn eval_override_sibling(
    eval: &mut Eval,
    wanted: bool,
    facts: &Facts<'_>,
    label: &str,
    native: Option<isa::GfxIsa>,
) {
    match facts.arch_override() {
        None => {
            let truth = if wanted { Truth::Failed } else { Truth::Held };
            eval.push(truth, format!("{OVERRIDE_VAR} is not set"));
        }
        Some((value, Err(_))) => {
            let truth = if wanted { Truth::Failed } else { Truth::Held };
            eval.push(truth, format!("{OVERRIDE_VAR}={value} names no ISA"));
        }
        Some((value, Ok(decoded))) => match native {
            None => eval.unchecked(format!(
                "{label} native ISA unknown (needed to compare with {OVERRIDE_VAR}={value})"
            )),
            Some(native) => {
                let sibling = decoded != native && decoded.is_sibling_of(&native);
                let truth = if sibling == wanted {
                    Truth::Held
                } else {
                    Truth::Failed
                };
                let words = if sibling { "is" } else { "is not" };
                eval.push(
                    truth,
                    format!("{OVERRIDE_VAR}={value} ({decoded}) {words} an ISA-compatible sibling of {label}'s native ISA {native}"),
                );
            }
        },
    }
}

fn eval_os(eval: &mut Eval, facts: &Facts<'_>, os_names: &[OsName]) {
    let wanted: Vec<&str> = os_names.iter().map(|os| os.name()).collect();
    match facts.os() {
        None => eval.unchecked(format!(
            "operating system unknown (needed: {})",
            wanted.join(", ")
        )),
        Some(os) if os_names.contains(&os) => eval.held_broad(format!("OS is {}", os.name())),
        Some(os) => eval.failed(format!(
            "OS {} is not one of {}",
            os.name(),
            wanted.join(", ")
        )),
    }
}

fn eval_torch(eval: &mut Eval, facts: &Facts<'_>, range: &str) {
    match (Pep440Req::parse(range), facts.torch()) {
        (Err(_), _) => eval.failed(format!("torch range {range:?} is invalid")),
        (Ok(_), None) => eval.unchecked(format!("torch version unknown (needed: {range})")),
        (Ok(req), Some(torch)) => match Pep440Version::parse(&torch.version) {
            Ok(version) if req.matches(&version) => {
                eval.held(format!("torch {} is in {range}", torch.version))
            }
            Ok(_) => eval.failed(format!("torch {} is not in {range}", torch.version)),
            Err(_) => eval.unchecked(format!(
                "torch version {:?} could not be parsed",
                torch.version
            )),
        },
    }
}

fn eval_torch_local(eval: &mut Eval, facts: &Facts<'_>, prefixes: &[String]) {
    let wanted = prefixes.join(", ");
    let Some(torch) = facts.torch() else {
        eval.unchecked(format!(
            "torch version unknown (needed local tag: {wanted})"
        ));
        return;
    };
    let local = facts
        .torch_version()
        .and_then(|v| v.local().map(str::to_string));
    match local {
        Some(local) => match prefixes
            .iter()
            .find(|prefix| local.starts_with(&prefix.to_ascii_lowercase()))
        {
            Some(prefix) => eval.held(format!(
                "torch {} local tag starts with {prefix}",
                torch.version
            )),
            None => eval.failed(format!(
                "torch {} local tag does not start with {wanted}",
                torch.version
            )),
        },
        None => eval.failed(format!(
            "torch {} has no local tag (needed: {wanted})",
            torch.version
        )),
    }
}

fn eval_amdgpu_driver(eval: &mut Eval, facts: &Facts<'_>, condition: &DriverCondition) {
    let driver = match &facts.fp.amdgpu {
        None if facts.is_live() => {
            eval.failed("the amdgpu driver is not loaded".to_string());
            return;
        }
        None => {
            eval.unchecked("amdgpu driver facts missing".to_string());
            return;
        }
        Some(driver) => driver,
    };
    if let Some(source) = condition.source {
        use gpuprobe_model::DriverSource;
        let actual = match driver.source {
            DriverSource::Inbox => Some(DriverSourceName::Inbox),
            DriverSource::Dkms => Some(DriverSourceName::Dkms),
            DriverSource::Unknown => None,
        };
        let name = |s: DriverSourceName| match s {
            DriverSourceName::Inbox => "inbox",
            DriverSourceName::Dkms => "DKMS",
        };
        match actual {
            None => eval.unchecked(format!(
                "amdgpu driver source unknown (needed: {})",
                name(source)
            )),
            Some(actual) if actual == source => {
                eval.held(format!("amdgpu driver is the {} driver", name(actual)))
            }
            Some(actual) => eval.failed(format!(
                "amdgpu driver is the {} driver, not {}",
                name(actual),
                name(source)
            )),
        }
    }
    if let Some(range) = &condition.version {
        let fact = driver.version.as_deref().and_then(|v| {
            DottedVersion::parse(v)
                .ok()
                .map(|version| crate::facts::Sourced {
                    version,
                    source: format!("amdgpu driver {v}"),
                })
        });
        eval_range_dotted(eval, "amdgpu driver version", range, fact);
    }
}

fn eval_nvidia_driver(eval: &mut Eval, fp: &Fingerprint, range: &str) {
    let fact = fp
        .nvidia
        .as_ref()
        .and_then(|n| n.version.as_deref())
        .and_then(|v| {
            DottedVersion::parse(v)
                .ok()
                .map(|version| crate::facts::Sourced {
                    version,
                    source: format!("NVIDIA driver {v}"),
                })
        });
    eval_range_dotted(eval, "NVIDIA driver version", range, fact);
}

fn eval_env(eval: &mut Eval, facts: &Facts<'_>, env: &EnvCondition) {
    let value = facts.env(&env.name);
    let must_be_set = env.set.unwrap_or(true);
    match (value, must_be_set) {
        (None, true) => eval.failed(format!("{} is not set", env.name)),
        (None, false) => eval.held(format!("{} is not set", env.name)),
        (Some(value), false) => eval.failed(format!("{}={value} is set", env.name)),
        (Some(value), true) => {
            if !env.one_of.is_empty() && !env.one_of.iter().any(|v| v == value) {
                eval.failed(format!(
                    "{}={value} is not one of {}",
                    env.name,
                    env.one_of.join(", ")
                ));
                return;
            }
            if !env.decodes_to.is_empty() {
                match isa::decode_override(value) {
                    Ok(decoded) => match first_match(&env.decodes_to, &decoded.name()) {
                        Some(pattern) => eval.held(format!(
                            "{}={value} decodes to {decoded}, matching {pattern}",
                            env.name
                        )),
                        None => {
                            eval.failed(format!(
                                "{}={value} decodes to {decoded}, not {}",
                                env.name,
                                env.decodes_to.join(", ")
                            ));
                        }
                    },
                    Err(error) => eval.failed(format!("{}: {error}", env.name)),
                }
                return;
            }
            eval.held(format!("{}={value} is set", env.name));
        }
    }
}

fn eval_module_param(eval: &mut Eval, facts: &Facts<'_>, param: &ParamCondition) {
    let (value, basis) = match facts.module_param(&param.name) {
        Some(value) => (Some(value.to_string()), "running value"),
        None => match facts.cmdline_value(&param.name) {
            Some(value) => (Some(value.to_string()), "kernel command line"),
            None if facts.cmdline_tokens().is_some() && param.default.is_some() => (
                param.default.clone(),
                "driver default; not on the command line",
            ),
            None => (None, ""),
        },
    };
    match value {
        None => eval.unchecked(format!(
            "{} unknown (needed: {})",
            param.name,
            param.one_of.join(" or ")
        )),
        Some(value) if param.one_of.contains(&value) => {
            eval.held(format!("{}={value} ({basis})", param.name))
        }
        Some(value) => eval.failed(format!(
            "{}={value} ({basis}), not {}",
            param.name,
            param.one_of.join(" or ")
        )),
    }
}

/// `cmdline_has` and `cmdline_lacks` together: an unknown command line is said once.
fn eval_cmdline(eval: &mut Eval, facts: &Facts<'_>, has: &[String], lacks: &[String]) {
    let Some(tokens) = facts.cmdline_tokens() else {
        eval.unchecked("kernel command line unknown".to_string());
        return;
    };
    for token in has {
        let present = cmdline_contains(&tokens, token);
        let truth = if present { Truth::Held } else { Truth::Failed };
        let words = if present { "has" } else { "lacks" };
        eval.push(truth, format!("kernel command line {words} {token}"));
    }
    for token in lacks {
        let present = cmdline_contains(&tokens, token);
        let truth = if present { Truth::Failed } else { Truth::Held };
        let words = if present { "has" } else { "lacks" };
        eval.push(truth, format!("kernel command line {words} {token}"));
    }
}

fn eval_min_gpus(eval: &mut Eval, fp: &Fingerprint, min: u32) {
    let count = fp.gpus.len();
    let truth = if count >= min as usize {
        Truth::Held
    } else {
        Truth::Failed
    };
    eval.push(
        truth,
        format!("{count} GPU(s) found (needed: at least {min})"),
    );
}

fn eval_container(eval: &mut Eval, fp: &Fingerprint, wanted: bool) {
    let inside = fp.host.container.is_some();
    let truth = if inside == wanted {
        Truth::Held
    } else {
        Truth::Failed
    };
    let words = match &fp.host.container {
        Some(runtime) => format!("running inside a container ({runtime})"),
        None => "not running inside a container".to_string(),
    };
    eval.push(truth, words);
}

fn eval_secure_boot(eval: &mut Eval, fp: &Fingerprint, wanted: bool) {
    match fp.host.secure_boot {
        None => {
            let why = unreadable_reason(fp, &["secure boot"])
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            eval.unchecked(format!("Secure Boot state unknown{why}"));
        }
        Some(enabled) => {
            let truth = if enabled == wanted {
                Truth::Held
            } else {
                Truth::Failed
            };
            let words = if enabled { "enabled" } else { "disabled" };
            eval.push(truth, format!("Secure Boot is {words}"));
        }
    }
}

fn eval_uid(eval: &mut Eval, fp: &Fingerprint, range: &str) {
    let fact = fp.host.uid.and_then(|uid| {
        DottedVersion::parse(&uid.to_string())
            .ok()
            .map(|version| crate::facts::Sourced {
                version,
                source: format!("uid {uid}"),
            })
    });
    eval_range_dotted(eval, "user id", range, fact);
}

fn eval_package(eval: &mut Eval, fp: &Fingerprint, package: &PackageCondition) {
    let Some(python) = &fp.python else {
        eval.unchecked(format!(
            "Python environment unknown (needed: package {})",
            package.name
        ));
        return;
    };
    let wanted = normalize_package(&package.name);
    let installed = python
        .packages
        .iter()
        .find(|(name, _)| normalize_package(name) == wanted)
        .map(|(_, version)| version.clone())
        .or_else(|| {
            (wanted == "torch")
                .then(|| python.torch.as_ref().map(|t| t.version.clone()))
                .flatten()
        });
    match (installed, &package.version) {
        (None, _) => eval.failed(format!("package {} is not installed", package.name)),
        (Some(version), None) => {
            eval.held(format!("package {} {version} is installed", package.name))
        }
        (Some(version), Some(range)) => {
            match (Pep440Version::parse(&version), Pep440Req::parse(range)) {
                (Ok(v), Ok(req)) if req.matches(&v) => {
                    eval.held(format!("package {} {version} is in {range}", package.name))
                }
                (Ok(_), Ok(_)) => eval.failed(format!(
                    "package {} {version} is not in {range}",
                    package.name
                )),
                _ => eval.unchecked(format!(
                    "package {} version {version:?} could not be compared",
                    package.name
                )),
            }
        }
    }
}

fn eval_alloc_conf(eval: &mut Eval, facts: &Facts<'_>, conditions: &[AllocConfCondition]) {
    let state = alloc_conf::state(facts);
    for condition in conditions {
        let values: Vec<(&str, Option<String>)> = match state.effective() {
            Some((variable, conf)) => {
                vec![(variable, alloc_conf::value_of(conf, &condition.key))]
            }
            None if state.set.is_empty() => vec![("no allocator configuration", None)],
            None => state
                .set
                .iter()
                .map(|(variable, conf)| (*variable, alloc_conf::value_of(conf, &condition.key)))
                .collect(),
        };
        let holds: Vec<bool> = values
            .iter()
            .map(|(_, value)| {
                value.as_ref().is_some_and(|value| {
                    condition
                        .one_of
                        .iter()
                        .any(|wanted| wanted.eq_ignore_ascii_case(value))
                })
            })
            .collect();
        let describe: Vec<String> = values
            .iter()
            .map(|(variable, value)| match value {
                Some(value) => format!("{variable} has {}:{value}", condition.key),
                None => format!("{variable} does not set {}", condition.key),
            })
            .collect();
        let description = describe.join("; ");
        if holds.iter().all(|h| *h) {
            eval.held(description);
        } else if holds.iter().all(|h| !*h) {
            eval.failed(description);
        } else {
            eval.unchecked(format!(
                "{description} (which one torch reads depends on its version)"
            ));
        }
    }
}

fn normalize_package(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('-', "_")
}

/// Whether the command line has a token; `key=value` also matches inside a comma list
/// (`pci=noacs,realloc=off` has `pci=noacs`).
fn cmdline_contains(tokens: &[&str], wanted: &str) -> bool {
    tokens.iter().any(|token| {
        if *token == wanted {
            return true;
        }
        match (token.split_once('='), wanted.split_once('=')) {
            (Some((key, values)), Some((wanted_key, wanted_value))) => {
                key == wanted_key && values.split(',').any(|v| v == wanted_value)
            }
            _ => false,
        }
    })
}

impl KbMatch {
    /// The conditions that could not be checked; from pasted logs, each says that the logs
    /// did not show the fact.
    pub fn unchecked_texts(&self) -> Vec<String> {
        self.unchecked
            .iter()
            .map(|text| {
                if !self.from_paste {
                    text.clone()
                } else if text.contains(" unknown") {
                    text.replacen(" unknown", " not shown in the logs", 1)
                } else {
                    format!("{text}, not shown in the logs")
                }
            })
            .collect()
    }

    /// The severity this match deserves: the entry's when confirmed, the suspected
    /// severity when suspected, info when not observed.
    pub fn severity(&self) -> Severity {
        match self.status {
            MatchStatus::Confirmed => self.entry.severity,
            MatchStatus::Suspected => suspected_severity(&self.entry),
            MatchStatus::NotObserved => Severity::Info,
        }
    }

    /// The finding this match amounts to.
    pub fn to_finding(&self) -> Finding {
        let entry = &self.entry;
        let (title, confidence, status_text) = match self.status {
            MatchStatus::Confirmed => (
                entry.title.clone(),
                Confidence::Confirmed,
                format!(
                    "Confirmed here: the conditions of known issue {} hold and {} shows its failure pattern.",
                    entry.id,
                    count_words(self.confirming.len(), self.logs.len())
                ),
            ),
            MatchStatus::Suspected => {
                let mut text = format!(
                    "Suspected only: this stack matches the conditions of known issue {}, but nothing here confirms it yet.",
                    entry.id
                );
                text.push_str(&format!(" Matched: {}.", self.held.join("; ")));
                let unchecked = self.unchecked_texts();
                if !unchecked.is_empty() {
                    text.push_str(&format!(" Could not check: {}.", unchecked.join("; ")));
                }
                if self.controls.iter().any(|c| !c.as_predicted) {
                    text.push_str(" Related probes failed where this issue predicts they pass, so the failure is broader than this issue explains.");
                } else if !self.confirming.is_empty() || !self.logs.is_empty() {
                    text.push_str(" The failure pattern was seen, but the missing facts keep it from being confirmed.");
                } else if !self.hints.is_empty() || !self.hint_logs.is_empty() {
                    text.push_str(" A failure of the kind this issue causes was seen, but without the issue's own signature (faulting client, message or probe), so it does not confirm it: such failures have many causes.");
                }
                (
                    format!("Suspected: {}", entry.title),
                    Confidence::Suspected,
                    text,
                )
            }
            MatchStatus::NotObserved => (
                format!("Not observed here: {}", entry.title),
                Confidence::Suspected,
                format!(
                    "The conditions of known issue {} hold, but the probes that would show it passed here (it may be intermittent, or fixed in this build).",
                    entry.id
                ),
            ),
        };
        let mut evidence: Vec<Evidence> = self
            .held
            .iter()
            .map(|text| Evidence::new("condition", text.clone()))
            .collect();
        evidence.extend(
            self.unchecked_texts()
                .into_iter()
                .map(|text| Evidence::new("absent", text)),
        );
        for item in &self.confirming {
            evidence.push(Evidence::from_probe(
                item.probe.clone(),
                format!("confirms: {}", item.text),
            ));
        }
        for item in &self.controls {
            let words = if item.as_predicted {
                "control as predicted"
            } else {
                "control NOT as predicted"
            };
            evidence.push(Evidence::from_probe(
                item.probe.clone(),
                format!("{words}: {}", item.text),
            ));
        }
        for item in &self.contradicting {
            evidence.push(Evidence::from_probe(
                item.probe.clone(),
                format!("argues against: {}", item.text),
            ));
        }
        evidence.extend(
            self.logs
                .iter()
                .map(|text| Evidence::new("log", text.clone())),
        );
        for item in &self.hints {
            evidence.push(Evidence::from_probe(
                item.probe.clone(),
                format!("{WITHOUT_SIGNATURE}{}", item.text),
            ));
        }
        evidence.extend(
            self.hint_logs
                .iter()
                .map(|text| Evidence::new("log", format!("{WITHOUT_SIGNATURE}{text}"))),
        );

        let remedies: Vec<Remedy> = if self.status == MatchStatus::NotObserved {
            Vec::new()
        } else {
            entry
                .workarounds
                .iter()
                .map(|w| {
                    // Only a documented workaround reads as a cure; the rest carry their
                    // qualifier, which every listing keeps next to the action.
                    Remedy {
                        description: w.description_with_evidence(),
                        kind: w.kind.name().to_string(),
                        setting: w.setting.clone(),
                        cost: w.cost.clone(),
                    }
                })
                .collect()
        };
        let mut next_steps = Vec::new();
        match self.status {
            MatchStatus::Confirmed => {
                if entry.workarounds.iter().any(|w| w.testable) {
                    next_steps.push("gpuprobe fix".to_string());
                }
                if let Some(first) = self.confirming.first() {
                    // Re-running the confirming probe alone shows whether it fails every time.
                    next_steps.push(format!("gpuprobe check --only {}", first.probe));
                }
            }
            MatchStatus::Suspected => {
                if self.confirming.is_empty() && !entry.confirm.is_empty() {
                    next_steps.push("gpuprobe check".to_string());
                }
                if !self.confirming.is_empty() && entry.workarounds.iter().any(|w| w.testable) {
                    next_steps.push("gpuprobe fix".to_string());
                }
            }
            MatchStatus::NotObserved => {}
        }
        next_steps.push(format!("gpuprobe kb show {}", entry.id));
        Finding {
            id: entry.id.clone(),
            source: "kb".to_string(),
            severity: self.severity(),
            layer: entry.layer,
            title,
            explanation: format!("{}\n\n{status_text}", entry.summary.trim()),
            confidence,
            evidence,
            remedies,
            citations: entry.citations.clone(),
            next_steps,
            related: Vec::new(),
        }
    }
}

impl From<&KbMatch> for Finding {
    fn from(value: &KbMatch) -> Self {
        value.to_finding()
    }
}

fn count_words(results: usize, logs: usize) -> String {
    let mut parts = Vec::new();
    if results > 0 {
        parts.push(format!(
            "{results} probe result{}",
            if results == 1 { "" } else { "s" }
        ));
    }
    if logs > 0 {
        parts.push(format!(
            "{logs} kernel log event{}",
            if logs == 1 { "" } else { "s" }
        ));
    }
    parts.join(" and ")
}
