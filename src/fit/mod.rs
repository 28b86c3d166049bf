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
//!   a [`SplitMix64`](stats::SplitMix64) seeded by [`FitOptions::seed`]. Stratifying (rather than drawing
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
pub mod lock_calibration;
pub mod memcg_calibration;
pub mod numa_calibration;
pub mod optimize;
pub mod stats;

pub(crate) mod dataset;
mod jacobian;
mod loo;
mod options;
mod prepare;
mod problem;
mod report;
mod spec;
mod starts;
mod transform;
mod uncertainty;

pub use dataset::{
    echo, CsvColumns, Dataset, DESCRIPTIVE_COLUMNS, MEASURE_PCP_WORKLOADS, SWEEP_COLUMNS,
    TAG_COLUMNS,
};
pub use jacobian::{jacobian_discrepancy, numerical_jacobian};
pub use options::{FitOptions, Residual, LOO_MAX_ROWS};
pub use report::{FitReport, FittedParam, LooRow, ResidualRow, StartOutcome};
pub use spec::{FitModel, InputSpec, ParamSpec, TargetSpec};

use crate::error::Result;
use crate::fit::stats::student_t_quantile;
use crate::report::sig;
use jacobian::eval_model;
use loo::leave_one_out;
use prepare::prepare;
use problem::{run_lm, LmOutcome};
use starts::{runaway, start_points};
use transform::interior;
use uncertainty::uncertainty;

fn rms<I: Iterator<Item = Option<f64>>>(errors: I, n: usize) -> Option<f64> {
    errors
        .map(|e| e.map(|e| e * e))
        .sum::<Option<f64>>()
        .map(|s| (s / n as f64).sqrt())
}

/// The free parameters of a fit of `model` to `data` that move no prediction of any row, at
/// the start and halfway to a bound: ones the model does not read (a kind that takes its own
/// calibration instead of the file's value). [`fit`] refuses them; a caller that can do
/// without a fit (blind rows) asks first.
pub fn parameters_without_effect(
    model: &dyn FitModel,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<Vec<String>> {
    let prep = prepare(model, data, opts)?;
    let setup = prep.setup(model, data, 0..data.len());
    let p0: Vec<f64> = prep
        .free
        .iter()
        .map(|&j| interior(&prep.specs[j], prep.start0[j]))
        .collect();
    Ok(dead_parameters(&setup, &prep.specs, &prep.free, &p0))
}

fn dead_parameters(
    setup: &problem::Setup<'_>,
    specs: &[ParamSpec],
    free: &[usize],
    p0: &[f64],
) -> Vec<String> {
    let moved: Vec<f64> = free
        .iter()
        .zip(p0)
        .map(|(&j, &v)| {
            let s = &specs[j];
            let hi = if s.upper.is_finite() {
                s.upper
            } else {
                v.abs() * 4.0 + 1.0
            };
            v + 0.5 * (hi - v)
        })
        .collect();
    let mut dead = vec![true; free.len()];
    for p in [p0, moved.as_slice()] {
        let Ok(jac) = setup.jacobian_phys(&setup.full_from_free(p)) else {
            return Vec::new();
        };
        for (c, d) in dead.iter_mut().enumerate() {
            if jac.column(c).iter().any(|x| *x != 0.0) {
                *d = false;
            }
        }
    }
    dead.iter()
        .zip(free)
        .filter(|(d, _)| **d)
        .map(|(_, &j)| specs[j].name.clone())
        .collect()
}

/// The evaluations an extra start of a multi-start may spend: [`EXTRA_START_EVALS_PER_FIRST`]
/// times what the first start (the defaults) needed, at least [`EXTRA_START_EVALS_PER_PARAM`]
/// per free parameter and iteration, at most `max_evals`. The extra starts look for another
/// minimum; one that has not converged after many times the first start's work is crossing a flat
/// or ill-conditioned region (a not-converged start never beats a converged one), and on a slow
/// model (a queue solved per evaluation) it would otherwise spend the whole `max_evals`.
fn extra_start_budget(max_evals: usize, first_evals: usize, k: usize) -> usize {
    (EXTRA_START_EVALS_PER_FIRST * first_evals)
        .max(EXTRA_START_EVALS_PER_PARAM * (k + 1))
        .min(max_evals)
}

/// See [`extra_start_budget`].
const EXTRA_START_EVALS_PER_FIRST: usize = 5;
/// See [`extra_start_budget`].
const EXTRA_START_EVALS_PER_PARAM: usize = 50;

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
    // A parameter the model does not read would be reported "fitted" at its start value.
    if let Some(name) = dead_parameters(&setup, specs, free, &p0).first() {
        return Err(crate::Error::Unsupported(format!(
            "{name}: changing it moves no prediction of these rows (at the start value and halfway to its bound): the model does not read it here, so there is nothing to fit (a workload kind may take its own calibration instead of the file's value: give basis = \"given\", or do not free it)"
        )));
    }
    let starts = start_points(specs, free, &prep.transforms, &p0, opts);
    let mut results: Vec<LmOutcome> = Vec::with_capacity(starts.len());
    for p in &starts {
        let u0: Vec<f64> = prep
            .transforms
            .iter()
            .zip(p)
            .map(|(t, &v)| t.to_internal(v))
            .collect();
        let budget = match results.first() {
            Some(first) => extra_start_budget(opts.max_evals, first.n_evals, k),
            None => opts.max_evals,
        };
        let o = FitOptions {
            max_evals: budget,
            ..opts.clone()
        };
        results.push(run_lm(&setup, &u0, &o));
    }
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
        } else if m > opts.loo_max_rows {
            notes.push(format!(
                "no leave-one-out: {m} rows is more than {}, the most refitted one row at a time \
                 (each of the {m} refits costs about as much as the fit itself, so the time \
                 would grow with the square of the rows); fit a subset of at most {} rows to \
                 get it",
                opts.loo_max_rows, opts.loo_max_rows
            ));
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
    if converged && k > 0 {
        let no_interval: Vec<&str> = free
            .iter()
            .filter(|&&j| !unc.at_bound[j] && unc.std_err[j].is_none())
            .map(|&j| specs[j].name.as_str())
            .collect();
        if let Some(why) = &unc.not_identifiable {
            warnings.push(format!(
                "the fitted values have no uncertainty: {why}; do not use them as measured"
            ));
        } else if dof == 0 && !no_interval.is_empty() {
            warnings.push(format!(
                "the fitted values ({}) have no uncertainty: {m} rows for {k} free parameters \
                 leave no degrees of freedom, so the fit passes through every row whatever the \
                 noise; add rows or fix parameters (--fix)",
                no_interval.join(", ")
            ));
        } else if !no_interval.is_empty() {
            warnings.push(format!(
                "the fitted values of {} have no uncertainty (see the notes)",
                no_interval.join(", ")
            ));
        }
        if free.iter().all(|&j| unc.at_bound[j]) {
            warnings.push(format!(
                "every free parameter ({}) ended at a bound of its physical range: the data push \
                 them beyond it, so none is determined by the data (the model does not describe \
                 them; check the machine, the units and the columns)",
                free.iter()
                    .map(|&j| specs[j].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_scales_with_the_first_start_and_stays_within_max_evals() {
        // 5 x the first start's 9 evaluations is below the floor of 50 per parameter and step.
        assert_eq!(extra_start_budget(2000, 9, 2), 150);
        assert_eq!(extra_start_budget(2000, 52, 2), 260);
        assert_eq!(extra_start_budget(2000, 1000, 2), 2000);
        assert_eq!(extra_start_budget(100, 9, 2), 100);
    }
}
