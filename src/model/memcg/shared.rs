//! Several memcgs sharing one CPU's charge stock (issue 13 item 6): which memcg each stock call
//! of a CPU is for, how often the stock has to switch memcgs, and the hierarchy walks the
//! switches add.
//!
//! # Mechanism (`mm/memcontrol.c`)
//! - **≤ 6.15, one memcg per stock** ([`StockCode::Single`]): `struct memcg_stock_pcp` holds
//!   `cached` and `nr_pages`. `consume_stock(memcg, n)` succeeds only if `memcg == cached`,
//!   `n ≤ MEMCG_CHARGE_BATCH` and `nr_pages ≥ n`; otherwise `try_charge_memcg()` charges
//!   `batch = max(B, n)` with `page_counter_try_charge()` (a charge walk) and, if `batch > n`,
//!   `refill_stock(memcg, batch − n)`. `refill_stock()`: if `cached != memcg`, `drain_stock()`
//!   the old one (a `page_counter_uncharge()` walk of *its* hierarchy when it holds pages, and
//!   `css_put()`), then `css_get()` and cache `memcg`; add; if `nr_pages > B`, `drain_stock()`
//!   (the stock is left empty, `cached = NULL`). `mem_cgroup_uncharge_skmem()` →
//!   `refill_stock(memcg, n)`. So a charge or uncharge for another memcg evicts the cached one.
//! - **≥ 6.16, seven memcgs per stock** ([`StockCode::MultiRandom`], commit f735eebe55f8f
//!   "memcg: multi-memcg percpu charge cache", Shakeel Butt, posted 16 Apr 2025):
//!   `NR_MEMCG_STOCK` = 7 slots `cached[i]`, `nr_pages[i]` (`uint8_t`). `consume_stock()` looks
//!   for `memcg` in every slot; `refill_stock()` adds to `memcg`'s slot (draining that slot when
//!   it exceeds `B`), else takes the first empty slot, else drains a victim slot
//!   (`get_random_u32_below(NR_MEMCG_STOCK)`) and caches `memcg` there with `n` pages.
//!   A refill of more than `B` pages uncharges directly (same patch; `nr_pages` is 8 bits).
//!   The patch measured netperf TCP_SENDFILE over `::1` on 72 CPUs with each client in its own
//!   cgroup: 6 to 36 clients, 14 % to 145 % more throughput than the one-memcg stock.
//! - **Round-robin victim** ([`StockCode::MultiRoundRobin`], "memcg: use round-robin victim
//!   selection in refill_stock", -mm May 2026, Cc stable, fixes f735eebe55f8f): the victim is
//!   `drain_idx++ mod 7`. Not tied to a release here (stable backports reach 6.18).
//! - `css_get()` / `css_put()` on the cached memcg are `percpu_ref` operations in percpu mode: a
//!   CPU-local increment, no shared line (assumed: no cost beyond the fixed work).
//! - `memcg_rstat_updated()` (6.0) counts `stats_updates` per CPU for all memcgs together, so
//!   the stats flushes do not depend on how many memcgs share the CPU.
//! - kmem charges go through the obj stock (`obj_stock` caches one objcg per CPU, bytes; its
//!   drain uncharges whole pages through `refill_stock()`); socket memory does not, so the
//!   memcg-charge kind has no obj-stock term.
//!
//! # Interleaving
//! Each CPU serves `M` memcgs whose tasks (or softirq work) share it, each memcg's calls the
//! same cycle of the flow ([`super::SendfileFlow::cpu_ops`]). After each call the CPU turns, with
//! probability `s`, to a memcg drawn uniformly from the `M` (possibly the same); otherwise the
//! next call is the same memcg's. So consecutive calls belong to different memcgs with
//! probability `s (M − 1) / M`, and a memcg keeps the CPU for `1 / s` calls on average. `s = 1`
//! is per-call random interleaving (softirq serving a mix of tenants' packets, the case of the
//! 6.16 patch); small `s` is time-sharing with long slices.

use crate::error::{Error, Result};
use crate::kernel::version::KernelVersion;
use serde::Serialize;

use super::stock::{rstat, unit_draw, StockCounts, StockOp};
use super::INPUT;

/// Slots in a ≥ 6.16 stock (`NR_MEMCG_STOCK`).
pub const NR_MEMCG_STOCK: u32 = 7;

/// The per-CPU stock code of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StockCode {
    /// ≤ 6.15: one cached memcg.
    Single,
    /// 6.16 on: 7 slots, random victim.
    MultiRandom,
    /// The May 2026 fix: 7 slots, round-robin victim.
    MultiRoundRobin,
}

impl StockCode {
    /// The stock of `kernel`: seven memcgs from 6.16 (the random victim, the round-robin fix is
    /// not tied to a release), one before.
    pub fn for_kernel(kernel: KernelVersion) -> StockCode {
        if kernel.at_least(6, 16) {
            StockCode::MultiRandom
        } else {
            StockCode::Single
        }
    }

    /// Memcgs one stock caches.
    pub fn slots(self) -> u32 {
        match self {
            StockCode::Single => 1,
            _ => NR_MEMCG_STOCK,
        }
    }
}

/// What one CPU's shared stock did over the counted calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SharedCounts {
    /// Walks and flushes, as for one memcg; `uncharge_walks` includes the eviction walks.
    pub stock: StockCounts,
    /// Calls counted.
    pub calls: u64,
    /// Charge calls counted.
    pub charge_calls: u64,
    /// Calls for another memcg than the previous call's.
    pub switches: u64,
    /// Calls whose memcg no slot held.
    pub misses: u64,
    /// Cached memcgs evicted to make room (with or without pages).
    pub evictions: u64,
    /// Evictions that drained pages: a `page_counter_uncharge()` walk of the evicted memcg.
    pub eviction_walks: u64,
    /// Pages those walks returned.
    pub eviction_walk_pages: u64,
}

/// The interleaving of `memcgs` memcgs on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interleave {
    /// Memcgs sharing the CPU (≥ 1).
    pub memcgs: u32,
    /// Probability that after a call the CPU turns to a memcg drawn afresh (0..=1).
    pub redraw: f64,
}

impl Interleave {
    /// Probability that consecutive calls belong to different memcgs: `s (M − 1) / M`.
    pub fn switch_probability(&self) -> f64 {
        let m = f64::from(self.memcgs.max(1));
        self.redraw * (m - 1.0) / m
    }
}

/// What switching memcgs does to the stocks of one sender/receiver pair (both CPUs together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SwitchTerms {
    /// Share of calls for another memcg than the previous call's (simulated; the interleaving
    /// gives `s (M − 1) / M`, [`Interleave::switch_probability`]).
    pub switch_probability: f64,
    /// Share of calls whose memcg no slot held.
    pub miss_probability: f64,
    /// Eviction drains (walks of the evicted memcg's hierarchy) per charge call.
    pub eviction_drains_per_charge: f64,
    /// Eviction drains per switch.
    pub drains_per_switch: f64,
    /// Eviction drains per payload page, per CPU (mean of the two roles).
    pub eviction_walks_per_page: f64,
}

impl SwitchTerms {
    /// The terms of the two roles' counts, which cover `pages` payload pages each.
    pub fn of(counts: &[SharedCounts; 2], pages: f64) -> SwitchTerms {
        let sum = |f: fn(&SharedCounts) -> u64| counts.iter().map(f).sum::<u64>() as f64;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let walks = sum(|c| c.eviction_walks);
        SwitchTerms {
            switch_probability: ratio(sum(|c| c.switches), sum(|c| c.calls)),
            miss_probability: ratio(sum(|c| c.misses), sum(|c| c.calls)),
            eviction_drains_per_charge: ratio(walks, sum(|c| c.charge_calls)),
            drains_per_switch: ratio(walks, sum(|c| c.switches)),
            eviction_walks_per_page: ratio(walks, 2.0 * pages),
        }
    }
}

/// One slot: the memcg cached and its pages.
type Slot = Option<(u32, u64)>;

/// The stock of one CPU.
struct Stock {
    code: StockCode,
    b: u64,
    slots: Vec<Slot>,
    next_victim: usize,
}

impl Stock {
    fn find(&self, memcg: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| matches!(s, Some((m, _)) if *m == memcg))
    }

    /// `drain_stock()` of slot `i`: a walk when it holds pages; the slot is left empty.
    fn drain(&mut self, i: usize, count: bool, c: &mut SharedCounts, eviction: bool) {
        if let Some((_, pages)) = self.slots[i].take() {
            if pages > 0 && count {
                c.stock.uncharge_walks += 1;
                c.stock.uncharge_walk_pages += pages;
                if eviction {
                    c.eviction_walks += 1;
                    c.eviction_walk_pages += pages;
                }
            }
        }
    }

    /// `consume_stock()`.
    fn consume(&mut self, memcg: u32, n: u64) -> bool {
        if n > self.b {
            return false;
        }
        match self.find(memcg) {
            Some(i) => match &mut self.slots[i] {
                Some((_, pages)) if *pages >= n => {
                    *pages -= n;
                    true
                }
                _ => false,
            },
            None => false,
        }
    }

    /// `refill_stock()`.
    fn refill(&mut self, memcg: u32, m: u64, rng: &mut u64, count: bool, c: &mut SharedCounts) {
        let multi = self.code != StockCode::Single;
        if multi && m > self.b {
            if count {
                c.stock.uncharge_walks += 1;
                c.stock.uncharge_walk_pages += m;
            }
            return;
        }
        let i = match self.find(memcg) {
            Some(i) => i,
            None => {
                let i = match self.slots.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        let k = self.slots.len();
                        let v = match self.code {
                            StockCode::Single => 0,
                            StockCode::MultiRandom => {
                                ((unit_draw(rng) * k as f64) as usize).min(k - 1)
                            }
                            StockCode::MultiRoundRobin => {
                                let v = self.next_victim;
                                self.next_victim = (v + 1) % k;
                                v
                            }
                        };
                        if count {
                            c.evictions += 1;
                        }
                        self.drain(v, count, c, true);
                        v
                    }
                };
                self.slots[i] = Some((memcg, 0));
                i
            }
        };
        let over = match &mut self.slots[i] {
            Some((_, pages)) => {
                *pages += m;
                *pages > self.b
            }
            None => false,
        };
        if over {
            self.drain(i, count, c, false);
        }
    }
}

/// Runs the stock of one CPU that `il.memcgs` memcgs share, each replaying the cycle `ops`
/// (memcg `j` starts `j · len / M` calls into it, so the memcgs are out of phase), for
/// `M · warmup_cycles · len` uncounted calls and then `M · cycles · len` counted calls.
/// Kernel rules: the module doc, per `code`; the stats flush as [`super::simulate_stock`].
/// Which memcg calls next: [`Interleave`], drawn from a fixed-seed generator (reproducible).
///
/// Errors: `batch_pages` 0, a call of 0 pages, an empty cycle, `cycles` 0, `memcgs` 0, `redraw`
/// outside 0..=1.
pub fn simulate_shared_stock(
    batch_pages: u32,
    code: StockCode,
    il: Interleave,
    ops: &[StockOp],
    warmup_cycles: u32,
    cycles: u32,
) -> Result<SharedCounts> {
    if batch_pages == 0 || il.memcgs == 0 {
        return Err(Error::invalid(INPUT, "batch_pages, memcgs", "must be ≥ 1"));
    }
    if !(0.0..=1.0).contains(&il.redraw) {
        return Err(Error::invalid(
            INPUT,
            "redraw",
            format!("must be in 0..=1, got {}", il.redraw),
        ));
    }
    super::stock::check_ops(ops, cycles)?;
    let m = il.memcgs as usize;
    let len = ops.len();
    let b = u64::from(batch_pages);
    let mut stock = Stock {
        code,
        b,
        slots: vec![None; code.slots() as usize],
        next_victim: 0,
    };
    let mut pos: Vec<usize> = (0..m).map(|j| j * len / m).collect();
    let mut rng: u64 = 0x2545_F491_4F6C_DD1D;
    let mut cur = 0usize;
    let mut prev: Option<usize> = None;
    let mut x: u64 = 0;
    let mut c = SharedCounts::default();
    let warm = m as u64 * u64::from(warmup_cycles) * len as u64;
    let total = warm + m as u64 * u64::from(cycles) * len as u64;
    for call in 0..total {
        let count = call >= warm;
        let memcg = cur as u32;
        let op = ops[pos[cur]];
        pos[cur] = (pos[cur] + 1) % len;
        if count {
            c.calls += 1;
            if prev.is_some_and(|p| p != cur) {
                c.switches += 1;
            }
            if stock.find(memcg).is_none() {
                c.misses += 1;
            }
        }
        match op {
            StockOp::Charge(n) => {
                let n = u64::from(n);
                if !stock.consume(memcg, n) {
                    let batch = b.max(n);
                    if count {
                        c.stock.charge_walks += 1;
                        c.stock.charge_walk_pages += batch;
                    }
                    if batch > n {
                        stock.refill(memcg, batch - n, &mut rng, count, &mut c);
                    }
                }
                rstat(&mut x, n, b, count, &mut c.stock);
                if count {
                    c.stock.pages_charged += n;
                    c.charge_calls += 1;
                }
            }
            StockOp::Uncharge(n) => {
                let n = u64::from(n);
                rstat(&mut x, n, b, count, &mut c.stock);
                stock.refill(memcg, n, &mut rng, count, &mut c);
                if count {
                    c.stock.pages_uncharged += n;
                }
            }
        }
        prev = Some(cur);
        if m > 1 && il.redraw > 0.0 && unit_draw(&mut rng) < il.redraw {
            cur = ((unit_draw(&mut rng) * m as f64) as usize).min(m - 1);
        }
    }
    c.stock.cycles = u64::from(cycles);
    Ok(c)
}
