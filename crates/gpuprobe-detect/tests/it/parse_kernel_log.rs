//! Kernel log events from the real dmesg and journalctl excerpts.

use gpuprobe_detect::parse::kernel_log::{self, kind};

use crate::common::fixture;

#[test]
fn cpf_fault_with_mes_0x83_new_wording_and_tabs() {
    let log = kernel_log::parse(&fixture(
        "dmesg/gfx1151-pagefault-CPF-mes0x83-rocm-issue5724.txt",
    ))
    .expect("parses");
    assert_eq!(log.log_lines, 11);
    assert_eq!(log.events.len(), 2);
    let fault = &log.events[0];
    assert_eq!(fault.kind, kind::PAGE_FAULT);
    assert_eq!(fault.time.as_deref(), Some("651.971687"));
    assert_eq!(fault.pci_bus.as_deref(), Some("0000:c5:00.0"));
    assert_eq!(fault.client.as_deref(), Some("CPF"));
    assert_eq!(fault.process.as_deref(), Some("VLLM::EngineCor"));
    assert_eq!(fault.pid, Some(2419));
    let d = &fault.details;
    assert_eq!(d.get("hub").map(String::as_str), Some("gfxhub"));
    assert_eq!(d.get("ring").map(String::as_str), Some("153"));
    assert_eq!(d.get("vmid").map(String::as_str), Some("8"));
    assert_eq!(d.get("pasid").map(String::as_str), Some("32771"));
    assert_eq!(
        d.get("address").map(String::as_str),
        Some("0x00007f58f8001000")
    );
    assert_eq!(d.get("client_id").map(String::as_str), Some("10"));
    assert_eq!(d.get("status").map(String::as_str), Some("0x00800932"));
    assert_eq!(d.get("client_code").map(String::as_str), Some("0x4"));
    assert_eq!(d.get("walker_error").map(String::as_str), Some("0x1"));
    assert_eq!(d.get("mapping_error").map(String::as_str), Some("0x1"));
    assert_eq!(d.get("permission_faults").map(String::as_str), Some("0x3"));
    assert_eq!(d.get("more_faults").map(String::as_str), Some("0x0"));
    assert_eq!(d.get("rw").map(String::as_str), Some("0x0"));
    assert!(fault.line.contains("[gfxhub] page fault"));
    assert_eq!(log.events[1].kind, kind::QUEUE_EVICTED);
    assert_eq!(log.events[1].time.as_deref(), Some("652.292990"));
}

#[test]
fn cpf_fault_dkms() {
    let log = kernel_log::parse(&fixture(
        "dmesg/gfx1151-pagefault-dkms-rocm7.2-rocm-issue5890.txt",
    ))
    .expect("parses");
    assert_eq!(log.events.len(), 1);
    let fault = &log.events[0];
    assert_eq!(fault.pci_bus.as_deref(), Some("0000:c2:00.0"));
    assert_eq!(fault.client.as_deref(), Some("CPF"));
    assert_eq!(fault.process.as_deref(), Some("python"));
    assert_eq!(fault.pid, Some(15426));
    assert_eq!(
        fault.details.get("pasid").map(String::as_str),
        Some("32772")
    );
}

#[test]
fn tcp_fault_old_wording() {
    let log = kernel_log::parse(&fixture(
        "dmesg/gfx1035-override-pagefault-TCP-rocm-issue5225.txt",
    ))
    .expect("parses");
    let faults: Vec<_> = log.of_kind(kind::PAGE_FAULT).collect();
    assert_eq!(faults.len(), 2);
    assert_eq!(faults[0].client.as_deref(), Some("TCP"));
    assert_eq!(faults[0].process.as_deref(), Some("python3"));
    assert_eq!(faults[0].pid, Some(3710));
    assert_eq!(
        faults[0].details.get("client_id").map(String::as_str),
        Some("0x1b (UTCL2)")
    );
    assert_eq!(
        faults[0].details.get("status").map(String::as_str),
        Some("0x00801031")
    );
    assert_eq!(
        faults[0].details.get("more_faults").map(String::as_str),
        Some("0x1")
    );
    // The second fault is cut off before its client line.
    assert_eq!(faults[1].client, None);
    assert_eq!(
        faults[1].details.get("address").map(String::as_str),
        Some("0x00007a6efabbb000")
    );
}

#[test]
fn sdma0_fault_in_journal_format_with_interleaved_lines() {
    let log = kernel_log::parse(&fixture(
        "journalctl/gfx1100-pagefault-SDMA0-kernel6.18-rocm-issue5051.txt",
    ))
    .expect("parses");
    assert_eq!(log.log_lines, 22);
    let faults: Vec<_> = log.of_kind(kind::PAGE_FAULT).collect();
    assert_eq!(faults.len(), 4);
    let first = faults[0];
    assert_eq!(first.time.as_deref(), Some("Jan 09 18:55:45"));
    assert_eq!(first.pci_bus.as_deref(), Some("0000:0b:00.0"));
    assert_eq!(
        first.client.as_deref(),
        Some("SDMA0"),
        "spaces instead of the TAB"
    );
    assert_eq!(
        first.details.get("client_code").map(String::as_str),
        Some("0xd")
    );
    assert_eq!(
        first.details.get("status").map(String::as_str),
        Some("0x00801A31")
    );
    assert_eq!(
        first.process.as_deref(),
        Some("python"),
        "the systemd-coredump line in between does not end the fault"
    );
    assert_eq!(first.pid, Some(91762));
    assert!(
        faults[1..]
            .iter()
            .all(|f| f.pid == Some(91762) && f.client.is_none())
    );
}

#[test]
fn libhsa_segfault() {
    let log = kernel_log::parse(&fixture(
        "dmesg/gfx1151-libhsa-segfault-torch.randn-rocm-issue5890.txt",
    ))
    .expect("parses");
    assert_eq!(log.events.len(), 1);
    let ev = &log.events[0];
    assert_eq!(ev.kind, kind::SEGFAULT);
    assert_eq!(ev.process.as_deref(), Some("python"));
    assert_eq!(ev.pid, Some(16015));
    assert_eq!(
        ev.library.as_deref(),
        Some("libhsa-runtime64.so.1.18.70200")
    );
    assert_eq!(ev.time.as_deref(), Some("9570.812114"));
}

#[test]
fn ring_timeout_reset_mes_xid_and_userspace_fault() {
    let text = "\
[ 100.000001] amdgpu 0000:03:00.0: [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=1234, emitted seq=1236
[ 100.000002] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!
[ 100.000003] amdgpu 0000:03:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE
[ 100.000004] amdgpu 0000:03:00.0: amdgpu: GPU reset(2) succeeded!
[ 100.000005] bash[777]: segfault at 0 ip 0 sp 0 error 4 in libc.so.6[1000,7f00+1000]
[ 200.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 200.000001] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address
Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: Page not present or supervisor privilege.
";
    let log = kernel_log::parse(text).expect("parses");
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            kind::RING_TIMEOUT,
            kind::GPU_RESET,
            kind::MES_FAILURE,
            kind::GPU_RESET,
            kind::XID,
            kind::XID,
            kind::HSA_MEMORY_FAULT
        ]
    );
    assert_eq!(
        log.events[0].details.get("ring").map(String::as_str),
        Some("gfx_0.0.0")
    );
    assert_eq!(
        log.events[0].details.get("emitted_seq").map(String::as_str),
        Some("1236")
    );
    assert_eq!(log.events[0].pci_bus.as_deref(), Some("0000:03:00.0"));
    assert_eq!(
        log.events[2].details.get("msg").map(String::as_str),
        Some("REMOVE_QUEUE")
    );
    let xid = &log.events[4];
    assert_eq!(xid.pci_bus.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(xid.details.get("xid").map(String::as_str), Some("79"));
    assert_eq!(xid.pid, None);
    assert_eq!(xid.process, None);
    assert_eq!(log.events[5].pid, Some(4242));
    assert_eq!(log.events[5].process.as_deref(), Some("python"));
    let hsa = &log.events[6];
    assert_eq!(hsa.details.get("node").map(String::as_str), Some("1"));
    assert_eq!(
        hsa.details.get("address").map(String::as_str),
        Some("0x7f2a53193000")
    );
    assert_eq!(
        hsa.details.get("reason").map(String::as_str),
        Some("Page not present or supervisor privilege.")
    );
}

#[test]
fn kmsg_records_parse_like_dmesg() {
    let text = "6,1234,651971687,-;amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32771)\n SUBSYSTEM=pci\n3,1235,651971741,-;amdgpu 0000:c5:00.0: amdgpu: \t Faulty UTCL2 client ID: CPF (0x4)\n";
    let log = kernel_log::parse(text).expect("parses");
    assert_eq!(log.events.len(), 1);
    assert_eq!(log.events[0].time.as_deref(), Some("651.971687"));
    assert_eq!(log.events[0].client.as_deref(), Some("CPF"));
}

#[test]
fn human_and_iso_timestamps() {
    let text = "[Fri Jan  9 18:55:45 2026] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!\n2026-01-09T18:55:46+0100 host kernel: amdgpu 0000:03:00.0: amdgpu: GPU reset(1) succeeded!\n";
    let log = kernel_log::parse(text).expect("parses");
    assert_eq!(log.log_lines, 2);
    assert_eq!(log.events.len(), 2);
    assert_eq!(
        log.events[0].time.as_deref(),
        Some("Fri Jan  9 18:55:45 2026")
    );
    assert_eq!(
        log.events[0].details.get("what").map(String::as_str),
        Some("GPU reset begin")
    );
    assert_eq!(
        log.events[1].time.as_deref(),
        Some("2026-01-09T18:55:46+0100")
    );
    assert_eq!(
        log.events[1].details.get("what").map(String::as_str),
        Some("GPU reset(1) succeeded")
    );
}
