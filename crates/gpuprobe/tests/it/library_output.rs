//! Only the binary prints and leaves the process: no library crate's source calls
//! `process::exit(` or prints with `println!`, `print!`, `eprintln!` or `eprint!`. What a
//! library has to say goes to its caller (a return value, a callback such as `say`, an
//! interruption returned as an error), so that the binary alone decides what reaches the
//! terminal and with which exit code gpuprobe leaves (docs/exit-codes.md).
//!
//! The check is a plain text scan of every `.rs` file under `crates/*/src`, except those of
//! the binary (`crates/gpuprobe`) and of the fuzz targets (`crates/gpuprobe-fuzz-targets`,
//! separate programs). It skips:
//! - lines whose code starts with `//` (comments, doc comments);
//! - the item after a `#[cfg(test)]` line: a block item up to the line that closes it at
//!   the same indentation (rustfmt's layout), or a one-line item; a `mod NAME;` so gated
//!   makes the file of that module skipped too (`NAME.rs` or `NAME/mod.rs` beside or
//!   below the declaring file).
//!
//! A call inside a string or after code on the same line is still found: the scan errs
//! towards finding too much, and such a line can be rewritten.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Crates whose `src` may print and exit: the binary, and the fuzz targets' programs.
const MAY_PRINT: &[&str] = &["gpuprobe", "gpuprobe-fuzz-targets"];

fn forbidden() -> regex::Regex {
    regex::Regex::new(r"(\bprocess::exit|\be?print(ln)?!)\s*\(").unwrap()
}

/// The `.rs` files under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Where the module `name`, declared in `file` with `mod name;`, lives: `name.rs`, or the
/// directory of `name/mod.rs` (all of which belongs to it).
fn module_files(file: &Path, name: &str) -> [PathBuf; 2] {
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy();
    let base = if ["mod", "lib", "main"].contains(&stem.as_ref()) {
        dir.to_path_buf()
    } else {
        dir.join(stem.as_ref())
    };
    [base.join(format!("{name}.rs")), base.join(name)]
}

/// What one file's scan found: the offending lines (1-based number, text), and the files
/// of the test-only modules it declares.
#[derive(Default)]
struct Scan {
    offending: Vec<(usize, String)>,
    test_modules: Vec<String>,
}

/// Scans `text` (see the module's description).
fn scan(text: &str) -> Scan {
    let pattern = forbidden();
    let module = regex::Regex::new(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    let mut out = Scan::default();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if code.starts_with("#[cfg(test)]") {
            let indent = &line[..line.len() - code.len()];
            let closing = format!("{indent}}}");
            // Further attributes, then the item itself.
            let mut item = lines.next();
            while let Some((_, next)) = item
                && next.trim_start().starts_with("#[")
            {
                item = lines.next();
            }
            let Some((_, item)) = item else { break };
            if let Some(name) = module.captures(item) {
                out.test_modules.push(name[3].to_string());
            } else if item.trim_end().ends_with('{') {
                for (_, inner) in lines.by_ref() {
                    if inner.trim_end() == closing {
                        break;
                    }
                }
            }
            continue;
        }
        if pattern.is_match(code) {
            out.offending.push((index + 1, line.trim().to_string()));
        }
    }
    out
}

#[test]
fn the_scan_finds_prints_and_exits_outside_tests_and_comments() {
    let text = r#"//! Prints nothing: println!("doc").
fn a() {
    // eprintln!("a comment")
    let _ = writeln!(out, "written, not printed");
    eprintln!("found");
}

#[cfg(test)]
#[allow(dead_code)]
mod tests {
    fn b() {
        println!("in a test module");
    }
}

#[cfg(test)]
mod more;

pub fn c() -> ! {
    std::process::exit(3)
}
fn d() { print!("x"); eprint! ("y"); }
"#;
    let scan = scan(text);
    let lines: Vec<usize> = scan.offending.iter().map(|(n, _)| *n).collect();
    assert_eq!(lines, [5, 20, 22], "{:?}", scan.offending);
    assert_eq!(scan.test_modules, ["more"]);
    assert_eq!(
        module_files(Path::new("/c/src/html.rs"), "tests")[0],
        Path::new("/c/src/html/tests.rs")
    );
    assert_eq!(
        module_files(Path::new("/c/src/repro/mod.rs"), "tests"),
        [
            Path::new("/c/src/repro/tests.rs"),
            Path::new("/c/src/repro/tests")
        ]
    );
}

#[test]
fn no_library_crate_prints_or_leaves_the_process() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut libraries: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .flatten()
        .filter(|entry| !MAY_PRINT.contains(&entry.file_name().to_string_lossy().as_ref()))
        .map(|entry| entry.path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    libraries.sort();
    assert!(
        libraries.len() >= 5,
        "the library crates were not found: {libraries:?}"
    );
    let mut scanned = 0;
    let mut problems = Vec::new();
    for src in &libraries {
        let files = rust_files(src);
        let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
        let mut found = Vec::new();
        for file in &files {
            let scan = scan(&std::fs::read_to_string(file).unwrap());
            for name in &scan.test_modules {
                test_only.extend(module_files(file, name));
            }
            found.push((file, scan.offending));
        }
        for (file, offending) in found {
            // A test-only module's file, or a file in its directory.
            if test_only.iter().any(|skip| file.starts_with(skip)) {
                continue;
            }
            scanned += 1;
            for (line, text) in offending {
                problems.push(format!("{}:{line}: {text}", file.display()));
            }
        }
    }
    assert!(scanned > 50, "only {scanned} files scanned");
    assert!(
        problems.is_empty(),
        "library code prints or exits; return it to the caller instead (the binary prints):\n{}",
        problems.join("\n")
    );
}
