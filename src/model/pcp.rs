//! PCP dynamics for page reuse: from the kernel's list discipline to the distribution of a page's
//! reuse distance, and the zone->lock holds per page on the refill and drain paths.
//!
//! # The flow
//! A *producer* CPU allocates pages of one order (netperf's sender fills skb page frags, order 3
//! = 32 KiB) and a *consumer* CPU frees them (the receiver, after copying the data out). The two run at
//! the same rate in steady state. Everything below is in base (4 KiB) pages, like `pcp->count` and
//! `pcp->high`; a page of order `o` counts `u = 2^o`.
//!
//! # The kernel's discipline (mm/page_alloc.c)
//! - Frees go to the **head** of the consumer's PCP list (`list_add`); `free_pcppages_bulk()` takes
//!   the **oldest** pages from the tail (`list_last_entry`) and returns them to the buddy lists.
//! - A drain happens when `pcp->count >= high` and frees `Δ` base pages in one zone->lock hold:
//!   - ≤5.13: `Δ = batch` (`free_pcppages_bulk(zone, batch, pcp)`);
//!   - 5.14–6.6, `nr_pcp_free()`: `Δ = clamp(batch << free_factor, batch, high − batch)`, where
//!     `free_factor` grows by one per drain and is halved by every allocation on that CPU
//!     (`rmqueue_pcplist`). A pure consumer never allocates, so it saturates: `Δ = high − batch`;
//!   - 6.7+, `nr_pcp_free()`: `Δ = clamp(free_count, batch, high − batch)`, `free_count` capped at
//!     `batch << CONFIG_PCP_BATCH_SCALE_MAX` and halved by allocations: a pure consumer drains
//!     `min(batch << scale, high − batch)`; ≥6.19 splits that into chunks of `batch` per lock hold;
//!   - `high < batch` (and `high = 0`, the bypass): one page per free (`nr_pcp_free` returns 1).
//!   - With allocations on the consumer CPU (`consumer_allocs_per_free = a` allocations per freed
//!     page) the factor is halved `a·Δ/u` times per drain cycle; from one halving per cycle on
//!     (`a ≥ u/batch`) it is 0 at every drain (5.14–6.6: `Δ = batch`), and on 6.7+ `free_count`
//!     settles near `2u/a`, so `Δ ≈ clamp(2u/a, batch, high − batch)`.
//! - Buddy free lists are LIFO for our purpose (`__free_one_page` adds at the head;
//!   `__rmqueue_smallest` takes the head), so the producer's `rmqueue_bulk()` refills take the most
//!   recently drained pages first, `R` base pages per zone->lock hold (5.14+ `nr_pcp_alloc` /
//!   `rmqueue_bulk`: `max(batch >> order, 2)` pages of order > 0; `batch << alloc_factor` order-0 pages
//!   on 6.7+, bounded by `high − batch`).
//!
//! # Reuse distance
//! Count time in base pages freed by the consumer. A page is drained when it is among the `Δ`
//! oldest at a drain: its age then is `high − Δ + j`, `j` uniform on `[0, Δ)`. The drained set goes
//! to the buddy list oldest first, so the youngest is on top. At the drain the producer still holds
//! `r` pages of its last refill (`r` uniform on `[0, R)`, independent of the drain's phase); it uses
//! them, then pops the new set from the top, so the page at depth `j` is reused `r + j` pages after
//! the drain:
//!
//! ```text
//!   Δ ≥ R:  D = (high − Δ)⁺ + 2·U[0, Δ) + U[0, R)        mean high + R/2
//!   Δ < R:  D = (high − Δ)⁺ +   U[0, Δ) + 2·U[0, R)      (the refill chunk spans several drains)
//! ```
//!
//! a trapezoid. **Burial**: when the producer's leftover shrinks from one drain to the next
//! (`r_prev > r_now`), `r_prev − r_now` pages of the previous set are still in the buddy list when
//! the next set lands on top of them and wait at least one more cycle. With independent uniform
//! leftovers, `E[(r_prev − r_now)⁺] = R/6`, so a share `R/(6Δ)` of pages is reused one cycle (`Δ`)
//! later. `high = 0` (bypass) gives `D ~ 2·U[0, R)`: 0–112 pages (0–448 KiB) for order-3 frags
//! with batch 63; this is why bypass still loses the page from a 256 KiB L2 but not from a 1.25 MiB
//! one. Same-CPU alloc/free reuses the head of the list at once: `D ~ U[0, 2u)`.
//!
//! `tests/it/reuse_vs_kernel_state.rs` checks these against a page-by-page simulation driven by the
//! kernel module's own `PcpState` (means within R/3 plus one block: the simulated burial ranges
//! from none to about R/2 where the model puts R/6; 2nd–90th percentiles inside the range
//! widened by one drain/refill granule; the top decile is not checked, see below).
//!
//! Against the simulation the means agree within 3 % for order-3 flows (the simulated mean 11
//! pages above the model's) and within 11 % for 6.7's order-0 flows; the burial tail is
//! heavier in the simulation when `Δ ≈ R` (the consumer allocating, drains of `batch`): there the
//! simulated 98th percentile lies several cycles out, where the model puts the buried share one
//! cycle out. Those few percent of pages are then reused from the LLC rather than another core's
//! L2, so the model slightly overstates the core-to-core share near `high ≈ L2`.
//!
//! # Validity
//! Steady state, equal rates, one flow per CPU pair, no memory pressure (`ZONE_BELOW_HIGH` and
//! `ZONE_RECLAIM_ACTIVE` clear), `pcp->high` fixed (as in thread 004's experiment; 6.7+ auto-tuning
//! is represented by the caller choosing the high the tuner settles at). `free_high` (5.18+) is
//! treated as bypass when the caller says it fires.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::version::{Era, KernelVersion};
use crate::model::cache::{ReuseDist, Segment};

/// Allocations the consumer CPU makes per block it frees in thread 004's netperf run: the one
/// workload parameter shared by both machines.
///
/// Measured, not fitted: a UDP loopback stream traced on this project's host with
/// `net.core.skb_defer_max = 0` (the receiver frees, as every kernel before the UDP deferral of
/// 6.18 does) shows the receiving CPU making 91 page allocations while it frees 11,294 order-3
/// frags (`data/host/flows/trace-udp-defer0-2026-12-04.json`): a pure consumer to within
/// 0.0081 allocations per block, so its free_factor saturates (5.14-6.6: drains of
/// `high - batch`) and free_high fires on 5.18+. `models/workloads/netperf-udp.toml` carries
/// the same value with that provenance (a test holds the two equal).
pub const CONSUMER_ALLOCS_PER_FREE_004: f64 = 0.0081;

/// A producer → consumer page flow through the PCP lists.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Flow {
    /// Kernel version (decides the drain and refill rules).
    #[serde(serialize_with = "ser_version")]
    pub kernel: KernelVersion,
    /// The consumer's pcp->high, base pages (0 = bypass).
    pub high_pages: u32,
    /// pcp->batch, base pages (63 on any zone above ~700 MiB).
    pub batch_pages: u32,
    /// Page order of the flow (3 for skb page frags).
    pub order: u32,
    /// CONFIG_PCP_BATCH_SCALE_MAX (6.7+; 5 by default).
    pub scale_max: u32,
    /// Allocations the consumer CPU makes per page it frees (0 for a pure consumer).
    pub consumer_allocs_per_free: f64,
    /// Whether `free_high` fires (5.18+: the consumer frees high-order pages without allocating),
    /// which drains the whole list on every free: the PCP is bypassed whatever `high` is.
    pub free_high: bool,
    /// Share of the consumer's freed pages that leave its list through `free_high` drains
    /// before the list reaches `high` ([`crate::model::freehigh`]); 0 = none. Ignored when
    /// `free_high` is set (all of them).
    pub free_high_share: f64,
    /// Pages per such drain (with `free_high_share` > 0).
    pub free_high_pages_per_event: f64,
    /// Producer and consumer are the same CPU.
    pub same_cpu: bool,
    /// Share of the producer's pages that the consumer CPU frees (1: all of them, thread
    /// 004's flow); the rest the producer frees itself (datagrams dropped in its own softirq,
    /// skbs the network stack hands back to the allocating CPU) and reuses from its list head.
    /// Ignored when `same_cpu` is set (share 0).
    pub consumer_free_share: f64,
    /// Blocks of each order (index = order) one message allocates when its frags have several
    /// orders (an AF_UNIX write of 64 KiB is one block each of orders 3, 2, 1 and 0,
    /// [`crate::kernel::skb::unix_stream_write_orders`]); all 0 for a flow of blocks of `order`
    /// alone. The reuse distance is then the page-weighted mixture of each order's, whose
    /// refill chunks last as many messages as they hold blocks.
    pub frag_blocks: [u16; 11],
}

fn ser_version<S: serde::Serializer>(
    v: &KernelVersion,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}.{}", v.major, v.minor))
}

impl Flow {
    /// Thread 004's netperf UDP flow on a given kernel with a fixed `high`: order-3 page frags,
    /// batch 63, [`CONSUMER_ALLOCS_PER_FREE_004`], `free_high` off (the experiment set
    /// `pcp->high` directly).
    pub fn netperf_004(kernel: KernelVersion, high_pages: u32) -> Flow {
        Flow {
            kernel,
            high_pages,
            batch_pages: 63,
            order: 3,
            scale_max: 5,
            consumer_allocs_per_free: crate::assumptions::value(
                "pcp::CONSUMER_ALLOCS_PER_FREE_004",
                CONSUMER_ALLOCS_PER_FREE_004,
            ),
            free_high: false,
            free_high_share: 0.0,
            free_high_pages_per_event: 0.0,
            same_cpu: false,
            consumer_free_share: 1.0,
            frag_blocks: [0; 11],
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |field: &str, msg: &str| Err(Error::invalid("flow", field, msg));
        if self.batch_pages == 0 {
            return bad("batch_pages", "must be at least 1");
        }
        if self.order > 10 {
            return bad("order", "must be 0..=10");
        }
        if self.scale_max > 6 {
            return bad("scale_max", "CONFIG_PCP_BATCH_SCALE_MAX ranges 0..=6");
        }
        if !(self.consumer_allocs_per_free.is_finite() && self.consumer_allocs_per_free >= 0.0) {
            return bad("consumer_allocs_per_free", "must be a finite number >= 0");
        }
        if !(0.0..=1.0).contains(&self.consumer_free_share) {
            return bad("consumer_free_share", "must be within 0..=1");
        }
        if !(0.0..=1.0).contains(&self.free_high_share) {
            return bad("free_high_share", "must be within 0..=1");
        }
        if self.free_high_share > 0.0
            && !(self.free_high_pages_per_event.is_finite() && self.free_high_pages_per_event > 0.0)
        {
            return bad(
                "free_high_pages_per_event",
                "must be > 0 when free_high_share > 0",
            );
        }
        Ok(())
    }
}

/// What the kernel's discipline does to a flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dynamics {
    /// Base pages returned to the buddy allocator per drain of the consumer's list (Δ).
    pub drain_pages: f64,
    /// Base pages moved per refill of the producer's list (R).
    pub refill_pages: f64,
    /// The drains by kind, each (zone->lock holds per base page, base pages per hold): the
    /// ordinary drains and, where free_high fires on part of the pages, its drains, whose sizes
    /// differ (a lock queue needs the mixture, not only the mean).
    pub drain_kinds: Vec<(f64, f64)>,
    /// zone->lock holds per base page on the alloc (refill) path.
    pub refill_holds_per_page: f64,
    /// Reuse distance distribution, base pages touched by the consumer between free and reuse.
    pub reuse: ReuseDist,
    /// Age of a block when a drain returns it to the buddy allocator: base pages the consumer
    /// freed since it freed the block (how long its struct page sat on the list untouched).
    pub drain_age: ReuseDist,
    /// Blocks drained per base page of the flow.
    pub drained_blocks_per_page: f64,
    /// Which rule applied, in words.
    pub regime: String,
}

impl Dynamics {
    /// Pages the flow keeps off the buddy allocator at the steady state: the consumer's list
    /// at a drain holds the drained blocks' age in pages, the producer's half a refill on
    /// average.
    pub fn pages_held(&self) -> f64 {
        self.drain_age.mean_pages() + 0.5 * self.refill_pages
    }

    /// zone->lock holds per base page on the free (drain) path, over every kind of drain.
    pub fn drain_holds_per_page(&self) -> f64 {
        self.drain_kinds.iter().map(|k| k.0).sum()
    }
}

/// Derives drain size, refill size, lock holds per page and the reuse distance of `flow`.
pub fn dynamics(flow: &Flow) -> Result<Dynamics> {
    let orders: Vec<u32> = (0..11u32)
        .filter(|&o| flow.frag_blocks[o as usize] > 0)
        .collect();
    if orders.len() < 2 {
        return order_dynamics(flow, 1.0);
    }
    // A message allocates n_o blocks of order o: per page of the flow, an order-o page comes
    // w_o = n_o 2^o / message pages of the time, and its refill chunk of R_o pages lasts
    // R_o / w_o pages of the flow. The consumer's list (its drains, free_high) holds every
    // order alike.
    let pages = |o: u32| f64::from(flow.frag_blocks[o as usize]) * f64::from(1u32 << o);
    let msg: f64 = orders.iter().map(|&o| pages(o)).sum();
    let principal = order_dynamics(flow, 1.0)?;
    let mut segments = Vec::new();
    let mut drain_kinds = Vec::new();
    let mut refill_holds_per_page = 0.0;
    let mut per_order = Vec::new();
    for &o in &orders {
        let w = pages(o) / msg;
        let mut f = *flow;
        f.order = o;
        let d = order_dynamics(&f, 1.0 / w)?;
        segments.extend(d.reuse.segments.iter().map(|g| Segment {
            weight: g.weight * w,
            ..*g
        }));
        drain_kinds.extend(d.drain_kinds.iter().map(|&(k, size)| (k * w, size)));
        refill_holds_per_page += w * d.refill_holds_per_page;
        per_order.push((w * d.drained_blocks_per_page, d.drain_age));
    }
    // Drained blocks per page, and their ages weighted by blocks.
    let blocks: f64 = per_order.iter().map(|x| x.0).sum();
    let age = per_order
        .iter()
        .flat_map(|(n, a)| {
            a.segments.iter().map(move |g| Segment {
                weight: if blocks > 0.0 {
                    g.weight * n / blocks
                } else {
                    0.0
                },
                ..*g
            })
        })
        .collect();
    Ok(Dynamics {
        drain_kinds,
        refill_holds_per_page,
        drained_blocks_per_page: blocks,
        drain_age: ReuseDist { segments: age },
        reuse: ReuseDist { segments },
        regime: format!(
            "{}; a message is frags of orders {orders:?}: reuse distances mixed by pages",
            principal.regime
        ),
        ..principal
    })
}

/// [`dynamics`] for blocks of `flow.order`, whose refill chunks last `refill_time` times their
/// pages of the consumer's frees (1 for a flow of that order alone).
fn order_dynamics(flow: &Flow, refill_time: f64) -> Result<Dynamics> {
    flow.check()?;
    let u = f64::from(1u32 << flow.order);
    let b = f64::from(flow.batch_pages);
    let h = f64::from(flow.high_pages);
    let era = flow.kernel.era();
    let scaled_cap = f64::from(flow.batch_pages << flow.scale_max);

    // Producer refill (rmqueue_bulk via nr_pcp_alloc / __rmqueue_pcplist), base pages.
    let refill_pages = if flow.order > 0 {
        let pages = if flow.batch_pages > 1 {
            (flow.batch_pages >> flow.order).max(2)
        } else {
            1
        };
        f64::from(pages) * u
    } else if era.auto_tunes_high() {
        // alloc_factor grows to scale_max for a pure producer, bounded by high - batch.
        scaled_cap.min((h - b).max(b)).max(1.0)
    } else {
        b
    };

    let a = flow.consumer_allocs_per_free;
    let (drain_pages, regime, bypass) = if flow.same_cpu {
        (
            u,
            "same CPU: freed pages are reused from the list head, no refills or drains".to_string(),
            false,
        )
    } else if flow.high_pages == 0 {
        (
            u,
            "bypass: high = 0, every free goes to the buddy allocator".to_string(),
            true,
        )
    } else if flow.free_high && flow.kernel.has_free_high() && flow.order > 0 && flow.order <= 3 {
        (
            u,
            "free_high: high-order frees without allocation drain the list (bypass)".to_string(),
            true,
        )
    } else if h < b {
        (
            u,
            "high < batch: nr_pcp_free() frees one page per free".to_string(),
            false,
        )
    } else {
        let hi_cap = (h - b).max(u);
        match era {
            Era::Legacy => (b, "<=5.13: drains of batch pages".to_string(), false),
            Era::SplitHigh => {
                if a * hi_cap / u >= 1.0 {
                    (
                        b.min(hi_cap),
                        "5.14-6.6: consumer allocations reset free_factor: drains of batch".into(),
                        false,
                    )
                } else {
                    (
                        hi_cap,
                        "5.14-6.6: free_factor saturates (pure consumer): drains of high - batch"
                            .into(),
                        false,
                    )
                }
            }
            Era::AutoTune | Era::BatchedFree => {
                let fc = if a > 0.0 {
                    (2.0 * u / a).min(scaled_cap)
                } else {
                    scaled_cap
                };
                (
                    fc.clamp(b, hi_cap.max(b)).min(hi_cap),
                    format!(
                        "6.7+: drains of clamp(free_count, batch, high - batch), free_count <= batch << {}",
                        flow.scale_max
                    ),
                    false,
                )
            }
        }
    };
    let drain_pages = drain_pages.max(u);
    let holds_per_drain = if era == Era::BatchedFree {
        (drain_pages / b).ceil().max(1.0)
    } else {
        1.0
    };
    let reuse = if flow.same_cpu {
        ReuseDist::uniform(0.0, 2.0 * u)
    } else {
        reuse_distance(
            if bypass { 0.0 } else { h },
            drain_pages,
            refill_pages * refill_time,
            bypass,
        )
    };
    // On one CPU the frees refill the list the allocations empty: in steady state neither side
    // takes zone->lock (1 refill and 0 drains in 17,790 order-3 allocations of a UDP stream
    // whose sender freed its own pages, data/host/flows/trace-udp-defer64-2026-12-04.json).
    let lock_share = if flow.same_cpu { 0.0 } else { 1.0 };
    // A drain takes the Δ oldest pages of a list of `high`: ages high − Δ + U[0, Δ); the
    // bypass drains each block as it is freed.
    let drain_age = if bypass {
        ReuseDist::uniform(0.0, 0.0)
    } else {
        let lo = (h - drain_pages).max(0.0);
        ReuseDist::uniform(lo, lo + drain_pages)
    };
    let d = Dynamics {
        drain_pages,
        refill_pages,
        drain_kinds: vec![(
            lock_share * holds_per_drain / drain_pages,
            drain_pages / holds_per_drain,
        )],
        refill_holds_per_page: lock_share / refill_pages,
        reuse,
        drain_age,
        drained_blocks_per_page: lock_share / u,
        regime,
    };
    let phi = flow.free_high_share;
    let d = if bypass || phi <= 0.0 {
        d
    } else {
        with_free_high_share(d, phi, flow, u, b, refill_time)
    };
    let s = flow.consumer_free_share;
    if flow.same_cpu || s >= 1.0 {
        return Ok(d);
    }
    Ok(with_consumer_share(d, s, u))
}

/// A flow whose consumer frees only a share `s` of the pages: the producer frees the rest on its
/// own list and reuses them from its head at once (`D ~ U[0, 2u)`, no zone->lock), so the
/// consumer's drains and the producer's refills are per page `s` times the two-CPU flow's.
fn with_consumer_share(d: Dynamics, s: f64, u: f64) -> Dynamics {
    let local = ReuseDist::uniform(0.0, 2.0 * u);
    let mut segments: Vec<Segment> = d
        .reuse
        .segments
        .iter()
        .map(|g| Segment {
            weight: g.weight * s,
            ..*g
        })
        .collect();
    segments.extend(local.segments.iter().map(|g| Segment {
        weight: g.weight * (1.0 - s),
        ..*g
    }));
    Dynamics {
        drain_kinds: d
            .drain_kinds
            .iter()
            .map(|&(holds_per_page, size)| (s * holds_per_page, size))
            .collect(),
        refill_holds_per_page: s * d.refill_holds_per_page,
        drained_blocks_per_page: s * d.drained_blocks_per_page,
        reuse: ReuseDist { segments },
        regime: format!(
            "{}; the consumer frees {:.0} % of the pages, the producer the rest on its own list",
            d.regime,
            100.0 * s
        ),
        ..d
    }
}

/// Mixes the free_high drains of a share `phi` of the pages into the flow's dynamics: those
/// pages go to the buddy allocator in drains of `g = free_high_pages_per_event` pages (one hold
/// each, or chunks of `batch` from 6.19); on the same CPU they must also be refilled from the
/// zone (a refill per `refill_pages`). Where a drain takes every page freed since the last one
/// (`g = u`: each high-order free drains itself) a page goes to the buddy allocator at once (the
/// bypass reuse distance); with PCPF_FREE_HIGH_BATCH (`g` = a batch) it waits on the list until
/// the list holds a batch again and leaves with it, as a list of `g` pages draining `g`.
fn with_free_high_share(
    d: Dynamics,
    phi: f64,
    flow: &Flow,
    u: f64,
    b: f64,
    refill_time: f64,
) -> Dynamics {
    let g = flow.free_high_pages_per_event.max(u);
    let holds_per_event = if flow.kernel.era() == Era::BatchedFree {
        (g / b).ceil().max(1.0)
    } else {
        1.0
    };
    let r = d.refill_pages * refill_time;
    let fh = if g > u {
        reuse_distance(g, g, r, false)
    } else {
        reuse_distance(0.0, u, r, true)
    };
    let mut segments: Vec<Segment> = d
        .reuse
        .segments
        .iter()
        .map(|s| Segment {
            weight: s.weight * (1.0 - phi),
            ..*s
        })
        .collect();
    segments.extend(fh.segments.iter().map(|s| Segment {
        weight: s.weight * phi,
        ..*s
    }));
    let same_refill = if flow.same_cpu {
        phi / d.refill_pages
    } else {
        0.0
    };
    let drain_kinds = d
        .drain_kinds
        .iter()
        .map(|&(holds_per_page, size)| ((1.0 - phi) * holds_per_page, size))
        .chain(std::iter::once((
            phi * holds_per_event / g,
            g / holds_per_event,
        )))
        .collect();
    // Drained blocks by kind: the ordinary drains' at their ages, free_high's after waiting
    // for a batch (g > u) or at once.
    let ordinary = (1.0 - phi) * d.drained_blocks_per_page;
    let early = phi / u;
    let blocks = ordinary + early;
    let fh_age = if g > u {
        ReuseDist::uniform(0.0, g)
    } else {
        ReuseDist::uniform(0.0, 0.0)
    };
    let mut age: Vec<Segment> = Vec::new();
    if blocks > 0.0 {
        age.extend(d.drain_age.segments.iter().map(|s| Segment {
            weight: s.weight * ordinary / blocks,
            ..*s
        }));
        age.extend(fh_age.segments.iter().map(|s| Segment {
            weight: s.weight * early / blocks,
            ..*s
        }));
    } else {
        age = fh_age.segments;
    }
    Dynamics {
        drain_kinds,
        refill_holds_per_page: d.refill_holds_per_page + same_refill,
        reuse: ReuseDist { segments },
        drain_age: ReuseDist { segments: age },
        drained_blocks_per_page: blocks,
        regime: format!(
            "{}; free_high drains {:.3} of the pages early ({} pages per drain)",
            d.regime,
            phi,
            crate::report::sig(g, 3)
        ),
        ..d
    }
}

/// The reuse distance of a page for a consumer list of `high` pages draining `drain` pages and a
/// producer refilling `refill` pages (see the module documentation).
pub fn reuse_distance(high: f64, drain: f64, refill: f64, bypass: bool) -> ReuseDist {
    let offset = (high - drain).max(0.0);
    if bypass {
        // Pushed at once: only the refill chunk spreads the distance.
        return ReuseDist {
            segments: vec![Segment {
                weight: 1.0,
                offset_pages: 0.0,
                a_pages: 2.0 * refill,
                b_pages: 0.0,
            }],
        };
    }
    if drain >= refill {
        let buried = (refill / (6.0 * drain)).min(1.0);
        let main = Segment {
            weight: 1.0 - buried,
            offset_pages: offset,
            a_pages: 2.0 * drain,
            b_pages: refill,
        };
        let mut late = main;
        late.weight = buried;
        late.offset_pages += drain;
        ReuseDist {
            segments: vec![main, late],
        }
    } else {
        ReuseDist {
            segments: vec![Segment {
                weight: 1.0,
                offset_pages: offset,
                a_pages: drain,
                b_pages: 2.0 * refill,
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn v518() -> KernelVersion {
        KernelVersion::new(5, 18)
    }

    #[test]
    fn bypass_reuse_spans_two_refills() {
        let d = dynamics(&Flow::netperf_004(v518(), 0)).unwrap();
        assert_relative_eq!(d.refill_pages, 56.0); // 7 order-3 pages
        assert_relative_eq!(d.drain_pages, 8.0);
        assert_eq!(d.reuse.range_pages(), (0.0, 112.0));
        assert_relative_eq!(d.drain_holds_per_page(), 1.0 / 8.0);
    }

    #[test]
    fn pure_consumer_on_5_18_drains_high_minus_batch() {
        let mut f = Flow::netperf_004(v518(), 320);
        f.consumer_allocs_per_free = 0.0;
        let d = dynamics(&f).unwrap();
        assert_relative_eq!(d.drain_pages, 257.0);
        // Main trapezoid 63 + U[0, 514) + U[0, 56) and a buried share 56/(6*257) one cycle later.
        assert_eq!(d.reuse.range_pages(), (63.0, 633.0 + 257.0));
        let buried = 56.0 / (6.0 * 257.0);
        assert_relative_eq!(
            d.reuse.mean_pages(),
            320.0 + 28.0 + buried * 257.0,
            epsilon = 1e-9
        );
    }

    #[test]
    fn allocating_consumer_drains_batch() {
        let mut f = Flow::netperf_004(v518(), 640);
        f.consumer_allocs_per_free = 1.0;
        let d = dynamics(&f).unwrap();
        assert_relative_eq!(d.drain_pages, 63.0);
        assert_eq!(d.reuse.range_pages(), (577.0, 703.0 + 56.0 + 63.0));
    }

    #[test]
    fn scale_max_caps_drains_on_6_7_and_chunks_on_6_19() {
        let mut f = Flow::netperf_004(KernelVersion::new(6, 7), 12416);
        f.consumer_allocs_per_free = 0.0;
        let d = dynamics(&f).unwrap();
        assert_relative_eq!(d.drain_pages, 2016.0);
        assert_relative_eq!(d.drain_holds_per_page(), 1.0 / 2016.0);
        f.scale_max = 0;
        assert_relative_eq!(dynamics(&f).unwrap().drain_pages, 63.0);
        f.kernel = KernelVersion::new(6, 19);
        f.scale_max = 5;
        let d = dynamics(&f).unwrap();
        assert_relative_eq!(d.drain_holds_per_page(), 32.0 / 2016.0);
    }

    #[test]
    fn free_high_is_a_bypass_from_5_18_only() {
        let mut f = Flow::netperf_004(v518(), 421);
        f.free_high = true;
        let d = dynamics(&f).unwrap();
        assert_relative_eq!(d.drain_pages, 8.0);
        // The list is emptied on every free: the reuse distance is the bypass one.
        assert_eq!(d.reuse.range_pages(), (0.0, 112.0));
        f.kernel = KernelVersion::new(5, 17);
        f.consumer_allocs_per_free = 0.0;
        assert_relative_eq!(dynamics(&f).unwrap().drain_pages, 358.0);
    }

    #[test]
    fn a_free_high_share_mixes_early_drains_into_the_flow() {
        // Share 0 is the plain flow; a share phi of pages drained early in holds of 64 pages
        // moves phi of the reuse distance to the bypass one and charges a hold per 64 pages.
        let mut f = Flow::netperf_004(KernelVersion::new(6, 12), 2079);
        let plain = dynamics(&f).unwrap();
        f.free_high_share = 0.25;
        f.free_high_pages_per_event = 64.0;
        let d = dynamics(&f).unwrap();
        let w: f64 = d.reuse.segments.iter().map(|s| s.weight).sum();
        assert_relative_eq!(w, 1.0, epsilon = 1e-12);
        assert!(d.reuse.mean_pages() < plain.reuse.mean_pages());
        assert_relative_eq!(
            d.drain_holds_per_page(),
            0.75 * plain.drain_holds_per_page() + 0.25 / 64.0,
            epsilon = 1e-12
        );
        // The two kinds of drain keep their own sizes and together drain every page once.
        assert_eq!(d.drain_kinds.len(), 2, "{:?}", d.drain_kinds);
        assert_relative_eq!(d.drain_kinds[1].1, 64.0);
        assert_relative_eq!(d.drain_kinds[0].1, plain.drain_kinds[0].1);
        let pages: f64 = d.drain_kinds.iter().map(|k| k.0 * k.1).sum();
        assert_relative_eq!(pages, 1.0, epsilon = 1e-12);
        f.free_high_share = 1.5;
        assert!(dynamics(&f).is_err());
    }

    #[test]
    fn a_free_high_drain_of_a_batch_keeps_pages_on_the_list_until_it_holds_one() {
        // Every page drained early: with PCPF_FREE_HIGH_BATCH (drains of 64 pages of order 3)
        // a page waits on the consumer's list for up to a batch of frees, then goes to the
        // buddy allocator with the others; when each free drains itself (g = u = 8) it goes at
        // once and only the producer's refill chunk spreads the distance.
        let mut f = Flow::netperf_004(KernelVersion::new(6, 12), 2079);
        f.free_high_share = 1.0;
        f.free_high_pages_per_event = 64.0;
        let batched = dynamics(&f).unwrap();
        let r = batched.refill_pages;
        let (lo, hi) = batched.reuse.range_pages();
        assert_relative_eq!(lo, 0.0);
        // 2 x 64 pages on the list and in the buddy stack, a refill chunk, one buried cycle.
        assert_relative_eq!(hi, 2.0 * 64.0 + r + 64.0, epsilon = 1e-9);
        f.free_high_pages_per_event = 8.0;
        let each = dynamics(&f).unwrap();
        assert_eq!(each.reuse.range_pages(), (0.0, 2.0 * r));
        assert!(batched.reuse.mean_pages() > each.reuse.mean_pages() + 32.0);
    }

    #[test]
    fn a_message_of_several_frag_orders_mixes_their_distances_by_pages() {
        // A 64 KiB AF_UNIX write: one block each of orders 3, 2, 1 and 0 (15 pages). Each
        // order's share of the reuse distance is its share of the pages; an order's refill
        // chunk lasts as many writes as it holds blocks, so the lower orders are reused later.
        let mut f = Flow::netperf_004(KernelVersion::new(6, 18), 252);
        f.consumer_allocs_per_free = 0.0;
        f.free_high_share = 1.0;
        f.free_high_pages_per_event = 64.0;
        let alone = dynamics(&f).unwrap();
        f.frag_blocks = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
        let mixed = dynamics(&f).unwrap();
        let w: f64 = mixed.reuse.segments.iter().map(|s| s.weight).sum();
        assert_relative_eq!(w, 1.0, epsilon = 1e-12);
        assert!(mixed.reuse.mean_pages() > 2.0 * alone.reuse.mean_pages());
        // The order-0 part: a refill of R0 pages lasts 15 R0 pages of the flow.
        let mut f0 = f;
        f0.order = 0;
        f0.frag_blocks = [0; 11];
        let r0 = dynamics(&f0).unwrap().refill_pages;
        assert!(
            mixed.reuse.range_pages().1 >= 15.0 * r0,
            "{:?}",
            mixed.reuse.range_pages()
        );
        // One order alone is the plain flow.
        f.frag_blocks = [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(dynamics(&f).unwrap(), alone);
    }

    #[test]
    fn a_drained_block_is_as_old_as_the_list_it_waited_on() {
        // 5.17, order 3, high 2079, the consumer allocating (drains of a batch of 63 pages):
        // a drain takes the 63 oldest pages, freed 2016-2079 pages before, one block per 8
        // pages; free_high drains of a batch are at most a batch old; the same CPU drains none.
        let mut f = Flow::netperf_004(KernelVersion::new(5, 17), 2079);
        f.consumer_allocs_per_free = 1.0;
        let d = dynamics(&f).unwrap();
        let (lo, hi) = d.drain_age.range_pages();
        assert_relative_eq!(hi - lo, d.drain_pages, epsilon = 1e-9);
        assert_relative_eq!(hi, 2079.0, epsilon = 1e-9);
        assert_relative_eq!(d.drained_blocks_per_page, 1.0 / 8.0);
        let mut g = Flow::netperf_004(KernelVersion::new(6, 18), 252);
        g.consumer_allocs_per_free = 0.0;
        g.free_high_share = 1.0;
        g.free_high_pages_per_event = 64.0;
        assert_eq!(dynamics(&g).unwrap().drain_age.range_pages(), (0.0, 64.0));
        g.same_cpu = true;
        g.free_high_share = 0.0;
        assert_eq!(dynamics(&g).unwrap().drained_blocks_per_page, 0.0);
    }

    #[test]
    fn bad_flow_is_an_error_not_a_panic() {
        let mut f = Flow::netperf_004(v518(), 100);
        f.batch_pages = 0;
        assert!(dynamics(&f).is_err());
        f.batch_pages = 63;
        f.consumer_allocs_per_free = f64::NAN;
        assert!(dynamics(&f).is_err());
    }
}
