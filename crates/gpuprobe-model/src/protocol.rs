//! The worker protocol: how the supervisor tells a worker what to run, and the events the
//! worker streams back, one JSON object per line on a private file descriptor.
//!
//! Python workers (`python/gpuprobe/worker/`) and native workers (`gpuprobe __native-worker`)
//! speak the same protocol; `docs/protocol.md` documents it for probe authors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fingerprint::{CondaEnv, Interpreter, TorchInfo};
use crate::observation::Observation;
use crate::probe::{DeviceRef, ProbeId, ProbeSpec};

/// Version of the protocol; a worker refuses a plan with another version.
pub const PROTOCOL_VERSION: u32 = 1;

/// The file descriptor number the worker writes events to.
pub const EVENT_FD: i32 = 3;

/// What a worker is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMode {
    /// List the probes it knows (no framework import).
    Catalog,
    /// Report the interpreter and framework, then exit.
    Env,
    /// Run the planned probes.
    Run,
}

/// The plan a worker receives (as a JSON file named on its command line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerPlan {
    /// [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// What to do.
    pub mode: WorkerMode,
    /// Device under test (for `run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceRef>,
    /// Probes to run, in order (for `run`).
    #[serde(default)]
    pub probes: Vec<ProbeId>,
    /// Seed for every random input; a run is reproducible from it.
    #[serde(default)]
    pub seed: u64,
    /// Faults to simulate; absent unless the user asked for simulation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate: Option<SimulationSpec>,
    /// Probe options (`soak_seconds`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, serde_json::Value>,
    /// When true (mode `run`), the worker starts, says hello, then waits for a line
    /// [`START_LINE`] on stdin before its first probe. The engine starts the worker of an
    /// exclusive lane this way while the other lanes of its device still run, and the
    /// supervisor starts each lane's next worker this way while the current one runs its
    /// probes, so the framework import overlaps with their work; end of input means the
    /// supervisor is gone and the worker exits without running anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_start: bool,
    /// A file holding the CPU threads this worker's probes may use now (a decimal number),
    /// which the engine rewrites as lanes finish and free cores: the worker reads it between
    /// probes and applies it. Absent when the worker's threads are not the engine's to set
    /// (the user or the settings under test name `OMP_NUM_THREADS`, or the device under test
    /// is the CPU, whose results the thread count may change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_budget: Option<std::path::PathBuf>,
}

/// A catalog's device list, or `None` when the field is not one: a device list the
/// supervisor cannot read only costs the planning ahead, never the catalog.
fn lenient_devices<'de, D>(
    deserializer: D,
) -> Result<Option<Vec<crate::fingerprint::TorchDevice>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

/// The line (without its newline) a supervisor writes to a waiting worker's stdin.
pub const START_LINE: &str = "start";

/// What a probe run came to, as the worker saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The probe measured something; the judge decides.
    Observed {
        /// The facts.
        observation: Observation,
    },
    /// The probe does not apply here.
    Skip {
        /// Why.
        reason: String,
    },
    /// The probe raised.
    Error {
        /// Exception type (`RuntimeError`) or error name (`CUDA_ERROR_ILLEGAL_ADDRESS`).
        #[serde(rename = "type")]
        error_type: String,
        /// The message.
        message: String,
        /// Traceback or call context, when available.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceback: Option<String>,
    },
}

/// One event from a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkerEvent {
    /// First event of every worker.
    Hello {
        /// The worker's protocol version.
        protocol: u32,
        /// Worker process id.
        pid: u32,
        /// `python` or `native`.
        worker: String,
        /// Interpreter path (Python workers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executable: Option<String>,
        /// Interpreter version (Python workers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        python_version: Option<String>,
        /// The interpreter's build and platform (Python workers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interpreter: Option<Box<Interpreter>>,
        /// Framework facts, when the framework imported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        torch: Option<TorchInfo>,
        /// Why the framework (or native runtime) is unusable, when it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unusable: Option<String>,
        /// Other package versions (numpy, accelerate, safetensors).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        packages: BTreeMap<String, String>,
        /// The conda environment of the interpreter, when it is one (Python workers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conda: Option<Box<CondaEnv>>,
        /// Whether fault simulation is active in this worker.
        #[serde(default)]
        simulated: bool,
    },
    /// The probe catalog (mode `catalog`).
    Catalog {
        /// Every probe the worker can run.
        probes: Vec<ProbeSpec>,
        /// The GPUs the framework sees, when the listing imported it anyway (it expanded
        /// the framework-dependent families): the devices can then be planned before any
        /// worker runs. Absent, or not a device list: unknown.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "lenient_devices"
        )]
        devices: Option<Vec<crate::fingerprint::TorchDevice>>,
    },
    /// A probe is about to start; the supervisor starts its timeout.
    Begin {
        /// Probe id.
        probe: ProbeId,
        /// Device.
        device: DeviceRef,
    },
    /// A probe finished.
    Result {
        /// Probe id.
        probe: ProbeId,
        /// Device.
        device: DeviceRef,
        /// What happened.
        #[serde(flatten)]
        outcome: Outcome,
        /// Seconds from begin to result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elapsed_s: Option<f64>,
    },
    /// A message worth keeping (a library warning, a fallback taken).
    Log {
        /// `info` or `warn`.
        level: String,
        /// The message.
        message: String,
    },
    /// The worker finished its plan and will exit.
    Done,
}

/// A set of faults to simulate. Data only: the Python worker interprets it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SimulationSpec {
    /// What the user asked for (preset names or a file path), for the report.
    pub source: String,
    /// The faults.
    #[serde(default, rename = "fault")]
    pub faults: Vec<FaultSpec>,
}

/// One simulated fault: which operation, under which conditions, breaks how, and which
/// setting cures it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// Short name.
    pub name: String,
    /// What it imitates.
    #[serde(default)]
    pub description: String,
    /// The operation: `h2d`, `d2h`, `d2d`, `convert`, `randn`, `randn_like`, `rand`,
    /// `randint`, `randperm`, `multinomial`, `matmul`, `reduce`, `elementwise`, `conv`,
    /// `sdpa`, `alloc`, `collective`, `any`.
    pub op: String,
    /// Conditions that select the affected calls; empty means every call of `op`.
    #[serde(default)]
    pub when: FaultCondition,
    /// What goes wrong.
    pub effect: FaultEffect,
    /// Settings (`KEY=VALUE`) of which any one, present in the worker's environment,
    /// cures the fault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cured_by: Vec<String>,
    /// Settings that cure the fault only when all of them are present together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cured_by_all: Vec<String>,
    /// Settings that must all be present for the fault to exist at all (a setting that
    /// breaks something: a candidate cure with a side effect).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_when_set: Vec<String>,
}

/// Which calls of the operation a fault affects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultCondition {
    /// Movement or API methods (`to`, `cuda`, `copy_`, `numpy`, `float`, `half`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Dtypes of the data (source dtype for conversions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dtypes: Vec<String>,
    /// Target dtypes (conversions only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_dtypes: Vec<String>,
    /// Smallest affected size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    /// Largest affected size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Only pinned (true) or only pageable (false) host memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    /// Only non_blocking (true) or only blocking (false) calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_blocking: Option<bool>,
    /// Only where the operation runs on the device under test (true) or on the CPU (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_device: Option<bool>,
    /// Sweep cases only: input transforms (`noncontig`, `nan`, ...) or directions
    /// (`forward`, `backward`) the fault is limited to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<String>,
}

/// How a simulated fault breaks the operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultEffect {
    /// `zeros`, `partial_zeros`, `nan`, `bitflip`, `stale` (output keeps old contents),
    /// `crash`, `hang`, `exception`.
    pub kind: String,
    /// Fraction of the matching calls affected (deterministic: every k-th call), default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// Signal for `crash` (`SIGSEGV`, `SIGABRT`, `SIGBUS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Message printed to stderr before a crash, or the exception text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::{CompareStats, Measurement};

    #[test]
    fn a_catalog_device_list_that_is_missing_or_garbage_is_unknown() {
        let parse = |devices: &str| -> WorkerEvent {
            serde_json::from_str(&format!(r#"{{"event":"catalog","probes":[]{devices}}}"#)).unwrap()
        };
        let devices_of = |event: WorkerEvent| match event {
            WorkerEvent::Catalog { devices, .. } => devices,
            other => panic!("not a catalog: {other:?}"),
        };
        assert_eq!(devices_of(parse("")), None);
        assert_eq!(devices_of(parse(r#","devices":null"#)), None);
        assert_eq!(devices_of(parse(r#","devices":"garbage""#)), None);
        assert_eq!(
            devices_of(parse(r#","devices":[{"name":"no index"}]"#)),
            None
        );
        assert_eq!(devices_of(parse(r#","devices":[]"#)), Some(Vec::new()));
        let listed = devices_of(parse(
            r#","devices":[{"index":1,"name":"GPU","arch":"sm_90","total_memory":8,"extra":true}]"#,
        ))
        .unwrap();
        assert_eq!(
            (
                listed[0].index,
                listed[0].arch.as_deref(),
                listed[0].total_memory
            ),
            (1, Some("sm_90"), Some(8))
        );
        // Written without devices, a catalog reads as before.
        let written = serde_json::to_string(&WorkerEvent::Catalog {
            probes: Vec::new(),
            devices: None,
        })
        .unwrap();
        assert_eq!(written, r#"{"event":"catalog","probes":[]}"#);
    }

    #[test]
    fn result_event_json_shape() {
        let line = r#"{"event":"result","probe":"copy.h2d.pageable.tiny","device":"cuda:0","outcome":"observed",
            "observation":{"probe":"copy.h2d.pageable.tiny","device":"cuda:0",
              "measurement":{"kind":"compare","n":64,"mismatches":3,"trials":16,"failed_trials":1,"all_zero_trials":1},
              "metrics":{"bytes":64}},
            "elapsed_s":0.5}"#;
        let event: WorkerEvent = serde_json::from_str(line).unwrap();
        let WorkerEvent::Result {
            outcome: Outcome::Observed { observation },
            device,
            ..
        } = event
        else {
            panic!("wrong variant: {event:?}");
        };
        assert_eq!(device, DeviceRef::Gpu(0));
        let Measurement::Compare(CompareStats {
            mismatches,
            all_zero_trials,
            ..
        }) = observation.measurement
        else {
            panic!("wrong measurement");
        };
        assert_eq!((mismatches, all_zero_trials), (3, 1));
    }

    #[test]
    fn skip_and_error_events_parse() {
        let skip: WorkerEvent = serde_json::from_str(
            r#"{"event":"result","probe":"a.b","device":"cpu","outcome":"skip","reason":"no fp8"}"#,
        )
        .unwrap();
        assert!(matches!(
            skip,
            WorkerEvent::Result {
                outcome: Outcome::Skip { .. },
                ..
            }
        ));
        let err: WorkerEvent = serde_json::from_str(
            r#"{"event":"result","probe":"a.b","device":"cpu","outcome":"error","type":"RuntimeError","message":"boom"}"#,
        )
        .unwrap();
        assert!(matches!(
            err,
            WorkerEvent::Result {
                outcome: Outcome::Error { .. },
                ..
            }
        ));
        let hello: WorkerEvent = serde_json::from_str(
            r#"{"event":"hello","protocol":1,"pid":5,"worker":"python","torch":null,"unusable":"No module named 'torch'"}"#,
        )
        .unwrap();
        assert!(matches!(hello, WorkerEvent::Hello { torch: None, .. }));
    }

    #[test]
    fn a_hello_carries_the_conda_environment_and_older_ones_have_none() {
        let hello: WorkerEvent = serde_json::from_str(
            r#"{"event":"hello","protocol":1,"pid":5,"worker":"python",
                "packages":{"torch":"2.1.0","cudatoolkit":"11.8.0"},
                "conda":{"prefix":"/opt/conda/envs/x","skipped":["a.json: not JSON: x"],
                         "packages":{"cudatoolkit":{"version":"11.8.0","build":"h6a678d5_0","channel":"nvidia"}}}}"#,
        )
        .unwrap();
        let WorkerEvent::Hello {
            conda: Some(conda), ..
        } = hello
        else {
            panic!("no conda: {hello:?}");
        };
        assert_eq!(conda.packages["cudatoolkit"].channel, "nvidia");
        assert_eq!(conda.skipped, ["a.json: not JSON: x"]);
        let older: WorkerEvent =
            serde_json::from_str(r#"{"event":"hello","protocol":1,"pid":5,"worker":"python"}"#)
                .unwrap();
        assert!(matches!(older, WorkerEvent::Hello { conda: None, .. }));
    }

    #[test]
    fn fault_spec_from_toml_like_json() {
        let spec: SimulationSpec = serde_json::from_str(
            r#"{"source":"preset:h2d-zeros","fault":[{"name":"z","op":"h2d","when":{"pinned":false,"max_bytes":64},
                "effect":{"kind":"zeros"},"cured_by":["HSA_ENABLE_SDMA=0"]}]}"#,
        )
        .unwrap();
        assert_eq!(spec.faults[0].when.max_bytes, Some(64));
        assert!(
            serde_json::from_str::<FaultSpec>(
                r#"{"name":"z","op":"h2d","effect":{"kind":"zeros"},"typo":1}"#
            )
            .is_err()
        );
    }
}
