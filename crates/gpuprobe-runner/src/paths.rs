//! Where gpuprobe keeps run directories and its caches, and how run directories are named.
//! (Output files the user names are checked and written by `gpuprobe-fs`.)

use std::collections::BTreeMap;
use std::path::PathBuf;
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
pub(crate) const RUN_COMMANDS: [&str; 3] = ["check", "fix", "memtest"];

/// A fresh run directory path under the default root: `<command>-<UTC stamp>-<pid>`.
pub fn new_run_dir(env: &BTreeMap<String, String>, command: &str) -> PathBuf {
    debug_assert!(RUN_COMMANDS.contains(&command), "{command}");
    runs_root(env).join(run_dir_name(command, SystemTime::now(), std::process::id()))
}

/// A fresh run directory path under `root` (a runs directory the user named), named as
/// [`new_run_dir`] names its own so that `runs` lists it.
pub fn new_run_dir_in(root: &std::path::Path, command: &str) -> PathBuf {
    debug_assert!(RUN_COMMANDS.contains(&command), "{command}");
    root.join(run_dir_name(command, SystemTime::now(), std::process::id()))
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
