//! [`Dataset`]: measured rows mapped onto a model's inputs and target, read from CSV by header name.

use std::path::Path;

use serde::Serialize;

use super::FitModel;
use crate::error::{Error, Result};

/// Measured rows mapped onto a model's inputs and target.
///
/// Stored as `x` (one vector of input values per row, in the model's input order) and `y`
/// rather than generic columns, because the fit needs exactly that and the mapping by header is
/// done once, where errors can name the line and column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dataset {
    /// Input column names, in the model's order.
    pub inputs: Vec<String>,
    /// Target column name.
    pub target: String,
    /// Input values, one vector per row.
    pub x: Vec<Vec<f64>>,
    /// Measured target values, one per row.
    pub y: Vec<f64>,
    /// A label per row: the `label`, `name` or `machine` column if present, else `line N`.
    pub row_labels: Vec<String>,
    /// 1-based line in the source file of each row (0 when not from a file).
    pub lines: Vec<usize>,
    /// Where the data came from (file name or label).
    pub source: String,
    /// Columns of the file that no input or target reads (descriptive columns the caller
    /// allowed: `machine`, `note`, a sweep's spread, ...), in header order: a caller says so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns_not_read: Vec<String>,
    /// The cells of the tag columns ([`TAG_COLUMNS`]: `machine`, `workload`) present in the
    /// file, one vector per column (one cell per row, empty when the row has none).
    #[serde(skip)]
    pub tags: Vec<(String, Vec<String>)>,
    /// (model column, name in the file) for the inputs read under another name.
    #[serde(skip)]
    pub aliases: Vec<(String, String)>,
}

/// Columns used as row labels, in order of preference.
const LABEL_COLUMNS: &[&str] = &["label", "name", "machine"];

/// Columns every measurement CSV may carry besides the model's: labels and a note. They are
/// not read (the label of a row excepted).
pub const DESCRIPTIVE_COLUMNS: &[&str] = &[
    "label",
    "name",
    "machine",
    "note",
    "high_label",
    "annotation",
];

/// Columns whose cells are kept ([`Dataset::tags`]) so that a caller can check them against
/// the run: the machine and the workload a row was measured on.
pub const TAG_COLUMNS: &[&str] = &["machine", "workload"];

/// The columns `pcpmodel measure pcp --output` writes besides `machine`, `pcp_high_pages` and
/// `score` (the spread of the repeats, the live pcp->high range, the sysctl and the workload):
/// accepted and not read by the fits that read such a sweep.
pub const SWEEP_COLUMNS: &[&str] = &[
    "score_q1",
    "score_q3",
    "score_min",
    "score_max",
    "n",
    "high_min",
    "high_max",
    "percpu_pagelist_high_fraction",
    "workload",
    "run_seconds",
];

/// The `workload` cells `measure pcp --output` writes, with the built-in workload each measures
/// (`page-fault` has none with a pcp->high model).
pub const MEASURE_PCP_WORKLOADS: &[(&str, &str)] = &[
    ("netperf-udp", "netperf-udp"),
    ("af-unix", "lmbench-af-unix"),
];

/// Which columns of a CSV a caller accepts besides the model's inputs and target and
/// [`DESCRIPTIVE_COLUMNS`], and the names under which the file may give a model column.
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvColumns<'a> {
    /// Further columns accepted and not read (e.g. [`SWEEP_COLUMNS`], a data table's notes).
    pub allowed: &'a [&'a str],
    /// (model column, name in the file): the file may name the model's column so (e.g. `high`
    /// written `pcp_high_pages`, as `measure pcp` does).
    pub aliases: &'a [(&'a str, &'a str)],
}

/// Longest echo of a cell in an error message, characters.
const MAX_ECHO_CHARS: usize = 40;

/// A cell (or any user text) as an error message shows it: control characters escaped (a NUL
/// or a tab is visible), at most `MAX_ECHO_CHARS` characters with `…` when cut (a
/// two-million-digit cell is not echoed in full).
pub fn echo(cell: &str) -> String {
    let mut out = String::new();
    for (n, c) in cell.chars().enumerate() {
        if n == MAX_ECHO_CHARS {
            out.push('…');
            return out;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl Dataset {
    /// Parses CSV text whose header names the model's inputs and target (in any order), plus
    /// at most the [`DESCRIPTIVE_COLUMNS`] (`label`, `name`, `machine`, `note`). Lines starting
    /// with `#` are comments. See [`Dataset::from_csv_str_with`] for the errors.
    pub fn from_csv_str(text: &str, label: &str, model: &dyn FitModel) -> Result<Dataset> {
        Self::from_csv_str_with(text, label, model, CsvColumns::default())
    }

    /// Parses CSV text whose header names the model's inputs and target (in any order, a
    /// model column possibly under one of `cols.aliases`' names); the other columns must be
    /// [`DESCRIPTIVE_COLUMNS`] or in `cols.allowed` (they are not read: listed in
    /// [`Dataset::columns_not_read`]). Lines starting with `#` are comments.
    ///
    /// Errors ([`Error::Parse`], naming `label`, the 1-based line and the column): no header,
    /// a missing, unknown or duplicated column, no data rows, a short row, a row with more
    /// (non-empty) fields than the header, an empty, non-numeric, NaN or infinite cell.
    /// Echoed cells are cut to 40 characters and their control characters escaped.
    pub fn from_csv_str_with(
        text: &str,
        label: &str,
        model: &dyn FitModel,
        cols: CsvColumns<'_>,
    ) -> Result<Dataset> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let header_line = header_line(text).ok_or_else(|| {
            Error::parse(
                label,
                0,
                "header",
                format!(
                    "no header line: expected a CSV header naming the columns {}",
                    needed_columns(model).join(", ")
                ),
            )
        })?;
        let mut rdr = csv_reader(text);
        let headers: Vec<String> = rdr
            .headers()
            .map_err(|e| csv_error(label, text, e))?
            .iter()
            .map(str::to_string)
            .collect();
        let needed = needed_columns(model);
        let in_file = |col: &str| -> String {
            cols.aliases
                .iter()
                .find(|(m, f)| *m == col && headers.iter().any(|h| h == f))
                .map_or_else(|| col.to_string(), |(_, f)| f.to_string())
        };
        let file_names: Vec<String> = needed.iter().map(|c| in_file(c)).collect();
        let specs = model.inputs();
        let mut index = Vec::with_capacity(needed.len());
        for (col, fcol) in needed.iter().zip(&file_names) {
            let hits: Vec<usize> = headers
                .iter()
                .enumerate()
                .filter(|(_, h)| *h == fcol)
                .map(|(i, _)| i)
                .collect();
            match hits.as_slice() {
                [i] => index.push(*i),
                [] => {
                    let near = headers
                        .iter()
                        .find(|h| h.eq_ignore_ascii_case(col))
                        .map(|h| format!(" (found '{}': names are case-sensitive)", echo(h)))
                        .unwrap_or_default();
                    let alias = cols
                        .aliases
                        .iter()
                        .filter(|(m, _)| m == col)
                        .map(|(_, f)| format!(" (or '{f}')"))
                        .collect::<String>();
                    return Err(Error::parse(
                        label,
                        header_line,
                        col.as_str(),
                        format!(
                            "missing column '{col}'{alias}{near}; model '{}' needs columns {}; the header has {}",
                            model.name(),
                            needed.join(", "),
                            echo_list(&headers)
                        ),
                    ));
                }
                _ => {
                    return Err(Error::parse(
                        label,
                        header_line,
                        fcol.as_str(),
                        format!("column '{fcol}' appears {} times in the header", hits.len()),
                    ))
                }
            }
        }
        let mut columns_not_read = Vec::new();
        for (i, h) in headers.iter().enumerate() {
            if index.contains(&i) {
                continue;
            }
            if DESCRIPTIVE_COLUMNS.contains(&h.as_str()) || cols.allowed.contains(&h.as_str()) {
                columns_not_read.push(h.clone());
                continue;
            }
            let mut accepted: Vec<&str> = DESCRIPTIVE_COLUMNS.to_vec();
            for a in cols.allowed {
                if !accepted.contains(a) {
                    accepted.push(a);
                }
            }
            let why = if h.is_empty() {
                "an empty column name (a trailing comma in the header?)".to_string()
            } else {
                format!("unknown column '{}'", echo(h))
            };
            return Err(Error::invalid(
                format!("{label}:{header_line}:{}", i + 1),
                echo(h),
                format!(
                    "{why}: model '{}' reads {} and accepts (without reading them) {}; a column \
                     nothing reads would be silently ignored, so it is refused (remove it or \
                     rename it to note)",
                    model.name(),
                    file_names.join(", "),
                    accepted.join(", ")
                ),
            ));
        }
        let label_index = LABEL_COLUMNS
            .iter()
            .find_map(|name| headers.iter().position(|h| h == name));
        let tag_index: Vec<(String, usize)> = TAG_COLUMNS
            .iter()
            .filter_map(|t| {
                headers
                    .iter()
                    .position(|h| h == t)
                    .map(|i| (t.to_string(), i))
            })
            .collect();
        let n_inputs = needed.len() - 1;
        let mut data = Dataset {
            inputs: needed[..n_inputs].to_vec(),
            target: needed[n_inputs].clone(),
            x: Vec::new(),
            y: Vec::new(),
            row_labels: Vec::new(),
            lines: Vec::new(),
            source: label.to_string(),
            columns_not_read,
            tags: tag_index
                .iter()
                .map(|(t, _)| (t.clone(), Vec::new()))
                .collect(),
            aliases: needed
                .iter()
                .zip(&file_names)
                .filter(|(m, f)| m != f)
                .map(|(m, f)| (m.clone(), f.clone()))
                .collect(),
        };
        let mut rec = csv::StringRecord::new();
        for row_no in 0.. {
            if !rdr
                .read_record(&mut rec)
                .map_err(|e| csv_error(label, text, e))?
            {
                break;
            }
            let line = rec
                .position()
                .map_or(0, |p| record_line(text, p.byte(), p.line()));
            let span = (
                rec.position().map_or(0, |p| p.byte()),
                rdr.position().byte(),
            );
            crate::data::refuse_multiline_record(text, span, &headers, label, line, row_no + 1)?;
            if let Some((i, cell)) = rec
                .iter()
                .enumerate()
                .skip(headers.len())
                .find(|(_, c)| !c.is_empty())
            {
                return Err(Error::invalid(
                    format!("{label}:{line}:{}", i + 1),
                    "row",
                    format!(
                        "data row {}: {} fields under a header of {}: the extra value '{}' would \
                         be dropped (a comma inside a value needs quotes)",
                        row_no + 1,
                        rec.len(),
                        headers.len(),
                        echo(cell)
                    ),
                ));
            }
            let mut values = Vec::with_capacity(needed.len());
            for (fcol, &i) in file_names.iter().zip(&index) {
                let cell = rec.get(i).ok_or_else(|| {
                    Error::parse(
                        label,
                        line,
                        fcol.as_str(),
                        format!(
                            "data row {}: the row has {} fields, column '{fcol}' is field {}",
                            row_no + 1,
                            rec.len(),
                            i + 1
                        ),
                    )
                })?;
                let level = specs
                    .get(values.len())
                    .and_then(|spec| spec.level_code(cell));
                values.push(match level {
                    Some(Ok(v)) => v,
                    Some(Err(why)) => {
                        return Err(Error::parse(
                            label,
                            line,
                            fcol.as_str(),
                            format!("data row {}: {why}", row_no + 1),
                        ))
                    }
                    None => parse_cell(cell, label, line, row_no + 1, fcol)?,
                });
            }
            let y = values.pop().unwrap_or(f64::NAN);
            data.x.push(values);
            data.y.push(y);
            let row_label = label_index
                .and_then(|i| rec.get(i))
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("line {line}"), echo);
            data.row_labels.push(row_label);
            data.lines.push(line);
            for ((_, cells), (_, i)) in data.tags.iter_mut().zip(&tag_index) {
                cells.push(rec.get(*i).unwrap_or("").to_string());
            }
        }
        if data.y.is_empty() {
            return Err(Error::parse(
                label,
                header_line,
                "rows",
                "no data rows after the header",
            ));
        }
        Ok(data)
    }

    /// Reads and parses a CSV file (see [`Dataset::from_csv_str`]).
    pub fn from_csv_path(path: &Path, model: &dyn FitModel) -> Result<Dataset> {
        let name = path.display().to_string();
        let text = crate::input::read_text(path, &name, crate::input::MAX_CSV_BYTES)?;
        Dataset::from_csv_str(&text, &name, model)
    }

    /// Builds a dataset from values (synthetic data, tables already in memory). Every value must
    /// be finite and every row must have one value per model input.
    pub fn from_rows(
        model: &dyn FitModel,
        x: Vec<Vec<f64>>,
        y: Vec<f64>,
        source: impl Into<String>,
    ) -> Result<Dataset> {
        let source = source.into();
        let needed = needed_columns(model);
        let n_inputs = needed.len() - 1;
        if x.len() != y.len() {
            return Err(Error::invalid(
                &source,
                "rows",
                format!("{} input rows but {} target values", x.len(), y.len()),
            ));
        }
        if y.is_empty() {
            return Err(Error::invalid(&source, "rows", "no data rows"));
        }
        for (i, (xi, yi)) in x.iter().zip(&y).enumerate() {
            if xi.len() != n_inputs {
                return Err(Error::invalid(
                    &source,
                    format!("row {}", i + 1),
                    format!("{} input values, model needs {n_inputs}", xi.len()),
                ));
            }
            for (v, col) in xi.iter().chain(std::iter::once(yi)).zip(&needed) {
                if !v.is_finite() {
                    return Err(Error::invalid(
                        &source,
                        format!("row {}.{col}", i + 1),
                        format!("{v} is not a finite number"),
                    ));
                }
            }
        }
        let n = y.len();
        Ok(Dataset {
            inputs: needed[..n_inputs].to_vec(),
            target: needed[n_inputs].clone(),
            x,
            y,
            row_labels: (1..=n).map(|i| format!("row {i}")).collect(),
            lines: vec![0; n],
            source,
            columns_not_read: Vec::new(),
            tags: Vec::new(),
            aliases: Vec::new(),
        })
    }

    /// Checks every value of the named columns against its valid range: a value outside is an
    /// [`Error::Parse`] naming the file, the line and the column (columns not in `ranges` and
    /// names not in the dataset are skipped).
    pub fn check_ranges(&self, ranges: &[(&str, crate::bounds::Range)]) -> Result<()> {
        for (col, range) in ranges {
            let values: Box<dyn Iterator<Item = f64>> =
                if let Some(c) = self.inputs.iter().position(|n| n == col) {
                    Box::new(self.x.iter().map(move |x| x[c]))
                } else if self.target == *col {
                    Box::new(self.y.iter().copied())
                } else {
                    continue;
                };
            for (i, v) in values.enumerate() {
                if let Some(m) = range.problem(v) {
                    let (line, row) = self.locate(i);
                    return Err(Error::parse(
                        &self.source,
                        line,
                        self.file_column(col),
                        format!("{row}: {m}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The name the file gives the model column `col` (itself unless read under an alias).
    pub fn file_column<'a>(&'a self, col: &'a str) -> &'a str {
        self.aliases
            .iter()
            .find(|(m, _)| m == col)
            .map_or(col, |(_, f)| f.as_str())
    }

    /// The cells of tag column `name` (`machine`, `workload`), one per row, if the file has it.
    pub fn tag(&self, name: &str) -> Option<&[String]> {
        self.tags
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Keeps the rows of `machine` when the `machine` column names several machines and one of
    /// them is `machine` (rows with an empty cell stay): a table of several machines, such as
    /// thread 004's, is fitted one machine at a time. Returns a note saying what was kept, or
    /// None when nothing was dropped.
    pub fn select_machine(&mut self, machine: &str) -> Option<String> {
        let cells = self.tag("machine")?.to_vec();
        let mut names: Vec<&str> = cells
            .iter()
            .map(String::as_str)
            .filter(|c| !c.is_empty())
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.len() < 2 || !names.contains(&machine) {
            return None;
        }
        let keep: Vec<bool> = cells.iter().map(|c| c.is_empty() || c == machine).collect();
        let total = keep.len();
        fn filter<T>(v: &mut Vec<T>, keep: &[bool]) {
            let mut k = keep.iter();
            v.retain(|_| *k.next().unwrap_or(&true));
        }
        filter(&mut self.x, &keep);
        filter(&mut self.y, &keep);
        filter(&mut self.row_labels, &keep);
        filter(&mut self.lines, &keep);
        for (_, t) in &mut self.tags {
            filter(t, &keep);
        }
        let others: Vec<&str> = names.into_iter().filter(|n| *n != machine).collect();
        Some(format!(
            "kept the {} of {total} rows whose machine column is {machine} (the file also holds {})",
            self.y.len(),
            others
                .iter()
                .map(|o| echo(o))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Checks that every row names the one machine the data are fitted or compared on (the
    /// `machine` column, if any; empty cells pass): rows of two machines in one file, or rows
    /// of a built-in machine (`is_builtin`) other than `machine`, are an [`Error::Parse`]
    /// naming the line. A single other name that is not a built-in machine (`host`, as
    /// `measure pcp` writes) passes, with a note returned for the caller to print.
    pub fn check_machine(
        &self,
        machine: &str,
        is_builtin: impl Fn(&str) -> bool,
    ) -> Result<Option<String>> {
        let Some(cells) = self.tag("machine") else {
            return Ok(None);
        };
        let mut first: Option<(usize, &str)> = None;
        for (i, c) in cells.iter().enumerate() {
            if c.is_empty() {
                continue;
            }
            match first {
                None => first = Some((i, c)),
                Some((i0, c0)) if c0 != c => {
                    let (line, row) = self.locate(i);
                    return Err(Error::parse(
                        &self.source,
                        line,
                        "machine",
                        format!(
                            "{row}: machine '{}', but line {} says '{}': a fit or comparison is \
                             of one machine (--machine {machine}); split the file, e.g. with \
                             grep -e pcp_high -e NAME",
                            echo(c),
                            self.lines[i0],
                            echo(c0)
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        match first {
            Some((i, c)) if c != machine && is_builtin(c) => {
                let (line, row) = self.locate(i);
                Err(Error::parse(
                    &self.source,
                    line,
                    "machine",
                    format!(
                        "{row}: the rows were measured on machine '{}', but --machine is \
                         {machine}: give --machine {} (or remove the rows)",
                        echo(c),
                        echo(c)
                    ),
                ))
            }
            Some((_, c)) if c != machine => Ok(Some(format!(
                "the machine column says '{}' (not a built-in machine): the rows are taken as \
                 measured on {machine}",
                echo(c)
            ))),
            _ => Ok(None),
        }
    }

    /// Checks that every row's `workload` column (if any; empty cells pass) is one of
    /// `accepted`: a row of another workload is an [`Error::Parse`] naming its line.
    pub fn check_workload(&self, what: &str, accepted: &[&str]) -> Result<()> {
        let Some(cells) = self.tag("workload") else {
            return Ok(());
        };
        for (i, c) in cells.iter().enumerate() {
            if !c.is_empty() && !accepted.contains(&c.as_str()) {
                let (line, row) = self.locate(i);
                return Err(Error::parse(
                    &self.source,
                    line,
                    "workload",
                    format!(
                        "{row}: the row was measured with workload '{}', not {what} ({}): its \
                         scores are of another benchmark",
                        echo(c),
                        accepted.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks that the model accepts every row's inputs at `params` (e.g. a task count the
    /// machine has CPUs for): a row it refuses (an [`Error::Invalid`] whose field names an
    /// input column) is an [`Error::Parse`] naming the file, line and column.
    pub fn check_model_accepts(&self, model: &dyn FitModel, params: &[f64]) -> Result<()> {
        // Each distinct input row once (the first row holding it is the one named).
        let mut seen = std::collections::HashSet::new();
        for (i, x) in self.x.iter().enumerate() {
            if !seen.insert(x.iter().map(|v| v.to_bits()).collect::<Vec<u64>>()) {
                continue;
            }
            let refused = match model.predict(params, x) {
                Err(Error::Invalid { field, message, .. }) => self
                    .inputs
                    .iter()
                    .position(|c| field.contains(c.as_str()))
                    .map(|j| (j, message)),
                // A knob checked as its command-line flag (`--high 51043: above ...`): the
                // column, not the flag the user did not pass, is named.
                Err(e @ Error::Unsupported(_)) => {
                    let text = e.to_string();
                    self.inputs.iter().enumerate().find_map(|(j, c)| {
                        let flag = format!("--{}", c.replace('_', "-"));
                        text.starts_with(&flag).then(|| {
                            let rest = text[flag.len()..].trim_start();
                            let rest = rest.split_once(": ").map_or(rest, |(_, r)| r);
                            (j, rest.to_string())
                        })
                    })
                }
                _ => None,
            };
            if let Some((j, message)) = refused {
                let (line, row) = self.locate(i);
                let col = self.file_column(&self.inputs[j]);
                return Err(Error::parse(
                    &self.source,
                    line,
                    col,
                    format!(
                        "{row}: the model refuses this value ({col} = {}): {message}",
                        crate::bounds::show(x[j])
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks that the rows are one log2-style latency histogram in the convention of
    /// `pcpmodel import` (inputs `lo_ns`, `hi_ns`, inclusive integer ns; target `count`): each
    /// bucket has `lo_ns <= hi_ns` (`lo == hi` is a one-ns bucket, as bpftrace's `[1]`), the
    /// buckets ascend and each starts right after the previous one ends (`lo = previous hi +
    /// 1`: no gap, the rule `import` applies, no overlap, no duplicate), and at least one count
    /// is not zero. A dataset without those columns passes. Errors name the file and line.
    pub fn check_histogram(&self) -> Result<()> {
        let (Some(lo_c), Some(hi_c)) = (
            self.inputs.iter().position(|n| n == "lo_ns"),
            self.inputs.iter().position(|n| n == "hi_ns"),
        ) else {
            return Ok(());
        };
        let mut prev: Option<(usize, f64, f64)> = None;
        for (i, x) in self.x.iter().enumerate() {
            let (lo, hi) = (x[lo_c], x[hi_c]);
            let (line, row) = self.locate(i);
            let bad = |col: &str, msg: String| {
                Err(Error::parse(
                    &self.source,
                    line,
                    col,
                    format!("{row}: {msg}"),
                ))
            };
            if lo.fract() != 0.0 || hi.fract() != 0.0 {
                return bad(
                    "lo_ns,hi_ns",
                    format!("bucket {lo}..{hi}: bounds are whole ns (inclusive, as import writes)"),
                );
            }
            if lo > hi {
                return bad(
                    "hi_ns",
                    format!("bucket {lo}..{hi} ends before it starts (lo_ns > hi_ns)"),
                );
            }
            if let Some((pl, plo, phi)) = prev {
                if lo == plo && hi == phi {
                    return bad(
                        "lo_ns",
                        format!("bucket {lo}..{hi} appears twice (also line {pl}): a histogram has each bucket once"),
                    );
                }
                if lo <= phi {
                    return bad(
                        "lo_ns",
                        format!(
                            "bucket {lo}..{hi} overlaps the bucket {plo}..{phi} of line {pl}: the \
                             buckets must ascend, each starting at the previous end + 1 (one \
                             histogram per file: `import ... --index N`)"
                        ),
                    );
                }
                if lo > phi + 1.0 {
                    return bad(
                        "lo_ns",
                        format!(
                            "buckets {}..{} ns are missing before this row (the bucket of line \
                             {pl} ended at {phi}; funclatency and bpftrace print every bucket \
                             between the first and the last non-empty one, and `import` refuses \
                             such a gap, so rows were lost)",
                            phi + 1.0,
                            lo - 1.0
                        ),
                    );
                }
            }
            prev = Some((line, lo, hi));
        }
        if self.y.iter().all(|&c| c == 0.0) {
            let line = self.lines.first().copied().unwrap_or(0);
            return Err(Error::parse(
                &self.source,
                line,
                &self.target,
                format!(
                    "every one of the {} buckets has count 0: the histogram holds no calls, so \
                     there is nothing to fit",
                    self.len()
                ),
            ));
        }
        Ok(())
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Where row `i` (0-based) is, for messages: `file:line` or `source row N`.
    pub(super) fn locate(&self, i: usize) -> (usize, String) {
        let line = self.lines.get(i).copied().unwrap_or(0);
        (line, format!("data row {}", i + 1))
    }
}

/// The 1-based line of a CSV's header: its first line that is neither blank nor a `#` comment.
pub(crate) fn header_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|i| i + 1)
}

/// The reader every measurement CSV goes through: a header, `#` comments, cells trimmed, rows
/// of any length (a short row is reported by the caller, naming its line and column).
pub(crate) fn csv_reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes())
}

pub(super) fn needed_columns(model: &dyn FitModel) -> Vec<String> {
    model
        .inputs()
        .into_iter()
        .map(|i| i.name)
        .chain(std::iter::once(model.target().name))
        .collect()
}

fn csv_error(label: &str, text: &str, e: csv::Error) -> Error {
    let line = e
        .position()
        .map_or(0, |p| record_line(text, p.byte(), p.line()));
    Error::parse(label, line, "csv", e.to_string())
}

/// The 1-based line of the record that starts at byte `byte`. The csv reader (1.3) reports a
/// record that follows blank or `#` comment lines at the start of those skipped lines, with a
/// line number that does not count them; so skip them here and count newlines. Falls back to
/// the reader's `fallback` line if `byte` is not a character boundary of `text`.
fn record_line(text: &str, byte: u64, fallback: u64) -> usize {
    let Ok(mut pos) = usize::try_from(byte) else {
        return fallback as usize;
    };
    loop {
        let Some(rest) = text.get(pos..) else {
            return fallback as usize;
        };
        if rest.is_empty() {
            break;
        }
        let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        if line.trim().is_empty() || line.starts_with('#') {
            pos += end;
        } else {
            break;
        }
    }
    text.as_bytes()[..pos]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A list of header names as an error shows it (each cut and escaped by [`echo`], at most 20).
fn echo_list(names: &[String]) -> String {
    let mut v: Vec<String> = names.iter().take(20).map(|n| echo(n)).collect();
    if names.len() > 20 {
        v.push(format!("... ({} columns)", names.len()));
    }
    v.join(", ")
}

fn parse_cell(cell: &str, label: &str, line: usize, row: usize, col: &str) -> Result<f64> {
    if cell.is_empty() {
        return Err(Error::parse(
            label,
            line,
            col,
            format!("data row {row}: empty cell"),
        ));
    }
    let v: f64 = cell.parse().map_err(|_| {
        Error::parse(
            label,
            line,
            col,
            format!("data row {row}: '{}' is not a number", echo(cell)),
        )
    })?;
    if !v.is_finite() {
        return Err(Error::parse(
            label,
            line,
            col,
            format!(
                "data row {row}: '{}' is not a finite number (NaN and infinity are not allowed)",
                echo(cell)
            ),
        ));
    }
    Ok(v)
}
