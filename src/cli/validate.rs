//! `pcpmodel validate`: every built-in table, measured vs predicted.

use std::process::ExitCode;

use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::validate::{validate_thread, Role, THREADS};

/// Arguments of `pcpmodel validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this seed thread ("000".."004"), computed alone.
    #[arg(long)]
    pub thread: Option<String>,
    /// Also run the comparison fits that feed only notes (thread 003's fit of fault cost and
    /// hold to the unpatched case; most of the run time).
    #[arg(long)]
    pub with_comparison_fits: bool,
    /// Also recompute each table with every assumed constant it reads moved by its spread, and
    /// report the row that moves most (a refit per constant: several times the run time).
    #[arg(long)]
    pub sensitivities: bool,
}

/// Runs `pcpmodel validate`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let tables = match &args.thread {
        // One thread is computed alone, not filtered out of all five.
        Some(t) => match validate_thread(t, args.with_comparison_fits)? {
            Some(v) => vec![v],
            None => anyhow::bail!(
                "--thread {t}: no built-in table for that thread (threads: {})",
                THREADS.join(", ")
            ),
        },
        None => {
            let pb = super::progress_bar(THREADS.len() as u64, false);
            let mut all = Vec::new();
            for t in THREADS {
                pb.set_message(format!("thread {t}"));
                all.extend(validate_thread(t, args.with_comparison_fits)?);
                pb.inc(1);
            }
            pb.finish_and_clear();
            all
        }
    };
    let mut rows = Vec::new();
    let mut t = Table::new([
        "thread",
        "machine",
        "case",
        "quantity",
        "measured",
        "predicted",
        "unit",
        "error (%)",
        "role",
    ]);
    let mut summary = Table::new([
        "thread",
        "machine",
        "quantity",
        "rows",
        "fitted RMS rel (%)",
        "loo RMS rel (%)",
        "held-out RMS rel (%)",
        "seen RMS rel (%)",
        "no-fit RMS rel (%)",
        "max |fitted err| (%)",
        "free parameters",
        "dof",
    ])
    .titled("Per-table summary");
    let mut notes = Vec::new();
    let mut table_meta = Vec::new();
    for v in &tables {
        let mut groups: Vec<(&str, &str)> = Vec::new();
        for r in &v.rows {
            let g = (r.machine.as_str(), r.quantity.as_str());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for (m, q) in groups {
            let pct = |x: Option<f64>| x.map_or("-".to_string(), |e| format!("{:.2}", 100.0 * e));
            let sel = || v.rows.iter().filter(|r| r.machine == m && r.quantity == q);
            let max_fit = sel()
                .filter(|r| r.role == Role::Fitted)
                .map(|r| r.rel_error.abs())
                .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |a| a.max(e))));
            summary.push([
                v.thread.clone(),
                m.to_string(),
                q.to_string(),
                sel().count().to_string(),
                pct(v.rms_rel(Role::Fitted, Some(m), Some(q))),
                pct(v.rms_rel(Role::Loo, Some(m), Some(q))),
                pct(v.rms_rel(Role::HeldOut, Some(m), Some(q))),
                pct(v.rms_rel(Role::Seen, Some(m), Some(q))),
                pct(v.rms_rel(Role::NoFit, Some(m), Some(q))),
                pct(max_fit),
                v.free_params.join(", "),
                v.degrees_of_freedom.to_string(),
            ]);
        }
        for r in &v.rows {
            t.push([
                r.thread.clone(),
                r.machine.clone(),
                r.case.clone(),
                r.quantity.clone(),
                sig(r.measured, 6),
                sig(r.predicted, 6),
                r.unit.clone(),
                format!("{:+.2}", 100.0 * r.rel_error),
                r.role.as_str().to_string(),
            ]);
            rows.push(serde_json::to_value(r)?);
        }
        for n in &v.notes {
            notes.push(format!("[{}] {n}", v.thread));
        }
        for a in &v.assumed_constants {
            notes.push(format!("[{}] assumed: {a}", v.thread));
        }
        let by_role: serde_json::Map<String, serde_json::Value> = Role::ALL
            .iter()
            .map(|r| {
                let n = v.rows.iter().filter(|x| x.role == *r).count();
                (
                    r.as_str().to_string(),
                    serde_json::json!({"rows": n, "rms_rel": v.rms_rel(*r, None, None)}),
                )
            })
            .collect();
        let sens = if args.sensitivities {
            let s = pcpmodel::validate::sensitivities(v)?;
            for n in pcpmodel::validate::sensitivity_notes(&v.thread, &s) {
                notes.push(format!("[{}] {n}", v.thread));
            }
            Some(s)
        } else {
            None
        };
        table_meta.push(serde_json::json!({
            "sensitivities": sens,
            "thread": v.thread,
            "title": v.title,
            "free_params": v.free_params,
            "assumed_constants": v.assumed_constants,
            "degrees_of_freedom": v.degrees_of_freedom,
            "by_role": by_role,
            "notes": v.notes,
        }));
    }
    notes.push("error = (predicted - measured) / |measured|. Roles: fitted = in the fit; loo = the fit redone without the row; held_out = another condition, no refit, nothing chosen while looking at it; seen = not fitted, but a constant or mechanism was chosen while it was visible (not a blind test); alternative = a variant of the model shown for comparison; no_fit = derived, nothing fitted; literature = published data beyond the threads".to_string());
    let report = Report {
        json: serde_json::json!({"rows": rows, "tables": table_meta}),
        tables: vec![t, summary],
        notes,
    };
    super::emit(&report, format)
}
