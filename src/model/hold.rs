//! zone->lock's hold composed from the code (issue 13, item 2): what one `rmqueue_bulk()` call
//! does under the lock, step by step, and what each step costs on a machine.
//!
//! Thread 000's zone->lock model has two fitted numbers for the hold (`fixed_ns`, the cost of one
//! hold, and `lines_per_page`, struct-page line transfers per page) and fits them to its own
//! histograms. A workload with no such data used to borrow them from thread 000's fit of a
//! machine of the same microarchitecture. This module builds the refill's hold instead from
//! `mm/page_alloc.c` and the machine's latencies, so the lock's cost per page follows the order,
//! the kernel version and the access pattern of the struct pages:
//!
//! ```text
//! rmqueue_bulk(zone, order, count, list, mt)              (6.1, mm/page_alloc.c)
//!   spin_lock_irqsave(&zone->lock)                         call: lock word, IRQs off
//!   for i < count:
//!     page = __rmqueue(zone, order, mt)                    block: __rmqueue_smallest():
//!                                                            free_area[k] heads, del_page_from_free_list,
//!                                                            expand() (one buddy set up per block, amortised)
//!     check_pcp_refill(page, order)                        check: check_new_pages() over 1 << order
//!                                                            struct pages (<= 6.2 without CONFIG_DEBUG_VM)
//!     list_add_tail(&page->pcp_list, list)
//!   __mod_zone_page_state(zone, NR_FREE_PAGES, -(i << order))
//!   spin_unlock_irqrestore(&zone->lock)
//! ```
//!
//! Costs:
//! - **call**: [`CALL_CYCLES`] at the clock (lock and unlock, IRQ save/restore, the counter).
//! - **hand-over**, when the previous holder was another CPU (probability `(n - 1) / n` for `n`
//!   symmetric tasks on the zone): the zone's lines it wrote move
//!   ([`crate::model::zonelock::HANDOVER_LINES`] at the mean core-to-core latency between the
//!   tasks), and, when the refill reads its struct pages as a stream (freshly split blocks, or
//!   blocks merged back by sequential frees), the stream restarts ([`TRAIN_MISSES`] misses at
//!   DRAM latency before the prefetcher runs ahead again). A refill of recently freed,
//!   scattered blocks reads no stream and pays the zone lines only.
//! - **block**: [`crate::model::zonelock::CPU_CYCLES_PER_PAGE`] per block moved, plus its head
//!   struct page's line. Pages never freed in the interval come from freshly split blocks, whose
//!   struct pages are read in ascending address order, one 64-byte line per page: the L2
//!   streamer fetches them ahead, so each costs an L2 hit on the dependent chain, but no less
//!   than the stream's bandwidth allows (`dram_local / STREAM_MLP` per line: Little's law with
//!   [`STREAM_MLP`] misses in flight per core). Pages freed recently come from wherever their
//!   freer left the line (the caller's line cost).
//! - **check**: `check_new_page()` over each of the block's `1 << order` struct pages:
//!   [`CHECK_CYCLES`] each, and for the block's tail pages (contiguous, streamed) no less than
//!   the stream's time per line. Where the kernel does it: under the lock before 6.3 (the
//!   refill-time check of 4.7's "defer debugging checks of pages allocated from the PCP"),
//!   after the lock from 6.3 (Halbuer's "mm: reduce lock contention of pcp buffer refill":
//!   `__rmqueue_pcplist()` checks each block as it leaves the PCP list, on the allocating CPU,
//!   so the cost leaves the hold but not the task's time, [`CodeHold::check_after_lock_ns`]),
//!   and only with `check_pages_enabled` (CONFIG_DEBUG_VM or debug options) from 6.4
//!   ("mm, page_alloc: reduce page alloc/free sanity checks").
//!
//! # The drain (`free_pcppages_bulk()`, the free side)
//! ```text
//! free_pcppages_bulk(zone, count, pcp, pindex)            (4.18-6.x, mm/page_alloc.c)
//!   [4.18-5.17: pick the pages and prefetch_buddy() the first pcp->batch, before the lock]
//!   spin_lock_irqsave(&zone->lock)                         call: as a refill's
//!   for each block taken from the PCP list:
//!     __free_one_page(page, pfn, zone, order, mt)
//!       find_buddy_page_pfn(): page_is_buddy(buddy)        buddy's struct page: 1 line
//!       while the buddy is free: del_page_from_free_list(buddy), order++   (merges)
//!       set_buddy_order(page)                              the block's own struct page
//!       buddy_merge_likely(): the order+1 buddy's struct page   1 line
//!       add_to_free_list[_tail](): the list's old first (last) entry's struct page   1 line
//!   spin_unlock_irqrestore(&zone->lock)
//! ```
//! Per block: [`crate::model::zonelock::CPU_CYCLES_PER_PAGE`] of CPU work, the block's own
//! struct page (this CPU freed it onto its list just before: an L2 hit) and
//! [`FREE_REMOTE_LINES`] other struct-page lines. A drain's fixed part is the call and the
//! hand-over of the zone's lines; it has no struct-page stream to restart. Where the other lines
//! were last written depends on how the pages flow ([`BlockPattern`]):
//! - **scattered** (blocks circulating between CPUs: network buffers): a freed block rarely
//!   finds its buddy free (it is in flight; [`crate::model::buddy::circulating`] under
//!   lmbench's flow, 8 pairs with refills of 7 order-3 blocks and about 6 in flight per pair,
//!   gives 0.13 merges per free), so the buddy checks are lines written by other CPUs (the
//!   caller's line mixture); the free-list neighbour is too for a drain's first block, while
//!   each later block links to the one the drain freed just before (a drain empties one PCP
//!   list at a time, so its blocks go to one free list): an L2 hit
//!   ([`CodeHold::drain_first_block_extra_ns`]). A refill takes blocks from scattered places
//!   on the free lists, each head line wherever its freer left it;
//! - **sequential** (a task frees, in the order it allocated them, the pages its refills gave
//!   it: an munmap): the buddy and the order+1 buddy are the task's own pages, freed onto its
//!   PCP list just before (L2 hits), and only the free list's neighbour was last written by
//!   whichever CPU added to that list last (one line from the mixture per block). The pages
//!   merge back into large blocks (about one merge per page, each unlinking a buddy this CPU
//!   added a moment before: [`crate::model::buddy::sequential`] gives 0.999 for an munmap of
//!   32768 pages), so refills split large blocks and read their struct pages in ascending
//!   order: streamed, as for pages never freed.
//!
//! From 4.18 to 5.17 `prefetch_buddy()` fetched the buddy's line before
//! the lock for the first `pcp->batch` pages ("mm/free_pcppages_bulk: prefetch buddy while not
//! holding lock", Aaron Lu, 4.18; removed by Mel Gorman's "mm/page_alloc: do not prefetch
//! buddies during bulk free", 5.18; our reading of the merge windows): the buddy check is then
//! an L2 hit under the lock ([`buddy_prefetched`]).
//!
//! Every constant here is an instruction-count or microarchitecture estimate with its
//! provenance in [`crate::assumptions`]; none is fitted.
//!
//! # The spinlock itself ([`SpinlockKind`])
//! With queued spinlocks (x86 from 4.2, arm64 from 4.18) only the MCS queue's head spins on the
//! lock word and each other waiter on its own node, so a hold does not grow with the number of
//! waiters: the hand-over above is all the lock adds, and the FIFO queue of
//! [`crate::model::lock`] holds (throughput flattens at saturation, it does not fall). Ticket
//! spinlocks (arm64 before 4.18 among the kernels modelled) make every waiter re-read the lock
//! line at each release, so the hand-over grows with the waiters and throughput falls past
//! saturation (Boyd-Wickizer et al., "Non-scalable locks are dangerous", 2012). The model
//! follows their Markov model's mechanism: each hand-off waits for the lock line to reach the
//! next ticket holder, whose read is serviced after on average half of the other waiters'
//! ([`ticket_handoff`]); the waiters at a hand-off are the queue's own mean number waiting
//! while the lock is busy, solved to a fixed point (the kind `alloc-loop`'s
//! `LockCase::predict`). As tasks are added past saturation the hold grows with them and the
//! lock's throughput falls.
//!
//! # IRQ-off inflation
//! Does not apply to zone->lock: every path takes it with interrupts off (`spin_lock_irqsave`
//! in `rmqueue_bulk()` / `free_pcppages_bulk()` from 6.2, and inside the PCP's IRQ-off section
//! before), so an interrupt waits for the release instead of stretching the hold; the IRQ
//! handler's time lands in the next holder's wait, which the queue already counts as the
//! holder's CPU being busy elsewhere.

use serde::Serialize;

use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;

/// CPU cycles of one `rmqueue_bulk()` call besides its blocks: `spin_lock_irqsave` (an
/// uncontended `lock cmpxchg`, ~20 cycles on Intel since Skylake), `spin_unlock_irqrestore`
/// (`popf`, ~20), the `NR_FREE_PAGES` per-CPU delta and the call itself. Assumed.
pub const CALL_CYCLES: f64 = 60.0;

/// CPU cycles of `check_new_page()` on one struct page whose line is present: five loads
/// (`flags`, `_mapcount`, `mapping`, `_refcount`, `memcg_data`), their tests and one branch,
/// about 12 instructions at ~1.5 per cycle. Assumed.
pub const CHECK_CYCLES: f64 = 8.0;

/// Cache-line misses a core keeps in flight on a sequential stream (the L2's outstanding-miss
/// queue: 16 entries on Skylake-SP / Cascade Lake, Intel 64 and IA-32 Architectures
/// Optimization Reference Manual; single-core bandwidth = 16 x 64 B / DRAM latency, McCalpin's
/// concurrency law). Assumed for every machine (a machine field would be better).
pub const STREAM_MLP: f64 = 16.0;

/// Misses at full DRAM latency before the L2 streamer runs ahead of a new ascending stream
/// (it triggers on the second miss in a page; Intel optimization manual). Assumed.
pub const TRAIN_MISSES: f64 = 2.0;

/// Struct-page lines last written by other CPUs that `__free_one_page()` touches per block
/// freed: the buddy check (`page_is_buddy()`), `buddy_merge_likely()`'s check of the order+1
/// buddy, and the free list's old first (or last) entry that `list_add` links to (module docs:
/// merges of pages freed in bulk trade the first for two list neighbours and read their buddies
/// from this CPU's own lines). Counted from the code (4.x-6.x `mm/page_alloc.c`); where each
/// line was last written is the caller's line mixture.
pub const FREE_REMOTE_LINES: f64 = 3.0;

/// Which side of the PCP takes zone->lock: a refill (`rmqueue_bulk()`) or a drain
/// (`free_pcppages_bulk()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldSide {
    /// `rmqueue_bulk()`: its struct-page stream restarts after a hand-over.
    Refill,
    /// `free_pcppages_bulk()`: no stream.
    Drain,
}

/// How the blocks of a flow lie in memory and who touched their struct pages last (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockPattern {
    /// Blocks circulating between CPUs: buddies rarely free, lines left by other CPUs.
    Scattered,
    /// Pages freed in bulk by the task that allocated them, in allocation order.
    Sequential,
}

/// Whether `free_pcppages_bulk()` prefetches the buddies' struct pages before taking the lock:
/// from 4.18 (Aaron Lu's "mm/free_pcppages_bulk: prefetch buddy while not holding lock") until
/// 5.18 (Mel Gorman's "mm/page_alloc: do not prefetch buddies during bulk free").
pub fn buddy_prefetched(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::new(4, 18) && kernel < KernelVersion::new(5, 18)
}

/// Extra hand-off time of a ticket spinlock, ns, with `waiters` CPUs spinning on the lock line
/// at a release: every waiter re-reads the line the releaser wrote, the reads are serviced one
/// after another, and the next ticket holder's comes at a uniformly random place among them,
/// `(k + 1) / 2` transfers on average for `k` waiters (Boyd-Wickizer et al. 2012: a hand-off
/// grows linearly with the waiting cores). One of those transfers is the hand-over a queued
/// spinlock pays too (already in the hold), so the extra is `(k - 1) / 2` transfers: none with
/// a single waiter. [`crate::model::reader_burst`] applies the same serial service to the
/// NUMA counter line but serves the reads after the first at an LLC hit when the LLC is
/// inclusive; here every re-read stays one transfer. The two agree on the ticket-lock kernels
/// with measurements here (arm64 before 4.18 on Kunpeng 920, non-inclusive); x86 before 4.2 on
/// an inclusive LLC would be over-charged by this form, and no measurement checks it.
pub fn ticket_handoff(waiters: f64, transfer_ns: f64) -> f64 {
    0.5 * (waiters - 1.0).max(0.0) * transfer_ns.max(0.0)
}

/// The kind of spinlock `zone->lock` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpinlockKind {
    /// Queued (MCS) spinlock: FIFO hand-over, waiters spin locally.
    Queued,
    /// Ticket spinlock: every waiter spins on the lock line.
    Ticket,
}

impl SpinlockKind {
    /// The rule by architecture (`vendor` of the machine file: `arm` is arm64, anything else
    /// x86) and kernel: x86-64 switched to queued spinlocks in 4.2 ("locking/qspinlock, x86:
    /// Enable x86-64 to use queued spinlocks"), arm64 with commit c11090474d70 ("arm64: locking:
    /// Replace ticket lock implementation with qspinlock", 2018-03-13), taken here as 4.18 (our
    /// reading of its merge window, not checked against a release tag).
    pub fn of(vendor: &str, kernel: KernelVersion) -> SpinlockKind {
        let since = if vendor.eq_ignore_ascii_case("arm") {
            KernelVersion::new(4, 18)
        } else {
            KernelVersion::new(4, 2)
        };
        if kernel < since {
            SpinlockKind::Ticket
        } else {
            SpinlockKind::Queued
        }
    }
}

/// Where `check_new_pages()` runs for pages refilled from the buddy lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefillCheck {
    /// Under zone->lock, in `rmqueue_bulk()` (4.7 up to 6.2, CONFIG_DEBUG_VM off).
    UnderLock,
    /// After zone->lock is released (6.3, Halbuer's patch).
    AfterLock,
    /// Not at all unless `check_pages_enabled` (6.4 on, default configuration).
    Off,
}

impl RefillCheck {
    /// Where it runs, in words.
    pub fn describe(self) -> &'static str {
        match self {
            RefillCheck::UnderLock => "under zone->lock",
            RefillCheck::AfterLock => "after zone->lock",
            RefillCheck::Off => "off",
        }
    }

    /// The kernel's rule (default configuration, CONFIG_DEBUG_VM off).
    pub fn of(kernel: KernelVersion) -> RefillCheck {
        if kernel < KernelVersion::new(6, 3) {
            RefillCheck::UnderLock
        } else if kernel < KernelVersion::new(6, 4) {
            RefillCheck::AfterLock
        } else {
            RefillCheck::Off
        }
    }
}

/// The parts of one refill hold, ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct HoldParts {
    /// The call's own work (lock, IRQs, counter).
    pub call_ns: f64,
    /// Lines moved from the previous holder and the stream's restart (expected).
    pub handover_ns: f64,
    /// The blocks: CPU work and head struct-page lines.
    pub blocks_ns: f64,
    /// `check_new_pages()` under the lock (before 6.3; from 6.3 the allocating CPU pays it
    /// after the lock, [`CodeHold::check_after_lock_ns`], outside the hold).
    pub check_ns: f64,
}

impl HoldParts {
    /// The whole hold, ns.
    pub fn total(&self) -> f64 {
        self.call_ns + self.handover_ns + self.blocks_ns + self.check_ns
    }
}

/// The refill hold of one machine and kernel, composed from the code (module docs).
#[derive(Debug, Clone, Serialize)]
pub struct CodeHold {
    /// Clock the CPU work runs at, GHz.
    pub clock_ghz: f64,
    /// CPU cycles per call ([`CALL_CYCLES`]).
    pub call_cycles: f64,
    /// CPU cycles per block ([`crate::model::zonelock::CPU_CYCLES_PER_PAGE`]).
    pub block_cycles: f64,
    /// CPU cycles per struct page checked ([`CHECK_CYCLES`]).
    pub check_cycles: f64,
    /// Where the refill check runs.
    pub check: RefillCheck,
    /// L2 hit, ns (a prefetched line on the dependent chain).
    pub l2_ns: f64,
    /// Local DRAM, ns.
    pub dram_ns: f64,
    /// Time per line of a sequential stream, ns (`dram_ns / STREAM_MLP`).
    pub stream_line_ns: f64,
    /// Zone lines moved to a new holder.
    pub handover_lines: f64,
    /// Stream restarts' misses per hand-over.
    pub train_misses: f64,
    /// Remote struct-page lines per block a drain frees ([`FREE_REMOTE_LINES`]).
    pub free_remote_lines: f64,
    /// The buddy's line is prefetched before the lock ([`buddy_prefetched`]).
    pub buddy_prefetched: bool,
}

impl CodeHold {
    /// The hold of `machine` on `kernel` with the CPU at `clock_ghz`.
    pub fn new(machine: &Machine, kernel: KernelVersion, clock_ghz: f64) -> CodeHold {
        use crate::assumptions::value;
        let dram = machine.latency_ns.dram_local.value;
        CodeHold {
            clock_ghz,
            call_cycles: value("hold::CALL_CYCLES", CALL_CYCLES),
            block_cycles: value(
                "zonelock::CPU_CYCLES_PER_PAGE",
                crate::model::zonelock::CPU_CYCLES_PER_PAGE,
            ),
            check_cycles: value("hold::CHECK_CYCLES", CHECK_CYCLES),
            check: RefillCheck::of(kernel),
            l2_ns: machine.latency_ns.l2_hit.value,
            dram_ns: dram,
            stream_line_ns: dram / value("hold::STREAM_MLP", STREAM_MLP),
            handover_lines: value(
                "zonelock::HANDOVER_LINES",
                crate::model::zonelock::HANDOVER_LINES,
            ),
            train_misses: value("hold::TRAIN_MISSES", TRAIN_MISSES),
            free_remote_lines: value("hold::FREE_REMOTE_LINES", FREE_REMOTE_LINES),
            buddy_prefetched: buddy_prefetched(kernel),
        }
    }

    /// The same hold with the refill check placed by hand.
    pub fn with_check(self, check: RefillCheck) -> CodeHold {
        CodeHold { check, ..self }
    }

    fn cycles(&self, c: f64) -> f64 {
        c / self.clock_ghz
    }

    /// Expected hand-over cost of one hold on `side`, ns: with probability `p_other` the
    /// previous holder was another CPU at mean core-to-core latency `c2c_ns`; its zone lines
    /// move, and a refill's struct-page stream restarts (a drain has none). A refill of
    /// recently freed, scattered blocks reads no stream: [`CodeHold::refill`] leaves the restart
    /// out when it is given their head line's cost.
    pub fn handover_ns(&self, side: HoldSide, p_other: f64, c2c_ns: f64) -> f64 {
        let restart = match side {
            HoldSide::Refill => self.restart_ns(p_other),
            HoldSide::Drain => 0.0,
        };
        p_other * self.handover_lines * c2c_ns + restart
    }

    /// Expected stream restart of a refill that reads a stream, ns: with probability `p_other`
    /// the previous holder was another CPU and the prefetcher starts over.
    pub fn restart_ns(&self, p_other: f64) -> f64 {
        p_other * self.train_misses * self.dram_ns
    }

    /// The fixed part of a hold on `side` (call and hand-over), ns: what it pays besides its
    /// blocks.
    pub fn fixed_ns(&self, side: HoldSide, p_other: f64, c2c_ns: f64) -> f64 {
        self.cycles(self.call_cycles) + self.handover_ns(side, p_other, c2c_ns)
    }

    /// One block freed to the buddy lists under the lock, ns: CPU work, the block's own line
    /// (`own_line_ns`, an L2 hit) and its [`FREE_REMOTE_LINES`] other lines: with `pattern`
    /// scattered each at `remote_line_ns` (the mixture of where other CPUs left them; the buddy
    /// check an L2 hit when prefetched before the lock), sequential only the free-list neighbour
    /// at `remote_line_ns` and the buddies' lines L2 hits.
    ///
    /// Scattered blocks after the first of a drain find a neighbour this CPU wrote a moment
    /// before: `add_to_free_list()` links a block to the list's first entry, which is the block
    /// the same drain freed just before when that one stayed at its order on the same list (a
    /// block's buddy is rarely free in a scattered flow, and the order+1 buddy too, so
    /// `buddy_merge_likely()` rarely sends it to the tail). This charges every block the
    /// neighbour as an L2 hit; [`CodeHold::drain_first_block_extra_ns`] adds the first block's
    /// remote neighbour to the drain's fixed part.
    pub fn drain_block_ns(
        &self,
        own_line_ns: f64,
        remote_line_ns: f64,
        pattern: BlockPattern,
    ) -> f64 {
        let lines = self.free_remote_lines;
        let remote = match pattern {
            BlockPattern::Sequential => lines.min(1.0),
            // Buddy check (unless prefetched) and the order+1 buddy; the neighbour is local.
            BlockPattern::Scattered if self.buddy_prefetched => (lines - 2.0).max(0.0),
            BlockPattern::Scattered => (lines - 1.0).max(0.0),
        };
        let local = lines - remote;
        self.cycles(self.block_cycles) + own_line_ns + local * self.l2_ns + remote * remote_line_ns
    }

    /// What a drain's first block pays beyond [`CodeHold::drain_block_ns`], ns: with scattered
    /// blocks its free-list neighbour was last written by whichever CPU added to that list
    /// before (a line from the mixture at `remote_line_ns`, not the L2 hit the later blocks
    /// find); nothing for sequential blocks, whose neighbour is charged remote on every block.
    pub fn drain_first_block_extra_ns(&self, remote_line_ns: f64, pattern: BlockPattern) -> f64 {
        match pattern {
            BlockPattern::Scattered if self.free_remote_lines >= 1.0 => {
                (remote_line_ns - self.l2_ns).max(0.0)
            }
            _ => 0.0,
        }
    }

    /// `check_new_pages()` over one block of `order`, wherever it runs, ns: [`CHECK_CYCLES`] on
    /// the head (its line is already present) and, for each of the `(1 << order) - 1` tail
    /// struct pages (contiguous, read in ascending order), the check or the stream's time per
    /// line, whichever is longer.
    pub fn check_block_ns(&self, order: u8) -> f64 {
        let tail = f64::from((1u32 << order.min(20)) - 1);
        self.cycles(self.check_cycles)
            + tail * self.cycles(self.check_cycles).max(self.stream_line_ns)
    }

    /// `check_new_pages()` that the allocating CPU pays outside zone->lock for `blocks` blocks
    /// of `order` a refill gave it, ns: the same check over the same struct pages as under the
    /// lock ([`CodeHold::check_block_ns`]), on 6.3 only ([`RefillCheck::AfterLock`]: Halbuer's
    /// patch moved the check from `rmqueue_bulk()` to `__rmqueue_pcplist()`, which checks each
    /// block as it leaves the PCP list). Moving the check shortens the hold, not the CPU's work:
    /// the struct pages are still read, from DRAM as a stream. 0 before 6.3 (the check is in
    /// [`HoldParts::check_ns`]) and from 6.4 (off by default).
    pub fn check_after_lock_ns(&self, blocks: f64, order: u8) -> f64 {
        if self.check == RefillCheck::AfterLock {
            blocks * self.check_block_ns(order)
        } else {
            0.0
        }
    }

    /// One refill of `blocks` blocks of `order`; `head_line_ns` is the cost of a block's head
    /// struct-page line when the pages were freed recently (None: never freed in the interval,
    /// freshly split blocks read as a stream).
    pub fn refill(
        &self,
        blocks: f64,
        order: u8,
        p_other: f64,
        c2c_ns: f64,
        head_line_ns: Option<f64>,
    ) -> HoldParts {
        let streamed = self.l2_ns.max(self.stream_line_ns);
        let head = head_line_ns.unwrap_or(streamed);
        let per_block = self.cycles(self.block_cycles) + head;
        let check_block = self.check_block_ns(order);
        HoldParts {
            call_ns: self.cycles(self.call_cycles),
            // Scattered heads (`head_line_ns` given) are no stream: no restart to pay.
            handover_ns: self.handover_ns(HoldSide::Refill, p_other, c2c_ns)
                - head_line_ns.map_or(0.0, |_| self.restart_ns(p_other)),
            blocks_ns: blocks * per_block,
            check_ns: if self.check == RefillCheck::UnderLock {
                blocks * check_block
            } else {
                0.0
            },
        }
    }
}

/// Probability that a hold's previous holder was another CPU, for `procs` symmetric tasks.
pub fn p_other(procs: u32) -> f64 {
    let n = f64::from(procs.max(1));
    (n - 1.0) / n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold() -> CodeHold {
        let m = Machine::builtin("xeon-gold-6252-2s").unwrap();
        CodeHold::new(&m, KernelVersion::new(6, 1), 2.1)
    }

    /// A ticket hand-off costs nothing extra with one waiter (a queued lock pays the same
    /// transfer), and half a transfer per further waiter; negative inputs are clamped.
    #[test]
    fn ticket_handoff_grows_by_half_a_transfer_per_extra_waiter() {
        assert_eq!(ticket_handoff(0.0, 100.0), 0.0);
        assert_eq!(ticket_handoff(1.0, 100.0), 0.0);
        assert_eq!(ticket_handoff(3.0, 100.0), 100.0);
        assert_eq!(ticket_handoff(11.0, 80.0), 400.0);
        assert_eq!(ticket_handoff(5.0, -1.0), 0.0);
    }

    #[test]
    fn check_placement_follows_the_kernel() {
        assert_eq!(
            RefillCheck::of(KernelVersion::new(4, 15)),
            RefillCheck::UnderLock
        );
        assert_eq!(
            RefillCheck::of(KernelVersion::new(6, 1)),
            RefillCheck::UnderLock
        );
        assert_eq!(
            RefillCheck::of(KernelVersion::new(6, 3)),
            RefillCheck::AfterLock
        );
        assert_eq!(RefillCheck::of(KernelVersion::new(6, 10)), RefillCheck::Off);
    }

    #[test]
    fn zone_lock_is_a_ticket_lock_only_on_old_arm64_kernels() {
        let k = KernelVersion::new;
        assert_eq!(SpinlockKind::of("arm", k(4, 14)), SpinlockKind::Ticket);
        assert_eq!(SpinlockKind::of("arm", k(4, 18)), SpinlockKind::Queued);
        assert_eq!(SpinlockKind::of("intel", k(4, 14)), SpinlockKind::Queued);
        assert_eq!(SpinlockKind::of("amd", k(4, 1)), SpinlockKind::Ticket);
    }

    #[test]
    fn one_task_pays_no_handover_and_the_hold_grows_with_blocks() {
        let h = hold();
        let one = h.refill(63.0, 0, p_other(1), 47.5, None);
        assert_eq!(one.handover_ns, 0.0);
        let two = h.refill(126.0, 0, p_other(1), 47.5, None);
        // Linear in blocks: the per-block part doubles exactly, the call part does not.
        assert!((two.blocks_ns - 2.0 * one.blocks_ns).abs() < 1e-9);
        assert!(h.refill(63.0, 0, p_other(24), 47.5, None).handover_ns > 0.0);
    }

    /// A refill of freshly split blocks restarts the struct-page stream after a hand-over; one
    /// of recently freed, scattered blocks reads no stream, so its hand-over is the zone lines
    /// only (the drain's).
    #[test]
    fn only_a_streamed_refill_pays_the_restart() {
        let h = hold();
        let streamed = h.refill(7.0, 3, 1.0, 40.0, None).handover_ns;
        let scattered = h.refill(7.0, 3, 1.0, 40.0, Some(40.0)).handover_ns;
        assert!((streamed - scattered - h.train_misses * h.dram_ns).abs() < 1e-9);
        assert!((scattered - h.handover_ns(HoldSide::Drain, 1.0, 40.0)).abs() < 1e-9);
    }

    /// A drain's first scattered block pays its own L2 line and three remote lines (one of them
    /// an L2 hit while the kernel prefetched buddies before the lock); the later blocks of the
    /// same drain find their free-list neighbour in L2 (the block freed just before); one remote
    /// line when the frees are sequential; the fixed part has no stream restart.
    #[test]
    fn a_drained_block_pays_three_remote_lines() {
        let m = Machine::builtin("xeon-gold-6252-2s").unwrap();
        let h = CodeHold::new(&m, KernelVersion::new(6, 1), 2.0);
        let l2 = h.l2_ns;
        let b = h.drain_block_ns(4.0, 50.0, BlockPattern::Scattered);
        assert!(
            (b - (60.0 / 2.0 + 4.0 + 2.0 * 50.0 + l2)).abs() < 1e-9,
            "{b}"
        );
        let first = b + h.drain_first_block_extra_ns(50.0, BlockPattern::Scattered);
        assert!(
            (first - (60.0 / 2.0 + 4.0 + 3.0 * 50.0)).abs() < 1e-9,
            "{first}"
        );
        let old = CodeHold::new(&m, KernelVersion::new(5, 4), 2.0);
        let b_old = old.drain_block_ns(4.0, 50.0, BlockPattern::Scattered)
            + old.drain_first_block_extra_ns(50.0, BlockPattern::Scattered);
        assert!((b_old - (30.0 + 4.0 + l2 + 2.0 * 50.0)).abs() < 1e-9);
        assert_eq!(
            h.drain_first_block_extra_ns(50.0, BlockPattern::Sequential),
            0.0
        );
        // Sequential frees: only the free-list neighbour is remote.
        let b_seq = h.drain_block_ns(4.0, 50.0, BlockPattern::Sequential);
        assert!((b_seq - (30.0 + 4.0 + 2.0 * h.l2_ns + 50.0)).abs() < 1e-9);
        assert!(!buddy_prefetched(KernelVersion::new(4, 17)));
        assert!(!buddy_prefetched(KernelVersion::new(5, 18)));
        // Fixed part: call + hand-over lines only.
        let f = h.fixed_ns(HoldSide::Drain, 1.0, 40.0);
        assert!((f - (60.0 / 2.0 + h.handover_lines * 40.0)).abs() < 1e-9);
        assert!(f < h.fixed_ns(HoldSide::Refill, 1.0, 40.0));
    }

    #[test]
    fn an_order_9_check_streams_its_struct_pages() {
        let h = hold();
        let p = h.refill(1.0, 9, 0.0, 47.5, None);
        // 511 tail lines at the stream's time per line (85 ns / 16 = 5.3 ns, longer than the
        // 8-cycle check at 2.1 GHz): the check is 511 x 5.31 + 3.8 ns, exactly.
        let expect = 511.0 * (85.0 / 16.0) + 8.0 / 2.1;
        assert!((p.check_ns - expect).abs() < 1e-6, "{}", p.check_ns);
        let off = h
            .clone()
            .with_check(RefillCheck::AfterLock)
            .refill(1.0, 9, 0.0, 47.5, None);
        assert_eq!(off.check_ns, 0.0);
        // Out of the lock, not out of the CPU's work: the same check, paid after the lock.
        let after = h.clone().with_check(RefillCheck::AfterLock);
        assert!((after.check_after_lock_ns(1.0, 9) - expect).abs() < 1e-6);
        assert_eq!(h.check_after_lock_ns(1.0, 9), 0.0);
        assert_eq!(
            h.clone()
                .with_check(RefillCheck::Off)
                .check_after_lock_ns(1.0, 9),
            0.0
        );
    }
}
