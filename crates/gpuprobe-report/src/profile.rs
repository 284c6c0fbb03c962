//! The text of `gpuprobe profile show`: the settings a profile applies, why each is there
//! (what it cures, with whom, at what cost, from which source) and what it leaves failing.

use gpuprobe_model::Profile;

/// `gpuprobe profile show`: a profile for people. Its free text (who made it, costs,
/// notes) comes from a file from anywhere: the caller prints it behind the terminal guard.
pub fn render_profile(profile: &Profile) -> String {
    let mut out = String::new();
    if profile.simulated {
        out.push_str(
            "SIMULATED profile: made under fault simulation, not proven on real hardware\n",
        );
    }
    out.push_str(&format!(
        "{}, {}\nproven on: {}\n",
        profile.created_by,
        profile.created_at,
        profile.proven_on.describe()
    ));
    if profile.env.is_empty() && profile.unset.is_empty() && profile.switches.is_empty() {
        out.push_str("settings: none (nothing tried cured the failures)\n");
    } else {
        out.push_str("settings:\n");
        for (name, value) in &profile.env {
            out.push_str(&format!("  {name}={value}\n"));
        }
        for name in &profile.unset {
            out.push_str(&format!("  unset {name}\n"));
        }
        for (name, value) in &profile.switches {
            out.push_str(&format!(
                "  {name}={value}  (framework switch, applied after `import torch`)\n"
            ));
        }
    }
    for setting in &profile.settings {
        let mut line = format!(
            "  why {}: cures {}",
            setting.setting,
            setting.cures.join(", ")
        );
        if !setting.together_with.is_empty() {
            line.push_str(&format!(
                " (together with {})",
                setting.together_with.join(", ")
            ));
        }
        if !setting.sources.is_empty() {
            line.push_str(&format!(" [{}]", setting.sources.join(", ")));
        }
        if !setting.cost.is_empty() {
            line.push_str(&format!("; cost: {}", setting.cost));
        }
        out.push_str(&line);
        out.push('\n');
    }
    for (title, list) in [
        ("cures", &profile.cures),
        ("still failing", &profile.still_failing),
        ("did not reproduce", &profile.flaky),
        (
            "needs root, a reboot or an upgrade (reported, never applied)",
            &profile.system_changes,
        ),
        (
            "code changes proven by gpuprobe (make them in your code; nothing applies them)",
            &profile.code_changes,
        ),
        (
            "other changes (reported, not tested)",
            &profile.other_changes,
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n"));
        for item in list {
            out.push_str(&format!("  {item}\n"));
        }
    }
    if let Some(cost) = &profile.measured_cost {
        out.push_str(&format!("measured cost: {cost}\n"));
    }
    if let Some(evidence) = &profile.evidence {
        out.push_str(&format!("evidence: {evidence}\n"));
    }
    out
}
