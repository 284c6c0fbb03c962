//! `triage` on inputs that never end or are very large, and on hostile pastes: reading
//! stops at the byte cap promptly and in bounded memory, with the cut said on stderr; a
//! log of a hundred thousand events prints a summary of bounded size with the right
//! counts and lines; no control character of a paste reaches the terminal.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::gpuprobe;

/// Debug builds on a loaded machine are slow; reading a stream forever is slower still.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `command` to its end or the deadline (then kills it and fails), feeding its stdin
/// from `feed` when given, and collecting its output.
fn run_with_deadline(mut command: Command, feed: Option<fn(std::process::ChildStdin)>) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command.stdin(if feed.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let started = Instant::now();
    let mut child = command.spawn().expect("gpuprobe starts");
    let writer = feed.map(|feed| {
        let stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || feed(stdin))
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpuprobe triage did not stop within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Some(writer) = writer {
        writer
            .join()
            .expect("the writer ends once the pipe is closed");
    }
    Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

/// gpuprobe under an address-space limit (`ulimit -v`, KiB), with the environment
/// `gpuprobe()` sets up: reading without a bound would fail to allocate long before the
/// deadline.
fn limited_gpuprobe(kib: u64, args: &[&str]) -> Command {
    let base = gpuprobe();
    let mut shell = Command::new("sh");
    // The limit set in the shell carries over to gpuprobe, which replaces it.
    shell
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$@\""))
        .arg("sh")
        .arg(base.get_program())
        .args(args);
    for (key, value) in base.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(target_os = "linux")]
#[test]
fn dev_zero_stops_at_the_cap_promptly_in_bounded_memory() {
    for args in [
        vec!["triage", "--max-bytes", "1M", "/dev/zero"],
        // The default cap (64 MiB) too.
        vec!["triage", "/dev/zero"],
    ] {
        let started = Instant::now();
        let output = run_with_deadline(limited_gpuprobe(1 << 20, &args), None);
        let stderr = text(&output.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{args:?} took {:?}",
            started.elapsed()
        );
        assert!(stderr.contains("/dev/zero: stopped reading"), "{stderr}");
        assert!(stderr.contains("--max-bytes"), "{stderr}");
        // Zeros hold no line, so nothing is recognised: an input error, not a crash.
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no known tool output was recognized"),
            "{stderr}"
        );
    }
}

#[test]
fn an_endless_stdin_stops_at_the_cap_and_what_was_read_is_triaged() {
    let mut command = gpuprobe();
    command.args(["triage", "--max-bytes", "1M", "-"]);
    let output = run_with_deadline(
        command,
        Some(|mut stdin| {
            let mut n = 0u64;
            loop {
                n += 1;
                let line = format!(
                    "[{n}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid={n}, name=python3, GPU has fallen off the bus.\n"
                );
                // The pipe breaks when gpuprobe stops reading and exits.
                if stdin.write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
        }),
    );
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("stdin: stopped reading"), "{stderr}");
    assert!(stderr.contains("--max-bytes"), "{stderr}");
    assert!(stdout.contains("truncated"), "{stdout}");
    assert!(stdout.contains("kernel log"), "{stdout}");
    assert!(stdout.contains("× xid 79 on 0000:3b:00.0"), "{stdout}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    // The JSON says so too.
    let mut command = gpuprobe();
    command.args(["triage", "--json", "--max-bytes", "64K", "-"]);
    let output = run_with_deadline(
        command,
        Some(|mut stdin| {
            while stdin
                .write_all(b"[ 1.000000] amdgpu 0000:c2:00.0: amdgpu: ring gfx_0.0.0 timeout\n")
                .is_ok()
            {}
        }),
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let truncated = &report["truncated"][0];
    assert_eq!(truncated["input"], "stdin");
    assert_eq!(truncated["share_bytes"], 64 * 1024);
    assert_eq!(truncated["rest_unread"], true);
}

#[test]
fn a_size_below_the_minimum_is_a_usage_error() {
    for (size, why) in [
        ("0", "at least 64K"),
        ("1K", "at least 64K"),
        ("lots", "expected a size such as 64M"),
    ] {
        let output = gpuprobe()
            .args(["triage", "--max-bytes", size, "-"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "--max-bytes {size}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(why), "--max-bytes {size}: {stderr}");
    }
}

/// 75,000 lines: 25,000 Xid 79 events and 25,000 CPF page faults (two lines each), with
/// changing pids, addresses and timestamps, then three Xid 13 events.
fn storm() -> String {
    let mut log = String::new();
    let mut line = 0;
    let mut push = |log: &mut String, text: String| {
        line += 1;
        log.push_str(&text);
        log.push('\n');
        line
    };
    for i in 0..25_000u64 {
        let t = format!("{}.{:06}", 100 + i / 1000, i % 1000);
        push(
            &mut log,
            format!(
                "[{t}] NVRM: Xid (PCI:0000:3b:00): 79, pid={}, name=python3, GPU has fallen off the bus.",
                1000 + i % 97
            ),
        );
        push(
            &mut log,
            format!(
                "[{t}] amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:{})",
                32768 + i % 5
            ),
        );
        push(
            &mut log,
            format!("[{t}] amdgpu 0000:c2:00.0: amdgpu: \t Faulty UTCL2 client ID: CPF (0x4)"),
        );
    }
    for pid in 1..=3 {
        push(
            &mut log,
            format!(
                "[900.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name=python3, Graphics Exception"
            ),
        );
    }
    log
}

#[test]
fn a_fault_storm_prints_a_bounded_summary_with_counts_and_first_and_last_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dmesg.log");
    std::fs::write(&path, storm()).unwrap();
    let output = gpuprobe().arg("triage").arg(&path).output().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        stdout.len() < 20_000,
        "{} bytes of output:\n{}",
        stdout.len(),
        &stdout[..stdout.len().min(3000)]
    );
    assert!(
        stdout.contains("Kernel log events: 50003 in 3 classes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("25000 × xid 79 on 0000:3b:00.0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("25000 × page_fault client CPF (gfxhub) on 0000:c2:00.0"),
        "{stdout}"
    );
    assert!(stdout.contains("3 × xid 13 on 0000:3b:00.0"), "{stdout}");
    let name = path.display().to_string();
    for expected in [
        // Xid 79: lines 1 and 74998; page faults: lines 2 and 74999; Xid 13: the end.
        format!("first  {name} line 1: [100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1000"),
        format!("last   {name} line 74998: [124.000999] NVRM: Xid (PCI:0000:3b:00): 79"),
        format!(
            "first  {name} line 2: [100.000000] amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault"
        ),
        format!("last   {name} line 74999: [124.000999] amdgpu 0000:c2:00.0"),
        format!("first  {name} line 75001: [900.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1"),
        format!("last   {name} line 75003: [900.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=3"),
    ] {
        assert!(
            stdout.contains(&expected),
            "missing {expected:?} in\n{stdout}"
        );
    }

    let output = gpuprobe()
        .args(["triage", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        output.stdout.len() < 100_000,
        "{} bytes of JSON",
        output.stdout.len()
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let summary = &report["kernel_log"];
    assert_eq!(summary["events"], 50_003);
    let classes = summary["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 3);
    assert_eq!(classes[0]["label"], "xid 79 on 0000:3b:00.0");
    assert_eq!(classes[0]["count"], 25_000);
    assert_eq!(classes[0]["first"]["line"], 1);
    assert_eq!(classes[0]["last"]["line"], 74_998);
    assert_eq!(classes[1]["count"], 25_000);
    assert_eq!(classes[1]["last"]["line"], 74_999);
    let kept = report["fingerprint"]["kernel_events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(summary["kept"].as_array().unwrap().len(), kept);
    assert_eq!(summary["left_out"], 50_003 - kept);
    assert!(kept <= 20, "{kept} events kept");
    assert_eq!(report["truncated"].as_array().unwrap().len(), 0);
}

#[test]
fn a_large_file_keeps_its_start_and_its_latest_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dmesg.log");
    let log = storm();
    std::fs::write(&path, &log).unwrap();
    // About an eighth of the log: the first quarter of it from the start, the rest from
    // the end, where the Xid 13 events are.
    let cap = log.len() / 8;
    let output = gpuprobe()
        .args(["triage", "--json", "--max-bytes"])
        .arg(cap.to_string())
        .arg(&path)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(stderr.contains("its latest lines"), "{stderr}");
    assert!(stderr.contains("--max-bytes"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let truncated = &report["truncated"][0];
    let kept = truncated["kept_lines"].as_array().unwrap();
    assert_eq!(kept.len(), 2, "{truncated}");
    assert_eq!(kept[0]["first"], 1);
    assert_eq!(kept[1]["last"], 75_003);
    let omitted = &truncated["omitted_lines"];
    assert_eq!(omitted["first"], kept[0]["last"].as_u64().unwrap() + 1);
    assert_eq!(omitted["last"], kept[1]["first"].as_u64().unwrap() - 1);
    let classes = report["kernel_log"]["classes"].as_array().unwrap();
    let xid13 = classes
        .iter()
        .find(|c| c["label"] == "xid 13 on 0000:3b:00.0")
        .expect("the latest events are kept");
    assert_eq!(xid13["last"]["line"], 75_003);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[test]
fn a_hostile_paste_prints_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paste\x1b]0;pwned\x07.log");
    let mut paste = String::new();
    paste.push_str("$ rocm-smi\x07\x1b\n");
    paste.push_str("junk after a prompt \x1b]8;;http://x\x07link\x1b]8;;\x07\n");
    paste.push_str("$ python -m torch.utils.collect_env\n");
    paste.push_str("PyTorch version: 2.5.0\x07\x1b\n");
    paste.push_str("OS: Ubuntu\x1b]0;pwned\x07 24.04\n");
    paste.push_str("$ dmesg\n");
    for i in 0..3000 {
        paste.push_str(&format!(
            "[{i}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid={i}, name=py\x07thon\x1b, bad\x1b\n"
        ));
    }
    paste.push_str("[9.000000] libhsa\x1b[2J: segfault at 0 ip 0 sp 0 error 4 in libhsa-runtime64.so\x07[7f+1]\n");
    std::fs::write(&path, paste).unwrap();
    for json in [false, true] {
        let mut command = gpuprobe();
        command.arg("triage");
        if json {
            command.arg("--json");
        }
        // The cap cuts the paste, so the name is also quoted on stderr.
        let output = command
            .args(["--max-bytes", "64K"])
            .arg(&path)
            .output()
            .unwrap();
        for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            assert!(
                !bytes.iter().any(|&b| b == 0x1b || b == 0x07),
                "raw ESC or BEL on {stream} (json {json}):\n{}",
                text(bytes)
            );
        }
        let stderr = text(&output.stderr);
        assert!(stderr.contains("paste\\x1b]0;pwned\\x07.log"), "{stderr}");
        if !json {
            let stdout = text(&output.stdout);
            assert!(stdout.contains("× xid 79"), "{stdout}");
            assert!(stdout.contains("\\x07"), "{stdout}");
        }
    }
}
