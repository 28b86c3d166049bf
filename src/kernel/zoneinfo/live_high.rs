//! Where a live `pcp->high` stands against its bounds.

use serde::Serialize;

/// Where a live `pcp->high` (6.7+) stands against the CPU's `high_min` / `high_max`, by the
/// kernel's update rules (mm/page_alloc.c, 6.7 to 6.18):
/// - `per_cpu_pages_init()` memsets the pageset: `high` starts at 0.
/// - `pageset_update()` (from `zone_set_pageset_high_and_batch()`, on memory hotplug, a
///   min_free_kbytes / watermark_scale_factor / percpu_pagelist_high_fraction write, CPU
///   hotplug) writes `batch`, `high_min`, `high_max` only, never `high`.
/// - `nr_pcp_alloc()` (a refill) and `nr_pcp_high()` (a free) first clamp `high` to
///   `[high_min, high_max]`, then move it inside them.
/// - `decay_pcp_high()` (vmstat, about once a second) acts only on a `high` above `high_min`
///   and lowers it by 1/8, never below `high_min`.
///
/// So `high` is 0 until the CPU's first refill or free in the zone, inside the bounds after
/// one, and outside them only when the bounds moved after the CPU's last refill or free.
/// Every non-zero `high` the kernel writes is at least some `high_min`, and `zone_highsize()`
/// never gives less than `batch << 2` with `batch >= 1`: 1..=3 is impossible. Every `high`
/// written is at most some `high_max`, at most `managed / 8` (the smallest
/// `percpu_pagelist_high_fraction`, one CPU) or `4 * 63` pages: above `zone_pages / 8` (and
/// 252) is impossible too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveHigh {
    /// 0 (never used) or within `[high_min, high_max]`.
    InRange,
    /// Non-zero and below `high_min`: `high_min` rose after the CPU's last refill or free.
    BelowMin,
    /// Above `high_max`: `high_max` fell after the CPU's last refill or free.
    AboveMax,
    /// No sequence of kernel updates gives this value.
    Impossible,
}

impl LiveHigh {
    /// For people: how the kernel gets there, or why it cannot.
    pub fn reason(self, zone_pages: u64) -> String {
        match self {
            LiveHigh::InRange => "0 (never used) or within [high_min, high_max]".to_string(),
            LiveHigh::BelowMin => "below high_min: high_min rose (min_free_kbytes or \
                watermark_scale_factor raised, e.g. by khugepaged; memory hot-added; a CPU \
                went offline; vm.percpu_pagelist_high_fraction written) after this CPU's last \
                refill or free in the zone. pageset_update() does not touch pcp->high, \
                decay_pcp_high() only lowers a high above high_min, and the next refill \
                (nr_pcp_alloc) or free (nr_pcp_high) clamps it up"
                .to_string(),
            LiveHigh::AboveMax => "above high_max: high_max fell (a CPU came online, memory \
                offlined, vm.percpu_pagelist_high_fraction written) after this CPU's last \
                refill or free in the zone; the next refill or free clamps it to high_max and \
                decay_pcp_high() lowers it by 1/8 per vmstat tick"
                .to_string(),
            LiveHigh::Impossible => format!(
                "no kernel update gives this pcp->high: every non-zero high is at least \
                 batch << 2 = 4 pages and at most max(zone pages / 8, 252) = {} pages",
                live_high_ceiling(zone_pages)
            ),
        }
    }
}

fn live_high_ceiling(zone_pages: u64) -> i64 {
    i64::try_from(zone_pages / 8)
        .unwrap_or(i64::MAX)
        .max(4 * 63)
}

/// Classifies a live `pcp->high` (6.7+) against the CPU's `high_min` and `high_max`;
/// `zone_pages` is the zone's spanned (else present) pages. See [`LiveHigh`].
pub fn classify_live_high(high: i64, high_min: i64, high_max: i64, zone_pages: u64) -> LiveHigh {
    // A clamp with high_min > high_max (a huge watermark_scale_factor on a small zone) lands
    // on either bound: both ends are in range.
    let (lo, hi) = (high_min.min(high_max), high_min.max(high_max));
    if high == 0 || (lo <= high && high <= hi) {
        LiveHigh::InRange
    } else if !(4..=live_high_ceiling(zone_pages)).contains(&high) {
        LiveHigh::Impossible
    } else if high < lo {
        LiveHigh::BelowMin
    } else {
        LiveHigh::AboveMax
    }
}
