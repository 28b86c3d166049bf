//! The result of a check: one row per value, and the min_free_kbytes match.

use super::parse::ZoneinfoFormat;

use serde::Serialize;

use crate::kernel::layout::ZoneKind;
use crate::kernel::version::KernelVersion;
use crate::kernel::watermarks::MinFreeRule;

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
    /// A live value outside the current bounds that the kernel's lazy updates produce; the
    /// row's `explanation` says how.
    LiveExplained,
}

impl CheckStatus {
    /// Word for people.
    pub fn word(self) -> &'static str {
        match self {
            CheckStatus::Match => "match",
            CheckStatus::Mismatch => "MISMATCH",
            CheckStatus::Given => "given",
            CheckStatus::Live => "live",
            CheckStatus::LiveExplained => "live, explained",
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
    /// Why the kernel produces this value (`LiveExplained`) or cannot (`Mismatch` of a live
    /// value); None otherwise.
    pub explanation: Option<String>,
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

/// The result of `check_zoneinfo`.
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

pub(super) fn cpu_list_text(cpus: &[u32], all: usize) -> String {
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
