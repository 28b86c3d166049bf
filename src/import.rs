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

// ---------------------------------------------------------------------------------------------
// Normalisation

/// Decodes quoted-printable (when the text looks encoded) and strips quote prefixes. Returns
/// the logical lines with the 1-based line number where each starts.
pub fn normalise(text: &str) -> Vec<(usize, String)> {
    let qp = looks_quoted_printable(text);
    let b = text.as_bytes();
    let mut lines = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut line_no = 1usize;
    let mut start_line = 1usize;
    let mut i = 0usize;
    let flush = |cur: &mut Vec<u8>, start: usize, lines: &mut Vec<(usize, String)>| {
        let s = String::from_utf8_lossy(cur);
        let body = s.trim_start_matches(|c: char| c == '>' || c.is_whitespace());
        lines.push((start, body.to_string()));
        cur.clear();
    };
    while i < b.len() {
        let c = b[i];
        if qp && c == b'=' {
            if let (Some(h), Some(l)) = (b.get(i + 1).and_then(hex), b.get(i + 2).and_then(hex)) {
                cur.push(h * 16 + l);
                i += 3;
                continue;
            }
            let mut j = i + 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            if j < b.len() && b[j] == b'\r' && b.get(j + 1) == Some(&b'\n') {
                line_no += 1;
                i = j + 2;
                continue;
            }
            if j < b.len() && b[j] == b'\n' {
                line_no += 1;
                i = j + 1;
                continue;
            }
            if j == b.len() || j > i + 1 {
                // '=' at the very end, or a soft break flattened to "= ".
                i = j;
                continue;
            }
            cur.push(c);
            i += 1;
            continue;
        }
        match c {
            b'\n' => {
                flush(&mut cur, start_line, &mut lines);
                line_no += 1;
                start_line = line_no;
            }
            b'\r' => {}
            _ => cur.push(c),
        }
        i += 1;
    }
    if !cur.is_empty() {
        flush(&mut cur, start_line, &mut lines);
    }
    lines
}

fn hex(c: &u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn looks_quoted_printable(text: &str) -> bool {
    if ["=3D", "=20", "=E2=", "=C2="]
        .iter()
        .any(|p| text.contains(p))
        || text.to_ascii_lowercase().contains("quoted-printable")
    {
        return true;
    }
    // A soft break is '=' at the end of a line, right after a visible character (an encoder
    // writes whitespace before a soft break as =20/=09), or the same flattened to "word= word".
    // "LLC =" + newline or "a = b" in plain text is therefore not taken for one.
    let visible = |c: u8| !c.is_ascii_whitespace() && c != b'=';
    text.lines().any(|l| {
        let b = l.trim_end_matches('\r').as_bytes();
        b.len() >= 2 && b[b.len() - 1] == b'=' && visible(b[b.len() - 2])
    }) || text
        .as_bytes()
        .windows(4)
        .any(|w| visible(w[0]) && w[1] == b'=' && w[2] == b' ' && visible(w[3]))
}

#[derive(Debug, Clone)]
struct Tok {
    s: String,
    line: usize,
}

fn tokenize(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    for (line, body) in normalise(text) {
        for w in body.split_whitespace() {
            if w.chars().all(|c| c == '>') {
                continue;
            }
            out.push(Tok {
                s: w.to_string(),
                line,
            });
        }
    }
    out
}

fn word(t: &[Tok], i: usize) -> Option<&str> {
    t.get(i).map(|x| x.s.as_str())
}

fn is_bar(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| matches!(c, '|' | '*' | '@' | '+'))
}

fn skip_bars(t: &[Tok], mut i: usize) -> usize {
    while word(t, i).is_some_and(is_bar) {
        i += 1;
    }
    i
}

fn err(file: &str, line: usize, field: &str, msg: impl Into<String>) -> Error {
    Error::parse(file, line, field, msg)
}

/// Line of word `i`, or of the last word when `i` is past the end.
fn line_at(t: &[Tok], i: usize) -> usize {
    t.get(i).or_else(|| t.last()).map(|x| x.line).unwrap_or(0)
}

fn found(t: &[Tok], i: usize) -> String {
    match word(t, i) {
        Some(w) => format!("found '{w}'"),
        None => "found the end of the text".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// BCC funclatency

/// Parses every BCC `funclatency` histogram in the text, in order. `file` names the source in
/// errors. A histogram starts at a header such as `nsecs : count distribution`, continues with
/// rows `lo -> hi : count |***|` (contiguous, ascending), and may end with
/// `avg = A nsecs, total: T nsecs, count: N`.
///
/// Strict: a row that cannot be read while rows continue after it (a bad bound, a stray
/// byte), and a missing bucket (funclatency prints every bucket from the first to the last
/// non-empty one, so a gap means lost rows) are errors naming the line. See [`ParseOptions`]
/// for the lenient mode.
pub fn funclatency(text: &str, file: &str) -> Result<Vec<ImportedHistogram>> {
    Ok(funclatency_with(text, file, ParseOptions::default())?.items)
}

/// [`funclatency`] with options; returns what lenient mode skipped.
pub fn funclatency_with(
    text: &str,
    file: &str,
    opts: ParseOptions,
) -> Result<Parsed<ImportedHistogram>> {
    let t = tokenize(text);
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some((unit, after)) = funclatency_header(&t, i) {
            let (h, next) =
                funclatency_body(&t, i, after, unit, out.len() + 1, file, opts, &mut skipped)?;
            out.push(h);
            i = next;
        } else if let Some(w) = funclatency_header_with_unknown_unit(&t, i) {
            // A header whose unit funclatency never prints: dropping its histogram silently
            // would lose data, guessing the unit would scale it.
            return Err(err(
                file,
                line_at(&t, i),
                "unit",
                format!(
                    "'{w} : count distribution' names no unit funclatency prints (nsecs, usecs, msecs)"
                ),
            ));
        } else {
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(err(
            file,
            0,
            "header",
            "no funclatency histogram found (expected a header such as 'nsecs : count distribution')",
        ));
    }
    Ok(Parsed {
        items: out,
        skipped,
    })
}

/// A funclatency row starts at word `i`: `N ->`.
fn funclatency_row_starts(t: &[Tok], i: usize) -> bool {
    word(t, i).is_some_and(is_uint) && word(t, i + 1) == Some("->")
}

/// The tail of a funclatency row at word `k`: `-> N :` or `-> N:`.
fn funclatency_row_tail(t: &[Tok], k: usize) -> bool {
    word(t, k) == Some("->")
        && match word(t, k + 1) {
            Some(w) if is_uint(w) => word(t, k + 2) == Some(":"),
            Some(w) => w.strip_suffix(':').is_some_and(is_uint),
            None => false,
        }
}

/// Rows of the histogram continue at or after word `j` (before the avg line, the next header
/// or the end): the index of the first row tail found.
fn funclatency_rows_continue(t: &[Tok], j: usize) -> Option<usize> {
    (j..t.len())
        .take_while(|&k| word(t, k) != Some("avg") && funclatency_header(t, k).is_none())
        .find(|&k| funclatency_row_tail(t, k))
}

fn funclatency_header(t: &[Tok], i: usize) -> Option<(TimeUnit, usize)> {
    let w = word(t, i)?;
    let unit = match w.trim_end_matches(':') {
        "nsecs" => TimeUnit::Ns,
        "usecs" => TimeUnit::Us,
        "msecs" => TimeUnit::Ms,
        _ => return None,
    };
    let mut j = i + 1;
    if word(t, j)? == ":" {
        j += 1;
    }
    if word(t, j)? != "count" || word(t, j + 1)? != "distribution" {
        return None;
    }
    Some((unit, j + 2))
}

/// The word at `i` when it stands where a funclatency header's unit stands (`X : count
/// distribution`) but is not one of funclatency's units.
fn funclatency_header_with_unknown_unit(t: &[Tok], i: usize) -> Option<String> {
    let w = word(t, i)?.trim_end_matches(':');
    if w.is_empty() || !w.chars().all(|c| c.is_ascii_alphabetic()) || w == "count" {
        return None;
    }
    let mut j = i + 1;
    if word(t, j)? == ":" {
        j += 1;
    } else if !word(t, i)?.ends_with(':') {
        return None;
    }
    (word(t, j)? == "count" && word(t, j + 1)? == "distribution").then(|| w.to_string())
}

fn is_uint(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

fn parse_uint(t: &[Tok], i: usize, file: &str, field: &str, what: &str) -> Result<u64> {
    let w = word(t, i).ok_or_else(|| {
        err(
            file,
            line_at(t, i),
            field,
            format!("expected {what}, found the end of the text"),
        )
    })?;
    if !is_uint(w) {
        return Err(err(
            file,
            line_at(t, i),
            field,
            format!("expected {what}, {}", found(t, i)),
        ));
    }
    w.parse::<u64>().map_err(|_| {
        err(
            file,
            line_at(t, i),
            field,
            format!("'{w}' does not fit in 64 bits"),
        )
    })
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

#[allow(clippy::too_many_arguments)]
fn funclatency_body(
    t: &[Tok],
    header: usize,
    after: usize,
    unit: TimeUnit,
    index: usize,
    file: &str,
    opts: ParseOptions,
    skipped: &mut Vec<Skipped>,
) -> Result<(ImportedHistogram, usize)> {
    let header_line = t[header].line;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut prev_hi: Option<u64> = None;
    let mut j = skip_bars(t, after);
    loop {
        if funclatency_row_starts(t, j) {
            match funclatency_row(t, j, unit, prev_hi, file) {
                Ok((b, hi, next, gap)) => {
                    if let Some(g) = gap {
                        skip_or_fail(opts, skipped, g)?;
                    }
                    prev_hi = Some(hi);
                    buckets.push(b);
                    j = skip_bars(t, next);
                }
                Err(e) => {
                    skip_or_fail(opts, skipped, e)?;
                    j = next_funclatency_row(t, j + 1);
                }
            }
            continue;
        }
        // Not a row: the histogram ends here unless rows continue after this word.
        let Some(tail) = funclatency_rows_continue(t, j) else {
            break;
        };
        let (field, what) = if tail == j + 1 {
            (
                "lo",
                format!(
                    "'{}' is not a bucket's lower bound (an integer)",
                    word(t, j).unwrap_or("")
                ),
            )
        } else {
            (
                "row",
                "expected a row such as '512 -> 1023 : 12'".to_string(),
            )
        };
        let more = if line_at(t, tail) == line_at(t, j) {
            String::new()
        } else {
            format!("; rows continue at line {}", line_at(t, tail))
        };
        let e = err(
            file,
            line_at(t, j),
            field,
            format!(
                "unreadable histogram row '{}': {what}{more} \
                 (--lenient skips such rows with a warning)",
                row_text(t, j),
            ),
        );
        skip_or_fail(opts, skipped, e)?;
        j = next_funclatency_row(t, j + 1);
    }
    if buckets.is_empty() {
        return Err(err(
            file,
            header_line,
            "header",
            format!(
                "histogram header not followed by rows such as '512 -> 1023 : 12', {}",
                found(t, j)
            ),
        ));
    }
    let label = format!("histogram {index} ({})", word(t, header).unwrap_or("nsecs"));
    let histogram = Histogram::new(buckets, file)?;
    let mut h = ImportedHistogram {
        format: HistogramFormat::Funclatency,
        label,
        line: header_line,
        unit,
        histogram,
        printed_avg_ns: None,
        printed_total_ns: None,
        printed_count: None,
    };
    // Optional `avg = A nsecs, total: T nsecs, count: N`.
    let avg_eq = word(t, j + 1).is_some_and(|w| w == "=" || is_uint(w));
    if word(t, j) == Some("avg") && avg_eq {
        let line = t[j].line;
        let mut k = j + 1;
        if word(t, k) == Some("=") {
            k += 1;
        }
        let avg = parse_uint(t, k, file, "avg", "the average after 'avg ='")?;
        let u_avg = avg_unit(t, k + 1, file)?;
        k += 2;
        if word(t, k) != Some("total:") {
            return Err(err(
                file,
                line_at(t, k),
                "total",
                format!("expected 'total:' in the avg line, {}", found(t, k)),
            ));
        }
        let total = parse_uint(t, k + 1, file, "total", "the total after 'total:'")?;
        let u_total = avg_unit(t, k + 2, file)?;
        k += 3;
        if word(t, k) != Some("count:") {
            return Err(err(
                file,
                line_at(t, k),
                "count",
                format!("expected 'count:' in the avg line, {}", found(t, k)),
            ));
        }
        let count = parse_uint(t, k + 1, file, "count", "the count after 'count:'")?;
        let ovf = || err(file, line, "avg", "value overflows when converted to ns");
        h.printed_avg_ns = Some(avg.checked_mul(u_avg.ns()).ok_or_else(ovf)?);
        h.printed_total_ns = Some(total.checked_mul(u_total.ns()).ok_or_else(ovf)?);
        h.printed_count = Some(count);
        j = k + 2;
    }
    Ok((h, j))
}

/// The next funclatency row start at or after word `j` (or the end of its histogram).
fn next_funclatency_row(t: &[Tok], j: usize) -> usize {
    (j..t.len())
        .find(|&k| {
            funclatency_row_starts(t, k)
                || word(t, k) == Some("avg")
                || funclatency_header(t, k).is_some()
        })
        .unwrap_or(t.len())
}

/// One row `lo -> hi : count` at word `j`: the bucket in ns, `hi`, the index after the count,
/// and the gap error when the row does not start right after the previous one.
fn funclatency_row(
    t: &[Tok],
    j: usize,
    unit: TimeUnit,
    prev_hi: Option<u64>,
    file: &str,
) -> Result<(Bucket, u64, usize, Option<Error>)> {
    let line = t[j].line;
    let lo = parse_uint(t, j, file, "lo", "the bucket's lower bound")?;
    let hi_word = word(t, j + 2).unwrap_or("");
    let glued_colon = hi_word.ends_with(':') && hi_word.len() > 1;
    let hi = if glued_colon {
        hi_word.trim_end_matches(':').parse::<u64>().map_err(|_| {
            err(
                file,
                line,
                "hi",
                format!("expected an integer, found '{hi_word}'"),
            )
        })?
    } else {
        parse_uint(t, j + 2, file, "hi", "the bucket's upper bound after '->'")?
    };
    let mut k = j + 3;
    if !glued_colon {
        if word(t, k) != Some(":") {
            return Err(err(
                file,
                line_at(t, k),
                "row",
                format!("expected ':' after '{lo} -> {hi}', {}", found(t, k)),
            ));
        }
        k += 1;
    }
    if line_at(t, k) != line {
        return Err(err(
            file,
            line,
            "count",
            format!("row '{lo} -> {hi} :' has no count on its line"),
        ));
    }
    let count = parse_uint(t, k, file, "count", "the bucket's count")?;
    if lo > hi {
        return Err(err(
            file,
            line,
            "row",
            format!("bucket {lo} -> {hi} has its lower bound above its upper bound"),
        ));
    }
    let gap = match prev_hi {
        Some(p) if p >= lo => {
            return Err(err(
                file,
                line,
                "row",
                format!("bucket {lo} -> {hi} overlaps the previous bucket, which ended at {p}"),
            ))
        }
        Some(p) if p + 1 != lo => Some(gap_error(file, line, p, lo, unit.name())),
        _ => None,
    };
    let b = hi
        .checked_add(1)
        .and_then(|hx| bucket_ns(lo, hx, count, unit))
        .ok_or_else(|| {
            err(
                file,
                line,
                "row",
                "bucket bounds overflow when converted to ns",
            )
        })?;
    Ok((b, hi, k + 1, gap))
}

/// A gap between printed buckets. funclatency and bpftrace both print every bucket from the
/// first to the last non-empty one (empty ones with count 0), so a gap means rows were lost:
/// an error in strict mode; in lenient mode the gap stays (its samples are not counted).
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

fn avg_unit(t: &[Tok], i: usize, file: &str) -> Result<TimeUnit> {
    word(t, i)
        .map(|w| w.trim_end_matches(','))
        .and_then(TimeUnit::parse)
        .ok_or_else(|| {
            err(
                file,
                line_at(t, i),
                "unit",
                format!(
                    "expected a unit such as 'nsecs,' in the avg line, {}",
                    found(t, i)
                ),
            )
        })
}

// ---------------------------------------------------------------------------------------------
// bpftrace hist() / lhist()

/// Parses every bpftrace `hist()` or `lhist()` map in the text, in order; values were recorded
/// in `unit`. A map starts at `@name:` or `@name[key]:` followed by rows
/// `[lo, hi)  count |@@@|` (`[0]`, `[1]` singletons; `K`/`M`/`G` suffixes are powers of 1024).
/// Open-ended rows (`(..., 0)`, `[100, ...)`) and negative buckets are accepted only when
/// empty: a latency histogram with samples outside its range has no usable bounds.
///
/// Strict, like [`funclatency`]: an unreadable row while rows continue after it, and a gap
/// between printed buckets (bpftrace prints every bucket between the first and the last
/// non-empty one), are errors naming the line. See [`ParseOptions`] for the lenient mode.
pub fn bpftrace(text: &str, file: &str, unit: TimeUnit) -> Result<Vec<ImportedHistogram>> {
    Ok(bpftrace_with(text, file, unit, ParseOptions::default())?.items)
}

/// [`bpftrace`] with options; returns what lenient mode skipped.
pub fn bpftrace_with(
    text: &str,
    file: &str,
    unit: TimeUnit,
    opts: ParseOptions,
) -> Result<Parsed<ImportedHistogram>> {
    let t = tokenize(text);
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some((label, after)) = bpftrace_header(&t, i) {
            let (native, next) = bpftrace_rows(&t, after, file, unit, opts, &mut skipped)?;
            if native.is_empty() {
                i = after;
                continue;
            }
            let line = t[i].line;
            let log2 = native.iter().all(|&(lo, hx, _, _)| {
                let b = Bucket {
                    lo_ns: lo as u64,
                    hi_ns: (hx - 1) as u64,
                    count: 0,
                };
                b.is_log2()
            });
            let mut buckets = Vec::new();
            for &(lo, hx, count, row_line) in &native {
                let b = bucket_ns(lo as u64, hx as u64, count, unit).ok_or_else(|| {
                    err(
                        file,
                        row_line,
                        "row",
                        "bucket bounds overflow when converted to ns",
                    )
                })?;
                buckets.push(b);
            }
            out.push(ImportedHistogram {
                format: if log2 {
                    HistogramFormat::BpftraceHist
                } else {
                    HistogramFormat::BpftraceLhist
                },
                label,
                line,
                unit,
                histogram: Histogram::new(buckets, file)?,
                printed_avg_ns: None,
                printed_total_ns: None,
                printed_count: None,
            });
            i = next;
        } else {
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(err(
            file,
            0,
            "header",
            "no bpftrace histogram found (expected '@name:' followed by rows such as '[512, 1K)  262 |@@  |')",
        ));
    }
    Ok(Parsed {
        items: out,
        skipped,
    })
}

/// A bpftrace bucket starts at word `k`: `[lo,`, `[n]` or `(...,`.
fn bpftrace_row_starts(t: &[Tok], k: usize) -> bool {
    word(t, k).is_some_and(|w| {
        (w.starts_with('[') || w.starts_with('(')) && (w.ends_with(',') || w.ends_with(']'))
    })
}

/// Rows of the map continue at or after word `j` (before the next map or the end).
fn bpftrace_rows_continue(t: &[Tok], j: usize) -> Option<usize> {
    (j..t.len())
        .take_while(|&k| bpftrace_header(t, k).is_none())
        .find(|&k| bpftrace_row_starts(t, k))
}

fn bpftrace_header(t: &[Tok], i: usize) -> Option<(String, usize)> {
    let first = word(t, i)?;
    if !first.starts_with('@') {
        return None;
    }
    let mut label = String::new();
    for (j, tok) in t.iter().enumerate().skip(i).take(8) {
        let w = tok.s.as_str();
        if j > i {
            label.push(' ');
        }
        label.push_str(w);
        if w.ends_with(':') {
            label.pop();
            return Some((label, j + 1));
        }
    }
    None
}

/// Parses a number with an optional bpftrace suffix (K, M, G, T, P, E: powers of 1024).
fn suffixed(s: &str) -> Option<i128> {
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1i128 << 10),
        'M' => (&s[..s.len() - 1], 1i128 << 20),
        'G' => (&s[..s.len() - 1], 1i128 << 30),
        'T' => (&s[..s.len() - 1], 1i128 << 40),
        'P' => (&s[..s.len() - 1], 1i128 << 50),
        'E' => (&s[..s.len() - 1], 1i128 << 60),
        _ => (s, 1i128),
    };
    let digits = num.strip_prefix('-').unwrap_or(num);
    if !is_uint(digits) || digits.len() > 20 {
        return None;
    }
    num.parse::<i128>().ok()?.checked_mul(mult)
}

/// Rows as (lo, hi_exclusive, count, line) in the recorded unit; open or negative empty rows
/// are dropped.
type NativeRow = (i128, i128, u64, usize);

fn bpftrace_rows(
    t: &[Tok],
    mut j: usize,
    file: &str,
    unit: TimeUnit,
    opts: ParseOptions,
    skipped: &mut Vec<Skipped>,
) -> Result<(Vec<NativeRow>, usize)> {
    let mut rows: Vec<NativeRow> = Vec::new();
    loop {
        j = skip_bars(t, j);
        let Some(w) = word(t, j) else { break };
        if !(w.starts_with('[') || w.starts_with('(')) {
            // Not a row: the map ends here unless rows continue after this word.
            let Some(next_row) = bpftrace_rows_continue(t, j) else {
                break;
            };
            let e = err(
                file,
                line_at(t, j),
                "bucket",
                format!(
                    "unreadable histogram row '{}': expected a row such as '[512, 1K)  262'; \
                     rows continue at line {} (--lenient skips such rows with a warning)",
                    row_text(t, j),
                    line_at(t, next_row)
                ),
            );
            skip_or_fail(opts, skipped, e)?;
            j = next_row;
            continue;
        }
        match bpftrace_row(t, j, file) {
            Ok((row, next)) => {
                j = next;
                let Some((lo, hx, count, line)) = row else {
                    continue;
                };
                if let Some(&(_, prev_hx, _, _)) = rows.last() {
                    if lo < prev_hx {
                        let e = err(
                            file,
                            line,
                            "bucket",
                            format!("bucket '{w}' overlaps or precedes the previous one"),
                        );
                        skip_or_fail(opts, skipped, e)?;
                        continue;
                    }
                    if lo > prev_hx {
                        let g = gap_error(file, line, (prev_hx - 1) as u64, lo as u64, unit.name());
                        skip_or_fail(opts, skipped, g)?;
                    }
                }
                rows.push((lo, hx, count, line));
            }
            Err(e) => {
                skip_or_fail(opts, skipped, e)?;
                j = (j + 1..t.len())
                    .find(|&k| bpftrace_row_starts(t, k) || bpftrace_header(t, k).is_some())
                    .unwrap_or(t.len());
            }
        }
    }
    Ok((rows, j))
}

/// One bpftrace row at word `j`: the bucket (None for an empty open or negative one) and the
/// index after it.
fn bpftrace_row(t: &[Tok], j: usize, file: &str) -> Result<(Option<NativeRow>, usize)> {
    let w = word(t, j).unwrap_or("");
    let line = t[j].line;
    let bad = |what: &str| {
        err(
            file,
            line,
            "bucket",
            format!("malformed bucket ({what}) at '{w}': expected '[lo, hi)', '[n]', '(..., hi)' or '[lo, ...)'"),
        )
    };
    // Bounds: None means open ("...").
    let (lo, hx, next): (Option<i128>, Option<i128>, usize) =
        if let Some(inner) = w.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            let v = suffixed(inner).ok_or_else(|| bad("singleton"))?;
            (Some(v), Some(v + 1), j + 1)
        } else {
            let a = w[1..].strip_suffix(',').ok_or_else(|| bad("missing ','"))?;
            let b_word = word(t, j + 1).ok_or_else(|| bad("missing upper bound"))?;
            let b = b_word.strip_suffix(')').ok_or_else(|| bad("missing ')'"))?;
            let lo = if a == "..." {
                None
            } else {
                Some(suffixed(a).ok_or_else(|| bad("lower bound"))?)
            };
            let hx = if b == "..." {
                None
            } else {
                Some(suffixed(b).ok_or_else(|| bad("upper bound"))?)
            };
            if w.starts_with('(') != lo.is_none() {
                return Err(bad("'(' goes with '...'"));
            }
            (lo, hx, j + 2)
        };
    if line_at(t, next) != line {
        return Err(err(
            file,
            line,
            "count",
            format!("bucket '{w}' has no count on its line"),
        ));
    }
    let count = parse_uint(t, next, file, "count", "the bucket's count")?;
    match (lo, hx) {
        (Some(lo), Some(hx)) if lo >= 0 => {
            if hx <= lo {
                return Err(err(
                    file,
                    line,
                    "bucket",
                    format!("bucket '{w}' is empty or inverted"),
                ));
            }
            if hx > u64::MAX as i128 {
                return Err(err(file, line, "bucket", "bucket bound does not fit in 64 bits"));
            }
            Ok((Some((lo, hx, count, line)), next + 1))
        }
        _ if count == 0 => Ok((None, next + 1)),
        _ => Err(err(
            file,
            line,
            "bucket",
            format!("open-ended or negative bucket '{w}' holds {count} samples; a latency histogram needs bounded, non-negative buckets (widen the lhist range)"),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// perf lock contention

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockCol {
    Contended,
    Total,
    Max,
    Min,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetKind {
    Caller,
    Address,
    Task,
    Cgroup,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    cols: Vec<LockCol>,
    target: TargetKind,
}

/// Parses every row of `perf lock contention` output in the text, in order. Rows may follow a
/// header (`contended  total wait  max wait  avg wait  type  caller`, or `address symbol` with
/// `-l`, `pid comm` with `-t`, `cgroup` with `-g`; `min wait` accepted) or stand alone, in which
/// case the columns are inferred: a count, three or four times, then the target. Time cells are
/// a decimal and a unit (`ns`, `us`, `ms`, `s`, `m`, `h`). Consecutive rows form one table;
/// anything else between rows starts a new one.
///
/// Strict: every row needs every field on its line (a row without its caller does not take
/// the next row's count for one); a row that cannot be read inside a table (a negative count,
/// an unknown unit) is an error naming the line and field, not a silent end of the table;
/// counts above perf's `unsigned int`, times of 2^64 ns or more, and cells out of order
/// (max wait above total wait, avg above max, min above avg, avg times contended far from the
/// total, beyond the printed rounding) are errors naming the field. See [`ParseOptions`] for
/// the lenient mode.
pub fn perf_lock(text: &str, file: &str) -> Result<Vec<LockContentionRow>> {
    Ok(perf_lock_with(text, file, ParseOptions::default())?.items)
}

/// [`perf_lock`] with options; returns what lenient mode skipped.
pub fn perf_lock_with(
    text: &str,
    file: &str,
    opts: ParseOptions,
) -> Result<Parsed<LockContentionRow>> {
    let t = tokenize(text);
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut table = 0usize;
    let mut layout: Option<Layout> = None;
    // True between rows of one table; a header or any other word ends the table.
    let mut in_table = false;
    let mut i = 0;
    while i < t.len() {
        if let Some((l, after)) = perf_lock_header(&t, i) {
            layout = Some(l);
            in_table = false;
            i = after;
            continue;
        }
        let row_layout = match &layout {
            Some(l) if lock_row_starts(&t, i) => Some(l.clone()),
            _ => infer_layout(&t, i),
        };
        let expecting = layout.is_some() || in_table;
        let broken = row_layout.is_none() && expecting && lock_row_broken(&t, i);
        if row_layout.is_some() || broken {
            if !in_table {
                table += 1;
                in_table = true;
            }
            let parsed = match (&row_layout, &layout) {
                (Some(l), _) | (None, Some(l)) => lock_row(&t, i, l, table, file),
                (None, None) => Err(broken_row_error(&t, i, file)),
            };
            match parsed {
                Ok((row, next)) => {
                    out.push(row);
                    i = next;
                }
                Err(e) => {
                    skip_or_fail(opts, &mut skipped, e)?;
                    i = next_lock_row(&t, i + 1);
                }
            }
            continue;
        }
        in_table = false;
        layout = None;
        i += 1;
    }
    if out.is_empty() {
        return Err(err(
            file,
            0,
            "row",
            "no perf lock contention rows found (expected rows such as '713  4.64 ms  74.37 us  6.51 us  spinlock  __alloc_pages+0x23c')",
        ));
    }
    Ok(Parsed {
        items: out,
        skipped,
    })
}

/// The next row start or header at or after word `j`.
fn next_lock_row(t: &[Tok], j: usize) -> usize {
    (j..t.len())
        .find(|&k| lock_row_starts(t, k) || perf_lock_header(t, k).is_some())
        .unwrap_or(t.len())
}

/// Inside a table, word `i` starts no readable row but its line holds at least two time
/// cells before the next row or header: a row that cannot be read, not the end of the table.
fn lock_row_broken(t: &[Tok], i: usize) -> bool {
    let line = line_at(t, i);
    // A count followed by a bare number on the same line is a row whose unit went astray.
    let count_then_number = word(t, i).is_some_and(is_uint)
        && t.get(i + 1).is_some_and(|n| n.line == line)
        && word(t, i + 1).is_some_and(|w| w.parse::<f64>().is_ok());
    let end = next_lock_row(t, i + 1).min(i + 14);
    count_then_number
        || (i..end)
            .filter(|&k| t[k].line == line && time_cell(t, k).is_some())
            .count()
            >= 2
}

fn broken_row_error(t: &[Tok], i: usize, file: &str) -> Error {
    let w = word(t, i).unwrap_or("");
    let (field, what) = if !is_uint(w) {
        (
            "contended",
            format!("'{w}' is not a contended count (perf prints a non-negative integer)"),
        )
    } else {
        (
            "total wait",
            format!(
                "expected a time such as '4.64 ms' after the count, found '{}'",
                [word(t, i + 1), word(t, i + 2)]
                    .iter()
                    .flatten()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        )
    };
    err(
        file,
        line_at(t, i),
        field,
        format!(
            "unreadable row '{}': {what} (--lenient skips such rows with a warning)",
            row_text(t, i)
        ),
    )
}

fn perf_lock_header(t: &[Tok], i: usize) -> Option<(Layout, usize)> {
    if word(t, i)? != "contended" {
        return None;
    }
    let mut cols = vec![LockCol::Contended];
    let mut j = i + 1;
    loop {
        let col = match (word(t, j), word(t, j + 1)) {
            (Some("total"), Some("wait")) => LockCol::Total,
            (Some("max"), Some("wait")) => LockCol::Max,
            (Some("min"), Some("wait")) => LockCol::Min,
            (Some("avg"), Some("wait")) => LockCol::Avg,
            _ => break,
        };
        cols.push(col);
        j += 2;
    }
    let (target, n) = match (word(t, j), word(t, j + 1)) {
        (Some("type"), Some("caller")) => (TargetKind::Caller, 2),
        (Some("address"), Some("symbol")) => (TargetKind::Address, 2),
        (Some("pid"), Some("comm" | "owner")) => (TargetKind::Task, 2),
        (Some("cgroup"), _) => (TargetKind::Cgroup, 1),
        _ => return None,
    };
    Some((Layout { cols, target }, j + n))
}

/// A row starts with a count followed by a time cell.
fn lock_row_starts(t: &[Tok], i: usize) -> bool {
    word(t, i).is_some_and(is_uint) && time_cell(t, i + 1).is_some()
}

fn infer_layout(t: &[Tok], i: usize) -> Option<Layout> {
    if !lock_row_starts(t, i) {
        return None;
    }
    let mut j = i + 1;
    let mut n = 0;
    while let Some((_, next)) = time_cell(t, j) {
        n += 1;
        j = next;
    }
    let cols = match n {
        3 => vec![
            LockCol::Contended,
            LockCol::Total,
            LockCol::Max,
            LockCol::Avg,
        ],
        4 => vec![
            LockCol::Contended,
            LockCol::Total,
            LockCol::Max,
            LockCol::Min,
            LockCol::Avg,
        ],
        _ => return None,
    };
    let next = word(t, j)?;
    let target = if next.len() >= 8 && next.bytes().all(|c| c.is_ascii_hexdigit()) {
        TargetKind::Address
    } else if next.parse::<i64>().is_ok() {
        TargetKind::Task
    } else {
        TargetKind::Caller
    };
    Some(Layout { cols, target })
}

/// A time cell at word `i`: `4.64 ms` (two words) or `4.64ms` (one). Returns the value and the
/// index after it.
fn time_cell(t: &[Tok], i: usize) -> Option<(WaitTime, usize)> {
    let w = word(t, i)?;
    if let Some(u) = word(t, i + 1).and_then(lock_unit) {
        if let Some(ns) = decimal_ns(w, u) {
            return Some((
                WaitTime {
                    ns,
                    text: format!("{w} {}", word(t, i + 1).unwrap_or("")),
                },
                i + 2,
            ));
        }
    }
    let split = w.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = w.split_at(split);
    let ns = decimal_ns(num, lock_unit(unit)?)?;
    Some((
        WaitTime {
            ns,
            text: w.to_string(),
        },
        i + 1,
    ))
}

fn lock_unit(s: &str) -> Option<u64> {
    match s {
        "ns" => Some(1),
        "us" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        "m" => Some(60_000_000_000),
        "h" => Some(3_600_000_000_000),
        _ => None,
    }
}

/// Exact conversion of a printed decimal in a unit of `factor` ns.
fn decimal_ns(s: &str, factor: u64) -> Option<f64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if !is_uint(int) || !(frac.is_empty() || is_uint(frac)) || int.len() + frac.len() > 30 {
        return None;
    }
    let scale = 10u128.checked_pow(frac.len() as u32)?;
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let num = digits.checked_mul(factor as u128)?;
    if num % scale == 0 {
        Some((num / scale) as f64)
    } else {
        Some(num as f64 / scale as f64)
    }
}

fn lock_row(
    t: &[Tok],
    i: usize,
    layout: &Layout,
    table: usize,
    file: &str,
) -> Result<(LockContentionRow, usize)> {
    let line = t[i].line;
    let mut j = i;
    let mut contended = None;
    let (mut total, mut max, mut min, mut avg) = (None, None, None, None);
    for col in &layout.cols {
        match col {
            LockCol::Contended => {
                let c = parse_uint(t, j, file, "contended", "the contended count")?;
                if c > MAX_CONTENDED {
                    return Err(err(
                        file,
                        line,
                        "contended",
                        format!(
                            "{c} is above {MAX_CONTENDED}: perf counts contentions in an \
                             unsigned int"
                        ),
                    ));
                }
                contended = Some(c);
                j += 1;
            }
            c => {
                let name = match c {
                    LockCol::Total => "total wait",
                    LockCol::Max => "max wait",
                    LockCol::Min => "min wait",
                    _ => "avg wait",
                };
                let (v, next) = time_cell(t, j).ok_or_else(|| {
                    let seen = [word(t, j), word(t, j + 1)]
                        .iter()
                        .flatten()
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" ");
                    err(
                        file,
                        line_at(t, j),
                        name,
                        if seen.is_empty() {
                            format!("expected a time such as '4.64 ms', {}", found(t, j))
                        } else {
                            format!(
                                "expected a time such as '4.64 ms' (units ns, us, ms, s, m, h), \
                                 found '{seen}'"
                            )
                        },
                    )
                })?;
                if line_at(t, j) != line {
                    return Err(err(
                        file,
                        line,
                        name,
                        format!("the row has no '{name}': it ends at its line"),
                    ));
                }
                if v.ns >= MAX_WAIT_NS {
                    return Err(err(
                        file,
                        line,
                        name,
                        format!(
                            "'{}' is 2^64 ns or more: perf keeps wait times as u64 nanoseconds \
                             (584 years)",
                            v.text
                        ),
                    ));
                }
                match c {
                    LockCol::Total => total = Some(v),
                    LockCol::Max => max = Some(v),
                    LockCol::Min => min = Some(v),
                    _ => avg = Some(v),
                }
                j = next;
            }
        }
    }
    let missing = |what: &str| {
        err(
            file,
            line,
            what,
            format!("the table has no '{what}' column (run perf lock contention with its default columns)"),
        )
    };
    let contended = contended.ok_or_else(|| missing("contended"))?;
    let total_wait = total.ok_or_else(|| missing("total wait"))?;
    let max_wait = max.ok_or_else(|| missing("max wait"))?;
    let avg_wait = avg.ok_or_else(|| missing("avg wait"))?;
    check_wait_order(
        file,
        line,
        contended,
        &total_wait,
        &max_wait,
        min.as_ref(),
        &avg_wait,
    )?;
    // A field must be on the row's line and must not be the start of the next row.
    let need = |k: usize, what: &str| -> Result<String> {
        let missing = |why: String| {
            err(
                file,
                line,
                what,
                format!("the row has no {what} ({why}); every field of a row is needed"),
            )
        };
        let Some(w) = word(t, k) else {
            return Err(missing("the text ends".to_string()));
        };
        if t[k].line != line {
            return Err(missing(format!(
                "its line ends before it; line {} follows",
                t[k].line
            )));
        }
        if lock_row_starts(t, k) {
            return Err(missing(format!("'{w}' starts the next row")));
        }
        Ok(w.to_string())
    };
    let target = match layout.target {
        TargetKind::Caller => {
            let lock_type = need(j, "type")?;
            let caller = need(j + 1, "caller")?;
            j += 2;
            LockTarget::Caller { lock_type, caller }
        }
        TargetKind::Address => {
            let address = need(j, "address")?;
            if !address.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(err(
                    file,
                    line_at(t, j),
                    "address",
                    format!("expected a hex lock address, found '{address}'"),
                ));
            }
            let symbol = need(j + 1, "symbol")?;
            j += 2;
            let lock_type = match word(t, j) {
                Some(w) if w.starts_with('(') && w.ends_with(')') && w.len() > 2 => {
                    j += 1;
                    Some(w[1..w.len() - 1].to_string())
                }
                _ => None,
            };
            LockTarget::Address {
                address,
                symbol,
                lock_type,
            }
        }
        TargetKind::Task => {
            let pid_w = need(j, "pid")?;
            let pid = pid_w.parse::<i64>().map_err(|_| {
                err(
                    file,
                    line_at(t, j),
                    "pid",
                    format!("expected a pid, found '{pid_w}'"),
                )
            })?;
            let comm = need(j + 1, "comm")?;
            j += 2;
            LockTarget::Task { pid, comm }
        }
        TargetKind::Cgroup => {
            let name = need(j, "cgroup")?;
            j += 1;
            LockTarget::Cgroup { name }
        }
    };
    Ok((
        LockContentionRow {
            table,
            line,
            contended,
            total_wait,
            max_wait,
            min_wait: min,
            avg_wait,
            target,
        },
        j,
    ))
}

/// Half a unit of the last printed digit of a time cell, ns: the rounding of the print.
fn half_ulp_ns(w: &WaitTime) -> f64 {
    let (num, unit) = match w.text.split_once(' ') {
        Some((n, u)) => (n, u),
        None => {
            let split = w
                .text
                .find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(w.text.len());
            w.text.split_at(split)
        }
    };
    let decimals = num.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
    lock_unit(unit).unwrap_or(1) as f64 * 0.5 * 10f64.powi(-decimals)
}

/// The wait cells of one row must be in the order perf computes them: min <= avg <= max <=
/// total, avg = total / contended, each within its printed rounding.
fn check_wait_order(
    file: &str,
    line: usize,
    contended: u64,
    total: &WaitTime,
    max: &WaitTime,
    min: Option<&WaitTime>,
    avg: &WaitTime,
) -> Result<()> {
    let above = |a: &WaitTime, b: &WaitTime| a.ns > b.ns + half_ulp_ns(a) + half_ulp_ns(b);
    let order = |field: &str, a: &WaitTime, rel: &str, b: &WaitTime| {
        err(
            file,
            line,
            field,
            format!(
                "{field} '{}' is above {rel} '{}': perf's cells satisfy min <= avg <= max <= \
                 total",
                a.text, b.text
            ),
        )
    };
    if above(max, total) {
        return Err(order("max wait", max, "total wait", total));
    }
    if above(avg, max) {
        return Err(order("avg wait", avg, "max wait", max));
    }
    if let Some(m) = min {
        if above(m, avg) {
            return Err(order("min wait", m, "avg wait", avg));
        }
    }
    if contended > 0 {
        let c = contended as f64;
        // avg = total / contended truncated to ns, then each cell rounded in print.
        let slack = c * (half_ulp_ns(avg) + 1.0) + half_ulp_ns(total);
        if (avg.ns * c - total.ns).abs() > slack {
            return Err(err(
                file,
                line,
                "avg wait",
                format!(
                    "avg wait '{}' times contended {contended} is {:.0} ns, but total wait is \
                     '{}' ({:.0} ns): perf prints avg = total / contended",
                    avg.text,
                    avg.ns * c,
                    total.text,
                    total.ns
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_soft_breaks_hex_and_flattened() {
        let lines = normalise("> a =3D 1\n> count: 130=\n5242\nx\n");
        assert_eq!(lines[0], (1, "a = 1".to_string()));
        assert_eq!(lines[1], (2, "count: 1305242".to_string()));
        assert_eq!(lines[2], (4, "x".to_string()));
        let flat = normalise("avg =3D 1 count: 130= 5242 z=E2=80=AFw");
        assert_eq!(flat[0].1, "avg = 1 count: 1305242 z\u{202f}w");
        // Not QP: '=' is literal.
        assert_eq!(normalise("avg = 5")[0].1, "avg = 5");
        assert_eq!(normalise("> LLC =\n> 12288")[1].1, "12288");
    }

    #[test]
    fn decimal_is_exact() {
        assert_eq!(decimal_ns("4.64", 1_000_000), Some(4_640_000.0));
        assert_eq!(decimal_ns("879.80", 1_000), Some(879_800.0));
        assert_eq!(decimal_ns("12", 1), Some(12.0));
        assert_eq!(decimal_ns("1.x", 1), None);
    }

    #[test]
    fn suffixes_are_powers_of_1024() {
        assert_eq!(suffixed("1K"), Some(1024));
        assert_eq!(suffixed("2M"), Some(2 << 20));
        assert_eq!(suffixed("-5"), Some(-5));
        assert_eq!(suffixed("K"), None);
    }
}
