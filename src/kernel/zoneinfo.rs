//! `/proc/zoneinfo`: a parser for both pageset formats, and a check that recomputes every
//! zone's watermarks and pageset sizes from the file's own numbers.
//!
//! # Format (mm/vmstat.c `zoneinfo_show_print()`)
//! Per zone: `Node N, zone NAME`; for the first populated zone of a node a `per-node stats`
//! block; `pages free`, `boost`, `min`, `low`, `high`, `promo` (newer kernels), `spanned`,
//! `present`, `managed`, `cma`, `protection: (...)`, per-zone counters; for populated zones
//! `pagesets` with, per online CPU, `cpu: N` and
//! - up to 6.12: `count: %i`, `high:  %i` (two spaces), `batch: %i`;
//! - from 6.13: `count:    %i`, `high:     %i`, `batch:    %i`, `high_min: %i`, `high_max: %i`;
//!
//! then `vm stats threshold`, and after the CPUs `node_unreclaimable` and `start_pfn`.
//! Unknown `name value` lines are skipped (the counter list changes with every release);
//! quote prefixes (`> `) and blank lines are ignored. A known field whose value is not a number,
//! a zone without `min`/`low`/`high`/`present`/`managed`, and a CPU without `count`/`high`/`batch`
//! are errors naming the file, line and field.
//!
//! # The check ([`check_zoneinfo`])
//! For every populated zone, from the file's `managed` counts and the given kernel version and
//! CPUs per node:
//! - `min_free_kbytes` is recomputed by each rule in turn (khugepaged raise, sqrt rule at boot,
//!   both again with `nr_free_buffer_pages()` taken from the file's high watermarks as after a
//!   memory hotplug). The first rule that reproduces every zone's `min` is reported. When none
//!   does (a hand-set `vm.min_free_kbytes`), `min` is taken as given and the check goes on.
//! - `low`, `high`, `promo` follow from `min` (minus `boost`; see
//!   [`crate::kernel::watermarks`]).
//! - `batch` and, up to 6.6, `high` ([`crate::kernel::pageset`]); there the printed `high` is
//!   the computed one unless a sysctl changed it.
//! - From 6.7, `high_min` / `high_max` (printed from 6.13), and the printed `high` is the live,
//!   auto-tuned value: it must be 0 (never used) or within `[high_min, high_max]`.
//!
//! # Assumptions
//! x86-64 zones; every CPU of a node listed; `watermark_scale_factor` 10 unless given.
//!
//! # References
//! mm/vmstat.c `zoneinfo_show_print` (6.18 sample; MengEn Sun, "mm: add pcp high_min high_max
//! to proc zoneinfo", Oct 2024), and the modules this one calls.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::config::{configure_zones, KernelOptions};
use crate::kernel::layout::{ZoneKind, ZoneSpec};
use crate::kernel::pageset::{
    zone_set_pageset_high_and_batch, PagesetInputs, PagesetTunables, PcpHigh,
};
use crate::kernel::version::KernelVersion;
use crate::kernel::watermarks::{
    calculate_min_free_kbytes, lowmem_pages, nr_free_buffer_pages, set_recommended_min_free_kbytes,
    setup_per_zone_wmarks, thp_nr_zones, zone_watermarks, MinFreeRule, ThpMode, Watermarks,
    DEFAULT_WATERMARK_SCALE_FACTOR,
};

/// The pageset format of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneinfoFormat {
    /// Up to 6.12: `count`, `high`, `batch` per CPU.
    Classic,
    /// From 6.13: also `high_min` and `high_max` per CPU.
    WithHighMinMax,
    /// No populated zone has pagesets: the format cannot be told.
    Unknown,
}

/// One CPU's pageset of a zone as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PagesetRecord {
    /// CPU number.
    pub cpu: u32,
    /// 1-based line of `cpu: N`.
    pub line: usize,
    /// `count`, pages.
    pub count_pages: i64,
    /// `high` (the live value from 6.7), pages.
    pub high_pages: i64,
    /// `batch`, pages.
    pub batch_pages: i64,
    /// `high_min`, pages (6.13+ format).
    pub high_min_pages: Option<i64>,
    /// `high_max`, pages (6.13+ format).
    pub high_max_pages: Option<i64>,
}

/// One zone as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneRecord {
    /// NUMA node.
    pub node: u32,
    /// Zone type.
    pub kind: ZoneKind,
    /// 1-based line of the `Node N, zone NAME` header.
    pub line: usize,
    /// `pages free`.
    pub free_pages: Option<u64>,
    /// `boost` (added to every printed watermark), pages; 0 when absent.
    pub boost_pages: u64,
    /// `min` (with boost), pages.
    pub min_pages: u64,
    /// `low` (with boost), pages.
    pub low_pages: u64,
    /// `high` (with boost), pages.
    pub high_pages: u64,
    /// `promo` (with boost), pages, when printed.
    pub promo_pages: Option<u64>,
    /// `spanned`, pages.
    pub spanned_pages: Option<u64>,
    /// `present`, pages.
    pub present_pages: u64,
    /// `managed`, pages.
    pub managed_pages: u64,
    /// Per-CPU pagesets (empty for unpopulated zones).
    pub pagesets: Vec<PagesetRecord>,
}

impl ZoneRecord {
    /// The zone's geometry for the formulas.
    pub fn spec(&self) -> ZoneSpec {
        ZoneSpec {
            node: self.node,
            kind: self.kind,
            present_pages: self.present_pages,
            managed_pages: self.managed_pages,
        }
    }
}

/// A parsed `/proc/zoneinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneInfo {
    /// File name or label used in errors.
    pub source: String,
    /// Pageset format.
    pub format: ZoneinfoFormat,
    /// Every zone, in file order.
    pub zones: Vec<ZoneRecord>,
}

impl ZoneInfo {
    /// Node ids present in the file, sorted.
    pub fn nodes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.zones.iter().map(|z| z.node).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Distinct CPUs listed in any pageset.
    pub fn cpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .zones
            .iter()
            .flat_map(|z| z.pagesets.iter().map(|p| p.cpu))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[derive(Default)]
struct ZoneBuilder {
    node: u32,
    kind: Option<ZoneKind>,
    line: usize,
    fields: BTreeMap<&'static str, u64>,
    pagesets: Vec<PagesetBuilder>,
}

struct PagesetBuilder {
    cpu: u32,
    line: usize,
    fields: BTreeMap<&'static str, i64>,
}

const ZONE_FIELDS: &[&str] = &[
    "boost", "min", "low", "high", "promo", "spanned", "present", "managed",
];
const PAGESET_FIELDS: &[&str] = &["count", "high", "batch", "high_min", "high_max"];

fn strip_quote(line: &str) -> &str {
    let mut l = line;
    loop {
        let t = l.trim_start();
        if let Some(r) = t.strip_prefix('>') {
            l = r;
        } else {
            return l;
        }
    }
}

fn parse_num<T: std::str::FromStr>(text: &str, label: &str, line: usize, field: &str) -> Result<T> {
    let t = text.trim();
    if t.is_empty() {
        return Err(Error::parse(label, line, field, "value missing"));
    }
    t.parse::<T>()
        .map_err(|_| Error::parse(label, line, field, format!("'{t}' is not a valid number")))
}

/// Parses `/proc/zoneinfo` text; `label` names the file in errors.
pub fn parse_zoneinfo(text: &str, label: &str) -> Result<ZoneInfo> {
    let mut zones: Vec<ZoneBuilder> = Vec::new();
    let mut in_pagesets = false;
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = strip_quote(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("Node ") {
            // "Node 0, zone   Normal"
            let (node_txt, zone_part) = rest.split_once(',').ok_or_else(|| {
                Error::parse(label, lineno, "Node", "expected 'Node N, zone NAME'")
            })?;
            let node: u32 = parse_num(node_txt, label, lineno, "Node")?;
            let name = zone_part
                .trim()
                .strip_prefix("zone")
                .ok_or_else(|| Error::parse(label, lineno, "zone", "expected 'zone NAME'"))?
                .trim();
            let kind = ZoneKind::from_name(name).ok_or_else(|| {
                Error::parse(label, lineno, "zone", format!("unknown zone name '{name}'"))
            })?;
            zones.push(ZoneBuilder {
                node,
                kind: Some(kind),
                line: lineno,
                ..Default::default()
            });
            in_pagesets = false;
            continue;
        }
        let Some(zone) = zones.last_mut() else {
            return Err(Error::parse(
                label,
                lineno,
                "Node",
                "text before the first 'Node N, zone NAME' line",
            ));
        };
        if line == "pagesets" {
            in_pagesets = true;
            continue;
        }
        if line == "per-node stats" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("pages free") {
            let v: u64 = parse_num(rest, label, lineno, "pages free")?;
            zone.fields.insert("free", v);
            in_pagesets = false;
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            let key = key.trim();
            if key == "cpu" {
                if !in_pagesets {
                    return Err(Error::parse(
                        label,
                        lineno,
                        "cpu",
                        "'cpu:' outside 'pagesets'",
                    ));
                }
                let cpu: u32 = parse_num(value, label, lineno, "cpu")?;
                zone.pagesets.push(PagesetBuilder {
                    cpu,
                    line: lineno,
                    fields: BTreeMap::new(),
                });
                continue;
            }
            if let Some(f) = PAGESET_FIELDS.iter().find(|f| **f == key) {
                if !in_pagesets {
                    // e.g. a "high:" outside pagesets: not a zoneinfo line we know.
                    return Err(Error::parse(
                        label,
                        lineno,
                        key,
                        "pageset field outside 'pagesets'",
                    ));
                }
                let ps = zone.pagesets.last_mut().ok_or_else(|| {
                    Error::parse(label, lineno, key, "pageset field before any 'cpu: N' line")
                })?;
                let v: i64 = parse_num(value, label, lineno, key)?;
                if ps.fields.insert(f, v).is_some() {
                    return Err(Error::parse(
                        label,
                        lineno,
                        key,
                        format!("repeated for cpu {}", ps.cpu),
                    ));
                }
                continue;
            }
            // protection: (...), vm stats threshold, node_unreclaimable, start_pfn, ...
            continue;
        }
        // "name value" lines: watermarks and geometry, or counters to skip.
        let mut parts = line.split_whitespace();
        let (Some(key), value) = (parts.next(), parts.next()) else {
            continue;
        };
        if let Some(f) = ZONE_FIELDS.iter().find(|f| **f == key) {
            if in_pagesets {
                return Err(Error::parse(
                    label,
                    lineno,
                    key,
                    "zone field inside 'pagesets'",
                ));
            }
            let v: u64 = parse_num(value.unwrap_or(""), label, lineno, key)?;
            if parts.next().is_some() {
                return Err(Error::parse(label, lineno, key, "more than one value"));
            }
            zone.fields.insert(f, v);
        }
    }
    let mut out = Vec::with_capacity(zones.len());
    let mut has_minmax = None::<bool>;
    for z in zones {
        let kind = z.kind.unwrap_or(ZoneKind::Normal);
        let zname = format!("Node {}, zone {}", z.node, kind.name());
        let need = |f: &str| -> Result<u64> {
            z.fields.get(f).copied().ok_or_else(|| {
                Error::parse(
                    label,
                    z.line,
                    f,
                    format!("missing in '{zname}' (file truncated?)"),
                )
            })
        };
        let mut pagesets = Vec::with_capacity(z.pagesets.len());
        for p in &z.pagesets {
            let need_p = |f: &str| -> Result<i64> {
                p.fields.get(f).copied().ok_or_else(|| {
                    Error::parse(
                        label,
                        p.line,
                        f,
                        format!("missing for cpu {} of '{zname}' (file truncated?)", p.cpu),
                    )
                })
            };
            let record = PagesetRecord {
                cpu: p.cpu,
                line: p.line,
                count_pages: need_p("count")?,
                high_pages: need_p("high")?,
                batch_pages: need_p("batch")?,
                high_min_pages: p.fields.get("high_min").copied(),
                high_max_pages: p.fields.get("high_max").copied(),
            };
            let this = match (record.high_min_pages, record.high_max_pages) {
                (Some(_), Some(_)) => true,
                (None, None) => false,
                (Some(_), None) => {
                    return Err(Error::parse(
                        label,
                        p.line,
                        "high_max",
                        format!(
                            "missing for cpu {} of '{zname}' (high_min is present)",
                            p.cpu
                        ),
                    ))
                }
                (None, Some(_)) => {
                    return Err(Error::parse(
                        label,
                        p.line,
                        "high_min",
                        format!(
                            "missing for cpu {} of '{zname}' (high_max is present)",
                            p.cpu
                        ),
                    ))
                }
            };
            match has_minmax {
                None => has_minmax = Some(this),
                Some(prev) if prev != this => {
                    return Err(Error::parse(
                        label,
                        p.line,
                        "high_min",
                        "mixes the pre-6.13 and the 6.13+ pageset formats",
                    ))
                }
                _ => {}
            }
            pagesets.push(record);
        }
        out.push(ZoneRecord {
            node: z.node,
            kind,
            line: z.line,
            free_pages: z.fields.get("free").copied(),
            boost_pages: z.fields.get("boost").copied().unwrap_or(0),
            min_pages: need("min")?,
            low_pages: need("low")?,
            high_pages: need("high")?,
            promo_pages: z.fields.get("promo").copied(),
            spanned_pages: z.fields.get("spanned").copied(),
            present_pages: need("present")?,
            managed_pages: need("managed")?,
            pagesets,
        });
    }
    if out.is_empty() {
        return Err(Error::parse(
            label,
            0,
            "Node",
            "no 'Node N, zone NAME' line: not a /proc/zoneinfo file",
        ));
    }
    let format = match has_minmax {
        Some(true) => ZoneinfoFormat::WithHighMinMax,
        Some(false) => ZoneinfoFormat::Classic,
        None => ZoneinfoFormat::Unknown,
    };
    Ok(ZoneInfo {
        source: label.to_string(),
        format,
        zones: out,
    })
}

/// Reads and parses a zoneinfo file.
pub fn read_zoneinfo(path: &std::path::Path) -> Result<ZoneInfo> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(&label, e))?;
    parse_zoneinfo(&text, &label)
}

/// Parses a kernel CPU list such as `0-3,8,10-11` (sysfs `cpulist`); empty text is no CPU.
pub fn parse_cpulist(text: &str, label: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = parse_num(a, label, 1, "cpulist")?;
            let b: u32 = parse_num(b, label, 1, "cpulist")?;
            if b < a || b - a > 1 << 16 {
                return Err(Error::parse(
                    label,
                    1,
                    "cpulist",
                    format!("bad range '{part}'"),
                ));
            }
            out.extend(a..=b);
        } else {
            out.push(parse_num(part, label, 1, "cpulist")?);
        }
    }
    Ok(out)
}

/// CPUs per node for the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpusPerNode {
    /// The same count on every node.
    Uniform(u32),
    /// Per node id (index = node).
    PerNode(Vec<u32>),
}

impl CpusPerNode {
    fn get(&self, node: u32) -> Option<u32> {
        match self {
            CpusPerNode::Uniform(n) => Some(*n),
            CpusPerNode::PerNode(v) => v.get(node as usize).copied(),
        }
    }
}

/// Settings of the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckOptions {
    /// Kernel version that wrote the file.
    pub version: KernelVersion,
    /// CPUs per node.
    pub cpus_per_node: CpusPerNode,
    /// THP mode; None tries the khugepaged raise and the sqrt rule and reports which matched.
    pub thp: Option<ThpMode>,
    /// `vm.percpu_pagelist_high_fraction` (>= 5.14).
    pub percpu_pagelist_high_fraction: u32,
    /// `vm.percpu_pagelist_fraction` (<= 5.13).
    pub percpu_pagelist_fraction: u32,
    /// `vm.watermark_scale_factor`.
    pub watermark_scale_factor: u64,
}

impl CheckOptions {
    /// Defaults for a version and a CPU count: THP auto, no sysctl changed.
    pub fn new(version: KernelVersion, cpus_per_node: CpusPerNode) -> Self {
        CheckOptions {
            version,
            cpus_per_node,
            thp: None,
            percpu_pagelist_high_fraction: 0,
            percpu_pagelist_fraction: 0,
            watermark_scale_factor: DEFAULT_WATERMARK_SCALE_FACTOR,
        }
    }
}

/// A value read from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FileValue {
    /// One number.
    Single(i64),
    /// Lowest and highest over several CPUs.
    Range(i64, i64),
}

impl std::fmt::Display for FileValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileValue::Single(v) => write!(f, "{v}"),
            FileValue::Range(a, b) if a == b => write!(f, "{a}"),
            FileValue::Range(a, b) => write!(f, "{a}..{b}"),
        }
    }
}

/// What the formulas give for a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Expected {
    /// One number.
    Exact {
        /// The value, pages.
        pages: i64,
    },
    /// The live `pcp->high` from 6.7: 0 or within the bounds.
    LiveRange {
        /// `high_min`, pages.
        high_min_pages: i64,
        /// `high_max`, pages.
        high_max_pages: i64,
    },
    /// Taken from the file (hand-set `min_free_kbytes`).
    Given,
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Exact { pages } => write!(f, "{pages}"),
            Expected::LiveRange {
                high_min_pages,
                high_max_pages,
            } => write!(f, "0 or {high_min_pages}..{high_max_pages}"),
            Expected::Given => f.write_str("(given)"),
        }
    }
}

/// Outcome of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// The file value is the recomputed one.
    Match,
    /// It is not.
    Mismatch,
    /// The value was taken from the file, not checked.
    Given,
    /// A live value inside its allowed range.
    Live,
}

impl CheckStatus {
    /// Word for people.
    pub fn word(self) -> &'static str {
        match self {
            CheckStatus::Match => "match",
            CheckStatus::Mismatch => "MISMATCH",
            CheckStatus::Given => "given",
            CheckStatus::Live => "live",
        }
    }
}

/// One row of the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRow {
    /// NUMA node.
    pub node: u32,
    /// Zone name.
    pub zone: ZoneKind,
    /// What is compared: `min`, `low`, `high`, `promo`, `batch`, `pcp_high`, `pcp_high_min`,
    /// `pcp_high_max`, `pcp_high_live`.
    pub quantity: &'static str,
    /// CPUs the row covers (`all`, or a list) for pageset values; None for zone values.
    pub cpus: Option<String>,
    /// The file's value, pages.
    pub file: FileValue,
    /// The recomputed value, pages.
    pub recomputed: Expected,
    /// The outcome.
    pub status: CheckStatus,
}

/// How `min_free_kbytes` was matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MinFreeMatch {
    /// The rule that reproduced every zone's `min` (`Given` when none did).
    pub rule: MinFreeRule,
    /// Details of the rule, for people.
    pub detail: String,
    /// The matching `min_free_kbytes` (None when given).
    pub min_free_kbytes: Option<u64>,
    /// The `min_free_kbytes` range (kB, inclusive) that reproduces the file's `min` values,
    /// when `min` was taken as given and such a range exists.
    pub consistent_min_free_kbytes: Option<(u64, u64)>,
    /// Every candidate tried: (rule description, kB).
    pub tried: Vec<(String, u64)>,
}

/// The result of [`check_zoneinfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneinfoCheck {
    /// Kernel version used.
    pub version: KernelVersion,
    /// File format found.
    pub format: ZoneinfoFormat,
    /// How `min_free_kbytes` was matched.
    pub min_free: MinFreeMatch,
    /// One row per compared value.
    pub rows: Vec<CheckRow>,
    /// Caveats for people.
    pub notes: Vec<String>,
}

impl ZoneinfoCheck {
    /// True when no row is a mismatch.
    pub fn all_match(&self) -> bool {
        self.rows.iter().all(|r| r.status != CheckStatus::Mismatch)
    }

    /// Number of mismatching rows.
    pub fn mismatches(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.status == CheckStatus::Mismatch)
            .count()
    }
}

fn cpu_list_text(cpus: &[u32], all: usize) -> String {
    if cpus.len() == all {
        return "all".to_string();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// The range of `pages_min` (= `min_free_kbytes >> 2`) that reproduces every lowmem zone's
/// `min` (file value minus boost), when one exists.
fn infer_pages_min(
    info: &ZoneInfo,
    specs: &[ZoneSpec],
    version: KernelVersion,
) -> Option<(u64, u64)> {
    let lowmem = lowmem_pages(specs, version);
    if lowmem == 0 {
        return None;
    }
    let probe: Vec<(&ZoneRecord, &ZoneSpec)> = info
        .zones
        .iter()
        .zip(specs)
        .filter(|(z, s)| {
            s.is_populated() && !matches!(z.kind, ZoneKind::HighMem | ZoneKind::Movable)
        })
        .collect();
    let (big, _) = probe.iter().max_by_key(|(_, s)| s.managed_pages)?;
    let m = u128::from(big.min_pages.saturating_sub(big.boost_pages));
    // floor(p * M / L) == m  <=>  p in [ceil(m L / M), ceil((m + 1) L / M) - 1]
    let managed = u128::from(big.managed_pages);
    let l = u128::from(lowmem);
    let lo = (m * l).div_ceil(managed);
    let hi = ((m + 1) * l).div_ceil(managed).saturating_sub(1);
    let mut found: Option<(u64, u64)> = None;
    let mut p = lo;
    while p <= hi && p <= lo + 1_000_000 {
        let ok = probe.iter().all(|(z, s)| {
            (p * u128::from(s.managed_pages)) / l
                == u128::from(z.min_pages.saturating_sub(z.boost_pages))
        });
        if ok {
            let pv = u64::try_from(p).ok()?;
            found = Some(found.map_or((pv, pv), |(a, _)| (a, pv)));
        }
        p += 1;
    }
    found
}

/// Checks a parsed zoneinfo against the kernel's formulas (see the module documentation).
pub fn check_zoneinfo(info: &ZoneInfo, opts: &CheckOptions) -> Result<ZoneinfoCheck> {
    let v = opts.version;
    let label = info.source.as_str();
    match info.format {
        ZoneinfoFormat::WithHighMinMax if !v.zoneinfo_has_high_min_max() => {
            return Err(Error::invalid(
                label,
                "high_min",
                format!("the file prints high_min/high_max (6.13+ format) but the kernel is {v}"),
            ))
        }
        ZoneinfoFormat::Classic if v.zoneinfo_has_high_min_max() => {
            return Err(Error::invalid(
                label,
                "high_min",
                format!(
                    "kernel {v} prints high_min/high_max but the file has none (pre-6.13 format)"
                ),
            ))
        }
        _ => {}
    }
    let tunables = PagesetTunables {
        percpu_pagelist_high_fraction: opts.percpu_pagelist_high_fraction,
        percpu_pagelist_fraction: opts.percpu_pagelist_fraction,
    };
    tunables.validate(v)?;
    let wsf = opts.watermark_scale_factor;
    let specs: Vec<ZoneSpec> = info.zones.iter().map(ZoneRecord::spec).collect();
    let online_cpus = info.cpus().len() as u32;

    // 1. min_free_kbytes: candidates in order.
    let boot = |thp: ThpMode| -> Result<u64> {
        let options = KernelOptions {
            thp,
            watermark_scale_factor: wsf,
            percpu_pagelist_high_fraction: 0,
            percpu_pagelist_fraction: 0,
            pcp_batch_scale_max: None,
            min_free_kbytes: None,
        };
        // configure_zones needs CPU counts only for pagesets; give 1 per node here.
        let ones = vec![1; specs.iter().map(|s| s.node as usize + 1).max().unwrap_or(1)];
        Ok(
            configure_zones(&specs, &ones, online_cpus.max(1), v, options)?
                .min_free
                .min_free_kbytes,
        )
    };
    let file_highs: Vec<u64> = info
        .zones
        .iter()
        .map(|z| z.high_pages.saturating_sub(z.boost_pages))
        .collect();
    let nfbp_now = nr_free_buffer_pages(&specs, Some(&file_highs));
    let sqrt_now = calculate_min_free_kbytes(nfbp_now * 4, v);
    let thp_now = set_recommended_min_free_kbytes(thp_nr_zones(&specs), nfbp_now).max(sqrt_now);
    let sqrt_boot = boot(ThpMode::Never)?;
    let thp_boot = boot(ThpMode::Always)?;
    let mut candidates: Vec<(MinFreeRule, String, u64)> = Vec::new();
    let try_thp = opts.thp.is_none_or(ThpMode::raises_min_free);
    let try_sqrt = opts.thp.is_none_or(|t| !t.raises_min_free());
    if try_thp && thp_boot != sqrt_boot {
        candidates.push((
            MinFreeRule::ThpRaise,
            format!(
                "khugepaged raise at boot ({} zones <= Normal)",
                thp_nr_zones(&specs)
            ),
            thp_boot,
        ));
    }
    if try_sqrt || thp_boot == sqrt_boot {
        candidates.push((
            MinFreeRule::Sqrt,
            "int_sqrt(16 * lowmem kB) at boot".to_string(),
            sqrt_boot,
        ));
    }
    if try_thp && thp_now != sqrt_now {
        candidates.push((
            MinFreeRule::ThpRaise,
            "khugepaged raise, nr_free_buffer_pages from the file's high watermarks".to_string(),
            thp_now,
        ));
    }
    if try_sqrt || thp_now == sqrt_now {
        candidates.push((
            MinFreeRule::Sqrt,
            "int_sqrt(16 * lowmem kB), nr_free_buffer_pages from the file's high watermarks \
             (recomputed after boot, e.g. memory hotplug)"
                .to_string(),
            sqrt_now,
        ));
    }
    let mins_match = |wm: &[Watermarks]| {
        info.zones.iter().zip(wm).all(|(z, w)| {
            !z.spec().is_populated() || z.min_pages.saturating_sub(z.boost_pages) == w.min_pages
        })
    };
    let mut chosen: Option<(MinFreeRule, String, u64, Vec<Watermarks>)> = None;
    for (rule, detail, kb) in &candidates {
        let wm = setup_per_zone_wmarks(&specs, *kb, wsf, v)?;
        if mins_match(&wm) {
            chosen = Some((*rule, detail.clone(), *kb, wm));
            break;
        }
    }
    let tried: Vec<(String, u64)> = candidates
        .iter()
        .map(|(r, d, k)| (format!("{}: {d}", r.name()), *k))
        .collect();
    let mut notes = Vec::new();
    let (min_free, computed_wm) = match chosen {
        Some((rule, detail, kb, wm)) => (
            MinFreeMatch {
                rule,
                detail,
                min_free_kbytes: Some(kb),
                consistent_min_free_kbytes: None,
                tried,
            },
            Some(wm),
        ),
        None => {
            let p = infer_pages_min(info, &specs, v);
            notes.push(format!(
                "no rule reproduces the zones' min (tried {}): min_free_kbytes looks set by hand; \
                 min taken as given{}",
                candidates
                    .iter()
                    .map(|(r, _, k)| format!("{} {k} kB", r.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
                p.map_or(String::new(), |(a, b)| format!(
                    " (consistent with min_free_kbytes {}..{} kB)",
                    a * 4,
                    b * 4 + 3
                )),
            ));
            (
                MinFreeMatch {
                    rule: MinFreeRule::Given,
                    detail: "min taken from the file".to_string(),
                    min_free_kbytes: None,
                    consistent_min_free_kbytes: p.map(|(a, b)| (a * 4, b * 4 + 3)),
                    tried,
                },
                None,
            )
        }
    };

    // 2. Per zone.
    let lowmem = lowmem_pages(&specs, v);
    let mut rows = Vec::new();
    for (i, z) in info.zones.iter().enumerate() {
        let spec = &specs[i];
        if !spec.is_populated() {
            continue;
        }
        let boost = z.boost_pages as i64;
        let row = |quantity: &'static str, file: i64, expected: Expected| {
            let status = match expected {
                Expected::Exact { pages } if pages == file => CheckStatus::Match,
                Expected::Exact { .. } => CheckStatus::Mismatch,
                Expected::Given => CheckStatus::Given,
                Expected::LiveRange { .. } => CheckStatus::Live,
            };
            CheckRow {
                node: z.node,
                zone: z.kind,
                quantity,
                cpus: None,
                file: FileValue::Single(file),
                recomputed: expected,
                status,
            }
        };
        // Watermarks: computed, or from the file's min when given.
        let wm: Option<Watermarks> = match &computed_wm {
            Some(wm) => wm.get(i).copied(),
            None => {
                let min_no_boost = z.min_pages.saturating_sub(z.boost_pages);
                let is_low = !matches!(z.kind, ZoneKind::HighMem | ZoneKind::Movable)
                    || (z.kind == ZoneKind::Movable && !v.movable_watermarks_like_highmem());
                let pages_min = if is_low {
                    // tmp == min for lowmem zones: rebuild pages_min-free watermarks from min.
                    None
                } else {
                    min_free.consistent_min_free_kbytes.map(|(a, _)| a / 4)
                };
                match (is_low, pages_min) {
                    (true, _) => {
                        let delta = (min_no_boost >> 2).max(
                            (spec.managed_pages / 10_000) * wsf
                                + (spec.managed_pages % 10_000) * wsf / 10_000,
                        );
                        Some(Watermarks {
                            min_pages: min_no_boost,
                            low_pages: min_no_boost + delta,
                            high_pages: min_no_boost + 2 * delta,
                            promo_pages: v
                                .has_promo_watermark()
                                .then_some(min_no_boost + 3 * delta),
                        })
                    }
                    (false, Some(p)) => Some(zone_watermarks(spec, p, lowmem, wsf, v)),
                    (false, None) => None,
                }
            }
        };
        let given = computed_wm.is_none();
        match wm {
            Some(w) => {
                rows.push(row(
                    "min",
                    z.min_pages as i64,
                    if given {
                        Expected::Given
                    } else {
                        Expected::Exact {
                            pages: w.min_pages as i64 + boost,
                        }
                    },
                ));
                rows.push(row(
                    "low",
                    z.low_pages as i64,
                    Expected::Exact {
                        pages: w.low_pages as i64 + boost,
                    },
                ));
                rows.push(row(
                    "high",
                    z.high_pages as i64,
                    Expected::Exact {
                        pages: w.high_pages as i64 + boost,
                    },
                ));
                if let Some(p) = z.promo_pages {
                    rows.push(row(
                        "promo",
                        p as i64,
                        match w.promo_pages {
                            Some(e) => Expected::Exact {
                                pages: e as i64 + boost,
                            },
                            None => Expected::Exact { pages: -1 },
                        },
                    ));
                }
            }
            None => {
                for (q, f) in [
                    ("min", z.min_pages),
                    ("low", z.low_pages),
                    ("high", z.high_pages),
                ] {
                    rows.push(row(q, f as i64, Expected::Given));
                }
            }
        }

        // Pagesets. The low watermark used by zone_highsize() is the file's (minus boost).
        let cpus_on_node = opts.cpus_per_node.get(z.node).ok_or_else(|| {
            Error::invalid(
                label,
                "cpus_per_node",
                format!("no CPU count for node {} (line {})", z.node, z.line),
            )
        })?;
        let low_for_high = match (&computed_wm, wm) {
            (Some(_), Some(w)) => w.low_pages,
            _ => z.low_pages.saturating_sub(z.boost_pages),
        };
        let limits = zone_set_pageset_high_and_batch(
            PagesetInputs {
                managed_pages: spec.managed_pages,
                low_wmark_pages: low_for_high,
                cpus_on_node,
                online_cpus,
            },
            tunables,
            v,
        )?;
        if z.pagesets.is_empty() {
            continue;
        }
        let all = z.pagesets.len();
        let mut grouped =
            |quantity: &'static str, get: &dyn Fn(&PagesetRecord) -> Option<i64>, expected: i64| {
                let mut by_value: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
                for p in &z.pagesets {
                    if let Some(val) = get(p) {
                        by_value.entry(val).or_default().push(p.cpu);
                    }
                }
                for (val, mut cpus) in by_value {
                    cpus.sort_unstable();
                    rows.push(CheckRow {
                        node: z.node,
                        zone: z.kind,
                        quantity,
                        cpus: Some(cpu_list_text(&cpus, all)),
                        file: FileValue::Single(val),
                        recomputed: Expected::Exact { pages: expected },
                        status: if val == expected {
                            CheckStatus::Match
                        } else {
                            CheckStatus::Mismatch
                        },
                    });
                }
            };
        grouped(
            "batch",
            &|p| Some(p.batch_pages),
            i64::from(limits.batch_pages),
        );
        match limits.high {
            PcpHigh::Fixed { high_pages } => {
                grouped("pcp_high", &|p| Some(p.high_pages), i64::from(high_pages));
            }
            PcpHigh::AutoTuned {
                high_min_pages,
                high_max_pages,
            } => {
                let (hmin, hmax) = (i64::from(high_min_pages), i64::from(high_max_pages));
                grouped("pcp_high_min", &|p| p.high_min_pages, hmin);
                grouped("pcp_high_max", &|p| p.high_max_pages, hmax);
                // 4 x batch: the floor a vm.percpu_pagelist_high_fraction sweep leaves in an idle zone (decay never raises high).
                let in_range = |h: i64, b: i64| h == 0 || h == 4 * b || (hmin <= h && h <= hmax);
                let (ok, bad): (Vec<&PagesetRecord>, Vec<&PagesetRecord>) = z
                    .pagesets
                    .iter()
                    .partition(|p| in_range(p.high_pages, p.batch_pages));
                let expected = Expected::LiveRange {
                    high_min_pages: hmin,
                    high_max_pages: hmax,
                };
                if !ok.is_empty() {
                    let lo = ok.iter().map(|p| p.high_pages).min().unwrap_or(0);
                    let hi = ok.iter().map(|p| p.high_pages).max().unwrap_or(0);
                    let mut cpus: Vec<u32> = ok.iter().map(|p| p.cpu).collect();
                    cpus.sort_unstable();
                    rows.push(CheckRow {
                        node: z.node,
                        zone: z.kind,
                        quantity: "pcp_high_live",
                        cpus: Some(cpu_list_text(&cpus, all)),
                        file: FileValue::Range(lo, hi),
                        recomputed: expected,
                        status: CheckStatus::Live,
                    });
                }
                for p in bad {
                    rows.push(CheckRow {
                        node: z.node,
                        zone: z.kind,
                        quantity: "pcp_high_live",
                        cpus: Some(p.cpu.to_string()),
                        file: FileValue::Single(p.high_pages),
                        recomputed: expected,
                        status: CheckStatus::Mismatch,
                    });
                }
            }
        }
    }
    if rows.is_empty() {
        notes.push("no populated zone in the file: nothing to check".to_string());
    }
    if v.era().auto_tunes_high() {
        notes.push(
            "pcp high on 6.7+ is the live auto-tuned pcp->high: checked as 0 (never used) or \
             within [high_min, high_max]"
                .to_string(),
        );
    } else {
        notes.push(
            "pcp high before 6.7 is fixed: it equals the computed value unless \
             vm.percpu_pagelist_(high_)fraction was changed"
                .to_string(),
        );
    }
    Ok(ZoneinfoCheck {
        version: v,
        format: info.format,
        min_free,
        rows,
        notes,
    })
}
