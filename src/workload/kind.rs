//! The evaluator behind a workload: a [`Kind`] takes a workload, a machine and kernel knobs and
//! combines the mechanisms of `src/model/` into a [`Predicted`] result. Kinds know nothing of
//! the command line; every command that predicts dispatches through
//! [`super::registry::Registry`].

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::report::Report;

use super::spec::WorkloadSpec;

/// A mechanism a kind combines (shown by `pcpmodel workloads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// PCP refill / drain / batch scaling / auto-tuning (the kernel's own state machine).
    PcpDynamics,
    /// Cache reuse of freed pages by the next allocation (reuse distance vs L2/LLC).
    CacheReuse,
    /// zone->lock as a finite-source queue.
    ZoneLock,
    /// memcg charge batching (page_counter lines).
    MemcgCharge,
    /// Per-CPU NUMA / vmstat counters and their folds.
    NumaCounters,
    /// High-order pages on PCP lists.
    HighOrderPcp,
    /// The LRU lock in series with zone->lock (pages put on and taken off the LRU).
    LruLock,
}

impl Mechanism {
    /// The name shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::PcpDynamics => "pcp-dynamics",
            Mechanism::CacheReuse => "cache-reuse",
            Mechanism::ZoneLock => "zone-lock",
            Mechanism::MemcgCharge => "memcg-charge",
            Mechanism::NumaCounters => "numa-counters",
            Mechanism::HighOrderPcp => "high-order-pcp",
            Mechanism::LruLock => "lru-lock",
        }
    }
}

/// The kernel's knobs and the workload's own counts as the user sets them; `None` means the
/// workload's value or the kernel's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Knobs {
    /// Kernel version (default [`KernelVersion::DEFAULT`]).
    pub kernel: Option<KernelVersion>,
    /// pcp->batch, pages (set by hand).
    pub batch: Option<u32>,
    /// pcp->high, pages (fixed: no auto-tuning).
    pub high: Option<u32>,
    /// The free_high trigger threshold, pages of free_count.
    pub free_high_threshold: Option<u32>,
    /// Whether free_high is modelled (a CPU freeing without allocating drains its list).
    pub free_high: Option<bool>,
    /// Allocation order.
    pub order: Option<u8>,
    /// Tasks (or sender/receiver pairs).
    pub tasks: Option<u32>,
    /// NUMA nodes: "one" or "all".
    pub nodes: Option<String>,
    /// CONFIG_PCP_BATCH_SCALE_MAX (only where the kernel has it).
    pub scale_max: Option<u8>,
    /// Producer/consumer placement override.
    pub placement: Option<super::spec::PlacementSpec>,
    /// Means only: skip latency distributions and their quantiles (sweeps, validation rows that
    /// compare means); the mean outputs are the same either way.
    pub means_only: bool,
    /// Kind-specific knobs by name (e.g. `memcg_charge_batch`, `cgroup_depth`, `numa_stat`,
    /// `high_order_pcp`), as numbers.
    pub extra: Vec<(String, f64)>,
}

impl Knobs {
    /// The kernel to predict for.
    pub fn kernel_or_default(&self) -> KernelVersion {
        self.kernel.unwrap_or(KernelVersion::DEFAULT)
    }

    /// A kind-specific knob.
    pub fn extra(&self, name: &str) -> Option<f64> {
        self.extra
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }

    /// Sets a kind-specific knob.
    pub fn with_extra(mut self, name: &str, v: f64) -> Self {
        self.extra.push((name.to_string(), v));
        self
    }

    /// The flags (names without `--`) of the knobs that are set, `kernel` left out (every
    /// prediction reads it, at least for its `not_modelled` list).
    pub fn set_flags(&self) -> Vec<String> {
        let mut v: Vec<String> = [
            ("batch", self.batch.is_some()),
            ("high", self.high.is_some()),
            ("free-high-threshold", self.free_high_threshold.is_some()),
            ("free-high", self.free_high.is_some()),
            ("order", self.order.is_some()),
            ("tasks", self.tasks.is_some()),
            ("nodes", self.nodes.is_some()),
            ("scale-max", self.scale_max.is_some()),
            ("placement", self.placement.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| n.to_string())
        .collect();
        for (name, _) in &self.extra {
            let flag = extra_flag(name);
            if !v.contains(&flag) {
                v.push(flag);
            }
        }
        v
    }

    /// Fails when a knob is set that `kind` does not read (it would be silently ignored).
    pub fn check_read_by(&self, kind: &dyn Kind, workload: &str) -> Result<()> {
        let read = kind.knobs();
        // A workload parameter the kind reads may be set like a knob (`--param NAME=VALUE`).
        let params: Vec<String> = kind
            .params_read()
            .unwrap_or(&[])
            .iter()
            .map(|p| extra_flag(p))
            .collect();
        let unread: Vec<String> = self
            .set_flags()
            .into_iter()
            .filter(|f| !read.contains(&f.as_str()) && !params.contains(f))
            .map(|f| format!("--{f}"))
            .collect();
        if unread.is_empty() {
            return Ok(());
        }
        Err(Error::Unsupported(format!(
            "{}: workload {workload} (kind {}) does not read it; it reads {}",
            unread.join(", "),
            kind.name(),
            read.iter()
                .map(|f| format!("--{f}"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// Checks the knobs against the kernel: `--scale-max` only where the kernel has
    /// CONFIG_PCP_BATCH_SCALE_MAX (6.7 on; 6.6 with the backport).
    pub fn check(&self) -> Result<()> {
        let k = self.kernel_or_default();
        if self.scale_max.is_some()
            && !(k.has_pcp_batch_scale_max() || k.may_have_scale_max_backport())
        {
            return Err(Error::Unsupported(format!(
                "--scale-max: kernel {k} has no CONFIG_PCP_BATCH_SCALE_MAX (added in 6.7; batch \
                 scaling is fixed or absent before)"
            )));
        }
        use crate::bounds;
        let checks = [
            (
                "--scale-max",
                self.scale_max.map(u32::from),
                bounds::PCP_BATCH_SCALE_MAX,
            ),
            ("--order", self.order.map(u32::from), bounds::ORDER),
            ("--batch", self.batch, bounds::PCP_BATCH_PAGES),
            ("--high", self.high, bounds::PCP_HIGH_PAGES),
            (
                "--free-high-threshold",
                self.free_high_threshold,
                bounds::FREE_HIGH_THRESHOLD,
            ),
            ("--tasks", self.tasks, bounds::TASKS),
        ];
        for (flag, v, range) in checks {
            if let Some(v) = v {
                range
                    .check_flag(flag, f64::from(v))
                    .map_err(Error::Unsupported)?;
            }
        }
        Ok(())
    }
}

/// Fields every workload file has (the schema requires them), by dotted name.
pub const REQUIRED_FIELDS: [&str; 9] = [
    "op.order",
    "op.alloc_pages",
    "op.free_pages",
    "op.freed_by",
    "op.touch_bytes_per_page",
    "op.work",
    "tasks.count",
    "tasks.nodes",
    "tasks.mode",
];

/// Fields a workload file may leave out, by dotted name.
pub const OPTIONAL_FIELDS: [&str; 4] = [
    "op.placement",
    "op.think_ns",
    "op.phase_pages",
    "tasks.memcgs",
];

fn optional_present(w: &WorkloadSpec, field: &str) -> bool {
    match field {
        "op.placement" => w.op.placement.is_some(),
        "op.think_ns" => w.op.think_ns.is_some(),
        "op.phase_pages" => w.op.phase_pages.is_some(),
        "tasks.memcgs" => w.tasks.memcgs.is_some(),
        _ => false,
    }
}

/// Refuses what `kind` would silently ignore in `w`: an optional field it does not read, or a
/// `params` name it does not read (the errors name the field; the registry adds file and line).
pub fn check_fields(kind: &dyn Kind, w: &WorkloadSpec) -> Result<()> {
    let label = format!("workload {}", w.name);
    if let Some(read) = kind.fields_read() {
        for f in OPTIONAL_FIELDS {
            if optional_present(w, f) && !read.contains(&f) {
                return Err(Error::invalid(
                    &label,
                    f,
                    format!(
                        "kind {} does not read it (a prediction would ignore it): remove it, or use a kind that models it",
                        kind.name()
                    ),
                ));
            }
        }
    }
    for (name, range) in kind.param_ranges() {
        if let Some(m) = w.params.get(*name).and_then(|q| range.problem(q.value)) {
            return Err(Error::invalid(&label, format!("params.{name}"), m));
        }
    }
    if let Some(read) = kind.params_read() {
        if let Some(name) = w.params.keys().find(|n| !read.contains(&n.as_str())) {
            return Err(Error::invalid(
                &label,
                format!("params.{name}"),
                format!(
                    "kind {} does not read it; its parameters are {}",
                    kind.name(),
                    if read.is_empty() {
                        "none".to_string()
                    } else {
                        read.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// The required fields of a workload file that `kind`'s prediction does not read (they
/// document the workload; changing them changes no number), for `workload show` and the
/// prediction's notes.
pub fn unread_fields(kind: &dyn Kind) -> Vec<&'static str> {
    kind.fields_read().map_or_else(Vec::new, |read| {
        REQUIRED_FIELDS
            .iter()
            .copied()
            .filter(|f| !read.contains(f))
            .collect()
    })
}

/// The flag (without `--`) of a kind-specific knob: `memcg_charge_batch` is `charge-batch`, the
/// others their name with `-` for `_`.
pub fn extra_flag(name: &str) -> String {
    match name {
        "memcg_charge_batch" => "charge-batch".to_string(),
        n => n.replace('_', "-"),
    }
}

/// Mean, median and 99th percentile of a time, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Stat {
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median, ns (NaN when the model gives only a mean).
    pub p50_ns: f64,
    /// 99th percentile, ns (NaN when the model gives only a mean).
    pub p99_ns: f64,
}

/// zone->lock as one side (allocation refills or free drains) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct LockSide {
    /// Acquisitions per second on this zone.
    pub acquisitions_per_s: f64,
    /// Pages moved per acquisition (a batch).
    pub pages_per_acquisition: f64,
    /// Wait for the lock per acquisition.
    pub wait: Stat,
    /// Hold per acquisition.
    pub hold: Stat,
    /// Mean wait per page moved, ns (wait / pages per acquisition).
    pub wait_ns_per_page: f64,
}

/// One zone's lock and lists.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ZoneOutput {
    /// NUMA node of the zone.
    pub node: u32,
    /// Zone name (Normal).
    pub zone: String,
    /// Tasks allocating from it.
    pub tasks: u32,
    /// The allocation side (rmqueue_bulk refills, or direct buddy allocations).
    pub alloc: LockSide,
    /// The free side (free_pcppages_bulk drains, or direct buddy frees).
    pub free: LockSide,
    /// Fraction of time the lock is held.
    pub utilisation: f64,
    /// Fraction of the tasks' cycles spent waiting for or holding the lock.
    pub lock_cycle_share: f64,
    /// Pages per second allocated from the zone bypassing the PCP lists.
    pub alloc_bypass_pages_per_s: f64,
    /// free_high drains per second.
    pub free_high_drains_per_s: f64,
    /// Pages held on the PCP lists of the zone's tasks' CPUs (mean).
    pub pcp_pages_held: f64,
}

/// What a kind predicts, for every command: headline numbers with units, per-zone lock outputs
/// where the kind models zone->lock, and the full report (tables and notes) for people.
#[derive(Debug, Clone, Serialize)]
pub struct Predicted {
    /// What one operation is.
    pub op: String,
    /// Time per operation of one task, ns.
    pub ns_per_op: f64,
    /// Operations per second of one task.
    pub throughput_per_task: f64,
    /// Operations per second of all tasks.
    pub throughput_total: f64,
    /// Tasks.
    pub tasks: u32,
    /// Per zone (empty when the kind has no zone->lock mechanism).
    pub zones: Vec<ZoneOutput>,
    /// Other named outputs, each with its unit in the name (e.g. `score`, `cycles_per_page`,
    /// `throughput_mbps`): what `fit` and `validate` can compare with a CSV column.
    pub outputs: Vec<(String, f64)>,
    /// The report for people (and the JSON details).
    #[serde(skip)]
    pub report: Report,
}

impl Predicted {
    /// A named output: `ns_per_op`, `throughput_per_task`, `throughput_total`, or one of
    /// [`Predicted::outputs`].
    pub fn output(&self, name: &str) -> Option<f64> {
        match name {
            "ns_per_op" => Some(self.ns_per_op),
            "throughput_per_task" => Some(self.throughput_per_task),
            "throughput_total" => Some(self.throughput_total),
            _ => self
                .outputs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| *v),
        }
    }

    /// Names of every output [`Predicted::output`] answers.
    pub fn output_names(&self) -> Vec<String> {
        let mut v: Vec<String> = ["ns_per_op", "throughput_per_task", "throughput_total"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(self.outputs.iter().map(|(k, _)| k.clone()));
        v
    }
}

/// What `optimal-high` sweeps: a workload's page flow and cache hierarchy on one machine with its
/// workload parameters, and how to rebuild the same flow on a machine whose latencies were
/// perturbed (for the interval).
pub struct ReuseModel {
    /// The flow's model on the machine.
    pub model: crate::model::netperf::NetperfModel,
    /// Workload parameters (fitted, carried over or given) with their uncertainty.
    pub params: crate::fit::calibrate::WorkloadParams,
    /// Kernel.
    pub kernel: KernelVersion,
    /// Where producer and consumer run.
    pub placement: crate::model::cache::Placement,
    /// The pcp->high the kernel runs the flow at on this machine when no `--high` sets it,
    /// pages (the fixed high, or the live high of auto-tuning).
    pub kernel_high: u32,
    rebuild: RebuildFn,
}

type RebuildFn = Box<dyn Fn(&Machine) -> Result<crate::model::netperf::NetperfModel> + Send + Sync>;

impl ReuseModel {
    /// A reuse model; `rebuild` builds the same flow's model on another machine.
    pub fn new(
        model: crate::model::netperf::NetperfModel,
        params: crate::fit::calibrate::WorkloadParams,
        kernel: KernelVersion,
        placement: crate::model::cache::Placement,
        kernel_high: u32,
        rebuild: impl Fn(&Machine) -> Result<crate::model::netperf::NetperfModel>
            + Send
            + Sync
            + 'static,
    ) -> ReuseModel {
        ReuseModel {
            model,
            params,
            kernel,
            placement,
            kernel_high,
            rebuild: Box::new(rebuild),
        }
    }

    /// The same flow on `machine` (e.g. with perturbed latencies).
    pub fn on(&self, machine: &Machine) -> Result<crate::model::netperf::NetperfModel> {
        let mut m = (self.rebuild)(machine)?;
        m.run = self.model.run;
        Ok(m)
    }
}

/// An evaluator: combines mechanisms for the workloads that name it.
pub trait Kind: Send + Sync {
    /// Name used in workload files (`kind = "..."`).
    fn name(&self) -> &'static str;
    /// One line for people.
    fn description(&self) -> &'static str;
    /// The mechanisms it combines.
    fn mechanisms(&self) -> &'static [Mechanism];
    /// Knobs it reads (flag names without `--`).
    fn knobs(&self) -> &'static [&'static str];
    /// The fields of [`REQUIRED_FIELDS`] and [`OPTIONAL_FIELDS`] its prediction reads (None:
    /// not declared, nothing checked). An optional field set in a file but not read is refused;
    /// a required one not read is reported as such ([`unread_fields`]).
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// The `params` names it reads (None: not declared); any other name in a file is refused.
    fn params_read(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// The valid range of each of its `params` that has one, checked when the file is loaded
    /// (so `workload show` refuses what `predict` would).
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[]
    }
    /// The kernel it evaluates when `--kernel` is not given: [`KernelVersion::DEFAULT`] unless
    /// the kind says otherwise (what [`super::not_modelled`] compares with the reference).
    fn default_kernel(&self, _w: &WorkloadSpec) -> Result<crate::kernel::version::KernelVersion> {
        Ok(crate::kernel::version::KernelVersion::DEFAULT)
    }
    /// Checks a workload's kind-specific inputs (its `params`).
    fn check(&self, _w: &WorkloadSpec) -> Result<()> {
        Ok(())
    }
    /// Predicts the workload on a machine with the knobs.
    fn predict(&self, w: &WorkloadSpec, m: &Machine, k: &Knobs) -> Result<Predicted>;
    /// Whether freed pages are reused by later allocations through a cache (then `optimal-high`
    /// applies).
    fn has_reuse_path(&self) -> bool {
        self.mechanisms().contains(&Mechanism::CacheReuse)
    }
    /// The model `optimal-high` sweeps for `w` on `m` with `k` (kinds with a reuse path; the
    /// default refuses).
    fn reuse_model(&self, w: &WorkloadSpec, _m: &Machine, _k: &Knobs) -> Result<ReuseModel> {
        Err(Error::Unsupported(format!(
            "workload {} (kind {}) has no reuse path to sweep pcp->high over",
            w.name,
            self.name()
        )))
    }
    /// Whether the kind models zone->lock.
    fn has_zone_lock(&self) -> bool {
        self.mechanisms().contains(&Mechanism::ZoneLock)
    }
    /// Whether the kind's zone->lock is the PCP refill loop that `latency`, `scale-max` and
    /// `plot latency` solve (rmqueue_bulk() holds of a batch, [`crate::workload::kinds::alloc_loop::lock_case`]).
    /// A kind that models zone->lock in a model of its own says where to read it instead.
    fn refill_loop(&self) -> std::result::Result<(), String> {
        if self.has_zone_lock() {
            Ok(())
        } else {
            Err(format!(
                "its kind '{}' does not model zone->lock (latency, scale-max and plot latency need a kind with the zone-lock mechanism, e.g. alloc-loop)",
                self.name()
            ))
        }
    }
    /// The kind's own fit model for its thread's measurement CSV, if it has one (`fit`
    /// otherwise uses the generic workload fit over knob columns).
    fn native_fit(&self, _w: &WorkloadSpec, _m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        Ok(None)
    }
    /// The valid range of each column of the native fit's CSV.
    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[]
    }
    /// The native fit's physical parameters, held at their documented defaults unless freed
    /// (`fit --free NAME`).
    fn native_default_fixed(&self) -> &'static [&'static str] {
        &[]
    }
}
