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
//! Two closed queueing networks of writers solved by [`shared_mva`], and one line that is read
//! as well as written, iterated to a fixed point:
//! - zone lines: `W_z` writers (the node's busy CPUs), visited at rate `1/P` per allocation
//!   each, service one transfer between cores of one socket. Without the CMA read both lines
//!   (HIT and LOCAL) are here; with it only LOCAL's;
//! - global line: `W_g` writers (all busy CPUs), visited at rate `2/P`, service one transfer
//!   between random cores of the machine ([`crate::model::lines::mean_core_transfer_ns`]);
//! - with `cma_read`, `NUMA_HIT`'s line is a reader-burst line
//!   ([`crate::model::reader_burst`]): every core of the node reads it on each allocation and
//!   each fold writes it, so after a fold the other cores' next reads all miss within about
//!   one allocation and queue at the line's home, which serves them one after another (the
//!   law of ticket-lock collapse, Boyd-Wickizer et al. 2012). A write and the first read after
//!   it cost one transfer between cores; each later read an LLC hit when the LLC is inclusive
//!   (the first fill left the line there), else a transfer. The loop of the node's threads is
//!   simulated (or, when the home is nearly idle, its isolated bursts averaged);
//! - each part's think time per allocation is the rest of the allocation's time (its work and
//!   the other parts), `P` the events between folds.
//!
//! Charging the CMA read as a Poisson miss probability `1 − exp(−(W_z − a)/P)` times one
//! transfer, i.e. without the readers queueing behind each other, leaves Kemi Wang's sweep
//! 25-40 % low below threshold 256 (`validate --thread literature`).
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
//! - The global line is read by no one on the allocation path: it stays a writers-only queue.

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::model::lines::{
    active_threads_per_core, from_other_core_ns, mean_core_transfer_ns, shared_mva, Episode,
};
use crate::model::reader_burst::{burst_cost, BurstInputs};

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
    /// Utilisation of `NUMA_HIT`'s zone line at its home (the fold's writes and the readers'
    /// re-reads of `NR_FREE_CMA_PAGES`; 0 without the CMA read).
    pub cma_line_utilisation: f64,
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
    // With the CMA read, NUMA_HIT's line is read by every core of the node on each allocation:
    // it is a reader-burst line (crate::model::reader_burst), and only NUMA_LOCAL's line is a
    // writers-only queue. Without it, both zone lines are writers-only queues.
    let (hit, local, glob_seq) = ([0usize], [1usize], [0usize]);
    let zone_roles = if x.cma_read {
        // NUMA_LOCAL's line alone, as line 0.
        vec![vec![Episode {
            rate: 1.0 / p,
            visits: &hit,
        }]]
    } else {
        vec![vec![
            Episode {
                rate: 1.0 / p,
                visits: &hit,
            },
            Episode {
                rate: 1.0 / p,
                visits: &local,
            },
        ]]
    };
    let zone_lines = zone_roles[0].len();
    let glob_roles = [vec![Episode {
        rate: 2.0 / p,
        visits: &glob_seq,
    }]];
    let reread_ns = from_other_core_ns(machine, tx_zone);
    let tpc = a.round().max(1.0);
    let burst_cores = (f64::from(zone_writers) / tpc).round().max(1.0) as u32;
    // The two writers-only queues (zone, global) for a fixed CMA-line cost (`cma` reads and
    // `hit` for the fold's own write, ns per allocation): the damped fixed point of the MVAs.
    let queues = |cma: f64, hit: f64| {
        let (mut zone_ns, mut glob_ns) = (2.0 * tx_zone / p, 2.0 * tx_glob / p);
        let mut u_glob = 0.0;
        for _ in 0..500 {
            let zone = shared_mva(
                zone_writers,
                a,
                x.work_ns + cma + glob_ns + hit,
                tx_zone,
                &zone_roles,
                zone_lines,
            );
            let glob = shared_mva(
                x.threads,
                a,
                x.work_ns + cma + zone_ns,
                tx_glob,
                &glob_roles,
                1,
            );
            u_glob = glob.x * glob.service[0];
            let (z_new, g_new) = (zone.resp.iter().sum::<f64>() + hit, glob.resp[0]);
            let close = |new: f64, old: f64| (new - old).abs() <= 1e-10 * new.max(1e-300);
            let done = close(z_new, zone_ns) && close(g_new, glob_ns);
            zone_ns = 0.5 * (zone_ns + z_new);
            glob_ns = 0.5 * (glob_ns + g_new);
            if done {
                break;
            }
        }
        (zone_ns, glob_ns, u_glob)
    };
    // The CMA line for a time per allocation `other` outside it: (reads, the fold's own
    // write, utilisation), ns per allocation.
    let line = |other: f64| -> Result<(f64, f64, f64)> {
        if burst_cores <= 1 {
            // One core: no other reader; its own fold is one transfer.
            return Ok((0.0, tx_zone / p, 0.0));
        }
        let b = burst_cost(&BurstInputs {
            cores: burst_cores,
            threads_per_core: tpc as u32,
            other_ns: other,
            ops_between_writes: p.round().max(1.0) as u64,
            write_ns: tx_zone,
            first_read_ns: tx_zone,
            reread_ns,
        })?;
        Ok((b.read_ns, b.write_ns, b.utilisation))
    };
    // Fixed point between the line (simulated given the rest of the allocation's time) and
    // the writers-only queues (given the line's cost). Plain iteration while it contracts (the
    // line's share is small: two or three steps); damped by half once a step grows. The
    // closed simulation moves in small steps as its input moves (event order), so the loop
    // also stops after 40 simulations.
    let (mut cma, mut hit, mut u_hit) = (0.0, 0.0, 0.0);
    let (mut zone_ns, mut glob_ns, mut u_glob) = queues(cma, hit);
    let (mut damp, mut last_step) = (1.0, f64::INFINITY);
    for _ in 0..40 {
        if !x.cma_read {
            break;
        }
        let (c_new, h_new, u) = line(x.work_ns + (zone_ns - hit) + glob_ns)?;
        u_hit = u;
        let step = (c_new - cma).abs() + (h_new - hit).abs();
        // Converged when the line's terms move less than 1e-7 of the allocation's time.
        let done = step <= 1e-7 * (x.work_ns + zone_ns + glob_ns);
        if step > last_step {
            damp = 0.5;
        }
        last_step = step;
        (cma, hit) = if done {
            (c_new, h_new)
        } else {
            (cma + damp * (c_new - cma), hit + damp * (h_new - hit))
        };
        (zone_ns, glob_ns, u_glob) = queues(cma, hit);
        if done || burst_cores <= 1 {
            break;
        }
    }
    Ok(FoldCost {
        zone_ns,
        global_ns: glob_ns,
        cma_read_ns: cma,
        zone_writers,
        zone_transfer_ns: tx_zone,
        global_transfer_ns: tx_glob,
        global_utilisation: u_glob,
        cma_line_utilisation: u_hit,
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
