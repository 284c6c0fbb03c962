//! The native kernels: their portable source, the embedded PTX, the host-side mirror of the
//! pattern generators, and [`KernelSet`], which loads them on a backend and launches them.
//!
//! On NVIDIA the embedded PTX (`kernels/gpuprobe_kernels.ptx`, `.version 7.0`, `.target
//! sm_70`) is loaded first, so no NVRTC is needed and an NVRTC newer than the driver cannot
//! get in the way. On AMD the same source is compiled by hipRTC for the device's
//! gcnArchName. The host mirror (`pattern_words`) reproduces every generator bit for bit,
//! so host-side checks and tests agree with the device.

use serde::{Deserialize, Serialize};

use crate::backend::{
    DeviceBuffer, DevicePtr, DeviceRuntime, Handle, KernelArg, Module, ModuleImage, Stream,
};
use crate::error::{GpuError, GpuResult};
use crate::hiprtc::Hiprtc;
use crate::nvrtc::{Nvrtc, NvrtcOutput};

/// The portable kernel source (vendor-neutral; needs a prelude).
pub(crate) const KERNEL_SOURCE: &str = include_str!("../kernels/gpuprobe_kernels.cu");
/// The prelude that maps the portable macros onto CUDA C++ / HIP.
pub(crate) const DEVICE_PRELUDE: &str = include_str!("../kernels/prelude_device.h");
/// PTX generated from [`device_source`] (see the file's header for how).
pub(crate) const EMBEDDED_PTX: &str = include_str!("../kernels/gpuprobe_kernels.ptx");

/// The prelude followed by the kernels: what NVRTC and hipRTC compile.
pub fn device_source() -> String {
    format!("{DEVICE_PRELUDE}\n{KERNEL_SOURCE}")
}

/// FNV-1a (64-bit) of [`device_source`], recorded in the embedded PTX's header so a test can
/// tell when the PTX was not regenerated after a source change.
pub fn source_fingerprint() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in device_source().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The fingerprint written in the embedded PTX's header, if any (the test that the PTX is
/// current compares it).
#[cfg(test)]
pub(crate) fn embedded_ptx_fingerprint() -> Option<&'static str> {
    EMBEDDED_PTX
        .lines()
        .find_map(|l| l.strip_prefix("// gpuprobe-source-fnv1a64: "))
        .map(str::trim)
}

/// Layout of the error sink, as in the kernel source.
pub(crate) mod sink {
    /// Index of the differing-word counter.
    pub(crate) const ERROR_WORDS: usize = 0;
    /// Index of the differing-bit counter.
    pub(crate) const ERROR_BITS: usize = 1;
    /// Index of the example-slot counter.
    pub(crate) const EXAMPLE_COUNT: usize = 2;
    /// Index of the zero-word counter.
    pub(crate) const ZERO_WORDS: usize = 3;
    /// First of the 64 bit-position counters.
    pub(crate) const HIST: usize = 4;
    /// First example triple.
    pub(crate) const EXAMPLES: usize = 68;
    /// Example slots.
    pub(crate) const MAX_EXAMPLES: usize = 32;
    /// Total 64-bit words in the sink.
    pub(crate) const WORDS: usize = EXAMPLES + 3 * MAX_EXAMPLES;
}

/// The four pattern generators of the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Generator {
    /// Every word holds the parameter.
    Const,
    /// Every word holds its own device address.
    Addr,
    /// Word w holds one bit at (w + parameter) mod 64.
    Walk,
    /// Seeded hash of the word index.
    Rand,
}

impl Generator {
    /// All generators, in kernel-table order.
    pub(crate) const ALL: [Generator; 4] = [
        Generator::Const,
        Generator::Addr,
        Generator::Walk,
        Generator::Rand,
    ];

    fn index(self) -> usize {
        match self {
            Generator::Const => 0,
            Generator::Addr => 1,
            Generator::Walk => 2,
            Generator::Rand => 3,
        }
    }

    /// The fill kernel's name.
    pub(crate) fn fill_kernel(self) -> &'static str {
        [
            "gp_fill_const",
            "gp_fill_addr",
            "gp_fill_walk",
            "gp_fill_rand",
        ][self.index()]
    }

    /// The check kernel's name.
    pub(crate) fn check_kernel(self) -> &'static str {
        [
            "gp_check_const",
            "gp_check_addr",
            "gp_check_walk",
            "gp_check_rand",
        ][self.index()]
    }
}

/// The copy kernel's name.
pub(crate) const COPY_KERNEL: &str = "gp_copy_v4";

/// Host mirror of the kernels' `gp_hash32` (lowbias32).
pub(crate) fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// Host mirror of the generators: the two words of the vector whose first word has index
/// `w` (even) and address `addr`, for pattern parameter `a` (before the xor mask).
pub(crate) fn pattern_words(generator: Generator, w: u64, addr: u64, a: u64) -> (u64, u64) {
    match generator {
        Generator::Const => (a, a),
        Generator::Addr => (addr, addr.wrapping_add(8)),
        Generator::Walk => (
            1u64 << (w.wrapping_add(a) & 63),
            1u64 << (w.wrapping_add(1).wrapping_add(a) & 63),
        ),
        Generator::Rand => {
            let key = hash32(((w >> 31) as u32) ^ ((a >> 32) as u32)) ^ (a as u32);
            let lane = (w << 1) as u32;
            let word = |k: u32| {
                u64::from(hash32(k ^ key)) | (u64::from(hash32(k.wrapping_add(1) ^ key)) << 32)
            };
            (word(lane), word(lane.wrapping_add(2)))
        }
    }
}

/// The value of the 64-bit word at byte `offset` of a buffer at `base` filled by
/// `generator` with parameter `a`, mask `x` and first word index `word_base` (the tests
/// check the host fill against it).
#[cfg(test)]
pub(crate) fn expected_word(
    generator: Generator,
    base: DevicePtr,
    offset: u64,
    word_base: u64,
    a: u64,
    x: u64,
) -> u64 {
    let word = offset / 8;
    let first = word & !1;
    let (v0, v1) = pattern_words(generator, word_base + first, base + first * 8, a);
    (if word == first { v0 } else { v1 }) ^ x
}

/// Fills a host buffer exactly as the fill kernel fills device memory at `base`.
pub(crate) fn fill_host(
    bytes: &mut [u8],
    generator: Generator,
    base: DevicePtr,
    word_base: u64,
    a: u64,
    x: u64,
) {
    for (i, chunk) in bytes.chunks_mut(16).enumerate() {
        let i = i as u64;
        let (v0, v1) = pattern_words(generator, word_base + 2 * i, base + 16 * i, a);
        let mut vec = [0u8; 16];
        vec[..8].copy_from_slice(&(v0 ^ x).to_le_bytes());
        vec[8..].copy_from_slice(&(v1 ^ x).to_le_bytes());
        let n = chunk.len();
        chunk.copy_from_slice(&vec[..n]);
    }
}

/// Where the loaded kernels came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum KernelOrigin {
    /// The PTX embedded in the binary, JIT-compiled by the driver.
    EmbeddedPtx,
    /// PTX from NVRTC.
    NvrtcPtx {
        /// NVRTC version.
        nvrtc: String,
    },
    /// A cubin from NVRTC for the exact architecture.
    NvrtcCubin {
        /// NVRTC version.
        nvrtc: String,
        /// Target (`sm_90`).
        arch: String,
    },
    /// A code object from hipRTC.
    Hiprtc {
        /// hipRTC version.
        hiprtc: String,
        /// `--offload-arch` used.
        arch: String,
    },
}

impl std::fmt::Display for KernelOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelOrigin::EmbeddedPtx => f.write_str("embedded PTX (ISA 7.0, sm_70)"),
            KernelOrigin::NvrtcPtx { nvrtc } => write!(f, "NVRTC {nvrtc} PTX"),
            KernelOrigin::NvrtcCubin { nvrtc, arch } => write!(f, "NVRTC {nvrtc} cubin for {arch}"),
            KernelOrigin::Hiprtc { hiprtc, arch } => write!(f, "hipRTC {hiprtc} for {arch}"),
        }
    }
}

/// How to launch: threads per block and blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LaunchShape {
    /// Threads per block.
    pub block: u32,
    /// Blocks in the grid (grid-stride loops cover any size).
    pub grid: u32,
}

impl LaunchShape {
    /// Enough blocks to fill every multiprocessor `waves` times at full occupancy.
    pub(crate) fn for_device(
        multiprocessors: u32,
        threads_per_mp: u32,
        block: u32,
        waves: u32,
    ) -> LaunchShape {
        let block = block.clamp(32, 1024);
        let per_mp = (threads_per_mp / block).max(1);
        LaunchShape {
            block,
            grid: multiprocessors.max(1) * per_mp * waves.max(1),
        }
    }

    /// The grid for `n_vec` vectors: no more blocks than there is work.
    pub(crate) fn grid_for(&self, n_vec: u64) -> u32 {
        let needed = n_vec.div_ceil(u64::from(self.block)).max(1);
        needed.min(u64::from(self.grid)) as u32
    }
}

/// Compilers available to [`KernelSet::load`].
#[derive(Default, Clone)]
pub(crate) struct Compilers {
    /// NVRTC, if found.
    pub nvrtc: Option<std::sync::Arc<Nvrtc>>,
    /// hipRTC, if found.
    pub hiprtc: Option<std::sync::Arc<Hiprtc>>,
}

/// Which kernel image to use on CUDA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CudaKernelSource {
    /// The embedded PTX (default).
    Embedded,
    /// Compile with NVRTC (cubin for the device when possible, else PTX).
    Nvrtc,
}

/// The kernels, loaded on one backend.
pub(crate) struct KernelSet<'b> {
    backend: &'b dyn DeviceRuntime,
    _module: Module<'b>,
    fill: [Handle; 4],
    check: [Handle; 4],
    copy: Handle,
    /// Where the image came from.
    pub origin: KernelOrigin,
    /// Launch geometry.
    pub shape: LaunchShape,
}

/// Region statistics tables for the check kernels: per region of `1 << shift` bytes, the
/// differing-word count and the lowest and highest differing address.
pub(crate) struct ErrorSink<'b> {
    backend: &'b dyn DeviceRuntime,
    sink: DeviceBuffer<'b>,
    region_count: DeviceBuffer<'b>,
    region_lo: DeviceBuffer<'b>,
    region_hi: DeviceBuffer<'b>,
    regions: usize,
    /// log2 of the region size.
    pub region_shift: u32,
}

/// What a check pass wrote into the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SinkReadout {
    /// Differing 64-bit words (exact).
    pub error_words: u64,
    /// Differing bits (exact).
    pub error_bits: u64,
    /// Differing words that read back as zero.
    pub zero_words: u64,
    /// Example slots claimed (may exceed the examples kept).
    pub examples_claimed: u64,
    /// Differing bits by bit position (64 entries).
    pub bit_histogram: Vec<u64>,
    /// Kept examples: (address, expected, found).
    pub examples: Vec<(u64, u64, u64)>,
}

/// One region that saw errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegionStat {
    /// Region index (global over the sink's regions).
    pub index: usize,
    /// Differing words in it.
    pub count: u64,
    /// Lowest differing address.
    pub lo: u64,
    /// Highest differing address.
    pub hi: u64,
}

impl<'b> ErrorSink<'b> {
    /// Allocates a sink with `regions` region slots of `1 << region_shift` bytes.
    pub(crate) fn new(
        backend: &'b dyn DeviceRuntime,
        regions: usize,
        region_shift: u32,
    ) -> GpuResult<Self> {
        let regions = regions.max(1);
        let sink = ErrorSink {
            backend,
            sink: DeviceBuffer::new(backend, sink::WORDS * 8)?,
            region_count: DeviceBuffer::new(backend, regions * 4)?,
            region_lo: DeviceBuffer::new(backend, regions * 8)?,
            region_hi: DeviceBuffer::new(backend, regions * 8)?,
            regions,
            region_shift,
        };
        sink.reset_counters()?;
        sink.reset_regions()?;
        Ok(sink)
    }

    /// Zeroes the counters, histogram and examples.
    pub(crate) fn reset_counters(&self) -> GpuResult<()> {
        self.backend.memset_d8(self.sink.ptr(), 0, self.sink.len())
    }

    /// Clears the region tables.
    pub(crate) fn reset_regions(&self) -> GpuResult<()> {
        self.backend
            .memset_d8(self.region_count.ptr(), 0, self.region_count.len())?;
        self.backend
            .memset_d8(self.region_lo.ptr(), 0xff, self.region_lo.len())?;
        self.backend
            .memset_d8(self.region_hi.ptr(), 0, self.region_hi.len())
    }

    /// Reads the counters back (synchronous).
    pub(crate) fn read(&self) -> GpuResult<SinkReadout> {
        let mut raw = vec![0u8; self.sink.len()];
        self.backend.dtoh(&mut raw, self.sink.ptr())?;
        let word =
            |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        let mut readout = SinkReadout {
            error_words: word(sink::ERROR_WORDS),
            error_bits: word(sink::ERROR_BITS),
            zero_words: word(sink::ZERO_WORDS),
            examples_claimed: word(sink::EXAMPLE_COUNT),
            bit_histogram: vec![0; 64],
            examples: Vec::new(),
        };
        for (bit, slot) in readout.bit_histogram.iter_mut().enumerate() {
            *slot = word(sink::HIST + bit);
        }
        let kept = (readout.examples_claimed as usize).min(sink::MAX_EXAMPLES);
        readout.examples = (0..kept)
            .map(|k| {
                let at = sink::EXAMPLES + 3 * k;
                (word(at), word(at + 1), word(at + 2))
            })
            .collect();
        Ok(readout)
    }

    /// Reads the regions that saw errors (synchronous).
    pub(crate) fn read_regions(&self) -> GpuResult<Vec<RegionStat>> {
        let mut counts = vec![0u8; self.region_count.len()];
        let mut lo = vec![0u8; self.region_lo.len()];
        let mut hi = vec![0u8; self.region_hi.len()];
        self.backend.dtoh(&mut counts, self.region_count.ptr())?;
        self.backend.dtoh(&mut lo, self.region_lo.ptr())?;
        self.backend.dtoh(&mut hi, self.region_hi.ptr())?;
        let u64_at = |buf: &[u8], i: usize| {
            u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
        };
        Ok(counts
            .chunks_exact(4)
            .enumerate()
            .filter_map(|(i, c)| {
                let count = u32::from_le_bytes(c.try_into().unwrap_or([0; 4]));
                (count > 0).then(|| RegionStat {
                    index: i,
                    count: u64::from(count),
                    lo: u64_at(&lo, i),
                    hi: u64_at(&hi, i),
                })
            })
            .collect())
    }

    fn args_for(&self, first_region: usize, origin: DevicePtr) -> [KernelArg; 6] {
        let first = first_region.min(self.regions - 1) as u64;
        [
            KernelArg::Ptr(self.sink.ptr()),
            KernelArg::Ptr(self.region_count.ptr() + 4 * first),
            KernelArg::Ptr(self.region_lo.ptr() + 8 * first),
            KernelArg::Ptr(self.region_hi.ptr() + 8 * first),
            KernelArg::U64(origin),
            KernelArg::U32(self.region_shift),
        ]
    }
}

/// One check launch's parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckRequest {
    /// Pattern generator.
    pub generator: Generator,
    /// Buffer start.
    pub ptr: DevicePtr,
    /// Buffer size (multiple of 16).
    pub bytes: u64,
    /// Index of the buffer's first word in the pattern.
    pub word_base: u64,
    /// Pattern parameter.
    pub a: u64,
    /// Xor mask.
    pub x: u64,
    /// Store the complement of the expected value after checking.
    pub rewrite: bool,
    /// First region slot of this buffer in the sink.
    pub first_region: usize,
}

impl<'b> KernelSet<'b> {
    /// Loads the kernels: on CUDA the embedded PTX (or NVRTC when asked), on HIP through
    /// hipRTC for the device's architecture.
    pub(crate) fn load(
        backend: &'b dyn DeviceRuntime,
        compilers: &Compilers,
        cuda_source: CudaKernelSource,
        shape: LaunchShape,
    ) -> GpuResult<Self> {
        let (image, origin) = match backend.kind() {
            crate::backend::RuntimeKind::Cuda => match cuda_source {
                CudaKernelSource::Embedded => (
                    ModuleImage::Ptx(EMBEDDED_PTX.to_string()),
                    KernelOrigin::EmbeddedPtx,
                ),
                CudaKernelSource::Nvrtc => compile_with_nvrtc(backend, compilers)?,
            },
            crate::backend::RuntimeKind::Hip => {
                let hiprtc = compilers.hiprtc.as_ref().ok_or_else(|| GpuError::Compile {
                    compiler: "hipRTC",
                    code: -1,
                    log: "hipRTC was not found; AMD kernels must be compiled at run time".into(),
                })?;
                let arch = backend.device().arch.clone();
                if arch.is_empty() {
                    return Err(GpuError::Compile {
                        compiler: "hipRTC",
                        code: -1,
                        log: "the device's gcnArchName could not be read".into(),
                    });
                }
                let code = hiprtc.compile(
                    &device_source(),
                    &[format!("--offload-arch={arch}"), "-O3".into()],
                )?;
                let (major, minor) = hiprtc.version();
                (
                    ModuleImage::CodeObject(code),
                    KernelOrigin::Hiprtc {
                        hiprtc: format!("{major}.{minor}"),
                        arch,
                    },
                )
            }
        };
        Self::from_image(backend, &image, origin, shape)
    }

    /// Loads a given image.
    pub(crate) fn from_image(
        backend: &'b dyn DeviceRuntime,
        image: &ModuleImage,
        origin: KernelOrigin,
        shape: LaunchShape,
    ) -> GpuResult<Self> {
        let module = Module::load(backend, image)?;
        let lookup = |g: Generator, fill: bool| {
            module.function(if fill {
                g.fill_kernel()
            } else {
                g.check_kernel()
            })
        };
        let fill = [
            lookup(Generator::Const, true)?,
            lookup(Generator::Addr, true)?,
            lookup(Generator::Walk, true)?,
            lookup(Generator::Rand, true)?,
        ];
        let check = [
            lookup(Generator::Const, false)?,
            lookup(Generator::Addr, false)?,
            lookup(Generator::Walk, false)?,
            lookup(Generator::Rand, false)?,
        ];
        let copy = module.function(COPY_KERNEL)?;
        Ok(KernelSet {
            backend,
            _module: module,
            fill,
            check,
            copy,
            origin,
            shape,
        })
    }

    /// Launches the fill kernel over `bytes` bytes at `ptr` (a multiple of 16).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fill(
        &self,
        stream: &Stream<'_>,
        generator: Generator,
        ptr: DevicePtr,
        bytes: u64,
        word_base: u64,
        a: u64,
        x: u64,
    ) -> GpuResult<()> {
        let n_vec = vector_count(bytes)?;
        self.backend.launch(
            self.fill[generator.index()],
            self.shape.grid_for(n_vec),
            self.shape.block,
            &[
                KernelArg::Ptr(ptr),
                KernelArg::U64(n_vec),
                KernelArg::U64(word_base),
                KernelArg::U64(a),
                KernelArg::U64(x),
            ],
            stream.handle(),
        )
    }

    /// Launches the check kernel; errors land in `sink`.
    pub(crate) fn check(
        &self,
        stream: &Stream<'_>,
        request: &CheckRequest,
        sink: &ErrorSink<'_>,
    ) -> GpuResult<()> {
        let n_vec = vector_count(request.bytes)?;
        let sink_args = sink.args_for(request.first_region, request.ptr);
        let mut args = vec![
            KernelArg::Ptr(request.ptr),
            KernelArg::U64(n_vec),
            KernelArg::U64(request.word_base),
            KernelArg::U64(request.a),
            KernelArg::U64(request.x),
            KernelArg::U32(u32::from(request.rewrite)),
        ];
        args.extend_from_slice(&sink_args);
        self.backend.launch(
            self.check[request.generator.index()],
            self.shape.grid_for(n_vec),
            self.shape.block,
            &args,
            stream.handle(),
        )
    }

    /// Launches the copy kernel (`bytes` a multiple of 16).
    pub(crate) fn copy(
        &self,
        stream: &Stream<'_>,
        src: DevicePtr,
        dst: DevicePtr,
        bytes: u64,
    ) -> GpuResult<()> {
        let n_vec = vector_count(bytes)?;
        self.backend.launch(
            self.copy,
            self.shape.grid_for(n_vec),
            self.shape.block,
            &[
                KernelArg::Ptr(src),
                KernelArg::Ptr(dst),
                KernelArg::U64(n_vec),
            ],
            stream.handle(),
        )
    }
}

fn vector_count(bytes: u64) -> GpuResult<u64> {
    if !bytes.is_multiple_of(16) {
        return Err(GpuError::InvalidArgument(format!(
            "kernel buffers must be a multiple of 16 bytes, got {bytes}"
        )));
    }
    Ok(bytes / 16)
}

fn compile_with_nvrtc(
    backend: &dyn DeviceRuntime,
    compilers: &Compilers,
) -> GpuResult<(ModuleImage, KernelOrigin)> {
    let nvrtc = compilers.nvrtc.as_ref().ok_or_else(|| GpuError::Compile {
        compiler: "NVRTC",
        code: -1,
        log: "NVRTC was not found".into(),
    })?;
    let (major, minor) = nvrtc.version();
    let version = format!("{major}.{minor}");
    let arch = backend.device().arch.clone();
    if nvrtc.can_emit_cubin() {
        // A cubin for the exact architecture needs no PTX JIT, so an NVRTC newer than the
        // driver still works; fall back to PTX when this NVRTC does not know the arch.
        let cubin = nvrtc.compile(
            &device_source(),
            &[
                format!("--gpu-architecture={arch}"),
                "-default-device".into(),
            ],
            true,
        );
        if let Ok(NvrtcOutput::Cubin(bytes)) = cubin {
            return Ok((
                ModuleImage::Cubin(bytes),
                KernelOrigin::NvrtcCubin {
                    nvrtc: version,
                    arch,
                },
            ));
        }
    }
    let compute = arch.replace("sm_", "compute_");
    match nvrtc.compile(
        &device_source(),
        &[
            format!("--gpu-architecture={compute}"),
            "-default-device".into(),
        ],
        false,
    )? {
        NvrtcOutput::Ptx(ptx) => Ok((
            ModuleImage::Ptx(ptx),
            KernelOrigin::NvrtcPtx { nvrtc: version },
        )),
        NvrtcOutput::Cubin(bytes) => Ok((
            ModuleImage::Cubin(bytes),
            KernelOrigin::NvrtcCubin {
                nvrtc: version,
                arch,
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_reference_values() {
        // lowbias32 reference outputs (computed independently).
        assert_eq!(hash32(0), 0);
        assert_eq!(hash32(1), 0x6889_90c0);
        assert_eq!(hash32(0xdead_beef), 0xe628_c683);
    }

    #[test]
    fn walking_ones_have_one_bit() {
        for w in (0..256u64).step_by(2) {
            let (a, b) = pattern_words(Generator::Walk, w, 0, 3);
            assert_eq!(a.count_ones(), 1);
            assert_eq!(b.count_ones(), 1);
            assert_eq!(a, 1u64 << ((w + 3) % 64));
        }
    }

    #[test]
    fn random_words_differ_across_the_31_bit_boundary() {
        let seed = 0x1234_5678_9abc_def0;
        let low = pattern_words(Generator::Rand, 0, 0, seed);
        let high = pattern_words(Generator::Rand, 1 << 31, 0, seed);
        assert_ne!(low, high);
        let other_seed = pattern_words(Generator::Rand, 0, 0, seed ^ 1);
        assert_ne!(low, other_seed);
    }

    #[test]
    fn fill_host_matches_expected_word() {
        let mut buf = vec![0u8; 64];
        fill_host(&mut buf, Generator::Rand, 0x7000_0000, 10, 99, 0xff);
        for offset in (0..64u64).step_by(8) {
            let got = u64::from_le_bytes(
                buf[offset as usize..offset as usize + 8]
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(
                got,
                expected_word(Generator::Rand, 0x7000_0000, offset, 10, 99, 0xff)
            );
        }
        let mut addr = vec![0u8; 32];
        fill_host(&mut addr, Generator::Addr, 0x1000, 0, 0, 0);
        assert_eq!(u64::from_le_bytes(addr[8..16].try_into().unwrap()), 0x1008);
    }

    #[test]
    fn launch_shape_fills_the_device_and_shrinks_for_small_work() {
        let shape = LaunchShape::for_device(132, 2048, 256, 1);
        assert_eq!(shape.grid, 132 * 8);
        assert_eq!(shape.grid_for(10), 1);
        assert_eq!(shape.grid_for(1 << 30), 132 * 8);
    }

    #[test]
    fn embedded_ptx_is_current() {
        assert_eq!(
            embedded_ptx_fingerprint(),
            Some(source_fingerprint().as_str()),
            "kernels/gpuprobe_kernels.ptx is stale: regenerate it (see its header)"
        );
        assert!(EMBEDDED_PTX.contains(".version 7.0"));
        assert!(EMBEDDED_PTX.contains(".target sm_70"));
        for g in Generator::ALL {
            assert!(EMBEDDED_PTX.contains(&format!(".entry {}(", g.fill_kernel())));
            assert!(EMBEDDED_PTX.contains(&format!(".entry {}(", g.check_kernel())));
        }
    }
}
