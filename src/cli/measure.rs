//! `pcpmodel measure latency`: load-to-use and core-to-core latencies of the running host
//! (`measure pcp` is src/cli/measure_pcp.rs; mod.rs dispatches both).

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::hw::detect::detect;
use pcpmodel::measure::latency::{self, LatencyConfig};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel measure latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {
    /// Half the loads and round trips, one pair per class, 25 rounds (a second or two).
    #[arg(long)]
    pub quick: bool,
    /// Rounds of interleaved trials (default 101, or 25 with --quick).
    #[arg(long, value_parser = super::args::bounded::<usize>(&super::args::ranges::LATENCY_REPEATS))]
    pub repeats: Option<usize>,
    /// Run the whole measurement twice and print each level's difference between the runs and
    /// whether it is within 10 % (exit 1 when one is not); nothing else is printed or written.
    #[arg(long, conflicts_with_all = ["toml", "output"])]
    pub repeat_check: bool,
    /// Print only the detected machine with the measured latencies as a machine file (TOML).
    #[arg(long)]
    pub toml: bool,
    /// Also write that machine file here (the report still goes to stdout). Older spelling:
    /// --save-toml.
    #[arg(short = 'o', long, alias = "save-toml", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Root of the sysfs/proc tree describing the host (the measurement itself always runs here).
    #[arg(long, default_value = "/", hide = true)]
    pub root: PathBuf,
    /// No progress bar on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Measure in SCHED_FIFO threads (root): on a busy machine, time sharing otherwise preempts
    /// the chase and the ping-pong. RT throttling still leaves others 5 % of each second.
    #[arg(long)]
    pub realtime: bool,
}

/// Runs `pcpmodel measure latency`.
pub fn run_latency(args: LatencyArgs, format: Format) -> anyhow::Result<ExitCode> {
    let repeats = args.repeats.unwrap_or(if args.quick { 25 } else { 101 });
    if !(1..=1000).contains(&repeats) {
        anyhow::bail!("--repeats {repeats}: must be 1..=1000 (a round takes tens of milliseconds; the medians settle within a hundred)");
    }
    let d = detect(&args.root)?;
    let (mut machine, assumed) = super::detect::modelled_machine(&d)?;
    if let Some((l1, running)) = latency::loadavg() {
        if l1 > 0.5 || running > 1 {
            eprintln!(
                "Warning: the machine is busy (load average {l1:.2}, {running} running tasks \
                 including this one): latencies will be noisy; run it on an idle machine"
            );
        }
    }
    let cfg = LatencyConfig {
        quick: args.quick,
        repeats,
        realtime: args.realtime,
        ..LatencyConfig::default()
    };
    let run = |label: &str| -> anyhow::Result<latency::LatencyReport> {
        let pb = super::progress_bar(1, args.no_progress);
        let r = latency::measure(&machine, &args.root, &cfg, &mut |msg, done, total| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
            pb.set_message(format!("{label}{msg}"));
        })?;
        pb.finish_and_clear();
        Ok(r)
    };
    if args.repeat_check {
        let first = run("run 1: ")?;
        let second = run("run 2: ")?;
        return Ok(print_repeat_check(&first, &second, format));
    }
    let report = run("")?;
    let mut notes = report.notes.clone();
    let applied = report.apply_to(&mut machine);
    if args.toml || args.output.is_some() {
        let set = match &applied {
            Ok(s) => s.clone(),
            Err(e) => anyhow::bail!("the measured values do not make a valid machine: {e}"),
        };
        let still: Vec<&String> = assumed
            .iter()
            .filter(|a| !set.iter().any(|s| s == *a) && !a.starts_with("cache."))
            .collect();
        let mut text = format!(
            "# Measured by `pcpmodel measure latency{}{}` on {} (load average {} at the \
             start).\n# Measured: {}.\n# Still assumed: {}\n",
            if args.quick { " --quick" } else { "" },
            if args.realtime { " --realtime" } else { "" },
            report.date,
            report
                .load_before
                .map_or("unknown".into(), |(l, r)| format!("{l:.2}, {r} running")),
            set.join(", "),
            if still.is_empty() {
                "none of the latencies".to_string()
            } else {
                still
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        text.push_str(&machine.to_toml_string()?);
        if let Some(path) = &args.output {
            std::fs::write(path, &text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        if args.toml {
            print!("{text}");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut t = Table::new([
        "level",
        "working set (KiB)",
        "pages",
        "huge pages (%)",
        "median (ns)",
        "95 % CI (ns)",
        "CI (+-%)",
        "trials p10-p90 (ns)",
        "rounds x trials",
    ])
    .titled(format!(
        "Load-to-use latency, dependent loads over a random cycle, median of {} round medians \
         ({})",
        report.rounds, report.date
    ));
    for r in &report.loads {
        let e = &r.estimate;
        t.push([
            r.level.clone(),
            (r.bytes >> 10).to_string(),
            if r.huge_requested {
                "MADV_HUGEPAGE".into()
            } else {
                "4 KiB (MADV_NOHUGEPAGE)".to_string()
            },
            format!("{:.0}", 100.0 * r.huge_fraction),
            sig(e.value, 4),
            format!("{}-{}", sig(e.ci95.0, 4), sig(e.ci95.1, 4)),
            format!("{:.1}", e.rel_ci_pct),
            format!(
                "{}-{}",
                sig(e.trials_p10_p90.0, 4),
                sig(e.trials_p10_p90.1, 4)
            ),
            format!("{} x {}", e.n, r.trials_per_round),
        ]);
    }
    let mut c = Table::new([
        "pair class",
        "CPU pairs",
        "one-way (ns)",
        "95 % CI (ns)",
        "windows p10-p90 (ns)",
        "modes (ns, share)",
        "windows",
    ])
    .titled(
        "Core-to-core: cache-line ping-pong, one-way = round trip / 2, the dominant mode's median",
    );
    for r in &report.c2c {
        let e = &r.estimate;
        c.push([
            r.class.to_string(),
            r.pairs
                .iter()
                .map(|(a, b)| format!("{a}-{b}"))
                .collect::<Vec<_>>()
                .join(" "),
            sig(e.value, 4),
            format!("{}-{}", sig(e.ci95.0, 4), sig(e.ci95.1, 4)),
            format!(
                "{}-{}",
                sig(e.trials_p10_p90.0, 4),
                sig(e.trials_p10_p90.1, 4)
            ),
            r.modes
                .iter()
                .map(|m| format!("{} ({:.0} %)", sig(m.median, 4), 100.0 * m.share))
                .collect::<Vec<_>>()
                .join(", "),
            e.trials.to_string(),
        ]);
    }
    notes.push(format!(
        "LLC inclusive: {} ({})",
        match report.llc_inclusive.inclusive {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        },
        report.llc_inclusive.how
    ));
    if let Some((l, r)) = report.load_before {
        notes.push(format!(
            "Load at the start: load average {l:.2} (1 min), {r} running task(s)."
        ));
    }
    if let (Some(d4), Some(d2)) = (
        report.loads.iter().find(|r| r.level == "DRAM 4K pages"),
        report.loads.iter().find(|r| r.level == "DRAM"),
    ) {
        notes.push(format!(
            "TLB: DRAM with 4 KiB pages costs {} ns per load more than with huge pages (the \
             page walk); the DRAM latency written to a machine file is the huge-page one.",
            sig(d4.estimate.value - d2.estimate.value, 3)
        ));
    }
    let machine_json = match &applied {
        Ok(_) => serde_json::to_value(&machine)?,
        Err(e) => {
            notes.push(format!(
                "The measured values do not make a valid machine: {e}"
            ));
            serde_json::Value::Null
        }
    };
    let report_out = Report {
        json: json!({"measurement": report, "machine": machine_json}),
        tables: vec![t, c],
        notes,
    };
    super::print_report(&report_out, format);
    Ok(if applied.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Prints the per-level difference between two runs; exit 1 when one is outside the tolerance.
/// A value in ns, or `-` when the run has none (a placement seen in the other run only).
fn ns_or_dash(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        sig(v, 4)
    }
}

fn print_repeat_check(
    a: &latency::LatencyReport,
    b: &latency::LatencyReport,
    format: Format,
) -> ExitCode {
    let rows = latency::repeat_check(a, b);
    let tol = latency::REPEAT_TOLERANCE_PCT;
    let ci = |x: f64| {
        if x.is_finite() {
            format!("{x:.1}")
        } else {
            "-".into()
        }
    };
    let mut t = Table::new([
        "level",
        "run 1 (ns)",
        "run 2 (ns)",
        "CI run 1 (+-%)",
        "CI run 2 (+-%)",
        "difference (%)",
        "within 10 %",
    ])
    .titled(format!(
        "Repeat check: the whole measurement twice, {} rounds each ({})",
        a.rounds, a.date
    ));
    for r in &rows {
        t.push([
            r.what.clone(),
            ns_or_dash(r.first),
            ns_or_dash(r.second),
            ci(r.rel_ci_pct.0),
            ci(r.rel_ci_pct.1),
            format!("{:+.1}", r.diff_pct),
            if r.diff_pct.is_nan() {
                "-"
            } else if r.within {
                "yes"
            } else {
                "NO"
            }
            .to_string(),
        ]);
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| !r.within)
        .map(|r| r.what.as_str())
        .collect();
    let mut notes = vec![if failed.is_empty() {
        format!("Every level repeats within {tol} %.")
    } else {
        format!("Not within {tol} %: {}.", failed.join(", "))
    }];
    for (i, r) in [a, b].iter().enumerate() {
        if let Some((l, n)) = r.load_before {
            notes.push(format!(
                "Run {}: load average {l:.2} (1 min), {n} running task(s) at the start.",
                i + 1
            ));
        }
        for n in &r.notes {
            if n.starts_with("Core-to-core") {
                notes.push(format!("Run {}: {n}", i + 1));
            }
        }
    }
    let out = Report {
        json: json!({"rows": rows, "tolerance_pct": tol, "runs": [a, b]}),
        tables: vec![t],
        notes,
    };
    super::print_report(&out, format);
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
