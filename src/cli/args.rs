//! Argument types and parsers shared by several subcommands (the only CLI module subcommand
//! files import from, besides `mod.rs`).

use clap::ValueEnum;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::kernel::ThpMode;
use pcpmodel::model::cache::Placement;
use pcpmodel::workload::spec::PlacementSpec;

/// Placement of producer and consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// SMT siblings of one core (shared L2).
    Smt,
    /// Two cores in one LLC domain.
    SameLlc,
    /// Two LLC domains of one socket (AMD CCDs).
    CrossLlc,
    /// Two sockets.
    CrossSocket,
}

impl From<PlacementArg> for PlacementSpec {
    fn from(p: PlacementArg) -> PlacementSpec {
        match p {
            PlacementArg::Smt => PlacementSpec::Smt,
            PlacementArg::SameLlc => PlacementSpec::SameLlc,
            PlacementArg::CrossLlc => PlacementSpec::CrossLlc,
            PlacementArg::CrossSocket => PlacementSpec::CrossSocket,
        }
    }
}

impl From<PlacementArg> for Placement {
    fn from(p: PlacementArg) -> Placement {
        PlacementSpec::from(p).into()
    }
}

/// Parses `--kernel`, defaulting to `default`.
pub fn kernel_arg(k: &Option<String>, default: KernelVersion) -> anyhow::Result<KernelVersion> {
    Ok(match k {
        Some(s) => KernelVersion::parse_labeled(s, "--kernel")?,
        None => default,
    })
}

/// THP mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThpArg {
    /// `always`: khugepaged raises min_free_kbytes.
    Always,
    /// `madvise`: khugepaged raises min_free_kbytes.
    Madvise,
    /// `never`: no raise.
    Never,
}

impl From<ThpArg> for ThpMode {
    fn from(t: ThpArg) -> ThpMode {
        match t {
            ThpArg::Always => ThpMode::Always,
            ThpArg::Madvise => ThpMode::Madvise,
            ThpArg::Never => ThpMode::Never,
        }
    }
}
