//! Argument types, parsers and helpers shared by several subcommands (the only CLI module
//! subcommand files import from, besides `mod.rs`).

use clap::ValueEnum;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::kernel::ThpMode;
use pcpmodel::model::cache::Placement;
use pcpmodel::workload::registry::{Registry, Workload};
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

/// Resolves `--workload NAME|FILE` through the registry; an unknown name lists the built-in
/// names with their aliases.
pub fn resolve_workload(name: &str) -> anyhow::Result<Workload> {
    let reg = Registry::builtin();
    match reg.resolve(name) {
        Err(pcpmodel::Error::Unknown {
            kind: "workload", ..
        }) => {
            let names: Vec<String> = reg
                .all_builtin()?
                .iter()
                .map(|w| {
                    if w.spec.aliases.is_empty() {
                        w.spec.name.clone()
                    } else {
                        format!("{} (alias {})", w.spec.name, w.spec.aliases.join(", "))
                    }
                })
                .collect();
            anyhow::bail!(
                "unknown workload '{name}': built-in workloads are {} (or give a path to a workload TOML file; see `pcpmodel workloads`)",
                names.join(", ")
            )
        }
        other => Ok(other?),
    }
}

/// One line per built-in workload (name, aliases, kind, description), for `--help` texts.
pub fn workloads_help() -> String {
    match Registry::builtin().all_builtin() {
        Ok(all) => all
            .iter()
            .map(|w| {
                let aliases = if w.spec.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (alias {})", w.spec.aliases.join(", "))
                };
                format!(
                    "  {}{aliases} [{}]: {}",
                    w.spec.name,
                    w.kind.name(),
                    w.spec.description
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("  (the built-in workloads do not load: {e})"),
    }
}
