//! Model evaluation and Jacobians: the model's own, or finite differences that stay inside the bounds.

use nalgebra::DMatrix;

use super::{FitModel, ParamSpec};
use crate::error::{Error, Result};

/// Evaluates the model on all rows; any error, wrong length or non-finite value is a message.
pub(super) fn eval_model(
    model: &dyn FitModel,
    full: &[f64],
    xs: &[Vec<f64>],
) -> std::result::Result<Vec<f64>, String> {
    // A prediction is a function of the parameters and the row's inputs
    // ([`FitModel::predict`]): rows with the same inputs (repeats of a setting) are predicted
    // once, so a CSV of 10 000 repeats of six settings costs six predictions per evaluation.
    let (unique, of_row) = unique_rows(xs);
    if unique.len() < xs.len() {
        return match eval_model_rows(model, full, &unique) {
            Ok(f) => Ok(of_row.iter().map(|&u| f[u]).collect()),
            Err(_) => eval_model_rows(model, full, xs),
        };
    }
    eval_model_rows(model, full, xs)
}

/// The distinct input rows of `xs` (in order of first appearance) and, per row, the index of
/// its distinct row.
pub(super) fn unique_rows(xs: &[Vec<f64>]) -> (Vec<Vec<f64>>, Vec<usize>) {
    let mut seen: std::collections::HashMap<Vec<u64>, usize> = std::collections::HashMap::new();
    let mut unique = Vec::new();
    let of_row = xs
        .iter()
        .map(|x| {
            let key: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
            *seen.entry(key).or_insert_with(|| {
                unique.push(x.clone());
                unique.len() - 1
            })
        })
        .collect();
    (unique, of_row)
}

fn eval_model_rows(
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
pub(super) fn prediction_jacobian(
    model: &dyn FitModel,
    specs: &[ParamSpec],
    full: &[f64],
    cols: &[usize],
    xs: &[Vec<f64>],
) -> std::result::Result<DMatrix<f64>, String> {
    // Rows with the same inputs have the same Jacobian row (see `eval_model`).
    let (unique, of_row) = unique_rows(xs);
    if unique.len() < xs.len() {
        if let Ok(ju) = prediction_jacobian_rows(model, specs, full, cols, &unique) {
            return Ok(DMatrix::from_fn(xs.len(), cols.len(), |i, c| {
                ju[(of_row[i], c)]
            }));
        }
    }
    prediction_jacobian_rows(model, specs, full, cols, xs)
}

fn prediction_jacobian_rows(
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
