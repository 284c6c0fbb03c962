//! The options that chose a run's stack, read from its plan, and carried into every command
//! its findings suggest ([`gpuprobe_model::StackOptions`] writes them), so that a suggested
//! command copied as printed tests the same interpreter, devices, tier and simulation.

use std::path::Path;

use gpuprobe_model::Finding;
use gpuprobe_model::StackOptions;
use gpuprobe_model::Tier;

use gpuprobe_model::RunPlan;

/// How the plan records an interpreter named with `--python`. One found otherwise
/// (`GPUPROBE_PYTHON`, `VIRTUAL_ENV`, `CONDA_PREFIX`, `PATH`) is found again by a command
/// run in the same shell, so it is not written out.
const CHOSEN_BY_OPTION: &str = "--python";

/// A path made absolute against the working directory (not resolved through links: a
/// venv's `bin/python` must stay the venv's).
fn absolute(path: &str) -> String {
    std::path::absolute(path)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string())
}

/// `--simulate`'s text with each fault file made absolute; preset names stay as they are.
fn simulate_text(source: &str) -> String {
    let presets = gpuprobe_runner::simulation_presets();
    source
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            let is_preset = presets.iter().any(|p| p.name == part);
            let is_file = part.ends_with(".toml") || Path::new(part).exists();
            if !is_preset && is_file {
                absolute(part)
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The options of `plan` that a suggested command must repeat.
pub(crate) fn stack_options(plan: &RunPlan) -> StackOptions {
    StackOptions {
        python: plan
            .python
            .as_deref()
            .filter(|_| plan.python_chosen_by.as_deref() == Some(CHOSEN_BY_OPTION))
            .map(absolute),
        device: plan.devices.as_ref().map(|devices| {
            devices
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
        simulate: plan.simulate.as_ref().map(|s| simulate_text(&s.source)),
        tier: (plan.tier != Tier::Quick).then(|| plan.tier.name().to_string()),
    }
}

/// Puts `options` into every gpuprobe command the findings suggest.
pub(crate) fn carry_into(findings: &mut [Finding], options: &StackOptions) {
    if options.is_empty() {
        return;
    }
    for finding in findings {
        for step in &mut finding.next_steps {
            *step = options.carry(step);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::DeviceRef;
    use gpuprobe_model::SimulationSpec;

    fn plan() -> RunPlan {
        serde_json::from_value(serde_json::json!({
            "tool_version": "0",
            "command": "check",
            "tier": "quick",
            "seed": 1,
            "tasks": [],
            "started_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_default_run_carries_nothing() {
        assert!(stack_options(&plan()).is_empty());
        let mut found = plan();
        found.python = Some("/usr/bin/python3".into());
        found.python_chosen_by = Some("PATH".into());
        assert!(stack_options(&found).is_empty());
    }

    #[test]
    fn the_options_that_chose_the_stack_are_read_from_the_plan() {
        let mut plan = plan();
        plan.python = Some("venv/bin/python".into());
        plan.python_chosen_by = Some("--python".into());
        plan.devices = Some(vec![DeviceRef::Cpu, DeviceRef::Gpu(1)]);
        plan.tier = Tier::Full;
        plan.simulate = Some(SimulationSpec {
            source: "h2d-zeros,my faults.toml".into(),
            faults: Vec::new(),
        });
        let options = stack_options(&plan);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            options.python.as_deref(),
            Some(cwd.join("venv/bin/python").to_str().unwrap())
        );
        assert_eq!(options.device.as_deref(), Some("cpu,1"));
        assert_eq!(options.tier.as_deref(), Some("full"));
        assert_eq!(
            options.simulate,
            Some(format!(
                "h2d-zeros,{}",
                cwd.join("my faults.toml").display()
            ))
        );
    }
}
