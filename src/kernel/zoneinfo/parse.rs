//! Parsing `/proc/zoneinfo` and CPU lists.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::layout::{ZoneKind, ZoneSpec};

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
    /// `start_pfn` (first page frame of the zone's span), when printed.
    pub start_pfn: Option<u64>,
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
    field_lines: BTreeMap<&'static str, usize>,
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

/// Highest node id + 1 the kernel can have on x86-64 (`MAX_NUMNODES`, `NODES_SHIFT` at most 10).
pub const MAX_NUMNODES: u32 = 1 << 10;
/// Highest CPU id + 1 the kernel can have on x86-64 (`NR_CPUS` at most 8192 with MAXSMP).
pub const MAX_NR_CPUS: u32 = 8192;
/// Largest page count a zone can have on x86-64: 52-bit physical addresses in 4 KiB pages.
pub const MAX_ZONE_PAGES: u64 = 1 << 40;
/// Largest per-CPU pageset value: they are C `int`s, printed with `%i`, and never negative.
pub const MAX_PAGESET_VALUE: i64 = i32::MAX as i64;

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

fn check_pages(v: u64, label: &str, line: usize, field: &str) -> Result<()> {
    if v > MAX_ZONE_PAGES {
        return Err(Error::parse(
            label,
            line,
            field,
            format!(
                "{v} pages is more than a zone can hold on x86-64 ({MAX_ZONE_PAGES} pages: \
                 52-bit physical addresses, 4 KiB pages)"
            ),
        ));
    }
    Ok(())
}

fn parse_num<T: std::str::FromStr>(text: &str, label: &str, line: usize, field: &str) -> Result<T> {
    let t = text.trim();
    if t.is_empty() {
        return Err(Error::parse(label, line, field, "value missing"));
    }
    t.parse::<T>()
        .map_err(|_| Error::parse(label, line, field, format!("'{t}' is not a valid number")))
}

/// Checks a `key: value` line the checker does not read: `protection: (a, b, ...)` holds
/// non-negative integers (`lowmem_reserve[]`, printed with `%ld`, never negative); every other
/// such line (`vm stats threshold`, `node_unreclaimable`, `start_pfn`, ...) one unsigned number.
fn check_unread_colon(key: &str, value: &str, label: &str, line: usize) -> Result<()> {
    if key == "protection" {
        let inner = value
            .trim()
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| {
                Error::parse(
                    label,
                    line,
                    key,
                    "expected '(N, N, ...)', one number per zone",
                )
            })?;
        for part in inner.split(',') {
            parse_num::<u64>(part, label, line, key)?;
        }
        return Ok(());
    }
    one_unsigned(value, label, line, key)
}

/// Checks that `rest` (what follows a field's name) holds one unsigned number, as the kernel
/// prints every counter; nothing at all is a line cut short.
fn one_unsigned(rest: &str, label: &str, line: usize, key: &str) -> Result<()> {
    let mut parts = rest.split_whitespace();
    let Some(v) = parts.next() else {
        return Err(Error::parse(
            label,
            line,
            key,
            "a name without a value (a line cut short: file truncated?)",
        ));
    };
    parse_num::<u64>(v, label, line, key)?;
    if parts.next().is_some() {
        return Err(Error::parse(label, line, key, "more than one value"));
    }
    Ok(())
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
            if node >= MAX_NUMNODES {
                return Err(Error::parse(
                    label,
                    lineno,
                    "Node",
                    format!(
                        "node {node} is not a node id the kernel can have \
                         (MAX_NUMNODES is at most {MAX_NUMNODES} on x86-64)"
                    ),
                ));
            }
            let name = zone_part
                .trim()
                .strip_prefix("zone")
                .ok_or_else(|| Error::parse(label, lineno, "zone", "expected 'zone NAME'"))?
                .trim();
            let kind = ZoneKind::from_name(name).ok_or_else(|| {
                Error::parse(label, lineno, "zone", format!("unknown zone name '{name}'"))
            })?;
            if let Some(first) = zones
                .iter()
                .find(|z| z.node == node && z.kind == Some(kind))
            {
                return Err(Error::parse(
                    label,
                    lineno,
                    "zone",
                    format!(
                        "'Node {node}, zone {}' appears twice (first at line {}): the kernel \
                         prints each zone once; two files pasted together?",
                        kind.name(),
                        first.line
                    ),
                ));
            }
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
            check_pages(v, label, lineno, "pages free")?;
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
                if cpu >= MAX_NR_CPUS {
                    return Err(Error::parse(
                        label,
                        lineno,
                        "cpu",
                        format!(
                            "cpu {cpu} is not a CPU id the kernel can have \
                             (NR_CPUS is at most {MAX_NR_CPUS} on x86-64)"
                        ),
                    ));
                }
                if let Some(first) = zone.pagesets.iter().find(|p| p.cpu == cpu) {
                    return Err(Error::parse(
                        label,
                        lineno,
                        "cpu",
                        format!(
                            "cpu {cpu} listed twice in this zone (first at line {})",
                            first.line
                        ),
                    ));
                }
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
                if !(0..=MAX_PAGESET_VALUE).contains(&v) {
                    return Err(Error::parse(
                        label,
                        lineno,
                        key,
                        format!(
                            "{v} is outside 0..={MAX_PAGESET_VALUE}: the kernel prints a \
                             non-negative C int here"
                        ),
                    ));
                }
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
            if key == "start_pfn" {
                let v: u64 = parse_num(value, label, lineno, "start_pfn")?;
                zone.fields.insert("start_pfn", v);
                continue;
            }
            // protection: (...), vm stats threshold, node_unreclaimable, ...: not read, but a
            // value the kernel cannot print means the text is not a zoneinfo.
            check_unread_colon(key, value, label, lineno)?;
            continue;
        }
        // "name value" lines: watermarks and geometry, or counters to skip.
        let mut parts = line.split_whitespace();
        let (Some(key), value) = (parts.next(), parts.next()) else {
            continue;
        };
        if !ZONE_FIELDS.contains(&key) {
            // A counter (nr_free_pages, numa_hit, ...): not read, but the kernel prints each as
            // one unsigned number.
            one_unsigned(&line[key.len()..], label, lineno, key)?;
            continue;
        }
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
            check_pages(v, label, lineno, key)?;
            zone.fields.insert(f, v);
            zone.field_lines.insert(f, lineno);
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
        let (present, managed) = (need("present")?, need("managed")?);
        let at = |f: &str| z.field_lines.get(f).copied().unwrap_or(z.line);
        if managed > present {
            return Err(Error::parse(
                label,
                at("managed"),
                "managed",
                format!(
                    "managed {managed} pages exceeds present {present} in '{zname}': the kernel \
                     manages only pages that are present"
                ),
            ));
        }
        if let Some(spanned) = z.fields.get("spanned").copied() {
            if present > spanned {
                return Err(Error::parse(
                    label,
                    at("present"),
                    "present",
                    format!(
                        "present {present} pages exceeds spanned {spanned} in '{zname}': \
                         present pages lie inside the zone's span"
                    ),
                ));
            }
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
            start_pfn: z.fields.get("start_pfn").copied(),
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
    let text = crate::input::read_text(path, &label, crate::input::MAX_TEXT_BYTES)?;
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
