//! Regenerates `kernels/gpuprobe_kernels.ptx` from the portable kernel source with NVRTC
//! (found like any NVRTC, or given as the first argument), targeting `compute_70`, and
//! lowers the PTX ISA version to 7.0 so drivers from CUDA 11.0 on accept it. The result must
//! then pass `ptxas -arch=sm_70` and `-arch=sm_90` (see `kernels/regen-ptx.sh`).

use std::path::PathBuf;

use gpuprobe_gpu::{LibraryKind, SearchConfig};
use gpuprobe_gpu::{Nvrtc, NvrtcOutput};
use gpuprobe_gpu::{device_source, source_fingerprint};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = SearchConfig::from_process_env();
    if let Some(path) = std::env::args().nth(1) {
        cfg.overrides
            .insert(LibraryKind::Nvrtc, PathBuf::from(path));
    }
    let nvrtc = Nvrtc::load(&cfg).result?;
    let (major, minor) = nvrtc.version();
    let options = [
        "--gpu-architecture=compute_70".to_string(),
        "-default-device".to_string(),
    ];
    let NvrtcOutput::Ptx(ptx) = nvrtc.compile(&device_source(), &options, false)? else {
        return Err("NVRTC returned a cubin where PTX was asked for".into());
    };
    let mut lowered_from = String::new();
    let body: Vec<String> = ptx
        .lines()
        .map(|line| match line.strip_prefix(".version ") {
            Some(version) => {
                lowered_from = version.trim().to_string();
                ".version 7.0".to_string()
            }
            None => line.to_string(),
        })
        .collect();
    let header = format!(
        "// gpuprobe native kernels, generated: do not edit.\n\
         // Source: kernels/prelude_device.h + kernels/gpuprobe_kernels.cu\n\
         // gpuprobe-source-fnv1a64: {}\n\
         // Produced by `cargo run -p gpuprobe-gpu --example regen_ptx` with NVRTC {major}.{minor}\n\
         // ({options}); the ISA version was lowered from {lowered_from} to 7.0 and the result\n\
         // checked with `ptxas -arch=sm_70` and `ptxas -arch=sm_90` (kernels/regen-ptx.sh).\n",
        source_fingerprint(),
        options = options.join(" "),
    );
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/gpuprobe_kernels.ptx");
    std::fs::write(&out, format!("{header}{}\n", body.join("\n")))?;
    println!(
        "wrote {} (NVRTC {major}.{minor}, ISA {lowered_from} -> 7.0)",
        out.display()
    );
    Ok(())
}
