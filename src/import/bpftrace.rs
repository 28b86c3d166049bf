//! bpftrace `hist()` / `lhist()` maps.

use super::normalise::{err, is_uint, line_at, parse_uint, skip_bars, tokenize, word, Tok};
use super::{
    bucket_ns, gap_error, nonempty_histogram, row_text, skip_or_fail, HistogramFormat,
    ImportedHistogram, ParseOptions, Parsed, Skipped, TimeUnit,
};

use crate::data::Bucket;
use crate::error::Result;

/// Parses every bpftrace `hist()` or `lhist()` map in the text, in order; values were recorded
/// in `unit`. A map starts at `@name:` or `@name[key]:` followed by rows
/// `[lo, hi)  count |@@@|` (`[0]`, `[1]` singletons; `K`/`M`/`G` suffixes are powers of 1024).
/// Open-ended rows (`(..., 0)`, `[100, ...)`) and negative buckets are accepted only when
/// empty: a latency histogram with samples outside its range has no usable bounds.
///
/// Strict, like `funclatency`: an unreadable row while rows continue after it, and a gap
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
                buckets.push((row_line, b));
            }
            let histogram = nonempty_histogram(buckets, file, line, "samples")?;
            out.push(ImportedHistogram {
                format: if log2 {
                    HistogramFormat::BpftraceHist
                } else {
                    HistogramFormat::BpftraceLhist
                },
                label,
                line,
                unit,
                histogram,
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

/// A row read by [`bpftrace_row`]: kept, or an empty open or negative one, dropped but still
/// in order (`lo`: None for `(..., hi)`; its line).
enum BpfRow {
    Kept(NativeRow),
    Empty(Option<i128>, usize),
}

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
                // Every row must follow the rows before it, a dropped empty one too: bpftrace
                // prints '(..., min)' first and '[max, ...)' last (None: an open lower bound).
                let prev_hx = rows.last().map(|&(_, hx, _, _)| hx);
                let precedes = |lo: Option<i128>, line: usize| {
                    prev_hx.filter(|&p| lo.is_none_or(|lo| lo < p)).map(|_| {
                        err(
                            file,
                            line,
                            "bucket",
                            format!("bucket '{w}' overlaps or precedes the previous one"),
                        )
                    })
                };
                let (lo, hx, count, line) = match row {
                    BpfRow::Kept(r) => r,
                    BpfRow::Empty(lo, line) => {
                        if let Some(e) = precedes(lo, line) {
                            skip_or_fail(opts, skipped, e)?;
                        }
                        continue;
                    }
                };
                if let Some(e) = precedes(Some(lo), line) {
                    skip_or_fail(opts, skipped, e)?;
                    continue;
                }
                if let Some(prev_hx) = prev_hx {
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

/// One bpftrace row at word `j`: the bucket (empty open or negative ones apart) and the index
/// after it.
fn bpftrace_row(t: &[Tok], j: usize, file: &str) -> Result<(BpfRow, usize)> {
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
            Ok((BpfRow::Kept((lo, hx, count, line)), next + 1))
        }
        _ if count == 0 => Ok((BpfRow::Empty(lo, line), next + 1)),
        _ => Err(err(
            file,
            line,
            "bucket",
            format!("open-ended or negative bucket '{w}' holds {count} samples; a latency histogram needs bounded, non-negative buckets (widen the lhist range)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_powers_of_1024() {
        assert_eq!(suffixed("1K"), Some(1024));
        assert_eq!(suffixed("2M"), Some(2 << 20));
        assert_eq!(suffixed("-5"), Some(-5));
        assert_eq!(suffixed("K"), None);
    }
}
