//! Replays a measured run against the lane planner: which lanes a tier's probes would be
//! cut into on a given host, and how long each lane would take with the probes' measured
//! seconds. A bench tool (`bench/lane-replay.sh`), not part of the product: it answers
//! "what would this change to the estimates or the cutting rules do to the wall time"
//! without a GPU, from a report made on one.
//!
//! ```text
//! cargo run --release -p gpuprobe --example lane_replay -- \
//!     [--oracle] CATALOG.json REPORT.json [TIER] [CORES] [FREE_GIB] [HELLO_S]
//! ```
//! `--oracle`: every probe estimated by its own measured seconds (what the cutting rules
//! would do with perfect estimates).
//! `CATALOG.json`: the Python worker's probe specs (a JSON list, `bench/lane-replay.sh`
//! writes it); the native catalog is this build's. `REPORT.json`: a finished run's report,
//! whose `elapsed_s` per probe are the measured seconds (a probe it lacks counts its
//! estimate). `HELLO_S`: when a Python lane's first probe begins (its framework import).

use std::collections::HashMap;

use gpuprobe_doctor::{Lane, LaneBudget, estimated_seconds, select, sized_lanes};
use gpuprobe_model::ProbeResult;
use gpuprobe_model::{Backend, DeviceRef, Placement, ProbeSpec, Tier};
use gpuprobe_runner::Task;

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let oracle = args.iter().any(|a| a == "--oracle");
    args.retain(|a| a != "--oracle");
    let [catalog_path, report_path, rest @ ..] = args.as_slice() else {
        anyhow::bail!(
            "usage: lane_replay CATALOG.json REPORT.json [TIER] [CORES] [FREE_GIB] [HELLO_S]"
        );
    };
    // The tier as the report and the command line name it (its serde form).
    let tier_name = rest.first().map_or("standard", String::as_str);
    let tier: Tier = serde_json::from_value(serde_json::Value::from(tier_name))
        .map_err(|_| anyhow::anyhow!("tier {tier_name:?}: quick, standard, full or soak"))?;
    let number = |i: usize, default: f64| -> anyhow::Result<f64> {
        rest.get(i).map_or(Ok(default), |s| Ok(s.parse()?))
    };
    let cores = number(1, 16.0)? as usize;
    let free_gib = number(2, 139.0)?;
    let hello_s = number(3, 2.5)?;

    let mut catalog: Vec<ProbeSpec> =
        serde_json::from_str(&std::fs::read_to_string(catalog_path)?)?;
    catalog.extend(gpuprobe_gpu::native_catalog());
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report_path)?)?;
    let results: Vec<ProbeResult> = serde_json::from_value(report["results"].clone())?;
    let measured: HashMap<String, f64> = results
        .iter()
        .filter_map(|r| Some((r.probe.0.clone(), r.elapsed_s?)))
        .collect();

    if oracle {
        // Estimates as good as they can be: each probe's own measured seconds.
        for spec in &mut catalog {
            if let Some(&seconds) = measured.get(spec.id.as_str()) {
                spec.typical_s = Some(seconds);
            }
        }
    }
    let device = DeviceRef::Gpu(0);
    let tasks: Vec<Task> = select(&catalog, tier, &[])
        .into_iter()
        .map(|spec| Task { spec, device })
        .collect();
    let budget = LaneBudget::for_host(cores, Some((free_gib * (1u64 << 30) as f64) as u64), false);
    let lanes = sized_lanes(tasks, budget);

    let seconds = |lane: &Lane, f: &dyn Fn(&ProbeSpec) -> f64| -> f64 {
        lane.tasks.iter().map(|t| f(&t.spec)).sum()
    };
    let mut missing = 0usize;
    let mut measured_or_estimate = |spec: &ProbeSpec| -> f64 {
        match measured.get(spec.id.as_str()) {
            Some(&s) => s,
            None => {
                missing += 1;
                estimated_seconds(spec, false)
            }
        }
    };
    println!(
        "{} probes, {} lanes (budget {} side by side on {cores} cores, {free_gib} GiB free)",
        lanes.iter().map(|l| l.tasks.len()).sum::<usize>(),
        lanes.len(),
        budget.lanes
    );
    println!(
        "{:<8} {:<10} {:>6} {:>9} {:>9} {:>7}  first probe (its families or named lanes)",
        "backend", "placement", "probes", "estimate", "measured", "ends"
    );
    let actuals: Vec<f64> = lanes
        .iter()
        .map(|lane| {
            lane.tasks
                .iter()
                .map(|t| measured_or_estimate(&t.spec))
                .sum()
        })
        .collect();
    // First lanes run alone while the other workers start: those wait for them.
    let opening: f64 = 0.6
        + lanes
            .iter()
            .zip(&actuals)
            .filter(|(lane, _)| lane.placement == Placement::First)
            .map(|(_, actual)| actual)
            .sum::<f64>();
    let mut side_end: f64 = 0.0;
    let mut exclusive = 0.0;
    let mut rows: Vec<(f64, String)> = Vec::new();
    for (lane, &actual) in lanes.iter().zip(&actuals) {
        let estimate = seconds(lane, &|s| estimated_seconds(s, false));
        let start = if lane.placement == Placement::First {
            0.6
        } else if lane.backend == Backend::Native {
            opening
        } else {
            hello_s.max(opening)
        };
        let ends = start + actual;
        if lane.placement == Placement::Exclusive {
            exclusive += actual;
        } else {
            side_end = side_end.max(ends);
        }
        let mut families: Vec<&str> = Vec::new();
        for task in &lane.tasks {
            let family = task.spec.lane.as_deref().unwrap_or(task.spec.id.family());
            if !families.contains(&family) {
                families.push(family);
            }
        }
        rows.push((
            ends,
            format!(
                "{:<8} {:<10} {:>6} {:>9.2} {:>9.2} {:>7.2}  {} ({})",
                lane.backend.name(),
                lane.placement.name(),
                lane.tasks.len(),
                estimate,
                actual,
                ends,
                lane.tasks[0].spec.id,
                families.join(", ")
            ),
        ));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, row) in rows {
        println!("{row}");
    }
    println!(
        "side-by-side lanes end at {side_end:.2} s, the exclusive lanes add {exclusive:.2} s: {:.2} s \
         ({missing} probe(s) not in the report counted at their estimate)",
        side_end + exclusive
    );
    Ok(())
}
