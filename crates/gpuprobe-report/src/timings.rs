//! Where a run's time went (`check --timings`): the session's phases, then one row per
//! lane with its milestones, so a slow start (interpreter, framework, runtime), a slow lane
//! or a lane that waited for its turn can be told apart.

use std::fmt::Write as _;

use gpuprobe_model::Timings;
use gpuprobe_model::terminal_safe;

/// Renders the timings: phases on one line, then a table of lanes in launch order (seconds
/// since the run started; `-` where a milestone was not reached).
pub(crate) fn render(timings: &Timings, wall_s: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "timings: prepare {:.1} s · probes {:.1} s · waiting for the fingerprint {:.1} s · report {:.1} s · total {:.1} s",
        timings.prepare_s, timings.probes_s, timings.fingerprint_wait_s, timings.report_s, wall_s
    );
    if timings.lanes.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:<8} {:<6} {:<9} {:>6} {:>7} {:>8} {:>6} {:>6} {:>6} {:>6}  first probe",
        "lane",
        "device",
        "placement",
        "probes",
        "workers",
        "launched",
        "hello",
        "begin",
        "last",
        "done"
    );
    let at = |t: Option<f64>| t.map_or_else(|| "-".to_string(), |t| format!("{t:.1}"));
    for lane in &timings.lanes {
        let _ = writeln!(
            out,
            "  {:<8} {:<6} {:<9} {:>6} {:>7} {:>8.1} {:>6} {:>6} {:>6} {:>6.1}  {}",
            lane.backend.name(),
            lane.device.to_string(),
            lane.placement.name(),
            lane.probes,
            lane.workers,
            lane.launched_s,
            at(lane.first_hello_s),
            at(lane.first_begin_s),
            at(lane.last_result_s),
            lane.done_s,
            lane.first_probe
        );
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::LaneTiming;
    use gpuprobe_model::{Backend, DeviceRef, Placement};

    #[test]
    fn phases_and_lanes_are_listed_with_unreached_milestones_as_dashes() {
        let timings = Timings {
            prepare_s: 1.25,
            probes_s: 15.0,
            fingerprint_wait_s: 0.0,
            report_s: 0.12,
            lanes: vec![
                LaneTiming {
                    backend: Backend::Python,
                    device: DeviceRef::Gpu(0),
                    placement: Placement::Shared,
                    first_probe: "copy.h2d.pinned.tiny".into(),
                    probes: 120,
                    workers: 1,
                    launched_s: 1.25,
                    first_hello_s: Some(5.5),
                    first_begin_s: Some(5.6),
                    last_result_s: Some(15.9),
                    done_s: 16.2,
                },
                LaneTiming {
                    backend: Backend::Native,
                    device: DeviceRef::Gpu(0),
                    placement: Placement::Exclusive,
                    first_probe: "native.memtest.quick".into(),
                    probes: 1,
                    workers: 0,
                    launched_s: 1.3,
                    first_hello_s: None,
                    first_begin_s: None,
                    last_result_s: None,
                    done_s: 2.0,
                },
            ],
        };
        let text = render(&timings, 16.4);
        assert!(
            text.starts_with("timings: prepare 1.2 s · probes 15.0 s"),
            "{text}"
        );
        assert!(text.contains("total 16.4 s"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[2].contains("python") && lines[2].contains("5.5"),
            "{text}"
        );
        assert!(lines[2].ends_with("copy.h2d.pinned.tiny"), "{text}");
        assert!(
            lines[3].contains("exclusive") && lines[3].contains(" - "),
            "{text}"
        );
    }
}
