//! BCC `funclatency` histograms.

use super::normalise::{err, found, is_uint, line_at, parse_uint, skip_bars, tokenize, word, Tok};
use super::{
    bucket_ns, gap_error, nonempty_histogram, row_text, skip_or_fail, HistogramFormat,
    ImportedHistogram, ParseOptions, Parsed, Skipped, TimeUnit,
};

use crate::data::Bucket;
use crate::error::{Error, Result};

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
        } else if funclatency_row_starts(&t, i) && funclatency_row_tail(&t, i + 1) {
            // Rows with no header before them: the header was lost, and its unit with it.
            let e = err(
                file,
                line_at(&t, i),
                "header",
                format!(
                    "histogram row '{}' has no header line before it (such as 'nsecs : count distribution'): its unit is unknown (--lenient skips these rows with a warning)",
                    row_text(&t, i)
                ),
            );
            skip_or_fail(opts, &mut skipped, e)?;
            i = (i + 1..t.len())
                .find(|&k| word(&t, k) == Some("avg") || funclatency_header(&t, k).is_some())
                .unwrap_or(t.len());
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

/// The words from `j` to the end of its line (at most 8) hold a distribution bar (`|...`) and
/// a `->` or a `:`: the shape of a histogram row, whatever its numbers.
fn row_shaped(t: &[Tok], j: usize) -> bool {
    let line = line_at(t, j);
    let words: Vec<&str> = (j..t.len().min(j + 8))
        .take_while(|&k| t[k].line == line)
        .map(|k| t[k].s.as_str())
        .collect();
    words.iter().any(|w| w.starts_with('|')) && words.iter().any(|w| *w == "->" || w.ends_with(':'))
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
    let mut buckets: Vec<(usize, Bucket)> = Vec::new();
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
                    buckets.push((t[j].line, b));
                    j = skip_bars(t, next);
                }
                Err(e) => {
                    skip_or_fail(opts, skipped, e)?;
                    j = next_funclatency_row(t, j + 1);
                }
            }
            continue;
        }
        // Not a row: the histogram ends here unless rows continue after this word, or this
        // line is itself a row by its shape (a mangled last row: ': -> 31  16 2  |   |').
        let Some(tail) = funclatency_rows_continue(t, j).or_else(|| row_shaped(t, j).then_some(j))
        else {
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
    let histogram = nonempty_histogram(buckets, file, header_line, "calls")?;
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
        // funclatency counts each call once in the map and once in the total: the buckets can
        // miss a few calls (still in flight when it printed), never hold more.
        let in_buckets = h.histogram.total_count();
        if in_buckets > count {
            return Err(err(
                file,
                line_at(t, k),
                "count",
                format!(
                    "the buckets hold {in_buckets} calls but the avg line says count: {count}: the histogram and its summary are not one run's (a paste joined from two?)"
                ),
            ));
        }
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
