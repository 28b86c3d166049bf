//! Kind `producer-consumer` (stub: being filled in).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `producer-consumer`.
pub struct ProducerConsumer;

impl Kind for ProducerConsumer {
    fn name(&self) -> &'static str {
        "producer-consumer"
    }
    fn description(&self) -> &'static str {
        "producer-consumer"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[]
    }
    fn predict(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<Predicted> {
        Err(Error::Unsupported(format!(
            "kind producer-consumer is not implemented yet ({})",
            w.name
        )))
    }
}
