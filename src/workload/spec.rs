//! A workload as data: what each participating CPU does per operation, in physical units, with
//! the provenance of every number. The TOML schema of `models/workloads/*.toml` is this file's
//! [`WorkloadSpec`] exactly (`deny_unknown_fields`); `pcpmodel workload show NAME --format json`
//! prints one.
//!
//! A spec names its `kind`: the Rust evaluator ([`super::kind::Kind`]) that combines the
//! mechanisms (PCP dynamics, cache reuse, zone->lock, counter lines) for it. A new workload that
//! combines existing mechanisms is one TOML file; one that needs a new mechanism is one Rust file
//! implementing [`super::kind::Kind`] and one line in [`super::registry`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hw::provenance::Sourced;
use crate::kernel::version::KernelVersion;

/// Who frees the pages a CPU allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FreedBy {
    /// The allocating CPU itself (an mmap/munmap loop, a bulk allocation loop).
    Same,
    /// A partner CPU at [`OpSpec::placement`] (a network sender and receiver).
    Partner,
    /// A CPU on another NUMA node.
    RemoteNode,
    /// Nobody during the measured interval (the pages are freed after it).
    Later,
}

/// Where the partner that frees (or consumes) runs, relative to the allocating CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementSpec {
    /// SMT siblings of one core.
    Smt,
    /// Two cores of one LLC domain.
    SameLlc,
    /// Two LLC domains of one socket.
    CrossLlc,
    /// Two sockets.
    CrossSocket,
}

impl From<PlacementSpec> for crate::model::cache::Placement {
    fn from(p: PlacementSpec) -> Self {
        use crate::model::cache::Placement;
        match p {
            PlacementSpec::Smt => Placement::Smt,
            PlacementSpec::SameLlc => Placement::SameLlc,
            PlacementSpec::CrossLlc => Placement::CrossLlc,
            PlacementSpec::CrossSocket => Placement::CrossSocket,
        }
    }
}

/// How a number in a workload file was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Stated by the benchmark's source or a paper (a given input).
    #[default]
    Given,
    /// Fitted to a measurement (the source names the data); `fit` may refit it.
    Fitted,
    /// Measured directly (on a host, by a tool).
    Measured,
    /// Derived from other values or from machine facts (the source says how).
    Derived,
}

/// The seed threads `validate` has tables for, with the kind of each thread's built-in
/// workload (a workload file's `thread` must be one of them, with that kind).
pub const THREAD_KINDS: [(&str, &str); 5] = [
    ("000", "alloc-loop"),
    ("001", "memcg-charge"),
    ("002", "numa-stat"),
    ("003", "high-order-fault"),
    ("004", "producer-consumer"),
];

/// Every `table` of a quantity: only on `op.work`, only with `basis = "fitted"`, and naming a
/// compiled-in table (a file stem or the stem prefix of a family).
fn check_fit_tables(label: &str, v: &serde_json::Value, path: &str) -> Result<()> {
    let serde_json::Value::Object(map) = v else {
        return Ok(());
    };
    if let Some(t) = map.get("table").and_then(|t| t.as_str()) {
        let field = format!("{path}.table");
        if path != "op.work.ns" && path != "op.work.cycles" {
            return Err(Error::invalid(
                label,
                &field,
                "only op.work takes a table (the data its value is fitted to)",
            ));
        }
        if map.get("basis").and_then(|b| b.as_str()) != Some("fitted") {
            return Err(Error::invalid(
                label,
                &field,
                "a table names the data a fitted value comes from: give basis = \"fitted\" or drop the table",
            ));
        }
        let stems: Vec<&str> = crate::data::catalogue().iter().map(|t| t.name).collect();
        if !stems.iter().any(|s| s.starts_with(t) && !t.is_empty()) {
            return Err(Error::invalid(
                label,
                &field,
                format!("'{t}' names no compiled-in table (pcpmodel data lists them)"),
            ));
        }
    }
    for (k, sub) in map {
        let p = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        check_fit_tables(label, sub, &p)?;
    }
    Ok(())
}

/// A number with its unit (in the field name), provenance and basis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantity {
    /// The value.
    pub value: f64,
    /// Where it comes from: `"<kind>: <details>"` as in machine files.
    pub source: String,
    /// How it was obtained (default `given`).
    #[serde(default)]
    pub basis: Basis,
    /// With `basis = "fitted"`: the compiled-in table the value is fitted to (a file stem under
    /// data/, or the stem prefix of a family of tables, e.g. `000_funclatency`). The kind fits
    /// the value per machine on that table's rows for the machine and carries it over to a
    /// machine the table does not measure. Without it a fitted value is carried over everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
}

impl Quantity {
    /// A given quantity.
    pub fn given(value: f64, source: impl Into<String>) -> Self {
        Quantity {
            value,
            source: source.into(),
            basis: Basis::Given,
            table: None,
        }
    }
}

/// Work outside the allocator per operation: in ns, or in cycles at the machine's base clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    /// Nanoseconds per operation (exclusive with `cycles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<Quantity>,
    /// Cycles per operation at the machine's `clock.base_ghz` (exclusive with `ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<Quantity>,
    /// The kernel the work was measured on, when it is the page allocator's fast path itself
    /// (e.g. `"4.14"` for page_bench01 cycles): kind `alloc-loop` adds the fast-path steps
    /// between that kernel and the one it runs ([`crate::model::fastpath`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

impl Work {
    /// Nanoseconds per operation on a machine clocked at `ghz`.
    pub fn ns_at(&self, ghz: f64) -> f64 {
        match (&self.ns, &self.cycles) {
            (Some(n), _) => n.value,
            (None, Some(c)) => c.value / ghz,
            (None, None) => 0.0,
        }
    }

    /// The quantity that sets it.
    pub fn quantity(&self) -> Option<&Quantity> {
        self.ns.as_ref().or(self.cycles.as_ref())
    }

    /// The table the work is fitted to per machine (`basis = "fitted"` with a `table`), if any.
    pub fn fitted_table(&self) -> Option<&str> {
        self.quantity()
            .filter(|q| q.basis == Basis::Fitted)
            .and_then(|q| q.table.as_deref())
    }
}

/// What one task does per operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    /// What one operation is, in words (e.g. "one 4 KiB page faulted, written and unmapped").
    pub what: String,
    /// Allocation order (0 = 4 KiB, 3 = 32 KiB, 9 = 2 MiB).
    pub order: Sourced<u8>,
    /// Pages of that order allocated per operation.
    pub alloc_pages: Quantity,
    /// Pages of that order freed per operation (by [`OpSpec::freed_by`]).
    pub free_pages: Quantity,
    /// Who frees them.
    pub freed_by: Sourced<FreedBy>,
    /// Where the partner runs (when `freed_by = "partner"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Sourced<PlacementSpec>>,
    /// The socket the pages travel through (when `freed_by = "partner"` and the pages are skb
    /// data): it decides, with the kernel version and `net.core.skb_defer_max`, whether the
    /// receiver or the sender frees them ([`crate::kernel::skb::free_site`]). Absent: the
    /// partner frees on every kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<Sourced<crate::kernel::skb::Socket>>,
    /// Bytes of each page written or read by the workload (0 for an in-kernel loop that never
    /// touches the memory, 4096 for a fill).
    pub touch_bytes_per_page: Quantity,
    /// Work outside the page allocator per operation.
    pub work: Work,
    /// Idle time per operation (a think time), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ns: Option<Quantity>,
    /// Pages per allocation phase when allocations and frees alternate in phases (mmap then
    /// munmap); absent when they interleave page by page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_pages: Option<Quantity>,
}

/// How the workload's tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskMode {
    /// Separate processes (separate mm).
    Process,
    /// Threads of one process (one mm: page-table and mmap_lock sharing).
    Thread,
    /// Kernel threads (an in-kernel benchmark module).
    Kernel,
}

/// Tasks and their placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksSpec {
    /// Number of tasks (each on its own CPU), or of sender/receiver pairs for a partner
    /// workload.
    pub count: Sourced<u32>,
    /// NUMA nodes they run on: "one" (node 0) or "all".
    pub nodes: Sourced<String>,
    /// Processes, threads or kernel threads.
    pub mode: Sourced<TaskMode>,
    /// Memory cgroups the tasks are spread over, evenly (absent: one). Kinds that model the
    /// per-CPU memcg charge stock read it (`--memcgs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcgs: Option<Sourced<u32>>,
}

/// A workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name on the command line (`--workload NAME`).
    pub name: String,
    /// The evaluator that combines the mechanisms for it (see `pcpmodel workloads`).
    pub kind: String,
    /// One line for people.
    pub description: String,
    /// Where the workload and its numbers come from (benchmark source, paper, thread).
    pub source: String,
    /// Other names accepted on the command line (earlier names of the same workload).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Machine used when the user names none.
    pub default_machine: String,
    /// Kernel the workload's numbers were measured on (e.g. "6.10"): the reference for the
    /// list of kernel changes a prediction on another kernel leaves out.
    pub reference_kernel: String,
    /// The seed thread whose tables validate it ("000".."004"), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// The built-in workload this one was written from (`workload from-flow --like`): the same
    /// host loop, so a machine file's measured work for that workload applies to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub like: Option<String>,
    /// Per-operation behaviour.
    pub op: OpSpec,
    /// Tasks.
    pub tasks: TasksSpec,
    /// Kind-specific inputs (each named with its unit, each sourced), e.g. `probe_ns`,
    /// `cgroup_depth`, `instances`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, Quantity>,
    /// What is not known about the workload, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
}

impl WorkloadSpec {
    /// Parses and checks a workload from TOML text; `label` names the file in errors.
    pub fn from_toml_str(text: &str, label: &str) -> Result<WorkloadSpec> {
        // A workload file has no arrays of tables: `[[tasks]]` would otherwise be reported as
        // an unknown field of the table's first key.
        if let Some((i, name)) = text.lines().enumerate().find_map(|(i, l)| {
            let h = l.trim();
            h.strip_prefix("[[")
                .and_then(|h| h.split("]]").next())
                .map(|n| (i, n.trim().to_string()))
        }) {
            return Err(Error::parse(
                label,
                i + 1,
                &name,
                format!("'[[{name}]]' makes an array of tables, which a workload file has none of: write [{name}]"),
            ));
        }
        let w: WorkloadSpec =
            toml::from_str(text).map_err(|e| crate::hw::machine::toml_error(label, text, &e))?;
        w.check(label)
            .map_err(|e| crate::hw::machine::locate_invalid(e, text))?;
        Ok(w)
    }

    /// The reference kernel, parsed.
    pub fn reference_kernel(&self) -> Result<KernelVersion> {
        KernelVersion::parse_labeled(&self.reference_kernel, "reference_kernel")
    }

    /// A kind-specific parameter, or an error naming it.
    pub fn param(&self, name: &str) -> Result<f64> {
        self.params.get(name).map(|q| q.value).ok_or_else(|| {
            Error::invalid(
                format!("workload {}", self.name),
                format!("params.{name}"),
                format!("missing: kind '{}' needs it", self.kind),
            )
        })
    }

    /// A kind-specific parameter, or `default` when the file does not set it.
    pub fn param_or(&self, name: &str, default: f64) -> f64 {
        self.params.get(name).map_or(default, |q| q.value)
    }

    /// Tasks' NUMA span.
    pub fn nodes(&self) -> Result<super::NodeSpan> {
        super::NodeSpan::parse(&self.tasks.nodes.value, "tasks.nodes")
    }

    /// Every number of the file with its dotted field, for bounds checks and for `workload show`.
    pub fn quantities(&self) -> Vec<(String, &Quantity)> {
        let o = &self.op;
        let mut v: Vec<(String, &Quantity)> = vec![
            ("op.alloc_pages".into(), &o.alloc_pages),
            ("op.free_pages".into(), &o.free_pages),
            ("op.touch_bytes_per_page".into(), &o.touch_bytes_per_page),
        ];
        if let Some(q) = &o.work.ns {
            v.push(("op.work.ns".into(), q));
        }
        if let Some(q) = &o.work.cycles {
            v.push(("op.work.cycles".into(), q));
        }
        if let Some(q) = &o.think_ns {
            v.push(("op.think_ns".into(), q));
        }
        if let Some(q) = &o.phase_pages {
            v.push(("op.phase_pages".into(), q));
        }
        for (k, q) in &self.params {
            v.push((format!("params.{k}"), q));
        }
        v
    }

    /// Checks names, provenance and physical ranges.
    pub fn check(&self, label: &str) -> Result<()> {
        let inv = |field: &str, msg: String| Error::invalid(label, field, msg);
        if let Ok(v) = serde_json::to_value(self) {
            crate::input::check_text_fields(label, &v)?;
            check_fit_tables(label, &v, "")?;
        }
        let one_word = |n: &str| !n.trim().is_empty() && !n.contains(char::is_whitespace);
        if !one_word(&self.name) {
            return Err(inv(
                "name",
                "must be one word (it is a command-line name)".into(),
            ));
        }
        if let Some(a) = self
            .aliases
            .iter()
            .find(|a| !one_word(a) || **a == self.name)
        {
            return Err(inv(
                "aliases",
                format!(
                    "'{a}': each alias must be one word (a command-line name) other than the name"
                ),
            ));
        }
        if let Some(t) = &self.thread {
            let threads = THREAD_KINDS;
            match threads.iter().find(|(n, _)| n == t) {
                None => {
                    return Err(inv(
                        "thread",
                        format!(
                            "'{t}' is not a seed thread ({}): the field marks the built-in workload of a thread, whose tables validate runs; leave it out of your own files",
                            threads.map(|(n, _)| n).join(", ")
                        ),
                    ))
                }
                Some((_, kind)) if *kind != self.kind => {
                    return Err(inv(
                        "thread",
                        format!(
                            "thread {t}'s workload is of kind {kind}, this file's is {}: validate would run thread {t}'s tables on another kind's model; leave the field out of your own files",
                            self.kind
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        self.reference_kernel()
            .map_err(|e| inv("reference_kernel", bare_message(e)))?;
        if let Some(k) = &self.op.work.kernel {
            crate::kernel::version::KernelVersion::parse(k)
                .map_err(|e| inv("op.work.kernel", bare_message(e)))?;
        }
        self.nodes().map_err(|_| {
            inv(
                "tasks.nodes",
                format!(
                    "'{}': use one (the first node), all (spread evenly) or cores (will-it-scale's placement: node 0's cores first)",
                    self.tasks.nodes.value
                ),
            )
        })?;
        if let Some(m) =
            crate::bounds::TOUCH_BYTES_PER_PAGE.problem(self.op.touch_bytes_per_page.value)
        {
            return Err(inv(
                "op.touch_bytes_per_page",
                format!("{m} (the bytes each page's use moves: 4096 for a page written once)"),
            ));
        }
        let order = self.op.order.value;
        if order > crate::bounds::MAX_ORDER_ANY {
            return Err(inv(
                "op.order",
                format!(
                    "{order} is above the largest buddy order any modelled kernel has ({})",
                    crate::bounds::MAX_ORDER_ANY
                ),
            ));
        }
        let t = self.tasks.count.value;
        if t == 0 || f64::from(t) > crate::bounds::TASKS.hi {
            return Err(inv(
                "tasks.count",
                format!("{t}: must be 1..={}", crate::bounds::TASKS.hi),
            ));
        }
        if let Some(m) = &self.tasks.memcgs {
            if m.value == 0 || m.value > t {
                return Err(inv(
                    "tasks.memcgs",
                    format!("{}: must be 1..=tasks.count ({t})", m.value),
                ));
            }
            check_source("tasks.memcgs", &m.source).map_err(|e| inv("tasks.memcgs", e))?;
        }
        if let Some(q) = &self.op.phase_pages {
            if !(q.value >= 1.0 && q.value.fract() == 0.0) {
                return Err(inv(
                    "op.phase_pages",
                    format!(
                        "{} is not a whole number of pages >= 1 (leave it out when allocations and frees interleave)",
                        q.value
                    ),
                ));
            }
        }
        match (&self.op.work.ns, &self.op.work.cycles) {
            (Some(_), Some(_)) => {
                return Err(inv("op.work", "give ns or cycles, not both".into()));
            }
            (None, None) => {
                return Err(inv(
                    "op.work",
                    "give the work per operation as ns = { value, source } or cycles = { value, source }".into(),
                ));
            }
            _ => {}
        }
        // Whether a partner needs a placement is the kind's to say (a kind that places the
        // partner refuses a file without one: crate::workload::kinds::producer_consumer).
        for (field, q) in self.quantities() {
            if !q.value.is_finite() || q.value < 0.0 {
                return Err(inv(
                    &field,
                    format!("{} is not a finite, non-negative number", q.value),
                ));
            }
            if q.value > 1e12 {
                return Err(inv(
                    &field,
                    format!(
                        "{} is beyond any physical value here (more than 1e12)",
                        q.value
                    ),
                ));
            }
            check_source(&field, &q.source).map_err(|m| inv(&field, m))?;
        }
        for (field, src) in [
            ("op.order", &self.op.order.source),
            ("op.freed_by", &self.op.freed_by.source),
            ("tasks.count", &self.tasks.count.source),
            ("tasks.nodes", &self.tasks.nodes.source),
            ("tasks.mode", &self.tasks.mode.source),
        ] {
            check_source(field, src).map_err(|m| inv(field, m))?;
        }
        if let Some(p) = &self.op.placement {
            check_source("op.placement", &p.source).map_err(|m| inv("op.placement", m))?;
        }
        Ok(())
    }
}

/// The message of a parse error without its own location (the caller's error names the file,
/// line and field once).
fn bare_message(e: Error) -> String {
    match e {
        Error::Parse { message, .. } => message,
        other => other.to_string(),
    }
}

/// A source string must start with one of the provenance kinds, or (workload files only: a
/// machine file holds no fitted number) `fitted:` naming the data and the fit.
fn check_source(field: &str, source: &str) -> std::result::Result<(), String> {
    let probe = Sourced::new(0u8, source);
    let fitted = source.split(':').next().map(str::trim) == Some("fitted") && source.contains(':');
    if probe.kind().is_none() && !fitted {
        return Err(format!(
            "source '{source}' of {field} must start with one of {}, fitted followed by ':'",
            crate::hw::provenance::SOURCE_KINDS.join(", ")
        ));
    }
    Ok(())
}
