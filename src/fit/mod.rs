//! Generic least-squares fitting of any cost model to measured data.
//!
//! A model implements [`FitModel`] (object-safe: the CLI holds `&dyn FitModel`): named
//! parameters with units, bounds and provenance ([`ParamSpec`]), named inputs ([`InputSpec`]),
//! a named target ([`TargetSpec`]) and a prediction `y = f(params, x)`. [`Dataset::from_csv_str`]
//! maps the user's CSV onto the model by header name; [`fit`] returns a [`FitReport`].
//!
//! ```
//! use pcpmodel::fit::{fit, Dataset, FitModel, FitOptions, InputSpec, ParamSpec, TargetSpec};
//!
//! /// Cost per page = fixed + per_batch / batch.
//! struct Amortised;
//! impl FitModel for Amortised {
//!     fn name(&self) -> &str { "amortised" }
//!     fn params(&self) -> Vec<ParamSpec> {
//!         vec![
//!             ParamSpec::new("fixed_ns", "ns", 10.0).with_bounds(0.0, f64::INFINITY),
//!             ParamSpec::new("per_batch_ns", "ns", 100.0).with_bounds(0.0, f64::INFINITY),
//!         ]
//!     }
//!     fn inputs(&self) -> Vec<InputSpec> { vec![InputSpec::new("batch_pages", "pages")] }
//!     fn target(&self) -> TargetSpec { TargetSpec::new("ns_per_page", "ns") }
//!     fn predict(&self, p: &[f64], x: &[f64]) -> pcpmodel::Result<f64> {
//!         Ok(p[0] + p[1] / x[0])
//!     }
//! }
//!
//! let csv = "machine,batch_pages,ns_per_page\nicx,1,250\nicx,4,100\nicx,16,62.5\nicx,63,52.4\n";
//! let data = Dataset::from_csv_str(csv, "example.csv", &Amortised)?;
//! let report = fit(&Amortised, &data, &FitOptions::default())?;
//! assert!(report.converged, "{}", report.termination);
//! assert!((report.params[0].value - 50.0).abs() < 1.0);
//! # Ok::<(), pcpmodel::Error>(())
//! ```
//!
//! # Equations
//! - Residuals, one per row `i` of `m` rows: absolute `r_i = f(p, x_i) - y_i`, or relative
//!   `r_i = (f(p, x_i) - y_i) / |y_i|` (the default: measured times span decades, and the
//!   noise of a timing is roughly proportional to the timing). The fit minimises
//!   `SSR = sum_i r_i^2` over the `k` free parameters with Levenberg-Marquardt
//!   (the `levenberg-marquardt` crate 0.15, a port of MINPACK `lmder`; Moré 1978).
//! - Bounds. LM is unconstrained, so each free parameter `p` is the image of an internal,
//!   unbounded `u`: `p = lo + (hi - lo) * logistic(u)` with both bounds, `p = lo + exp(u)` with
//!   only a lower bound, `p = hi - exp(u)` with only an upper bound, `p = u` with none. The
//!   logistic/exponential maps are monotone and invertible (unlike MINUIT's `sin` map, no
//!   aliasing), and near a bound they behave like a log scale. The Jacobian in `u` is the
//!   physical Jacobian times `dp/du` (chain rule).
//! - Jacobian. The model's own ([`FitModel::jacobian`]) if it gives one, else central
//!   differences in the *physical* parameter with step `h = eps^(1/3) * max(|p|, |default|)`
//!   (fallback `1e-3 * (hi - lo)`, then 1 when both are zero). Where `p +/- h` would leave
//!   the bounds (or the model fails there) a second-order one-sided difference
//!   `(+/-)(-3 f(p) + 4 f(p +/- h) - f(p +/- 2h)) / 2h` is used, so the model is never evaluated
//!   outside its bounds; models that are not smooth everywhere thus see a small, local stencil.
//! - Covariance (delta method). With `J` the weighted physical Jacobian at the solution,
//!   `dof = m - k`, `sigma^2 = SSR / dof`, `Cov = sigma^2 (J^T J)^-1`. Computing it from the
//!   physical `J` is exactly the delta-method transform `D Cov_u D` (`D = diag(dp/du)`) of the
//!   internal covariance, without dividing by `dp/du` when it vanishes near a bound. The inverse
//!   uses the SVD of the column-scaled `J`; if its condition number exceeds 1e8 the parameters
//!   are reported as not identifiable and no intervals are given.
//! - Intervals: `p_j +/- t_{0.975}(dof) * sqrt(Cov_jj)` ([`crate::fit::stats::student_t_quantile`]),
//!   clipped to the bounds (`ci_clipped`). Correlation `Cov_ij / sqrt(Cov_ii Cov_jj)`.
//! - A parameter is `at_bound` when the one-coordinate Newton step `p_j - g_j / H_jj`
//!   (`g = J^T r`, `H = J^T J`, physical) lands on or beyond a bound: the data push it past the
//!   bound. Such a parameter is an active constraint: it gets no interval (a one-sided one would
//!   be needed), it is left out of the covariance, and the other intervals are conditional on it.
//!   The report says so in `notes`.
//! - Leave-one-out: for each row `i`, refit without row `i` (from the full solution) and predict
//!   row `i`. For a linear model this reproduces the PRESS residuals `e_i / (1 - h_ii)`.
//! - Multi-start: start 0 is the defaults (or [`FitOptions::initial`]); the other `S - 1` starts
//!   form a Latin hypercube (each parameter's range cut into `S - 1` strata of equal
//!   probability, each used once): over the bounds (uniform, or log-uniform when `0 < lo` and
//!   `hi / lo >= 100`), or, for a half-bounded or unbounded parameter, around the default
//!   (`u0 + 1.5 z`, `z` a normal quantile, in the internal coordinate), with order and jitter from
//!   a [`SplitMix64`] seeded by [`FitOptions::seed`]. Stratifying (rather than drawing
//!   independently) guarantees that a basin of attraction wider than one stratum gets a start.
//!   The lowest SSR among converged starts wins.
//!
//! # Convergence
//! A fit that diverges, runs out of evaluations, or meets NaN/infinite predictions is a
//! [`FitReport`] with `converged = false` and a `termination` that says why; `Err` is only for
//! bad input (CSV, options, parameter specifications). LM's "no improvement possible at machine
//! precision" is reported as converged (the tolerance was below what f64 resolves). A
//! parameter driven beyond 1e10 times its start magnitude (possible only without two finite
//! bounds) is reported as a divergence even if LM stopped on a tolerance: the residuals of a
//! runaway parameter stop changing long before it reaches infinity.
//!
//! # Assumptions and validity
//! Intervals are the linearised (Wald) ones: they are right when the model is close to linear
//! over the interval and the errors are independent with constant variance (in the chosen
//! residual scale). A test checks their coverage on synthetic data (about 95% over 200 seeds).
//! Relative residuals divide by the measured value, so a zero measurement is an input error.
//!
//! # References
//! J. J. Moré, "The Levenberg-Marquardt algorithm: implementation and theory", 1978.
//! F. James, MINUIT reference manual (bounded-parameter transforms), CERN D506.
//! D. M. Allen, "The relationship between variable selection and data augmentation and a method
//! for prediction" (PRESS), Technometrics 16, 1974.

pub mod calibrate;
pub mod optimize;
pub mod stats;

use std::cell::{Cell, RefCell};
use std::path::Path;

use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt, TerminationReason};
use nalgebra::{storage::Owned, DMatrix, DVector, Dyn};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::stats::{normal_quantile, student_t_quantile, SplitMix64};
use crate::output::report::{sig, Report, Table};

/// A model parameter: name, unit, default (start) value, bounds and provenance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamSpec {
    /// Name, unique within the model, with its unit as a suffix where it has one (`hold_ns`).
    pub name: String,
    /// Unit, e.g. `ns`, `pages`, `1` for dimensionless.
    pub unit: String,
    /// Default value: the start of the fit, and the value used when the parameter is fixed
    /// without a value.
    pub default: f64,
    /// Lower bound (`f64::NEG_INFINITY` for none). Serialised as `null` when infinite.
    pub lower: f64,
    /// Upper bound (`f64::INFINITY` for none). Serialised as `null` when infinite.
    pub upper: f64,
    /// Where the default comes from: `"<kind>: <details>"` (see [`crate::hw::provenance`]).
    pub provenance: String,
    /// One line for people.
    pub description: String,
}

impl ParamSpec {
    /// An unbounded parameter with an `assumed` provenance; refine with the `with_*` methods.
    pub fn new(name: impl Into<String>, unit: impl Into<String>, default: f64) -> Self {
        ParamSpec {
            name: name.into(),
            unit: unit.into(),
            default,
            lower: f64::NEG_INFINITY,
            upper: f64::INFINITY,
            provenance: "assumed: start value of the fit".to_string(),
            description: String::new(),
        }
    }

    /// Sets the bounds (use infinities for none).
    pub fn with_bounds(mut self, lower: f64, upper: f64) -> Self {
        self.lower = lower;
        self.upper = upper;
        self
    }

    /// Sets the provenance of the default.
    pub fn with_provenance(mut self, provenance: impl Into<String>) -> Self {
        self.provenance = provenance.into();
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// A model input: a CSV column the model reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputSpec {
    /// Column name (the CSV header), with its unit as a suffix where it has one.
    pub name: String,
    /// Unit.
    pub unit: String,
}

impl InputSpec {
    /// A new input.
    pub fn new(name: impl Into<String>, unit: impl Into<String>) -> Self {
        InputSpec {
            name: name.into(),
            unit: unit.into(),
        }
    }
}

/// The measured quantity a model predicts: a CSV column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetSpec {
    /// Column name (the CSV header).
    pub name: String,
    /// Unit.
    pub unit: String,
}

impl TargetSpec {
    /// A new target.
    pub fn new(name: impl Into<String>, unit: impl Into<String>) -> Self {
        TargetSpec {
            name: name.into(),
            unit: unit.into(),
        }
    }
}

/// A model the engine can fit. Object-safe: the engine and the CLI use `&dyn FitModel`.
///
/// `params` and `x` slices are in the order of [`FitModel::params`] and [`FitModel::inputs`].
pub trait FitModel {
    /// Short name, e.g. `zone-lock`.
    fn name(&self) -> &str;
    /// The parameters, in the order `predict` expects them.
    fn params(&self) -> Vec<ParamSpec>;
    /// The inputs, in the order `predict` expects them.
    fn inputs(&self) -> Vec<InputSpec>;
    /// The predicted (measured) quantity.
    fn target(&self) -> TargetSpec;
    /// Predicts the target for one row of inputs. May return NaN or an error for parameters
    /// where the model is undefined; the fit then treats the point as infeasible.
    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64>;
    /// Predicts many rows (the default loops over [`FitModel::predict`]).
    fn predict_many(&self, params: &[f64], xs: &[Vec<f64>]) -> Result<Vec<f64>> {
        xs.iter().map(|x| self.predict(params, x)).collect()
    }
    /// The gradient of the prediction for one row with respect to every parameter
    /// (`d predict / d params[j]`, one entry per parameter), or `None` (the default) to let the
    /// engine use numerical differences.
    fn jacobian(&self, params: &[f64], x: &[f64]) -> Option<Result<Vec<f64>>> {
        let _ = (params, x);
        None
    }
    /// Whether `pcpmodel fit` runs the leave-one-out refits unless told (`--loo` / `--no-loo`).
    /// `None` (the default) means yes; a model whose rows are not separate conditions, or whose
    /// refits are slow, says why not.
    fn loo_skipped_by_default(&self) -> Option<&'static str> {
        None
    }
}

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
        let header_line = text
            .lines()
            .position(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|i| i + 1)
            .ok_or_else(|| {
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
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .comment(Some(b'#'))
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(text.as_bytes());
        let headers: Vec<String> = rdr
            .headers()
            .map_err(|e| csv_error(label, text, e))?
            .iter()
            .map(str::to_string)
            .collect();
        let needed = needed_columns(model);
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
                values.push(parse_cell(cell, label, line, row_no + 1, col)?);
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
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&name, e))?;
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
    fn locate(&self, i: usize) -> (usize, String) {
        let line = self.lines.get(i).copied().unwrap_or(0);
        (line, format!("data row {}", i + 1))
    }
}

fn needed_columns(model: &dyn FitModel) -> Vec<String> {
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

/// How residuals are scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Residual {
    /// `(predicted - measured) / |measured|`: every row weighs by its relative error.
    #[default]
    Relative,
    /// `predicted - measured`, in the target's unit.
    Absolute,
}

impl std::str::FromStr for Residual {
    type Err = Error;

    /// Parses `relative` or `absolute` (for command-line options).
    fn from_str(s: &str) -> Result<Residual> {
        match s {
            "relative" => Ok(Residual::Relative),
            "absolute" => Ok(Residual::Absolute),
            other => Err(Error::Unknown {
                kind: "residual scaling",
                name: other.to_string(),
                hint: ": relative, absolute".to_string(),
            }),
        }
    }
}

/// Options of a fit. `FitOptions::default()` is a sensible start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitOptions {
    /// Parameters held fixed at the given value (name, value in the parameter's unit).
    pub fixed: Vec<(String, f64)>,
    /// Start values replacing defaults for start 0 (name, value).
    pub initial: Vec<(String, f64)>,
    /// Residual scaling.
    pub residual: Residual,
    /// Number of starts (>= 1): start 0 from the defaults, the others spread over the bounds.
    pub starts: usize,
    /// Seed of the multi-start spread.
    pub seed: u64,
    /// Maximum residual evaluations per start (LM rounds it up to a multiple of k + 1).
    pub max_evals: usize,
    /// LM `ftol`: relative reduction of the SSR below which the fit has converged.
    pub ftol: f64,
    /// LM `xtol`: relative step below which the fit has converged.
    pub xtol: f64,
    /// LM `gtol`: cosine between residuals and Jacobian columns below which it has converged.
    pub gtol: f64,
    /// Compute leave-one-out predictions (one refit per row).
    pub loo: bool,
    /// Names of the parameters in `fixed` that the user chose to hold (e.g. `fit --fix`), as
    /// opposed to physical parameters held at their documented values: their provenance says
    /// so, with the value.
    pub fixed_by_user: Vec<String>,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            fixed: Vec::new(),
            initial: Vec::new(),
            residual: Residual::Relative,
            starts: 4,
            seed: 0x05EE_DF17,
            max_evals: 2000,
            ftol: 1e-12,
            xtol: 1e-12,
            gtol: 1e-12,
            loo: true,
            fixed_by_user: Vec::new(),
        }
    }
}

/// One parameter of a fit result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedParam {
    /// Name.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Best-fit (or fixed) value.
    pub value: f64,
    /// Standard error; `None` when fixed, at a bound, or not estimable (no dof, singular).
    pub std_err: Option<f64>,
    /// 95% confidence interval (Student t), clipped to the bounds; `None` as for `std_err`.
    pub ci95: Option<(f64, f64)>,
    /// Held fixed by the options.
    pub fixed: bool,
    /// The data push the parameter past a bound (see the module doc): no interval.
    pub at_bound: bool,
    /// The interval was cut at a bound, so it is narrower than the symmetric one.
    pub ci_clipped: bool,
    /// Lower bound (`null` when none).
    pub lower: f64,
    /// Upper bound (`null` when none).
    pub upper: f64,
    /// Where this value comes from.
    pub provenance: String,
}

/// One data row with the fit's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResidualRow {
    /// 1-based data row.
    pub row: usize,
    /// 1-based line in the source (0 when not from a file).
    pub line: usize,
    /// Row label.
    pub label: String,
    /// Input values.
    pub inputs: Vec<f64>,
    /// Measured target.
    pub measured: f64,
    /// Predicted target.
    pub predicted: f64,
    /// `predicted - measured` in the target unit.
    pub error: f64,
    /// `(predicted - measured) / |measured|`; `None` when measured is 0.
    pub rel_error: Option<f64>,
}

/// One leave-one-out prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LooRow {
    /// 1-based data row held out.
    pub row: usize,
    /// Measured target of that row.
    pub measured: f64,
    /// Prediction for that row from the fit without it.
    pub predicted_held_out: f64,
    /// `predicted_held_out - measured`.
    pub error: f64,
    /// `(predicted_held_out - measured) / |measured|`; `None` when measured is 0.
    pub rel_error: Option<f64>,
    /// Whether the refit without the row converged.
    pub converged: bool,
}

/// Outcome of one start of the multi-start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartOutcome {
    /// Physical start values of the free parameters (in `covariance` order of all free ones).
    pub start: Vec<f64>,
    /// Physical end values of the free parameters.
    pub end: Vec<f64>,
    /// Sum of squared (scaled) residuals at the end.
    pub ssr: f64,
    /// Whether this start converged.
    pub converged: bool,
    /// Termination reason.
    pub termination: String,
    /// Residual evaluations used.
    pub n_evals: usize,
}

/// The result of a fit: parameters with intervals, residuals, diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitReport {
    /// Model name.
    pub model: String,
    /// Data source.
    pub source: String,
    /// The target column and unit.
    pub target: TargetSpec,
    /// The input columns and units.
    pub inputs: Vec<InputSpec>,
    /// Residual scaling used.
    pub residual: Residual,
    /// All parameters in model order.
    pub params: Vec<FittedParam>,
    /// Free parameters (not fixed).
    pub free_params: Vec<String>,
    /// Order of the rows/columns of `covariance` and `correlation` (free, not at a bound).
    pub covariance_params: Vec<String>,
    /// Covariance in physical units; `None` when not estimable (see `notes`).
    pub covariance: Option<Vec<Vec<f64>>>,
    /// Correlation matrix; `None` with `covariance`.
    pub correlation: Option<Vec<Vec<f64>>>,
    /// Every row with its prediction.
    pub residuals: Vec<ResidualRow>,
    /// Number of rows.
    pub n_rows: usize,
    /// Number of free parameters.
    pub n_free: usize,
    /// Residual degrees of freedom, `n_rows - n_free`.
    pub dof: usize,
    /// Sum of squared residuals (relative or absolute as `residual` says).
    pub ssr: f64,
    /// Residual variance `ssr / dof`; `None` when `dof` is 0.
    pub sigma2: Option<f64>,
    /// Student t 0.975 quantile for `dof`, used for `ci95`.
    pub t95: Option<f64>,
    /// Root mean square of `predicted - measured`, target unit.
    pub rms_abs: f64,
    /// Root mean square of the relative error; `None` when a measured value is 0.
    pub rms_rel: Option<f64>,
    /// Why the fit stopped, in words, starting with "converged" or "did not converge".
    pub termination: String,
    /// Whether the best start converged to a finite minimum.
    pub converged: bool,
    /// Residual evaluations over all starts (leave-one-out refits excluded).
    pub n_evals: usize,
    /// Every start's outcome.
    pub starts: Vec<StartOutcome>,
    /// Leave-one-out predictions; `None` when disabled or impossible (see `notes`).
    pub loo: Option<Vec<LooRow>>,
    /// RMS of the leave-one-out relative errors.
    pub loo_rms_rel: Option<f64>,
    /// Caveats for people: bounds hit, singular Jacobian, starts that disagree, ...
    pub notes: Vec<String>,
    /// Problems a converged fit can still have (residuals larger than the spread of the data,
    /// held-out predictions that could not differ from the in-sample ones); the CLI prints them
    /// on stderr.
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Parameter transforms

#[derive(Debug, Clone, Copy)]
enum Transform {
    Identity,
    Lower(f64),
    Upper(f64),
    Both(f64, f64),
}

fn logistic(u: f64) -> f64 {
    if u >= 0.0 {
        1.0 / (1.0 + (-u).exp())
    } else {
        let e = u.exp();
        e / (1.0 + e)
    }
}

impl Transform {
    fn of(spec: &ParamSpec) -> Transform {
        match (spec.lower.is_finite(), spec.upper.is_finite()) {
            (true, true) => Transform::Both(spec.lower, spec.upper),
            (true, false) => Transform::Lower(spec.lower),
            (false, true) => Transform::Upper(spec.upper),
            (false, false) => Transform::Identity,
        }
    }

    fn to_physical(self, u: f64) -> f64 {
        match self {
            Transform::Identity => u,
            Transform::Lower(lo) => lo + u.exp(),
            Transform::Upper(hi) => hi - u.exp(),
            Transform::Both(lo, hi) => {
                let p = if u >= 0.0 {
                    hi - (hi - lo) * logistic(-u)
                } else {
                    lo + (hi - lo) * logistic(u)
                };
                p.clamp(lo, hi)
            }
        }
    }

    fn dphys_du(self, u: f64) -> f64 {
        match self {
            Transform::Identity => 1.0,
            Transform::Lower(_) => u.exp(),
            Transform::Upper(_) => -u.exp(),
            Transform::Both(lo, hi) => (hi - lo) * logistic(u) * logistic(-u),
        }
    }

    /// Inverse; `p` must be strictly inside the bounds (see [`interior`]).
    fn to_internal(self, p: f64) -> f64 {
        match self {
            Transform::Identity => p,
            Transform::Lower(lo) => (p - lo).max(f64::MIN_POSITIVE).ln(),
            Transform::Upper(hi) => (hi - p).max(f64::MIN_POSITIVE).ln(),
            Transform::Both(lo, hi) => {
                let a = (p - lo).max(f64::MIN_POSITIVE);
                let b = (hi - p).max(f64::MIN_POSITIVE);
                (a / b).ln()
            }
        }
    }
}

/// Moves a start value off a bound: the internal coordinate of a bound is infinite.
fn interior(spec: &ParamSpec, p: f64) -> f64 {
    let (lo, hi) = (spec.lower, spec.upper);
    let nudge = if (hi - lo).is_finite() {
        1e-6 * (hi - lo)
    } else {
        let s = p.abs().max(if lo.is_finite() { lo.abs() } else { 0.0 });
        let s = s.max(if hi.is_finite() { hi.abs() } else { 0.0 });
        if s > 0.0 {
            1e-3 * s
        } else {
            1e-3
        }
    };
    if p <= lo {
        lo + nudge
    } else if p >= hi {
        hi - nudge
    } else {
        p
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation and Jacobians

/// Evaluates the model on all rows; any error, wrong length or non-finite value is a message.
fn eval_model(
    model: &dyn FitModel,
    full: &[f64],
    xs: &[Vec<f64>],
) -> std::result::Result<Vec<f64>, String> {
    let f = model
        .predict_many(full, xs)
        .map_err(|e| format!("model error: {e}"))?;
    if f.len() != xs.len() {
        return Err(format!(
            "model returned {} predictions for {} rows",
            f.len(),
            xs.len()
        ));
    }
    if let Some(i) = f.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "model returned {} for data row {} at parameters {:?}",
            f[i],
            i + 1,
            full
        ));
    }
    Ok(f)
}

const EPS_CBRT: f64 = 6.055_454_452_393_343e-6; // f64::EPSILON.cbrt()

/// Jacobian of the predictions (m x cols.len()) with respect to the parameters `cols`, in
/// physical units: the model's own when it gives one, else finite differences inside bounds.
fn prediction_jacobian(
    model: &dyn FitModel,
    specs: &[ParamSpec],
    full: &[f64],
    cols: &[usize],
    xs: &[Vec<f64>],
) -> std::result::Result<DMatrix<f64>, String> {
    let m = xs.len();
    let mut jac = DMatrix::<f64>::zeros(m, cols.len());
    if let Some(first) = xs.first() {
        if model.jacobian(full, first).is_some() {
            for (i, x) in xs.iter().enumerate() {
                let row = model
                    .jacobian(full, x)
                    .ok_or_else(|| {
                        format!(
                            "model gave an analytic Jacobian for row 1 but not row {}",
                            i + 1
                        )
                    })?
                    .map_err(|e| format!("model Jacobian error: {e}"))?;
                if row.len() != full.len() {
                    return Err(format!(
                        "model Jacobian has {} entries for {} parameters",
                        row.len(),
                        full.len()
                    ));
                }
                for (c, &j) in cols.iter().enumerate() {
                    let v = row[j];
                    if !v.is_finite() {
                        return Err(format!(
                            "model Jacobian is {v} for data row {} and parameter {}",
                            i + 1,
                            specs[j].name
                        ));
                    }
                    jac[(i, c)] = v;
                }
            }
            return Ok(jac);
        }
    }
    let mut f0: Option<Vec<f64>> = None;
    for (c, &j) in cols.iter().enumerate() {
        let col = numerical_column(model, &specs[j], full, j, xs, &mut f0)?;
        for (i, v) in col.into_iter().enumerate() {
            jac[(i, c)] = v;
        }
    }
    Ok(jac)
}

/// One column of the numerical Jacobian (see the module doc for the stencils).
fn numerical_column(
    model: &dyn FitModel,
    spec: &ParamSpec,
    full: &[f64],
    j: usize,
    xs: &[Vec<f64>],
    f0: &mut Option<Vec<f64>>,
) -> std::result::Result<Vec<f64>, String> {
    let p = full[j];
    let mut scale = p.abs().max(spec.default.abs());
    if scale == 0.0 || !scale.is_finite() {
        let width = spec.upper - spec.lower;
        scale = if width.is_finite() { 1e-3 * width } else { 1.0 };
    }
    let h0 = EPS_CBRT * scale;
    // Make the step exactly representable.
    let h = (p + h0) - p;
    let h = if h > 0.0 { h } else { h0 };
    let up = spec.upper - p;
    let down = p - spec.lower;
    let at = |delta: f64| -> std::result::Result<Vec<f64>, String> {
        let mut q = full.to_vec();
        q[j] = p + delta;
        eval_model(model, &q, xs)
    };
    let base = |f0: &mut Option<Vec<f64>>| -> std::result::Result<Vec<f64>, String> {
        if let Some(f) = f0.as_ref() {
            return Ok(f.clone());
        }
        let f = eval_model(model, full, xs)?;
        *f0 = Some(f.clone());
        Ok(f)
    };
    let mut last_err = format!(
        "parameter {} = {p} has no room for a difference step inside [{}, {}]",
        spec.name, spec.lower, spec.upper
    );
    if up >= h && down >= h {
        match (at(h), at(-h)) {
            (Ok(fp), Ok(fm)) => {
                return Ok(fp
                    .iter()
                    .zip(&fm)
                    .map(|(a, b)| (a - b) / (2.0 * h))
                    .collect())
            }
            (Err(e), _) | (_, Err(e)) => last_err = e,
        }
    }
    for sign in [1.0, -1.0] {
        let room = if sign > 0.0 { up } else { down };
        if room >= 2.0 * h {
            let r = base(f0).and_then(|f| {
                let f1 = at(sign * h)?;
                let f2 = at(sign * 2.0 * h)?;
                Ok(f.iter()
                    .zip(&f1)
                    .zip(&f2)
                    .map(|((a, b), c)| sign * (-3.0 * a + 4.0 * b - c) / (2.0 * h))
                    .collect::<Vec<f64>>())
            });
            match r {
                Ok(col) => return Ok(col),
                Err(e) => last_err = e,
            }
        }
    }
    // Bounds narrower than the step: a first-order difference over half the room.
    let (sign, room) = if up >= down { (1.0, up) } else { (-1.0, down) };
    let hs = 0.5 * room;
    if hs > 0.0 && hs.is_finite() {
        let f = base(f0)?;
        let f1 = at(sign * hs)?;
        return Ok(f
            .iter()
            .zip(&f1)
            .map(|(a, b)| sign * (b - a) / hs)
            .collect());
    }
    Err(last_err)
}

/// The numerical Jacobian of the model's predictions with respect to all parameters, in
/// physical units: `result[i][j] = d predict(params, xs[i]) / d params[j]`, using the engine's
/// stencils (central, or one-sided at a bound). For checking a model's analytic
/// [`FitModel::jacobian`] in its tests.
pub fn numerical_jacobian(
    model: &dyn FitModel,
    params: &[f64],
    xs: &[Vec<f64>],
) -> Result<Vec<Vec<f64>>> {
    let specs = model.params();
    check_param_count(model, &specs, params)?;
    let mut f0 = None;
    let mut out = vec![vec![0.0; specs.len()]; xs.len()];
    for (j, spec) in specs.iter().enumerate() {
        let col = numerical_column(model, spec, params, j, xs, &mut f0)
            .map_err(|e| Error::Unsupported(format!("{}: {e}", model.name())))?;
        for (row, v) in out.iter_mut().zip(col) {
            row[j] = v;
        }
    }
    Ok(out)
}

/// The largest disagreement between the model's analytic Jacobian and [`numerical_jacobian`],
/// relative to the largest magnitude in each column: `max_ij |a_ij - n_ij| / max_i |n_ij|`.
/// `None` when the model gives no analytic Jacobian.
pub fn jacobian_discrepancy(
    model: &dyn FitModel,
    params: &[f64],
    xs: &[Vec<f64>],
) -> Result<Option<f64>> {
    let specs = model.params();
    check_param_count(model, &specs, params)?;
    let Some(first) = xs.first() else {
        return Ok(None);
    };
    if model.jacobian(params, first).is_none() {
        return Ok(None);
    }
    let cols: Vec<usize> = (0..specs.len()).collect();
    let analytic = prediction_jacobian(model, &specs, params, &cols, xs)
        .map_err(|e| Error::Unsupported(format!("{}: {e}", model.name())))?;
    let numeric = numerical_jacobian(model, params, xs)?;
    let mut worst = 0.0_f64;
    for j in 0..specs.len() {
        let col_max = numeric
            .iter()
            .map(|r| r[j].abs())
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE);
        for (i, row) in numeric.iter().enumerate() {
            worst = worst.max((analytic[(i, j)] - row[j]).abs() / col_max);
        }
    }
    Ok(Some(worst))
}

fn check_param_count(model: &dyn FitModel, specs: &[ParamSpec], params: &[f64]) -> Result<()> {
    if params.len() != specs.len() {
        return Err(Error::invalid(
            model.name(),
            "params",
            format!(
                "{} parameter values given, model has {}",
                params.len(),
                specs.len()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The least-squares problem handed to LM

/// Everything needed to evaluate the scaled residuals for a set of free parameters.
struct Setup<'a> {
    model: &'a dyn FitModel,
    specs: &'a [ParamSpec],
    free: &'a [usize],
    transforms: &'a [Transform],
    base: &'a [f64],
    xs: Vec<Vec<f64>>,
    ys: Vec<f64>,
    /// Residual divisor per row: 1 or |y|.
    scale: Vec<f64>,
}

impl Setup<'_> {
    fn full_from_free(&self, p: &[f64]) -> Vec<f64> {
        let mut full = self.base.to_vec();
        for (&j, &v) in self.free.iter().zip(p) {
            full[j] = v;
        }
        full
    }

    fn free_from_u(&self, u: &[f64]) -> Vec<f64> {
        self.transforms
            .iter()
            .zip(u)
            .map(|(t, &v)| t.to_physical(v))
            .collect()
    }

    fn residuals(&self, full: &[f64]) -> std::result::Result<Vec<f64>, String> {
        let f = eval_model(self.model, full, &self.xs)?;
        Ok(f.iter()
            .zip(&self.ys)
            .zip(&self.scale)
            .map(|((p, y), s)| (p - y) / s)
            .collect())
    }

    /// Weighted physical Jacobian of the residuals, columns = free parameters.
    fn jacobian_phys(&self, full: &[f64]) -> std::result::Result<DMatrix<f64>, String> {
        let mut j = prediction_jacobian(self.model, self.specs, full, self.free, &self.xs)?;
        for (i, s) in self.scale.iter().enumerate() {
            for c in 0..j.ncols() {
                j[(i, c)] /= s;
            }
        }
        Ok(j)
    }
}

struct Problem<'s, 'a> {
    setup: &'s Setup<'a>,
    u: DVector<f64>,
    model_error: RefCell<Option<String>>,
    best: RefCell<Option<(f64, DVector<f64>)>>,
    evals: Cell<usize>,
}

impl<'s, 'a> Problem<'s, 'a> {
    fn new(setup: &'s Setup<'a>, u0: DVector<f64>) -> Self {
        Problem {
            setup,
            u: u0,
            model_error: RefCell::new(None),
            best: RefCell::new(None),
            evals: Cell::new(0),
        }
    }

    fn note_error(&self, e: String) {
        let mut slot = self.model_error.borrow_mut();
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    fn jacobian_u(&self) -> std::result::Result<DMatrix<f64>, String> {
        let u = self.u.as_slice();
        let p = self.setup.free_from_u(u);
        let full = self.setup.full_from_free(&p);
        let mut j = self.setup.jacobian_phys(&full)?;
        for (c, (t, &uc)) in self.setup.transforms.iter().zip(u).enumerate() {
            let d = t.dphys_du(uc);
            for i in 0..j.nrows() {
                j[(i, c)] *= d;
            }
        }
        Ok(j)
    }
}

impl LeastSquaresProblem<f64, Dyn, Dyn> for Problem<'_, '_> {
    type ResidualStorage = Owned<f64, Dyn>;
    type JacobianStorage = Owned<f64, Dyn, Dyn>;
    type ParameterStorage = Owned<f64, Dyn>;

    fn set_params(&mut self, u: &DVector<f64>) {
        self.u.copy_from(u);
    }

    fn params(&self) -> DVector<f64> {
        self.u.clone()
    }

    fn residuals(&self) -> Option<DVector<f64>> {
        self.evals.set(self.evals.get() + 1);
        let p = self.setup.free_from_u(self.u.as_slice());
        let full = self.setup.full_from_free(&p);
        match self.setup.residuals(&full) {
            Ok(r) => {
                let ssr: f64 = r.iter().map(|v| v * v).sum();
                if ssr.is_finite() {
                    let mut best = self.best.borrow_mut();
                    if best.as_ref().is_none_or(|(b, _)| ssr < *b) {
                        *best = Some((ssr, self.u.clone()));
                    }
                }
                Some(DVector::from_vec(r))
            }
            Err(e) => {
                // NaN residuals make LM reject the step (or stop at the start point).
                self.note_error(e);
                Some(DVector::from_element(self.setup.ys.len(), f64::NAN))
            }
        }
    }

    fn jacobian(&self) -> Option<DMatrix<f64>> {
        match self.jacobian_u() {
            Ok(j) => Some(j),
            Err(e) => {
                self.note_error(e);
                None
            }
        }
    }
}

struct LmOutcome {
    u: Vec<f64>,
    ssr: f64,
    converged: bool,
    termination: String,
    n_evals: usize,
}

fn describe_termination(
    t: &TerminationReason,
    model_error: Option<&str>,
    max_evals: usize,
) -> (bool, String) {
    let why = model_error.map(|e| format!(" ({e})")).unwrap_or_default();
    match t {
        TerminationReason::ResidualsZero => {
            (true, "converged: the residuals are zero (exact fit)".into())
        }
        TerminationReason::Orthogonal => (
            true,
            "converged: residuals orthogonal to the Jacobian (gtol)".into(),
        ),
        TerminationReason::Converged { ftol, xtol } => {
            let which = match (ftol, xtol) {
                (true, true) => "relative reduction of the sum of squares and relative step below ftol and xtol",
                (true, false) => "relative reduction of the sum of squares below ftol",
                _ => "relative parameter step below xtol",
            };
            (true, format!("converged: {which}"))
        }
        TerminationReason::NoImprovementPossible(which) => (
            true,
            format!("converged: no further improvement possible at machine precision ({which} below what f64 resolves)"),
        ),
        TerminationReason::LostPatience => (
            false,
            format!("did not converge: reached the maximum of {max_evals} evaluations{why}"),
        ),
        TerminationReason::Numerical(what) => (
            false,
            format!("did not converge: non-finite value in the {what}{}", if why.is_empty() { " (the model returned NaN or infinity)".to_string() } else { why }),
        ),
        TerminationReason::User(what) => (
            false,
            format!("did not converge: the model could not be evaluated for the {what}{why}"),
        ),
        TerminationReason::NoParameters => (true, "no free parameters".into()),
        TerminationReason::NoResiduals => (false, "did not converge: no data rows".into()),
        TerminationReason::WrongDimensions(what) => (
            false,
            format!("did not converge: wrong dimensions of the {what}{why}"),
        ),
    }
}

fn run_lm(setup: &Setup<'_>, u0: &[f64], opts: &FitOptions) -> LmOutcome {
    let k = u0.len();
    if k == 0 {
        let full = setup.full_from_free(&[]);
        return match setup.residuals(&full) {
            Ok(r) => LmOutcome {
                u: Vec::new(),
                ssr: r.iter().map(|v| v * v).sum(),
                converged: true,
                termination: "converged: no free parameters, evaluated at the given values".into(),
                n_evals: 1,
            },
            Err(e) => LmOutcome {
                u: Vec::new(),
                ssr: f64::NAN,
                converged: false,
                termination: format!("did not converge: {e}"),
                n_evals: 1,
            },
        };
    }
    let patience = opts.max_evals.div_ceil(k + 1).max(1);
    let lm = LevenbergMarquardt::new()
        .with_ftol(opts.ftol)
        .with_xtol(opts.xtol)
        .with_gtol(opts.gtol)
        .with_patience(patience);
    let problem = Problem::new(setup, DVector::from_column_slice(u0));
    let (problem, report) = lm.minimize(problem);
    let model_error = problem.model_error.borrow().clone();
    let (mut converged, mut termination) = describe_termination(
        &report.termination,
        model_error.as_deref(),
        patience * (k + 1),
    );
    let best = problem.best.borrow().clone();
    let (ssr, u) = match best {
        Some((ssr, u)) => (ssr, u.as_slice().to_vec()),
        None => (f64::NAN, problem.u.as_slice().to_vec()),
    };
    if !ssr.is_finite() && converged {
        converged = false;
        termination = "did not converge: the residuals are not finite".into();
    }
    LmOutcome {
        u,
        ssr,
        converged,
        termination,
        n_evals: problem.evals.get(),
    }
}

// ---------------------------------------------------------------------------------------------
// Validation

fn validate_specs(model: &dyn FitModel, specs: &[ParamSpec]) -> Result<()> {
    let file = model.name();
    if specs.is_empty() {
        return Err(Error::invalid(
            file,
            "params",
            "the model has no parameters",
        ));
    }
    for (i, s) in specs.iter().enumerate() {
        let field = format!("params.{}", s.name);
        if s.name.is_empty() {
            return Err(Error::invalid(file, format!("params[{i}]"), "empty name"));
        }
        if specs[..i].iter().any(|o| o.name == s.name) {
            return Err(Error::invalid(file, field, "duplicate parameter name"));
        }
        if s.lower.is_nan() || s.upper.is_nan() || s.lower >= s.upper {
            return Err(Error::invalid(
                file,
                field,
                format!("bounds [{}, {}] are not an interval", s.lower, s.upper),
            ));
        }
        if !s.default.is_finite() || s.default < s.lower || s.default > s.upper {
            return Err(Error::invalid(
                file,
                field,
                format!(
                    "default {} is not a finite value within [{}, {}]",
                    s.default, s.lower, s.upper
                ),
            ));
        }
    }
    let mut cols = needed_columns(model);
    cols.sort();
    if cols.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::invalid(
            file,
            "inputs",
            "input and target column names must be distinct",
        ));
    }
    Ok(())
}

fn lookup<'a>(specs: &'a [ParamSpec], name: &str) -> Result<(usize, &'a ParamSpec)> {
    specs
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == name)
        .ok_or_else(|| Error::Unknown {
            kind: "parameter",
            name: name.to_string(),
            hint: format!(
                ": {}",
                specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

fn validate_options(opts: &FitOptions) -> Result<()> {
    let bad = |field: &str, msg: String| Err(Error::invalid("fit options", field, msg));
    if let Some(m) = crate::bounds::FIT_STARTS.problem(opts.starts as f64) {
        return bad("starts", m);
    }
    if opts.max_evals == 0 {
        return bad("max_evals", "must be at least 1".into());
    }
    for (name, v) in [
        ("ftol", opts.ftol),
        ("xtol", opts.xtol),
        ("gtol", opts.gtol),
    ] {
        if !v.is_finite() || v < 0.0 {
            return bad(name, format!("{v} must be a finite number >= 0"));
        }
    }
    Ok(())
}

fn set_values(
    specs: &[ParamSpec],
    pairs: &[(String, f64)],
    what: &str,
    values: &mut [f64],
    mark: &mut [bool],
) -> Result<()> {
    for (name, v) in pairs {
        let (j, s) = lookup(specs, name)?;
        if !v.is_finite() || *v < s.lower || *v > s.upper {
            return Err(Error::invalid(
                "fit options",
                format!("{what}.{name}"),
                format!(
                    "{v} is not a finite value within the bounds [{}, {}] {}",
                    s.lower, s.upper, s.unit
                ),
            ));
        }
        values[j] = *v;
        mark[j] = true;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The fit

/// Factor beyond which a parameter is taken to have run away (see [`runaway`]).
const RUNAWAY_FACTOR: f64 = 1e10;

/// A parameter without an upper (or lower) bound that LM pushed to more than
/// [`RUNAWAY_FACTOR`] times its start magnitude (or, when that is 0, to more than
/// `RUNAWAY_FACTOR` units) has no finite optimum: LM may still report "converged" because the
/// residuals stop changing, but the fit has diverged.
fn runaway(specs: &[ParamSpec], free: &[usize], start: &[f64], full: &[f64]) -> Option<String> {
    free.iter().find_map(|&j| {
        let s = &specs[j];
        if (s.upper - s.lower).is_finite() {
            return None;
        }
        let reference = s.default.abs().max(start[j].abs());
        let limit = RUNAWAY_FACTOR * if reference > 0.0 { reference } else { 1.0 };
        let p = full[j];
        (!p.is_finite() || p.abs() > limit).then(|| {
            format!(
                "parameter {} ran away to {p:e} {} (more than {RUNAWAY_FACTOR:e} times its start \
                 value): the data do not bound it",
                s.name, s.unit
            )
        })
    })
}

/// Start points (physical, free parameters): `p0`, then `opts.starts - 1` points from a Latin
/// hypercube: each parameter's range is cut into `starts - 1` strata of equal probability, each
/// stratum is used once (in a seeded random order) with a seeded random position inside it.
/// Within both bounds the strata are uniform (log-uniform when `0 < lo` and `hi / lo >= 100`);
/// otherwise they are normal quantiles `u0 + 1.5 z` of the internal coordinate (or
/// `p0 + max(|p0|, 1) z` without bounds).
fn start_points(
    specs: &[ParamSpec],
    free: &[usize],
    transforms: &[Transform],
    p0: &[f64],
    opts: &FitOptions,
) -> Vec<Vec<f64>> {
    let mut rng = SplitMix64::new(opts.seed);
    let extra = opts.starts.saturating_sub(1);
    let mut starts = vec![p0.to_vec()];
    if extra == 0 {
        return starts;
    }
    // One shuffled stratum order per parameter (Fisher-Yates).
    let orders: Vec<Vec<usize>> = free
        .iter()
        .map(|_| {
            let mut o: Vec<usize> = (0..extra).collect();
            for i in (1..extra).rev() {
                let r = (rng.next_u64() % (i as u64 + 1)) as usize;
                o.swap(i, r);
            }
            o
        })
        .collect();
    starts.extend((0..extra).map(|s| {
        free.iter()
            .enumerate()
            .map(|(c, &j)| {
                let stratum = orders[c][s] as f64;
                let q = (stratum + rng.next_f64()) / extra as f64;
                let r = 0.02 + 0.96 * q;
                let t = transforms[c];
                let p = match t {
                    Transform::Both(lo, hi) if lo > 0.0 && hi / lo >= 100.0 => {
                        (lo.ln() + r * (hi.ln() - lo.ln())).exp()
                    }
                    Transform::Both(lo, hi) => lo + r * (hi - lo),
                    Transform::Lower(_) | Transform::Upper(_) => {
                        t.to_physical(t.to_internal(p0[c]) + 1.5 * normal_quantile(r))
                    }
                    Transform::Identity => p0[c] + p0[c].abs().max(1.0) * normal_quantile(r),
                };
                interior(&specs[j], p)
            })
            .collect::<Vec<f64>>()
    }));
    starts
}

/// The validated problem: parameter values, which are free, residual scale.
struct Prepared {
    specs: Vec<ParamSpec>,
    /// Default or fixed value of every parameter (free ones are overwritten by the fit).
    base: Vec<f64>,
    is_fixed: Vec<bool>,
    /// Start 0 of every parameter (defaults or `opts.initial`).
    start0: Vec<f64>,
    free: Vec<usize>,
    transforms: Vec<Transform>,
    /// Residual divisor per row: 1 or |y|.
    scale: Vec<f64>,
}

impl Prepared {
    /// A [`Setup`] over the rows `rows` of `data`.
    fn setup<'a>(
        &'a self,
        model: &'a dyn FitModel,
        data: &Dataset,
        rows: impl Iterator<Item = usize> + Clone,
    ) -> Setup<'a> {
        Setup {
            model,
            specs: &self.specs,
            free: &self.free,
            transforms: &self.transforms,
            base: &self.base,
            xs: rows.clone().map(|r| data.x[r].clone()).collect(),
            ys: rows.clone().map(|r| data.y[r]).collect(),
            scale: rows.map(|r| self.scale[r]).collect(),
        }
    }
}

/// Checks the model, the options and the data against each other (every `Err` of [`fit`]).
fn prepare(model: &dyn FitModel, data: &Dataset, opts: &FitOptions) -> Result<Prepared> {
    let specs = model.params();
    validate_specs(model, &specs)?;
    validate_options(opts)?;
    let needed = needed_columns(model);
    let n_inputs = needed.len() - 1;
    if data.inputs != needed[..n_inputs] || data.target != needed[n_inputs] {
        return Err(Error::invalid(
            &data.source,
            "columns",
            format!(
                "the dataset has columns {} -> {}, model '{}' needs {}",
                data.inputs.join(", "),
                data.target,
                model.name(),
                needed.join(", ")
            ),
        ));
    }
    if data.x.len() != data.y.len() || data.x.iter().any(|x| x.len() != n_inputs) {
        return Err(Error::invalid(
            &data.source,
            "rows",
            "rows do not match the input columns",
        ));
    }
    let n = specs.len();
    let mut base: Vec<f64> = specs.iter().map(|s| s.default).collect();
    let mut is_fixed = vec![false; n];
    set_values(&specs, &opts.fixed, "fixed", &mut base, &mut is_fixed)?;
    let mut start0 = base.clone();
    set_values(
        &specs,
        &opts.initial,
        "initial",
        &mut start0,
        &mut vec![false; n],
    )?;
    let free: Vec<usize> = (0..n).filter(|&j| !is_fixed[j]).collect();
    let (k, m) = (free.len(), data.len());
    if m < k {
        return Err(Error::invalid(
            &data.source,
            "rows",
            format!(
                "{m} data rows but {k} free parameters ({}): a fit needs at least as many rows \
                 as free parameters; fix some parameters or add rows",
                free.iter()
                    .map(|&j| specs[j].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let mut scale = vec![1.0; m];
    if opts.residual == Residual::Relative {
        for (i, (y, s)) in data.y.iter().zip(scale.iter_mut()).enumerate() {
            if *y == 0.0 {
                let (line, row) = data.locate(i);
                return Err(Error::parse(
                    &data.source,
                    line,
                    &data.target,
                    format!(
                        "{row}: measured value is 0, and relative residuals divide by it; \
                         use absolute residuals"
                    ),
                ));
            }
            *s = y.abs();
        }
    }
    // A row the model refuses as input (a page count of -5, a switch of 2) is bad input, named
    // by its line and column, not a fit that "did not converge".
    for (i, x) in data.x.iter().enumerate() {
        if let Err(Error::Invalid { field, message, .. }) = model.predict(&start0, x) {
            if let Some(col) = data.inputs.iter().find(|c| field.contains(c.as_str())) {
                let (line, row) = data.locate(i);
                return Err(Error::parse(
                    &data.source,
                    line,
                    col.as_str(),
                    format!("{row}: the model refuses this value: {message}"),
                ));
            }
        }
    }
    let transforms = free.iter().map(|&j| Transform::of(&specs[j])).collect();
    Ok(Prepared {
        specs,
        base,
        is_fixed,
        start0,
        free,
        transforms,
        scale,
    })
}

/// Intervals and what stands in their way.
#[derive(Default)]
struct Uncertainty {
    at_bound: Vec<bool>,
    std_err: Vec<Option<f64>>,
    /// Indices (into all parameters) of the covariance rows.
    cov_params: Vec<usize>,
    covariance: Option<Vec<Vec<f64>>>,
    correlation: Option<Vec<Vec<f64>>>,
    notes: Vec<String>,
}

/// Bound detection, covariance and correlation at the solution `full` with scaled residuals `r`
/// (see the module doc).
fn uncertainty(
    setup: &Setup<'_>,
    full: &[f64],
    r: &[f64],
    dof: usize,
    sigma2: Option<f64>,
) -> Uncertainty {
    let specs = setup.specs;
    let free = setup.free;
    let mut u = Uncertainty {
        at_bound: vec![false; specs.len()],
        std_err: vec![None; specs.len()],
        ..Uncertainty::default()
    };
    if free.is_empty() || r.iter().any(|v| !v.is_finite()) {
        return u;
    }
    let jac = match setup.jacobian_phys(full) {
        Ok(j) => j,
        Err(e) => {
            u.notes.push(format!(
                "no intervals: the Jacobian at the solution could not be computed ({e})"
            ));
            return u;
        }
    };
    for (c, &j) in free.iter().enumerate() {
        let col = jac.column(c);
        let g: f64 = col.iter().zip(r).map(|(a, b)| a * b).sum();
        let h: f64 = col.iter().map(|a| a * a).sum();
        let s = &specs[j];
        if h > 0.0 {
            let newton = full[j] - g / h;
            let side = if s.lower.is_finite() && newton <= s.lower && g > 0.0 {
                Some(("lower", s.lower))
            } else if s.upper.is_finite() && newton >= s.upper && g < 0.0 {
                Some(("upper", s.upper))
            } else {
                None
            };
            if let Some((side, bound)) = side {
                u.at_bound[j] = true;
                u.notes.push(format!(
                    "{} = {} is at its {side} bound {bound}: the data push it beyond the bound; \
                     it has no interval (it would be one-sided) and the other intervals are \
                     conditional on it",
                    s.name,
                    sig(full[j], 4),
                ));
            }
        }
    }
    let keep: Vec<usize> = (0..free.len()).filter(|&c| !u.at_bound[free[c]]).collect();
    u.cov_params = keep.iter().map(|&c| free[c]).collect();
    if dof == 0 {
        u.notes.push(
            "no intervals: as many rows as free parameters leaves no degrees of freedom".into(),
        );
        return u;
    }
    if keep.is_empty() {
        return u;
    }
    let jk = DMatrix::from_fn(jac.nrows(), keep.len(), |i, c| jac[(i, keep[c])]);
    match covariance_matrix(&jk, sigma2.unwrap_or(f64::NAN)) {
        Ok(cov) => {
            for (a, &j) in u.cov_params.iter().enumerate() {
                u.std_err[j] = Some(cov[(a, a)].max(0.0).sqrt());
            }
            let q = cov.nrows();
            let corr = DMatrix::from_fn(q, q, |a, b| {
                let d = (cov[(a, a)] * cov[(b, b)]).sqrt();
                if a == b {
                    1.0
                } else if d > 0.0 {
                    cov[(a, b)] / d
                } else {
                    f64::NAN
                }
            });
            u.covariance = Some(to_rows(&cov));
            u.correlation = Some(to_rows(&corr));
        }
        Err(worst) => u.notes.push(format!(
            "no intervals: the Jacobian is singular or nearly so (condition > 1e8); {} is not \
             identifiable from these data (fix it or add rows that vary its effect)",
            u.cov_params
                .get(worst)
                .map_or("a parameter", |&j| specs[j].name.as_str())
        )),
    }
    u
}

/// Leave-one-out: refit without each row, predict that row.
///
/// Each refit starts from the full solution moved off its bounds (as the starts of the full fit
/// are): a parameter that ended on a bound has an internal coordinate of ±40 or more, where the
/// bound transform's derivative is below 1e-17, so a refit started exactly there cannot move it
/// and would return the full fit's prediction for every row whatever the row held out.
fn leave_one_out(
    model: &dyn FitModel,
    data: &Dataset,
    prep: &Prepared,
    u_best: &[f64],
    opts: &FitOptions,
) -> Vec<LooRow> {
    let m = data.len();
    let u_start: Vec<f64> = prep
        .free
        .iter()
        .zip(&prep.transforms)
        .zip(u_best)
        .map(|((&j, t), &u)| t.to_internal(interior(&prep.specs[j], t.to_physical(u))))
        .collect();
    (0..m)
        .map(|i| {
            let sub = prep.setup(model, data, (0..m).filter(move |&r| r != i));
            let out = run_lm(&sub, &u_start, opts);
            let p = sub.full_from_free(&sub.free_from_u(&out.u));
            let pred = model
                .predict(&p, &data.x[i])
                .ok()
                .filter(|v| v.is_finite())
                .unwrap_or(f64::NAN);
            let y = data.y[i];
            LooRow {
                row: i + 1,
                measured: y,
                predicted_held_out: pred,
                error: pred - y,
                rel_error: (y != 0.0).then(|| (pred - y) / y.abs()),
                converged: out.converged && pred.is_finite(),
            }
        })
        .collect()
}

fn rms<I: Iterator<Item = Option<f64>>>(errors: I, n: usize) -> Option<f64> {
    errors
        .map(|e| e.map(|e| e * e))
        .sum::<Option<f64>>()
        .map(|s| (s / n as f64).sqrt())
}

/// Fits `model` to `data`. `Err` only for bad input: parameter specifications, options (an
/// unknown or out-of-bounds fixed parameter, zero starts, ...), a dataset built for other
/// columns, fewer rows than free parameters, or a zero measurement with relative residuals
/// (this one names the line and column). A fit that does not converge is `Ok` with
/// `converged = false`.
pub fn fit(model: &dyn FitModel, data: &Dataset, opts: &FitOptions) -> Result<FitReport> {
    let prep = prepare(model, data, opts)?;
    let (specs, free) = (&prep.specs, &prep.free);
    let (k, m) = (free.len(), data.len());
    let setup = prep.setup(model, data, 0..m);

    // Multi-start.
    let p0: Vec<f64> = free
        .iter()
        .map(|&j| interior(&specs[j], prep.start0[j]))
        .collect();
    let starts = start_points(specs, free, &prep.transforms, &p0, opts);
    let results: Vec<LmOutcome> = starts
        .iter()
        .map(|p| {
            let u0: Vec<f64> = prep
                .transforms
                .iter()
                .zip(p)
                .map(|(t, &v)| t.to_internal(v))
                .collect();
            run_lm(&setup, &u0, opts)
        })
        .collect();
    let outcomes: Vec<StartOutcome> = starts
        .iter()
        .zip(&results)
        .map(|(p, out)| StartOutcome {
            start: p.clone(),
            end: setup.free_from_u(&out.u),
            ssr: out.ssr,
            converged: out.converged,
            termination: out.termination.clone(),
            n_evals: out.n_evals,
        })
        .collect();
    // Converged beats not converged; then the lower finite SSR; ties keep the earlier start.
    let better = |a: &LmOutcome, b: &LmOutcome| match (a.converged, b.converged) {
        (true, false) => true,
        (false, true) => false,
        _ => a.ssr.is_finite() && (!b.ssr.is_finite() || a.ssr < b.ssr),
    };
    let best_i = (1..results.len()).fold(0, |b, i| {
        if better(&results[i], &results[b]) {
            i
        } else {
            b
        }
    });
    let best = &results[best_i];
    let full = setup.full_from_free(&setup.free_from_u(&best.u));
    let mut notes = Vec::new();
    let mut converged = best.converged;
    let mut termination = best.termination.clone();
    if converged {
        if let Some(msg) = runaway(specs, free, &prep.start0, &full) {
            converged = false;
            termination = format!("did not converge: {msg}");
        }
    }
    if opts.starts > 1 {
        let n_conv = results.iter().filter(|o| o.converged).count();
        // "Same minimum": SSR within 1e-6 relative, or within 1e-12 of the total sum of squares
        // (exact fits end at rounding noise).
        let total: f64 = setup
            .ys
            .iter()
            .zip(&setup.scale)
            .map(|(y, s)| (y / s).powi(2))
            .sum();
        let tol = (1e-6 * best.ssr).max(1e-12 * total);
        let same = results
            .iter()
            .filter(|o| o.converged && (o.ssr - best.ssr).abs() <= tol)
            .count();
        notes.push(format!(
            "best of {} starts (start {}); {n_conv} converged, {same} to the same minimum",
            opts.starts,
            best_i + 1
        ));
    }

    // Predictions and residual rows.
    let predicted = match eval_model(model, &full, &data.x) {
        Ok(f) => f,
        Err(e) => {
            if converged {
                converged = false;
                termination = format!("did not converge: {e}");
            }
            model
                .predict_many(&full, &data.x)
                .ok()
                .filter(|f| f.len() == m)
                .unwrap_or_else(|| vec![f64::NAN; m])
        }
    };
    let residuals: Vec<ResidualRow> = (0..m)
        .map(|i| {
            let (y, f) = (data.y[i], predicted[i]);
            ResidualRow {
                row: i + 1,
                line: data.lines.get(i).copied().unwrap_or(0),
                label: data.row_labels.get(i).cloned().unwrap_or_default(),
                inputs: data.x[i].clone(),
                measured: y,
                predicted: f,
                error: f - y,
                rel_error: (y != 0.0).then(|| (f - y) / y.abs()),
            }
        })
        .collect();
    let scaled: Vec<f64> = residuals
        .iter()
        .zip(&prep.scale)
        .map(|(r, s)| r.error / s)
        .collect();
    let ssr: f64 = scaled.iter().map(|r| r * r).sum();
    let rms_abs = rms(residuals.iter().map(|r| Some(r.error)), m).unwrap_or(f64::NAN);
    let rms_rel = rms(residuals.iter().map(|r| r.rel_error), m);
    let dof = m - k;
    let sigma2 = (dof > 0 && ssr.is_finite()).then(|| ssr / dof as f64);
    let t95 = (dof > 0).then(|| student_t_quantile(0.975, dof as f64));

    let unc = uncertainty(&setup, &full, &scaled, dof, sigma2);
    notes.extend(unc.notes);

    let residual_kind = match opts.residual {
        Residual::Relative => "relative",
        Residual::Absolute => "absolute",
    };
    let mut params = Vec::with_capacity(specs.len());
    for (j, s) in specs.iter().enumerate() {
        let value = full[j];
        let se = unc.std_err[j];
        let mut ci_clipped = false;
        let ci95 = se.zip(t95).map(|(se, t)| {
            let (lo, hi) = (value - t * se, value + t * se);
            ci_clipped = lo < s.lower || hi > s.upper;
            (lo.max(s.lower), hi.min(s.upper))
        });
        let by_user = opts.fixed_by_user.contains(&s.name);
        let provenance = match (prep.is_fixed[j], by_user, value == s.default) {
            (true, true, _) => format!(
                "assumed: fixed by the user at {} {} (the default would be {} {}: {})",
                sig(value, 6),
                s.unit,
                sig(s.default, 6),
                s.unit,
                s.provenance
            ),
            (true, false, true) => format!("{} (held fixed at its default)", s.provenance),
            (true, false, false) => format!(
                "assumed: held fixed at {} {}, a value given to the fit",
                sig(value, 6),
                s.unit
            ),
            (false, _, _) => format!(
                "derived: least-squares fit of model '{}' to {} ({m} rows, {residual_kind} \
                 residuals)",
                model.name(),
                data.source,
            ),
        };
        params.push(FittedParam {
            name: s.name.clone(),
            unit: s.unit.clone(),
            value,
            std_err: se,
            ci95,
            fixed: prep.is_fixed[j],
            at_bound: unc.at_bound[j],
            ci_clipped,
            lower: s.lower,
            upper: s.upper,
            provenance,
        });
    }
    if params.iter().any(|p| p.ci_clipped) {
        notes.push(
            "an interval marked clipped reaches a bound and was cut there: near a bound the \
             linearised interval is unreliable"
                .into(),
        );
    }
    if !converged {
        notes.push(format!("the fit did not converge: {termination}"));
    }

    let mut loo = None;
    if opts.loo {
        if !converged {
            notes.push("no leave-one-out: the full fit did not converge".into());
        } else if m < k + 1 || m < 2 {
            notes.push("no leave-one-out: it needs more rows than free parameters".into());
        } else {
            let rows = leave_one_out(model, data, &prep, &best.u, opts);
            let n_bad = rows.iter().filter(|r| !r.converged).count();
            if n_bad > 0 {
                notes.push(format!(
                    "leave-one-out: {n_bad} of {m} refits did not converge"
                ));
            }
            loo = Some(rows);
        }
    }
    let loo_rms_rel = loo
        .as_ref()
        .and_then(|rows: &Vec<LooRow>| rms(rows.iter().map(|r| r.rel_error), m));

    let mut warnings = Vec::new();
    if converged {
        if let Some(w) = spread_warning(data, &prep.scale, ssr, opts.residual, &model.target()) {
            warnings.push(w);
        }
    }
    if let Some(rows) = &loo {
        let same = rows.iter().zip(&residuals).all(|(l, r)| {
            (l.predicted_held_out - r.predicted).abs()
                <= 1e-9 * r.predicted.abs().max(f64::MIN_POSITIVE)
        });
        if same && m > 1 {
            let pinned: Vec<&str> = free
                .iter()
                .filter(|&&j| unc.at_bound[j])
                .map(|&j| specs[j].name.as_str())
                .collect();
            warnings.push(format!(
                "every held-out prediction equals the in-sample one: no refit without a row moved the parameters{}, so the leave-one-out errors say nothing about prediction",
                if pinned.is_empty() {
                    String::new()
                } else {
                    format!(" ({} held at a bound by the data)", pinned.join(", "))
                }
            ));
        }
    }

    Ok(FitReport {
        model: model.name().to_string(),
        source: data.source.clone(),
        target: model.target(),
        inputs: model.inputs(),
        residual: opts.residual,
        params,
        free_params: free.iter().map(|&j| specs[j].name.clone()).collect(),
        covariance_params: unc
            .cov_params
            .iter()
            .map(|&j| specs[j].name.clone())
            .collect(),
        covariance: unc.covariance,
        correlation: unc.correlation,
        residuals,
        n_rows: m,
        n_free: k,
        dof,
        ssr,
        sigma2,
        t95,
        rms_abs,
        rms_rel,
        termination,
        converged,
        n_evals: outcomes.iter().map(|o| o.n_evals).sum(),
        starts: outcomes,
        loo,
        loo_rms_rel,
        notes,
        warnings,
    })
}

/// A warning when a fit's residuals are larger than the spread of the measurements about the
/// best constant (weighted like the residuals): the model then explains none of the data's
/// variation, however well LM converged.
fn spread_warning(
    data: &Dataset,
    scale: &[f64],
    ssr: f64,
    residual: Residual,
    target: &TargetSpec,
) -> Option<String> {
    let m = data.len();
    if m < 2 || !ssr.is_finite() {
        return None;
    }
    let w: Vec<f64> = scale.iter().map(|s| 1.0 / (s * s)).collect();
    let c = data.y.iter().zip(&w).map(|(y, w)| y * w).sum::<f64>() / w.iter().sum::<f64>();
    let sst: f64 = data
        .y
        .iter()
        .zip(scale)
        .map(|(y, s)| ((y - c) / s).powi(2))
        .sum();
    if !(sst > 0.0 && ssr > sst) {
        return None;
    }
    let (rms, spread) = ((ssr / m as f64).sqrt(), (sst / m as f64).sqrt());
    let (rms, spread) = match residual {
        Residual::Relative => (
            format!("{} %", sig(100.0 * rms, 3)),
            format!("{} %", sig(100.0 * spread, 3)),
        ),
        Residual::Absolute => (
            format!("{} {}", sig(rms, 3), target.unit),
            format!("{} {}", sig(spread, 3), target.unit),
        ),
    };
    Some(format!(
        "the fit converged, but its rms residual ({rms}) is larger than the spread of the measured {} about their mean ({spread}): the model describes these data no better than a constant; check the machine, the units of the columns and the fixed parameters",
        target.name
    ))
}

/// `sigma2 (J^T J)^-1` via the SVD of the column-scaled `J`. On a (near-)singular `J`, `Err`
/// with the column that dominates the weakest direction.
fn covariance_matrix(j: &DMatrix<f64>, sigma2: f64) -> std::result::Result<DMatrix<f64>, usize> {
    let q = j.ncols();
    let norms: Vec<f64> = (0..q).map(|c| j.column(c).norm()).collect();
    if let Some(c) = norms.iter().position(|&v| v <= 0.0 || !v.is_finite()) {
        return Err(c);
    }
    let js = DMatrix::from_fn(j.nrows(), q, |i, c| j[(i, c)] / norms[c]);
    let svd = js.svd(false, true);
    let Some(v_t) = svd.v_t else {
        return Err(0);
    };
    let s = &svd.singular_values;
    let s_max = s.iter().copied().fold(0.0_f64, f64::max);
    let (i_min, s_min) = s
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f64::INFINITY),
            |acc, (i, v)| if v < acc.1 { (i, v) } else { acc },
        );
    if s_min.is_nan() || s_min <= 1e-8 * s_max {
        let row = v_t.row(i_min);
        let worst = (0..q)
            .max_by(|&a, &b| row[a].abs().total_cmp(&row[b].abs()))
            .unwrap_or(0);
        return Err(worst);
    }
    // (Js^T Js)^-1 = V S^-2 V^T; Cov = sigma2 D^-1 (Js^T Js)^-1 D^-1.
    let cov = DMatrix::from_fn(q, q, |a, b| {
        let mut acc = 0.0;
        for (r, sv) in s.iter().enumerate() {
            acc += v_t[(r, a)] * v_t[(r, b)] / (sv * sv);
        }
        sigma2 * acc / (norms[a] * norms[b])
    });
    Ok(cov)
}

fn to_rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows())
        .map(|i| (0..m.ncols()).map(|c| m[(i, c)]).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Output

fn opt_sig(v: Option<f64>, d: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| sig(x, d))
}

fn bound_str(v: f64) -> String {
    if v.is_finite() {
        sig(v, 4)
    } else {
        "-".into()
    }
}

impl FitReport {
    /// A [`Report`] for the CLI: the JSON is this struct; tables are the parameters (first, the
    /// CSV output), the rows with predictions and leave-one-out errors, and the correlation
    /// matrix; notes give the termination reason and caveats.
    pub fn to_report(&self) -> Report {
        let json = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        let mut pt = Table::new([
            "parameter",
            "value",
            "unit",
            "std err",
            "95% CI low",
            "95% CI high",
            "lower bound",
            "upper bound",
            "status",
            "provenance",
        ])
        .titled(format!("fit of model '{}' to {}", self.model, self.source));
        for p in &self.params {
            let status = if p.fixed {
                "fixed"
            } else if p.at_bound {
                "at bound"
            } else if p.ci_clipped {
                "free (CI clipped)"
            } else {
                "free"
            };
            pt.push([
                p.name.clone(),
                sig(p.value, 5),
                p.unit.clone(),
                opt_sig(p.std_err, 3),
                opt_sig(p.ci95.map(|c| c.0), 5),
                opt_sig(p.ci95.map(|c| c.1), 5),
                bound_str(p.lower),
                bound_str(p.upper),
                status.to_string(),
                p.provenance.clone(),
            ]);
        }
        let unit = &self.target.unit;
        let mut cols = vec!["row".to_string(), "label".to_string()];
        cols.extend(
            self.inputs
                .iter()
                .map(|i| format!("{} ({})", i.name, i.unit)),
        );
        cols.push(format!("measured ({unit})"));
        cols.push(format!("predicted ({unit})"));
        cols.push("error (%)".to_string());
        if self.loo.is_some() {
            cols.push(format!("held-out prediction ({unit})"));
            cols.push("held-out error (%)".to_string());
        }
        let mut rt = Table::new(cols).titled("rows");
        for (i, r) in self.residuals.iter().enumerate() {
            let mut row = vec![r.row.to_string(), r.label.clone()];
            row.extend(r.inputs.iter().map(|v| sig(*v, 5)));
            row.push(sig(r.measured, 5));
            row.push(sig(r.predicted, 5));
            row.push(opt_sig(r.rel_error.map(|e| 100.0 * e), 3));
            if let Some(loo) = &self.loo {
                let l = loo.get(i);
                row.push(opt_sig(l.map(|l| l.predicted_held_out), 5));
                row.push(opt_sig(l.and_then(|l| l.rel_error.map(|e| 100.0 * e)), 3));
            }
            rt.push(row);
        }
        let mut tables = vec![pt, rt];
        if let Some(corr) = &self.correlation {
            let mut cols = vec!["correlation".to_string()];
            cols.extend(self.covariance_params.iter().cloned());
            let mut ct = Table::new(cols).titled("correlation of the free parameters");
            for (name, row) in self.covariance_params.iter().zip(corr) {
                let mut cells = vec![name.clone()];
                cells.extend(row.iter().map(|v| format!("{v:.3}")));
                ct.push(cells);
            }
            tables.push(ct);
        }
        let mut notes = vec![
            format!("termination: {}", self.termination),
            format!(
                "{} rows, {} free parameters, {} degrees of freedom, {} residuals; \
                 rms error {} {unit} ({}%){}",
                self.n_rows,
                self.n_free,
                self.dof,
                match self.residual {
                    Residual::Relative => "relative",
                    Residual::Absolute => "absolute",
                },
                sig(self.rms_abs, 3),
                opt_sig(self.rms_rel.map(|e| 100.0 * e), 3),
                self.loo_rms_rel
                    .map(|e| format!("; leave-one-out rms error {}%", sig(100.0 * e, 3)))
                    .unwrap_or_default()
            ),
        ];
        if let Some(t) = self.t95 {
            notes.push(format!(
                "95% intervals: value +/- t(0.975, {}) = {} standard errors (linearised)",
                self.dof,
                sig(t, 4)
            ));
        }
        notes.extend(self.notes.iter().cloned());
        Report {
            json,
            tables,
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    /// y = a * x / (b + x) + c with bounds on a (both) and b (lower).
    struct Sat {
        analytic: bool,
    }

    impl FitModel for Sat {
        fn name(&self) -> &str {
            "sat"
        }
        fn params(&self) -> Vec<ParamSpec> {
            vec![
                ParamSpec::new("a", "ns", 50.0).with_bounds(0.0, 1e3),
                ParamSpec::new("b", "pages", 10.0).with_bounds(0.0, f64::INFINITY),
                ParamSpec::new("c", "ns", 1.0).with_bounds(f64::NEG_INFINITY, 100.0),
            ]
        }
        fn inputs(&self) -> Vec<InputSpec> {
            vec![InputSpec::new("x", "pages")]
        }
        fn target(&self) -> TargetSpec {
            TargetSpec::new("y", "ns")
        }
        fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
            Ok(p[0] * x[0] / (p[1] + x[0]) + p[2])
        }
        fn jacobian(&self, p: &[f64], x: &[f64]) -> Option<Result<Vec<f64>>> {
            let d = p[1] + x[0];
            self.analytic
                .then(|| Ok(vec![x[0] / d, -p[0] * x[0] / (d * d), 1.0]))
        }
    }

    #[test]
    fn transforms_round_trip_and_derivatives() {
        let ts = [
            (Transform::Identity, 3.5),
            (Transform::Lower(2.0), 2.5),
            (Transform::Upper(-1.0), -7.0),
            (Transform::Both(1.0, 5.0), 4.999),
            (Transform::Both(1.0, 5.0), 1.001),
        ];
        for (t, p) in ts {
            let u = t.to_internal(p);
            assert_relative_eq!(t.to_physical(u), p, max_relative = 1e-12);
            let h = 1e-6;
            let num = (t.to_physical(u + h) - t.to_physical(u - h)) / (2.0 * h);
            assert_relative_eq!(t.dphys_du(u), num, max_relative = 1e-6);
        }
        // Saturation stays within the bounds.
        assert_eq!(Transform::Both(1.0, 5.0).to_physical(1e6), 5.0);
        assert_eq!(Transform::Both(1.0, 5.0).to_physical(-1e6), 1.0);
    }

    #[test]
    fn internal_jacobian_matches_numerical_differentiation_of_the_residuals() {
        for analytic in [false, true] {
            for residual in [Residual::Absolute, Residual::Relative] {
                let model = Sat { analytic };
                let specs = model.params();
                let free = vec![0, 1, 2];
                let transforms: Vec<Transform> = specs.iter().map(Transform::of).collect();
                let base: Vec<f64> = specs.iter().map(|s| s.default).collect();
                let xs: Vec<Vec<f64>> = [1.0, 3.0, 10.0, 30.0, 100.0]
                    .iter()
                    .map(|&x| vec![x])
                    .collect();
                let ys = vec![5.0, 12.0, 30.0, 50.0, 70.0];
                let scale = match residual {
                    Residual::Absolute => vec![1.0; 5],
                    Residual::Relative => ys.clone(),
                };
                let setup = Setup {
                    model: &model,
                    specs: &specs,
                    free: &free,
                    transforms: &transforms,
                    base: &base,
                    xs,
                    ys,
                    scale,
                };
                let u0: Vec<f64> = [300.0, 7.0, 2.0]
                    .iter()
                    .zip(&transforms)
                    .map(|(p, t)| t.to_internal(*p))
                    .collect();
                let mut problem = Problem::new(&setup, DVector::from_vec(u0));
                let ours = problem.jacobian().unwrap();
                let num = levenberg_marquardt::differentiate_numerically(&mut problem).unwrap();
                for (a, b) in ours.iter().zip(num.iter()) {
                    assert_relative_eq!(*a, *b, epsilon = 1e-6, max_relative = 1e-5);
                }
            }
        }
    }

    #[test]
    fn covariance_of_a_straight_line_is_the_textbook_one() {
        // J = [1, x_i]: Var(b1) = sigma2 / Sxx.
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let j = DMatrix::from_fn(5, 2, |i, c| if c == 0 { 1.0 } else { x[i] });
        let cov = covariance_matrix(&j, 2.0).unwrap();
        assert_relative_eq!(cov[(1, 1)], 2.0 / 10.0, max_relative = 1e-12);
        assert_relative_eq!(
            cov[(0, 0)],
            2.0 * (1.0 / 5.0 + 4.0 / 10.0),
            max_relative = 1e-12
        );
        // Two identical columns: singular.
        let j = DMatrix::from_fn(5, 2, |i, _| x[i] + 1.0);
        assert!(covariance_matrix(&j, 1.0).is_err());
    }
}
