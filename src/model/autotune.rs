//! PCP high auto-tuning (6.7 on) as dynamics in time, per workload: the kernel's own pageset
//! ([`PcpState`]: `nr_pcp_alloc()` raises `pcp->high` on refills, `nr_pcp_high()` raises it to
//! `free_count + batch` on the free path and lowers it on `free_high`, `decay_pcp_high()` lowers
//! it by 1/8 on every vmstat tick and drains the excess) stepped through a workload's page flow in
//! simulated time, so that zone traffic (pages and holds), `free_high` drains, the pages held on
//! the PCP lists and, through the zone->lock queue of [`crate::model::zonelock`], lock contention
//! and the time per unit of work come out of it.
//!
//! # States of Huang Ying's series (cumulative, v3 numbering)
//! [`SeriesState`]: `Base` is 6.6 (fixed `high`; `free_high` on any order-1..3 free once
//! `free_factor > 0`); `NoAutoTune` is 6.7 with `high_min == high_max` (the kernel's own path
//! when `vm.percpu_pagelist_high_fraction` is set: patches 1-6 in effect, i.e. two consecutive
//! high-order frees for `free_high` (patch 1), PCPF_FREE_HIGH_BATCH (patch 3), `alloc_factor`
//! (patch 5), `free_count` in place of `free_factor`); `AutoTune` is 6.7 (the whole series).
//! PCPF_FREE_HIGH_BATCH is set from the machine: `per_cpu_data_slice_size = llc_size /
//! cpus_sharing_llc` (drivers/base/cacheinfo.c, 6.7) above `3 * batch` pages.
//!
//! # Flows
//! - [`ProcessFlow`] (kbuild): each CPU runs processes back to back; a process allocates its
//!   order-1 PGD (`pgd_alloc()` at fork), then `pages` order-0 pages with `work_ns` of work each
//!   (`share` of it during allocation); at exit the user pages are freed (`exit_mmap()`), then the
//!   PGD (`mm_free_pgd()`).
//! - [`PairFlow`] (lmbench AF_UNIX): a writer allocates the blocks of a message (one order, or
//!   the orders of an skb's frags, [`crate::kernel::skb`]), its reader frees them on another CPU;
//!   each side works `work_ns` per message. The tally counts the blocks each side moved, and
//!   [`lock_outcome`] charges the holds per block.
//!
//! Time advances by the work of each step; every `tick_ns` of simulated time each pageset gets a
//! `decay_pcp_high()` (>= 6.7; 6.6 has none). The first `warmup` share of the run is not recorded.
//!
//! # Assumptions
//! - One CPU's pageset stands for all (the CPUs of a zone run the same flow, out of phase).
//! - Zone->lock holds are not in the simulated time (they are microseconds against seconds of
//!   work; the queue adds them afterwards).
//! - The buddy allocator always has pages; no ZONE_BELOW_HIGH / reclaim (no memory pressure).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::layout::ZoneKind;
use crate::kernel::ops::{pcpf_free_high_batch, PcpState};
use crate::kernel::version::KernelVersion;
use crate::memo::Memo;
use crate::model::zonelock::generic::Life;
use crate::model::zonelock::{
    BatchDynamics, Freeing, LoopShape, LoopTally, ThinkRule, ZoneLockModel, ZoneLockParams,
};

/// A cumulative state of Huang Ying's PCP auto-tuning series that the model can express.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesState {
    /// Kernel 6.6, before the series.
    Base,
    /// 6.7 without auto-tuning (`high_min == high_max`): the series up to patch 5 (v3 numbering).
    NoAutoTune,
    /// 6.7: the whole series.
    AutoTune,
}

impl SeriesState {
    /// The kernel version the state is built on.
    pub fn kernel(self) -> KernelVersion {
        match self {
            SeriesState::Base => KernelVersion::new(6, 6),
            _ => KernelVersion::new(6, 7),
        }
    }

    /// The series' label of the state (its tables' `kernel` column).
    pub fn label(self) -> &'static str {
        match self {
            SeriesState::Base => "base",
            SeriesState::NoAutoTune => "patch5",
            SeriesState::AutoTune => "patch7",
        }
    }
}

/// Whether PCPF_FREE_HIGH_BATCH is set on `machine` for `batch`: the per-CPU slice of the LLC
/// above three batches ([`pcpf_free_high_batch`]).
pub fn free_high_batch_flag(machine: &Machine, batch_pages: u32) -> bool {
    let sharers = (machine.cpus() / machine.llc_domains().max(1)).max(1);
    pcpf_free_high_batch(
        machine.llc_bytes_per_domain() / u64::from(sharers),
        batch_pages,
    )
}

/// The pageset of `node`'s Normal zone in `state`.
pub fn pageset(model: &ZoneLockModel, state: SeriesState, node: u32) -> Result<PcpState> {
    let cfg = model.kernel_config_opt(None)?;
    let mut st = cfg.pcp_state(node, ZoneKind::Normal)?;
    if state == SeriesState::NoAutoTune {
        st.high_max_pages = st.high_min_pages;
        st.high_pages = st.high_min_pages;
    }
    if state != SeriesState::Base {
        st.flags.free_high_batch = free_high_batch_flag(&model.machine, st.batch_pages);
    }
    Ok(st)
}

/// What a flow did over its recorded span, per zone's CPU (or pair).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowTally {
    /// `(pages, holds)` of refills (and allocations bypassing the lists).
    pub refill: Vec<(u32, u64)>,
    /// `(pages, holds)` of drains (free path and decay).
    pub drain: Vec<(u32, u64)>,
    /// Pages allocated from the zone (refills), all orders.
    pub zone_alloc_pages: u64,
    /// Drains taken by the `free_high` path.
    pub free_high_drains: u64,
    /// Blocks of the flow's unit of work (pages of the working set, or blocks sent) recorded.
    pub work_units: u64,
    /// Simulated time recorded, ns.
    pub span_ns: f64,
    /// Time-average pages on the PCP lists (all pagesets of the flow), pages.
    pub mean_pcp_pages: f64,
    /// Live `pcp->high` at the end, pages (of the freeing pageset).
    pub final_high_pages: u32,
    /// Time-average live `pcp->high` of the freeing pageset, pages.
    pub mean_high_pages: f64,
    /// Blocks the refills moved (one `__rmqueue()` each), all orders.
    pub refill_blocks: u64,
    /// Blocks the drains returned (one `__free_one_page()` each), all orders.
    pub drain_blocks: u64,
}

impl FlowTally {
    /// Adds another run's tally (counts, spans and areas add; the mean held is span-weighted).
    pub fn merge(&mut self, o: &FlowTally) {
        let span = self.span_ns + o.span_ns;
        if span > 0.0 {
            self.mean_pcp_pages =
                (self.mean_pcp_pages * self.span_ns + o.mean_pcp_pages * o.span_ns) / span;
            self.mean_high_pages =
                (self.mean_high_pages * self.span_ns + o.mean_high_pages * o.span_ns) / span;
        }
        self.span_ns = span;
        for &(p, n) in &o.refill {
            add_n(&mut self.refill, p, n);
        }
        self.refill_blocks += o.refill_blocks;
        self.drain_blocks += o.drain_blocks;
        for &(p, n) in &o.drain {
            add_n(&mut self.drain, p, n);
        }
        self.refill.sort_unstable();
        self.drain.sort_unstable();
        self.zone_alloc_pages += o.zone_alloc_pages;
        self.free_high_drains += o.free_high_drains;
        self.work_units += o.work_units;
        self.final_high_pages = o.final_high_pages;
    }
}

fn add(v: &mut Vec<(u32, u64)>, pages: u32) {
    add_n(v, pages, 1);
}

fn add_n(v: &mut Vec<(u32, u64)>, pages: u32, n: u64) {
    if pages == 0 {
        return;
    }
    match v.iter_mut().find(|r| r.0 == pages) {
        Some(r) => r.1 += n,
        None => v.push((pages, n)),
    }
}

/// Records steps and ticks into a [`FlowTally`] once past the warm-up.
struct Clock {
    t_ns: f64,
    next_tick_ns: f64,
    tick_ns: f64,
    record_from_ns: f64,
    end_ns: f64,
    pcp_area: f64,
    high_area: f64,
    tally: FlowTally,
}

impl Clock {
    fn new(tick_ns: f64, phase: f64, end_ns: f64, warmup: f64) -> Result<Clock> {
        if !(tick_ns.is_finite() && tick_ns > 0.0 && end_ns.is_finite() && end_ns > 0.0) {
            return Err(Error::invalid(
                "auto-tuning flow",
                "tick / span",
                "must be finite and > 0",
            ));
        }
        Ok(Clock {
            t_ns: 0.0,
            next_tick_ns: tick_ns * (1.0 - phase.clamp(0.0, 0.999)),
            tick_ns,
            record_from_ns: warmup.clamp(0.0, 0.9) * end_ns,
            end_ns,
            pcp_area: 0.0,
            high_area: 0.0,
            tally: FlowTally::default(),
        })
    }

    fn recording(&self) -> bool {
        self.t_ns >= self.record_from_ns
    }

    /// Advances by `dt` with `held` pages on the lists and the freeing pageset's live `high`,
    /// ticking `decay_pcp_high()` on `sets`.
    fn advance(&mut self, dt: f64, held: u32, high: u32, sets: &mut [&mut PcpState]) -> Result<()> {
        if self.recording() {
            self.pcp_area += f64::from(held) * dt;
            self.high_area += f64::from(high) * dt;
            self.tally.span_ns += dt;
        }
        self.t_ns += dt;
        while self.t_ns >= self.next_tick_ns {
            self.next_tick_ns += self.tick_ns;
            for s in sets.iter_mut() {
                if s.version() >= KernelVersion::new(6, 7) {
                    let before = s.drained_blocks;
                    let d = s.decay_pcp_high()?;
                    if self.recording() {
                        self.tally.drain_blocks += s.drained_blocks - before;
                        for h in d.drained_pages_per_hold {
                            add(&mut self.tally.drain, h);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn alloc(&mut self, st: &mut PcpState, order: u8) -> Result<()> {
        let s = st.alloc(order)?;
        if self.recording() && s.refill_pages > 0 {
            add(&mut self.tally.refill, s.refill_pages);
            self.tally.refill_blocks += u64::from(s.refill_blocks);
            self.tally.zone_alloc_pages += u64::from(s.refill_pages);
        }
        Ok(())
    }

    fn free(&mut self, st: &mut PcpState, order: u8) -> Result<()> {
        let before = st.drained_blocks;
        let f = st.free(order)?;
        if self.recording() {
            self.tally.drain_blocks += st.drained_blocks - before;
            if f.free_high && !f.drained_pages_per_hold.is_empty() {
                self.tally.free_high_drains += 1;
            }
            for h in f.drained_pages_per_hold {
                add(&mut self.tally.drain, h);
            }
        }
        Ok(())
    }

    fn finish(mut self, final_high: u32) -> FlowTally {
        (self.tally.mean_pcp_pages, self.tally.mean_high_pages) = if self.tally.span_ns > 0.0 {
            (
                self.pcp_area / self.tally.span_ns,
                self.high_area / self.tally.span_ns,
            )
        } else {
            (0.0, 0.0)
        };
        self.tally.final_high_pages = final_high;
        self.tally.refill.sort_unstable();
        self.tally.drain.sort_unstable();
        self.tally
    }
}

/// Processes run back to back on one CPU (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProcessFlow {
    /// A process's life: the order-0 pages it allocates, those it frees while it runs and in
    /// what runs, the rest at exit ([`Life::at_exit`]: all at exit).
    pub life: Life,
    /// Work per page, ns.
    pub work_ns: f64,
    /// Share of the work done while allocating (the rest while exiting).
    pub share: f64,
    /// Order of the PGD allocated at fork and freed last at exit.
    pub pgd_order: u8,
    /// vmstat interval, ns.
    pub tick_ns: f64,
    /// Processes simulated (the first quarter is warm-up).
    pub processes: u32,
    /// Where in its interval the first tick falls (0..1): runs at several phases average over
    /// the ticks' position in a process's life (a process of about one tick would otherwise
    /// lock onto one phase).
    pub tick_phase: f64,
}

impl ProcessFlow {
    /// Steps `st` through the flow; work units are pages of the working sets recorded.
    pub fn run(&self, st: &mut PcpState) -> Result<FlowTally> {
        let pages = self.life.pages;
        if pages == 0
            || !(self.work_ns.is_finite() && self.work_ns > 0.0)
            || !(0.0..=1.0).contains(&self.share)
        {
            return Err(Error::invalid(
                "process flow",
                "pages / work_ns / share",
                "need pages >= 1, work > 0 and a share in 0..=1",
            ));
        }
        let runs = self.life.runs()?;
        let per_process = pages as f64 * self.work_ns;
        let end = per_process * f64::from(self.processes.max(4));
        let mut c = Clock::new(self.tick_ns, self.tick_phase, end, 0.25)?;
        // The work while allocating follows each allocation; the exit's share is spread over
        // the pages freed at exit (the life's own frees take no work of their own).
        let da = self.share * self.work_ns;
        let exit_pages = self.life.exit_pages();
        let df = (1.0 - self.share) * self.work_ns * pages as f64 / exit_pages.max(1) as f64;
        let last = runs.len() - 1;
        while c.t_ns < c.end_ns {
            let rec = c.recording();
            c.alloc(st, self.pgd_order)?;
            for (i, &(a, f)) in runs.iter().enumerate() {
                for _ in 0..a {
                    c.alloc(st, 0)?;
                    let (held, high) = (st.count_pages, st.high_pages);
                    c.advance(da, held, high, &mut [&mut *st])?;
                }
                let (life, exit) = if i == last {
                    (f - exit_pages, exit_pages)
                } else {
                    (f, 0)
                };
                for _ in 0..life {
                    c.free(st, 0)?;
                }
                for _ in 0..exit {
                    c.free(st, 0)?;
                    let (held, high) = (st.count_pages, st.high_pages);
                    c.advance(df, held, high, &mut [&mut *st])?;
                }
            }
            c.free(st, self.pgd_order)?;
            if rec {
                c.tally.work_units += pages;
            }
        }
        let h = st.high_pages;
        Ok(c.finish(h))
    }
}

/// A writer/reader pair (module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairFlow {
    /// Orders of the blocks one message allocates on the writer and frees on the reader, in
    /// the kernel's order (one entry for a flow of equal blocks; an skb's frags:
    /// [`crate::kernel::skb::unix_stream_write_orders`]).
    pub orders: Vec<u8>,
    /// Work per message on each side, ns.
    pub work_ns: f64,
    /// vmstat interval, ns.
    pub tick_ns: f64,
    /// Simulated span, ns (the first quarter is warm-up).
    pub span_ns: f64,
    /// Order-0 allocations the reader's CPU makes per block it frees (its own page use, which
    /// halves `free_count` and ends a run of frees); 0 for a pure reader.
    pub reader_allocs_per_block: f64,
    /// Pages the reader allocates in one burst (back to back, before its next free; 1: one at
    /// a time). Each allocation halves `free_count`, so a few bursts leave most runs of frees
    /// whole where the same pages allocated one by one would cut many.
    pub reader_alloc_burst_pages: f64,
    /// Share of the blocks the writer frees itself, right after allocating them (skbs the
    /// network stack hands back to the allocating CPU); 0: the reader frees every block.
    pub writer_free_share: f64,
}

impl PairFlow {
    /// Steps the writer's pageset `w` and the reader's `r` through the flow; work units are
    /// messages sent while recording.
    pub fn run(&self, w: &mut PcpState, r: &mut PcpState) -> Result<FlowTally> {
        self.run_recording(w, r, 0.25)
    }

    /// [`PairFlow::run`] recording from `warmup` (a share of the span) on: 0 replays a traced
    /// span from the pagesets' recorded state, 0.25 leaves a quarter to reach the steady state.
    pub fn run_recording(
        &self,
        w: &mut PcpState,
        r: &mut PcpState,
        warmup: f64,
    ) -> Result<FlowTally> {
        if !self.work_ns.is_finite() || self.work_ns <= 0.0 {
            return Err(Error::invalid("pair flow", "work_ns", "must be > 0"));
        }
        if self.orders.is_empty() {
            return Err(Error::invalid(
                "pair flow",
                "orders",
                "a message needs at least one block",
            ));
        }
        if !(self.reader_alloc_burst_pages.is_finite() && self.reader_alloc_burst_pages >= 1.0) {
            return Err(Error::invalid(
                "pair flow",
                "reader_alloc_burst_pages",
                "must be a finite number >= 1",
            ));
        }
        for (name, v) in [
            ("reader_allocs_per_block", self.reader_allocs_per_block),
            ("writer_free_share", self.writer_free_share),
        ] {
            if !(v.is_finite() && v >= 0.0) || (name == "writer_free_share" && v > 1.0) {
                return Err(Error::invalid(
                    "pair flow",
                    name,
                    "must be >= 0 (a share <= 1)",
                ));
            }
        }
        let mut c = Clock::new(self.tick_ns, 0.0, self.span_ns, warmup)?;
        // Deterministic interleaving of the fractional rates: a block goes to the writer's
        // list when the running share crosses the next whole block, likewise the reader's
        // allocations.
        let (mut to_writer, mut reader_allocs) = (0.0_f64, 0.0_f64);
        let burst_pages = self.reader_alloc_burst_pages.round().clamp(1.0, 1e6) as u32;
        let burst = f64::from(burst_pages);
        let mut freed = Vec::with_capacity(self.orders.len());
        // The pageset whose high the tally reports: the one most blocks are freed to.
        let reader_frees = self.writer_free_share < 0.5;
        let freeing_high = |w: &PcpState, r: &PcpState| {
            if reader_frees {
                r.high_pages
            } else {
                w.high_pages
            }
        };
        while c.t_ns < c.end_ns {
            freed.clear();
            for &o in &self.orders {
                c.alloc(w, o)?;
                to_writer += self.writer_free_share;
                if to_writer >= 1.0 {
                    to_writer -= 1.0;
                    c.free(w, o)?;
                } else {
                    freed.push(o);
                }
            }
            for &o in &freed {
                c.free(r, o)?;
                reader_allocs += self.reader_allocs_per_block / burst;
                while reader_allocs >= 1.0 {
                    reader_allocs -= 1.0;
                    for _ in 0..burst_pages {
                        c.alloc(r, 0)?;
                    }
                    // The reader's own pages go back to its list before the next block.
                    for _ in 0..burst_pages {
                        c.free(r, 0)?;
                    }
                }
            }
            if c.recording() {
                c.tally.work_units += 1;
            }
            let held = w.count_pages + r.count_pages;
            let high = freeing_high(w, r);
            c.advance(self.work_ns, held, high, &mut [&mut *w, &mut *r])?;
        }
        Ok(c.finish(freeing_high(w, r)))
    }
}

/// vmstat's interval (`sysctl_stat_interval`, HZ: one second), ns: how often
/// `decay_pcp_high()` runs.
pub const VMSTAT_INTERVAL_NS: f64 = 1e9;

/// Work per 4 KiB page that paces a [`live_high`] run against the vmstat tick, ns: the order of
/// thread 004's fitted work. It moves nothing while a run of `LIVE_HIGH_MESSAGES` stays
/// under one tick (below about 2 us per page for order-3 blocks): the kernel's rules between
/// ticks count events, not time.
pub const LIVE_HIGH_PACE_NS_PER_PAGE: f64 = 300.0;

/// Messages a [`live_high`] run steps at most: enough for the live high to settle many times
/// over (it moves by `batch` per refill and by `batch << scale_max` per `free_high` free). At
/// the pace of a network flow this is less than one vmstat tick, so the mean is the high
/// between ticks; a tick's decay (at most 1/8) is not in it. The run starts from an empty
/// list at `high_min`, as after boot: a live high left higher by an earlier workload decays
/// to this only over many ticks.
const LIVE_HIGH_MESSAGES: f64 = 60_000.0;

/// A steady producer/consumer flow whose live `pcp->high` [`live_high`] finds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveHighFlow {
    /// The pageset limits (`high_min`/`high_max` on 6.7+, the fixed high before).
    pub limits: crate::kernel::pageset::PcpLimits,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` (None: the kernel's default).
    pub scale_max: Option<u8>,
    /// PCPF_FREE_HIGH_BATCH ([`free_high_batch_flag`]).
    pub free_high_batch: bool,
    /// The flow: orders, work per message, the reader's own allocations, the writer's frees.
    pub pair: PairFlow,
}

/// The live `pcp->high` of the pageset a producer/consumer flow frees to, time-averaged over
/// the kernel's own rules stepped through the flow (6.7+: refills raise it by `batch`, frees
/// above it raise it to `free_count + batch`, `free_high` frees lower it by
/// `batch << scale_max`, each vmstat tick decays it by 1/8); the fixed high before 6.7.
/// Memoised: optimal-high, explain and predict ask for the same flow many times.
pub fn live_high(kernel: KernelVersion, f: &LiveHighFlow) -> Result<f64> {
    static MEMO: Memo<String, f64> = Memo::new();
    if !kernel.era().auto_tunes_high() {
        if let crate::kernel::pageset::PcpHigh::Fixed { high_pages } = f.limits.high {
            return Ok(f64::from(high_pages));
        }
    }
    let key = format!("{kernel}|{}", serde_json::to_string(f).unwrap_or_default());
    MEMO.get_or_try(key, || {
        let mut pair = f.pair.clone();
        pair.span_ns = pair.span_ns.min(LIVE_HIGH_MESSAGES * pair.work_ns);
        let mut w = PcpState::new(kernel, f.limits, f.scale_max)?;
        w.flags.free_high_batch = f.free_high_batch;
        let mut r = w.clone();
        let t = pair.run(&mut w, &mut r)?;
        Ok(t.mean_high_pages)
    })
}

/// A flow's tally through the zone->lock queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LockOutcome {
    /// Time per work unit of one CPU (pairs: of the slower side), ns: work, holds and waits.
    pub ns_per_unit: f64,
    /// Share of the CPUs' busy time spent waiting for zone->lock: the share of cycles a
    /// `perf` profile finds spinning, since the cycles event does not count while a CPU is idle.
    /// Of a pair, the faster side sleeps while it waits for its partner (a writer blocked on a
    /// full socket buffer); that time is not busy.
    pub contention: f64,
    /// Lock utilisation.
    pub utilisation: f64,
    /// zone->lock hold time per work unit, ns (pairs: both sides of one pair): with `n` CPUs
    /// (pairs) on the lock, `n` times this bounds the time per unit from below.
    pub hold_ns_per_unit: f64,
    /// Mean hold of a refill and of a drain, ns (0 for a side without holds).
    pub refill_drain_hold_ns: (f64, f64),
}

/// How a flow loads one zone's lock: `cpus` CPUs; `work_ns` of work of one CPU per work unit;
/// `pairs` when each work unit involves two CPUs (a writer that refills and a reader that
/// drains), else one CPU does both sides and `share` of its work follows allocations; blocks
/// of `order`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ZoneLoad {
    /// CPUs on the zone.
    pub cpus: u32,
    /// Work of one CPU per work unit, ns.
    pub work_ns: f64,
    /// Writer/reader pairs.
    pub pairs: bool,
    /// Share of the work after allocations (one CPU doing both sides).
    pub share: f64,
    /// Block order.
    pub order: u8,
}

/// Solves the lock queue of a zone loaded by `load` running the flow of `tally`.
pub fn lock_outcome(
    model: &ZoneLockModel,
    p: &ZoneLockParams,
    tally: &FlowTally,
    load: &ZoneLoad,
) -> Result<LockOutcome> {
    let ZoneLoad {
        cpus,
        work_ns,
        pairs,
        share,
        order,
    } = *load;
    let units = tally.work_units.max(1);
    // The lock's hold costs are per block of `order`. A flow of several orders (the frags of
    // an skb: crate::kernel::skb) records the blocks each side moved; its holds are charged by
    // blocks, as pages of `order` (a refill's and a drain's cost per block does not depend on
    // the order once the refill's checks run outside the lock, 6.3+). For a flow of one order
    // the blocks are the pages over 2^order and the holds are unchanged.
    let by_blocks = |holds: &[(u32, u64)], blocks: u64| -> Vec<(u32, u64)> {
        let pages: u64 = holds.iter().map(|&(p, n)| u64::from(p) * n).sum();
        if blocks == 0 || pages == 0 || blocks << order == pages {
            return holds.to_vec();
        }
        let f = (blocks << order) as f64 / pages as f64;
        let mut out: Vec<(u32, u64)> = Vec::new();
        for &(p, n) in holds {
            add_n(&mut out, (f64::from(p) * f).round().max(1.0) as u32, n);
        }
        out
    };
    let d = BatchDynamics {
        refill: by_blocks(&tally.refill, tally.refill_blocks),
        free: by_blocks(&tally.drain, tally.drain_blocks),
        pages_per_iteration: units << order,
        batch_pages: 0,
        scale_max: None,
        leftover_pages: 0,
        shape: LoopShape {
            order,
            freeing: Freeing::Phases(units),
        },
        tally: LoopTally {
            alloc: Default::default(),
            free: Default::default(),
        },
    };
    if pairs {
        return pair_outcome(model, p, &d, units, work_ns, (cpus / 2).max(1));
    }
    let params = ZoneLockParams {
        work_ns_per_page: work_ns,
        ..*p
    };
    let pred = model.predict_loop(
        &params,
        &[(0, cpus, d.clone())],
        share,
        false,
        ThinkRule::PerIteration,
        false,
    )?;
    let z = &pred.zones[0];
    let refills = d.refills() as f64;
    let drains = d.drains() as f64;
    let u = units as f64;
    let wait = refills * z.refill_wait_ns + drains * z.free_wait_ns;
    let hold = refills * z.refill_hold_ns + drains * z.free_hold_ns;
    let t = u * work_ns + hold + wait;
    Ok(LockOutcome {
        ns_per_unit: t / u,
        contention: if t > 0.0 { wait / t } else { 0.0 },
        utilisation: z.lock_utilisation,
        hold_ns_per_unit: hold / u,
        refill_drain_hold_ns: (z.refill_hold_ns, z.free_hold_ns),
    })
}

/// Iterations of [`pair_outcome`]'s fixed point before it is an error: it converges to 1e-9 in
/// at most 25 over the literature tables and `predict` of the pair workloads at 2-512 pairs on
/// four machines and two kernels.
const PAIR_ITERATIONS: usize = 500;

/// The zone->lock outcome of `pairs` writer/reader pairs moving the flow of `d` (`units` work
/// units, `work_ns` of work per unit on each side): the writers are `pairs` CPUs that only
/// refill, the readers `pairs` CPUs that only drain (dedicated classes of the lock queue,
/// [`ZoneLockModel::queue_pairs`]). A pair moves at the pace of its slower side; the faster
/// side sleeps while it waits for its partner (a writer blocked on a full socket buffer, a
/// reader on an empty one), so its think time between lock requests is its work and that
/// sleep: per unit `t = work + max(side_r, side_f)` with `side = holds x (hold + wait)`, and a
/// side's think per request `(t - side) / holds`. Solved as a damped fixed point in `t`.
fn pair_outcome(
    model: &ZoneLockModel,
    p: &ZoneLockParams,
    d: &BatchDynamics,
    units: u64,
    work_ns: f64,
    pairs: u32,
) -> Result<LockOutcome> {
    let u = units as f64;
    let r = d.refills() as f64 / u;
    let f = d.drains() as f64 / u;
    let params = ZoneLockParams {
        work_ns_per_page: work_ns,
        ..*p
    };
    // A think time must be positive even for a side with no work.
    let floor = 1e-3 * work_ns.max(1.0);
    let think = |visits: f64, t: f64, side: f64| {
        if visits > 0.0 {
            ((t - side) / visits).max(floor)
        } else {
            floor
        }
    };
    let (mut zr, mut zf) = (think(r, work_ns, 0.0), think(f, work_ns, 0.0));
    let mut out = LockOutcome {
        ns_per_unit: work_ns,
        contention: 0.0,
        utilisation: 0.0,
        hold_ns_per_unit: 0.0,
        refill_drain_hold_ns: (0.0, 0.0),
    };
    for _ in 0..PAIR_ITERATIONS {
        let Some(q) = model.queue_pairs(&params, pairs, d, zr, zf)? else {
            return Ok(out);
        };
        let sol = q.solve()?;
        let class = |name: &str| {
            sol.classes
                .iter()
                .find(|c| c.name == name)
                .map_or((0.0, 0.0), |c| (c.hold_ns_mean, c.wait_ns_mean))
        };
        let ((hr, wr), (hf, wf)) = (class("refill"), class("free"));
        let (side_r, side_f) = (r * (hr + wr), f * (hf + wf));
        let t = work_ns + side_r.max(side_f);
        let wait = r * wr + f * wf;
        let busy = 2.0 * work_ns + side_r + side_f;
        let done = (t - out.ns_per_unit).abs() <= 1e-9 * t;
        out = LockOutcome {
            ns_per_unit: t,
            contention: if busy > 0.0 { wait / busy } else { 0.0 },
            utilisation: sol.utilisation,
            hold_ns_per_unit: r * hr + f * hf,
            refill_drain_hold_ns: (hr, hf),
        };
        if done {
            return Ok(out);
        }
        zr = 0.5 * zr + 0.5 * think(r, t, side_r);
        zf = 0.5 * zf + 0.5 * think(f, t, side_f);
    }
    Err(Error::invalid(
        "pair lock queue",
        "ns_per_unit",
        format!(
            "the fixed point of {pairs} pairs at {work_ns:.3e} ns of work per unit did not converge in {PAIR_ITERATIONS} iterations (last {:.6e} ns per unit)",
            out.ns_per_unit
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::Machine;

    /// Ice Lake's zone->lock on 6.6 with the hold composed from the code, and the zone->lock
    /// parameters the tests below share.
    fn code_hold_model() -> (ZoneLockModel, crate::model::zonelock::ZoneLockParams) {
        let m = Machine::builtin("icelake-server").unwrap();
        let mut model = ZoneLockModel::new(&m, KernelVersion::new(6, 6)).unwrap();
        crate::model::zonelock::with_code_hold(&mut model);
        let p = crate::model::zonelock::ZoneLockParams {
            fixed_ns: 0.0,
            lines_per_page: 0.5,
            work_ns_per_page: 1.0,
        };
        (model, p)
    }

    fn run(orders: &[u8], state: SeriesState) -> FlowTally {
        let m = Machine::builtin("icelake-server").unwrap();
        let model = ZoneLockModel::new(&m, state.kernel()).unwrap();
        let flow = PairFlow {
            orders: orders.to_vec(),
            work_ns: 5_000.0,
            tick_ns: 1e9,
            span_ns: 4e9,
            reader_allocs_per_block: 0.0,
            reader_alloc_burst_pages: 1.0,
            writer_free_share: 0.0,
        };
        let mut w = pageset(&model, state, 0).unwrap();
        let mut r = pageset(&model, state, 0).unwrap();
        flow.run(&mut w, &mut r).unwrap()
    }

    /// On 6.6 a pure consumer drains at every free of order 1-3 once free_factor is set
    /// (free_high): one drain per order-3 message, three per 64 KiB write (orders 3, 2, 1; the
    /// order-0 page waits for the next one). Every block freed is drained: blocks per message
    /// 1 and 4. The writer's refills move one block per `__rmqueue()`.
    #[test]
    fn a_message_of_frags_drains_per_high_order_free_and_counts_blocks() {
        for (orders, drains, blocks) in [(vec![3u8], 1.0, 1.0), (vec![3, 2, 1, 0], 3.0, 4.0)] {
            let t = run(&orders, SeriesState::Base);
            let u = t.work_units as f64;
            assert!(u > 1e5, "{u}");
            let fh = t.free_high_drains as f64 / u;
            assert!((fh - drains).abs() < 0.01, "{orders:?}: {fh}");
            let b = t.drain_blocks as f64 / u;
            assert!((b - blocks).abs() < 0.01, "{orders:?}: {b}");
            let pages: u64 = t.refill.iter().map(|&(p, n)| u64::from(p) * n).sum();
            assert!(t.refill_blocks > 0 && t.refill_blocks <= pages, "{t:?}");
        }
    }

    /// Charging by blocks changes nothing for a flow of one order (its blocks are its pages
    /// over 2^order), and a mixed flow's holds cost more per page than the same pages in
    /// order-3 blocks (more `__free_one_page()` calls).
    #[test]
    fn holds_are_charged_per_block() {
        let (model, p) = code_hold_model();
        let load = ZoneLoad {
            cpus: 16,
            work_ns: 5_000.0,
            pairs: true,
            share: 0.5,
            order: 3,
        };
        let one = run(&[3], SeriesState::Base);
        let mut unrecorded = one.clone();
        unrecorded.refill_blocks = 0;
        unrecorded.drain_blocks = 0;
        let a = lock_outcome(&model, &p, &one, &load).unwrap();
        let b = lock_outcome(&model, &p, &unrecorded, &load).unwrap();
        assert_eq!(a, b);
        let mut as_order3 = run(&[3, 2, 1, 0], SeriesState::Base);
        let mixed = lock_outcome(&model, &p, &as_order3, &load).unwrap();
        as_order3.refill_blocks = 0;
        as_order3.drain_blocks = 0;
        let coarse = lock_outcome(&model, &p, &as_order3, &load).unwrap();
        assert!(
            mixed.ns_per_unit > coarse.ns_per_unit,
            "{mixed:?} {coarse:?}"
        );
    }

    /// A seeded discrete-event simulation of `pairs` writer/reader pairs on one FIFO lock:
    /// per unit the writer refills with probability `r` (hold `hr`) and works `w`, then
    /// queues the unit on a socket of `cap` units (sleeping while it is full); the reader
    /// takes a unit (sleeping while there is none), works `w / 2`, drains once (`hf`), works
    /// `w / 2` and drains `f - 1` more times back to back (lmbench's frees: the 32 KiB frag
    /// after the first skb, the rest after the second). Returns (ns per unit of one pair,
    /// contention over busy time).
    fn simulate_pairs(pairs: usize, w: f64, r: f64, hr: f64, f: u32, hf: f64) -> (f64, f64) {
        use std::cmp::Reverse;
        use std::collections::{BinaryHeap, VecDeque};
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        enum Ev {
            WriterStart(usize),
            WriterDone(usize),
            ReaderStart(usize),
            ReaderDrain(usize, u32),
            Release,
        }
        // What a CPU does once it holds the lock and its hold ends.
        #[derive(Clone, Copy)]
        enum Then {
            WriterWork(usize),
            ReaderNext(usize, u32),
        }
        let cap = 3;
        let horizon = 4e8;
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut q: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
        let mut n = 0u64;
        let at = |t: f64| (t * 16.0) as u64; // 1/16 ns ticks keep the heap's order exact
        let mut push = |q: &mut BinaryHeap<_>, t: f64, e: Ev| {
            n += 1;
            q.push(Reverse((at(t), n, e)));
        };
        let mut lock_busy = false;
        let mut waiting: VecDeque<(f64, f64, Then)> = VecDeque::new();
        let mut holding: Option<(f64, Then)> = None;
        let (mut spin, mut busy) = (0.0, 0.0);
        let mut buf = vec![0u32; pairs];
        let (mut w_blocked, mut r_idle) = (vec![false; pairs], vec![false; pairs]);
        let mut units = 0u64;
        for i in 0..pairs {
            push(&mut q, uniform() * w, Ev::WriterStart(i));
            push(&mut q, uniform() * w, Ev::ReaderStart(i));
        }
        while let Some(Reverse((tick, _, ev))) = q.pop() {
            let now = tick as f64 / 16.0;
            if now > horizon {
                break;
            }
            // A request for the lock: hold it now, or queue behind the others.
            let mut acquire = |q: &mut BinaryHeap<_>, hold: f64, then: Then| {
                if lock_busy {
                    waiting.push_back((now, hold, then));
                } else {
                    lock_busy = true;
                    holding = Some((hold, then));
                    push(q, now + hold, Ev::Release);
                }
            };
            match ev {
                Ev::WriterStart(i) => {
                    if buf[i] >= cap {
                        w_blocked[i] = true;
                    } else if uniform() < r {
                        acquire(&mut q, hr, Then::WriterWork(i));
                    } else {
                        busy += w;
                        push(&mut q, now + w, Ev::WriterDone(i));
                    }
                }
                Ev::WriterDone(i) => {
                    buf[i] += 1;
                    units += 1;
                    if r_idle[i] {
                        r_idle[i] = false;
                        push(&mut q, now, Ev::ReaderStart(i));
                    }
                    push(&mut q, now, Ev::WriterStart(i));
                }
                Ev::ReaderStart(i) => {
                    if buf[i] == 0 {
                        r_idle[i] = true;
                    } else {
                        buf[i] -= 1;
                        if w_blocked[i] {
                            w_blocked[i] = false;
                            push(&mut q, now, Ev::WriterStart(i));
                        }
                        busy += w / 2.0;
                        push(&mut q, now + w / 2.0, Ev::ReaderDrain(i, 0));
                    }
                }
                Ev::ReaderDrain(i, k) => acquire(&mut q, hf, Then::ReaderNext(i, k + 1)),
                Ev::Release => {
                    let (hold, then) = holding.take().expect("a hold was running");
                    busy += hold;
                    if let Some((since, h, t)) = waiting.pop_front() {
                        spin += now - since;
                        holding = Some((h, t));
                        push(&mut q, now + h, Ev::Release);
                    } else {
                        lock_busy = false;
                    }
                    match then {
                        Then::WriterWork(i) => {
                            busy += w;
                            push(&mut q, now + w, Ev::WriterDone(i));
                        }
                        Then::ReaderNext(i, 1) => {
                            busy += w / 2.0;
                            let next = if f > 1 {
                                Ev::ReaderDrain(i, 1)
                            } else {
                                Ev::ReaderStart(i)
                            };
                            push(&mut q, now + w / 2.0, next);
                        }
                        Then::ReaderNext(i, k) if k < f => push(&mut q, now, Ev::ReaderDrain(i, k)),
                        Then::ReaderNext(i, _) => push(&mut q, now, Ev::ReaderStart(i)),
                    }
                }
            }
        }
        let per_pair = units as f64 / pairs as f64;
        (horizon / per_pair, spin / (busy + spin))
    }

    /// The pairs' lock outcome against the simulation of the same pairs (the model's mean
    /// holds, lmbench's flow on 6.6: 3 drains and about 0.26 refills per 64 KiB write, 8
    /// pairs), at lock utilisations from 0.55 to 1: within 5 % in time per write and 0.03 in
    /// contention (measured 0.2-4 % and at most 0.02 when written; the gap is the queue's
    /// exponential think times against the simulation's fixed work and the dedicated-class
    /// approximation, about 5 % at 10-16 CPUs by crate::model::lock's survey). Time per write
    /// never beats the lock's capacity (8 pairs x their holds per write) and comes within 5 %
    /// of it once the lock saturates.
    #[test]
    fn pairs_on_one_lock_match_a_simulation_and_respect_the_lock_capacity() {
        let (model, p) = code_hold_model();
        let tally = run(&[3, 2, 1, 0], SeriesState::Base);
        let u = tally.work_units as f64;
        let r = tally.refill.iter().map(|&(_, n)| n as f64).sum::<f64>() / u;
        let f = tally.drain.iter().map(|&(_, n)| n as f64).sum::<f64>() / u;
        assert!((f - 3.0).abs() < 1e-3 && r > 0.2 && r < 0.3, "{r} {f}");
        let mut last_gap = f64::NEG_INFINITY;
        for work in [3_000.0, 5_000.0, 10_000.0, 30_000.0] {
            let load = ZoneLoad {
                cpus: 16,
                work_ns: work,
                pairs: true,
                share: 0.5,
                order: 3,
            };
            let o = lock_outcome(&model, &p, &tally, &load).unwrap();
            let capacity = 8.0 * o.hold_ns_per_unit;
            assert!(o.ns_per_unit >= capacity * (1.0 - 1e-9), "{work}: {o:?}");
            assert!(
                o.ns_per_unit >= work + 3.0 * o.refill_drain_hold_ns.1,
                "{o:?}"
            );
            assert!((0.0..1.0).contains(&o.contention), "{o:?}");
            let gap = o.ns_per_unit / capacity - 1.0;
            if work <= 5_000.0 {
                assert!(gap < 0.05, "{work}: {gap} {o:?}");
            }
            assert!(
                gap >= last_gap - 1e-12,
                "capacity gap shrinks as work grows: {gap}"
            );
            last_gap = gap;
            let (hr, hf) = o.refill_drain_hold_ns;
            let (t, c) = simulate_pairs(8, work, r, hr, 3, hf);
            assert!(
                (o.ns_per_unit / t - 1.0).abs() < 0.05,
                "{work}: {o:?} sim {t} {c}"
            );
            assert!((o.contention - c).abs() < 0.03, "{work}: {o:?} sim {t} {c}");
        }
    }
}
