//! The memtest report: what was tested, how fast, and every error in a bounded but exact
//! form (counts exact, address ranges coalesced, bit-position histogram, first examples),
//! plus the pure logic that builds it (range coalescing, diagnosis) and its terminal text.
//!
//! The report travels in `Observation.metrics["memtest"]`; [`memtest_report_from`] reads it
//! back.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use gpuprobe_model::Observation;
use serde::{Deserialize, Serialize};

/// Version of the [`MemtestReport`] shape.
pub const MEMTEST_REPORT_VERSION: u32 = 1;

/// The full result of one memtest run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestReport {
    /// [`MEMTEST_REPORT_VERSION`].
    pub version: u32,
    /// The device tested.
    pub device: MemtestDevice,
    /// How much memory was tested and how it was obtained.
    pub memory: MemtestMemory,
    /// Seed of the random patterns.
    pub seed: u64,
    /// Full passes over the pattern list.
    pub passes: u32,
    /// Pattern names run, in order.
    pub patterns: Vec<String>,
    /// Retention wait between write and re-read, in milliseconds (0: no retention step).
    pub retention_ms: u64,
    /// Every step (write or check) with its bytes, time and errors.
    pub phases: Vec<PhaseReport>,
    /// Totals per pattern.
    pub per_pattern: Vec<PatternSummary>,
    /// All errors.
    pub errors: MemtestErrors,
    /// Verified bytes per second, and the copy ceiling measured in the same run.
    pub throughput: Throughput,
    /// The test-only injected bit flip, when one was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injected: Option<InjectedError>,
}

/// The device and runtime under test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemtestDevice {
    /// Device name.
    pub name: String,
    /// Architecture (`sm_90`, `gfx1151`).
    pub arch: String,
    /// `cuda` or `hip`.
    pub runtime: String,
    /// Runtime version.
    pub runtime_version: String,
    /// Where the kernels came from (`embedded PTX ...`, `hipRTC ... for gfx...`).
    pub kernels: String,
    /// Whether the device is integrated (shares memory with the host).
    pub integrated: bool,
}

/// Memory sizing: what the runtime reported and what could actually be allocated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestMemory {
    /// Total device memory as reported.
    pub total_bytes: u64,
    /// Free device memory before the test.
    pub free_bytes: u64,
    /// Fraction of free memory asked for.
    pub requested_fraction: f64,
    /// Bytes tested.
    pub tested_bytes: u64,
    /// `tested_bytes / free_bytes`.
    pub fraction_of_free: f64,
    /// `tested_bytes / total_bytes`.
    pub fraction_of_total: f64,
    /// The allocations tested, in test order.
    pub chunks: Vec<ChunkInfo>,
    /// Whether an allocation failed before the target was reached (the real limit, e.g. on
    /// an APU whose reported free memory is not all allocatable).
    pub hit_allocation_limit: bool,
    /// Bytes given back after hitting the limit, so the driver and other processes keep room.
    pub released_margin_bytes: u64,
    /// Free memory reported while the test memory was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes_while_testing: Option<u64>,
}

/// One allocation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkInfo {
    /// Device address.
    pub address: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Offset of its first byte in the tested space (chunks laid end to end).
    pub offset: u64,
}

/// Whether a phase writes, checks, or checks and writes the complement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// Writes the pattern.
    Write,
    /// Reads and compares.
    Check,
    /// Reads, compares, writes the complement (moving inversions).
    CheckInvert,
    /// Waits (retention).
    Wait,
}

/// One step of the test over all tested memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Pass number (from 1).
    pub pass: u32,
    /// Pattern name.
    pub pattern: String,
    /// Step detail (`rotation 3`, `0x5555555555555555 inverted`, ...).
    pub step: String,
    /// What the step does.
    pub kind: PhaseKind,
    /// Bytes written.
    pub bytes_written: u64,
    /// Bytes read and compared.
    pub bytes_read: u64,
    /// Device time (events) in milliseconds; for waits, the wall time waited.
    pub kernel_ms: f64,
    /// (written + read) / kernel time, GB/s.
    pub gbps: f64,
    /// Differing 64-bit words found by this step.
    pub error_words: u64,
    /// Differing bits found by this step.
    pub error_bits: u64,
}

/// Totals of one pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternSummary {
    /// Pattern name.
    pub pattern: String,
    /// Steps run.
    pub phases: u32,
    /// Bytes read and compared.
    pub bytes_checked: u64,
    /// Differing words (exact).
    pub error_words: u64,
    /// Differing bits (exact).
    pub error_bits: u64,
    /// Device time in milliseconds.
    pub kernel_ms: f64,
}

/// All errors, exact in count and bounded in detail.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MemtestErrors {
    /// Differing 64-bit words over all checks (exact).
    pub error_words: u64,
    /// Differing bits over all checks (exact).
    pub error_bits: u64,
    /// Differing words that read back as zero.
    pub zero_words: u64,
    /// Differing bits by position in the 64-bit word (bit 0 = least significant bit of the
    /// lowest-addressed byte); exact.
    pub bit_histogram: Vec<u64>,
    /// Address ranges with errors, coalesced, lowest address first (at most
    /// [`MAX_RANGES`]).
    pub ranges: Vec<ErrorRange>,
    /// Ranges before truncation.
    pub ranges_total: u64,
    /// The first examples (at most [`MAX_EXAMPLES`]).
    pub examples: Vec<ErrorExample>,
    /// Whether more errors were seen than examples kept.
    pub examples_truncated: bool,
    /// What the error shape suggests (stuck bit, addressing fault, ...).
    pub diagnosis: Vec<String>,
}

/// Ranges kept in a report.
pub(crate) const MAX_RANGES: usize = 256;
/// Examples kept in a report.
pub(crate) const MAX_EXAMPLES: usize = 64;

/// A run of addresses with errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRange {
    /// First differing address.
    pub start_address: u64,
    /// One past the last differing word.
    pub end_address: u64,
    /// Offset of `start_address` in the tested space.
    pub start_offset: u64,
    /// Differing words in the range (over all checks).
    pub error_words: u64,
    /// Patterns that saw errors here.
    pub patterns: Vec<String>,
}

/// One differing word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorExample {
    /// Pattern and step that saw it.
    pub pattern: String,
    /// Device address of the word.
    pub address: u64,
    /// Offset in the tested space.
    pub offset: u64,
    /// Expected value, hex.
    pub expected: String,
    /// Value read, hex.
    pub found: String,
    /// Differing bit positions.
    pub bits: Vec<u8>,
}

/// The test-only bit flip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedError {
    /// Offset in the tested space (aligned down to the word).
    pub offset: u64,
    /// Bit in the 64-bit word.
    pub bit: u8,
    /// Device address of the word.
    pub address: u64,
    /// Check steps it was injected before.
    pub injections: u64,
    /// Whether every injection was found at exactly that address and bit, and nothing else.
    pub found_exactly: bool,
}

/// Throughput, compared in the same run with the device's copy bandwidth.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Throughput {
    /// Bytes written by all steps.
    pub bytes_written: u64,
    /// Bytes read and compared by all steps.
    pub bytes_read: u64,
    /// Sum of the steps' device times, seconds.
    pub kernel_seconds: f64,
    /// Wall time of the test loop, seconds (allocation and the copy measurement excluded).
    pub wall_seconds: f64,
    /// Deliberate retention waits inside the wall time, seconds.
    pub waited_seconds: f64,
    /// (written + read) / kernel time, GB/s (1e9 B/s).
    pub kernel_gbps: f64,
    /// (written + read) / (wall − waits), GB/s.
    pub wall_gbps: f64,
    /// The copy ceiling measured in this run.
    pub copy: CopyCeiling,
    /// `kernel_gbps / copy.reference_gbps`.
    pub kernel_vs_copy: f64,
    /// `wall_gbps / copy.reference_gbps`.
    pub wall_vs_copy: f64,
}

/// Device-to-device copy bandwidth (bytes read + bytes written), median of timed repetitions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CopyCeiling {
    /// Bytes per copy.
    pub bytes: u64,
    /// Timed repetitions (after warm-up).
    pub reps: u32,
    /// The runtime's memcpy, GB/s.
    pub memcpy_gbps: f64,
    /// The 16-byte-per-thread copy kernel, GB/s.
    pub kernel_gbps: f64,
    /// The larger of the two: the ceiling the memtest is compared with.
    pub reference_gbps: f64,
}

/// Per-region error statistics accumulated on the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RegionAggregate {
    /// Differing words.
    pub count: u64,
    /// Lowest differing address.
    pub lo: u64,
    /// Highest differing address.
    pub hi: u64,
    /// Patterns that saw errors here.
    pub patterns: BTreeSet<String>,
}

/// Merges regions whose errors lie within `max_gap` bytes of each other into ranges,
/// lowest address first. Counts are conserved.
pub(crate) fn coalesce_regions(
    regions: &[RegionAggregate],
    max_gap: u64,
    offset_of: impl Fn(u64) -> u64,
) -> Vec<ErrorRange> {
    let mut sorted: Vec<&RegionAggregate> = regions.iter().filter(|r| r.count > 0).collect();
    sorted.sort_by_key(|r| (r.lo, r.hi));
    let mut out: Vec<(u64, u64, u64, BTreeSet<String>)> = Vec::new();
    for region in sorted {
        let end = region.hi.saturating_add(8);
        match out.last_mut() {
            Some(last) if region.lo <= last.1.saturating_add(max_gap) => {
                last.1 = last.1.max(end);
                last.2 += region.count;
                last.3.extend(region.patterns.iter().cloned());
            }
            _ => out.push((region.lo, end, region.count, region.patterns.clone())),
        }
    }
    out.into_iter()
        .map(|(start, end, words, patterns)| ErrorRange {
            start_address: start,
            end_address: end,
            start_offset: offset_of(start),
            error_words: words,
            patterns: patterns.into_iter().collect(),
        })
        .collect()
}

/// Bit positions set in `diff`.
pub(crate) fn bit_positions(diff: u64) -> Vec<u8> {
    (0..64u8).filter(|b| diff >> b & 1 == 1).collect()
}

/// Reads what the error shape suggests. Heuristics, stated as such.
pub(crate) fn diagnose(
    errors: &MemtestErrors,
    injected: Option<&InjectedError>,
    tested: &[ChunkInfo],
) -> Vec<String> {
    let mut out = Vec::new();
    if errors.error_words == 0 {
        out.push("no errors".into());
        return out;
    }
    if let Some(injected) = injected {
        if injected.found_exactly {
            out.push(format!(
                "the injected flip (offset {:#x}, bit {}) was found at exactly that address and bit in each of {} checks, and nothing else: the detection path works",
                injected.offset, injected.bit, injected.injections
            ));
            return out;
        }
        out.push(format!(
            "an injected flip (offset {:#x}, bit {}) was requested, but the errors do not match it exactly",
            injected.offset, injected.bit
        ));
    }
    let bits_seen: Vec<usize> = errors
        .bit_histogram
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(b, _)| b)
        .collect();
    let single_words = errors
        .ranges
        .iter()
        .all(|r| r.end_address - r.start_address == 8);
    if bits_seen.len() == 1 && single_words && errors.ranges.len() <= 4 {
        out.push(format!(
            "one bit position ({}) at {} address(es): a stuck or weak cell",
            bits_seen[0],
            errors.ranges.len()
        ));
    }
    let in_tested = |v: u64| {
        tested
            .iter()
            .any(|c| v >= c.address && v < c.address + c.bytes)
    };
    let aliased: Vec<u32> = errors
        .examples
        .iter()
        .filter(|e| e.pattern.starts_with("own_address"))
        .filter_map(|e| {
            let expected = u64::from_str_radix(e.expected.trim_start_matches("0x"), 16).ok()?;
            let found = u64::from_str_radix(e.found.trim_start_matches("0x"), 16).ok()?;
            let diff = expected ^ found;
            (diff.count_ones() == 1 && diff >= 8 && in_tested(found)).then(|| diff.trailing_zeros())
        })
        .collect();
    if !aliased.is_empty() {
        let lines: BTreeSet<u32> = aliased.iter().copied().collect();
        out.push(format!(
            "own-address words read another word's address (address bit(s) {lines:?} aliased): an addressing fault, not a bad cell"
        ));
    }
    if errors.zero_words == errors.error_words {
        out.push("every differing word read back as zero: lost writes or unmapped memory".into());
    }
    if bits_seen.len() >= 32 && errors.error_words > 1000 {
        out.push("errors spread over most bit positions: widespread corruption (unstable memory clock, overheating or a failing device)".into());
    }
    if out.is_empty() {
        out.push(format!(
            "{} word(s) differ in {} range(s) over {} bit position(s)",
            errors.error_words,
            errors.ranges_total,
            bits_seen.len()
        ));
    }
    out
}

/// Reads a memtest report back from an observation's `metrics["memtest"]`; `None` when the
/// observation has none.
pub fn memtest_report_from(
    observation: &Observation,
) -> Option<Result<MemtestReport, serde_json::Error>> {
    observation
        .metrics
        .get("memtest")
        .map(|value| serde_json::from_value(value.clone()))
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The report as terminal text.
pub fn render_memtest(report: &MemtestReport) -> String {
    let mut s = String::new();
    let d = &report.device;
    let m = &report.memory;
    let t = &report.throughput;
    let _ = writeln!(
        s,
        "memtest   {} ({}, {} {}) · kernels: {}",
        d.name, d.arch, d.runtime, d.runtime_version, d.kernels
    );
    let _ = writeln!(
        s,
        "memory    {} tested = {:.1}% of free ({}), {:.1}% of total ({}) in {} allocation(s){}",
        gib(m.tested_bytes),
        100.0 * m.fraction_of_free,
        gib(m.free_bytes),
        100.0 * m.fraction_of_total,
        gib(m.total_bytes),
        m.chunks.len(),
        if m.hit_allocation_limit {
            format!(
                "; allocation limit reached, {} released as margin",
                gib(m.released_margin_bytes)
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "speed     {:.0} GB/s verified over kernel time, {:.0} GB/s over wall time · D2D copy {:.0} GB/s (memcpy {:.0}, kernel {:.0}) → {:.0}% / {:.0}%",
        t.kernel_gbps,
        t.wall_gbps,
        t.copy.reference_gbps,
        t.copy.memcpy_gbps,
        t.copy.kernel_gbps,
        100.0 * t.kernel_vs_copy,
        100.0 * t.wall_vs_copy
    );
    let _ = writeln!(
        s,
        "work      {} pass(es), {} steps, {:.1} GB written + {:.1} GB checked in {:.2} s wall ({:.2} s waiting){}",
        report.passes,
        report.phases.len(),
        t.bytes_written as f64 / 1e9,
        t.bytes_read as f64 / 1e9,
        t.wall_seconds,
        t.waited_seconds,
        if report.retention_ms > 0 {
            format!(", retention wait {} ms", report.retention_ms)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "\n{:<20} {:>6} {:>12} {:>12} {:>10}",
        "pattern", "steps", "GB checked", "errors", "GB/s"
    );
    for p in &report.per_pattern {
        let moved: u64 = report
            .phases
            .iter()
            .filter(|ph| ph.pattern == p.pattern)
            .map(|ph| ph.bytes_read + ph.bytes_written)
            .sum();
        let _ = writeln!(
            s,
            "{:<20} {:>6} {:>12.1} {:>12} {:>10.0}",
            p.pattern,
            p.phases,
            p.bytes_checked as f64 / 1e9,
            p.error_words,
            crate::backend::gbps(moved, p.kernel_ms)
        );
    }
    let e = &report.errors;
    if e.error_words == 0 {
        let _ = writeln!(s, "\nerrors    none");
    } else {
        let _ = writeln!(
            s,
            "\nerrors    {} word(s), {} bit(s), {} read back as zero, {} range(s)",
            e.error_words, e.error_bits, e.zero_words, e.ranges_total
        );
        for r in e.ranges.iter().take(16) {
            let _ = writeln!(
                s,
                "  range   {:#014x}..{:#014x} (offset {:#x}, {} B) {} word(s) [{}]",
                r.start_address,
                r.end_address,
                r.start_offset,
                r.end_address - r.start_address,
                r.error_words,
                r.patterns.join(", ")
            );
        }
        let bits: Vec<String> = e
            .bit_histogram
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| format!("{b}×{n}"))
            .collect();
        let _ = writeln!(s, "  bits    {}", bits.join(" "));
        for x in e.examples.iter().take(8) {
            let _ = writeln!(
                s,
                "  example {:#014x} (offset {:#x}) expected {} found {} bits {:?} [{}]",
                x.address, x.offset, x.expected, x.found, x.bits, x.pattern
            );
        }
    }
    for line in &e.diagnosis {
        let _ = writeln!(s, "diagnosis {line}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn region(lo: u64, hi: u64, count: u64, pattern: &str) -> RegionAggregate {
        RegionAggregate {
            count,
            lo,
            hi,
            patterns: [pattern.to_string()].into_iter().collect(),
        }
    }

    #[test]
    fn adjacent_regions_merge_and_far_ones_do_not() {
        let regions = vec![
            region(0x2000_0000, 0x2000_0000, 3, "random"),
            region(0x1000_0000, 0x1000_0100, 2, "own_address"),
            region(0x1000_0200, 0x1000_0300, 1, "random"),
        ];
        let ranges = coalesce_regions(&regions, 0x1000, |a| a - 0x1000_0000);
        assert_eq!(ranges.len(), 2);
        assert_eq!(ranges[0].start_address, 0x1000_0000);
        assert_eq!(ranges[0].end_address, 0x1000_0308);
        assert_eq!(ranges[0].error_words, 3);
        assert_eq!(
            ranges[0].patterns,
            vec!["own_address".to_string(), "random".into()]
        );
        assert_eq!(ranges[1].start_offset, 0x1000_0000);
    }

    #[test]
    fn bit_positions_lists_set_bits() {
        assert_eq!(bit_positions(0b1010), vec![1, 3]);
        assert_eq!(bit_positions(1 << 63), vec![63]);
        assert!(bit_positions(0).is_empty());
    }

    fn errors_with(
        ranges: Vec<ErrorRange>,
        hist_bit: usize,
        words: u64,
        examples: Vec<ErrorExample>,
    ) -> MemtestErrors {
        let mut hist = vec![0; 64];
        hist[hist_bit] = words;
        MemtestErrors {
            error_words: words,
            error_bits: words,
            zero_words: 0,
            bit_histogram: hist,
            ranges_total: ranges.len() as u64,
            ranges,
            examples,
            examples_truncated: false,
            diagnosis: vec![],
        }
    }

    #[test]
    fn a_single_bit_at_one_address_is_a_stuck_cell() {
        let range = ErrorRange {
            start_address: 0x1000,
            end_address: 0x1008,
            start_offset: 0,
            error_words: 5,
            patterns: vec!["random".into()],
        };
        let d = diagnose(&errors_with(vec![range], 13, 5, vec![]), None, &[]);
        assert!(d[0].contains("one bit position (13)"), "{d:?}");
    }

    #[test]
    fn own_address_aliasing_is_an_addressing_fault() {
        let chunk = ChunkInfo {
            address: 0x10_0000,
            bytes: 0x10_0000,
            offset: 0,
        };
        let example = ErrorExample {
            pattern: "own_address".into(),
            address: 0x10_0040,
            offset: 0x40,
            expected: format!("{:#018x}", 0x10_0040u64),
            found: format!("{:#018x}", 0x10_1040u64),
            bits: vec![12],
        };
        let ranges = vec![ErrorRange {
            start_address: 0x10_0040,
            end_address: 0x10_0048,
            start_offset: 0x40,
            error_words: 1,
            patterns: vec!["own_address".into()],
        }];
        let d = diagnose(&errors_with(ranges, 12, 1, vec![example]), None, &[chunk]);
        assert!(
            d.iter()
                .any(|l| l.contains("addressing fault") && l.contains("12")),
            "{d:?}"
        );
    }

    #[test]
    fn exact_injection_is_reported_as_such() {
        let injected = InjectedError {
            offset: 0x40,
            bit: 7,
            address: 0x1040,
            injections: 3,
            found_exactly: true,
        };
        let d = diagnose(&errors_with(vec![], 7, 3, vec![]), Some(&injected), &[]);
        assert!(d[0].contains("detection path works"), "{d:?}");
        assert_eq!(
            diagnose(&MemtestErrors::default(), None, &[]),
            vec!["no errors"]
        );
    }

    proptest! {
        #[test]
        fn coalescing_conserves_counts_and_sorts(
            raw in proptest::collection::vec((0u64..1_000_000, 0u64..5000, 1u64..100), 0..40),
            gap in 0u64..100_000,
        ) {
            let regions: Vec<RegionAggregate> = raw
                .iter()
                .map(|&(lo, len, count)| region(lo * 8, lo * 8 + len * 8, count, "p"))
                .collect();
            let ranges = coalesce_regions(&regions, gap, |a| a);
            let total: u64 = regions.iter().map(|r| r.count).sum();
            prop_assert_eq!(ranges.iter().map(|r| r.error_words).sum::<u64>(), total);
            for pair in ranges.windows(2) {
                prop_assert!(pair[0].end_address + gap < pair[1].start_address);
            }
            for r in &ranges {
                prop_assert!(r.start_address < r.end_address);
            }
        }
    }
}
