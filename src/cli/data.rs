//! `pcpmodel data`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel data`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `pcpmodel data`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'data' is not implemented yet")
}
