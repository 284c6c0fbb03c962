//! Loading and validating knowledge-base files, with errors that point at a line and column.
//!
//! Two passes: serde parses the TOML into [`KbEntry`] (syntax errors, unknown fields, wrong
//! types and unknown enum names come back with the span `toml` reports); then the semantic
//! rules below run on the parsed entry and each problem is located by walking a spanned
//! parse of the same text to the offending value.

use std::fmt;
use std::ops::Range;

use gpuprobe_model::Severity;
use gpuprobe_model::is_switch_name;
use toml::de::{DeTable, DeValue};

use crate::catalogue;
use crate::entry::{
    ConditionKind, ConditionRef, Conditions, EnvCondition, KbEntry, ParamCondition, ProbeOutcome,
    RemedyKind, VerdictName, Workaround,
};
use crate::glob::Glob;
use crate::isa::{self, GfxIsa};
use crate::lint::alloc_conf::KNOWN_KEYS as KNOWN_ALLOC_CONF_KEYS;
use crate::version::{DottedReq, DottedVersion, Pep440Req, Pep440Version};

/// One problem in a knowledge-base file, with its position (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file (its name for embedded entries, its path for user entries).
    pub file: String,
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl Diagnostic {
    /// A diagnostic at a byte offset of `text`.
    pub fn at_offset(file: &str, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_column(text, offset);
        Diagnostic {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// How strict the rules are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// The shipped entries: ids are `RKB-NNN`.
    Shipped,
    /// A user's own entries: any `PREFIX-NNN` id.
    User,
}

/// One step of a path to a value in an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(&'static str),
    Index(usize),
}

/// A semantic problem and where it is.
struct Problem {
    path: Vec<Step>,
    message: String,
}

/// Collects problems while walking an entry.
struct Checker {
    problems: Vec<Problem>,
    path: Vec<Step>,
}

impl Checker {
    fn report(&mut self, extra: &[Step], message: impl Into<String>) {
        let mut path = self.path.clone();
        path.extend_from_slice(extra);
        self.problems.push(Problem {
            path,
            message: message.into(),
        });
    }

    fn within<T>(&mut self, steps: &[Step], f: impl FnOnce(&mut Self) -> T) -> T {
        let depth = self.path.len();
        self.path.extend_from_slice(steps);
        let result = f(self);
        self.path.truncate(depth);
        result
    }
}

/// Parses and validates one entry file. `file` names it in diagnostics; its stem must
/// start with the entry's id.
pub fn parse_entry(
    file: &str,
    text: &str,
    strictness: Strictness,
) -> Result<KbEntry, Vec<Diagnostic>> {
    let entry: KbEntry = match toml::from_str(text) {
        Ok(entry) => entry,
        Err(error) => {
            let offset = error.span().map_or(0, |span| span.start);
            return Err(vec![Diagnostic::at_offset(
                file,
                text,
                offset,
                error.message().trim().to_string(),
            )]);
        }
    };
    let mut checker = Checker {
        problems: Vec::new(),
        path: Vec::new(),
    };
    check_entry(&mut checker, &entry, file, strictness);
    if checker.problems.is_empty() {
        return Ok(entry);
    }
    let spanned = DeTable::parse(text)
        .ok()
        .map(|table| DeValue::Table(table.into_inner()));
    Err(checker
        .problems
        .into_iter()
        .map(|problem| {
            let span = spanned
                .as_ref()
                .and_then(|root| span_of(root, &problem.path))
                .unwrap_or(0..0);
            Diagnostic::at_offset(file, text, span.start, problem.message)
        })
        .collect())
}

/// The span of the value at `path`, or of the deepest existing ancestor.
fn span_of(root: &DeValue<'_>, path: &[Step]) -> Option<Range<usize>> {
    let mut current = root;
    let mut best = None;
    for step in path {
        let next = match step {
            Step::Key(key) => current.get(*key),
            Step::Index(index) => current.get(*index),
        };
        match next {
            Some(value) => {
                best = Some(value.span());
                current = value.get_ref();
            }
            None => break,
        }
    }
    best
}

fn file_stem(file: &str) -> &str {
    let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
    name.strip_suffix(".toml").unwrap_or(name)
}

fn valid_id(id: &str, strictness: Strictness) -> bool {
    let Some((prefix, number)) = id.rsplit_once('-') else {
        return false;
    };
    let prefix_ok = match strictness {
        Strictness::Shipped => prefix == "RKB",
        Strictness::User => {
            !prefix.is_empty()
                && prefix.starts_with(|c: char| c.is_ascii_uppercase())
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
        }
    };
    prefix_ok && number.len() >= 3 && number.chars().all(|c| c.is_ascii_digit())
}

/// Whether a name is a plausible environment variable name.
pub(crate) fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_entry(checker: &mut Checker, entry: &KbEntry, file: &str, strictness: Strictness) {
    if !valid_id(&entry.id, strictness) {
        let expected = match strictness {
            Strictness::Shipped => "RKB-NNN",
            Strictness::User => "PREFIX-NNN (e.g. SITE-001)",
        };
        checker.report(
            &[Step::Key("id")],
            format!("id {:?} is not of the form {expected}", entry.id),
        );
    }
    let stem = file_stem(file);
    if stem != entry.id && !stem.starts_with(&format!("{}-", entry.id)) {
        checker.report(
            &[Step::Key("id")],
            format!(
                "id {:?} does not match the file name {stem:?} (name the file {}.toml or {}-<slug>.toml)",
                entry.id, entry.id, entry.id
            ),
        );
    }
    if entry.title.trim().is_empty() || entry.title.contains('\n') {
        checker.report(&[Step::Key("title")], "title must be one non-empty line");
    }
    if entry.summary.trim().is_empty() {
        checker.report(&[Step::Key("summary")], "summary must not be empty");
    }
    if let Some(suspected) = entry.severity_if_suspected
        && suspected < entry.severity
    {
        checker.report(
            &[Step::Key("severity_if_suspected")],
            "severity_if_suspected must not be more severe than severity",
        );
    }
    if entry.citations.is_empty() {
        checker.report(
            &[Step::Key("citations")],
            "citations must not be empty: only issues a public source confirms belong here",
        );
    }
    for (i, citation) in entry.citations.iter().enumerate() {
        if citation.trim().is_empty() {
            checker.report(&[Step::Key("citations"), Step::Index(i)], "empty citation");
        }
    }
    if entry.conditions == Conditions::default() {
        checker.report(
            &[Step::Key("conditions")],
            "an entry needs at least one condition (vendor, arch, os, versions, ...)",
        );
    }
    checker.within(&[Step::Key("conditions")], |c| {
        check_conditions(c, &entry.conditions, false)
    });
    for (list, outcomes) in [
        ("confirm", &entry.confirm),
        ("control", &entry.control),
        ("contradict", &entry.contradict),
    ] {
        for (i, outcome) in outcomes.iter().enumerate() {
            checker.within(&[Step::Key(list), Step::Index(i)], |c| {
                check_outcome(c, list, outcome)
            });
        }
    }
    if !entry.control.is_empty() && entry.confirm.is_empty() {
        checker.report(
            &[Step::Key("control")],
            "control outcomes only make sense next to confirm outcomes",
        );
    }
    for (i, log) in entry.logs.iter().enumerate() {
        const KINDS: &[&str] = &[
            "page_fault",
            "ring_timeout",
            "gpu_reset",
            "mes_failure",
            "segfault",
            "xid",
            "queue_evicted",
            "hsa_memory_fault",
        ];
        if !KINDS.contains(&log.kind.as_str()) {
            checker.report(
                &[Step::Key("logs"), Step::Index(i), Step::Key("kind")],
                format!(
                    "unknown kernel event kind {:?}; expected one of {}",
                    log.kind,
                    KINDS.join(", ")
                ),
            );
        }
    }
    let literal_arches: Vec<GfxIsa> = entry
        .conditions
        .arch
        .iter()
        .filter_map(|pattern| GfxIsa::parse(pattern))
        .collect();
    for (i, workaround) in entry.workarounds.iter().enumerate() {
        checker.within(&[Step::Key("workarounds"), Step::Index(i)], |c| {
            check_workaround(c, workaround, &literal_arches)
        });
    }
    for (i, fixed) in entry.fixed_in.iter().enumerate() {
        if fixed.component.trim().is_empty() {
            checker.report(
                &[
                    Step::Key("fixed_in"),
                    Step::Index(i),
                    Step::Key("component"),
                ],
                "component must not be empty",
            );
        }
        if let Some(version) = &fixed.version {
            let parsed = if fixed.component == "torch" {
                Pep440Version::parse(version).map(|_| ())
            } else {
                DottedVersion::parse(version).map(|_| ())
            };
            if let Err(error) = parsed {
                checker.report(
                    &[Step::Key("fixed_in"), Step::Index(i), Step::Key("version")],
                    format!("invalid version: {error}"),
                );
            }
        }
        if fixed.version.is_none() && fixed.note.is_none() {
            checker.report(
                &[Step::Key("fixed_in"), Step::Index(i)],
                "fixed_in needs a version or a note",
            );
        }
    }
}

fn check_dotted(checker: &mut Checker, key: &'static str, range: &str) {
    if let Err(error) = DottedReq::parse(range) {
        checker.report(
            &[Step::Key(key)],
            format!("invalid version range {range:?}: {error}"),
        );
    }
}

fn check_arch_globs(checker: &mut Checker, steps: &[Step], patterns: &[String]) {
    for (i, pattern) in patterns.iter().enumerate() {
        let mut at = steps.to_vec();
        at.push(Step::Index(i));
        match Glob::new(pattern) {
            Err(error) => checker.report(&at, format!("invalid arch pattern: {error}")),
            Ok(_) if !pattern.starts_with("gfx") => checker.report(
                &at,
                format!("arch pattern {pattern:?} must name a gfx ISA (gfx1151, gfx11*)"),
            ),
            Ok(_) => {}
        }
    }
}

fn check_conditions(checker: &mut Checker, conditions: &Conditions, nested: bool) {
    let mut walked = conditions.walk();
    // The validator has always checked the NVIDIA driver and uid ranges right after HIP's
    // (with the other dotted ranges); every other condition in declaration order.
    walked.sort_by_key(|condition| match condition.kind() {
        ConditionKind::NvidiaDriver => (ConditionKind::Hip, 1),
        ConditionKind::Uid => (ConditionKind::Hip, 2),
        kind => (kind, 0),
    });
    for condition in walked {
        check_condition(checker, condition, nested);
    }
}

/// Checks one condition: the single place that says what a valid value of each kind is.
fn check_condition(checker: &mut Checker, condition: ConditionRef<'_>, nested: bool) {
    use ConditionRef as C;
    match condition {
        // serde's types say everything about these.
        C::Vendor(_)
        | C::Apu(_)
        | C::TorchSupportsArch(_)
        | C::OverrideDiffers(_)
        | C::OverrideSibling(_)
        | C::Os(_)
        | C::Container(_)
        | C::SecureBoot(_) => {}
        C::Arch(patterns) => check_arch_globs(checker, &[Step::Key("arch")], patterns),
        C::Firmware(firmware) => {
            for (i, firmware) in firmware.iter().enumerate() {
                if firmware.component.trim().is_empty() {
                    checker.report(
                        &[
                            Step::Key("firmware"),
                            Step::Index(i),
                            Step::Key("component"),
                        ],
                        "component must not be empty",
                    );
                }
                if let Err(error) = DottedReq::parse(&firmware.version) {
                    checker.report(
                        &[Step::Key("firmware"), Step::Index(i), Step::Key("version")],
                        format!("invalid version range {:?}: {error}", firmware.version),
                    );
                }
            }
        }
        C::Kernel(range) => check_dotted(checker, "kernel", range),
        C::Rocm(range) => check_dotted(checker, "rocm", range),
        C::Hip(range) => check_dotted(checker, "hip", range),
        C::NvidiaDriver(range) => check_dotted(checker, "nvidia_driver", range),
        C::Uid(range) => check_dotted(checker, "uid", range),
        C::Torch(torch) => {
            if let Err(error) = Pep440Req::parse(torch) {
                checker.report(
                    &[Step::Key("torch")],
                    format!("invalid PEP 440 range {torch:?}: {error}"),
                );
            }
        }
        C::TorchLocal(prefixes) => {
            for (i, prefix) in prefixes.iter().enumerate() {
                if prefix.is_empty() || prefix.contains(char::is_whitespace) || prefix.contains('+')
                {
                    checker.report(
                        &[Step::Key("torch_local"), Step::Index(i)],
                        format!("{prefix:?} is not a local-tag prefix (e.g. rocm7.2, cu13)"),
                    );
                }
            }
        }
        C::AmdgpuDriver(driver) => {
            if driver.source.is_none() && driver.version.is_none() {
                checker.report(
                    &[Step::Key("amdgpu_driver")],
                    "amdgpu_driver needs a source or a version",
                );
            }
            if let Some(version) = &driver.version
                && let Err(error) = DottedReq::parse(version)
            {
                checker.report(
                    &[Step::Key("amdgpu_driver"), Step::Key("version")],
                    format!("invalid version range {version:?}: {error}"),
                );
            }
        }
        C::Env(env) => {
            for (i, env) in env.iter().enumerate() {
                check_env(checker, i, env);
            }
        }
        C::ModuleParams(params) => {
            for (i, param) in params.iter().enumerate() {
                check_module_param(checker, i, param);
            }
        }
        C::Cmdline { has, lacks } => {
            for (key, tokens) in [("cmdline_has", has), ("cmdline_lacks", lacks)] {
                for (i, token) in tokens.iter().enumerate() {
                    if token.is_empty() || token.contains(char::is_whitespace) {
                        checker.report(
                            &[Step::Key(key), Step::Index(i)],
                            format!("{token:?} is not one command-line token"),
                        );
                    }
                }
            }
        }
        C::MinGpus(min) => {
            if min == 0 {
                checker.report(
                    &[Step::Key("min_gpus")],
                    "min_gpus = 0 always holds; leave it out",
                );
            }
        }
        C::Packages(packages) => {
            for (i, package) in packages.iter().enumerate() {
                if package.name.trim().is_empty() {
                    checker.report(
                        &[Step::Key("packages"), Step::Index(i), Step::Key("name")],
                        "package name must not be empty",
                    );
                }
                if let Some(version) = &package.version
                    && let Err(error) = Pep440Req::parse(version)
                {
                    checker.report(
                        &[Step::Key("packages"), Step::Index(i), Step::Key("version")],
                        format!("invalid PEP 440 range {version:?}: {error}"),
                    );
                }
            }
        }
        C::AllocConf(conditions) => {
            for (i, alloc) in conditions.iter().enumerate() {
                if !KNOWN_ALLOC_CONF_KEYS.contains(&alloc.key.as_str()) {
                    checker.report(
                        &[Step::Key("alloc_conf"), Step::Index(i), Step::Key("key")],
                        format!(
                            "unknown allocator key {:?}; known: {}",
                            alloc.key,
                            KNOWN_ALLOC_CONF_KEYS.join(", ")
                        ),
                    );
                }
                if alloc.one_of.is_empty() {
                    checker.report(
                        &[Step::Key("alloc_conf"), Step::Index(i), Step::Key("one_of")],
                        "one_of must list at least one value",
                    );
                }
            }
        }
        C::AnyOf(groups) => {
            if nested {
                checker.report(&[Step::Key("any_of")], "any_of groups cannot nest");
            }
            for (i, group) in groups.iter().enumerate() {
                if *group == Conditions::default() {
                    checker.report(
                        &[Step::Key("any_of"), Step::Index(i)],
                        "an empty any_of group always holds",
                    );
                }
                checker.within(&[Step::Key("any_of"), Step::Index(i)], |c| {
                    check_conditions(c, group, true)
                });
            }
        }
    }
}

fn check_env(checker: &mut Checker, i: usize, env: &EnvCondition) {
    let at = |key: &'static str| [Step::Key("env"), Step::Index(i), Step::Key(key)];
    if !valid_env_name(&env.name) {
        checker.report(
            &at("name"),
            format!("{:?} is not a variable name", env.name),
        );
    }
    if env.set == Some(false) && (!env.one_of.is_empty() || !env.decodes_to.is_empty()) {
        checker.report(
            &at("set"),
            "set = false cannot be combined with one_of or decodes_to",
        );
    }
    if !env.decodes_to.is_empty() {
        if env.name != "HSA_OVERRIDE_GFX_VERSION" {
            checker.report(
                &at("decodes_to"),
                "decodes_to applies only to HSA_OVERRIDE_GFX_VERSION",
            );
        }
        check_arch_globs(checker, &at("decodes_to"), &env.decodes_to);
    }
}

fn check_module_param(checker: &mut Checker, i: usize, param: &ParamCondition) {
    let valid_name = param.name.split_once('.').is_some_and(|(module, name)| {
        !module.is_empty()
            && !name.is_empty()
            && param
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    });
    if !valid_name {
        checker.report(
            &[
                Step::Key("module_params"),
                Step::Index(i),
                Step::Key("name"),
            ],
            format!("{:?} is not of the form module.parameter", param.name),
        );
    }
    if param.one_of.is_empty() {
        checker.report(
            &[
                Step::Key("module_params"),
                Step::Index(i),
                Step::Key("one_of"),
            ],
            "one_of must list at least one value",
        );
    }
}

fn check_outcome(checker: &mut Checker, list: &str, outcome: &ProbeOutcome) {
    if outcome.probes.is_empty() {
        checker.report(
            &[Step::Key("probes")],
            "probes must list at least one probe id pattern",
        );
    }
    for (i, pattern) in outcome.probes.iter().enumerate() {
        if let Err(error) = Glob::new(pattern) {
            checker.report(
                &[Step::Key("probes"), Step::Index(i)],
                format!("invalid probe pattern: {error}"),
            );
        }
    }
    if outcome.verdicts.is_empty() {
        checker.report(
            &[Step::Key("verdicts")],
            "verdicts must list at least one verdict",
        );
    }
    if list == "contradict" && outcome.verdicts.iter().any(|v| *v != VerdictName::Pass) {
        checker.report(
            &[Step::Key("verdicts")],
            "contradict outcomes are passing results (verdicts = [\"pass\"])",
        );
    }
    if list == "confirm"
        && outcome.verdicts.iter().any(|v| {
            matches!(
                v,
                VerdictName::Pass | VerdictName::Skip | VerdictName::NotTested
            )
        })
    {
        checker.report(
            &[Step::Key("verdicts")],
            "confirm outcomes are problems (fail, crash, hang, error), not pass/skip/not_tested",
        );
    }
    if !outcome.fail_classes.is_empty() && !outcome.verdicts.contains(&VerdictName::Fail) {
        checker.report(
            &[Step::Key("fail_classes")],
            "fail_classes need verdict \"fail\"",
        );
    }
    if !outcome.exit_codes.is_empty() && !outcome.verdicts.contains(&VerdictName::Crash) {
        checker.report(
            &[Step::Key("exit_codes")],
            "exit_codes need verdict \"crash\"",
        );
    }
    for (i, text) in outcome.message_contains.iter().enumerate() {
        if text.trim().is_empty() {
            checker.report(
                &[Step::Key("message_contains"), Step::Index(i)],
                "empty text",
            );
        }
    }
}

/// Settings public sources show to be false or folklore (listed in `docs/kb-format.md`). They
/// must never be offered as a workaround.
pub(crate) fn folklore(setting: &str, literal_arches: &[GfxIsa]) -> Option<String> {
    let (name, value) = match setting.split_once('=') {
        Some((name, value)) => (name.trim(), Some(value.trim())),
        None => (setting.trim(), None),
    };
    let reason = match (name, value) {
        ("HIP_DISABLE_IPC", _) => "HIP_DISABLE_IPC does not exist: no ROCm component reads it",
        ("PYTORCH_MAX_SPLIT_SIZE_MB", _) => {
            "PYTORCH_MAX_SPLIT_SIZE_MB is not read by PyTorch; max_split_size_mb is a key of PYTORCH_ALLOC_CONF"
        }
        ("gtt_size" | "amdgpu.gtt_size", _) => "amdgpu has no parameter gtt_size",
        ("amdgpu.gttsize", _) => "amdgpu.gttsize is deprecated; use ttm.pages_limit",
        ("amd_iommu", Some("pt")) => "amd_iommu=pt is invalid (the option is iommu=pt)",
        ("amdgpu.mtype_local", _) => {
            "amdgpu.mtype_local only affects MI300/MI350 local memory; it is not a fix"
        }
        ("amdgpu.noretry", Some("0")) => {
            "amdgpu.noretry=0 enables retry; it is not a fix for RDNA faults"
        }
        ("amdgpu.vm_update_mode", Some("0")) => "amdgpu.vm_update_mode=0 only forces the default",
        // A placeholder names no particular mapping (and cannot be tested); the rule that
        // it must be a sibling is stated in the description.
        ("HSA_OVERRIDE_GFX_VERSION", Some(value)) if value.contains('<') => return None,
        ("HSA_OVERRIDE_GFX_VERSION", Some(value)) => {
            return match isa::decode_override(value) {
                Err(error) => Some(format!("invalid override: {error}")),
                Ok(decoded) if literal_arches.is_empty() => Some(format!(
                    "an override workaround ({}) needs the entry to name the exact arch it maps",
                    decoded.name()
                )),
                Ok(decoded) => literal_arches
                    .iter()
                    .find(|arch| !decoded.is_sibling_of(arch))
                    .map(|arch| {
                        format!(
                            "HSA_OVERRIDE_GFX_VERSION={value} maps {arch} to {}, which is not an ISA-compatible sibling (RKB-010)",
                            decoded.name()
                        )
                    }),
            };
        }
        _ => return None,
    };
    Some(reason.to_string())
}

fn check_workaround(checker: &mut Checker, workaround: &Workaround, literal_arches: &[GfxIsa]) {
    if workaround.description.trim().is_empty() {
        checker.report(&[Step::Key("description")], "description must not be empty");
    }
    let setting = workaround.setting.as_deref();
    match (workaround.kind, setting) {
        (RemedyKind::Env, Some(setting)) => match setting.split_once('=') {
            Some((name, _)) if valid_env_name(name) => {}
            _ => checker.report(
                &[Step::Key("setting")],
                format!("env setting {setting:?} must be NAME=VALUE"),
            ),
        },
        (RemedyKind::Switch, Some(setting)) => match setting.split_once('=') {
            Some((name, value)) if is_switch_name(name) && !value.is_empty() => {}
            _ => checker.report(
                &[Step::Key("setting")],
                format!("switch setting {setting:?} must be torch.NAME=VALUE"),
            ),
        },
        (RemedyKind::Unset, Some(setting)) if !valid_env_name(setting) => checker.report(
            &[Step::Key("setting")],
            format!("unset setting {setting:?} must be a variable name"),
        ),
        (RemedyKind::KernelParam, Some(setting))
            if setting.is_empty() || setting.contains(char::is_whitespace) =>
        {
            checker.report(
                &[Step::Key("setting")],
                format!("kernel parameter {setting:?} must be one token (module.param=value)"),
            )
        }
        (
            RemedyKind::Env | RemedyKind::Unset | RemedyKind::KernelParam | RemedyKind::Switch,
            None,
        ) => checker.report(
            &[Step::Key("kind")],
            format!("a {} workaround needs a setting", workaround.kind.name()),
        ),
        _ => {}
    }
    if let Some(setting) = setting
        && let Some(reason) = folklore(setting, literal_arches)
    {
        checker.report(
            &[Step::Key("setting")],
            format!("{setting:?} must not be offered as a workaround: {reason}"),
        );
    }
    if workaround.kind == RemedyKind::KernelParam
        && !(workaround.cost.needs_root && workaround.cost.needs_reboot)
    {
        checker.report(
            &[Step::Key("cost")],
            "a kernel parameter needs root and a reboot (cost.needs_root, cost.needs_reboot)",
        );
    }
    if workaround.kind == RemedyKind::CodeChange && !workaround.cost.code_change {
        checker.report(
            &[Step::Key("cost")],
            "a code change must say cost.code_change = true",
        );
    }
    if workaround.testable {
        match (workaround.kind, setting) {
            (RemedyKind::Env | RemedyKind::Unset | RemedyKind::Switch, Some(setting)) => {
                if setting.contains('<') {
                    checker.report(
                        &[Step::Key("testable")],
                        "a setting with a placeholder cannot be tested as is",
                    );
                } else if !catalogue::is_allowed_setting(setting) {
                    checker.report(
                        &[Step::Key("setting")],
                        format!(
                            "testable setting {setting:?} is not in kb/catalogue.toml; add it there first"
                        ),
                    );
                }
            }
            _ => checker.report(
                &[Step::Key("testable")],
                "only env, unset and switch workarounds can be tested in a fresh worker",
            ),
        }
    }
}

/// Checks a severity pair for rendering (kept here so the rule has one home).
pub(crate) fn suspected_severity(entry: &KbEntry) -> Severity {
    entry
        .severity_if_suspected
        .unwrap_or(entry.severity.max(Severity::Warning))
}
