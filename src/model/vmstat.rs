//! NUMA event counters on the allocation path (thread 002): the cost of `zone_statistics()` per
//! page allocation, with `vm.numa_stat` on and off, at 1 and many threads.
//!
//! # Mechanism (`mm/page_alloc.c` `zone_statistics()`, `mm/vmstat.c` `__inc_numa_state()`, 4.15)
//! Every allocation from `get_page_from_freelist()` calls `zone_statistics(preferred, z)`. For a
//! local allocation it increments two counters, `NUMA_HIT` and `NUMA_LOCAL` (a miss would add
//! `NUMA_MISS`, `NUMA_FOREIGN`, `NUMA_OTHER`). Each increment is a per-CPU `u16`
//! (`pcp->vm_numa_stat_diff[item]`); when it passes the fold threshold the CPU adds it to the
//! shared atomics `zone->vm_numa_stat[item]` and the global `vm_numa_stat[item]` and resets.
//! Kemi Wang's first series (4.15, "mm: update NUMA counter threshold size") set the threshold to
//! `NUMA_STATS_THRESHOLD = U16_MAX − 2` = 65 533; before it the NUMA items shared the zone
//! counters' `s8` diffs and `stat_threshold` (`calculate_normal_threshold()`:
//! `min(125, 2·fls(cpus)·(1 + fls(zone MiB / 128)))`). With `vm.numa_stat = 0` (thread 002's
//! patch, 4.15) a static branch skips the function.
//!
//! # Equations (cycles per page allocation + free, one thread's view)
//! ```text
//! cycles(N, on) = σ(N) · (c_base + on · e · c_event) + on · F(N, P) · f_cyc
//! σ(N)          = t / (1 + g (t − 1)),  t = threads per busy core = ceil(N / cores) ≤ SMT ways
//! ```
//! `c_base` (cycles of alloc + free without the counters), `c_event` (cycles of one per-CPU
//! counter increment with its branches), `g` (throughput gain of a second SMT thread on this code)
//! are fitted; `e = 2` events per local allocation, `f_cyc` the TSC frequency. `F(N, P)` (ns per
//! allocation) is the fold ([`crate::model::numa_fold`]): `P` events of one item between its
//! folds (`T + 1 + T/2` with the pre-4.15 overstep, `T + 1` from 4.15, `T` the threshold), each
//! fold two `lock xadd`s, on the item's zone line (the node's CPUs write it) and on the one
//! global line (all CPUs write it), queued with N writers and shared by SMT siblings; plus the
//! misses of `zone_watermark_fast()`'s read of `NR_FREE_CMA_PAGES`, which shares `NUMA_HIT`'s
//! zone line: after each fold the node's other cores re-read it together and queue at its
//! home ([`crate::model::reader_burst`]).
//!
//! page_bench alloc+free of order-0 pages never touches zone->lock: the freed page returns to
//! the PCP list it came from, so `pcp->count` does not move and no refill or drain happens.
//!
//! # Assumptions and validity
//! - Local allocations only (page_bench threads allocate on their own node): 2 events.
//! - Threads spread one per core first, then onto SMT siblings (88 threads on 44 cores: t = 2).
//! - Cycles are TSC cycles at the base clock.
//! - With the 4.15 threshold the fold term is negligible (a fold per 65 534 allocations), so
//!   the growth of the saving with threads comes from SMT sharing in this model; the pre-4.15
//!   threshold (≤ 125) makes the fold term dominant at 88 threads.
//!
//! # References
//! - `mm/vmstat.c` (4.15): `__inc_numa_state()`, `NUMA_STATS_THRESHOLD`, `refresh_cpu_vm_stats()`,
//!   `calculate_normal_threshold()`, `sysctl_vm_numa_stat_handler()`.
//! - `mm/page_alloc.c` (4.15): `zone_statistics()`.
//! - Thread 002: Kemi Wang, "[PATCH v5] mm, sysctl: make NUMA stats configurable", 2017-10.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::{FitModel, InputSpec, ParamSpec, TargetSpec};
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::numa_fold::{fold_cost, FoldCost, FoldInputs, FoldRule, CONFIG_CMA_ASSUMED};

const INPUT: &str = "numa-stat model";

/// Counter events per local allocation (`NUMA_HIT` and `NUMA_LOCAL`).
pub const EVENTS_PER_LOCAL_ALLOC: f64 = 2.0;

/// `NUMA_STATS_THRESHOLD` (4.15+): `U16_MAX - 2`.
pub const NUMA_STATS_THRESHOLD: u32 = 65_533;

/// The kernel of thread 002 (the patch went into 4.15 on top of the threshold series).
pub const KERNEL_002: KernelVersion = KernelVersion::new(4, 15);

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = ["base_cycles", "event_cycles", "smt_gain"];

/// `fls()`: position of the highest set bit, 1-based (0 for 0).
fn fls(x: u64) -> u64 {
    u64::from(64 - x.leading_zeros())
}

/// The fold threshold of the NUMA counters on `kernel` for a zone of `zone_mib` MiB with
/// `online_cpus` CPUs: 65 533 from 4.15, `calculate_normal_threshold()` before.
pub fn fold_threshold(kernel: KernelVersion, online_cpus: u32, zone_mib: u64) -> u32 {
    if kernel.at_least(4, 15) {
        NUMA_STATS_THRESHOLD
    } else {
        let mem = zone_mib / 128;
        let t = 2 * fls(u64::from(online_cpus)) * (1 + fls(mem));
        t.min(125) as u32
    }
}

/// The page_bench cycles model of one machine and kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaStatModel {
    /// Machine name.
    pub machine: String,
    /// Kernel version.
    pub kernel: KernelVersion,
    /// Physical cores.
    pub cores: u32,
    /// SMT ways per core.
    pub threads_per_core: u32,
    /// NUMA nodes.
    pub nodes: u32,
    /// TSC frequency, GHz.
    pub tsc_ghz: f64,
    /// Normal zone size per node, MiB (for the pre-4.15 threshold).
    pub zone_mib: u64,
    /// The machine, kept for the transfer mix at each thread count.
    #[serde(skip)]
    machine_file: Machine,
}

/// One estimate with its terms (cycles per page allocation + free).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaStatEstimate {
    /// Threads.
    pub threads: u32,
    /// vm.numa_stat.
    pub numa_stat: bool,
    /// Total cycles per page.
    pub cycles_per_page: f64,
    /// Allocation + free work without the counters (SMT-stretched), cycles.
    pub base_cycles: f64,
    /// Per-CPU counter increments (SMT-stretched), cycles.
    pub local_counter_cycles: f64,
    /// Folds into the shared counters, cycles: the sum of `zone_fold_cycles`,
    /// `global_fold_cycles` and `cma_read_cycles`.
    pub fold_cycles: f64,
    /// SMT stretch factor σ(N).
    pub smt_stretch: f64,
    /// Fold threshold, events.
    pub fold_threshold: u32,
    /// How the per-CPU diff folds (overstep before 4.15 and in the v1 series, reset from 4.15).
    pub fold_rule: FoldRule,
    /// Events of one item between its folds.
    pub events_between_folds: f64,
    /// Waiting and transfers at the zone's `NUMA_HIT` and `NUMA_LOCAL` lines, cycles.
    pub zone_fold_cycles: f64,
    /// Waiting and transfers at the global counter line, cycles.
    pub global_fold_cycles: f64,
    /// Misses of `zone_watermark_fast()`'s `NR_FREE_CMA_PAGES` read on `NUMA_HIT`'s zone line
    /// after other CPUs' folds, queued behind each other at the line's home, cycles.
    pub cma_read_cycles: f64,
    /// Utilisation of the global counter line.
    pub global_line_utilisation: f64,
    /// Utilisation of `NUMA_HIT`'s zone line at its home (folds and the readers' misses).
    pub cma_line_utilisation: f64,
}

impl NumaStatModel {
    /// Builds the model for `machine` and `kernel`.
    pub fn new(machine: &Machine, kernel: KernelVersion) -> Result<NumaStatModel> {
        let t = &machine.topology;
        let zone_mib = machine
            .memory
            .node_mib
            .value
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        Ok(NumaStatModel {
            machine: machine.name.clone(),
            kernel,
            cores: t.sockets.value * t.cores_per_socket.value,
            threads_per_core: t.threads_per_core.value.max(1),
            nodes: t.numa_nodes.value.max(1),
            tsc_ghz: machine.clock.base_ghz.value,
            zone_mib,
            machine_file: machine.clone(),
        })
    }

    /// Estimates cycles per page with parameters in [`PARAM_NAMES`] order, at the kernel's own
    /// fold threshold ([`fold_threshold`]).
    pub fn estimate(
        &self,
        params: &[f64],
        threads: u32,
        numa_stat: bool,
    ) -> Result<NumaStatEstimate> {
        self.estimate_at_threshold(params, threads, numa_stat, None)
    }

    /// [`NumaStatModel::estimate`] with the fold threshold set by hand (events per per-CPU
    /// counter before it folds into the shared counters), as Kemi Wang's 2017 series swept it
    /// (32 to 65 533); `None` is the kernel's own threshold.
    pub fn estimate_at_threshold(
        &self,
        params: &[f64],
        threads: u32,
        numa_stat: bool,
        threshold: Option<u32>,
    ) -> Result<NumaStatEstimate> {
        let rule = FoldRule::of(self.kernel);
        self.estimate_with_fold(params, threads, numa_stat, threshold, rule)
    }

    /// [`NumaStatModel::estimate_at_threshold`] with the fold rule set by hand: Kemi Wang's v1
    /// series (August 2017) kept the overstep of the `s8` code with `s16` diffs, v2 reset `u16`
    /// diffs to 0 ([`FoldRule`]).
    pub fn estimate_with_fold(
        &self,
        params: &[f64],
        threads: u32,
        numa_stat: bool,
        threshold: Option<u32>,
        rule: FoldRule,
    ) -> Result<NumaStatEstimate> {
        if threshold == Some(0) {
            return Err(Error::invalid(
                INPUT,
                "fold_threshold",
                "must be at least 1 event",
            ));
        }
        let [base, ev, g] = match params {
            [a, b, c] => [*a, *b, *c],
            _ => {
                return Err(Error::invalid(
                    INPUT,
                    "params",
                    format!("expected 3 parameters, got {}", params.len()),
                ))
            }
        };
        if !(base.is_finite()
            && base > 0.0
            && ev.is_finite()
            && ev >= 0.0
            && (0.0..=1.0).contains(&g))
        {
            return Err(Error::invalid(
                INPUT,
                "params",
                format!(
                    "base_cycles > 0, event_cycles ≥ 0, 0 ≤ smt_gain ≤ 1; got {base}, {ev}, {g}"
                ),
            ));
        }
        let cpus = self.cores * self.threads_per_core;
        if threads == 0 || threads > cpus {
            return Err(Error::invalid(
                INPUT,
                "threads",
                format!("must be 1..={cpus} on {}, got {threads}", self.machine),
            ));
        }
        let t = threads.div_ceil(self.cores).clamp(1, self.threads_per_core);
        let tf = f64::from(t);
        let stretch = tf / (1.0 + g * (tf - 1.0));
        let on = if numa_stat { 1.0 } else { 0.0 };
        let base_c = stretch * base;
        let local_c = stretch * on * EVENTS_PER_LOCAL_ALLOC * ev;
        let threshold =
            threshold.unwrap_or_else(|| fold_threshold(self.kernel, cpus, self.zone_mib));
        let mut fold = None;
        if numa_stat && rule != FoldRule::Never {
            fold = Some(fold_cost(
                &self.machine_file,
                &FoldInputs {
                    threads,
                    events_between_folds: rule.events_between_folds(threshold),
                    work_ns: (base_c + local_c) / self.tsc_ghz,
                    cma_read: CONFIG_CMA_ASSUMED,
                },
            )?);
        }
        let cyc = |f: fn(&FoldCost) -> f64| fold.as_ref().map_or(0.0, |c| f(c) * self.tsc_ghz);
        let fold_c = cyc(FoldCost::total_ns);
        Ok(NumaStatEstimate {
            threads,
            numa_stat,
            cycles_per_page: base_c + local_c + fold_c,
            base_cycles: base_c,
            local_counter_cycles: local_c,
            fold_cycles: fold_c,
            smt_stretch: stretch,
            fold_threshold: threshold,
            fold_rule: rule,
            events_between_folds: rule.events_between_folds(threshold),
            zone_fold_cycles: cyc(|c| c.zone_ns),
            global_fold_cycles: cyc(|c| c.global_ns),
            cma_read_cycles: cyc(|c| c.cma_read_ns),
            global_line_utilisation: fold.map_or(0.0, |c| c.global_utilisation),
            cma_line_utilisation: fold.map_or(0.0, |c| c.cma_line_utilisation),
        })
    }
}

impl FitModel for NumaStatModel {
    fn name(&self) -> &str {
        "page-bench"
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new(PARAM_NAMES[0], "cycles", 170.0)
                .with_bounds(10.0, 10_000.0)
                .with_provenance("assumed: start value; alloc_pages + __free_pages of one order-0 page through the PCP list, fitted")
                .with_description("cycles of one page allocation + free without NUMA counters, one thread per core"),
            ParamSpec::new(PARAM_NAMES[1], "cycles", 4.0)
                .with_bounds(0.0, 200.0)
                .with_provenance("assumed: start value; a this_cpu u16 increment with its threshold test and zone_statistics()'s node tests, fitted")
                .with_description("cycles of one per-CPU NUMA counter event"),
            ParamSpec::new(PARAM_NAMES[2], "1", 0.25)
                .with_bounds(0.0, 1.0)
                .with_provenance("assumed: start value; typical SMT gain 0.1-0.3 on pointer-chasing kernel code, fitted")
                .with_description("throughput gain of a second SMT thread on a core (0: none, 1: doubles)"),
        ]
    }

    fn inputs(&self) -> Vec<InputSpec> {
        vec![
            InputSpec::new("threads", "threads"),
            InputSpec::new("numa_stat", "0/1"),
        ]
    }

    fn target(&self) -> TargetSpec {
        TargetSpec::new("cycles_per_page", "cycles")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let (th, ns) = match x {
            [a, b] => (*a, *b),
            _ => {
                return Err(Error::invalid(
                    INPUT,
                    "inputs",
                    "expected threads, numa_stat",
                ))
            }
        };
        if !((1.0..=65_536.0).contains(&th)) {
            return Err(Error::invalid(
                INPUT,
                "threads",
                format!("must be ≥ 1, got {th}"),
            ));
        }
        if !(ns == 0.0 || ns == 1.0) {
            return Err(Error::invalid(
                INPUT,
                "numa_stat",
                format!("must be 0 or 1, got {ns}"),
            ));
        }
        Ok(self
            .estimate(params, th.round() as u32, ns == 1.0)?
            .cycles_per_page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_by_version() {
        assert_eq!(fold_threshold(KernelVersion::new(4, 15), 88, 65536), 65_533);
        // fls(88) = 7, fls(512) = 10: 2 * 7 * 11 = 154 -> 125
        assert_eq!(fold_threshold(KernelVersion::new(4, 14), 88, 65536), 125);
        assert_eq!(
            fold_threshold(KernelVersion::new(4, 14), 2, 1024),
            2 * 2 * 5
        );
    }

    #[test]
    fn fold_term_small_on_415_large_on_414() {
        let m = Machine::builtin("broadwell-2s").unwrap();
        let p = [176.0, 4.5, 0.1];
        let new = NumaStatModel::new(&m, KERNEL_002).unwrap();
        let old = NumaStatModel::new(&m, KernelVersion::new(4, 14)).unwrap();
        let a = new.estimate(&p, 88, true).unwrap();
        let b = old.estimate(&p, 88, true).unwrap();
        // A fold costs a couple of cross-CPU transfers, and (CONFIG_CMA) the node's 21 other
        // cores' re-reads of NR_FREE_CMA_PAGES queued at the line's home: about 21 x 300 ns,
        // some 14 000 cycles per fold. 4.15 folds once per 65 534 events (~0.2 cycles per
        // page), 4.14 once per 188 (tens of cycles).
        assert!(a.fold_cycles < 1.0, "{a:?}");
        assert!(b.fold_cycles > 10.0, "{b:?}");
    }
}
