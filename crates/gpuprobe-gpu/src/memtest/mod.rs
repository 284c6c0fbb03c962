//! The VRAM test engine: sizes the test from the *free* memory (allocating in chunks until
//! the target or the first failure, then giving back a safety margin, so APUs whose
//! reported memory is not all allocatable are sized correctly), measures the device's copy
//! bandwidth in the same run, then runs the pattern steps (walking ones and zeros, own
//! address, moving inversions, random, retention re-read) over every chunk with the
//! 16-byte-per-thread kernels, reading the error sink after each check. [`MemtestOutcome`]
//! is what `gpuprobe memtest` reports of it, text and JSON.

mod outcome;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use outcome::{
    MemtestOutcome, probe_options, probe_spec, render_refusal_json, render_usage_error_json,
    wants_json,
};
pub(crate) use report::{
    ChunkInfo, CopyCeiling, ErrorExample, InjectedError, MAX_EXAMPLES, MAX_RANGES, MemtestDevice,
    MemtestErrors, MemtestMemory, PatternSummary, PhaseKind, PhaseReport, RegionAggregate,
    Throughput, bit_positions, coalesce_regions, diagnose,
};
pub use report::{MEMTEST_REPORT_VERSION, MemtestReport, memtest_report_from, render_memtest};

use crate::backend::{DeviceBuffer, DevicePtr, DeviceRuntime, EventTimer, Stream, gbps, median};
use crate::error::{GpuError, GpuResult};
use crate::kernels::{CheckRequest, ErrorSink, Generator, KernelSet};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Allocation granularity of the test chunks.
const CHUNK_ALIGN: u64 = 2 * MIB;

/// The patterns the memtest knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Pattern {
    /// One set bit per word, moving with the word index; `walk_rotations` rotations.
    WalkingOnes,
    /// The complement of walking ones.
    WalkingZeros,
    /// Each word holds its own address, then its complement (addressing faults).
    OwnAddress,
    /// Write p; check p and write ~p; check ~p and write p; check p — for p = 0, 0x55…, and
    /// a random pattern.
    MovingInversions,
    /// Seeded pseudo-random data.
    Random,
    /// Random data written, left for `retention_ms`, then re-read.
    Retention,
}

impl Pattern {
    /// Every pattern, in test order.
    pub(crate) const ALL: [Pattern; 6] = [
        Pattern::WalkingOnes,
        Pattern::WalkingZeros,
        Pattern::OwnAddress,
        Pattern::MovingInversions,
        Pattern::Random,
        Pattern::Retention,
    ];

    /// The option / report name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pattern::WalkingOnes => "walking_ones",
            Pattern::WalkingZeros => "walking_zeros",
            Pattern::OwnAddress => "own_address",
            Pattern::MovingInversions => "moving_inversions",
            Pattern::Random => "random",
            Pattern::Retention => "retention",
        }
    }

    /// Parses a pattern name.
    pub(crate) fn parse(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A bit to flip between write and check, to prove the detection path (test only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InjectError {
    /// Byte offset in the tested space (aligned down to 8).
    pub offset: u64,
    /// Bit of the 64-bit word, 0..=63.
    pub bit: u8,
}

/// Memtest settings (from the worker plan's `options`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemtestOptions {
    /// Fraction of the free memory to test (0 < f ≤ 1).
    pub fraction: f64,
    /// Upper bound on the bytes tested.
    pub max_bytes: Option<u64>,
    /// Passes over the pattern list.
    pub passes: u32,
    /// Patterns, in order.
    pub patterns: Vec<Pattern>,
    /// Seed for the random patterns.
    pub seed: u64,
    /// Rotations of the walking patterns (1..=64).
    pub walk_rotations: u32,
    /// Retention wait in milliseconds.
    pub retention_ms: u64,
    /// Test-only bit flip.
    pub inject_error: Option<InjectError>,
    /// Largest single allocation.
    pub chunk_bytes: u64,
    /// Smallest allocation tried when backing off.
    pub min_chunk_bytes: u64,
    /// Bytes given back after an allocation failure (default: max(256 MiB, 1% of total)).
    pub margin_bytes: Option<u64>,
    /// Threads per block.
    pub block: u32,
    /// Grid size in multiples of "one full wave" (blocks resident at full occupancy).
    pub waves: u32,
    /// log2 of the error-region size.
    pub region_shift: u32,
    /// Bytes per copy in the copy-ceiling measurement.
    pub copy_bytes: u64,
    /// Timed repetitions of the copy-ceiling measurement.
    pub copy_reps: u32,
}

impl MemtestOptions {
    /// Defaults of `gpuprobe memtest` (`native.memtest.full`).
    pub(crate) fn full(seed: u64) -> MemtestOptions {
        MemtestOptions {
            fraction: 0.97,
            max_bytes: None,
            passes: 1,
            patterns: Pattern::ALL.to_vec(),
            seed,
            walk_rotations: 8,
            retention_ms: 1000,
            inject_error: None,
            chunk_bytes: 4 * GIB,
            min_chunk_bytes: 64 * MIB,
            margin_bytes: None,
            block: 256,
            waves: 1,
            region_shift: 20,
            copy_bytes: GIB,
            copy_reps: 10,
        }
    }

    /// Defaults of the `check` probe `native.memtest.quick`: at most 2 GiB or 5% of free
    /// memory (a framework worker may share the GPU), a short pattern list.
    pub(crate) fn quick(seed: u64) -> MemtestOptions {
        MemtestOptions {
            fraction: 0.05,
            max_bytes: Some(2 * GIB),
            patterns: vec![
                Pattern::OwnAddress,
                Pattern::MovingInversions,
                Pattern::Random,
            ],
            walk_rotations: 2,
            retention_ms: 0,
            chunk_bytes: GIB,
            copy_bytes: 256 * MIB,
            copy_reps: 5,
            ..MemtestOptions::full(seed)
        }
    }

    /// Applies the plan's options (`fraction`, `max_bytes`, `passes`, `patterns`, `seed`,
    /// `walk_rotations`, `retention_ms`, `inject_error` = `{offset, bit}`, `chunk_bytes`,
    /// `block`, `waves`, `copy_bytes`, `copy_reps`) over these defaults. Unknown keys are
    /// ignored (the plan carries options of other probes); bad values are errors.
    pub(crate) fn apply(
        &mut self,
        options: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(), String> {
        use serde_json::Value;
        let uint = |key: &str, v: &Value| -> Result<u64, String> {
            v.as_u64()
                .ok_or_else(|| format!("option {key} must be a non-negative integer, got {v}"))
        };
        for (key, value) in options {
            match key.as_str() {
                "fraction" => {
                    let f = value
                        .as_f64()
                        .ok_or_else(|| format!("option fraction must be a number, got {value}"))?;
                    if !(f > 0.0 && f <= 1.0) {
                        return Err(format!("option fraction must be in (0, 1], got {f}"));
                    }
                    self.fraction = f;
                }
                "max_bytes" => self.max_bytes = Some(uint(key, value)?),
                "passes" => {
                    self.passes = uint(key, value)?.clamp(1, 1_000_000) as u32;
                }
                "seed" => self.seed = uint(key, value)?,
                "walk_rotations" => {
                    let r = uint(key, value)?;
                    if !(1..=64).contains(&r) {
                        return Err(format!("option walk_rotations must be 1..=64, got {r}"));
                    }
                    self.walk_rotations = r as u32;
                }
                "retention_ms" => self.retention_ms = uint(key, value)?.min(3_600_000),
                "chunk_bytes" => {
                    self.chunk_bytes =
                        uint(key, value)?.max(CHUNK_ALIGN) / CHUNK_ALIGN * CHUNK_ALIGN
                }
                "block" => {
                    let b = uint(key, value)?;
                    if !(32..=1024).contains(&b) || b % 32 != 0 {
                        return Err(format!(
                            "option block must be a multiple of 32 in 32..=1024, got {b}"
                        ));
                    }
                    self.block = b as u32;
                }
                "waves" => self.waves = uint(key, value)?.clamp(1, 64) as u32,
                "copy_bytes" => self.copy_bytes = uint(key, value)?.max(MIB) / 16 * 16,
                "copy_reps" => self.copy_reps = uint(key, value)?.clamp(1, 1000) as u32,
                "patterns" => {
                    let list = value.as_array().ok_or_else(|| {
                        format!("option patterns must be a list of names, got {value}")
                    })?;
                    let mut patterns = Vec::new();
                    for item in list {
                        let name = item.as_str().unwrap_or_default();
                        let pattern = Pattern::parse(name).ok_or_else(|| {
                            format!(
                                "unknown pattern {item}; known: {}",
                                Pattern::ALL.map(Pattern::name).join(", ")
                            )
                        })?;
                        patterns.push(pattern);
                    }
                    if patterns.is_empty() {
                        return Err("option patterns must name at least one pattern".into());
                    }
                    self.patterns = patterns;
                }
                "inject_error" => {
                    let inject: InjectError =
                        serde_json::from_value(value.clone()).map_err(|e| {
                            format!(
                                "option inject_error must be {{\"offset\": N, \"bit\": 0..63}}: {e}"
                            )
                        })?;
                    if inject.bit > 63 {
                        return Err(format!(
                            "option inject_error.bit must be 0..=63, got {}",
                            inject.bit
                        ));
                    }
                    self.inject_error = Some(inject);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// One step of the test plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    /// Pass number (from 1).
    pub pass: u32,
    /// The pattern it belongs to.
    pub pattern: Pattern,
    /// Detail for the report.
    pub label: String,
    /// What to do.
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Action {
    /// Fill with `generator(a) ^ x`.
    Fill {
        /// Generator.
        generator: Generator,
        /// Parameter.
        a: u64,
        /// Mask.
        x: u64,
    },
    /// Check against `generator(a) ^ x`; with `rewrite`, store the complement afterwards.
    Check {
        /// Generator.
        generator: Generator,
        /// Parameter.
        a: u64,
        /// Mask.
        x: u64,
        /// Store the complement of the expected value.
        rewrite: bool,
    },
    /// Wait.
    Wait {
        /// Milliseconds.
        ms: u64,
    },
}

fn mix_seed(seed: u64, salt: u64) -> u64 {
    // splitmix64 finalizer: distinct, well-spread seeds per pattern and pass.
    let mut z = seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The ordered steps of a run (pure).
pub(crate) fn plan_steps(options: &MemtestOptions) -> Vec<Step> {
    let mut steps = Vec::new();
    for pass in 1..=options.passes {
        for &pattern in &options.patterns {
            let step = |label: String, action: Action| Step {
                pass,
                pattern,
                label,
                action,
            };
            let fill_check = |steps: &mut Vec<Step>, label: String, generator, a, x| {
                steps.push(step(label.clone(), Action::Fill { generator, a, x }));
                steps.push(step(
                    label,
                    Action::Check {
                        generator,
                        a,
                        x,
                        rewrite: false,
                    },
                ));
            };
            match pattern {
                Pattern::WalkingOnes | Pattern::WalkingZeros => {
                    let x = if pattern == Pattern::WalkingZeros {
                        !0
                    } else {
                        0
                    };
                    for r in 0..u64::from(options.walk_rotations) {
                        let a = r * 64 / u64::from(options.walk_rotations);
                        fill_check(&mut steps, format!("rotation {a}"), Generator::Walk, a, x);
                    }
                }
                Pattern::OwnAddress => {
                    fill_check(&mut steps, "address".into(), Generator::Addr, 0, 0);
                    fill_check(
                        &mut steps,
                        "inverted address".into(),
                        Generator::Addr,
                        0,
                        !0,
                    );
                }
                Pattern::MovingInversions => {
                    let random = mix_seed(options.seed, 0x4d49 + u64::from(pass));
                    for (generator, a, name) in [
                        (Generator::Const, 0u64, "0x0000000000000000".to_string()),
                        (
                            Generator::Const,
                            0x5555_5555_5555_5555,
                            "0x5555555555555555".into(),
                        ),
                        (Generator::Rand, random, "random".into()),
                    ] {
                        steps.push(step(
                            format!("{name} write"),
                            Action::Fill { generator, a, x: 0 },
                        ));
                        steps.push(step(
                            format!("{name} check, invert"),
                            Action::Check {
                                generator,
                                a,
                                x: 0,
                                rewrite: true,
                            },
                        ));
                        steps.push(step(
                            format!("{name} inverted check, restore"),
                            Action::Check {
                                generator,
                                a,
                                x: !0,
                                rewrite: true,
                            },
                        ));
                        steps.push(step(
                            format!("{name} final check"),
                            Action::Check {
                                generator,
                                a,
                                x: 0,
                                rewrite: false,
                            },
                        ));
                    }
                }
                Pattern::Random => {
                    let a = mix_seed(options.seed, 0x5244 + u64::from(pass));
                    fill_check(&mut steps, format!("seed {a:#018x}"), Generator::Rand, a, 0);
                }
                Pattern::Retention => {
                    let a = mix_seed(options.seed, 0x5254 + u64::from(pass));
                    steps.push(step(
                        "write".into(),
                        Action::Fill {
                            generator: Generator::Rand,
                            a,
                            x: 0,
                        },
                    ));
                    steps.push(step(
                        format!("wait {} ms", options.retention_ms),
                        Action::Wait {
                            ms: options.retention_ms,
                        },
                    ));
                    steps.push(step(
                        "re-read".into(),
                        Action::Check {
                            generator: Generator::Rand,
                            a,
                            x: 0,
                            rewrite: false,
                        },
                    ));
                }
            }
        }
    }
    steps
}

/// Chunks obtained by [`allocate_chunks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allocation {
    /// (address, bytes) in test order.
    pub chunks: Vec<(u64, u64)>,
    /// Whether an allocation failed with out-of-memory before the target was reached.
    pub hit_limit: bool,
    /// Bytes given back after hitting the limit.
    pub released: u64,
}

/// Allocates up to `target` bytes in chunks of at most `max_chunk`, halving the chunk on
/// out-of-memory down to `min_chunk`; after hitting the limit, gives back `margin` bytes
/// (trimming the last chunk where possible; never more than an eighth of what was
/// obtained). `alloc` and `free` are the runtime's; any error
/// other than out-of-memory is returned.
pub(crate) fn allocate_chunks(
    target: u64,
    max_chunk: u64,
    min_chunk: u64,
    margin: u64,
    mut alloc: impl FnMut(u64) -> GpuResult<u64>,
    mut free: impl FnMut(u64),
) -> GpuResult<Allocation> {
    let align_down = |v: u64| v / CHUNK_ALIGN * CHUNK_ALIGN;
    let max_chunk = align_down(max_chunk).max(CHUNK_ALIGN);
    let min_chunk = align_down(min_chunk).clamp(CHUNK_ALIGN, max_chunk);
    let mut chunk = max_chunk;
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    let mut total = 0u64;
    let mut hit_limit = false;
    loop {
        let want = align_down(chunk.min(target.saturating_sub(total)));
        if want < CHUNK_ALIGN {
            break;
        }
        match alloc(want) {
            Ok(ptr) => {
                chunks.push((ptr, want));
                total += want;
            }
            Err(error) if error.is_out_of_memory() => {
                hit_limit = true;
                if want <= min_chunk {
                    break;
                }
                chunk = align_down(want / 2).max(min_chunk);
            }
            Err(error) => {
                for &(ptr, _) in &chunks {
                    free(ptr);
                }
                return Err(error);
            }
        }
    }
    let mut released = 0u64;
    // On a small device the margin may not eat the test: at most an eighth of it.
    let margin = margin.min(total / 8);
    if hit_limit {
        while released < margin {
            let Some((ptr, bytes)) = chunks.pop() else {
                break;
            };
            free(ptr);
            let still_needed = margin - released;
            if bytes >= still_needed + CHUNK_ALIGN {
                // Give back only what the margin needs: re-allocate the rest of this chunk.
                let keep = align_down(bytes - still_needed);
                if let Ok(ptr) = alloc(keep) {
                    chunks.push((ptr, keep));
                    released += bytes - keep;
                    continue;
                }
            }
            released += bytes;
        }
    }
    Ok(Allocation {
        chunks,
        hit_limit,
        released,
    })
}

/// Measures the device-to-device copy bandwidth (bytes read + written) with the runtime's
/// memcpy and with the copy kernel: warm-up, then the median of `reps` event-timed copies.
pub(crate) fn measure_copy_ceiling(
    backend: &dyn DeviceRuntime,
    kernels: &KernelSet<'_>,
    stream: &Stream<'_>,
    bytes: u64,
    reps: u32,
) -> GpuResult<CopyCeiling> {
    let bytes = bytes / 16 * 16;
    let src = DeviceBuffer::new(backend, bytes as usize)?;
    let dst = DeviceBuffer::new(backend, bytes as usize)?;
    kernels.fill(stream, Generator::Rand, src.ptr(), bytes, 0, 1, 0)?;
    let timer = EventTimer::new(backend)?;
    let mut memcpy_ms = Vec::new();
    let mut kernel_ms = Vec::new();
    for rep in 0..reps + 2 {
        let (_, ms) = timer.time(stream, || {
            backend.dtod_async(dst.ptr(), src.ptr(), bytes as usize, stream.handle())
        })?;
        let (_, kms) = timer.time(stream, || kernels.copy(stream, src.ptr(), dst.ptr(), bytes))?;
        if rep >= 2 {
            memcpy_ms.push(ms);
            kernel_ms.push(kms);
        }
    }
    stream.synchronize()?;
    let moved = 2 * bytes;
    let memcpy_gbps = median(&memcpy_ms).map_or(0.0, |ms| gbps(moved, ms));
    let kernel_gbps = median(&kernel_ms).map_or(0.0, |ms| gbps(moved, ms));
    Ok(CopyCeiling {
        bytes,
        reps,
        memcpy_gbps,
        kernel_gbps,
        reference_gbps: memcpy_gbps.max(kernel_gbps),
    })
}

struct Chunk {
    ptr: DevicePtr,
    bytes: u64,
    offset: u64,
    first_region: usize,
}

struct Owned<'b> {
    backend: &'b dyn DeviceRuntime,
    ptrs: Vec<DevicePtr>,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        for &ptr in &self.ptrs {
            let _ = self.backend.free(ptr);
        }
    }
}

struct Tally {
    error_words: u64,
    error_bits: u64,
    zero_words: u64,
    histogram: Vec<u64>,
    examples: Vec<ErrorExample>,
    truncated: bool,
    regions: BTreeMap<usize, RegionAggregate>,
}

/// Where the pattern steps write and check, and what sizing it found. Fields drop in
/// order: the chunks are freed before the error sink, as when they were locals.
struct TestArea<'b> {
    /// Frees the chunks when the test ends, whatever way it ends.
    _owned: Owned<'b>,
    /// The error counters and region tables the check kernels write.
    sink: ErrorSink<'b>,
    chunks: Vec<Chunk>,
    /// Bytes under test (the chunks together).
    tested: u64,
    /// Free bytes the test was sized from.
    free: u64,
    /// Free bytes with the test's memory taken, if the runtime said.
    free_while: Option<u64>,
    region_size: u64,
    hit_allocation_limit: bool,
    released_margin_bytes: u64,
}

/// The bit to flip before every check: (offset in the test, bit, device address).
type Injection = Option<(u64, u8, DevicePtr)>;

/// What every step runs with.
#[derive(Clone, Copy)]
struct Bench<'a, 'k> {
    backend: &'a dyn DeviceRuntime,
    kernels: &'a KernelSet<'k>,
    stream: &'a Stream<'a>,
    timer: &'a EventTimer<'a>,
    area: &'a TestArea<'a>,
    inject: Injection,
}

/// What the pattern steps produced.
struct StepsRun {
    phases: Vec<PhaseReport>,
    tally: Tally,
    injections: u64,
    waited: Duration,
    wall: Duration,
}

/// Runs the memtest on `backend` with the loaded `kernels`. `progress` receives one line per
/// pattern (the worker turns them into log events).
pub(crate) fn run_memtest(
    backend: &dyn DeviceRuntime,
    kernels: &KernelSet<'_>,
    options: &MemtestOptions,
    progress: &mut dyn FnMut(&str),
) -> GpuResult<MemtestReport> {
    let info = backend.device().clone();
    let versions = backend.versions();
    let stream = Stream::new(backend)?;
    let before = backend.mem_info()?;
    let copy =
        measure_copy_ceiling_first(backend, kernels, &stream, options, before.free, progress)?;
    let area = take_test_memory(backend, kernels, &stream, options, before.total, progress)?;
    let inject = locate_injection(options, &area)?;
    let run = run_steps(backend, kernels, &stream, options, &area, inject, progress)?;
    let throughput = summarize_throughput(&run.phases, run.wall, run.waited, copy);
    let per_pattern = summarize_patterns(&run.phases);
    let chunk_infos: Vec<ChunkInfo> = area
        .chunks
        .iter()
        .map(|c| ChunkInfo {
            address: c.ptr,
            bytes: c.bytes,
            offset: c.offset,
        })
        .collect();
    let (errors, injected) = collect_errors(run.tally, &area, inject, run.injections, &chunk_infos);
    Ok(MemtestReport {
        version: MEMTEST_REPORT_VERSION,
        device: MemtestDevice {
            name: info.name,
            arch: info.arch,
            runtime: backend.kind().name().to_string(),
            runtime_version: versions.runtime.unwrap_or_default(),
            kernels: kernels.origin.to_string(),
            integrated: info.integrated,
        },
        memory: MemtestMemory {
            total_bytes: before.total,
            free_bytes: area.free,
            requested_fraction: options.fraction,
            tested_bytes: area.tested,
            fraction_of_free: area.tested as f64 / area.free.max(1) as f64,
            fraction_of_total: area.tested as f64 / before.total.max(1) as f64,
            chunks: chunk_infos,
            hit_allocation_limit: area.hit_allocation_limit,
            released_margin_bytes: area.released_margin_bytes,
            free_bytes_while_testing: area.free_while,
        },
        seed: options.seed,
        passes: options.passes,
        patterns: options
            .patterns
            .iter()
            .map(|p| p.name().to_string())
            .collect(),
        retention_ms: if options.patterns.contains(&Pattern::Retention) {
            options.retention_ms
        } else {
            0
        },
        phases: run.phases,
        per_pattern,
        errors,
        throughput,
        injected,
    })
}

/// The copy ceiling, measured before the test takes the memory.
fn measure_copy_ceiling_first(
    backend: &dyn DeviceRuntime,
    kernels: &KernelSet<'_>,
    stream: &Stream<'_>,
    options: &MemtestOptions,
    free_before: u64,
    progress: &mut dyn FnMut(&str),
) -> GpuResult<CopyCeiling> {
    let copy_bytes = options.copy_bytes.min(free_before / 8).max(16 * MIB) / 16 * 16;
    let copy = measure_copy_ceiling(backend, kernels, stream, copy_bytes, options.copy_reps)?;
    progress(&format!(
        "copy ceiling: memcpy {:.0} GB/s, kernel {:.0} GB/s ({} MiB x {})",
        copy.memcpy_gbps,
        copy.kernel_gbps,
        copy.bytes / MIB,
        copy.reps
    ));
    Ok(copy)
}

/// Sizes the test from the free memory, sets up the error sink, warms every kernel up and
/// allocates the chunks (giving back the safety margin).
fn take_test_memory<'b>(
    backend: &'b dyn DeviceRuntime,
    kernels: &KernelSet<'_>,
    stream: &Stream<'_>,
    options: &MemtestOptions,
    total: u64,
    progress: &mut dyn FnMut(&str),
) -> GpuResult<TestArea<'b>> {
    let free = backend.mem_info()?.free;
    let mut target = (free as f64 * options.fraction) as u64;
    if let Some(max) = options.max_bytes {
        target = target.min(max);
    }
    // Region tables are sized for the target and allocated before the chunks, and every
    // kernel runs once before the big allocation (lazy module loading needs memory too).
    let region_size = 1u64 << options.region_shift;
    let max_chunks = target.div_ceil(CHUNK_ALIGN) as usize + 1;
    let regions = (target / region_size) as usize + max_chunks + 1;
    let sink = ErrorSink::new(backend, regions, options.region_shift)?;
    warm_up(kernels, stream, &sink)?;

    let margin = options
        .margin_bytes
        .unwrap_or_else(|| (256 * MIB).max(total / 100));
    let allocation = allocate_chunks(
        target,
        options.chunk_bytes,
        options.min_chunk_bytes,
        margin,
        |bytes| backend.alloc(bytes as usize),
        |ptr| {
            let _ = backend.free(ptr);
        },
    )?;
    let owned = Owned {
        backend,
        ptrs: allocation.chunks.iter().map(|c| c.0).collect(),
    };
    if allocation.chunks.is_empty() {
        return Err(GpuError::InvalidArgument(format!(
            "no device memory could be allocated for the test (target {target} bytes of {free} free)"
        )));
    }
    let free_while = backend.mem_info().ok().map(|m| m.free);
    let mut chunks = Vec::new();
    let (mut offset, mut next_region) = (0u64, 0usize);
    for &(ptr, bytes) in &allocation.chunks {
        chunks.push(Chunk {
            ptr,
            bytes,
            offset,
            first_region: next_region,
        });
        offset += bytes;
        next_region += (bytes.div_ceil(region_size)) as usize;
    }
    let tested = offset;
    progress(&format!(
        "testing {:.2} GiB in {} allocation(s) ({:.1}% of free)",
        tested as f64 / GIB as f64,
        chunks.len(),
        100.0 * tested as f64 / free.max(1) as f64
    ));
    Ok(TestArea {
        _owned: owned,
        sink,
        chunks,
        tested,
        free,
        free_while,
        region_size,
        hit_allocation_limit: allocation.hit_limit,
        released_margin_bytes: allocation.released,
    })
}

/// The word to corrupt before every check, when the options ask to prove detection.
fn locate_injection(options: &MemtestOptions, area: &TestArea<'_>) -> GpuResult<Injection> {
    let Some(inject) = options.inject_error else {
        return Ok(None);
    };
    let offset = (inject.offset / 8 * 8).min(area.tested - 8);
    let chunk = area
        .chunks
        .iter()
        .find(|c| offset >= c.offset && offset < c.offset + c.bytes)
        .ok_or_else(|| GpuError::InvalidArgument("inject offset outside the test".into()))?;
    Ok(Some((
        offset,
        inject.bit,
        chunk.ptr + (offset - chunk.offset),
    )))
}

/// Runs every planned step over every chunk, one phase report per step, tallying the
/// errors the checks find.
fn run_steps(
    backend: &dyn DeviceRuntime,
    kernels: &KernelSet<'_>,
    stream: &Stream<'_>,
    options: &MemtestOptions,
    area: &TestArea<'_>,
    inject: Injection,
    progress: &mut dyn FnMut(&str),
) -> GpuResult<StepsRun> {
    let steps = plan_steps(options);
    let timer = EventTimer::new(backend)?;
    let mut run = StepsRun {
        phases: Vec::new(),
        tally: Tally {
            error_words: 0,
            error_bits: 0,
            zero_words: 0,
            histogram: vec![0; 64],
            examples: Vec::new(),
            truncated: false,
            regions: BTreeMap::new(),
        },
        injections: 0,
        waited: Duration::ZERO,
        wall: Duration::ZERO,
    };
    let mut current_pattern = None;
    let started = Instant::now();
    for step in &steps {
        if current_pattern != Some((step.pass, step.pattern)) {
            current_pattern = Some((step.pass, step.pattern));
            progress(&format!("pass {} {}", step.pass, step.pattern.name()));
        }
        let bench = Bench {
            backend,
            kernels,
            stream,
            timer: &timer,
            area,
            inject,
        };
        let phase = run_step(&bench, step, &mut run)?;
        run.phases.push(phase);
    }
    stream.synchronize()?;
    run.wall = started.elapsed();
    Ok(run)
}

/// One step: a wait, a fill of every chunk, or a check of every chunk (flipping the
/// injected bit first, and reading the error sink after).
fn run_step(bench: &Bench<'_, '_>, step: &Step, run: &mut StepsRun) -> GpuResult<PhaseReport> {
    let Bench {
        backend,
        kernels,
        stream,
        timer,
        area,
        inject,
    } = *bench;
    let (chunks, sink, tested) = (&area.chunks, &area.sink, area.tested);
    let label = format!("{} {}", step.pattern.name(), step.label);
    let mut phase = PhaseReport {
        pass: step.pass,
        pattern: step.pattern.name().to_string(),
        step: step.label.clone(),
        kind: PhaseKind::Wait,
        bytes_written: 0,
        bytes_read: 0,
        kernel_ms: 0.0,
        gbps: 0.0,
        error_words: 0,
        error_bits: 0,
    };
    match step.action {
        Action::Wait { ms } => {
            stream.synchronize()?;
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(ms));
            run.waited += t.elapsed();
            phase.kernel_ms = t.elapsed().as_secs_f64() * 1e3;
        }
        Action::Fill { generator, a, x } => {
            let (_, ms) = timer.time(stream, || {
                for c in chunks {
                    kernels.fill(stream, generator, c.ptr, c.bytes, c.offset / 8, a, x)?;
                }
                Ok(())
            })?;
            phase.kind = PhaseKind::Write;
            phase.bytes_written = tested;
            phase.kernel_ms = ms;
        }
        Action::Check {
            generator,
            a,
            x,
            rewrite,
        } => {
            if let Some((_, bit, address)) = inject {
                stream.synchronize()?;
                flip_bit(backend, address, bit)?;
                run.injections += 1;
            }
            let (_, ms) = timer.time(stream, || {
                for c in chunks {
                    let request = CheckRequest {
                        generator,
                        ptr: c.ptr,
                        bytes: c.bytes,
                        word_base: c.offset / 8,
                        a,
                        x,
                        rewrite,
                        first_region: c.first_region,
                    };
                    kernels.check(stream, &request, sink)?;
                }
                Ok(())
            })?;
            let readout = sink.read()?;
            phase.kind = if rewrite {
                PhaseKind::CheckInvert
            } else {
                PhaseKind::Check
            };
            phase.bytes_read = tested;
            phase.bytes_written = if rewrite { tested } else { 0 };
            phase.kernel_ms = ms;
            phase.error_words = readout.error_words;
            phase.error_bits = readout.error_bits;
            if readout.error_words > 0 {
                absorb(&mut run.tally, &readout, sink, chunks, &label)?;
                sink.reset_regions()?;
            }
            sink.reset_counters()?;
        }
    }
    phase.gbps = gbps(phase.bytes_written + phase.bytes_read, phase.kernel_ms);
    Ok(phase)
}

/// Bytes moved, kernel and wall time, and the bandwidths against the copy ceiling.
fn summarize_throughput(
    phases: &[PhaseReport],
    wall: Duration,
    waited: Duration,
    copy: CopyCeiling,
) -> Throughput {
    let bytes_written: u64 = phases.iter().map(|p| p.bytes_written).sum();
    let bytes_read: u64 = phases.iter().map(|p| p.bytes_read).sum();
    let kernel_ms: f64 = phases
        .iter()
        .filter(|p| p.kind != PhaseKind::Wait)
        .map(|p| p.kernel_ms)
        .sum();
    let busy = wall.saturating_sub(waited);
    let kernel_gbps = gbps(bytes_written + bytes_read, kernel_ms);
    let wall_gbps = gbps(bytes_written + bytes_read, busy.as_secs_f64() * 1e3);
    let ratio = |v: f64| {
        if copy.reference_gbps > 0.0 {
            v / copy.reference_gbps
        } else {
            0.0
        }
    };
    Throughput {
        bytes_written,
        bytes_read,
        kernel_seconds: kernel_ms / 1e3,
        wall_seconds: wall.as_secs_f64(),
        waited_seconds: waited.as_secs_f64(),
        kernel_gbps,
        wall_gbps,
        kernel_vs_copy: ratio(kernel_gbps),
        wall_vs_copy: ratio(wall_gbps),
        copy,
    }
}

/// The phases summed per pattern, in the order the patterns first ran.
fn summarize_patterns(phases: &[PhaseReport]) -> Vec<PatternSummary> {
    let mut per_pattern: Vec<PatternSummary> = Vec::new();
    for phase in phases {
        let index = match per_pattern.iter().position(|p| p.pattern == phase.pattern) {
            Some(index) => index,
            None => {
                per_pattern.push(PatternSummary {
                    pattern: phase.pattern.clone(),
                    phases: 0,
                    bytes_checked: 0,
                    error_words: 0,
                    error_bits: 0,
                    kernel_ms: 0.0,
                });
                per_pattern.len() - 1
            }
        };
        let entry = &mut per_pattern[index];
        entry.phases += 1;
        entry.bytes_checked += phase.bytes_read;
        entry.error_words += phase.error_words;
        entry.error_bits += phase.error_bits;
        if phase.kind != PhaseKind::Wait {
            entry.kernel_ms += phase.kernel_ms;
        }
    }
    per_pattern
}

/// The errors found: totals, coalesced address ranges, examples, whether the injected
/// bit (if any) was found exactly, and the diagnosis.
fn collect_errors(
    tally: Tally,
    area: &TestArea<'_>,
    inject: Injection,
    injections: u64,
    chunk_infos: &[ChunkInfo],
) -> (MemtestErrors, Option<InjectedError>) {
    let offset_of = |address: u64| offset_in(&area.chunks, address);
    let regions: Vec<RegionAggregate> = tally.regions.values().cloned().collect();
    let all_ranges = coalesce_regions(&regions, area.region_size, offset_of);
    let mut errors = MemtestErrors {
        error_words: tally.error_words,
        error_bits: tally.error_bits,
        zero_words: tally.zero_words,
        bit_histogram: tally.histogram,
        ranges_total: all_ranges.len() as u64,
        ranges: all_ranges.into_iter().take(MAX_RANGES).collect(),
        examples: tally.examples,
        examples_truncated: tally.truncated,
        diagnosis: Vec::new(),
    };
    let injected = inject.map(|(offset, bit, address)| {
        let exact = errors.error_words == injections
            && errors.error_bits == injections
            && errors.bit_histogram[bit as usize] == injections
            && errors.ranges.len() == 1
            && errors.ranges[0].start_address == address
            && errors.ranges[0].end_address == address + 8;
        InjectedError {
            offset,
            bit,
            address,
            injections,
            found_exactly: exact,
        }
    });
    errors.diagnosis = diagnose(&errors, injected.as_ref(), chunk_infos);
    (errors, injected)
}

fn offset_in(chunks: &[Chunk], address: u64) -> u64 {
    chunks
        .iter()
        .find(|c| address >= c.ptr && address < c.ptr + c.bytes)
        .map_or(u64::MAX, |c| c.offset + (address - c.ptr))
}

fn warm_up(kernels: &KernelSet<'_>, stream: &Stream<'_>, sink: &ErrorSink<'_>) -> GpuResult<()> {
    // Zero-length launches of every kernel: loads them lazily now, while memory is free.
    for generator in Generator::ALL {
        kernels.fill(stream, generator, 0, 0, 0, 0, 0)?;
        let request = CheckRequest {
            generator,
            ptr: 0,
            bytes: 0,
            word_base: 0,
            a: 0,
            x: 0,
            rewrite: false,
            first_region: 0,
        };
        kernels.check(stream, &request, sink)?;
    }
    kernels.copy(stream, 0, 0, 0)?;
    stream.synchronize()
}

/// Flips one bit of the 64-bit word at `address` through a read-modify-write copy.
fn flip_bit(backend: &dyn DeviceRuntime, address: DevicePtr, bit: u8) -> GpuResult<()> {
    let mut word = [0u8; 8];
    backend.dtoh(&mut word, address)?;
    let flipped = u64::from_le_bytes(word) ^ (1u64 << bit);
    backend.htod(address, &flipped.to_le_bytes())
}

fn absorb(
    tally: &mut Tally,
    readout: &crate::kernels::SinkReadout,
    sink: &ErrorSink<'_>,
    chunks: &[Chunk],
    label: &str,
) -> GpuResult<()> {
    tally.error_words += readout.error_words;
    tally.error_bits += readout.error_bits;
    tally.zero_words += readout.zero_words;
    for (slot, n) in tally.histogram.iter_mut().zip(&readout.bit_histogram) {
        *slot += n;
    }
    for &(address, expected, found) in &readout.examples {
        if tally.examples.len() >= MAX_EXAMPLES {
            tally.truncated = true;
            break;
        }
        tally.examples.push(ErrorExample {
            pattern: label.to_string(),
            address,
            offset: offset_in(chunks, address),
            expected: format!("{expected:#018x}"),
            found: format!("{found:#018x}"),
            bits: bit_positions(expected ^ found),
        });
    }
    if readout.examples_claimed > readout.examples.len() as u64 {
        tally.truncated = true;
    }
    let pattern = label.split(' ').next().unwrap_or(label).to_string();
    for region in sink.read_regions()? {
        let entry = tally
            .regions
            .entry(region.index)
            .or_insert_with(|| RegionAggregate {
                count: 0,
                lo: u64::MAX,
                hi: 0,
                patterns: BTreeSet::new(),
            });
        entry.count += region.count;
        entry.lo = entry.lo.min(region.lo);
        entry.hi = entry.hi.max(region.hi);
        entry.patterns.insert(pattern.clone());
    }
    Ok(())
}

/// The memtest as a bit-exact comparison: words checked, differing words, zero words, check
/// steps as trials.
pub(crate) fn compare_stats(report: &MemtestReport) -> gpuprobe_model::CompareStats {
    let checks: Vec<&PhaseReport> = report
        .phases
        .iter()
        .filter(|p| matches!(p.kind, PhaseKind::Check | PhaseKind::CheckInvert))
        .collect();
    let words_per_check = report.memory.tested_bytes / 8;
    gpuprobe_model::CompareStats {
        n: words_per_check * checks.len() as u64,
        mismatches: report.errors.error_words,
        zeros_where_nonzero: report.errors.zero_words,
        nonfinite_where_finite: 0,
        unchanged: 0,
        trials: checks.len() as u64,
        failed_trials: checks.iter().filter(|p| p.error_words > 0).count() as u64,
        // A check whose every word came back wrong and zero: the memory reads as all zeros.
        all_zero_trials: if report.errors.zero_words > 0
            && report.errors.zero_words == report.errors.error_words
        {
            checks
                .iter()
                .filter(|p| p.error_words == words_per_check && words_per_check > 0)
                .count() as u64
        } else {
            0
        },
        max_abs_err: None,
        max_rel_err: None,
        max_ulp: None,
        first_mismatch: report
            .errors
            .examples
            .first()
            .map(|e| gpuprobe_model::MismatchExample {
                index: e.offset / 8,
                trial: 0,
                expected: e.expected.clone(),
                found: e.found.clone(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oom() -> GpuError {
        GpuError::Api {
            api: "alloc",
            code: 2,
            name: "OOM".into(),
            description: String::new(),
        }
    }

    #[test]
    fn plan_covers_every_pattern_with_fill_before_check() {
        let options = MemtestOptions::full(7);
        let steps = plan_steps(&options);
        for pattern in Pattern::ALL {
            assert!(
                steps.iter().any(|s| s.pattern == pattern),
                "{pattern:?} missing"
            );
        }
        // Walking: 8 rotations × (fill + check) for ones and zeros.
        assert_eq!(
            steps
                .iter()
                .filter(|s| s.pattern == Pattern::WalkingOnes)
                .count(),
            16
        );
        // Moving inversions: three base patterns × four steps, the middle two rewriting.
        let mi: Vec<&Step> = steps
            .iter()
            .filter(|s| s.pattern == Pattern::MovingInversions)
            .collect();
        assert_eq!(mi.len(), 12);
        assert!(matches!(
            mi[1].action,
            Action::Check {
                rewrite: true,
                x: 0,
                ..
            }
        ));
        assert!(matches!(
            mi[2].action,
            Action::Check {
                rewrite: true,
                x: u64::MAX,
                ..
            }
        ));
        assert!(matches!(
            mi[3].action,
            Action::Check {
                rewrite: false,
                x: 0,
                ..
            }
        ));
        let retention: Vec<&Step> = steps
            .iter()
            .filter(|s| s.pattern == Pattern::Retention)
            .collect();
        assert!(matches!(retention[1].action, Action::Wait { ms: 1000 }));
        // Every check is preceded (in its pattern) by a fill of the same generator.
        let mut last_fill = None;
        for s in &steps {
            match s.action {
                Action::Fill { generator, .. } => last_fill = Some(generator),
                Action::Check { generator, .. } => assert_eq!(last_fill, Some(generator)),
                Action::Wait { .. } => {}
            }
        }
    }

    #[test]
    fn passes_use_fresh_random_seeds() {
        let mut options = MemtestOptions::full(1);
        options.passes = 2;
        options.patterns = vec![Pattern::Random];
        let seeds: Vec<u64> = plan_steps(&options)
            .iter()
            .filter_map(|s| match s.action {
                Action::Fill { a, .. } => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(seeds.len(), 2);
        assert_ne!(seeds[0], seeds[1]);
    }

    #[test]
    fn options_parse_and_reject_bad_values() {
        let mut options = MemtestOptions::full(0);
        let parsed: BTreeMap<String, serde_json::Value> = serde_json::from_str(
            r#"{"fraction":0.5,"passes":3,"patterns":["random","own_address"],"seed":9,
                "inject_error":{"offset":4096,"bit":13},"retention_ms":10,"soak_seconds":5}"#,
        )
        .unwrap();
        options.apply(&parsed).unwrap();
        assert_eq!(options.fraction, 0.5);
        assert_eq!(options.passes, 3);
        assert_eq!(options.patterns, vec![Pattern::Random, Pattern::OwnAddress]);
        assert_eq!(
            options.inject_error,
            Some(InjectError {
                offset: 4096,
                bit: 13
            })
        );
        for bad in [
            r#"{"fraction":1.5}"#,
            r#"{"fraction":"x"}"#,
            r#"{"patterns":["nope"]}"#,
            r#"{"patterns":[]}"#,
            r#"{"inject_error":{"offset":1,"bit":64}}"#,
            r#"{"walk_rotations":0}"#,
            r#"{"block":100}"#,
        ] {
            let map: BTreeMap<String, serde_json::Value> = serde_json::from_str(bad).unwrap();
            assert!(
                MemtestOptions::full(0).apply(&map).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn allocation_backs_off_and_releases_a_margin() {
        // A device with 10 GiB really allocatable.
        let left = std::cell::Cell::new(10 * GIB);
        let sizes = std::cell::RefCell::new(BTreeMap::new());
        let next = std::cell::Cell::new(0x1000_0000u64);
        let allocation = allocate_chunks(
            64 * GIB,
            4 * GIB,
            64 * MIB,
            256 * MIB,
            |bytes| {
                if bytes > left.get() {
                    return Err(oom());
                }
                left.set(left.get() - bytes);
                let ptr = next.get();
                next.set(ptr + bytes);
                sizes.borrow_mut().insert(ptr, bytes);
                Ok(ptr)
            },
            |ptr| {
                let bytes = sizes.borrow_mut().remove(&ptr).unwrap_or(0);
                left.set(left.get() + bytes);
            },
        )
        .unwrap();
        assert!(allocation.hit_limit);
        let total: u64 = allocation.chunks.iter().map(|c| c.1).sum();
        assert!(total <= 10 * GIB - 256 * MIB, "kept {total}");
        assert!(
            total >= 10 * GIB - 256 * MIB - CHUNK_ALIGN,
            "kept only {total}"
        );
        assert!(allocation.released >= 256 * MIB);
        assert_eq!(left.get(), 10 * GIB - total);
    }

    #[test]
    fn allocation_stops_at_the_target_without_margin() {
        let mut count = 0u64;
        let allocation = allocate_chunks(
            5 * GIB,
            4 * GIB,
            64 * MIB,
            256 * MIB,
            |bytes| {
                count += 1;
                Ok(count * 0x1_0000_0000 + bytes)
            },
            |_| {},
        )
        .unwrap();
        assert!(!allocation.hit_limit);
        assert_eq!(
            allocation.chunks.iter().map(|c| c.1).collect::<Vec<_>>(),
            vec![4 * GIB, GIB]
        );
        assert_eq!(allocation.released, 0);
    }

    #[test]
    fn allocation_passes_other_errors_through_and_frees() {
        let mut freed = 0;
        let mut calls = 0;
        let result = allocate_chunks(
            8 * GIB,
            GIB,
            64 * MIB,
            0,
            |_| {
                calls += 1;
                if calls == 3 {
                    Err(GpuError::Api {
                        api: "alloc",
                        code: 999,
                        name: "UNKNOWN".into(),
                        description: String::new(),
                    })
                } else {
                    Ok(calls)
                }
            },
            |_| freed += 1,
        );
        assert!(matches!(result, Err(GpuError::Api { code: 999, .. })));
        assert_eq!(freed, 2);
    }

    proptest::proptest! {
        #[test]
        fn allocation_never_exceeds_target_or_device(
            target in 0u64..(40 * GIB), device in 0u64..(40 * GIB), max_chunk in (64 * MIB)..(8 * GIB)
        ) {
            let mut left = device;
            let allocation = allocate_chunks(target, max_chunk, 64 * MIB, 256 * MIB, |b| {
                if b > left { Err(oom()) } else { left -= b; Ok(b) }
            }, |_| {}).unwrap();
            let total: u64 = allocation.chunks.iter().map(|c| c.1).sum();
            proptest::prop_assert!(total <= target);
            proptest::prop_assert!(total <= device);
            for (_, bytes) in &allocation.chunks {
                proptest::prop_assert_eq!(bytes % CHUNK_ALIGN, 0);
            }
        }
    }
}
