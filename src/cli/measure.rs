//! `pcpmodel measure latency|pcp`: measure the running host.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::hw::detect::detect;
use pcpmodel::measure::latency::{self, LatencyConfig};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel measure`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

/// What to measure.
#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Load-to-use latency (L1, L2, LLC, DRAM) and core-to-core latency per pair class.
    ///
    /// Pointer chase over a random cyclic permutation of 64-byte lines (2 MiB pages where THP
    /// allows, and DRAM again with 4 KiB pages so the page walk is kept apart); cache-line
    /// ping-pong (lock cmpxchg) between two pinned threads for each pair class the topology
    /// has (SMT siblings, same LLC, another LLC, another socket); local and remote DRAM per
    /// NUMA node; the LLC's inclusive bit from CPUID. Medians with quartiles and extremes over
    /// the repeats. Run it on an idle machine: other runnable tasks are noise.
    #[command(after_help = "\
Examples:
  pcpmodel measure latency --quick
  pcpmodel measure latency --toml > host.toml && pcpmodel optimal-high --machine host.toml")]
    Latency(LatencyArgs),
    /// The real kernel's PCP behaviour under a workload at several pcp->high settings.
    Pcp(super::measure_pcp::PcpArgs),
}

/// Arguments of `pcpmodel measure latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {
    /// A quarter of the loads and round trips, one pair per class, 3 repeats (a few seconds).
    #[arg(long)]
    pub quick: bool,
    /// Repeats of every measurement (default 7, or 3 with --quick).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Print only the detected machine with the measured latencies as a machine file (TOML).
    #[arg(long)]
    pub toml: bool,
    /// Also write that machine file here (the report still goes to stdout).
    #[arg(long, value_name = "FILE")]
    pub save_toml: Option<PathBuf>,
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

/// Runs `pcpmodel measure`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Latency(a) => run_latency(a, format),
        What::Pcp(a) => super::measure_pcp::run(a, format),
    }
}

fn run_latency(args: LatencyArgs, format: Format) -> anyhow::Result<ExitCode> {
    let repeats = args.repeats.unwrap_or(if args.quick { 3 } else { 7 });
    if !(1..=100).contains(&repeats) {
        anyhow::bail!("--repeats {repeats}: must be 1..=100 (medians settle within a few repeats; more only takes longer)");
    }
    let d = detect(&args.root)?;
    let (mut machine, assumed) = d.to_machine()?;
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
    let pb = super::progress_bar(1, args.no_progress);
    let report = latency::measure(&machine, &args.root, &cfg, &mut |msg, done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
        pb.set_message(msg.to_string());
    })?;
    pb.finish_and_clear();
    let mut notes = report.notes.clone();
    let applied = report.apply_to(&mut machine);
    if args.toml || args.save_toml.is_some() {
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
        if let Some(path) = &args.save_toml {
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
        "IQR (ns)",
        "min-max (ns)",
        "n",
    ])
    .titled(format!(
        "Load-to-use latency, dependent loads over a random cycle ({})",
        report.date
    ));
    for r in &report.loads {
        t.push([
            r.level.clone(),
            (r.bytes >> 10).to_string(),
            if r.huge_requested {
                "MADV_HUGEPAGE".into()
            } else {
                "4 KiB (MADV_NOHUGEPAGE)".to_string()
            },
            format!("{:.0}", 100.0 * r.huge_fraction),
            sig(r.ns.median, 4),
            format!("{}-{}", sig(r.ns.q1, 4), sig(r.ns.q3, 4)),
            format!("{}-{}", sig(r.ns.min, 4), sig(r.ns.max, 4)),
            r.ns.n.to_string(),
        ]);
    }
    let mut c = Table::new([
        "pair class",
        "CPU pairs",
        "one-way median (ns)",
        "IQR (ns)",
        "min-max (ns)",
        "n",
    ])
    .titled("Core-to-core: cache-line ping-pong, one-way = round trip / 2");
    for r in &report.c2c {
        c.push([
            r.class.to_string(),
            r.pairs
                .iter()
                .map(|(a, b)| format!("{a}-{b}"))
                .collect::<Vec<_>>()
                .join(" "),
            sig(r.ns.median, 4),
            format!("{}-{}", sig(r.ns.q1, 4), sig(r.ns.q3, 4)),
            format!("{}-{}", sig(r.ns.min, 4), sig(r.ns.max, 4)),
            r.ns.n.to_string(),
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
            sig(d4.ns.median - d2.ns.median, 3)
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
