//! A recorded flow ([`crate::measure::record`]) replayed through the kernel's PCP rules
//! ([`crate::model::stream`]) at the recorded setting or another: what pcp->high, pcp->batch,
//! `CONFIG_PCP_BATCH_SCALE_MAX` or another kernel's rules would have done to the same stream of
//! allocations and frees.
//!
//! Every CPU's events go to its pageset of the page's zone. The pagesets start as recorded:
//! their count and live `pcp->high`, clamped into the replayed bounds. /proc/zoneinfo does not
//! say which lists hold the count; the recording does ([`start_lists`]): a list is empty when
//! the kernel refills it, and a drain before that names the lists it took blocks from (format
//! 5). The rest of the count is on lists the flow does not allocate from (a page-fault loop's
//! trace shows its CPU's list empty at every refill while the count stays thousands of pages
//! above it), where it takes room under `pcp->high` until a drain reaches it. At another
//! setting the lists start settled there, and the stream also runs from empty lists
//! ([`replay_file_from`]). The vmstat tick runs at every whole second of trace time. The file
//! is read as a stream, never whole.
//!
//! What the replay is compared with: the recorded refills (`rmqueue_bulk()` calls) and drains
//! (`free_pcppages_bulk()` calls), the drains that came on a free of order 1-3 (a drain line
//! whose CPU's previous run freed such pages: where `free_high` can fire), and the pagesets at
//! the end. `free_high` itself, the decay's drains and the reuse distances (the pages a CPU
//! allocated between a block's free and its reuse: whether its lines can still be in the
//! caches) are not in the tracepoints' counts: those rows have the replay's value only.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::ops::{pcpf_free_high_batch, MigrateType, PcpState};
use crate::kernel::pageset::{
    zone_set_pageset_high_and_batch, PagesetInputs, PagesetTunables, PcpHigh, PcpLimits,
};
use crate::kernel::version::KernelVersion;
use crate::measure::record::flow::{open_flow, FlowLine, FlowReader, Op, PagesetValues, Pagesets};
use crate::model::stream::{RefillSources, StreamOp, StreamReplay, StreamTally};

/// The sysctl a flow's setting is read from.
pub const FRACTION_SYSCTL: &str = "vm.percpu_pagelist_high_fraction";

/// What to change for the replay (None: as recorded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ReplaySettings {
    /// `pcp->high` of every pageset (on 6.7+ both `high_min` and `high_max`), pages.
    pub high: Option<u32>,
    /// `vm.percpu_pagelist_high_fraction` (0 or >= 8).
    pub fraction: Option<u32>,
    /// `pcp->batch`, pages.
    pub batch: Option<u32>,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` (0-6; 6.7+).
    pub scale_max: Option<u8>,
    /// The kernel whose rules run (None: the recorded kernel's).
    pub kernel: Option<KernelVersion>,
}

impl ReplaySettings {
    /// Whether anything differs from the recording.
    pub fn changes_anything(&self) -> bool {
        self.high.is_some()
            || self.fraction.is_some()
            || self.batch.is_some()
            || self.scale_max.is_some()
            || self.kernel.is_some()
    }
}

/// One compared quantity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantity {
    /// What it is.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// The recorded flow's value (None: the tracepoints do not show it).
    pub recorded: Option<f64>,
    /// The replay's value.
    pub replayed: f64,
}

impl Quantity {
    /// (replayed - recorded) / recorded, %, where recorded is known and not 0.
    pub fn diff_pct(&self) -> Option<f64> {
        self.recorded
            .filter(|r| *r != 0.0)
            .map(|r| (self.replayed - r) / r * 100.0)
    }
}

/// One pageset's replay beside its recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PagesetReplay {
    /// CPU.
    pub cpu: u32,
    /// Zone (`node/Zone`).
    pub zone: String,
    /// The limits the replay ran, in words.
    pub limits: String,
    /// Recorded allocations, refills and drains of this pageset.
    pub recorded: RecordedCounts,
    /// The replay's tally.
    pub replayed: StreamTally,
    /// Mean pages held in the replay.
    pub replayed_mean_held: f64,
}

/// What the trace recorded for one pageset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecordedCounts {
    /// Allocations.
    pub allocs: u64,
    /// Frees.
    pub frees: u64,
    /// Refill calls.
    pub refills: u64,
    /// Pages refilled.
    pub refill_pages: u64,
    /// Drain calls.
    pub drains: u64,
    /// Pages drained.
    pub drain_pages: u64,
    /// Drains on a free of order 1-3.
    pub drains_on_high_order_free: u64,
}

impl RecordedCounts {
    /// Adds another pageset's counts.
    pub fn merge(&mut self, o: &RecordedCounts) {
        self.allocs += o.allocs;
        self.frees += o.frees;
        self.refills += o.refills;
        self.refill_pages += o.refill_pages;
        self.drains += o.drains;
        self.drain_pages += o.drain_pages;
        self.drains_on_high_order_free += o.drains_on_high_order_free;
    }
}

/// A replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replay {
    /// The flow file.
    pub flow: String,
    /// Kernel recorded.
    pub recorded_kernel: String,
    /// Kernel whose rules ran.
    pub kernel: KernelVersion,
    /// `vm.percpu_pagelist_high_fraction` at the recording.
    pub recorded_fraction: i64,
    /// The recorded setting, in words.
    pub recorded_setting: String,
    /// The replayed setting, in words.
    pub setting: String,
    /// `vm.percpu_pagelist_high_fraction` the replay ran at (the recorded one unless set).
    pub fraction: i64,
    /// Seconds recorded.
    pub seconds: f64,
    /// Quantities over every replayed pageset.
    pub quantities: Vec<Quantity>,
    /// Per pageset with events.
    pub pagesets: Vec<PagesetReplay>,
    /// What to keep in mind.
    pub notes: Vec<String>,
}

impl Replay {
    /// The quantity called `name`.
    pub fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.quantities.iter().find(|q| q.name == name)
    }
}

fn limits_words(l: &PcpLimits) -> String {
    match l.high {
        PcpHigh::Fixed { high_pages } => format!("high {high_pages}, batch {}", l.batch_pages),
        PcpHigh::AutoTuned {
            high_min_pages,
            high_max_pages,
        } => format!(
            "high_min {high_min_pages}, high_max {high_max_pages}, batch {}",
            l.batch_pages
        ),
    }
}

fn recorded_limits(
    label: &str,
    zone: &str,
    cpu: &str,
    p: &PagesetValues,
    k: KernelVersion,
) -> Result<PcpLimits> {
    let u = |v: i64, f: &str| {
        u32::try_from(v).map_err(|_| {
            Error::invalid(
                label,
                format!("pagesets_start.{zone}.cpus.{cpu}.{f}"),
                format!("{v} is no page count"),
            )
        })
    };
    let batch = u(p.batch, "batch")?.max(1);
    let high = if k.era().auto_tunes_high() {
        match (p.high_min, p.high_max) {
            (Some(lo), Some(hi)) => PcpHigh::AutoTuned {
                high_min_pages: u(lo, "high_min")?,
                high_max_pages: u(hi, "high_max")?,
            },
            _ => {
                return Err(Error::invalid(
                    label,
                    format!("pagesets_start.{zone}.cpus.{cpu}.high_min"),
                    format!(
                        "kernel {k} auto-tunes pcp->high, but the pageset has no high_min/high_max"
                    ),
                ))
            }
        }
    } else {
        PcpHigh::Fixed {
            high_pages: u(p.high, "high")?,
        }
    };
    Ok(PcpLimits {
        batch_pages: batch,
        high,
    })
}

/// The limits of `zone`'s pagesets under `s` on kernel `k`: the kernel's formulas from the
/// zone's geometry when the fraction or the kernel changes, then `high` and `batch` set.
fn replayed_limits(
    label: &str,
    zone: &str,
    z: &crate::measure::record::flow::ZonePagesets,
    recorded: PcpLimits,
    s: &ReplaySettings,
    k: KernelVersion,
    (cpus_on_node, online): (u32, u32),
) -> Result<PcpLimits> {
    let mut l = recorded;
    if s.fraction.is_some() || s.kernel.is_some() {
        let fraction = s.fraction.unwrap_or(0);
        let low = match (fraction, z.low_wmark) {
            (0, None) => {
                return Err(Error::invalid(
                    label,
                    format!("pagesets_start.{zone}.low_wmark"),
                    "missing: the default pcp->high is the low watermark over the CPUs",
                ))
            }
            (_, w) => w.unwrap_or(0),
        };
        l = zone_set_pageset_high_and_batch(
            PagesetInputs {
                managed_pages: z.managed,
                low_wmark_pages: low,
                cpus_on_node,
                online_cpus: online,
            },
            PagesetTunables {
                percpu_pagelist_high_fraction: if k.has_percpu_pagelist_high_fraction() {
                    fraction
                } else {
                    0
                },
                percpu_pagelist_fraction: if k.has_percpu_pagelist_high_fraction() {
                    0
                } else {
                    fraction
                },
            },
            k,
        )?;
    }
    if let Some(h) = s.high {
        l.high = if k.era().auto_tunes_high() {
            PcpHigh::AutoTuned {
                high_min_pages: h,
                high_max_pages: h,
            }
        } else {
            PcpHigh::Fixed { high_pages: h }
        };
    }
    if let Some(b) = s.batch {
        if b == 0 {
            return Err(Error::invalid("replay", "batch", "must be at least 1 page"));
        }
        l.batch_pages = b;
    }
    Ok(l)
}

/// `decay_pcp_high()` calls a replay at another setting makes at most to settle a pageset (as
/// `record`'s `vm.stat_refresh` writes; each drains at most `batch << scale` pages).
const SETTLE_TICKS: u32 = 4096;

/// Replays the flow file at `path` (text or gzip), its pagesets starting as recorded.
pub fn replay_file(path: &std::path::Path, s: &ReplaySettings) -> Result<Replay> {
    replay_file_from(path, s, None)
}

/// The pagesets a replay starts from when not the recorded ones: the machine's lists as another
/// snapshot shows them (`/proc/zoneinfo` now, or another recording's start), with where they
/// came from. Only each pageset's count and live `pcp->high` are taken; the limits are the
/// replayed setting's.
#[derive(Debug, Clone)]
pub struct StartOverride {
    /// The snapshot's pagesets.
    pub pagesets: Pagesets,
    /// Where they came from, for the notes.
    pub source: String,
}

impl StartOverride {
    /// The pagesets of a `/proc/zoneinfo` copy.
    pub fn from_zoneinfo(path: &std::path::Path) -> Result<StartOverride> {
        let z = crate::kernel::zoneinfo::read_zoneinfo(path)?;
        Ok(StartOverride {
            pagesets: crate::measure::record::flow::pagesets_of(&z),
            source: path.display().to_string(),
        })
    }

    /// The start pagesets of another flow file.
    pub fn from_flow(path: &std::path::Path) -> Result<StartOverride> {
        Ok(StartOverride {
            pagesets: open_flow(path)?.start.clone(),
            source: format!("{}'s start", path.display()),
        })
    }
}

/// Replays the flow file at `path`, its pagesets starting from `from` when given.
///
/// At another setting without `from`, the stream is also replayed from empty lists (as a
/// `drain_all_pages()` leaves them), in parallel: near a workload's own region a list either
/// holds a whole cycle of it or drains and refills every cycle, and which one the kernel runs
/// depends on what the lists held when the setting took effect (the Zen 4 VM's page-fault loop
/// at 4,586 pages ran 0.016 and 1.67 refills per 1000 allocations in two recordings of the same
/// protocol). Where the two starts disagree, the replay says so and adds the empty start's
/// refills and drains as rows.
pub fn replay_file_from(
    path: &std::path::Path,
    s: &ReplaySettings,
    from: Option<&StartOverride>,
) -> Result<Replay> {
    let start = flow_facts(open_flow(path)?)?;
    let label = path.display().to_string();
    let head = open_flow(path)?;
    // A recording that started from drained lists (`record --drain-first`) has a known start,
    // and a recording at another setting starts there too: no second start to show.
    let empty = match from {
        None if s.changes_anything() && head.meta.drained.is_none() => {
            let mut pagesets = head.start.clone();
            let mut held = 0;
            for z in pagesets.values_mut() {
                for p in z.cpus.values_mut() {
                    held += p.count.max(0);
                    p.count = 0;
                }
            }
            (held > 0).then_some(StartOverride {
                pagesets,
                source: "empty lists".into(),
            })
        }
        _ => None,
    };
    let Some(empty) = empty else {
        return replay(open_flow(path)?, &label, s, &start, from);
    };
    let (main, alt) = std::thread::scope(|sc| {
        let alt =
            sc.spawn(|| open_flow(path).and_then(|r| replay(r, &label, s, &start, Some(&empty))));
        let main = open_flow(path).and_then(|r| replay(r, &label, s, &start, None));
        (
            main,
            alt.join()
                .unwrap_or_else(|_| Err(Error::Unsupported("the replay thread panicked".into()))),
        )
    });
    let (mut main, alt) = (main?, alt?);
    let mut differ = Vec::new();
    for (calls, rate) in [
        ("refills", "refills per 1000 allocations"),
        ("drains", "drains per 1000 allocations"),
    ] {
        let (Some(a), Some(b)) = (main.quantity(calls), alt.quantity(calls)) else {
            continue;
        };
        let (a, b) = (a.replayed, b.replayed);
        // Ten calls and a tenth apart: beyond a replay's own granularity.
        if (a - b).abs() >= 10.0 && (a - b).abs() > 0.1 * a.max(b) {
            differ.push(format!("{b:.0} {calls} against {a:.0}"));
        }
        if let Some(q) = alt.quantity(rate) {
            main.quantities.push(Quantity {
                name: format!("{rate}, from empty lists"),
                unit: q.unit.clone(),
                recorded: None,
                replayed: q.replayed,
            });
        }
    }
    if !differ.is_empty() {
        main.notes.push(format!(
            "The start matters at this setting: from empty lists (as after drain_all_pages()) the same stream makes {} from the settled lists. What the kernel does depends on what its lists hold when the setting takes effect; the rows 'from empty lists' give the other end.",
            differ.join(" and ")
        ));
    }
    Ok(main)
}

/// Blocks of each (order, migratetype) on each (CPU, zone) pageset's lists at the start of a
/// recording, as the recording itself shows them: a list is empty when the kernel refills it,
/// so the blocks it held at the start are the allocations, less the frees, plus the blocks
/// drained from it (format 5 names each drain's lists) before its first refill; a list never
/// refilled held at least the largest such deficit.
pub type StartLists = BTreeMap<(u32, u8), BTreeMap<(u8, MigrateType), u64>>;

/// Allocations the trace does not show, inferred where the kernel refilled a list: by the
/// index of the flow line they come before (the allocation that took the refill), each
/// (CPU, zone index, order, migratetype, blocks). `alloc_pages_bulk()` takes pages from the
/// lists without an mm_page_alloc event (vmalloc does, and with it every kernel stack a fork
/// makes: a loop of forks on the Zen 4 VM left 1,473 blocks unseen in 300 rounds, mostly in
/// fours), so the trace's events leave a list fuller than the kernel's was; the kernel refills
/// a list only when it is empty, so what the events leave on it at a refill was taken unseen
/// since the previous one. Drains of a flow before format 5 name no lists: a list's count is
/// then unknown until its next refill, and nothing is inferred across it.
pub type UnseenAllocs = BTreeMap<u64, Vec<(u32, u8, u8, MigrateType, u64)>>;

/// What a first pass over a flow finds for its replay.
#[derive(Debug, Clone, Default)]
pub struct FlowFacts {
    /// The lists at the start.
    pub start: StartLists,
    /// The allocations the trace does not show.
    pub unseen: UnseenAllocs,
}

impl FlowFacts {
    /// Blocks allocated unseen, over every list.
    pub fn unseen_blocks(&self) -> u64 {
        self.unseen.values().flatten().map(|u| u.4).sum()
    }
}

/// The list a flow line's migratetype names (unknown: the movable lists, where most pages are).
fn list_type(mt: Option<u8>) -> MigrateType {
    mt.map_or(MigrateType::Movable, MigrateType::from_kernel)
}

/// Reads a flow for its [`StartLists`].
pub fn start_lists<R: BufRead>(r: FlowReader<R>) -> Result<StartLists> {
    flow_facts(r).map(|f| f.start)
}

/// Reads a flow for its [`FlowFacts`].
pub fn flow_facts<R: BufRead>(mut r: FlowReader<R>) -> Result<FlowFacts> {
    #[derive(Default)]
    struct Probe {
        deficit: i64,
        max_deficit: i64,
        at_refill: Option<i64>,
        /// Blocks the trace's events leave on the list since its last refill (None: before
        /// the first, or after a drain that named no lists).
        since_refill: Option<i64>,
    }
    impl Probe {
        fn take(&mut self, blocks: i64) {
            self.deficit = self.deficit.saturating_add(blocks);
            self.max_deficit = self.max_deficit.max(self.deficit);
            if let Some(b) = self.since_refill.as_mut() {
                *b = b.saturating_sub(blocks);
            }
        }
    }
    let mut probes: BTreeMap<(u32, u8, u8, MigrateType), Probe> = BTreeMap::new();
    // Per (CPU, zone): a refill seen and not yet matched to its allocation, its pages and type.
    type Pending = Option<(u64, Option<u8>)>;
    let mut pending: BTreeMap<(u32, u8), Pending> = BTreeMap::new();
    let mut unseen = UnseenAllocs::new();
    let mut index = 0u64;
    while let Some(l) = r.next_line()? {
        let at = index;
        index += 1;
        match l {
            FlowLine::Run {
                cpu,
                zone: Some(z),
                op,
                order,
                count,
                repeat,
                mt,
                ..
            } => {
                let n = i64::try_from(count.saturating_mul(repeat)).unwrap_or(i64::MAX);
                let key = (cpu, z, order, list_type(mt));
                let p = probes.entry(key).or_default();
                match op {
                    Op::Alloc => {
                        // The refill is this allocation's when their types agree (or either
                        // is unknown).
                        let refill = match pending.insert((cpu, z), None) {
                            Some(Some((pages, rm))) if rm.is_none() || mt.is_none() || rm == mt => {
                                Some(pages)
                            }
                            _ => None,
                        };
                        if let Some(pages) = refill {
                            if p.at_refill.is_none() {
                                p.at_refill = Some(p.deficit);
                            }
                            // The kernel found the list empty.
                            if let Some(left) = p.since_refill.filter(|&b| b > 0) {
                                unseen.entry(at).or_default().push((
                                    cpu,
                                    z,
                                    order,
                                    key.3,
                                    left as u64,
                                ));
                            }
                            p.since_refill = Some(i64::try_from(pages >> order).unwrap_or(0));
                        }
                        p.take(n);
                    }
                    Op::Free => {
                        p.deficit = p.deficit.saturating_sub(n);
                        if let Some(b) = p.since_refill.as_mut() {
                            *b = b.saturating_add(n);
                        }
                    }
                    // Past the lists: the list's deficit stays.
                    Op::FreeDirect => {}
                }
            }
            FlowLine::Refill {
                cpu,
                zone: Some(z),
                pages,
                mt,
            } => {
                pending.insert((cpu, z), Some((pages, mt)));
            }
            // Drained blocks left their lists as allocated ones do.
            FlowLine::Drain {
                cpu,
                zone: Some(z),
                lists: Some(d),
                ..
            } => {
                for (order, mt, pages) in d.iter() {
                    let p = probes
                        .entry((cpu, z, order, MigrateType::from_kernel(mt)))
                        .or_default();
                    p.take(i64::from(pages >> order));
                }
            }
            FlowLine::Drain {
                cpu,
                zone: Some(z),
                lists: None,
                ..
            } => {
                for (_, p) in probes.iter_mut().filter(|(k, _)| (k.0, k.1) == (cpu, z)) {
                    p.since_refill = None;
                }
            }
            _ => {}
        }
    }
    let mut start = StartLists::new();
    for ((cpu, z, order, mt), p) in probes {
        let blocks = p.at_refill.unwrap_or(p.max_deficit).max(0);
        if blocks > 0 {
            start
                .entry((cpu, z))
                .or_default()
                .insert((order, mt), blocks as u64);
        }
    }
    Ok(FlowFacts { start, unseen })
}

/// Puts a pageset's start `count` on its lists, as much of it as the recording shows each list
/// held ([`StartLists`]), and returns the rest: it is on lists the flow does not allocate from
/// (a page-fault loop's trace shows its CPU's list empty at every refill while the count stays
/// thousands of pages above it).
fn place_start_lists(
    st: &mut PcpState,
    lists: Option<&BTreeMap<(u8, MigrateType), u64>>,
    count: u64,
) -> Result<u64> {
    let mut left = count;
    for (&(order, mt), &blocks) in lists.into_iter().flatten() {
        if !st.pcp_allowed_order(order) {
            continue;
        }
        let b = blocks.min(left >> order);
        st.add_pages_mt(order, mt, u32::try_from(b).unwrap_or(u32::MAX))?;
        left -= b << order;
    }
    Ok(left)
}

/// Replays a flow under `s`, its pagesets starting with the lists `start` found, holding the
/// recorded counts or, with `from`, the snapshot's.
pub fn replay<R: BufRead>(
    mut r: FlowReader<R>,
    label: &str,
    s: &ReplaySettings,
    facts: &FlowFacts,
    from: Option<&StartOverride>,
) -> Result<Replay> {
    let start = &facts.start;
    let recorded_k = KernelVersion::parse_release(&r.meta.kernel)
        .map_err(|e| Error::invalid(label, "meta.kernel", e.to_string()))?;
    let k = s.kernel.unwrap_or(recorded_k);
    let fraction_rec = r.meta.sysctl.get(FRACTION_SYSCTL).copied().unwrap_or(0);
    let zones: Vec<String> = r.start.keys().cloned().collect();
    let nodes = zones
        .iter()
        .filter_map(|z| z.split('/').next())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        .max(1) as u32;
    let mut replay = StreamReplay::new();
    let mut limits_of: BTreeMap<(u32, u8), PcpLimits> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut no_slice = false;
    let mut not_in_snapshot = 0usize;
    let mut settled_pages = 0u64;
    if k.is_newer_than_modelled() {
        notes.push(format!(
            "Kernel {k} is newer than the newest whose PCP code is modelled ({}): its rules are taken as that kernel's.",
            KernelVersion::NEWEST_MODELLED
        ));
    }
    for (zi, (zname, z)) in r.start.iter().enumerate() {
        let zi = u8::try_from(zi)
            .map_err(|_| Error::invalid(label, "pagesets_start", "more than 255 zones"))?;
        let online = z.cpus.len() as u32;
        let cpus_on_node = (online / nodes).max(1);
        for (cpu_s, p) in &z.cpus {
            let cpu: u32 = cpu_s.parse().map_err(|_| {
                Error::invalid(
                    label,
                    format!("pagesets_start.{zname}.cpus"),
                    format!("'{cpu_s}' is no CPU number"),
                )
            })?;
            let rec = recorded_limits(label, zname, cpu_s, p, recorded_k)?;
            let lim = replayed_limits(label, zname, z, rec, s, k, (cpus_on_node, online))?;
            let mut st = PcpState::new(k, lim, s.scale_max)?;
            // The lists' contents and live high: the recording's, or the snapshot's.
            let held = match from {
                Some(o) => match o.pagesets.get(zname).and_then(|z| z.cpus.get(cpu_s)) {
                    Some(q) => q,
                    None => {
                        not_in_snapshot += 1;
                        p
                    }
                },
                None => p,
            };
            // PCPF_FREE_HIGH_BATCH (6.7+): set from the CPU's LLC slice as the kernel does.
            match r.meta.data_slice_bytes.get(cpu_s) {
                Some(&slice) => {
                    st.flags.free_high_batch = pcpf_free_high_batch(slice, lim.batch_pages)
                }
                None => no_slice = true,
            }
            let left = place_start_lists(
                &mut st,
                start.get(&(cpu, zi)),
                u64::try_from(held.count.max(0)).unwrap_or(0),
            )?;
            st.add_other_pages(u32::try_from(left).unwrap_or(u32::MAX));
            if k.era().auto_tunes_high() {
                if let PcpHigh::AutoTuned {
                    high_min_pages,
                    high_max_pages,
                } = lim.high
                {
                    let live = u32::try_from(held.high.max(0)).unwrap_or(0);
                    st.high_pages = live.clamp(high_min_pages.min(high_max_pages), high_max_pages);
                }
            }
            // At another setting the lists start as that setting leaves them once settled, as
            // `record` settles them before a recording (not counted: it happens before).
            if s.changes_anything() {
                settled_pages += u64::from(st.settle(SETTLE_TICKS));
            }
            replay.insert(cpu, zi, st);
            limits_of.insert((cpu, zi), lim);
        }
    }
    if let Some(o) = from {
        notes.push(format!(
            "The lists start as {} shows them (count and live high per pageset), not as recorded{}.",
            o.source,
            if not_in_snapshot > 0 {
                format!(
                    "; {not_in_snapshot} pageset(s) it does not list start as recorded"
                )
            } else {
                String::new()
            }
        ));
    }
    if s.changes_anything() && from.is_none() && r.meta.drained.is_some() {
        notes.push(
            "The recording started from lists drained to the smallest high (record --drain-first), and so do the lists here, as in a recording at this setting made the same way.".into(),
        );
    }
    if settled_pages > 0 {
        notes.push(format!(
            "At this setting the lists start settled (decay_pcp_high() until no list is above its high and no live high above high_min, as `record` does before a recording): {settled_pages} pages of the start lists went back to the buddy allocator uncounted."
        ));
    }
    if no_slice && k.era().auto_tunes_high() {
        notes.push(
            "The flow has no LLC slice per CPU (recorded before it was kept): PCPF_FREE_HIGH_BATCH is taken as off, so free_high may fire on lists below batch.".into(),
        );
    }
    // Recorded counts per pageset, and each CPU's last run (for drains on high-order frees).
    let mut rec: BTreeMap<(u32, u8), RecordedCounts> = BTreeMap::new();
    let mut last_run: BTreeMap<u32, (Op, u8, Option<u8>)> = BTreeMap::new();
    let (mut no_zone, mut no_pageset, mut lost, mut next_tick_ms) = (0u64, 0u64, 0u64, 1000u64);
    let mut untyped = 0u64;
    let mut index = 0u64;
    while let Some(l) = r.next_line()? {
        // Allocations the trace does not show come before the allocation that took the refill
        // they made the kernel's list empty for.
        for &(cpu, z, order, mt, blocks) in facts.unseen.get(&index).into_iter().flatten() {
            if replay.has(cpu, z) {
                replay.step_unseen(cpu, z, order, mt, blocks)?;
            }
        }
        index += 1;
        match l {
            FlowLine::Run {
                cpu,
                zone,
                op,
                order,
                count,
                repeat,
                mt,
                ..
            } => {
                last_run.insert(cpu, (op, order, zone));
                if mt.is_none() {
                    untyped += count * repeat;
                }
                let n = count * repeat;
                let Some(z) = zone else {
                    no_zone += n;
                    continue;
                };
                if !replay.has(cpu, z) {
                    no_pageset += n;
                    continue;
                }
                let e = rec.entry((cpu, z)).or_default();
                let sop = match op {
                    Op::Alloc => {
                        e.allocs += n;
                        StreamOp::Alloc
                    }
                    Op::Free => {
                        e.frees += n;
                        StreamOp::Free
                    }
                    Op::FreeDirect => {
                        e.frees += n;
                        StreamOp::FreeDirect
                    }
                };
                replay.step_mt(cpu, z, sop, order, list_type(mt), n)?;
            }
            FlowLine::Refill {
                cpu,
                zone: Some(z),
                pages,
                ..
            } => {
                let e = rec.entry((cpu, z)).or_default();
                e.refills += 1;
                e.refill_pages += pages;
            }
            FlowLine::Drain {
                cpu,
                zone: Some(z),
                pages,
                ..
            } => {
                let e = rec.entry((cpu, z)).or_default();
                e.drains += 1;
                e.drain_pages += pages;
                if let Some((Op::Free, o, Some(rz))) = last_run.get(&cpu) {
                    if (1..=3).contains(o) && *rz == z {
                        e.drains_on_high_order_free += 1;
                    }
                }
            }
            FlowLine::Refill { .. } | FlowLine::Drain { .. } => no_zone += 1,
            FlowLine::Lost { events, .. } => lost += events,
            FlowLine::Time { ms } => {
                while ms >= next_tick_ms {
                    replay.tick()?;
                    next_tick_ms += 1000;
                }
            }
        }
    }
    let end = r.end.clone().unwrap_or_default();
    let end_sets = r.end_pagesets.clone().unwrap_or_default();
    if facts.unseen_blocks() > 0 {
        notes.push(format!(
            "{} allocations the trace does not show (alloc_pages_bulk(), used by vmalloc and so by every fork's kernel stack, emits no mm_page_alloc) were found where a refill met a list the events leave fuller, and replayed there.",
            facts.unseen_blocks()
        ));
    }
    if untyped > 0 {
        let all = end
            .cpus
            .values()
            .map(|c| c.allocs + c.frees)
            .sum::<u64>()
            .max(1);
        notes.push(format!(
            "{untyped} events ({:.1} %) carry no migratetype (a flow before format 3, or a free of a page the recording never saw allocated, refilled or drained): they ran on the movable lists.",
            untyped as f64 / all as f64 * 100.0
        ));
    }
    if lost > 0 {
        notes.push(format!(
            "The trace lost {lost} events: the recorded counts miss them and the replay never saw them; a larger --buffer-kb keeps them."
        ));
    }
    if no_zone + no_pageset > 0 {
        notes.push(format!(
            "{} events had no zone or no pageset (no pfn inside a recorded zone span, or an offline CPU) and were not replayed.",
            no_zone + no_pageset
        ));
    }
    // Per pageset and totals.
    let mut pagesets = Vec::new();
    let (mut rt, mut tt) = (RecordedCounts::default(), StreamTally::default());
    let (mut end_count, mut end_high) = (0i64, 0i64);
    for ((cpu, z), t) in replay.tallies() {
        let rc = rec.get(&(cpu, z)).cloned().unwrap_or_default();
        if t.events == 0 && rc.refills + rc.drains == 0 {
            continue;
        }
        let zname = zones[usize::from(z)].clone();
        if let Some(p) = end_sets
            .get(&zname)
            .and_then(|zz| zz.cpus.get(&cpu.to_string()))
        {
            end_count += p.count;
            end_high += p.high;
        }
        rt.merge(&rc);
        tt.merge(t);
        pagesets.push(PagesetReplay {
            cpu,
            zone: zname,
            limits: limits_words(&limits_of[&(cpu, z)]),
            recorded: rc,
            replayed: t.clone(),
            replayed_mean_held: t.mean_held(),
        });
    }
    let per_k = |n: u64, allocs: u64| {
        if allocs == 0 {
            0.0
        } else {
            n as f64 * 1000.0 / allocs as f64
        }
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let allocs = tt.allocs;
    let q = |name: &str, unit: &str, recorded: Option<f64>, replayed: f64| Quantity {
        name: name.into(),
        unit: unit.into(),
        recorded,
        replayed,
    };
    let mut quantities = vec![
        q(
            "allocations",
            "events",
            Some(rt.allocs as f64),
            allocs as f64,
        ),
        q("frees", "events", Some(rt.frees as f64), tt.frees as f64),
        q(
            "allocations the trace does not show",
            "events",
            Some(facts.unseen_blocks() as f64),
            tt.unseen_allocs as f64,
        ),
        q(
            "refills",
            "calls",
            Some(rt.refills as f64),
            tt.refills as f64,
        ),
        q("drains", "calls", Some(rt.drains as f64), tt.drains as f64),
        q(
            "refills per 1000 allocations",
            "calls",
            Some(per_k(rt.refills, rt.allocs)),
            per_k(tt.refills, allocs),
        ),
        q(
            "drains per 1000 allocations",
            "calls",
            Some(per_k(rt.drains, rt.allocs)),
            per_k(tt.drains, allocs),
        ),
        q(
            "pages per refill",
            "pages",
            Some(ratio(rt.refill_pages, rt.refills)),
            ratio(tt.refill_pages, tt.refills),
        ),
        q(
            "pages per drain",
            "pages",
            Some(ratio(rt.drain_pages, rt.drains)),
            ratio(tt.drain_pages, tt.drains),
        ),
        q(
            "drains on an order 1-3 free per 1000 allocations",
            "calls",
            Some(per_k(rt.drains_on_high_order_free, rt.allocs)),
            per_k(tt.drains_on_high_order_free, allocs),
        ),
        q(
            "free_high drains per 1000 allocations",
            "calls",
            None,
            per_k(tt.free_high, allocs),
        ),
        q("decay drains", "calls", None, tt.decay_drains as f64),
        q(
            "zone->lock visits per 1000 allocations",
            "visits",
            None,
            per_k(tt.lock_visits(), allocs),
        ),
        q(
            "pages held at the end",
            "pages",
            Some(end_count as f64),
            f64::from(tt.final_count),
        ),
        q(
            "live pcp->high at the end, summed",
            "pages",
            Some(end_high as f64),
            f64::from(tt.final_high),
        ),
        q("pages held, mean", "pages", None, tt.mean_held()),
        q(
            "allocations reused within 1 MiB allocated (256 pages)",
            "%",
            None,
            100.0 * tt.reuse.share_within(256),
        ),
        q(
            "allocations reused within 4 MiB allocated (1024 pages)",
            "%",
            None,
            100.0 * tt.reuse.share_within(1024),
        ),
        q(
            "allocations reused within 16 MiB allocated (4096 pages)",
            "%",
            None,
            100.0 * tt.reuse.share_within(4096),
        ),
        q(
            "allocations reused from the list at any distance",
            "%",
            None,
            100.0 * tt.reuse.share_within(u64::MAX),
        ),
        q(
            "allocations of a block a refill brought",
            "%",
            None,
            100.0 * tt.reuse.refilled_total() as f64 / tt.reuse.total().max(1) as f64,
        ),
        q(
            "allocations of a refilled block freed less than 4096 pages allocated before",
            "%",
            None,
            100.0 * tt.reuse.refilled_share_within(4096),
        ),
        q(
            "live pcp->high, mean, summed",
            "pages",
            None,
            pagesets.iter().map(|p| p.replayed.mean_high()).sum(),
        ),
    ];
    // Where refilled blocks came from: the recording's (pfns of drains and refills), beside the
    // replay's buddy stack (the newest drained block first).
    let rec_src = r.refill_sources.as_ref().map(|m| {
        let mut all = RefillSources::default();
        for v in m.values() {
            all.merge(v);
        }
        all
    });
    let src = &tt.refill_sources;
    for (name, f) in [
        (
            "refilled blocks drained less than 256 pages before",
            (|x: &RefillSources| x.share_within(256)) as fn(&RefillSources) -> f64,
        ),
        (
            "refilled blocks drained less than 4096 pages before",
            |x: &RefillSources| x.share_within(4096),
        ),
        (
            "refilled blocks another CPU drained",
            |x: &RefillSources| x.other_cpu as f64 / x.total().max(1) as f64,
        ),
    ] {
        quantities.push(q(
            name,
            "%",
            rec_src
                .as_ref()
                .filter(|x| x.total() > 0)
                .map(|x| 100.0 * f(x)),
            100.0 * f(src),
        ));
    }
    let setting_words = |fraction: Option<i64>, s: &ReplaySettings| {
        let mut w = Vec::new();
        if let Some(h) = s.high {
            w.push(format!("pcp->high {h}"));
        } else if let Some(f) = fraction {
            w.push(format!("{FRACTION_SYSCTL}={f}"));
        }
        if let Some(b) = s.batch {
            w.push(format!("batch {b}"));
        }
        if let Some(m) = s.scale_max {
            w.push(format!("CONFIG_PCP_BATCH_SCALE_MAX={m}"));
        }
        w.join(", ")
    };
    if !s.changes_anything() {
        let d = |name: &str| {
            quantities
                .iter()
                .find(|x| x.name == name)
                .and_then(Quantity::diff_pct)
        };
        notes.push(format!(
            "At the recorded setting the replay's refills differ by {} and its drains by {} from what the kernel did.",
            d("refills").map_or("-".into(), |x| format!("{x:+.1} %")),
            d("drains").map_or("-".into(), |x| format!("{x:+.1} %")),
        ));
    }
    Ok(Replay {
        flow: label.to_string(),
        recorded_kernel: r.meta.kernel.clone(),
        kernel: k,
        recorded_fraction: fraction_rec,
        recorded_setting: setting_words(Some(fraction_rec), &ReplaySettings::default()),
        setting: setting_words(Some(s.fraction.map_or(fraction_rec, i64::from)), s),
        fraction: s.fraction.map_or(fraction_rec, i64::from),
        seconds: end.seconds,
        quantities,
        pagesets,
        notes,
    })
}

/// The blind check of a replay: `flow` replayed at the setting `other` was recorded at (its
/// `vm.percpu_pagelist_high_fraction`, unless `s` sets something), beside what `other`
/// recorded. Only rates compare (per allocation, per call): the two recordings differ in
/// length. `from` (e.g. [`StartOverride::from_flow`] of `other`) starts the lists as another
/// snapshot shows them.
pub fn replay_against(
    flow: &std::path::Path,
    other: &std::path::Path,
    s: &ReplaySettings,
    from: Option<&StartOverride>,
) -> Result<Replay> {
    let theirs = replay_file(other, &ReplaySettings::default())?;
    let mut settings = *s;
    if !s.changes_anything() {
        let f = theirs.recorded_fraction;
        settings.fraction = Some(u32::try_from(f).map_err(|_| {
            Error::invalid(
                other.display().to_string(),
                format!("meta.sysctl.{FRACTION_SYSCTL}"),
                format!("{f} is no fraction"),
            )
        })?);
    }
    let mut mine = replay_file_from(flow, &settings, from)?;
    mine.quantities.retain(|q| q.name.contains(" per "));
    for q in &mut mine.quantities {
        q.recorded = theirs.quantity(&q.name).and_then(|t| t.recorded);
    }
    mine.notes
        .retain(|n| !n.starts_with("At the recorded setting"));
    mine.notes.push(format!(
        "Recorded column: {} at {} (rates only: the two recordings differ in length).",
        theirs.flow, theirs.recorded_setting
    ));
    Ok(mine)
}

/// One recording of a workload replayed at a setting, beside what the kernel did in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRates {
    /// The flow file.
    pub flow: String,
    /// The setting it was recorded at, in words.
    pub recorded_setting: String,
    /// `vm.percpu_pagelist_high_fraction` at the recording.
    pub recorded_fraction: i64,
    /// The kernel's refills and drains per 1000 allocations in that recording.
    pub recorded: [f64; 2],
    /// The replay's refills and drains per 1000 allocations at the replayed setting.
    pub replayed: [f64; 2],
}

/// The rates [`RunRates`] holds, by name.
pub const RUN_RATES: [&str; 2] = [
    "refills per 1000 allocations",
    "drains per 1000 allocations",
];

/// Every recording in `flows` replayed at `s` (which must change something: a run's own
/// setting is its check, not a prediction). Several recordings of one workload at one setting
/// differ as the workload does from run to run (which CPU frees what, in which order); their
/// replays at another setting show how far one run predicts another.
pub fn replay_runs(flows: &[std::path::PathBuf], s: &ReplaySettings) -> Result<Vec<RunRates>> {
    if !s.changes_anything() {
        return Err(Error::Unsupported(
            "replaying other runs needs a setting to replay them at (--high, --fraction, --batch, --scale-max, --kernel or --against)".into(),
        ));
    }
    let rates = |r: &Replay, recorded: bool| -> [f64; 2] {
        RUN_RATES.map(|n| {
            r.quantity(n)
                .and_then(|q| {
                    if recorded {
                        q.recorded
                    } else {
                        Some(q.replayed)
                    }
                })
                .unwrap_or(f64::NAN)
        })
    };
    // A replay's recorded column is its own recording's, whatever setting it replays at.
    flows
        .iter()
        .map(|f| {
            let at = replay_file(f, s)?;
            Ok(RunRates {
                flow: f.display().to_string(),
                recorded_setting: at.recorded_setting.clone(),
                recorded_fraction: at.recorded_fraction,
                recorded: rates(&at, true),
                replayed: rates(&at, false),
            })
        })
        .collect()
}

/// The note on several runs: the spread of their replays at the setting, as far as one run
/// predicts another.
pub fn runs_note(runs: &[RunRates], setting: &str) -> Option<String> {
    if runs.len() < 2 {
        return None;
    }
    let v: Vec<f64> = runs.iter().map(|r| r.replayed[0]).collect();
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let pct = |x: f64| {
        if mean > 0.0 {
            format!("{:+.0} %", (x / mean - 1.0) * 100.0)
        } else {
            "-".into()
        }
    };
    Some(format!(
        "{} runs of the workload replayed at {setting} make {lo:.3}-{hi:.3} refills per 1000 allocations ({} to {} of their mean, {mean:.3}): one run predicts another no closer than that.",
        runs.len(),
        pct(lo),
        pct(hi)
    ))
}

/// The machine side of a replay on `machine`: where an allocated block's lines are found (its
/// reuse distance against the caches, [`crate::model::cache`]) and what writing the page then
/// costs; and the zone->lock side: each pageset's refills and drains as holds of
/// the kernel's code ([`crate::model::hold::CodeHold`]: the call, the hand-over, a cost per
/// block), and the wait in the lock's queue ([`crate::model::lock`]: a finite-source queue of
/// the CPUs the flow ran on, each visiting at the rate the replay gives over the recorded
/// seconds). All modelled: the tracepoints carry no hold or wait times.
pub fn machine_quantities(
    r: &Replay,
    machine: &crate::hw::machine::Machine,
) -> Result<Vec<Quantity>> {
    use crate::model::hold::{p_other, BlockPattern, CodeHold, HoldSide};
    use crate::model::lock::{HoldDist, LockQueue};
    let code = CodeHold::new(machine, r.kernel, machine.clock.base_ghz.value);
    let c2c = machine.latency_ns.c2c_same_llc.value;
    let l2 = machine.latency_ns.l2_hit.value;
    // Per zone: the CPUs on its lock and their visits.
    let mut zones: BTreeMap<&str, Vec<&PagesetReplay>> = BTreeMap::new();
    for p in &r.pagesets {
        if p.replayed.lock_visits() > 0 {
            zones.entry(p.zone.as_str()).or_default().push(p);
        }
    }
    let span_ns = (r.seconds * 1e9).max(1.0);
    let (mut time_ns, mut visits, mut holds_ns, mut waits_ns) = (0.0, 0u64, 0.0, 0.0);
    let (mut refill_hold, mut drain_hold, mut n_refill, mut n_drain) = (0.0, 0.0, 0u64, 0u64);
    for sets in zones.values() {
        let cpus = sets.len() as u32;
        let po = p_other(cpus);
        let mut zone_visits = 0u64;
        let mut zone_hold = 0.0;
        for p in sets {
            let t = &p.replayed;
            let rb = t.refill_blocks.max(t.refills) as f64 / t.refills.max(1) as f64;
            let order = if t.refill_blocks > 0 {
                ((t.refill_pages as f64 / t.refill_blocks as f64)
                    .log2()
                    .round()) as u8
            } else {
                0
            };
            let h_r = code.refill(rb, order, po, c2c, None).total();
            let db = t.drain_blocks as f64 / t.drains.max(1) as f64;
            let h_d = code.fixed_ns(HoldSide::Drain, po, c2c)
                + db * code.drain_block_ns(l2, c2c, BlockPattern::Scattered);
            let h_b = code.refill(1.0, 0, po, c2c, None).total();
            let hold = t.refills as f64 * h_r + t.drains as f64 * h_d + t.bypassed as f64 * h_b;
            refill_hold += t.refills as f64 * h_r;
            drain_hold += t.drains as f64 * h_d;
            n_refill += t.refills;
            n_drain += t.drains;
            zone_visits += t.lock_visits();
            zone_hold += hold;
        }
        if zone_visits == 0 {
            continue;
        }
        let mean_hold = zone_hold / zone_visits as f64;
        let per_cpu_visits = zone_visits as f64 / f64::from(cpus);
        let think = (span_ns / per_cpu_visits - mean_hold).max(1.0);
        let sol = LockQueue::single(
            cpus,
            think,
            HoldDist::Gamma {
                mean_ns: mean_hold,
                cv2: 1.0,
            },
        )
        .solve()?;
        visits += zone_visits;
        holds_ns += zone_hold;
        waits_ns += sol.wait_ns_mean * zone_visits as f64;
        time_ns += zone_hold + sol.wait_ns_mean * zone_visits as f64;
    }
    let pages: u64 = r.pagesets.iter().map(|p| p.replayed.alloc_pages).sum();
    let per = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    // Where a reused block's lines are found: a list reuse by its distance on this CPU, a
    // refilled block by the pages every CPU allocated since its free (the CPU that freed it
    // holds its lines, or the LLC), against the machine's levels; a refilled block never seen
    // freed is taken as DRAM (an upper bound).
    let mut hist = crate::model::stream::ReuseHistogram::default();
    for p in &r.pagesets {
        hist.merge(&p.replayed.reuse);
    }
    let access = if hist.total() > 0 {
        use crate::model::cache::{page_access_cost, Hierarchy, Placement, ReuseDist, Segment};
        use crate::model::stream::REUSE_BUCKET_PAGES;
        let n = hist.total() as f64;
        let mut edges = vec![0u64];
        edges.extend(REUSE_BUCKET_PAGES);
        let last = *REUSE_BUCKET_PAGES.last().unwrap_or(&0);
        edges.push(last * 4);
        let mut segments: Vec<Segment> = hist
            .buckets
            .iter()
            .chain(hist.refilled_buckets.iter())
            .enumerate()
            .map(|(k, &c)| (k % hist.buckets.len(), c))
            .map(|(i, c)| Segment {
                weight: c as f64 / n,
                offset_pages: edges[i] as f64,
                a_pages: (edges[i + 1] - edges[i]) as f64,
                b_pages: 0.0,
            })
            .collect();
        segments.push(Segment {
            weight: hist.refilled as f64 / n,
            offset_pages: 1e12,
            a_pages: 0.0,
            b_pages: 0.0,
        });
        let h = Hierarchy::from_machine(machine, Placement::SameLlc)?;
        let mlp = crate::assumptions::value("netperf::mlp_lines", 10.0);
        Some(page_access_cost(&h, &ReuseDist { segments }, 0.0, mlp))
    } else {
        None
    };
    let q = |name: &str, unit: &str, v: f64| Quantity {
        name: name.into(),
        unit: unit.into(),
        recorded: None,
        replayed: v,
    };
    Ok(vec![
        q(
            "zone->lock hold per refill (modelled)",
            "ns",
            per(refill_hold, n_refill as f64),
        ),
        q(
            "zone->lock hold per drain (modelled)",
            "ns",
            per(drain_hold, n_drain as f64),
        ),
        q(
            "zone->lock wait per visit (modelled)",
            "ns",
            per(waits_ns, visits as f64),
        ),
        q(
            "zone->lock time per page allocated (modelled)",
            "ns",
            per(time_ns, pages as f64),
        ),
        q(
            "zone->lock busy share of the recorded time (modelled)",
            "%",
            100.0 * per(holds_ns, span_ns * zones.len().max(1) as f64),
        ),
        q(
            "allocated blocks found in this CPU's private cache (modelled)",
            "%",
            access.map_or(0.0, |a| 100.0 * a.probs.private),
        ),
        q(
            "allocated blocks found in the LLC (modelled)",
            "%",
            access.map_or(0.0, |a| 100.0 * a.probs.llc),
        ),
        q(
            "writing an allocated page, by where its lines are (modelled)",
            "ns",
            access.map_or(0.0, |a| a.total_ns),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::pageset::{PcpHigh, PcpLimits};

    /// A flow of one Normal pageset (CPU 0, zone index 0) whose lines are `body`, in the flow
    /// file's own syntax (`f 0 0 9 0 2 m1`, `D 0 0 56 o0m1=40`), read by its parser.
    fn lists_of(body: &[&str]) -> BTreeMap<(u8, MigrateType), u64> {
        flow_facts(reader_of(body))
            .unwrap()
            .start
            .remove(&(0, 0))
            .unwrap()
    }

    fn reader_of(body: &[&str]) -> FlowReader<std::io::Cursor<Vec<u8>>> {
        use crate::measure::record::flow::{parse_line, FlowWriter};
        let meta: crate::measure::record::flow::FlowMeta = serde_json::from_str(
            r#"{"kernel":"6.6.0","date_utc":"2026-12-07","command":[],"cpus":[],"sysctl":{},"events":["mm_page_alloc"],"buffer_size_kb":1024,"data_slice_bytes":{},"settled":null}"#,
        )
        .unwrap();
        let sets: Pagesets = serde_json::from_str(
            r#"{"0/Normal":{"managed":100000,"start_pfn":4096,"spanned":100000,"low_wmark":100,"cpus":{"0":{"count":100,"high":200,"batch":8}}}}"#,
        )
        .unwrap();
        let mut w = FlowWriter::new(Vec::new(), "t", &meta, &sets).unwrap();
        for (i, l) in body.iter().enumerate() {
            w.push(parse_line("t", i + 4, l, 1).unwrap()).unwrap();
        }
        let (_, out) = w.finish(&sets, 1.0).unwrap();
        FlowReader::open(std::io::Cursor::new(out), "t.flow").unwrap()
    }

    #[test]
    fn a_refill_of_a_list_the_events_leave_full_shows_what_was_taken_unseen() {
        // A refill of 8 unmovable pages, 5 allocated and 1 freed: the events leave 4 on the
        // list, but the kernel refills only an empty list, so 4 were taken unseen before the
        // second refill's allocation (line 4 of the body). The movable list's refills match
        // its events: nothing unseen there. A drain that names no lists (a flow before
        // format 5) makes the unmovable count unknown until its next refill.
        let facts = flow_facts(reader_of(&[
            "R 0 0 8 m0",
            "a 0 0 9 0 5 m0",
            "f 0 0 9 0 1 m0",
            "R 0 0 8 m0",
            "a 0 0 9 0 1 m0",
            "R 0 0 8 m1",
            "a 0 0 9 0 8 m1",
            "R 0 0 8 m1",
            "a 0 0 9 0 1 m1",
        ]))
        .unwrap();
        assert_eq!(facts.unseen_blocks(), 4);
        let at: Vec<_> = facts.unseen.iter().collect();
        assert_eq!(at.len(), 1);
        assert_eq!(
            *at[0].0, 4,
            "before the allocation that took the second refill"
        );
        assert_eq!(*at[0].1, vec![(0, 0, 0, MigrateType::Unmovable, 4)]);
        let facts = flow_facts(reader_of(&[
            "R 0 0 8 m0",
            "a 0 0 9 0 5 m0",
            "D 0 0 3",
            "R 0 0 8 m0",
            "a 0 0 9 0 1 m0",
        ]))
        .unwrap();
        assert_eq!(facts.unseen_blocks(), 0);
    }

    fn pageset() -> PcpState {
        let lim = PcpLimits {
            batch_pages: 8,
            high: PcpHigh::Fixed { high_pages: 200 },
        };
        PcpState::new(KernelVersion::new(6, 6), lim, None).unwrap()
    }

    #[test]
    fn a_list_refilled_held_its_deficit_and_the_rest_is_on_other_lists() {
        // Five movable pages taken (seven allocated, two freed), then a refill: the movable
        // list held exactly five, so the other 95 of the count are on lists the flow never
        // allocates from.
        let lists = lists_of(&[
            "f 0 0 9 0 2 m1",
            "a 0 0 9 0 7 m1",
            "R 0 0 8 m1",
            "a 0 0 9 0 3 m1",
        ]);
        assert_eq!(lists[&(0, MigrateType::Movable)], 5);
        let mut st = pageset();
        let left = place_start_lists(&mut st, Some(&lists), 100).unwrap();
        assert_eq!(left, 95);
        assert_eq!(st.list_blocks_mt(0, MigrateType::Movable), 5);
    }

    #[test]
    fn blocks_drained_before_the_first_refill_were_on_their_lists() {
        // The same stream with a drain first that took 40 movable order-0 pages and two
        // order-3 unmovable blocks: the movable list held 45, the order-3 list at least 2.
        let lists = lists_of(&[
            "f 0 0 9 0 2 m1",
            "D 0 0 56 o0m1=40 o3m0=16",
            "a 0 0 9 0 7 m1",
            "R 0 0 8 m1",
            "a 0 0 9 0 3 m1",
        ]);
        assert_eq!(lists[&(0, MigrateType::Movable)], 45);
        assert_eq!(lists[&(3, MigrateType::Unmovable)], 2);
        let mut st = pageset();
        let left = place_start_lists(&mut st, Some(&lists), 100).unwrap();
        assert_eq!(left, 100 - 45 - 16);
        // A drain of a flow before format 5 names no list: nothing is known of it.
        let lists = lists_of(&[
            "f 0 0 9 0 2 m1",
            "D 0 0 56",
            "a 0 0 9 0 7 m1",
            "R 0 0 8 m1",
            "a 0 0 9 0 3 m1",
        ]);
        assert_eq!(lists[&(0, MigrateType::Movable)], 5);
        assert_eq!(lists.len(), 1);
    }
}
