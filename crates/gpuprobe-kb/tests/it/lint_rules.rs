//! Every lint rule: a fingerprint that triggers it and one on which it stays quiet, plus the
//! healthy NVIDIA H100 host on which nothing fires at all.

use std::collections::BTreeSet;

use gpuprobe_kb::lint::{lint, rules};
use gpuprobe_model::{Confidence, Finding, FindingLayer, Fingerprint, Severity};
use gpuprobe_model::{DriverSource, FirmwareVersion, TorchDevice};

use crate::fixtures::{amd_gpu, amd_host, env, h100_host, strix_halo_mes_0x83};

fn findings_of(fp: &Fingerprint, id: &str) -> Vec<Finding> {
    lint(fp).into_iter().filter(|f| f.id == id).collect()
}

fn fires(fp: &Fingerprint, id: &str) -> Finding {
    let all = lint(fp);
    all.iter().find(|f| f.id == id).cloned().unwrap_or_else(|| {
        panic!(
            "{id} did not fire; got {:?}",
            all.iter().map(|f| (&f.id, &f.title)).collect::<Vec<_>>()
        )
    })
}

fn quiet(fp: &Fingerprint, id: &str) {
    let found = findings_of(fp, id);
    assert!(
        found.is_empty(),
        "{id} fired: {:?}",
        found.iter().map(|f| &f.title).collect::<Vec<_>>()
    );
}

fn with_env(mut fp: Fingerprint, pairs: &[(&str, &str)]) -> Fingerprint {
    fp.env.extend(env(pairs));
    fp
}

fn with_cmdline(mut fp: Fingerprint, extra: &str) -> Fingerprint {
    let current = fp.host.kernel_cmdline.take().unwrap_or_default();
    fp.host.kernel_cmdline = Some(format!("{current} {extra}"));
    fp
}

fn with_arch_list(mut fp: Fingerprint, list: &[&str]) -> Fingerprint {
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.arch_list = list.iter().map(|s| s.to_string()).collect();
    }
    fp
}

fn with_torch(mut fp: Fingerprint, version: &str) -> Fingerprint {
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.version = version.to_string();
        torch.hip = version
            .split_once("+rocm")
            .map(|(_, rocm)| rocm.to_string());
    }
    fp
}

fn amd(isa: &str) -> Fingerprint {
    amd_host(isa, false, "6.17.0-19-generic", "2.10.0+rocm7.1")
}

/// An AMD host with the override set; the runtime then reports the decoded ISA.
fn override_on(isa: &str, value: &str) -> Fingerprint {
    let mut fp = with_env(amd(isa), &[("HSA_OVERRIDE_GFX_VERSION", value)]);
    if let Ok(decoded) = gpuprobe_model::decode_override(value) {
        fp.gpus[0].runtime_isa = Some(decoded.name());
    }
    fp
}

fn windows(fp: Fingerprint) -> Fingerprint {
    let mut fp = fp;
    fp.host.os = Some("windows".into());
    fp.host.kernel_release = None;
    fp.host.kernel_cmdline = None;
    fp.amdgpu = None;
    fp
}

/// Each rule's trigger and quiet test; `COVERED` lists the rules so a new rule without
/// tests fails `every_rule_has_tests`.
macro_rules! lint_case {
    ($name:ident, $id:literal, trigger: $trigger:expr, quiet: $quiet:expr $(,)?) => {
        mod $name {
            use super::*;

            #[test]
            fn triggers() {
                let finding = fires(&$trigger, $id);
                let rule = gpuprobe_kb::lint::rule($id).unwrap();
                assert_eq!(finding.severity, rule.severity);
                assert_eq!(finding.source, "lint");
                assert!(!finding.citations.is_empty());
                assert!(!finding.evidence.is_empty(), "{} has no evidence", $id);
                // A removal is printed as one: the bare name under "to try" reads as "set it".
                for remedy in &finding.remedies {
                    let action = remedy.action();
                    if remedy.kind == "unset" {
                        let name = remedy.setting.as_deref().unwrap_or_default();
                        assert_eq!(action, format!("unset {name}"), "{}", $id);
                    }
                    if remedy.description.starts_with("Remove") {
                        assert!(
                            action.starts_with("Remove") || action.starts_with("unset "),
                            "{}: {action}",
                            $id
                        );
                    }
                }
            }

            #[test]
            fn stays_quiet() {
                quiet(&$quiet, $id);
            }
        }
    };
}

const COVERED: &[&str] = &[
    "LINT-OVERRIDE-UNNEEDED",
    "LINT-OVERRIDE-NATIVE-SUPPORTED",
    "LINT-OVERRIDE-HARMFUL",
    "LINT-OVERRIDE-CROSS-ISA",
    "LINT-OVERRIDE-SIBLING",
    "LINT-OVERRIDE-MALFORMED",
    "LINT-OVERRIDE-WINDOWS",
    "LINT-OVERRIDE-UNCHECKED",
    "LINT-ENV-NONEXISTENT",
    "LINT-ENV-IGNORED-WINDOWS",
    "LINT-ENV-WRONG-STACK",
    "LINT-SVM-GUARD-PAGES",
    "LINT-NO-CACHING-ALLOCATOR",
    "LINT-NO-CACHING-RDNA4-MITIGATION",
    "LINT-SERIALIZE-LEFT-ON",
    "LINT-CUDA-LAUNCH-BLOCKING",
    "LINT-ALLOC-CONF-SHADOWED",
    "LINT-ALLOC-CONF-UNKNOWN-KEY",
    "LINT-EXPANDABLE-SEGMENTS-ROCM",
    "LINT-KPARAM-GTTSIZE-DEPRECATED",
    "LINT-KPARAM-UNKNOWN",
    "LINT-KPARAM-AMD-IOMMU-PT",
    "LINT-KPARAM-MTYPE-LOCAL",
    "LINT-KPARAM-NORETRY-ZERO",
    "LINT-FIRMWARE-MES-0X83",
    "LINT-KERNEL-RDNA-FAULTS",
    "LINT-DRIVER-DKMS-STRIX-HALO",
    "LINT-ROCM-TOO-OLD",
    "LINT-ARCH-NOT-IN-WHEEL",
    "LINT-IGPU-FIRST",
    "LINT-APU-CARVEOUT",
    "LINT-DEVICE-NODES",
    // Fired and kept quiet in `triage_findings` (pasted kernel logs, through triage).
    "LINT-KERNEL-VRAM-LOST",
    "LINT-KERNEL-GPU-RESET",
    "LINT-CONTAINER-UID",
];

#[test]
fn every_rule_has_tests() {
    let declared: BTreeSet<&str> = rules().iter().map(|r| r.id).collect();
    let covered: BTreeSet<&str> = COVERED.iter().copied().collect();
    assert_eq!(declared, covered);
    assert!(declared.len() >= 15);
}

#[test]
fn every_rule_is_documented_in_docs_lint_md() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lint.md"))
        .unwrap();
    for rule in rules() {
        assert!(doc.contains(rule.id), "docs/lint.md lacks {}", rule.id);
        assert!(!rule.citations.is_empty(), "{} has no citation", rule.id);
    }
}

#[test]
fn the_h100_host_gets_no_lint_finding() {
    let findings = lint(&h100_host());
    assert!(
        findings.is_empty(),
        "{:?}",
        findings
            .iter()
            .map(|f| (&f.id, &f.title))
            .collect::<Vec<_>>()
    );
}

#[test]
fn gfx1030_with_its_own_override_is_unneeded() {
    let finding = fires(&override_on("gfx1030", "10.3.0"), "LINT-OVERRIDE-UNNEEDED");
    assert_eq!(finding.layer, FindingLayer::Config);
    assert!(finding.title.contains("equals GPU 0's native ISA gfx1030"));
    assert!(
        finding
            .remedies
            .iter()
            .any(|r| r.kind == "unset" && r.setting.as_deref() == Some("HSA_OVERRIDE_GFX_VERSION"))
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.text.contains("decodes to gfx1030"))
    );
}

#[test]
fn gfx1031_with_10_3_0_is_a_legitimate_sibling() {
    let fp = with_arch_list(override_on("gfx1031", "10.3.0"), &["gfx1030", "gfx1100"]);
    let all = lint(&fp);
    assert_eq!(
        all.len(),
        1,
        "{:?}",
        all.iter().map(|f| &f.id).collect::<Vec<_>>()
    );
    assert_eq!(all[0].id, "LINT-OVERRIDE-SIBLING");
    assert_eq!(all[0].severity, Severity::Info);
}

#[test]
fn instinct_overridden_to_a_consumer_isa_is_harmful() {
    let finding = fires(&override_on("gfx90a", "10.3.0"), "LINT-OVERRIDE-HARMFUL");
    assert!(finding.title.contains("Instinct"));
}

#[test]
fn the_decoded_override_uses_hex_digits() {
    let fp = with_arch_list(override_on("gfx90a", "9.0.10"), &["gfx942"]);
    assert!(
        fires(&fp, "LINT-OVERRIDE-UNNEEDED")
            .title
            .contains("gfx90a")
    );
}

#[test]
fn expandable_segments_on_new_rocm_torch_mentions_rkb020() {
    let fp = with_env(
        with_torch(amd("gfx1201"), "2.11.0+rocm7.2"),
        &[("PYTORCH_ALLOC_CONF", "expandable_segments:True")],
    );
    assert!(
        fires(&fp, "LINT-EXPANDABLE-SEGMENTS-ROCM")
            .explanation
            .contains("RKB-020")
    );
}

#[test]
fn shadowed_allocator_config_names_the_variable_read() {
    let fp = with_env(
        h100_host(),
        &[
            ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
            ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"),
        ],
    );
    // Released torch reads the CUDA name first (measured on 2.11 and 2.15).
    let finding = fires(&fp, "LINT-ALLOC-CONF-SHADOWED");
    assert!(
        finding
            .title
            .starts_with("Only PYTORCH_CUDA_ALLOC_CONF is read"),
        "{}",
        finding.title
    );
    let old = with_torch(fp, "2.8.0+cu128");
    assert!(
        fires(&old, "LINT-ALLOC-CONF-SHADOWED")
            .title
            .starts_with("Only PYTORCH_CUDA_ALLOC_CONF is read")
    );
}

#[test]
fn container_uid_is_only_suspected() {
    let mut fp = amd("gfx1201");
    fp.host.container = Some("docker".into());
    fp.host.uid = Some(0);
    assert_eq!(
        fires(&fp, "LINT-CONTAINER-UID").confidence,
        Confidence::Suspected
    );
}

#[test]
fn kernel_parameters_are_system_layer() {
    let fp = with_cmdline(amd("gfx1100"), "amdgpu.gttsize=8192");
    assert_eq!(
        fires(&fp, "LINT-KPARAM-GTTSIZE-DEPRECATED").layer,
        FindingLayer::System
    );
}

lint_case!(override_unneeded, "LINT-OVERRIDE-UNNEEDED",
    trigger: override_on("gfx1151", "11.5.1"),
    quiet: amd("gfx1151"));
lint_case!(override_native_supported, "LINT-OVERRIDE-NATIVE-SUPPORTED",
    trigger: override_on("gfx1100", "10.3.0"),
    quiet: with_arch_list(override_on("gfx1031", "10.3.0"), &["gfx1030"]));
lint_case!(override_harmful, "LINT-OVERRIDE-HARMFUL",
    trigger: override_on("gfx1151", "11.0.0"),
    quiet: override_on("gfx1151", "11.5.1"));
lint_case!(override_cross_isa, "LINT-OVERRIDE-CROSS-ISA",
    trigger: with_arch_list(override_on("gfx1103", "10.3.0"), &["gfx1030"]),
    quiet: with_arch_list(override_on("gfx1103", "11.0.0"), &["gfx1100"]));
lint_case!(override_sibling, "LINT-OVERRIDE-SIBLING",
    trigger: with_arch_list(override_on("gfx1152", "11.5.0"), &["gfx1150", "gfx1151"]),
    quiet: override_on("gfx1030", "10.3.0"));
lint_case!(override_malformed, "LINT-OVERRIDE-MALFORMED",
    trigger: override_on("gfx1030", "gfx1030"),
    quiet: override_on("gfx1030", "10.3.0"));
lint_case!(override_windows, "LINT-OVERRIDE-WINDOWS",
    trigger: windows(override_on("gfx1151", "11.5.1")),
    quiet: override_on("gfx1151", "11.5.1"));
lint_case!(override_unchecked, "LINT-OVERRIDE-UNCHECKED",
    trigger: {
        let mut fp = override_on("gfx1030", "10.3.0");
        fp.gpus[0].native_isa = None;
        fp
    },
    quiet: override_on("gfx1030", "10.3.0"));
lint_case!(env_nonexistent, "LINT-ENV-NONEXISTENT",
    trigger: with_env(amd("gfx1151"), &[("HIP_DISABLE_IPC", "1"), ("PYTORCH_MAX_SPLIT_SIZE_MB", "512")]),
    quiet: with_env(amd("gfx1151"), &[("PYTORCH_ALLOC_CONF", "max_split_size_mb:512")]));
lint_case!(env_ignored_windows, "LINT-ENV-IGNORED-WINDOWS",
    trigger: windows(with_env(amd("gfx1201"), &[("HSA_ENABLE_SDMA", "0")])),
    quiet: with_env(amd("gfx1201"), &[("HSA_ENABLE_SDMA", "0")]));
lint_case!(env_wrong_stack, "LINT-ENV-WRONG-STACK",
    trigger: with_env(h100_host(), &[("HSA_ENABLE_SDMA", "0"), ("MIOPEN_FIND_MODE", "2")]),
    quiet: with_env(amd("gfx1100"), &[("HSA_ENABLE_SDMA", "0"), ("MIOPEN_FIND_MODE", "2")]));
lint_case!(svm_guard_pages, "LINT-SVM-GUARD-PAGES",
    trigger: with_env(amd("gfx1201"), &[("HSA_SVM_GUARD_PAGES", "0")]),
    quiet: with_env(amd("gfx1201"), &[("HSA_SVM_GUARD_PAGES", "1")]));
lint_case!(no_caching_allocator, "LINT-NO-CACHING-ALLOCATOR",
    trigger: with_env(amd("gfx1151"), &[("PYTORCH_NO_HIP_MEMORY_CACHING", "1")]),
    quiet: with_env(amd("gfx1151"), &[("PYTORCH_NO_HIP_MEMORY_CACHING", "0")]));
lint_case!(no_caching_rdna4_mitigation, "LINT-NO-CACHING-RDNA4-MITIGATION",
    trigger: with_torch(with_env(amd("gfx1201"), &[("PYTORCH_NO_HIP_MEMORY_CACHING", "1")]), "2.10.0+rocm7.2.1"),
    quiet: with_torch(with_env(amd("gfx1201"), &[("PYTORCH_NO_HIP_MEMORY_CACHING", "1")]), "2.9.0+rocm7.0.2"));
lint_case!(serialize_left_on, "LINT-SERIALIZE-LEFT-ON",
    trigger: with_env(amd("gfx1100"), &[("AMD_SERIALIZE_KERNEL", "3"), ("HIP_LAUNCH_BLOCKING", "1")]),
    quiet: with_env(amd("gfx1100"), &[("AMD_SERIALIZE_KERNEL", "0"), ("AMD_SERIALIZE_COPY", "0")]));
lint_case!(cuda_launch_blocking, "LINT-CUDA-LAUNCH-BLOCKING",
    trigger: with_env(h100_host(), &[("CUDA_LAUNCH_BLOCKING", "1")]),
    quiet: with_env(h100_host(), &[("CUDA_LAUNCH_BLOCKING", "0")]));
lint_case!(alloc_conf_shadowed, "LINT-ALLOC-CONF-SHADOWED",
    trigger: with_env(amd("gfx1100"), &[("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"), ("PYTORCH_HIP_ALLOC_CONF", "garbage_collection_threshold:0.6")]),
    quiet: with_env(h100_host(), &[("PYTORCH_ALLOC_CONF", "max_split_size_mb:128"), ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")]));
lint_case!(alloc_conf_unknown_key, "LINT-ALLOC-CONF-UNKNOWN-KEY",
    trigger: with_env(h100_host(), &[("PYTORCH_ALLOC_CONF", "max_split_size_mb=512,expandible_segments:True")]),
    quiet: with_env(h100_host(), &[("PYTORCH_ALLOC_CONF", "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4]")]));
lint_case!(expandable_segments_rocm, "LINT-EXPANDABLE-SEGMENTS-ROCM",
    trigger: with_env(amd("gfx1100"), &[("PYTORCH_ALLOC_CONF", "expandable_segments:True")]),
    quiet: with_env(h100_host(), &[("PYTORCH_ALLOC_CONF", "expandable_segments:True")]));
lint_case!(kparam_gttsize_deprecated, "LINT-KPARAM-GTTSIZE-DEPRECATED",
    trigger: with_cmdline(amd("gfx1151"), "amdgpu.gttsize=98304"),
    quiet: with_cmdline(amd("gfx1151"), "ttm.pages_limit=25165824"));
lint_case!(kparam_unknown, "LINT-KPARAM-UNKNOWN",
    trigger: with_cmdline(amd("gfx1030"), "amdgpu.noretry=1 amdgpu.gtt_size=8192"),
    quiet: with_cmdline(amd("gfx1030"), "ttm.pages_limit=25165824"));
lint_case!(kparam_amd_iommu_pt, "LINT-KPARAM-AMD-IOMMU-PT",
    trigger: with_cmdline(amd("gfx1151"), "amd_iommu=pt"),
    quiet: with_cmdline(amd("gfx1151"), "amd_iommu=on iommu=pt"));
lint_case!(kparam_mtype_local, "LINT-KPARAM-MTYPE-LOCAL",
    trigger: with_cmdline(amd("gfx1030"), "amdgpu.mtype_local=1"),
    quiet: with_cmdline(amd("gfx942"), "amdgpu.mtype_local=1"));
lint_case!(kparam_noretry_zero, "LINT-KPARAM-NORETRY-ZERO",
    trigger: with_cmdline(amd("gfx1030"), "amdgpu.noretry=0 amdgpu.vm_fragment_size=9"),
    quiet: with_cmdline(amd("gfx90a"), "amdgpu.noretry=0"));
lint_case!(firmware_mes_0x83, "LINT-FIRMWARE-MES-0X83",
trigger: strix_halo_mes_0x83(),
quiet: {
    let mut fp = strix_halo_mes_0x83();
    fp.gpus[0].firmware = vec![FirmwareVersion { name: "MES".into(), feature: Some(1), version: "0x00000080".into() }];
    fp
});
lint_case!(kernel_rdna_faults, "LINT-KERNEL-RDNA-FAULTS",
    trigger: amd_host("gfx1201", false, "6.18.4-arch1-1", "2.10.0+rocm7.1"),
    quiet: amd_host("gfx1201", false, "6.17.9", "2.10.0+rocm7.1"));
lint_case!(driver_dkms_strix_halo, "LINT-DRIVER-DKMS-STRIX-HALO",
trigger: {
    let mut fp = amd_host("gfx1151", true, "6.17.0-20-generic", "2.11.0+rocm7.2");
    if let Some(d) = fp.amdgpu.as_mut() { d.source = DriverSource::Dkms; d.version = Some("6.16.13".into()); }
    fp
},
quiet: {
    let mut fp = amd("gfx1100");
    if let Some(d) = fp.amdgpu.as_mut() { d.source = DriverSource::Dkms; }
    fp
});
lint_case!(rocm_too_old, "LINT-ROCM-TOO-OLD",
    trigger: amd_host("gfx1151", true, "6.17.0-19-generic", "2.8.0+rocm6.4"),
    quiet: amd_host("gfx1151", true, "6.17.0-19-generic", "2.11.0+rocm7.2"));
lint_case!(arch_not_in_wheel, "LINT-ARCH-NOT-IN-WHEEL",
    trigger: with_arch_list(amd("gfx1010"), &["gfx1030", "gfx1100", "gfx1201"]),
    quiet: with_arch_list(amd("gfx1151"), &["gfx11-generic"]));
lint_case!(igpu_first, "LINT-IGPU-FIRST",
trigger: {
    let mut fp = amd("gfx1100");
    fp.gpus = vec![amd_gpu(0, "gfx1036", true), amd_gpu(1, "gfx1100", false)];
    fp
},
quiet: {
    let mut fp = amd("gfx1100");
    fp.gpus = vec![amd_gpu(0, "gfx1100", false), amd_gpu(1, "gfx1036", true)];
    fp
});
lint_case!(apu_carveout, "LINT-APU-CARVEOUT",
    trigger: carveout(15 * 1024 + 500),
    quiet: carveout(96 * 1024));
lint_case!(device_nodes, "LINT-DEVICE-NODES",
    trigger: {
        let mut fp = amd("gfx1100");
        fp.host.inaccessible_device_nodes = vec!["/dev/kfd".into(), "/dev/dri/renderD128".into()];
        fp
    },
    quiet: amd("gfx1100"));
lint_case!(container_uid, "LINT-CONTAINER-UID",
trigger: {
    let mut fp = amd("gfx1201");
    fp.host.container = Some("docker".into());
    fp.host.uid = Some(0);
    fp
},
quiet: {
    let mut fp = amd("gfx1201");
    fp.host.container = Some("docker".into());
    fp.host.uid = Some(1000);
    fp
});

/// A Strix Halo with a 16 GiB carve-out, 96 GiB GTT, and torch reporting `torch_mib`.
fn carveout(torch_mib: u64) -> Fingerprint {
    let mut fp = amd_host("gfx1151", true, "6.17.0-19-generic", "2.11.0+rocm7.2");
    fp.gpus[0].vram_total_bytes = Some(16 << 30);
    fp.gpus[0].gtt_total_bytes = Some(96 << 30);
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.devices = vec![TorchDevice {
            index: 0,
            name: "AMD Radeon 8060S".into(),
            arch: Some("gfx1151".into()),
            total_memory: Some(torch_mib << 20),
            multi_processor_count: Some(40),
            pci_bus: None,
            integrated: Some(true),
        }];
    }
    fp
}

#[test]
fn nvidia_wheel_without_the_gpus_capability_is_flagged() {
    let fp = with_arch_list(h100_host(), &["sm_75", "sm_80", "sm_86"]);
    assert!(fires(&fp, "LINT-ARCH-NOT-IN-WHEEL").title.contains("9.0"));
    quiet(
        &with_arch_list(h100_host(), &["sm_80", "compute_80"]),
        "LINT-ARCH-NOT-IN-WHEEL",
    );
}

#[test]
fn igpu_first_uses_torchs_enumeration_when_known() {
    let mut fp = amd("gfx1100");
    fp.gpus = vec![amd_gpu(0, "gfx1100", false), amd_gpu(1, "gfx1036", true)];
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.devices = vec![
            TorchDevice {
                index: 0,
                name: "AMD Radeon Graphics".into(),
                integrated: Some(true),
                ..TorchDevice::default()
            },
            TorchDevice {
                index: 1,
                name: "AMD Radeon RX 7900 XTX".into(),
                integrated: Some(false),
                ..TorchDevice::default()
            },
        ];
    }
    let finding = fires(&fp, "LINT-IGPU-FIRST");
    assert!(
        finding.title.contains("AMD Radeon Graphics"),
        "{}",
        finding.title
    );
    assert_eq!(
        finding.remedies[0].setting.as_deref(),
        Some("ROCR_VISIBLE_DEVICES=1")
    );
}

#[test]
fn rocm_version_falls_back_to_torch_hip() {
    let mut fp = amd_host("gfx1151", true, "6.17.0-19-generic", "2.8.0");
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.hip = Some("6.4.43484-123".into());
    }
    let finding = fires(&fp, "LINT-ROCM-TOO-OLD");
    assert!(
        finding
            .title
            .contains("ROCm 6.4 (torch.version.hip 6.4.43484-123)"),
        "{}",
        finding.title
    );
}

/// Where the no-caching allocator is the reported mitigation (RDNA4 with ROCm ≥ 7.2), the lint
/// must not tell the user to remove it; on an older stack, or another GPU, it still does.
#[test]
fn no_caching_is_not_called_a_debugging_aid_where_it_is_the_rdna4_mitigation() {
    let caching_off = &[("PYTORCH_NO_HIP_MEMORY_CACHING", "1")];
    let exposed = with_torch(with_env(amd("gfx1200"), caching_off), "2.10.0+rocm7.2.1");
    quiet(&exposed, "LINT-NO-CACHING-ALLOCATOR");
    let finding = fires(&exposed, "LINT-NO-CACHING-RDNA4-MITIGATION");
    assert!(
        finding.remedies.iter().all(|r| r.kind != "unset"),
        "{:?}",
        finding.remedies
    );
    assert!(
        finding.explanation.contains("rocm-libraries#7992"),
        "{}",
        finding.explanation
    );
    for fp in [
        with_torch(with_env(amd("gfx1201"), caching_off), "2.9.0+rocm7.0.2"),
        with_env(amd("gfx1100"), caching_off),
    ] {
        quiet(&fp, "LINT-NO-CACHING-RDNA4-MITIGATION");
        let generic = fires(&fp, "LINT-NO-CACHING-ALLOCATOR");
        assert!(
            generic
                .remedies
                .iter()
                .any(|r| r.action() == "unset PYTORCH_NO_HIP_MEMORY_CACHING")
        );
    }
}

/// The 6.18 regression was reported on 6.18.9 and through 7.0.x (ROCm/amdgpu#225): the rule
/// must not go quiet at 6.18.7, the bound the first reports suggested.
#[test]
fn kernel_rdna_faults_still_fire_on_kernels_after_6_18_6() {
    for kernel in ["6.18.9", "7.0.4-arch1-1"] {
        fires(
            &amd_host("gfx1100", false, kernel, "2.10.0+rocm7.1"),
            "LINT-KERNEL-RDNA-FAULTS",
        );
    }
    quiet(
        &amd_host("gfx1100", false, "6.12.64", "2.10.0+rocm7.1"),
        "LINT-KERNEL-RDNA-FAULTS",
    );
}
