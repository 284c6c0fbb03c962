//! The fuzz regression replay, on stable Rust (CI has no nightly): every checked-in input of
//! every fuzz target (its seeds per `fuzz/seed-sources.txt`, `fuzz/seeds/<target>/`, and the
//! minimised crashes and timeouts under `fuzz/regressions/<target>/`) goes through the same
//! function the libFuzzer binary calls, and must neither panic nor take longer than the
//! per-input timeout `scripts/fuzz.sh` gives libFuzzer.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuprobe_fuzz_targets::{TARGETS, Target};

/// libFuzzer's `-timeout` in `scripts/fuzz.sh`: an input slower than this is a bug there,
/// so it is one here too (this build is unoptimised, which only makes the bound generous).
const TIME_LIMIT: Duration = Duration::from_secs(10);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// `path` as the repository names it, for messages.
fn shown(path: &Path) -> String {
    let root = repo();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether `name` matches a pattern with at most one `*` (the seed-sources format).
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        }
        None => name == pattern,
    }
}

/// Files under `dir` (recursively) whose names match `pattern`; none when `dir` is absent
/// (a target's `fuzz/regressions/<target>/` exists only once the fuzzer found something).
fn files_under(dir: &Path, pattern: &str, out: &mut Vec<PathBuf>) {
    let Ok(listing) = fs::read_dir(dir) else {
        return;
    };
    for item in listing {
        let path = item.expect("directory entry").path();
        if path.is_dir() {
            files_under(&path, pattern, out);
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| matches(pattern, n))
        {
            out.push(path);
        }
    }
}

/// Every checked-in input of `target`, sorted.
fn inputs(target: &str) -> Vec<PathBuf> {
    let root = repo();
    let sources = fs::read_to_string(root.join("fuzz/seed-sources.txt"))
        .expect("fuzz/seed-sources.txt is readable");
    let mut files = Vec::new();
    for line in sources.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, dir, pattern] = fields[..] else {
            panic!("fuzz/seed-sources.txt: expected TARGET DIRECTORY PATTERN, got {line:?}");
        };
        assert!(
            TARGETS.iter().any(|t| t.name == name),
            "fuzz/seed-sources.txt names an unknown target {name:?}"
        );
        if name == target {
            let before = files.len();
            files_under(&root.join(dir), pattern, &mut files);
            assert!(
                files.len() > before,
                "fuzz/seed-sources.txt: no {pattern} under {dir}"
            );
        }
    }
    for dir in ["fuzz/seeds", "fuzz/regressions"] {
        files_under(&root.join(dir).join(target), "*", &mut files);
    }
    files.sort();
    files
}

/// Runs every input of `name`'s target and lists each one that panics or is too slow.
fn replay(name: &str) {
    let target: &Target = TARGETS
        .iter()
        .find(|t| t.name == name)
        .expect("a known target");
    let files = inputs(name);
    assert!(!files.is_empty(), "{name} has no checked-in inputs");
    let mut failures = Vec::new();
    for path in &files {
        let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", shown(path)));
        let start = Instant::now();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&data)));
        let elapsed = start.elapsed();
        if outcome.is_err() {
            failures.push(format!("{}: panicked (message above)", shown(path)));
        } else if elapsed > TIME_LIMIT {
            failures.push(format!(
                "{}: took {elapsed:?}, over {TIME_LIMIT:?}",
                shown(path)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} inputs failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn triage_inputs_replay() {
    replay("triage");
}

#[test]
fn protocol_inputs_replay() {
    replay("protocol");
}

#[test]
fn kb_entry_inputs_replay() {
    replay("kb_entry");
}

#[test]
fn profile_inputs_replay() {
    replay("profile");
}

#[test]
fn simulate_spec_inputs_replay() {
    replay("simulate_spec");
}

/// The libFuzzer binaries and [`TARGETS`] name the same targets, so none is fuzzed without
/// being replayed or replayed without being fuzzed.
#[test]
fn every_target_has_a_fuzz_binary_and_back() {
    let mut binaries: Vec<String> = fs::read_dir(repo().join("fuzz/fuzz_targets"))
        .expect("fuzz/fuzz_targets is readable")
        .map(|item| item.expect("directory entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    binaries.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
    names.sort();
    assert_eq!(binaries, names);
}
