//! Pasted logs through `gpuprobe_detect::triage`, then the lint and the knowledge base, as
//! `gpuprobe triage` runs them: each paste gets the finding that says what happened, or
//! the silence that is right.

use gpuprobe_detect::{TriageInput, triage};
use gpuprobe_kb::lint::lint;
use gpuprobe_kb::{KbMatch, KnowledgeBase, match_all};
use gpuprobe_model::{Finding, Fingerprint, Severity};

fn paste(name: &str, text: &str) -> Fingerprint {
    triage(&[TriageInput {
        name: name.to_owned(),
        text: text.to_owned(),
    }])
    .fingerprint
}

fn fixture(relative: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");
    std::fs::read_to_string(format!("{path}{relative}")).expect("fixture")
}

fn matches(fp: &Fingerprint) -> Vec<KbMatch> {
    match_all(&KnowledgeBase::embedded(), fp, &[])
}

fn ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}

/// A CPU-only collect_env shows a kernel release and no GPU: no entry about a GPU is
/// suspected on the kernel release alone (RKB-007, Strix Halo on kernels < 6.14, was).
#[test]
fn a_cpu_only_collect_env_suspects_no_gpu_entry_from_its_kernel() {
    let fp = paste(
        "env.txt",
        &fixture("collect_env/cpu-only-cu121-no-gpu-vllm-issue4858.txt"),
    );
    assert_eq!(
        fp.host.kernel_release.as_deref(),
        Some("5.15.0-105-generic")
    );
    assert!(fp.gpus.is_empty());
    let found: Vec<String> = matches(&fp).into_iter().map(|m| m.entry.id).collect();
    assert!(found.is_empty(), "{found:?}");
    assert!(lint(&fp).is_empty(), "{:?}", ids(&lint(&fp)));
}

/// The same kernel release still singles an entry out where the paste shows its GPU.
#[test]
fn a_kernel_release_still_counts_where_the_gpu_is_shown() {
    let text = format!(
        "{}\n$ uname -r\n6.8.0-45-generic\n",
        fixture("amd-smi/gfx1151-strix-halo-inbox-kernel-rocm-issue5553.txt")
    );
    let fp = paste("strix.txt", &text);
    let m = matches(&fp);
    let strix = m
        .iter()
        .find(|m| m.entry.id == "RKB-007")
        .expect("RKB-007 on gfx1151 with kernel 6.8");
    assert!(
        strix.held.iter().any(|h| h.contains("6.8.0-45-generic")),
        "{:?}",
        strix.held
    );
}

/// rocm-smi and amd-smi are Linux tools: their pastes rule Windows-only entries out
/// instead of suspecting them with the OS "not shown".
#[test]
fn amd_smi_and_rocm_smi_pastes_rule_windows_entries_out() {
    for file in [
        "amd-smi/2x-rx9070xt-gfx1201-dkms-rocm-issue5812.txt",
        "amd-smi/static-json-gpu-data-constructed.txt",
        "rocm-smi/showhw-gfx90a-2xMI210-rocm-issue5315.txt",
    ] {
        let fp = paste(file, &fixture(file));
        assert_eq!(fp.host.os.as_deref(), Some("linux"), "{file}");
        let windows: Vec<String> = matches(&fp)
            .iter()
            .filter(|m| m.unchecked.iter().any(|u| u.contains("windows")))
            .map(|m| m.entry.id.clone())
            .collect();
        assert!(windows.is_empty(), "{file}: {windows:?}");
    }
}

/// A Radeon 680M (gfx1035, chip id 0x1681) run with `HSA_OVERRIDE_GFX_VERSION=10.3.0`:
/// rocminfo's agent says gfx1030 while its marketing name and chip id say gfx1035.
/// Constructed from the rocminfo layout of ROCm/ROCm#2773 and the 680M sample of
/// ROCm/ROCm#5225; the environment is not in the paste.
const SPOOFED_680M: &str = "\
$ rocminfo
ROCk module is loaded
=====================
HSA System Attributes
=====================
HSA Agents
*******
Agent 2
*******
  Name:                    gfx1030
  Marketing Name:          AMD Radeon 680M
  Device Type:             GPU
  Chip ID:                 5761(0x1681)
  BDFID:                   29696
  Compute Unit:            12
*** Done ***
";

#[test]
fn an_override_at_work_in_a_pasted_rocminfo_is_found_and_the_apu_stays_an_apu() {
    let fp = paste("rocminfo.txt", SPOOFED_680M);
    let gpu = &fp.gpus[0];
    assert_eq!(gpu.native_isa.as_deref(), Some("gfx1035"));
    assert_eq!(gpu.runtime_isa.as_deref(), Some("gfx1030"));
    assert_eq!(gpu.is_apu, Some(true), "the 680M is integrated");
    let findings = lint(&fp);
    let sibling = findings
        .iter()
        .find(|f| f.id == "LINT-OVERRIDE-SIBLING")
        .unwrap_or_else(|| panic!("{:?}", ids(&findings)));
    assert!(
        sibling.title.contains("is gfx1035 but runs as gfx1030"),
        "{}",
        sibling.title
    );
    assert!(
        sibling
            .evidence
            .iter()
            .any(|e| e.text.contains("PCI device id 0x1681")),
        "{:?}",
        sibling.evidence
    );
    // gfx1030-only entries are ruled out by the native ISA (RKB-025 was suspected).
    let m = matches(&fp);
    assert!(m.iter().all(|m| m.entry.id != "RKB-025"));

    // An Instinct part reported as a consumer ISA is the documented failing case.
    let mi210 = SPOOFED_680M
        .replace("AMD Radeon 680M", "AMD Instinct MI210")
        .replace("5761(0x1681)", "29711(0x740f)");
    let findings = lint(&paste("rocminfo.txt", &mi210));
    let harmful = findings
        .iter()
        .find(|f| f.id == "LINT-OVERRIDE-HARMFUL")
        .unwrap_or_else(|| panic!("{:?}", ids(&findings)));
    assert_eq!(harmful.severity, Severity::Error);

    // An agent that reports its own ISA is silent.
    let honest = SPOOFED_680M.replace("gfx1030", "gfx1035");
    let findings = lint(&paste("rocminfo.txt", &honest));
    assert!(
        findings.iter().all(|f| !f.id.starts_with("LINT-OVERRIDE")),
        "{:?}",
        ids(&findings)
    );
}

/// amdgpu's own messages (amdgpu_job.c, amdgpu_device.c): a ring timeout, the reset, and
/// the memory lost with it, as a journal of ROCm/ROCm#5890's kind prints them.
const HANG_WITH_VRAM_LOST: &str = "\
[ 1021.442915] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=1872345, emitted seq=1872347
[ 1021.443268] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process python3 pid 4321 thread python3 pid 4321
[ 1021.443512] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!. Source:  1
[ 1021.701233] amdgpu 0000:03:00.0: amdgpu: MODE1 reset
[ 1021.921877] amdgpu 0000:03:00.0: amdgpu: GPU reset succeeded, trying to resume
[ 1022.122388] [drm] VRAM is lost due to GPU reset!
[ 1022.533011] amdgpu 0000:03:00.0: amdgpu: GPU reset(2) succeeded!
";

#[test]
fn a_pasted_gpu_hang_with_lost_vram_is_an_error_finding() {
    let fp = paste("dmesg.txt", HANG_WITH_VRAM_LOST);
    let findings = lint(&fp);
    assert_eq!(ids(&findings), vec!["LINT-KERNEL-VRAM-LOST"]);
    let f = &findings[0];
    assert_eq!(f.severity, Severity::Error, "exit 1, not 0");
    assert!(f.title.contains("0000:03:00.0"), "{}", f.title);
    assert!(f.title.contains("lost its memory (VRAM)"), "{}", f.title);
    let lines: Vec<&str> = f.evidence.iter().map(|e| e.text.as_str()).collect();
    assert!(
        lines.iter().any(|l| l.contains("ring gfx_0.0.0 timeout")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("VRAM is lost")),
        "{lines:?}"
    );

    // A timeout and a reset without lost memory: a warning.
    let no_loss: String = HANG_WITH_VRAM_LOST
        .lines()
        .filter(|l| !l.contains("VRAM is lost"))
        .map(|l| format!("{l}\n"))
        .collect();
    let findings = lint(&paste("dmesg.txt", &no_loss));
    assert_eq!(ids(&findings), vec!["LINT-KERNEL-GPU-RESET"]);
    assert_eq!(findings[0].severity, Severity::Warning);
    assert!(
        findings[0]
            .title
            .contains("ring gfx_0.0.0 timed out and the GPU was reset"),
        "{}",
        findings[0].title
    );

    // The live machine's own log is the probes' business, not the lint's.
    let mut live = fp.clone();
    live.source = "live".into();
    assert!(lint(&live).is_empty(), "{:?}", ids(&lint(&live)));

    // A log without a hang is silent.
    let quiet = paste(
        "dmesg.txt",
        "[    4.100000] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n",
    );
    assert!(lint(&quiet).is_empty());
}
