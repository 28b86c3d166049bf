//! High-order pages on PCP lists (thread 003): the zone->lock traffic of a workload that
//! allocates and frees 64 KiB folios (order 4), with and without order 4 on the PCP lists, and
//! the contention that results.
//!
//! # Mechanism
//! `pcp_allowed_order()` (`mm/page_alloc.c`, 5.13–6.9) keeps orders `≤ PAGE_ALLOC_COSTLY_ORDER`
//! (3) and the THP order on PCP lists. An order-4 folio therefore goes to the buddy allocator
//! under `zone->lock` on every allocation (`rmqueue_buddy()`, inlined in `__alloc_pages`: the
//! `__alloc_pages+0x23c` caller of thread 003) and every free (`free_one_page()`). Kefeng Wang's
//! RFC (thread 003) lets order 4 onto the lists; then `rmqueue_bulk()` refills
//! `nr_pcp_alloc(order 4) = max(batch >> 4, 2)` blocks per hold and frees drain
//! `nr_pcp_free()` pages per hold once `pcp->count ≥ nr_pcp_high()`. On ≥ 6.7 `pcp->high`
//! auto-tunes: each refill raises it by `batch` towards `high_max` (`zone_highsize()` with
//! `MIN_PERCPU_PAGELIST_HIGH_FRACTION`), so after a ramp the folios a task frees at munmap are
//! kept and reused by its next round of faults, and the lock goes quiet.
//!
//! # Equations
//! 1. **Lock traffic per task.** will-it-scale page_fault1: each task repeatedly maps
//!    `M = 128 MiB / 64 KiB = 2048` folios, faults them in, unmaps them. The module steps the
//!    kernel's PCP state machine ([`crate::kernel::ops::PcpState`]: `nr_pcp_alloc`,
//!    `nr_pcp_high`, `nr_pcp_free`; the order-4 list's block count is kept here because the
//!    kernel module's `pcp_allowed_order()` is the unpatched one) through the run's cycles,
//!    calling `decay_pcp_high()`'s rule once per second, and records every hold: blocks moved.
//!    Without the patch: one hold of one block per allocation and per free.
//! 2. **Hold time.** `h = h₀ + n_blocks · h_b`; `h₀` is the lock line's hand-over between two
//!    CPUs of the node ([`node_transfer_ns`]: the tasks of one zone->lock run on that node), `h_b`
//!    the buddy work per block (split or merge, touching `struct page`s; free parameter, derived
//!    by [`HighOrderModel::derived_params`] from the lines the code touches, see [`BuddyOpLines`]).
//! 3. **Queue.** One zone->lock per node; `n = ⌈tasks / nodes⌉` tasks contend for it. Think time
//!    per acquisition `Z = M (t_fault + t_unmap) / A_cycle` (work per cycle over acquisitions per
//!    cycle, averaged over the run), holds the empirical block distribution (discrete); solved
//!    by [`crate::model::lock::LockQueue::solve`] (Takács M/G/1//N) through
//!    [`crate::model::perflock::observe_lock`]. Acquisitions over the run: the queue's
//!    throughput × run length, scaled from `n` tasks to all tasks.
//! 4. **What `perf lock contention` counts.** It counts the `lock:contention_begin` /
//!    `contention_end` tracepoints. In the queued spinlock (`kernel/locking/qspinlock.c`,
//!    `queued_spin_lock_slowpath()`, since 5.19's "locking: Add lock contention tracepoints")
//!    `trace_contention_begin()` sits after the `queue:` label: a CPU that finds the lock held
//!    with nobody waiting takes the *pending* bit and spins untraced; only a CPU that finds a
//!    pending waiter or an MCS queue (at least 2 CPUs at the lock, holder included) is traced,
//!    and its traced time is its whole wait. So with `P(k)` the probability that an acquisition
//!    finds `k` CPUs at the lock ([`crate::model::lock::Dist::given_ahead_at_least`]):
//!    traced `C = A · P(k ≥ 2)`, average wait `W₂ = E[T | k ≥ 2] − E[H]`, total wait `C · W₂`.
//!    The ordinary contention (`k ≥ 1`, any wait) is reported beside it.
//! 5. **Physical parameters** ([`HighOrderModel::derived_params`], no fit): `t_fault` =
//!    overhead + 64 KiB cleared at `min(core, node store bandwidth / tasks per node)`; `h_b` =
//!    the cache lines one buddy operation touches ([`ALLOC_LINES`], [`FREE_LINES`]), each at the
//!    machine file's core-to-core latency inside the node (lines another CPU of the node wrote
//!    recently) or local DRAM latency (cold `struct page`s).
//!
//! # Assumptions and validity
//! - Tasks spread evenly over the nodes and allocate locally; every folio is order 4 (no
//!   fallback to order 0); page-table pages and other order-0 traffic are ignored.
//! - A task's PCP list is its CPU's (no migration); `decay_pcp_high()` runs once per second.
//! - The PCP simulation counts cycles at the unloaded cycle time (it only sets the hold mix and
//!   the `pcp->high` ramp); the acquisition count uses the loaded rate.
//! - Think time is exponential with the run's mean; page_fault1's is bimodal (a fault phase of
//!   ~26 µs per allocation, an unmap burst of ~0.5 µs per free). A simulation of the bimodal
//!   law at thread 003's point (`tests/it/perflock.rs`) gives a traced wait 16 % below the model's
//!   for the lock alone and 14 % above it with perf attached, and a lower traced share with
//!   perf attached (0.74 against 0.96).
//! - Hold costs per line are the machine file's latencies; the lines are counted for one expand
//!   step per allocation and one merge per free ([`SPLITS_PER_OP`]).
//! - The machine of thread 003 is unknown (`kunpeng-920` is assumed), so absolute counts carry
//!   the uncertainty of the machine and of `t_fault`.
//!
//! # References
//! - `mm/page_alloc.c` (6.9): `pcp_allowed_order()`, `rmqueue_buddy()`, `rmqueue_bulk()`,
//!   `nr_pcp_alloc()`, `free_unref_page_commit()`, `nr_pcp_high()`, `nr_pcp_free()`,
//!   `decay_pcp_high()`, `zone_highsize()`.
//! - Thread 003: Barry Song's reply to Kefeng Wang, "[PATCH rfc 0/3] mm: allow more high-order
//!   pages stored on PCP lists", 2024-04.
//! - will-it-scale `tests/page_fault1.c`: `MEMSIZE (128 * 1024 * 1024)`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::{FitModel, InputSpec, ParamSpec, TargetSpec};
use crate::hw::machine::Machine;
use crate::kernel::config::{configure, KernelOptions};
use crate::kernel::layout::ZoneKind;
use crate::kernel::version::KernelVersion;
use crate::model::lock::HoldAtom;
use crate::model::perflock::{observe_lock, PerfLockProbe};

const INPUT: &str = "high-order model";

/// The kernel of thread 003 (the RFC was posted against 6.9-rc).
pub const KERNEL_003: KernelVersion = KernelVersion::new(6, 9);

/// Folio order of 64 KiB mTHP with 4 KiB pages.
pub const FOLIO_ORDER: u8 = 4;

/// will-it-scale page_fault1's mapping per task, bytes.
pub const PAGE_FAULT1_BYTES: u64 = 128 << 20;

/// Streaming-store bandwidth one NUMA node's memory sustains, GB/s (assumed: the machine files
/// carry no bandwidth; a Kunpeng 920 die has 4 DDR4-2933 channels, 94 GB/s peak, of which
/// about 2/3 is reachable with stores). Shared by the node's faulting tasks.
pub const NODE_STORE_GBPS_ASSUMED: f64 = 60.0;

/// One core's page-clearing bandwidth, GB/s (assumed: `clear_page()` with `DC ZVA` on an
/// Armv8.2 core, about 16 GB/s when memory is not the limit).
pub const CORE_CLEAR_GBPS_ASSUMED: f64 = 16.0;

/// Fault overhead per folio outside clearing and zone->lock, ns (assumed: exception entry and
/// return, VMA lookup, folio allocation fast path, memcg charge, rmap and 16 PTEs, about 1.5 us).
pub const FAULT_OVERHEAD_NS_ASSUMED: f64 = 1500.0;

/// Cache lines one buddy operation touches under `zone->lock`, by where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BuddyOpLines {
    /// Lines another CPU of the node wrote recently (zone lines, recently listed `struct page`s):
    /// each a core-to-core transfer inside the node.
    pub recent_lines: f64,
    /// `struct page`s nobody touched recently: each a local DRAM access.
    pub cold_lines: f64,
}

/// Amortised expand steps per order-4 allocation and merges per order-4 free (derived: splitting
/// an order-10 block into its 64 order-4 blocks takes 63 `expand()` steps, and freeing them all
/// back merges 63 times; in page_fault1's steady state every folio is freed again, so both are
/// ≈ 1 per operation).
pub const SPLITS_PER_OP: f64 = 1.0;

/// Lines of one order-4 allocation from the buddy lists (`rmqueue_buddy()` → `__rmqueue()` →
/// `__rmqueue_smallest()`, `del_page_from_free_list()`, `expand()`, `mm/page_alloc.c` 6.9),
/// counted in dependence order, `e` = [`SPLITS_PER_OP`] expand steps:
/// - recent: `free_area[4]` list head and `nr_free` (written by the previous holder) 1; the zone's
///   `vm_stat[NR_FREE_PAGES]` read by `__rmqueue()`'s CMA balance check (every CPU's vmstat fold
///   writes it) 1; the block's `struct page` (LIFO lists: the head is the block freed last, by
///   another CPU) 1; per expand step the other order's list head 1 and the old first entry's
///   `struct page` (its `lru.prev` is rewritten by `list_add`) 1 → `3 + 2e`;
/// - cold: the block's successor on the list (`list_del` rewrites its `lru.prev`) 1; per expand
///   step the split-off half's `struct page` (`set_buddy_order()`, untouched since it was merged)
///   1 → `1 + e`.
pub const ALLOC_LINES: BuddyOpLines = BuddyOpLines {
    recent_lines: 3.0 + 2.0 * SPLITS_PER_OP,
    cold_lines: 1.0 + SPLITS_PER_OP,
};

/// Lines of one order-4 free to the buddy lists (`free_one_page()` → `__free_one_page()`,
/// `mm/page_alloc.c` 6.9), `m` = [`SPLITS_PER_OP`] merges:
/// - recent: per merge the buddy's list head (`del_page_from_free_list()`) 1 and the buddy's list
///   neighbour (`list_del`) 1; the final list head (`add_to_free_list()`) 1 and its old first
///   entry 1 → `2 + 2m`;
/// - cold: the buddy's `struct page` read by `find_buddy_page_pfn()` once per loop pass (the
///   last pass finds no free buddy) `m + 1`; `buddy_merge_likely()`'s look at the next order's
///   buddy 1 → `m + 2`.
///
/// The folio's own `struct page` is hot (the freeing CPU just ran `free_pages_prepare()` on it).
pub const FREE_LINES: BuddyOpLines = BuddyOpLines {
    recent_lines: 2.0 + 2.0 * SPLITS_PER_OP,
    cold_lines: 2.0 + SPLITS_PER_OP,
};

/// Mean core-to-core transfer between two CPUs of one NUMA node, ns: `c2c_same_llc` when a node
/// is one LLC domain, otherwise the mix over the node's LLC domains with `c2c_cross_llc`
/// (machine file). A zone->lock and its zone's lines move only between the CPUs allocating from
/// that node.
pub fn node_transfer_ns(machine: &Machine) -> f64 {
    let nodes = f64::from(machine.topology.numa_nodes.value.max(1));
    machine.c2c_over_llc_domains_ns(f64::from(machine.llc_domains()) / nodes)
}

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = [
    "fault_ns_per_folio",
    "hold_ns_per_block",
    "unmap_ns_per_folio",
];

/// Parameters held at their defaults unless freed.
pub const DEFAULT_FIXED: [&str; 1] = ["unmap_ns_per_folio"];

/// A workload of tasks cycling through map / fault / unmap of `folios_per_cycle` folios.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HighOrderModel {
    /// Machine name.
    pub machine: String,
    /// Kernel.
    pub kernel: KernelVersion,
    /// Tasks.
    pub tasks: u32,
    /// Folio order.
    pub order: u8,
    /// Folios per map/unmap cycle of one task.
    pub folios_per_cycle: u32,
    /// Run length, s.
    pub run_s: f64,
    /// Zone locks the tasks spread over (NUMA nodes).
    pub zones: u32,
    /// Tasks per zone lock.
    pub tasks_per_zone: u32,
    /// Fixed part of a hold: the lock line's hand-over inside the node ([`node_transfer_ns`]), ns.
    pub hold_fixed_ns: f64,
    /// `perf lock contention` on this machine (what the measured tables were taken with).
    pub probe: PerfLockProbe,
    /// The kernel's PCP state of one CPU of the representative zone.
    #[serde(skip)]
    pcp: crate::kernel::ops::PcpState,
}

/// Lock traffic and contention of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HighOrderEstimate {
    /// Whether the order is on PCP lists.
    pub high_order_pcp: bool,
    /// Cycles (map/fault/unmap) per task over the run.
    pub cycles_per_task: u64,
    /// zone->lock acquisitions over the run, all tasks.
    pub acquisitions: f64,
    /// Acquisitions per folio allocated.
    pub acquisitions_per_folio: f64,
    /// Mean hold, ns.
    pub hold_ns_mean: f64,
    /// Lock utilisation (each zone).
    pub utilisation: f64,
    /// Probability an acquisition finds the lock held (any wait, `k ≥ 1`).
    pub p_contended: f64,
    /// Mean wait per acquisition (all of them), ns.
    pub wait_ns_mean: f64,
    /// Whether `perf lock contention`'s costs are included (see [`crate::model::perflock`]).
    pub observed_by_perf: bool,
    /// Probability an acquisition is traced by `perf lock contention` (`k ≥ 2`: it finds a
    /// pending waiter or a queue; see the module docs).
    pub p_traced: f64,
    /// Contended acquisitions over the run as `perf lock contention` counts them (traced).
    pub contended: f64,
    /// Total traced wait over the run, ns.
    pub total_wait_ns: f64,
    /// Average wait per traced acquisition, ns (NaN when none).
    pub avg_wait_ns: f64,
    /// pcp->high at the end of the run, pages (0 when the order bypasses the lists).
    pub final_high_pages: u32,
    /// Holds by blocks moved: (blocks, count over the run per task).
    pub holds_by_blocks: Vec<(u32, f64)>,
}

impl HighOrderModel {
    /// Builds the model: `tasks` tasks of page_fault1 with 64 KiB folios on `machine`.
    pub fn page_fault1(
        machine: &Machine,
        kernel: KernelVersion,
        tasks: u32,
        run_s: f64,
    ) -> Result<HighOrderModel> {
        let cpus = machine.cpus();
        if tasks == 0 || tasks > cpus {
            return Err(Error::invalid(
                INPUT,
                "tasks",
                format!("must be 1..={cpus} on {}, got {tasks}", machine.name),
            ));
        }
        if !(run_s.is_finite() && run_s > 0.0) {
            return Err(Error::invalid(
                INPUT,
                "run_s",
                format!("must be > 0, got {run_s}"),
            ));
        }
        let cfg = configure(machine, kernel, KernelOptions::default())?;
        let zones = machine.topology.numa_nodes.value.max(1);
        // The representative zone: the largest Normal zone.
        let z = cfg
            .zones
            .iter()
            .filter(|z| z.zone.kind == ZoneKind::Normal)
            .max_by_key(|z| z.zone.managed_pages)
            .ok_or_else(|| Error::Unsupported(format!("{} has no Normal zone", machine.name)))?;
        let pcp = cfg.pcp_state(z.zone.node, ZoneKind::Normal)?;
        let tasks_per_zone = tasks.div_ceil(zones).max(1);
        Ok(HighOrderModel {
            machine: machine.name.clone(),
            kernel,
            tasks,
            order: FOLIO_ORDER,
            folios_per_cycle: (PAGE_FAULT1_BYTES >> (12 + FOLIO_ORDER)) as u32,
            run_s,
            zones,
            tasks_per_zone,
            hold_fixed_ns: node_transfer_ns(machine),
            probe: PerfLockProbe::for_machine(machine)?,
            pcp,
        })
    }

    /// Physical parameters in [`PARAM_NAMES`] order, derived without any fit: the fault cost is
    /// [`FAULT_OVERHEAD_NS_ASSUMED`] plus clearing the folio at the task's share of its node's
    /// store bandwidth (`min(core, node / tasks per node)`); the hold per block is the mean of
    /// [`ALLOC_LINES`] and [`FREE_LINES`] (allocations and frees are equally many), recent lines
    /// at [`node_transfer_ns`] and cold ones at the machine file's local DRAM latency; the unmap
    /// cost is the parameter's default.
    pub fn derived_params(&self, machine: &Machine) -> Vec<f64> {
        let per_task_gbps = crate::assumptions::value(
            "highorder::CORE_CLEAR_GBPS_ASSUMED",
            CORE_CLEAR_GBPS_ASSUMED,
        )
        .min(
            crate::assumptions::value(
                "highorder::NODE_STORE_GBPS_ASSUMED",
                NODE_STORE_GBPS_ASSUMED,
            ) / f64::from(self.tasks_per_zone),
        );
        let folio_bytes = 4096.0 * f64::from(1u32 << self.order);
        let fault = crate::assumptions::value(
            "highorder::FAULT_OVERHEAD_NS_ASSUMED",
            FAULT_OVERHEAD_NS_ASSUMED,
        ) + folio_bytes / per_task_gbps;
        let (c2c, dram) = (
            node_transfer_ns(machine),
            machine.latency_ns.dram_local.value,
        );
        let cost = |l: BuddyOpLines| l.recent_lines * c2c + l.cold_lines * dram;
        let hold = 0.5 * (cost(ALLOC_LINES) + cost(FREE_LINES));
        vec![fault, hold, 500.0]
    }

    /// Holds (blocks per hold → count per task over the run) and the cycles run, stepping the
    /// PCP state machine. `cycle_ns` is one cycle's unloaded duration.
    fn simulate(&self, high_order_pcp: bool, cycle_ns: f64) -> (BTreeMap<u32, f64>, u64, u32) {
        let m = self.folios_per_cycle;
        let cycles = ((self.run_s * 1e9 / cycle_ns).floor() as u64).max(1);
        let mut holds: BTreeMap<u32, f64> = BTreeMap::new();
        if !high_order_pcp {
            holds.insert(1, 2.0 * f64::from(m) * cycles as f64);
            return (holds, cycles, 0);
        }
        let block = 1u32 << self.order;
        let mut st = self.pcp.clone();
        let scale = u32::from(st.pcp_batch_scale_max().unwrap_or(5));
        let mut blocks_on_list: u32 = 0;
        let cycles_per_tick = ((1e9 / cycle_ns).round() as u64).max(1);
        let mut per_cycle_prev: Option<BTreeMap<u32, u64>> = None;
        let mut c = 0u64;
        while c < cycles {
            let mut this: BTreeMap<u32, u64> = BTreeMap::new();
            for _ in 0..m {
                st.free_count_pages >>= 1;
                if blocks_on_list == 0 {
                    let n = st.nr_pcp_alloc(self.order).max(1);
                    blocks_on_list += n;
                    st.count_pages = st.count_pages.saturating_add(n * block);
                    *this.entry(n).or_default() += 1;
                }
                blocks_on_list -= 1;
                st.count_pages = st.count_pages.saturating_sub(block);
            }
            for _ in 0..m {
                st.alloc_factor >>= 1;
                blocks_on_list += 1;
                st.count_pages = st.count_pages.saturating_add(block);
                // Order 4 > PAGE_ALLOC_COSTLY_ORDER: not a free_high candidate; the flag clears.
                st.flags.prev_free_high_order = false;
                if st.free_count_pages < (st.batch_pages << scale) {
                    st.free_count_pages = st.free_count_pages.saturating_add(block);
                }
                let high = st.nr_pcp_high(false);
                if st.count_pages >= high {
                    let pages = st.nr_pcp_free(high, false);
                    let nb = pages.div_ceil(block).min(blocks_on_list).max(1);
                    blocks_on_list -= nb;
                    st.count_pages = st.count_pages.saturating_sub(nb * block);
                    *this.entry(nb).or_default() += 1;
                }
            }
            c += 1;
            if c.is_multiple_of(cycles_per_tick) {
                // decay_pcp_high(): high = max3(count - (batch << scale), high - high/8,
                // high_min); free what is above it.
                let bs = st.batch_pages << scale;
                let h = st
                    .count_pages
                    .saturating_sub(bs)
                    .max(st.high_pages - st.high_pages / 8)
                    .max(st.high_min_pages);
                st.high_pages = h;
                if st.count_pages > h {
                    let nb = (st.count_pages - h)
                        .min(bs)
                        .div_ceil(block)
                        .min(blocks_on_list);
                    if nb > 0 {
                        blocks_on_list -= nb;
                        st.count_pages = st.count_pages.saturating_sub(nb * block);
                        *this.entry(nb).or_default() += 1;
                    }
                }
            }
            for (k, v) in &this {
                *holds.entry(*k).or_default() += *v as f64;
            }
            // Steady state between ticks: extrapolate to the next tick or the end.
            if per_cycle_prev.as_ref() == Some(&this) {
                let next_tick = (c / cycles_per_tick + 1) * cycles_per_tick;
                let skip = next_tick.min(cycles).saturating_sub(c + 1);
                if skip > 0 {
                    for (k, v) in &this {
                        *holds.entry(*k).or_default() += *v as f64 * skip as f64;
                    }
                    c += skip;
                }
            }
            per_cycle_prev = Some(this);
        }
        (holds, cycles, st.high_pages)
    }

    /// Estimates the lock traffic and contention with parameters in [`PARAM_NAMES`] order, for
    /// the lock left alone (`contended`, `avg_wait_ns` still use perf's counting rule, without
    /// its costs).
    pub fn estimate(&self, params: &[f64], high_order_pcp: bool) -> Result<HighOrderEstimate> {
        self.estimate_with(params, high_order_pcp, None)
    }

    /// As [`HighOrderModel::estimate`], with `perf lock contention` attached: traced holds carry
    /// the end handler and reported waits the handlers' own time ([`crate::model::perflock`]).
    pub fn estimate_observed(
        &self,
        params: &[f64],
        high_order_pcp: bool,
        probe: &PerfLockProbe,
    ) -> Result<HighOrderEstimate> {
        self.estimate_with(params, high_order_pcp, Some(probe))
    }

    fn estimate_with(
        &self,
        params: &[f64],
        high_order_pcp: bool,
        probe: Option<&PerfLockProbe>,
    ) -> Result<HighOrderEstimate> {
        let [fault, per_block, unmap] = match params {
            [a, b, c] => [*a, *b, *c],
            _ => {
                return Err(Error::invalid(
                    INPUT,
                    "params",
                    format!("expected 3 parameters, got {}", params.len()),
                ))
            }
        };
        for (name, v) in PARAM_NAMES.iter().zip([fault, per_block, unmap]) {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    INPUT,
                    *name,
                    format!("must be > 0, got {v}"),
                ));
            }
        }
        let m = f64::from(self.folios_per_cycle);
        let work_ns = m * (fault + unmap);
        let unloaded_cycle = work_ns
            + if high_order_pcp {
                0.0
            } else {
                2.0 * m * (self.hold_fixed_ns + per_block)
            };
        let (holds, cycles, final_high) = self.simulate(high_order_pcp, unloaded_cycle);
        let a_task: f64 = holds.values().sum();
        let folios = m * cycles as f64;
        let hold_of = |b: u32| self.hold_fixed_ns + f64::from(b) * per_block;
        let hold_mean = if a_task > 0.0 {
            holds.iter().map(|(b, n)| hold_of(*b) * n).sum::<f64>() / a_task
        } else {
            self.hold_fixed_ns + per_block
        };
        let holds_by_blocks: Vec<(u32, f64)> = holds.iter().map(|(b, n)| (*b, *n)).collect();
        if a_task <= 0.0 {
            return Ok(HighOrderEstimate {
                high_order_pcp,
                cycles_per_task: cycles,
                acquisitions: 0.0,
                acquisitions_per_folio: 0.0,
                hold_ns_mean: hold_mean,
                utilisation: 0.0,
                p_contended: 0.0,
                wait_ns_mean: 0.0,
                observed_by_perf: probe.is_some(),
                p_traced: 0.0,
                contended: 0.0,
                total_wait_ns: 0.0,
                avg_wait_ns: f64::NAN,
                final_high_pages: final_high,
                holds_by_blocks,
            });
        }
        let think = work_ns * cycles as f64 / a_task;
        let atoms: Vec<HoldAtom> = holds
            .iter()
            .map(|(b, n)| HoldAtom {
                hold_ns: hold_of(*b),
                weight: *n,
            })
            .collect();
        let seen = observe_lock(self.tasks_per_zone, think, &atoms, probe)?;
        let (p_traced, avg_traced) = (seen.p_traced, seen.reported_wait_ns);
        let sol = seen.solution;
        // Acquisitions at the loaded rate: the queue's throughput per zone lock, scaled from
        // the tasks per zone to the tasks.
        let acq = sol.throughput_per_s * self.run_s * f64::from(self.tasks)
            / f64::from(self.tasks_per_zone);
        Ok(HighOrderEstimate {
            high_order_pcp,
            cycles_per_task: cycles,
            acquisitions: acq,
            acquisitions_per_folio: a_task / folios,
            hold_ns_mean: hold_mean,
            utilisation: sol.utilisation,
            p_contended: sol.p_contended,
            wait_ns_mean: sol.wait_ns_mean,
            observed_by_perf: probe.is_some(),
            p_traced,
            contended: acq * p_traced,
            total_wait_ns: if p_traced > 0.0 {
                acq * p_traced * avg_traced
            } else {
                0.0
            },
            avg_wait_ns: if p_traced > 0.0 { avg_traced } else { f64::NAN },
            final_high_pages: final_high,
            holds_by_blocks,
        })
    }
}

/// Quantities the fit model predicts, by code (input column `quantity_code`).
pub const QUANTITIES: [&str; 3] = ["contended", "total_wait_ns", "avg_wait_ns"];

/// What `perf lock contention` reports, as the fit model's `quantity_code` column names it
/// (the CSV carries the code because the fit engine's inputs are numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockQuantity {
    /// Traced (contended) acquisitions over the run: code 0.
    Contended,
    /// Total traced wait over the run, ns: code 1.
    TotalWaitNs,
    /// Average wait per traced acquisition, ns: code 2.
    AvgWaitNs,
}

impl LockQuantity {
    /// Every quantity, in code order.
    pub const ALL: [LockQuantity; 3] = [
        LockQuantity::Contended,
        LockQuantity::TotalWaitNs,
        LockQuantity::AvgWaitNs,
    ];

    /// The name (a [`QUANTITIES`] entry).
    pub fn name(self) -> &'static str {
        QUANTITIES[self as usize]
    }

    /// The `quantity_code` of the CSV.
    pub fn code(self) -> f64 {
        self as usize as f64
    }

    /// The quantity of a `quantity_code`.
    pub fn from_code(q: f64) -> Result<LockQuantity> {
        LockQuantity::ALL
            .into_iter()
            .find(|x| x.code() == q)
            .ok_or_else(|| {
                Error::invalid(
                    INPUT,
                    "quantity_code",
                    format!("must be 0, 1 or 2, got {q}"),
                )
            })
    }

    /// Its value in an estimate.
    pub fn of(self, e: &HighOrderEstimate) -> f64 {
        match self {
            LockQuantity::Contended => e.contended,
            LockQuantity::TotalWaitNs => e.total_wait_ns,
            LockQuantity::AvgWaitNs => e.avg_wait_ns,
        }
    }
}

impl FitModel for HighOrderModel {
    fn name(&self) -> &str {
        "page-fault1"
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new(PARAM_NAMES[0], "ns", 8000.0)
                .with_bounds(100.0, 1e8)
                .with_provenance("assumed: start value; fault path + zeroing 64 KiB (about 8 GB/s per core), fitted")
                .with_description("CPU time per folio faulted in, outside zone->lock"),
            ParamSpec::new(PARAM_NAMES[1], "ns", 300.0)
                .with_bounds(10.0, 1e6)
                .with_provenance("assumed: start value; derived_params() counts the lines of rmqueue_buddy()/__free_one_page() (6.9), fitted")
                .with_description("zone->lock hold per block moved"),
            ParamSpec::new(PARAM_NAMES[2], "ns", 500.0)
                .with_bounds(10.0, 1e6)
                .with_provenance("assumed: zap_pte_range + TLB flush share + folio free per 64 KiB folio, about 0.5 us")
                .with_description("CPU time per folio unmapped, outside zone->lock"),
        ]
    }

    fn inputs(&self) -> Vec<InputSpec> {
        vec![
            InputSpec::new("high_order_pcp", "0/1"),
            InputSpec::new(
                "quantity_code",
                "0 contended, 1 total_wait_ns, 2 avg_wait_ns",
            ),
        ]
    }

    fn target(&self) -> TargetSpec {
        TargetSpec::new("value", "count or ns")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let (hop, q) = match x {
            [a, b] => (*a, *b),
            _ => {
                return Err(Error::invalid(
                    INPUT,
                    "inputs",
                    "expected high_order_pcp, quantity_code",
                ))
            }
        };
        if !(hop == 0.0 || hop == 1.0) {
            return Err(Error::invalid(
                INPUT,
                "high_order_pcp",
                format!("must be 0 or 1, got {hop}"),
            ));
        }
        let q = LockQuantity::from_code(q)?;
        let e = self.estimate_observed(params, hop == 1.0, &self.probe)?;
        Ok(q.of(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcp_cuts_lock_traffic() {
        let m = Machine::builtin("kunpeng-920").unwrap();
        let model = HighOrderModel::page_fault1(&m, KERNEL_003, 90, 10.0).unwrap();
        let p = [8000.0, 300.0, 500.0];
        let off = model.estimate(&p, false).unwrap();
        let on = model.estimate(&p, true).unwrap();
        assert!((off.acquisitions_per_folio - 2.0).abs() < 1e-12);
        // With order 4 on the PCP lists only the first cycle's ramp takes the lock: at most every
        // alloc and free of one cycle against all of them in every cycle, so acquisitions fall
        // by at least the cycles per task (531; 1226x when written).
        assert!(
            on.acquisitions * off.cycles_per_task as f64 <= off.acquisitions,
            "{on:?}"
        );
    }
}
