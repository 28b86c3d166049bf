//! `pcpmodel validate`: every built-in table, measured vs predicted; or one workload against a
//! CSV (blind rows, and leave-one-out through the generic workload fit).

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::validate::workload::{validate_workload, WorkloadValidateOptions};
use pcpmodel::validate::{threads, validate_thread, Role, TableValidation};
use pcpmodel::Machine;

use super::args::resolve_workload;

/// Arguments of `pcpmodel validate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Without --workload: the seed threads' tables (the `thread` of every built-in workload).
With --workload W: W's thread's tables; with --workload W --data CSV: W against the CSV, whose
columns are knob columns (tasks, high, batch, order, scale_max, free_high_threshold, free_high,
and the kind's own knobs; numeric only) and one target column named like an output of the
prediction (ns_per_op, throughput_per_task, throughput_total, score, ...), as in `fit --help`;
or the sweep `measure pcp --output` writes, read as it is: its pcp_high_pages column is the knob
high, a netperf-udp score (Mbit/s received) the output throughput_mbps, its other columns are
not read. A machine column naming another built-in machine than --machine, a workload column
naming another built-in workload, or a row the workload refuses (more tasks than CPUs) is an
error naming the file, line and column.
Every row is predicted blind from the workload file (role no_fit: nothing fitted to the CSV);
when the workload has quantities with basis \"fitted\" (or --free ones) and the CSV has at least
3 rows, they are fitted to all rows (fitted) and each row is predicted by the fit without it (loo).

Examples:
  pcpmodel validate --workload netperf-udp
  pcpmodel validate --workload my-loop.toml --data sweep.csv --machine host.toml")]
pub struct Args {
    /// Only this seed thread ("000".."004"), or "literature" (published tables beyond the
    /// threads, role literature), computed alone.
    #[arg(long, conflicts_with = "workload")]
    pub thread: Option<String>,
    /// Only this workload (built-in name, alias or TOML file): its thread's tables, or with
    /// --data the workload against that CSV.
    #[arg(long, value_name = "NAME|FILE")]
    pub workload: Option<String>,
    /// CSV of measurements to validate --workload against (or give it as the positional
    /// DATA.csv, as `fit` and `compare` take it).
    #[arg(long, value_name = "DATA.csv", requires = "workload", group = "csv")]
    pub data: Option<PathBuf>,
    /// The CSV as a positional argument (the same as --data).
    #[arg(value_name = "DATA.csv", requires = "workload", group = "csv")]
    pub data_pos: Option<PathBuf>,
    /// Machine the CSV's measurements come from (with --data; default the workload's).
    #[arg(long, requires = "csv")]
    pub machine: Option<String>,
    /// Kernel the CSV's measurements come from (with --data; default the workload's
    /// reference_kernel).
    #[arg(long, requires = "csv")]
    pub kernel: Option<String>,
    /// Also fit this workload quantity (dotted field, e.g. op.work.ns) (with --data; repeatable).
    #[arg(long = "free", value_name = "FIELD", requires = "csv")]
    pub free: Vec<String>,
    /// Also run the comparison fits that feed only notes (thread 003's fit of fault cost and
    /// hold to the unpatched case; most of the run time).
    #[arg(long)]
    pub with_comparison_fits: bool,
    /// Also recompute each table with every assumed constant it reads moved by its spread, and
    /// report the row that moves most (a refit per constant: several times the run time).
    #[arg(long)]
    pub sensitivities: bool,
    /// Also say, for literature tables the model misses, what one decisive assumed input would
    /// have to be to match one measured number, and what the other rows then predict: Huang's
    /// kbuild, lmbench and SCTP (the work per page, to match the base contention), Jordan's
    /// page_fault1 (the LRU lock's cycles per page, to match the 16-task speedup). An analysis
    /// for the reader, never applied to a row (seconds of extra work). Needs the literature
    /// tables (no --thread, or --thread literature).
    #[arg(long)]
    pub what_it_would_take: bool,
}

/// One thread's tables, computed alone (not filtered out of all five).
fn one_thread(t: &str, comparison_fits: bool) -> anyhow::Result<Vec<TableValidation>> {
    if t == "literature" {
        let tables = pcpmodel::validate::literature::tables();
        let pb = super::progress_bar(tables.len() as u64, false);
        let mut all = Vec::with_capacity(tables.len());
        for (name, f) in tables {
            pb.set_message(name);
            all.push(f()?);
            pb.inc(1);
        }
        pb.finish_and_clear();
        return Ok(all);
    }
    match validate_thread(t, comparison_fits)? {
        Some(v) => Ok(vec![v]),
        None => anyhow::bail!(
            "--thread {t}: no built-in table for that thread (threads: {})",
            threads()?.join(", ")
        ),
    }
}

/// `--workload W [--data CSV]`.
fn one_workload(args: &Args, name: &str) -> anyhow::Result<Vec<TableValidation>> {
    let w = resolve_workload(name)?;
    let Some(path) = args.data.as_ref().or(args.data_pos.as_ref()) else {
        return match &w.spec.thread {
            Some(t) => one_thread(t, args.with_comparison_fits),
            None => anyhow::bail!(
                "workload {} has no seed thread's table: give its measurements with --data CSV",
                w.spec.name
            ),
        };
    };
    let machine = Machine::resolve(
        args.machine
            .as_deref()
            .unwrap_or(w.spec.default_machine.as_str()),
    )?;
    let mut opts = WorkloadValidateOptions::for_workload(&w)?;
    if let Some(k) = &args.kernel {
        opts.base.kernel = Some(super::args::kernel_flag(k, "--kernel")?);
    }
    opts.free = args.free.clone();
    let label = path.display().to_string();
    let text = pcpmodel::input::read_text(path, &label, pcpmodel::input::MAX_CSV_BYTES)?;
    let pb = super::spinner(format!("validating {}", w.spec.name));
    let v = validate_workload(&w, &machine, &text, &label, &opts);
    pb.finish_and_clear();
    Ok(vec![v?])
}

/// A literature table's RMS relative error over its rows of machine `m` and quantity `q` that
/// nothing was fitted to, whatever their computed role (`seen` or `literature`): how far the
/// model is from the published numbers. None for a seed thread's table.
fn published_rms(v: &TableValidation, m: &str, q: &str) -> Option<f64> {
    if !v.thread.starts_with("literature") {
        return None;
    }
    let e: Vec<f64> = v
        .rows
        .iter()
        .filter(|r| r.machine == m && r.quantity == q)
        .filter(|r| !matches!(r.role, Role::Fitted | Role::Alternative))
        .map(|r| r.rel_error)
        .filter(|x| x.is_finite())
        .collect();
    (!e.is_empty()).then(|| (e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64).sqrt())
}

/// Runs `pcpmodel validate`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let mut tables = match (&args.workload, &args.thread) {
        (Some(w), _) => one_workload(&args, w)?,
        (None, Some(t)) => one_thread(t, args.with_comparison_fits)?,
        (None, None) => {
            // One step per table, literature tables included (they are most of the work).
            let jobs = pcpmodel::validate::table_jobs(args.with_comparison_fits)?;
            let pb = super::progress_bar(jobs.len() as u64, false);
            let mut all = Vec::with_capacity(jobs.len());
            for j in &jobs {
                pb.set_message(j.name.clone());
                all.push(j.run()?);
                pb.inc(1);
            }
            pb.finish_and_clear();
            all
        }
    };
    pcpmodel::validate::with_provenance(&mut tables)?;
    if args.what_it_would_take {
        let Some(huang) = tables.iter_mut().find(|v| v.thread == "literature-huang") else {
            anyhow::bail!(
                "--what-it-would-take analyses the literature tables: run it without --thread and --workload, or with --thread literature"
            );
        };
        let pb = super::spinner(
            "what it would take (Huang's kbuild, lmbench and SCTP, Jordan's page_fault1)"
                .to_string(),
        );
        let n = pcpmodel::validate::literature_huang::cover_what_it_would_take();
        let j = pcpmodel::validate::literature::jordan_what_it_would_take();
        pb.finish_and_clear();
        huang.notes.extend(n?);
        if let Some(jordan) = tables.iter_mut().find(|v| v.thread == "literature-jordan") {
            jordan.notes.extend(j?);
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
        "loo RMS rel (%)",
        "held-out RMS rel (%)",
        "seen RMS rel (%)",
        "no-fit RMS rel (%)",
        "literature RMS rel (%)",
        "published table RMS rel (%)",
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
                pct(v.rms_rel(Role::Literature, Some(m), Some(q))),
                pct(published_rms(v, m, q)),
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
            "assumed_entries": v.assumed_entries,
            "degrees_of_freedom": v.degrees_of_freedom,
            "by_role": by_role,
            "notes": v.notes,
        }));
    }
    notes.push("error = (predicted - measured) / |measured|. Roles: fitted = in the fit; loo = the fit redone without the row; held_out = another condition, no refit, nothing chosen while looking at it; seen = not fitted, but an entry it depends on (depends_on; `pcpmodel assumptions`) was chosen while its table was visible (not a blind test); alternative = a variant of the model shown for comparison; no_fit = derived, nothing fitted; literature = published data beyond the threads".to_string());
    let report = Report {
        json: serde_json::json!({"rows": rows, "tables": table_meta}),
        tables: vec![t, summary],
        notes,
    };
    super::emit(&report, format)
}
