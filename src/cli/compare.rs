//! `pcpmodel compare`: a measured sweep beside the blind prediction.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::measure::compare::compare_netperf;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::Machine;

/// Arguments of `pcpmodel compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The blind prediction uses nothing from MEASURED.csv: the workload's fixed work is carried over
from thread 004's machines, the latencies come from the machine file. Scores are compared as
shapes (each series divided by its geometric mean), since a blind prediction has no score units.
Then the model is fitted to the same CSV and each parameter's move is shown.

Exit status: 0 compared; 1 the fit on the CSV did not converge; 2 bad input.

Example:
  pcpmodel measure pcp --workload netperf-udp --out sweep.csv
  pcpmodel compare sweep.csv --machine host.toml --workload netperf-udp")]
pub struct Args {
    /// The CSV `pcpmodel measure pcp --out` writes (columns pcp_high_pages, score).
    pub measured: PathBuf,
    /// Machine (built-in name or TOML file, e.g. from `measure latency --toml`).
    #[arg(long)]
    pub machine: String,
    /// Workload: netperf-udp (the only one with a score model so far).
    #[arg(long, default_value = "netperf-udp")]
    pub workload: String,
}

/// Runs `pcpmodel compare`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    if args.workload != "netperf-udp" {
        anyhow::bail!(
            "--workload {}: no model predicts its score yet (netperf-udp is compared with the \
             netperf-pcp-high model)",
            args.workload
        );
    }
    let machine = Machine::resolve(&args.machine)?;
    let label = args.measured.display().to_string();
    let text = pcpmodel::input::read_text(&args.measured, &label, pcpmodel::input::MAX_CSV_BYTES)?;
    let c = compare_netperf(&machine, &text, &label)?;
    let mut t = Table::new([
        "pcp->high (pages)",
        "measured score",
        "measured / geo-mean",
        "blind predicted / geo-mean",
        "error (%)",
    ])
    .titled(format!(
        "Blind prediction ({} on {}) vs {label}",
        c.model, c.machine
    ));
    for r in &c.rows {
        t.push([
            format!("{:.0}", r.high_pages),
            sig(r.measured, 5),
            format!("{:.3}", r.measured_norm),
            format!("{:.3}", r.predicted_norm),
            format!("{:+.1}", r.error_pct),
        ]);
    }
    let mut p = Table::new([
        "parameter",
        "unit",
        "blind",
        "fitted to the CSV",
        "moved (%)",
        "held",
    ])
    .titled("Fitting the same CSV: how far each parameter moves");
    for m in &c.params {
        p.push([
            m.name.clone(),
            m.unit.clone(),
            sig(m.blind, 4),
            sig(m.fitted, 4),
            if m.blind != 0.0 {
                format!("{:+.1}", 100.0 * (m.fitted / m.blind - 1.0))
            } else {
                format!("{} (abs)", sig(m.fitted - m.blind, 3))
            },
            match (m.fixed, m.at_bound) {
                (true, _) => "fixed".to_string(),
                (false, true) => "free, at its bound".into(),
                (false, false) => "free".into(),
            },
        ]);
    }
    let mut notes =
        vec![
            format!("Blind parameters: {}.", c.blind_source),
            format!(
                "RMS error of the normalised blind prediction: {:.1} %.",
                c.rms_error_pct
            ),
            format!(
            "Kendall tau-b of the settings ranked by measured vs predicted score: {} (1 = same \
             order, 0 = unrelated, -1 = reversed).",
            c.kendall_tau.map_or("undefined (a constant series)".into(), |t| format!("{t:.2}"))
        ),
            format!(
                "Predicted 1 % range of pcp->high: {:.0}-{:.0} pages; the measured best ({:.0} \
             pages) is {} it.",
                c.predicted_range.0,
                c.predicted_range.1,
                c.measured_best_high,
                if c.best_in_range { "inside" } else { "outside" }
            ),
            format!(
                "Fit on the same CSV: {}, RMS relative error {}. score_scale's blind value is the \
             one that matches the geometric means (the blind model has no units).",
                if c.fit_converged {
                    "converged"
                } else {
                    "NOT converged"
                },
                c.fit_rms_pct.map_or("-".into(), |r| format!("{r:.1} %"))
            ),
        ];
    notes.extend(c.notes.iter().cloned());
    let report = Report {
        json: serde_json::to_value(&c)?,
        tables: vec![t, p],
        notes,
    };
    super::print_report(&report, format);
    Ok(if c.fit_converged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
