//! The build-environment readers on the real samples of `fixtures/env/`: compiler banners,
//! the glibc banner inside `libc.so.6`, library version headers, `lscpu`.

use gpuprobe_detect::parse::buildinfo::{
    Tool, cpu_list, glibc_version, header_version, lscpu, tool_banner,
};

use crate::common::fixture;

/// A fixture without its two provenance lines.
fn body(relative: &str) -> String {
    fixture(relative)
        .lines()
        .skip(2)
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn gcc_banner_keeps_the_distribution_note() {
    let b = tool_banner(Tool::Gcc, &body("env/gcc-version-debian12.txt")).expect("gcc");
    assert_eq!(b.banner, "gcc (Debian 12.2.0-14+deb12u1) 12.2.0");
    assert_eq!(b.version.as_deref(), Some("12.2.0"));
}

#[test]
fn nvcc_version_is_the_v_number() {
    let b = tool_banner(Tool::Nvcc, &body("env/nvcc-version-cuda13.0.txt")).expect("nvcc");
    assert_eq!(b.banner, "Cuda compilation tools, release 13.0, V13.0.88");
    assert_eq!(b.version.as_deref(), Some("13.0.88"));
}

#[test]
fn cmake_version() {
    let b = tool_banner(Tool::Cmake, &body("env/cmake-version-3.28.3.txt")).expect("cmake");
    assert_eq!(b.banner, "cmake version 3.28.3");
    assert_eq!(b.version.as_deref(), Some("3.28.3"));
}

#[test]
fn hipcc_and_its_clang_banner() {
    let text = body("env/hipcc-version-rocm6.2-rocm-issue3598.txt");
    let hip = tool_banner(Tool::Hipcc, &text).expect("hipcc");
    assert_eq!(hip.version.as_deref(), Some("6.2.41133-dd7f95766"));
    let clang = tool_banner(Tool::Clang, &text).expect("clang banner");
    assert!(
        clang.banner.starts_with("AMD clang version 18.0.0git ("),
        "{clang:?}"
    );
    assert_eq!(clang.version.as_deref(), Some("18.0.0git"));
    // A tool's banner is not mistaken for another's.
    assert_eq!(tool_banner(Tool::Nvcc, &text), None);
    assert_eq!(
        tool_banner(Tool::Gcc, &body("env/nvcc-version-cuda13.0.txt")),
        None
    );
}

#[test]
fn glibc_from_the_library_bytes() {
    let banner = body("env/libc-banner-glibc2.36-debian12.txt");
    let mut bytes = vec![0u8, 0x7f, b'E', b'L', b'F', 0];
    bytes.extend_from_slice(banner.trim_end().as_bytes());
    bytes.extend_from_slice(b"\0Compiled by GNU CC version 12.2.0.\0");
    assert_eq!(glibc_version(&bytes).as_deref(), Some("2.36"));
}

#[test]
fn library_headers() {
    assert_eq!(
        header_version(
            &body("env/cudnn_version-h-9.26-wheel.txt"),
            ["CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"]
        )
        .as_deref(),
        Some("9.26.0")
    );
    assert_eq!(
        header_version(
            &body("env/nccl-h-2.30.7-wheel.txt"),
            ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"]
        )
        .as_deref(),
        Some("2.30.7")
    );
}

#[test]
fn lscpu_keys() {
    let map = lscpu(&body("env/lscpu-epyc-kvm.txt"));
    assert_eq!(map.get("Model name").map(String::as_str), Some("AMD EPYC"));
    assert_eq!(
        map.get("Hypervisor vendor").map(String::as_str),
        Some("KVM")
    );
    assert_eq!(
        map.get("NUMA node0 CPU(s)").map(String::as_str),
        Some("0,1")
    );
    assert_eq!(
        cpu_list(map.get("On-line CPU(s) list").expect("online")),
        Some(vec![0, 1])
    );
}

#[test]
fn show_config_fixture_is_the_workers_input() {
    // Parsed by python/gpuprobe/worker/envinfo.py (tests/python/test_envinfo.py); here only
    // its shape is pinned so that a re-capture keeps the lines that parser reads.
    let text = body("env/torch-show-config-2.15-cu132.txt");
    assert!(
        text.starts_with("PyTorch built with:\n  - GCC 13.3\n"),
        "{text}"
    );
    assert!(text.contains("CUDNN_VERSION=9.26.0,"));
    assert!(text.contains("  - CPU capability usage: AVX512\n"));
}
