//! `pcpmodel validate`: every built-in table, measured vs predicted.

use std::process::ExitCode;

use pcpmodel::report::{sig, Format, Report, Table};
use pcpmodel::validate::{validate_all, Role};

/// Arguments of `pcpmodel validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this seed thread ("000".."004").
    #[arg(long)]
    pub thread: Option<String>,
}

/// Runs `pcpmodel validate`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let mut tables = validate_all()?;
    if let Some(t) = &args.thread {
        tables.retain(|v| &v.thread == t);
        if tables.is_empty() {
            anyhow::bail!("no built-in table for thread '{t}' (threads: 000 to 004)");
        }
    }
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
        "held-out RMS rel (%)",
        "max |fitted err| (%)",
        "free parameters",
    ])
    .titled("Per-table summary");
    let mut notes = Vec::new();
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
                pct(v.rms_rel(Role::HeldOut, Some(m), Some(q))),
                pct(max_fit),
                v.free_params.join(", "),
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
    }
    notes.push("error = (predicted - measured) / |measured|; fitted = the point was in the fit, held_out = it was not (leave-one-out or an external check)".to_string());
    let report = Report {
        json: serde_json::Value::Array(rows),
        tables: vec![t, summary],
        notes,
    };
    super::emit(&report, format)
}
