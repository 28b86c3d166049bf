//! [`FitOptions`] and the [`Residual`] scaling.

use serde::Serialize;

use crate::error::{Error, Result};

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

/// Most rows refitted one at a time by the leave-one-out (`FitOptions::loo_max_rows`): 200
/// refits of a 200-row netperf fit take a few seconds; 1000 rows took 52 s and 10 000 over a
/// minute before this bound.
pub const LOO_MAX_ROWS: usize = 200;

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
    /// Most rows for which the leave-one-out refits run (default [`LOO_MAX_ROWS`]): above it
    /// they are skipped with a note, since their cost grows with the square of the rows.
    pub loo_max_rows: usize,
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
            loo_max_rows: LOO_MAX_ROWS,
            fixed_by_user: Vec::new(),
        }
    }
}
