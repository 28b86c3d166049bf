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
//! 2. **Hold time.** `h = h₀ + n_blocks · h_b`; `h₀` is the lock line's transfer between CPUs
//!    ([`crate::model::memcg::mean_transfer_ns`]), `h_b` the buddy work per block (split or
//!    merge, touching `struct page`s; free parameter).
//! 3. **Queue.** One zone->lock per node; `n = ⌈tasks / nodes⌉` tasks contend for it. Think time
//!    per acquisition `Z = M (t_fault + t_unmap) / A_cycle` (work per cycle over acquisitions per
//!    cycle, averaged over the run), holds the empirical block distribution
//!    ([`HoldDist::Discrete`]); solved by [`LockQueue::solve`] (Takács M/G/1//N).
//! 4. **perf lock contention over the run.** Acquisitions `A = tasks · A_task`, contended
//!    `C = A · P(contended)`, total wait `A · W`, average wait per contended acquisition
//!    `W / P(contended)`.
//!
//! 5. **Physical parameters** ([`HighOrderModel::derived_params`], no fit): `t_fault` =
//!    overhead + 64 KiB cleared at `min(core, node store bandwidth / tasks per node)`; `h_b` =
//!    [`HOLD_DRAM_ACCESSES_PER_BLOCK`] × the machine file's local DRAM latency.
//!
//! # Assumptions and validity
//! - Tasks spread evenly over the nodes and allocate locally; every folio is order 4 (no
//!   fallback to order 0); page-table pages and other order-0 traffic are ignored.
//! - A task's PCP list is its CPU's (no migration); `decay_pcp_high()` runs once per second.
//! - The run length counts cycles at the unloaded cycle time (waits are a small share).
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
use crate::kernel::config::{configure, KernelOptions};
use crate::kernel::layout::ZoneKind;
use crate::kernel::version::KernelVersion;
use crate::machine::Machine;
use crate::model::lock::{HoldAtom, HoldDist, LockQueue};
use crate::model::memcg::mean_transfer_ns;

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

/// Buddy work per block under zone->lock, in local DRAM accesses (assumed: an order-4 split in
/// `expand()` or a merge in `__free_one_page()` touches the buddy's `struct page` and a free
/// list head, about 2.5 misses).
pub const HOLD_DRAM_ACCESSES_PER_BLOCK: f64 = 2.5;

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
    /// Fixed part of a hold: the lock's line transfer, ns.
    pub hold_fixed_ns: f64,
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
    /// Probability an acquisition is contended.
    pub p_contended: f64,
    /// Contended acquisitions over the run.
    pub contended: f64,
    /// Total wait over the run, ns.
    pub total_wait_ns: f64,
    /// Average wait per contended acquisition, ns (NaN when none).
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
            hold_fixed_ns: mean_transfer_ns(machine, tasks_per_zone)?,
            pcp,
        })
    }

    /// Physical parameters in [`PARAM_NAMES`] order, derived without any fit: the fault cost is
    /// [`FAULT_OVERHEAD_NS_ASSUMED`] plus clearing the folio at the task's share of its node's
    /// store bandwidth (`min(core, node / tasks per node)`); the hold per block is
    /// [`HOLD_DRAM_ACCESSES_PER_BLOCK`] local DRAM accesses of the machine file; the unmap cost
    /// is the parameter's default.
    pub fn derived_params(&self, machine: &Machine) -> Vec<f64> {
        let per_task_gbps =
            CORE_CLEAR_GBPS_ASSUMED.min(NODE_STORE_GBPS_ASSUMED / f64::from(self.tasks_per_zone));
        let folio_bytes = 4096.0 * f64::from(1u32 << self.order);
        let fault = FAULT_OVERHEAD_NS_ASSUMED + folio_bytes / per_task_gbps;
        let hold = HOLD_DRAM_ACCESSES_PER_BLOCK * machine.latency_ns.dram_local.value;
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
            if c % cycles_per_tick == 0 {
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

    /// Estimates the lock traffic and contention with parameters in [`PARAM_NAMES`] order.
    pub fn estimate(&self, params: &[f64], high_order_pcp: bool) -> Result<HighOrderEstimate> {
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
                contended: 0.0,
                total_wait_ns: 0.0,
                avg_wait_ns: f64::NAN,
                final_high_pages: final_high,
                holds_by_blocks,
            });
        }
        let think = work_ns * cycles as f64 / a_task;
        let atoms = holds
            .iter()
            .map(|(b, n)| HoldAtom {
                hold_ns: hold_of(*b),
                weight: *n,
            })
            .collect();
        let q = LockQueue::single(self.tasks_per_zone, think, HoldDist::Discrete { atoms });
        let sol = q.solve()?;
        let acq = a_task * f64::from(self.tasks);
        let p_c = sol.p_contended;
        Ok(HighOrderEstimate {
            high_order_pcp,
            cycles_per_task: cycles,
            acquisitions: acq,
            acquisitions_per_folio: a_task / folios,
            hold_ns_mean: hold_mean,
            utilisation: sol.utilisation,
            p_contended: p_c,
            contended: acq * p_c,
            total_wait_ns: acq * sol.wait_ns_mean,
            avg_wait_ns: if p_c > 0.0 {
                sol.wait_ns_mean / p_c
            } else {
                f64::NAN
            },
            final_high_pages: final_high,
            holds_by_blocks,
        })
    }
}

/// Quantities the fit model predicts, by code (input column `quantity_code`).
pub const QUANTITIES: [&str; 3] = ["contended", "total_wait_ns", "avg_wait_ns"];

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
                .with_provenance("assumed: start value; buddy split/merge touching a few struct pages at DRAM latency, fitted")
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
        let e = self.estimate(params, hop == 1.0)?;
        if q == 0.0 {
            Ok(e.contended)
        } else if q == 1.0 {
            Ok(e.total_wait_ns)
        } else if q == 2.0 {
            Ok(e.avg_wait_ns)
        } else {
            Err(Error::invalid(
                INPUT,
                "quantity_code",
                format!("must be 0, 1 or 2, got {q}"),
            ))
        }
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
        assert!(on.acquisitions < off.acquisitions / 10.0, "{on:?}");
    }
}
