//! Tests of the generic fitting engine (`pcpmodel::fit`): recovery of known parameters,
//! coverage of the 95% intervals over many seeds, Jacobians, fixed parameters, residual
//! scaling, leave-one-out against closed-form PRESS, non-convergence reports, CSV errors.

use approx::assert_relative_eq;
use pcpmodel::fit::stats::SplitMix64;
use pcpmodel::fit::{
    fit, jacobian_discrepancy, numerical_jacobian, Dataset, FitModel, FitOptions, InputSpec,
    ParamSpec, Residual, TargetSpec,
};
use pcpmodel::{Error, Result};

// ----- test models ---------------------------------------------------------------------------

/// y = a * exp(-x / tau) + c.
struct ExpDecay;

impl FitModel for ExpDecay {
    fn name(&self) -> &str {
        "exp-decay"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("a_ns", "ns", 2.0),
            ParamSpec::new("tau_us", "us", 1.0).with_bounds(0.0, f64::INFINITY),
            ParamSpec::new("c_ns", "ns", 0.0),
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("t_us", "us")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y_ns", "ns")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok(p[0] * (-x[0] / p[1]).exp() + p[2])
    }
}

/// y = a * x / (b + x) + c (a saturating, Michaelis-Menten / queue-like curve), with an
/// analytic Jacobian when `analytic`.
struct Saturating {
    analytic: bool,
}

impl FitModel for Saturating {
    fn name(&self) -> &str {
        "saturating"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("a_ns", "ns", 50.0).with_bounds(0.0, 1e4),
            ParamSpec::new("b_pages", "pages", 10.0).with_bounds(0.0, f64::INFINITY),
            ParamSpec::new("c_ns", "ns", 1.0),
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("batch_pages", "pages")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("cost_ns", "ns")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok(p[0] * x[0] / (p[1] + x[0]) + p[2])
    }
    fn jacobian(&self, p: &[f64], x: &[f64]) -> Option<Result<Vec<f64>>> {
        if !self.analytic {
            return None;
        }
        let d = p[1] + x[0];
        Some(Ok(vec![x[0] / d, -p[0] * x[0] / (d * d), 1.0]))
    }
}

/// y = b0 + b1 * x1 + b2 * x2.
struct Linear;

impl FitModel for Linear {
    fn name(&self) -> &str {
        "linear"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("b0", "1", 0.0),
            ParamSpec::new("b1", "1", 0.0),
            ParamSpec::new("b2", "1", 0.0),
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x1", "1"), InputSpec::new("x2", "1")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "1")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok(p[0] + p[1] * x[0] + p[2] * x[1])
    }
}

/// y = b0 + b1 * x, with `b1 >= 0` when `bounded`.
struct Line {
    bounded: bool,
}

impl FitModel for Line {
    fn name(&self) -> &str {
        "line"
    }
    fn params(&self) -> Vec<ParamSpec> {
        let b1 = ParamSpec::new("b1", "1", 1.0);
        vec![
            ParamSpec::new("b0", "1", 0.0),
            if self.bounded {
                b1.with_bounds(0.0, f64::INFINITY)
            } else {
                b1
            },
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "1")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "1")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok(p[0] + p[1] * x[0])
    }
}

/// y = c.
struct Constant;

impl FitModel for Constant {
    fn name(&self) -> &str {
        "constant"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::new("c", "ns", 1.0)]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "1")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "ns")
    }
    fn predict(&self, p: &[f64], _x: &[f64]) -> Result<f64> {
        Ok(p[0])
    }
}

/// Always NaN.
struct NanModel;

impl FitModel for NanModel {
    fn name(&self) -> &str {
        "nan"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::new("p", "1", 1.0)]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "1")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "1")
    }
    fn predict(&self, _p: &[f64], _x: &[f64]) -> Result<f64> {
        Ok(f64::NAN)
    }
}

/// y = 1 / p: fitted to zeros, the best p is at infinity.
struct Runaway;

impl FitModel for Runaway {
    fn name(&self) -> &str {
        "runaway"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::new("p", "1", 1.0)]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "1")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "1")
    }
    fn predict(&self, p: &[f64], _x: &[f64]) -> Result<f64> {
        Ok(1.0 / p[0])
    }
}

// ----- helpers -------------------------------------------------------------------------------

fn synth(model: &dyn FitModel, truth: &[f64], xs: &[Vec<f64>], noise: f64, seed: u64) -> Dataset {
    let mut rng = SplitMix64::new(seed);
    let y = xs
        .iter()
        .map(|x| model.predict(truth, x).unwrap() + noise * rng.normal())
        .collect();
    Dataset::from_rows(model, xs.to_vec(), y, format!("synthetic seed {seed}")).unwrap()
}

fn grid(n: usize, lo: f64, hi: f64) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| vec![lo + (hi - lo) * i as f64 / (n - 1) as f64])
        .collect()
}

fn absolute() -> FitOptions {
    FitOptions {
        residual: Residual::Absolute,
        ..FitOptions::default()
    }
}

fn value(r: &pcpmodel::fit::FitReport, name: &str) -> f64 {
    r.params.iter().find(|p| p.name == name).unwrap().value
}

// ----- (1) exact recovery --------------------------------------------------------------------

#[test]
fn recovers_noiseless_parameters() {
    let xs = grid(15, 0.0, 6.0);
    let truth = [3.0, 1.7, 0.4];
    let r = fit(
        &ExpDecay,
        &synth(&ExpDecay, &truth, &xs, 0.0, 1),
        &absolute(),
    )
    .unwrap();
    assert!(r.converged, "{}", r.termination);
    for (p, t) in r.params.iter().zip(truth) {
        assert_relative_eq!(p.value, t, max_relative = 1e-7);
    }
    assert!(r.rms_abs < 1e-8);

    let xs = grid(12, 1.0, 200.0);
    let truth = [80.0, 25.0, 5.0];
    for analytic in [false, true] {
        let m = Saturating { analytic };
        let r = fit(&m, &synth(&m, &truth, &xs, 0.0, 2), &FitOptions::default()).unwrap();
        assert!(r.converged, "{}", r.termination);
        for (p, t) in r.params.iter().zip(truth) {
            assert_relative_eq!(p.value, t, max_relative = 1e-7);
        }
    }

    let xs: Vec<Vec<f64>> = (0..10)
        .map(|i| vec![i as f64, ((i * 7) % 5) as f64])
        .collect();
    let truth = [1.5, -2.0, 0.25];
    let r = fit(&Linear, &synth(&Linear, &truth, &xs, 0.0, 3), &absolute()).unwrap();
    assert!(r.converged, "{}", r.termination);
    for (p, t) in r.params.iter().zip(truth) {
        assert_relative_eq!(p.value, t, epsilon = 1e-8);
    }
}

/// y = sin(w x): many local minima in w.
struct Sine;

impl FitModel for Sine {
    fn name(&self) -> &str {
        "sine"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::new("w", "1/s", 1.0).with_bounds(0.5, 5.0)]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "s")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "1")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok((p[0] * x[0]).sin())
    }
}

#[test]
fn multi_start_escapes_a_local_minimum() {
    // From the default w = 1 LM stops in the local minimum near w = 0.67. The basin of the
    // truth w = 3 is about 1/s wide (starts from 2.6 to 3.6 reach it), wider than one stratum
    // of 8 starts over [0.5, 5] (0.62/s), so the Latin hypercube must put a start in it.
    let xs = grid(40, 0.0, 6.0);
    let data = synth(&Sine, &[3.0], &xs, 0.0, 1);
    let one = fit(
        &Sine,
        &data,
        &FitOptions {
            starts: 1,
            ..absolute()
        },
    )
    .unwrap();
    assert!(
        (one.params[0].value - 3.0).abs() > 0.5,
        "{}",
        one.params[0].value
    );
    let opts = FitOptions {
        starts: 8,
        ..absolute()
    };
    let r = fit(&Sine, &data, &opts).unwrap();
    assert!(r.converged, "{}", r.termination);
    assert_eq!(r.starts.len(), 8);
    assert_relative_eq!(r.params[0].value, 3.0, max_relative = 1e-9);
    assert!(r.notes[0].starts_with("best of 8 starts"), "{:?}", r.notes);
    // Deterministic: the same seed gives the same starts.
    let again = fit(&Sine, &data, &opts).unwrap();
    assert_eq!(r.starts, again.starts);
}

// ----- (2) coverage --------------------------------------------------------------------------

#[test]
fn ci95_covers_truth_in_about_95_percent_of_trials() {
    let xs = grid(25, 0.0, 8.0);
    let truth = [1.0, 2.0, 0.1];
    let opts = FitOptions {
        starts: 1,
        loo: false,
        ..absolute()
    };
    let trials = 200;
    let mut covered = [0usize; 3];
    for seed in 0..trials {
        let data = synth(&ExpDecay, &truth, &xs, 0.02, 1000 + seed);
        let r = fit(&ExpDecay, &data, &opts).unwrap();
        assert!(r.converged, "seed {seed}: {}", r.termination);
        for (j, p) in r.params.iter().enumerate() {
            let (lo, hi) = p.ci95.unwrap();
            if lo <= truth[j] && truth[j] <= hi {
                covered[j] += 1;
            }
        }
    }
    // Sampling error of the coverage over 200 trials: binomial sd sqrt(0.95 x 0.05 / 200) =
    // 1.5 %, so [0.90, 0.99] is about -3 to +2.6 sd around 0.95 (the interval is linearised,
    // so a few points below 95 % are expected too).
    for (j, c) in covered.iter().enumerate() {
        let rate = *c as f64 / trials as f64;
        assert!(
            (0.90..=0.99).contains(&rate),
            "parameter {j}: coverage {rate} over {trials} trials"
        );
    }
}

#[test]
fn ci95_coverage_with_relative_residuals_and_multiplicative_noise() {
    // y = f * (1 + 0.03 e): relative residuals have constant variance.
    let m = Saturating { analytic: true };
    let xs = grid(20, 2.0, 300.0);
    let truth = [80.0, 25.0, 5.0];
    let opts = FitOptions {
        starts: 1,
        loo: false,
        ..FitOptions::default()
    };
    let trials = 200;
    let mut covered = [0usize; 3];
    for seed in 0..trials {
        let mut rng = SplitMix64::new(5000 + seed);
        let y = xs
            .iter()
            .map(|x| m.predict(&truth, x).unwrap() * (1.0 + 0.03 * rng.normal()))
            .collect();
        let data = Dataset::from_rows(&m, xs.clone(), y, "mult").unwrap();
        let r = fit(&m, &data, &opts).unwrap();
        assert!(r.converged, "seed {seed}: {}", r.termination);
        for (j, p) in r.params.iter().enumerate() {
            let (lo, hi) = p.ci95.unwrap();
            covered[j] += usize::from(lo <= truth[j] && truth[j] <= hi);
        }
    }
    // Sampling error of the coverage over 200 trials: binomial sd sqrt(0.95 x 0.05 / 200) =
    // 1.5 %, so [0.90, 0.99] is about -3 to +2.6 sd around 0.95 (the interval is linearised,
    // so a few points below 95 % are expected too).
    for (j, c) in covered.iter().enumerate() {
        let rate = *c as f64 / trials as f64;
        assert!(
            (0.90..=0.99).contains(&rate),
            "parameter {j}: coverage {rate} over {trials} trials"
        );
    }
}

// ----- (3) Jacobians -------------------------------------------------------------------------

#[test]
fn numerical_jacobian_matches_analytic() {
    let m = Saturating { analytic: true };
    let xs = grid(9, 0.5, 300.0);
    let p = [80.0, 25.0, 5.0];
    let d = jacobian_discrepancy(&m, &p, &xs).unwrap().unwrap();
    assert!(d < 1e-8, "discrepancy {d}");
    // At the lower bound of b (0) and the upper bound of a (1e4): one-sided differences.
    let p = [1e4, 0.0, 5.0];
    let d = jacobian_discrepancy(&m, &p, &xs).unwrap().unwrap();
    assert!(d < 1e-7, "discrepancy at bounds {d}");
    let num = numerical_jacobian(&m, &p, &xs).unwrap();
    assert_eq!(num.len(), xs.len());
    assert_relative_eq!(num[3][2], 1.0, max_relative = 1e-6);
    // No analytic Jacobian: None.
    assert!(jacobian_discrepancy(&ExpDecay, &[1.0, 1.0, 0.0], &xs)
        .unwrap()
        .is_none());
    // Wrong number of parameters is an error, not a panic.
    assert!(numerical_jacobian(&ExpDecay, &[1.0], &xs).is_err());
}

// ----- (4) fixed parameters ------------------------------------------------------------------

#[test]
fn fixed_parameters_stay_fixed_and_reduce_dof() {
    let xs = grid(15, 0.0, 6.0);
    let truth = [3.0, 1.7, 0.4];
    let data = synth(&ExpDecay, &truth, &xs, 0.01, 5);
    let free = fit(&ExpDecay, &data, &absolute()).unwrap();
    let opts = FitOptions {
        fixed: vec![("c_ns".into(), 0.4)],
        ..absolute()
    };
    let r = fit(&ExpDecay, &data, &opts).unwrap();
    assert!(r.converged, "{}", r.termination);
    assert_eq!(free.dof, 12);
    assert_eq!(r.dof, 13);
    assert_eq!(r.n_free, 2);
    let c = &r.params[2];
    assert!(c.fixed);
    assert_eq!(c.value, 0.4);
    assert!(c.std_err.is_none() && c.ci95.is_none());
    assert!(c.provenance.starts_with("assumed"), "{}", c.provenance);
    assert_eq!(r.covariance_params, vec!["a_ns", "tau_us"]);
    assert_eq!(r.covariance.as_ref().unwrap().len(), 2);
    assert!(r.params[0].provenance.starts_with("derived"));
    // Fixing everything evaluates the model.
    let opts = FitOptions {
        fixed: vec![
            ("a_ns".into(), 3.0),
            ("tau_us".into(), 1.7),
            ("c_ns".into(), 0.4),
        ],
        ..absolute()
    };
    let r = fit(&ExpDecay, &data, &opts).unwrap();
    assert!(r.converged);
    assert_eq!(r.n_free, 0);
    assert_eq!(r.dof, 15);
    // Unknown or out-of-bounds fixed parameters are errors.
    let opts = FitOptions {
        fixed: vec![("nope".into(), 1.0)],
        ..absolute()
    };
    let e = fit(&ExpDecay, &data, &opts).unwrap_err();
    assert!(matches!(e, Error::Unknown { .. }), "{e}");
    assert!(e.to_string().contains("tau_us"), "{e}");
    let opts = FitOptions {
        fixed: vec![("tau_us".into(), -1.0)],
        ..absolute()
    };
    assert!(fit(&ExpDecay, &data, &opts).is_err());
}

// ----- (5) relative vs absolute residuals ----------------------------------------------------

#[test]
fn relative_and_absolute_residuals_minimise_different_sums() {
    let xs = vec![vec![0.0], vec![1.0], vec![2.0]];
    let ys = vec![1.0, 10.0, 100.0];
    let data = Dataset::from_rows(&Constant, xs, ys.clone(), "three").unwrap();
    let abs = fit(&Constant, &data, &absolute()).unwrap();
    assert_relative_eq!(value(&abs, "c"), 37.0, max_relative = 1e-9);
    // Relative: minimise sum (c / y - 1)^2  =>  c = sum(1/y) / sum(1/y^2).
    let rel = fit(&Constant, &data, &FitOptions::default()).unwrap();
    let s1: f64 = ys.iter().map(|y| 1.0 / y).sum();
    let s2: f64 = ys.iter().map(|y| 1.0 / (y * y)).sum();
    assert_relative_eq!(value(&rel, "c"), s1 / s2, max_relative = 1e-9);
    assert_eq!(rel.residual, Residual::Relative);
    assert_eq!("absolute".parse::<Residual>().unwrap(), Residual::Absolute);
    assert!("squared".parse::<Residual>().is_err());
    assert_relative_eq!(
        rel.ssr,
        ys.iter().map(|y| (s1 / s2 / y - 1.0).powi(2)).sum::<f64>(),
        max_relative = 1e-9
    );
}

// ----- (6) leave-one-out ---------------------------------------------------------------------

#[test]
fn loo_matches_press_residuals_of_a_linear_model() {
    let m = Line { bounded: false };
    let xs: Vec<Vec<f64>> = [0.0, 1.0, 2.5, 3.0, 4.5, 6.0, 7.0, 9.0]
        .iter()
        .map(|&x| vec![x])
        .collect();
    let data = synth(&m, &[1.0, 0.5], &xs, 0.3, 6);
    let r = fit(&m, &data, &absolute()).unwrap();
    assert!(r.converged);
    let n = xs.len() as f64;
    let xbar = xs.iter().map(|x| x[0]).sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x[0] - xbar).powi(2)).sum();
    let loo = r.loo.as_ref().unwrap();
    assert_eq!(loo.len(), xs.len());
    for (i, row) in loo.iter().enumerate() {
        let h = 1.0 / n + (xs[i][0] - xbar).powi(2) / sxx;
        let e = r.residuals[i].error; // predicted - measured
        let press = e / (1.0 - h);
        assert!(row.converged);
        assert_relative_eq!(row.error, press, epsilon = 1e-7, max_relative = 1e-7);
    }
}

// ----- bounds --------------------------------------------------------------------------------

#[test]
fn parameter_pushed_past_a_bound_is_flagged() {
    let m = Line { bounded: true };
    let xs = grid(10, 0.0, 9.0);
    let data = synth(&Line { bounded: false }, &[5.0, -0.5], &xs, 0.05, 7);
    let r = fit(&m, &data, &absolute()).unwrap();
    let b1 = &r.params[1];
    assert!(b1.at_bound, "{b1:?}");
    assert!(b1.value >= 0.0 && b1.value < 1e-3, "{}", b1.value);
    assert!(b1.ci95.is_none());
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("b1") && n.contains("bound")));
    // The unconstrained parameter still has an interval.
    assert!(r.params[0].ci95.is_some());
    assert_eq!(r.covariance_params, vec!["b0"]);
    // Interior solution: not flagged.
    let data = synth(&Line { bounded: false }, &[5.0, 0.5], &xs, 0.05, 7);
    let r = fit(&m, &data, &absolute()).unwrap();
    assert!(!r.params[1].at_bound);
    assert!(r.params[1].ci95.is_some());
}

// ----- (7) non-convergence is a report -------------------------------------------------------

#[test]
fn nan_model_and_runaway_fit_report_non_convergence() {
    let xs = grid(5, 0.0, 4.0);
    let data = Dataset::from_rows(&NanModel, xs.clone(), vec![1.0; 5], "ones").unwrap();
    let r = fit(&NanModel, &data, &FitOptions::default()).unwrap();
    assert!(!r.converged);
    assert!(
        r.termination.starts_with("did not converge"),
        "{}",
        r.termination
    );
    assert!(r.termination.contains("NaN"), "{}", r.termination);
    assert!(r.loo.is_none());
    assert!(r
        .to_report()
        .render(pcpmodel::output::report::Format::Table)
        .contains("did not converge"));

    let data = Dataset::from_rows(&Runaway, xs, vec![0.0; 5], "zeros").unwrap();
    let opts = FitOptions {
        max_evals: 60,
        starts: 1,
        ..absolute()
    };
    let r = fit(&Runaway, &data, &opts).unwrap();
    assert!(!r.converged, "{}", r.termination);
    assert!(r.termination.contains("maximum"), "{}", r.termination);
    assert!(r.n_evals <= 62, "{}", r.n_evals);
}

// ----- (8) CSV errors ------------------------------------------------------------------------

fn csv_err(text: &str) -> String {
    Dataset::from_csv_str(text, "data.csv", &ExpDecay)
        .unwrap_err()
        .to_string()
}

#[test]
fn csv_maps_columns_by_name_and_ignores_others() {
    let text = "# comment\nmachine,y_ns,note,t_us\nicx,3.0,first,0\nicx, 2.5 ,,1\n";
    let d = Dataset::from_csv_str(text, "data.csv", &ExpDecay).unwrap();
    assert_eq!(d.x, vec![vec![0.0], vec![1.0]]);
    assert_eq!(d.y, vec![3.0, 2.5]);
    assert_eq!(d.lines, vec![3, 4]);
    assert_eq!(d.row_labels, vec!["icx", "icx"]);
    assert_eq!(d.inputs, vec!["t_us"]);
}

#[test]
fn csv_errors_name_row_and_column() {
    let e = csv_err("t_us,y\n0,1\n");
    assert!(
        e.starts_with("data.csv:1: y_ns:") && e.contains("missing column"),
        "{e}"
    );
    let e = csv_err("t_us,Y_NS\n0,1\n");
    assert!(e.contains("case-sensitive"), "{e}");
    let e = csv_err("t_us,y_ns\n0,1\n1,abc\n");
    assert!(
        e.starts_with("data.csv:3: y_ns:") && e.contains("not a number"),
        "{e}"
    );
    let e = csv_err("t_us,y_ns\n0,1\n\n# c\n2,NaN\n");
    assert!(
        e.starts_with("data.csv:5: y_ns:") && e.contains("finite"),
        "{e}"
    );
    let e = csv_err("t_us,y_ns\ninf,1\n");
    assert!(
        e.starts_with("data.csv:2: t_us:") && e.contains("finite"),
        "{e}"
    );
    let e = csv_err("t_us,y_ns\n,1\n");
    assert!(
        e.starts_with("data.csv:2: t_us:") && e.contains("empty"),
        "{e}"
    );
    let e = csv_err("y_ns,note,t_us\n1,2,3\n1,2\n");
    assert!(
        e.starts_with("data.csv:3: t_us:") && e.contains("fields"),
        "{e}"
    );
    let e = csv_err("t_us,y_ns\n");
    assert!(e.starts_with("data.csv:1: rows:"), "{e}");
    let e = csv_err("");
    assert!(e.contains("header"), "{e}");
    let e = csv_err("t_us,y_ns,t_us\n1,2,3\n");
    assert!(e.contains("2 times"), "{e}");

    // Fewer rows than free parameters: an error at fit time naming the rows and parameters.
    let d = Dataset::from_csv_str("t_us,y_ns\n0,1\n1,2\n", "data.csv", &ExpDecay).unwrap();
    let e = fit(&ExpDecay, &d, &FitOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("data.csv") && e.contains("rows") && e.contains("tau_us"),
        "{e}"
    );
    // Relative residuals with a zero measurement: names the line and column.
    let d =
        Dataset::from_csv_str("t_us,y_ns\n0,1\n1,2\n2,0\n3,1\n", "data.csv", &ExpDecay).unwrap();
    let e = fit(&ExpDecay, &d, &FitOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("data.csv:4: y_ns:"), "{e}");
}

#[test]
fn bad_options_are_errors_not_panics() {
    let data = synth(&ExpDecay, &[3.0, 1.7, 0.4], &grid(8, 0.0, 5.0), 0.0, 8);
    for opts in [
        FitOptions {
            starts: 0,
            ..absolute()
        },
        FitOptions {
            max_evals: 0,
            ..absolute()
        },
        FitOptions {
            ftol: -1.0,
            ..absolute()
        },
        FitOptions {
            gtol: f64::NAN,
            ..absolute()
        },
    ] {
        assert!(fit(&ExpDecay, &data, &opts).is_err());
    }
    // A dataset built for another model.
    let other = Dataset::from_rows(&Constant, vec![vec![1.0]; 4], vec![1.0; 4], "c").unwrap();
    assert!(fit(&ExpDecay, &other, &absolute()).is_err());
}

#[test]
fn report_renders_in_every_format() {
    let m = Saturating { analytic: false };
    let data = synth(&m, &[80.0, 25.0, 5.0], &grid(12, 1.0, 200.0), 0.5, 9);
    let r = fit(&m, &data, &absolute()).unwrap();
    let rep = r.to_report();
    use pcpmodel::output::report::Format;
    let t = rep.render(Format::Table);
    assert!(
        t.contains("b_pages")
            && t.contains("measured (ns)")
            && t.contains("termination: converged"),
        "{t}"
    );
    let j: serde_json::Value = serde_json::from_str(&rep.render(Format::Json)).unwrap();
    assert_eq!(j["converged"], serde_json::Value::Bool(true));
    assert_eq!(j["params"][1]["name"], "b_pages");
    assert!(j["correlation"].is_array());
    let c = rep.render(Format::Csv);
    assert!(c.starts_with("parameter,value,unit"), "{c}");
}

#[test]
fn runaway_parameter_is_not_reported_as_converged() {
    // With plenty of evaluations LM meets its tolerances with p near 1e161; still a divergence.
    let data = Dataset::from_rows(&Runaway, grid(5, 0.0, 4.0), vec![0.0; 5], "zeros").unwrap();
    let r = fit(&Runaway, &data, &absolute()).unwrap();
    assert!(!r.converged);
    assert!(r.termination.contains("ran away"), "{}", r.termination);
}

/// Roofline-like kink: y = max(a, b * x), not differentiable where a = b x.
struct Kink;

impl FitModel for Kink {
    fn name(&self) -> &str {
        "kink"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("a", "ns", 5.0).with_bounds(0.0, 1e3),
            ParamSpec::new("b", "ns/page", 1.0).with_bounds(0.0, 1e3),
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "pages")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "ns")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        Ok(p[0].max(p[1] * x[0]))
    }
}

/// y = a * ln(x / b), an error (not a panic) for b <= 0; b is left unbounded on purpose.
struct LogModel;

impl FitModel for LogModel {
    fn name(&self) -> &str {
        "log"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("a", "ns", 1.0),
            ParamSpec::new("b", "pages", 0.5),
        ]
    }
    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("x", "pages")]
    }
    fn target(&self) -> TargetSpec {
        TargetSpec::new("y", "ns")
    }
    fn predict(&self, p: &[f64], x: &[f64]) -> Result<f64> {
        if p[1] <= 0.0 {
            return Err(Error::Unsupported(format!("b = {} must be > 0", p[1])));
        }
        Ok(p[0] * (x[0] / p[1]).ln())
    }
}

#[test]
fn non_smooth_and_partly_undefined_models_still_fit() {
    let xs = grid(16, 1.0, 40.0);
    let r = fit(
        &Kink,
        &synth(&Kink, &[20.0, 2.0], &xs, 0.0, 10),
        &absolute(),
    )
    .unwrap();
    assert!(r.converged, "{}", r.termination);
    assert_relative_eq!(value(&r, "a"), 20.0, max_relative = 1e-6);
    assert_relative_eq!(value(&r, "b"), 2.0, max_relative = 1e-6);

    // Steps into b <= 0 are rejected (the model's error becomes an infeasible point).
    let xs = grid(12, 1.0, 100.0);
    let data = synth(&LogModel, &[3.0, 0.02], &xs, 0.0, 11);
    let r = fit(&LogModel, &data, &absolute()).unwrap();
    assert!(r.converged, "{}", r.termination);
    assert_relative_eq!(value(&r, "b"), 0.02, max_relative = 1e-6);
    // Starting where the model is undefined is a report, naming the model's error.
    let opts = FitOptions {
        initial: vec![("b".into(), -1.0)],
        starts: 1,
        ..absolute()
    };
    let r = fit(&LogModel, &data, &opts).unwrap();
    assert!(!r.converged);
    assert!(r.termination.contains("must be > 0"), "{}", r.termination);
}
