//! Tests on a real GPU (CUDA or HIP), behind the `gpu-tests` feature:
//! `cargo test -p gpuprobe-gpu --features gpu-tests --test gpu`. They run the native worker
//! against the machine's own runtime and require zero false alarms.
#![cfg(feature = "gpu-tests")]

use std::collections::BTreeMap;

use gpuprobe_gpu::{memtest_report_from, run_worker};
use gpuprobe_model::{DeviceRef, Measurement, ProbeId};
use gpuprobe_model::{Outcome, PROTOCOL_VERSION, WorkerEvent, WorkerMode, WorkerPlan};
use serde_json::json;

fn run(probes: &[&str], options: serde_json::Value) -> Vec<(String, Outcome)> {
    let plan = WorkerPlan {
        protocol: PROTOCOL_VERSION,
        mode: WorkerMode::Run,
        device: Some(DeviceRef::Gpu(0)),
        probes: probes.iter().map(|p| ProbeId::new(*p)).collect(),
        seed: 11,
        simulate: None,
        options: serde_json::from_value::<BTreeMap<_, _>>(options).unwrap(),
        wait_for_start: false,
        thread_budget: None,
    };
    let mut out = Vec::new();
    run_worker(&plan, &mut |event| {
        if let WorkerEvent::Hello {
            unusable: Some(reason),
            ..
        } = event
        {
            panic!("no usable GPU runtime: {reason}");
        }
        if let WorkerEvent::Result { probe, outcome, .. } = event {
            out.push((probe.to_string(), outcome.clone()));
        }
    });
    out
}

#[test]
fn quick_probes_report_no_false_alarm() {
    let probes = [
        "native.kernel.launch",
        "native.copy.roundtrip.pageable",
        "native.copy.roundtrip.pinned",
        "native.copy.d2d",
        "native.memtest.quick",
    ];
    for (probe, outcome) in run(&probes, json!({})) {
        let Outcome::Observed { observation } = outcome else {
            panic!("{probe}: {outcome:?}")
        };
        let Measurement::Compare(stats) = observation.measurement else {
            panic!("{probe}")
        };
        assert_eq!(stats.mismatches, 0, "{probe}: {stats:?}");
    }
}

#[test]
fn injected_flip_is_found_on_the_device() {
    let results = run(
        &["native.memtest.full"],
        json!({"fraction": 0.1, "max_bytes": 4294967296u64, "patterns": ["random", "own_address"],
               "inject_error": {"offset": 123456, "bit": 3}}),
    );
    let Outcome::Observed { observation } = &results[0].1 else {
        panic!("{results:?}")
    };
    let report = memtest_report_from(observation).unwrap().unwrap();
    assert!(
        report.injected.unwrap().found_exactly,
        "{:?}",
        report.errors
    );
}
