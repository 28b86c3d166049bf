//! `pcpmodel measure pcp`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel measure pcp`.
#[derive(Debug, clap::Args)]
pub struct PcpArgs {
    /// Workload.
    #[arg(long)]
    pub workload: String,
}

/// Runs `pcpmodel measure pcp`.
pub fn run(_args: PcpArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet")
}
