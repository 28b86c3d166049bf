//! One CPU's pageset of one zone, stepped one allocation or free at a time, as the kernel does.
//!
//! [`PcpState`] mirrors `struct per_cpu_pages` (`count`, `high`, `high_min`, `high_max`,
//! `batch`, `free_factor` / `free_count`, `alloc_factor`, `flags`) and the functions that move
//! pages between the PCP lists and the buddy allocator. A simulation calls
//! [`PcpState::alloc`] and [`PcpState::free`] in a loop and reads how many pages each
//! zone->lock hold moved.
//!
//! # Equations, by era (pages; C integer arithmetic)
//! **Allocation** (`rmqueue_pcplist()` -> `__rmqueue_pcplist()`): when the list of the order is
//! empty, `rmqueue_bulk()` moves `n` blocks of that order under one zone->lock hold.
//! - <= 6.6: `n = batch`, and for `order > 0` `n = max(batch >> order, 2)` when `batch > 1`.
//!   5.14 - 6.6 first halve `free_factor`.
//! - From 6.7: `nr_pcp_alloc()`: `high = clamp(pcp->high, high_min, high_max)`; 1 if `high <
//!   batch`; `b = batch << alloc_factor` (order 0) or `batch`; unless `high_min == high_max` or
//!   ZONE_BELOW_HIGH, `pcp->high = min(high + b, high_max)`; for order 0
//!   `max_nr_alloc = max(high - count - batch, batch)`, `alloc_factor++` when `b <=
//!   max_nr_alloc` and `alloc_factor < CONFIG_PCP_BATCH_SCALE_MAX`, `b = min(b,
//!   max_nr_alloc)`; then the order scaling above. `free_count` is halved first.
//!
//! **Free** (`free_unref_page_commit()`, `free_frozen_page_commit()` from 6.15/6.16):
//! - <= 5.13: `count += 1 << order`; if `count >= high`, free `batch` pages in one hold.
//! - 5.14 - 6.6: `free_high = free_factor > 0 && 1 <= order <= 3` (>= 5.18 only);
//!   `nr_pcp_high()` = 0 if `high == 0` or `free_high`, `min(batch << 2, high)` under
//!   ZONE_RECLAIM_ACTIVE, else `high`; if `count >= that`, free `nr_pcp_free()` pages in one
//!   hold: all of `count` with `free_high`, 1 if `high < batch`, else `clamp(batch <<
//!   free_factor, batch, high - batch)` with `free_factor++` while `batch << free_factor <
//!   high - batch`. E.g. high 421, batch 63: 63, 126, 252, then 358 per hold.
//! - From 6.7: `alloc_factor >>= 1`; `free_high` needs two high-order (1..3) frees in a row
//!   (`PCPF_PREV_FREE_HIGH_ORDER`), `free_count >= batch` (6.7 - 6.15) or `>= batch +
//!   high_min / 2` (>= 6.16, c544a952ba61; version inferred), and with `PCPF_FREE_HIGH_BATCH` `count >= batch`;
//!   `free_count += 1 << order` while below `batch << scale`; `nr_pcp_high()` auto-tunes
//!   `pcp->high` (see [`PcpState::nr_pcp_high`]); if `count >= high`, free `nr_pcp_free()` =
//!   `min(count, batch << scale)` with `free_high`, 1 if `high < batch`, else
//!   `clamp(free_count, batch, high - batch)`. 6.7 - 6.18 free it in one hold; >= 6.19 in
//!   chunks of `min(left, batch)`, one hold each, until done or the list is empty.
//!
//! **Decay** (`decay_pcp_high()`, >= 6.7, each vmstat tick): `pcp->high = max3(count - (batch <<
//! scale), high - high / 8, high_min)` when above `high_min`, then free `count - high`.
//!
//! # Assumptions
//! - A list per migratetype (unmovable, movable, reclaimable) and order, at the kernel's
//!   `order_to_pindex()` position: `MIGRATE_PCPTYPES * order + migratetype` for orders 0-3,
//!   then the THP lists (movable, and the others); each list is a count of blocks (no LIFO
//!   order). [`PcpState::alloc`] and [`PcpState::free`] use the movable lists; a flow that
//!   knows its types steps [`PcpState::alloc_mt`] and [`PcpState::free_mt`].
//! - The buddy allocator always has pages: `rmqueue_bulk()` moves the whole request.
//! - Zone flags are inputs: the simulation decides when ZONE_RECLAIM_ACTIVE and ZONE_BELOW_HIGH
//!   are set (the kernel sets them from kswapd and from watermark checks).
//! - `free_pcppages_bulk()` drains the list of the freed order first, then the next non-empty
//!   lists in turn, whole blocks, stopping once the requested page count is reached; 5.14 -
//!   5.19 interleaved lists with `batch_free` instead, which gives the same pages per hold.
//! - 6.7 - 6.18 are modelled on the ~6.16 code (`free_count`); the first 6.7 form may differ in
//!   details. 6.6-stable with the `CONFIG_PCP_BATCH_SCALE_MAX` backport is modelled as a cap on
//!   `free_factor` (my reading of the backport; not verified against a 6.6.y tree).
//! - Orders on PCP lists: 0 only before 5.13; 0-3 and the THP order 9 from 5.13. Other orders
//!   go to the buddy allocator directly: one zone->lock hold per call.
//!
//! # References
//! mm/page_alloc.c `rmqueue_pcplist`, `__rmqueue_pcplist`, `nr_pcp_alloc`, `nr_pcp_high`,
//! `nr_pcp_free`, `free_unref_page_commit` / `free_frozen_page_commit`, `free_pcppages_bulk`,
//! `decay_pcp_high`, `drain_pages_zone` (torvalds/linux @ dac22531bbd4; ColinIanKing/linux-next
//! @ 00e7a3e9143c; linux-mm @ 00cb34b034a5); Joshua Hahn, "[PATCH v5 3/3] mm/page_alloc: Batch
//! page freeing in free_frozen_page_commit" (Oct 2025).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::pageset::{PcpHigh, PcpLimits};
use crate::kernel::version::{Era, KernelVersion};

/// `PAGE_ALLOC_COSTLY_ORDER`: the highest "cheap" order kept on PCP lists besides THP.
pub const PAGE_ALLOC_COSTLY_ORDER: u8 = 3;
/// `pageblock_order` / THP order on x86-64.
pub const PAGEBLOCK_ORDER: u8 = 9;
/// Highest allocation order (`MAX_PAGE_ORDER`, 10 on x86-64).
pub const MAX_PAGE_ORDER: u8 = 10;
/// Default `CONFIG_PCP_BATCH_SCALE_MAX`.
pub const DEFAULT_PCP_BATCH_SCALE_MAX: u8 = 5;
/// Largest `CONFIG_PCP_BATCH_SCALE_MAX` the Kconfig range allows.
pub const MAX_PCP_BATCH_SCALE_MAX: u8 = 6;

/// `MIGRATE_PCPTYPES`: the migratetypes with their own PCP lists.
pub const MIGRATE_PCPTYPES: usize = 3;
/// `NR_LOWORDER_PCP_LISTS`: the lists of orders 0..=PAGE_ALLOC_COSTLY_ORDER.
const NR_LOWORDER_PCP_LISTS: usize = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER as usize + 1);
/// `NR_PCP_LISTS`: the low-order lists and two THP lists (movable and the others).
pub const NR_PCP_LISTS: usize = NR_LOWORDER_PCP_LISTS + 2;
/// List slots: the kernel's lists and one for pages whose lists are not known (what a recorded
/// pageset held before the recording beyond what the recording shows), order-0 pages that
/// only drains take.
const NR_SLOTS: usize = NR_PCP_LISTS + 1;

/// A migratetype with its own PCP lists (`enum migratetype` below `MIGRATE_PCPTYPES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub enum MigrateType {
    /// MIGRATE_UNMOVABLE (0): kernel allocations, page tables.
    Unmovable,
    /// MIGRATE_MOVABLE (1): user pages, page cache.
    #[default]
    Movable,
    /// MIGRATE_RECLAIMABLE (2): reclaimable slab caches.
    Reclaimable,
}

impl MigrateType {
    /// The type of the kernel's number, as the tracepoints print it. Types past the PCP types
    /// (MIGRATE_HIGHATOMIC, MIGRATE_CMA, MIGRATE_ISOLATE) are freed to the movable list
    /// (`free_frozen_pages()`), so they map to movable.
    pub fn from_kernel(n: u8) -> MigrateType {
        match n {
            0 => MigrateType::Unmovable,
            2 => MigrateType::Reclaimable,
            _ => MigrateType::Movable,
        }
    }

    /// The kernel's number.
    pub fn number(self) -> u8 {
        match self {
            MigrateType::Unmovable => 0,
            MigrateType::Movable => 1,
            MigrateType::Reclaimable => 2,
        }
    }
}

/// Zone flags that change the PCP decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct ZoneFlags {
    /// ZONE_RECLAIM_ACTIVE: kswapd is reclaiming the zone (>= 5.14).
    pub reclaim_active: bool,
    /// ZONE_BELOW_HIGH: the zone failed its high-watermark check (>= 6.7).
    pub below_high: bool,
}

/// `pcp->flags` (>= 6.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct PcpFlags {
    /// PCPF_PREV_FREE_HIGH_ORDER: the previous free was of order 1..=3.
    pub prev_free_high_order: bool,
    /// PCPF_FREE_HIGH_BATCH: the per-CPU data cache slice holds more than 3 batches
    /// ([`pcpf_free_high_batch`]).
    pub free_high_batch: bool,
}

/// `pcp_allowed_order()` (`mm/page_alloc.c`): order 0 always; from 5.13 (44042b449872 "mm/page_alloc:
/// allow high-order pages to be stored on the per-cpu lists") also orders up to
/// PAGE_ALLOC_COSTLY_ORDER (3) and the pageblock (PMD THP) order 9. Other orders go to and from
/// the buddy allocator under zone->lock on every allocation and free.
pub fn pcp_allowed_order(version: KernelVersion, order: u8) -> bool {
    order == 0
        || (version.has_high_order_pcp()
            && (order <= PAGE_ALLOC_COSTLY_ORDER || order == PAGEBLOCK_ORDER))
}

/// The PCPF_FREE_HIGH_BATCH test of `zone_pcp_update_cacheinfo()` (>= 6.7):
/// `(per_cpu_data_slice_size >> PAGE_SHIFT) > 3 * batch`.
pub fn pcpf_free_high_batch(per_cpu_data_slice_bytes: u64, batch_pages: u32) -> bool {
    (per_cpu_data_slice_bytes >> 12) > 3 * u64::from(batch_pages)
}

/// What one allocation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct AllocStep {
    /// Pages moved from the buddy allocator under one zone->lock hold (0 when the list had a
    /// page). With `bypassed_pcp`, the `1 << order` pages of the allocation itself.
    pub refill_pages: u32,
    /// Blocks of the order moved by the refill.
    pub refill_blocks: u32,
    /// The order is not kept on PCP lists: the allocation took zone->lock itself.
    pub bypassed_pcp: bool,
}

/// What one free did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FreeStep {
    /// Pages returned to the buddy allocator, one entry per zone->lock hold (empty when the
    /// page stayed on the PCP list).
    pub drained_pages_per_hold: Vec<u32>,
    /// The `free_high` path was taken.
    pub free_high: bool,
    /// The order is not kept on PCP lists: the free took zone->lock itself.
    pub bypassed_pcp: bool,
}

impl FreeStep {
    /// Total pages returned to the buddy allocator.
    pub fn drained_pages(&self) -> u32 {
        self.drained_pages_per_hold.iter().sum()
    }
}

/// What one `decay_pcp_high()` call did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct DecayStep {
    /// Pages returned to the buddy allocator, one entry per zone->lock hold.
    pub drained_pages_per_hold: Vec<u32>,
    /// The function returned non-zero: vmstat keeps calling it.
    pub todo: bool,
}

/// One CPU's pageset of one zone (`struct per_cpu_pages`). See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct PcpState {
    version: KernelVersion,
    era: Era,
    /// `pcp->count`: pages on all lists.
    pub count_pages: u32,
    /// Blocks on the list of each order: orders 0, 1, 2, 3 and THP, then the other lists.
    lists_blocks: [u32; NR_SLOTS],
    /// `pcp->high`, pages: fixed (<= 6.6) or live, auto-tuned (>= 6.7; starts at 0).
    pub high_pages: u32,
    /// `pcp->high_min`, pages (>= 6.7; equals `high_pages` before).
    pub high_min_pages: u32,
    /// `pcp->high_max`, pages (>= 6.7; equals `high_pages` before).
    pub high_max_pages: u32,
    /// `pcp->batch`, pages.
    pub batch_pages: u32,
    /// `pcp->free_factor` (5.14 - 6.6).
    pub free_factor: u8,
    /// `pcp->free_count`, pages (>= 6.7).
    pub free_count_pages: u32,
    /// `pcp->alloc_factor` (>= 6.7).
    pub alloc_factor: u8,
    /// `pcp->flags` (>= 6.7).
    pub flags: PcpFlags,
    /// Flags of the zone.
    pub zone_flags: ZoneFlags,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` (>= 6.7, or 6.6 with the stable backport).
    scale_max: Option<u8>,
    /// Blocks returned to the buddy allocator by `free_pcppages_bulk()` since creation (one
    /// `__free_one_page()` call each: what a drain's zone->lock hold is made of).
    pub drained_blocks: u64,
}

fn clamp_kernel(val: i64, lo: i64, hi: i64) -> i64 {
    // include/linux/minmax.h __clamp(): hi wins when lo > hi.
    if val >= hi {
        hi
    } else if val <= lo {
        lo
    } else {
        val
    }
}

fn to_u32(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

impl PcpState {
    /// An empty pageset with the given limits. `pcp_batch_scale_max` is
    /// `CONFIG_PCP_BATCH_SCALE_MAX` (0..=6): None means 5 on >= 6.7 and "no backport" on 6.6;
    /// it is an error on other versions. The limits must match the era (fixed `high` <= 6.6,
    /// `high_min`/`high_max` >= 6.7). On >= 6.7 the live `high` starts at 0, as after
    /// `pageset_init()`.
    pub fn new(
        version: KernelVersion,
        limits: PcpLimits,
        pcp_batch_scale_max: Option<u8>,
    ) -> Result<Self> {
        let era = version.era();
        let scale_max = match pcp_batch_scale_max {
            Some(s) if s > MAX_PCP_BATCH_SCALE_MAX => {
                return Err(Error::invalid(
                    "pcp options",
                    "CONFIG_PCP_BATCH_SCALE_MAX",
                    format!("{s} is outside the Kconfig range 0..6"),
                ))
            }
            Some(s)
                if version.has_pcp_batch_scale_max() || version.may_have_scale_max_backport() =>
            {
                Some(s)
            }
            Some(_) => {
                return Err(Error::invalid(
                    "pcp options",
                    "CONFIG_PCP_BATCH_SCALE_MAX",
                    format!(
                    "does not exist in kernel {version} (added in 6.7, backported to 6.6-stable)"
                ),
                ))
            }
            None if version.has_pcp_batch_scale_max() => Some(DEFAULT_PCP_BATCH_SCALE_MAX),
            None => None,
        };
        if limits.batch_pages == 0 {
            return Err(Error::invalid(
                "pcp options",
                "batch_pages",
                "must be at least 1",
            ));
        }
        let (high, high_min, high_max) = match (era.auto_tunes_high(), limits.high) {
            (false, PcpHigh::Fixed { high_pages }) => (high_pages, high_pages, high_pages),
            (
                true,
                PcpHigh::AutoTuned {
                    high_min_pages,
                    high_max_pages,
                },
            ) => {
                if high_min_pages > high_max_pages {
                    return Err(Error::invalid(
                        "pcp options",
                        "high_min_pages",
                        format!("{high_min_pages} is above high_max_pages {high_max_pages}"),
                    ));
                }
                (0, high_min_pages, high_max_pages)
            }
            (false, _) => {
                return Err(Error::invalid(
                    "pcp options",
                    "high",
                    format!("kernel {version} has a fixed pcp->high, not high_min/high_max"),
                ))
            }
            (true, _) => {
                return Err(Error::invalid(
                    "pcp options",
                    "high",
                    format!("kernel {version} auto-tunes pcp->high: give high_min/high_max"),
                ))
            }
        };
        Ok(PcpState {
            version,
            era,
            count_pages: 0,
            lists_blocks: [0; NR_SLOTS],
            high_pages: high,
            high_min_pages: high_min,
            high_max_pages: high_max,
            batch_pages: limits.batch_pages,
            free_factor: 0,
            free_count_pages: 0,
            alloc_factor: 0,
            flags: PcpFlags::default(),
            zone_flags: ZoneFlags::default(),
            scale_max,
            drained_blocks: 0,
        })
    }

    /// The kernel version modelled.
    pub fn version(&self) -> KernelVersion {
        self.version
    }

    /// `CONFIG_PCP_BATCH_SCALE_MAX` in effect (None: the kernel has none).
    pub fn pcp_batch_scale_max(&self) -> Option<u8> {
        self.scale_max
    }

    /// Blocks on the movable list of `order` (0 for orders not kept on PCP lists).
    pub fn list_blocks(&self, order: u8) -> u32 {
        self.list_blocks_mt(order, MigrateType::Movable)
    }

    /// Blocks on the list of `order` and `mt`.
    pub fn list_blocks_mt(&self, order: u8, mt: MigrateType) -> u32 {
        self.pindex(order, mt).map_or(0, |i| self.lists_blocks[i])
    }

    /// Blocks on the list at the kernel's `pindex` (0..[`NR_PCP_LISTS`]).
    pub fn list_blocks_at(&self, pindex: usize) -> u32 {
        if pindex < NR_PCP_LISTS {
            self.lists_blocks[pindex]
        } else {
            0
        }
    }

    /// The kernel's list index (`order_to_pindex()`) of `order` and `mt` (None: the order is
    /// not kept on PCP lists).
    pub fn list_index(&self, order: u8, mt: MigrateType) -> Option<usize> {
        self.pindex(order, mt)
    }

    /// Whether pages of `order` are kept on PCP lists (`pcp_allowed_order()`).
    pub fn pcp_allowed_order(&self, order: u8) -> bool {
        pcp_allowed_order(self.version, order)
    }

    fn pindex(&self, order: u8, mt: MigrateType) -> Option<usize> {
        if !pcp_allowed_order(self.version, order) {
            None
        } else if order <= PAGE_ALLOC_COSTLY_ORDER {
            Some(MIGRATE_PCPTYPES * order as usize + mt.number() as usize)
        } else {
            Some(NR_LOWORDER_PCP_LISTS + usize::from(mt == MigrateType::Movable))
        }
    }

    /// The order of the blocks on the list at `pindex` (0 for the slot of unknown lists).
    pub fn order_at(pindex: usize) -> u8 {
        Self::order_of(pindex)
    }

    fn order_of(i: usize) -> u8 {
        if i < NR_LOWORDER_PCP_LISTS {
            (i / MIGRATE_PCPTYPES) as u8
        } else if i < NR_PCP_LISTS {
            PAGEBLOCK_ORDER
        } else {
            0
        }
    }

    /// Puts `pages` base pages on the lists the stepped flow never allocates from: the other
    /// migratetypes' lists, such as what a recorded pageset held before the recording (its
    /// count is in /proc/zoneinfo, its lists are not). They count toward `pcp->count`, so they
    /// take room under `pcp->high`, and drains take them after the flow's lists, in the
    /// kernel's round-robin.
    pub fn add_other_pages(&mut self, pages: u32) {
        self.lists_blocks[NR_PCP_LISTS] = self.lists_blocks[NR_PCP_LISTS].saturating_add(pages);
        self.count_pages = self.count_pages.saturating_add(pages);
    }

    fn check_order(order: u8) -> Result<()> {
        if order > MAX_PAGE_ORDER {
            return Err(Error::invalid(
                "pcp step",
                "order",
                format!("{order} is above MAX_PAGE_ORDER ({MAX_PAGE_ORDER})"),
            ));
        }
        Ok(())
    }

    fn scale(&self) -> u32 {
        u32::from(self.scale_max.unwrap_or(DEFAULT_PCP_BATCH_SCALE_MAX))
    }

    fn batch_scaled(&self) -> i64 {
        i64::from(self.batch_pages) << self.scale()
    }

    /// Puts `blocks` blocks of `order` on the movable list (a refill without a zone->lock
    /// count, for setting up a state). Errors for orders not kept on PCP lists.
    pub fn add_pages(&mut self, order: u8, blocks: u32) -> Result<()> {
        self.add_pages_mt(order, MigrateType::Movable, blocks)
    }

    /// [`PcpState::add_pages`] on the list of `mt`.
    pub fn add_pages_mt(&mut self, order: u8, mt: MigrateType, blocks: u32) -> Result<()> {
        Self::check_order(order)?;
        let i = self.pindex(order, mt).ok_or_else(|| {
            Error::Unsupported(format!(
                "order {order} is not kept on PCP lists in kernel {}",
                self.version
            ))
        })?;
        self.lists_blocks[i] = self.lists_blocks[i].saturating_add(blocks);
        self.count_pages = self
            .count_pages
            .saturating_add(blocks.saturating_mul(1 << order));
        Ok(())
    }

    /// `free_pcppages_bulk(zone, count, pcp, pindex)`: returns the pages freed in this hold.
    fn free_pcppages_bulk(&mut self, count: i64, pindex: usize) -> u32 {
        let mut count = count.min(i64::from(self.count_pages));
        let mut drained: u32 = 0;
        let mut i = pindex;
        let mut first = true;
        while count > 0 {
            if !first {
                i = (i + 1) % NR_SLOTS;
            }
            first = false;
            let mut guard = 0;
            while self.lists_blocks[i] == 0 {
                i = (i + 1) % NR_SLOTS;
                guard += 1;
                if guard > NR_SLOTS {
                    return drained; // count and lists disagree: nothing left to free
                }
            }
            let nr_pages = 1u32 << Self::order_of(i);
            loop {
                self.lists_blocks[i] -= 1;
                self.drained_blocks += 1;
                drained += nr_pages;
                count -= i64::from(nr_pages);
                self.count_pages = self.count_pages.saturating_sub(nr_pages);
                if !(count > 0 && self.lists_blocks[i] > 0) {
                    break;
                }
            }
        }
        drained
    }

    /// Frees `to_free` pages in the hold pattern of the era: one hold (<= 6.18) or chunks of
    /// at most `batch` (>= 6.19).
    fn bulk_in_holds(&mut self, to_free: i64, pindex: usize) -> Vec<u32> {
        let mut holds = Vec::new();
        if self.era == Era::BatchedFree {
            let mut left = to_free;
            loop {
                let chunk = left.min(i64::from(self.batch_pages));
                let n = self.free_pcppages_bulk(chunk, pindex);
                if n > 0 {
                    holds.push(n);
                }
                left -= chunk;
                if left <= 0 || self.count_pages == 0 {
                    break;
                }
            }
        } else {
            let n = self.free_pcppages_bulk(to_free, pindex);
            if n > 0 {
                holds.push(n);
            }
        }
        holds
    }

    /// `nr_pcp_alloc(pcp, zone, order)` (>= 6.7): blocks of `order` a refill moves. Updates
    /// `pcp->high` and `alloc_factor` as the kernel does. On <= 6.6 returns the fixed refill
    /// (`batch`, scaled by order).
    pub fn nr_pcp_alloc(&mut self, order: u8) -> u32 {
        let base = i64::from(self.batch_pages);
        if !self.era.auto_tunes_high() {
            let mut b = base;
            if b > 1 {
                b = (b >> order).max(2);
            }
            return to_u32(b);
        }
        let high_min = i64::from(self.high_min_pages);
        let high_max = i64::from(self.high_max_pages);
        let mut high = i64::from(self.high_pages).clamp(high_min.min(high_max), high_max);
        self.high_pages = to_u32(high);
        if high < base {
            return 1;
        }
        let mut batch = if order > 0 {
            base
        } else {
            base.checked_shl(u32::from(self.alloc_factor))
                .unwrap_or(i64::MAX)
        };
        if high_min != high_max && !self.zone_flags.below_high {
            high = (high + batch).min(high_max);
            self.high_pages = to_u32(high);
        }
        if order == 0 {
            let max_nr_alloc = (high - i64::from(self.count_pages) - base).max(base);
            if batch <= max_nr_alloc && u32::from(self.alloc_factor) < self.scale() {
                self.alloc_factor += 1;
            }
            batch = batch.min(max_nr_alloc);
        }
        if batch > 1 {
            batch = (batch >> order).max(2);
        }
        to_u32(batch)
    }

    /// One movable allocation of `2^order` pages ([`PcpState::alloc_mt`]).
    pub fn alloc(&mut self, order: u8) -> Result<AllocStep> {
        self.alloc_mt(order, MigrateType::Movable)
    }

    /// One allocation of `2^order` pages of `mt` (`rmqueue_pcplist()`): refills the list of
    /// that order and type from the buddy allocator when it is empty, then takes one block.
    pub fn alloc_mt(&mut self, order: u8, mt: MigrateType) -> Result<AllocStep> {
        Self::check_order(order)?;
        let Some(i) = self.pindex(order, mt) else {
            return Ok(AllocStep {
                refill_pages: 1 << order,
                refill_blocks: 1,
                bypassed_pcp: true,
            });
        };
        match self.era {
            Era::Legacy => {}
            Era::SplitHigh => self.free_factor >>= 1,
            Era::AutoTune | Era::BatchedFree => self.free_count_pages >>= 1,
        }
        let mut step = AllocStep::default();
        if self.lists_blocks[i] == 0 {
            let blocks = if self.era == Era::Legacy {
                let mut b = self.batch_pages;
                if order > 0 && b > 1 {
                    b = (b >> order).max(2);
                }
                b
            } else {
                self.nr_pcp_alloc(order)
            };
            self.lists_blocks[i] = blocks;
            let pages = blocks.saturating_mul(1 << order);
            self.count_pages = self.count_pages.saturating_add(pages);
            step.refill_blocks = blocks;
            step.refill_pages = pages;
        }
        if self.lists_blocks[i] > 0 {
            self.lists_blocks[i] -= 1;
            self.count_pages = self.count_pages.saturating_sub(1 << order);
        }
        Ok(step)
    }

    /// The `free_high` decision of `free_unref_page_commit()` / `free_frozen_page_commit()` for
    /// a free of `order`, made after the page was added to the list. On >= 6.7 it also updates
    /// PCPF_PREV_FREE_HIGH_ORDER, as the kernel does at that point. Always false before 5.18.
    pub fn free_high_decision(&mut self, order: u8) -> bool {
        let high_order = order > 0 && order <= PAGE_ALLOC_COSTLY_ORDER;
        match self.era {
            Era::Legacy => false,
            Era::SplitHigh => self.version.has_free_high() && self.free_factor > 0 && high_order,
            Era::AutoTune | Era::BatchedFree => {
                let batch = i64::from(self.batch_pages);
                if high_order {
                    let threshold = if self.version.free_high_threshold_uses_high_min() {
                        batch + i64::from(self.high_min_pages) / 2
                    } else {
                        batch
                    };
                    let free_high = i64::from(self.free_count_pages) >= threshold
                        && self.flags.prev_free_high_order
                        && (!self.flags.free_high_batch || i64::from(self.count_pages) >= batch);
                    self.flags.prev_free_high_order = true;
                    free_high
                } else {
                    self.flags.prev_free_high_order = false;
                    false
                }
            }
        }
    }

    /// `nr_pcp_high(pcp, zone, [batch,] free_high)`: the count at which a free drains.
    /// 5.14 - 6.6: 0 with `free_high` or `high == 0`; `min(batch << 2, high)` under
    /// ZONE_RECLAIM_ACTIVE; else `high`. >= 6.7: also tunes the live `pcp->high` (lowered by
    /// `free_high`, reclaim and ZONE_BELOW_HIGH; raised to `free_count + batch` when a free
    /// reaches it). <= 5.13: `high`.
    pub fn nr_pcp_high(&mut self, free_high: bool) -> u32 {
        let batch = i64::from(self.batch_pages);
        match self.era {
            Era::Legacy => self.high_pages,
            Era::SplitHigh => {
                let high = self.high_pages;
                if high == 0 || free_high {
                    0
                } else if !self.zone_flags.reclaim_active {
                    high
                } else {
                    to_u32((batch << 2).min(i64::from(high)))
                }
            }
            Era::AutoTune | Era::BatchedFree => {
                let high_min = i64::from(self.high_min_pages);
                let high_max = i64::from(self.high_max_pages);
                let mut high = i64::from(self.high_pages).clamp(high_min.min(high_max), high_max);
                self.high_pages = to_u32(high);
                if high == 0 {
                    return 0;
                }
                let free_count = i64::from(self.free_count_pages);
                if free_high {
                    self.high_pages = to_u32((high - self.batch_scaled()).max(high_min));
                    return 0;
                }
                if self.zone_flags.reclaim_active {
                    let fc = free_count.max(batch);
                    let h = (high - fc).max(high_min);
                    self.high_pages = to_u32(h);
                    return to_u32((batch << 2).min(h));
                }
                if high_min == high_max {
                    return to_u32(high);
                }
                if self.zone_flags.below_high {
                    let fc = free_count.max(batch);
                    self.high_pages = to_u32((high - fc).max(high_min));
                    high = i64::from(self.count_pages).max(high_min);
                } else if i64::from(self.count_pages) >= high {
                    let need_high = free_count + batch;
                    if i64::from(self.high_pages) < need_high {
                        self.high_pages = to_u32(clamp_kernel(need_high, high_min, high_max));
                    }
                }
                to_u32(high)
            }
        }
    }

    /// `nr_pcp_free(pcp, [batch,] high, free_high)` (>= 5.14): pages a free drains once
    /// `count >= high`. Updates `free_factor` (5.14 - 6.6). On <= 5.13 returns `batch`.
    pub fn nr_pcp_free(&mut self, high: u32, free_high: bool) -> u32 {
        let batch = i64::from(self.batch_pages);
        let high = i64::from(high);
        match self.era {
            Era::Legacy => self.batch_pages,
            Era::SplitHigh => {
                if free_high {
                    return self.count_pages;
                }
                if high < batch {
                    return 1;
                }
                let min_nr_free = batch;
                let max_nr_free = high - batch;
                let shifted = if self.free_factor >= 32 {
                    i64::MAX
                } else {
                    batch << self.free_factor
                };
                let capped = self.scale_max.is_some_and(|s| self.free_factor >= s);
                if shifted < max_nr_free && !capped {
                    self.free_factor += 1;
                }
                to_u32(clamp_kernel(shifted, min_nr_free, max_nr_free))
            }
            Era::AutoTune | Era::BatchedFree => {
                if free_high {
                    return to_u32(i64::from(self.count_pages).min(self.batch_scaled()));
                }
                if high < batch {
                    return 1;
                }
                to_u32(clamp_kernel(
                    i64::from(self.free_count_pages),
                    batch,
                    high - batch,
                ))
            }
        }
    }

    /// One free of `2^order` pages to the movable list ([`PcpState::free_mt`]).
    pub fn free(&mut self, order: u8) -> Result<FreeStep> {
        self.free_mt(order, MigrateType::Movable)
    }

    /// One free of `2^order` pages of a pageblock of `mt` (`free_unref_page_commit()` /
    /// `free_frozen_page_commit()`): puts the block on its list and drains to the buddy
    /// allocator when the era's rule says so, that list first.
    pub fn free_mt(&mut self, order: u8, mt: MigrateType) -> Result<FreeStep> {
        Self::check_order(order)?;
        let Some(i) = self.pindex(order, mt) else {
            return Ok(FreeStep {
                drained_pages_per_hold: vec![1 << order],
                free_high: false,
                bypassed_pcp: true,
            });
        };
        if self.era.auto_tunes_high() {
            self.alloc_factor >>= 1;
        }
        self.lists_blocks[i] = self.lists_blocks[i].saturating_add(1);
        self.count_pages = self.count_pages.saturating_add(1 << order);
        let mut step = FreeStep::default();
        match self.era {
            Era::Legacy => {
                if self.count_pages >= self.high_pages {
                    let n = self.free_pcppages_bulk(i64::from(self.batch_pages), i);
                    if n > 0 {
                        step.drained_pages_per_hold.push(n);
                    }
                }
            }
            Era::SplitHigh => {
                let free_high = self.free_high_decision(order);
                step.free_high = free_high;
                let high = self.nr_pcp_high(free_high);
                if self.count_pages >= high {
                    let n = self.nr_pcp_free(high, free_high);
                    step.drained_pages_per_hold = self.bulk_in_holds(i64::from(n), i);
                }
            }
            Era::AutoTune | Era::BatchedFree => {
                let free_high = self.free_high_decision(order);
                step.free_high = free_high;
                if i64::from(self.free_count_pages) < self.batch_scaled() {
                    self.free_count_pages = self.free_count_pages.saturating_add(1 << order);
                }
                let high = self.nr_pcp_high(free_high);
                if self.count_pages >= high {
                    let n = self.nr_pcp_free(high, free_high);
                    step.drained_pages_per_hold = self.bulk_in_holds(i64::from(n), i);
                }
            }
        }
        Ok(step)
    }

    /// `decay_pcp_high(zone, pcp)` (>= 6.7), called each vmstat tick: lowers the live `high`
    /// by 1/8 (not below `high_min` nor `count - (batch << scale)`) and frees what is above
    /// it. Errors on <= 6.6, which has no auto-tuning.
    pub fn decay_pcp_high(&mut self) -> Result<DecayStep> {
        if !self.era.auto_tunes_high() {
            return Err(Error::Unsupported(format!(
                "decay_pcp_high() does not exist in kernel {} (added in 6.7)",
                self.version
            )));
        }
        let high_min = i64::from(self.high_min_pages);
        let mut todo = false;
        let mut high = i64::from(self.high_pages);
        if high > high_min {
            let count = i64::from(self.count_pages);
            high = (count - self.batch_scaled())
                .max(high - (high >> 3))
                .max(high_min);
            self.high_pages = to_u32(high);
            if high > high_min {
                todo = true;
            }
        }
        let to_drain = i64::from(self.count_pages) - high;
        let mut step = DecayStep::default();
        if to_drain > 0 {
            step.drained_pages_per_hold = self.bulk_in_holds(to_drain, 0);
            todo = true;
        }
        step.todo = todo;
        Ok(step)
    }

    /// What writing `vm.stat_refresh` until nothing moves does to an idle pageset (>= 6.7):
    /// `decay_pcp_high()` again and again, until the live high is at `high_min` and the lists
    /// hold no more than it (at most `max_ticks` times). Returns the pages drained. `pcpmodel
    /// record` settles the pagesets so before each recording; a replay at another setting
    /// starts from the lists that setting leaves. No-op (0) on <= 6.6, which has no decay.
    pub fn settle(&mut self, max_ticks: u32) -> u32 {
        if !self.era.auto_tunes_high() {
            return 0;
        }
        let before = self.count_pages;
        for _ in 0..max_ticks {
            match self.decay_pcp_high() {
                Ok(step) if step.todo => {}
                _ => break,
            }
        }
        before.saturating_sub(self.count_pages)
    }

    /// `drain_pages_zone()`: empties the pageset. <= 6.6 in one hold; >= 6.7 in holds of at
    /// most `batch << CONFIG_PCP_BATCH_SCALE_MAX` pages.
    pub fn drain_pages_zone(&mut self) -> Vec<u32> {
        let mut holds = Vec::new();
        if self.era.auto_tunes_high() {
            while self.count_pages > 0 {
                let n = i64::from(self.count_pages).min(self.batch_scaled());
                let d = self.free_pcppages_bulk(n, 0);
                if d == 0 {
                    break;
                }
                holds.push(d);
            }
        } else if self.count_pages > 0 {
            let n = self.free_pcppages_bulk(i64::from(self.count_pages), 0);
            if n > 0 {
                holds.push(n);
            }
        }
        holds
    }
}
