//! The probes that fill the device: the reported free memory allocated in chunks that each
//! keep their own data (`native.alloc.usable.chunks`), and the largest single allocation,
//! written and read back past 2^31 and 2^32 (`native.alloc.largest.single`).
//!
//! They ask the driver (CUDA) or runtime (HIP) directly, one layer under a framework's
//! caching allocator, and run alone on the device before any other lane touches it
//! (placement `first`): a Python worker spends its first seconds importing the framework,
//! which is when these run. What they judge is what a user who trains a large model needs
//! from the device: that the memory reported free can be had, and that a block past 4 GiB
//! holds what is written at its far offsets.
//!
//! Like the framework's allocator probes they leave a margin for other processes
//! ([`margin_bytes`]), and an allocation that fails counts as a violation only when the
//! free memory, asked again after the failure, still covers it (on a GPU shared with
//! another job, free memory changes under the probe).
//!
//! Written against [`FillDevice`], the few calls they need, so that the judging is tested
//! on a simulated device that can hand memory out twice or lose it.

use std::collections::BTreeMap;
use std::time::Instant;

use gpuprobe_model::InvariantCheck;
use serde_json::{Value, json};

use crate::backend::{DeviceRuntime, MemInfo};
use crate::error::GpuResult;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Allocations are sized in multiples of this (the drivers' large-page granularity).
const ROUND: u64 = 2 * MIB;
/// Bytes read back from each sampled window of a chunk.
const WINDOW: u64 = 64 * 1024;
/// Bytes of the stamp written at the start of each window: it names the chunk, so memory
/// handed out twice shows another chunk's stamp.
const STAMP: usize = 16;
/// The largest-allocation search stops after this many allocations, or after
/// [`SEARCH_SECONDS`].
const SEARCH_STEPS: u32 = 40;
/// The largest-allocation search's time bound (the framework probe's `time_bound_s`).
pub(crate) const SEARCH_SECONDS: f64 = 8.0;

/// What these probes need from a device: the [`DeviceRuntime`] calls they make.
pub(crate) trait FillDevice {
    /// Free and total device memory now.
    fn mem_info(&self) -> GpuResult<MemInfo>;
    /// Allocates `bytes` of device memory.
    fn alloc(&self, bytes: u64) -> GpuResult<u64>;
    /// Frees an allocation.
    fn free(&self, ptr: u64) -> GpuResult<()>;
    /// Sets `bytes` bytes at `ptr` to `value`.
    fn memset(&self, ptr: u64, value: u8, bytes: u64) -> GpuResult<()>;
    /// Copies `data` to `ptr` (synchronous).
    fn write(&self, ptr: u64, data: &[u8]) -> GpuResult<()>;
    /// Copies from `ptr` into `out` (synchronous).
    fn read(&self, ptr: u64, out: &mut [u8]) -> GpuResult<()>;
}

impl FillDevice for &dyn DeviceRuntime {
    fn mem_info(&self) -> GpuResult<MemInfo> {
        DeviceRuntime::mem_info(*self)
    }
    fn alloc(&self, bytes: u64) -> GpuResult<u64> {
        DeviceRuntime::alloc(*self, usize::try_from(bytes).unwrap_or(usize::MAX))
    }
    fn free(&self, ptr: u64) -> GpuResult<()> {
        DeviceRuntime::free(*self, ptr)
    }
    fn memset(&self, ptr: u64, value: u8, bytes: u64) -> GpuResult<()> {
        DeviceRuntime::memset_d8(
            *self,
            ptr,
            value,
            usize::try_from(bytes).unwrap_or(usize::MAX),
        )
    }
    fn write(&self, ptr: u64, data: &[u8]) -> GpuResult<()> {
        DeviceRuntime::htod(*self, ptr, data)
    }
    fn read(&self, ptr: u64, out: &mut [u8]) -> GpuResult<()> {
        DeviceRuntime::dtoh(*self, out, ptr)
    }
}

/// What a filling probe observed: its judged property, its measured facts, and notes.
pub(crate) struct Filled {
    pub check: InvariantCheck,
    pub metrics: BTreeMap<String, Value>,
    pub notes: Vec<String>,
}

/// Memory the filling probes leave free: 5% of the device, between 256 MiB and 4 GiB (the
/// framework allocator probes' rule, `alloc/run.py`).
pub(crate) fn margin_bytes(total: u64) -> u64 {
    (total / 20).clamp(256 * MIB, 4 * GIB)
}

fn round_down(value: u64, unit: u64) -> u64 {
    value / unit * unit
}

/// Frees every allocation it holds when dropped, whatever path the probe leaves by.
struct Held<'d, D: FillDevice + ?Sized> {
    device: &'d D,
    blocks: Vec<(u64, u64)>,
}

impl<D: FillDevice + ?Sized> Drop for Held<'_, D> {
    fn drop(&mut self) {
        for (ptr, _) in self.blocks.drain(..) {
            // A failing free leaves nothing to recover; the next probe sees the device state.
            let _ = self.device.free(ptr);
        }
    }
}

/// A non-zero byte for chunk `index`: neighbours differ, so a chunk that reads its
/// neighbour's memory is seen even where the stamps are intact.
fn tag(seed: u64, index: usize) -> u8 {
    (1 + (seed.wrapping_add(index as u64) % 255)) as u8
}

/// The stamp at the start of each of chunk `index`'s windows: the seed's mix and the index.
fn stamp(seed: u64, index: usize) -> [u8; STAMP] {
    let mixed = (seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(index as u64 + 1) | 1;
    let mut out = [0u8; STAMP];
    out[..8].copy_from_slice(&mixed.to_le_bytes());
    out[8..].copy_from_slice(&(index as u64).to_le_bytes());
    out
}

/// Where a chunk of `bytes` is read back: its start, middle and end.
fn windows(bytes: u64) -> Vec<u64> {
    let window = WINDOW.min(bytes);
    let mut offsets = vec![0, round_down(bytes / 2, 4096), bytes - window];
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

/// `native.alloc.usable.chunks`: the reported free memory, less [`margin_bytes`], allocated
/// in chunks (1 GiB where 16 GiB or more are free); each chunk set to its own byte, a stamp
/// naming it written at the start of three windows, and all windows read back once every
/// chunk is held. A chunk is a violation when a window lost its data, or when allocating it
/// failed while free memory still covered it.
pub(crate) fn usable_chunks<D: FillDevice + ?Sized>(device: &D, seed: u64) -> GpuResult<Filled> {
    let info = device.mem_info()?;
    let margin = margin_bytes(info.total);
    let target = info.free.saturating_sub(margin);
    let chunk = if target >= 16 * GIB {
        GIB
    } else {
        round_down(target / 16, ROUND).max(64 * MIB)
    };
    let mut metrics = BTreeMap::new();
    metrics.insert("free_bytes".into(), json!(info.free));
    metrics.insert("total_bytes".into(), json!(info.total));
    metrics.insert("margin_bytes".into(), json!(margin));
    metrics.insert("target_bytes".into(), json!(target));
    metrics.insert("chunk_bytes".into(), json!(chunk));
    let mut notes = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut held = Held {
        device,
        blocks: Vec::new(),
    };
    let started = Instant::now();
    let mut bytes_held = 0u64;
    while bytes_held + chunk <= target {
        let index = held.blocks.len();
        let ptr = match device.alloc(chunk) {
            Ok(ptr) => ptr,
            Err(error) if error.is_out_of_memory() => {
                let free_now = device.mem_info()?.free;
                if free_now >= chunk + margin / 2 {
                    failures.push(format!(
                        "allocation {index} of {chunk} B failed with {free_now} B reported free: {error}"
                    ));
                } else {
                    notes.push(format!(
                        "free memory shrank to {free_now} B while filling (another process?)"
                    ));
                }
                break;
            }
            Err(error) => return Err(error),
        };
        held.blocks.push((ptr, chunk));
        bytes_held += chunk;
        device.memset(ptr, tag(seed, index), chunk)?;
        for offset in windows(chunk) {
            device.write(ptr + offset, &stamp(seed, index))?;
        }
    }
    metrics.insert("fill_seconds".into(), json!(seconds_since(started)));
    let mut bad = 0u64;
    let mut zeros = 0u64;
    let mut example: Option<String> = failures.first().cloned();
    let mut buffer = vec![0u8; usize::try_from(WINDOW.min(chunk)).unwrap_or(0)];
    for (index, &(ptr, bytes)) in held.blocks.iter().enumerate() {
        let expected_tag = tag(seed, index);
        let mut wrong_here: Option<String> = None;
        let mut all_zero = true;
        for offset in windows(bytes) {
            device.read(ptr + offset, &mut buffer)?;
            all_zero &= buffer.iter().all(|b| *b == 0);
            if wrong_here.is_some() {
                continue;
            }
            if buffer[..STAMP] != stamp(seed, index) {
                wrong_here = Some(match named_chunk(&buffer[..STAMP], seed) {
                    Some(other) if other != index => format!(
                        "chunk {index}: its window at byte {offset} holds chunk {other}'s stamp (memory handed out twice)"
                    ),
                    _ => format!("chunk {index}: the stamp at byte {offset} was not kept"),
                });
            } else if let Some(at) = buffer[STAMP..].iter().position(|b| *b != expected_tag) {
                let found = buffer[STAMP + at];
                wrong_here = Some(format!(
                    "chunk {index}: byte {} holds {found:#04x}, set to {expected_tag:#04x}",
                    offset + (STAMP + at) as u64
                ));
            }
        }
        if let Some(text) = wrong_here {
            bad += 1;
            if all_zero {
                zeros += 1;
            }
            example.get_or_insert(text);
        }
    }
    let chunks = held.blocks.len() as u64;
    drop(held);
    metrics.insert("allocated_bytes".into(), json!(bytes_held));
    metrics.insert("chunks".into(), json!(chunks));
    metrics.insert(
        "usable_fraction_of_free".into(),
        json!(fraction(bytes_held, info.free)),
    );
    metrics.insert(
        "usable_fraction_of_total".into(),
        json!(fraction(bytes_held, info.total)),
    );
    Ok(Filled {
        check: InvariantCheck {
            property:
                "every chunk of the reported free memory can be allocated and keeps its own data"
                    .into(),
            checked: chunks + failures.len() as u64,
            violations: bad + failures.len() as u64,
            zero_violations: zeros,
            example,
        },
        metrics,
        notes,
    })
}

/// The chunk a stamp names, when it is one of this probe's stamps.
fn named_chunk(found: &[u8], seed: u64) -> Option<usize> {
    let index = usize::try_from(u64::from_le_bytes(found.get(8..16)?.try_into().ok()?)).ok()?;
    (found == stamp(seed, index)).then_some(index)
}

/// Seconds since `started`, to the millisecond.
fn seconds_since(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0
}

fn fraction(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0)
}

/// The byte offsets of a block of `bytes` that are written and read back: both sides of
/// 2^31 and 2^32 (where 32-bit offsets wrap), the middle and the last byte.
fn far_offsets(bytes: u64) -> Vec<u64> {
    let mut offsets: Vec<u64> = [
        0,
        (1 << 31) - 1,
        1 << 31,
        (1 << 32) - 1,
        1 << 32,
        bytes / 2,
        bytes.saturating_sub(1),
    ]
    .into_iter()
    .filter(|o| *o < bytes)
    .collect();
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

/// `native.alloc.largest.single`: the largest single allocation (nearly all that is free
/// first, which usually fits; else a binary search bounded by `time_bound_s` and
/// [`SEARCH_STEPS`]), then a distinct byte written and read back at each of its
/// [`far_offsets`].
pub(crate) fn largest_single<D: FillDevice + ?Sized>(
    device: &D,
    time_bound_s: f64,
) -> GpuResult<Filled> {
    let info = device.mem_info()?;
    let high = round_down(info.free.saturating_sub(64 * MIB), ROUND);
    let resolution = round_down(high / 256, ROUND).max(64 * MIB);
    let mut metrics = BTreeMap::new();
    metrics.insert("free_bytes".into(), json!(info.free));
    metrics.insert("total_bytes".into(), json!(info.total));
    metrics.insert("resolution_bytes".into(), json!(resolution));
    let attempt = |bytes: u64| -> GpuResult<Option<u64>> {
        match device.alloc(bytes) {
            Ok(ptr) => Ok(Some(ptr)),
            Err(error) if error.is_out_of_memory() => Ok(None),
            Err(error) => Err(error),
        }
    };
    let started = Instant::now();
    let mut steps = 1u32;
    let mut bounded_by = "found";
    let mut held = Held {
        device,
        blocks: Vec::new(),
    };
    let first = if high > 0 { attempt(high)? } else { None };
    let mut best = 0u64;
    if let Some(ptr) = first {
        held.blocks.push((ptr, high));
        best = high;
    } else {
        let (mut low, mut top) = (0u64, high);
        while top - low > resolution {
            if steps >= SEARCH_STEPS {
                bounded_by = "steps";
                break;
            }
            if started.elapsed().as_secs_f64() > time_bound_s {
                bounded_by = "time";
                break;
            }
            let half = (low + top) / 2;
            let middle = match round_down(half, ROUND) {
                0 => half,
                rounded => rounded,
            };
            steps += 1;
            if let Some(ptr) = attempt(middle)? {
                device.free(ptr)?;
                low = middle;
                best = middle;
            } else {
                top = middle;
            }
        }
    }
    metrics.insert("largest_bytes".into(), json!(best));
    metrics.insert(
        "largest_fraction_of_free".into(),
        json!(fraction(best, info.free)),
    );
    metrics.insert("search_steps".into(), json!(steps));
    metrics.insert("search_seconds".into(), json!(seconds_since(started)));
    metrics.insert("bounded_by".into(), json!(bounded_by));
    if best == 0 {
        return Ok(Filled {
            check: InvariantCheck {
                property: "a single allocation of the reported free memory succeeds".into(),
                checked: 1,
                violations: 1,
                zero_violations: 0,
                example: Some(format!("nothing fit in {} B free", info.free)),
            },
            metrics,
            notes: Vec::new(),
        });
    }
    if held.blocks.is_empty() {
        let Some(ptr) = attempt(best)? else {
            return Ok(Filled {
                check: InvariantCheck {
                    property: "the largest single allocation found can be made again".into(),
                    checked: 1,
                    violations: 1,
                    zero_violations: 0,
                    example: Some(format!("{best} B fit during the search, then failed")),
                },
                metrics,
                notes: Vec::new(),
            });
        };
        held.blocks.push((ptr, best));
    }
    let ptr = held.blocks[0].0;
    let offsets = far_offsets(best);
    let value = |i: usize| ((37 * i + 11) % 255 + 1) as u8;
    for (i, offset) in offsets.iter().enumerate() {
        device.write(ptr + offset, &[value(i)])?;
    }
    let mut wrong: Vec<(u64, u8, u8)> = Vec::new();
    for (i, offset) in offsets.iter().enumerate() {
        let mut found = [0u8; 1];
        device.read(ptr + offset, &mut found)?;
        if found[0] != value(i) {
            wrong.push((*offset, value(i), found[0]));
        }
    }
    drop(held);
    metrics.insert(
        "offsets_checked".into(),
        json!(
            offsets
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    );
    Ok(Filled {
        check: InvariantCheck {
            property:
                "the largest single allocation holds what was written at offsets past 2^31 and 2^32"
                    .into(),
            checked: offsets.len() as u64,
            violations: wrong.len() as u64,
            zero_violations: wrong.iter().filter(|(_, _, got)| *got == 0).count() as u64,
            example: wrong.first().map(|(offset, wrote, got)| {
                format!("byte {offset} of a {best} B block: wrote {wrote}, read {got}")
            }),
        },
        metrics,
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GpuError;
    use std::cell::RefCell;

    /// A device whose memory is a list of writes, newest last: a byte reads as the newest
    /// write that covers it (zero where none does). Faults: an allocation that returns an
    /// earlier block's address, a window that reads back as zeros, a wrap of offsets at
    /// 2^32, and allocations that fail while free memory is still reported.
    #[derive(Default)]
    struct SimulatedDevice {
        total: u64,
        free: RefCell<u64>,
        next: RefCell<u64>,
        sizes: RefCell<BTreeMap<u64, u64>>,
        writes: RefCell<Vec<(u64, u64, Vec<u8>)>>,
        allocations: RefCell<usize>,
        alias_allocation: Option<usize>,
        refuse_after: Option<usize>,
        refuse_above: Option<u64>,
        wrap_at_4gib: bool,
        zero_reads: bool,
    }

    fn oom() -> GpuError {
        GpuError::Api {
            api: "cuMemAlloc_v2",
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            description: "out of memory".into(),
        }
    }

    impl SimulatedDevice {
        fn new(total: u64) -> Self {
            SimulatedDevice {
                total,
                free: RefCell::new(total - total / 50),
                next: RefCell::new(1 << 40),
                ..SimulatedDevice::default()
            }
        }

        fn address(&self, ptr: u64) -> u64 {
            if self.wrap_at_4gib {
                let base = self
                    .sizes
                    .borrow()
                    .range(..=ptr)
                    .next_back()
                    .map_or(0, |(b, _)| *b);
                base + (ptr - base) % (1 << 32)
            } else {
                ptr
            }
        }
    }

    impl FillDevice for SimulatedDevice {
        fn mem_info(&self) -> GpuResult<MemInfo> {
            Ok(MemInfo {
                free: *self.free.borrow(),
                total: self.total,
            })
        }
        fn alloc(&self, bytes: u64) -> GpuResult<u64> {
            let n = {
                let mut count = self.allocations.borrow_mut();
                *count += 1;
                *count
            };
            let refused = self.refuse_after.is_some_and(|after| n > after)
                || self.refuse_above.is_some_and(|limit| bytes > limit);
            if refused || bytes > *self.free.borrow() {
                return Err(oom());
            }
            *self.free.borrow_mut() -= bytes;
            let ptr = if self.alias_allocation == Some(n) {
                *self.sizes.borrow().keys().next().expect("an earlier block")
            } else {
                let ptr = *self.next.borrow();
                *self.next.borrow_mut() += bytes + GIB;
                ptr
            };
            self.sizes.borrow_mut().insert(ptr, bytes);
            Ok(ptr)
        }
        fn free(&self, ptr: u64) -> GpuResult<()> {
            if let Some(bytes) = self.sizes.borrow_mut().remove(&ptr) {
                *self.free.borrow_mut() += bytes;
            }
            Ok(())
        }
        fn memset(&self, ptr: u64, value: u8, bytes: u64) -> GpuResult<()> {
            self.writes.borrow_mut().push((ptr, bytes, vec![value]));
            Ok(())
        }
        fn write(&self, ptr: u64, data: &[u8]) -> GpuResult<()> {
            let at = self.address(ptr);
            self.writes
                .borrow_mut()
                .push((at, data.len() as u64, data.to_vec()));
            Ok(())
        }
        fn read(&self, ptr: u64, out: &mut [u8]) -> GpuResult<()> {
            let writes = self.writes.borrow();
            for (i, byte) in out.iter_mut().enumerate() {
                let at = self.address(ptr + i as u64);
                *byte = if self.zero_reads {
                    0
                } else {
                    writes
                        .iter()
                        .rev()
                        .find(|(start, len, _)| at >= *start && at < start + len)
                        .map_or(0, |(start, _, data)| {
                            if data.len() == 1 {
                                data[0]
                            } else {
                                data[(at - start) as usize]
                            }
                        })
                };
            }
            Ok(())
        }
    }

    #[test]
    fn a_sound_device_fills_every_chunk_and_frees_them() {
        let device = SimulatedDevice::new(40 * GIB);
        let free_before = *device.free.borrow();
        let filled = usable_chunks(&device, 7).unwrap();
        assert_eq!(filled.check.violations, 0, "{:?}", filled.check.example);
        assert!(filled.check.checked >= 30, "{}", filled.check.checked);
        assert_eq!(filled.metrics["chunk_bytes"], json!(GIB));
        assert_eq!(*device.free.borrow(), free_before, "every chunk was freed");
    }

    #[test]
    fn memory_handed_out_twice_is_a_violation_that_names_both_chunks() {
        let device = SimulatedDevice {
            alias_allocation: Some(3),
            ..SimulatedDevice::new(40 * GIB)
        };
        let filled = usable_chunks(&device, 7).unwrap();
        assert_eq!(filled.check.violations, 1);
        let example = filled.check.example.unwrap();
        assert!(
            example.contains("chunk 0") && example.contains("chunk 2"),
            "{example}"
        );
        assert!(example.contains("handed out twice"), "{example}");
    }

    #[test]
    fn memory_that_reads_back_as_zeros_is_counted_as_zero_violations() {
        let device = SimulatedDevice {
            zero_reads: true,
            ..SimulatedDevice::new(8 * GIB)
        };
        let filled = usable_chunks(&device, 1).unwrap();
        assert_eq!(filled.check.violations, filled.check.checked);
        assert_eq!(filled.check.zero_violations, filled.check.violations);
    }

    #[test]
    fn an_allocation_refused_while_memory_is_reported_free_is_a_violation() {
        let device = SimulatedDevice {
            refuse_after: Some(5),
            ..SimulatedDevice::new(40 * GIB)
        };
        let filled = usable_chunks(&device, 7).unwrap();
        assert_eq!(filled.check.violations, 1);
        assert!(
            filled.check.example.unwrap().contains("allocation 5"),
            "the sixth allocation failed"
        );
    }

    #[test]
    fn free_memory_taken_by_another_process_is_a_note_not_a_violation() {
        let device = SimulatedDevice::new(40 * GIB);
        // Another process takes most of the memory once the probe has asked what is free.
        struct Shrinking<'a>(&'a SimulatedDevice, RefCell<bool>);
        impl FillDevice for Shrinking<'_> {
            fn mem_info(&self) -> GpuResult<MemInfo> {
                let info = self.0.mem_info()?;
                if !*self.1.borrow() {
                    *self.1.borrow_mut() = true;
                    let taken = info.free / 2;
                    *self.0.free.borrow_mut() -= taken;
                    return Ok(MemInfo {
                        free: info.free,
                        total: info.total,
                    });
                }
                Ok(info)
            }
            fn alloc(&self, bytes: u64) -> GpuResult<u64> {
                self.0.alloc(bytes)
            }
            fn free(&self, ptr: u64) -> GpuResult<()> {
                self.0.free(ptr)
            }
            fn memset(&self, ptr: u64, value: u8, bytes: u64) -> GpuResult<()> {
                self.0.memset(ptr, value, bytes)
            }
            fn write(&self, ptr: u64, data: &[u8]) -> GpuResult<()> {
                self.0.write(ptr, data)
            }
            fn read(&self, ptr: u64, out: &mut [u8]) -> GpuResult<()> {
                self.0.read(ptr, out)
            }
        }
        let filled = usable_chunks(&Shrinking(&device, RefCell::new(false)), 7).unwrap();
        assert_eq!(filled.check.violations, 0, "{:?}", filled.check.example);
        assert!(filled.notes[0].contains("shrank"), "{:?}", filled.notes);
    }

    #[test]
    fn the_largest_block_is_checked_past_4_gib_and_a_wrap_there_is_caught() {
        let sound = SimulatedDevice::new(12 * GIB);
        let filled = largest_single(&sound, 8.0).unwrap();
        assert_eq!(filled.check.violations, 0, "{:?}", filled.check.example);
        assert_eq!(filled.check.checked, 7, "0, 2^31±, 2^32±, middle, end");
        assert_eq!(filled.metrics["search_steps"], json!(1));

        let wrapping = SimulatedDevice {
            wrap_at_4gib: true,
            ..SimulatedDevice::new(12 * GIB)
        };
        let filled = largest_single(&wrapping, 8.0).unwrap();
        assert!(filled.check.violations >= 1);
        assert!(
            filled.check.example.unwrap().starts_with("byte 0 of"),
            "2^32 wrapped onto byte 0"
        );
    }

    #[test]
    fn the_search_finds_a_limit_below_what_is_reported_free() {
        let device = SimulatedDevice {
            refuse_above: Some(5 * GIB),
            ..SimulatedDevice::new(12 * GIB)
        };
        let filled = largest_single(&device, 8.0).unwrap();
        let largest = filled.metrics["largest_bytes"].as_u64().unwrap();
        assert!(
            largest <= 5 * GIB && largest > 5 * GIB - 128 * MIB,
            "{largest}"
        );
        assert_eq!(filled.check.violations, 0, "{:?}", filled.check.example);
        assert!(*device.free.borrow() > 11 * GIB, "the block was freed");
    }

    #[test]
    fn margins_stay_between_256_mib_and_4_gib() {
        assert_eq!(margin_bytes(GIB), 256 * MIB);
        assert_eq!(margin_bytes(40 * GIB), 2 * GIB);
        assert_eq!(margin_bytes(192 * GIB), 4 * GIB);
    }
}
