//! The zone->lock model for any allocation loop (kind `alloc-loop`), not only thread 000's
//! mmap/fill/munmap: allocations of one order, freed by the same CPU in phases, interleaved
//! page by page, or not at all during the measured interval.
//!
//! # Equations
//! **Pages per hold.** As in the parent module (item 1), one CPU's pageset is stepped through a
//! warm-up and a recorded iteration with the kernel's own [`PcpState`] for the version:
//! - [`Freeing::Phases`]`(P)`: `P` allocations, then `P` frees (thread 000's loop is this with
//!   `P = pages_per_iteration`, order 0; it is computed by the same code).
//! - [`Freeing::Lives`]: a life of `P` allocations in runs of `r`; by the time `n` are allocated
//!   `L·n/P` of the `L` pages freed during the life are owed, and they are freed after an
//!   allocation run in runs of whole multiples of `f` pages (what is owed, rounded down to `f`);
//!   at its end the rest (a process that frees while it runs, in bursts, then exits). With
//!   `L = 0` and `r = P` it is `Phases(P)`. A free halves `alloc_factor` and
//!   an allocation `free_count` (6.7+), so the runs decide how far either climbs.
//! - [`Freeing::Interleaved`]: `A` times (allocate, free) on the same CPU. Order-0 pages come
//!   back from the PCP list: after the warm-up no hold is taken at all.
//! - [`Freeing::Never`]: `A` allocations and no free (the pages are freed after the measured
//!   interval). Every refill comes from the buddy lists under zone->lock.
//!
//! Orders the kernel does not keep on PCP lists ([`PcpState::pcp_allowed_order`]: only order 0
//! before 5.13; 0–3 and 9 from 5.13) take zone->lock once per allocation and once per free:
//! [`PcpState::alloc`] reports them as bypassing, one hold of `2^order` pages each.
//!
//! **Hold of `n` pages:** the parent's `H = fixed_ns + n · (cpu_ns_per_page + lines_per_page ·
//! x)`. Where a refill's `struct page` lines were last written ([`refill_sources`]): freed in
//! the loop by the zone's tasks, the parent's mixture of `self` (a phase ago: DRAM) and the
//! other tasks' caches; never freed during the interval: `cold`, `x = dram_local` (they were
//! last written when the pages were freed before the run, by the rule the parent applies to the
//! task's own pages freed a phase ago).
//!
//! **Think times** ([`ThinkRule`]). Work outside the allocator per allocation `w` (the
//! workload's `op.work` over its allocations per operation); a share `alloc_work_share` follows
//! allocations, the rest frees. Thread 000's rule (under which its `work_ns_per_page` was
//! fitted): a refill of `b` blocks is followed by `b · share · w`, a drain of `b` blocks by
//! `b · (1 − share) · w`. Other workloads: the iteration's work divided over its holds,
//! `A · share · w / refills` and `A · (1 − share) · w / drains`, so that allocations served from
//! pages a free phase left on the list still cost their work.
//!
//! **Per allocation of one task:** `ns_per_alloc = 1 / (X_refill / N · A / refills)` per zone
//! (the lock queue's throughput of the refill class, per task, times allocations per refill);
//! with no hold on either side, `ns_per_alloc = w` (plus the LRU lock's hold and wait where the
//! `alloc-loop` kind queues it). The terms reported: `w`, the holds' page part and fixed part
//! (hand-over) and the waits, each per allocation.

use serde::Serialize;

use super::{
    BatchDynamics, LineSource, Prediction, ZoneLockModel, ZoneLockParams, ZonePrediction,
    FREE_MERGE_LINES,
};
use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::config::KernelConfig;
use crate::kernel::layout::ZoneKind;
use crate::kernel::ops::PcpState;
use crate::kernel::pageset::{PcpHigh, PcpLimits};
use crate::memo::Memo;
use crate::model::hold::HoldSide;
use crate::model::lock::{ClassShare, HoldAtom, HoldDist, HolderClass, LockQueue, ThinkLaw};
use crate::model::zones::{zone_shares, NodeSpan};

/// Allocations per recorded iteration of the loops without phases (interleaved, never freed):
/// long enough that the batch state reaches its steady pattern many times over (the state
/// repeats after at most a few refills, and runs of repeats are fast-forwarded exactly).
pub const STEADY_ALLOCS: u64 = 1 << 20;

/// How a task's allocations are freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freeing {
    /// By the same CPU, in phases of this many allocations then as many frees.
    Phases(u64),
    /// By the same CPU over a life of allocations freed in runs (module docs).
    Lives(Life),
    /// By the same CPU, each allocation freed before the next.
    Interleaved,
    /// Not during the measured interval.
    Never,
}

impl Freeing {
    /// The life of a [`Freeing::Lives`] loop (None for the other shapes).
    pub fn life(&self) -> Option<Life> {
        match *self {
            Freeing::Lives(l) => Some(l),
            _ => None,
        }
    }
}

/// One task's loop as the PCP state machine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct LoopShape {
    /// Allocation order.
    pub order: u8,
    /// How the allocations are freed.
    pub freeing: Freeing,
}

impl LoopShape {
    /// Allocations per recorded iteration.
    pub fn allocs_per_iteration(&self) -> u64 {
        match self.freeing {
            Freeing::Phases(p) | Freeing::Lives(Life { pages: p, .. }) => p,
            Freeing::Interleaved | Freeing::Never => STEADY_ALLOCS,
        }
    }

    /// Frees per recorded iteration.
    pub fn frees_per_iteration(&self) -> u64 {
        match self.freeing {
            Freeing::Phases(p) | Freeing::Lives(Life { pages: p, .. }) => p,
            Freeing::Interleaved => STEADY_ALLOCS,
            Freeing::Never => 0,
        }
    }
}

/// What one recorded iteration did beyond the holds (filled by [`run_steps`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Steps (allocations and frees).
    pub steps: u64,
    /// Sum over steps of the pages on the PCP lists after the step.
    pub count_sum: f64,
    /// Drains taken by the `free_high` path.
    pub free_high_drains: u64,
    /// Allocations that bypassed the PCP lists (order not kept on them).
    pub bypass_allocs: u64,
}

/// Where [`run_steps`] records: holds of one side as `(pages, count)`, and the tally.
pub struct Recorder<'a> {
    /// `(pages, holds)`.
    pub holds: &'a mut Vec<(u32, u64)>,
    /// The tally.
    pub tally: &'a mut Tally,
}

fn add_count(v: &mut Vec<(u32, u64)>, pages: u32, count: u64) {
    if count == 0 || pages == 0 {
        return;
    }
    match v.iter_mut().find(|r| r.0 == pages) {
        Some(r) => r.1 += count,
        None => v.push((pages, count)),
    }
}

/// One allocation (`alloc`) or free of `order`: the holds it took, whether it bypassed the PCP
/// lists and whether a drain took the `free_high` path.
fn step(st: &mut PcpState, order: u8, alloc: bool) -> Result<(Vec<u32>, bool, bool)> {
    if alloc {
        let s = st.alloc(order)?;
        let holds = if s.refill_pages > 0 {
            vec![s.refill_pages]
        } else {
            Vec::new()
        };
        Ok((holds, s.bypassed_pcp, false))
    } else {
        let f = st.free(order)?;
        let fh = f.free_high && !f.drained_pages_per_hold.is_empty();
        Ok((f.drained_pages_per_hold, f.bypassed_pcp, fh))
    }
}

/// Whether two pagesets are in the same state but for [`PcpState::drained_blocks`], the running
/// count of blocks drained since creation, which no kernel decision reads.
fn same_but_drained(a: &PcpState, b: &PcpState) -> bool {
    let mut a = a.clone();
    a.drained_blocks = b.drained_blocks;
    a == *b
}

/// `steps` allocations (`alloc`) or frees of `order` on `st`, recording into `out` when given.
///
/// Runs of identical state are fast-forwarded: when the state right after a hold equals the
/// state right after the previous one and one hold of `h` pages happened, the steps in between
/// (`h >> order` of them, the blocks the hold moved) repeat exactly. The running count of
/// drained blocks is not part of that state (it only grows, so a free phase would never
/// repeat); it is advanced by the skipped periods' drains.
pub fn run_steps(
    st: &mut PcpState,
    order: u8,
    steps: u64,
    alloc: bool,
    mut out: Option<&mut Recorder<'_>>,
) -> Result<()> {
    let mut left = steps;
    let mut prev: Option<(PcpState, u32)> = None;
    let mut since_hold_sum = 0.0;
    let mut since_hold_steps = 0u64;
    while left > 0 {
        let (holds, bypass, free_high) = step(st, order, alloc)?;
        left -= 1;
        since_hold_sum += f64::from(st.count_pages);
        since_hold_steps += 1;
        if let Some(o) = out.as_deref_mut() {
            o.tally.steps += 1;
            o.tally.count_sum += f64::from(st.count_pages);
            if bypass && alloc {
                o.tally.bypass_allocs += 1;
            }
            if free_high {
                o.tally.free_high_drains += 1;
            }
        }
        if holds.is_empty() {
            continue;
        }
        for &h in &holds {
            if let Some(o) = out.as_deref_mut() {
                add_count(o.holds, h, 1);
            }
        }
        if holds.len() == 1 {
            let h = holds[0];
            if let Some((p, ph)) = &prev {
                if *ph == h && same_but_drained(p, st) {
                    let period = u64::from(h >> order).max(1);
                    let skip = (left / period).saturating_sub(1);
                    if skip > 0 {
                        left -= skip * period;
                        // The skipped periods drain as the last one did: the running count
                        // ends where stepping would have left it.
                        st.drained_blocks += skip * (st.drained_blocks - p.drained_blocks);
                        if let Some(o) = out.as_deref_mut() {
                            add_count(o.holds, h, skip);
                            o.tally.steps += skip * period;
                            o.tally.count_sum += skip as f64 * since_hold_sum * period as f64
                                / since_hold_steps.max(1) as f64;
                            if bypass && alloc {
                                o.tally.bypass_allocs += skip * period;
                            }
                            if free_high {
                                o.tally.free_high_drains += skip;
                            }
                        }
                    }
                }
            }
            prev = Some((st.clone(), h));
        } else {
            prev = None;
        }
        since_hold_sum = 0.0;
        since_hold_steps = 0;
    }
    Ok(())
}

/// Pages per zone->lock hold over one steady iteration of one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopTally {
    /// Allocation side (refills, or direct buddy allocations when bypassing).
    pub alloc: Tally,
    /// Free side.
    pub free: Tally,
}

/// What [`loop_dynamics`] returns: the refill holds and the drain holds as `(pages, count)`,
/// the tallies and the final state.
pub type LoopRun = (Vec<(u32, u64)>, Vec<(u32, u64)>, LoopTally, PcpState);

/// Steps the pageset of `node`'s Normal zone through one warm-up and one recorded iteration of
/// `shape` (see [`LoopRun`]).
///
/// The run is a pure function of the pageset's starting state and the shape, and fits and
/// sweeps ask for the same few (state, shape) pairs thousands of times (a fit's every
/// evaluation, each leave-one-out refit, each table that reuses another's fit): results are
/// memoised per process, keyed by both, so a repeat returns the same numbers without stepping.
pub fn loop_dynamics(cfg: &KernelConfig, node: u32, shape: &LoopShape) -> Result<LoopRun> {
    /// Entries kept before the memo is emptied: far above the distinct runs of `validate` (a
    /// few hundred), so a long sweep cannot grow it without bound.
    const MEMO_CAP: usize = 1 << 14;
    static MEMO: Memo<(PcpState, LoopShape), LoopRun> = Memo::with_cap(MEMO_CAP);
    let start = cfg.pcp_state(node, ZoneKind::Normal)?;
    MEMO.get_or_try((start.clone(), *shape), || {
        loop_dynamics_uncached(start, shape)
    })
}

/// [`loop_dynamics`] from the pageset's starting state, without the memo.
fn loop_dynamics_uncached(mut st: PcpState, shape: &LoopShape) -> Result<LoopRun> {
    let a = shape.allocs_per_iteration();
    if a == 0 {
        return Err(Error::invalid(
            "allocation loop",
            "allocations per iteration",
            "must be at least 1",
        ));
    }
    let order = shape.order;
    let mut refill = Vec::new();
    let mut free = Vec::new();
    let mut t = LoopTally {
        alloc: Tally::default(),
        free: Tally::default(),
    };
    match shape.freeing {
        Freeing::Phases(p) => {
            run_steps(&mut st, order, p, true, None)?;
            run_steps(&mut st, order, p, false, None)?;
            let mut ra = Recorder {
                holds: &mut refill,
                tally: &mut t.alloc,
            };
            run_steps(&mut st, order, p, true, Some(&mut ra))?;
            let mut rf = Recorder {
                holds: &mut free,
                tally: &mut t.free,
            };
            run_steps(&mut st, order, p, false, Some(&mut rf))?;
        }
        Freeing::Lives(l) => {
            l.run(&mut st, order, None, None)?;
            let mut ra = Recorder {
                holds: &mut refill,
                tally: &mut t.alloc,
            };
            let mut rf = Recorder {
                holds: &mut free,
                tally: &mut t.free,
            };
            l.run(&mut st, order, Some(&mut ra), Some(&mut rf))?;
        }
        Freeing::Never => {
            run_steps(&mut st, order, a, true, None)?;
            let mut ra = Recorder {
                holds: &mut refill,
                tally: &mut t.alloc,
            };
            run_steps(&mut st, order, a, true, Some(&mut ra))?;
        }
        Freeing::Interleaved => interleaved(&mut st, order, a, &mut refill, &mut free, &mut t)?,
    }
    refill.sort_unstable();
    free.sort_unstable();
    Ok((refill, free, t, st))
}

/// Most runs one life may have: each run is stepped through the pageset (a warm-up and a
/// recorded life), so a million runs take about a second; finer lives than that are the
/// `Interleaved` loop in all but name.
pub const MAX_LIFE_RUNS: u64 = 1 << 20;

/// One life of [`Freeing::Lives`]: the allocation runs and the frees after each, then the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Life {
    /// Allocations of the life.
    pub pages: u64,
    /// Pages freed during it.
    pub life_free_pages: u64,
    /// Allocations per run.
    pub alloc_run_pages: u64,
    /// The life's frees come in runs of whole multiples of this (1: whatever is owed).
    pub free_run_pages: u64,
}

impl Life {
    /// The life as runs `(allocations, frees after them)`, the last run's frees including the
    /// pages left at the end: once `n` pages are allocated `L·n/P` (rounded down) are owed, and
    /// what is owed is freed in whole multiples of `f`; the frees sum to `P`.
    pub fn runs(&self) -> Result<Vec<(u64, u64)>> {
        let (p, l, r, f) = (
            self.pages,
            self.life_free_pages,
            self.alloc_run_pages,
            self.free_run_pages,
        );
        if p == 0 || r == 0 || f == 0 || l > p {
            return Err(Error::invalid(
                "process life",
                "pages / life_free_pages / alloc_run_pages / free_run_pages",
                format!(
                    "need pages >= 1, runs >= 1 page and life frees <= pages (got {p}, {l}, {r}, {f})"
                ),
            ));
        }
        if p.div_ceil(r) > MAX_LIFE_RUNS {
            return Err(Error::invalid(
                "process life",
                "alloc_run_pages",
                format!(
                    "{p} pages in runs of {r} are {} runs, more than {MAX_LIFE_RUNS}: each run is stepped through the pageset; give longer runs",
                    p.div_ceil(r)
                ),
            ));
        }
        let mut out = Vec::with_capacity(p.div_ceil(r) as usize);
        let (mut n, mut freed) = (0u64, 0u64);
        while n < p {
            let a = r.min(p - n);
            n += a;
            let owed = (u128::from(l) * u128::from(n) / u128::from(p)) as u64 - freed;
            let now = owed / f * f;
            out.push((a, now));
            freed += now;
        }
        if let Some(last) = out.last_mut() {
            last.1 += p - freed;
        }
        Ok(out)
    }

    /// A life that frees nothing while it runs: one allocation run of `pages`, every page
    /// freed at its end (the phase loop, `Freeing::Phases(pages)`).
    pub fn at_exit(pages: u64) -> Life {
        Life {
            pages,
            life_free_pages: 0,
            alloc_run_pages: pages,
            free_run_pages: 1,
        }
    }

    /// Pages freed at the life's end.
    pub fn exit_pages(&self) -> u64 {
        self.pages - self.life_free_pages
    }

    /// Steps `st` through one life, recording allocations into `ra` and frees into `rf`.
    pub fn run(
        &self,
        st: &mut PcpState,
        order: u8,
        mut ra: Option<&mut Recorder<'_>>,
        mut rf: Option<&mut Recorder<'_>>,
    ) -> Result<()> {
        for (a, f) in self.runs()? {
            run_steps(st, order, a, true, ra.as_deref_mut())?;
            if f > 0 {
                run_steps(st, order, f, false, rf.as_deref_mut())?;
            }
        }
        Ok(())
    }
}

/// Allocate-then-free pairs: a warm-up of `a` pairs, then `a` recorded. The state after a pair
/// repeats from the first pair on for the orders kept on PCP lists (the freed block is the next
/// one allocated), so the steps are not fast-forwarded; `a` pairs of a bypassing order are
/// counted in closed form (each pair is one hold on each side and leaves the state unchanged).
fn interleaved(
    st: &mut PcpState,
    order: u8,
    a: u64,
    refill: &mut Vec<(u32, u64)>,
    free: &mut Vec<(u32, u64)>,
    t: &mut LoopTally,
) -> Result<()> {
    // Warm-up until the state after a pair equals the state before it (a handful of pairs).
    let mut steady = false;
    for _ in 0..a.min(4096) {
        let before = st.clone();
        let _ = st.alloc(order)?;
        let _ = st.free(order)?;
        if *st == before {
            steady = true;
            break;
        }
    }
    if !steady {
        return Err(Error::Unsupported(format!(
            "the interleaved allocate/free loop of order {order} reached no steady state in 4096 pairs"
        )));
    }
    let s = st.alloc(order)?;
    let f = st.free(order)?;
    // One steady pair, repeated `a` times.
    if s.refill_pages > 0 {
        add_count(refill, s.refill_pages, a);
    }
    for h in f.drained_pages_per_hold {
        add_count(free, h, a);
    }
    if f.free_high {
        t.free.free_high_drains += a;
    }
    if s.bypassed_pcp {
        t.alloc.bypass_allocs += a;
    }
    t.alloc.steps = a;
    t.free.steps = a;
    t.alloc.count_sum = a as f64 * f64::from(st.count_pages);
    t.free.count_sum = t.alloc.count_sum;
    Ok(())
}

/// The line sources of a refill: the parent's mixture when the zone's tasks free the pages in
/// the loop ([`super::refill_line_sources`]), else `cold` (DRAM) for pages never freed during
/// the interval.
pub fn refill_sources(machine: &Machine, procs: u32, cold: bool) -> Vec<LineSource> {
    if cold {
        vec![LineSource {
            name: "cold",
            probability: 1.0,
            line_ns: machine.latency_ns.dram_local.value,
        }]
    } else {
        super::refill_line_sources(machine, procs)
    }
}

/// `pcp->batch` and a fixed `pcp->high` set by hand (None: the kernel's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PcpOverride {
    /// `pcp->batch`, pages.
    pub batch: Option<u32>,
    /// `pcp->high`, pages, fixed (on auto-tuning kernels `high_min = high_max = high`).
    pub high: Option<u32>,
}

impl PcpOverride {
    /// Sets the limits of one zone.
    pub fn apply(&self, pcp: &mut PcpLimits, auto_tunes: bool) {
        if let Some(b) = self.batch {
            pcp.batch_pages = b;
        }
        if let Some(h) = self.high {
            pcp.high = if auto_tunes {
                PcpHigh::AutoTuned {
                    high_min_pages: h,
                    high_max_pages: h,
                }
            } else {
                PcpHigh::Fixed { high_pages: h }
            };
        }
    }
}

/// How the work outside the lock is divided over the holds (the think times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkRule {
    /// A hold of `b` blocks is followed by the work of `b` blocks (thread 000's rule, under
    /// which its `work_ns_per_page` was fitted; pages served from what a free phase left on the
    /// list are not counted, a fraction `high / phase` of the work).
    BlocksMoved,
    /// The work of the whole iteration divided over its holds (`A · share · w / refills`,
    /// `A · (1 − share) · w / drains`): every allocation's work counts.
    PerIteration,
}

/// Mean cost of a line drawn from `sources` (probability-weighted), ns.
pub fn mean_line_ns(sources: &[LineSource]) -> f64 {
    sources.iter().map(|s| s.probability * s.line_ns).sum()
}

fn blocks(pages: f64, order: u8) -> f64 {
    if order == 0 {
        pages
    } else {
        pages / f64::from(1u32 << order)
    }
}

impl ZoneLockModel {
    /// Pages per hold of `shape` for each zone `tasks` tasks on `nodes` use, with
    /// `CONFIG_PCP_BATCH_SCALE_MAX` given or the kernel's default, and `pcp->batch` /
    /// `pcp->high` set by hand when `over` says so.
    pub fn loop_dynamics(
        &self,
        tasks: u32,
        nodes: NodeSpan,
        shape: &LoopShape,
        scale_max: Option<u8>,
        over: PcpOverride,
    ) -> Result<Vec<(u32, u32, BatchDynamics)>> {
        let cpus = nodes.nodes_on(&self.machine) * self.machine.cpus_per_node();
        if tasks == 0 || tasks > cpus {
            return Err(Error::invalid(
                "allocation loop",
                "tasks (--tasks, --procs)",
                format!(
                    "{tasks} tasks but {cpus} CPUs on {} node(s) of {} (one task per CPU is assumed)",
                    nodes.nodes_on(&self.machine),
                    self.machine.name
                ),
            ));
        }
        let mut cfg = self.kernel_config_opt(scale_max)?;
        for z in &mut cfg.zones {
            over.apply(&mut z.pcp, cfg.era.auto_tunes_high());
        }
        zone_shares(&self.machine, tasks, nodes)
            .into_iter()
            .map(|z| {
                Ok((
                    z.node,
                    z.procs,
                    super::loop_batch_dynamics(&cfg, z.node, shape)?,
                ))
            })
            .collect()
    }

    /// The lock queue of one zone for a loop whose work per allocation is
    /// `p.work_ns_per_page` (per block of the order), `share` of it after allocations: a
    /// `refill` class and a `free` class for the sides that take holds (None when neither does).
    pub fn queue_loop(
        &self,
        p: &ZoneLockParams,
        procs: u32,
        dyn_: &BatchDynamics,
        sources: &[LineSource],
        share: f64,
        rule: ThinkRule,
    ) -> Result<Option<LockQueue>> {
        let refills = dyn_.refills();
        let drains = dyn_.drains();
        if refills == 0 && drains == 0 {
            return Ok(None);
        }
        let order = dyn_.shape.order;
        let tot = (refills + drains) as f64;
        let mut classes = Vec::new();
        if refills > 0 {
            let think_refill = match rule {
                ThinkRule::BlocksMoved => {
                    blocks(dyn_.mean_refill_pages(), order) * share * p.work_ns_per_page
                }
                ThinkRule::PerIteration => {
                    dyn_.shape.allocs_per_iteration() as f64 / refills as f64
                        * share
                        * p.work_ns_per_page
                }
            };
            classes.push(
                self.refill_class(p, procs, dyn_, sources, think_refill)
                    .with_share(ClassShare::Fraction(refills as f64 / tot)),
            );
        }
        if drains > 0 {
            let think_free = match rule {
                ThinkRule::BlocksMoved => {
                    blocks(dyn_.mean_free_pages(), order) * (1.0 - share) * p.work_ns_per_page
                }
                ThinkRule::PerIteration => {
                    dyn_.shape.allocs_per_iteration() as f64 / drains as f64
                        * (1.0 - share)
                        * p.work_ns_per_page
                }
            };
            // A loop that frees without working after the free (share 1) still returns to its
            // next allocation: the lock queue needs a positive think time.
            let think_free = if think_free > 0.0 {
                think_free
            } else {
                1e-3 * p.work_ns_per_page.max(1.0)
            };
            classes.push(
                self.free_class(p, procs, dyn_, sources, think_free)?
                    .with_share(ClassShare::Fraction(drains as f64 / tot)),
            );
        }
        Ok(Some(LockQueue {
            n_cpus: procs,
            classes,
            think: ThinkLaw::Exponential,
        }))
    }

    /// Mean `check_new_pages()` per refill of `dyn_` that the allocating CPU pays outside
    /// zone->lock, ns: the refill's blocks checked as they leave the PCP list on 6.3
    /// ([`crate::model::hold::CodeHold::check_after_lock_ns`]); 0 on other kernels (under the
    /// lock before 6.3, off from 6.4) and with thread 000's fitted hold.
    pub fn refill_check_after_lock_ns(&self, dyn_: &BatchDynamics) -> f64 {
        let Some(c) = &self.code_hold else {
            return 0.0;
        };
        let order = dyn_.shape.order;
        let (sum, n) = dyn_
            .refill
            .iter()
            .fold((0.0, 0.0), |(sum, n), &(pages, count)| {
                let w = count as f64;
                (
                    sum + w * c.check_after_lock_ns(blocks(f64::from(pages), order), order),
                    n + w,
                )
            });
        if n > 0.0 {
            sum / n
        } else {
            0.0
        }
    }

    /// The refill class (`rmqueue_bulk()` holds of `dyn_`'s refill sizes, head lines from
    /// `sources`) among `procs` tasks, thinking `think_ns` between requests plus the refilled
    /// blocks' `check_new_pages()` where it runs outside the lock
    /// ([`Self::refill_check_after_lock_ns`]: CPU time between refills, not hold).
    fn refill_class(
        &self,
        p: &ZoneLockParams,
        procs: u32,
        dyn_: &BatchDynamics,
        sources: &[LineSource],
        think_ns: f64,
    ) -> HolderClass {
        let order = dyn_.shape.order;
        let c2c = self.handover_c2c_ns(procs);
        let mut atoms = Vec::new();
        for &(pages, count) in &dyn_.refill {
            for s in sources {
                atoms.push(HoldAtom {
                    hold_ns: self.refill_hold_ns(p, pages, order, procs, c2c, s),
                    weight: count as f64 * s.probability,
                });
            }
        }
        HolderClass::new(
            "refill",
            think_ns + self.refill_check_after_lock_ns(dyn_),
            HoldDist::Discrete { atoms },
        )
    }

    /// The drain class (`free_pcppages_bulk()` holds of `dyn_`'s drain sizes) among `procs`
    /// tasks, thinking `think_ns` between requests.
    fn free_class(
        &self,
        p: &ZoneLockParams,
        procs: u32,
        dyn_: &BatchDynamics,
        sources: &[LineSource],
        think_ns: f64,
    ) -> Result<HolderClass> {
        let hold = HoldDist::from_pages(
            &dyn_
                .free
                .iter()
                .map(|&(pages, count)| (pages, count as f64))
                .collect::<Vec<_>>(),
            self.drain_fixed_ns(p, procs, sources),
            self.free_ns_per_page(p, sources, dyn_.shape.order),
        )?;
        Ok(HolderClass::new("free", think_ns, hold))
    }

    /// The queue of `pairs` producer-consumer pairs on one zone: `pairs` CPUs only refill
    /// (the writers), `pairs` only drain (the readers), each class thinking its given mean
    /// between requests (dedicated classes, [`ClassShare::Cpus`]). A flow with no holds on
    /// either side gives None; a side without holds leaves its CPUs out of the queue.
    pub fn queue_pairs(
        &self,
        p: &ZoneLockParams,
        pairs: u32,
        dyn_: &BatchDynamics,
        think_refill_ns: f64,
        think_free_ns: f64,
    ) -> Result<Option<LockQueue>> {
        let procs = 2 * pairs.max(1);
        let sources = refill_sources(&self.machine, procs, false);
        let mut classes = Vec::new();
        if dyn_.refills() > 0 {
            classes.push(
                self.refill_class(p, procs, dyn_, &sources, think_refill_ns)
                    .with_share(ClassShare::Cpus(pairs)),
            );
        }
        if dyn_.drains() > 0 {
            classes.push(
                self.free_class(p, procs, dyn_, &sources, think_free_ns)?
                    .with_share(ClassShare::Cpus(pairs)),
            );
        }
        if classes.is_empty() {
            return Ok(None);
        }
        let n_cpus = pairs * classes.len() as u32;
        Ok(Some(LockQueue {
            n_cpus,
            classes,
            think: ThinkLaw::Exponential,
        }))
    }

    /// Mean core-to-core latency from one holder to the next among `procs` tasks (the
    /// refill line mix without the task itself; `c2c_same_llc` for one task).
    pub fn handover_c2c_ns(&self, procs: u32) -> f64 {
        let src = super::refill_line_sources(&self.machine, procs);
        let others: Vec<_> = src.iter().filter(|s| s.name != "self").collect();
        let p: f64 = others.iter().map(|s| s.probability).sum();
        if p > 0.0 {
            others
                .iter()
                .map(|s| s.probability * s.line_ns)
                .sum::<f64>()
                / p
        } else {
            self.machine.latency_ns.c2c_same_llc.value
        }
    }

    /// The fixed part of a hold on `side` among `procs` tasks, ns: `p.fixed_ns`, or the
    /// code-composed call and hand-over ([`crate::model::hold::CodeHold::fixed_ns`]), plus a
    /// ticket lock's hand-off growth ([`ZoneLockModel::handoff_extra_ns`]).
    pub fn fixed_ns(&self, p: &ZoneLockParams, procs: u32, side: HoldSide) -> f64 {
        self.handoff_extra_ns
            + match &self.code_hold {
                Some(c) => c.fixed_ns(
                    side,
                    crate::model::hold::p_other(procs),
                    self.handover_c2c_ns(procs),
                ),
                None => p.fixed_ns,
            }
    }

    /// The fixed part of a drain hold among `procs` tasks whose lines come from `sources`, ns:
    /// [`Self::fixed_ns`] of the drain side and, with the code-composed hold, the first block's
    /// remote free-list neighbour ([`crate::model::hold::CodeHold::drain_first_block_extra_ns`]).
    pub fn drain_fixed_ns(&self, p: &ZoneLockParams, procs: u32, sources: &[LineSource]) -> f64 {
        self.fixed_ns(p, procs, HoldSide::Drain)
            + self.code_hold.as_ref().map_or(0.0, |c| {
                c.drain_first_block_extra_ns(mean_line_ns(sources), self.block_pattern)
            })
    }

    /// Whether a refill whose head lines come from `s` reads its struct pages as a stream
    /// (freshly split blocks, or sequential frees merged back): the code-composed hold then pays
    /// a stream restart after a hand-over.
    fn refill_streams(&self, s: &LineSource) -> bool {
        s.name == "cold" || self.block_pattern == crate::model::hold::BlockPattern::Sequential
    }

    /// The fixed part of a refill hold among `procs` tasks whose head lines come from
    /// `sources`, ns: [`Self::fixed_ns`] of the refill side, with the stream restart only for
    /// the share of refills that read a stream.
    pub fn refill_fixed_ns(&self, p: &ZoneLockParams, procs: u32, sources: &[LineSource]) -> f64 {
        let streamed = self.fixed_ns(p, procs, HoldSide::Refill);
        let total: f64 = sources.iter().map(|s| s.probability).sum();
        let Some(c) = self.code_hold.as_ref().filter(|_| total > 0.0) else {
            return streamed;
        };
        let unstreamed: f64 = sources
            .iter()
            .filter(|s| !self.refill_streams(s))
            .map(|s| s.probability)
            .sum::<f64>()
            / total;
        streamed - unstreamed * c.restart_ns(crate::model::hold::p_other(procs))
    }

    /// One refill hold of `pages` pages of `order` whose struct-page lines come from `s`, ns:
    /// thread 000's `fixed_ns + pages (cpu + lines_per_page x line)`, or the code-composed hold
    /// (`s` is then the head line's source unless it is `cold`: freshly split blocks, streamed;
    /// `c2c_ns` is [`Self::handover_c2c_ns`] of `procs`, computed once by the caller).
    pub fn refill_hold_ns(
        &self,
        p: &ZoneLockParams,
        pages: u32,
        order: u8,
        procs: u32,
        c2c_ns: f64,
        s: &LineSource,
    ) -> f64 {
        self.handoff_extra_ns
            + match &self.code_hold {
                Some(c) => c
                    .refill(
                        blocks(f64::from(pages), order),
                        order,
                        crate::model::hold::p_other(procs),
                        c2c_ns,
                        (!self.refill_streams(s)).then_some(s.line_ns),
                    )
                    .total(),
                None => {
                    p.fixed_ns
                        + f64::from(pages) * (self.cpu_ns_per_page + p.lines_per_page * s.line_ns)
                }
            }
    }

    /// Hold per page of a drain of blocks of `order`: thread 000's page's own line (L2, just
    /// freed by this CPU) and [`super::FREE_MERGE_LINES`] buddy lines from the refill mixture
    /// per page, or the code-composed block ([`crate::model::hold::CodeHold::drain_block_ns`]:
    /// its own line and [`crate::model::hold::FREE_REMOTE_LINES`] lines from the mixture, per
    /// block, not per base page) spread over the block's pages.
    pub fn free_ns_per_page(&self, p: &ZoneLockParams, sources: &[LineSource], order: u8) -> f64 {
        let mix = mean_line_ns(sources);
        match &self.code_hold {
            Some(c) => {
                // Sequential frees: the free list's neighbour was last written by whichever
                // task added to that list last; when that was this task, it was a moment ago
                // (a block of this drain or of its previous one: an L2 hit), not the "self"
                // line of the refill mixture, which stands for a page this CPU wrote long ago.
                let mix = match self.block_pattern {
                    crate::model::hold::BlockPattern::Sequential => sources
                        .iter()
                        .map(|s| s.probability * if s.name == "self" { c.l2_ns } else { s.line_ns })
                        .sum(),
                    crate::model::hold::BlockPattern::Scattered => mix,
                };
                c.drain_block_ns(self.own_line_ns, mix, self.block_pattern)
                    / f64::from(1u32 << order.min(20))
            }
            None => {
                self.cpu_ns_per_page
                    + p.lines_per_page
                        * (self.own_line_ns
                            + crate::assumptions::value(
                                "zonelock::FREE_MERGE_LINES",
                                FREE_MERGE_LINES,
                            ) * mix)
            }
        }
    }

    /// Predicts a loop from its batch dynamics: `share` of the work after allocations, `cold`
    /// refills when the pages are never freed in the interval, think times by `rule`. With
    /// `distribution` the refill latency distribution of each zone is built too.
    pub fn predict_loop(
        &self,
        p: &ZoneLockParams,
        dyns: &[(u32, u32, BatchDynamics)],
        share: f64,
        cold: bool,
        rule: ThinkRule,
        distribution: bool,
    ) -> Result<Prediction> {
        let mut zones = Vec::new();
        for (node, procs, d) in dyns {
            let sources = refill_sources(&self.machine, *procs, cold);
            let q = self.queue_loop(p, *procs, d, &sources, share, rule)?;
            let mut z = ZonePrediction {
                node: *node,
                procs: *procs,
                dynamics: d.clone(),
                line_sources: sources,
                lock_utilisation: 0.0,
                refill_per_s: 0.0,
                free_per_s: 0.0,
                refill_hold_ns: 0.0,
                free_hold_ns: 0.0,
                refill_wait_ns: 0.0,
                refill_latency_ns: 0.0,
                free_wait_ns: 0.0,
                refill_wait_q_ns: [f64::NAN; 2],
                free_wait_q_ns: [f64::NAN; 2],
                exact: true,
                dist: None,
                lru: None,
            };
            if let Some(q) = q {
                let sol = q.solve()?;
                z.lock_utilisation = sol.utilisation;
                z.exact = sol.exact;
                for (i, c) in sol.classes.iter().enumerate() {
                    let wait_q = if distribution {
                        let w = q.wait_distribution_from(&sol, i)?;
                        // The lock found free is a wait of zero (the point the distribution
                        // puts at 1e-9 ns stands for it).
                        let z = |x: f64| if x < 1e-6 { 0.0 } else { x };
                        [z(w.quantile(0.5)?), z(w.quantile(0.99)?)]
                    } else {
                        [f64::NAN; 2]
                    };
                    if q.classes[i].name == "refill" {
                        z.refill_wait_q_ns = wait_q;
                        z.refill_per_s = c.throughput_per_s;
                        z.refill_hold_ns = c.hold_ns_mean;
                        z.refill_wait_ns = c.wait_ns_mean;
                        z.refill_latency_ns = c.response_ns_mean;
                        if distribution {
                            z.dist = Some(q.latency_distribution_from(&sol, i)?);
                        }
                    } else {
                        z.free_wait_q_ns = wait_q;
                        z.free_per_s = c.throughput_per_s;
                        z.free_hold_ns = c.hold_ns_mean;
                        z.free_wait_ns = c.wait_ns_mean;
                    }
                }
            }
            zones.push(z);
        }
        Ok(Prediction::from_zones(zones, self.handoff_extra_ns))
    }
}
