//! What users read: reports (table, JSON, CSV) and SVG plots.
//!
//! The report types live in [`crate::report`], below the workloads and fits that build them;
//! `output::report` re-exports that module so existing paths keep working.

pub mod plot;
pub mod plot_latency;
pub use crate::report;
