//! The least-squares problem handed to Levenberg-Marquardt, and one LM run.

use std::cell::{Cell, RefCell};

use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt, TerminationReason};
use nalgebra::{storage::Owned, DMatrix, DVector, Dyn};

use super::jacobian::{eval_model, prediction_jacobian};
use super::transform::Transform;
use super::{FitModel, FitOptions, ParamSpec};

/// Everything needed to evaluate the scaled residuals for a set of free parameters.
pub(super) struct Setup<'a> {
    pub(super) model: &'a dyn FitModel,
    pub(super) specs: &'a [ParamSpec],
    pub(super) free: &'a [usize],
    pub(super) transforms: &'a [Transform],
    pub(super) base: &'a [f64],
    pub(super) xs: Vec<Vec<f64>>,
    pub(super) ys: Vec<f64>,
    /// Residual divisor per row: 1 or |y|.
    pub(super) scale: Vec<f64>,
}

impl Setup<'_> {
    pub(super) fn full_from_free(&self, p: &[f64]) -> Vec<f64> {
        let mut full = self.base.to_vec();
        for (&j, &v) in self.free.iter().zip(p) {
            full[j] = v;
        }
        full
    }

    pub(super) fn free_from_u(&self, u: &[f64]) -> Vec<f64> {
        self.transforms
            .iter()
            .zip(u)
            .map(|(t, &v)| t.to_physical(v))
            .collect()
    }

    pub(super) fn residuals(&self, full: &[f64]) -> std::result::Result<Vec<f64>, String> {
        let f = eval_model(self.model, full, &self.xs)?;
        Ok(f.iter()
            .zip(&self.ys)
            .zip(&self.scale)
            .map(|((p, y), s)| (p - y) / s)
            .collect())
    }

    /// Weighted physical Jacobian of the residuals, columns = free parameters.
    pub(super) fn jacobian_phys(&self, full: &[f64]) -> std::result::Result<DMatrix<f64>, String> {
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

pub(super) struct LmOutcome {
    pub(super) u: Vec<f64>,
    pub(super) ssr: f64,
    pub(super) converged: bool,
    pub(super) termination: String,
    pub(super) n_evals: usize,
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

pub(super) fn run_lm(setup: &Setup<'_>, u0: &[f64], opts: &FitOptions) -> LmOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::fit::{InputSpec, Residual, TargetSpec};
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
}
