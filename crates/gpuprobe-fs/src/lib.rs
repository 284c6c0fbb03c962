//! Output files: the check, made before any work, that a file can be written where the user
//! asked, and writing one so that no reader ever sees half of it.
//!
//! Both the runner (run directories, `--summary`, `--profile-out`) and the report crate
//! (the HTML report, the support bundle) write files the user named, and the report crate
//! does not depend on the runner. These two helpers sit below both: not in
//! `gpuprobe-model`, which holds data only and does no I/O, nor in `gpuprobe-detect`, whose
//! file access is the machine's state read through its `Root`. This crate owns nothing
//! else: no file names, no formats.

use std::path::Path;

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
