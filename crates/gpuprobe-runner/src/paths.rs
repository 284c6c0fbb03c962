//! Where gpuprobe keeps run directories and its caches, how run directories are named, the
//! check that an output file can be written before any work is done, and writing such a file
//! so that no reader ever sees half of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gpuprobe_model::env_vars;

use crate::stamp::file_stamp;

/// The default parent of run directories: `$XDG_STATE_HOME/gpuprobe/runs`, else
/// `~/.local/state/gpuprobe/runs`, else `./gpuprobe-runs`.
pub fn runs_root(env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(state) = env.get(env_vars::XDG_STATE_HOME).filter(|s| !s.is_empty()) {
        return PathBuf::from(state).join("gpuprobe/runs");
    }
    if let Some(home) = env.get(env_vars::HOME).filter(|s| !s.is_empty()) {
        return PathBuf::from(home).join(".local/state/gpuprobe/runs");
    }
    PathBuf::from("gpuprobe-runs")
}

/// Where workers cache Python bytecode when the interpreter cannot cache torch's in place:
/// `$XDG_CACHE_HOME/gpuprobe/bytecode`, else `~/.cache/gpuprobe/bytecode`, else none.
pub fn bytecode_cache(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if let Some(cache) = env.get(env_vars::XDG_CACHE_HOME).filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(cache).join("gpuprobe/bytecode"));
    }
    env.get(env_vars::HOME)
        .filter(|s| !s.is_empty())
        .map(|home| PathBuf::from(home).join(".cache/gpuprobe/bytecode"))
}

/// The commands that make run directories under the default root. `runs` recognises a run
/// directory by the name [`new_run_dir`] gives it, so a command missing here would leave
/// runs that are never listed nor pruned (the safe side; the debug assertion says so first).
pub const RUN_COMMANDS: [&str; 3] = ["check", "fix", "memtest"];

/// A fresh run directory path under the default root: `<command>-<UTC stamp>-<pid>`.
pub fn new_run_dir(env: &BTreeMap<String, String>, command: &str) -> PathBuf {
    debug_assert!(RUN_COMMANDS.contains(&command), "{command}");
    runs_root(env).join(run_dir_name(command, SystemTime::now(), std::process::id()))
}

fn run_dir_name(command: &str, at: SystemTime, pid: u32) -> String {
    format!("{command}-{}-{pid}", file_stamp(at))
}

/// A run directory's name, taken apart: what [`new_run_dir`] put in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDirName<'a> {
    /// The command that made it (one of [`RUN_COMMANDS`]).
    pub command: &'a str,
    /// Its start, UTC, as [`file_stamp`] writes it (`2026-11-22T10-04-05`); such stamps sort
    /// as the times they stand for.
    pub stamp: &'a str,
    /// The process that made it.
    pub pid: u32,
}

/// The parts of `name` when it is a run directory's name as [`new_run_dir`] makes it; `None`
/// for any other name, which `runs` then leaves alone.
pub fn parse_run_dir_name(name: &str) -> Option<RunDirName<'_>> {
    let (command, rest) = name.split_once('-')?;
    if !RUN_COMMANDS.contains(&command) {
        return None;
    }
    let stamp = rest.get(..19)?;
    let is_stamp = stamp.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 | 13 | 16 => b == b'-',
        10 => b == b'T',
        _ => b.is_ascii_digit(),
    });
    let pid = rest.get(19..)?.strip_prefix('-')?;
    if !is_stamp || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(RunDirName {
        command,
        stamp,
        pid: pid.parse().ok()?,
    })
}

/// Checks, before any work is done, that a file can be written at `path` later (an output
/// such as `--summary` or `--profile-out`), so that a typo costs an error up front instead
/// of the result of a long run. Leaves nothing behind: an existing file is opened for
/// writing without truncation; a new one is created and removed at once; under a directory
/// that does not exist yet (writers create missing parents), a uniquely named file is
/// created and removed in the nearest existing ancestor. Other existing non-directories
/// (`/dev/stdout`, a FIFO) are accepted as they are: opening a FIFO would wait for a reader.
pub fn check_writable_file(path: &Path) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
    if path.as_os_str().is_empty() {
        return Err("an empty path is no file".into());
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("{} is a directory, not a file", path.display()));
        }
        Ok(meta) if meta.is_file() => {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map(drop)
                .map_err(|e| fail("write", e));
        }
        Ok(_) => return Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(fail("write", e)),
        Err(_) => {}
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if parent.is_dir() {
        return match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(file) => {
                drop(file);
                std::fs::remove_file(path).map_err(|e| fail("remove the test file", e))
            }
            // Someone made it in the meantime: it is there to be written.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(fail("create", e)),
        };
    }
    let Some(ancestor) = parent
        .ancestors()
        .find(|a| a.exists() || a.as_os_str().is_empty())
    else {
        return Err(format!(
            "cannot create {}: no existing parent",
            path.display()
        ));
    };
    let ancestor = if ancestor.as_os_str().is_empty() {
        Path::new(".")
    } else {
        ancestor
    };
    if !ancestor.is_dir() {
        return Err(format!(
            "cannot create {}: {} is not a directory",
            path.display(),
            ancestor.display()
        ));
    }
    let probe = ancestor.join(format!(".gpuprobe-write-test-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot create {}: cannot write in {}: {e}",
            path.display(),
            ancestor.display()
        )),
    }
}

/// Writes the file at `path` through `write`, atomically: into a new temporary file beside
/// it (`.NAME.PID.tmp`, created fresh, so a link planted there is never followed), renamed
/// over `path` once `write` succeeded. On any failure the temporary file is removed and
/// `path` is left as it was. The parent directory must exist.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let written = write(&mut file).and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_files_are_told_from_unwritable_ones_and_nothing_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            names.sort();
            names
        };
        let existing = dir.path().join("existing.json");
        std::fs::write(&existing, "keep me").unwrap();
        // A new file, a new file under directories yet to be made, an existing file.
        check_writable_file(&dir.path().join("new.json")).unwrap();
        check_writable_file(&dir.path().join("a/b/new.toml")).unwrap();
        check_writable_file(&existing).unwrap();
        assert_eq!(listing(), vec!["existing.json"], "nothing left behind");
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
        // Under a file, a directory, an empty path.
        let under_file = check_writable_file(&existing.join("x.json")).unwrap_err();
        assert!(
            under_file.to_lowercase().contains("not a directory"),
            "{under_file}"
        );
        let deeper = check_writable_file(&existing.join("x/y.json")).unwrap_err();
        assert!(
            deeper.to_lowercase().contains("not a directory"),
            "{deeper}"
        );
        let is_dir = check_writable_file(dir.path()).unwrap_err();
        assert!(is_dir.contains("is a directory"), "{is_dir}");
        assert!(check_writable_file(Path::new("")).is_err());
        assert!(check_writable_file(Path::new("/proc/gpuprobe-no/x.json")).is_err());
        assert_eq!(listing(), vec!["existing.json"]);
    }

    #[test]
    fn run_dir_names_parse_back_and_nothing_else_does() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_341_845);
        for command in RUN_COMMANDS {
            let name = run_dir_name(command, at, 4242);
            assert_eq!(
                parse_run_dir_name(&name),
                Some(RunDirName {
                    command,
                    stamp: "2026-11-22T10-04-05",
                    pid: 4242
                })
            );
        }
        for other in [
            "env-2026-11-22T10-04-05-4242",
            "check-2026-11-22T10-04-05",
            "check-2026-11-22T10-04-05-",
            "check-2026-11-22T10-04-05-42x",
            "check-2026-11-22 10-04-05-4242",
            "check-2026-11-22T10:04:05-4242",
            "check-2026-11-22T10-04-05-99999999999",
            "check-",
            "notes",
            "check-2026-11-22T10-04-05-4242.bak",
        ] {
            assert_eq!(parse_run_dir_name(other), None, "{other}");
        }
    }

    #[test]
    fn the_bytecode_cache_follows_xdg_then_home() {
        let home = ("HOME".to_string(), "/h".to_string());
        let xdg = |value: &str| ("XDG_CACHE_HOME".to_string(), value.to_string());
        assert_eq!(
            bytecode_cache(&BTreeMap::from([xdg("/c"), home.clone()])),
            Some(PathBuf::from("/c/gpuprobe/bytecode"))
        );
        assert_eq!(
            bytecode_cache(&BTreeMap::from([xdg(""), home])),
            Some(PathBuf::from("/h/.cache/gpuprobe/bytecode"))
        );
        assert_eq!(bytecode_cache(&BTreeMap::new()), None);
    }

    #[test]
    fn an_atomic_write_replaces_the_file_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.html");
        std::fs::write(&path, "old").unwrap();
        let failed = write_atomically(&path, |file| {
            std::io::Write::write_all(file, b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(dir.path()), ["out.html"], "no temporary file is left");
        write_atomically(&path, |file| std::io::Write::write_all(file, b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(dir.path()), ["out.html"]);
        assert!(write_atomically(&dir.path().join("missing/out"), |_| Ok(())).is_err());
    }
}
