//! The repro of a native probe (`native.*`, crates/gpuprobe-gpu), which the Python
//! generator does not know: a Python script that calls the CUDA driver API
//! (`libcuda.so.1`) or the HIP runtime (`libamdhip64.so`) through ctypes and runs the one
//! failing copy case (direction, size, pinned or pageable host memory, synchronous or
//! asynchronous copies, the canary-and-seeded-bytes pattern, the bit-for-bit comparison).
//! Its manifest has `kind = "ctypes"` and it keeps the script contract of docs/repro.md
//! (`REPRODUCED`/`NOT REPRODUCED`/`CANNOT RUN`, exit 1/0/2).
//!
//! Only the copy probes have a case small enough to stand alone; the others (runtime load,
//! kernel launch, run-time compilation, the VRAM pattern test) need gpuprobe's own kernels
//! and are refused with the reason, as the Python generator refuses what it cannot make.

use std::collections::BTreeMap;

use gpuprobe_model::DeviceRef;
use gpuprobe_model::ReproManifest;
use gpuprobe_model::Vendor;
use gpuprobe_model::{ProbeResult, Verdict};
use serde_json::json;

/// The script, with `@HEADER@` and `@CASE@` to fill in.
const TEMPLATE: &str = include_str!("native_repro.py");

/// The sizes the round-trip probes copy, with how often each is repeated
/// (crates/gpuprobe-gpu/src/probes.rs, `quick_cases` and `large_cases`).
const QUICK_SIZES: &[(u64, u32)] = &[
    (4, 200),
    (64, 200),
    (4099, 20),
    ((1 << 20) + 3, 1),
    (64 << 20, 1),
];

/// A generated native repro.
#[derive(Debug, Clone)]
pub(super) struct NativeRepro {
    /// `repro.py`.
    pub script: String,
    /// `repro.json`.
    pub manifest: ReproManifest,
}

/// The failing case of a copy probe: the smallest size whose copies failed (from the
/// result's `failed_copies_by_size`, `"4B sync"`), else the probe's first size.
fn failing_case(result: &ProbeResult, sizes: &[(u64, u32)]) -> (u64, u32, bool) {
    let failed = result
        .observation
        .as_ref()
        .and_then(|o| o.metrics.get("failed_copies_by_size"))
        .and_then(|v| v.as_object());
    let parsed = failed.into_iter().flatten().filter_map(|(key, _)| {
        let (bytes, mode) = key.split_once("B ")?;
        Some((bytes.parse::<u64>().ok()?, mode == "async"))
    });
    let repeats = |bytes: u64| {
        sizes
            .iter()
            .find(|(b, _)| *b == bytes)
            .map_or(1, |(_, r)| *r)
    };
    match parsed.min() {
        Some((bytes, asynchronous)) => (bytes, repeats(bytes), asynchronous),
        None => (sizes[0].0, sizes[0].1, false),
    }
}

/// Makes the repro of a native result, or says why there is none.
pub(super) fn generate(
    result: &ProbeResult,
    seed: u64,
    vendor: Option<Vendor>,
    settings: &BTreeMap<String, String>,
) -> Result<NativeRepro, String> {
    let id = result.probe.as_str();
    let large: &[(u64, u32)] = &[((1 << 30) + 7, 1)];
    let huge: &[(u64, u32)] = &[((4 << 30) + 4099, 1)];
    let (sizes, pinned, d2d) = match id {
        "native.copy.roundtrip.pageable" => (QUICK_SIZES, false, false),
        "native.copy.roundtrip.pinned" => (QUICK_SIZES, true, false),
        "native.copy.roundtrip.pageable.large" => (large, false, false),
        "native.copy.roundtrip.pinned.large" => (large, true, false),
        "native.copy.roundtrip.pageable.huge" => (huge, false, false),
        "native.copy.d2d" => (&[(256u64 << 20, 1u32)][..], false, true),
        _ => {
            return Err(format!(
                "{id} runs gpuprobe's own kernels or whole-memory tests, which no small \
                 script can stand in for; run `gpuprobe check --only {id}` (or `gpuprobe \
                 memtest`) and attach the report"
            ));
        }
    };
    let (bytes, trials, asynchronous) = failing_case(result, sizes);
    let crash_child = matches!(result.verdict, Verdict::Crash { .. } | Verdict::Hang { .. });
    let hang_s = match result.verdict {
        Verdict::Hang { timeout_s } => timeout_s.clamp(10.0, 3600.0) as u64,
        _ => 300,
    };
    let memory = if pinned { "pinned" } else { "pageable" };
    let mode = if asynchronous {
        "asynchronous"
    } else {
        "synchronous"
    };
    let summary = if d2d {
        format!(
            "{bytes} B copied host to device, device to device and back ({mode}), {trials} time(s)"
        )
    } else {
        format!(
            "{bytes} B from {memory} host memory to the device and back ({mode} copies), {trials} time(s)"
        )
    };
    let api = match vendor {
        Some(Vendor::Amd) => "hip",
        Some(Vendor::Nvidia) => "cuda",
        _ => "auto",
    };
    let device = match result.device {
        DeviceRef::Gpu(i) => i,
        DeviceRef::Cpu => 0,
    };
    let case = json!({
        "probe": id,
        "bytes": bytes,
        "trials": trials,
        "pinned": pinned,
        "async": asynchronous,
        "d2d": d2d,
        "seed": seed,
        "device": device,
        "api": api,
        "env": settings,
        "summary": summary,
        "crash_child": crash_child,
        "hang_s": hang_s,
    });
    // The case as a JSON text inside a Python string literal: serde's JSON string escapes
    // are valid Python escapes, so nothing in the case can leave the literal.
    let literal = serde_json::to_string(&case.to_string()).map_err(|e| e.to_string())?;
    let header = format!(
        "gpuprobe repro of {}{}",
        safe_id(id),
        if result.simulated {
            " -- made from a SIMULATED result (gpuprobe's fault simulation); native probes \
             are not simulated, so on a healthy stack this script does not reproduce it"
        } else {
            ""
        }
    );
    let script = TEMPLATE
        .replacen("@HEADER@", &header, 1)
        .replacen("@CASE@", &literal, 1);
    Ok(NativeRepro {
        script,
        manifest: ReproManifest {
            probe: id.to_string(),
            family: "native".into(),
            kind: "ctypes".into(),
            needs: Vec::new(),
            env: settings.clone(),
            summary,
            reference:
                "the bytes sent, bit for bit (seeded bytes with no zero and no 0xc3 canary byte)"
                    .into(),
            tolerance: "none: bit-exact".into(),
            crash_child,
            simulated: result.simulated,
        },
    })
}

/// The id as it may appear in a comment: the characters probe ids are made of.
fn safe_id(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::FailClass;
    use gpuprobe_model::{Layer, ProbeId};
    use gpuprobe_model::{Measurement, Observation};

    fn native_failure(probe: &str) -> ProbeResult {
        let mut r = ProbeResult::new(
            ProbeId::new(probe),
            DeviceRef::Gpu(1),
            Layer::Runtime,
            Verdict::Fail {
                class: FailClass::AllZeros,
                detail: "x".into(),
            },
        );
        r.observation = Some(Observation {
            probe: ProbeId::new(probe),
            device: DeviceRef::Gpu(1),
            measurement: Measurement::Metrics,
            metrics: [(
                "failed_copies_by_size".to_string(),
                json!({"4099B async": 3, "64B sync": 1}),
            )]
            .into_iter()
            .collect(),
            notes: vec![],
            output_digest: None,
        });
        r
    }

    #[test]
    fn the_smallest_failing_size_and_its_mode_are_the_case() {
        let r = native_failure("native.copy.roundtrip.pinned");
        let made = generate(&r, 7, Some(Vendor::Amd), &BTreeMap::new()).unwrap();
        assert!(made.script.contains(r#"\"bytes\":64"#), "{}", made.script);
        assert!(made.script.contains(r#"\"async\":false"#));
        assert!(made.script.contains(r#"\"trials\":200"#));
        assert!(made.script.contains(r#"\"pinned\":true"#));
        assert!(made.script.contains(r#"\"api\":\"hip\""#));
        assert!(made.script.contains(r#"\"device\":1"#));
        assert_eq!(made.manifest.kind, "ctypes");
        assert!(!made.script.contains("@CASE@") && !made.script.contains("@HEADER@"));
    }

    #[test]
    fn probes_without_a_small_case_are_refused_with_the_reason() {
        let r = native_failure("native.memtest.quick");
        let why = generate(&r, 7, None, &BTreeMap::new()).unwrap_err();
        assert!(why.contains("gpuprobe memtest"), "{why}");
    }

    #[test]
    fn hostile_settings_stay_inside_the_string_literal() {
        let r = native_failure("native.copy.roundtrip.pageable");
        let settings: BTreeMap<String, String> = [(
            "X".to_string(),
            "\"\"\")\nimport os; os.system('x')#\u{1b}".to_string(),
        )]
        .into_iter()
        .collect();
        let made = generate(&r, 7, None, &settings).unwrap();
        let line = made
            .script
            .lines()
            .find(|l| l.starts_with("CASE = json.loads("))
            .unwrap();
        assert!(line.ends_with("\")"), "{line}");
        assert!(!made.script.contains("\nimport os; os.system"));
    }
}
