//! `pcpmodel machines` and `pcpmodel machine show`.

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel machines`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {}

/// Arguments of `pcpmodel machine`.
#[derive(Debug, clap::Args)]
pub struct MachineArgs {
    #[command(subcommand)]
    pub action: MachineAction,
}

/// `pcpmodel machine <action>`.
#[derive(Debug, clap::Subcommand)]
pub enum MachineAction {
    /// Show a machine: every value with its unit and source.
    Show {
        /// Built-in machine name or path to a machine TOML file.
        machine: String,
    },
}

/// Runs `pcpmodel machines`.
pub fn list(_args: ListArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'machines' is not implemented yet")
}

/// Runs `pcpmodel machine show`.
pub fn show(_args: MachineArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'machine show' is not implemented yet")
}
