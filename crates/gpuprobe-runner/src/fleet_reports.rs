//! The reports under the paths `gpuprobe fleet` is given: which files to read, in a stable
//! order, found without reading any of them. Reading is [`crate::rundir`]'s
//! ([`crate::rundir::read_report_file`]), one report at a time, by the caller.
//!
//! A path is taken as:
//!
//! - a file: a report (`report.json`, or a saved `check --json`);
//! - a run directory ([`crate::rundir::Run::open`]: a `check`, or a `fix` whose starting
//!   check holds the report): its report; a run that never finished has none and is listed
//!   as such;
//! - any other directory: searched recursively (links are not followed, at most
//!   [`MAX_DEPTH`] levels below it) for run directories, whose insides are not searched
//!   further, and for `*.json` files, each taken as a report.
//!
//! Entries are visited in name order, so the same tree always yields the same list.

use std::fs;
use std::path::{Path, PathBuf};

use crate::rundir::{REPORT_FILE, Run};

/// How deep below a named directory the search goes (a tree of sites, clusters, nodes and
/// their run directories is well within it).
pub(crate) const MAX_DEPTH: usize = 8;

/// One place a report should be: its file, and the name of the node it came from when the
/// report itself does not say (the directory holding it, or a loose file's stem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundReport {
    /// The report file.
    pub path: PathBuf,
    /// The directory holding `report.json`, or the file's name without `.json`.
    pub fallback_name: String,
}

/// A path under which no report can be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfound {
    /// The path.
    pub path: PathBuf,
    /// Why, in a few words.
    pub reason: String,
}

/// What the search found: the reports to read, and the paths that hold none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Reports, in visiting order.
    pub reports: Vec<FoundReport>,
    /// Paths that were named or found but hold no readable report.
    pub unfound: Vec<Unfound>,
}

/// Finds the reports under `paths` (see the module's description).
pub fn find(paths: &[PathBuf]) -> Found {
    let mut found = Found::default();
    for path in paths {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) => {
                found.unfound.push(Unfound {
                    path: path.clone(),
                    reason: format!("cannot read: {e}"),
                });
                continue;
            }
        };
        if meta.is_file() {
            found.reports.push(report_at(path.clone()));
        } else {
            search(path, 0, &mut found);
        }
    }
    found
}

fn report_at(path: PathBuf) -> FoundReport {
    let name_of = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let fallback_name = if path.file_name().is_some_and(|n| n == REPORT_FILE) {
        name_of(path.parent())
    } else {
        path.file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    FoundReport {
        path,
        fallback_name,
    }
}

fn search(dir: &Path, depth: usize, found: &mut Found) {
    if let Ok(run) = Run::open(dir) {
        let report = run.check().file(REPORT_FILE);
        if report.is_file() {
            let mut entry = report_at(report);
            // A fix's report sits in its `check/` directory: the node is the fix's directory.
            entry.fallback_name = run
                .path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(entry.fallback_name);
            found.reports.push(entry);
        } else {
            found.unfound.push(Unfound {
                path: dir.to_path_buf(),
                reason: format!("a run without {REPORT_FILE} (it did not finish)"),
            });
        }
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            found.unfound.push(Unfound {
                path: dir.to_path_buf(),
                reason: format!("cannot list: {e}"),
            });
            return;
        }
    };
    let mut children: Vec<(PathBuf, fs::FileType)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.path(), e.file_type().ok()?)))
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, kind) in children {
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                search(&path, depth + 1, found);
            }
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "json") {
            found.reports.push(report_at(path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_files_and_trees_are_found_in_name_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for node in ["b-node", "a-node"] {
            let run = root.join("site").join(node).join("check-1");
            fs::create_dir_all(run.join("workers")).unwrap();
            fs::write(run.join(REPORT_FILE), "{}").unwrap();
            // Inside a run nothing more is taken.
            fs::write(run.join("stack.json"), "{}").unwrap();
        }
        let unfinished = root.join("site").join("c-node");
        fs::create_dir_all(&unfinished).unwrap();
        fs::write(unfinished.join(crate::rundir::PLAN_FILE), "{}").unwrap();
        fs::write(root.join("site").join("loose-node.json"), "{}").unwrap();
        fs::write(root.join("site").join("notes.txt"), "x").unwrap();
        let single = root.join("single.json");
        fs::write(&single, "{}").unwrap();

        let found = find(&[root.join("site"), single.clone(), root.join("missing")]);
        let names: Vec<&str> = found
            .reports
            .iter()
            .map(|r| r.fallback_name.as_str())
            .collect();
        assert_eq!(names, ["check-1", "check-1", "loose-node", "single"]);
        assert!(found.reports[0].path.starts_with(root.join("site/a-node")));
        assert_eq!(found.unfound.len(), 2, "{:?}", found.unfound);
        assert!(found.unfound[0].reason.contains("did not finish"));
        assert!(found.unfound[1].reason.starts_with("cannot read"));
    }
}
