//! Lines of tracefs's `trace_pipe` (the kmem events) into flow lines: runs of allocations and
//! frees per CPU and task, refills (consecutive `mm_page_alloc_zone_locked ... percpu_refill=1`
//! on a CPU: one rmqueue_bulk() call) and drains (consecutive `mm_page_pcpu_drain`: one
//! free_pcppages_bulk() call).
//!
//! A line reads `<task>-<pid> [<cpu>] <flags> <seconds>: <event>: ... order=<n> ...`; the flags
//! column is absent on old kernels. `CPU:<n> [LOST <k> EVENTS]` lines count lost events.

use std::collections::BTreeMap;

use super::flow::{FlowLine, Op};

/// The kmem events a recording enables; the first four are required.
pub const EVENTS: [&str; 5] = [
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_pcpu_drain",
    "mm_page_alloc_zone_locked",
    "mm_page_free_batched",
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
    },
    /// A block taken under zone->lock; `refill` when for the per-CPU lists.
    ZoneLocked {
        /// CPU.
        cpu: u32,
        /// Order.
        order: u8,
        /// percpu_refill=1.
        refill: bool,
    },
    /// A block drained from a per-CPU list.
    Drain {
        /// CPU.
        cpu: u32,
        /// Order.
        order: u8,
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
    let order = || {
        field(fields, "order")?
            .parse::<u8>()
            .ok()
            .filter(|o| *o <= 10)
    };
    match event {
        "mm_page_alloc" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Alloc,
            order: order()?,
        }),
        "mm_page_free" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Free,
            order: order()?,
        }),
        // Order 0 always (mm/page_alloc.c free_unref_folios()); older kernels print no order.
        "mm_page_free_batched" => Some(TraceEvent::Page {
            cpu,
            pid,
            op: Op::Free,
            order: order().unwrap_or(0),
        }),
        "mm_page_pcpu_drain" => Some(TraceEvent::Drain {
            cpu,
            order: order()?,
        }),
        "mm_page_alloc_zone_locked" => Some(TraceEvent::ZoneLocked {
            cpu,
            order: order()?,
            refill: field(fields, "percpu_refill") == Some("1"),
        }),
        _ => None,
    }
}

/// What a CPU has open: a run, a refill or a drain.
#[derive(Debug, Clone, Copy)]
enum Open {
    Run(FlowLine),
    Refill(u64),
    Drain(u64),
}

/// Groups events into flow lines, per CPU, in each CPU's order.
#[derive(Debug, Default)]
pub struct Grouper {
    open: BTreeMap<u32, Open>,
    /// Only these CPUs (empty: all).
    keep: Vec<u32>,
    /// Lines skipped because they were no event of the recording.
    pub skipped: u64,
    /// Blocks taken under zone->lock not for the per-CPU lists (orders the lists do not hold,
    /// or a list bypassed).
    pub direct_zone_locked: u64,
}

impl Grouper {
    /// A grouper keeping the events of `cpus` (empty: every CPU).
    pub fn new(cpus: &[u32]) -> Self {
        Grouper {
            keep: cpus.to_vec(),
            ..Grouper::default()
        }
    }

    fn close(&mut self, cpu: u32, out: &mut Vec<FlowLine>) {
        match self.open.remove(&cpu) {
            Some(Open::Run(l)) => out.push(l),
            Some(Open::Refill(pages)) => out.push(FlowLine::Refill { cpu, pages }),
            Some(Open::Drain(pages)) => out.push(FlowLine::Drain { cpu, pages }),
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
        let cpu = match ev {
            TraceEvent::Page { cpu, .. }
            | TraceEvent::ZoneLocked { cpu, .. }
            | TraceEvent::Drain { cpu, .. }
            | TraceEvent::Lost { cpu, .. } => cpu,
        };
        if !self.keep.is_empty() && !self.keep.contains(&cpu) {
            return;
        }
        match ev {
            TraceEvent::Page { pid, op, order, .. } => {
                if let Some(Open::Run(FlowLine::Run {
                    pid: p,
                    op: o,
                    order: r,
                    count,
                    ..
                })) = self.open.get_mut(&cpu)
                {
                    if (*p, *o, *r) == (pid, op, order) {
                        *count += 1;
                        return;
                    }
                }
                self.close(cpu, out);
                self.open.insert(
                    cpu,
                    Open::Run(FlowLine::Run {
                        cpu,
                        pid,
                        op,
                        order,
                        count: 1,
                        repeat: 1,
                    }),
                );
            }
            TraceEvent::ZoneLocked { refill: false, .. } => self.direct_zone_locked += 1,
            TraceEvent::ZoneLocked { order, .. } => {
                if let Some(Open::Refill(p)) = self.open.get_mut(&cpu) {
                    *p += 1 << order;
                    return;
                }
                self.close(cpu, out);
                self.open.insert(cpu, Open::Refill(1 << order));
            }
            TraceEvent::Drain { order, .. } => {
                if let Some(Open::Drain(p)) = self.open.get_mut(&cpu) {
                    *p += 1 << order;
                    return;
                }
                self.close(cpu, out);
                self.open.insert(cpu, Open::Drain(1 << order));
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

    #[test]
    fn trace_lines_group_into_refills_runs_drains_and_losses() {
        let mut g = Grouper::new(&[]);
        let mut out = Vec::new();
        for l in LINES.lines() {
            g.feed(l, &mut out);
        }
        g.finish(&mut out);
        assert_eq!(
            out,
            vec![
                FlowLine::Refill { cpu: 0, pages: 16 },
                FlowLine::Run {
                    cpu: 1,
                    pid: 77,
                    op: Op::Free,
                    order: 3,
                    count: 1,
                    repeat: 1
                },
                FlowLine::Drain { cpu: 1, pages: 16 },
                FlowLine::Run {
                    cpu: 1,
                    pid: 9,
                    op: Op::Free,
                    order: 0,
                    count: 1,
                    repeat: 1
                },
                FlowLine::Lost { cpu: 1, events: 12 },
                FlowLine::Run {
                    cpu: 0,
                    pid: 4242,
                    op: Op::Alloc,
                    order: 3,
                    count: 2,
                    repeat: 1
                },
            ]
        );
        // The header comment and the sched_switch line are not kmem events of the recording.
        assert_eq!(g.skipped, 2);
    }

    #[test]
    fn other_cpus_are_dropped_when_asked() {
        let mut g = Grouper::new(&[1]);
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
