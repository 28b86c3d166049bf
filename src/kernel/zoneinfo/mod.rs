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
//!   auto-tuned value, updated lazily ([`classify_live_high`]): 0 (never used) or within
//!   `[high_min, high_max]` is `live`; below `high_min` or above `high_max` after the bounds
//!   moved is `live, explained` (with the reason); only a value no kernel update produces is a
//!   mismatch.
//!
//! # Assumptions
//! x86-64 zones; every CPU of a node listed; `watermark_scale_factor` 10 unless given.
//!
//! # References
//! mm/vmstat.c `zoneinfo_show_print` (6.18 sample; MengEn Sun, "mm: add pcp high_min high_max
//! to proc zoneinfo", Oct 2024), and the modules this one calls.

mod check;
mod live_high;
mod parse;
mod report;

pub use check::{check_zoneinfo, CheckOptions, CpusPerNode};
pub use live_high::{classify_live_high, LiveHigh};
pub use parse::{
    parse_cpulist, parse_zoneinfo, read_zoneinfo, PagesetRecord, ZoneInfo, ZoneRecord,
    ZoneinfoFormat, MAX_NR_CPUS, MAX_NUMNODES, MAX_PAGESET_VALUE, MAX_ZONE_PAGES,
};
pub use report::{CheckRow, CheckStatus, Expected, FileValue, MinFreeMatch, ZoneinfoCheck};
