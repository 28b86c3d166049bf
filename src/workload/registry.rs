//! The one registry of workloads: the kinds (Rust evaluators) and the built-in workload files
//! (`models/workloads/*.toml`, compiled in). `predict`, `fit`, `validate`, `optimal-high`,
//! `latency` and `scale-max` resolve `--workload NAME|FILE` here.
//!
//! Adding a workload that combines existing mechanisms: one TOML file under
//! `models/workloads/` and its stem in [`BUILTIN`]. Adding a mechanism: one Rust file under
//! `src/workload/kinds/` implementing [`Kind`] and one line in [`Registry::builtin`]; a program
//! using the library can also add a kind at run time with [`Registry::with_kind`].

use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};

use super::kind::Kind;
use super::spec::WorkloadSpec;

/// A built-in workload file.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinWorkload {
    /// File stem (the workload's name).
    pub name: &'static str,
    /// File text.
    pub toml: &'static str,
}

macro_rules! builtin_workloads {
    ($($name:literal),* $(,)?) => {
        /// Every built-in workload file, compiled in.
        pub const BUILTIN: &[BuiltinWorkload] = &[$(BuiltinWorkload {
            name: $name,
            toml: include_str!(concat!("../../models/workloads/", $name, ".toml")),
        }),*];
    };
}

builtin_workloads!(
    "netperf-udp",
    "mmap-fill",
    "memcg-netperf",
    "memcg-netperf-cgroups",
    "page-bench",
    "page-fault1-64k",
    "bulk-alloc-order0",
    "bulk-alloc-order9",
    "will-it-scale-page-fault1",
    "will-it-scale-page-fault2",
    "page-bench01",
    "kbuild",
    "netperf-udp-stream",
    "netperf-tcp-stream",
    "iperf3-tcp",
    "lmbench-af-unix",
    "kbuild-cgroups",
    "netperf-sctp-stream",
);

/// Where a workload came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A built-in file (`models/workloads/NAME.toml`).
    Builtin,
    /// A user file.
    File(String),
}

/// A resolved workload: its spec and the kind that evaluates it.
#[derive(Clone)]
pub struct Workload {
    /// The file's content.
    pub spec: WorkloadSpec,
    /// Its evaluator.
    pub kind: Arc<dyn Kind>,
    /// Built-in or a user file.
    pub origin: Origin,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("name", &self.spec.name)
            .field("kind", &self.kind.name())
            .field("origin", &self.origin)
            .finish()
    }
}

impl Workload {
    /// The workload's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Predicts it on `machine` with `knobs`: the steady state, or with [`RUN_SECONDS`] among
    /// the knobs' extras a run of that length that first grows the lists from
    /// [`RUN_START_PAGES`] (default: what the kernel's default setting holds) to their steady
    /// size, each page they grow by costing the machine's `memory.backing_ns_per_page` more
    /// ([`crate::model::fill`], priced in the kind's model of its lists).
    pub fn predict(
        &self,
        machine: &crate::hw::machine::Machine,
        knobs: &super::kind::Knobs,
    ) -> Result<super::kind::Predicted> {
        let run = knobs.extra(RUN_SECONDS).is_some() || knobs.extra(RUN_START_PAGES).is_some();
        if run && !self.kind.knobs().contains(&"run-seconds") {
            return Err(Error::Unsupported(format!(
                "--run-seconds: workload {} (kind {}) does not report the pages its lists hold, so a run's fill has no size here",
                self.spec.name,
                self.kind.name()
            )));
        }
        knobs.check()?;
        knobs.check_read_by(self.kind.as_ref(), &self.spec.name)?;
        if let Some(h) = knobs.high {
            let kernel = match knobs.kernel {
                Some(k) => k,
                None => self.kind.default_kernel(&self.spec)?,
            };
            crate::workload::sweep::check_high("--high", h, machine, kernel)?;
        }
        let mut p = self.kind.predict(&self.spec, machine, knobs)?;
        // The list compares the reference with the kernel the kind evaluated.
        let evaluated = super::kind::Knobs {
            kernel: Some(match knobs.kernel {
                Some(k) => k,
                None => self.kind.default_kernel(&self.spec)?,
            }),
            ..knobs.clone()
        };
        super::not_modelled::add(&mut p.report, &self.spec, self.kind.name(), &evaluated)?;
        let unread = super::kind::unread_fields(self.kind.as_ref());
        if !unread.is_empty() {
            p.report.notes.push(format!(
                "not read by kind {}: {} (the file's values document the workload; changing them changes no number here)",
                self.kind.name(),
                unread.join(", ")
            ));
        }
        Ok(p)
    }
}

/// The knob (an extra of [`super::kind::Knobs`]) that asks [`Workload::predict`] for a run of
/// this many seconds instead of the steady state.
pub const RUN_SECONDS: &str = "run_seconds";
/// Pages on the lists when that run starts.
pub const RUN_START_PAGES: &str = "run_start_pages";

/// The kinds and the built-in workloads.
#[derive(Clone)]
pub struct Registry {
    kinds: Vec<Arc<dyn Kind>>,
}

impl Registry {
    /// The library's kinds.
    pub fn builtin() -> Registry {
        Registry {
            kinds: vec![
                Arc::new(super::kinds::alloc_loop::AllocLoop),
                Arc::new(super::kinds::producer_consumer::ProducerConsumer),
                Arc::new(super::kinds::memcg_charge::MemcgCharge),
                Arc::new(super::kinds::numa_stat::NumaStat),
                Arc::new(super::kinds::high_order_fault::HighOrderFault),
            ],
        }
    }

    /// Adds (or replaces, by name) a kind.
    pub fn with_kind(mut self, kind: Arc<dyn Kind>) -> Registry {
        self.kinds.retain(|k| k.name() != kind.name());
        self.kinds.push(kind);
        self
    }

    /// Every kind.
    pub fn kinds(&self) -> &[Arc<dyn Kind>] {
        &self.kinds
    }

    /// The kind called `name`.
    pub fn kind(&self, name: &str) -> Result<Arc<dyn Kind>> {
        self.kinds
            .iter()
            .find(|k| k.name() == name)
            .cloned()
            .ok_or_else(|| Error::Unknown {
                kind: "workload kind",
                name: name.to_string(),
                hint: format!(
                    ": kinds are {}",
                    self.kinds
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// A workload from TOML text (`label` names the file in errors).
    pub fn from_toml_str(&self, text: &str, label: &str, origin: Origin) -> Result<Workload> {
        let mut spec = WorkloadSpec::from_toml_str(text, label)?;
        if let Origin::File(path) = &origin {
            // A user's file names its default machine by built-in name or by a path relative
            // to the workload file (not to the directory the command runs in); it must load.
            let dm = &spec.default_machine;
            let rel = std::path::Path::new(dm);
            if crate::input::looks_like_path(dm) && rel.is_relative() {
                if let Some(dir) = std::path::Path::new(path).parent() {
                    spec.default_machine = dir.join(rel).to_string_lossy().into_owned();
                }
            }
            crate::hw::machine::Machine::resolve(&spec.default_machine).map_err(|e| {
                crate::hw::machine::locate_invalid(
                    Error::invalid(label, "default_machine", e.to_string()),
                    text,
                )
            })?;
        }
        let kind = self.kind(&spec.kind).map_err(|e| {
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with("kind"))
                .map_or(0, |i| i + 1);
            Error::parse(label, line, "kind", e.to_string())
        })?;
        // Ranges and unread fields first: a value outside its range is named before anything
        // the kind derives from it (a life_free_share of 1.5 once surfaced as too many runs).
        super::kind::check_fields(kind.as_ref(), &spec)
            .and_then(|()| kind.check(&spec))
            .map_err(|e| match e {
                Error::Invalid { field, message, .. } => {
                    crate::hw::machine::locate_invalid(Error::invalid(label, field, message), text)
                }
                other => other,
            })?;
        Ok(Workload { spec, kind, origin })
    }

    /// Every built-in workload, in [`BUILTIN`] order.
    pub fn all_builtin(&self) -> Result<Vec<Workload>> {
        BUILTIN
            .iter()
            .map(|b| {
                self.from_toml_str(
                    b.toml,
                    &format!("built-in models/workloads/{}.toml", b.name),
                    Origin::Builtin,
                )
            })
            .collect()
    }

    /// A built-in workload by name or alias.
    pub fn builtin_workload(&self, name: &str) -> Result<Workload> {
        let all = self.all_builtin()?;
        let names: Vec<String> = all.iter().map(|w| w.spec.name.clone()).collect();
        all.into_iter()
            .find(|w| w.spec.name == name || w.spec.aliases.iter().any(|a| a == name))
            .ok_or_else(|| Error::Unknown {
                kind: "workload",
                name: name.to_string(),
                hint: format!(
                    ": built-in workloads are {} (or give a path to a workload TOML file; see `pcpmodel workloads`)",
                    names.join(", ")
                ),
            })
    }

    /// A built-in name (or alias), else a path to a TOML file.
    pub fn resolve(&self, name_or_path: &str) -> Result<Workload> {
        let p = std::path::Path::new(name_or_path);
        if crate::input::looks_like_path(name_or_path)
            || (p.is_file() && self.builtin_workload(name_or_path).is_err())
        {
            let text = crate::input::read_text(p, name_or_path, crate::input::MAX_TOML_BYTES)?;
            return self.from_toml_str(&text, name_or_path, Origin::File(name_or_path.into()));
        }
        self.builtin_workload(name_or_path)
    }
}

/// Whether `name` is a built-in workload's file stem (its name), without parsing any file.
pub fn is_builtin_name(name: &str) -> bool {
    BUILTIN.iter().any(|b| b.name == name)
}

/// [`Registry::builtin`]`().resolve(name_or_path)`.
pub fn resolve(name_or_path: &str) -> Result<Workload> {
    Registry::builtin().resolve(name_or_path)
}
