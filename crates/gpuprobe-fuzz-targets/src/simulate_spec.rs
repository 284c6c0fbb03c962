//! The `simulate_spec` target: a fault file as `--simulate FILE` reads it
//! (`gpuprobe_runner::parse_faults`), and the simulation spec it becomes, which
//! travels to the Python worker inside the plan's JSON.

use gpuprobe_model::SimulationSpec;
use gpuprobe_runner::parse_faults;

/// Parses one fault file.
///
/// Invariants, for an accepted file: it has at least one fault, every fraction lies in
/// (0, 1], and the spec serialises to JSON that reads back equal (the worker acts on what
/// the plan says, not on what the user wrote).
pub fn simulate_spec(data: &[u8]) {
    let Some(text) = crate::utf8(data) else {
        return;
    };
    let Ok(faults) = parse_faults("fuzz.toml", text) else {
        return;
    };
    assert!(
        !faults.is_empty(),
        "a fault file without faults was accepted"
    );
    for fault in &faults {
        if let Some(fraction) = fault.effect.fraction {
            assert!(
                fraction > 0.0 && fraction <= 1.0,
                "fraction {fraction} accepted"
            );
        }
    }
    let spec = SimulationSpec {
        source: "fuzz.toml".to_owned(),
        faults,
    };
    let json = serde_json::to_string(&spec).expect("a simulation spec serialises to JSON");
    let back: SimulationSpec =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("plan JSON does not read: {e}"));
    assert_eq!(
        back, spec,
        "a simulation spec changes through the plan's JSON"
    );
}
