//! `pcpmodel compare`: a measured sweep beside the blind prediction.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::measure::compare::{compare_sweep, model_workload, HOST_LOOPS};
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

Workloads: netperf-udp and the other socket workloads are predicted by their sweep model and
then fitted; the page-fault loop (will-it-scale-page-fault1, or data/host/host-page-fault.toml
for the host's 16 MiB region) through `predict --high` at each setting, with nothing fitted.

Example:
  pcpmodel measure pcp --workload netperf-udp --skb-defer-max 0 --output sweep.csv
  pcpmodel compare sweep.csv --machine host.toml --workload netperf-udp
  pcpmodel compare data/host/page-fault.csv --machine data/host/host-idle-2026-12-01.toml \
    --workload data/host/host-page-fault.toml")]
pub struct Args {
    /// The CSV `pcpmodel measure pcp --output` writes (columns pcp_high_pages, score); or give
    /// it with --data.
    #[arg(value_name = "MEASURED.csv", required_unless_present = "data_flag")]
    pub measured: Option<PathBuf>,
    /// The measured CSV (the positional argument's flag form, as `fit` and `validate` take it).
    #[arg(
        long = "data",
        value_name = "MEASURED.csv",
        conflicts_with = "measured"
    )]
    pub data_flag: Option<PathBuf>,
    /// Machine (built-in name or TOML file, e.g. from `measure latency --toml`).
    #[arg(long)]
    pub machine: String,
    /// Workload: a built-in name or a workload TOML file. Default: the one that models the
    /// CSV's `workload` column (measure pcp's loops: netperf-udp -> netperf-udp, af-unix ->
    /// lmbench-af-unix, page-fault -> will-it-scale-page-fault1), else netperf-udp. A workload
    /// with a reuse path is compared through its sweep model and then fitted; any other
    /// through `predict --high` at each setting.
    #[arg(long)]
    pub workload: Option<String>,
    /// Kernel the sweep ran on (default 6.18, the newest modelled): its PCP rules and whether
    /// the network stack hands read skbs back to the sender.
    #[arg(long)]
    pub kernel: Option<String>,
    /// The kernel's knobs and workload parameters of the sweep (--skb-defer-max defaults to
    /// what the CSV's first comment line says, as `measure pcp --skb-defer-max` writes it, else
    /// the kernel's 64).
    #[command(flatten)]
    pub pcp: super::args::PcpKnobArgs,
}

/// A value a `measure pcp` CSV records as `KEY = VALUE` in its first comment line, if any.
fn csv_comment_value<T: std::str::FromStr>(text: &str, key: &str) -> Option<T> {
    let first = text.lines().next()?.strip_prefix('#')?;
    let rest = first.split(&format!("{key} = ")).nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The first non-empty `workload` cell of a CSV, if it has that column (a malformed CSV gives
/// None here; the comparison's own parse reports it with its line).
fn csv_workload(text: &str) -> Option<String> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let i = r.headers().ok()?.iter().position(|h| h == "workload")?;
    r.records()
        .map_while(|rec| rec.ok())
        .filter_map(|rec| rec.get(i).map(str::to_string))
        .find(|c| !c.is_empty())
}

/// Runs `pcpmodel compare`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let machine = Machine::resolve(&args.machine)?;
    let measured = args
        .measured
        .clone()
        .or_else(|| args.data_flag.clone())
        .ok_or_else(|| anyhow::anyhow!("give the measured CSV (MEASURED.csv or --data FILE)"))?;
    let label = measured.display().to_string();
    let text = pcpmodel::input::read_text(&measured, &label, pcpmodel::input::MAX_CSV_BYTES)?;
    let workload = match &args.workload {
        Some(w) => model_workload(w).to_string(),
        None => csv_workload(&text)
            .filter(|c| HOST_LOOPS.iter().any(|(l, _)| l == c))
            .map_or_else(
                || "netperf-udp".to_string(),
                |c| model_workload(&c).to_string(),
            ),
    };
    let mut knobs = pcpmodel::workload::Knobs {
        kernel: Some(super::args::kernel_arg(
            &args.kernel,
            pcpmodel::kernel::version::KernelVersion::DEFAULT,
        )?),
        means_only: true,
        ..Default::default()
    };
    // What the sweep recorded about its own flow: the sysctl, and the share of the datagrams
    // the receiver read (the rest were dropped and freed on the sender's CPU).
    let mut recorded = Vec::new();
    if args.pcp.skb_defer_max.is_none() {
        if let Some(d) = csv_comment_value::<u32>(&text, "net.core.skb_defer_max") {
            knobs = knobs.with_extra("skb_defer_max", f64::from(d));
            recorded.push(format!("net.core.skb_defer_max = {d}"));
        }
    }
    let set_by_flag = |name: &str| {
        args.pcp
            .params
            .iter()
            .any(|p| p.split('=').next() == Some(name))
    };
    let w = pcpmodel::workload::resolve(&workload)?;
    // The received share bounds the receiver's free share from above (a dropped datagram is
    // freed on the sender's CPU); it stands in only where the workload has no traced share: a
    // flow recorded on the host (`workload from-flow`) counts the frees on each CPU, and the
    // receiver frees fewer than it reads when the sender's page frag drops a page's last
    // reference (39 % of the blocks against 95 % of the bytes read, Zen 4, skb_defer_max 0).
    let traced_share = w
        .spec
        .params
        .get("receiver_free_share")
        .is_some_and(|q| q.source.starts_with("measured:"));
    if !set_by_flag("receiver_free_share") && !traced_share {
        if let Some(r) = csv_comment_value::<f64>(&text, "received_share") {
            if r.is_finite() && (0.0..=1.0).contains(&r) {
                knobs = knobs.with_extra("receiver_free_share", r);
                recorded.push(format!("receiver_free_share = {r} (the received share)"));
            }
        }
    }
    args.pcp.apply(&mut knobs)?;
    // What the sweep recorded about a socket flow means nothing to another kind.
    if !w.kind.knobs().contains(&"skb-defer-max") {
        knobs
            .extra
            .retain(|(k, _)| k != "skb_defer_max" && k != "receiver_free_share");
        recorded.clear();
    }
    knobs.check_read_by(w.kind.as_ref(), w.name())?;
    let mut c = compare_sweep(&w, &machine, &text, &label, &knobs)?;
    if !recorded.is_empty() {
        c.notes.push(format!(
            "flow as the sweep recorded it (first comment line of {label}): {}",
            recorded.join(", ")
        ));
    }
    if text
        .lines()
        .next()
        .is_some_and(|l| l.starts_with('#') && l.contains("free page reporting on"))
    {
        let priced = machine.memory.backing_ns_per_page.is_some() && c.run_seconds.is_some();
        c.notes.push(if priced {
            format!(
                "{label} was measured on a VM with free page reporting: the pages each run's lists grow by are priced at the host's backing (above); the steady state's pages are taken as backed"
            )
        } else {
            format!(
                "{label} was measured on a VM with free page reporting: memory the guest frees goes back to the hypervisor and faults in the host when touched again; without memory.backing_ns_per_page in the machine file (`measure backing`) and the run's length (`--run-seconds`, or the sweep's run_seconds column) the model does not price it, and large highs, whose lists a run must first fill, measure slower than predicted"
            )
        });
    }
    let mut t = Table::new([
        "pcp->high (pages)",
        "measured score",
        "measured / geo-mean",
        "blind predicted / geo-mean",
        "error (%)",
    ])
    .titled(format!(
        "Blind prediction ({} on {}) vs {label}",
        if c.model == c.workload {
            c.model.clone()
        } else {
            format!("{} through {}", c.workload, c.model)
        },
        c.machine
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
        ];
    let fitted = !c.params.is_empty();
    if fitted {
        notes.push(format!(
            "Fit on the same CSV: {}, RMS relative error {}. score_scale's blind value is the \
             one that matches the geometric means (the blind model has no units).",
            if c.fit_converged {
                "converged"
            } else {
                "NOT converged"
            },
            c.fit_rms_pct.map_or("-".into(), |r| format!("{r:.1} %"))
        ));
    }
    notes.extend(c.notes.iter().cloned());
    let report = Report {
        json: serde_json::to_value(&c)?,
        tables: if fitted { vec![t, p] } else { vec![t] },
        notes,
    };
    super::print_report(&report, format);
    Ok(if c.fit_converged || !fitted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
