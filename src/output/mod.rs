//! What users read: reports (table, JSON, CSV) and SVG plots.

pub mod plot;
pub mod plot_latency;
pub mod report;
