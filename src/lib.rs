//! # pcpmodel
//!
//! An analytic, cache-hierarchy-aware performance model of the Linux page allocator's per-CPU
//! page lists (PCP). See the README for the command-line tool.
//!
//! The flow of a question: a [`machine::Machine`] and a kernel version go through the kernel's own
//! formulas ([`kernel`]) to a PCP configuration (batch, high, high_min/high_max); workload and
//! configuration go through the cost models in [`model`] to an estimate with a breakdown by term.

pub mod advice;
pub mod assumptions;
pub mod bounds;
pub mod calibrate;
pub mod data;
pub mod detect;
pub mod error;
pub mod explain;
pub mod fit;
pub mod import;
pub mod kernel;
pub mod machine;
pub mod measure;
pub mod model;
pub mod optimize;
pub mod plot;
pub mod plot_latency;
pub mod provenance;
pub mod registry;
pub mod report;
pub mod stats;
pub mod validate;
pub mod workload;

pub use error::{Error, Result};
pub use machine::Machine;
pub use provenance::Sourced;
