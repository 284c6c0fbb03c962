//! Exports of a finished run for machines that watch many runs: the Prometheus text
//! exposition ([`prometheus`], for node_exporter's textfile collector) and JUnit XML
//! ([`junit`], for CI systems). Both render the [`gpuprobe_model::Report`] they are given
//! and decide nothing about its results; this module owns what they share: the stack
//! facts both name, the run's times, and the atomic write of an export to a file. Beside
//! them, [`health`] makes a health check's one line and exit code of a report.

pub(crate) mod health;
pub(crate) mod junit;
pub(crate) mod prometheus;

use std::path::{Path, PathBuf};

use gpuprobe_model::{ExitStatus, Report};

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the {what} to {}", gpuprobe_model::visible_line(&.path.display().to_string()))]
pub struct ExportError {
    /// Which export ("Prometheus metrics", "JUnit XML").
    pub what: &'static str,
    /// The path the user named.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

impl gpuprobe_model::ClassifiedError for ExportError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// Checks up front that `path`, when one is named, can be written, so that a long run does
/// not end in an unwritable export.
pub fn check_writable(what: &'static str, path: Option<&Path>) -> Result<(), ExportError> {
    let Some(path) = path else { return Ok(()) };
    gpuprobe_fs::check_writable_file(path).map_err(|reason| ExportError {
        what,
        path: path.to_path_buf(),
        source: std::io::Error::other(reason),
    })
}

/// Writes `text` to `path` atomically: a temporary file beside it (a dot file ending in
/// `.tmp`, which the textfile collector's `*.prom` never matches), then a rename, so a
/// reader never sees half an export. Missing parent directories are created.
pub fn write(what: &'static str, path: &Path, text: &str) -> Result<(), ExportError> {
    let fail = |source| ExportError {
        what,
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    gpuprobe_fs::write_atomically(path, |file| {
        std::io::Write::write_all(file, text.as_bytes())
    })
    .map_err(fail)
}

/// The stack facts both exports name: `unknown` where the report does not hold one.
pub(crate) struct Stack {
    /// The knowledge base revision of the gpuprobe that judged the run.
    pub kb_version: String,
    /// Its source commit.
    pub commit: String,
    /// `torch.__version__`.
    pub torch: String,
    /// The GPU driver's version (NVIDIA's, else amdgpu-dkms's; `inbox` for the kernel's own
    /// amdgpu).
    pub driver: String,
}

const UNKNOWN: &str = "unknown";

impl Stack {
    pub(crate) fn of(report: &Report) -> Stack {
        let fp = &report.fingerprint;
        let (kb_version, commit) = match &report.build {
            Some(build) => (build.kb_revision.clone(), build.commit.clone()),
            None => (UNKNOWN.into(), UNKNOWN.into()),
        };
        let torch = fp
            .python
            .as_ref()
            .and_then(|p| p.torch.as_ref())
            .map_or_else(|| UNKNOWN.into(), |t| t.version.clone());
        let nvidia = fp.nvidia.as_ref().and_then(|nv| nv.version.clone());
        let amd = fp.amdgpu.as_ref().filter(|amd| amd.loaded).map(|amd| {
            match (amd.source, &amd.version) {
                (gpuprobe_model::DriverSource::Inbox, _) => "inbox".to_string(),
                (_, Some(version)) => version.clone(),
                (_, None) => UNKNOWN.to_string(),
            }
        });
        Stack {
            kb_version,
            commit,
            torch,
            driver: nvidia.or(amd).unwrap_or_else(|| UNKNOWN.into()),
        }
    }
}

/// Seconds since the Unix epoch of an RFC 3339 time (`2026-01-01T12:00:00.5Z`,
/// `...+02:00`), or `None` when `text` is not one.
pub(crate) fn unix_seconds(text: &str) -> Option<f64> {
    let number = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (date, rest) = text.split_once(['T', 't', ' '])?;
    let mut ymd = date.split('-');
    let (year, month, day) = (
        number(ymd.next()?)?,
        number(ymd.next()?)?,
        number(ymd.next()?)?,
    );
    if ymd.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (clock, offset_s) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = rest.rfind(['+', '-'])?;
        let (clock, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = offset[1..].split_once(':')?;
        (
            clock,
            sign * (number(hours)? * 3600 + number(minutes)? * 60),
        )
    };
    let (whole, fraction) = match clock.split_once('.') {
        Some((whole, fraction)) => (whole, format!("0.{fraction}").parse::<f64>().ok()?),
        None => (clock, 0.0),
    };
    let mut hms = whole.split(':');
    let (hour, minute, second) = (
        number(hms.next()?)?,
        number(hms.next()?)?,
        number(hms.next()?)?,
    );
    if hms.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm, proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(seconds as f64 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_become_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_seconds("2026-01-01T00:00:00Z"), Some(1_767_225_600.0));
        assert_eq!(
            unix_seconds("2026-11-29T10:13:27.25Z"),
            Some(1_795_947_207.25)
        );
        assert_eq!(
            unix_seconds("2026-01-01T02:00:00+02:00"),
            Some(1_767_225_600.0)
        );
        assert_eq!(
            unix_seconds("2025-12-31T23:00:00-01:00"),
            Some(1_767_225_600.0)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00Z",
            "2026-01-01",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_export_is_written_whole_under_new_directories_and_an_unwritable_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/gpuprobe.prom");
        check_writable("Prometheus metrics", Some(&path)).unwrap();
        write("Prometheus metrics", &path, "x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x 1\n");
        write("Prometheus metrics", &path, "x 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x 2\n");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["gpuprobe.prom"], "no temporary file is left behind");
        let error = check_writable("JUnit XML", Some(dir.path())).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("cannot write the JUnit XML to ")
        );
        assert!(write("JUnit XML", dir.path(), "x").is_err());
    }
}

#[cfg(test)]
mod checks;
