//! Validation of the model, the options and the data against each other, and the validated problem.

use super::dataset::needed_columns;
use super::problem::Setup;
use super::transform::Transform;
use super::{Dataset, FitModel, FitOptions, ParamSpec, Residual};
use crate::error::{Error, Result};

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
                    "{} is not a finite value within the bounds [{}, {}] {}",
                    crate::bounds::show(*v),
                    crate::bounds::show(s.lower),
                    crate::bounds::show(s.upper),
                    s.unit
                ),
            ));
        }
        values[j] = *v;
        mark[j] = true;
    }
    Ok(())
}
/// The validated problem: parameter values, which are free, residual scale.
pub(super) struct Prepared {
    pub(super) specs: Vec<ParamSpec>,
    /// Default or fixed value of every parameter (free ones are overwritten by the fit).
    pub(super) base: Vec<f64>,
    pub(super) is_fixed: Vec<bool>,
    /// Start 0 of every parameter (defaults or `opts.initial`).
    pub(super) start0: Vec<f64>,
    pub(super) free: Vec<usize>,
    pub(super) transforms: Vec<Transform>,
    /// Residual divisor per row: 1 or |y|.
    pub(super) scale: Vec<f64>,
}

impl Prepared {
    /// A [`Setup`] over the rows `rows` of `data`.
    pub(super) fn setup<'a>(
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
pub(super) fn prepare(model: &dyn FitModel, data: &Dataset, opts: &FitOptions) -> Result<Prepared> {
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
    data.check_model_accepts(model, &start0)?;
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
