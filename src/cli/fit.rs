//! `pcpmodel fit`: fit a workload's parameters to a CSV of measurements.
//!
//! A workload whose kind has its own fit for its thread's table (`Kind::native_fit`) uses it;
//! any other workload, or `--generic`, goes through [`pcpmodel::workload::fit::WorkloadFit`]:
//! the quantities with basis `fitted` (and `--free FIELD`) fitted over the CSV's knob columns.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::bounds::Range;
use pcpmodel::fit::{fit, Dataset, FitModel, Residual};
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
Columns label, name, machine and note are ignored; any other column is an error naming
file:line:column.

Lines starting with # are comments. Parameters a thread's fit holds at their documented
physical values stay held unless freed with --free; --fix holds any parameter at a value.
Every column's values must lie in its physical range (e.g. pcp_high_pages 0..=2^31-1,
memcg_charge_batch_pages 1..=65536, a measured rate 0..=1e15; see src/bounds.rs): a value outside
is an error naming the file, line and column. A converged fit whose residuals exceed the spread
of the data gets a warning on stderr.

Exit status: 0 converged; 1 the fit did not converge (the report says why); 2 bad input.

Examples:
  pcpmodel data 004_netperf_pcp_high --format csv | grep icelake > icx.csv
  pcpmodel fit --workload netperf-udp icx.csv --machine icelake-server
  pcpmodel fit --model netperf-pcp-high --data my.csv --machine host.toml --free mlp_lines
  pcpmodel fit --workload my-loop.toml sweep.csv --free op.work.ns",
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
    #[arg(long, visible_alias = "model", value_name = "NAME|FILE")]
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
    #[arg(long, default_value_t = 4)]
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
    let (model, ds, default_fixed, how): (Box<dyn FitModel>, Dataset, &[&str], &str) = match native
    {
        Some(n) => {
            if args.kernel.is_some() {
                anyhow::bail!(
                        "--kernel applies to the generic fit; the thread fit of {} models its thread's kernel (add --generic)",
                        w.spec.name
                    );
            }
            let ds = Dataset::from_csv_path(&path, n.model.as_ref())?;
            ds.check_ranges(n.columns)?;
            (n.model, ds, n.default_fixed, "the thread's own fit")
        }
        None => {
            let kernel = match &args.kernel {
                Some(k) => pcpmodel::kernel::version::KernelVersion::parse_labeled(k, "--kernel")?,
                None => w.spec.reference_kernel()?,
            };
            let label = path.display().to_string();
            let text = pcpmodel::input::read_text(&path, &label, pcpmodel::input::MAX_CSV_BYTES)?;
            let base = Knobs {
                kernel: Some(kernel),
                ..Knobs::default()
            };
            let m = WorkloadFit::for_csv(&w, &machine, base, &text, &label, &args.free)?;
            let ds = m.dataset(&text, &label)?;
            (Box::new(m), ds, &[], "the generic workload fit")
        }
    };
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
