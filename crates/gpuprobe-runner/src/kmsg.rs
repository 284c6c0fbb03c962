//! New kernel log lines seen while probes run.
//!
//! A GPU page fault or reset is often printed only by the kernel, while the probe just
//! dies or hangs. When `/dev/kmsg` is readable (root, or `kernel.dmesg_restrict=0`), the
//! watcher remembers where the log ended before the run and hands back the new lines of
//! interest after each probe, so they are recorded with that probe's result.

use std::path::{Path, PathBuf};

use gpuprobe_detect::KmsgReader;
use gpuprobe_model::KERNEL_LOG_MARKERS;

/// Most lines returned per call, so a log storm cannot flood a report.
const MAX_LINES: usize = 50;
/// Most records read per call (the device returns one per read).
const MAX_READS: usize = 10_000;

/// Where the kernel log watched during probes comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KernelLogSource {
    /// Not watched (simulated runs, whose results must not depend on the host).
    #[default]
    Off,
    /// The live kernel log, `/dev/kmsg`.
    Live,
    /// A file that grows the way the kernel log does (tests, replays).
    File(PathBuf),
}

impl KernelLogSource {
    /// A watcher positioned at the log's current end; `None` when watching is off, the
    /// reason when the log cannot be read.
    pub fn open(&self) -> Option<Result<KernelLogWatcher, String>> {
        match self {
            KernelLogSource::Off => None,
            KernelLogSource::Live => Some(KernelLogWatcher::open_live()),
            KernelLogSource::File(path) => Some(KernelLogWatcher::open(path)),
        }
    }
}

/// Reads kernel log records appended since it was opened (through detect's
/// [`KmsgReader`], the one reader of the log).
#[derive(Debug)]
pub struct KernelLogWatcher {
    reader: KmsgReader,
}

impl KernelLogWatcher {
    /// Opens `/dev/kmsg` positioned at its end, or says why it cannot be read (for the
    /// report).
    pub fn open_live() -> Result<KernelLogWatcher, String> {
        Self::open(Path::new("/dev/kmsg"))
    }

    /// Opens a log file or device and moves to its end.
    pub fn open(path: &Path) -> Result<KernelLogWatcher, String> {
        let reader = KmsgReader::open(path, true)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(KernelLogWatcher { reader })
    }

    /// The interesting lines appended since the last call.
    pub fn new_lines(&mut self) -> Vec<String> {
        let mut raw = Vec::new();
        // What was read before an error is kept; the next call tries again.
        let _ = self.reader.read_available(&mut raw, MAX_READS, usize::MAX);
        String::from_utf8_lossy(&raw)
            .lines()
            .map(format_record)
            .filter(|line| {
                KERNEL_LOG_MARKERS
                    .iter()
                    .any(|needle| line.contains(needle))
            })
            .take(MAX_LINES)
            .collect()
    }
}

/// Turns a `/dev/kmsg` record (`prio,seq,usec,flags;message`) into `[seconds] message`;
/// other lines pass through.
fn format_record(line: &str) -> String {
    if let Some((header, message)) = line.split_once(';') {
        let fields: Vec<&str> = header.split(',').collect();
        if fields.len() >= 3
            && fields[..3]
                .iter()
                .all(|f| f.chars().all(|c| c.is_ascii_digit()))
        {
            let usec: u64 = fields[2].parse().unwrap_or(0);
            return format!(
                "[{:>5}.{:06}] {}",
                usec / 1_000_000,
                usec % 1_000_000,
                message
            );
        }
    }
    line.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;

    #[test]
    fn only_new_interesting_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "6,1,100,-;amdgpu: old line\n").unwrap();
        let mut watcher = KernelLogWatcher::open(&path).unwrap();
        let mut f = File::options().append(true).open(&path).unwrap();
        writeln!(
            f,
            "3,2,5071443221,-;amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153)"
        )
        .unwrap();
        writeln!(f, "6,3,5071443300,-;usb 1-1: new device").unwrap();
        let lines = watcher.new_lines();
        assert_eq!(
            lines,
            vec![
                "[ 5071.443221] amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153)"
            ]
        );
        assert!(watcher.new_lines().is_empty());
    }

    #[test]
    fn sources_open_where_they_say() {
        assert!(KernelLogSource::Off.open().is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "").unwrap();
        assert!(matches!(KernelLogSource::File(path).open(), Some(Ok(_))));
        let missing = KernelLogSource::File(dir.path().join("missing")).open();
        assert!(matches!(missing, Some(Err(reason)) if reason.contains("cannot read")));
    }

    #[test]
    fn unreadable_log_says_why() {
        let err = KernelLogWatcher::open(Path::new("/nonexistent/kmsg")).unwrap_err();
        assert!(err.contains("cannot read"), "{err}");
    }
}
