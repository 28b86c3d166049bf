//! Kind `numa-stat` (stub: being filled in).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `numa-stat`.
pub struct NumaStat;

impl Kind for NumaStat {
    fn name(&self) -> &'static str {
        "numa-stat"
    }
    fn description(&self) -> &'static str {
        "numa-stat"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[]
    }
    fn predict(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<Predicted> {
        Err(Error::Unsupported(format!(
            "kind numa-stat is not implemented yet ({})",
            w.name
        )))
    }
}
