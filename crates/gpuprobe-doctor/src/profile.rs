//! Profile files: reading them strictly, refusing anything that is not a catalogue setting,
//! writing them, and exporting them as `.env`, shell or JSON.
//!
//! A profile may only set or remove process settings the workaround catalogue allows. A
//! variable that would load code into the process (`LD_PRELOAD`, `LD_LIBRARY_PATH`,
//! `PYTHONPATH`, `PYTHONSTARTUP`, ...), a path-valued variable, a value with shell
//! characters, or a key gpuprobe does not know (a profile cannot carry commands or touch
//! system files) is refused with the reason. Kernel parameters and firmware changes are
//! text in `system_changes`: reported, never applied.

use std::path::{Path, PathBuf};

use gpuprobe_kb::Catalogue;
use gpuprobe_model::{ClassifiedError, ExitStatus};
use gpuprobe_model::{PROFILE_VERSION, Profile, is_probe_side_switch, is_switch_name};

/// Variables that change which code a process loads or where it finds it.
const CODE_LOADING: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_BIND_NOW",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "PATH",
    "HSA_TOOLS_LIB",
    "HIP_PATH",
    "ROCM_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
];

/// Keys a profile may have, and the keys of its tables.
const TOP_KEYS: &[&str] = &[
    "profile_version",
    "created_by",
    "created_at",
    "simulated",
    "env",
    "unset",
    "switches",
    "cures",
    "still_failing",
    "flaky",
    "system_changes",
    "other_changes",
    "code_changes",
    "measured_cost",
    "evidence",
    "proven_on",
    "setting",
];
const STACK_KEYS: &[&str] = &["gpus", "kernel", "driver", "runtime", "torch"];
const SETTING_KEYS: &[&str] = &["setting", "cures", "together_with", "sources", "cost"];

/// Why a profile cannot be read, used or written. The user's to fix (exit 2), except a
/// profile that cannot be serialized (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file cannot be read.
    #[error("cannot read profile {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML of a profile's shape.
    #[error("{origin} is not a valid profile: {source}")]
    Malformed {
        /// The file, as messages name it.
        origin: String,
        /// What the TOML reader said.
        #[source]
        source: toml::de::Error,
    },
    /// A key gpuprobe does not know.
    #[error(
        "{origin}: unknown key `{key}`{place}: a profile holds only settings and the facts \
         that justify them (docs/profiles.md); it cannot run commands or change system files"
    )]
    UnknownKey {
        /// The file, as messages name it.
        origin: String,
        /// The key.
        key: String,
        /// Where it is (empty at the top, ` in [proven_on]`, ` in [[setting]]`).
        place: &'static str,
    },
    /// Written by a newer gpuprobe.
    #[error(
        "{origin} has profile_version {version}; this gpuprobe reads version {PROFILE_VERSION} (upgrade gpuprobe)"
    )]
    Version {
        /// The file, as messages name it.
        origin: String,
        /// Its version.
        version: u32,
    },
    /// Settings the catalogue does not allow.
    #[error("{origin} is refused: {}", problems.join("; "))]
    Refused {
        /// The file, as messages name it.
        origin: String,
        /// Each refused setting with the reason.
        problems: Vec<String>,
    },
    /// The profile cannot be turned into TOML (exit 3).
    #[error("cannot serialize the profile: {0}")]
    Serialize(#[source] toml::ser::Error),
    /// A missing parent directory cannot be made.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ClassifiedError for ProfileError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            ProfileError::Serialize(_) => ExitStatus::InternalFailure,
            _ => ExitStatus::UsageError,
        }
    }
}

/// Reads and validates a profile.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

/// Parses and validates profile text (`origin` names it in messages).
pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
    let malformed = |source| ProfileError::Malformed {
        origin: origin.to_string(),
        source,
    };
    let table: toml::Table = toml::from_str(text).map_err(malformed)?;
    let unknown = |key: &str, place: &'static str| ProfileError::UnknownKey {
        origin: origin.to_string(),
        key: key.to_string(),
        place,
    };
    for key in table.keys() {
        if !TOP_KEYS.contains(&key.as_str()) {
            return Err(unknown(key, ""));
        }
    }
    if let Some(toml::Value::Table(stack)) = table.get("proven_on") {
        for key in stack.keys() {
            if !STACK_KEYS.contains(&key.as_str()) {
                return Err(unknown(key, " in [proven_on]"));
            }
        }
    }
    if let Some(toml::Value::Array(settings)) = table.get("setting") {
        for setting in settings {
            if let toml::Value::Table(setting) = setting {
                for key in setting.keys() {
                    if !SETTING_KEYS.contains(&key.as_str()) {
                        return Err(unknown(key, " in [[setting]]"));
                    }
                }
            }
        }
    }
    let profile: Profile = toml::from_str(text).map_err(malformed)?;
    if profile.profile_version > PROFILE_VERSION {
        return Err(ProfileError::Version {
            origin: origin.to_string(),
            version: profile.profile_version,
        });
    }
    let problems = setting_problems(&profile, &gpuprobe_kb::embedded_catalogue());
    if !problems.is_empty() {
        return Err(ProfileError::Refused {
            origin: origin.to_string(),
            problems,
        });
    }
    Ok(profile)
}

/// Every setting of `profile` the catalogue does not allow, with the reason.
pub fn setting_problems(profile: &Profile, catalogue: &Catalogue) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, value) in &profile.env {
        if CODE_LOADING.contains(&name.as_str()) {
            problems.push(format!(
                "{name}: would change what code the process loads; profiles may only hold \
                 catalogue settings (gpuprobe never applies it)"
            ));
            continue;
        }
        if let Err(refused) = catalogue.check_setting(name, value) {
            problems.push(refused.to_string());
        }
    }
    for (name, value) in &profile.switches {
        if !is_switch_name(name) || is_probe_side_switch(name) {
            problems.push(format!(
                "switches: {name:?} is not a framework switch a profile can apply"
            ));
            continue;
        }
        if let Err(refused) = catalogue.check_setting(name, value) {
            problems.push(refused.to_string());
        }
    }
    for name in profile.env.keys() {
        if is_switch_name(name) {
            problems.push(format!(
                "{name}: a framework switch belongs in [switches], not [env]"
            ));
        }
    }
    for name in &profile.unset {
        if profile.env.contains_key(name) {
            problems.push(format!("{name} is both set and unset"));
        } else if catalogue.entry_for_variable(name).is_none() {
            problems.push(format!(
                "unset {name}: not a setting of the workaround catalogue; profiles may only hold catalogue settings"
            ));
        }
    }
    problems
}

/// Writes a profile as TOML, with a header comment saying what it is.
pub fn write(path: &Path, profile: &Profile) -> Result<(), ProfileError> {
    let body = toml::to_string(profile).map_err(ProfileError::Serialize)?;
    let mut text = String::from(
        "# gpuprobe profile: process settings proven by `gpuprobe fix` to cure failing probes\n\
         # on the stack in [proven_on]. Apply with `gpuprobe run --profile FILE -- CMD` or\n\
         # `gpuprobe.apply_profile(FILE)`; export with `gpuprobe profile export FILE`.\n\
         # Only catalogue settings are accepted (docs/profiles.md).\n",
    );
    if profile.simulated {
        text.push_str(
            "# SIMULATED: made under fault simulation; its settings are not proven on real hardware.\n",
        );
    }
    text.push('\n');
    text.push_str(&body);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ProfileError::CreateDir {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| ProfileError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// `NAME=VALUE` lines (a `.env` file).
    Env,
    /// `export NAME='VALUE'` and `unset NAME` lines.
    Shell,
    /// `{"set": {...}, "unset": [...], "switches": {...}, ...}`.
    Json,
    /// The Python lines that apply the profile's framework switches (after `import torch`).
    Python,
}

/// Comment lines for the `env` and `shell` exports: framework switches are not environment
/// settings; they are applied in Python (`gpuprobe run --profile` does it for the job).
fn switch_comments(profile: &Profile) -> String {
    let mut out = String::new();
    for (name, value) in &profile.switches {
        out.push_str(&format!(
            "# framework switch, applied after `import torch` (`--format python`, or `gpuprobe run --profile`): {}\n",
            switch_line(name, value)
        ));
    }
    out
}

/// The Python line of one switch (the catalogue's), or a generic assignment.
pub fn switch_line(name: &str, value: &str) -> String {
    gpuprobe_kb::embedded_catalogue()
        .entry_for_variable(name)
        .and_then(|entry| entry.python.get(value).cloned())
        .unwrap_or_else(|| format!("{name} = {value}"))
}

fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The comment line that opens the `env` and `shell` exports: where the profile was proven,
/// and whether it was made under simulation.
fn export_header(profile: &Profile) -> String {
    let simulated = if profile.simulated {
        " (SIMULATED)"
    } else {
        ""
    };
    format!(
        "# gpuprobe profile{simulated} proven on {}\n",
        profile.proven_on.describe()
    )
}

/// The profile's settings in `format`.
pub fn export(profile: &Profile, format: ExportFormat) -> String {
    let mut out = String::new();
    match format {
        ExportFormat::Env => {
            out.push_str(&export_header(profile));
            for (name, value) in &profile.env {
                out.push_str(&format!("{name}={value}\n"));
            }
            for name in &profile.unset {
                out.push_str(&format!(
                    "# unset {name}  (a .env file cannot remove a variable: remove it from your environment)\n"
                ));
            }
            out.push_str(&switch_comments(profile));
        }
        ExportFormat::Shell => {
            out.push_str(&export_header(profile));
            for (name, value) in &profile.env {
                out.push_str(&format!("export {name}={}\n", shell_quote(value)));
            }
            for name in &profile.unset {
                out.push_str(&format!("unset {name}\n"));
            }
            out.push_str(&switch_comments(profile));
        }
        ExportFormat::Python => {
            out.push_str(&export_header(profile));
            if !profile.env.is_empty() || !profile.unset.is_empty() {
                out.push_str(
                    "# environment settings are read at start-up: export them before Python starts\n\
                     # (`gpuprobe profile export FILE --format shell`)\n",
                );
            }
            out.push_str("import torch\n");
            for (name, value) in &profile.switches {
                out.push_str(&switch_line(name, value));
                out.push('\n');
            }
            for change in &profile.code_changes {
                out.push_str(&format!("# code change, proven: {change}\n"));
            }
        }
        ExportFormat::Json => {
            let value = serde_json::json!({
                "set": profile.env,
                "unset": profile.unset,
                "switches": profile.switches,
                "simulated": profile.simulated,
                "proven_on": profile.proven_on,
                "cures": profile.cures,
                "still_failing": profile.still_failing,
                "system_changes": profile.system_changes,
            });
            out = serde_json::to_string_pretty(&value).unwrap_or_default();
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::{ProfileSetting, StackKey};

    fn sample() -> Profile {
        let mut profile = Profile {
            profile_version: PROFILE_VERSION,
            created_by: "gpuprobe 0.1.0".into(),
            created_at: "2026-11-22T10:00:00Z".into(),
            proven_on: StackKey {
                gpus: vec!["gfx1100".into()],
                kernel: Some("6.17.0".into()),
                ..Default::default()
            },
            cures: vec!["copy.h2d.pageable.tiny.nonblocking".into()],
            system_changes: vec!["amdgpu.cwsr_enable=0 (needs root)".into()],
            settings: vec![ProfileSetting {
                setting: "HSA_ENABLE_SDMA=0".into(),
                cures: vec!["copy.h2d.pageable.tiny.nonblocking".into()],
                sources: vec!["CAT-SDMA-OFF".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        profile.env.insert("HSA_ENABLE_SDMA".into(), "0".into());
        profile.unset.push("HSA_OVERRIDE_GFX_VERSION".into());
        profile
    }

    fn to_text(profile: &Profile) -> String {
        toml::to_string(profile).unwrap()
    }

    #[test]
    fn round_trip_through_toml() {
        let profile = sample();
        let parsed = parse(&to_text(&profile), "p.toml").unwrap();
        assert_eq!(parsed, profile);
    }

    #[test]
    fn code_loading_and_foreign_settings_are_refused() {
        for (name, value, words) in [
            ("LD_PRELOAD", "/tmp/evil.so", "would change what code"),
            ("PYTHONPATH", "/tmp", "would change what code"),
            ("PYTHONSTARTUP", "/tmp/x.py", "would change what code"),
            (
                "MY_LIBRARY_DIR",
                "/opt/lib",
                "not a setting of the workaround catalogue",
            ),
            (
                "HIP_DISABLE_IPC",
                "1",
                "not a setting of the workaround catalogue",
            ),
            ("HSA_ENABLE_SDMA", "/etc/passwd", "paths"),
            ("HSA_ENABLE_SDMA", "7", "not allowed"),
        ] {
            let mut profile = sample();
            profile.env.insert(name.into(), value.into());
            let err = parse(&to_text(&profile), "p.toml").unwrap_err();
            let err = err.to_string();
            assert!(err.contains(name), "{err}");
            assert!(err.contains(words), "{name}: {err}");
        }
    }

    #[test]
    fn switches_are_checked_kept_apart_and_exported_as_python() {
        let mut profile = sample();
        profile.switches.insert(
            "torch.backends.cuda.enable_cudnn_sdp".into(),
            "False".into(),
        );
        profile
            .code_changes
            .push("x = x.contiguous() — proven".into());
        let text = to_text(&profile);
        let back = parse(&text, "p.toml").unwrap();
        assert_eq!(back.switches, profile.switches);
        let python = export(&back, ExportFormat::Python);
        assert!(python.contains("import torch\n"), "{python}");
        assert!(
            python.contains("\ntorch.backends.cuda.enable_cudnn_sdp(False)\n"),
            "{python}"
        );
        assert!(
            python.contains("# code change, proven: x = x.contiguous()"),
            "{python}"
        );
        let json = export(&back, ExportFormat::Json);
        assert!(
            json.contains("\"torch.backends.cuda.enable_cudnn_sdp\": \"False\""),
            "{json}"
        );
        let env = export(&back, ExportFormat::Env);
        assert!(env.contains("# framework switch"), "{env}");
        assert!(!env.contains("\ntorch."), "a switch is no .env line: {env}");
        // Refused: a value outside the catalogue, a probe-side switch, a switch under [env],
        // a switch nobody catalogued.
        for (name, value, in_env) in [
            ("torch.backends.cuda.enable_cudnn_sdp", "0", false),
            ("gpuprobe.inputs.contiguous", "True", false),
            ("torch.backends.cudnn.enabled", "False", true),
            ("torch.cuda.set_per_process_memory_fraction", "0.5", false),
        ] {
            let mut bad = sample();
            if in_env {
                bad.env.insert(name.into(), value.into());
            } else {
                bad.switches.insert(name.into(), value.into());
            }
            assert!(
                parse(&to_text(&bad), "bad.toml").is_err(),
                "{name}={value} (env: {in_env})"
            );
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let text = format!("{}\nexec = \"rm -rf /\"\n", to_text(&sample()));
        let err = parse(&text, "p.toml").unwrap_err();
        assert!(err.to_string().contains("unknown key `exec`"), "{err}");
        let text = to_text(&sample()).replace("[proven_on]", "[proven_on]\nsysctl = \"x\"");
        let err = parse(&text, "p.toml").unwrap_err();
        assert!(err.to_string().contains("`sysctl` in [proven_on]"), "{err}");
    }

    #[test]
    fn exports() {
        let profile = sample();
        let env = export(&profile, ExportFormat::Env);
        assert!(env.contains("\nHSA_ENABLE_SDMA=0\n"), "{env}");
        assert!(env.contains("# unset HSA_OVERRIDE_GFX_VERSION"));
        let shell = export(&profile, ExportFormat::Shell);
        assert!(shell.contains("export HSA_ENABLE_SDMA='0'\n"), "{shell}");
        assert!(shell.contains("unset HSA_OVERRIDE_GFX_VERSION\n"));
        let json: serde_json::Value =
            serde_json::from_str(&export(&profile, ExportFormat::Json)).unwrap();
        assert_eq!(json["set"]["HSA_ENABLE_SDMA"], "0");
        assert_eq!(json["unset"][0], "HSA_OVERRIDE_GFX_VERSION");
    }
}
