//! Native runtime layer: CUDA driver/NVRTC and HIP/hipRTC loaded at run time, native probes and memtest (the only crate with unsafe)
