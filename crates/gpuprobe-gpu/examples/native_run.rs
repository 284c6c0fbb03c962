//! Runs the native worker in-process on a plan and prints its events as JSON lines on
//! stdout (the same lines `gpuprobe __native-worker` writes on descriptor 3), followed by the
//! rendered memtest report of every result that carries one. Used for the measurements in
//! `bench/native/`.
//!
//! Usage: `native_run PLAN.json` or `native_run --mode env|catalog|run [--probe ID]...
//! [--option KEY=JSON]... [--seed N]`.

use std::collections::BTreeMap;

use gpuprobe_gpu::{memtest_report_from, render_memtest, run_worker, write_event};
use gpuprobe_model::{DeviceRef, ProbeId};
use gpuprobe_model::{Outcome, PROTOCOL_VERSION, WorkerEvent, WorkerMode, WorkerPlan};

fn parse_args() -> Result<WorkerPlan, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [path] = args.as_slice()
        && !path.starts_with("--")
    {
        return Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?);
    }
    let mut plan = WorkerPlan {
        protocol: PROTOCOL_VERSION,
        mode: WorkerMode::Run,
        device: Some(DeviceRef::Gpu(0)),
        probes: Vec::new(),
        seed: 20261122,
        simulate: None,
        options: BTreeMap::new(),
        wait_for_start: false,
        thread_budget: None,
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let value = it.next().ok_or(format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--mode" => {
                plan.mode = serde_json::from_value(serde_json::Value::String(value))?;
            }
            "--probe" => plan.probes.push(ProbeId::new(value)),
            "--seed" => plan.seed = value.parse()?,
            "--device" => plan.device = DeviceRef::parse(&value),
            "--option" => {
                let (key, json) = value.split_once('=').ok_or("--option KEY=JSON")?;
                plan.options
                    .insert(key.to_string(), serde_json::from_str(json)?);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(plan)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plan = parse_args()?;
    let mut reports = Vec::new();
    let mut stdout = std::io::stdout();
    run_worker(&plan, &mut |event| {
        let _ = write_event(&mut stdout, event);
        if let WorkerEvent::Result {
            outcome: Outcome::Observed { observation },
            ..
        } = event
            && let Some(Ok(report)) = memtest_report_from(observation)
        {
            reports.push(report);
        }
    });
    for report in &reports {
        println!("{}", render_memtest(report));
    }
    Ok(())
}
