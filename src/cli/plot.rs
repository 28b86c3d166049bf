//! `pcpmodel plot ...`: SVG figures.

use std::process::ExitCode;

use pcpmodel::output::report::Format;

/// Arguments of `pcpmodel plot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub kind: Kind,
}

/// What to draw.
#[derive(Debug, clap::Subcommand)]
pub enum Kind {
    /// Predicted score vs pcp->high with its 95% band and the measured points.
    OptimalHigh(super::optimal_high::PlotArgs),
    /// Two machines' curves side by side with their cost terms.
    Explain(super::explain::PlotArgs),
    /// Predicted vs measured log2 latency histogram (thread 000).
    Latency(super::zonelock::PlotLatencyArgs),
}

/// Runs `pcpmodel plot`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    match args.kind {
        Kind::OptimalHigh(a) => super::optimal_high::plot(a, format),
        Kind::Explain(a) => super::explain::plot(a, format),
        Kind::Latency(a) => super::zonelock::plot_latency(a, format),
    }
}
