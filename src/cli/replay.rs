//! `pcpmodel replay`: a recorded flow (`pcpmodel record`) through the kernel's PCP rules at the
//! recorded setting or another, beside what the kernel did.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::measure::replay::{
    machine_quantities, replay_against, replay_file_from, replay_runs, runs_note, ReplaySettings,
    StartOverride,
};
use pcpmodel::output::report::{sig, Format, Report, Table};

use super::args::bounded;

/// Arguments of `pcpmodel replay`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Every CPU's allocations and frees of the flow go, in that CPU's order, to its pageset of the
page's zone, stepped by the kernel's PCP rules (refill, drain, free_high, auto-tuning of
pcp->high, the vmstat tick's decay each second of trace time). The pagesets start as recorded
(--start-zoneinfo or --start-from-against: as another snapshot shows them).
Without setting flags the replay runs the recorded setting and shows how closely it reproduces
the kernel's own refills and drains; with them it answers what that setting would have done to
the same stream. Rows without a recorded value are ones the kmem tracepoints cannot show.

At another setting the lists start as the recorded ones leave them once settled, and the
stream runs a second time from empty lists (as after drain_all_pages()). Near a workload's own
region a list either holds a whole cycle of it or drains and refills every cycle, and what it
held when the setting took effect decides which: where the two starts differ by more than a
tenth, the rows 'from empty lists' and a note give the other end.

--fraction recomputes pcp->high (and batch) from each zone's size with the kernel's formulas;
--high sets pcp->high of every pageset (on 6.7+ both high_min and high_max: auto-tuning off);
--kernel runs another version's rules (the limits recomputed for it).

Exit status: 0 replayed; 2 bad input (a cut or edited flow names its line and field).

Examples:
  pcpmodel replay udp.flow.gz
  pcpmodel replay udp.flow.gz --fraction 100
  pcpmodel replay udp.flow.gz --high 252 --format json
  pcpmodel replay udp.flow.gz --fraction 1000 --machine host.toml
  pcpmodel replay udp-f0.flow.gz --against udp-f1000.flow.gz   (blind: default's flow at 1000)
  pcpmodel replay udp-f0.flow.gz --against udp-f1000.flow.gz --start-from-against
  pcpmodel replay udp.flow.gz --fraction 100 --start-zoneinfo now.txt   (lists as they are now)")]
pub struct Args {
    /// The flow file `pcpmodel record` wrote (text, or gzip when it was named *.gz).
    pub flow: PathBuf,
    /// pcp->high of every pageset, pages (6.7+: high_min = high_max, no auto-tuning).
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PCP_HIGH_PAGES))]
    pub high: Option<u32>,
    /// vm.percpu_pagelist_high_fraction: 0 (the kernel's default) or >= 8.
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PAGELIST_FRACTION))]
    pub fraction: Option<u32>,
    /// pcp->batch, pages.
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PCP_BATCH_PAGES))]
    pub batch: Option<u32>,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..=6 (6.7 on).
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PCP_BATCH_SCALE_MAX))]
    pub scale_max: Option<u32>,
    /// The kernel whose rules run, MAJOR.MINOR (default: the recorded kernel).
    #[arg(long)]
    pub kernel: Option<String>,
    /// The blind check: replay at the setting this other flow was recorded at (unless a flag
    /// sets one) and put its recorded rates in the recorded column.
    #[arg(long, value_name = "FLOW")]
    pub against: Option<PathBuf>,
    /// Start the lists as this /proc/zoneinfo copy shows them (each pageset's count and live
    /// pcp->high), not as recorded: the machine's state now, e.g. `cat /proc/zoneinfo > now.txt`
    /// after setting the sysctl. Lists hold what earlier work left, and a list near its high
    /// drains on the first frees.
    #[arg(long, value_name = "ZONEINFO")]
    pub start_zoneinfo: Option<PathBuf>,
    /// With --against: start the lists as the other flow's recording started (its
    /// /proc/zoneinfo at the start, read before its workload ran) rather than as this one's.
    #[arg(long)]
    pub start_from_against: bool,
    /// Another recording of the same workload (repeatable): it is replayed at the same setting
    /// too, and a table sets every run's replayed rates beside each other (and beside what the
    /// kernel did in it, at its own setting). A workload varies from run to run (which CPU
    /// frees what); the spread of its runs' replays is how far one run predicts another.
    #[arg(long = "run", value_name = "FLOW")]
    pub runs: Vec<PathBuf>,
    /// A machine (built-in name or TOML file, e.g. `pcpmodel measure latency --toml`): adds the
    /// modelled zone->lock side (hold per refill and drain, wait per visit, time per page) and
    /// where allocated blocks are found in its caches.
    #[arg(long)]
    pub machine: Option<String>,
}

impl Args {
    /// The settings the flags ask for.
    pub fn settings(&self) -> anyhow::Result<ReplaySettings> {
        if self.high.is_some() && self.fraction.is_some() {
            anyhow::bail!(
                "--high and --fraction both set pcp->high: give one (--fraction computes it from each zone's size)"
            );
        }
        Ok(ReplaySettings {
            high: self.high,
            fraction: self.fraction,
            batch: self.batch,
            scale_max: self.scale_max.map(u8::try_from).transpose()?,
            kernel: self
                .kernel
                .as_deref()
                .map(|k| super::args::kernel_flag(k, "--kernel"))
                .transpose()?,
        })
    }
}

/// Runs `pcpmodel replay`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let s = args.settings()?;
    let from = match (&args.start_zoneinfo, args.start_from_against, &args.against) {
        (Some(_), true, _) => anyhow::bail!(
            "--start-zoneinfo and --start-from-against both say where the lists start: give one"
        ),
        (None, true, None) => anyhow::bail!(
            "--start-from-against needs --against FLOW (the recording whose start it takes)"
        ),
        (Some(z), false, _) => Some(StartOverride::from_zoneinfo(z)?),
        (None, true, Some(other)) => Some(StartOverride::from_flow(other)?),
        (None, false, _) => None,
    };
    let mut r = match &args.against {
        Some(other) => replay_against(&args.flow, other, &s, from.as_ref())?,
        None => replay_file_from(&args.flow, &s, from.as_ref())?,
    };
    let runs = if args.runs.is_empty() {
        Vec::new()
    } else {
        // The runs replay where the main flow did: its setting, or the --against recording's.
        let mut at = s;
        if !at.changes_anything() {
            match &args.against {
                Some(_) => at.fraction = u32::try_from(r.fraction).ok(),
                None => anyhow::bail!(
                    "--run replays other runs at another setting: give --high, --fraction, --batch, --scale-max, --kernel or --against (at a run's own setting its replay is the check against the kernel)"
                ),
            }
        }
        let mut paths = vec![args.flow.clone()];
        paths.extend(args.runs.iter().cloned());
        let runs = replay_runs(&paths, &at)?;
        if let Some(n) = runs_note(&runs, &r.setting) {
            r.notes.push(n);
        }
        runs
    };
    if let Some(m) = &args.machine {
        let machine = pcpmodel::hw::machine::Machine::resolve(m)?;
        let q = machine_quantities(&r, &machine)?;
        r.quantities.extend(q);
        r.notes.push(format!(
            "Modelled rows on {}: zone->lock holds from the kernel's code, waits from its queue; cache rows from reuse distances (a refilled block's from the pages every CPU allocated since its free; DRAM where the recording never saw it freed).",
            machine.name
        ));
    }
    let mut t =
        Table::new(["quantity", "unit", "recorded", "replayed", "diff (%)"]).titled(format!(
            "{}: {:.2} s recorded on {} at {}; replayed with {}'s rules at {}",
            r.flow, r.seconds, r.recorded_kernel, r.recorded_setting, r.kernel, r.setting
        ));
    for q in &r.quantities {
        t.push([
            q.name.clone(),
            q.unit.clone(),
            q.recorded.map_or("-".into(), |x| sig(x, 5)),
            sig(q.replayed, 5),
            q.diff_pct().map_or("-".into(), |d| format!("{d:+.1}")),
        ]);
    }
    let mut p = Table::new([
        "cpu",
        "zone",
        "replayed limits",
        "allocs",
        "refills rec",
        "refills rep",
        "drains rec",
        "drains rep",
        "free_high rep",
        "mean held rep",
    ])
    .titled("per pageset");
    for s in &r.pagesets {
        p.push([
            s.cpu.to_string(),
            s.zone.clone(),
            s.limits.clone(),
            s.recorded.allocs.to_string(),
            s.recorded.refills.to_string(),
            s.replayed.refills.to_string(),
            s.recorded.drains.to_string(),
            s.replayed.drains.to_string(),
            s.replayed.free_high.to_string(),
            sig(s.replayed_mean_held, 4),
        ]);
    }
    let mut tables = vec![t, p];
    let mut json = serde_json::to_value(&r)?;
    if !runs.is_empty() {
        let mut rt = Table::new([
            "flow",
            "recorded at",
            "refills / 1000, kernel",
            "drains / 1000, kernel",
            "refills / 1000, replayed",
            "drains / 1000, replayed",
        ])
        .titled(format!(
            "every run replayed at {} (kernel: at its own setting)",
            r.setting
        ));
        for x in &runs {
            rt.push([
                x.flow.clone(),
                x.recorded_setting.clone(),
                sig(x.recorded[0], 4),
                sig(x.recorded[1], 4),
                sig(x.replayed[0], 4),
                sig(x.replayed[1], 4),
            ]);
        }
        tables.push(rt);
        json["runs"] = serde_json::to_value(&runs)?;
    }
    let report = Report {
        json,
        tables,
        notes: r.notes.clone(),
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
