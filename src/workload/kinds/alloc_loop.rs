//! Kind `alloc-loop`: `N` tasks, one per CPU, each allocating blocks of `op.order` and freeing
//! them itself (in phases of `op.phase_pages`, or interleaved when absent), or not at all during
//! the measured interval (`freed_by = "later"`), with `op.work` outside the allocator. Every
//! allocation goes through the PCP lists of its node's Normal zone (or straight to the buddy
//! allocator for orders the kernel does not keep there), and refills and drains take zone->lock.
//!
//! The evaluator is [`crate::model::zonelock`]'s: pages per hold from the kernel's own PCP state
//! machine for the version ([`crate::model::zonelock::generic`]), hold times
//! `H = fixed_ns + n · (cpu_ns_per_page + lines_per_page · x)`, and the finite-source lock queue.
//! Thread 000's workload (`mmap-fill`) is this kind with `phase_pages` = its two 6 GiB buffers.
//!
//! # Where the lock's parameters come from (the rule)
//! - **A workload whose work is fitted to the lock histograms** (`op.work` with
//!   `basis = "fitted"` and `table = "000_funclatency"`, [`lock_fitted`]): all three of
//!   `fixed_ns`, `lines_per_page`, `work_ns_per_page` from
//!   [`crate::fit::lock_calibration::calibrate`]: fitted to the machine's histograms when the
//!   table has some, else carried over (geometric means of the measured machines, `fixed_ns`
//!   derived for the machine). The hold is then the fitted one, think time is counted per block
//!   moved ([`ThinkRule::BlocksMoved`], as the fit counted it) and no LRU work is added (the
//!   fitted work holds it).
//! - **Any other workload**: nothing is fitted to the workload's own data. `lines_per_page` and
//!   `fixed_ns` come from thread 000's fit (another table) of, in this order: the machine itself
//!   when it has thread-000 data; a thread-000 machine of the same `cpu.microarchitecture`
//!   (Cascade Lake-SP: `xeon-8260`'s fit serves `xeon-gold-6252-2s`); else the carried-over
//!   values of `calibrate`. `fixed_ns` drops thread 000's funclatency probe
//!   ([`PROBE_NS`], assumed) and adds the workload's own `params.probe_ns` (0 when nothing
//!   traces the calls). The work outside the lock is the workload's `op.work` per allocation
//!   (`ns`, or `cycles` at `params.clock_ghz` when the benchmark fixed the clock, else at the
//!   machine's base clock); with `params.clock_ghz` the per-page CPU work under the lock
//!   ([`crate::model::zonelock::CPU_CYCLES_PER_PAGE`]) is counted at that clock too.
//!
//! # Knobs
//! `--tasks`, `--nodes`, `--kernel` (default: the workload's `reference_kernel`), `--scale-max`
//! (CONFIG_PCP_BATCH_SCALE_MAX, kernels >= 6.7, or 6.6 with the backport), `--batch`, `--high`
//! (fixed), `--order`.
//!
//! # Outputs
//! Per zone ([`ZoneOutput`]): refill and drain sides (acquisitions/s, pages per acquisition,
//! wait mean/p50/p99 (quantiles from the queue's wait distribution; NaN with `means_only`),
//! hold mean/p50/p99, wait per page), lock utilisation, the lock's share of the tasks' time, pages/s
//! bypassing the PCP lists, free_high drains/s, pages held on PCP lists. `ns_per_op` is the time
//! of one allocation of one task. The terms per allocation (`work_ns_per_alloc`,
//! `hold_pages_ns_per_alloc`, `handover_ns_per_alloc`, `wait_ns_per_alloc`,
//! `check_after_lock_ns_per_alloc` (6.3's `check_new_pages()` outside the lock, 0 elsewhere),
//! refill and drain sides together) are named outputs too, with `calls_per_s` (`rmqueue_bulk()`
//! calls), `pages_per_s` (pages allocated, [`pages_allocated_per_s`]), `refill_pages_per_s`
//! (pages the refills move), `lock_utilisation` and `refill_latency_mean_ns`, `_p50_ns`,
//! `_p99_ns`: these three are NaN (JSON null) with a reason in the report's `null_reasons`
//! when the loop takes no refill ([`no_refill_reason`]) or with `means_only` (quantiles).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::zonelock::generic;
use crate::model::zonelock::{
    with_code_hold, Freeing, LoopShape, PcpOverride, Prediction, ThinkRule, ZoneLockHistFit,
    ZoneLockModel, ZoneLockParams, ZonePrediction, CPU_CYCLES_PER_PAGE, PROBE_NS,
};
use crate::report::{sig, Report, Table};
use crate::workload::kind::{Kind, Knobs, LockSide, Mechanism, Predicted, Stat, ZoneOutput};
use crate::workload::spec::{FreedBy, WorkloadSpec};
use crate::workload::NodeSpan;

/// Kind `alloc-loop`.
pub struct AllocLoop;

/// Everything a zone->lock prediction of one workload needs: the model, its parameters and
/// where they come from, and the loop.
#[derive(Debug, Clone)]
pub struct LockCase {
    /// Workload name.
    pub workload: String,
    /// The model (machine, kernel).
    pub model: ZoneLockModel,
    /// `fixed_ns`, `lines_per_page`, and the work per allocation in `work_ns_per_page`.
    pub params: ZoneLockParams,
    /// Where the parameters come from, in words.
    pub params_source: String,
    /// Tasks.
    pub tasks: u32,
    /// Nodes.
    pub nodes: NodeSpan,
    /// The loop.
    pub shape: LoopShape,
    /// Share of the work after allocations.
    pub share: f64,
    /// Refills find cold lines (pages never freed in the interval).
    pub cold: bool,
    /// CONFIG_PCP_BATCH_SCALE_MAX given (None: the kernel's default).
    pub scale_max: Option<u8>,
    /// batch / high by hand.
    pub over: PcpOverride,
    /// How the work is divided over the holds (thread 000's rule for its own workload).
    pub rule: ThinkRule,
    /// Pages per allocation that go on the LRU and off it again (`params.lru_pages`): the LRU
    /// lock is queued in series with zone->lock ([`crate::model::lrulock`]); 0 for none and for
    /// thread 000's fitted model.
    pub lru_pages: f64,
}

impl LockCase {
    /// Batch dynamics of every zone used.
    pub fn dynamics(&self) -> Result<Vec<(u32, u32, crate::model::zonelock::BatchDynamics)>> {
        self.model.loop_dynamics(
            self.tasks,
            self.nodes,
            &self.shape,
            self.scale_max,
            self.over,
        )
    }

    /// Solves the case (with the refill latency distribution when `distribution`). On a
    /// ticket spinlock ([`crate::model::hold::SpinlockKind`]) every hold also carries the
    /// hand-off growth with the waiters ([`crate::model::hold::ticket_handoff`]), solved to a
    /// fixed point: the waiters at a hand-off are the busiest zone's mean number waiting while
    /// its lock is busy (`Lq / U`, Little's law over both classes). The map from the extra
    /// hand-off to the next is increasing and bounded (at most all other tasks wait), so the
    /// iteration from 0 rises to its least fixed point.
    pub fn predict(&self, distribution: bool) -> Result<Prediction> {
        use crate::model::hold::{ticket_handoff, SpinlockKind};
        let d = self.dynamics()?;
        let solve = |m: &ZoneLockModel, dist: bool| self.solve_zones(m, &d, dist);
        if SpinlockKind::of(&self.model.machine.cpu.vendor, self.model.kernel)
            == SpinlockKind::Queued
        {
            return solve(&self.model, distribution);
        }
        let transfer = d
            .iter()
            .map(|(_, procs, _)| self.model.handover_c2c_ns(*procs))
            .fold(0.0, f64::max);
        let mut m = self.model.clone();
        for _ in 0..TICKET_ITERATIONS {
            let p = solve(&m, false)?;
            let waiters = p
                .zones
                .iter()
                .map(|z| {
                    let lq =
                        (z.refill_per_s * z.refill_wait_ns + z.free_per_s * z.free_wait_ns) * 1e-9;
                    if z.lock_utilisation > 0.0 {
                        lq / z.lock_utilisation
                    } else {
                        0.0
                    }
                })
                .fold(0.0, f64::max);
            let next = ticket_handoff(waiters, transfer);
            let done = (next - m.handoff_extra_ns).abs() <= 1e-6 * next.max(1.0);
            m.handoff_extra_ns = next;
            if done {
                return solve(&m, distribution);
            }
        }
        Err(Error::Unsupported(format!(
            "zone->lock as a ticket spinlock on {} kernel {}: the hand-off's growth with the waiters did not settle in {TICKET_ITERATIONS} iterations",
            self.model.machine.name, self.model.kernel
        )))
    }

    /// Solves every zone: zone->lock alone, or, with [`Self::lru_pages`], zone->lock and the
    /// LRU lock in series, each lock's queue thinking for the task's time outside it (the work
    /// and the other lock's hold and wait), iterated per zone to a fixed point.
    fn solve_zones(
        &self,
        m: &ZoneLockModel,
        d: &[(u32, u32, crate::model::zonelock::BatchDynamics)],
        dist: bool,
    ) -> Result<Prediction> {
        use crate::model::lrulock::{self, LruHolds};
        let code = match &m.code_hold {
            Some(c) if self.lru_pages > 0.0 => c,
            _ => return m.predict_loop(&self.params, d, self.share, self.cold, self.rule, dist),
        };
        let mut zones = Vec::new();
        for z in d {
            let one = std::slice::from_ref(z);
            let procs = z.1;
            let mix = generic::mean_line_ns(&generic::refill_sources(&m.machine, procs, false));
            let holds = LruHolds::new(
                code,
                m.kernel,
                crate::model::hold::p_other(procs),
                m.handover_c2c_ns(procs),
                m.own_line_ns,
                mix,
            );
            let with_lru = |lru_ns: f64, dist: bool| {
                let mut p = self.params;
                p.work_ns_per_page += lru_ns;
                m.predict_loop(&p, one, self.share, self.cold, self.rule, dist)
            };
            let mut lru_ns = 0.0;
            let mut outcome = None;
            for _ in 0..LRU_ITERATIONS {
                let pr = with_lru(lru_ns, false)?;
                let zp = &pr.zones[0];
                let allocs = zp.dynamics.shape.allocs_per_iteration().max(1) as f64;
                // The refill's time outside the LRU lock: its hold, wait and, on 6.3, the
                // blocks' check_new_pages() after zone->lock.
                let zone_ns = (zp.dynamics.refills() as f64
                    * (zp.refill_hold_ns
                        + zp.refill_wait_ns
                        + m.refill_check_after_lock_ns(&zp.dynamics))
                    + zp.dynamics.drains() as f64 * (zp.free_hold_ns + zp.free_wait_ns))
                    / allocs;
                let out = lrulock::solve(
                    &holds,
                    procs,
                    (self.params.work_ns_per_page + zone_ns) / self.lru_pages,
                    self.share,
                )?;
                let next = self.lru_pages * out.response_ns_per_page();
                let done = (next - lru_ns).abs() <= 1e-6 * next.max(1.0);
                lru_ns = 0.5 * (lru_ns + next);
                outcome = Some(out);
                if done {
                    break;
                }
            }
            let mut pr = with_lru(lru_ns, dist)?;
            let mut zp = pr.zones.remove(0);
            zp.lru = outcome;
            zones.push(zp);
        }
        Ok(Prediction::from_zones(zones, m.handoff_extra_ns))
    }

    /// The same case with another CONFIG_PCP_BATCH_SCALE_MAX.
    pub fn with_scale_max(&self, s: u8) -> LockCase {
        LockCase {
            scale_max: Some(s),
            ..self.clone()
        }
    }

    /// CONFIG_PCP_BATCH_SCALE_MAX in effect (None: the kernel has none).
    pub fn scale_max_in_effect(&self) -> Option<u8> {
        use crate::kernel::ops::DEFAULT_PCP_BATCH_SCALE_MAX;
        self.scale_max.or(self
            .model
            .kernel
            .has_pcp_batch_scale_max()
            .then_some(DEFAULT_PCP_BATCH_SCALE_MAX))
    }
}

/// Iterations of the two locks' fixed point (damped by half; it settles in a few dozen).
const LRU_ITERATIONS: usize = 200;

/// Iterations allowed for a ticket lock's hand-off fixed point (it rises monotonically; a few
/// dozen suffice away from the collapse point).
const TICKET_ITERATIONS: usize = 500;

/// Thread-000 machine whose fit serves `machine` (see the module docs' rule), with the reason.
fn reference_machine(machine: &Machine, t000: &[String]) -> Result<Option<(Machine, String)>> {
    if t000.contains(&machine.name) {
        return Ok(Some((
            machine.clone(),
            format!("thread 000's fit of {}", machine.name),
        )));
    }
    let ua = &machine.cpu.microarchitecture.value;
    for n in t000 {
        let m = Machine::builtin(n)?;
        if &m.cpu.microarchitecture.value == ua {
            return Ok(Some((
                m,
                format!("thread 000's fit of {n} (same microarchitecture, {ua})"),
            )));
        }
    }
    Ok(None)
}

/// Whether the workload's lock parameters and work are fitted together to the lock histograms
/// (`op.work.table` names [`crate::fit::lock_calibration::TABLE`]; the module docs' rule).
pub fn lock_fitted(w: &WorkloadSpec) -> bool {
    w.op.work.fitted_table() == Some(crate::fit::lock_calibration::TABLE)
}

/// The lock parameters of a workload on a machine by the module docs' rule; `work_ns` is the
/// work per allocation (ignored when the work is fitted with the lock, [`lock_fitted`]).
pub fn lock_params(
    w: &WorkloadSpec,
    machine: &Machine,
    work_ns: f64,
) -> Result<(ZoneLockParams, String)> {
    use crate::fit::lock_calibration::calibrate;
    if lock_fitted(w) {
        let c = calibrate(machine)?;
        return Ok((c.params, c.source));
    }
    let mut t000: Vec<String> = crate::data::histograms_000()?
        .into_iter()
        .map(|h| h.machine)
        .collect();
    t000.dedup();
    let (c, from) = match reference_machine(machine, &t000)? {
        Some((m, why)) => (calibrate(&m)?, why),
        None => {
            let c = calibrate(machine)?;
            let s = c.source.clone();
            (c, s)
        }
    };
    let probe = w.param_or("probe_ns", 0.0);
    let fixed = (c.params.fixed_ns + (probe - PROBE_NS)).max(0.0);
    Ok((
        ZoneLockParams {
            fixed_ns: fixed,
            lines_per_page: c.params.lines_per_page,
            work_ns_per_page: work_ns,
        },
        format!(
            "lines_per_page {} and fixed_ns from {from}; fixed_ns {} ns = {} ns fitted - {PROBE_NS} ns funclatency probe (assumed) + {probe} ns probe of this workload; work {} ns per allocation from the workload (op.work), not fitted",
            sig(c.params.lines_per_page, 3),
            sig(fixed, 4),
            sig(c.params.fixed_ns, 4),
            sig(work_ns, 4),
        ),
    ))
}

/// The work per allocation that `op.work.kernel` moves to `kernel`: the fast-path steps between
/// the two ([`crate::model::fastpath`]), on the allocation and, when the loop frees its pages in
/// the measured interval, on each free. ns per allocation at `clock` GHz, and a note saying so.
fn fast_path_shift(
    w: &WorkloadSpec,
    kernel: KernelVersion,
    freeing: Freeing,
    clock: f64,
) -> Result<(f64, Option<String>)> {
    let Some(text) = &w.op.work.kernel else {
        return Ok((0.0, None));
    };
    let from = KernelVersion::parse_labeled(text, &format!("workload {}: op.work.kernel", w.name))?;
    let (alloc, free, steps) = crate::model::fastpath::delta_cycles(from, kernel);
    let frees = if freeing == Freeing::Never {
        0.0
    } else {
        w.op.free_pages.value / w.op.alloc_pages.value.max(1.0)
    };
    let cycles = alloc + free * frees;
    let what: Vec<&str> = steps.iter().map(|s| s.what).collect();
    let note = format!(
        "work measured on {from}, run on {kernel}: {} cycles per allocation from the fast path's changes in between ({}; crate::model::fastpath)",
        sig(cycles, 3),
        if what.is_empty() { "none counted".to_string() } else { what.join("; ") }
    );
    Ok((cycles / clock, Some(note)))
}

/// Valid ranges of the kind's `params` (checked when the file is read, with its line).
const PARAM_RANGES: [(&str, crate::bounds::Range); 9] = [
    (
        "probe_ns",
        crate::bounds::Range::real(
            "ns per probed call",
            0.0,
            1e6,
            "ns",
            "a tracing probe costs ns to a few us; 1 ms per call is no probe",
        ),
    ),
    (
        "alloc_work_share",
        crate::bounds::Range::real(
            "a share of the work",
            0.01,
            1.0,
            "",
            "the share of the work after allocations, the rest after frees; below 1 % the refills would follow each other with no work between them, which the lock's queue cannot hold",
        ),
    ),
    ("clock_ghz", crate::bounds::CLOCK_GHZ),
    (
        "lru_pages",
        crate::bounds::Range::real("LRU pages per allocation", 0.0, 1.0, "", "a share of the pages"),
    ),
    (
        "exit_pgd_order",
        crate::bounds::Range::int("a page order", 0.0, 10.0, "", "orders are 0..=10 (MAX_PAGE_ORDER)"),
    ),
    (
        "life_free_share",
        crate::bounds::Range::real(
            "a share of a life's allocations",
            0.0,
            0.99,
            "",
            "the pages a task frees while it runs, over those it allocates in one phase (op.phase_pages); the rest are freed at its end; 1 would leave nothing for the end",
        ),
    ),
    (
        "alloc_run_pages",
        crate::bounds::Range::int(
            "pages",
            1.0,
            1_099_511_627_776.0,
            "pages",
            "allocations between two of a life's free runs; at least one page",
        ),
    ),
    (
        "life_free_run_pages",
        crate::bounds::Range::int(
            "pages",
            1.0,
            1_099_511_627_776.0,
            "pages",
            "a life's frees come in runs of whole multiples of this; at least one page",
        ),
    ),
    (
        "vmstat_interval_ms",
        crate::bounds::Range::real(
            "ms",
            1.0,
            3.6e6,
            "ms",
            "vm.stat_interval is seconds (1 by default); 1 ms to an hour",
        ),
    ),
];

/// A task that frees in phases of `pages`: `Freeing::Phases`, or `Freeing::Lives` when the
/// file says it frees part of them while it runs (`params.life_free_share` > 0; allocations in
/// runs of `params.alloc_run_pages`, default the whole phase; frees in runs of whole multiples
/// of `params.life_free_run_pages`, default 1: whatever is owed after each allocation run).
pub fn life_or_phases(w: &WorkloadSpec, pages: u64) -> Result<Freeing> {
    let share = w.param_or("life_free_share", 0.0);
    if share <= 0.0 {
        return Ok(Freeing::Phases(pages));
    }
    let run = w.param_or("alloc_run_pages", pages as f64).round().max(1.0) as u64;
    let free_run = w.param_or("life_free_run_pages", 1.0).round().max(1.0) as u64;
    let life = crate::model::zonelock::generic::Life {
        pages,
        life_free_pages: (share * pages as f64).round() as u64,
        alloc_run_pages: run.min(pages),
        free_run_pages: free_run.min(pages),
    };
    life.runs().map_err(|e| match e {
        Error::Invalid { message, .. } => Error::invalid(
            format!("workload {}", w.name),
            "params.alloc_run_pages",
            message,
        ),
        other => other,
    })?;
    Ok(Freeing::Lives(life))
}

/// Builds the zone->lock case of workload `w` on `machine` with `k`'s knobs.
pub fn lock_case(w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<LockCase> {
    let kernel: KernelVersion = match k.kernel {
        Some(v) => v,
        None => AllocLoop.default_kernel(w)?,
    };
    if let Some(s) = k.scale_max {
        if !(kernel.has_pcp_batch_scale_max() || kernel.may_have_scale_max_backport()) {
            return Err(Error::Unsupported(format!(
                "--scale-max {s}: kernel {kernel} has no CONFIG_PCP_BATCH_SCALE_MAX (added in 6.7; batch scaling is fixed or absent before)"
            )));
        }
    }
    let nodes = match &k.nodes {
        Some(n) => NodeSpan::parse(n, "--nodes")?,
        None => w.nodes()?,
    };
    // The file's task count is capped to the CPUs of the nodes used (one task per CPU), as the
    // other kinds do, with a note; a --tasks beyond them stays an error.
    let cpus = nodes.nodes_on(machine) * machine.cpus_per_node();
    let (tasks, capped) = super::tasks_capped(w, k, cpus, &machine.name);
    let order = super::order(w, k);
    let freeing = match w.op.freed_by.value {
        FreedBy::Same => match &w.op.phase_pages {
            Some(q) if q.value >= 1.0 => life_or_phases(w, q.value.round() as u64)?,
            _ => Freeing::Interleaved,
        },
        FreedBy::Later => Freeing::Never,
        other => {
            return Err(Error::Unsupported(format!(
                "workload {} (kind {}): the zone->lock loop models pages freed by the allocating task or not at all; freed_by = {other:?} is another kind's",
                w.name, w.kind
            )))
        }
    };
    let mut model = ZoneLockModel::new(machine, kernel)?;
    let clock = w.param_or("clock_ghz", machine.clock.base_ghz.value);
    if !(clock.is_finite() && clock > 0.0) {
        return Err(Error::invalid(
            format!("workload {}", w.name),
            "params.clock_ghz",
            "must be > 0",
        ));
    }
    if w.params.contains_key("clock_ghz") {
        model.cpu_ns_per_page =
            crate::assumptions::value("zonelock::CPU_CYCLES_PER_PAGE", CPU_CYCLES_PER_PAGE) / clock;
    }
    let per_op = w.op.work.ns_at(clock);
    let allocs = w.op.alloc_pages.value.max(1.0);
    let (fast_ns, fast_note) = fast_path_shift(w, kernel, freeing, clock)?;
    let work = per_op / allocs + fast_ns;
    if !lock_fitted(w) && (work.is_nan() || work <= 0.0) {
        return Err(Error::invalid(
            format!("workload {}", w.name),
            "op.work",
            format!(
                "{} ns per allocation{} leaves {} ns: kind alloc-loop needs work > 0 outside the allocator (the tasks' think time){}",
                sig(per_op / allocs, 3),
                if fast_ns != 0.0 {
                    format!(
                        " {} {} ns of fast-path changes between op.work.kernel and kernel {kernel}",
                        if fast_ns < 0.0 { "less" } else { "plus" },
                        sig(fast_ns.abs(), 3)
                    )
                } else {
                    String::new()
                },
                sig(work, 3),
                if fast_ns < 0.0 {
                    " (the fast path lost more cycles than the file's work: give the work as measured on a kernel nearer this one)"
                } else {
                    ""
                }
            ),
        ));
    }
    if freeing != Freeing::Never && freeing != Freeing::Interleaved {
        // Each task frees, in allocation order, the pages its own refills gave it (the
        // kind's phases): sequential blocks (crate::model::hold::BlockPattern).
        model.block_pattern = crate::model::hold::BlockPattern::Sequential;
    }
    let (params, mut params_source) = lock_params(w, machine, work)?;
    if !lock_fitted(w) {
        // Any other workload: the refill's hold is composed from the code at the machine's
        // latencies (crate::model::hold), at the clock the CPU work under the lock runs at.
        let hold = with_code_hold(&mut model);
        params_source = format!(
            "refill hold composed from the code (call {} cycles, {} cycles per block, check_new_pages() {} at {} cycles per struct page, streamed struct-page lines {} ns, hand-over {} zone lines + {} stream restarts; crate::model::hold), drains per block freed (own line + {} other struct-page lines, {:?} blocks) with the call and zone-line hand-over; {params_source} (fixed_ns is not used)",
            hold.call_cycles,
            hold.block_cycles,
            hold.check.describe(),
            hold.check_cycles,
            sig(hold.l2_ns.max(hold.stream_line_ns), 3),
            hold.handover_lines,
            hold.train_misses,
            hold.free_remote_lines,
            model.block_pattern,
        );
    }
    if let Some(c) = capped {
        params_source = format!("{c}; {params_source}");
    }
    if let Some(n) = fast_note {
        params_source = format!("{params_source}; {n}");
    }
    if let Some(l) = freeing.life() {
        params_source = format!(
            "{params_source}; each task's life: {} allocations in runs of {}, {} pages freed while it runs in runs of whole multiples of {}, {} at its end (params.life_free_share, alloc_run_pages, life_free_run_pages; crate::model::zonelock::generic::Life)",
            l.pages,
            l.alloc_run_pages,
            l.life_free_pages,
            l.free_run_pages,
            l.exit_pages()
        );
    }
    let lru_pages = if lock_fitted(w) {
        0.0
    } else {
        match w.param("lru_pages").ok() {
            Some(_) => super::param(
                w,
                k,
                "lru_pages",
                crate::bounds::Range::real("pages per allocation", 0.0, 1.0, "", "a share"),
            )?,
            None => 0.0,
        }
    };
    let share = w.param_or(
        "alloc_work_share",
        if freeing == Freeing::Never { 1.0 } else { 0.5 },
    );
    Ok(LockCase {
        workload: w.name.clone(),
        model,
        params,
        params_source,
        tasks,
        nodes,
        shape: LoopShape { order, freeing },
        share,
        cold: freeing == Freeing::Never,
        scale_max: k.scale_max,
        over: PcpOverride {
            batch: k.batch,
            high: k.high,
        },
        rule: if lock_fitted(w) {
            ThinkRule::BlocksMoved
        } else {
            ThinkRule::PerIteration
        },
        lru_pages,
    })
}

/// The terms of one allocation of one task, ns (refill and drain sides together).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Terms {
    /// Work outside the allocator.
    pub work_ns: f64,
    /// Lock holds, the per-page part.
    pub hold_pages_ns: f64,
    /// Lock holds, the fixed part (hand-over, per-call work, probes).
    pub handover_ns: f64,
    /// Waiting for the lock.
    pub wait_ns: f64,
    /// `check_new_pages()` paid by the allocating CPU outside zone->lock (6.3 only: before, it
    /// is in the hold; from 6.4 it is off by default; crate::model::hold::RefillCheck).
    pub check_after_lock_ns: f64,
    /// The LRU lock's hold (0 without it).
    pub lru_hold_ns: f64,
    /// Waiting for the LRU lock.
    pub lru_wait_ns: f64,
    /// Time of one allocation of one task (the loop's cycle over its allocations).
    pub ns_per_alloc: f64,
}

/// The terms of zone `z`'s tasks per allocation.
pub fn terms(case: &LockCase, z: &ZonePrediction) -> Terms {
    let d = &z.dynamics;
    let allocs = d.shape.allocs_per_iteration() as f64;
    let per_alloc = |holds: u64| holds as f64 / allocs;
    let (r, f) = (per_alloc(d.refills()), per_alloc(d.drains()));
    let handover = r * case
        .model
        .refill_fixed_ns(&case.params, z.procs, &z.line_sources)
        + f * case
            .model
            .drain_fixed_ns(&case.params, z.procs, &z.line_sources);
    let hold = r * z.refill_hold_ns + f * z.free_hold_ns;
    let wait = r * z.refill_wait_ns + f * z.free_wait_ns;
    let check_after = r * case.model.refill_check_after_lock_ns(d);
    let work = case.params.work_ns_per_page;
    let lru_hold = z.lru.map_or(0.0, |l| case.lru_pages * l.hold_ns_per_page);
    let lru_wait = z.lru.map_or(0.0, |l| case.lru_pages * l.wait_ns_per_page);
    // The loop's cycle from the queue's throughput (per task), over its allocations.
    let procs = f64::from(z.procs.max(1));
    let ns = if z.refill_per_s > 0.0 && d.refills() > 0 {
        1e9 / (z.refill_per_s / procs / r)
    } else if z.free_per_s > 0.0 && d.drains() > 0 {
        1e9 / (z.free_per_s / procs / f)
    } else {
        // No zone->lock traffic (so no refill to check): the loop is its work and the LRU
        // lock's hold and wait.
        work + lru_hold + lru_wait
    };
    Terms {
        work_ns: work,
        hold_pages_ns: (hold - handover).max(0.0),
        handover_ns: handover,
        wait_ns: wait,
        check_after_lock_ns: check_after,
        lru_hold_ns: lru_hold,
        lru_wait_ns: lru_wait,
        ns_per_alloc: ns,
    }
}

fn hold_stat(z: &ZonePrediction, case: &LockCase, refill: bool) -> Stat {
    let d = &z.dynamics;
    let m = &case.model;
    let order = d.shape.order;
    let mut atoms: Vec<(f64, f64)> = if refill {
        let c2c = m.handover_c2c_ns(z.procs);
        d.refill
            .iter()
            .flat_map(|&(p, c)| {
                z.line_sources.iter().map(move |s| {
                    (
                        m.refill_hold_ns(&case.params, p, order, z.procs, c2c, s),
                        c as f64 * s.probability,
                    )
                })
            })
            .collect()
    } else {
        let per_page = m.free_ns_per_page(&case.params, &z.line_sources, order);
        let fixed = m.drain_fixed_ns(&case.params, z.procs, &z.line_sources);
        d.free
            .iter()
            .map(|&(p, c)| (fixed + f64::from(p) * per_page, c as f64))
            .collect()
    };
    atoms.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tot: f64 = atoms.iter().map(|a| a.1).sum();
    let q = |p: f64| {
        let mut acc = 0.0;
        for (x, w) in &atoms {
            acc += w;
            if acc >= p * tot {
                return *x;
            }
        }
        f64::NAN
    };
    Stat {
        mean_ns: if refill {
            z.refill_hold_ns
        } else {
            z.free_hold_ns
        },
        p50_ns: q(0.5),
        p99_ns: q(0.99),
    }
}

/// The per-zone outputs of a solved case.
pub fn zone_outputs(case: &LockCase, pred: &Prediction) -> Vec<ZoneOutput> {
    pred.zones
        .iter()
        .map(|z| {
            let d = &z.dynamics;
            let t = terms(case, z);
            let allocs_per_s = if t.ns_per_alloc > 0.0 {
                1e9 / t.ns_per_alloc * f64::from(z.procs)
            } else {
                0.0
            };
            let per_s = |n: u64| allocs_per_s * n as f64 / d.shape.allocs_per_iteration() as f64;
            let side = |refill: bool| {
                let pages = if refill {
                    d.mean_refill_pages()
                } else {
                    d.mean_free_pages()
                };
                let (wait, wait_q) = if refill {
                    (z.refill_wait_ns, z.refill_wait_q_ns)
                } else {
                    (z.free_wait_ns, z.free_wait_q_ns)
                };
                LockSide {
                    acquisitions_per_s: if refill { z.refill_per_s } else { z.free_per_s },
                    pages_per_acquisition: pages,
                    wait: Stat {
                        mean_ns: wait,
                        p50_ns: wait_q[0],
                        p99_ns: wait_q[1],
                    },
                    hold: hold_stat(z, case, refill),
                    wait_ns_per_page: if pages > 0.0 { wait / pages } else { 0.0 },
                }
            };
            let lock_ns = t.handover_ns + t.hold_pages_ns + t.wait_ns;
            ZoneOutput {
                node: z.node,
                zone: "Normal".to_string(),
                tasks: z.procs,
                alloc: side(true),
                free: side(false),
                utilisation: z.lock_utilisation,
                lock_cycle_share: if t.ns_per_alloc > 0.0 {
                    (lock_ns / t.ns_per_alloc).min(1.0)
                } else {
                    0.0
                },
                alloc_bypass_pages_per_s: per_s(d.tally.alloc.bypass_allocs)
                    * f64::from(1u32 << d.shape.order),
                free_high_drains_per_s: per_s(d.tally.free.free_high_drains),
                pcp_pages_held: {
                    let steps = d.tally.alloc.steps + d.tally.free.steps;
                    if steps > 0 {
                        (d.tally.alloc.count_sum + d.tally.free.count_sum) / steps as f64
                            * f64::from(z.procs)
                    } else {
                        0.0
                    }
                },
            }
        })
        .collect()
}

/// Pages (4 KiB) allocated per second by all `tasks` tasks whose mean terms are `t`: the
/// allocations of [`Terms::ns_per_alloc`] times the pages of one (`1 << order`). What
/// `pages_per_s` means in `predict` and `latency` (the same quantity as `throughput_total` for
/// order 0); the pages that went through zone->lock are `refill_pages_per_s`
/// ([`crate::model::zonelock::Prediction::pages_per_s`]), fewer when frees refill the lists.
pub fn pages_allocated_per_s(case: &LockCase, t: &Terms, tasks: u32) -> f64 {
    if t.ns_per_alloc > 0.0 {
        1e9 / t.ns_per_alloc * f64::from(tasks) * f64::from(1u32 << case.shape.order.min(20))
    } else {
        0.0
    }
}

/// Why the refill latency (mean and quantiles) is null, if it is: the loop takes no
/// `rmqueue_bulk()` refill in steady state, so there is no refill to time.
pub fn no_refill_reason(pred: &Prediction) -> Option<String> {
    (pred.calls_per_s <= 0.0 || !pred.avg_ns.is_finite()).then(|| {
        "no rmqueue_bulk() refill in steady state (calls_per_s is 0): the PCP lists serve every allocation (e.g. pcp->high auto-tuned above what the tasks hold, 6.7 on), so there is no refill latency".to_string()
    })
}

/// Task-weighted terms over the zones.
pub fn mean_terms(case: &LockCase, pred: &Prediction) -> Terms {
    let tot: f64 = pred.zones.iter().map(|z| f64::from(z.procs)).sum();
    let mut m = Terms::default();
    for z in &pred.zones {
        let t = terms(case, z);
        let w = f64::from(z.procs) / tot.max(1.0);
        m.work_ns += w * t.work_ns;
        m.hold_pages_ns += w * t.hold_pages_ns;
        m.handover_ns += w * t.handover_ns;
        m.wait_ns += w * t.wait_ns;
        m.check_after_lock_ns += w * t.check_after_lock_ns;
        m.lru_hold_ns += w * t.lru_hold_ns;
        m.lru_wait_ns += w * t.lru_wait_ns;
        m.ns_per_alloc += w * t.ns_per_alloc;
    }
    m
}

/// The terms as a table (one row per term, ns per allocation).
pub fn terms_table(t: &Terms, title: String) -> Table {
    let mut tab = Table::new(["term", "ns per allocation", "share (%)"]).titled(title);
    let tot = t.ns_per_alloc.max(f64::MIN_POSITIVE);
    for (name, v) in [
        ("work outside the allocator", t.work_ns),
        ("lock hold, per-page part", t.hold_pages_ns),
        ("lock hold, fixed part (hand-over)", t.handover_ns),
        ("wait for the lock", t.wait_ns),
        ("check_new_pages() after the lock", t.check_after_lock_ns),
        ("LRU lock hold", t.lru_hold_ns),
        ("wait for the LRU lock", t.lru_wait_ns),
        ("total (from the queue's throughput)", t.ns_per_alloc),
    ] {
        if name.contains("LRU") && v == 0.0 {
            continue;
        }
        tab.push([
            name.to_string(),
            sig(v, 4),
            format!("{:.1}", 100.0 * v / tot),
        ]);
    }
    tab
}

impl Kind for AllocLoop {
    fn name(&self) -> &'static str {
        "alloc-loop"
    }
    fn description(&self) -> &'static str {
        "N tasks allocating (and freeing, or not) pages of one order through the PCP lists; refills and drains on zone->lock"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[
            Mechanism::PcpDynamics,
            Mechanism::ZoneLock,
            Mechanism::LruLock,
        ]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[
            "tasks",
            "nodes",
            "kernel",
            "scale-max",
            "batch",
            "high",
            "order",
        ]
    }
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "op.order",
            "op.alloc_pages",
            "op.free_pages",
            "op.freed_by",
            "op.work",
            "op.phase_pages",
            "tasks.count",
            "tasks.nodes",
        ])
    }
    fn params_read(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "probe_ns",
            "alloc_work_share",
            "clock_ghz",
            "lru_pages",
            "exit_pgd_order",
            "vmstat_interval_ms",
            "life_free_share",
            "alloc_run_pages",
            "life_free_run_pages",
        ])
    }
    /// The workload's reference kernel (its lock parameters and work come from there).
    fn default_kernel(&self, w: &WorkloadSpec) -> Result<KernelVersion> {
        w.reference_kernel()
    }
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &PARAM_RANGES
    }
    fn check(&self, w: &WorkloadSpec) -> Result<()> {
        // The file's work per operation is each task's think time between allocations: the
        // queue needs it > 0 (a fitted value is the thread's own and checked by its fit).
        if let Some(t) = w.op.work.fitted_table().filter(|_| !lock_fitted(w)) {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.work.table",
                format!(
                    "'{t}': kind alloc-loop fits its work (with the lock's hold) only to the rmqueue_bulk() histograms '{}'; drop the table to carry the lock's fit over",
                    crate::fit::lock_calibration::TABLE
                ),
            ));
        }
        let given = w.op.work.ns.as_ref().or(w.op.work.cycles.as_ref());
        if let Some(q) = given.filter(|_| !lock_fitted(w)) {
            if q.value.is_nan() || q.value <= 0.0 {
                return Err(Error::invalid(
                    format!("workload {}", w.name),
                    if w.op.work.ns.is_some() { "op.work.ns" } else { "op.work.cycles" },
                    format!(
                        "{} is not > 0: kind alloc-loop needs work outside the allocator per operation (the tasks' think time between allocations)",
                        q.value
                    ),
                ));
            }
        }
        if matches!(w.op.freed_by.value, FreedBy::Partner | FreedBy::RemoteNode) {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.freed_by",
                "kind alloc-loop frees on the allocating CPU (same) or not at all (later)",
            ));
        }
        // A life's frees (params.life_free_share, alloc_run_pages, life_free_run_pages) shape a
        // task that frees its own pages in phases; elsewhere they would be read by nothing.
        let phases = w.op.freed_by.value == FreedBy::Same
            && w.op.phase_pages.as_ref().is_some_and(|q| q.value >= 1.0);
        for key in ["life_free_share", "alloc_run_pages", "life_free_run_pages"] {
            if w.params.contains_key(key) && !phases {
                return Err(Error::invalid(
                    format!("workload {}", w.name),
                    format!("params.{key}"),
                    "describes a task that frees its own pages in phases: it needs op.freed_by = \"same\" and op.phase_pages",
                ));
            }
        }
        if let Some(q) = w.op.phase_pages.as_ref().filter(|_| phases) {
            life_or_phases(w, q.value.round() as u64)?;
        }
        super::require_every_page_freed(w)
    }
    fn predict(&self, w: &WorkloadSpec, m: &Machine, k: &Knobs) -> Result<Predicted> {
        let case = lock_case(w, m, k)?;
        let pred = case.predict(!k.means_only)?;
        let pred_extra = pred.handoff_extra_ns;
        let t = mean_terms(&case, &pred);
        let zones = zone_outputs(&case, &pred);
        let tasks: u32 = pred.zones.iter().map(|z| z.procs).sum();
        let tp = if t.ns_per_alloc > 0.0 {
            1e9 / t.ns_per_alloc
        } else {
            0.0
        };
        let mut outputs = vec![
            ("work_ns_per_alloc".to_string(), t.work_ns),
            ("hold_pages_ns_per_alloc".to_string(), t.hold_pages_ns),
            ("handover_ns_per_alloc".to_string(), t.handover_ns),
            ("wait_ns_per_alloc".to_string(), t.wait_ns),
            (
                "check_after_lock_ns_per_alloc".to_string(),
                t.check_after_lock_ns,
            ),
            ("calls_per_s".to_string(), pred.calls_per_s),
            (
                "pages_per_s".to_string(),
                pages_allocated_per_s(&case, &t, tasks),
            ),
            ("refill_pages_per_s".to_string(), pred.pages_per_s),
            ("lock_utilisation".to_string(), pred.lock_utilisation),
        ];
        // The refill latency is always an output; null (NaN) with its reason where it does
        // not apply, so the keys do not change with the kernel or the knobs.
        let mut null_reasons = serde_json::Map::new();
        let no_refill = no_refill_reason(&pred);
        let quantile = |p: f64| -> Result<(f64, Option<String>)> {
            Ok(match &no_refill {
                Some(r) => (f64::NAN, Some(r.clone())),
                None if k.means_only => (
                    f64::NAN,
                    Some("means only: the refill latency distribution was not computed (Knobs::means_only)".to_string()),
                ),
                None => (pred.quantile(p)?, None),
            })
        };
        for (key, (v, why)) in [
            (
                "refill_latency_mean_ns",
                (
                    if no_refill.is_some() {
                        f64::NAN
                    } else {
                        pred.avg_ns
                    },
                    no_refill.clone(),
                ),
            ),
            ("refill_latency_p50_ns", quantile(0.5)?),
            ("refill_latency_p99_ns", quantile(0.99)?),
        ] {
            outputs.push((key.to_string(), v));
            if let Some(why) = why {
                null_reasons.insert(key.to_string(), why.into());
            }
        }
        let json = serde_json::json!({
            "null_reasons": null_reasons,
            "workload": w.name,
            "machine": m.name,
            "kernel": case.model.kernel.to_string(),
            "terms": t,
            "zones": zones,
            "parameters": case.params,
            "parameters_source": case.params_source,
        });
        let report = Report {
            json,
            tables: vec![terms_table(
                &t,
                format!(
                    "{}: one allocation of one task, {tasks} tasks on {} node(s) of {}, kernel {}",
                    w.name,
                    case.nodes.as_str(),
                    m.name,
                    case.model.kernel
                ),
            )],
            notes: {
                let mut n = vec![case.params_source.clone()];
                use crate::model::hold::SpinlockKind;
                if SpinlockKind::of(&m.cpu.vendor, case.model.kernel) == SpinlockKind::Ticket {
                    n.push(format!(
                        "zone->lock is a ticket spinlock on {} kernel {}: every waiter re-reads the lock line at each release, so each hand-off waits for about half of them (Boyd-Wickizer et al. 2012): +{} ns per hold at this load (crate::model::hold::ticket_handoff); past saturation throughput falls instead of flattening",
                        m.cpu.vendor, case.model.kernel, sig(pred_extra, 3)
                    ));
                }
                n
            },
        };
        Ok(Predicted {
            op: w.op.what.clone(),
            ns_per_op: t.ns_per_alloc,
            throughput_per_task: tp,
            throughput_total: tp * f64::from(tasks),
            tasks,
            zones,
            outputs,
            report,
        })
    }

    /// Thread 000's own workload has its histogram fit (`fit --workload zone-lock`); any other
    /// alloc-loop workload gets the generic fit.
    fn native_fit(&self, w: &WorkloadSpec, m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        if !lock_fitted(w) {
            return Ok(None);
        }
        Ok(Some(Box::new(ZoneLockHistFit::new(m)?)))
    }

    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("lo_ns", crate::bounds::BUCKET_NS),
            ("hi_ns", crate::bounds::BUCKET_NS),
            ("count", crate::bounds::HIST_COUNT),
        ]
    }

    /// The fixed cost of one hold stays at its value derived for the machine (probe overhead plus
    /// the zone lines moved at a hand-over, [`crate::model::zonelock::default_params`]) unless
    /// freed.
    fn native_default_fixed(&self) -> &'static [&'static str] {
        &["fixed_ns"]
    }
}
