//! zone->lock under thread 000's mmap/fill/munmap loop: pages per lock hold from the kernel's own
//! per-CPU batch state, hold times from where the touched lines were last written, and the
//! latency distribution of `rmqueue_bulk()` (wait + hold) from the finite-source queue of
//! [`crate::model::lock`].
//!
//! [`generic`] extends it to any allocation loop of one order (kind `alloc-loop`: freed by the
//! task in phases, interleaved, or after the interval); thread 000's loop is its `Phases` case.
//!
//! # Equations
//! **1. Pages per hold.** One CPU's pageset of its node's Normal zone (`PcpState`, the kernel's
//! `nr_pcp_alloc()` / `nr_pcp_high()` / `nr_pcp_free()` for the version, `mm/page_alloc.c`
//! 6.7–6.18) is stepped through one iteration of the loop after one warm-up iteration: an
//! allocation phase of `A = pages_per_iteration` order-0 allocations, then a free phase of `A`
//! frees ([`mmap_fill_dynamics`]). Each refill (`rmqueue_bulk()`) and each drain
//! (`free_pcppages_bulk()`) is one zone->lock hold of `n` pages; the result is the two
//! distributions `{(n, count)}` per iteration. With `CONFIG_PCP_BATCH_SCALE_MAX = S` a process
//! that keeps allocating ramps `alloc_factor` to `S` (refills of `63, 126, …, 63 << S`), and the
//! free phase drains `clamp(free_count, batch, high − batch)` = `batch << S` pages per hold once
//! `free_count` saturates. Runs of identical state are fast-forwarded (exact: the state repeats).
//!
//! **2. Hold time of `n` pages.**
//! `H = fixed_ns + n · (cpu_ns_per_page + lines_per_page · x)`, where `x` is the cost of one
//! `struct page` line, given where it was last written:
//! - refill: the pages come off the buddy free lists where another process's free phase put them
//!   (the lists are LIFO at their heads), so the line is in the freeing CPU's cache: the freeing
//!   process is any of the zone's `N` processes with equal probability; itself (`1/N`, freed a
//!   phase ago: `dram_local`), another in the same LLC domain (`c2c_same_llc`), another LLC
//!   domain (`c2c_cross_llc`, AMD CCDs). Procs are spread round-robin over the node's LLC
//!   domains. One hold's pages come from one freer (contiguous blocks), so the hold law is a
//!   mixture of atoms, one per (pages, placement).
//! - free: the pages on the PCP list were just unmapped by the same CPU (their `struct page`s
//!   are in its L2): `x = l2_hit`.
//!
//! `fixed_ns` covers the lock hand-over (lock word, `zone` and `free_area` lines moving to the new
//! holder), per-call work and the funclatency probes; `lines_per_page` is the effective number of
//! *serialised* line transfers per page (list pointer chasing serialises; prefetch overlaps the
//! rest).
//!
//! **3. Think time.** A process spends `work_ns_per_page` per page outside the lock (fault,
//! zeroing, the user's write, unmap), a share [`ALLOC_WORK_SHARE`] in the allocation phase. A
//! refill of `n` pages is followed by `n · alloc_share · work` ns before the next lock request,
//! a drain of `n` by `n · (1 − alloc_share) · work`.
//!
//! **4. The lock.** Per zone: `N` processes, two holder classes (refill, free) mixed in the
//! proportion of their counts per iteration ([`LockQueue`], finite-source FIFO, solved exactly
//! for the means by Takács' M/G/1//N with the class think means aggregated, see
//! [`crate::model::lock`]). The `rmqueue_bulk()` latency is the refill class's wait + hold
//! distribution. With several nodes in use each node's zone has its own lock and its share of the
//! processes; the machine's histogram is the mixture weighted by refill throughput.
//!
//! **5. Outputs.** `calls_per_s = Σ_zones X_refill`, `pages_per_s = Σ_zones X_refill · n̄_refill`,
//! lock utilisation per zone, mean / p50 / p99 / p99.9 and funclatency log2 buckets.
//!
//! # Assumptions
//! - One process per CPU, no migration, no other zone->lock users (kswapd, compaction, other
//!   allocations: the 1–3 % of calls below 4 µs in the measured histograms are not modelled).
//! - No `decay_pcp_high()`: the vmstat tick lowers `pcp->high` by 1/8 per second and drains the
//!   excess in holds of at most `batch << S`; over a multi-second phase this moves a few % of the
//!   pages (named in the notes of `latency`).
//! - A KVM guest's vCPUs are not preempted while holding the lock (lock-holder preemption would
//!   add a tail the model does not have: thread 000's EPYC histogram reaches 33 ms).
//! - The zone never runs short: `rmqueue_bulk()` always gets its `n` pages.
//!
//! # Validity
//! Order-0 loops on kernels with `CONFIG_PCP_BATCH_SCALE_MAX` (6.7–6.18; 6.6 with the backport is
//! accepted by the kernel module but untested here); 1 ≤ procs ≤ CPUs of the nodes used.
//!
//! # References
//! - Seed 000 (Yafang Shao, "[PATCH v2 3/3] mm/page_alloc: Introduce a new sysctl knob
//!   vm.pcp_batch_scale_max", 2024-07): the workload and the five funclatency histograms.
//! - `mm/page_alloc.c` (6.10): `rmqueue_bulk()` (one `spin_lock_irqsave(&zone->lock)` around
//!   `__rmqueue()` per page), `free_pcppages_bulk()` (one hold around `__free_one_page()` per
//!   page), `nr_pcp_alloc()`, `nr_pcp_free()`, `nr_pcp_high()`; `shared/design/kernel-pcp.md`.
//! - L. Takács, *Introduction to the Theory of Queues*, 1962 (finite-source M/G/1).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::config::{configure, KernelConfig, KernelOptions};
use crate::kernel::version::KernelVersion;
use crate::memo::Memo;
use crate::model::lock::{Dist, LockQueue};
use crate::model::zones::{zone_shares, NodeSpan};

pub mod generic;
pub mod mmap_fill;
pub use generic::{Freeing, LoopShape, LoopTally, PcpOverride, Tally, ThinkRule};
use mmap_fill::MmapFill;

/// Share of the per-page work outside the lock spent in the allocation phase (fault entry,
/// zeroing, the user's write and copy); the rest is the unmap. Assumed: the fault path zeroes
/// and the script writes each page twice (memset of the temporary, copy into the mapping), while
/// the unmap only drops references.
pub const ALLOC_WORK_SHARE: f64 = 0.75;

/// CPU work per page under the lock apart from line transfers, in cycles (`__rmqueue()` /
/// `__free_one_page()` list manipulation, flag checks). Assumed: about 60 cycles.
pub const CPU_CYCLES_PER_PAGE: f64 = 60.0;

/// Remote lines per page a drain touches besides the page's own: each `__free_one_page()` merge
/// unlinks the buddy from its free list (`list_del` writes the buddy's list neighbours, blocks
/// other CPUs freed), and a full merge to `MAX_PAGE_ORDER` takes one merge per page. Assumed 1.
pub const FREE_MERGE_LINES: f64 = 2.0;

/// Kernel of thread 000: "the upstream kernel" of July 2024.
pub const KERNEL_000: KernelVersion = KernelVersion {
    major: 6,
    minor: 10,
};

/// Names of the free parameters, in [`ZoneLockParams::to_vec`] order.
pub const PARAM_NAMES: [&str; 3] = ["fixed_ns", "lines_per_page", "work_ns_per_page"];

/// The free parameters (per machine).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ZoneLockParams {
    /// Fixed cost of one lock hold, ns (hand-over, per-call work, probes). Bounds 50..20 000.
    pub fixed_ns: f64,
    /// Effective serialised `struct page` line transfers per page moved. Bounds 0.02..8.
    pub lines_per_page: f64,
    /// Time one page costs outside zone->lock (fault, fill, unmap), ns. Bounds 50..50 000.
    pub work_ns_per_page: f64,
}

impl Default for ZoneLockParams {
    fn default() -> Self {
        ZoneLockParams {
            fixed_ns: 1500.0,
            lines_per_page: 0.5,
            work_ns_per_page: 1000.0,
        }
    }
}

impl ZoneLockParams {
    /// Lower bounds, in [`PARAM_NAMES`] order.
    pub const LOWER: [f64; 3] = [50.0, 0.02, 50.0];
    /// Upper bounds, in [`PARAM_NAMES`] order.
    pub const UPPER: [f64; 3] = [20_000.0, 8.0, 50_000.0];

    /// As a vector in [`PARAM_NAMES`] order.
    pub fn to_vec(&self) -> Vec<f64> {
        vec![self.fixed_ns, self.lines_per_page, self.work_ns_per_page]
    }

    /// From a slice in [`PARAM_NAMES`] order, checked against the bounds.
    pub fn from_slice(v: &[f64]) -> Result<ZoneLockParams> {
        if v.len() != 3 {
            return Err(Error::invalid(
                "zone-lock parameters",
                "params",
                format!("need 3 values, got {}", v.len()),
            ));
        }
        for (i, x) in v.iter().enumerate() {
            if !(x.is_finite() && *x >= Self::LOWER[i] * 0.999 && *x <= Self::UPPER[i] * 1.001) {
                return Err(Error::invalid(
                    "zone-lock parameters",
                    PARAM_NAMES[i],
                    format!("{x} is outside {}..{}", Self::LOWER[i], Self::UPPER[i]),
                ));
            }
        }
        Ok(ZoneLockParams {
            fixed_ns: v[0],
            lines_per_page: v[1],
            work_ns_per_page: v[2],
        })
    }
}

/// Pages per zone->lock hold over one steady iteration of one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchDynamics {
    /// `(pages, holds)` of `rmqueue_bulk()` refills, ascending pages.
    pub refill: Vec<(u32, u64)>,
    /// `(pages, holds)` of `free_pcppages_bulk()` drains, ascending pages.
    pub free: Vec<(u32, u64)>,
    /// Pages allocated (and freed) per iteration.
    pub pages_per_iteration: u64,
    /// `pcp->batch`.
    pub batch_pages: u32,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` in effect.
    pub scale_max: Option<u8>,
    /// Pages left on the PCP list at the end of the free phase (served without refill next time).
    pub leftover_pages: u32,
    /// The loop (order, how it frees).
    pub shape: LoopShape,
    /// Steps, pages held, free_high drains and bypassing allocations of the recorded iteration.
    pub tally: LoopTally,
}

impl BatchDynamics {
    /// Refill holds per iteration.
    pub fn refills(&self) -> u64 {
        self.refill.iter().map(|r| r.1).sum()
    }

    /// Drain holds per iteration.
    pub fn drains(&self) -> u64 {
        self.free.iter().map(|r| r.1).sum()
    }

    /// Mean pages per refill.
    pub fn mean_refill_pages(&self) -> f64 {
        mean_pages(&self.refill)
    }

    /// Mean pages per drain.
    pub fn mean_free_pages(&self) -> f64 {
        mean_pages(&self.free)
    }
}

fn mean_pages(v: &[(u32, u64)]) -> f64 {
    let n: u64 = v.iter().map(|r| r.1).sum();
    if n == 0 {
        return 0.0;
    }
    v.iter().map(|r| f64::from(r.0) * r.1 as f64).sum::<f64>() / n as f64
}

/// Steps the pageset of `node`'s Normal zone through one warm-up and one recorded iteration of
/// `pages_per_iteration` allocations then as many frees (see the module docs, item 1).
pub fn mmap_fill_dynamics(
    cfg: &KernelConfig,
    node: u32,
    pages_per_iteration: u64,
) -> Result<BatchDynamics> {
    if pages_per_iteration == 0 {
        return Err(Error::invalid(
            "workload mmap-fill",
            "pages_per_iteration",
            "must be at least 1",
        ));
    }
    loop_batch_dynamics(
        cfg,
        node,
        &LoopShape {
            order: 0,
            freeing: Freeing::Phases(pages_per_iteration),
        },
    )
}

/// Pages per hold of any loop shape ([`generic::loop_dynamics`]) as [`BatchDynamics`].
pub fn loop_batch_dynamics(
    cfg: &KernelConfig,
    node: u32,
    shape: &LoopShape,
) -> Result<BatchDynamics> {
    let (refill, free, tally, st) = generic::loop_dynamics(cfg, node, shape)?;
    Ok(BatchDynamics {
        refill,
        free,
        pages_per_iteration: shape.allocs_per_iteration() << shape.order,
        batch_pages: st.batch_pages,
        scale_max: st.pcp_batch_scale_max(),
        leftover_pages: st.count_pages,
        shape: *shape,
        tally,
    })
}

/// Where a refill's `struct page` lines were last written: probability and cost per line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LineSource {
    /// Who wrote them: `self`, `same-llc`, `cross-llc`.
    pub name: &'static str,
    /// Probability.
    pub probability: f64,
    /// Cost of one line, ns.
    pub line_ns: f64,
}

/// The line sources of a refill for `procs` processes on one node of `machine` (module docs,
/// item 2).
pub fn refill_line_sources(machine: &Machine, procs: u32) -> Vec<LineSource> {
    let lat = &machine.latency_ns;
    let n = procs.max(1);
    let domains = machine.topology.llc_domains_per_socket.value.max(1)
        * (machine.topology.sockets.value.max(1) / machine.topology.numa_nodes.value.max(1)).max(1);
    let mut per_domain = vec![0u64; domains as usize];
    for i in 0..n {
        per_domain[(i % domains) as usize] += 1;
    }
    let pairs_same: u64 = per_domain.iter().map(|m| m * m.saturating_sub(1)).sum();
    let nn = u64::from(n);
    let p_self = 1.0 / f64::from(n);
    let (p_same, p_cross) = if n > 1 {
        let all = (nn * (nn - 1)) as f64;
        let same = pairs_same as f64 / all;
        ((1.0 - p_self) * same, (1.0 - p_self) * (1.0 - same))
    } else {
        (0.0, 0.0)
    };
    let cross_ns = lat
        .c2c_cross_llc
        .as_ref()
        .map_or(lat.c2c_same_llc.value, |s| s.value);
    let mut v = vec![LineSource {
        name: "self",
        probability: p_self,
        line_ns: lat.dram_local.value,
    }];
    if p_same > 0.0 {
        v.push(LineSource {
            name: "same-llc",
            probability: p_same,
            line_ns: lat.c2c_same_llc.value,
        });
    }
    if p_cross > 0.0 {
        v.push(LineSource {
            name: "cross-llc",
            probability: p_cross,
            line_ns: cross_ns,
        });
    }
    v
}

/// The model of one machine under thread 000's loop.
#[derive(Debug, Clone)]
pub struct ZoneLockModel {
    /// Machine.
    pub machine: Machine,
    /// Kernel version.
    pub kernel: KernelVersion,
    /// CPU ns per page under the lock besides line transfers ([`CPU_CYCLES_PER_PAGE`] at the
    /// machine's maximum clock).
    pub cpu_ns_per_page: f64,
    /// Cost of a line the freeing CPU itself wrote just before (L2 hit), ns.
    pub own_line_ns: f64,
    /// The hold composed from the code ([`crate::model::hold`]) in place of the fitted
    /// `fixed_ns` and `lines_per_page` on both sides: refills by block, checked page and
    /// stream, drains by block freed (None: thread 000's parametrised hold).
    pub code_hold: Option<crate::model::hold::CodeHold>,
    /// How the blocks of the flow lie and who touched them last, for the code-composed hold
    /// ([`crate::model::hold::BlockPattern`]; scattered unless a kind knows its tasks free
    /// their own pages in bulk).
    pub block_pattern: crate::model::hold::BlockPattern,
    /// Extra time of every acquisition's hand-over when zone->lock is a ticket spinlock: the
    /// lock line reaches the next ticket holder after on average half of the waiters have
    /// re-read it ([`crate::model::hold::ticket_handoff`]); 0 for queued spinlocks.
    pub handoff_extra_ns: f64,
}

/// One zone's solution.
#[derive(Debug, Clone, Serialize)]
pub struct ZonePrediction {
    /// Node of the zone.
    pub node: u32,
    /// Processes using it.
    pub procs: u32,
    /// Pages per hold.
    pub dynamics: BatchDynamics,
    /// Where refill lines come from.
    pub line_sources: Vec<LineSource>,
    /// Fraction of time the lock is held.
    pub lock_utilisation: f64,
    /// Refill (`rmqueue_bulk()`) calls per second.
    pub refill_per_s: f64,
    /// Drain (`free_pcppages_bulk()`) holds per second.
    pub free_per_s: f64,
    /// Mean refill hold, ns.
    pub refill_hold_ns: f64,
    /// Mean drain hold, ns.
    pub free_hold_ns: f64,
    /// Mean refill wait, ns.
    pub refill_wait_ns: f64,
    /// Mean refill latency (wait + hold), ns.
    pub refill_latency_ns: f64,
    /// Mean drain wait, ns.
    pub free_wait_ns: f64,
    /// Refill wait's p50 and p99, ns (NaN unless the distribution was asked for).
    pub refill_wait_q_ns: [f64; 2],
    /// Drain wait's p50 and p99, ns (NaN unless the distribution was asked for).
    pub free_wait_q_ns: [f64; 2],
    /// Whether the solver was exact for these inputs.
    pub exact: bool,
    /// Refill latency distribution.
    #[serde(skip)]
    pub dist: Option<Dist>,
    /// The LRU lock in series with this zone's lock ([`crate::model::lrulock`]; None: the
    /// workload's pages do not go on the LRU, or thread 000's fitted model).
    pub lru: Option<crate::model::lrulock::LruOutcome>,
}

/// The machine-level prediction.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Mean `rmqueue_bulk()` latency, ns.
    pub avg_ns: f64,
    /// `rmqueue_bulk()` calls per second, all zones.
    pub calls_per_s: f64,
    /// Pages refills move from the buddy lists per second, all processes (`rmqueue_bulk()`
    /// calls times their pages): the pages allocated when nothing is freed in the interval,
    /// fewer when frees refill the PCP lists (then see the `alloc-loop` kind's
    /// `pages_allocated_per_s`).
    pub pages_per_s: f64,
    /// Lock utilisation (the busiest zone).
    pub lock_utilisation: f64,
    /// A ticket lock's hand-off growth added to every hold, ns (0: queued spinlock).
    pub handoff_extra_ns: f64,
    /// Per zone.
    pub zones: Vec<ZonePrediction>,
}

impl Prediction {
    /// The machine-level prediction from its zones' solutions.
    pub fn from_zones(zones: Vec<ZonePrediction>, handoff_extra_ns: f64) -> Prediction {
        let calls: f64 = zones.iter().map(|z| z.refill_per_s).sum();
        let avg = if calls > 0.0 {
            zones
                .iter()
                .map(|z| z.refill_per_s * z.refill_latency_ns)
                .sum::<f64>()
                / calls
        } else {
            f64::NAN
        };
        let pages: f64 = zones
            .iter()
            .map(|z| z.refill_per_s * z.dynamics.mean_refill_pages())
            .sum();
        let util = zones.iter().map(|z| z.lock_utilisation).fold(0.0, f64::max);
        Prediction {
            avg_ns: avg,
            calls_per_s: calls,
            pages_per_s: pages,
            lock_utilisation: util,
            handoff_extra_ns,
            zones,
        }
    }

    /// Refill-throughput weights of the zones.
    fn weights(&self) -> Vec<f64> {
        let tot: f64 = self.zones.iter().map(|z| z.refill_per_s).sum();
        self.zones
            .iter()
            .map(|z| if tot > 0.0 { z.refill_per_s / tot } else { 0.0 })
            .collect()
    }

    fn dists(&self) -> Result<Vec<(f64, &Dist)>> {
        self.weights()
            .into_iter()
            .zip(&self.zones)
            .filter(|(w, z)| *w > 0.0 || z.dist.is_some())
            .map(|(w, z)| {
                z.dist.as_ref().map(|d| (w, d)).ok_or_else(|| {
                    Error::Unsupported(
                        "the prediction was made without the latency distribution".to_string(),
                    )
                })
            })
            .collect()
    }

    /// `P(latency ≤ x_ns)`.
    pub fn cdf(&self, x_ns: f64) -> Result<f64> {
        Ok(self.dists()?.iter().map(|(w, d)| w * d.cdf(x_ns)).sum())
    }

    /// Latency quantile, ns.
    pub fn quantile(&self, p: f64) -> Result<f64> {
        let ds = self.dists()?;
        if ds.len() == 1 {
            return ds[0].1.quantile(p);
        }
        if !(p > 0.0 && p < 1.0) {
            return Err(Error::invalid(
                "quantile",
                "p",
                format!("must be in (0, 1), got {p}"),
            ));
        }
        let mut lo: f64 = 0.0;
        let mut hi: f64 = 1.0;
        for (_, d) in &ds {
            hi = hi.max(d.quantile(p)?);
        }
        let cdf = |x: f64| ds.iter().map(|(w, d)| w * d.cdf(x)).sum::<f64>();
        while cdf(hi) < p {
            hi *= 2.0;
            if !hi.is_finite() {
                return Err(Error::Unsupported(
                    "latency quantile: no bracket".to_string(),
                ));
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if cdf(mid) >= p {
                hi = mid;
            } else {
                lo = mid;
            }
            if hi - lo <= 1e-9 * hi {
                break;
            }
        }
        Ok(hi)
    }

    /// funclatency log2 buckets `2^e .. 2^(e+1)-1` ns for e in `lo_exp..=hi_exp`, fractions of
    /// all calls.
    pub fn log2_fractions(&self, lo_exp: u32, hi_exp: u32) -> Result<Vec<(u64, u64, f64)>> {
        let ds = self.dists()?;
        let mut out: Vec<(u64, u64, f64)> = Vec::new();
        for (w, d) in ds {
            let b = d.log2_buckets(lo_exp, hi_exp)?;
            if out.is_empty() {
                out = b.iter().map(|b| (b.lo_ns, b.hi_ns, 0.0)).collect();
            }
            for (o, b) in out.iter_mut().zip(&b) {
                o.2 += w * b.mass;
            }
        }
        Ok(out)
    }
}

impl ZoneLockModel {
    /// The model for `machine` on `kernel`.
    pub fn new(machine: &Machine, kernel: KernelVersion) -> Result<ZoneLockModel> {
        let ghz = machine
            .clock
            .max_ghz
            .as_ref()
            .map_or(machine.clock.base_ghz.value, |s| s.value);
        if !(ghz.is_finite() && ghz > 0.0) {
            return Err(Error::invalid(
                format!("machine {}", machine.name),
                "clock.max_ghz",
                "must be > 0",
            ));
        }
        Ok(ZoneLockModel {
            machine: machine.clone(),
            kernel,
            cpu_ns_per_page: crate::assumptions::value(
                "zonelock::CPU_CYCLES_PER_PAGE",
                CPU_CYCLES_PER_PAGE,
            ) / ghz,
            own_line_ns: machine.latency_ns.l2_hit.value,
            code_hold: None,
            block_pattern: crate::model::hold::BlockPattern::Scattered,
            handoff_extra_ns: 0.0,
        })
    }

    /// The kernel configuration with `CONFIG_PCP_BATCH_SCALE_MAX = scale_max`.
    pub fn kernel_config(&self, scale_max: u8) -> Result<KernelConfig> {
        configure(
            &self.machine,
            self.kernel,
            KernelOptions {
                pcp_batch_scale_max: Some(scale_max),
                ..KernelOptions::default()
            },
        )
    }

    /// The kernel configuration with `CONFIG_PCP_BATCH_SCALE_MAX` given or the kernel's default
    /// (None: 5 from 6.7, absent before).
    pub fn kernel_config_opt(&self, scale_max: Option<u8>) -> Result<KernelConfig> {
        configure(
            &self.machine,
            self.kernel,
            KernelOptions {
                pcp_batch_scale_max: scale_max,
                ..KernelOptions::default()
            },
        )
    }

    /// Pages per hold for each zone the workload uses.
    pub fn dynamics(&self, w: &MmapFill, scale_max: u8) -> Result<Vec<(u32, u32, BatchDynamics)>> {
        w.validate(&self.machine)?;
        let cfg = self.kernel_config(scale_max)?;
        zone_shares(&self.machine, w.procs, w.nodes)
            .into_iter()
            .map(|z| {
                Ok((
                    z.node,
                    z.procs,
                    mmap_fill_dynamics(&cfg, z.node, w.pages_per_iteration())?,
                ))
            })
            .collect()
    }

    /// The lock queue of one zone.
    pub fn queue(
        &self,
        p: &ZoneLockParams,
        procs: u32,
        dyn_: &BatchDynamics,
        sources: &[LineSource],
    ) -> Result<LockQueue> {
        let refills = dyn_.refills();
        let drains = dyn_.drains();
        if refills == 0 || drains == 0 {
            return Err(Error::Unsupported(format!(
                "the loop takes no zone->lock hold on one side ({refills} refills, {drains} drains per iteration)"
            )));
        }
        let share = crate::assumptions::value("zonelock::ALLOC_WORK_SHARE", ALLOC_WORK_SHARE);
        self.queue_loop(p, procs, dyn_, sources, share, ThinkRule::BlocksMoved)?
            .ok_or_else(|| Error::Unsupported("the loop takes no zone->lock hold".to_string()))
    }

    /// Predicts the workload with `CONFIG_PCP_BATCH_SCALE_MAX = scale_max`. With
    /// `distribution` the latency distribution of each zone is built too (needed for quantiles
    /// and histograms; the means do not need it).
    pub fn predict(
        &self,
        p: &ZoneLockParams,
        w: &MmapFill,
        scale_max: u8,
        distribution: bool,
    ) -> Result<Prediction> {
        let dyns = self.dynamics(w, scale_max)?;
        self.predict_with(p, &dyns, distribution)
    }

    /// As [`ZoneLockModel::predict`] with the batch dynamics already computed.
    pub fn predict_with(
        &self,
        p: &ZoneLockParams,
        dyns: &[(u32, u32, BatchDynamics)],
        distribution: bool,
    ) -> Result<Prediction> {
        let share = crate::assumptions::value("zonelock::ALLOC_WORK_SHARE", ALLOC_WORK_SHARE);
        self.predict_loop(p, dyns, share, false, ThinkRule::BlocksMoved, distribution)
    }
}

/// Gives `model` the refill hold composed from the code ([`crate::model::hold`]) at the clock its
/// CPU work under the lock runs at, as every workload uses but one whose lock is fitted (the
/// `alloc-loop` kind's `lock_fitted` keeps its fitted hold); returns the hold for the caller's
/// provenance.
pub fn with_code_hold(model: &mut ZoneLockModel) -> crate::model::hold::CodeHold {
    let ghz = crate::assumptions::value("zonelock::CPU_CYCLES_PER_PAGE", CPU_CYCLES_PER_PAGE)
        / model.cpu_ns_per_page;
    let hold = crate::model::hold::CodeHold::new(&model.machine, model.kernel, ghz);
    model.code_hold = Some(hold.clone());
    hold
}

/// Convenience: thread 000's workload on `nodes`, with `procs` processes.
pub fn workload_000(procs: u32, nodes: NodeSpan) -> MmapFill {
    MmapFill {
        procs,
        ..MmapFill::thread_000(nodes)
    }
}

// ---------------------------------------------------------------------------------------------
// Fitting
// ---------------------------------------------------------------------------------------------

/// `quantity` code of an `avg_ns` row in [`ZoneLockFit`] data.
pub const Q_AVG_NS: f64 = 0.0;
/// `quantity` code of a `calls_per_s` row in [`ZoneLockFit`] data.
pub const Q_CALLS_PER_S: f64 = 1.0;

/// A fit model's memo of [`ZoneLockModel::dynamics`], keyed by (scale, procs, nodes used): a
/// fit evaluates the same few cases for every parameter vector, and the dynamics do not depend
/// on the parameters.
type DynCache = Memo<(u8, u32, u32), Vec<(u32, u32, BatchDynamics)>>;

fn cached_dynamics(
    model: &ZoneLockModel,
    cache: &DynCache,
    w: &MmapFill,
    scale: u8,
) -> Result<Vec<(u32, u32, BatchDynamics)>> {
    let key = (scale, w.procs, w.nodes.nodes_on(&model.machine));
    cache.get_or_try(key, || model.dynamics(w, scale))
}

fn param_specs(model: &ZoneLockModel) -> Vec<crate::fit::ParamSpec> {
    use crate::fit::ParamSpec;
    let d = default_params(model);
    vec![
        ParamSpec::new("fixed_ns", "ns", d.fixed_ns)
            .with_bounds(ZoneLockParams::LOWER[0], ZoneLockParams::UPPER[0])
            .with_provenance(format!(
                "derived: {PROBE_NS} ns of funclatency kprobe+kretprobe (assumed) + {HANDOVER_LINES} zone lines moved at each hand-over x {:.0} ns (the refill line mix of machine {})",
                d.fixed_ns.max(PROBE_NS) - PROBE_NS,
                model.machine.name
            ))
            .with_description("fixed cost of one zone->lock hold"),
        ParamSpec::new("lines_per_page", "lines", d.lines_per_page)
            .with_bounds(ZoneLockParams::LOWER[1], ZoneLockParams::UPPER[1])
            .with_provenance("assumed: start value; one struct page line per page, half of it overlapped by prefetch")
            .with_description("effective serialised struct-page line transfers per page moved under the lock"),
        ParamSpec::new("work_ns_per_page", "ns", d.work_ns_per_page)
            .with_bounds(ZoneLockParams::LOWER[2], ZoneLockParams::UPPER[2])
            .with_provenance("assumed: start value; a 4 KiB fault with zeroing, two user writes and the unmap, about 1 us")
            .with_description("time one page costs outside zone->lock (fault, fill, unmap)"),
    ]
}

/// funclatency's kprobe + kretprobe overhead counted in each measured call, ns (assumed: BCC
/// probes cost a few hundred ns each on these CPUs).
pub const PROBE_NS: f64 = 600.0;

/// Lines of `struct zone` that move to a new lock holder at each hand-over (lock word,
/// `free_area` heads of the orders split or merged, counters). Assumed.
pub const HANDOVER_LINES: f64 = 8.0;

/// Default (prior) parameters of a machine: `fixed_ns` derived from [`PROBE_NS`] and
/// [`HANDOVER_LINES`] times the mean refill line cost of 10 processes on one node; the other two
/// are start values.
pub fn default_params(model: &ZoneLockModel) -> ZoneLockParams {
    let src = refill_line_sources(&model.machine, 10);
    let x: f64 = src.iter().map(|s| s.probability * s.line_ns).sum();
    ZoneLockParams {
        fixed_ns: crate::assumptions::value("zonelock::PROBE_NS", PROBE_NS)
            + crate::assumptions::value("zonelock::HANDOVER_LINES", HANDOVER_LINES) * x,
        ..ZoneLockParams::default()
    }
}

/// Thread 000's loop as a [`FitModel`](crate::fit::FitModel) over summary rows: inputs
/// `scale_max`, `procs`, `nodes` (NUMA nodes used: 1, or the machine's count for all),
/// `quantity` ([`Q_AVG_NS`] or [`Q_CALLS_PER_S`]); target `value`.
pub struct ZoneLockFit {
    /// The machine model.
    pub model: ZoneLockModel,
    cache: DynCache,
}

impl ZoneLockFit {
    /// For `machine` on thread 000's kernel.
    pub fn new(machine: &Machine) -> Result<ZoneLockFit> {
        Ok(ZoneLockFit {
            model: ZoneLockModel::new(machine, KERNEL_000)?,
            cache: DynCache::default(),
        })
    }

    /// The workload and scale of one input row.
    pub fn case(&self, x: &[f64]) -> Result<(MmapFill, u8)> {
        let [scale, procs, nodes, _q] = x else {
            return Err(Error::invalid(
                "zone-lock data",
                "row",
                format!("need 4 inputs, got {}", x.len()),
            ));
        };
        if !(0.0..=6.0).contains(scale) || scale.fract() != 0.0 {
            return Err(Error::invalid(
                "zone-lock data",
                "scale_max",
                format!("{scale} is not an integer in 0..6"),
            ));
        }
        if !(*procs >= 1.0 && procs.fract() == 0.0 && *procs <= 65536.0) {
            return Err(Error::invalid(
                "zone-lock data",
                "procs",
                format!("{procs} is not a positive integer"),
            ));
        }
        let span = if *nodes <= 1.0 {
            NodeSpan::One
        } else {
            NodeSpan::All
        };
        Ok((workload_000(*procs as u32, span), *scale as u8))
    }
}

impl crate::fit::FitModel for ZoneLockFit {
    fn name(&self) -> &str {
        "zone-lock"
    }

    fn params(&self) -> Vec<crate::fit::ParamSpec> {
        param_specs(&self.model)
    }

    fn inputs(&self) -> Vec<crate::fit::InputSpec> {
        use crate::fit::InputSpec;
        vec![
            InputSpec::new("scale_max", "1"),
            InputSpec::new("procs", "processes"),
            InputSpec::new("nodes", "nodes"),
            InputSpec::categorical("quantity", &["avg_ns", "calls_per_s"]),
        ]
    }

    fn target(&self) -> crate::fit::TargetSpec {
        crate::fit::TargetSpec::new("value", "ns or 1/s")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let p = ZoneLockParams::from_slice(params)?;
        let (w, scale) = self.case(x)?;
        let d = cached_dynamics(&self.model, &self.cache, &w, scale)?;
        let pr = self.model.predict_with(&p, &d, false)?;
        Ok(if x[3] == Q_CALLS_PER_S {
            pr.calls_per_s
        } else {
            pr.avg_ns
        })
    }
}

/// A measured log2 histogram as a [`FitModel`](crate::fit::FitModel) (`pcpmodel fit --model
/// zone-lock --data HIST.csv`, the schema of `pcpmodel import funclatency`): inputs `lo_ns`,
/// `hi_ns`, target `count` = calls/s × `duration_s` × the predicted mass of the bucket, for one
/// workload case (default: thread 000's, scale 5, one node, 600 s). Buckets with zero counts make
/// relative residuals undefined: fit with absolute residuals.
pub struct ZoneLockHistFit {
    /// The machine model.
    pub model: ZoneLockModel,
    /// Workload.
    pub workload: MmapFill,
    /// `CONFIG_PCP_BATCH_SCALE_MAX`.
    pub scale_max: u8,
    /// Measurement interval, s.
    pub duration_s: f64,
    cache: DynCache,
}

impl ZoneLockHistFit {
    /// Thread 000's case on `machine`: 10 processes, one node, scale 5, 600 s.
    pub fn new(machine: &Machine) -> Result<ZoneLockHistFit> {
        Ok(ZoneLockHistFit {
            model: ZoneLockModel::new(machine, KERNEL_000)?,
            workload: workload_000(10, NodeSpan::One),
            scale_max: 5,
            duration_s: 600.0,
            cache: DynCache::default(),
        })
    }
}

impl crate::fit::FitModel for ZoneLockHistFit {
    fn name(&self) -> &str {
        "zone-lock"
    }

    fn params(&self) -> Vec<crate::fit::ParamSpec> {
        param_specs(&self.model)
    }

    fn inputs(&self) -> Vec<crate::fit::InputSpec> {
        use crate::fit::InputSpec;
        vec![InputSpec::new("lo_ns", "ns"), InputSpec::new("hi_ns", "ns")]
    }

    fn target(&self) -> crate::fit::TargetSpec {
        crate::fit::TargetSpec::new("count", "calls")
    }

    fn loo_skipped_by_default(&self) -> Option<&'static str> {
        Some(
            "the rows are buckets of one histogram, not separate conditions, and each refit solves the queue some 30 times (about 0.4 s per row): run them with --loo",
        )
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        Ok(self
            .predict_many(params, &[x.to_vec()])?
            .first()
            .copied()
            .unwrap_or(f64::NAN))
    }

    fn predict_many(&self, params: &[f64], xs: &[Vec<f64>]) -> Result<Vec<f64>> {
        let p = ZoneLockParams::from_slice(params)?;
        let d = cached_dynamics(&self.model, &self.cache, &self.workload, self.scale_max)?;
        let pr = self.model.predict_with(&p, &d, true)?;
        let total = pr.calls_per_s * self.duration_s;
        xs.iter()
            .map(|x| {
                let (lo, hi) = match x.as_slice() {
                    [lo, hi] if lo <= hi => (*lo, *hi),
                    _ => {
                        return Err(Error::invalid(
                            "zone-lock histogram",
                            "lo_ns,hi_ns",
                            format!("need lo_ns <= hi_ns, got {x:?}"),
                        ))
                    }
                };
                // funclatency buckets hold integer ns lo..=hi: the interval [lo, hi + 1).
                Ok(total * (pr.cdf(hi + 1.0)? - pr.cdf(lo)?).max(0.0))
            })
            .collect()
    }
}
