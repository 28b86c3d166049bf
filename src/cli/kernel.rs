//! `pcpmodel kernel`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel kernel`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `pcpmodel kernel`.
pub fn run(_args: Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'kernel' is not implemented yet")
}
