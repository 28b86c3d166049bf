//! Lines of tracefs's `trace_pipe` (the kmem events) into flow lines: runs of allocations and
//! frees per CPU and task, refills (consecutive `mm_page_alloc_zone_locked ... percpu_refill=1`
//! on a CPU: one rmqueue_bulk() call) and drains (consecutive `mm_page_pcpu_drain`: one
//! free_pcppages_bulk() call).
//!
//! A line reads `<task>-<pid> [<cpu>] <flags> <seconds>: <event>: ... order=<n> ...`; the flags
//! column is absent on old kernels. `CPU:<n> [LOST <k> EVENTS]` lines count lost events.
//!
//! A free in interrupt context (the flags' third character `s`, `h`, `H`, `z` or `Z`) that
//! interrupts a task holding the CPU's pcp lock cannot take it: `pcp_spin_trylock()` fails and
//! the page goes to the buddy allocator (`free_one_page()`), past the lists and without halving
//! `alloc_factor`. The task holds the lock from a refill's `mm_page_alloc_zone_locked ...
//! percpu_refill=1` to its `mm_page_alloc`, around a drain's `mm_page_pcpu_drain` (an interrupt
//! held off by zone->lock's disabled interrupts arrives as the zone is unlocked, inside the pcp
//! lock) and through `free_unref_folios()`' `mm_page_free_batched` loop; such a free is a
//! direct free (`b` in the flow).

use std::collections::{BTreeMap, HashMap};

use super::flow::{DrainedLists, FlowLine, Op, RefillSources, ZoneSpans, TIME_MARK_MS};

/// The kmem events a recording enables, all required. `mm_page_free_batched` is not among them:
/// a batched free emits `mm_page_free` too (free_pages_prepare() traces every free; the
/// batched event follows in free_unref_folios()), so counting both counts those frees twice.
pub const EVENTS: [&str; 4] = [
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_pcpu_drain",
    "mm_page_alloc_zone_locked",
];

/// Events a recording enables when the kernel has them and reads only as markers:
/// `mm_page_free_batched` shows a task inside `free_unref_folios()`' pcp-locked loop.
pub const MARKER_EVENTS: [&str; 1] = ["mm_page_free_batched"];

/// One parsed trace line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEvent {
    /// An allocation or free of `order` by `pid` on `cpu`.
    Page {
        /// CPU.
        cpu: u32,
        /// Task.
        pid: u32,
        /// Allocation or free.
        op: Op,
        /// Order.
        order: u8,
        /// Page frame, when printed.
        pfn: Option<u64>,
        /// Migratetype, when printed (allocations).
        mt: Option<u8>,
        /// In interrupt context (hardirq, softirq or NMI), by the flags column.
        irq: bool,
    },
    /// A page of a `free_unref_folios()` batch put on the lists (`mm_page_free_batched`): a
    /// marker of the task holding the pcp lock, not counted (its `mm_page_free` was).
    FreeBatched {
        /// CPU.
        cpu: u32,
        /// In interrupt context.
        irq: bool,
    },
    /// A block taken under zone->lock; `refill` when for the per-CPU lists.
    ZoneLocked {
        /// CPU.
        cpu: u32,
        /// Order.
        order: u8,
        /// Page frame, when printed.
        pfn: Option<u64>,
        /// percpu_refill=1.
        refill: bool,
        /// Migratetype of the request, when printed.
        mt: Option<u8>,
        /// In interrupt context.
        irq: bool,
    },
    /// A block drained from a per-CPU list.
    Drain {
        /// CPU.
        cpu: u32,
        /// Order.
        order: u8,
        /// Page frame, when printed.
        pfn: Option<u64>,
        /// Migratetype of the block's pageblock, when printed.
        mt: Option<u8>,
        /// In interrupt context.
        irq: bool,
    },
    /// Events lost from a CPU's buffer.
    Lost {
        /// CPU.
        cpu: u32,
        /// Events.
        events: u64,
    },
}

fn field<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    rest.split_ascii_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// Parses one line; `None` for a line that is no kmem event of the recording (headers,
/// comments, other events).
pub fn parse_trace_line(line: &str) -> Option<TraceEvent> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("CPU:") {
        // CPU:1 [LOST 1234 EVENTS]
        let (cpu, rest) = rest.split_once(' ')?;
        let n = rest.strip_prefix("[LOST ")?.split_once(' ')?.0;
        return Some(TraceEvent::Lost {
            cpu: cpu.parse().ok()?,
            events: n.parse().ok()?,
        });
    }
    if t.starts_with('#') {
        return None;
    }
    let open = t.find(" [")?;
    let close = open + t[open..].find(']')?;
    let pid = t[..open].rsplit_once('-')?.1.trim().parse::<u32>().ok()?;
    let cpu = t[open + 2..close].trim().parse::<u32>().ok()?;
    let after = &t[close + 1..];
    // "<flags> <seconds>: <event>: <fields>"
    let (head, fields) = after.split_once(": ")?;
    let irq = in_interrupt(head);
    let (event, fields) = fields.split_once(": ").unwrap_or((fields, ""));
    let event = event.trim();
    let pfn =
        field(fields, "pfn").and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
    let order = || {
        field(fields, "order")?
            .parse::<u8>()
            .ok()
            .filter(|o| *o <= 10)
    };
    let mt = field(fields, "migratetype")
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|m| *m <= super::flow::MAX_MIGRATETYPE);
    match event {
        "mm_page_alloc" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Alloc,
            order: order()?,
            pfn,
            mt,
            irq,
        }),
        "mm_page_free" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Free,
            order: order()?,
            pfn,
            mt: None,
            irq,
        }),
        "mm_page_free_batched" => Some(TraceEvent::FreeBatched { cpu, irq }),
        "mm_page_pcpu_drain" => Some(TraceEvent::Drain {
            cpu,
            order: order()?,
            pfn,
            mt,
            irq,
        }),
        "mm_page_alloc_zone_locked" => Some(TraceEvent::ZoneLocked {
            cpu,
            order: order()?,
            pfn,
            refill: field(fields, "percpu_refill") == Some("1"),
            mt,
            irq,
        }),
        _ => None,
    }
}

/// Whether the flags column before the time (`<flags> <seconds>`) says interrupt context: its
/// third character is `h`/`H` (hardirq), `s` (softirq) or `z`/`Z` (NMI). Without a flags
/// column (old kernels) nothing is in interrupt context.
fn in_interrupt(head: &str) -> bool {
    let mut tokens = head.split_ascii_whitespace();
    match (tokens.next(), tokens.next()) {
        (Some(flags), Some(_seconds)) => {
            matches!(
                flags.as_bytes().get(2),
                Some(b's' | b'h' | b'H' | b'z' | b'Z')
            )
        }
        _ => false,
    }
}

/// The trace time of an event line, seconds (the token before the event name).
fn trace_seconds(line: &str) -> Option<f64> {
    let close = line.find("] ")?;
    let (head, _) = line[close + 2..].split_once(": ")?;
    head.split_ascii_whitespace().last()?.parse::<f64>().ok()
}

/// What a CPU has open: a run, a refill (zone, pages, migratetype) or a drain.
#[derive(Debug, Clone, Copy)]
enum Open {
    Run(FlowLine),
    Refill(Option<u8>, u64, Option<u8>),
    Drain(Option<u8>, u64, Option<DrainedLists>),
}

/// `pageblock_order` on x86-64: a pageblock is 512 pages, and the kernel frees a page to the
/// list of its pageblock's migratetype.
const PAGEBLOCK_SHIFT: u32 = 9;

/// Allocated pages whose type is kept to name the list their free goes to, at most: beyond it
/// (a recording of a machine filling its page cache) frees fall back on their pageblock's type.
/// 4M entries take about 100 MB.
const MAX_TRACKED_PAGES: usize = 4 << 20;

/// The migratetype a free goes to, as the trace shows it: mm_page_free prints none, and the
/// kernel takes the pageblock's (`get_pfnblock_migratetype()`). Known best from a drain of the
/// same pageblock (mm_page_pcpu_drain prints the pageblock's type), then from the page's own
/// allocation (the type asked for, which is the block's unless the allocation fell back to
/// another type's block), then from any allocation or refill in its pageblock.
#[derive(Debug, Default)]
struct FreeTypes {
    /// Pageblock -> type, from drains.
    block_drained: HashMap<u64, u8>,
    /// Page frame -> type asked for, from allocations not yet freed.
    page_allocated: HashMap<u64, u8>,
    /// Pageblock -> type asked for, from allocations and refills.
    block_allocated: HashMap<u64, u8>,
}

impl FreeTypes {
    fn allocated(&mut self, pfn: u64, mt: u8) {
        if self.page_allocated.len() < MAX_TRACKED_PAGES {
            self.page_allocated.insert(pfn, mt);
        }
        self.block_allocated.insert(pfn >> PAGEBLOCK_SHIFT, mt);
    }

    fn freed(&mut self, pfn: u64) -> Option<u8> {
        let own = self.page_allocated.remove(&pfn);
        let block = pfn >> PAGEBLOCK_SHIFT;
        self.block_drained
            .get(&block)
            .copied()
            .or(own)
            .or_else(|| self.block_allocated.get(&block).copied())
    }
}

/// Groups events into flow lines, per CPU, in each CPU's order.
#[derive(Debug, Default)]
pub struct Grouper {
    open: BTreeMap<u32, Open>,
    /// Only these CPUs (empty: all).
    keep: Vec<u32>,
    /// The zones' page frame spans.
    spans: ZoneSpans,
    /// Trace time of the first event, s.
    t0: Option<f64>,
    /// The next time mark, ms.
    next_mark_ms: u64,
    /// Lines skipped because they were no event of the recording.
    pub skipped: u64,
    /// Blocks taken under zone->lock not for the per-CPU lists (orders the lists do not hold,
    /// or a list bypassed).
    pub direct_zone_locked: u64,
    /// What names a freed page's list.
    types: FreeTypes,
    /// Frees whose migratetype the recording could not tell.
    pub frees_untyped: u64,
    /// Per CPU: whether the task its interrupts interrupt holds the pcp lock, by its last kmem
    /// event in task context (see the module's notes).
    pcp_locked: BTreeMap<u32, bool>,
    /// Frees in interrupt context while the CPU's pcp lock was held: to the buddy allocator.
    pub frees_direct: u64,
    /// Drained blocks not yet refilled: page frame -> (the zone's drained pages before it,
    /// the CPU that drained it).
    drained_at: HashMap<u64, (u64, u32)>,
    /// Pages drained so far, per zone.
    drained_pages: BTreeMap<Option<u8>, u64>,
    /// Per refilling CPU, where its refilled blocks came from.
    pub refill_sources: BTreeMap<u32, RefillSources>,
}

impl Grouper {
    /// A grouper keeping the events of `cpus` (empty: every CPU), placing pages in the zones
    /// of `spans`.
    pub fn new(cpus: &[u32], spans: ZoneSpans) -> Self {
        Grouper {
            keep: cpus.to_vec(),
            spans,
            next_mark_ms: TIME_MARK_MS,
            ..Grouper::default()
        }
    }

    fn close(&mut self, cpu: u32, out: &mut Vec<FlowLine>) {
        match self.open.remove(&cpu) {
            Some(Open::Run(l)) => out.push(l),
            Some(Open::Refill(zone, pages, mt)) => out.push(FlowLine::Refill {
                cpu,
                zone,
                pages,
                mt,
            }),
            Some(Open::Drain(zone, pages, lists)) => out.push(FlowLine::Drain {
                cpu,
                zone,
                pages,
                lists,
            }),
            None => {}
        }
    }

    /// Feeds one trace line; completed flow lines are appended to `out`.
    pub fn feed(&mut self, line: &str, out: &mut Vec<FlowLine>) {
        let Some(ev) = parse_trace_line(line) else {
            if !line.trim().is_empty() {
                self.skipped += 1;
            }
            return;
        };
        if let Some(ts) = trace_seconds(line) {
            let t0 = *self.t0.get_or_insert(ts);
            let ms = ((ts - t0) * 1e3).max(0.0) as u64;
            while ms >= self.next_mark_ms {
                out.push(FlowLine::Time {
                    ms: self.next_mark_ms,
                });
                self.next_mark_ms += TIME_MARK_MS;
            }
        }
        let cpu = match ev {
            TraceEvent::Page { cpu, .. }
            | TraceEvent::FreeBatched { cpu, .. }
            | TraceEvent::ZoneLocked { cpu, .. }
            | TraceEvent::Drain { cpu, .. }
            | TraceEvent::Lost { cpu, .. } => cpu,
        };
        if !self.keep.is_empty() && !self.keep.contains(&cpu) {
            return;
        }
        // What the task (not an interrupt) was doing last: inside the pcp lock or not.
        let task_locked = match ev {
            TraceEvent::Page { irq: false, .. } => Some(false),
            TraceEvent::ZoneLocked {
                irq: false, refill, ..
            } => Some(refill),
            TraceEvent::Drain { irq: false, .. } | TraceEvent::FreeBatched { irq: false, .. } => {
                Some(true)
            }
            _ => None,
        };
        let locked_before = self.pcp_locked.get(&cpu).copied().unwrap_or(false);
        if let Some(l) = task_locked {
            self.pcp_locked.insert(cpu, l);
        }
        let zone_of = |pfn: Option<u64>| pfn.and_then(|p| self.spans.zone(p));
        match ev {
            TraceEvent::FreeBatched { .. } => {}
            TraceEvent::Page {
                pid,
                op,
                order,
                pfn,
                mt,
                irq,
                ..
            } => {
                let zone = zone_of(pfn);
                let direct = op == Op::Free && irq && locked_before;
                let mt = match (op, pfn) {
                    (Op::Alloc, Some(p)) => {
                        if let Some(m) = mt {
                            self.types.allocated(p, m);
                        }
                        mt
                    }
                    (Op::Free, Some(p)) => self.types.freed(p),
                    _ => mt,
                };
                if op == Op::Free && mt.is_none() {
                    self.frees_untyped += 1;
                }
                let op = if direct {
                    self.frees_direct += 1;
                    Op::FreeDirect
                } else {
                    op
                };
                if let Some(Open::Run(FlowLine::Run {
                    zone: z,
                    pid: p,
                    op: o,
                    order: r,
                    count,
                    mt: m,
                    ..
                })) = self.open.get_mut(&cpu)
                {
                    if (*z, *p, *o, *r, *m) == (zone, pid, op, order, mt) {
                        *count += 1;
                        return;
                    }
                }
                self.close(cpu, out);
                self.open.insert(
                    cpu,
                    Open::Run(FlowLine::Run {
                        cpu,
                        zone,
                        pid,
                        op,
                        order,
                        count: 1,
                        repeat: 1,
                        mt,
                    }),
                );
            }
            TraceEvent::ZoneLocked { refill: false, .. } => self.direct_zone_locked += 1,
            TraceEvent::ZoneLocked { order, pfn, mt, .. } => {
                let zone = zone_of(pfn);
                if let (Some(p), Some(m)) = (pfn, mt) {
                    self.types.block_allocated.insert(p >> PAGEBLOCK_SHIFT, m);
                }
                if let Some(p) = pfn {
                    let now = self.drained_pages.get(&zone).copied().unwrap_or(0);
                    let seen = self.drained_at.remove(&p);
                    self.refill_sources.entry(cpu).or_default().add(
                        seen.map(|(at, _)| now.saturating_sub(at)),
                        seen.is_some_and(|(_, c)| c != cpu),
                    );
                }
                if let Some(Open::Refill(z, p, m)) = self.open.get_mut(&cpu) {
                    if *z == zone && *m == mt {
                        *p += 1 << order;
                        return;
                    }
                }
                self.close(cpu, out);
                self.open.insert(cpu, Open::Refill(zone, 1 << order, mt));
            }
            TraceEvent::Drain { order, pfn, mt, .. } => {
                if let (Some(p), Some(m)) = (pfn, mt) {
                    self.types.block_drained.insert(p >> PAGEBLOCK_SHIFT, m);
                }
                // One free_pcppages_bulk() call drains one zone's pageset.
                let zone = zone_of(pfn);
                let n = self.drained_pages.entry(zone).or_default();
                if let Some(p) = pfn {
                    if self.drained_at.len() < MAX_TRACKED_PAGES {
                        self.drained_at.insert(p, (*n, cpu));
                    }
                }
                *n += 1 << order;
                // The block's list, when the trace names its type (an order no list holds,
                // or no type: the drain's lists are not known).
                let add = |l: &mut Option<DrainedLists>| {
                    if let Some(d) = l {
                        if !mt.is_some_and(|m| d.add(order, m)) {
                            *l = None;
                        }
                    }
                };
                if let Some(Open::Drain(z, p, l)) = self.open.get_mut(&cpu) {
                    if *z == zone {
                        *p += 1 << order;
                        add(l);
                        return;
                    }
                }
                self.close(cpu, out);
                let mut l = Some(DrainedLists::default());
                add(&mut l);
                self.open.insert(cpu, Open::Drain(zone, 1 << order, l));
            }
            TraceEvent::Lost { events, .. } => {
                self.close(cpu, out);
                out.push(FlowLine::Lost { cpu, events });
            }
        }
    }

    /// Closes every CPU's open run, refill or drain.
    pub fn finish(&mut self, out: &mut Vec<FlowLine>) {
        let cpus: Vec<u32> = self.open.keys().copied().collect();
        for c in cpus {
            self.close(c, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = "\
# tracer: nop
          udp-4242    [000] ..... 12345.000001: mm_page_alloc_zone_locked: page=000000001 pfn=0x1000 order=3 migratetype=0 percpu_refill=1
          udp-4242    [000] ..... 12345.000002: mm_page_alloc_zone_locked: page=000000002 pfn=0x1008 order=3 migratetype=0 percpu_refill=1
          udp-4242    [000] ..... 12345.000003: mm_page_alloc: page=000000003 pfn=0x1000 order=3 migratetype=0 gfp_flags=GFP_KERNEL|__GFP_COMP
          udp-4242    [000] ..... 12345.000004: mm_page_alloc: page=000000004 pfn=0x1008 order=3 migratetype=0 gfp_flags=GFP_KERNEL|__GFP_COMP
     recv-a-b-77  [001] d..1. 12345.000005: mm_page_free: page=000000003 pfn=0x1000 order=3
     recv-a-b-77  [001] d..1. 12345.000006: mm_page_pcpu_drain: page=000000003 pfn=0x1000 order=3 migratetype=0
     recv-a-b-77  [001] d..1. 12345.000007: mm_page_pcpu_drain: page=000000004 pfn=0x1008 order=3 migratetype=0
       kworker-9    [001] 12345.000008: mm_page_free_batched: page=000000005 pfn=0x2000
CPU:1 [LOST 12 EVENTS]
          udp-4242    [000] ..... 12345.000009: sched_switch: prev_comm=udp
";

    /// Two zones: pfns 0x1000.. in zone 0, 0x2000.. in zone 1.
    fn spans() -> ZoneSpans {
        let zone = |start: u64| crate::measure::record::flow::ZonePagesets {
            managed: 4096,
            start_pfn: Some(start),
            spanned: Some(0x1000),
            low_wmark: None,
            cpus: Default::default(),
        };
        let p = [
            ("0/DMA32".to_string(), zone(0x1000)),
            ("0/Normal".to_string(), zone(0x2000)),
        ];
        ZoneSpans::of(&p.into_iter().collect())
    }

    #[test]
    fn trace_lines_group_into_refills_runs_drains_and_losses() {
        let mut g = Grouper::new(&[], spans());
        let mut out = Vec::new();
        for l in LINES.lines() {
            g.feed(l, &mut out);
        }
        g.finish(&mut out);
        assert_eq!(
            out,
            vec![
                FlowLine::Refill {
                    cpu: 0,
                    zone: Some(0),
                    pages: 16,
                    mt: Some(0)
                },
                FlowLine::Run {
                    cpu: 1,
                    zone: Some(0),
                    pid: 77,
                    op: Op::Free,
                    order: 3,
                    count: 1,
                    repeat: 1,
                    mt: Some(0)
                },
                FlowLine::Drain {
                    cpu: 1,
                    zone: Some(0),
                    pages: 16,
                    // Two order-3 blocks of unmovable pageblocks: the unmovable order-3 list.
                    lists: Some({
                        let mut d = DrainedLists::default();
                        assert!(d.add(3, 0) && d.add(3, 0));
                        d
                    })
                },
                FlowLine::Lost { cpu: 1, events: 12 },
                FlowLine::Run {
                    cpu: 0,
                    zone: Some(0),
                    pid: 4242,
                    op: Op::Alloc,
                    order: 3,
                    count: 2,
                    repeat: 1,
                    mt: Some(0)
                },
            ]
        );
        // The header comment and the sched_switch line are not events of the recording; the
        // batched free is a marker only (its page was traced by mm_page_free as well).
        assert_eq!(g.skipped, 2);
        // Trace time: the events span 8 us, under the first 100-ms mark.
        assert!(!out.iter().any(|l| matches!(l, FlowLine::Time { .. })));
        let mut late = Vec::new();
        g.feed(
            "          udp-4242    [000] ..... 12345.250001: mm_page_free: page=0 pfn=0x1000 order=0",
            &mut late,
        );
        assert_eq!(
            &late[..2],
            &[FlowLine::Time { ms: 100 }, FlowLine::Time { ms: 200 }]
        );
        // The two first refilled blocks had not been drained in the trace; CPU 1 drained both
        // later. A refill of 0x1008 on CPU 0 takes back a block CPU 1 drained 8 pages before
        // the last drain (16 pages drained in all, 0x1008 after the first 8).
        assert_eq!(g.refill_sources[&0].not_drained, 2);
        g.feed(
            "          udp-4242    [000] ..... 12345.250002: mm_page_alloc_zone_locked: page=0 pfn=0x1008 order=3 migratetype=0 percpu_refill=1",
            &mut late,
        );
        let s = &g.refill_sources[&0];
        assert_eq!((s.buckets[0], s.other_cpu, s.total()), (1, 1, 3));
    }

    /// A softirq free (flags `..s1.`) on CPU 0 after the task's last kmem event `task_line`.
    fn softirq_free_after(task_line: &str) -> Vec<FlowLine> {
        let mut g = Grouper::new(&[], spans());
        let mut out = Vec::new();
        g.feed(task_line, &mut out);
        g.feed(
            "          task-5      [000] ..s1. 12345.000009: mm_page_free: page=0 pfn=0x1100 order=0",
            &mut out,
        );
        g.finish(&mut out);
        out
    }

    /// The op of the last free run: the interrupt's free (a task's free before it is a run of
    /// its own unless the two merged, which they do only when both went to the lists).
    fn free_op(out: &[FlowLine]) -> Option<Op> {
        out.iter().rev().find_map(|l| match l {
            FlowLine::Run { op, .. } if matches!(op, Op::Free | Op::FreeDirect) => Some(*op),
            _ => None,
        })
    }

    #[test]
    fn an_interrupt_free_inside_the_pcp_lock_goes_past_the_lists() {
        // The task holds its pcp lock between a refill and its allocation, around a drain and
        // through a batched free's loop: pcp_spin_trylock() fails in the interrupt.
        for locked in [
            "          task-5      [000] ..... 12345.000001: mm_page_alloc_zone_locked: page=0 pfn=0x1200 order=0 migratetype=1 percpu_refill=1",
            "          task-5      [000] d..1. 12345.000001: mm_page_pcpu_drain: page=0 pfn=0x1200 order=0 migratetype=1",
            "          task-5      [000] ..... 12345.000001: mm_page_free_batched: page=0 pfn=0x1200",
        ] {
            assert_eq!(free_op(&softirq_free_after(locked)), Some(Op::FreeDirect), "{locked}");
        }
        // After an allocation (traced once the lock is dropped), a free or a zone->lock
        // allocation that is no refill, the lock is free: the interrupt's free goes to the lists.
        for free in [
            "          task-5      [000] ..... 12345.000001: mm_page_alloc: page=0 pfn=0x1200 order=0 migratetype=1 gfp_flags=GFP_KERNEL",
            "          task-5      [000] ..... 12345.000001: mm_page_free: page=0 pfn=0x1200 order=0",
            "          task-5      [000] ..... 12345.000001: mm_page_alloc_zone_locked: page=0 pfn=0x1200 order=4 migratetype=1 percpu_refill=0",
        ] {
            assert_eq!(free_op(&softirq_free_after(free)), Some(Op::Free), "{free}");
        }
        // A free in task context after a refill is the task's own, to the lists.
        let mut g = Grouper::new(&[], spans());
        let mut out = Vec::new();
        g.feed("          task-5      [000] ..... 12345.000001: mm_page_alloc_zone_locked: page=0 pfn=0x1200 order=0 migratetype=1 percpu_refill=1", &mut out);
        g.feed("          task-5      [000] ..... 12345.000002: mm_page_free: page=0 pfn=0x1100 order=0", &mut out);
        g.finish(&mut out);
        assert_eq!(free_op(&out), Some(Op::Free));
        assert_eq!(g.frees_direct, 0);
        // Old kernels print no flags column: nothing is in interrupt context.
        assert!(!in_interrupt(" 12345.000001"));
        assert!(in_interrupt(" ..s3. 12345.000001"));
        assert!(in_interrupt(" d.h1. 12345.000001"));
        assert!(!in_interrupt(" d..1. 12345.000001"));
    }

    #[test]
    fn other_cpus_are_dropped_when_asked() {
        let mut g = Grouper::new(&[1], spans());
        let mut out = Vec::new();
        for l in LINES.lines() {
            g.feed(l, &mut out);
        }
        g.finish(&mut out);
        assert!(out.iter().all(|l| !matches!(
            l,
            FlowLine::Refill { cpu: 0, .. } | FlowLine::Run { cpu: 0, .. }
        )));
    }
}
