//! The native layer against a fake GPU runtime: a C stub library (tests/stub/fake_gpu.c)
//! compiled with the system C compiler at test time and copied under the vendor file names.
//! It exports the CUDA driver, NVRTC, HIP and hipRTC entry points, keeps "device memory" in
//! an anonymous mapping and runs the real portable kernels on the CPU, so loaders, error
//! paths, probes and the memtest engine run end to end without a GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gpuprobe_gpu::CudaDriver;
use gpuprobe_gpu::HipRuntime;
use gpuprobe_gpu::Hiprtc;
use gpuprobe_gpu::{LibraryKind, LoadError, SearchConfig, memtest_report_from, run_worker};
use gpuprobe_model::{DeviceRef, Measurement, Observation, ProbeId};
use gpuprobe_model::{Outcome, PROTOCOL_VERSION, WorkerEvent, WorkerMode, WorkerPlan};
use serde_json::json;

/// Compiles the stub (once per variant) into the test target directory.
fn stub(omit_memalloc: bool) -> PathBuf {
    static PLAIN: OnceLock<PathBuf> = OnceLock::new();
    static OMIT: OnceLock<PathBuf> = OnceLock::new();
    let cell = if omit_memalloc { &OMIT } else { &PLAIN };
    cell.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-gpu");
        std::fs::create_dir_all(&out_dir).expect("create stub dir");
        let out = out_dir.join(if omit_memalloc {
            "libfake_gpu_omit.so"
        } else {
            "libfake_gpu.so"
        });
        // cargo-nextest runs each test in a process of its own, so several processes build
        // the stub at once into this one directory: each compiles to a file of its own and
        // renames it over the final name (atomic within a directory), so that no test copies
        // a library another process is still writing. The name is random rather than the
        // process id, which another PID namespace sharing the target directory may reuse; a
        // build that fails leaves nothing behind (the temporary path removes itself).
        let partial = tempfile::Builder::new()
            .prefix(".libfake_gpu-")
            .suffix(".so.partial")
            .tempfile_in(&out_dir)
            .expect("create the stub's temporary file")
            .into_temp_path();
        let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let mut cmd = Command::new(&compiler);
        cmd.args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&*partial)
            .arg("-I")
            .arg(crate_dir.join("kernels"))
            .arg(crate_dir.join("tests/stub/fake_gpu.c"));
        if omit_memalloc {
            cmd.arg("-DFAKE_OMIT_MEMALLOC");
        }
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
        assert!(status.success(), "compiling the fake GPU stub failed");
        partial.persist(&out).expect("move the stub into place");
        out
    })
    .clone()
}

/// A directory holding copies of the stub under the vendor names, with its configuration.
struct FakeGpu {
    dir: tempfile::TempDir,
}

impl FakeGpu {
    fn new(config: &str) -> FakeGpu {
        Self::build(config, false)
    }

    fn build(config: &str, omit_memalloc: bool) -> FakeGpu {
        let dir = tempfile::tempdir().expect("tempdir");
        let lib = stub(omit_memalloc);
        for name in [
            "libcuda.so.1",
            "libnvrtc.so.12",
            "libamdhip64.so.6",
            "libhiprtc.so.6",
        ] {
            std::fs::copy(&lib, dir.path().join(name)).expect("copy stub");
        }
        std::fs::write(dir.path().join("fake-gpu.cfg"), config).expect("write config");
        FakeGpu { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn search(&self) -> SearchConfig {
        let mut cfg = SearchConfig::isolated();
        cfg.overrides
            .insert(LibraryKind::CudaDriver, self.path("libcuda.so.1"));
        cfg.overrides
            .insert(LibraryKind::Nvrtc, self.path("libnvrtc.so.12"));
        cfg.overrides
            .insert(LibraryKind::HipRuntime, self.path("libamdhip64.so.6"));
        cfg.overrides
            .insert(LibraryKind::Hiprtc, self.path("libhiprtc.so.6"));
        cfg
    }

    /// A plan whose options point every library at this fake.
    fn plan(&self, mode: WorkerMode, runtime: &str, probes: &[&str]) -> WorkerPlan {
        let mut options = BTreeMap::new();
        for (key, file) in [
            ("cuda_lib", "libcuda.so.1"),
            ("nvrtc_lib", "libnvrtc.so.12"),
            ("hip_lib", "libamdhip64.so.6"),
            ("hiprtc_lib", "libhiprtc.so.6"),
        ] {
            options.insert(key.to_string(), json!(self.path(file)));
        }
        options.insert("runtime".into(), json!(runtime));
        WorkerPlan {
            protocol: PROTOCOL_VERSION,
            mode,
            device: Some(DeviceRef::Gpu(0)),
            probes: probes.iter().map(|p| ProbeId::new(*p)).collect(),
            seed: 7,
            simulate: None,
            options,
            wait_for_start: false,
            thread_budget: None,
        }
    }
}

fn run(plan: &WorkerPlan) -> Vec<WorkerEvent> {
    let mut events = Vec::new();
    run_worker(plan, &mut |e| events.push(e.clone()));
    events
}

fn outcomes(events: &[WorkerEvent]) -> BTreeMap<String, Outcome> {
    events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Result { probe, outcome, .. } => {
                Some((probe.to_string(), outcome.clone()))
            }
            _ => None,
        })
        .collect()
}

fn observation(outcome: &Outcome) -> &Observation {
    match outcome {
        Outcome::Observed { observation } => observation,
        other => panic!("expected an observation, got {other:?}"),
    }
}

fn compare(outcome: &Outcome) -> gpuprobe_model::CompareStats {
    match &observation(outcome).measurement {
        Measurement::Compare(stats) => stats.clone(),
        other => panic!("expected a comparison, got {other:?}"),
    }
}

#[test]
fn missing_symbol_is_named_at_load() {
    let fake = FakeGpu::build("", true);
    let err = CudaDriver::load(&fake.search())
        .result
        .expect_err("must fail");
    assert!(
        matches!(&err, LoadError::MissingSymbol { symbol, .. } if symbol == "cuMemAlloc_v2"),
        "{err}"
    );
    let err = HipRuntime::load(&fake.search())
        .result
        .expect_err("must fail");
    assert!(
        matches!(&err, LoadError::MissingSymbol { symbol, .. } if symbol == "hipMalloc"),
        "{err}"
    );
}

#[test]
fn old_driver_is_refused_with_both_versions() {
    let fake = FakeGpu::new("driver_version=10020\n");
    let err = CudaDriver::load(&fake.search())
        .result
        .expect_err("must fail");
    let LoadError::TooOld {
        found, required, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((found.as_str(), required.as_str()), ("10.2", "11.0"));
}

#[test]
fn hip_soname_and_runtime_version_must_agree() {
    let fake = FakeGpu::new("runtime_version=50731921\n");
    let err = HipRuntime::load(&fake.search())
        .result
        .expect_err("must fail");
    assert!(
        matches!(&err, LoadError::VersionMismatch { detail, .. } if detail.contains("5.7")),
        "{err}"
    );
}

#[test]
fn hiprtc_of_another_major_version_is_refused() {
    let fake = FakeGpu::new("hiprtc_major=7\n");
    let runtime = HipRuntime::load(&fake.search())
        .result
        .expect("runtime loads");
    let err = Hiprtc::load(&fake.search(), Some(&runtime))
        .result
        .expect_err("must fail");
    assert!(
        matches!(&err, LoadError::VersionMismatch { detail, .. } if detail.contains("major version 6")),
        "{err}"
    );
}

#[test]
fn resolved_path_is_the_real_file() {
    let fake = FakeGpu::new("");
    let outcome = CudaDriver::load(&fake.search());
    let driver = outcome.result.expect("loads");
    let resolved = driver.library().resolved.clone().expect("resolved");
    assert_eq!(
        resolved,
        std::fs::canonicalize(fake.path("libcuda.so.1")).unwrap()
    );
    assert_eq!(outcome.attempts.len(), 1);
    assert_eq!(outcome.attempts[0].error, None);
}

#[test]
fn no_runtime_makes_the_worker_unusable_and_lists_candidates() {
    let mut plan = FakeGpu::new("").plan(WorkerMode::Run, "auto", &["native.runtime.load"]);
    plan.options
        .insert("cuda_lib".into(), json!("/nonexistent/libcuda.so.1"));
    plan.options
        .insert("hip_lib".into(), json!("/nonexistent/libamdhip64.so.6"));
    let events = run(&plan);
    let WorkerEvent::Hello {
        unusable: Some(reason),
        worker,
        ..
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    assert_eq!(worker, "native");
    assert!(reason.contains("/nonexistent/libcuda.so.1"), "{reason}");
    assert!(reason.contains("/nonexistent/libamdhip64.so.6"), "{reason}");
    assert!(matches!(
        outcomes(&events)["native.runtime.load"],
        Outcome::Skip { .. }
    ));
    assert_eq!(events.last(), Some(&WorkerEvent::Done));
}

#[test]
fn cu_init_no_device_is_reported_not_fatal() {
    let fake = FakeGpu::new("init_error=100\n");
    let events = run(&fake.plan(WorkerMode::Env, "cuda", &[]));
    let WorkerEvent::Hello {
        unusable: Some(reason),
        packages,
        ..
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    assert!(reason.contains("CUDA_ERROR_NO_DEVICE"), "{reason}");
    assert!(
        packages["native.cuda"].contains("present, 0 devices"),
        "{packages:?}"
    );
    let WorkerEvent::Log { message, .. } = &events[1] else {
        panic!("{events:?}")
    };
    let env = gpuprobe_gpu::parse_native_env_log(message).expect("env summary");
    assert_eq!(env.cuda.library.status, "loaded");
    assert!(env.cuda.devices.is_empty());
}

#[test]
fn hip_device_count_error_means_present_without_devices() {
    let fake = FakeGpu::new("count_error=100\n");
    let events = run(&fake.plan(WorkerMode::Env, "hip", &[]));
    let WorkerEvent::Hello {
        packages, unusable, ..
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    let hip = &packages["native.hip"];
    assert!(
        hip.contains("present, 0 devices") && hip.contains("hipErrorNoDevice"),
        "{hip}"
    );
    assert!(
        unusable
            .as_deref()
            .unwrap_or("")
            .contains("no ROCm-capable device"),
        "{unusable:?}"
    );
}

#[test]
fn cuda_quick_probes_pass_end_to_end() {
    let fake = FakeGpu::new("vram=268435456\n");
    let probes = [
        "native.runtime.load",
        "native.kernel.launch",
        "native.copy.roundtrip.pageable",
        "native.copy.roundtrip.pinned",
        "native.copy.d2d",
        "native.memtest.quick",
        "native.rtc.compile",
    ];
    let events = run(&fake.plan(WorkerMode::Run, "cuda", &probes));
    let results = outcomes(&events);
    assert_eq!(results.len(), probes.len(), "{events:?}");
    let load = observation(&results["native.runtime.load"]);
    assert_eq!(load.metrics["device_name"], json!("Fake GPU 0"));
    assert_eq!(load.metrics["arch"], json!("sm_90"));
    assert_eq!(load.metrics["pci_bus_id"], json!("0000:00:06.0"));
    for probe in &probes[1..] {
        let stats = compare(&results[*probe]);
        assert_eq!(stats.mismatches, 0, "{probe}: {stats:?}");
        assert!(stats.n > 0 && stats.trials > 0, "{probe}: {stats:?}");
    }
    let pageable = observation(&results["native.copy.roundtrip.pageable"]);
    assert!(pageable.metrics["h2d_gbps"].as_f64().unwrap() > 0.0);
    assert_eq!(
        pageable.metrics["sizes"],
        json!([4, 64, 4099, 1048579, 67108864])
    );
    let report = memtest_report_from(observation(&results["native.memtest.quick"]))
        .expect("report")
        .expect("parses");
    assert!(report.memory.tested_bytes > 0);
    assert_eq!(report.errors.error_words, 0);
    assert!(report.throughput.copy.reference_gbps > 0.0);
}

#[test]
fn small_h2d_copies_dropped_to_zeros_are_classified() {
    let fake = FakeGpu::new("h2d_zero_max=64\n");
    let events = run(&fake.plan(WorkerMode::Run, "cuda", &["native.copy.roundtrip.pageable"]));
    let stats = compare(&outcomes(&events)["native.copy.roundtrip.pageable"]);
    // 4 B and 64 B, 200 times each, sync and async: 800 round trips came back all zero.
    assert_eq!(stats.all_zero_trials, 800, "{stats:?}");
    assert_eq!(stats.failed_trials, 800);
    assert_eq!(stats.zeros_where_nonzero, stats.mismatches);
    assert_eq!(stats.mismatches, 400 * 4 + 400 * 64);
}

#[test]
fn allocation_and_copy_errors_become_error_outcomes() {
    let fake = FakeGpu::new("alloc_error=2\n");
    let events = run(&fake.plan(
        WorkerMode::Run,
        "cuda",
        &["native.copy.roundtrip.pinned", "native.memtest.quick"],
    ));
    for (probe, outcome) in outcomes(&events) {
        match outcome {
            Outcome::Error {
                error_type,
                message,
                ..
            } => {
                assert_eq!(error_type, "CUDA_ERROR_OUT_OF_MEMORY", "{probe}: {message}");
                assert!(message.contains("cuMemAlloc_v2"), "{message}");
            }
            other => panic!("{probe}: {other:?}"),
        }
    }
    let fake = FakeGpu::new("memcpy_error=700\n");
    let events = run(&fake.plan(WorkerMode::Run, "cuda", &["native.copy.roundtrip.pageable"]));
    let Outcome::Error { error_type, .. } = &outcomes(&events)["native.copy.roundtrip.pageable"]
    else {
        panic!("{events:?}")
    };
    assert_eq!(error_type, "CUDA_ERROR_ILLEGAL_ADDRESS");
}

fn memtest_plan(fake: &FakeGpu, runtime: &str, extra: serde_json::Value) -> WorkerPlan {
    let mut plan = fake.plan(WorkerMode::Run, runtime, &["native.memtest.full"]);
    let defaults = json!({
        "fraction": 1.0, "retention_ms": 5, "walk_rotations": 2,
        "chunk_bytes": 16777216, "copy_bytes": 4194304, "copy_reps": 2
    });
    for source in [defaults, extra] {
        for (key, value) in source.as_object().unwrap() {
            plan.options.insert(key.clone(), value.clone());
        }
    }
    plan
}

fn memtest_report(events: &[WorkerEvent]) -> gpuprobe_gpu::MemtestReport {
    let results = outcomes(events);
    memtest_report_from(observation(&results["native.memtest.full"]))
        .expect("report")
        .expect("parses")
}

#[test]
fn memtest_sizes_to_the_allocatable_memory_and_finds_nothing_on_healthy_memory() {
    // 96 MiB of fake VRAM; free memory over-reported as on an APU.
    let fake = FakeGpu::new("vram=100663296\nfree_report=1073741824\n");
    let events = run(&memtest_plan(&fake, "cuda", json!({})));
    let report = memtest_report(&events);
    assert!(report.memory.hit_allocation_limit, "{:?}", report.memory);
    assert!(
        report.memory.released_margin_bytes >= 256 << 20 || report.memory.tested_bytes < 96 << 20
    );
    assert!(report.memory.tested_bytes > 0);
    assert_eq!(report.errors.error_words, 0);
    assert_eq!(report.errors.diagnosis, vec!["no errors".to_string()]);
    let names: Vec<&str> = report
        .per_pattern
        .iter()
        .map(|p| p.pattern.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "walking_ones",
            "walking_zeros",
            "own_address",
            "moving_inversions",
            "random",
            "retention"
        ]
    );
    assert!(report.throughput.waited_seconds >= 0.005);
    let text = gpuprobe_gpu::render_memtest(&report);
    assert!(text.contains("errors    none"), "{text}");
}

#[test]
fn injected_bit_flip_is_found_at_exactly_that_address_and_bit() {
    let fake = FakeGpu::new("vram=67108864\n");
    let events = run(&memtest_plan(
        &fake,
        "cuda",
        json!({"fraction": 0.5, "inject_error": {"offset": 1000003, "bit": 13}}),
    ));
    let report = memtest_report(&events);
    let injected = report.injected.clone().expect("injected");
    assert_eq!(injected.offset, 1000000);
    assert!(injected.found_exactly, "{:?}", report.errors);
    let checks = report.phases.iter().filter(|p| p.bytes_read > 0).count() as u64;
    assert_eq!(injected.injections, checks);
    assert_eq!(report.errors.error_words, checks);
    assert_eq!(report.errors.bit_histogram[13], checks);
    assert_eq!(report.errors.ranges.len(), 1);
    assert_eq!(report.errors.ranges[0].start_address, injected.address);
    assert_eq!(report.errors.ranges[0].start_offset, 1000000);
    assert!(
        report
            .errors
            .examples
            .iter()
            .all(|e| e.bits == vec![13] && e.offset == 1000000)
    );
    // Every check step of every pattern saw it exactly once.
    for pattern in &report.per_pattern {
        let checks = report
            .phases
            .iter()
            .filter(|p| p.pattern == pattern.pattern && p.bytes_read > 0)
            .count() as u64;
        assert_eq!(pattern.error_words, checks, "{}", pattern.pattern);
    }
    let stats = compare(&outcomes(&events)["native.memtest.full"]);
    assert_eq!(stats.mismatches, checks);
    assert_eq!(stats.failed_trials, checks);
}

#[test]
fn a_stuck_bit_is_located_and_diagnosed() {
    // Bit 5 of the word at byte 40 MiB + 24 stuck at one.
    let offset = (40u64 << 20) + 24;
    let fake = FakeGpu::new(&format!(
        "vram=67108864\nstuck_offset={offset}\nstuck_bit=5\n"
    ));
    let events = run(&memtest_plan(&fake, "cuda", json!({"fraction": 0.9})));
    let report = memtest_report(&events);
    assert!(report.errors.error_words > 0);
    let hist: Vec<usize> = (0..64)
        .filter(|&b| report.errors.bit_histogram[b] > 0)
        .collect();
    assert_eq!(hist, vec![5]);
    assert_eq!(report.errors.ranges.len(), 1);
    let range = &report.errors.ranges[0];
    assert_eq!(range.end_address - range.start_address, 8);
    assert!(report.errors.examples.iter().all(|e| e.bits == vec![5]));
    assert!(
        report.errors.diagnosis[0].contains("one bit position (5)"),
        "{:?}",
        report.errors.diagnosis
    );
    // Stuck at one shows only where the pattern wants a zero: walking ones mostly.
    let walking = report
        .per_pattern
        .iter()
        .find(|p| p.pattern == "walking_ones")
        .unwrap();
    assert!(walking.error_words > 0);
}

#[test]
fn hip_path_compiles_with_hiprtc_for_the_device_arch() {
    let fake = FakeGpu::new("arch=gfx1151\nvram=134217728\n");
    let events = run(&fake.plan(
        WorkerMode::Run,
        "hip",
        &[
            "native.runtime.load",
            "native.kernel.launch",
            "native.memtest.quick",
            "native.rtc.compile",
        ],
    ));
    let results = outcomes(&events);
    let load = observation(&results["native.runtime.load"]);
    assert_eq!(load.metrics["arch"], json!("gfx1151"));
    assert_eq!(load.metrics["integrated"], json!(true));
    assert!(
        load.metrics["kernels"]
            .as_str()
            .unwrap()
            .contains("hipRTC 6.3 for gfx1151")
    );
    for probe in [
        "native.kernel.launch",
        "native.memtest.quick",
        "native.rtc.compile",
    ] {
        assert_eq!(compare(&results[probe]).mismatches, 0, "{probe}");
    }
}

#[test]
fn compiler_failure_is_an_error_with_the_log() {
    let fake = FakeGpu::new("rtc_error=6\n");
    let events = run(&fake.plan(
        WorkerMode::Run,
        "cuda",
        &["native.rtc.compile", "native.kernel.launch"],
    ));
    let results = outcomes(&events);
    let Outcome::Error {
        error_type,
        message,
        ..
    } = &results["native.rtc.compile"]
    else {
        panic!("{results:?}")
    };
    assert_eq!(error_type, "CompileError");
    assert!(message.contains("this compiler is fake"), "{message}");
    // The embedded PTX needs no compiler: the kernel probe still passes.
    assert_eq!(compare(&results["native.kernel.launch"]).mismatches, 0);
    // On HIP there is no embedded image, so every kernel probe reports the compile error.
    let events = run(&fake.plan(WorkerMode::Run, "hip", &["native.kernel.launch"]));
    let Outcome::Error { error_type, .. } = &outcomes(&events)["native.kernel.launch"] else {
        panic!("{events:?}")
    };
    assert_eq!(error_type, "CompileError");
}

#[test]
fn device_out_of_range_is_a_skip() {
    let fake = FakeGpu::new("");
    let mut plan = fake.plan(WorkerMode::Run, "cuda", &["native.runtime.load"]);
    plan.device = Some(DeviceRef::Gpu(3));
    let events = run(&plan);
    let Outcome::Skip { reason } = &outcomes(&events)["native.runtime.load"] else {
        panic!("{events:?}")
    };
    assert!(reason.contains("device 3"), "{reason}");
}
