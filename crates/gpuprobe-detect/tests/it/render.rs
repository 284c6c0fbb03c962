//! The readable view for `gpuprobe env` and the JSON round trip.

use gpuprobe_detect::{TriageInput, render_text, triage};
use gpuprobe_model::Fingerprint;

use crate::collect_fake::nvidia_host_fingerprint;
use crate::common::fixture;

#[test]
fn sections_are_present_and_aligned() {
    let fp = nvidia_host_fingerprint();
    let text = render_text(&fp);
    for section in [
        "Host (live)",
        "GPUs",
        "Drivers",
        "ROCm / HIP",
        "CUDA",
        "Python",
        "Environment",
        "Not readable",
    ] {
        assert!(
            text.lines().any(|l| l == section),
            "missing section {section}:\n{text}"
        );
    }
    assert!(
        text.contains("  GPU 0            NVIDIA H100 80GB HBM3\n"),
        "{text}"
    );
    assert!(
        text.contains("NVIDIA · PCI 0000:00:06.0 (0x10de:0x2330 rev 0xa1)"),
        "{text}"
    );
    assert!(
        text.contains("virtual machine: firecracker · container: docker"),
        "{text}"
    );
    assert!(text.contains("  Secure Boot      unknown\n"), "{text}");
    assert!(!text.contains('\x1b'), "no colour codes");
    // Every row's value starts in the same column of its section: some column where all
    // rows of the section have a blank followed by text.
    let mut section = String::new();
    let mut rows: Vec<&str> = Vec::new();
    let aligned = |rows: &[&str]| {
        let starts = |row: &str| -> Vec<usize> {
            let b = row.as_bytes();
            (3..b.len())
                .filter(|&i| b[i - 1] == b' ' && b[i] != b' ')
                .collect()
        };
        let Some(first) = rows.first() else {
            return true;
        };
        starts(first)
            .into_iter()
            .any(|c| rows.iter().all(|r| starts(r).contains(&c)))
    };
    for line in text.lines().chain(std::iter::once("END")) {
        if !line.starts_with(' ') && !line.is_empty() {
            assert!(
                section == "Not readable" || aligned(&rows),
                "section {section} is not aligned:\n{text}"
            );
            section = line.to_owned();
            rows.clear();
        } else if !line.trim().is_empty() {
            rows.push(line);
        }
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("  NVIDIA_VISIBLE_DEVICES ")),
        "{text}"
    );
}

#[test]
fn triage_view_says_not_shown_instead_of_absent() {
    let outcome = triage(&[TriageInput {
        name: "r".to_owned(),
        text: fixture("rocminfo/gfx1151-rocm-issue5817.txt"),
    }]);
    let text = render_text(&outcome.fingerprint);
    assert!(text.starts_with("Host (triage)\n"));
    assert!(
        text.contains("  nvidia           not shown in the logs\n"),
        "{text}"
    );
    // The chip id (0x1586) says gfx1151 too, so runtime and hardware agree.
    assert!(
        text.contains("ISA gfx1151 · 40 CUs · APU (shares system memory)"),
        "{text}"
    );
    assert!(
        text.contains("amdgpu           loaded, DKMS build 6.16.6"),
        "{text}"
    );
}

#[test]
fn fingerprint_round_trips_through_json() {
    let fp = nvidia_host_fingerprint();
    let json = serde_json::to_string(&fp).expect("serialises");
    let back: Fingerprint = serde_json::from_str(&json).expect("deserialises");
    assert_eq!(back, fp);
}

/// Many kernel events (a live fault storm) render one row per class, not one per event.
#[test]
fn many_kernel_events_are_summarised_per_class() {
    use gpuprobe_model::KernelEvent;

    let mut fp = Fingerprint::default();
    for i in 0..500 {
        fp.kernel_events.push(KernelEvent {
            kind: "page_fault".to_owned(),
            time: Some(format!("{i}.5")),
            pci_bus: Some("0000:c5:00.0".to_owned()),
            client: Some(if i % 2 == 0 { "CPF" } else { "TCP\x1b]0;x\x07" }.to_owned()),
            process: Some("python3".to_owned()),
            pid: Some(i),
            library: None,
            details: Default::default(),
            line: format!("[{i}.5] page fault"),
        });
    }
    let text = render_text(&fp);
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Kernel log")
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(section.len(), 4, "{text}");
    assert!(section[1].contains("500 in 2 classes"), "{text}");
    assert!(
        section[2].contains("250 ×")
            && section[2].contains("page_fault client CPF on 0000:c5:00.0, first 0.5, last 498.5"),
        "{text}"
    );
    assert!(section[3].contains("client TCP\\x1b]0;x\\x07"), "{text}");
}

/// The cuDNN and NCCL torch loaded are shown apart from those it was built with; a CPU-only
/// torch says it has neither; a ROCm build names MIOpen and RCCL.
#[test]
fn loaded_dnn_and_collective_libraries_are_shown() {
    let mut fp = nvidia_host_fingerprint();
    fp.python = Some(gpuprobe_model::PythonEnv {
        torch: Some(gpuprobe_model::TorchInfo {
            version: "2.11.0+cu130".into(),
            cuda: Some("13.0".into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    let loaded_row = |fp: &Fingerprint| {
        render_text(fp)
            .lines()
            .find(|l| l.trim_start().starts_with("Loaded "))
            .map(|l| l.trim().to_owned())
    };
    let torch = fp.python.as_mut().unwrap().torch.as_mut().unwrap();
    torch.cudnn_runtime = Some("9.26.0".into());
    torch.nccl_runtime = Some("2.30.7".into());
    let row = loaded_row(&fp).expect("a Loaded row");
    assert!(row.ends_with("cuDNN 9.26.0 · NCCL 2.30.7"), "{row}");

    // A GPU build that reported neither (an older worker's report): no claim either way.
    let torch = fp.python.as_mut().unwrap().torch.as_mut().unwrap();
    torch.cudnn_runtime = None;
    torch.nccl_runtime = None;
    assert_eq!(loaded_row(&fp), None);

    let torch = fp.python.as_mut().unwrap().torch.as_mut().unwrap();
    torch.cuda = None;
    let row = loaded_row(&fp).expect("a Loaded row");
    assert!(
        row.ends_with("no cuDNN or NCCL (a CPU-only torch)"),
        "{row}"
    );

    let torch = fp.python.as_mut().unwrap().torch.as_mut().unwrap();
    torch.hip = Some("7.2".into());
    torch.cudnn_runtime = Some("3.5.1".into());
    let row = loaded_row(&fp).expect("a Loaded row");
    assert!(row.ends_with("MIOpen 3.5.1"), "{row}");
}

/// A conda environment's packages are listed as conda names them, apart from pip's, with
/// the records that could not be read; a package conda installed is not listed twice.
#[test]
fn conda_packages_are_shown_as_conda_names_them() {
    use gpuprobe_model::{CondaEnv, CondaPackage, PythonEnv};
    let mut fp = nvidia_host_fingerprint();
    let record = |version: &str, build: &str, channel: &str| CondaPackage {
        version: version.into(),
        build: build.into(),
        channel: channel.into(),
    };
    fp.python = Some(PythonEnv {
        packages: [
            ("torch", "2.1.0"),
            ("numpy", "1.26.0"),
            ("pytorch", "2.1.0"),
            ("cudatoolkit", "11.8.0"),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect(),
        conda: Some(CondaEnv {
            prefix: "/opt/conda/envs/train".into(),
            packages: [
                (
                    "pytorch",
                    record("2.1.0", "py3.10_cuda12.1_cudnn8.9.2_0", "pytorch"),
                ),
                ("cudatoolkit", record("11.8.0", "h6a678d5_0", "nvidia")),
                ("numpy", record("1.26.0", "", "")),
            ]
            .into_iter()
            .map(|(n, r)| (n.to_owned(), r))
            .collect(),
            skipped: vec!["cudnn-9.1.json: not JSON: \u{1b}]0;x".into()],
        }),
        ..Default::default()
    });
    let text = render_text(&fp);
    let row = |key: &str| {
        text.lines()
            .skip_while(|l| !l.trim_start().starts_with(key))
            .take_while(|l| l.trim_start().starts_with(key) || l.starts_with("                "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let packages = row("Packages");
    assert!(packages.ends_with("torch==2.1.0"), "{text}");
    let conda = row("Conda");
    assert!(
        conda.contains("/opt/conda/envs/train · 3 relevant package(s) installed by conda"),
        "{text}"
    );
    for spec in [
        "nvidia::cudatoolkit=11.8.0=h6a678d5_0",
        "numpy=1.26.0",
        "pytorch::pytorch=2.1.0=py3.10_cuda12.1_cudnn8.9.2_0",
    ] {
        assert!(conda.contains(spec), "{spec}\n{text}");
    }
    assert!(
        conda.contains("skipped cudnn-9.1.json: not JSON: \\x1b]0;x"),
        "{text}"
    );
}
