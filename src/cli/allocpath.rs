//! Threads 001-003 commands: `memcg`, and `predict --workload memcg-netperf|page-bench|page-fault1`.
//! (Owned by the allocation-path model work.)

use std::process::ExitCode;

use pcpmodel::report::Format;

/// Arguments of `pcpmodel memcg`.
#[derive(Debug, clap::Args)]
pub struct MemcgArgs {}

/// Runs `pcpmodel memcg`.
pub fn memcg(_args: MemcgArgs, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'memcg' is not implemented yet")
}

/// `pcpmodel predict --workload memcg-netperf|page-bench|page-fault1`.
pub fn predict(args: &super::predict::Args, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("workload {:?} is not implemented yet", args.workload)
}
