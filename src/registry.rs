//! The models `pcpmodel fit` knows, in one list: name, what it predicts, how to build it for a
//! machine, and which parameters are physical (held fixed unless the user frees them).
//!
//! A new model costs one entry here and one file under `src/model/`.

use crate::calibrate::{netperf_model, KERNEL_004};
use crate::error::{Error, Result};
use crate::fit::FitModel;
use crate::machine::Machine;
use crate::model::cache::Placement;

/// One fittable model.
pub struct ModelEntry {
    /// Name on the command line.
    pub name: &'static str,
    /// One line for people: what it predicts from which inputs.
    pub description: &'static str,
    /// Machine used when the user names none.
    pub default_machine: &'static str,
    /// Builds the model for a machine.
    pub build: fn(&Machine) -> Result<Box<dyn FitModel>>,
    /// Physical parameters held at their defaults unless freed (`fit --free NAME`).
    pub default_fixed: &'static [&'static str],
}

fn build_netperf(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(netperf_model(m, Placement::SameLlc, KERNEL_004)?))
}

fn build_zone_lock(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(crate::model::zonelock::ZoneLockHistFit::new(m)?))
}

/// Every registered model.
pub fn models() -> Vec<ModelEntry> {
    vec![ModelEntry {
        name: "netperf-pcp-high",
        description:
            "thread 004: netperf score vs the consumer's pcp->high (columns high_pages, score)",
        default_machine: "icelake-server",
        build: build_netperf,
        default_fixed: &crate::model::netperf::DEFAULT_FIXED,
    }, ModelEntry {
        name: "zone-lock",
        description: "thread 000: rmqueue_bulk() log2 latency histogram of 10 mmap/fill/munmap loops, scale 5, one node, 600 s (columns lo_ns, hi_ns, count; fit with absolute residuals)",
        default_machine: "epyc-7w83",
        build: build_zone_lock,
        default_fixed: &["fixed_ns"],
    }]
}

/// The model called `name`.
pub fn find(name: &str) -> Result<ModelEntry> {
    let all = models();
    let names: Vec<&str> = all.iter().map(|m| m.name).collect();
    let hint = format!(": models are {}", names.join(", "));
    all.into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::Unknown {
            kind: "model",
            name: name.to_string(),
            hint,
        })
}
