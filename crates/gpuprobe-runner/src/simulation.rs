//! Fault simulation specs: named presets shipped with gpuprobe and custom TOML files.
//!
//! Simulation is a labelled test and demo mode. It is active only when the user passes
//! `--simulate`, and everything produced under it says SIMULATED. The faults are data
//! (operation, conditions, corruption, cure); the Python worker interprets them.

use std::path::Path;
use std::sync::OnceLock;

use gpuprobe_model::{FaultSpec, SimulationSpec};
use serde::Deserialize;

use crate::embedded;
use crate::error::RunnerError;

/// Where the fault vocabulary lives in the embedded Python package: the worker's fault
/// engine reads the same file, so the names the supervisor accepts before any worker starts
/// are the names the worker knows.
const VOCABULARY_FILE: &str = "gpuprobe/worker/simulation.json";

/// The operations and effects a fault may name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vocabulary {
    ops: Vec<String>,
    effects: Vec<String>,
}

fn vocabulary() -> &'static Vocabulary {
    static VOCABULARY: OnceLock<Vocabulary> = OnceLock::new();
    VOCABULARY.get_or_init(|| {
        let text = embedded::PYTHON_PACKAGE
            .iter()
            .find(|(rel, _)| *rel == VOCABULARY_FILE)
            .map(|(_, text)| *text)
            .expect("the build embeds gpuprobe/worker/simulation.json");
        serde_json::from_str(text).expect("gpuprobe/worker/simulation.json is valid")
    })
}

/// Operations a fault can target (`simulation.json`, shared with the worker).
pub(crate) fn known_ops() -> &'static [String] {
    &vocabulary().ops
}

/// Corruptions a fault can apply (`simulation.json`, shared with the worker).
pub(crate) fn known_effects() -> &'static [String] {
    &vocabulary().effects
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    fault: Vec<FaultSpec>,
}

/// A preset's name and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    /// Name as given to `--simulate`.
    pub name: String,
    /// What it imitates.
    pub description: String,
}

/// The presets shipped with this build.
pub fn presets() -> Vec<Preset> {
    embedded::SIMULATION_PRESETS
        .iter()
        .map(|(file, text)| Preset {
            name: file.trim_end_matches(".toml").to_string(),
            description: toml::from_str::<FaultFile>(text)
                .map(|f| f.description)
                .unwrap_or_default(),
        })
        .collect()
}

/// Resolves `--simulate SPEC`: a comma-separated list of preset names and/or paths to TOML
/// files with `[[fault]]` tables.
pub fn resolve(spec: &str) -> Result<SimulationSpec, RunnerError> {
    let mut faults = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (origin, text) = if let Some((_, text)) = embedded::SIMULATION_PRESETS
            .iter()
            .find(|(file, _)| file.trim_end_matches(".toml") == part)
        {
            (format!("preset {part}"), text.to_string())
        } else if part.ends_with(".toml") || Path::new(part).exists() {
            let text = std::fs::read_to_string(part).map_err(|e| RunnerError::Simulation {
                spec: part.to_string(),
                reason: format!("cannot read the file: {e}"),
            })?;
            (part.to_string(), text)
        } else {
            let names: Vec<String> = presets().into_iter().map(|p| p.name).collect();
            return Err(RunnerError::Simulation {
                spec: part.to_string(),
                reason: format!("neither a preset nor a file; presets: {}", names.join(", ")),
            });
        };
        faults.extend(parse_faults(&origin, &text)?);
    }
    if faults.is_empty() {
        return Err(RunnerError::Simulation {
            spec: spec.to_string(),
            reason: "no faults given".into(),
        });
    }
    Ok(SimulationSpec {
        source: spec.to_string(),
        faults,
    })
}

/// Parses and validates the text of one fault file (a preset or a user's file; `origin`
/// names it in errors): at least one `[[fault]]`, each with a known op and effect, a
/// fraction in (0, 1] and `NAME=VALUE` settings.
///
/// Public so that the `simulate_spec` fuzz target and its regression replay
/// (`crates/gpuprobe-fuzz-targets`) exercise exactly what `--simulate FILE` runs.
pub fn parse_faults(origin: &str, text: &str) -> Result<Vec<FaultSpec>, RunnerError> {
    let file: FaultFile = toml::from_str(text).map_err(|e| RunnerError::Simulation {
        spec: origin.to_string(),
        reason: e.to_string(),
    })?;
    if file.fault.is_empty() {
        return Err(RunnerError::Simulation {
            spec: origin.to_string(),
            reason: "it defines no [[fault]]".into(),
        });
    }
    for fault in &file.fault {
        validate(fault).map_err(|reason| RunnerError::Simulation {
            spec: origin.to_string(),
            reason,
        })?;
    }
    Ok(file.fault)
}

fn validate(fault: &FaultSpec) -> Result<(), String> {
    let name = &fault.name;
    if !known_ops().contains(&fault.op) {
        return Err(format!(
            "fault {name:?}: unknown op {:?} (known: {})",
            fault.op,
            known_ops().join(", ")
        ));
    }
    if !known_effects().contains(&fault.effect.kind) {
        return Err(format!(
            "fault {name:?}: unknown effect {:?} (known: {})",
            fault.effect.kind,
            known_effects().join(", ")
        ));
    }
    if let Some(fraction) = fault.effect.fraction
        && !(fraction > 0.0 && fraction <= 1.0)
    {
        return Err(format!(
            "fault {name:?}: fraction must be in (0, 1], got {fraction}"
        ));
    }
    for setting in fault
        .cured_by
        .iter()
        .chain(&fault.cured_by_all)
        .chain(&fault.only_when_set)
    {
        // An environment variable, or a framework switch the worker judges live.
        let valid = setting.split_once('=').is_some_and(|(k, _)| {
            (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                || gpuprobe_model::is_switch_name(k)
        });
        if !valid {
            return Err(format!(
                "fault {name:?}: setting {setting:?} is not NAME=VALUE"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_vocabulary_is_the_workers_file() {
        // The file the worker's fault engine reads, as embedded: every name once.
        for names in [known_ops(), known_effects()] {
            let unique: std::collections::BTreeSet<&String> = names.iter().collect();
            assert_eq!(unique.len(), names.len(), "{names:?}");
        }
        assert!(known_ops().iter().any(|op| op == "h2d"));
        assert!(known_ops().iter().any(|op| op == "any"));
        assert!(known_effects().iter().any(|effect| effect == "zeros"));
    }

    #[test]
    fn every_preset_resolves() {
        let all = presets();
        assert!(
            all.len() >= 5,
            "expected the field-note presets, got {all:?}"
        );
        for preset in all {
            let spec = resolve(&preset.name).unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            assert!(!spec.faults.is_empty());
            assert!(
                !preset.description.is_empty(),
                "{} has no description",
                preset.name
            );
        }
    }

    #[test]
    fn custom_file_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("f.toml");
        std::fs::write(
            &good,
            "[[fault]]\nname = \"x\"\nop = \"h2d\"\neffect = { kind = \"nan\" }\ncured_by = [\"A=1\"]\n",
        )
        .unwrap();
        let spec = resolve(good.to_str().unwrap()).unwrap();
        assert_eq!(spec.faults[0].effect.kind, "nan");

        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "[[fault]]\nname = \"x\"\nop = \"teleport\"\neffect = { kind = \"nan\" }\n",
        )
        .unwrap();
        assert!(
            resolve(bad.to_str().unwrap())
                .unwrap_err()
                .to_string()
                .contains("unknown op")
        );

        let typo = dir.path().join("typo.toml");
        std::fs::write(
            &typo,
            "[[fault]]\nname = \"x\"\nop = \"h2d\"\neffect = { kind = \"nan\" }\ncured = []\n",
        )
        .unwrap();
        assert!(resolve(typo.to_str().unwrap()).is_err());

        assert!(
            resolve("no-such-preset")
                .unwrap_err()
                .to_string()
                .contains("presets:")
        );
    }
}
