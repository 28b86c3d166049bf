//! Validation of any workload against a CSV of measurements (`validate --workload W --data CSV`):
//! knob columns and one target column (see [`crate::workload::fit`]).
//!
//! - Every row is predicted blind from the workload file as it is (role `no_fit`: nothing is
//!   fitted to this CSV; quantities with basis `fitted` keep the values the file gives, fitted
//!   elsewhere).
//! - When the workload has quantities to fit and the CSV has at least [`MIN_LOO_ROWS`] rows,
//!   [`WorkloadFit`] is fitted to all rows (role `fitted`) and each row is predicted by the fit
//!   redone without it (role `loo`).

use crate::error::Result;
use crate::fit::{fit, FitOptions, FitReport};
use crate::hw::machine::Machine;
use crate::workload::fit::WorkloadFit;
use crate::workload::kind::Knobs;
use crate::workload::registry::Workload;

use super::{Role, TableValidation, ValidationRow};

/// Fewest rows for the leave-one-out refits (two rows left for each refit of one parameter).
pub const MIN_LOO_ROWS: usize = 3;

/// Options of [`validate_workload`].
#[derive(Debug, Clone)]
pub struct WorkloadValidateOptions {
    /// Knobs that are one per run (the kernel); the rows' knob columns are set over them.
    pub base: Knobs,
    /// Further quantities to fit, by dotted field (as `fit --free`).
    pub free: Vec<String>,
    /// Starts of the multi-start fit.
    pub starts: usize,
}

impl WorkloadValidateOptions {
    /// The workload's reference kernel, nothing freed, 4 starts.
    pub fn for_workload(w: &Workload) -> Result<WorkloadValidateOptions> {
        Ok(WorkloadValidateOptions {
            base: Knobs {
                kernel: Some(w.spec.reference_kernel()?),
                ..Knobs::default()
            },
            free: Vec::new(),
            starts: 4,
        })
    }
}

/// Validates `w` on `machine` against the CSV text `csv` (`label` names it in errors and is the
/// rows' source). The table's `thread` is the workload's name.
pub fn validate_workload(
    w: &Workload,
    machine: &Machine,
    csv: &str,
    label: &str,
    opts: &WorkloadValidateOptions,
) -> Result<TableValidation> {
    let model = WorkloadFit::for_csv_blind(w, machine, opts.base.clone(), csv, label, &opts.free)?;
    let fittable = model.has_params();
    let ds = model.dataset(csv, label)?;
    let target = model.target_name().to_string();
    let unit = crate::workload::fit::output_unit(&target);
    let case = |i: usize| -> String {
        let knobs: Vec<String> = ds
            .inputs
            .iter()
            .zip(&ds.x[i])
            .map(|(n, v)| format!("{n}={}", crate::bounds::show(*v)))
            .collect();
        if knobs.is_empty() {
            ds.row_labels[i].clone()
        } else {
            knobs.join(" ")
        }
    };
    let thread = w.spec.name.as_str();
    let mname = machine.name.as_str();
    let file = model.file_values();
    let mut rows = Vec::new();
    let mut notes = vec![format!(
        "workload {} (kind {}) on {mname}, kernel {}, data {label}",
        w.spec.name,
        w.kind.name(),
        opts.base.kernel_or_default()
    )];
    for (i, (x, y)) in ds.x.iter().zip(&ds.y).enumerate() {
        use crate::fit::FitModel;
        let p = model.predict(&file, x)?;
        rows.push(ValidationRow::new(
            thread,
            mname,
            case(i),
            &target,
            *y,
            p,
            unit,
            Role::NoFit,
            "the workload file's values; nothing fitted to this CSV",
        ));
    }
    let mut free_params = Vec::new();
    let mut n_fitted = 0;
    if !fittable {
        notes.push(format!(
            "nothing to fit: no quantity of workload {} has basis \"fitted\" (free one to refit it); only blind rows",
            w.spec.name
        ));
    } else if ds.len() < MIN_LOO_ROWS {
        notes.push(format!(
            "{} row(s): leave-one-out needs at least {MIN_LOO_ROWS}; only blind rows",
            ds.len()
        ));
    } else {
        let rep = fit(
            &model,
            &ds,
            &FitOptions {
                starts: opts.starts,
                loo: true,
                ..FitOptions::default()
            },
        )?;
        free_params = rep.free_params.clone();
        n_fitted = rep.n_free;
        push_fit_rows(&mut rows, &rep, &mut notes, &case, (thread, mname, unit));
    }
    Ok(TableValidation::new(
        thread,
        format!("workload {} vs {label}", w.spec.name),
        rows,
        free_params,
        (n_fitted, &[target.as_str()]),
        notes,
    ))
}

/// The fitted and leave-one-out rows of a fit.
fn push_fit_rows(
    rows: &mut Vec<ValidationRow>,
    rep: &FitReport,
    notes: &mut Vec<String>,
    case: &dyn Fn(usize) -> String,
    (thread, machine, unit): (&str, &str, &str),
) {
    let target = rep.target.name.as_str();
    if !rep.converged {
        notes.push(format!(
            "the fit did not converge ({}): no fitted or leave-one-out rows",
            rep.termination
        ));
        return;
    }
    let fitted: Vec<String> = rep
        .params
        .iter()
        .filter(|p| !p.fixed)
        .map(|p| {
            format!(
                "{} = {} {}",
                p.name,
                crate::output::report::sig(p.value, 4),
                p.unit
            )
        })
        .collect();
    notes.push(format!("fit to every row: {}", fitted.join(", ")));
    let row = |i: usize, measured: f64, predicted: f64, role: Role, how: &str| {
        ValidationRow::new(
            thread,
            machine,
            case(i),
            target,
            measured,
            predicted,
            unit,
            role,
            how,
        )
    };
    for r in &rep.residuals {
        rows.push(row(
            r.row - 1,
            r.measured,
            r.predicted,
            Role::Fitted,
            "fitted to every row of this CSV",
        ));
    }
    for l in rep.loo.iter().flatten() {
        if !l.converged {
            notes.push(format!(
                "leave-one-out: the refit without row {} did not converge; row left out",
                l.row
            ));
            continue;
        }
        rows.push(row(
            l.row - 1,
            l.measured,
            l.predicted_held_out,
            Role::Loo,
            "the fit redone without this row",
        ));
    }
    notes.extend(rep.notes.iter().map(|n| format!("fit: {n}")));
}
