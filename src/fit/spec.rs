//! What a model tells the engine: its parameters, inputs and target, and the [`FitModel`] trait.

use serde::Serialize;

use crate::error::Result;

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
    /// The names of a categorical input's values (empty for a number): the CSV cell holds a
    /// name, and the model reads its position in this list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<String>,
}

impl InputSpec {
    /// A new numeric input.
    pub fn new(name: impl Into<String>, unit: impl Into<String>) -> Self {
        InputSpec {
            name: name.into(),
            unit: unit.into(),
            levels: Vec::new(),
        }
    }

    /// A categorical input whose cells name one of `levels` (the model reads the position).
    pub fn categorical(name: impl Into<String>, levels: &[&str]) -> Self {
        InputSpec {
            name: name.into(),
            unit: format!("one of {}", levels.join(", ")),
            levels: levels.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// The value a cell stands for: a level's position for a categorical input (its name, or
    /// the position itself written as a number), else None (parse it as a number).
    pub fn level_code(&self, cell: &str) -> Option<std::result::Result<f64, String>> {
        if self.levels.is_empty() {
            return None;
        }
        if let Some(i) = self.levels.iter().position(|l| l == cell) {
            return Some(Ok(i as f64));
        }
        Some(match cell.parse::<usize>() {
            Ok(i) if i < self.levels.len() => Ok(i as f64),
            _ => Err(format!(
                "'{}' is not one of {} (or their positions 0..{})",
                super::dataset::echo(cell),
                self.levels.join(", "),
                self.levels.len() - 1
            )),
        })
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
