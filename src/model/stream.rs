//! A recorded stream of allocations and frees stepped through the kernel's PCP rules
//! ([`crate::kernel::ops::PcpState`]), one pageset per CPU and zone: the flow engine for a flow
//! that is given event by event (`pcpmodel replay`) rather than described by a few numbers
//! ([`crate::model::autotune`]'s process and pair flows).
//!
//! Each CPU's events go to that CPU's pageset of the page's zone, in the CPU's order; the
//! vmstat tick (`decay_pcp_high()`, 6.7+) is the caller's to call ([`StreamReplay::tick`]).
//! What the stream does is tallied per pageset ([`StreamTally`]) in the units the kmem
//! tracepoints count, so that a recorded flow's own refills and drains can stand beside them:
//! a refill is one `rmqueue_bulk()` call, a drain one free step (or decay) that returned pages
//! to the buddy allocator.
//!
//! The reuse distance of an allocation served from a list is the pages the CPU allocated since
//! the block was freed there: the data written in between, which decides whether the block's
//! lines are still in the CPU's caches. Each list is shadowed as the kernel orders it (a free
//! goes to the head, an allocation takes the head, a refill fills the tail, a drain takes the
//! tail: `list_add()`, `list_first_entry()`, `list_last_entry()` in mm/page_alloc.c), its length
//! kept equal to the engine's count of blocks on it.
//!
//! A block a refill brought was last touched where it was freed: by the CPU whose list drained
//! it to the buddy allocator (or by this CPU, before an earlier drain). Its reuse distance is
//! the pages allocated on every replayed pageset between that free and this allocation (the
//! data that went through the shared LLC meanwhile), kept apart from the list reuse: the blocks
//! a recording never saw freed (on the lists at the start, or merged and split at another
//! address) are counted without a distance.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::error::Result;
use crate::kernel::ops::{MigrateType, PcpState, NR_PCP_LISTS};

/// What the stream did to one pageset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StreamTally {
    /// Allocations (every order, lists bypassed included).
    pub allocs: u64,
    /// Base pages allocated.
    pub alloc_pages: u64,
    /// Frees.
    pub frees: u64,
    /// Base pages freed.
    pub free_pages: u64,
    /// Refills (`rmqueue_bulk()` calls).
    pub refills: u64,
    /// Pages the refills moved.
    pub refill_pages: u64,
    /// Blocks the refills moved (one `__rmqueue()` each).
    pub refill_blocks: u64,
    /// Drains: free steps and decays that returned pages to the buddy allocator.
    pub drains: u64,
    /// Pages the drains returned.
    pub drain_pages: u64,
    /// Blocks the drains returned (one `__free_one_page()` each).
    pub drain_blocks: u64,
    /// Drains on a free of order 1-3 (where `free_high` can fire).
    pub drains_on_high_order_free: u64,
    /// Drains taken by the `free_high` path.
    pub free_high: u64,
    /// Drains by `decay_pcp_high()` at a vmstat tick.
    pub decay_drains: u64,
    /// Allocations and frees of orders the lists do not keep (each takes zone->lock).
    pub bypassed: u64,
    /// Sum over events of the pages on the lists after the event (for the mean).
    held_sum: f64,
    /// Sum over events of the live `pcp->high` after the event.
    high_sum: f64,
    /// Events stepped.
    pub events: u64,
    /// Allocations a trace did not show, stepped where a refill shows them
    /// ([`StreamReplay::step_unseen`]).
    pub unseen_allocs: u64,
    /// Pages on the lists at the end.
    pub final_count: u32,
    /// Live `pcp->high` at the end.
    pub final_high: u32,
    /// Allocations served from the list by reuse distance: counts per bucket of
    /// [`REUSE_BUCKET_PAGES`] (the last bucket: farther), and blocks a refill brought.
    pub reuse: ReuseHistogram,
    /// The refilled blocks by pages the zone drained since their drain.
    pub refill_sources: RefillSources,
}

/// Upper edges of the reuse-distance buckets, pages allocated since the block's free (1 MiB to
/// 1 GiB of data, past the largest LLC a CPU reaches; the last bucket is everything farther).
pub const REUSE_BUCKET_PAGES: [u64; 6] = [256, 1024, 4096, 16384, 65536, 262144];

/// Buckets of [`REUSE_BUCKET_PAGES`], the last one for farther.
const REUSE_BUCKETS: usize = REUSE_BUCKET_PAGES.len() + 1;

/// Allocations by reuse distance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReuseHistogram {
    /// Counts per bucket of [`REUSE_BUCKET_PAGES`], then one for farther.
    pub buckets: [u64; REUSE_BUCKETS],
    /// Allocations of a block a refill brought whose free the replay never saw (no distance).
    pub refilled: u64,
    /// Allocations of a block a refill brought, by the pages allocated on every pageset since
    /// the block was freed (on the CPU that drained it, or on this one), per bucket of
    /// [`REUSE_BUCKET_PAGES`], then farther.
    pub refilled_buckets: [u64; REUSE_BUCKETS],
    /// Page-weighted sum of distances (for the mean).
    pub distance_pages_sum: f64,
}

impl ReuseHistogram {
    fn add(&mut self, d: u64) {
        self.buckets[bucket_of(&REUSE_BUCKET_PAGES, d)] += 1;
        self.distance_pages_sum += d as f64;
    }

    fn add_refilled(&mut self, d: Option<u64>) {
        match d {
            Some(d) => self.refilled_buckets[bucket_of(&REUSE_BUCKET_PAGES, d)] += 1,
            None => self.refilled += 1,
        }
    }

    /// Adds another histogram.
    pub fn merge(&mut self, o: &ReuseHistogram) {
        add_buckets(&mut self.buckets, &o.buckets);
        add_buckets(&mut self.refilled_buckets, &o.refilled_buckets);
        self.refilled += o.refilled;
        self.distance_pages_sum += o.distance_pages_sum;
    }

    /// Allocations of a block a refill brought (with a distance or without).
    pub fn refilled_total(&self) -> u64 {
        self.refilled_buckets.iter().sum::<u64>() + self.refilled
    }

    /// Allocations counted.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.refilled_total()
    }

    /// Share of the allocations reused within `pages` (a bucket edge, or the largest edge for
    /// everything reused), of all allocations counted.
    pub fn share_within(&self, pages: u64) -> f64 {
        share_within(&REUSE_BUCKET_PAGES, &self.buckets, pages, self.total())
    }

    /// Share of the allocations of a refilled block freed less than `pages` (a bucket edge)
    /// allocated before, of all allocations counted.
    pub fn refilled_share_within(&self, pages: u64) -> f64 {
        share_within(
            &REUSE_BUCKET_PAGES,
            &self.refilled_buckets,
            pages,
            self.total(),
        )
    }
}

/// The bucket of `edges` a distance falls in (the last: farther).
fn bucket_of(edges: &[u64], d: u64) -> usize {
    edges.iter().position(|&e| d < e).unwrap_or(edges.len())
}

fn add_buckets(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Share of `n` counted below the bucket edge `pages` of `edges` (not an edge: every bucket).
fn share_within(edges: &[u64], buckets: &[u64], pages: u64, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let k = edges
        .iter()
        .position(|&e| e == pages)
        .map_or(buckets.len(), |i| i + 1);
    buckets[..k].iter().sum::<u64>() as f64 / n as f64
}

/// Upper edges of the refill-source buckets: pages the zone's pagesets drained between a
/// block's drain and its refill (1, 4, 16, 64 MiB of drained data; the flow file's
/// `refill_sources` line keeps these five buckets).
pub const REFILL_SOURCE_PAGES: [u64; 4] = [256, 1024, 4096, 16384];

/// Where one CPU's refilled blocks came from: the buddy allocator hands back the blocks the
/// pagesets drained most recently (a freed block goes to the head of its free list,
/// `__rmqueue_smallest()` takes the head), so a refilled block is often one another CPU drained
/// moments before, its lines still in that CPU's caches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefillSources {
    /// Refilled blocks by pages drained since their drain, per bucket of
    /// [`REFILL_SOURCE_PAGES`], then farther.
    pub buckets: [u64; 5],
    /// Refilled blocks not drained within the recording (or not seen: a block merged and split
    /// at another address).
    pub not_drained: u64,
    /// Of the blocks drained within the recording, those another CPU drained.
    pub other_cpu: u64,
}

impl RefillSources {
    /// Counts a refilled block drained `distance` pages before (None: not seen drained),
    /// by `other_cpu`.
    pub fn add(&mut self, distance: Option<u64>, other_cpu: bool) {
        match distance {
            None => self.not_drained += 1,
            Some(d) => {
                self.buckets[bucket_of(&REFILL_SOURCE_PAGES, d)] += 1;
                if other_cpu {
                    self.other_cpu += 1;
                }
            }
        }
    }

    /// Adds another CPU's counts.
    pub fn merge(&mut self, o: &RefillSources) {
        add_buckets(&mut self.buckets, &o.buckets);
        self.not_drained += o.not_drained;
        self.other_cpu += o.other_cpu;
    }

    /// Refilled blocks counted.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.not_drained
    }

    /// Share of the refilled blocks drained less than `pages` before (a bucket edge), of all
    /// counted.
    pub fn share_within(&self, pages: u64) -> f64 {
        share_within(&REFILL_SOURCE_PAGES, &self.buckets, pages, self.total())
    }
}

/// One block on a shadowed list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Freed here: the pages this CPU and every pageset had allocated at the free.
    Freed { local: u64, global: u64 },
    /// Brought by a refill: the pages every pageset had allocated when it was last freed
    /// (None: never seen freed).
    Refilled(Option<u64>),
}

impl Slot {
    /// The all-pagesets clock at the block's last free, where the replay saw it.
    fn freed_global(self) -> Option<u64> {
        match self {
            Slot::Freed { global, .. } => Some(global),
            Slot::Refilled(g) => g,
        }
    }
}

/// The kernel's order of one list, head first.
#[derive(Debug, Clone, Default)]
struct ShadowList(VecDeque<Slot>);

/// The kernel's lists, shadowed by `pindex` (the engine's slot for pages of unknown lists
/// holds no flow blocks).
#[derive(Debug, Clone, Default)]
struct Shadow {
    lists: [ShadowList; NR_PCP_LISTS],
    /// Pages allocated on this pageset so far.
    allocated_pages: u64,
}

impl Shadow {
    /// Makes each list as long as the engine's: blocks gone from the tail (drained), blocks
    /// added at the tail (refilled).
    fn reconcile(&mut self, st: &PcpState) {
        for i in 0..NR_PCP_LISTS {
            self.reconcile_one(st, i);
        }
    }

    /// [`Shadow::reconcile`] after a drain: the blocks gone from each list's tail are the
    /// drained ones, appended to `out` as their orders and last frees in the order they were
    /// drained (the kernel's round-robin from the freed list's `pindex`, each list from its
    /// tail).
    fn reconcile_drained(&mut self, st: &PcpState, from: usize, out: &mut Vec<(u8, Option<u64>)>) {
        for k in 0..NR_PCP_LISTS {
            let i = (from + k) % NR_PCP_LISTS;
            let want = st.list_blocks_at(i) as usize;
            let l = &mut self.lists[i].0;
            while l.len() > want {
                let slot = l.pop_back().unwrap_or(Slot::Refilled(None));
                out.push((PcpState::order_at(i), slot.freed_global()));
            }
            while l.len() < want {
                l.push_back(Slot::Refilled(None));
            }
        }
    }

    /// [`Shadow::reconcile`] of the list at `i` only (the one an allocation or a free without
    /// a drain touched).
    fn reconcile_one(&mut self, st: &PcpState, i: usize) {
        let want = st.list_blocks_at(i) as usize;
        let l = &mut self.lists[i].0;
        while l.len() > want {
            l.pop_back();
        }
        while l.len() < want {
            l.push_back(Slot::Refilled(None));
        }
    }
}

impl StreamTally {
    /// Mean pages on the lists over the stream's events.
    pub fn mean_held(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.held_sum / self.events as f64
        }
    }

    /// Mean live `pcp->high` over the stream's events.
    pub fn mean_high(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.high_sum / self.events as f64
        }
    }

    /// zone->lock visits: refills, drains and bypassing allocations and frees.
    pub fn lock_visits(&self) -> u64 {
        self.refills + self.drains + self.bypassed
    }

    /// Adds another pageset's tally (means weighted by events; final values summed).
    pub fn merge(&mut self, o: &StreamTally) {
        self.allocs += o.allocs;
        self.alloc_pages += o.alloc_pages;
        self.frees += o.frees;
        self.free_pages += o.free_pages;
        self.refills += o.refills;
        self.refill_pages += o.refill_pages;
        self.refill_blocks += o.refill_blocks;
        self.drains += o.drains;
        self.drain_pages += o.drain_pages;
        self.drain_blocks += o.drain_blocks;
        self.drains_on_high_order_free += o.drains_on_high_order_free;
        self.free_high += o.free_high;
        self.decay_drains += o.decay_drains;
        self.bypassed += o.bypassed;
        self.held_sum += o.held_sum;
        self.high_sum += o.high_sum;
        self.events += o.events;
        self.unseen_allocs += o.unseen_allocs;
        self.final_count += o.final_count;
        self.final_high += o.final_high;
        self.reuse.merge(&o.reuse);
        self.refill_sources.merge(&o.refill_sources);
    }
}

/// Allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOp {
    /// An allocation.
    Alloc,
    /// A free.
    Free,
    /// A free straight to the buddy allocator, the lists untouched: from interrupt context
    /// while the CPU's pcp lock is held (`pcp_spin_trylock()` fails, `free_one_page()`). One
    /// zone->lock visit; `alloc_factor` and `free_count` stay as they were.
    FreeDirect,
}

/// Drained blocks a zone's buddy allocator keeps, per order, at most (the oldest dropped):
/// a refill takes the newest, so the bottom of a long stack is never reached.
const BUDDY_STACK_BLOCKS: usize = 1 << 20;

/// One zone's buddy allocator as the replay sees it: the blocks the pagesets drained, per
/// order, newest on top (`__free_one_page()` puts a freed block at the head of its free list,
/// `__rmqueue_smallest()` takes the head; merging and splitting are left out). Each block keeps
/// the zone's drained pages before it, the CPU that drained it and the all-pagesets clock at
/// its last free.
#[derive(Debug, Clone, Default)]
struct Buddy {
    stacks: BTreeMap<u8, VecDeque<(u64, u32, Option<u64>)>>,
    drained_pages: u64,
}

impl Buddy {
    fn drained(&mut self, cpu: u32, blocks: &[(u8, Option<u64>)]) {
        for &(o, freed) in blocks {
            let s = self.stacks.entry(o).or_default();
            if s.len() == BUDDY_STACK_BLOCKS {
                s.pop_front();
            }
            s.push_back((self.drained_pages, cpu, freed));
            self.drained_pages += 1 << o;
        }
    }

    /// Takes `blocks` of `order` for `cpu`'s refill, newest first: counts where each came
    /// from and hands each block's last free to `slot` in the order taken.
    fn refilled(
        &mut self,
        cpu: u32,
        order: u8,
        blocks: u32,
        into: &mut RefillSources,
        mut slot: impl FnMut(Option<u64>),
    ) {
        let s = self.stacks.entry(order).or_default();
        for _ in 0..blocks {
            match s.pop_back() {
                Some((at, c, freed)) => {
                    into.add(Some(self.drained_pages - at), c != cpu);
                    slot(freed);
                }
                None => {
                    into.add(None, false);
                    slot(None);
                }
            }
        }
    }
}

/// Pagesets keyed by (CPU, zone index) with their tallies.
#[derive(Debug, Clone, Default)]
pub struct StreamReplay {
    sets: BTreeMap<(u32, u8), (PcpState, StreamTally, Shadow)>,
    /// Per zone index: its buddy allocator's drained blocks.
    buddies: BTreeMap<u8, Buddy>,
    /// Pages allocated on every pageset so far (the clock of refilled blocks' reuse).
    global_pages: u64,
    /// Scratch: the orders and last frees of the blocks one drain took.
    drained: Vec<(u8, Option<u64>)>,
}

impl StreamReplay {
    /// An empty replay.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the pageset of `cpu` in zone `zone`.
    pub fn insert(&mut self, cpu: u32, zone: u8, st: PcpState) {
        let mut sh = Shadow::default();
        sh.reconcile(&st);
        self.sets
            .insert((cpu, zone), (st, StreamTally::default(), sh));
    }

    /// Whether a pageset of `cpu` in `zone` is replayed.
    pub fn has(&self, cpu: u32, zone: u8) -> bool {
        self.sets.contains_key(&(cpu, zone))
    }

    /// Steps `n` events of `op` at `order` on `cpu`'s pageset of `zone`, on the movable lists
    /// ([`StreamReplay::step_mt`]).
    pub fn step(&mut self, cpu: u32, zone: u8, op: StreamOp, order: u8, n: u64) -> Result<()> {
        self.step_mt(cpu, zone, op, order, MigrateType::Movable, n)
    }

    /// Steps `n` events of `op` at `order` on the lists of `mt` of `cpu`'s pageset of `zone`.
    /// Events of a pageset not replayed are an error of the caller: it decides which pagesets
    /// exist.
    pub fn step_mt(
        &mut self,
        cpu: u32,
        zone: u8,
        op: StreamOp,
        order: u8,
        mt: MigrateType,
        n: u64,
    ) -> Result<()> {
        let buddy = self.buddies.entry(zone).or_default();
        let drained = &mut self.drained;
        let global = &mut self.global_pages;
        let Some((st, t, sh)) = self.sets.get_mut(&(cpu, zone)) else {
            return Err(crate::error::Error::invalid(
                "stream replay",
                "cpu/zone",
                format!("no pageset for cpu {cpu} in zone {zone}"),
            ));
        };
        let pages = n << order;
        for _ in 0..n {
            match op {
                StreamOp::Alloc => {
                    let s = st.alloc_mt(order, mt)?;
                    if s.bypassed_pcp {
                        t.bypassed += 1;
                    } else {
                        if s.refill_pages > 0 {
                            t.refills += 1;
                            t.refill_pages += u64::from(s.refill_pages);
                            t.refill_blocks += u64::from(s.refill_blocks);
                            // The refill filled the (empty) list, at the tail in the order the
                            // buddy allocator handed the blocks out.
                            let list = st.list_index(order, mt);
                            let lists = &mut sh.lists;
                            buddy.refilled(
                                cpu,
                                order,
                                s.refill_blocks,
                                &mut t.refill_sources,
                                |freed| {
                                    if let Some(i) = list {
                                        lists[i].0.push_back(Slot::Refilled(freed));
                                    }
                                },
                            );
                        }
                        if let Some(i) = st.list_index(order, mt) {
                            match sh.lists[i].0.pop_front() {
                                Some(Slot::Freed { local, .. }) => {
                                    t.reuse.add(sh.allocated_pages - local)
                                }
                                Some(Slot::Refilled(freed)) => t
                                    .reuse
                                    .add_refilled(freed.map(|g| global.saturating_sub(g))),
                                None => t.reuse.add_refilled(None),
                            }
                        }
                        sh.allocated_pages += 1 << order;
                    }
                    // Every allocation writes its pages through the caches, lists or not.
                    *global += 1 << order;
                    if let Some(i) = st.list_index(order, mt) {
                        sh.reconcile_one(st, i);
                    }
                }
                StreamOp::FreeDirect => {
                    t.bypassed += 1;
                    buddy.drained(cpu, &[(order, Some(*global))]);
                }
                StreamOp::Free => {
                    let before = st.drained_blocks;
                    if let Some(i) = st.list_index(order, mt) {
                        sh.lists[i].0.push_front(Slot::Freed {
                            local: sh.allocated_pages,
                            global: *global,
                        });
                    }
                    let f = st.free_mt(order, mt)?;
                    if st.drained_blocks != before {
                        // A drain may take blocks from any list, in the kernel's round-robin
                        // from the freed list.
                        drained.clear();
                        let from = st.list_index(order, mt).unwrap_or(0);
                        sh.reconcile_drained(st, from, drained);
                        buddy.drained(cpu, drained);
                    } else if let Some(i) = st.list_index(order, mt) {
                        sh.reconcile_one(st, i);
                    }
                    t.drain_blocks += st.drained_blocks - before;
                    if f.bypassed_pcp {
                        t.bypassed += 1;
                    } else if !f.drained_pages_per_hold.is_empty() {
                        t.drains += 1;
                        t.drain_pages += f
                            .drained_pages_per_hold
                            .iter()
                            .map(|&p| u64::from(p))
                            .sum::<u64>();
                        if (1..=3).contains(&order) {
                            t.drains_on_high_order_free += 1;
                        }
                        if f.free_high {
                            t.free_high += 1;
                        }
                    }
                }
            }
            t.held_sum += f64::from(st.count_pages);
            t.high_sum += f64::from(st.high_pages);
        }
        t.events += n;
        match op {
            StreamOp::Alloc => {
                t.allocs += n;
                t.alloc_pages += pages;
            }
            StreamOp::Free | StreamOp::FreeDirect => {
                t.frees += n;
                t.free_pages += pages;
            }
        }
        t.final_count = st.count_pages;
        t.final_high = st.high_pages;
        Ok(())
    }

    /// Steps `n` allocations of `order` from the list of `mt` that a trace does not show
    /// (`alloc_pages_bulk()` emits no mm_page_alloc): they take the list's blocks, and refill
    /// it, as any allocation does, but count as [`StreamTally::unseen_allocs`], not as
    /// allocations.
    pub fn step_unseen(
        &mut self,
        cpu: u32,
        zone: u8,
        order: u8,
        mt: MigrateType,
        n: u64,
    ) -> Result<()> {
        self.step_mt(cpu, zone, StreamOp::Alloc, order, mt, n)?;
        if let Some((_, t, _)) = self.sets.get_mut(&(cpu, zone)) {
            t.allocs -= n;
            t.alloc_pages -= n << order;
            t.unseen_allocs += n;
        }
        Ok(())
    }

    /// A vmstat tick on every CPU: `decay_pcp_high()` on each pageset of a kernel that
    /// auto-tunes (6.7+); nothing before.
    pub fn tick(&mut self) -> Result<()> {
        for (&(cpu, zone), (st, t, sh)) in self.sets.iter_mut() {
            if !st.version().era().auto_tunes_high() {
                continue;
            }
            let before = st.drained_blocks;
            let d = st.decay_pcp_high()?;
            self.drained.clear();
            sh.reconcile_drained(st, 0, &mut self.drained);
            self.buddies
                .entry(zone)
                .or_default()
                .drained(cpu, &self.drained);
            t.drain_blocks += st.drained_blocks - before;
            if !d.drained_pages_per_hold.is_empty() {
                t.drains += 1;
                t.decay_drains += 1;
                t.drain_pages += d
                    .drained_pages_per_hold
                    .iter()
                    .map(|&p| u64::from(p))
                    .sum::<u64>();
            }
            t.final_count = st.count_pages;
            t.final_high = st.high_pages;
        }
        Ok(())
    }

    /// The tallies by (CPU, zone index).
    pub fn tallies(&self) -> impl Iterator<Item = ((u32, u8), &StreamTally)> {
        self.sets.iter().map(|(k, (_, t, _))| (*k, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::pageset::{PcpHigh, PcpLimits};
    use crate::kernel::version::KernelVersion;

    /// CPU 0 allocates 100 pages, CPU 1 frees them (6.6, high 20, batch 8), `between` runs,
    /// then CPU 0 allocates 40 more.
    fn handed_over(between: impl FnOnce(&mut StreamReplay)) -> StreamReplay {
        let mut r = StreamReplay::new();
        r.insert(0, 0, fixed(20, 8));
        r.insert(1, 0, fixed(20, 8));
        r.step(0, 0, StreamOp::Alloc, 0, 100).unwrap();
        r.step(1, 0, StreamOp::Free, 0, 100).unwrap();
        between(&mut r);
        r.step(0, 0, StreamOp::Alloc, 0, 40).unwrap();
        r
    }

    #[test]
    fn a_refilled_block_is_as_far_as_the_pages_allocated_since_its_free() {
        // CPU 1 keeps at most 20 of the 100 pages it frees and drains the oldest. CPU 0's first
        // 104 allocations come from an empty buddy (no free seen: no distance); the 40 refilled
        // after CPU 1's drains were freed at most 100 allocated pages before, at least 100 - 20
        // - 8 (the ones CPU 1 kept are not drained): all in the first bucket, none counted as
        // list reuse.
        let r = handed_over(|_| {});
        let t: BTreeMap<_, _> = r.tallies().collect();
        let h = &t[&(0, 0)].reuse;
        assert_eq!(h.buckets.iter().sum::<u64>(), 0, "{h:?}");
        assert_eq!(h.total(), 140);
        assert_eq!(h.refilled_buckets[0], 36, "{h:?}");
        assert_eq!(h.refilled, 104);
        assert_eq!(h.refilled_total(), 140);
        // The same flow with 20,000 pages allocated on CPU 0 between the free and the reuse
        // (its own frees in between, reused from its list): the refilled blocks are that far.
        let r = handed_over(|r| {
            for _ in 0..20_000 {
                r.step(0, 0, StreamOp::Alloc, 0, 1).unwrap();
                r.step(0, 0, StreamOp::Free, 0, 1).unwrap();
            }
        });
        let t: BTreeMap<_, _> = r.tallies().collect();
        let h = &t[&(0, 0)].reuse;
        let far: u64 = h.refilled_buckets[super::bucket_of(&REUSE_BUCKET_PAGES, 20_000)..]
            .iter()
            .sum();
        assert!(far > 0 && h.refilled_buckets[0] == 0, "{h:?}");
    }

    fn fixed(high: u32, batch: u32) -> PcpState {
        PcpState::new(
            KernelVersion::new(6, 6),
            PcpLimits {
                batch_pages: batch,
                high: PcpHigh::Fixed { high_pages: high },
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_direct_free_leaves_the_lists_and_alloc_factor_as_they_were() {
        // 6.18, high 252 (fixed), batch 63. Two refills ramp alloc_factor to 2 (63, then 126
        // pages); the list is used up, 9 unmovable frees come, 127 movable allocations follow.
        let run = |free: StreamOp| {
            let st = PcpState::new(
                KernelVersion::new(6, 18),
                PcpLimits {
                    batch_pages: 63,
                    high: PcpHigh::AutoTuned {
                        high_min_pages: 252,
                        high_max_pages: 252,
                    },
                },
                None,
            )
            .unwrap();
            let mut r = StreamReplay::new();
            r.insert(0, 0, st);
            r.step(0, 0, StreamOp::Alloc, 0, 63 + 126).unwrap();
            r.step_mt(0, 0, free, 0, MigrateType::Unmovable, 9).unwrap();
            r.step(0, 0, StreamOp::Alloc, 0, 1).unwrap();
            let (_, t) = r.tallies().next().unwrap();
            (
                t.refills,
                t.refill_pages,
                t.bypassed,
                t.frees,
                t.final_count,
            )
        };
        // Freed to the lists: 9 halvings put alloc_factor back to 0 and the 9 pages count
        // against the refill (min(63 << 0, 252 - 9 - 63) = 63 pages).
        assert_eq!(run(StreamOp::Free), (3, 63 + 126 + 63, 0, 9, 9 + 62));
        // Past the lists (pcp_spin_trylock() failed): alloc_factor stays 2 and nothing counts
        // against the refill (min(63 << 2, 252 - 0 - 63) = 189 pages); 9 zone->lock visits.
        assert_eq!(run(StreamOp::FreeDirect), (3, 63 + 126 + 189, 9, 9, 188));
    }

    #[test]
    fn a_fixed_high_list_refills_by_batch_and_drains_above_high() {
        // 6.6, high 20, batch 8: 1000 order-0 allocations on CPU 0 refill 8 pages at a time
        // (125 refills); freeing them all on CPU 1 drains each time the count reaches high.
        let mut r = StreamReplay::new();
        r.insert(0, 0, fixed(20, 8));
        r.insert(1, 0, fixed(20, 8));
        r.step(0, 0, StreamOp::Alloc, 0, 1000).unwrap();
        r.step(1, 0, StreamOp::Free, 0, 1000).unwrap();
        let t: BTreeMap<_, _> = r.tallies().collect();
        let (a, f) = (t[&(0, 0)], t[&(1, 0)]);
        assert_eq!((a.refills, a.refill_pages, a.drains), (125, 1000, 0));
        assert_eq!(f.refills, 0);
        // Pages conserved: what stayed on CPU 1's list plus what it drained is what it freed.
        assert_eq!(u64::from(f.final_count) + f.drain_pages, 1000);
        assert!(f.drains > 0 && f.final_count < 20);
    }

    #[test]
    fn a_refill_takes_back_the_blocks_drained_last() {
        // CPU 0 allocates, CPU 1 frees and drains (6.6, high 20, batch 8). The first refills
        // find nothing drained; once CPU 1 has drained, CPU 0's refills take its newest
        // drained blocks (the buddy's free-list head), drained a few pages before.
        let r = handed_over(|_| {});
        let t: BTreeMap<_, _> = r.tallies().collect();
        let src = &t[&(0, 0)].refill_sources;
        assert_eq!(src.total(), t[&(0, 0)].refill_blocks);
        // 100 allocations from an empty buddy: 13 refills of 8, none drained before.
        assert_eq!(src.not_drained, 13 * 8);
        // Then 40 more: 4 left on the list, then 5 refills of 8 blocks, all of them blocks CPU 1
        // drained (it drained at least 80 of its 100), less than 256 pages before.
        assert_eq!(src.other_cpu, 40, "{src:?}");
        assert_eq!(src.buckets[0], src.other_cpu);
    }

    #[test]
    fn orders_off_the_lists_take_the_lock_each_time() {
        let mut r = StreamReplay::new();
        r.insert(0, 0, fixed(20, 8));
        r.step(0, 0, StreamOp::Alloc, 5, 3).unwrap();
        r.step(0, 0, StreamOp::Free, 5, 3).unwrap();
        let t = r.tallies().next().unwrap().1.clone();
        assert_eq!(
            (t.bypassed, t.refills, t.drains, t.alloc_pages),
            (6, 0, 0, 96)
        );
        assert!(r.step(3, 0, StreamOp::Alloc, 0, 1).is_err());
    }
}
