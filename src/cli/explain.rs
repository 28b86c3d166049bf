//! `pcpmodel explain`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel explain`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Arguments of `pcpmodel plot explain`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {}

/// Runs `pcpmodel explain`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}

/// Runs `pcpmodel plot explain`.
pub fn plot(_args: PlotArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
