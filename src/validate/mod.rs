//! Validation against every built-in measurement table: measured vs predicted, relative error, and
//! whether each prediction came from a fit that saw the point (`fitted`) or not (`held_out`).
//!
//! One file per seed thread (`t004.rs`, ...). Each returns a [`TableValidation`]: its rows, the fit
//! reports behind them and notes that say, in words, where and why the model disagrees with a
//! measurement. Nothing here is tuned to make a row pass: a row that is off stays off and is
//! reported.

use serde::Serialize;

use crate::error::Result;

pub mod t000;
pub mod t001;
pub mod t002;
pub mod t003;
pub mod t004;

/// Whether a prediction was fitted to the point it is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The point was in the data the parameters were fitted to.
    Fitted,
    /// The point was not (leave-one-out, predicted from another setting, or an external check).
    HeldOut,
}

impl Role {
    /// `fitted` / `held_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Fitted => "fitted",
            Role::HeldOut => "held_out",
        }
    }
}

/// One comparison of a measured value with the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationRow {
    /// Seed thread ("000".."004") or the user's file name.
    pub thread: String,
    /// Machine name.
    pub machine: String,
    /// Which measurement, e.g. `high=640`.
    pub case: String,
    /// What is compared, e.g. `score`, `avg_ns`.
    pub quantity: String,
    /// Measured value.
    pub measured: f64,
    /// Model value.
    pub predicted: f64,
    /// Unit of both.
    pub unit: String,
    /// `(predicted − measured) / |measured|`.
    pub rel_error: f64,
    /// Fitted or held out.
    pub role: Role,
    /// How the prediction was made (which fit, what was held out).
    pub how: String,
}

impl ValidationRow {
    /// A row; the relative error is computed here.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        thread: &str,
        machine: &str,
        case: impl Into<String>,
        quantity: &str,
        measured: f64,
        predicted: f64,
        unit: &str,
        role: Role,
        how: impl Into<String>,
    ) -> Self {
        ValidationRow {
            thread: thread.to_string(),
            machine: machine.to_string(),
            case: case.into(),
            quantity: quantity.to_string(),
            measured,
            predicted,
            unit: unit.to_string(),
            rel_error: if measured != 0.0 {
                (predicted - measured) / measured.abs()
            } else {
                f64::NAN
            },
            role,
            how: how.into(),
        }
    }
}

/// The validation of one thread's tables.
#[derive(Debug, Clone, Serialize)]
pub struct TableValidation {
    /// Seed thread.
    pub thread: String,
    /// What was measured, in a few words.
    pub title: String,
    /// Rows.
    pub rows: Vec<ValidationRow>,
    /// Number of free parameters per fit, and what they are.
    pub free_params: Vec<String>,
    /// Notes for people: disagreements and why we think they happen.
    pub notes: Vec<String>,
}

impl TableValidation {
    /// Root-mean-square relative error of the rows with `role`, optionally of one machine and one
    /// quantity (`None` if no rows).
    pub fn rms_rel(
        &self,
        role: Role,
        machine: Option<&str>,
        quantity: Option<&str>,
    ) -> Option<f64> {
        let v: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| {
                r.role == role
                    && machine.is_none_or(|m| r.machine == m)
                    && quantity.is_none_or(|q| r.quantity == q)
            })
            .map(|r| r.rel_error)
            .filter(|e| e.is_finite())
            .collect();
        if v.is_empty() {
            None
        } else {
            Some((v.iter().map(|e| e * e).sum::<f64>() / v.len() as f64).sqrt())
        }
    }
}

/// Validates every built-in table.
pub fn validate_all() -> Result<Vec<TableValidation>> {
    Ok(vec![
        t000::validate()?,
        t001::validate()?,
        t002::validate()?,
        t003::validate()?,
        t004::validate()?,
    ])
}
