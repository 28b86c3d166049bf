//! The LRU lock (`pgdat->lru_lock`, per node, 4.8-5.10; the per-lruvec lock from 5.11, the
//! same lock for tasks of one memory cgroup on one node): the second lock an anonymous page
//! fault loop takes, composed from the code like zone->lock's hold ([`crate::model::hold`]),
//! and queued in series with zone->lock by the kind `alloc-loop` when a workload's pages go
//! on the LRU (`params.lru_pages`).
//!
//! Why it is here: Daniel Jordan's will-it-scale page_fault1 table (2018, `data/literature/`)
//! measures kernels that change only lru_lock (his kernels 3 and 4) at 16-28 % faster from 16
//! tasks, where a 10x larger PCP batch gave 2-4 %: past a few tasks the LRU lock, not
//! zone->lock, limits that loop.
//!
//! # What the kernel does under the lock (4.15 `mm/swap.c`; 6.x the same with folios)
//! ```text
//! fault: lru_cache_add() -> per-CPU pagevec; when full (PAGEVEC_SIZE pages):
//!   __pagevec_lru_add() -> pagevec_lru_move_fn():
//!     spin_lock_irqsave(&pgdat->lru_lock)                 call + hand-over
//!     per page: SetPageLRU (lock bts), smp_mb, add_page_to_lru_list()
//!               (list_add at the LRU head: the page's own struct page, and the previous head
//!               entry's, which the previous holder added: one line from elsewhere per hold),
//!               update_lru_size() (per-CPU node/zone stat deltas; the memcg's per-node LRU
//!               sizes, one line that stays with the lock)
//! munmap: release_pages(pages, nr) on each mmu_gather batch:
//!   per page: put_page_testzero (lock xadd), and if PageLRU: (re)take the lock,
//!     __ClearPageLRU, del_page_from_lru_list() (list_del: the neighbours' struct pages;
//!     pages were added in pagevecs of consecutive faults, so a neighbour is another CPU's page
//!     only at a pagevec boundary: 2 / PAGEVEC_SIZE lines from elsewhere per page)
//!   the lock is dropped every SWAP_CLUSTER_MAX (32) pages
//! ```
//! Costs per hold: the call ([`crate::model::hold::CALL_CYCLES`]), the hand-over when the previous
//! holder was another CPU ([`HANDOVER_LINES`]: the lock word, the LRU list heads and the memcg's
//! LRU sizes, at the core-to-core latency between the tasks), and per page the code's CPU work
//! ([`ADD_CYCLES_PER_PAGE`], [`RELEASE_CYCLES_PER_PAGE`]: locked bit operations, a barrier,
//! list and counter updates) plus the page's own struct page (an L2 hit: the fault or the zap
//! touched it just before). Nothing is fitted.
//!
//! # The queue
//! A finite-source FIFO ([`crate::model::lock`]) over the node's tasks, with an `add` class (a
//! hold every `PAGEVEC_SIZE` faults) and a `release` class (a hold every 32 unmapped pages), each
//! thinking for the task's time per page outside the LRU lock (its work and its zone->lock
//! response). The kind iterates the two locks to a fixed point.

use serde::Serialize;

use crate::error::Result;
use crate::kernel::version::KernelVersion;
use crate::model::hold::CodeHold;
use crate::model::lock::{ClassShare, HoldAtom, HoldDist, HolderClass, LockQueue, ThinkLaw};

/// `SWAP_CLUSTER_MAX`: `release_pages()` drops the LRU lock every 32 pages
/// (`include/linux/swap.h`; `lock_batch` in `mm/swap.c`).
pub const SWAP_CLUSTER_MAX: u32 = 32;

/// Lines that move to a new holder of the LRU lock: the lock word, the LRU list heads of the
/// lruvec and the memcg's per-node LRU sizes (`mem_cgroup_update_lru_size()`). Counted from the
/// code (`struct lruvec`, `struct mem_cgroup_per_node`); assumed that the list heads of the one
/// LRU list a loop uses share a line with the lock or each other no more than this.
pub const HANDOVER_LINES: f64 = 3.0;

/// CPU cycles per page of `__pagevec_lru_add_fn()` and its loop under the lock, from the code
/// (4.15 `mm/swap.c`): two locked bit operations (`TestClearPageUnevictable`, `SetPageLRU`,
/// about 20 cycles each on Intel since Haswell, Agner Fog's tables) and a full barrier
/// (`smp_mb()`, a locked add, about 25), `mem_cgroup_page_lruvec()` (two dependent loads),
/// `page_evictable()` / `page_lru()` flag tests, the reclaim-stat increment, `update_lru_size()`
/// (three per-CPU stat updates and the memcg's LRU size) and the `list_add`: about 60 more
/// cycles of loads, tests and stores. Assumed 140.
pub const ADD_CYCLES_PER_PAGE: f64 = 140.0;

/// CPU cycles per page of `release_pages()` while it holds the lock (4.15 `mm/swap.c`):
/// `put_page_testzero()` (a locked decrement, about 20 cycles), `compound_head` and flag tests,
/// `mem_cgroup_page_lruvec()`, `__ClearPageLRU`, `page_off_lru()`, `del_page_from_lru_list()`
/// (`update_lru_size()` and the `list_del`), two flag clears and the `list_add` to the free
/// list: about 70 more cycles. Assumed 90.
pub const RELEASE_CYCLES_PER_PAGE: f64 = 90.0;

/// `PAGEVEC_SIZE` (`include/linux/pagevec.h`): 14 until 4.14, 15 from 4.15 ("mm, pagevec: remove
/// cold parameter for pagevecs" shrank the header), 31 from 6.8 ("mm: increase folio batch
/// size"; our reading of the merge windows).
pub fn pagevec_size(kernel: KernelVersion) -> u32 {
    if kernel < KernelVersion::new(4, 15) {
        14
    } else if kernel < KernelVersion::new(6, 8) {
        15
    } else {
        31
    }
}

/// The two holds of the LRU lock, ns, and the pages each covers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LruHolds {
    /// Pages per `__pagevec_lru_add()` hold.
    pub add_pages: u32,
    /// Pages per `release_pages()` hold.
    pub release_pages: u32,
    /// One add hold, ns.
    pub add_hold_ns: f64,
    /// One release hold, ns.
    pub release_hold_ns: f64,
}

impl LruHolds {
    /// The holds composed from the code (module docs): `p_other` the probability that the
    /// previous holder was another CPU, `c2c_ns` the transfer from it, `own_line_ns` an L2 hit,
    /// `mix_line_ns` a line last written elsewhere.
    pub fn new(
        code: &CodeHold,
        kernel: KernelVersion,
        p_other: f64,
        c2c_ns: f64,
        own_line_ns: f64,
        mix_line_ns: f64,
    ) -> LruHolds {
        let add_pages = pagevec_size(kernel);
        let release_pages = SWAP_CLUSTER_MAX;
        let fixed = code.call_cycles / code.clock_ghz
            + p_other
                * crate::assumptions::value("lrulock::HANDOVER_LINES", HANDOVER_LINES)
                * c2c_ns;
        let value = crate::assumptions::value;
        let add_page = value("lrulock::ADD_CYCLES_PER_PAGE", ADD_CYCLES_PER_PAGE) / code.clock_ghz
            + own_line_ns;
        let release_page = value("lrulock::RELEASE_CYCLES_PER_PAGE", RELEASE_CYCLES_PER_PAGE)
            / code.clock_ghz
            + own_line_ns;
        LruHolds {
            add_pages,
            release_pages,
            add_hold_ns: fixed + f64::from(add_pages) * add_page + p_other * mix_line_ns,
            release_hold_ns: fixed
                + f64::from(release_pages)
                    * (release_page + 2.0 / f64::from(add_pages) * p_other * mix_line_ns),
        }
    }
}

/// The LRU lock's share of one page's time, per page of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct LruOutcome {
    /// Hold per page (add and release), ns.
    pub hold_ns_per_page: f64,
    /// Wait per page, ns.
    pub wait_ns_per_page: f64,
    /// Fraction of time the lock is held.
    pub utilisation: f64,
}

impl LruOutcome {
    /// Hold and wait per page, ns.
    pub fn response_ns_per_page(&self) -> f64 {
        self.hold_ns_per_page + self.wait_ns_per_page
    }
}

/// Solves the LRU lock of `procs` tasks whose time per page outside it is `outside_ns_per_page`,
/// `share` of it in the fault phase (before the adds) and the rest in the unmap.
pub fn solve(
    holds: &LruHolds,
    procs: u32,
    outside_ns_per_page: f64,
    share: f64,
) -> Result<LruOutcome> {
    let (na, nr) = (f64::from(holds.add_pages), f64::from(holds.release_pages));
    let (fa, fr) = (1.0 / na, 1.0 / nr);
    let tiny = 1e-3 * outside_ns_per_page.max(1.0);
    let class = |name: &str, pages: f64, frac: f64, hold: f64, f: f64| {
        HolderClass::new(
            name,
            (pages * frac * outside_ns_per_page).max(tiny),
            HoldDist::Discrete {
                atoms: vec![HoldAtom {
                    hold_ns: hold,
                    weight: 1.0,
                }],
            },
        )
        .with_share(ClassShare::Fraction(f / (fa + fr)))
    };
    let q = LockQueue {
        n_cpus: procs.max(1),
        classes: vec![
            class("add", na, share, holds.add_hold_ns, fa),
            class("release", nr, 1.0 - share, holds.release_hold_ns, fr),
        ],
        think: ThinkLaw::Exponential,
    };
    let sol = q.solve()?;
    let (a, r) = (&sol.classes[0], &sol.classes[1]);
    Ok(LruOutcome {
        hold_ns_per_page: fa * a.hold_ns_mean + fr * r.hold_ns_mean,
        wait_ns_per_page: fa * a.wait_ns_mean + fr * r.wait_ns_mean,
        utilisation: sol.utilisation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::Machine;

    fn holds(kernel: KernelVersion, p_other: f64) -> LruHolds {
        let m = Machine::builtin("broadwell-2s").unwrap();
        let code = CodeHold::new(&m, kernel, 2.2);
        LruHolds::new(&code, kernel, p_other, 40.0, 4.3, 50.0)
    }

    #[test]
    fn pagevec_size_follows_the_kernel() {
        assert_eq!(pagevec_size(KernelVersion::new(4, 14)), 14);
        assert_eq!(pagevec_size(KernelVersion::new(4, 15)), 15);
        assert_eq!(pagevec_size(KernelVersion::new(6, 6)), 15);
        assert_eq!(pagevec_size(KernelVersion::new(6, 8)), 31);
    }

    /// One task: no hand-over and no other CPU's lines; an add hold is the call and 15 pages of
    /// 140 cycles plus an L2 hit, exactly (a release 32 pages of 90).
    #[test]
    fn one_task_pays_only_its_own_pages() {
        let h = holds(KernelVersion::new(4, 15), 0.0);
        let (add, release) = (140.0 / 2.2 + 4.3, 90.0 / 2.2 + 4.3);
        assert!((h.add_hold_ns - (60.0 / 2.2 + 15.0 * add)).abs() < 1e-9);
        assert!((h.release_hold_ns - (60.0 / 2.2 + 32.0 * release)).abs() < 1e-9);
        let one = solve(&h, 1, 1000.0, 0.9).unwrap();
        assert_eq!(one.wait_ns_per_page, 0.0);
        // Hold per page: one add hold per 15 pages and one release hold per 32.
        let expect = h.add_hold_ns / 15.0 + h.release_hold_ns / 32.0;
        assert!((one.hold_ns_per_page - expect).abs() < 1e-9);
    }

    /// More tasks on the lock wait longer; the wait is bounded by the others' holds.
    #[test]
    fn waiting_grows_with_the_tasks() {
        let h = holds(KernelVersion::new(4, 15), 1.0);
        let w = |n| solve(&h, n, 1500.0, 0.9).unwrap();
        let (w4, w16, w32) = (w(4), w(16), w(32));
        assert!(w4.wait_ns_per_page < w16.wait_ns_per_page);
        assert!(w16.wait_ns_per_page < w32.wait_ns_per_page);
        assert!(w32.utilisation <= 1.0 + 1e-9);
        assert!(w32.wait_ns_per_page <= 31.0 * w32.hold_ns_per_page * 1.0001);
    }
}
