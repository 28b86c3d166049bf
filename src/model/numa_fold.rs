//! The fold of the per-CPU NUMA counter differentials into the shared zone and global counters:
//! how many events between folds, which shared lines a fold writes, how many CPUs write each,
//! and what a fold costs with N writers queued on those lines.
//!
//! # What the kernel does (4.13-4.15 `mm/vmstat.c`, `mm/page_alloc.c`, `include/linux/mmzone.h`)
//! - `zone_statistics(preferred, z)` on every order-0 allocation: a local allocation (the
//!   allocating CPU's node is the zone's and the preferred zone's node) increments `NUMA_HIT`
//!   and `NUMA_LOCAL` of the allocating zone `z`, one event each.
//! - `__inc_zone_numa_state()` / `__inc_numa_state()` increment the CPU's own differential
//!   `pcp->vm_numa_stat_diff[item]`; when it passes the threshold, `zone_numa_state_add()`
//!   does two `atomic_long_add`s (x86: `lock xadd`), first `zone->vm_numa_stat[item]`, then the
//!   global `vm_numa_stat[item]` (v1: `vm_zone_numa_stat`).
//! - Events between folds of one item ([`FoldRule`]): before 4.15 and in Kemi Wang's v1 series
//!   (`s8`/`s16` diffs with a per-CPU threshold `t`) the fold fires at `v > t`, adds `v +
//!   t/2` and resets the diff to `−(t >> 1)`: `t + 1 + (t >> 1)` events. From the v2 series /
//!   4.15 (`u16`, `NUMA_STATS_THRESHOLD`) it adds `v` and resets to 0: `t + 1` events.
//! - Lines: `struct zone` ends with `vm_stat[NR_VM_ZONE_STAT_ITEMS]` (cache-line aligned by
//!   `ZONE_PADDING`) followed by `vm_numa_stat[]` (8 bytes each). With 12 or 13 zone items
//!   (`NR_ZSPAGES` with zsmalloc) `NUMA_HIT` sits at byte 96 or 104 (line 1) and `NUMA_LOCAL`
//!   at 128 or 136 (line 2): the two items fold into **two zone lines**, each written by the
//!   CPUs allocating from that zone (one node's CPUs). The global array is
//!   `__cacheline_aligned_in_smp` and 6 × 8 bytes: both items fold into **one global line**
//!   written by every CPU.
//! - `NR_FREE_CMA_PAGES` is the last `vm_stat` item (byte 88 or 96), on `NUMA_HIT`'s line; with
//!   `CONFIG_CMA` `zone_watermark_fast()` reads it on every allocation that may not use CMA
//!   (order 0, not movable): every `NUMA_HIT` fold of a zone invalidates a line each CPU of the
//!   node reads once per allocation ([`FoldInputs::cma_read`]).
//!
//! # Cost (ns per allocation of one CPU)
//! Two closed queueing networks solved by [`shared_mva`] and iterated to a fixed point:
//! - zone lines: `W_z` writers (the node's busy CPUs), lines HIT and LOCAL each visited at rate
//!   `1/P` per allocation, service one transfer between cores of one socket;
//! - global line: `W_g` writers (all busy CPUs), visited at rate `2/P`, service one transfer
//!   between random cores of the machine ([`crate::model::lines::mean_core_transfer_ns`]);
//! - each network's think time per allocation is the rest of the allocation's time (its work
//!   and the other network's response), `P` the events between folds.
//!
//! The `cma_read` term: a CPU's read of the `NR_FREE_CMA_PAGES` line misses when another core
//! of the node folded `NUMA_HIT` since its last allocation: `(W_z − a)/P` folds per allocation
//! interval (all CPUs allocate at the same rate), so the miss probability is
//! `1 − exp(−(W_z − a)/P)` (Poisson) and a miss costs one transfer between cores of the socket.
//!
//! # Variants
//! - 5.14+ ([`FoldRule::Never`]): `__count_numa_event()` increments a per-CPU counter that
//!   readers sum; no fold, no shared line on the allocation path.
//! - The `this_cpu_cmpxchg()` update (`mod_zone_state()` with `CONFIG_HAVE_CMPXCHG_LOCAL`, as on
//!   x86, behind the non-`__` `inc_zone_page_state()` family) is not what `zone_statistics()`
//!   calls: it runs with interrupts off and uses the `__` variant. Where the cmpxchg path
//!   is used it folds with `overstep_mode` 1, i.e. [`FoldRule::Overstep`] and the same lines;
//!   only the per-event cycles differ (a local, unlocked `cmpxchg` retried on a race with an
//!   interrupt), and those are a fitted parameter of [`crate::model::vmstat`], not a fold cost.
//!
//! # Not modelled
//! - The periodic `refresh_cpu_vm_stats()` (once a second per CPU): negligible next to the
//!   folds at any threshold of the sweep.
//! - The load that misses on the `NR_FREE_CMA_PAGES` line is charged in full; out-of-order
//!   execution may hide part of it (its value only feeds a predicted branch).

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::model::lines::{active_threads_per_core, mean_core_transfer_ns, shared_mva, Episode};

const INPUT: &str = "numa fold";

/// How a per-CPU NUMA differential folds when it passes the threshold `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FoldRule {
    /// `s8`/`s16` diffs (before 4.15; Kemi Wang's v1 series): add `v + (t >> 1)`, reset to
    /// `−(t >> 1)`: `t + 1 + (t >> 1)` events between folds.
    Overstep,
    /// `u16` diffs (4.15+, v2 of the series): add `v`, reset to 0: `t + 1` events.
    Reset,
    /// No fold on the allocation path (5.14+, f19298b9516c "mm/vmstat: convert NUMA statistics
    /// to basic NUMA counters"): `__count_numa_event()` is a `raw_cpu_inc()` of a per-CPU
    /// counter that readers sum; no shared line is written.
    Never,
}

impl FoldRule {
    /// The rule of `kernel` (`u16` with reset from 4.15, no fold from 5.14).
    pub fn of(kernel: crate::kernel::version::KernelVersion) -> FoldRule {
        if kernel.at_least(5, 14) {
            FoldRule::Never
        } else if kernel.at_least(4, 15) {
            FoldRule::Reset
        } else {
            FoldRule::Overstep
        }
    }

    /// Events of one item between two of its folds at threshold `t` (infinite: never).
    pub fn events_between_folds(self, t: u32) -> f64 {
        match self {
            FoldRule::Overstep => f64::from(t) + 1.0 + f64::from(t >> 1),
            FoldRule::Reset => f64::from(t) + 1.0,
            FoldRule::Never => f64::INFINITY,
        }
    }
}

/// `CONFIG_CMA` of the measured kernels.
///
/// assumed: `CONFIG_CMA=y`, as in the Fedora and Ubuntu x86-64 configurations of 2017; neither
/// thread 002 nor Kemi Wang's series states the configuration. With it `zone_watermark_fast()`
/// reads `NR_FREE_CMA_PAGES`, which shares a line with `NUMA_HIT` (module docs).
pub const CONFIG_CMA_ASSUMED: bool = true;

/// Inputs of one fold estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FoldInputs {
    /// Busy CPUs (all allocating locally, spread evenly over the nodes).
    pub threads: u32,
    /// Events of one item between its folds (`P`).
    pub events_between_folds: f64,
    /// Time of one allocation + free outside the fold and the CMA-line misses, ns.
    pub work_ns: f64,
    /// `zone_watermark_fast()` reads `NR_FREE_CMA_PAGES` on `NUMA_HIT`'s zone line.
    pub cma_read: bool,
}

/// What a fold costs, ns per allocation of one CPU, by term.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FoldCost {
    /// Waiting and transfers at the two zone lines.
    pub zone_ns: f64,
    /// Waiting and transfers at the global line.
    pub global_ns: f64,
    /// Misses of the `NR_FREE_CMA_PAGES` read on `NUMA_HIT`'s zone line.
    pub cma_read_ns: f64,
    /// Writers of each zone line (the node's busy CPUs).
    pub zone_writers: u32,
    /// Transfer between two cores of a node, ns.
    pub zone_transfer_ns: f64,
    /// Transfer between two random busy cores of the machine, ns.
    pub global_transfer_ns: f64,
    /// Utilisation of the global line (transfers per ns × transfer time).
    pub global_utilisation: f64,
}

impl FoldCost {
    /// Total, ns per allocation.
    pub fn total_ns(&self) -> f64 {
        self.zone_ns + self.global_ns + self.cma_read_ns
    }
}

/// Transfer between two cores of one node, ns, when the node lies inside one socket (at least
/// as many nodes as sockets; one LLC domain or several, by the machine file).
fn node_transfer_ns(machine: &Machine) -> f64 {
    let t = &machine.topology;
    machine.c2c_over_llc_domains_ns(f64::from(t.llc_domains_per_socket.value.max(1)))
}

/// The fold's cost on `machine` (module docs).
pub fn fold_cost(machine: &Machine, x: &FoldInputs) -> Result<FoldCost> {
    let cpus = machine.cpus();
    if x.threads == 0 || x.threads > cpus {
        return Err(Error::invalid(
            INPUT,
            "threads",
            format!("must be 1..={cpus} on {}, got {}", machine.name, x.threads),
        ));
    }
    if !(x.events_between_folds.is_finite() && x.events_between_folds >= 1.0) {
        return Err(Error::invalid(
            INPUT,
            "events_between_folds",
            format!("must be ≥ 1, got {}", x.events_between_folds),
        ));
    }
    if !(x.work_ns.is_finite() && x.work_ns > 0.0) {
        return Err(Error::invalid(
            INPUT,
            "work_ns",
            format!("must be > 0, got {}", x.work_ns),
        ));
    }
    let nodes = machine.topology.numa_nodes.value.max(1);
    let a = active_threads_per_core(machine, x.threads);
    let zone_writers = x.threads.div_ceil(nodes).max(1);
    let tx_zone = if nodes >= machine.topology.sockets.value {
        node_transfer_ns(machine)
    } else {
        // A node spanning the sockets: its CPUs are spread over them like the machine's.
        mean_core_transfer_ns(machine, zone_writers)?
    };
    let tx_glob = mean_core_transfer_ns(machine, x.threads)?;
    let p = x.events_between_folds;
    let (hit, local, glob_seq) = ([0usize], [1usize], [0usize]);
    let zone_roles = [vec![
        Episode {
            rate: 1.0 / p,
            visits: &hit,
        },
        Episode {
            rate: 1.0 / p,
            visits: &local,
        },
    ]];
    let glob_roles = [vec![Episode {
        rate: 2.0 / p,
        visits: &glob_seq,
    }]];
    let other_writers = (f64::from(zone_writers) - a).max(0.0);
    let cma_read_ns = if x.cma_read {
        (1.0 - (-other_writers / p).exp()) * tx_zone
    } else {
        0.0
    };
    let (mut zone_ns, mut glob_ns) = (2.0 * tx_zone / p, 2.0 * tx_glob / p);
    let mut u_glob = 0.0;
    for _ in 0..500 {
        let zone = shared_mva(
            zone_writers,
            a,
            x.work_ns + cma_read_ns + glob_ns,
            tx_zone,
            &zone_roles,
            2,
        );
        let glob = shared_mva(
            x.threads,
            a,
            x.work_ns + cma_read_ns + zone_ns,
            tx_glob,
            &glob_roles,
            1,
        );
        u_glob = glob.x * glob.service[0];
        let (z_new, g_new) = (zone.resp.iter().sum::<f64>(), glob.resp[0]);
        let done = (z_new - zone_ns).abs() <= 1e-10 * z_new.max(1e-300)
            && (g_new - glob_ns).abs() <= 1e-10 * g_new.max(1e-300);
        zone_ns = 0.5 * (zone_ns + z_new);
        glob_ns = 0.5 * (glob_ns + g_new);
        if done {
            break;
        }
    }
    Ok(FoldCost {
        zone_ns,
        global_ns: glob_ns,
        cma_read_ns,
        zone_writers,
        zone_transfer_ns: tx_zone,
        global_transfer_ns: tx_glob,
        global_utilisation: u_glob,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::version::KernelVersion;

    #[test]
    fn events_between_folds_follow_the_kernel_code() {
        // v > t folds; overstep t >> 1: 125 -> 126 + 62 events; u16 reset: t + 1.
        assert_eq!(FoldRule::Overstep.events_between_folds(125), 188.0);
        assert_eq!(FoldRule::Reset.events_between_folds(65_533), 65_534.0);
        assert_eq!(FoldRule::of(KernelVersion::new(4, 14)), FoldRule::Overstep);
        assert_eq!(FoldRule::of(KernelVersion::new(4, 15)), FoldRule::Reset);
        assert_eq!(FoldRule::of(KernelVersion::new(5, 14)), FoldRule::Never);
        assert!(FoldRule::Never.events_between_folds(125).is_infinite());
    }

    #[test]
    fn light_load_costs_the_bare_transfers() {
        // One CPU, a fold every 1e6 events: no queue, no other reader; each fold pays one zone
        // and one global transfer, two items: 2 (tx_zone + tx_glob) / P ns per allocation.
        let m = Machine::builtin("broadwell-2s").unwrap();
        let c = fold_cost(
            &m,
            &FoldInputs {
                threads: 1,
                events_between_folds: 1e6,
                work_ns: 100.0,
                cma_read: true,
            },
        )
        .unwrap();
        let bare = 2.0 * (c.zone_transfer_ns + c.global_transfer_ns) / 1e6;
        approx::assert_relative_eq!(c.total_ns(), bare, max_relative = 1e-6);
        assert_eq!(c.cma_read_ns, 0.0);
    }

    #[test]
    fn more_folds_cost_more_per_allocation() {
        let m = Machine::builtin("broadwell-2s").unwrap();
        let at = |p: f64| {
            fold_cost(
                &m,
                &FoldInputs {
                    threads: 88,
                    events_between_folds: p,
                    work_ns: 160.0,
                    cma_read: true,
                },
            )
            .unwrap()
        };
        let (lo, hi) = (at(49.0), at(769.0));
        assert!(lo.total_ns() > hi.total_ns());
        assert_eq!(lo.zone_writers, 44);
        // The zone lines stay inside one socket: the ring transfer, not the machine mix.
        assert_eq!(lo.zone_transfer_ns, m.latency_ns.c2c_same_llc.value);
        assert!(lo.global_transfer_ns > lo.zone_transfer_ns);
        assert!(fold_cost(
            &m,
            &FoldInputs {
                threads: 0,
                events_between_folds: 1.0,
                work_ns: 1.0,
                cma_read: false
            }
        )
        .is_err());
    }
}
