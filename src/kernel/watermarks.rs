//! Zone watermarks and `min_free_kbytes`, as the kernel computes them at boot.
//!
//! # Equations (4 KiB pages, C truncating division)
//! 1. `calculate_min_free_kbytes()` (mm/page_alloc.c; inline in `init_per_zone_wmark_min()`
//!    before it was split out):
//!    `min_free_kbytes = clamp(int_sqrt(lowmem_kbytes * 16), 128, U)` with
//!    `lowmem_kbytes = nr_free_buffer_pages() * 4` and `U` = 65536 before 5.7, 262144 from 5.7
//!    ([`KernelVersion::min_free_kbytes_upper_bound`]).
//! 2. `nr_free_buffer_pages()`: sum over every zone at or below ZONE_NORMAL, all nodes, of
//!    `managed - high_wmark` (when positive). At the first call (`init_per_zone_wmark_min()`,
//!    a postcore initcall) no watermark is set yet, so it is the sum of managed pages.
//! 3. `set_recommended_min_free_kbytes()` (mm/khugepaged.c; runs when THP is `always` or
//!    `madvise`): `r = pageblock_nr_pages * nr_zones * 2 + pageblock_nr_pages * nr_zones *
//!    MIGRATE_PCPTYPES^2`, `r = min(r, nr_free_buffer_pages() / 20)`, in kB `r * 4`; if larger
//!    than `min_free_kbytes`, it replaces it. On x86-64 (`pageblock_nr_pages` = 512,
//!    `MIGRATE_PCPTYPES` = 3) that is 22,528 kB per zone. `nr_zones` counts the populated
//!    zones at or below ZONE_NORMAL. `nr_free_buffer_pages()` here sees the watermarks set from
//!    the sqrt rule.
//! 4. `__setup_per_zone_wmarks()` (mm/page_alloc.c): `pages_min = min_free_kbytes / 4`;
//!    `lowmem_pages` = sum of managed pages of the zones that are neither highmem nor (>= 6.6)
//!    movable; per zone `tmp = pages_min * managed / lowmem_pages`;
//!    `min = tmp`, or for highmem / movable zones `clamp(managed / 1024, 32, 128)`;
//!    `delta = max(tmp / 4, managed * watermark_scale_factor / 10000)` (`tmp` is the
//!    proportional share even for highmem zones); `low = min + delta`; `high = low + delta`;
//!    `promo = high + delta` (>= 5.18). `watermark_scale_factor` defaults to 10.
//!    `/proc/zoneinfo` prints these plus `watermark_boost`.
//!
//! # Assumptions
//! x86-64: 4 KiB pages, `pageblock_order` 9, three PCP migrate types. `min_free_kbytes` and
//! `watermark_scale_factor` not set by hand (a hand-set value is passed in directly).
//! `set_recommended_min_free_kbytes()` in older kernels counted every populated zone as
//! `nr_zones`; newer ones skip ZONE_MOVABLE. This crate skips it (no difference without a
//! populated Movable zone).
//!
//! # References
//! mm/page_alloc.c `calculate_min_free_kbytes`, `init_per_zone_wmark_min`,
//! `__setup_per_zone_wmarks`, `nr_free_zone_pages` (torvalds/linux @ dac22531bbd4, 6.0/6.1;
//! linux-mm @ 00cb34b034a5, newest); mm/khugepaged.c `set_recommended_min_free_kbytes`;
//! 5.4 and 5.10.228 copies for the 65536 / 262144 bound.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::layout::{ZoneKind, ZoneSpec};
use crate::kernel::version::KernelVersion;

/// Pages per pageblock on x86-64 (`1 << pageblock_order`, order 9).
pub const PAGEBLOCK_NR_PAGES: u64 = 512;
/// `MIGRATE_PCPTYPES`: unmovable, movable, reclaimable.
pub const MIGRATE_PCPTYPES: u64 = 3;
/// `SWAP_CLUSTER_MAX`: lower clamp of a highmem zone's `min`.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// Default `vm.watermark_scale_factor` (in 1/10000 of managed pages).
pub const DEFAULT_WATERMARK_SCALE_FACTOR: u64 = 10;
/// Lower clamp of the computed `min_free_kbytes`.
pub const MIN_FREE_KBYTES_LOWER_BOUND: u64 = 128;

/// THP setting (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ThpMode {
    /// `always` (the upstream Kconfig default): khugepaged raises `min_free_kbytes`.
    #[default]
    Always,
    /// `madvise`: khugepaged also raises `min_free_kbytes`.
    Madvise,
    /// `never`: no raise.
    Never,
}

impl ThpMode {
    /// True when khugepaged runs `set_recommended_min_free_kbytes()`.
    pub fn raises_min_free(self) -> bool {
        !matches!(self, ThpMode::Never)
    }

    /// The word sysfs uses.
    pub fn name(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
            ThpMode::Never => "never",
        }
    }
}

/// One zone's watermarks, pages (without `watermark_boost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Watermarks {
    /// `WMARK_MIN`, pages.
    pub min_pages: u64,
    /// `WMARK_LOW`, pages.
    pub low_pages: u64,
    /// `WMARK_HIGH`, pages.
    pub high_pages: u64,
    /// `WMARK_PROMO`, pages (None before 5.18).
    pub promo_pages: Option<u64>,
}

/// Which rule set `min_free_kbytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MinFreeRule {
    /// `calculate_min_free_kbytes()`: `int_sqrt(lowmem_kbytes * 16)`, clamped.
    Sqrt,
    /// khugepaged's `set_recommended_min_free_kbytes()` raised it.
    ThpRaise,
    /// Given by the user (sysctl), not computed.
    Given,
}

impl MinFreeRule {
    /// Short name for people.
    pub fn name(self) -> &'static str {
        match self {
            MinFreeRule::Sqrt => "sqrt",
            MinFreeRule::ThpRaise => "thp",
            MinFreeRule::Given => "given",
        }
    }
}

/// How `min_free_kbytes` was decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MinFreeDecision {
    /// `nr_free_buffer_pages()` at the first call (sum of managed pages <= Normal), pages.
    pub lowmem_pages: u64,
    /// The sqrt rule's value, kB (after the clamp).
    pub sqrt_kbytes: u64,
    /// khugepaged's recommendation, kB (None with THP `never`).
    pub thp_recommended_kbytes: Option<u64>,
    /// `nr_zones` used by khugepaged.
    pub thp_nr_zones: u64,
    /// The final value, kB.
    pub min_free_kbytes: u64,
    /// Which rule gave the final value.
    pub rule: MinFreeRule,
}

/// Integer square root (`int_sqrt()`): the largest `r` with `r * r <= x`.
pub fn int_sqrt(x: u64) -> u64 {
    if x < 2 {
        return x;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r.checked_mul(r).is_none_or(|sq| sq > x) {
        r -= 1;
    }
    while (r + 1).checked_mul(r + 1).is_some_and(|sq| sq <= x) {
        r += 1;
    }
    r
}

/// `calculate_min_free_kbytes()` (mm/page_alloc.c, all versions; inline in
/// `init_per_zone_wmark_min()` before ~5.19): `clamp(int_sqrt(lowmem_kbytes * 16), 128, U)`,
/// `U` = 65536 before 5.7 and 262144 from 5.7.
pub fn calculate_min_free_kbytes(lowmem_kbytes: u64, version: KernelVersion) -> u64 {
    int_sqrt(lowmem_kbytes.saturating_mul(16)).clamp(
        MIN_FREE_KBYTES_LOWER_BOUND,
        version.min_free_kbytes_upper_bound(),
    )
}

/// `nr_free_buffer_pages()` (mm/page_alloc.c `nr_free_zone_pages(gfp_zone(GFP_USER))`, all
/// versions): sum of `managed - high_wmark` over zones at or below ZONE_NORMAL on every node.
/// `high_pages` gives each zone's high watermark (same order as `zones`), or None for the boot
/// call when no watermark is set.
pub fn nr_free_buffer_pages(zones: &[ZoneSpec], high_pages: Option<&[u64]>) -> u64 {
    zones
        .iter()
        .enumerate()
        .filter(|(_, z)| z.kind.at_most_normal())
        .map(|(i, z)| {
            let high = high_pages.and_then(|h| h.get(i).copied()).unwrap_or(0);
            z.managed_pages.saturating_sub(high)
        })
        .sum()
}

/// khugepaged's `nr_zones`: populated zones at or below ZONE_NORMAL.
pub fn thp_nr_zones(zones: &[ZoneSpec]) -> u64 {
    zones
        .iter()
        .filter(|z| z.is_populated() && z.kind.at_most_normal())
        .count() as u64
}

/// `set_recommended_min_free_kbytes()` (mm/khugepaged.c, all versions with THP): the
/// recommended value in kB, `min(512 * nr_zones * (2 + 9), nr_free_buffer_pages / 20) * 4`.
/// The caller keeps the larger of this and the current `min_free_kbytes`.
pub fn set_recommended_min_free_kbytes(nr_zones: u64, nr_free_buffer_pages: u64) -> u64 {
    let mut recommended = PAGEBLOCK_NR_PAGES * nr_zones * 2;
    recommended += PAGEBLOCK_NR_PAGES * nr_zones * MIGRATE_PCPTYPES * MIGRATE_PCPTYPES;
    recommended = recommended.min(nr_free_buffer_pages / 20);
    recommended * 4
}

/// `mult_frac(x, n, d)`: `x * n / d` without overflow, as the kernel macro computes it.
fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    let q = x / d;
    let r = x % d;
    q * n + r * n / d
}

/// True when `__setup_per_zone_wmarks()` gives the zone the highmem treatment.
fn highmem_like(kind: ZoneKind, version: KernelVersion) -> bool {
    kind == ZoneKind::HighMem
        || (kind == ZoneKind::Movable && version.movable_watermarks_like_highmem())
}

/// `lowmem_pages` of `__setup_per_zone_wmarks()`: managed pages of the zones that are neither
/// highmem nor (>= 6.6) movable.
pub fn lowmem_pages(zones: &[ZoneSpec], version: KernelVersion) -> u64 {
    zones
        .iter()
        .filter(|z| !highmem_like(z.kind, version))
        .map(|z| z.managed_pages)
        .sum()
}

/// `__setup_per_zone_wmarks()` (mm/page_alloc.c; 5.18+ form with `WMARK_PROMO`; older kernels
/// wrote `high = min + 2 * delta`, the same number). Returns one [`Watermarks`] per zone, in
/// the order of `zones`, which must list every zone of the machine (all nodes), because
/// `min_free_kbytes` is split over all of them. Errors when no lowmem page exists.
pub fn setup_per_zone_wmarks(
    zones: &[ZoneSpec],
    min_free_kbytes: u64,
    watermark_scale_factor: u64,
    version: KernelVersion,
) -> Result<Vec<Watermarks>> {
    let pages_min = min_free_kbytes >> 2;
    let lowmem = lowmem_pages(zones, version);
    if lowmem == 0 {
        return Err(Error::Unsupported(
            "no lowmem zone has managed pages: __setup_per_zone_wmarks() would divide by zero"
                .to_string(),
        ));
    }
    Ok(zones
        .iter()
        .map(|z| zone_watermarks(z, pages_min, lowmem, watermark_scale_factor, version))
        .collect())
}

/// One zone's watermarks given `pages_min` and `lowmem_pages` (the body of the loop in
/// `__setup_per_zone_wmarks()`). `lowmem_pages` must be positive.
pub fn zone_watermarks(
    zone: &ZoneSpec,
    pages_min: u64,
    lowmem_pages: u64,
    watermark_scale_factor: u64,
    version: KernelVersion,
) -> Watermarks {
    let managed = zone.managed_pages;
    let tmp =
        ((u128::from(pages_min) * u128::from(managed)) / u128::from(lowmem_pages.max(1))) as u64;
    let min = if highmem_like(zone.kind, version) {
        (managed / 1024).clamp(SWAP_CLUSTER_MAX, 128)
    } else {
        tmp
    };
    let delta = (tmp >> 2).max(mult_frac(managed, watermark_scale_factor, 10_000));
    let low = min + delta;
    let high = low + delta;
    Watermarks {
        min_pages: min,
        low_pages: low,
        high_pages: high,
        promo_pages: version.has_promo_watermark().then_some(high + delta),
    }
}

/// The boot sequence that decides `min_free_kbytes`: the sqrt rule on all managed lowmem
/// pages (`init_per_zone_wmark_min()`), then, with THP `always`/`madvise`, khugepaged's raise
/// computed against the watermarks the sqrt rule gave (`hugepage_init()` ->
/// `set_recommended_min_free_kbytes()`).
pub fn decide_min_free_kbytes(
    zones: &[ZoneSpec],
    thp: ThpMode,
    watermark_scale_factor: u64,
    version: KernelVersion,
) -> Result<MinFreeDecision> {
    let lowmem_pages = nr_free_buffer_pages(zones, None);
    let sqrt_kbytes = calculate_min_free_kbytes(lowmem_pages * 4, version);
    let nr_zones = thp_nr_zones(zones);
    if !thp.raises_min_free() {
        return Ok(MinFreeDecision {
            lowmem_pages,
            sqrt_kbytes,
            thp_recommended_kbytes: None,
            thp_nr_zones: nr_zones,
            min_free_kbytes: sqrt_kbytes,
            rule: MinFreeRule::Sqrt,
        });
    }
    let wm = setup_per_zone_wmarks(zones, sqrt_kbytes, watermark_scale_factor, version)?;
    let highs: Vec<u64> = wm.iter().map(|w| w.high_pages).collect();
    let nfbp = nr_free_buffer_pages(zones, Some(&highs));
    let recommended = set_recommended_min_free_kbytes(nr_zones, nfbp);
    let (min_free_kbytes, rule) = if recommended > sqrt_kbytes {
        (recommended, MinFreeRule::ThpRaise)
    } else {
        (sqrt_kbytes, MinFreeRule::Sqrt)
    };
    Ok(MinFreeDecision {
        lowmem_pages,
        sqrt_kbytes,
        thp_recommended_kbytes: Some(recommended),
        thp_nr_zones: nr_zones,
        min_free_kbytes,
        rule,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_sqrt_is_floor() {
        for x in [0u64, 1, 2, 3, 4, 15, 16, 17, 1 << 40, u64::MAX] {
            let r = int_sqrt(x);
            assert!(u128::from(r) * u128::from(r) <= u128::from(x));
            assert!(u128::from(r + 1) * u128::from(r + 1) > u128::from(x));
        }
    }

    #[test]
    fn mult_frac_matches_plain_division() {
        assert_eq!(mult_frac(196_608, 10, 10_000), 196);
        assert_eq!(mult_frac(15_974_400, 10, 10_000), 15_974);
    }
}
