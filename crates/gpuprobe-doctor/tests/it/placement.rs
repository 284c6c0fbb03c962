//! Lanes by placement: shared and side lanes of a device overlap, an exclusive lane runs
//! alone on its device after every other lane there has finished.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use gpuprobe_doctor::engine::{self, EngineConfig, Settings};
use gpuprobe_model::probe::{Backend, DeviceRef, Layer, Placement, ProbeId, ProbeSpec, Rule, Tier};
use gpuprobe_runner::{RunDir, SupervisorConfig, Task};

/// A native "worker" that speaks the protocol: each probe sleeps 0.4 s and logs its start
/// and end times to `log`.
fn scripted_worker(dir: &Path, log: &Path) -> std::path::PathBuf {
    let script = dir.join("worker.py");
    std::fs::write(
        &script,
        format!(
            r#"#!/usr/bin/env python3
import json, os, sys, time
plan = json.load(open(sys.argv[sys.argv.index("--plan") + 1]))
out = os.fdopen(3, "w", buffering=1)
def emit(event): out.write(json.dumps(event) + "\n")
emit({{"event": "hello", "protocol": 1, "pid": os.getpid(), "worker": "native"}})
for probe in plan["probes"]:
    emit({{"event": "begin", "probe": probe, "device": plan["device"]}})
    start = time.time(); time.sleep(0.4); end = time.time()
    with open({log:?}, "a") as f: f.write(f"{{probe}} {{start}} {{end}}\n")
    emit({{"event": "result", "probe": probe, "device": plan["device"], "outcome": "observed",
          "observation": {{"probe": probe, "device": plan["device"], "measurement": {{"kind": "metrics"}}}}}})
emit({{"event": "done"}})
"#,
            log = log.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn task(id: &str, placement: Placement) -> Task {
    Task {
        spec: ProbeSpec {
            id: ProbeId::new(id),
            tier: Tier::Quick,
            layer: Layer::Runtime,
            rule: Rule::Measure,
            backend: Backend::Native,
            timeout_s: 30.0,
            description: String::new(),
            needs: vec![],
            isolated: false,
            placement,
        },
        device: DeviceRef::Gpu(0),
    }
}

#[test]
fn exclusive_probes_wait_for_the_device_and_side_lanes_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("times.log");
    let worker = scripted_worker(dir.path(), &log);
    let run_dir = RunDir::create(&dir.path().join("run")).unwrap();
    let config = EngineConfig {
        python: None,
        package_dir: None,
        native_program: Some(worker),
        seed: 1,
        simulate: None,
        settings: Settings::default(),
        supervisor: SupervisorConfig {
            startup_timeout: Duration::from_secs(30),
            between_probes_timeout: Duration::from_secs(30),
            timeout_scale: 1.0,
            log_dir: Some(dir.path().join("logs")),
        },
        options: BTreeMap::new(),
    };
    let tasks = vec![
        task("t.fill", Placement::Exclusive),
        task("t.main.a", Placement::Shared),
        task("t.main.b", Placement::Shared),
        task("t.side.a", Placement::Side),
        task("t.side.b", Placement::Side),
        task("u.side.c", Placement::Side),
    ];
    let lanes = engine::lanes_for(tasks);
    assert_eq!(
        lanes.len(),
        4,
        "one lane per placement, and per family for side probes"
    );
    let execution = engine::execute(
        lanes,
        &config,
        &run_dir,
        &mut |_, _, _| Vec::new(),
        &mut |_| {},
    );
    assert_eq!(execution.results.len(), 6, "{:?}", execution.logs);

    let times: BTreeMap<String, (f64, f64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            (
                parts[0].to_string(),
                (parts[1].parse().unwrap(), parts[2].parse().unwrap()),
            )
        })
        .collect();
    let fill = times["t.fill"];
    for (probe, (_, end)) in times.iter().filter(|(p, _)| p.as_str() != "t.fill") {
        assert!(
            *end <= fill.0,
            "{probe} ended at {end} after the exclusive probe began at {}",
            fill.0
        );
    }
    // The side lane ran beside the main lane: their first probes overlap in time.
    let (main_start, main_end) = times["t.main.a"];
    let (side_start, side_end) = times["t.side.a"];
    assert!(
        side_start < main_end && main_start < side_end,
        "main {main_start}-{main_end}, side {side_start}-{side_end}"
    );
}
