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
pub fn funclatency(text: &str, file: &str) -> Result<Vec<ImportedHistogram>> {
    let t = tokenize(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some((unit, after)) = funclatency_header(&t, i) {
            let (h, next) = funclatency_body(&t, i, after, unit, out.len() + 1, file)?;
            out.push(h);
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
            "no funclatency histogram found (expected a header such as 'nsecs : count distribution')",
        ));
    }
    Ok(out)
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

fn funclatency_body(
    t: &[Tok],
    header: usize,
    after: usize,
    unit: TimeUnit,
    index: usize,
    file: &str,
) -> Result<(ImportedHistogram, usize)> {
    let header_line = t[header].line;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut prev_hi: Option<u64> = None;
    let mut j = skip_bars(t, after);
    while word(t, j).is_some_and(is_uint) && word(t, j + 1) == Some("->") {
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
        let count = parse_uint(t, k, file, "count", "the bucket's count")?;
        if lo > hi {
            return Err(err(
                file,
                line,
                "row",
                format!("bucket {lo} -> {hi} has its lower bound above its upper bound"),
            ));
        }
        if let Some(p) = prev_hi {
            if p.checked_add(1) != Some(lo) {
                return Err(err(
                    file,
                    line,
                    "row",
                    format!("bucket {lo} -> {hi} does not start right after the previous bucket, which ended at {p}"),
                ));
            }
        }
        prev_hi = Some(hi);
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
        buckets.push(b);
        j = skip_bars(t, k + 1);
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
pub fn bpftrace(text: &str, file: &str, unit: TimeUnit) -> Result<Vec<ImportedHistogram>> {
    let t = tokenize(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some((label, after)) = bpftrace_header(&t, i) {
            let (native, next) = bpftrace_rows(&t, after, file)?;
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
    Ok(out)
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

fn bpftrace_rows(t: &[Tok], mut j: usize, file: &str) -> Result<(Vec<NativeRow>, usize)> {
    let mut rows: Vec<NativeRow> = Vec::new();
    loop {
        j = skip_bars(t, j);
        let Some(w) = word(t, j) else { break };
        if !(w.starts_with('[') || w.starts_with('(')) {
            break;
        }
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
        let count = parse_uint(t, next, file, "count", "the bucket's count")?;
        j = next + 1;
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
                if let Some(&(_, prev_hx, _, _)) = rows.last() {
                    if lo < prev_hx {
                        return Err(err(
                            file,
                            line,
                            "bucket",
                            format!("bucket '{w}' overlaps or precedes the previous one"),
                        ));
                    }
                }
                if hx > u64::MAX as i128 {
                    return Err(err(file, line, "bucket", "bucket bound does not fit in 64 bits"));
                }
                rows.push((lo, hx, count, line));
            }
            _ if count == 0 => {}
            _ => {
                return Err(err(
                    file,
                    line,
                    "bucket",
                    format!("open-ended or negative bucket '{w}' holds {count} samples; a latency histogram needs bounded, non-negative buckets (widen the lhist range)"),
                ))
            }
        }
    }
    Ok((rows, j))
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
pub fn perf_lock(text: &str, file: &str) -> Result<Vec<LockContentionRow>> {
    let t = tokenize(text);
    let mut out = Vec::new();
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
        if let Some(l) = row_layout {
            if !in_table {
                table += 1;
                in_table = true;
            }
            let (row, next) = lock_row(&t, i, &l, table, file)?;
            out.push(row);
            i = next;
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
    Ok(out)
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
                contended = Some(parse_uint(t, j, file, "contended", "the contended count")?);
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
                    err(
                        file,
                        line_at(t, j),
                        name,
                        format!("expected a time such as '4.64 ms', {}", found(t, j)),
                    )
                })?;
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
    let need = |k: usize, what: &str| -> Result<String> {
        word(t, k).map(str::to_string).ok_or_else(|| {
            err(
                file,
                line_at(t, k),
                what,
                format!("expected the {what} after the wait times, found the end of the text"),
            )
        })
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
