//! Per-CPU pageset sizes: `pcp->batch`, and `pcp->high` (<= 6.6) or `pcp->high_min` /
//! `pcp->high_max` (>= 6.7).
//!
//! # Equations (4 KiB pages, C truncating division)
//! `zone_batchsize()`:
//! - < 4.19: `b = min(managed / 1024, 128) / 4` (cap `512 * 1024 / PAGE_SIZE`), same rounding:
//!   batch 31 from 88,064 managed pages, never 63 (d8a759b57035 doubled the cap in 4.19).
//! - 4.19 - 6.18: `b = min(managed >> 10, 256) / 4`; `b = max(b, 1)`;
//!   `batch = rounddown_pow_of_two(b + b / 2) - 1` (0 for zones below 4096 pages, e.g. DMA);
//!   the caller stores `max(1, batch)`. So batch = 63 from 176,128 managed pages (688 MiB).
//! - From 6.19: `b = min(managed >> 12, 64)`; `if b <= 1 return 1`; same rounding; the caller
//!   stores it as is. Same numbers ("No functional change intended").
//!
//! `pcp->high` and `pcp->batch` (`zone_set_pageset_high_and_batch()`):
//! - <= 5.13: with `vm.percpu_pagelist_fraction` = f (0 or >= 8): `high = managed / f`,
//!   `batch = max(1, high / 4)`, capped at `PAGE_SHIFT * 8` = 96; without: `high = 6 *
//!   zone_batchsize()`, `batch = max(1, zone_batchsize())`.
//! - 5.14 - 6.6: `high = zone_highsize() = max(total / ncpu, batch << 2)` with `total =
//!   low_wmark` (or `managed / vm.percpu_pagelist_high_fraction`, 0 or >= 8) and `ncpu` = CPUs
//!   of the zone's node + `cpu_online` (0 except in the CPU-online callback), or all online
//!   CPUs for a CPU-less node.
//! - From 6.7: `high_min = zone_highsize(fraction)`, `high_max = zone_highsize(8)` without a
//!   fraction, `high_max = high_min` with one (auto-tuning off). `pcp->high` starts at 0 and
//!   is clamped into `[high_min, high_max]` lazily.
//!
//! # Assumptions
//! CONFIG_MMU (NOMMU returns 0 for both), 4 KiB pages (`PAGE_SHIFT` 12), `cpu_online` = 0
//! (the value after boot: the last `zone_pcp_update(zone, 0)` comes from
//! `setup_per_zone_wmarks()`).
//!
//! # References
//! mm/page_alloc.c `zone_batchsize`, `zone_highsize`, `zone_set_pageset_high_and_batch`
//! (torvalds/linux @ dac22531bbd4 for 5.14-6.6; ColinIanKing/linux-next @ 00e7a3e9143c for
//! 6.7-6.18; linux-mm @ 00cb34b034a5 for >= 6.19); Mel Gorman, "[PATCH 2/6] mm/page_alloc:
//! Disassociate the pcp->high from pcp->batch" (May 2021) for the <= 5.13 code; 5.10.228
//! `percpu_pagelist_fraction_sysctl_handler` for `MIN_PERCPU_PAGELIST_FRACTION` = 8.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::version::{Era, KernelVersion};

/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION` (>= 5.14) and `MIN_PERCPU_PAGELIST_FRACTION` (<= 5.13).
pub const MIN_PERCPU_PAGELIST_FRACTION: u32 = 8;
/// `PAGE_SHIFT * 8`: the batch cap with `vm.percpu_pagelist_fraction` (<= 5.13).
pub const FRACTION_BATCH_CAP_PAGES: u32 = 96;

/// `pcp->high` in the form the era uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PcpHigh {
    /// <= 6.6: a fixed `pcp->high`, pages.
    Fixed {
        /// `pcp->high`, pages.
        high_pages: u32,
    },
    /// >= 6.7: `pcp->high` auto-tuned between two bounds, pages.
    AutoTuned {
        /// `pcp->high_min`, pages.
        high_min_pages: u32,
        /// `pcp->high_max`, pages.
        high_max_pages: u32,
    },
}

/// `pcp->batch` and `pcp->high` of one zone's pagesets (the same on every CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PcpLimits {
    /// `pcp->batch`, pages.
    pub batch_pages: u32,
    /// `pcp->high` or its bounds.
    pub high: PcpHigh,
}

/// Sysctls that change the pageset sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PagesetTunables {
    /// `vm.percpu_pagelist_high_fraction` (>= 5.14): 0 (default) or >= 8.
    pub percpu_pagelist_high_fraction: u32,
    /// `vm.percpu_pagelist_fraction` (<= 5.13): 0 (default) or >= 8.
    pub percpu_pagelist_fraction: u32,
}

impl PagesetTunables {
    /// Checks that the sysctls exist in `version` and have values the kernel accepts (the
    /// sysctl handlers return `-EINVAL` for 1..7).
    pub fn validate(&self, version: KernelVersion) -> Result<()> {
        let check = |name: &str, v: u32| -> Result<()> {
            if v != 0 && v < MIN_PERCPU_PAGELIST_FRACTION {
                return Err(Error::invalid(
                    "kernel options",
                    name,
                    format!("{v} is rejected by the kernel (-EINVAL): use 0 or a value >= 8"),
                ));
            }
            Ok(())
        };
        check(
            "vm.percpu_pagelist_high_fraction",
            self.percpu_pagelist_high_fraction,
        )?;
        check("vm.percpu_pagelist_fraction", self.percpu_pagelist_fraction)?;
        if version.has_percpu_pagelist_high_fraction() && self.percpu_pagelist_fraction != 0 {
            return Err(Error::invalid(
                "kernel options",
                "vm.percpu_pagelist_fraction",
                format!("removed in 5.14 (kernel {version}): use vm.percpu_pagelist_high_fraction"),
            ));
        }
        if !version.has_percpu_pagelist_high_fraction() && self.percpu_pagelist_high_fraction != 0 {
            return Err(Error::invalid(
                "kernel options",
                "vm.percpu_pagelist_high_fraction",
                format!("added in 5.14 (kernel {version}): use vm.percpu_pagelist_fraction"),
            ));
        }
        Ok(())
    }
}

/// `rounddown_pow_of_two(n)` for `n >= 1` (0 for 0).
pub fn rounddown_pow_of_two(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        1 << (63 - n.leading_zeros())
    }
}

/// `zone_batchsize()` (mm/page_alloc.c): the kernel function's return value, pages. <= 6.18
/// it returns 0 for zones below 4096 managed pages; >= 6.19 it returns at least 1. Use
/// [`pageset_batch`] for what the pageset stores.
pub fn zone_batchsize(managed_pages: u64, version: KernelVersion) -> u32 {
    let mut batch = if version.frees_in_batch_chunks() {
        let b = (managed_pages >> 12).min(64);
        if b <= 1 {
            return 1;
        }
        b
    } else {
        let cap = if version.has_doubled_batch() {
            256
        } else {
            128
        };
        let mut b = (managed_pages >> 10).min(cap) / 4;
        if b < 1 {
            b = 1;
        }
        b
    };
    batch = rounddown_pow_of_two(batch + batch / 2) - 1;
    batch as u32
}

/// `pcp->batch` as stored by `zone_set_pageset_high_and_batch()` without a fraction sysctl:
/// `max(1, zone_batchsize())` (<= 6.18), `zone_batchsize()` (>= 6.19).
pub fn pageset_batch(managed_pages: u64, version: KernelVersion) -> u32 {
    zone_batchsize(managed_pages, version).max(1)
}

/// `zone_highsize()` (mm/page_alloc.c, >= 5.14): `max(total_pages / ncpu, batch << 2)` with
/// `total_pages = low_wmark` when `high_fraction` is 0, else `managed / high_fraction`;
/// `ncpu = cpus_on_node + cpu_online`, or `online_cpus` when that is 0 (CPU-less node).
pub fn zone_highsize(
    managed_pages: u64,
    low_wmark_pages: u64,
    batch_pages: u32,
    cpus_on_node: u32,
    cpu_online: u32,
    online_cpus: u32,
    high_fraction: u32,
) -> u32 {
    let total = if high_fraction == 0 {
        low_wmark_pages
    } else {
        managed_pages / u64::from(high_fraction)
    };
    let mut ncpu = u64::from(cpus_on_node) + u64::from(cpu_online);
    if ncpu == 0 {
        ncpu = u64::from(online_cpus.max(1));
    }
    let high = (total / ncpu).max(u64::from(batch_pages) << 2);
    u32::try_from(high).unwrap_or(u32::MAX)
}

/// The inputs of `zone_set_pageset_high_and_batch()` for one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagesetInputs {
    /// Managed pages of the zone.
    pub managed_pages: u64,
    /// The zone's low watermark (without boost), pages.
    pub low_wmark_pages: u64,
    /// CPUs on the zone's node.
    pub cpus_on_node: u32,
    /// All online CPUs (for CPU-less nodes).
    pub online_cpus: u32,
}

/// `zone_set_pageset_high_and_batch(zone, cpu_online = 0)` (mm/page_alloc.c) for every era:
/// the batch and high (or high_min / high_max) every CPU's pageset of the zone gets.
pub fn zone_set_pageset_high_and_batch(
    inputs: PagesetInputs,
    tunables: PagesetTunables,
    version: KernelVersion,
) -> Result<PcpLimits> {
    tunables.validate(version)?;
    let managed = inputs.managed_pages;
    match version.era() {
        Era::Legacy => {
            let f = tunables.percpu_pagelist_fraction;
            if f != 0 {
                let high = managed / u64::from(f);
                let mut batch = (high / 4).max(1);
                if high / 4 > u64::from(FRACTION_BATCH_CAP_PAGES) {
                    batch = u64::from(FRACTION_BATCH_CAP_PAGES);
                }
                Ok(PcpLimits {
                    batch_pages: batch as u32,
                    high: PcpHigh::Fixed {
                        high_pages: u32::try_from(high).unwrap_or(u32::MAX),
                    },
                })
            } else {
                let b = zone_batchsize(managed, version);
                Ok(PcpLimits {
                    batch_pages: b.max(1),
                    high: PcpHigh::Fixed { high_pages: 6 * b },
                })
            }
        }
        Era::SplitHigh => {
            let batch = pageset_batch(managed, version);
            let high = zone_highsize(
                managed,
                inputs.low_wmark_pages,
                batch,
                inputs.cpus_on_node,
                0,
                inputs.online_cpus,
                tunables.percpu_pagelist_high_fraction,
            );
            Ok(PcpLimits {
                batch_pages: batch,
                high: PcpHigh::Fixed { high_pages: high },
            })
        }
        Era::AutoTune | Era::BatchedFree => {
            let batch = pageset_batch(managed, version);
            let hs = |fraction: u32| {
                zone_highsize(
                    managed,
                    inputs.low_wmark_pages,
                    batch,
                    inputs.cpus_on_node,
                    0,
                    inputs.online_cpus,
                    fraction,
                )
            };
            let f = tunables.percpu_pagelist_high_fraction;
            let (high_min, high_max) = if f != 0 {
                let h = hs(f);
                (h, h)
            } else {
                (hs(0), hs(MIN_PERCPU_PAGELIST_FRACTION))
            };
            Ok(PcpLimits {
                batch_pages: batch,
                high: PcpHigh::AutoTuned {
                    high_min_pages: high_min,
                    high_max_pages: high_max,
                },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_reaches_63_at_176128_pages() {
        let v = KernelVersion::new(6, 18);
        assert_eq!(zone_batchsize(176_128, v), 63);
        assert_eq!(zone_batchsize(176_127, v), 31);
        assert_eq!(zone_batchsize(3840, v), 0);
        assert_eq!(pageset_batch(3840, v), 1);
        let v19 = KernelVersion::new(6, 19);
        for m in [
            0u64,
            3840,
            4096,
            8191,
            8192,
            100_000,
            176_127,
            176_128,
            1 << 30,
        ] {
            assert_eq!(pageset_batch(m, v), pageset_batch(m, v19), "managed {m}");
        }
    }
}
