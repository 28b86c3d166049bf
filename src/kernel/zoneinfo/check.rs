//! Checking a parsed zoneinfo against the kernel's formulas.

use super::live_high::{classify_live_high, LiveHigh};
use super::parse::{PagesetRecord, ZoneInfo, ZoneRecord, ZoneinfoFormat};
use super::report::{
    cpu_list_text, CheckRow, CheckStatus, Expected, FileValue, MinFreeMatch, ZoneinfoCheck,
};

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
    pub(super) fn get(&self, node: u32) -> Option<u32> {
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
    if opts.cpus_per_node == CpusPerNode::Uniform(0) && !info.cpus().is_empty() {
        return Err(Error::invalid(
            label,
            "cpus_per_node",
            format!(
                "0 CPUs on every node, but the file lists {} CPU(s) in its pagesets",
                info.cpus().len()
            ),
        ));
    }
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
                explanation: None,
            }
        };
        if !spec.is_populated() {
            // A zone with present but no managed pages gets no share of min_free_kbytes (the
            // share is managed / lowmem pages): its min is 0. A file that says otherwise is
            // inconsistent, not a zone to skip silently.
            if spec.present_pages > 0 {
                rows.push(row("min", z.min_pages as i64, Expected::Exact { pages: 0 }));
            }
            continue;
        }
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
                        explanation: None,
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
                let expected = Expected::LiveRange {
                    high_min_pages: hmin,
                    high_max_pages: hmax,
                };
                // The kernel clamps with the CPU's own high_min/high_max: the printed ones
                // (6.13+) when the file has them, else the recomputed ones.
                let zone_pages = z.spanned_pages.unwrap_or(z.present_pages);
                let mut by_class: BTreeMap<LiveHigh, Vec<&PagesetRecord>> = BTreeMap::new();
                for p in &z.pagesets {
                    let (lo, hi) = (
                        p.high_min_pages.unwrap_or(hmin),
                        p.high_max_pages.unwrap_or(hmax),
                    );
                    by_class
                        .entry(classify_live_high(p.high_pages, lo, hi, zone_pages))
                        .or_default()
                        .push(p);
                }
                let used = z.pagesets.iter().filter(|p| p.high_pages != 0).count();
                let outside: usize = by_class
                    .iter()
                    .filter(|(c, _)| matches!(c, LiveHigh::BelowMin | LiveHigh::AboveMax))
                    .map(|(_, ps)| ps.len())
                    .sum();
                // Only a pre-6.13 file leaves the bounds unprinted: there a wrong CPU count
                // would hide behind this rule.
                let unprinted = z.pagesets.iter().all(|p| p.high_min_pages.is_none());
                if unprinted && used > 1 && outside == used {
                    notes.push(format!(
                        "node {} {}: every used CPU's pcp->high is outside [high_min, high_max] \
                         computed for {cpus_on_node} CPUs on the node; the kernel allows it after \
                         the bounds moved, but check --cpus-per-node and the kernel version",
                        z.node,
                        z.kind.name()
                    ));
                }
                for (class, ps) in by_class {
                    let lo = ps.iter().map(|p| p.high_pages).min().unwrap_or(0);
                    let hi = ps.iter().map(|p| p.high_pages).max().unwrap_or(0);
                    let mut cpus: Vec<u32> = ps.iter().map(|p| p.cpu).collect();
                    cpus.sort_unstable();
                    let (status, explanation) = match class {
                        LiveHigh::InRange => (CheckStatus::Live, None),
                        LiveHigh::Impossible => (
                            CheckStatus::Mismatch,
                            Some(class.reason(zone_pages).to_string()),
                        ),
                        _ => (
                            CheckStatus::LiveExplained,
                            Some(class.reason(zone_pages).to_string()),
                        ),
                    };
                    rows.push(CheckRow {
                        node: z.node,
                        zone: z.kind,
                        quantity: "pcp_high_live",
                        cpus: Some(cpu_list_text(&cpus, all)),
                        file: FileValue::Range(lo, hi),
                        recomputed: expected,
                        status,
                        explanation,
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
            "pcp high on 6.7+ is the live auto-tuned pcp->high, updated lazily: 0 (never used), \
             within [high_min, high_max], or outside them after the bounds moved and before this \
             CPU's next refill or free in the zone ('live, explained'); only a value no kernel \
             update produces is a mismatch"
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
