//! `gpuprobe bundle`: a real `check --device cpu` run with a planted user name, host name,
//! home directory and tokens in its environment and in a worker's log, bundled, unpacked with
//! the system `tar`, and searched for every planted value; `--no-redact` keeps them and says
//! so; and the refusals: no run, a broken report, an existing or unwritable output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

const USER: &str = "plantuser-qz";
const HOST: &str = "planthost-qz";
const HF_TOKEN: &str = "hf_PlantedTokenAbCdEfGhIjKlMn";
const OWN_TOKEN: &str = "planted-own-secret-9x7y";
const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudCJ9.c2lnbmF0dXJlLXBsYW50ZWQ";
const SERIAL: &str = "1655023034247";
const IP: &str = "10.77.66.55";

/// A state directory and home of the test's own, with the planted identity.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(setup.home()).unwrap();
        std::fs::create_dir_all(setup.cwd()).unwrap();
        setup
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home").join(USER)
    }

    fn cwd(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn runs(&self) -> PathBuf {
        self.dir.path().join("state/gpuprobe/runs")
    }

    fn gpuprobe(&self) -> Command {
        let mut command = gpuprobe();
        command
            .current_dir(self.cwd())
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("HOME", self.home())
            .env("USER", USER)
            .env("LOGNAME", USER)
            .env("HOSTNAME", HOST)
            .env("HF_TOKEN", HF_TOKEN)
            .env("MY_SERVICE_TOKEN", OWN_TOKEN)
            .env_remove("GPUPROBE_KEEP_RUNS");
        command
    }

    fn bundle(&self, args: &[&str]) -> Output {
        self.gpuprobe().arg("bundle").args(args).output().unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file the archive holds, by its path inside the archive, unpacked with `tar`.
fn unpack(archive: &Path) -> Vec<(String, String)> {
    let into = archive.with_extension("unpacked");
    std::fs::create_dir_all(&into).unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(&into)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "tar could not unpack {}",
        archive.display()
    );
    let mut files = Vec::new();
    let mut pending = vec![into.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let name = path.strip_prefix(&into).unwrap().display().to_string();
                files.push((name, text(&std::fs::read(&path).unwrap())));
            }
        }
    }
    files.sort();
    files
}

fn file<'a>(files: &'a [(String, String)], name: &str) -> &'a str {
    files
        .iter()
        .find(|(n, _)| n.ends_with(name))
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("{name} not in the bundle: {:?}", names(files)))
}

fn names(files: &[(String, String)]) -> Vec<&str> {
    files.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn a_real_run_is_bundled_with_every_planted_value_redacted() {
    let setup = Setup::new();
    let check = setup
        .gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable.4x4",
        ])
        .arg("--python")
        .arg(python())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    // What a worker might have printed: the home path, the user, the host, tokens, a serial
    // from an NVRM line and an address.
    let run = std::fs::read_dir(setup.runs())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_dir(run.join("workers"))
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .expect("a lane directory")
        .path()
        .join("worker-1.log");
    let home = setup.home().display().to_string();
    std::fs::write(
        &log,
        format!(
            "loading {home}/.cache/torch/x.so as {USER} on {HOST}\n\
             HF_TOKEN={HF_TOKEN} MY_SERVICE_TOKEN={OWN_TOKEN}\n\
             Authorization: Bearer {JWT}\n\
             NVRM: GPU Board Serial Number: {SERIAL}\n\
             connecting to {IP}:29500\n"
        ),
    )
    .unwrap();

    let output = setup.bundle(&["--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let run_name = run.file_name().unwrap().to_str().unwrap();
    let archive = setup
        .cwd()
        .join(format!("gpuprobe-bundle-{run_name}.tar.gz"));
    assert!(archive.is_file(), "{printed}");
    assert_eq!(printed["redacted"], true);
    assert_eq!(printed["bytes"], std::fs::metadata(&archive).unwrap().len());
    let categories: Vec<&str> = printed["redactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect();
    for category in ["user", "host", "home_path", "secret", "serial", "ip"] {
        assert!(categories.contains(&category), "{category}: {printed}");
    }

    let files = unpack(&archive);
    let listed = names(&files);
    for name in [
        "report.json",
        "plan.json",
        "fingerprint.txt",
        "fingerprint.json",
        "lint.txt",
        "kernel-log.txt",
        "MANIFEST.txt",
    ] {
        assert!(
            listed.contains(&format!("gpuprobe-bundle-{run_name}/{name}").as_str()),
            "{name}: {listed:?}"
        );
    }
    let worker = files
        .iter()
        .find(|(n, _)| n.contains("/workers/") && n.ends_with("worker-1.stderr.txt"))
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("no worker log: {listed:?}"));
    assert!(worker.contains("~/.cache/torch/x.so as <user-"), "{worker}");
    assert!(
        worker.contains("Authorization: Bearer <secret-"),
        "{worker}"
    );
    // Every JSON file is still JSON.
    for (name, body) in &files {
        if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(body)
                .unwrap_or_else(|e| panic!("{name} is not JSON after redaction: {e}"));
        }
    }
    let everything: String = files.iter().map(|(n, t)| format!("{n}\n{t}\n")).collect();
    for planted in [
        USER,
        HOST,
        HF_TOKEN,
        OWN_TOKEN,
        JWT,
        SERIAL,
        IP,
        home.as_str(),
    ] {
        assert!(
            !everything.contains(planted),
            "{planted} survived the redaction"
        );
    }
    let manifest = file(&files, "MANIFEST.txt");
    assert!(manifest.contains("redacted (each value"), "{manifest}");
    assert!(manifest.contains("user names: "), "{manifest}");
    assert!(!manifest.contains("NOT REDACTED"), "{manifest}");

    // A second bundle to the same file is refused without --force, and replaces it with it.
    let again = setup.bundle(&[]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );

    // --no-redact keeps the values and says so, on the terminal and in the manifest.
    let raw = setup.dir.path().join("raw.tar.gz");
    let output = setup.bundle(&["--no-redact", "--out", raw.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("NOT REDACTED"),
        "{}",
        text(&output.stdout)
    );
    let files = unpack(&raw);
    let everything: String = files.iter().map(|(_, t)| t.as_str()).collect();
    for planted in [USER, HOST, HF_TOKEN, SERIAL, IP] {
        assert!(
            everything.contains(planted),
            "{planted} missing without redaction"
        );
    }
    assert!(file(&files, "MANIFEST.txt").contains("NOT REDACTED"));
    let forced = setup.bundle(&["--force", "--no-redact", "--out", raw.to_str().unwrap()]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
}

/// A run directory by hand: a plan, optionally a report, and a hostile worker log.
fn fake_run(root: &Path, report: Option<&str>) -> PathBuf {
    let run = root.join("check-2026-01-01T00-00-00-1");
    let lane = run.join("workers").join("lane\u{1b}[2J\u{7}");
    std::fs::create_dir_all(&lane).unwrap();
    std::fs::write(run.join("plan.json"), r#"{"seed": 1, "tasks": []}"#).unwrap();
    if let Some(report) = report {
        std::fs::write(run.join("report.json"), report).unwrap();
    }
    let noise: String = (0..5000)
        .map(|i| format!("line {i} \u{1b}]0;evil title\u{7}\u{1b}[31mred\n"))
        .collect();
    std::fs::write(lane.join("worker\u{1b}[H-1.log"), noise).unwrap();
    std::fs::write(
        run.join("results.jsonl"),
        "{\"probe\": \"copy.h2d\", \"torn\n",
    )
    .unwrap();
    run
}

#[test]
fn an_unfinished_run_with_hostile_names_is_bundled_and_printed_inertly() {
    let setup = Setup::new();
    let run = fake_run(&setup.runs(), None);
    let out = setup.dir.path().join("b.tar.gz");
    let output = setup.bundle(&[
        "--run",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(stdout.contains("(cut: the last 200 lines"), "{stdout}");
    let files = unpack(&out);
    let worker = files
        .iter()
        .find(|(n, _)| n.contains("/workers/"))
        .unwrap_or_else(|| panic!("{:?}", names(&files)));
    // The archive's names are plain; the tail is the last 200 lines.
    assert!(
        worker.0.chars().all(|c| c.is_ascii_graphic()),
        "{:?}",
        worker.0
    );
    assert_eq!(worker.1.lines().count(), 200);
    assert!(
        worker
            .1
            .ends_with("line 4999 \u{1b}]0;evil title\u{7}\u{1b}[31mred\n")
    );
    let manifest = file(&files, "MANIFEST.txt");
    assert!(manifest.contains("the run did not finish"), "{manifest}");
    assert!(listed_has(&files, "results.jsonl") && listed_has(&files, "plan.json"));
}

fn listed_has(files: &[(String, String)], name: &str) -> bool {
    files.iter().any(|(n, _)| n.ends_with(name))
}

#[test]
fn no_run_a_broken_report_and_an_unwritable_output_are_usage_errors() {
    let setup = Setup::new();
    // No run at all under the state directory.
    let output = setup.bundle(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("no runs in"),
        "{}",
        text(&output.stderr)
    );
    // A directory that is not a run.
    let output = setup.bundle(&["--run", setup.home().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("not a gpuprobe run directory"));

    let run = fake_run(&setup.runs(), Some("{\"schema_version\": 1, truncated"));
    let output = setup.bundle(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("is not a valid gpuprobe report"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(
        std::fs::read_dir(setup.cwd()).unwrap().count(),
        0,
        "something was written"
    );

    // The run is fine now (unfinished); the outputs are not.
    std::fs::remove_file(run.join("report.json")).unwrap();
    for out in ["/proc/gpuprobe-bundle.tar.gz", "/nonexistent-dir/b.tar.gz"] {
        let output = setup.bundle(&["--out", out]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{out}: {}",
            text(&output.stderr)
        );
        assert!(
            text(&output.stderr).contains("cannot write"),
            "{}",
            text(&output.stderr)
        );
    }
    let output = setup.bundle(&["--out", setup.dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    // Nothing half-written is left beside the output.
    let leftovers: Vec<_> = std::fs::read_dir(setup.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
