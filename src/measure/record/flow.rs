//! The flow file `pcpmodel record` writes: a recorded page flow, line by line, so a long
//! recording is written and read as a stream.
//!
//! ```text
//! # pcpmodel flow 5
//! meta {"kernel": "6.18.0", ...}            the recording: kernel, sysctls, events, command
//! pagesets_start {"0/Normal": {...}}       each zone's span, managed pages and per-CPU pageset
//! a CPU ZONE PID ORDER COUNT [xREPEAT] [mMT]  a run of COUNT allocations of ORDER by task PID
//! f CPU ZONE PID ORDER COUNT [xREPEAT] [mMT]  a run of frees (mm_page_free)
//! b CPU ZONE PID ORDER COUNT [xREPEAT] [mMT]  a run of direct frees: in interrupt context
//!                                          while the CPU's pcp lock was held, to the buddy
//!                                          allocator past the lists (format 4)
//! R CPU ZONE PAGES [mMT]                   a refill: rmqueue_bulk() took PAGES under zone->lock
//! D CPU ZONE PAGES [oOmM=N ...]           a drain: free_pcppages_bulk() gave PAGES back, N of
//!                                          them from the list of order O and migratetype M
//!                                          (mm_page_pcpu_drain prints both; format 5)
//! L CPU EVENTS                             the trace lost EVENTS events of that CPU
//! T MS                                     MS milliseconds of trace time since the first event
//! refill_sources {"1": {...}}             per refilling CPU: its refilled blocks by pages the
//!                                          zone drained since each was drained (optional)
//! pagesets_end {...}
//! end {"lines": ..., "cpus": {...}}        totals, checked against the lines when read
//! ```
//! `ZONE` is the zone's index among `pagesets_start`'s zones in their (sorted) order, found from
//! the event's pfn and the zones' spans; `-` when the event printed no pfn inside a span.
//! `xREPEAT` stands for the same run REPEAT times in a row on that CPU. `mMT` is the
//! migratetype as the kernel numbers it (0 unmovable, 1 movable, 2 reclaimable, ...): of the
//! allocation (mm_page_alloc prints it), of the refilled list, and of a freed page as the
//! recording last saw its page or pageblock allocated, refilled or drained (mm_page_free prints
//! none); absent when unknown (format 2 has none). Lines of one CPU are in
//! that CPU's order; lines of different CPUs interleave as the trace delivered them. A file
//! whose name ends in `.gz` is gzip-compressed (written so by `record -o X.gz`, read by any
//! reader: [`open_flow`]).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::kernel::ops::{MigrateType, MIGRATE_PCPTYPES, PAGEBLOCK_ORDER};

/// First line of every flow file.
pub const MAGIC: &str = "# pcpmodel flow 5";

/// The format before drains named their lists, still read (its `D` lines carry the pages only).
pub const MAGIC_4: &str = "# pcpmodel flow 4";

/// The format before direct frees, still read (its frees are all `f`, the direct ones among
/// them).
pub const MAGIC_3: &str = "# pcpmodel flow 3";

/// The format before migratetypes, still read (its lines carry no `mMT`).
pub const MAGIC_2: &str = "# pcpmodel flow 2";

/// Largest migratetype number a line may carry (`MIGRATE_TYPES - 1` with CMA and isolation).
pub const MAX_MIGRATETYPE: u8 = 5;

/// One CPU's pageset as /proc/zoneinfo prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagesetValues {
    /// Pages on the CPU's lists.
    pub count: i64,
    /// pcp->high (the live value on auto-tuning kernels).
    pub high: i64,
    /// pcp->batch.
    pub batch: i64,
    /// high_min (6.13+ prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_min: Option<i64>,
    /// high_max (6.13+ prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_max: Option<i64>,
}

/// One zone's pagesets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZonePagesets {
    /// Managed pages.
    pub managed: u64,
    /// First page frame of the zone's span (`start_pfn`), when /proc/zoneinfo printed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_pfn: Option<u64>,
    /// Pages the zone spans (`spanned`), when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spanned: Option<u64>,
    /// The low watermark without boost, pages (what `zone_highsize()` divides without a
    /// fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_wmark: Option<u64>,
    /// Per CPU (its number as a string, as JSON keys are).
    pub cpus: BTreeMap<String, PagesetValues>,
}

/// Zones by `node/Zone` (`0/Normal`).
pub type Pagesets = BTreeMap<String, ZonePagesets>;

/// Page frame ranges `[start, end)` by zone index: the zone index (a flow line's `ZONE`) of a
/// page frame is the position, in the pagesets' order, of the zone whose span holds it (zones do
/// not overlap).
#[derive(Debug, Clone, Default)]
pub struct ZoneSpans(Vec<(u64, u64, u8)>);

impl ZoneSpans {
    /// The spans of `pagesets`' zones.
    pub fn of(pagesets: &Pagesets) -> Self {
        ZoneSpans(
            pagesets
                .values()
                .enumerate()
                .filter_map(|(i, z)| match (z.start_pfn, z.spanned, u8::try_from(i)) {
                    (Some(s), Some(n), Ok(i)) if n > 0 => Some((s, s.saturating_add(n), i)),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The zone index of `pfn`.
    pub fn zone(&self, pfn: u64) -> Option<u8> {
        self.0
            .iter()
            .find(|&&(s, e, _)| pfn >= s && pfn < e)
            .map(|t| t.2)
    }
}

/// The pagesets of a parsed /proc/zoneinfo (populated zones only).
pub fn pagesets_of(z: &crate::kernel::zoneinfo::ZoneInfo) -> Pagesets {
    z.zones
        .iter()
        .filter(|zr| zr.managed_pages > 0)
        .map(|zr| {
            (
                format!("{}/{}", zr.node, zr.kind.name()),
                ZonePagesets {
                    managed: zr.managed_pages,
                    start_pfn: zr.start_pfn,
                    spanned: zr.spanned_pages,
                    low_wmark: Some(zr.low_pages.saturating_sub(zr.boost_pages)),
                    cpus: zr
                        .pagesets
                        .iter()
                        .map(|p| {
                            (
                                p.cpu.to_string(),
                                PagesetValues {
                                    count: p.count_pages,
                                    high: p.high_pages,
                                    batch: p.batch_pages,
                                    high_min: p.high_min_pages,
                                    high_max: p.high_max_pages,
                                },
                            )
                        })
                        .collect(),
                },
            )
        })
        .collect()
}

/// The recording's circumstances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMeta {
    /// `uname -r` of the recorded kernel.
    pub kernel: String,
    /// When the recording started (UTC date).
    pub date_utc: String,
    /// The command recorded (empty: the whole system for `seconds`).
    pub command: Vec<String>,
    /// CPUs whose events were kept (empty: every CPU).
    pub cpus: Vec<u32>,
    /// Sysctls that decide the flow, as read at the start (absent ones left out).
    pub sysctl: BTreeMap<String, i64>,
    /// The kmem events enabled.
    pub events: Vec<String>,
    /// Per-CPU trace buffer during the recording, KiB.
    pub buffer_size_kb: u64,
    /// Per CPU, the kernel's `per_cpu_data_slice_size`: the last-level cache over the CPUs
    /// sharing it, bytes (from sysfs; it decides PCPF_FREE_HIGH_BATCH on 6.7+).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data_slice_bytes: BTreeMap<String, u64>,
    /// What was drained before the start pagesets were read, so that the lists start as the
    /// recorded setting keeps them (`None`: nothing held more than its `high_max`, or the
    /// recording was made without settling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<String>,
    /// How every CPU's lists were emptied right before the start (`record --drain-first`),
    /// and what they held before and after (`None`: they start as they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<String>,
}

pub use crate::model::stream::{RefillSources, REFILL_SOURCE_PAGES};

/// Totals of one CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuTotals {
    /// Allocation events.
    pub allocs: u64,
    /// Base pages allocated.
    pub alloc_pages: u64,
    /// Free events.
    pub frees: u64,
    /// Base pages freed.
    pub free_pages: u64,
    /// Refill calls.
    pub refills: u64,
    /// Pages refilled.
    pub refill_pages: u64,
    /// Drain calls.
    pub drains: u64,
    /// Pages drained.
    pub drain_pages: u64,
    /// Events the trace lost.
    pub lost: u64,
}

/// The last line: totals, checked against the file's lines when it is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEnd {
    /// Seconds recorded.
    pub seconds: f64,
    /// Flow lines (a, f, R, D, L) in the file.
    pub lines: u64,
    /// Per CPU.
    pub cpus: BTreeMap<String, CpuTotals>,
    /// Sysctls of `meta.sysctl` that the recorded command changed (a `measure pcp
    /// --skb-defer-max 0` sets its own): the value read most often while recording (read
    /// every 20 ms). Empty when none changed, so `meta.sysctl` held throughout.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl_during: BTreeMap<String, i64>,
}

/// Allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    /// mm_page_alloc.
    Alloc,
    /// mm_page_free.
    Free,
    /// mm_page_free in interrupt context while the CPU's pcp lock was held: the page went to
    /// the buddy allocator (`pcp_spin_trylock()` failed), the lists untouched.
    FreeDirect,
}

/// One line of the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FlowLine {
    /// `count` events of `op` at `order` by task `pid` on `cpu`, `repeat` times in a row.
    Run {
        /// CPU.
        cpu: u32,
        /// Zone index (None: unknown).
        zone: Option<u8>,
        /// Task.
        pid: u32,
        /// Allocation or free.
        op: Op,
        /// Order.
        order: u8,
        /// Events in the run.
        count: u64,
        /// The same run this many times in a row (1: once).
        repeat: u64,
        /// Migratetype, the kernel's number (None: unknown).
        mt: Option<u8>,
    },
    /// A refill of `pages` on `cpu`.
    Refill {
        /// CPU.
        cpu: u32,
        /// Zone index (None: unknown).
        zone: Option<u8>,
        /// Base pages.
        pages: u64,
        /// Migratetype of the refilled list (None: unknown).
        mt: Option<u8>,
    },
    /// A drain of `pages` from `cpu`'s lists.
    Drain {
        /// CPU.
        cpu: u32,
        /// Zone index (None: unknown).
        zone: Option<u8>,
        /// Base pages.
        pages: u64,
        /// The pages by list (None: not recorded, before format 5, or a drained block whose
        /// migratetype the trace did not print).
        lists: Option<DrainedLists>,
    },
    /// `events` lost from `cpu`'s trace buffer.
    Lost {
        /// CPU.
        cpu: u32,
        /// Events.
        events: u64,
    },
    /// Trace time since the first event, ms (every [`TIME_MARK_MS`]).
    Time {
        /// Milliseconds.
        ms: u64,
    },
}

/// Orders a pageset keeps lists for: 0-3, and `pageblock_order` (THPs).
const LIST_ORDERS: [u8; 5] = [0, 1, 2, 3, PAGEBLOCK_ORDER];

/// Migratetypes with lists of their own (unmovable, movable, reclaimable).
const LIST_TYPES: u8 = MIGRATE_PCPTYPES as u8;
/// Fields of a `D` line at most: `D CPU ZONE PAGES` and one `oOmM=N` per list.
const MAX_DRAIN_FIELDS: usize = 4 + LIST_ORDERS.len() * LIST_TYPES as usize;

/// Base pages one drain took from each list (order, migratetype): what the trace's
/// mm_page_pcpu_drain lines show of which lists a free_pcppages_bulk() call emptied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DrainedLists([u32; LIST_ORDERS.len() * LIST_TYPES as usize]);

impl DrainedLists {
    /// The slot of the list of `order` a block of pageblock type `mt` sits on (highatomic and
    /// CMA blocks on the movable lists, as `MigrateType::from_kernel` maps them).
    fn slot(order: u8, mt: u8) -> Option<usize> {
        let o = LIST_ORDERS.iter().position(|&x| x == order)?;
        let m = MigrateType::from_kernel(mt).number();
        Some(o * LIST_TYPES as usize + usize::from(m))
    }

    /// One `oOmM=N` token of a `D` line: its slot and pages (None: not such a token, an order
    /// no list holds, a type without lists of its own, or no pages).
    fn parse_token(t: &str) -> Option<(usize, u32)> {
        let (o, rest) = t.strip_prefix('o')?.split_once('m')?;
        let (m, n) = rest.split_once('=')?;
        let (o, m, n) = (o.parse().ok()?, m.parse::<u8>().ok()?, n.parse().ok()?);
        if m >= LIST_TYPES || n == 0 {
            return None;
        }
        Some((Self::slot(o, m)?, n))
    }

    /// Adds a drained block of `order` from the list of `mt`; false for an order no list
    /// holds.
    pub fn add(&mut self, order: u8, mt: u8) -> bool {
        match Self::slot(order, mt) {
            Some(i) => {
                self.0[i] = self.0[i].saturating_add(1 << order);
                true
            }
            None => false,
        }
    }

    /// (order, migratetype, base pages) of every list the drain took pages from.
    pub fn iter(&self) -> impl Iterator<Item = (u8, u8, u32)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| {
                (
                    LIST_ORDERS[i / LIST_TYPES as usize],
                    (i % LIST_TYPES as usize) as u8,
                    n,
                )
            })
    }

    /// Base pages over every list.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|&n| u64::from(n)).sum()
    }
}

impl FlowLine {
    /// The CPU of the line (None: a time mark).
    pub fn cpu(&self) -> Option<u32> {
        match *self {
            FlowLine::Run { cpu, .. }
            | FlowLine::Refill { cpu, .. }
            | FlowLine::Drain { cpu, .. }
            | FlowLine::Lost { cpu, .. } => Some(cpu),
            FlowLine::Time { .. } => None,
        }
    }

    fn add_to(&self, t: &mut CpuTotals) {
        match *self {
            FlowLine::Run {
                op,
                order,
                count,
                repeat,
                ..
            } => {
                let (n, pages) = (count * repeat, (count * repeat) << order);
                match op {
                    Op::Alloc => {
                        t.allocs += n;
                        t.alloc_pages += pages;
                    }
                    Op::Free | Op::FreeDirect => {
                        t.frees += n;
                        t.free_pages += pages;
                    }
                }
            }
            FlowLine::Refill { pages, .. } => {
                t.refills += 1;
                t.refill_pages += pages;
            }
            FlowLine::Drain { pages, .. } => {
                t.drains += 1;
                t.drain_pages += pages;
            }
            FlowLine::Lost { events, .. } => t.lost += events,
            FlowLine::Time { .. } => {}
        }
    }

    fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        match *self {
            FlowLine::Run {
                cpu,
                zone,
                pid,
                op,
                order,
                count,
                repeat,
                mt,
            } => {
                let c = match op {
                    Op::Alloc => 'a',
                    Op::Free => 'f',
                    Op::FreeDirect => 'b',
                };
                let z = ZoneToken(zone);
                write!(w, "{c} {cpu} {z} {pid} {order} {count}")?;
                if repeat > 1 {
                    write!(w, " x{repeat}")?;
                }
                writeln!(w, "{}", MtToken(mt))
            }
            FlowLine::Refill {
                cpu,
                zone,
                pages,
                mt,
            } => {
                writeln!(w, "R {cpu} {} {pages}{}", ZoneToken(zone), MtToken(mt))
            }
            FlowLine::Drain {
                cpu,
                zone,
                pages,
                lists,
            } => {
                write!(w, "D {cpu} {} {pages}", ZoneToken(zone))?;
                for (o, m, n) in lists.iter().flat_map(|l| l.iter()) {
                    write!(w, " o{o}m{m}={n}")?;
                }
                writeln!(w)
            }
            FlowLine::Lost { cpu, events } => writeln!(w, "L {cpu} {events}"),
            FlowLine::Time { ms } => writeln!(w, "T {ms}"),
        }
    }
}

/// Trace time between two `T` lines, ms: a tenth of the vmstat interval, so a replay places
/// the ticks of `decay_pcp_high()` within 10 % of their interval.
pub const TIME_MARK_MS: u64 = 100;

/// A line's optional ` mMT` field (nothing when unknown).
struct MtToken(Option<u8>);

impl std::fmt::Display for MtToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(m) => write!(f, " m{m}"),
            None => Ok(()),
        }
    }
}

/// A line's `ZONE` field: the index, or `-`.
struct ZoneToken(Option<u8>);

impl std::fmt::Display for ZoneToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(z) => write!(f, "{z}"),
            None => f.write_str("-"),
        }
    }
}

/// Writes a flow file, compressing each CPU's repeated runs.
pub struct FlowWriter<W: Write> {
    out: W,
    label: String,
    /// Per CPU: the run held back while it repeats.
    held: BTreeMap<u32, FlowLine>,
    totals: BTreeMap<u32, CpuTotals>,
    lines: u64,
    refill_sources: BTreeMap<String, RefillSources>,
    sysctl_during: BTreeMap<String, i64>,
}

impl<W: Write> FlowWriter<W> {
    /// Starts the file: magic, meta, the pagesets at the start.
    pub fn new(mut out: W, label: &str, meta: &FlowMeta, start: &Pagesets) -> Result<Self> {
        let e = |x: std::io::Error| Error::io(label, x);
        writeln!(out, "{MAGIC}").map_err(e)?;
        writeln!(out, "meta {}", to_json(meta)).map_err(e)?;
        writeln!(out, "pagesets_start {}", to_json(start)).map_err(e)?;
        Ok(FlowWriter {
            out,
            label: label.to_string(),
            held: BTreeMap::new(),
            totals: BTreeMap::new(),
            lines: 0,
            refill_sources: BTreeMap::new(),
            sysctl_during: BTreeMap::new(),
        })
    }

    /// Sets the sysctls the recorded command changed, each at the value it held longest
    /// (written into the `end` line).
    pub fn set_sysctl_during(&mut self, changed: BTreeMap<String, i64>) {
        self.sysctl_during = changed;
    }

    fn emit(&mut self, l: FlowLine) -> Result<()> {
        if let Some(c) = l.cpu() {
            l.add_to(self.totals.entry(c).or_default());
        }
        self.lines += 1;
        l.write_to(&mut self.out)
            .map_err(|x| Error::io(&self.label, x))
    }

    fn flush_cpu(&mut self, cpu: u32) -> Result<()> {
        if let Some(h) = self.held.remove(&cpu) {
            self.emit(h)?;
        }
        Ok(())
    }

    /// Adds one line (a run with `repeat` 1, or a refill, drain or loss).
    pub fn push(&mut self, l: FlowLine) -> Result<()> {
        let Some(cpu) = l.cpu() else {
            return self.emit(l);
        };
        match l {
            FlowLine::Run {
                zone,
                pid,
                op,
                order,
                count,
                mt,
                ..
            } => {
                if let Some(FlowLine::Run {
                    zone: z,
                    pid: p,
                    op: o,
                    order: r,
                    count: c,
                    repeat,
                    mt: m,
                    ..
                }) = self.held.get_mut(&cpu)
                {
                    if (*z, *p, *o, *r, *c, *m) == (zone, pid, op, order, count, mt) {
                        *repeat += 1;
                        return Ok(());
                    }
                }
                self.flush_cpu(cpu)?;
                self.held.insert(cpu, l);
                Ok(())
            }
            _ => {
                self.flush_cpu(cpu)?;
                self.emit(l)
            }
        }
    }

    /// Sets where each CPU's refilled blocks came from (written before the end pagesets).
    pub fn set_refill_sources(&mut self, by_cpu: BTreeMap<u32, RefillSources>) {
        self.refill_sources = by_cpu
            .into_iter()
            .map(|(c, r)| (c.to_string(), r))
            .collect();
    }

    /// Ends the file: held runs, the pagesets at the end, the totals. Returns the totals and
    /// the output (flushed; a [`FlowOut`] still needs [`FlowOut::close`]).
    pub fn finish(mut self, end_pagesets: &Pagesets, seconds: f64) -> Result<(FlowEnd, W)> {
        let cpus: Vec<u32> = self.held.keys().copied().collect();
        for c in cpus {
            self.flush_cpu(c)?;
        }
        let end = FlowEnd {
            seconds,
            lines: self.lines,
            cpus: self
                .totals
                .iter()
                .map(|(c, t)| (c.to_string(), t.clone()))
                .collect(),
            sysctl_during: std::mem::take(&mut self.sysctl_during),
        };
        let e = |x: std::io::Error| Error::io(&self.label, x);
        if !self.refill_sources.is_empty() {
            writeln!(self.out, "refill_sources {}", to_json(&self.refill_sources)).map_err(e)?;
        }
        writeln!(self.out, "pagesets_end {}", to_json(end_pagesets)).map_err(e)?;
        writeln!(self.out, "end {}", to_json(&end)).map_err(e)?;
        self.out.flush().map_err(e)?;
        Ok((end, self.out))
    }
}

/// A flow file being written: text, or gzip when its name ends in `.gz`.
pub enum FlowOut {
    /// Plain text.
    Text(std::io::BufWriter<std::fs::File>),
    /// gzip.
    Gz(flate2::write::GzEncoder<std::io::BufWriter<std::fs::File>>),
}

impl FlowOut {
    /// Creates `path` (gzip when `gz`).
    pub fn create(path: &std::path::Path, gz: bool) -> Result<Self> {
        let f =
            std::fs::File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let b = std::io::BufWriter::new(f);
        Ok(if gz {
            FlowOut::Gz(flate2::write::GzEncoder::new(
                b,
                flate2::Compression::default(),
            ))
        } else {
            FlowOut::Text(b)
        })
    }

    /// Writes what is buffered and, for gzip, the trailer.
    pub fn close(self) -> std::io::Result<()> {
        let mut b = match self {
            FlowOut::Text(b) => b,
            FlowOut::Gz(g) => g.finish()?,
        };
        b.flush()
    }
}

impl Write for FlowOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            FlowOut::Text(b) => b.write(buf),
            FlowOut::Gz(g) => g.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            FlowOut::Text(b) => b.flush(),
            FlowOut::Gz(g) => g.flush(),
        }
    }
}

/// Opens a flow file for reading, gzip or text (told apart by the gzip magic, not the name),
/// and reads its header.
pub fn open_flow(path: &std::path::Path) -> Result<FlowReader<Box<dyn BufRead>>> {
    let label = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(&label, e))?;
    let mut b = std::io::BufReader::with_capacity(1 << 16, f);
    let gz = b
        .fill_buf()
        .map_err(|e| Error::io(&label, e))?
        .starts_with(&[0x1f, 0x8b]);
    let input: Box<dyn BufRead> = if gz {
        Box::new(std::io::BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(b),
        ))
    } else {
        Box::new(b)
    };
    FlowReader::open(input, &label)
}

/// A value as one line of JSON (every type written here serialises).
fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A flow file read as a stream: the header on open, then [`FlowReader::next_line`] until
/// `None`, after which [`FlowReader::end`] holds the checked totals.
pub struct FlowReader<R: BufRead> {
    input: R,
    label: String,
    line_no: usize,
    buf: String,
    /// The recording's circumstances.
    pub meta: FlowMeta,
    /// Pagesets at the start.
    pub start: Pagesets,
    /// Pagesets at the end (after the flow lines).
    pub end_pagesets: Option<Pagesets>,
    /// Where each CPU's refilled blocks came from (flows recorded since it was kept).
    pub refill_sources: Option<BTreeMap<String, RefillSources>>,
    /// The totals line, checked.
    pub end: Option<FlowEnd>,
    totals: BTreeMap<u32, CpuTotals>,
    lines: u64,
}

impl<R: BufRead> FlowReader<R> {
    /// A sysctl as the recorded flow ran under it: the value the recorded command held it at
    /// when it changed one (`end.sysctl_during`, known once the file is read to its end), else
    /// the value at the start (`meta.sysctl`).
    pub fn sysctl(&self, name: &str) -> Option<i64> {
        self.end
            .as_ref()
            .and_then(|e| e.sysctl_during.get(name))
            .or_else(|| self.meta.sysctl.get(name))
            .copied()
    }
}

fn keyed<'a>(label: &str, no: usize, line: &'a str, key: &str) -> Result<&'a str> {
    line.strip_prefix(key)
        .and_then(|r| r.strip_prefix(' '))
        .ok_or_else(|| {
            Error::parse(
                label,
                no,
                key,
                format!("expected the `{key} {{...}}` line, found '{}'", clip(line)),
            )
        })
}

fn clip(s: &str) -> String {
    s.chars().take(60).collect()
}

fn json_of<T: serde::de::DeserializeOwned>(
    label: &str,
    no: usize,
    key: &str,
    s: &str,
) -> Result<T> {
    serde_json::from_str(s).map_err(|e| Error::parse(label, no, key, e.to_string()))
}

/// The next line without its end of line, counting lines; `None` at the end of the file.
fn read_line(
    input: &mut impl BufRead,
    buf: &mut String,
    label: &str,
    line_no: &mut usize,
) -> Result<Option<String>> {
    buf.clear();
    if input.read_line(buf).map_err(|e| Error::io(label, e))? == 0 {
        return Ok(None);
    }
    *line_no += 1;
    Ok(Some(buf.trim_end_matches(['\n', '\r']).to_string()))
}

impl<R: BufRead> FlowReader<R> {
    /// Reads the header (magic, meta, pagesets_start).
    pub fn open(mut input: R, label: &str) -> Result<Self> {
        let (mut line_no, mut buf) = (0, String::new());
        let mut next = |what: &str| -> Result<String> {
            read_line(&mut input, &mut buf, label, &mut line_no)?.ok_or_else(|| {
                Error::parse(label, line_no + 1, what, "the file ends in its header")
            })
        };
        let first = next("header")?;
        if first == "# pcpmodel flow 1" {
            return Err(Error::parse(
                label,
                1,
                "header",
                "flow format 1 has no zone per line, which replay needs: record the flow again",
            ));
        }
        if first != MAGIC && first != MAGIC_4 && first != MAGIC_3 && first != MAGIC_2 {
            return Err(Error::parse(
                label,
                1,
                "header",
                format!(
                    "'{}' is not a pcpmodel flow file (first line must be '{MAGIC}')",
                    clip(&first)
                ),
            ));
        }
        let l = next("meta")?;
        let meta: FlowMeta = json_of(label, 2, "meta", keyed(label, 2, &l, "meta")?)?;
        crate::kernel::version::KernelVersion::parse_release(&meta.kernel)
            .map_err(|e| Error::parse(label, 2, "meta.kernel", e.to_string()))?;
        let l = next("pagesets_start")?;
        let start = json_of(
            label,
            3,
            "pagesets_start",
            keyed(label, 3, &l, "pagesets_start")?,
        )?;
        Ok(FlowReader {
            input,
            label: label.to_string(),
            line_no,
            buf,
            meta,
            start,
            end_pagesets: None,
            refill_sources: None,
            end: None,
            totals: BTreeMap::new(),
            lines: 0,
        })
    }

    /// The next flow line; `None` after the `end` line, whose totals must match the lines read.
    /// Reads into one buffer and allocates nothing per line.
    pub fn next_line(&mut self) -> Result<Option<FlowLine>> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            self.buf.clear();
            let n = self
                .input
                .read_line(&mut self.buf)
                .map_err(|e| Error::io(&self.label, e))?;
            if n == 0 {
                return Err(Error::parse(
                    &self.label,
                    self.line_no + 1,
                    "end",
                    "the file ends before its `end` line (truncated?)",
                ));
            }
            self.line_no += 1;
            let no = self.line_no;
            let l = self.buf.trim_end_matches(['\n', '\r']);
            if let Some(rest) = l.strip_prefix("pagesets_end ") {
                self.end_pagesets = Some(json_of(&self.label, no, "pagesets_end", rest)?);
                continue;
            }
            if let Some(rest) = l.strip_prefix("refill_sources ") {
                self.refill_sources = Some(json_of(&self.label, no, "refill_sources", rest)?);
                continue;
            }
            if let Some(rest) = l.strip_prefix("end ") {
                let end: FlowEnd = json_of(&self.label, no, "end", rest)?;
                self.check_end(&end, no)?;
                self.end = Some(end);
                return Ok(None);
            }
            let line = parse_line(&self.label, no, l, self.start.len())?;
            if let Some(c) = line.cpu() {
                line.add_to(self.totals.entry(c).or_default());
            }
            self.lines += 1;
            return Ok(Some(line));
        }
    }

    fn check_end(&self, end: &FlowEnd, no: usize) -> Result<()> {
        if self.end_pagesets.is_none() {
            return Err(Error::parse(
                &self.label,
                no,
                "pagesets_end",
                "no `pagesets_end` line before `end`",
            ));
        }
        if end.lines != self.lines {
            return Err(Error::parse(
                &self.label,
                no,
                "end.lines",
                format!(
                    "says {} flow lines, the file has {} (edited or cut?)",
                    end.lines, self.lines
                ),
            ));
        }
        let read: BTreeMap<String, CpuTotals> = self
            .totals
            .iter()
            .map(|(c, t)| (c.to_string(), t.clone()))
            .collect();
        if let Some((cpu, t)) = end.cpus.iter().find(|(c, t)| read.get(*c) != Some(t)) {
            return Err(Error::parse(
                &self.label,
                no,
                format!("end.cpus.{cpu}"),
                format!(
                    "totals {t:?} differ from the lines' {:?} (edited?)",
                    read.get(cpu)
                ),
            ));
        }
        if let Some(cpu) = read.keys().find(|c| !end.cpus.contains_key(*c)) {
            return Err(Error::parse(
                &self.label,
                no,
                format!("end.cpus.{cpu}"),
                "the lines have this CPU, the totals do not (edited?)",
            ));
        }
        Ok(())
    }
}

/// Parses one flow line of a file whose `pagesets_start` has `zones` zones.
pub fn parse_line(label: &str, no: usize, l: &str, zones: usize) -> Result<FlowLine> {
    let zones = zones.min(usize::from(u8::MAX)) as u8;
    // A run has at most 8 fields, a drain 4 and one per list; one more is kept to tell an
    // overlong line.
    let mut fields = [""; MAX_DRAIN_FIELDS + 1];
    let mut nf = 0;
    for t in l.split_ascii_whitespace() {
        if nf == fields.len() {
            nf += 1;
            break;
        }
        fields[nf] = t;
        nf += 1;
    }
    let f = &fields[..nf.min(fields.len())];
    let bad = |field: &str, msg: String| Error::parse(label, no, field, msg);
    let num = |i: usize, field: &str| -> Result<u64> {
        let s = f
            .get(i)
            .ok_or_else(|| bad(field, format!("missing in '{}'", clip(l))))?;
        s.parse::<u64>()
            .map_err(|_| bad(field, format!("'{s}' is not a whole number >= 0")))
    };
    let cpu = |i: usize| -> Result<u32> {
        let c = num(i, "cpu")?;
        if c >= crate::kernel::zoneinfo::MAX_NR_CPUS as u64 {
            return Err(bad("cpu", format!("{c} is above the kernel's CPU limit")));
        }
        Ok(c as u32)
    };
    let zone = |i: usize| -> Result<Option<u8>> {
        match f.get(i).copied() {
            Some("-") => Ok(None),
            Some(_) => {
                let z = num(i, "zone")?;
                if z >= u64::from(zones) {
                    return Err(bad(
                        "zone",
                        format!("{z} is no zone of pagesets_start ({zones} zones)"),
                    ));
                }
                Ok(Some(z as u8))
            }
            None => Err(bad("zone", format!("missing in '{}'", clip(l)))),
        }
    };
    let mt_of = |s: &str| -> Result<u8> {
        s.strip_prefix('m')
            .and_then(|m| m.parse::<u8>().ok())
            .filter(|m| *m <= MAX_MIGRATETYPE)
            .ok_or_else(|| {
                bad(
                    "migratetype",
                    format!("'{s}' is not mN with N in 0..={MAX_MIGRATETYPE}"),
                )
            })
    };
    let exact = |n: usize| -> Result<()> {
        if f.len() != n {
            return Err(bad(
                "line",
                format!("'{}' has {} fields, expected {n}", clip(l), f.len()),
            ));
        }
        Ok(())
    };
    match f.first().copied() {
        Some(k @ ("a" | "f" | "b")) => {
            if !(6..=8).contains(&f.len()) {
                exact(6)?;
            }
            let zone = zone(2)?;
            let pid = num(3, "pid")?;
            let order = num(4, "order")?;
            if order > 10 {
                return Err(bad(
                    "order",
                    format!("{order} is above the largest order, 10"),
                ));
            }
            let count = num(5, "count")?;
            if count == 0 {
                return Err(bad("count", "a run has at least one event".into()));
            }
            // The optional fields: xREPEAT, then mMT.
            let (repeat, mt) = match (f.get(6), f.get(7)) {
                (None, _) => (1, None),
                (Some(s), None) if s.starts_with('m') => (1, Some(mt_of(s)?)),
                (Some(s), m) => {
                    let r = s
                        .strip_prefix('x')
                        .and_then(|r| r.parse::<u64>().ok())
                        .filter(|r| *r >= 1)
                        .ok_or_else(|| bad("repeat", format!("'{s}' is not xN with N >= 1")))?;
                    (r, m.map(|m| mt_of(m)).transpose()?)
                }
            };
            Ok(FlowLine::Run {
                cpu: cpu(1)?,
                zone,
                pid: u32::try_from(pid).map_err(|_| bad("pid", format!("{pid} is not a pid")))?,
                op: match k {
                    "a" => Op::Alloc,
                    "f" => Op::Free,
                    _ => Op::FreeDirect,
                },
                order: order as u8,
                count,
                repeat,
                mt,
            })
        }
        Some(k @ ("R" | "D")) => {
            if !((k == "R" && f.len() == 5) || (k == "D" && f.len() > 4)) {
                exact(4)?;
            }
            let (cpu, zone, pages) = (cpu(1)?, zone(2)?, num(3, "pages")?);
            Ok(if k == "R" {
                let mt = f.get(4).map(|m| mt_of(m)).transpose()?;
                FlowLine::Refill {
                    cpu,
                    zone,
                    pages,
                    mt,
                }
            } else {
                if f.len() > MAX_DRAIN_FIELDS {
                    return Err(bad(
                        "drained list",
                        format!("more than {} lists in '{}'", MAX_DRAIN_FIELDS - 4, clip(l)),
                    ));
                }
                let lists = if f.len() > 4 {
                    let mut d = DrainedLists::default();
                    for t in &f[4..] {
                        match DrainedLists::parse_token(t) {
                            Some((i, n)) if d.0[i] == 0 => d.0[i] = n,
                            _ => {
                                return Err(bad(
                                    "drained list",
                                    format!(
                                        "'{t}' is not oOmM=N (O one of 0, 1, 2, 3, 9; M 0-2; N > 0 pages; each list once)"
                                    ),
                                ))
                            }
                        }
                    }
                    if d.total() != pages {
                        return Err(bad(
                            "drained list",
                            format!(
                                "the lists' pages add up to {}, not the drain's {pages}",
                                d.total()
                            ),
                        ));
                    }
                    Some(d)
                } else {
                    None
                };
                FlowLine::Drain {
                    cpu,
                    zone,
                    pages,
                    lists,
                }
            })
        }
        Some("T") => {
            exact(2)?;
            Ok(FlowLine::Time { ms: num(1, "ms")? })
        }
        Some("L") => {
            exact(3)?;
            Ok(FlowLine::Lost {
                cpu: cpu(1)?,
                events: num(2, "events")?,
            })
        }
        _ => Err(bad(
            "line",
            format!(
                "'{}' is not a flow line (a, f, R, D, L, T, pagesets_end, end)",
                clip(l)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> FlowMeta {
        FlowMeta {
            kernel: "6.18.0".into(),
            date_utc: "2026-12-06".into(),
            command: vec![],
            cpus: vec![],
            sysctl: BTreeMap::new(),
            events: vec!["mm_page_alloc".into()],
            buffer_size_kb: 1024,
            data_slice_bytes: BTreeMap::new(),
            settled: None,
            drained: None,
        }
    }

    fn run(cpu: u32, op: Op, order: u8, count: u64) -> FlowLine {
        FlowLine::Run {
            cpu,
            zone: Some(0),
            pid: 7,
            op,
            order,
            count,
            repeat: 1,
            mt: None,
        }
    }

    fn written(lines: &[FlowLine]) -> String {
        let mut out = Vec::new();
        let one_zone: Pagesets = [(
            "0/Normal".to_string(),
            ZonePagesets {
                managed: 1 << 20,
                start_pfn: Some(0x10_0000),
                spanned: Some(1 << 20),
                low_wmark: Some(1024),
                cpus: BTreeMap::new(),
            },
        )]
        .into_iter()
        .collect();
        let w = FlowWriter::new(&mut out, "t", &meta(), &one_zone).unwrap();
        let mut w = w;
        for l in lines {
            w.push(*l).unwrap();
        }
        w.finish(&Pagesets::new(), 1.0).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn repeated_runs_are_compressed_and_read_back_with_the_same_totals() {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(run(0, Op::Alloc, 3, 8));
        }
        v.push(FlowLine::Refill {
            cpu: 0,
            zone: None,
            pages: 56,
            mt: Some(1),
        });
        v.push(run(1, Op::Free, 3, 8));
        v.push(FlowLine::Drain {
            cpu: 1,
            zone: Some(0),
            pages: 64,
            lists: None,
        });
        let text = written(&v);
        assert!(text.contains("a 0 0 7 3 8 x5\n"), "{text}");
        assert!(text.contains("R 0 - 56 m1\n"), "{text}");
        let mut r = FlowReader::open(text.as_bytes(), "t").unwrap();
        let mut n = 0;
        while let Some(_l) = r.next_line().unwrap() {
            n += 1;
        }
        assert_eq!(n, 4);
        let t = &r.end.unwrap().cpus["0"];
        assert_eq!((t.allocs, t.alloc_pages, t.refill_pages), (40, 320, 56));
    }

    #[test]
    fn direct_frees_are_b_lines_counted_as_frees_and_format_3_still_reads() {
        let text = written(&[
            run(0, Op::Alloc, 0, 3),
            run(0, Op::FreeDirect, 0, 2),
            run(0, Op::Free, 0, 1),
        ]);
        assert!(
            text.starts_with(MAGIC) && text.contains("\nb 0 0 7 0 2\n"),
            "{text}"
        );
        let ops = |t: &str| {
            let mut r = FlowReader::open(t.as_bytes(), "t").unwrap();
            let mut v = Vec::new();
            while let Some(l) = r.next_line().unwrap() {
                if let FlowLine::Run { op, count, .. } = l {
                    v.push((op, count));
                }
            }
            (v, r.end.unwrap().cpus["0"].frees)
        };
        assert_eq!(
            ops(&text),
            (vec![(Op::Alloc, 3), (Op::FreeDirect, 2), (Op::Free, 1)], 3)
        );
        // A format-3 file has no b lines and reads as before.
        let three = text.replacen(MAGIC, MAGIC_3, 1).replace("\nb ", "\nf ");
        assert_eq!(ops(&three).1, 3);
    }

    #[test]
    fn a_cut_or_edited_file_is_an_error_with_its_line() {
        let text = written(&[run(0, Op::Alloc, 0, 3), run(0, Op::Free, 0, 3)]);
        let read_all = |t: &str| -> Result<()> {
            let mut r = FlowReader::open(t.as_bytes(), "flow")?;
            while r.next_line()?.is_some() {}
            Ok(())
        };
        read_all(&text).unwrap();
        let cut: String = text.lines().take(4).map(|l| format!("{l}\n")).collect();
        let e = read_all(&cut).unwrap_err().to_string();
        assert!(e.contains("flow:5") && e.contains("truncated"), "{e}");
        let edited = text.replace("f 0 0 7 0 3", "f 0 0 7 0 4");
        let e = read_all(&edited).unwrap_err().to_string();
        assert!(e.contains("end.cpus.0"), "{e}");
        let bad = text.replace("f 0 0 7 0 3", "f 0 0 7 11 3");
        let e = read_all(&bad).unwrap_err().to_string();
        assert!(e.contains("flow:5") && e.contains("order"), "{e}");
        let bad = text.replace("f 0 0 7 0 3", "f 0 1 7 0 3");
        let e = read_all(&bad).unwrap_err().to_string();
        assert!(e.contains("flow:5") && e.contains("zone"), "{e}");
        let e = read_all("hello\n").unwrap_err().to_string();
        assert!(e.contains("flow:1"), "{e}");
        let bad = text.replace("f 0 0 7 0 3", "f 0 0 7 0 3 m9");
        let e = read_all(&bad).unwrap_err().to_string();
        assert!(e.contains("flow:5") && e.contains("migratetype"), "{e}");
    }

    #[test]
    fn drains_name_their_lists_and_format_4_drains_still_read() {
        let mut d = DrainedLists::default();
        for _ in 0..40 {
            assert!(d.add(0, 1));
        }
        // An order-3 unmovable block; a THP (order 9); a highatomic block (type 4) is on the
        // movable list; order 5 is on no list.
        assert!(d.add(3, 0) && d.add(9, 1) && d.add(0, 4));
        assert!(!d.add(5, 1));
        let drain = FlowLine::Drain {
            cpu: 0,
            zone: Some(0),
            pages: 561,
            lists: Some(d),
        };
        let text = written(&[run(0, Op::Free, 0, 600), drain]);
        assert!(
            text.contains("\nD 0 0 561 o0m1=41 o3m0=8 o9m1=512\n"),
            "{text}"
        );
        let lines = |t: &str| -> Result<Vec<FlowLine>> {
            let mut r = FlowReader::open(t.as_bytes(), "flow")?;
            let mut v = Vec::new();
            while let Some(l) = r.next_line()? {
                v.push(l);
            }
            Ok(v)
        };
        assert_eq!(lines(&text).unwrap()[1], drain);
        let four = text
            .replacen(MAGIC, MAGIC_4, 1)
            .replace(" o0m1=41 o3m0=8 o9m1=512", "");
        assert!(matches!(
            lines(&four).unwrap()[1],
            FlowLine::Drain { lists: None, .. }
        ));
        for (bad, why) in [
            ("o0m1=40 o3m0=8 o9m1=512", "add up to 560"),
            ("o0m1=41 o3m0=8 o9m3=512", "oOmM=N"),
            ("o0m1=41 o4m0=8 o9m1=512", "oOmM=N"),
            ("o0m1=41 o0m1=8 o9m1=512", "each list once"),
            ("o0m1=41 o3m0=x o9m1=512", "oOmM=N"),
        ] {
            let t = text.replace("o0m1=41 o3m0=8 o9m1=512", bad);
            let e = lines(&t).unwrap_err().to_string();
            assert!(e.contains("drained list") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_drain_from_many_lists_reads_whole() {
        // One free_pcppages_bulk() can take every list in turn: a drain of 217 pages from six
        // lists (a page-fault loop's, as recorded) keeps all six.
        let l = "D 1 0 217 o0m1=109 o2m0=8 o2m1=8 o2m2=4 o3m0=56 o3m1=32";
        match parse_line("x", 1, l, 1).unwrap() {
            FlowLine::Drain {
                pages,
                lists: Some(d),
                ..
            } => {
                assert_eq!(pages, 217);
                assert_eq!(d.total(), 217);
                assert_eq!(d.iter().count(), 6);
            }
            other => panic!("{other:?}"),
        }
        // Every list once is the most a drain can name.
        let all: Vec<String> = LIST_ORDERS
            .iter()
            .flat_map(|o| (0..LIST_TYPES).map(move |m| format!("o{o}m{m}={}", 1u32 << o)))
            .collect();
        let total: u32 = LIST_ORDERS.iter().map(|o| 3 * (1u32 << o)).sum();
        let every = format!("D 0 0 {total} {}", all.join(" "));
        assert!(parse_line("x", 1, &every, 1).is_ok(), "{every}");
        let e = parse_line("x", 1, &format!("{every} o0m0=1"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 15 lists"), "{e}");
    }

    #[test]
    fn refill_sources_are_written_before_the_end_and_read_back() {
        let mut out = Vec::new();
        let mut w = FlowWriter::new(&mut out, "t", &meta(), &Pagesets::new()).unwrap();
        w.push(FlowLine::Time { ms: 100 }).unwrap();
        let mut src = RefillSources::default();
        src.add(Some(10), true);
        src.add(Some(5000), false);
        src.add(None, false);
        w.set_refill_sources([(0, src.clone())].into_iter().collect());
        w.finish(&Pagesets::new(), 1.0).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut r = FlowReader::open(text.as_bytes(), "t").unwrap();
        while r.next_line().unwrap().is_some() {}
        assert_eq!(r.refill_sources.unwrap()["0"], src);
        assert_eq!(src.buckets, [1, 0, 0, 1, 0]);
        assert!((src.share_within(256) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn migratetypes_ride_on_runs_and_refills_and_format_2_still_reads() {
        let typed = |mt| FlowLine::Run {
            cpu: 0,
            zone: Some(0),
            pid: 7,
            op: Op::Alloc,
            order: 0,
            count: 2,
            repeat: 1,
            mt,
        };
        // Runs of different types are not merged; repeats of one type are.
        let text = written(&[typed(Some(0)), typed(Some(0)), typed(Some(1)), typed(None)]);
        assert!(
            text.contains("a 0 0 7 0 2 x2 m0\na 0 0 7 0 2 m1\na 0 0 7 0 2\n"),
            "{text}"
        );
        let mut r = FlowReader::open(text.as_bytes(), "t").unwrap();
        let mut mts = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            if let FlowLine::Run { mt, repeat, .. } = l {
                mts.push((mt, repeat));
            }
        }
        assert_eq!(mts, vec![(Some(0), 2), (Some(1), 1), (None, 1)]);
        // A format-2 file (no migratetypes) reads as before.
        let two = text
            .replacen(MAGIC, MAGIC_2, 1)
            .replace(" m0", "")
            .replace(" m1", "");
        let mut r = FlowReader::open(two.as_bytes(), "t").unwrap();
        while r.next_line().unwrap().is_some() {}
        assert_eq!(r.end.unwrap().cpus["0"].allocs, 8);
    }
}
