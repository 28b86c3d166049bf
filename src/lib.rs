//! # pcpmodel
//!
//! An analytic, cache-hierarchy-aware performance model of the Linux page allocator's per-CPU
//! page lists (PCP). See the README for the command-line tool.
//!
//! The flow of a question: a [`hw::machine::Machine`] and a kernel version go through the kernel's own
//! formulas ([`kernel`]) to a PCP configuration (batch, high, high_min/high_max); workload and
//! configuration go through the cost models in [`model`] to an estimate with a breakdown by term.

pub mod answer;
pub mod assumptions;
pub mod bounds;
pub mod data;
pub mod error;
pub mod fit;
pub mod hw;
pub mod import;
pub mod input;
pub mod kernel;
pub mod measure;
pub mod memo;
pub mod model;
pub mod output;
pub mod report;
pub mod validate;
pub mod workload;

pub use error::{Error, Result};
pub use hw::machine::Machine;
pub use hw::provenance::Sourced;
