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
use crate::fit::dataset::{csv_reader, header_line};
use crate::fit::{
    echo, fit, CsvColumns, Dataset, FitOptions, FitReport, MEASURE_PCP_WORKLOADS, SWEEP_COLUMNS,
};
use crate::hw::machine::Machine;
use crate::workload::fit::WorkloadFit;
use crate::workload::kind::Knobs;
use crate::workload::registry::{Origin, Workload};

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
    // The sweep `measure pcp --output` writes gives pcp->high as `pcp_high_pages` (the `high`
    // knob) beside columns of its spread: the generic fit reads it through a header with those
    // names (same positions, so an error still names the file's column).
    let sweep = sweep_header(csv);
    let model = WorkloadFit::for_csv_blind(
        w,
        machine,
        opts.base.clone(),
        sweep.as_ref().map_or(csv, |s| s.header.as_str()),
        label,
        &opts.free,
    )?;
    let fittable = model.has_params();
    let mut ds = generic_dataset(&model, csv, label, sweep.as_ref())?;
    // A table of several machines is validated for the given machine's rows.
    let selected = ds.select_machine(&machine.name);
    let machine_note = ds.check_machine(&machine.name, |m| Machine::builtin(m).is_ok())?;
    let machine_note = match (selected, machine_note) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    let workload_note = check_workload_column(&ds, w)?;
    // A row the workload refuses (8192 tasks on 48 CPUs) names its line and column.
    ds.check_model_accepts(&model, &model.file_values())?;
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
    if let Some(s) = &sweep {
        notes.push(format!(
            "a `measure pcp` sweep: its pcp_high_pages column is the knob high{}",
            if s.score_is_mbps {
                ", its score (netperf-udp: Mbit/s received) the output throughput_mbps"
            } else {
                ""
            }
        ));
    }
    if !ds.columns_not_read.is_empty() {
        notes.push(format!(
            "columns not read: {}",
            ds.columns_not_read.join(", ")
        ));
    }
    notes.extend(machine_note);
    notes.extend(workload_note);
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
    } else if let dead @ [_, ..] =
        crate::fit::parameters_without_effect(&model, &ds, &FitOptions::default())?.as_slice()
    {
        notes.push(format!(
            "nothing to fit: {} move(s) no prediction of these rows (kind {} does not read the file's value here: e.g. basis \"fitted\" work takes the kind's own calibration); only blind rows",
            dead.join(", "),
            w.kind.name()
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

/// The header the generic fit reads for a `measure pcp` sweep (see [`sweep_header`]).
#[derive(Debug, Clone)]
pub struct SweepHeader {
    /// The lines up to the header, with the header's names replaced: give it to
    /// [`WorkloadFit::for_csv`] in place of the CSV.
    pub header: String,
    /// Whether `score` is read as `throughput_mbps` (every row of workload netperf-udp, whose
    /// score is Mbit/s received by its one pair).
    pub score_is_mbps: bool,
}

/// The rows of `csv` for the generic fit `model` (built from `sweep`'s header for a `measure
/// pcp` sweep), every value checked against its column's range.
pub fn generic_dataset(
    model: &WorkloadFit,
    csv: &str,
    label: &str,
    sweep: Option<&SweepHeader>,
) -> Result<Dataset> {
    let (allowed, aliases): (&[&str], &[(&str, &str)]) = match sweep {
        Some(s) if s.score_is_mbps => (
            SWEEP_COLUMNS,
            &[("high", "pcp_high_pages"), ("throughput_mbps", "score")],
        ),
        Some(_) => (SWEEP_COLUMNS, &[("high", "pcp_high_pages")]),
        None => (&[], &[]),
    };
    let ds = Dataset::from_csv_str_with(csv, label, model, CsvColumns { allowed, aliases })?;
    let cols = model.columns();
    let refs: Vec<(&str, crate::bounds::Range)> =
        cols.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    ds.check_ranges(&refs)?;
    Ok(ds)
}

/// For the CSV `measure pcp --output` writes (a `pcp_high_pages` column and no `high`), the
/// text the generic fit reads the header from: the same lines before the header (so errors
/// name the file's line), `pcp_high_pages` named `high`, `score` named `throughput_mbps` when
/// every row is of workload netperf-udp (Mbit/s received), and the sweep's other columns
/// ([`SWEEP_COLUMNS`]) named `note`, at their positions. `None` for any other CSV.
pub fn sweep_header(csv: &str) -> Option<SweepHeader> {
    let text = csv.strip_prefix('\u{feff}').unwrap_or(csv);
    let line = header_line(text)?;
    let mut rdr = csv_reader(text);
    let header: Vec<String> = rdr.headers().ok()?.iter().map(str::to_string).collect();
    if !header.iter().any(|h| h == "pcp_high_pages") || header.iter().any(|h| h == "high") {
        return None;
    }
    let score_is_mbps = header
        .iter()
        .position(|h| h == "workload")
        .is_some_and(|wi| {
            let mut n = 0;
            let all = rdr.records().all(|r| {
                r.ok().is_some_and(|r| {
                    n += 1;
                    r.get(wi) == Some("netperf-udp")
                })
            });
            all && n > 0
        })
        && !header.iter().any(|h| h == "throughput_mbps");
    let renamed: Vec<&str> = header
        .iter()
        .map(|h| match h.as_str() {
            "pcp_high_pages" => "high",
            "score" if score_is_mbps => "throughput_mbps",
            h if SWEEP_COLUMNS.contains(&h) => "note",
            h => h,
        })
        .collect();
    // (A name needing quotes is refused by the fit either way: write it as it was.)
    let cells: Vec<String> = renamed
        .iter()
        .map(|c| {
            if c.contains([',', '"', '\n']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.to_string()
            }
        })
        .collect();
    Some(SweepHeader {
        header: format!("{}{}\n", "#\n".repeat(line - 1), cells.join(",")),
        score_is_mbps,
    })
}

/// Checks the CSV's `workload` column (if any) against the workload validated: a row of
/// another built-in workload measured by `measure pcp` is an error naming its line when `w` is
/// built in; for a workload file (which may model the same benchmark) a note says what the
/// column names.
fn check_workload_column(ds: &Dataset, w: &Workload) -> Result<Option<String>> {
    let mut names = vec![w.spec.name.as_str()];
    names.extend(w.spec.aliases.iter().map(String::as_str));
    names.extend(
        MEASURE_PCP_WORKLOADS
            .iter()
            .filter(|(_, b)| *b == w.spec.name)
            .map(|(m, _)| *m),
    );
    match &w.origin {
        Origin::Builtin => {
            ds.check_workload(&format!("workload {}", w.spec.name), &names)?;
            Ok(None)
        }
        Origin::File(_) => {
            let Some(cells) = ds.tag("workload") else {
                return Ok(None);
            };
            let mut other: Vec<&str> = cells
                .iter()
                .map(String::as_str)
                .filter(|c| !c.is_empty() && !names.contains(c))
                .collect();
            other.sort_unstable();
            other.dedup();
            Ok((!other.is_empty()).then(|| {
                format!(
                    "the workload column names {}; the rows are validated as workload {} (a file)",
                    other
                        .iter()
                        .map(|c| format!("'{}'", echo(c)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    w.spec.name
                )
            }))
        }
    }
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
        .map(|p| format!("{} = {} {}", p.name, crate::report::sig(p.value, 4), p.unit))
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
