//! `pcpmodel detect`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel detect`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `pcpmodel detect`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'detect' is not implemented yet")
}
