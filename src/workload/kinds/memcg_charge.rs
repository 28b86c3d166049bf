//! Kind `memcg-charge` (stub: being filled in).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `memcg-charge`.
pub struct MemcgCharge;

impl Kind for MemcgCharge {
    fn name(&self) -> &'static str {
        "memcg-charge"
    }
    fn description(&self) -> &'static str {
        "memcg-charge"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[]
    }
    fn predict(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<Predicted> {
        Err(Error::Unsupported(format!(
            "kind memcg-charge is not implemented yet ({})",
            w.name
        )))
    }
}
