//! The kernel log watched during a run: lines the kernel prints while a probe runs are
//! recorded with that probe's result (and not with the next one's), they become events of
//! the fingerprint, and a knowledge-base log signature meets them. An unreadable log is
//! reported once.

use std::path::{Path, PathBuf};

use gpuprobe_doctor::Execution;
use gpuprobe_kb::{KnowledgeBase, MatchStatus};
use gpuprobe_model::Fingerprint;
use gpuprobe_model::Settings;
use gpuprobe_model::{Backend, Placement};
use gpuprobe_runner::KernelLogSource;

use crate::support::{config, execute_with, scripted_worker, task_on};

/// `/dev/kmsg` records of a page fault whose faulting client is the command processor.
const FAULT_RECORDS: &str = "3,901,5071443221,-;amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32770)\n\
3,902,5071443300,-;amdgpu 0000:c2:00.0: amdgpu:  in process python3 pid 4242 thread python3 pid 4242)\n\
3,903,5071443400,-;amdgpu 0000:c2:00.0: amdgpu:\\x09 Faulty UTCL2 client ID: CPF (0x4)\n";

/// A worker that runs each probe for 0.4 s; halfway through `t.fault` it appends the fault
/// records to the fake kernel log, the way the kernel prints them while the probe runs.
/// (The log is read when each result arrives, so a line printed in the instant between one
/// probe's result and the next one's work would go with the earlier probe.)
fn faulting_worker(dir: &Path, kernel_log: &Path) -> PathBuf {
    scripted_worker(
        dir,
        &format!(
            r#"emit({{"event": "hello", "protocol": 1, "pid": os.getpid(), "worker": "native"}})
for probe in plan["probes"]:
    emit({{"event": "begin", "probe": probe, "device": plan["device"]}})
    time.sleep(0.2)
    if probe == "t.fault":
        with open({kernel_log:?}, "a") as log: log.write({records:?})
    time.sleep(0.2)
    emit({{"event": "result", "probe": probe, "device": plan["device"], "outcome": "observed",
          "observation": {{"probe": probe, "device": plan["device"], "measurement": {{"kind": "metrics"}}}}}})
emit({{"event": "done"}})
"#,
            kernel_log = kernel_log.display().to_string(),
            records = FAULT_RECORDS,
        ),
    )
}

fn execute(dir: &Path, worker: &Path, kernel_log: KernelLogSource) -> Execution {
    let mut config = config(dir, worker, Settings::default());
    config.kernel_log = kernel_log;
    let tasks = ["t.before", "t.fault", "t.after"]
        .map(|id| task_on(id, Placement::Shared, Backend::Native))
        .to_vec();
    execute_with(dir, &config, tasks)
}

/// An entry confirmed only by a command-processor page fault in the kernel log.
const ENTRY: &str = r#"
id = "RKB-901"
title = "Command processor page faults"
kind = "crash"
severity = "error"
layer = "system"
status = "open"
summary = "A page fault whose faulting client is CPF."
citations = ["https://example.org/issue/1"]

[conditions]
os = ["linux"]

[[logs]]
kind = "page_fault"
client = "CPF"
"#;

#[test]
fn kernel_lines_printed_during_a_probe_land_in_its_result_and_confirm_a_kb_signature() {
    let dir = tempfile::tempdir().unwrap();
    let kernel_log = dir.path().join("kmsg");
    // Lines from before the run belong to no probe.
    std::fs::write(
        &kernel_log,
        "3,900,100,-;amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24)\n",
    )
    .unwrap();
    let worker = faulting_worker(dir.path(), &kernel_log);
    let execution = execute(
        dir.path(),
        &worker,
        KernelLogSource::File(kernel_log.clone()),
    );
    assert_eq!(execution.results.len(), 3, "{:?}", execution.logs);
    assert_eq!(execution.kernel_log_unreadable, None);
    let lines = |probe: &str| {
        execution
            .results
            .iter()
            .find(|r| r.probe.as_str() == probe)
            .unwrap()
            .kernel_log
            .clone()
    };
    assert!(lines("t.before").is_empty(), "{:?}", lines("t.before"));
    assert!(lines("t.after").is_empty(), "{:?}", lines("t.after"));
    let during = lines("t.fault");
    assert_eq!(during.len(), 3, "{during:?}");
    assert!(during[0].starts_with("[ 5071.443221] amdgpu"), "{during:?}");
    assert!(during[2].contains("CPF"), "{during:?}");

    // As the session does: the lines become events of the machine, which the entry's log
    // signature (kind and faulting client) confirms.
    let loaded = KnowledgeBase::from_sources([("RKB-901-cpf.toml", ENTRY)]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let mut fingerprint = Fingerprint::default();
    fingerprint.host.os = Some("linux".into());
    let unmatched = gpuprobe_kb::match_all(&loaded.kb, &fingerprint, &execution.results);
    assert!(
        unmatched.iter().all(|m| m.status != MatchStatus::Confirmed),
        "{unmatched:?}"
    );
    gpuprobe_detect::merge_watched_kernel_lines(
        &mut fingerprint,
        execution
            .results
            .iter()
            .flat_map(|r| r.kernel_log.iter().map(String::as_str)),
    );
    let matches = gpuprobe_kb::match_all(&loaded.kb, &fingerprint, &execution.results);
    let confirmed = matches
        .iter()
        .find(|m| m.entry.id == "RKB-901")
        .expect("the entry matches");
    assert_eq!(confirmed.status, MatchStatus::Confirmed, "{confirmed:?}");
    assert!(
        confirmed
            .logs
            .iter()
            .any(|l| l.contains("Faulty UTCL2") || l.contains("page fault")),
        "{:?}",
        confirmed.logs
    );
}

#[test]
fn an_unreadable_kernel_log_is_reported_once_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-log");
    let worker = faulting_worker(dir.path(), &dir.path().join("written-but-not-watched"));
    let execution = execute(dir.path(), &worker, KernelLogSource::File(missing));
    assert_eq!(execution.results.len(), 3, "{:?}", execution.logs);
    let reason = execution.kernel_log_unreadable.expect("the reason is kept");
    assert!(reason.contains("cannot read"), "{reason}");
    assert!(execution.results.iter().all(|r| r.kernel_log.is_empty()));
}
