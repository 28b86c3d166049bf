//! Kernel versions and the version ranges that change the PCP formulas.
//!
//! The PCP code changed in four steps that matter for this crate ([`Era`]):
//!
//! | era | versions | what decides `pcp->high` | pages per zone->lock hold on free |
//! |---|---|---|---|
//! | [`Era::Legacy`] | <= 5.13 | `6 * batch`, or `managed / percpu_pagelist_fraction` | `batch` |
//! | [`Era::SplitHigh`] | 5.14 - 6.6 | `max(low_wmark / ncpu, 4 * batch)` | `batch << free_factor`, up to `high - batch` |
//! | [`Era::AutoTune`] | 6.7 - 6.18 | auto-tuned between `high_min` and `high_max` | up to `batch << CONFIG_PCP_BATCH_SCALE_MAX` |
//! | [`Era::BatchedFree`] | >= 6.19 | as 6.7 - 6.18 | chunks of at most `batch` |
//!
//! Finer facts, each with its own method on [`KernelVersion`]:
//! - `free_high` (drain the PCP on high-order frees without allocations) exists from 5.18
//!   (f26b3fa04611, "mm/page_alloc: limit number of high-order pages on PCP during bulk free").
//! - `CONFIG_PCP_BATCH_SCALE_MAX` (52166607ecc9, `default 5`, `range 0 6`) exists from 6.7; it
//!   was backported to 6.6-stable in August 2024, so a late 6.6.y kernel may have it too
//!   ([`KernelVersion::may_have_scale_max_backport`]).
//! - `/proc/zoneinfo` prints `high_min` / `high_max` from 6.13 (MengEn Sun, posted 10 Oct 2024;
//!   the 6.18 sample has it).
//! - The `free_high` threshold became `batch + high_min / 2` (c544a952ba61, Nikhil Dhama,
//!   April 2025): 6.16, inferred (its tester compares "v6.15 vanilla" with "v6.15 with
//!   (c544a952ba)", and the robot report finds it on linus/master); no 6.16 tree read.
//! - `zone_batchsize()` caps at 512 KiB (batch 31, high 186) before 4.19 and at 1 MiB from
//!   4.19 (d8a759b57035, "mm, page_alloc: double zone's batchsize").
//!
//! Every change with its commit id is in [`crate::kernel::changes`].
//! - Frees in chunks of at most `batch` with the pcp lock dropped in between from 6.19 (Joshua
//!   Hahn, "mm/page_alloc: Batch page freeing in free_frozen_page_commit", Oct 2025; posted after
//!   6.18-rc1, no tagged release confirmed).
//! - `min_free_kbytes` upper bound 65536 before 5.7, 262144 from 5.7 (Joel Savitz, "increase
//!   default min_free_kbytes bound"). Verified from source: a 5.4 tree clamps at 65536, 5.10.228
//!   clamps at 262144; the switch at 5.7 is the patch's merge window, not read from a 5.7 tree.
//! - `WMARK_PROMO` exists from 5.18 (c574bbe91703, NUMA balancing memory tiering).
//! - ZONE_MOVABLE gets the highmem treatment in `__setup_per_zone_wmarks()` (small `min`, left
//!   out of `lowmem_pages`) in a 6.6-era copy of mm/page_alloc.c and later; patch by liuq (2023).
//!   This crate assumes 6.6; the exact version is not verified.
//! - High-order (orders 1-3 and THP) pages on PCP lists from 5.13 (44042b449872).

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::{Error, Result};

/// A kernel version: major and minor. Patch levels (and, in release strings, local suffixes) are
/// read and dropped because no
/// formula here depends on them (see [`KernelVersion::may_have_scale_max_backport`] for the one
/// stable backport that matters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// Major version, e.g. 6.
    pub major: u32,
    /// Minor version, e.g. 18.
    pub minor: u32,
}

/// The ranges of kernel versions whose PCP code differs (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    /// <= 5.13: `high = 6 * batch` (or `managed / vm.percpu_pagelist_fraction`); a free that
    /// reaches `high` drains `batch` pages.
    Legacy,
    /// 5.14 - 6.6: `high = max(low_wmark / ncpu, 4 * batch)` (or `managed /
    /// vm.percpu_pagelist_high_fraction / ncpu`); frees drain `batch << free_factor` pages.
    SplitHigh,
    /// 6.7 - 6.18: `high` auto-tuned between `high_min` and `high_max`; one zone->lock hold per
    /// bulk free of up to `batch << CONFIG_PCP_BATCH_SCALE_MAX` pages.
    AutoTune,
    /// From 6.19: as [`Era::AutoTune`], but bulk frees are split into chunks of at most `batch`
    /// pages, one zone->lock hold each.
    BatchedFree,
}

impl Era {
    /// The version range as text, e.g. `"5.14-6.6"`.
    pub fn range(self) -> &'static str {
        match self {
            Era::Legacy => "<=5.13",
            Era::SplitHigh => "5.14-6.6",
            Era::AutoTune => "6.7-6.18",
            Era::BatchedFree => ">=6.19",
        }
    }

    /// True for the eras with `high_min` / `high_max` auto-tuning (6.7 and later).
    pub fn auto_tunes_high(self) -> bool {
        matches!(self, Era::AutoTune | Era::BatchedFree)
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.range())
    }
}

impl KernelVersion {
    /// A version from its parts.
    pub const fn new(major: u32, minor: u32) -> Self {
        KernelVersion { major, minor }
    }

    /// The default version of the `kernel` command: 6.18.
    pub const DEFAULT: KernelVersion = KernelVersion::new(6, 18);

    /// Parses a version as a user or a data file writes it: `MAJOR.MINOR` (`"5.18"`) or
    /// `MAJOR.MINOR.PATCH` (`"6.6.30"`), nothing else (no `v`, no suffix, no fourth part:
    /// `"6.18.foo"` and `"6.18.0.1"` are errors, not 6.18). `label` names the source in errors
    /// (`--kernel`, `reference_kernel`, a file name). A `uname -r` string such as
    /// `"6.18.44-fc-v857"` is read by [`KernelVersion::parse_release_labeled`], which only the
    /// readers of a kernel's own release string use.
    pub fn parse_labeled(text: &str, label: &str) -> Result<Self> {
        Self::parse_impl(text, label, false)
    }

    /// Parses a kernel's release string as `uname -r` and `/proc/sys/kernel/osrelease` print
    /// it: `MAJOR.MINOR[.PATCH]` optionally followed by a local suffix that starts with `-`,
    /// `+`, `_` or `~` (`"6.18.44-fc-v857"`, `"6.1.0-18-amd64"`, `"5.15.0+"`), or a `v`-prefixed
    /// tag (`"v6.6.30"`). A fourth dotted part or a suffix without a separator is still an
    /// error. For the readers of such strings only: the running kernel's osrelease, a trace's
    /// recorded release, and `zoneinfo --kernel` (the release of the kernel that wrote a file).
    pub fn parse_release_labeled(text: &str, label: &str) -> Result<Self> {
        Self::parse_impl(text, label, true)
    }

    /// [`KernelVersion::parse_release_labeled`] with errors naming "kernel release".
    pub fn parse_release(text: &str) -> Result<Self> {
        Self::parse_release_labeled(text, "kernel release")
    }

    fn parse_impl(text: &str, label: &str, release: bool) -> Result<Self> {
        let accepted = if release {
            "expected a kernel release: MAJOR.MINOR[.PATCH] with an optional local suffix after '-', '+', '_' or '~', e.g. 6.18, 6.18.44 or 6.18.44-generic"
        } else {
            "expected MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 6.18 or 6.6.30"
        };
        let err = |m: &str| {
            Error::parse(
                label,
                0,
                "kernel version",
                format!("'{}': {m} ({accepted})", text.trim()),
            )
        };
        let t = text.trim();
        let t = if release {
            t.strip_prefix('v').unwrap_or(t)
        } else {
            t
        };
        let digits = |s: &str| -> (String, usize) {
            let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            let n = d.len();
            (d, n)
        };
        let (maj, n) = digits(t);
        if n == 0 {
            return Err(err("no major version number"));
        }
        let rest = &t[n..];
        let rest = rest
            .strip_prefix('.')
            .ok_or_else(|| err("no '.' after the major version"))?;
        let (min, m) = digits(rest);
        if m == 0 {
            return Err(err("no minor version number"));
        }
        let mut tail = &rest[m..];
        if let Some(sub) = tail.strip_prefix('.') {
            let (sub, k) = digits(sub);
            if k == 0 {
                return Err(err(
                    "the part after the minor version is not a patch number",
                ));
            }
            // Stable series have reached sublevels in the hundreds (4.9.337, 4.14.336); a
            // sublevel above 9999 is not a kernel release.
            if sub.parse::<u32>().map_or(true, |v| v > 9999) {
                return Err(err(
                    "sublevel out of range: stable releases stay below 10000",
                ));
            }
            tail = &tail[1 + k..];
        }
        match tail.chars().next() {
            None => {}
            Some('.') => {
                return Err(err(
                    "a fourth dotted part: a kernel version has at most MAJOR.MINOR.PATCH",
                ))
            }
            Some('-' | '+' | '_' | '~') if release => {}
            Some(_) if release => {
                return Err(err(
                    "unexpected character after the version: a local suffix starts with '-', '+', '_' or '~'",
                ))
            }
            Some(_) => {
                return Err(err(
                    "unexpected text after the version (a uname -r release string is read only from the running kernel, a trace or zoneinfo --kernel)",
                ))
            }
        }
        let major: u32 = maj.parse().map_err(|_| err("major version too large"))?;
        let minor: u32 = min.parse().map_err(|_| err("minor version too large"))?;
        // Linux has had majors 2 to 6 (7 follows 6.19), and no series has gone past x.20.
        if !(2..=7).contains(&major) || minor > 30 {
            return Err(err(
                "not a Linux version: the major must be 2..=7 and the minor 0..=30 (no series has gone past x.20)",
            ));
        }
        let v = KernelVersion { major, minor };
        if v < KernelVersion::OLDEST {
            return Err(err(&format!(
                "older than {}, the oldest kernel whose watermark and PCP formulas are modelled (watermark_scale_factor arrived in 4.6; older kernels computed watermarks and pcp->high differently)",
                KernelVersion::OLDEST
            )));
        }
        Ok(v)
    }

    /// The newest kernel whose PCP code this crate has read: 6.19 (the batched free, see the
    /// module documentation and [`crate::kernel::changes`]). A later version gets 6.19's rules;
    /// nothing after 6.19 is modelled.
    pub const NEWEST_MODELLED: KernelVersion = KernelVersion::new(6, 19);

    /// True when this version is newer than [`KernelVersion::NEWEST_MODELLED`]: the model
    /// assumes the newest modelled rules for it.
    pub fn is_newer_than_modelled(self) -> bool {
        self > KernelVersion::NEWEST_MODELLED
    }

    /// The oldest kernel a version string may name: from 4.6 (watermark_scale_factor) the
    /// watermark, batch and high formulas are the ones `crate::kernel` implements.
    pub const OLDEST: KernelVersion = KernelVersion::new(4, 6);

    /// Parses a version strictly (see [`KernelVersion::parse_labeled`]); errors name "kernel
    /// version".
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_labeled(text, "kernel version")
    }

    /// True when `self >= major.minor`.
    pub fn at_least(self, major: u32, minor: u32) -> bool {
        self >= KernelVersion::new(major, minor)
    }

    /// The era of this version.
    pub fn era(self) -> Era {
        if !self.at_least(5, 14) {
            Era::Legacy
        } else if !self.at_least(6, 7) {
            Era::SplitHigh
        } else if !self.at_least(6, 19) {
            Era::AutoTune
        } else {
            Era::BatchedFree
        }
    }

    /// `free_high` exists (>= 5.18, f26b3fa04611).
    pub fn has_free_high(self) -> bool {
        self.at_least(5, 18)
    }

    /// `CONFIG_PCP_BATCH_SCALE_MAX` exists in mainline (>= 6.7).
    pub fn has_pcp_batch_scale_max(self) -> bool {
        self.at_least(6, 7)
    }

    /// A 6.6.y stable kernel may carry the August 2024 backport of `CONFIG_PCP_BATCH_SCALE_MAX`
    /// (52166607ecc9); which 6.6.y first had it is not verified here.
    pub fn may_have_scale_max_backport(self) -> bool {
        self == KernelVersion::new(6, 6)
    }

    /// `/proc/zoneinfo` prints `high_min` and `high_max` per CPU (>= 6.13).
    pub fn zoneinfo_has_high_min_max(self) -> bool {
        self.at_least(6, 13)
    }

    /// The `free_high` threshold is `batch + high_min / 2` rather than `batch` (>= 6.16,
    /// c544a952ba61; the version is inferred, see the module documentation).
    pub fn free_high_threshold_uses_high_min(self) -> bool {
        self.at_least(6, 16)
    }

    /// `zone_batchsize()` caps the batch at 1 MiB of pages (>= 4.19, d8a759b57035, "mm,
    /// page_alloc: double zone's batchsize"); before, at 512 KiB.
    pub fn has_doubled_batch(self) -> bool {
        self.at_least(4, 19)
    }

    /// Bulk frees are split into chunks of at most `batch` pages (>= 6.19).
    pub fn frees_in_batch_chunks(self) -> bool {
        self.at_least(6, 19)
    }

    /// `WMARK_PROMO` exists (>= 5.18).
    pub fn has_promo_watermark(self) -> bool {
        self.at_least(5, 18)
    }

    /// Upper clamp of the computed `min_free_kbytes`: 65536 before 5.7, 262144 from 5.7.
    pub fn min_free_kbytes_upper_bound(self) -> u64 {
        if self.at_least(5, 7) {
            262_144
        } else {
            65_536
        }
    }

    /// ZONE_MOVABLE is handled like highmem by `__setup_per_zone_wmarks()` (assumed >= 6.6).
    pub fn movable_watermarks_like_highmem(self) -> bool {
        self.at_least(6, 6)
    }

    /// Orders 1-3 and the THP order can sit on PCP lists (>= 5.13); before, only order 0.
    pub fn has_high_order_pcp(self) -> bool {
        self.at_least(5, 13)
    }

    /// `vm.percpu_pagelist_high_fraction` exists (>= 5.14); before it was
    /// `vm.percpu_pagelist_fraction`.
    pub fn has_percpu_pagelist_high_fraction(self) -> bool {
        self.at_least(5, 14)
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for KernelVersion {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl Serialize for KernelVersion {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        assert_eq!(
            KernelVersion::parse_release("6.18.44-fc-v857").unwrap(),
            KernelVersion::new(6, 18)
        );
        assert!(KernelVersion::new(5, 18) < KernelVersion::new(6, 1));
        assert!(KernelVersion::parse("6").is_err());
        assert!(KernelVersion::parse("6.x").is_err());
    }

    #[test]
    fn strict_parse_accepts_major_minor_and_patch_only() {
        for (text, major, minor) in [
            ("6.18", 6, 18),
            ("5.18", 5, 18),
            ("6.6.30", 6, 6),
            (" 6.1.0\n", 6, 1),
            ("4.9.337", 4, 9),
        ] {
            assert_eq!(
                KernelVersion::parse_labeled(text, "--kernel").unwrap(),
                KernelVersion::new(major, minor),
                "{text:?}"
            );
        }
        // Repro T3-silent-kernel-version: these were read as 6.18.
        for junk in [
            "6.18.foo",
            "6.18.0.1",
            "6.18.0.1.2.3",
            "6.18.",
            "6.18.44-fc-v857",
            "6.1.0-18-amd64",
            "5.15.0+",
            "v6.6.30",
            "6.18x",
            "6.18 foo",
            "6.18.99999",
        ] {
            let e = KernelVersion::parse_labeled(junk, "reference_kernel")
                .unwrap_err()
                .to_string();
            assert!(e.contains("reference_kernel"), "{junk:?}: {e}");
            assert!(
                e.contains("MAJOR.MINOR or MAJOR.MINOR.PATCH"),
                "{junk:?}: {e}"
            );
        }
    }

    #[test]
    fn release_parse_reads_uname_strings_but_not_extra_parts() {
        for (text, major, minor) in [
            ("6.18.44-fc-v1252", 6, 18),
            ("6.18.44-fc-v857\n", 6, 18),
            ("6.1.0-18-amd64", 6, 1),
            ("5.15.0+", 5, 15),
            ("v6.6.30", 6, 6),
            ("4.18.0-305.el8.x86_64", 4, 18),
            ("6.18.0-rc1", 6, 18),
            ("6.18", 6, 18),
            ("6.18-rc1", 6, 18),
        ] {
            assert_eq!(
                KernelVersion::parse_release_labeled(text, "osrelease").unwrap(),
                KernelVersion::new(major, minor),
                "{text:?}"
            );
        }
        for junk in [
            "6.18.foo",
            "6.18.0.1",
            "6.18.0.1.2.3",
            "6.18rc1",
            "6.18.",
            "6",
        ] {
            let e = KernelVersion::parse_release_labeled(junk, "--kernel")
                .unwrap_err()
                .to_string();
            assert!(e.contains("--kernel"), "{junk:?}: {e}");
            assert!(e.contains("kernel release"), "{junk:?}: {e}");
        }
    }

    #[test]
    fn newer_than_modelled() {
        assert!(!KernelVersion::DEFAULT.is_newer_than_modelled());
        assert!(!KernelVersion::new(6, 19).is_newer_than_modelled());
        assert!(KernelVersion::new(6, 20).is_newer_than_modelled());
        assert!(KernelVersion::new(7, 0).is_newer_than_modelled());
    }
}
