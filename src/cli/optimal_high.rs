//! `pcpmodel optimal-high`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel optimal-high`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Arguments of `pcpmodel plot optimal-high`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {}

/// Runs `pcpmodel optimal-high`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}

/// Runs `pcpmodel plot optimal-high`.
pub fn plot(_args: PlotArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
