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
}

/// Columns used as row labels, in order of preference.
const LABEL_COLUMNS: &[&str] = &["label", "name", "machine"];

impl Dataset {
    /// Parses CSV text whose header names the model's inputs and target (in any order; other
    /// columns such as `machine` or `note` are ignored). Lines starting with `#` are comments.
    ///
    /// Errors ([`Error::Parse`], naming `label`, the 1-based line and the column): no header,
    /// a missing or duplicated column, no data rows, a short row, an empty, non-numeric, NaN or
    /// infinite cell.
    pub fn from_csv_str(text: &str, label: &str, model: &dyn FitModel) -> Result<Dataset> {
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
        let specs = model.inputs();
        let mut index = Vec::with_capacity(needed.len());
        for col in &needed {
            let hits: Vec<usize> = headers
                .iter()
                .enumerate()
                .filter(|(_, h)| *h == col)
                .map(|(i, _)| i)
                .collect();
            match hits.as_slice() {
                [i] => index.push(*i),
                [] => {
                    let near = headers
                        .iter()
                        .find(|h| h.eq_ignore_ascii_case(col))
                        .map(|h| format!(" (found '{h}': names are case-sensitive)"))
                        .unwrap_or_default();
                    return Err(Error::parse(
                        label,
                        header_line,
                        col.as_str(),
                        format!(
                            "missing column '{col}'{near}; model '{}' needs columns {}; the header has {}",
                            model.name(),
                            needed.join(", "),
                            headers.join(", ")
                        ),
                    ));
                }
                _ => {
                    return Err(Error::parse(
                        label,
                        header_line,
                        col.as_str(),
                        format!("column '{col}' appears {} times in the header", hits.len()),
                    ))
                }
            }
        }
        let label_index = LABEL_COLUMNS
            .iter()
            .find_map(|name| headers.iter().position(|h| h == name));
        let n_inputs = needed.len() - 1;
        let mut data = Dataset {
            inputs: needed[..n_inputs].to_vec(),
            target: needed[n_inputs].clone(),
            x: Vec::new(),
            y: Vec::new(),
            row_labels: Vec::new(),
            lines: Vec::new(),
            source: label.to_string(),
        };
        for (row_no, rec) in rdr.records().enumerate() {
            let rec = rec.map_err(|e| csv_error(label, text, e))?;
            let line = rec
                .position()
                .map_or(0, |p| record_line(text, p.byte(), p.line()));
            let mut values = Vec::with_capacity(needed.len());
            for (col, &i) in needed.iter().zip(&index) {
                let cell = rec.get(i).ok_or_else(|| {
                    Error::parse(
                        label,
                        line,
                        col.as_str(),
                        format!(
                            "data row {}: the row has {} fields, column '{col}' is field {}",
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
                            col.as_str(),
                            format!("data row {}: {why}", row_no + 1),
                        ))
                    }
                    None => parse_cell(cell, label, line, row_no + 1, col)?,
                });
            }
            let y = values.pop().unwrap_or(f64::NAN);
            data.x.push(values);
            data.y.push(y);
            let row_label = label_index
                .and_then(|i| rec.get(i))
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("line {line}"), str::to_string);
            data.row_labels.push(row_label);
            data.lines.push(line);
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
                        *col,
                        format!("{row}: {m}"),
                    ));
                }
            }
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
            format!("data row {row}: '{cell}' is not a number"),
        )
    })?;
    if !v.is_finite() {
        return Err(Error::parse(
            label,
            line,
            col,
            format!("data row {row}: '{cell}' is not a finite number (NaN and infinity are not allowed)"),
        ));
    }
    Ok(v)
}
