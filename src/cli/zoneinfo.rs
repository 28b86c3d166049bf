//! `pcpmodel zoneinfo`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel zoneinfo`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `pcpmodel zoneinfo`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'zoneinfo' is not implemented yet")
}
