//! Bound detection, covariance, standard errors and correlation at the solution.

use nalgebra::DMatrix;

use super::problem::Setup;
use crate::report::sig;

/// Intervals and what stands in their way.
#[derive(Default)]
pub(super) struct Uncertainty {
    pub(super) at_bound: Vec<bool>,
    pub(super) std_err: Vec<Option<f64>>,
    /// Indices (into all parameters) of the covariance rows.
    pub(super) cov_params: Vec<usize>,
    pub(super) covariance: Option<Vec<Vec<f64>>>,
    pub(super) correlation: Option<Vec<Vec<f64>>>,
    pub(super) notes: Vec<String>,
    /// Why the data do not determine the free parameters (a singular Jacobian, counting those
    /// at a bound): then no parameter gets an interval. `None` when they are determined.
    pub(super) not_identifiable: Option<String>,
}

/// Bound detection, covariance and correlation at the solution `full` with scaled residuals `r`
/// (see the module doc).
pub(super) fn uncertainty(
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
    // Whether the data determine the free parameters at all, counting those at a bound: with
    // every row at the same inputs (or two parameters with the same effect) the Jacobian is
    // singular, and an interval of one parameter conditional on another parked at its bound
    // would look tight while nothing pins either.
    if free.len() > 1 {
        if let Err(worst) = covariance_matrix(&jac, 1.0) {
            let names: Vec<&str> = free.iter().map(|&j| specs[j].name.as_str()).collect();
            let why = format!(
                "the free parameters ({}) are not identifiable from these data: the Jacobian is \
                 singular or nearly so (condition > 1e8), {} has no effect the others cannot \
                 mimic{}; no intervals are given (fix parameters with --fix or add rows that \
                 vary their effects)",
                names.join(", "),
                names[worst.min(names.len() - 1)],
                if setup.xs.windows(2).all(|w| w[0] == w[1]) {
                    format!(" (all {} rows have the same inputs)", setup.xs.len())
                } else {
                    String::new()
                }
            );
            u.notes.push(format!("no intervals: {why}"));
            u.not_identifiable = Some(why);
            u.cov_params = Vec::new();
            return u;
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
        Err(worst) => {
            let why = format!(
                "the Jacobian is singular or nearly so (condition > 1e8); {} is not \
                 identifiable from these data (fix it or add rows that vary its effect)",
                u.cov_params
                    .get(worst)
                    .map_or("a parameter", |&j| specs[j].name.as_str())
            );
            u.notes.push(format!("no intervals: {why}"));
            u.not_identifiable = Some(why);
        }
    }
    u
}
/// `sigma2 (J^T J)^-1` via the SVD of the column-scaled `J`. On a (near-)singular `J`, `Err`
/// with the column that dominates the weakest direction.
pub(super) fn covariance_matrix(
    j: &DMatrix<f64>,
    sigma2: f64,
) -> std::result::Result<DMatrix<f64>, usize> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

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
