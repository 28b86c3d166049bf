//! `pcpmodel fit`: fit a registered model to a CSV of measurements.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::fit::{fit, Dataset, Residual};
use pcpmodel::output::report::Format;
use pcpmodel::registry;
use pcpmodel::Machine;

/// The registered models as clap's possible values, so `--help` lists them with what each fits.
fn model_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        registry::models()
            .into_iter()
            .map(|m| clap::builder::PossibleValue::new(m.name).help(m.description)),
    )
}

/// Arguments of `pcpmodel fit`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The CSV needs a header naming the model's input and target columns (other columns, e.g.
machine or note, are ignored; lines starting with # are comments). Physical parameters are held
at their documented values unless freed with --free; --fix holds any parameter at a value.

Every column's values must lie in its physical range (e.g. pcp_high_pages 0..=2^31-1,
memcg_charge_batch_pages 1..=65536, a measured rate 0..=1e15; see src/bounds.rs): a value outside is
an error naming the file, line and column. A converged fit whose residuals exceed the spread of
the data gets a warning on stderr.

Exit status: 0 converged; 1 the fit did not converge (the report says why); 2 bad input.

Examples:
  pcpmodel data 004_netperf_pcp_high --format csv | grep icelake > icx.csv
  pcpmodel fit --model netperf-pcp-high --data icx.csv --machine icelake-server
  pcpmodel fit --model netperf-pcp-high --data my.csv --machine host.toml --free mlp_lines")]
pub struct Args {
    /// Registered model to fit (each reads its own CSV columns).
    #[arg(long, value_parser = model_names())]
    pub model: String,
    /// CSV file with the measurements.
    #[arg(long)]
    pub data: PathBuf,
    /// Machine the measurements come from (built-in name or TOML file).
    #[arg(long)]
    pub machine: Option<String>,
    /// Hold a parameter at a value: NAME=VALUE (repeatable).
    #[arg(long = "fix", value_name = "NAME=VALUE")]
    pub fix: Vec<String>,
    /// Free a parameter that is held at its physical value by default (repeatable).
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

/// Runs `pcpmodel fit`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    pcpmodel::bounds::FIT_STARTS
        .check_flag("--starts", args.starts as f64)
        .map_err(anyhow::Error::msg)?;
    let entry = registry::find(&args.model)?;
    let machine = Machine::resolve(args.machine.as_deref().unwrap_or(entry.default_machine))?;
    let model = (entry.build)(&machine)?;
    let specs = model.params();
    let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    let check = |n: &str| -> anyhow::Result<()> {
        if names.contains(&n) {
            Ok(())
        } else {
            anyhow::bail!(
                "model {} has no parameter '{n}' (parameters: {})",
                entry.name,
                names.join(", ")
            )
        }
    };
    for f in &args.free {
        check(f)?;
    }
    let mut fixed: Vec<(String, f64)> = entry
        .default_fixed
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
    let ds = Dataset::from_csv_path(&args.data, model.as_ref())?;
    ds.check_ranges(entry.columns)?;
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
    let pb = super::spinner(format!("fitting {} ({} starts)", args.model, args.starts));
    let rep = fit(model.as_ref(), &ds, &opts);
    pb.finish_and_clear();
    let rep = rep?;
    let mut report = rep.to_report();
    report.notes.insert(
        0,
        format!(
            "model {} on machine {} ({}); data {}",
            entry.name, machine.name, entry.description, ds.source
        ),
    );
    if let (false, false, Some(why)) = (args.loo, args.no_loo, model.loo_skipped_by_default()) {
        report.notes.push(format!(
            "no leave-one-out by default for {}: {why}",
            entry.name
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
