//! Every fixture has its provenance header, is listed in `fixtures/README.md`, and is
//! recognised by triage as the tool its directory names, with nothing left over.

use gpuprobe_detect::{ToolKind, TriageInput, triage};

use crate::common::{all_fixtures, env_fixtures, fixture, fixtures_dir};

fn tool_of_dir(dir: &str) -> ToolKind {
    match dir {
        "rocminfo" => ToolKind::Rocminfo,
        "rocm-smi" => ToolKind::RocmSmi,
        "amd-smi" => ToolKind::AmdSmi,
        "nvidia-smi" => ToolKind::NvidiaSmi,
        "collect_env" => ToolKind::CollectEnv,
        "dmesg" | "journalctl" => ToolKind::KernelLog,
        "amdgpu_firmware_info" => ToolKind::FirmwareInfo,
        other => panic!("fixture directory {other} has no tool"),
    }
}

#[test]
fn every_fixture_has_provenance_and_is_documented() {
    let readme =
        std::fs::read_to_string(fixtures_dir().join("README.md")).expect("fixtures/README.md");
    let files = all_fixtures();
    assert_eq!(files.len(), 25, "fixtures found: {files:?}");
    let env = env_fixtures();
    assert_eq!(env.len(), 9, "fixtures/env found: {env:?}");
    for file in files.into_iter().chain(env) {
        let text = fixture(&file);
        let mut lines = text.lines();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# source: ")),
            "{file}: line 1 must be `# source:`"
        );
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# note: ")),
            "{file}: line 2 must be `# note:`"
        );
        assert!(
            readme.contains(&format!("`{file}`")),
            "{file} is not listed in fixtures/README.md"
        );
    }
}

#[test]
fn triage_recognises_each_fixture_as_its_tool() {
    for file in all_fixtures() {
        let expected = tool_of_dir(file.split('/').next().expect("dir"));
        let outcome = triage(&[TriageInput {
            name: file.clone(),
            text: fixture(&file),
        }]);
        assert_eq!(
            outcome.recognized.len(),
            1,
            "{file}: {:?}",
            outcome.recognized
        );
        assert_eq!(outcome.recognized[0].tool, expected, "{file}");
        assert!(
            outcome.recognized[0].lines.first > 2,
            "{file}: the header is not output"
        );
        assert_eq!(outcome.skipped[0].reason, "provenance comment", "{file}");
        let leftovers: Vec<_> = outcome.skipped.iter().skip(1).collect();
        if file == "collect_env/h100-torch2.11-cu130.txt"
            || file == "collect_env/windows-cpu-only-torch2.8-pytorch-pr137846.txt"
        {
            // The Python warning printed before the report.
            assert_eq!(leftovers.len(), 1, "{file}: {leftovers:?}");
            assert_eq!(leftovers[0].lines.first, 3);
        } else {
            assert!(leftovers.is_empty(), "{file}: {leftovers:?}");
        }
    }
}
