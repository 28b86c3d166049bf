//! A small simulator of the buddy allocator's free lists (`mm/page_alloc.c`: `__rmqueue_smallest()`
//! with `expand()`, `__free_one_page()` with its merges and `buddy_merge_likely()`'s tail
//! placement), used to check how often a flow's frees merge: the premise of
//! [`crate::model::hold::BlockPattern`]. It counts merges and splits; it costs nothing itself.
//!
//! Two flows:
//! - [`circulating`]: `pairs` writer/reader pairs; a writer refills `refill_blocks` blocks of one
//!   order when its list is empty and sends them one at a time; a reader frees a block once
//!   `in_flight_blocks` more have been sent after it (a socket buffer), `drain_blocks` at a time.
//!   The pairs step in random order (a seeded generator).
//! - [`sequential`]: one task allocates `blocks` blocks and frees them in allocation order (an
//!   munmap of what it faulted).
//!
//! Memory starts as free blocks of the largest order (`MAX_ORDER` 10: the zone of a machine with
//! plenty of free memory).

use std::collections::{HashMap, VecDeque};

use crate::fit::stats::SplitMix64;

/// The largest order of the simulated lists (`MAX_ORDER - 1` = 10 in 4.x-6.x).
pub const MAX_ORDER: u8 = 10;

/// Merges and splits per block of the flow's order.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MergeRates {
    /// Merges per block freed.
    pub merges_per_free: f64,
    /// Splits per block allocated.
    pub splits_per_alloc: f64,
}

struct Lists {
    lists: Vec<VecDeque<u64>>,
    free: HashMap<u64, u8>,
    merges: u64,
    splits: u64,
    frees: u64,
    allocs: u64,
}

impl Lists {
    fn new(max_blocks: u64) -> Lists {
        let mut l = Lists {
            lists: vec![VecDeque::new(); usize::from(MAX_ORDER) + 1],
            free: HashMap::new(),
            merges: 0,
            splits: 0,
            frees: 0,
            allocs: 0,
        };
        for i in 0..max_blocks {
            l.add(i << MAX_ORDER, MAX_ORDER, true);
        }
        l
    }

    fn add(&mut self, pfn: u64, order: u8, tail: bool) {
        let list = &mut self.lists[usize::from(order)];
        if tail {
            list.push_back(pfn);
        } else {
            list.push_front(pfn);
        }
        self.free.insert(pfn, order);
    }

    fn remove(&mut self, pfn: u64, order: u8) {
        let list = &mut self.lists[usize::from(order)];
        if let Some(i) = list.iter().position(|&p| p == pfn) {
            list.remove(i);
        }
        self.free.remove(&pfn);
    }

    /// `__rmqueue_smallest()` + `expand()`: the head of the smallest non-empty list at or above
    /// `order`, its upper halves put at the heads of the lists below. None when memory is out.
    fn alloc(&mut self, order: u8) -> Option<u64> {
        let from = (order..=MAX_ORDER).find(|&o| !self.lists[usize::from(o)].is_empty())?;
        let pfn = self.lists[usize::from(from)].pop_front()?;
        self.free.remove(&pfn);
        let mut o = from;
        while o > order {
            o -= 1;
            self.splits += 1;
            self.add(pfn + (1 << o), o, false);
        }
        self.allocs += 1;
        Some(pfn)
    }

    /// `__free_one_page()`: merge while the buddy is free at the current order, then put the
    /// block at the tail when the next order's buddy is free (`buddy_merge_likely()`).
    fn release(&mut self, mut pfn: u64, order: u8) {
        self.frees += 1;
        let mut o = order;
        while o < MAX_ORDER {
            let buddy = pfn ^ (1 << o);
            if self.free.get(&buddy) != Some(&o) {
                break;
            }
            self.remove(buddy, o);
            self.merges += 1;
            pfn &= buddy;
            o += 1;
        }
        let tail = o < MAX_ORDER && {
            let higher_buddy = (pfn & !(1 << o)) ^ (1 << (o + 1));
            self.free.get(&higher_buddy) == Some(&(o + 1))
        };
        self.add(pfn, o, tail);
    }

    fn rates(&self) -> MergeRates {
        MergeRates {
            merges_per_free: self.merges as f64 / self.frees.max(1) as f64,
            splits_per_alloc: self.splits as f64 / self.allocs.max(1) as f64,
        }
    }
}

/// The circulating flow (module docs), `steps` sends in all.
pub fn circulating(
    pairs: u32,
    order: u8,
    refill_blocks: u32,
    in_flight_blocks: u32,
    drain_blocks: u32,
    steps: u32,
    seed: u64,
) -> MergeRates {
    let order = order.min(MAX_ORDER);
    let p = pairs.max(1) as usize;
    let mut l = Lists::new(
        4 * u64::from(pairs.max(1))
            * u64::from(refill_blocks + in_flight_blocks + drain_blocks + 1),
    );
    let mut rng = SplitMix64::new(seed);
    let mut writer: Vec<VecDeque<u64>> = vec![VecDeque::new(); p];
    let mut flight: Vec<VecDeque<u64>> = vec![VecDeque::new(); p];
    let mut reader: Vec<Vec<u64>> = vec![Vec::new(); p];
    for _ in 0..steps {
        let i = (rng.next_u64() % p as u64) as usize;
        if writer[i].is_empty() {
            for _ in 0..refill_blocks.max(1) {
                if let Some(b) = l.alloc(order) {
                    writer[i].push_back(b);
                }
            }
        }
        let Some(b) = writer[i].pop_front() else {
            continue;
        };
        flight[i].push_back(b);
        if flight[i].len() > in_flight_blocks as usize {
            if let Some(x) = flight[i].pop_front() {
                reader[i].push(x);
            }
            if reader[i].len() >= drain_blocks.max(1) as usize {
                for x in std::mem::take(&mut reader[i]) {
                    l.release(x, order);
                }
            }
        }
    }
    l.rates()
}

/// The sequential flow (module docs).
pub fn sequential(blocks: u32, order: u8) -> MergeRates {
    let order = order.min(MAX_ORDER);
    let per_max = 1u64 << (MAX_ORDER - order);
    let mut l = Lists::new(u64::from(blocks).div_ceil(per_max) + 1);
    let taken: Vec<u64> = (0..blocks).filter_map(|_| l.alloc(order)).collect();
    for b in taken {
        l.release(b, order);
    }
    l.rates()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lmbench-like circulation (8 pairs per zone, refills of 7 order-3 blocks, about 6 blocks
    /// in a socket buffer, a drain per free): merges are rare, the premise of the scattered
    /// pattern. A flow in steady state splits as often as it merges.
    #[test]
    fn circulating_blocks_rarely_merge() {
        let r = circulating(8, 3, 7, 6, 1, 200_000, 1);
        assert!(r.merges_per_free < 0.3, "{r:?}");
        assert!(
            (r.merges_per_free - r.splits_per_alloc).abs() < 0.02,
            "{r:?}"
        );
    }

    /// An munmap of 32768 order-0 pages faulted from fresh memory merges back into order-10
    /// blocks: 32768 - 32 merges, within 0.1 % of one per page, and as many splits.
    #[test]
    fn sequential_frees_merge_once_per_page() {
        let r = sequential(32_768, 0);
        let expect = (32_768.0 - 32.0) / 32_768.0;
        assert!((r.merges_per_free - expect).abs() < 1e-9, "{r:?}");
        assert!((r.splits_per_alloc - expect).abs() < 1e-9, "{r:?}");
    }
}
