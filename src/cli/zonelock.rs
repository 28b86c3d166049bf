//! Thread 000 commands: `latency`, `scale-max`, `plot latency`, and `predict --workload mmap-fill`.
//! (Owned by the zone->lock model work.)

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {}

/// Arguments of `pcpmodel scale-max`.
#[derive(Debug, clap::Args)]
pub struct ScaleMaxArgs {}

/// Arguments of `pcpmodel plot latency`.
#[derive(Debug, clap::Args)]
pub struct PlotLatencyArgs {}

/// Runs `pcpmodel latency`.
pub fn latency(_args: LatencyArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latency' is not implemented yet")
}

/// Runs `pcpmodel scale-max`.
pub fn scale_max(_args: ScaleMaxArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'scale-max' is not implemented yet")
}

/// Runs `pcpmodel plot latency`.
pub fn plot_latency(_args: PlotLatencyArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'plot latency' is not implemented yet")
}

/// `pcpmodel predict --workload mmap-fill`.
pub fn predict(_args: &super::predict::Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("workload mmap-fill is not implemented yet")
}
