//! The build's knowledge-base revision is the digest docs/packaging.md promises (the one a
//! user gets from `sha256sum` over the shipped files), and the commit is the checkout's.

use std::path::PathBuf;
use std::process::Command;

use gpuprobe_kb::{COMMIT, KB_REVISION, LONG_VERSION, build_info};

fn kb_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kb")
}

#[test]
fn kb_revision_is_the_entry_count_and_the_documented_digest() {
    let (count, digest) = KB_REVISION.split_once('.').expect("COUNT.DIGEST");
    assert_eq!(
        count.parse::<usize>().unwrap(),
        gpuprobe_kb::embedded_sources().len()
    );
    assert!(count.parse::<usize>().unwrap() > 0);
    // The command docs/packaging.md gives to recompute it.
    let output = Command::new("sh")
        .current_dir(kb_dir())
        .args(["-c", "LC_ALL=C sha256sum *.toml | sha256sum"])
        .output()
        .expect("sh and sha256sum run");
    assert!(output.status.success(), "{output:?}");
    let expected = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        digest,
        &expected[..12],
        "the build's digest differs from sha256sum's"
    );
}

#[test]
fn the_version_line_names_version_commit_and_kb() {
    assert_eq!(
        LONG_VERSION,
        format!(
            "{} (commit {COMMIT}, kb {KB_REVISION})",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(build_info().commit, COMMIT);
    assert_eq!(build_info().kb_revision, KB_REVISION);
}

#[test]
fn the_commit_is_the_checkouts_head() {
    // Only meaningful in a git checkout built without an explicit override.
    if option_env!("GPUPROBE_BUILD_COMMIT").is_some() {
        return;
    }
    let Ok(output) = Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
    else {
        return;
    };
    if !output.status.success() {
        return;
    }
    assert_eq!(COMMIT, String::from_utf8(output.stdout).unwrap().trim());
}
