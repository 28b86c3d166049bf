//! Lines of tracefs's `trace_pipe` (the kmem events) into flow lines: runs of allocations and
//! frees per CPU and task, refills (consecutive `mm_page_alloc_zone_locked ... percpu_refill=1`
//! on a CPU: one rmqueue_bulk() call) and drains (consecutive `mm_page_pcpu_drain`: one
//! free_pcppages_bulk() call).
//!
//! A line reads `<task>-<pid> [<cpu>] <flags> <seconds>: <event>: ... order=<n> ...`; the flags
//! column is absent on old kernels. `CPU:<n> [LOST <k> EVENTS]` lines count lost events.

use std::collections::{BTreeMap, HashMap};

use super::flow::{FlowLine, Op, RefillSources, ZoneSpans, TIME_MARK_MS};

/// The kmem events a recording enables, all required. `mm_page_free_batched` is not among them:
/// a batched free emits `mm_page_free` too (free_pages_prepare() traces every free; the
/// batched event follows in free_unref_folios()), so counting both counts those frees twice.
pub const EVENTS: [&str; 4] = [
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_pcpu_drain",
    "mm_page_alloc_zone_locked",
];

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
    let (_, fields) = after.split_once(": ")?;
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
        }),
        "mm_page_free" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Free,
            order: order()?,
            pfn,
            mt: None,
        }),
        "mm_page_pcpu_drain" => Some(TraceEvent::Drain {
            cpu,
            order: order()?,
            pfn,
            mt,
        }),
        "mm_page_alloc_zone_locked" => Some(TraceEvent::ZoneLocked {
            cpu,
            order: order()?,
            pfn,
            refill: field(fields, "percpu_refill") == Some("1"),
            mt,
        }),
        _ => None,
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
    Drain(Option<u8>, u64),
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
            Some(Open::Drain(zone, pages)) => out.push(FlowLine::Drain { cpu, zone, pages }),
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
            | TraceEvent::ZoneLocked { cpu, .. }
            | TraceEvent::Drain { cpu, .. }
            | TraceEvent::Lost { cpu, .. } => cpu,
        };
        if !self.keep.is_empty() && !self.keep.contains(&cpu) {
            return;
        }
        let zone_of = |pfn: Option<u64>| pfn.and_then(|p| self.spans.zone(p));
        match ev {
            TraceEvent::Page {
                pid,
                op,
                order,
                pfn,
                mt,
                ..
            } => {
                let zone = zone_of(pfn);
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
                if let Some(Open::Drain(z, p)) = self.open.get_mut(&cpu) {
                    if *z == zone {
                        *p += 1 << order;
                        return;
                    }
                }
                self.close(cpu, out);
                self.open.insert(cpu, Open::Drain(zone, 1 << order));
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
                    pages: 16
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
        // The header comment, the batched free (its page was traced by mm_page_free as well) and
        // the sched_switch line are not events of the recording.
        assert_eq!(g.skipped, 3);
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
