//! `pcpmodel fit`: fit a workload's parameters to a CSV of measurements.
//!
//! A workload whose kind has its own fit for its thread's table (`Kind::native_fit`) uses it;
//! any other workload, or `--generic`, goes through [`pcpmodel::workload::fit::WorkloadFit`]:
//! the quantities with basis `fitted` (and `--free FIELD`) fitted over the CSV's knob columns.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::bounds::Range;
use pcpmodel::fit::{fit, CsvColumns, Dataset, FitModel, Residual, SWEEP_COLUMNS};
use pcpmodel::output::report::Format;
use pcpmodel::workload::fit::WorkloadFit;
use pcpmodel::workload::registry::Workload;
use pcpmodel::workload::Knobs;
use pcpmodel::Machine;

use super::args::{resolve_workload, workloads_help};

/// `fit --help`'s text after the options, with the built-in workloads listed.
fn after_help() -> String {
    format!(
        "\
Workloads (--workload NAME|ALIAS|FILE; `pcpmodel workloads` lists them with their kinds):
{}

The fit used: the workload's own fit of its thread's table where its kind has one (the CSV
columns of the thread: `pcpmodel workloads --kinds`), else the generic workload fit, which any
workload file gets (--generic forces it):
  parameters  the workload file's quantities with basis \"fitted\", plus --free FIELD (a dotted
              field: op.work.ns, op.think_ns, params.probe_ns, ...), each bounded by its
              physical range (times 0..=1e7 ns, cycles 0..=1e8, bytes 0..=1 MiB, pages
              0..=2^40, shares 0..=1; src/workload/fit.rs)
  inputs      the CSV's knob columns, numeric only: tasks, high, batch, order, scale_max,
              free_high_threshold, free_high (0/1), and the kind's own knobs (`-` written `_`).
              The kernel is one per run (--kernel, default the workload's reference_kernel);
              the NUMA span and the placement are the workload file's.
  target      the one column named like an output of the prediction: ns_per_op,
              throughput_per_task, throughput_total, or a kind output (score, ...)
              A `measure pcp --output` sweep is read as it is: pcp_high_pages is the knob high,
              a netperf-udp score (Mbit/s received) the output throughput_mbps.
Columns label, name, machine and note are not read (a thread's own fit also accepts the other
columns of its thread's tables, e.g. high_label, annotation, and a `measure pcp` sweep's);
any other column, or a row with more fields than the header, is an error naming
file:line:column. A machine column must name one machine: rows of another built-in machine
than --machine are an error naming the line (another name, such as `host`, gets a note); a
workload column must name the workload fitted. A histogram (lo_ns, hi_ns, count) must be one
histogram as `import` writes it: ascending buckets, each starting at the previous end + 1 (no
gap, overlap or duplicate), not every count 0.
Leave-one-out refits one row at a time up to 200 rows (LOO_MAX_ROWS); a larger CSV is fitted
without them, with a note. A fit whose parameters the data do not determine (as many rows as
free parameters, a singular Jacobian such as every row at the same inputs) gives no intervals
and a warning on stderr and in the JSON `warnings`. --fix and --free of the same parameter is
an error.

Lines starting with # are comments. Parameters a thread's fit holds at their documented
physical values stay held unless freed with --free; --fix holds any parameter at a value.
Every column's values must lie in its physical range (e.g. pcp_high_pages 0..=2^31-1,
memcg_charge_batch_pages 1..=65536, a measured rate 0..=1e15; see src/bounds.rs): a value outside
is an error naming the file, line and column. A converged fit whose residuals exceed the spread
of the data gets a warning on stderr.

Exit status: 0 converged; 1 the fit did not converge (the report says why); 2 bad input.

Examples:
  pcpmodel data 004_netperf_pcp_high --format csv | grep -e pcp_high -e icelake > icx.csv
  pcpmodel fit --workload netperf-udp icx.csv --machine icelake-server
  pcpmodel fit --workload netperf-pcp-high --data my.csv --machine host.toml --free mlp_lines
  pcpmodel measure pcp --workload netperf-udp --output sweep.csv
  pcpmodel fit --workload my-loop.toml sweep.csv --generic --free op.work.ns --machine host.toml",
        workloads_help()
    )
}

/// Arguments of `pcpmodel fit`.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// Workload to fit: a built-in name or alias (`--model` is the older spelling: the thread
    /// models netperf-pcp-high, memcg-netperf, page-bench, page-fault1, zone-lock), or a path to a
    /// workload TOML file.
    #[arg(long, alias = "model", value_name = "NAME|FILE")]
    pub workload: String,
    /// CSV file with the measurements (or give it with --data).
    #[arg(value_name = "DATA.csv", required_unless_present = "data_flag")]
    pub data: Option<PathBuf>,
    /// CSV file with the measurements.
    #[arg(long = "data", value_name = "DATA.csv", conflicts_with = "data")]
    pub data_flag: Option<PathBuf>,
    /// Machine the measurements come from (built-in name or TOML file; default the workload's).
    #[arg(long)]
    pub machine: Option<String>,
    /// Kernel the measurements come from (generic fit only; default the workload's
    /// reference_kernel).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Use the generic workload fit even where the kind has its own fit.
    #[arg(long)]
    pub generic: bool,
    /// Hold a parameter at a value: NAME=VALUE (repeatable).
    #[arg(long = "fix", value_name = "NAME=VALUE")]
    pub fix: Vec<String>,
    /// Free a parameter (a thread fit's physical parameter, or a workload quantity by dotted
    /// field for the generic fit, e.g. op.work.ns) (repeatable).
    #[arg(long = "free", value_name = "NAME")]
    pub free: Vec<String>,
    /// Residuals: relative (each row weighs by its relative error) or absolute.
    #[arg(long, default_value = "relative")]
    pub residual: String,
    /// Number of starts of the multi-start (1..=256).
    #[arg(long, default_value_t = 4, value_parser = super::args::bounded::<u64>(&pcpmodel::bounds::FIT_STARTS))]
    pub starts: u64,
    /// Skip the leave-one-out refits.
    #[arg(long, conflicts_with = "loo")]
    pub no_loo: bool,
    /// Run the leave-one-out refits even for a model that skips them by default (zone-lock:
    /// its rows are buckets of one histogram, and each refit takes about 0.4 s).
    #[arg(long)]
    pub loo: bool,
}

/// A kind's own fit of its thread's table.
struct NativeFit {
    model: Box<dyn FitModel>,
    columns: &'static [(&'static str, Range)],
    default_fixed: &'static [&'static str],
}

/// The kind's own fit of the workload's thread table, if it has one.
fn native_fit(w: &Workload, machine: &Machine) -> anyhow::Result<Option<NativeFit>> {
    Ok(w.kind.native_fit(&w.spec, machine)?.map(|model| NativeFit {
        model,
        columns: w.kind.native_columns(),
        default_fixed: w.kind.native_default_fixed(),
    }))
}

/// The columns a kind's own fit accepts without reading them: those of its thread's built-in
/// tables that hold the fit's columns (`data NAME --format csv` output fits as it is: e.g.
/// thread 004's `high_label`, `annotation`), and for a fit of `pcp_high_pages` and `score` the
/// further columns `measure pcp --output` writes ([`SWEEP_COLUMNS`]).
fn native_extra_columns(w: &Workload, model: &dyn FitModel) -> Vec<String> {
    let needed: Vec<String> = model
        .inputs()
        .into_iter()
        .map(|i| i.name)
        .chain(std::iter::once(model.target().name))
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut add = |c: &str| {
        if !needed.iter().any(|n| n == c) && !out.iter().any(|o| o == c) {
            out.push(c.to_string());
        }
    };
    if let Some(thread) = &w.spec.thread {
        for t in pcpmodel::data::catalogue() {
            if t.thread != thread.as_str() {
                continue;
            }
            let Ok(cols) = t.columns() else { continue };
            if needed.iter().all(|n| cols.contains(n)) {
                for c in &cols {
                    add(c);
                }
            }
        }
    }
    if needed.iter().all(|n| n == "pcp_high_pages" || n == "score") {
        for c in SWEEP_COLUMNS {
            add(c);
        }
    }
    out
}

/// The names a `workload` column may give the rows of a fit of `w` (its name, its aliases and
/// what the user typed).
pub(crate) fn workload_names<'a>(w: &'a Workload, typed: &'a str) -> Vec<&'a str> {
    let mut v = vec![w.spec.name.as_str(), typed];
    v.extend(w.spec.aliases.iter().map(String::as_str));
    v.extend(
        pcpmodel::fit::MEASURE_PCP_WORKLOADS
            .iter()
            .filter(|(_, b)| *b == w.spec.name)
            .map(|(m, _)| *m),
    );
    v
}

/// What a fit says when neither the CSV (a `machine` column) nor `--machine` names the machine:
/// which machine it used and why, and, when the file's name mentions another built-in machine,
/// that one (the latencies and capacities of the wrong machine would be fitted around).
fn unnamed_machine_note(workload: &str, used: &str, path: &std::path::Path) -> String {
    let mut note = format!(
        "the CSV has no machine column and --machine was not given: fitted on {used}, the default machine of workload {workload}"
    );
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut named: Vec<&str> = Machine::builtin_names()
        .into_iter()
        .filter(|m| *m != used && file.contains(m))
        .collect();
    // The longest name that matches (a name may contain another).
    named.sort_by_key(|m| std::cmp::Reverse(m.len()));
    match named.first() {
        Some(m) => note.push_str(&format!(
            "; the file's name mentions {m}: if these measurements come from it, add --machine {m}"
        )),
        None => note
            .push_str("; give --machine NAME|FILE if these measurements come from another machine"),
    }
    note
}

/// Runs `pcpmodel fit`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    pcpmodel::bounds::FIT_STARTS
        .check_flag("--starts", args.starts as f64)
        .map_err(anyhow::Error::msg)?;
    let w = resolve_workload(&args.workload)?;
    let machine = Machine::resolve(
        args.machine
            .as_deref()
            .unwrap_or(w.spec.default_machine.as_str()),
    )?;
    let path = args
        .data
        .clone()
        .or_else(|| args.data_flag.clone())
        .ok_or_else(|| anyhow::anyhow!("give the CSV of measurements (DATA.csv or --data)"))?;
    let native = if args.generic {
        None
    } else {
        native_fit(&w, &machine)?
    };
    let (model, mut ds, default_fixed, how): (Box<dyn FitModel>, Dataset, &[&str], &str) =
        match native {
            Some(n) => {
                if args.kernel.is_some() {
                    anyhow::bail!(
                        "--kernel applies to the generic fit; the thread fit of {} models its thread's kernel (add --generic)",
                        w.spec.name
                    );
                }
                let label = path.display().to_string();
                let text =
                    pcpmodel::input::read_text(&path, &label, pcpmodel::input::MAX_CSV_BYTES)?;
                let extra = native_extra_columns(&w, n.model.as_ref());
                let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                let ds = Dataset::from_csv_str_with(
                    &text,
                    &label,
                    n.model.as_ref(),
                    CsvColumns {
                        allowed: &extra,
                        // The knob's own name for pcp->high, as the generic fit reads it.
                        aliases: &[("pcp_high_pages", "high")],
                    },
                )?;
                ds.check_ranges(n.columns)?;
                ds.check_histogram()?;
                (n.model, ds, n.default_fixed, "the thread's own fit")
            }
            None => {
                let kernel = match &args.kernel {
                    Some(k) => super::args::kernel_flag(k, "--kernel")?,
                    None => w.spec.reference_kernel()?,
                };
                let label = path.display().to_string();
                let text =
                    pcpmodel::input::read_text(&path, &label, pcpmodel::input::MAX_CSV_BYTES)?;
                let base = Knobs {
                    kernel: Some(kernel),
                    ..Knobs::default()
                };
                // A `measure pcp` sweep is read as validate reads it (pcp_high_pages is the knob
                // high; a netperf-udp score is throughput_mbps).
                let sweep = pcpmodel::validate::workload::sweep_header(&text);
                let m = WorkloadFit::for_csv(
                    &w,
                    &machine,
                    base,
                    sweep.as_ref().map_or(text.as_str(), |s| s.header.as_str()),
                    &label,
                    &args.free,
                )?;
                let ds = pcpmodel::validate::workload::generic_dataset(
                    &m,
                    &text,
                    &label,
                    sweep.as_ref(),
                )?;
                (Box::new(m), ds, &[], "the generic workload fit")
            }
        };
    // A table of several machines is fitted for --machine (default: the workload's machine).
    let selected = ds.select_machine(&machine.name);
    let machine_note = ds.check_machine(&machine.name, |m| Machine::builtin(m).is_ok())?;
    let machine_note = match (selected, machine_note) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    let machine_note = match (&args.machine, ds.tag("machine")) {
        (None, None) => {
            let unnamed = unnamed_machine_note(&w.spec.name, &machine.name, &path);
            Some(machine_note.map_or(unnamed.clone(), |n| format!("{n}; {unnamed}")))
        }
        _ => machine_note,
    };
    ds.check_workload(
        &format!("--workload {}", args.workload),
        &workload_names(&w, &args.workload),
    )?;
    let specs = model.params();
    let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    let check = |n: &str| -> anyhow::Result<()> {
        if names.contains(&n) {
            Ok(())
        } else {
            anyhow::bail!(
                "workload {} has no parameter '{n}' (parameters: {})",
                w.spec.name,
                names.join(", ")
            )
        }
    };
    for f in &args.free {
        check(f)?;
    }
    let mut fixed: Vec<(String, f64)> = default_fixed
        .iter()
        .filter(|n| !args.free.iter().any(|f| f == *n))
        .filter_map(|n| specs.iter().find(|p| p.name == *n))
        .map(|p| (p.name.clone(), p.default))
        .collect();
    for f in &args.fix {
        let (n, v) = f
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--fix {f}: expected NAME=VALUE"))?;
        check(n.trim())?;
        if args.free.iter().any(|f| f == n.trim()) {
            anyhow::bail!(
                "--fix {f} and --free {}: a parameter is either held at a value or fitted, not both",
                n.trim()
            );
        }
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("--fix {f}: '{v}' is not a number"))?;
        if !v.is_finite() {
            anyhow::bail!("--fix {f}: the value must be finite");
        }
        fixed.retain(|(x, _)| x != n.trim());
        fixed.push((n.trim().to_string(), v));
    }
    let residual = match args.residual.as_str() {
        "relative" => Residual::Relative,
        "absolute" => Residual::Absolute,
        r => anyhow::bail!("--residual {r}: use relative or absolute"),
    };
    let fixed_by_user = args
        .fix
        .iter()
        .filter_map(|f| f.split_once('=').map(|(n, _)| n.trim().to_string()))
        .collect();
    let opts = pcpmodel::fit::FitOptions {
        fixed,
        fixed_by_user,
        residual,
        starts: args.starts as usize,
        loo: !args.no_loo && (args.loo || model.loo_skipped_by_default().is_none()),
        ..Default::default()
    };
    let pb = super::spinner(format!("fitting {} ({} starts)", w.spec.name, args.starts));
    let rep = fit(model.as_ref(), &ds, &opts);
    pb.finish_and_clear();
    let rep = rep?;
    let mut report = rep.to_report();
    report.notes.insert(
        0,
        format!(
            "workload {} (kind {}) on machine {} by {how} ({}); data {}",
            w.spec.name,
            w.kind.name(),
            machine.name,
            w.spec.description,
            ds.source
        ),
    );
    if !ds.columns_not_read.is_empty() {
        report.notes.push(format!(
            "columns not read by this fit: {}",
            ds.columns_not_read.join(", ")
        ));
    }
    if let Some(n) = machine_note {
        report.notes.push(n);
    }
    if let (false, false, Some(why)) = (args.loo, args.no_loo, model.loo_skipped_by_default()) {
        report.notes.push(format!(
            "no leave-one-out by default for {}: {why}",
            w.spec.name
        ));
    }
    super::print_report(&report, format);
    for w in &rep.warnings {
        eprintln!("warning: {w}");
    }
    Ok(if rep.converged {
        ExitCode::SUCCESS
    } else {
        eprintln!("the fit did not converge: {}", rep.termination);
        ExitCode::from(1)
    })
}
