//! Assembling a session's report: the fingerprint joined and completed with what the
//! workers said, knowledge-base matches, lint and diagnosis, the exit status the results
//! earn, the timings, all written to `report.json`.

use std::thread::JoinHandle;
use std::time::Instant;

use gpuprobe_model::WorkerEvent;
use gpuprobe_model::{Backend, DeviceRef, ProbeSpec};
use gpuprobe_model::{ExitStatus, REPORT_SCHEMA_VERSION};
use gpuprobe_model::{Fingerprint, PythonEnv, TorchInfo};
use gpuprobe_model::{ProbeResult, Verdict};
use gpuprobe_model::{Report, Summary, Timings};
use gpuprobe_runner::{PythonChoice, REPORT_FILE, RunDir};

use super::options::DeviceRequest;
use super::{Completed, SessionError};
use crate::exec::{self, EngineConfig};
use gpuprobe_model::RunPlan;

/// A session whose probes are over: what the report is assembled from.
pub(crate) struct Finished<'a> {
    pub run_dir: RunDir,
    pub plan: RunPlan,
    pub config: EngineConfig,
    pub catalog: Vec<ProbeSpec>,
    pub device_request: DeviceRequest,
    pub notes: Vec<String>,
    pub python: Option<PythonChoice>,
    /// The results recorded before this session (a resumed run's).
    pub previous: Vec<ProbeResult>,
    /// What the engine ran now.
    pub execution: exec::Execution,
    /// The fingerprint being gathered since the session began.
    pub fingerprint: JoinHandle<Fingerprint>,
    pub started: Instant,
    pub probes_started: Instant,
    pub probes_ended: Instant,
    pub started_at: &'a str,
}

/// Builds the report of a finished session and writes it to `report.json`.
pub(crate) fn assemble(finished: Finished<'_>) -> Result<Completed, SessionError> {
    let Finished {
        run_dir,
        plan,
        config,
        catalog,
        device_request,
        mut notes,
        python,
        previous,
        execution,
        fingerprint,
        started,
        probes_started,
        probes_ended,
        started_at,
    } = finished;
    let mut results = previous;
    results.extend(execution.results);
    let mut fingerprint = fingerprint.join().unwrap_or_else(|_| Fingerprint {
        source: "live".into(),
        ..Default::default()
    });
    let fingerprint_joined = Instant::now();
    // A resumed run whose probes were all done before has no new hello: the torch its
    // results were made with is the one its first worker recorded.
    let recorded_torch = run_dir.read_stack().ok().and_then(|stack| stack.torch);
    if let Some(python_env) = python_env_from(
        python.as_ref(),
        &execution.hellos,
        recorded_torch.as_deref(),
    ) {
        gpuprobe_detect::merge_python(&mut fingerprint, python_env);
    }
    // Kernel lines printed during the probes are events of this machine too: parsed, they
    // meet the knowledge base's log signatures (kind, client) like those read at the start.
    gpuprobe_detect::merge_watched_kernel_lines(
        &mut fingerprint,
        results
            .iter()
            .flat_map(|r| r.kernel_log.iter().map(String::as_str)),
    );
    let knowledge = gpuprobe_kb::KnowledgeBase::load_embedded();
    let matches = gpuprobe_kb::match_all(&knowledge.kb, &fingerprint, &results);
    let kb_findings: Vec<_> = matches.iter().map(|m| m.to_finding()).collect();
    let mut findings = crate::verdict::diagnose::assemble(
        crate::verdict::diagnose::diagnose(
            &results,
            &fingerprint,
            &crate::verdict::diagnose::native_counterparts(&catalog),
        ),
        kb_findings,
        gpuprobe_kb::lint(&fingerprint),
    );
    // Copied as printed, a suggested command must test this run's stack.
    crate::verdict::suggest::carry_into(
        &mut findings,
        &crate::verdict::suggest::stack_options(&plan),
    );
    let summary = Summary::of(&results);
    let mut exit_status = exit_status_for(&results, &findings);
    let absent = absent_listed_gpus(&device_request, &execution.hellos);
    if let Some(absent) = &absent {
        // A GPU index past what the framework sees is a wrong argument, not a stack that
        // could not be tested: exit 2, with the results of the devices that do exist kept.
        notes.push(absent.to_string());
        exit_status = ExitStatus::UsageError;
    }
    let missing = absent.as_ref().map_or(&[][..], |a| a.missing.as_slice());
    if let Some(untested) = untested_listed_gpus(&device_request, &results, missing) {
        // A GPU asked for by name that got no verdict at all (a framework that sees no GPU,
        // a driver that is not there) was not tested: the other devices passing must not
        // read as "all passed".
        notes.push(untested);
        if exit_status == ExitStatus::AllPassed {
            exit_status = ExitStatus::NothingTested;
        }
    }
    let seconds = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64();
    let prepare_s = seconds(started, probes_started);
    let timings = Timings {
        prepare_s,
        probes_s: seconds(probes_started, probes_ended),
        fingerprint_wait_s: seconds(probes_ended, fingerprint_joined),
        report_s: seconds(fingerprint_joined, Instant::now()),
        // The engine measures from its own start, the moment the probes began.
        lanes: execution
            .lanes
            .into_iter()
            .map(|lane| lane.shifted(prepare_s))
            .collect(),
    };
    let report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        build: Some(gpuprobe_kb::build_info()),
        command: plan.command.clone(),
        run_dir: Some(run_dir.path().display().to_string()),
        started_at: started_at.to_string(),
        wall_s: started.elapsed().as_secs_f64(),
        tier: plan.tier,
        simulation: config.simulate.clone(),
        fingerprint,
        results,
        findings,
        summary,
        exit_status,
        exit_code: exit_status.code(),
        notes,
        timings: Some(timings),
    };
    run_dir
        .write_json(REPORT_FILE, &report)
        .map_err(SessionError::RunDir)?;
    Ok(Completed {
        report,
        run_dir,
        plan,
        config,
        catalog,
        python,
        matches,
    })
}

/// The exit status a set of results earns (docs/exit-codes.md). NOT-TESTED is never a
/// problem, but neither is it a pass: a run in which most of the probes that apply could
/// not be attempted ([`Summary::mostly_not_tested`]) has not tested the stack, and exits as
/// one that could test nothing rather than as "all passed".
pub(crate) fn exit_status_for(
    results: &[ProbeResult],
    findings: &[gpuprobe_model::Finding],
) -> ExitStatus {
    let judged = results
        .iter()
        .any(|r| r.verdict.is_judged() || r.verdict.is_problem());
    if results.iter().any(|r| r.verdict.is_problem())
        || findings
            .iter()
            .any(|f| f.severity == gpuprobe_model::Severity::Error)
    {
        ExitStatus::ProblemsFound
    } else if !judged || Summary::of(results).mostly_not_tested {
        ExitStatus::NothingTested
    } else {
        ExitStatus::AllPassed
    }
}

/// GPUs named with `--device` that the framework says are not there.
#[derive(Debug, PartialEq)]
pub(super) struct AbsentGpus {
    /// The indices asked for that do not exist.
    pub missing: Vec<u32>,
    /// How many GPUs the framework sees.
    pub seen: usize,
}

/// How the report's note on absent GPUs begins ([`AbsentGpus`]'s text).
const ABSENT_GPUS_NOTE: &str = "--device ";

/// The note on absent GPUs among a report's notes, also in a report read back from disk.
pub(crate) fn absent_gpus_note(notes: &[String]) -> Option<&str> {
    notes
        .iter()
        .map(String::as_str)
        .find(|note| note.starts_with(ABSENT_GPUS_NOTE) && note.contains(": no such GPU;"))
}

impl std::fmt::Display for AbsentGpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let missing: Vec<String> = self.missing.iter().map(u32::to_string).collect();
        let range = match self.seen {
            0 => String::new(),
            1 => " (index 0)".to_string(),
            n => format!(" (indices 0 to {})", n - 1),
        };
        write!(
            f,
            "{ABSENT_GPUS_NOTE}{}: no such GPU; torch sees {} GPU(s){range} with this environment's visibility settings",
            missing.join(","),
            self.seen
        )
    }
}

/// Which listed GPUs do not exist, judged from a Python worker whose framework could use
/// the GPU and listed its devices. Without such a worker nothing is known: a framework that
/// sees no GPU at all leaves the run untested (exit 4), not mistaken.
pub(super) fn absent_listed_gpus(
    request: &DeviceRequest,
    hellos: &[exec::HelloRecord],
) -> Option<AbsentGpus> {
    let DeviceRequest::Listed(listed) = request else {
        return None;
    };
    let seen = hellos.iter().find_map(|hello| match &hello.event {
        WorkerEvent::Hello {
            torch: Some(torch), ..
        } if hello.backend == Backend::Python && torch.gpu_available => Some(torch.devices.len()),
        _ => None,
    })?;
    let missing: Vec<u32> = listed
        .iter()
        .filter_map(|device| match device {
            DeviceRef::Gpu(index) if *index as usize >= seen => Some(*index),
            _ => None,
        })
        .collect();
    (!missing.is_empty()).then_some(AbsentGpus { missing, seen })
}

/// The note on GPUs named with `--device` (other than `missing`, already said to be
/// absent) on which no probe run got a verdict: every run there NOT-TESTED (or SKIP), none
/// passed or found a problem. It names them and says why, from the first NOT-TESTED reason.
pub(super) fn untested_listed_gpus(
    request: &DeviceRequest,
    results: &[ProbeResult],
    missing: &[u32],
) -> Option<String> {
    let DeviceRequest::Listed(listed) = request else {
        return None;
    };
    let mut untested: Vec<u32> = Vec::new();
    let mut reason: Option<String> = None;
    for device in listed {
        let DeviceRef::Gpu(index) = device else {
            continue;
        };
        if missing.contains(index) || untested.contains(index) {
            continue;
        }
        let on_device: Vec<&ProbeResult> = results.iter().filter(|r| r.device == *device).collect();
        let not_tested = on_device
            .iter()
            .find(|r| matches!(r.verdict, Verdict::NotTested { .. }));
        let verdict_given = on_device
            .iter()
            .any(|r| r.verdict.is_judged() || r.verdict.is_problem());
        if let (Some(first), false) = (not_tested, verdict_given) {
            untested.push(*index);
            reason.get_or_insert_with(|| first.verdict.detail());
        }
    }
    if untested.is_empty() {
        return None;
    }
    let indices: Vec<String> = untested.iter().map(u32::to_string).collect();
    let names: Vec<String> = untested
        .iter()
        .map(|i| DeviceRef::Gpu(*i).torch_name())
        .collect();
    Some(format!(
        "{ABSENT_GPUS_NOTE}{}{UNTESTED_GPUS_WORDS}{}: {}",
        indices.join(","),
        names.join(", "),
        reason.unwrap_or_default()
    ))
}

/// What the note on untested GPUs says after their indices ([`untested_listed_gpus`]).
const UNTESTED_GPUS_WORDS: &str = ": nothing could be tested on ";

/// The note on named GPUs that got no verdict among a report's notes, also in a report
/// read back from disk.
pub(crate) fn untested_gpus_note(notes: &[String]) -> Option<&str> {
    notes
        .iter()
        .map(String::as_str)
        .find(|note| note.starts_with(ABSENT_GPUS_NOTE) && note.contains(UNTESTED_GPUS_WORDS))
}

/// The interpreter and framework as the Python workers reported them.
fn python_env_from(
    python: Option<&PythonChoice>,
    hellos: &[exec::HelloRecord],
    recorded_torch: Option<&str>,
) -> Option<PythonEnv> {
    let choice = python?;
    let mut python_env = PythonEnv {
        executable: choice.executable.display().to_string(),
        chosen_by: choice.chosen_by.clone(),
        ..Default::default()
    };
    // Prefer a hello that carries torch facts (device 0's), else any.
    let hello = hellos
        .iter()
        .filter(|h| h.backend == Backend::Python)
        .max_by_key(|h| matches!(&h.event, WorkerEvent::Hello { torch: Some(_), .. }));
    if let Some(exec::HelloRecord {
        event:
            WorkerEvent::Hello {
                python_version,
                interpreter,
                torch,
                unusable,
                packages,
                conda,
                ..
            },
        ..
    }) = hello
    {
        python_env.version = python_version.clone();
        python_env.set_interpreter(interpreter.as_deref());
        python_env.torch = torch.clone();
        python_env.torch_error = unusable.clone();
        python_env.packages = packages.clone();
        python_env.conda = conda.as_deref().cloned();
    } else if let Some(version) = recorded_torch {
        // Its build (CUDA or HIP) from the interpreter's torch files, when they are still
        // those of that version.
        let files = crate::stack::torch_files(&choice.executable)
            .filter(|files| files.version.as_deref() == Some(version));
        python_env.torch = Some(TorchInfo {
            version: version.to_string(),
            cuda: files.as_ref().and_then(|f| f.cuda.clone()),
            hip: files.and_then(|f| f.hip),
            ..Default::default()
        });
    }
    Some(python_env)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn python_hello(device: u32, gpu_available: bool, seen: u32) -> exec::HelloRecord {
        let torch = gpuprobe_model::TorchInfo {
            version: "2.11.0+cu130".into(),
            cuda: Some("13.0".into()),
            gpu_available,
            devices: (0..seen)
                .map(|index| gpuprobe_model::TorchDevice {
                    index,
                    name: "GPU".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        exec::HelloRecord {
            backend: Backend::Python,
            device: DeviceRef::Gpu(device),
            event: WorkerEvent::Hello {
                protocol: 1,
                pid: 1,
                worker: "python".into(),
                executable: None,
                python_version: None,
                interpreter: None,
                torch: Some(torch),
                unusable: (device >= seen).then(|| format!("cuda:{device} does not exist")),
                packages: BTreeMap::new(),
                conda: None,
                simulated: false,
            },
        }
    }

    #[test]
    fn a_listed_gpu_the_framework_does_not_see_is_a_wrong_argument() {
        let listed = |devices: &[u32]| {
            DeviceRequest::Listed(devices.iter().map(|d| DeviceRef::Gpu(*d)).collect())
        };
        let absent = absent_listed_gpus(&listed(&[0, 5, 2]), &[python_hello(5, true, 2)]);
        assert_eq!(
            absent,
            Some(AbsentGpus {
                missing: vec![5, 2],
                seen: 2
            })
        );
        let note = absent.unwrap().to_string();
        assert_eq!(
            absent_gpus_note(&["resumed run".into(), note.clone()]),
            Some(note.as_str())
        );
        assert_eq!(
            note,
            "--device 5,2: no such GPU; torch sees 2 GPU(s) (indices 0 to 1) with this environment's visibility settings"
        );
        assert_eq!(
            absent_listed_gpus(&listed(&[1]), &[python_hello(1, true, 2)]),
            None
        );
        // Every GPU is asked for, or none is listed: nothing can be missing.
        assert_eq!(
            absent_listed_gpus(&DeviceRequest::All, &[python_hello(0, true, 1)]),
            None
        );
        assert_eq!(
            absent_listed_gpus(
                &DeviceRequest::Listed(vec![DeviceRef::Cpu]),
                &[python_hello(0, true, 1)]
            ),
            None
        );
        // A framework that sees no usable GPU says nothing about which exist (exit 4), and
        // neither does a run without a Python worker.
        assert_eq!(
            absent_listed_gpus(&listed(&[3]), &[python_hello(3, false, 0)]),
            None
        );
        assert_eq!(absent_listed_gpus(&listed(&[3]), &[]), None);
    }

    #[test]
    fn a_listed_gpu_that_got_no_verdict_is_named_as_untested() {
        use gpuprobe_model::{Layer, ProbeId};
        let on = |device, verdict| {
            ProbeResult::new(ProbeId::new("a.b"), device, Layer::Framework, verdict)
        };
        let not_tested = || Verdict::NotTested {
            reason: "torch sees no usable GPU".into(),
        };
        let request = DeviceRequest::Listed(vec![DeviceRef::Cpu, DeviceRef::Gpu(5)]);
        let results = [
            on(DeviceRef::Cpu, Verdict::Pass),
            on(DeviceRef::Cpu, Verdict::Pass),
            on(DeviceRef::Cpu, Verdict::Pass),
            on(DeviceRef::Gpu(5), not_tested()),
        ];
        let note = untested_listed_gpus(&request, &results, &[]);
        assert_eq!(
            note.as_deref(),
            Some("--device 5: nothing could be tested on cuda:5: torch sees no usable GPU")
        );
        let notes = vec!["resumed run".to_string(), note.clone().unwrap()];
        assert_eq!(untested_gpus_note(&notes), note.as_deref());
        assert_eq!(absent_gpus_note(&notes), None);
        // Said to be absent already; or asked for as "every GPU"; or tested.
        assert_eq!(untested_listed_gpus(&request, &results, &[5]), None);
        assert_eq!(
            untested_listed_gpus(&DeviceRequest::All, &results, &[]),
            None
        );
        let tested = [
            on(DeviceRef::Gpu(5), Verdict::Pass),
            on(DeviceRef::Gpu(5), not_tested()),
        ];
        assert_eq!(untested_listed_gpus(&request, &tested, &[]), None);
        let failed = [on(
            DeviceRef::Gpu(5),
            Verdict::Error {
                message: "x".into(),
            },
        )];
        assert_eq!(untested_listed_gpus(&request, &failed, &[]), None);
    }

    #[test]
    fn exit_status_rules() {
        use gpuprobe_model::Verdict;
        use gpuprobe_model::{Layer, ProbeId};
        let result = |verdict| {
            ProbeResult::new(
                ProbeId::new("a.b"),
                DeviceRef::Gpu(0),
                Layer::Framework,
                verdict,
            )
        };
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass)], &[]),
            ExitStatus::AllPassed
        );
        assert_eq!(
            exit_status_for(
                &[
                    result(Verdict::Pass),
                    result(Verdict::Hang { timeout_s: 1.0 })
                ],
                &[]
            ),
            ExitStatus::ProblemsFound
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::NotTested { reason: "x".into() })], &[]),
            ExitStatus::NothingTested
        );
        assert_eq!(exit_status_for(&[], &[]), ExitStatus::NothingTested);
        let not_tested = || result(Verdict::NotTested { reason: "x".into() });
        let skip = || result(Verdict::Skip { reason: "x".into() });
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), not_tested(), not_tested()], &[]),
            ExitStatus::NothingTested,
            "most of what applies was not tested"
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), not_tested()], &[]),
            ExitStatus::AllPassed,
            "half is enough"
        );
        assert_eq!(
            exit_status_for(&[result(Verdict::Pass), skip(), skip(), not_tested()], &[]),
            ExitStatus::AllPassed,
            "a SKIP does not apply, so it does not count"
        );
        assert_eq!(
            exit_status_for(
                &[
                    result(Verdict::Hang { timeout_s: 1.0 }),
                    not_tested(),
                    not_tested()
                ],
                &[]
            ),
            ExitStatus::ProblemsFound,
            "a problem is reported whatever else was not tested"
        );
    }

    #[test]
    fn a_resume_without_new_workers_keeps_the_torch_its_results_were_made_with() {
        let choice = PythonChoice {
            executable: "/venv/bin/python".into(),
            chosen_by: "--python".into(),
        };
        let env = python_env_from(Some(&choice), &[], Some("2.11.0+cu130")).unwrap();
        assert_eq!(
            env.torch.map(|t| t.version).as_deref(),
            Some("2.11.0+cu130")
        );
        // A worker's hello, when there is one, says more than the recorded version.
        let env = python_env_from(Some(&choice), &[python_hello(0, true, 1)], Some("old")).unwrap();
        assert_eq!(env.torch.unwrap().cuda.as_deref(), Some("13.0"));
    }
}
