//! Kind `alloc-loop` (stub: being filled in).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `alloc-loop`.
pub struct AllocLoop;

impl Kind for AllocLoop {
    fn name(&self) -> &'static str {
        "alloc-loop"
    }
    fn description(&self) -> &'static str {
        "alloc-loop"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[]
    }
    fn predict(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<Predicted> {
        Err(Error::Unsupported(format!(
            "kind alloc-loop is not implemented yet ({})",
            w.name
        )))
    }
}
