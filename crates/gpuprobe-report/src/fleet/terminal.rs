//! The terminal text of `gpuprobe fleet`: stack groups, nodes, probes failing where, the
//! differential's flags and the reports that could not be read. Node names, paths and
//! facts come from reports, so each goes out through [`visible_line`].

use std::fmt::Write as _;

use gpuprobe_model::visible_line;

use super::{FlaggedNode, FleetView, MIN_PEERS, NodeView};

/// Nodes listed one by one when all are well; above this, only those that need attention.
const LIST_ALL_UP_TO: usize = 50;
/// Node names shown on one line of the probe × nodes summary.
const NAMES_PER_PROBE: usize = 8;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Renders the view for a terminal (plain text; the caller's guard handles the rest).
pub fn render(view: &FleetView) -> String {
    let mut out = String::new();
    let _ = write_all(&mut out, view);
    out
}

fn write_all(out: &mut String, view: &FleetView) -> std::fmt::Result {
    let sim = if view.simulated_nodes > 0 {
        format!(
            " · SIMULATED: {} made under fault simulation",
            plural(view.simulated_nodes, "node's report", "nodes' reports")
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "gpuprobe fleet: {} from {} · {}{sim}",
        plural(view.nodes.len(), "node", "nodes"),
        plural(view.reports_read, "report", "reports"),
        plural(view.groups.len(), "stack group", "stack groups"),
    )?;
    if view.older_reports > 0 {
        writeln!(
            out,
            "{} of nodes already seen left out: the newest report of each node counts",
            plural(view.older_reports, "older report", "older reports")
        )?;
    }
    write_groups(out, view)?;
    write_nodes(out, view)?;
    write_failing(out, view)?;
    write_flags(out, view)?;
    if !view.unreadable.is_empty() {
        writeln!(out, "\nUnreadable reports (left out of the merge)")?;
        for u in &view.unreadable {
            writeln!(
                out,
                "  {}: {}",
                visible_line(&u.source),
                visible_line(&u.reason)
            )?;
        }
    }
    let mut why = Vec::new();
    if !view.flagged.is_empty() {
        why.push(format!(
            "{} flagged",
            plural(view.flagged.len(), "node", "nodes")
        ));
    }
    let failing = view.nodes.iter().filter(|n| n.exit_code != 0).count();
    if failing > 0 {
        why.push(format!(
            "{} did not pass",
            plural(failing, "node's check", "nodes' checks")
        ));
    }
    if !view.unreadable.is_empty() {
        why.push(format!(
            "{} unreadable",
            plural(view.unreadable.len(), "report", "reports")
        ));
    }
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(": {}", why.join(", "))
    };
    writeln!(
        out,
        "\nexit {} ({}){why}",
        view.exit_code,
        view.exit_status.describe()
    )
}

fn write_groups(out: &mut String, view: &FleetView) -> std::fmt::Result {
    if view.groups.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nStack groups (nodes compared bit for bit only within a group)"
    )?;
    for g in &view.groups {
        writeln!(
            out,
            "  group {}: {} — {}",
            g.group,
            visible_line(&g.label),
            plural(g.nodes.len(), "node", "nodes")
        )?;
        if !g.differs_from_largest.is_empty() {
            writeln!(
                out,
                "    differs from group 1 in: {}",
                g.differs_from_largest.join(", ")
            )?;
        }
        let names: Vec<String> = g
            .nodes
            .iter()
            .take(NAMES_PER_PROBE * 2)
            .map(|n| visible_line(n).into_owned())
            .collect();
        let more = g.nodes.len().saturating_sub(names.len());
        let more = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        writeln!(out, "    nodes: {}{more}", names.join(", "))?;
        if g.nodes.len() < MIN_PEERS {
            writeln!(
                out,
                "    differential: not enough peers ({}; {MIN_PEERS} needed)",
                plural(g.nodes.len(), "node", "nodes")
            )?;
        } else {
            let mut undecided = Vec::new();
            if g.not_enough_peers > 0 {
                undecided.push(format!(
                    "{} carried by fewer than {MIN_PEERS} nodes: not enough peers",
                    plural(g.not_enough_peers, "output", "outputs")
                ));
            }
            if g.no_majority > 0 {
                undecided.push(format!(
                    "{} without a strict majority: not enough peers agree",
                    plural(g.no_majority, "output", "outputs")
                ));
            }
            let undecided = if undecided.is_empty() {
                String::new()
            } else {
                format!("; {}", undecided.join("; "))
            };
            writeln!(
                out,
                "    differential: {} compared{undecided}",
                plural(g.compared, "probe output", "probe outputs")
            )?;
        }
    }
    Ok(())
}

fn attention(node: &NodeView) -> bool {
    node.flagged || node.exit_code != 0 || node.simulated || node.older_reports > 0
}

fn write_nodes(out: &mut String, view: &FleetView) -> std::fmt::Result {
    if view.nodes.is_empty() {
        return Ok(());
    }
    let all = view.nodes.len() <= LIST_ALL_UP_TO;
    let shown: Vec<&NodeView> = view.nodes.iter().filter(|n| all || attention(n)).collect();
    writeln!(out, "\nNodes")?;
    let width = shown
        .iter()
        .map(|n| visible_line(&n.name).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    if !shown.is_empty() {
        writeln!(
            out,
            "  {:width$}  group  tier      exit  passed  problems  digests",
            "node"
        )?;
    }
    for n in &shown {
        let mut marks = Vec::new();
        if n.flagged {
            marks.push("FLAGGED".to_string());
        }
        if n.simulated {
            marks.push("SIMULATED".to_string());
        }
        if n.older_reports > 0 {
            marks.push(format!("newest of {} reports", n.older_reports + 1));
        }
        let line = format!(
            "  {:width$}  {:<5}  {:<8}  {:<4}  {:<6}  {:<8}  {:<7}  {}",
            visible_line(&n.name),
            n.group,
            n.tier.name(),
            n.exit_code,
            n.summary.passed,
            n.problems_total,
            n.digests,
            marks.join(" ")
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    let hidden = view.nodes.len() - shown.len();
    if hidden > 0 {
        writeln!(
            out,
            "  ({} not listed: exit 0, not flagged; --json or --html lists every node)",
            plural(hidden, "node", "nodes")
        )?;
    }
    Ok(())
}

fn write_failing(out: &mut String, view: &FleetView) -> std::fmt::Result {
    if view.failing.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nProbes failing where")?;
    for p in &view.failing {
        let names: Vec<String> = p
            .nodes
            .iter()
            .take(NAMES_PER_PROBE)
            .map(|n| format!("{} ({})", visible_line(&n.node), n.verdict))
            .collect();
        let more = p.nodes.len().saturating_sub(names.len());
        let more = if more > 0 {
            format!(", +{more} more")
        } else {
            String::new()
        };
        writeln!(
            out,
            "  {} on {}: {} of {}: {}{more}",
            visible_line(&p.probe),
            visible_line(&p.device),
            plural(p.nodes.len(), "node", "nodes"),
            view.nodes.len(),
            names.join(", ")
        )?;
    }
    Ok(())
}

/// The headline of a flagged node: "node X: N probes' outputs differ from the M of K
/// identical-stack peers that agree".
pub(super) fn flag_line(flag: &FlaggedNode) -> String {
    let n = flag.probes.len();
    let agree = flag.probes.iter().map(|p| p.agree);
    let peers = flag.probes.iter().map(|p| p.peers);
    let (lo_m, hi_m) = (agree.clone().min().unwrap_or(0), agree.max().unwrap_or(0));
    let (lo_k, hi_k) = (peers.clone().min().unwrap_or(0), peers.max().unwrap_or(0));
    let counts = if lo_m == hi_m && lo_k == hi_k {
        format!("the {lo_m} of {lo_k}")
    } else {
        format!("the majority ({lo_m} to {hi_m} of {lo_k} to {hi_k}) of the")
    };
    let sim = if flag.simulated { " SIMULATED" } else { "" };
    format!(
        "node {}{sim}: {} outputs differ from {counts} identical-stack peers that agree",
        visible_line(&flag.node),
        plural(n, "probe's", "probes'"),
    )
}

fn write_flags(out: &mut String, view: &FleetView) -> std::fmt::Result {
    writeln!(out, "\nCross-node differential")?;
    if view.flagged.is_empty() {
        let compared: usize = view.groups.iter().map(|g| g.compared).sum();
        if compared == 0 {
            writeln!(
                out,
                "  nothing compared: no group has {MIN_PEERS} or more nodes carrying the same output digests"
            )?;
        } else {
            writeln!(
                out,
                "  no node flagged: every node's outputs match the majority of its identical-stack peers"
            )?;
        }
        return Ok(());
    }
    for flag in &view.flagged {
        writeln!(out, "  {} (group {})", flag_line(flag), flag.group)?;
        for p in &flag.probes {
            writeln!(
                out,
                "    {} on {}: {} where {} of {} peers have {}",
                visible_line(&p.probe),
                visible_line(&p.device),
                p.digest,
                p.agree,
                p.peers,
                p.majority_digest
            )?;
        }
    }
    Ok(())
}
