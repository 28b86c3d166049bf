//! [`FitReport`], the result of a fit, and its tables for the CLI.

use serde::Serialize;

use super::{InputSpec, Residual, TargetSpec};
use crate::report::{sig, Report, Table};

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
