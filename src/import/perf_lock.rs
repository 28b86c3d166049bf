//! `perf lock contention` tables.

use super::normalise::{err, found, is_uint, line_at, parse_uint, tokenize, word, Tok};
use super::{
    row_text, skip_or_fail, LockContentionRow, LockTarget, ParseOptions, Parsed, WaitTime,
    MAX_CONTENDED, MAX_WAIT_NS,
};

use crate::error::{Error, Result};

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
        let broken = row_layout.is_none() && expecting && lock_row_broken(&t, i, layout.as_ref());
        if row_layout.is_some() || broken {
            if !in_table {
                table += 1;
                in_table = true;
            }
            let parsed = match (&row_layout, &layout) {
                (Some(l), _) | (None, Some(l)) => lock_row(&t, i, l, table, file),
                (None, None) => Err(broken_row_error(&t, i, file)),
            };
            // A row ends at its caller: another word on the row's line (a caller with a space
            // in it, an extra column) or a byte that was not UTF-8 is an error, not dropped.
            let parsed = parsed.and_then(|(row, next)| {
                let line = line_at(&t, i);
                if let Some(bad) = t[i..next].iter().find(|w| w.s.contains('\u{FFFD}')) {
                    return Err(err(
                        file,
                        line,
                        "caller",
                        format!(
                            "'{}' holds a byte that is not UTF-8 (a stray byte of the paste): fix the line",
                            bad.s
                        ),
                    ));
                }
                // Only for a row that begins its line: a mail archive's flattened text runs
                // rows and prose together on one line.
                let starts_line = i == 0 || t[i - 1].line != line;
                match t.get(next) {
                    Some(extra) if starts_line && extra.line == line => Err(err(
                        file,
                        line,
                        "caller",
                        format!(
                            "unexpected '{}' after the row's last column '{}' (perf prints one word per column: symbol+offset)",
                            extra.s,
                            t[next - 1].s
                        ),
                    )),
                    _ => Ok((row, next)),
                }
            });
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
/// cells before the next readable row or header (`layout` the table's columns, if known): a
/// row that cannot be read, not the end of the table.
fn lock_row_broken(t: &[Tok], i: usize, layout: Option<&Layout>) -> bool {
    let line = line_at(t, i);
    // A count followed by a bare number on the same line is a row whose unit went astray.
    let count_then_number = word(t, i).is_some_and(is_uint)
        && t.get(i + 1).is_some_and(|n| n.line == line)
        && word(t, i + 1).is_some_and(|w| w.parse::<f64>().is_ok());
    // The window ends at the next row that reads as one, or a header: a row start inside a
    // row whose first cells were swapped ('us  143.20 12  20.01 us ...') does not end it.
    let reads = |k: usize| match layout {
        Some(l) => lock_row(t, k, l, 0, "").is_ok(),
        None => infer_layout(t, k).is_some(),
    };
    let end = (i + 1..t.len().min(i + 14))
        .find(|&k| perf_lock_header(t, k).is_some() || (lock_row_starts(t, k) && reads(k)))
        .unwrap_or(t.len().min(i + 14));
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
    if contended == 0 && total.ns > half_ulp_ns(total) {
        return Err(err(
            file,
            line,
            "contended",
            format!(
                "0 contended acquisitions but a total wait of {}: perf counts a wait only for a contended acquisition",
                total.text
            ),
        ));
    }
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
    fn decimal_is_exact() {
        assert_eq!(decimal_ns("4.64", 1_000_000), Some(4_640_000.0));
        assert_eq!(decimal_ns("879.80", 1_000), Some(879_800.0));
        assert_eq!(decimal_ns("12", 1), Some(12.0));
        assert_eq!(decimal_ns("1.x", 1), None);
    }
}
