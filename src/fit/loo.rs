//! Leave-one-out: refit without each row and predict it.

use super::prepare::Prepared;
use super::problem::run_lm;
use super::transform::interior;
use super::{Dataset, FitModel, FitOptions, LooRow};

/// Leave-one-out: refit without each row, predict that row.
///
/// Each refit starts from the full solution moved off its bounds (as the starts of the full fit
/// are): a parameter that ended on a bound has an internal coordinate of ±40 or more, where the
/// bound transform's derivative is below 1e-17, so a refit started exactly there cannot move it
/// and would return the full fit's prediction for every row whatever the row held out.
pub(super) fn leave_one_out(
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
