//! Kind `high-order-fault` (stub: being filled in).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `high-order-fault`.
pub struct HighOrderFault;

impl Kind for HighOrderFault {
    fn name(&self) -> &'static str {
        "high-order-fault"
    }
    fn description(&self) -> &'static str {
        "high-order-fault"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[]
    }
    fn predict(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<Predicted> {
        Err(Error::Unsupported(format!(
            "kind high-order-fault is not implemented yet ({})",
            w.name
        )))
    }
}
