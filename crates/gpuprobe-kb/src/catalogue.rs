//! The workaround catalogue (`kb/catalogue.toml`): generic settings known to change one
//! layer's behaviour (copy engine, serialization, allocator, BLAS backend, convolution
//! solvers, attention backend, arch override, visible devices, ...).
//!
//! `gpuprobe fix` draws its candidates from here (plus the matched entries' workarounds,
//! which must be in here too), and profiles may only hold settings this catalogue allows:
//! anything else (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `PYTHONPATH`, a path) is refused.
//! Process settings are testable in a fresh worker; kernel parameters and firmware changes
//! are reported, never applied.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use gpuprobe_model::Cost;
use gpuprobe_model::FindingLayer;
use gpuprobe_model::Vendor;
use gpuprobe_model::is_switch_name;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::entry::{OsName, StrictCost};
use crate::isa;
use crate::kb::EMBEDDED_CATALOGUE;
use crate::lint::alloc_conf;
use crate::validate::{Diagnostic, valid_env_name};

/// The catalogue file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// The entries, one `[[entry]]` table each.
    #[serde(rename = "entry", default)]
    pub entries: Vec<CatalogueEntry>,
}

/// What kind of change an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatalogueKind {
    /// An environment variable of the process (testable in a fresh worker).
    Process,
    /// A kernel command-line or module parameter (reported only).
    KernelParam,
    /// A firmware change (reported only).
    Firmware,
    /// A change to the user's code (reported only).
    CodeChange,
    /// A framework switch: set inside the Python process after `import torch` (an SDPA
    /// backend, cuDNN, TF32, a BLAS library, compile off). Testable in a fresh worker, and
    /// applied to a job by `gpuprobe run`'s start-up hook or `gpuprobe.apply_profile()`.
    /// A switch under `gpuprobe.` changes gpuprobe's own probes (contiguous inputs): a cure
    /// by it proves the code change it stands for, and it is never applied to a job.
    Switch,
}

/// How the values of a process setting are checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValueRule {
    /// One of `allowed`.
    #[default]
    Enum,
    /// A caching-allocator configuration (`key:value,...` with known keys).
    AllocConf,
    /// A device list (`0`, `1,2`, `GPU-<uuid>`).
    DeviceList,
    /// A `major.minor.stepping` arch override that names a gfx ISA.
    GfxVersion,
}

/// One catalogue entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogueEntry {
    /// Stable id, `CAT-...`.
    pub id: String,
    /// One line.
    pub title: String,
    /// Process setting, kernel parameter, firmware or code change.
    pub kind: CatalogueKind,
    /// For process settings: the environment variables this entry governs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<String>,
    /// For process settings: how values are checked.
    #[serde(default)]
    pub values: ValueRule,
    /// For `values = "enum"`: the allowed values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// What `fix` tries, in order: `NAME=VALUE`, or a bare `NAME` meaning "unset it"; for
    /// kernel parameters the command-line token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// The layer whose behaviour it changes.
    pub layer: FindingLayer,
    /// The probe families (an id's first part) whose kernels or copies it changes: `fix`
    /// tries it only for failures of these families, and a kernel parameter or firmware
    /// change is reported only for them. Empty: it may change any family's results (the copy
    /// engine, serialization, the allocator), and is tried for every failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<String>,
    /// Vendors it applies to.
    pub vendors: Vec<Vendor>,
    /// Operating systems it applies to (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<OsName>,
    /// What it changes.
    pub changes: String,
    /// What it costs.
    #[serde(default, with = "StrictCost")]
    pub cost: Cost,
    /// Whether `fix` may apply it in a fresh worker.
    pub testable: bool,
    /// Caveats (read once per process, debugging aid, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// For switches: the Python line a user writes for each allowed value (what
    /// `profile export --format python` prints; for a `gpuprobe.` switch, the code change).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub python: BTreeMap<String, String>,
    /// For switches: the first torch release that has it (`2.3`); older ones are not tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_min: Option<String>,
    /// Where the setting is defined (source file or document).
    pub source: String,
    /// Public sources that show it in use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<String>,
    /// Knowledge-base entries that name it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
}

/// Why a setting is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingRefused {
    /// Not a variable name.
    #[error("{0:?} is not an environment variable name")]
    NotAName(String),
    /// Not a testable process setting of the catalogue.
    #[error(
        "{0} is not a setting of the workaround catalogue; profiles may only hold catalogue settings"
    )]
    NotInCatalogue(String),
    /// The value looks like a path or holds characters no catalogue value has.
    #[error("{name}={value:?}: values may not be paths or hold shell characters")]
    UnsafeValue {
        /// The variable.
        name: String,
        /// The value.
        value: String,
    },
    /// The value is not one the catalogue allows.
    #[error("{name}={value:?} is not allowed: {expected}")]
    BadValue {
        /// The variable.
        name: String,
        /// The value.
        value: String,
        /// What is allowed.
        expected: String,
    },
}

/// Variables that must never enter the catalogue or a profile: they change what code runs,
/// not how the GPU stack behaves.
const NEVER: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PATH",
    "HOME",
    "ROCM_PATH",
    "HIP_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "HSA_TOOLS_LIB",
];

impl Catalogue {
    /// The shipped catalogue. The crate's tests prove it parses and validates; should it
    /// not, the result is empty and every setting is refused.
    pub fn embedded() -> Catalogue {
        Self::parse(EMBEDDED_CATALOGUE).unwrap_or_default()
    }

    /// Parses a catalogue file.
    pub fn parse(text: &str) -> Result<Catalogue, Diagnostic> {
        toml::from_str(text).map_err(|error| {
            let offset = error.span().map_or(0, |span| span.start);
            Diagnostic::at_offset(
                "catalogue.toml",
                text,
                offset,
                error.message().trim().to_string(),
            )
        })
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&CatalogueEntry> {
        self.entries.iter().find(|entry| entry.id == id)
    }

    /// Entries that apply to a vendor.
    pub fn for_vendor(&self, vendor: Vendor) -> impl Iterator<Item = &CatalogueEntry> {
        self.entries
            .iter()
            .filter(move |entry| entry.vendors.contains(&vendor))
    }

    /// The testable process entries.
    pub fn testable(&self) -> impl Iterator<Item = &CatalogueEntry> {
        self.entries.iter().filter(|entry| entry.testable)
    }

    /// The testable entry governing a variable.
    pub fn entry_for_variable(&self, name: &str) -> Option<&CatalogueEntry> {
        self.testable()
            .find(|entry| entry.variables.iter().any(|variable| variable == name))
    }

    /// Checks one process setting `name=value`; returns the governing entry.
    pub fn check_setting(
        &self,
        name: &str,
        value: &str,
    ) -> Result<&CatalogueEntry, SettingRefused> {
        if !valid_env_name(name) && !is_switch_name(name) {
            return Err(SettingRefused::NotAName(name.to_string()));
        }
        let entry = self
            .entry_for_variable(name)
            .ok_or_else(|| SettingRefused::NotInCatalogue(name.to_string()))?;
        let unsafe_value = value.is_empty()
            || value.chars().any(|c| {
                matches!(
                    c,
                    '/' | '\\' | '$' | '`' | ';' | '|' | '&' | '<' | '>' | '\'' | '"' | '~'
                ) && !(entry.values == ValueRule::AllocConf && c == '>')
                    || c.is_whitespace()
                    || c.is_control()
            });
        if unsafe_value {
            return Err(SettingRefused::UnsafeValue {
                name: name.to_string(),
                value: value.to_string(),
            });
        }
        let bad = |expected: String| SettingRefused::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            expected,
        };
        match entry.values {
            ValueRule::Enum => {
                if !entry.allowed.iter().any(|allowed| allowed == value) {
                    return Err(bad(format!("one of {}", entry.allowed.join(", "))));
                }
            }
            ValueRule::AllocConf => {
                let items = alloc_conf::parse(value);
                if items.is_empty() {
                    return Err(bad("key:value items".to_string()));
                }
                for item in items {
                    if !alloc_conf::KNOWN_KEYS.contains(&item.key.as_str()) || item.value.is_none()
                    {
                        return Err(bad(format!(
                            "key:value items with keys among {}",
                            alloc_conf::KNOWN_KEYS.join(", ")
                        )));
                    }
                }
            }
            ValueRule::DeviceList => {
                let valid = value.split(',').all(|item| {
                    !item.is_empty()
                        && (item.chars().all(|c| c.is_ascii_digit())
                            || item.strip_prefix("GPU-").is_some_and(|uuid| {
                                uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
                            }))
                });
                if !valid {
                    return Err(bad(
                        "device indices or GPU-<uuid>, comma-separated".to_string()
                    ));
                }
            }
            ValueRule::GfxVersion => {
                if let Err(error) = isa::decode_override(value) {
                    return Err(bad(error.to_string()));
                }
            }
        }
        Ok(entry)
    }

    /// Whether a setting may appear in a profile: `NAME=VALUE` is checked in full, a bare
    /// `NAME` only for being a testable catalogue variable.
    pub fn allows(&self, setting: &str) -> bool {
        match setting.split_once('=') {
            Some((name, value)) => self.check_setting(name.trim(), value.trim()).is_ok(),
            // A switch is always set to a value, never removed.
            None => {
                valid_env_name(setting.trim()) && self.entry_for_variable(setting.trim()).is_some()
            }
        }
    }

    /// Checks the catalogue's own rules; each problem names the entry.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for entry in &self.entries {
            let id = &entry.id;
            if !seen.insert(id.clone()) {
                problems.push(format!("{id}: duplicate id"));
            }
            let id_ok = entry.id.strip_prefix("CAT-").is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
            });
            if !id_ok {
                problems.push(format!("{id}: id must be CAT-<UPPERCASE-WORDS>"));
            }
            if entry.title.trim().is_empty()
                || entry.changes.trim().is_empty()
                || entry.source.trim().is_empty()
            {
                problems.push(format!("{id}: title, changes and source must not be empty"));
            }
            if entry.vendors.is_empty() {
                problems.push(format!("{id}: vendors must not be empty"));
            }
            for variable in &entry.variables {
                let name_ok = if entry.kind == CatalogueKind::Switch {
                    is_switch_name(variable)
                } else {
                    valid_env_name(variable) && !NEVER.contains(&variable.as_str())
                };
                if !name_ok {
                    problems.push(format!(
                        "{id}: {variable:?} may not be a catalogue variable"
                    ));
                }
            }
            if entry.kind != CatalogueKind::Switch
                && (!entry.python.is_empty() || entry.torch_min.is_some())
            {
                problems.push(format!(
                    "{id}: only switches have python lines and torch_min"
                ));
            }
            match entry.kind {
                CatalogueKind::Switch => {
                    if entry.variables.len() != 1 {
                        problems.push(format!("{id}: a switch entry governs one switch"));
                    }
                    if entry.values != ValueRule::Enum || entry.allowed.is_empty() {
                        problems.push(format!(
                            "{id}: a switch has values = \"enum\" and allowed values"
                        ));
                    }
                    if !entry.testable {
                        problems.push(format!("{id}: a switch is testable"));
                    }
                    for value in &entry.allowed {
                        if !entry.python.contains_key(value) {
                            problems.push(format!("{id}: no python line for value {value:?}"));
                        }
                    }
                    for candidate in &entry.candidates {
                        let ok = candidate.split_once('=').is_some_and(|(name, value)| {
                            entry.variables.iter().any(|v| v == name)
                                && self.check_setting(name, value).is_ok()
                        });
                        if !ok {
                            problems.push(format!("{id}: candidate {candidate:?} is not an allowed setting of this entry"));
                        }
                    }
                    if let Some(min) = &entry.torch_min
                        && crate::version::Pep440Version::parse(min).is_err()
                    {
                        problems.push(format!("{id}: torch_min {min:?} is not a version"));
                    }
                }
                CatalogueKind::Process => {
                    if entry.variables.is_empty() {
                        problems.push(format!("{id}: a process entry needs variables"));
                    }
                    if entry.values == ValueRule::Enum && entry.allowed.is_empty() {
                        problems.push(format!("{id}: values = \"enum\" needs allowed values"));
                    }
                    if !entry.testable {
                        problems.push(format!("{id}: a process entry is testable"));
                    }
                    for candidate in &entry.candidates {
                        let ok = match candidate.split_once('=') {
                            Some((name, value)) => {
                                entry.variables.iter().any(|v| v == name)
                                    && self.check_setting(name, value).is_ok()
                            }
                            None => entry.variables.iter().any(|v| v == candidate),
                        };
                        if !ok {
                            problems.push(format!("{id}: candidate {candidate:?} is not an allowed setting of this entry"));
                        }
                    }
                }
                CatalogueKind::KernelParam
                | CatalogueKind::Firmware
                | CatalogueKind::CodeChange => {
                    if entry.testable {
                        problems.push(format!("{id}: only process settings are testable"));
                    }
                    if !entry.variables.is_empty() {
                        problems.push(format!("{id}: only process entries have variables"));
                    }
                    if entry.kind == CatalogueKind::KernelParam
                        && !(entry.cost.needs_root && entry.cost.needs_reboot)
                    {
                        problems.push(format!("{id}: a kernel parameter needs root and a reboot"));
                    }
                    if entry.kind == CatalogueKind::CodeChange && !entry.cost.code_change {
                        problems.push(format!(
                            "{id}: a code change must say cost.code_change = true"
                        ));
                    }
                }
            }
            for candidate in &entry.candidates {
                if let Some(reason) = crate::validate::folklore(candidate, &[])
                    && !candidate.starts_with(crate::facts::OVERRIDE_VAR)
                {
                    problems.push(format!(
                        "{id}: candidate {candidate:?} is folklore: {reason}"
                    ));
                }
            }
        }
        problems
    }
}

fn shared() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(Catalogue::embedded)
}

/// The shipped catalogue.
pub fn embedded() -> Catalogue {
    shared().clone()
}

/// Whether a setting may appear in a profile (see [`Catalogue::allows`]); checked against
/// the shipped catalogue. `LD_PRELOAD`, `LD_LIBRARY_PATH`, `PYTHONPATH`, paths and anything
/// else outside the catalogue are refused.
pub fn is_allowed_setting(name: &str) -> bool {
    shared().allows(name)
}

/// The catalogue as a Markdown table (the generated part of `docs/catalogue.md`).
pub fn catalogue_markdown(catalogue: &Catalogue) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "| id | settings | kind | layer | vendors | tried for | what it changes | cost | source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for entry in &catalogue.entries {
        let settings = if entry.candidates.is_empty() {
            entry.variables.join(", ")
        } else {
            entry.candidates.join(", ")
        };
        let kind = match entry.kind {
            CatalogueKind::Process => "process (testable)",
            CatalogueKind::KernelParam => "kernel parameter (reported)",
            CatalogueKind::Firmware => "firmware (reported)",
            CatalogueKind::CodeChange => "code change (reported)",
            CatalogueKind::Switch if entry.variables.iter().any(|v| v.starts_with("gpuprobe.")) => {
                "probe switch (proves a code change)"
            }
            CatalogueKind::Switch => "framework switch (testable)",
        };
        let vendors: Vec<String> = entry
            .vendors
            .iter()
            .map(|v| format!("{v:?}").to_lowercase())
            .collect();
        let mut cost: Vec<String> = entry.cost.tags().iter().map(|t| t.to_string()).collect();
        if let Some(note) = &entry.cost.note {
            cost.push(note.clone());
        }
        let mut changes = entry.changes.clone();
        if let Some(notes) = &entry.notes {
            changes.push_str(&format!(" *{notes}*"));
        }
        let settings = if settings.is_empty() {
            "—".to_string()
        } else {
            format!("`{}`", cell(&settings))
        };
        // The families whose failures `fix` tries it for (all, when it names none).
        let tried_for = if entry.families.is_empty() {
            "every family".to_string()
        } else {
            entry.families.join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            entry.id,
            settings,
            kind,
            entry.layer.name(),
            vendors.join(", "),
            tried_for,
            cell(&changes),
            cell(&cost.join("; ")),
            cell(&entry.source),
        ));
    }
    out
}
