//! Triage on messy pastes: prompts, fences, CRLF, ANSI colours, tabs, wrapped and
//! truncated blocks, several tools and several inputs.

use gpuprobe_detect::{ToolKind, TriageInput, triage};
use gpuprobe_model::{DriverSource, Vendor};

use crate::common::fixture;

/// Fixture text without its two provenance lines.
fn body(file: &str) -> Vec<String> {
    fixture(file).lines().skip(2).map(str::to_owned).collect()
}

struct Paste {
    lines: Vec<String>,
}

impl Paste {
    fn new() -> Paste {
        Paste { lines: Vec::new() }
    }
    /// Appends lines and returns the 1-based number of the first one.
    fn add(&mut self, lines: impl IntoIterator<Item = String>) -> usize {
        let first = self.lines.len() + 1;
        self.lines.extend(lines);
        first
    }
    fn line(&mut self, line: &str) -> usize {
        self.add([line.to_owned()])
    }
    fn crlf(&self) -> String {
        self.lines.join("\r\n") + "\r\n"
    }
}

#[test]
fn one_messy_paste_with_four_tools() {
    let mut p = Paste::new();
    let chatter = p.line("Here is everything from my Strix Halo box, sorry for the mess:");
    p.line("```text");
    let rocminfo_prompt = p.line("\x1b[01;32muser@strix\x1b[00m:\x1b[01;34m~\x1b[00m$ rocminfo");
    // The rocminfo block is cut off inside agent 2's ISA list (no `*** Done ***`), and the
    // agent's BDFID is set to this machine's c5:00.0 so the tools agree.
    let mut rocminfo: Vec<String> = body("rocminfo/gfx1151-rocm-issue5817.txt")
        .into_iter()
        .map(|l| {
            if l.trim_start().starts_with("BDFID:") && l.contains("62464") {
                l.replace("62464", "50432")
            } else {
                l
            }
        })
        .collect();
    rocminfo[0] = "ROCk module is loaded".to_owned();
    let cut = rocminfo
        .iter()
        .position(|l| l.trim() == "ISA 2")
        .expect("ISA 2");
    rocminfo.truncate(cut);
    let rocminfo_len = rocminfo.len();
    let rocminfo_first = p.add(rocminfo);
    let amd_prompt = p.line("user@strix:~$ amd-smi");
    let amd = body("amd-smi/gfx1151-strix-halo-inbox-kernel-rocm-issue5553.txt");
    let amd: Vec<String> = amd.into_iter().skip(1).collect(); // drop the echoed `amd-smi ` line
    let amd_len = amd.len();
    let amd_first = p.add(amd);
    p.line("```");
    p.line("");
    p.line("and the kernel log:");
    p.line("```");
    p.line("$ sudo dmesg | grep amdgpu");
    // Coloured timestamps, and the client line wrapped by the terminal.
    let mut dmesg: Vec<String> = body("dmesg/gfx1151-pagefault-CPF-mes0x83-rocm-issue5724.txt")
        .into_iter()
        .map(|l| l.replacen('[', "\x1b[32m[", 1).replacen(']', "]\x1b[0m", 1))
        .collect();
    let client = dmesg
        .iter()
        .position(|l| l.contains("Faulty UTCL2"))
        .expect("client line");
    let (head, tail) = dmesg[client].split_at(dmesg[client].find("ID:").expect("ID:"));
    let (head, tail) = (head.to_owned(), tail.to_owned());
    dmesg[client] = head;
    dmesg.insert(client + 1, tail);
    let dmesg_len = dmesg.len();
    let dmesg_first = p.add(dmesg);
    p.line("$ cat /proc/cmdline");
    let cmdline = p.line("BOOT_IMAGE=/boot/vmlinuz-6.14.0-1018-oem root=UUID=0b1f ro quiet splash amdgpu.cwsr_enable=0 ttm.pages_limit=27648000");
    p.line("# cat /sys/kernel/debug/dri/128/amdgpu_firmware_info | grep MES");
    let fw = p.line("MES_KIQ feature version: 6, firmware version: 0x0000006f");
    p.line("MES feature version: 1, firmware version: 0x00000083");
    p.line("$ rocm-smi");
    let not_found = p.line("bash: rocm-smi: command not found");
    p.line("```");

    let outcome = triage(&[TriageInput {
        name: "paste.txt".to_owned(),
        text: p.crlf(),
    }]);
    let tools: Vec<ToolKind> = outcome.recognized.iter().map(|r| r.tool).collect();
    assert_eq!(
        tools,
        vec![
            ToolKind::Rocminfo,
            ToolKind::AmdSmi,
            ToolKind::KernelLog,
            ToolKind::Cmdline,
            ToolKind::FirmwareInfo
        ]
    );

    let r = &outcome.recognized[0];
    assert_eq!(r.command.as_deref(), Some("rocminfo"));
    assert_eq!(
        (r.lines.first, r.lines.last),
        (rocminfo_first, rocminfo_first + rocminfo_len - 1)
    );
    assert!(
        r.notes.iter().any(|n| n.starts_with("truncated")),
        "{:?}",
        r.notes
    );
    assert_eq!(rocminfo_prompt + 1, rocminfo_first);
    let a = &outcome.recognized[1];
    assert_eq!(a.command.as_deref(), Some("amd-smi"));
    assert_eq!(
        (a.lines.first, a.lines.last),
        (amd_first, amd_first + amd_len - 1)
    );
    assert_eq!(amd_prompt + 1, amd_first);
    let k = &outcome.recognized[2];
    assert_eq!(k.command.as_deref(), Some("sudo dmesg | grep amdgpu"));
    assert_eq!(
        (k.lines.first, k.lines.last),
        (dmesg_first, dmesg_first + dmesg_len - 1)
    );
    assert_eq!(outcome.recognized[3].lines.first, cmdline);
    assert_eq!(outcome.recognized[4].lines.first, fw);

    let skipped: Vec<(usize, &str)> = outcome
        .skipped
        .iter()
        .map(|s| (s.lines.first, s.reason.as_str()))
        .collect();
    assert!(
        skipped
            .iter()
            .any(|(l, r)| *l == chatter && r.contains("not recognised")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(l, r)| *l == not_found && r.contains("`rocm-smi`")),
        "{skipped:?}"
    );
    assert!(
        skipped.iter().any(|(_, r)| r.contains("not recognised")),
        "the `and the kernel log:` line"
    );

    let fp = &outcome.fingerprint;
    assert_eq!(fp.source, "triage");
    assert_eq!(fp.gpus.len(), 1, "{:#?}", fp.gpus);
    let g = &fp.gpus[0];
    assert_eq!(g.vendor, Vendor::Amd);
    assert_eq!(g.pci_bus.as_deref(), Some("0000:c5:00.0"));
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1151"));
    assert_eq!(g.index, Some(0));
    assert_eq!(g.is_apu, Some(true));
    assert_eq!(g.vram_total_bytes, Some(512 << 20));
    assert_eq!(g.cacheline_bytes, Some(128));
    assert_eq!(
        g.firmware
            .iter()
            .find(|f| f.name == "MES")
            .map(|f| f.version.as_str()),
        Some("0x00000083")
    );
    assert_eq!(
        g.sources,
        vec!["rocminfo", "amd-smi", "amdgpu_firmware_info"]
    );
    assert_eq!(
        fp.amdgpu.as_ref().map(|d| d.source),
        Some(DriverSource::Inbox)
    );
    assert_eq!(
        fp.rocm.as_ref().and_then(|r| r.version.clone()).as_deref(),
        Some("7.0.2")
    );
    assert_eq!(
        fp.host
            .kernel_cmdline
            .as_deref()
            .map(|c| c.contains("amdgpu.cwsr_enable=0")),
        Some(true)
    );
    let fault = fp
        .kernel_events
        .iter()
        .find(|e| e.kind == "page_fault")
        .expect("fault");
    assert_eq!(
        fault.client.as_deref(),
        Some("CPF"),
        "wrapped client line joined and ANSI removed"
    );
    assert_eq!(fault.pid, Some(2419));
}

#[test]
fn override_shows_native_and_runtime_isa() {
    // An RX 6700 XT (Navi 22, gfx1031) run with HSA_OVERRIDE_GFX_VERSION=10.3.0: rocminfo
    // reports gfx1030, rocm-smi's GFX VER (from KFD) stays gfx1031. Constructed from the
    // real layouts; the spacing of the rocm-smi table is TABs.
    let text = "\
$ HSA_OVERRIDE_GFX_VERSION=10.3.0 rocminfo
ROCk module is loaded
=====================
HSA Agents
*******
Agent 2
*******
  Name:                    gfx1030
  Marketing Name:          AMD Radeon RX 6700 XT
  Device Type:             GPU
  Chip ID:                 29663(0x73df)
  BDFID:                   768
  Compute Unit:            40
*** Done ***
$ rocm-smi --showhw
======================= ROCm System Management Interface =======================
GPU\tNODE\tDID\tGUID\tGFX VER\tGFX RAS\tSDMA RAS\tUMC RAS\tVBIOS\tBUS\tPARTITION ID
0\t1\t0x73df\t4321\tgfx1031\tN/A\tN/A\tN/A\t113-D51201-X01\t0000:03:00.0\t0
======================= End of ROCm SMI Log =======================
";
    let outcome = triage(&[TriageInput {
        name: "override.txt".to_owned(),
        text: text.to_owned(),
    }]);
    assert_eq!(
        outcome
            .recognized
            .iter()
            .map(|r| r.tool)
            .collect::<Vec<_>>(),
        vec![ToolKind::Rocminfo, ToolKind::RocmSmi]
    );
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    let fp = &outcome.fingerprint;
    assert_eq!(fp.gpus.len(), 1);
    let g = &fp.gpus[0];
    assert_eq!(g.runtime_isa.as_deref(), Some("gfx1030"));
    assert_eq!(g.native_isa.as_deref(), Some("gfx1031"));
    assert_eq!(g.effective_isa(), Some("gfx1031"));
    assert_eq!(g.pci_device_id.as_deref(), Some("0x73df"));
    assert_eq!(g.vbios.as_deref(), Some("113-D51201-X01"));
    assert_eq!(g.compute_units, Some(40));
}

#[test]
fn several_inputs_and_json_in_a_fence() {
    let json = fixture("amd-smi/static-json-gpu-data-constructed.txt")
        .lines()
        .skip(2)
        .collect::<Vec<_>>()
        .join("\n");
    let first = format!("```json\n{json}\n```\n");
    let second = fixture("nvidia-smi/h100-dashboard.txt");
    let outcome = triage(&[
        TriageInput {
            name: "amd.md".to_owned(),
            text: first,
        },
        TriageInput {
            name: "nvidia.txt".to_owned(),
            text: second,
        },
    ]);
    assert_eq!(outcome.recognized.len(), 2);
    assert_eq!(
        (
            outcome.recognized[0].input.as_str(),
            outcome.recognized[0].tool
        ),
        ("amd.md", ToolKind::AmdSmi)
    );
    assert_eq!(outcome.recognized[0].lines.first, 2);
    assert_eq!(
        (
            outcome.recognized[1].input.as_str(),
            outcome.recognized[1].tool
        ),
        ("nvidia.txt", ToolKind::NvidiaSmi)
    );
    let vendors: Vec<Vendor> = outcome.fingerprint.gpus.iter().map(|g| g.vendor).collect();
    assert_eq!(vendors, vec![Vendor::Amd, Vendor::Nvidia]);
    assert_eq!(
        outcome
            .skipped
            .iter()
            .filter(|s| s.input == "nvidia.txt")
            .count(),
        1,
        "only the provenance header"
    );
}

#[test]
fn nothing_recognisable_is_reported_not_guessed() {
    let outcome = triage(&[TriageInput {
        name: "junk".to_owned(),
        text: "hello\nworld\n\n$ ls\nfoo bar\n".to_owned(),
    }]);
    assert!(!outcome.recognized_anything());
    assert_eq!(outcome.skipped.len(), 2, "{:?}", outcome.skipped);
    assert_eq!(
        (
            outcome.skipped[0].lines.first,
            outcome.skipped[0].lines.last
        ),
        (1, 2)
    );
    assert!(
        outcome.skipped[1].reason.contains("`ls`"),
        "{:?}",
        outcome.skipped[1]
    );
    assert!(outcome.fingerprint.gpus.is_empty());
}

#[test]
fn markdown_quoted_paste_and_dmesg_without_timestamps() {
    let quoted = fixture("dmesg/gfx1151-pagefault-dkms-rocm7.2-rocm-issue5890.txt")
        .lines()
        .skip(2)
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    let outcome = triage(&[TriageInput {
        name: "q".to_owned(),
        text: quoted,
    }]);
    assert_eq!(outcome.recognized.len(), 1);
    assert_eq!(
        outcome.fingerprint.kernel_events[0].client.as_deref(),
        Some("CPF")
    );

    let no_time = "$ dmesg -t\namdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32772)\namdgpu 0000:c2:00.0: amdgpu:  Process python pid 15426 thread python pid 15426\n";
    let outcome = triage(&[TriageInput {
        name: "t".to_owned(),
        text: no_time.to_owned(),
    }]);
    assert_eq!(outcome.recognized.len(), 1);
    assert_eq!(outcome.recognized[0].tool, ToolKind::KernelLog);
    assert_eq!(outcome.fingerprint.kernel_events[0].pid, Some(15426));
}

#[test]
fn collect_env_and_rocminfo_merge_torch_device() {
    let text = format!(
        "$ python -m torch.utils.collect_env\n{}\n$ rocminfo\n{}\n",
        fixture("collect_env/gfx1151-therock-nightly-rocm-issue5890.txt")
            .lines()
            .skip(2)
            .collect::<Vec<_>>()
            .join("\n"),
        fixture("rocminfo/gfx1151-rocm-issue5817.txt")
            .lines()
            .skip(2)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let outcome = triage(&[TriageInput {
        name: "both".to_owned(),
        text,
    }]);
    assert_eq!(
        outcome
            .recognized
            .iter()
            .map(|r| r.tool)
            .collect::<Vec<_>>(),
        vec![ToolKind::CollectEnv, ToolKind::Rocminfo]
    );
    let fp = &outcome.fingerprint;
    assert_eq!(fp.gpus.len(), 1, "{:#?}", fp.gpus);
    assert_eq!(fp.gpus[0].index, Some(0));
    assert_eq!(fp.gpus[0].pci_bus.as_deref(), Some("0000:f4:00.0"));
    assert_eq!(fp.host.kernel_release.as_deref(), Some("6.17.0-8-generic"));
    assert_eq!(
        fp.amdgpu.as_ref().map(|d| d.source),
        Some(DriverSource::Dkms)
    );
}

#[test]
fn a_linux_only_tool_proves_the_os_and_a_portable_one_does_not() {
    let linux = triage(&[TriageInput {
        name: "rocminfo.txt".to_owned(),
        text: fixture("rocminfo/gfx1151-rocm-issue5817.txt"),
    }]);
    assert_eq!(linux.fingerprint.host.os.as_deref(), Some("linux"));
    assert_eq!(
        linux
            .fingerprint
            .extra
            .get("triage.os_inferred_from")
            .map(String::as_str),
        Some("rocminfo")
    );
    // nvidia-smi also runs on Windows: it says nothing about the OS.
    let portable = triage(&[TriageInput {
        name: "nvidia-smi.txt".to_owned(),
        text: fixture("nvidia-smi/h100-dashboard.txt"),
    }]);
    assert_eq!(portable.fingerprint.host.os, None);
}

/// A collect_env paste from a machine where torch sees no CUDA device: recognised, and no
/// GPU or driver is made out of its `No CUDA` placeholders.
#[test]
fn triage_of_a_cpu_only_collect_env_invents_no_gpu() {
    let outcome = triage(&[TriageInput {
        name: "env.txt".to_owned(),
        text: fixture("collect_env/cpu-only-cu121-no-gpu-vllm-issue4858.txt"),
    }]);
    assert_eq!(outcome.recognized.len(), 1, "{:?}", outcome.recognized);
    let block = &outcome.recognized[0];
    assert_eq!(block.tool, ToolKind::CollectEnv);
    assert!(
        block.summary.contains("no GPU available to torch"),
        "{}",
        block.summary
    );
    let fp = &outcome.fingerprint;
    assert!(fp.gpus.is_empty(), "{:?}", fp.gpus);
    assert!(fp.nvidia.is_none(), "{:?}", fp.nvidia);
    let text = gpuprobe_detect::render_text(fp);
    assert!(!text.contains("No CUDA"), "{text}");
}

/// A Windows collect_env paste is recognised as Windows, with the GPU torch reports; no
/// Linux-only tool's output is in it, so nothing says Linux.
#[test]
fn triage_recognises_a_windows_collect_env() {
    let outcome = triage(&[TriageInput {
        name: "env.txt".to_owned(),
        text: fixture("collect_env/windows-rx9070xt-gfx1201-hip6.4-rocm-issue5441.txt"),
    }]);
    assert_eq!(outcome.recognized.len(), 1, "{:?}", outcome.recognized);
    let block = &outcome.recognized[0];
    assert_eq!(block.tool, ToolKind::CollectEnv);
    assert!(block.summary.contains("ROCm build"), "{}", block.summary);
    assert!(block.summary.contains("Windows"), "{}", block.summary);
    let fp = &outcome.fingerprint;
    assert_eq!(fp.host.os.as_deref(), Some("windows"));
    assert!(!fp.extra.contains_key("triage.os_inferred_from"));
    assert_eq!(fp.gpus.len(), 1);
    assert_eq!(fp.gpus[0].vendor, Vendor::Amd);
    assert_eq!(fp.gpus[0].runtime_isa.as_deref(), Some("gfx1201"));
    let text = gpuprobe_detect::render_text(fp);
    assert!(text.contains("Microsoft Windows 11 Pro"), "{text}");
    assert!(text.contains("Windows build 10.0.26100"), "{text}");
    assert!(!text.contains("10.0.26100 64-bit"), "not a CPU: {text}");
}

/// The tail of a file too large to read whole is triaged as its own part: its blocks and
/// events keep the file's line numbers, and a page fault storm across head and tail is
/// one class with its first line in the head and its last in the tail.
#[test]
fn a_tail_part_keeps_the_input_line_numbers_and_events_are_summarised_per_class() {
    use gpuprobe_detect::Triager;

    let fault = |t: usize| {
        format!(
            "[{t}.000000] amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:{t})\n\
             [{t}.000001] amdgpu 0000:c5:00.0: amdgpu:  Faulty UTCL2 client ID: CPF (0x4)\n"
        )
    };
    let head: String = (0..100).map(fault).collect();
    let mut tail: String = (500..600).map(fault).collect();
    tail.push_str("[601.000000] amdgpu 0000:c5:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1, emitted seq=3\n");
    let mut triager = Triager::new();
    triager.add("big.log", head, 1);
    triager.add("big.log", tail, 1001);
    let outcome = triager.finish();

    let ranges: Vec<(usize, usize)> = outcome
        .recognized
        .iter()
        .map(|r| (r.lines.first, r.lines.last))
        .collect();
    assert_eq!(ranges, vec![(1, 200), (1001, 1201)]);
    assert!(
        outcome.recognized[1]
            .summary
            .contains("100 page_fault, 1 ring_timeout"),
        "{:?}",
        outcome.recognized[1]
    );
    let summary = &outcome.kernel_log;
    assert_eq!(summary.events, 201);
    assert_eq!(summary.classes.len(), 2);
    let storm = &summary.classes[0];
    assert_eq!(
        storm.label,
        "page_fault client CPF (gfxhub) on 0000:c5:00.0"
    );
    assert_eq!(storm.count, 200);
    assert_eq!((storm.first.line, storm.last.line), (1, 1199));
    assert_eq!(storm.last.time.as_deref(), Some("599.000000"));
    let timeout = &summary.classes[1];
    assert_eq!(timeout.label, "ring_timeout ring gfx_0.0.0 on 0000:c5:00.0");
    assert_eq!(timeout.first.line, 1201);
    // The fingerprint keeps samples (first and last of each class), each located.
    let events = &outcome.fingerprint.kernel_events;
    assert_eq!(events.len(), summary.kept.len());
    assert_eq!(events.len() + summary.left_out, 201);
    assert!(events.len() <= 6, "{events:?}");
    assert_eq!(events[0].client.as_deref(), Some("CPF"));
    assert_eq!(summary.kept[0].line, 1);
    assert_eq!(outcome.fingerprint.host.os.as_deref(), Some("linux"));
}

/// rocm-smi 5.x's concise table numbers its rows but shows no device id, ISA or PCI
/// address: the rows are not GPUs of the fingerprint, and the summary does not count them
/// as GPUs either (it said "2 GPU(s)" beside a GPU list of none).
#[test]
fn rocm_smi_rows_without_identity_are_not_counted_as_gpus() {
    let outcome = triage(&[TriageInput {
        name: "rocm-smi.txt".to_owned(),
        text: fixture("rocm-smi/w7900-gfx1100-plus-igpu-rocm-issue2681.txt"),
    }]);
    assert!(outcome.fingerprint.gpus.is_empty());
    let block = &outcome.recognized[0];
    assert_eq!(block.tool, ToolKind::RocmSmi);
    assert_eq!(
        block.summary,
        "concise table, 2 GPU row(s), none identified"
    );
    assert!(
        block.notes.iter().any(|n| n.contains("not listed as GPUs")),
        "{:?}",
        block.notes
    );
    // rocm-smi reads the amdgpu driver's sysfs: a Linux tool.
    assert_eq!(outcome.fingerprint.host.os.as_deref(), Some("linux"));
    // Rows that say which GPU they are still count.
    let showhw = triage(&[TriageInput {
        name: "showhw.txt".to_owned(),
        text: fixture("rocm-smi/showhw-gfx90a-2xMI210-rocm-issue5315.txt"),
    }]);
    assert_eq!(showhw.recognized[0].summary, "hardware table, 2 GPU(s)");
    assert_eq!(showhw.fingerprint.gpus.len(), 2);
}

/// amdgpu's reset messages each make their own class: `MODE1 reset` (any case) and
/// `VRAM is lost due to GPU reset!`, which was counted as a plain "GPU reset".
#[test]
fn gpu_reset_messages_name_what_the_reset_did() {
    let text = "\
[ 1021.442915] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=1872345, emitted seq=1872347
[ 1021.443512] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!. Source:  1
[ 1021.701233] amdgpu 0000:03:00.0: amdgpu: MODE1 reset
[ 1021.701455] amdgpu 0000:03:00.0: amdgpu: GPU mode1 reset
[ 1022.122388] [drm] VRAM is lost due to GPU reset!
";
    let outcome = triage(&[TriageInput {
        name: "dmesg.txt".to_owned(),
        text: text.to_owned(),
    }]);
    let labels: Vec<&str> = outcome
        .kernel_log
        .classes
        .iter()
        .map(|c| c.label.as_str())
        .collect();
    assert_eq!(
        labels,
        vec![
            "ring_timeout ring gfx_0.0.0",
            "gpu_reset GPU reset begin on 0000:03:00.0",
            "gpu_reset MODE1 reset on 0000:03:00.0",
            "gpu_reset mode1 reset on 0000:03:00.0",
            "gpu_reset VRAM is lost due to GPU reset",
        ]
    );
}

/// Laptop parts append a letter to a desktop model number and are another chip: the
/// marketing-name table does not read `RX 6800M` as the RX 6800's gfx1030.
#[test]
fn marketing_names_match_whole_model_numbers() {
    use gpuprobe_detect::amd_isa_from_name;
    assert_eq!(amd_isa_from_name("AMD Radeon RX 6800 XT"), Some("gfx1030"));
    assert_eq!(amd_isa_from_name("AMD Radeon RX 6800M"), None);
    assert_eq!(amd_isa_from_name("AMD Radeon RX 6800S"), None);
    assert_eq!(amd_isa_from_name("AMD Instinct MI250X"), Some("gfx90a"));
    assert_eq!(amd_isa_from_name("AMD Radeon 780M"), Some("gfx1103"));
}
