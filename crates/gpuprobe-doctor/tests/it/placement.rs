//! Lanes by placement: shared and side lanes of a device overlap, an exclusive lane runs
//! alone on its device after every other lane there has finished (its worker starts early
//! and waits for the start line), and each Python worker's CPU threads are capped.

use std::collections::BTreeMap;
use std::path::Path;

use gpuprobe_doctor::Execution;
use gpuprobe_model::Settings;
use gpuprobe_model::{Backend, Placement};
use gpuprobe_runner::Task;

use crate::support::{config, execute_with, scripted_worker, task_on};

/// A "worker" that logs `hello <time> <OMP_NUM_THREADS>` once it has started, waits for the
/// start line when its plan says so (logging `start <time>`), then each probe sleeps 0.4 s
/// and logs `<probe> <start> <end>` to `log`.
fn logging_worker(dir: &Path, log: &Path) -> std::path::PathBuf {
    scripted_worker(
        dir,
        &format!(
            r#"def note(line):
    with open({log:?}, "a") as f: f.write(line + "\n")
name = plan["probes"][0]
note(f"hello:{{name}} {{time.time()}} {{os.environ.get('OMP_NUM_THREADS', '-')}}")
emit({{"event": "hello", "protocol": 1, "pid": os.getpid(), "worker": "native"}})
if plan.get("wait_for_start"):
    if sys.stdin.readline().strip() != "start": sys.exit(0)
    note(f"start:{{name}} {{time.time()}} -")
for probe in plan["probes"]:
    emit({{"event": "begin", "probe": probe, "device": plan["device"]}})
    start = time.time(); time.sleep(0.4); end = time.time()
    note(f"{{probe}} {{start}} {{end}}")
    emit({{"event": "result", "probe": probe, "device": plan["device"], "outcome": "observed",
          "observation": {{"probe": probe, "device": plan["device"], "measurement": {{"kind": "metrics"}}}}}})
emit({{"event": "done"}})
"#,
            log = log.display().to_string()
        ),
    )
}

/// The log's lines by their first word: (second, third) words.
fn read_log(log: &Path) -> BTreeMap<String, (String, String)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            (
                parts[0].to_string(),
                (parts[1].to_string(), parts[2].to_string()),
            )
        })
        .collect()
}

fn seconds(text: &str) -> f64 {
    text.parse().unwrap()
}

/// Runs `tasks` grouped into lanes, with the scripted worker and `settings`, in `dir`.
fn execute(dir: &Path, worker: &Path, settings: Settings, tasks: Vec<Task>) -> Execution {
    execute_with(dir, &config(dir, worker, settings), tasks)
}

fn task(id: &str, placement: Placement) -> Task {
    task_on(id, placement, Backend::Native)
}

#[test]
fn exclusive_probes_wait_for_the_device_and_side_lanes_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("times.log");
    let worker = logging_worker(dir.path(), &log);
    let tasks = vec![
        task("t.fill", Placement::Exclusive),
        task("t.main.a", Placement::Shared),
        task("t.main.b", Placement::Shared),
        task("t.side.a", Placement::Side),
        task("t.side.b", Placement::Side),
        task("u.side.c", Placement::Side),
    ];
    assert_eq!(
        gpuprobe_doctor::lanes_for(tasks.clone()).len(),
        4,
        "one lane per placement, and per family for side probes"
    );
    let execution = execute(dir.path(), &worker, Settings::default(), tasks);
    assert_eq!(execution.results.len(), 6, "{:?}", execution.logs);

    let log = read_log(&log);
    let times: BTreeMap<&String, (f64, f64)> = log
        .iter()
        .filter(|(name, _)| name.starts_with("t.") || name.starts_with("u."))
        .map(|(name, (start, end))| (name, (seconds(start), seconds(end))))
        .collect();
    let fill = times[&"t.fill".to_string()];
    for (probe, (_, end)) in times.iter().filter(|(p, _)| p.as_str() != "t.fill") {
        assert!(
            *end <= fill.0,
            "{probe} ended at {end} after the exclusive probe began at {}",
            fill.0
        );
    }
    // The side lane ran beside the main lane: their first probes overlap in time.
    let (main_start, main_end) = times[&"t.main.a".to_string()];
    let (side_start, side_end) = times[&"t.side.a".to_string()];
    assert!(
        side_start < main_end && main_start < side_end,
        "main {main_start}-{main_end}, side {side_start}-{side_end}"
    );
    // The exclusive lane's worker started at once (its hello came before the shared lane
    // finished), waited, and was started only once the device was free.
    let (hello, _) = &log["hello:t.fill"];
    let (start, _) = &log["start:t.fill"];
    assert!(
        seconds(hello) < main_end,
        "exclusive worker said hello at {hello}, after the shared lane ended at {main_end}"
    );
    for (probe, (_, end)) in times.iter().filter(|(p, _)| p.as_str() != "t.fill") {
        assert!(
            *end <= seconds(start),
            "{probe} ended at {end} after the exclusive worker was started at {start}"
        );
    }
}

#[test]
fn an_exclusive_lane_alone_on_its_device_starts_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("times.log");
    let worker = logging_worker(dir.path(), &log);
    let tasks = vec![
        task("t.fill", Placement::Exclusive),
        task("t.fill.second", Placement::Exclusive),
    ];
    let execution = execute(dir.path(), &worker, Settings::default(), tasks);
    assert_eq!(execution.results.len(), 2, "{:?}", execution.logs);
    assert!(
        execution.results.iter().all(|r| !r.verdict.is_problem()),
        "{:?}",
        execution.results
    );
}

#[test]
fn python_workers_get_a_share_of_the_cores_unless_the_settings_choose() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let run = |settings: Settings| {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("times.log");
        let worker = logging_worker(dir.path(), &log);
        let tasks = vec![
            task_on("p.main", Placement::Shared, Backend::Python),
            task_on("p.side", Placement::Side, Backend::Python),
            task_on("n.main", Placement::Shared, Backend::Native),
        ];
        let execution = execute(dir.path(), &worker, settings, tasks);
        assert_eq!(execution.results.len(), 3, "{:?}", execution.logs);
        read_log(&log)
    };
    let log = run(Settings::default());
    // A value in the environment is the user's choice and is passed through untouched.
    let share = std::env::var(gpuprobe_doctor::THREADS_VARIABLE)
        .unwrap_or_else(|_| gpuprobe_doctor::worker_threads(cores, 2).to_string());
    assert_eq!(
        log["hello:p.main"].1, share,
        "two Python lanes share {cores} cores"
    );
    assert_eq!(log["hello:p.side"].1, share);
    assert_eq!(log["hello:n.main"].1, "-", "native workers are not capped");

    let mut settings = Settings::default();
    settings
        .set
        .insert(gpuprobe_doctor::THREADS_VARIABLE.into(), "3".into());
    let log = run(settings);
    assert_eq!(log["hello:p.main"].1, "3", "the run's settings win");
}

#[test]
fn side_probes_that_name_a_lane_get_it_and_the_rest_share_their_familys() {
    let named = |id: &str, lane: &str| {
        let mut t = task(id, Placement::Side);
        t.spec.lane = Some(lane.to_string());
        t
    };
    let lanes = gpuprobe_doctor::lanes_for(vec![
        named("sweep.add.fp32", "sweep-1"),
        named("sweep.mul.fp32", "sweep-2"),
        named("sweep.sub.fp32", "sweep-1"),
        task("nn.conv2d.fp32", Placement::Side),
        task("nn.vae.encode.fp32", Placement::Side),
    ]);
    let ids: Vec<Vec<&str>> = lanes
        .iter()
        .map(|l| l.tasks.iter().map(|t| t.spec.id.as_str()).collect())
        .collect();
    assert_eq!(
        ids,
        vec![
            vec!["sweep.add.fp32", "sweep.sub.fp32"],
            vec!["sweep.mul.fp32"],
            vec!["nn.conv2d.fp32", "nn.vae.encode.fp32"],
        ]
    );
}
