//! Fixtures shared by this crate's unit tests.

use gpuprobe_model::{Backend, Layer, ProbeId, ProbeSpec, Rule, Tier};

/// A quick-tier, bit-exact Python framework probe with a 10 s timeout and nothing else set;
/// tests change what they are about with struct update syntax.
pub(crate) fn spec(id: &str) -> ProbeSpec {
    ProbeSpec {
        id: ProbeId::new(id),
        tier: Tier::Quick,
        layer: Layer::Framework,
        rule: Rule::BitExact,
        backend: Backend::Python,
        timeout_s: 10.0,
        description: String::new(),
        needs: vec![],
        isolated: false,
        placement: Default::default(),
        lane: None,
        typical_s: None,
        native_counterpart: None,
        report_group: None,
    }
}
