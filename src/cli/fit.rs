//! `pcpmodel fit`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel fit`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `pcpmodel fit`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
