//! Parsers for measurement text people paste: BCC `funclatency` histograms, bpftrace `hist()` /
//! `lhist()` maps, and `perf lock contention` tables (see `shared/design/measurement-formats.md`).
//!
//! # Normalisation
//! Text pasted from mail is cleaned before parsing, in this order:
//! 1. **Quoted-printable**, when the text looks encoded (it holds `=3D`, `=20`, `=E2=`, `=C2=`,
//!    a `quoted-printable` header, or a line ending in a single `=`): `=XX` becomes the byte
//!    0xXX (UTF-8 reassembled, so `=E2=80=AF` is a narrow no-break space, i.e. whitespace); a
//!    soft line break `=` + newline is removed, joining the two lines; `=` followed by spaces
//!    and no newline is taken as a soft break whose newline was flattened to a space by an
//!    archive (`130= 5242` is `1305242`). Outside quoted-printable text `=` is literal.
//! 2. **Quote prefixes**: every line loses its leading run of `>` and whitespace (any depth,
//!    `> >> >` included); inside a line, a word made only of `>` is dropped, which handles mail
//!    archives that flattened the whole message onto one line.
//! 3. The text is split into words that remember their 1-based line (after a soft break, the
//!    line where the joined line started).
//!
//! Parsing then works on the word stream, so the same parser reads a terminal paste, a quoted
//! reply, and a flattened archive. Errors name the file and the line of the offending word.
//!
//! # Units
//! Histogram buckets are returned in ns with inclusive bounds: a funclatency `usecs` bucket
//! `4 -> 7` covers latencies 4000..=7999 ns (funclatency divides by 1000 and truncates); a
//! bpftrace bucket `[1K, 2K)` in the unit given by the caller covers `1024 * unit ..
//! 2048 * unit - 1` ns (bpftrace's `K`, `M`, `G` are powers of 1024).

mod bpftrace;
mod funclatency;
mod normalise;
mod perf_lock;

pub use bpftrace::{bpftrace, bpftrace_with};
pub use funclatency::{funclatency, funclatency_with};
pub use normalise::normalise;
pub use perf_lock::{perf_lock, perf_lock_with};

use normalise::{err, line_at, Tok};

use serde::Serialize;

use crate::data::{Bucket, Histogram};
use crate::error::{Error, Result};

/// A time unit of printed measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl TimeUnit {
    /// Nanoseconds per unit.
    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }

    /// Short name: `ns`, `us`, `ms`, `s`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }

    /// Parses `ns`/`us`/`ms`/`s` and the funclatency words `nsecs`/`usecs`/`msecs`/`secs`.
    pub fn parse(s: &str) -> Option<TimeUnit> {
        match s {
            "ns" | "nsecs" | "nsec" => Some(TimeUnit::Ns),
            "us" | "usecs" | "usec" | "µs" => Some(TimeUnit::Us),
            "ms" | "msecs" | "msec" => Some(TimeUnit::Ms),
            "s" | "secs" | "sec" => Some(TimeUnit::S),
            _ => None,
        }
    }
}

/// The tool that printed a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistogramFormat {
    /// BCC `funclatency` (log2 buckets `lo -> hi`).
    Funclatency,
    /// bpftrace `hist()` (log2 buckets `[lo, hi)`).
    BpftraceHist,
    /// bpftrace `lhist()` (linear buckets `[lo, hi)`).
    BpftraceLhist,
}

/// One histogram read from pasted text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportedHistogram {
    /// Which tool printed it.
    pub format: HistogramFormat,
    /// For bpftrace the map name and key as printed (`@usecs[rmqueue_bulk]`); for funclatency
    /// `histogram N (nsecs)`.
    pub label: String,
    /// 1-based line of the histogram's header.
    pub line: usize,
    /// Unit the buckets were printed in.
    pub unit: TimeUnit,
    /// The buckets, converted to ns (inclusive bounds), every printed row.
    pub histogram: Histogram,
    /// funclatency's printed `avg`, converted to ns, when the avg line is present.
    pub printed_avg_ns: Option<u64>,
    /// funclatency's printed `total`, converted to ns.
    pub printed_total_ns: Option<u64>,
    /// funclatency's printed `count` (can exceed the bucket sum by a few).
    pub printed_count: Option<u64>,
}

/// A wait time from `perf lock contention`: as printed and in ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitTime {
    /// The value in ns, computed exactly from the printed decimal (`4.64 ms` -> 4640000).
    pub ns: f64,
    /// The cell as printed, e.g. `4.64 ms`.
    pub text: String,
}

/// What a `perf lock contention` row is aggregated by (the columns after the wait times).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LockTarget {
    /// Default output: `type  caller`.
    Caller {
        /// Lock type (`spinlock`, `rwsem:R`, `mutex`, ...).
        lock_type: String,
        /// Caller symbol+offset.
        caller: String,
    },
    /// `-l` output: `address  symbol` (newer perf adds `(type)`).
    Address {
        /// Lock address, hex as printed.
        address: String,
        /// Lock symbol (`zone->lock`-like names or a kernel symbol).
        symbol: String,
        /// Lock type when printed in parentheses after the symbol.
        lock_type: Option<String>,
    },
    /// `-t` output: `pid  comm` (or `owner` with `-o`).
    Task {
        /// Thread id (-1 for unknown).
        pid: i64,
        /// Command name.
        comm: String,
    },
    /// `-g` output: cgroup name.
    Cgroup {
        /// Cgroup path or name.
        name: String,
    },
}

/// One row of `perf lock contention` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockContentionRow {
    /// 1-based number of the table (block of consecutive rows) in the text.
    pub table: usize,
    /// 1-based line of the row.
    pub line: usize,
    /// Contended acquisitions.
    pub contended: u64,
    /// Total wait.
    pub total_wait: WaitTime,
    /// Maximum wait.
    pub max_wait: WaitTime,
    /// Minimum wait (newer perf only).
    pub min_wait: Option<WaitTime>,
    /// Average wait (perf computes total / contended, truncated to ns).
    pub avg_wait: WaitTime,
    /// Caller, lock address, task or cgroup.
    pub target: LockTarget,
}

/// How the parsers treat a row they cannot read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Strict (false, the default): an unreadable row, a missing bucket or an out-of-range
    /// value is an error naming the file, line and field. Lenient (true, for pasted mail that
    /// got mangled): such a row is skipped and reported in [`Parsed::skipped`]; the gap it
    /// leaves in a histogram stays a gap (its samples are not counted).
    pub lenient: bool,
}

/// A row skipped (or a gap accepted) in lenient mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// 1-based line.
    pub line: usize,
    /// What was skipped and why (the strict mode's error message).
    pub reason: String,
}

/// What a parser returns: the items read and, in lenient mode, what it skipped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed<T> {
    /// The histograms or rows read.
    pub items: Vec<T>,
    /// Rows skipped and gaps accepted (lenient mode only; empty in strict mode).
    pub skipped: Vec<Skipped>,
}

/// Upper bound of a contended count: perf keeps it in an `unsigned int` (`nr_contended`, and
/// the BPF `contention_data.count` is a `u32`).
pub const MAX_CONTENDED: u64 = u32::MAX as u64;
/// Upper bound of a perf lock wait time, ns: perf keeps wait times as `u64` nanoseconds.
pub const MAX_WAIT_NS: f64 = u64::MAX as f64;

/// Records a row error: skipped in lenient mode, returned in strict mode.
fn skip_or_fail(opts: ParseOptions, skipped: &mut Vec<Skipped>, e: Error) -> Result<()> {
    if !opts.lenient {
        return Err(e);
    }
    let line = match &e {
        Error::Parse { line, .. } => *line,
        _ => 0,
    };
    let reason = e
        .to_string()
        .replace(" (--lenient skips such rows with a warning)", "")
        .replace(
            "; --lenient keeps the gap, without its samples",
            "; gap kept, its samples not counted",
        );
    skipped.push(Skipped { line, reason });
    Ok(())
}

/// The words of line `line` from word `i` on, joined, at most 60 characters: the row as seen.
fn row_text(t: &[Tok], i: usize) -> String {
    let line = line_at(t, i);
    let mut s = t[i.min(t.len().saturating_sub(1))..]
        .iter()
        .take_while(|x| x.line == line)
        .take(12)
        .map(|x| x.s.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    if s.chars().count() > 60 {
        s = s.chars().take(57).collect::<String>() + "...";
    }
    s
}

/// Converts an inclusive bucket `[lo, hi]` in `unit` to inclusive ns bounds.
fn bucket_ns(lo: u64, hi_exclusive: u64, count: u64, unit: TimeUnit) -> Option<Bucket> {
    let f = unit.ns();
    Some(Bucket {
        lo_ns: lo.checked_mul(f)?,
        hi_ns: hi_exclusive.checked_mul(f)?.checked_sub(1)?,
        count,
    })
}

/// A gap between printed buckets. funclatency and bpftrace both print every bucket from the
/// first to the last non-empty one (empty ones with count 0), so a gap means rows were lost:
/// an error in strict mode; in lenient mode the gap stays (its samples are not counted).
/// The histogram of `buckets` (each with its line), refused when no bucket holds a sample (`what` names the samples:
/// calls, samples), naming the histogram's `line`.
fn nonempty_histogram(
    buckets: Vec<(usize, Bucket)>,
    file: &str,
    line: usize,
    what: &str,
) -> Result<Histogram> {
    let histogram = Histogram::from_lines(buckets, file)?;
    if histogram.total_count() == 0 {
        return Err(err(
            file,
            line,
            "count",
            format!("every bucket holds 0 {what}: a histogram with no samples says nothing to fit"),
        ));
    }
    Ok(histogram)
}

fn gap_error(file: &str, line: usize, prev_end: u64, next_lo: u64, unit: &str) -> Error {
    err(
        file,
        line,
        "row",
        format!(
            "buckets {}..{} {unit} are missing before this row (the previous bucket ended at \
             {prev_end}; the tool prints every bucket between the first and the last non-empty \
             one, so rows were lost); --lenient keeps the gap, without its samples",
            prev_end + 1,
            next_lo - 1
        ),
    )
}
