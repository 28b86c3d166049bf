//! `pcpmodel measure pcp`: a workload on the host kernel at several pcp->high settings.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use pcpmodel::hw::detect::detect;
use pcpmodel::measure::latency::{host_cpus, pair_classes};
use pcpmodel::measure::pcp::{self, Workload};
use pcpmodel::measure::sysctl::{self, SysctlGuard};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Most repeats `measure pcp` runs of every setting.
const MAX_REPEATS: usize = 100;
/// Most page-fault tasks (processes).
const MAX_TASKS: u32 = 1 << 22;
/// Most sysctl settings in one sweep.
const MAX_FRACTIONS: usize = 64;

/// Restores the sysctl when dropped (a panic unwinding this thread, an early return).
struct RestoreOnDrop(Arc<SysctlGuard>);

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        if let Err(e) = self.0.restore() {
            eprintln!("Error: could not restore the sysctl: {e}");
        }
    }
}

/// Arguments of `pcpmodel measure pcp`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sets vm.percpu_pagelist_high_fraction to each setting (0 = the kernel default first), drains any
list left above the new high_max by the previous setting (/proc/sys/vm/stat_refresh, the vmstat
worker's decay run at once), runs the workload, and reads every CPU's live pcp->high from /proc/zoneinfo after each point. Repeats are
interleaved. The original value is written back at the end, on an error, on SIGINT/SIGTERM and on
a panic; after a SIGKILL the journal (--journal) lets the next run (or --recover) write it back.
Needs root; --dry-run prints the plan without changing anything.

Output: with --output FILE, the CSV `pcpmodel fit --workload netperf-pcp-high --data FILE` reads
(pcp_high_pages, score, and the spread). Exit status: 0 done; 2 error or interrupted.

Examples:
  pcpmodel measure pcp --workload netperf-udp --dry-run
  pcpmodel measure pcp --workload netperf-udp --output sweep.csv
  pcpmodel measure pcp --workload af-unix --fractions 0 --repeats 5
  pcpmodel measure pcp --workload page-fault --tasks 2 --quick")]
pub struct PcpArgs {
    /// Workload: netperf-udp (UDP stream over loopback, 64 KiB datagrams), af-unix (an
    /// AF_UNIX stream socket pair, 64 KiB writes and reads: lmbench's bw_unix; the model's
    /// lmbench-af-unix) or page-fault (mmap/touch/munmap loop in N processes).
    #[arg(long)]
    pub workload: String,
    /// 0.3 s per point instead of 2 s.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per point (overrides --quick).
    #[arg(long, value_parser = super::args::bounded::<f64>(&super::args::ranges::POINT_SECONDS))]
    pub seconds: Option<f64>,
    /// Repeats of every setting (interleaved).
    #[arg(long, default_value_t = 3, value_parser = super::args::bounded::<usize>(&super::args::ranges::SWEEP_REPEATS))]
    pub repeats: usize,
    /// Settings of vm.percpu_pagelist_high_fraction, comma separated (0 or >= 8); default: 0
    /// and five values aimed at 4 x batch, LLC/8, LLC/2, 2 x LLC and 8 x LLC pages.
    #[arg(long, value_delimiter = ',', value_parser = super::args::bounded::<u64>(&pcpmodel::bounds::PAGELIST_FRACTION))]
    pub fractions: Option<Vec<u64>>,
    /// netperf-udp and af-unix: sender (writer) and receiver (reader) CPUs (default: a same-LLC
    /// pair).
    #[arg(long, value_delimiter = ',', value_parser = super::args::bounded::<u32>(&super::args::ranges::CPU_ID))]
    pub cpus: Option<Vec<u32>>,
    /// page-fault: number of processes (default: one per CPU).
    #[arg(long, value_parser = super::args::bounded::<u32>(&super::args::ranges::MEASURE_TASKS))]
    pub tasks: Option<u32>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write the fit CSV here. Older spelling: --out.
    #[arg(short = 'o', long, alias = "out", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write every point (run order, with the sender-receiver c2c latency) here as CSV.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
    /// Journal of the original value (lets a later run restore after a SIGKILL).
    #[arg(long, default_value = sysctl::DEFAULT_JOURNAL)]
    pub journal: PathBuf,
    /// Only replay the journal (restore the sysctl a killed run left changed) and exit.
    #[arg(long)]
    pub recover: bool,
    /// The sysctl file (tests point it at a fake file).
    #[arg(long, default_value = sysctl::HIGH_FRACTION_PATH, hide = true)]
    pub sysctl_path: PathBuf,
    /// The zoneinfo file read after each point.
    #[arg(long, default_value = "/proc/zoneinfo", hide = true)]
    pub zoneinfo: PathBuf,
    /// No progress bar on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Run the workload SCHED_FIFO (priority 1, root; its threads and processes inherit it):
    /// on a busy machine time sharing otherwise dominates the score.
    #[arg(long)]
    pub realtime: bool,
    /// netperf-udp and af-unix: set net.core.skb_defer_max to N for the whole sweep (restored
    /// like the other sysctl, on every exit path, with its own journal FILE.skb-defer-max).
    /// 0 makes the receiving CPU free every skb itself; above 0 the kernel (TCP 5.19+, UDP
    /// 6.18+) hands a read skb back to the CPU that allocated it.
    #[arg(long, value_name = "N", value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::SKB_DEFER_MAX))]
    pub skb_defer_max: Option<u32>,
    /// The skb_defer_max sysctl file (tests point it at a fake file).
    #[arg(long, default_value = SKB_DEFER_MAX_PATH, hide = true)]
    pub skb_defer_max_path: PathBuf,
    /// Summarise every point. By default, when the sender-receiver transfer latency measured
    /// before each point falls into two placements (a VM's vCPUs moved), the medians keep the
    /// points of the dominant placement: the one `measure latency` puts in the machine file.
    #[arg(long)]
    pub all_placements: bool,
    /// Run nothing: summarise the points of an earlier sweep (the CSV --raw wrote) into the fit
    /// CSV (--output) and the table. Needs no root.
    #[arg(long, value_name = "RAW_CSV")]
    pub from_raw: Option<PathBuf>,
}

/// The points' summary per setting, with the placement note unless `all` (see
/// [`pcp::dominant_placement`]).
fn summary(
    fractions: &[u64],
    points: &[pcp::Point],
    all: bool,
) -> (Vec<pcp::Setting>, Option<pcp::PlacementFilter>) {
    if all {
        return (pcp::summarise(fractions, points), None);
    }
    let (kept, filter) = pcp::dominant_placement(points);
    (pcp::summarise(fractions, &kept), filter)
}

/// The fit CSV of a sweep with its header notes.
fn sweep_csv(
    workload: &Workload,
    settings: &[pcp::Setting],
    points: &[pcp::Point],
    filter: Option<&pcp::PlacementFilter>,
    skb_defer_max: Option<u32>,
    reporting: Option<sysctl::FreePageReporting>,
    run_s: Option<f64>,
) -> String {
    let mut csv = pcp::fit_csv("host", workload, settings, run_s);
    let mut head = String::new();
    if let Some(d) = skb_defer_max {
        head.push_str(&format!("; net.core.skb_defer_max = {d} during the sweep"));
    }
    if let Some(r) = pcp::received_share_median(points) {
        head.push_str(&format!(
            "; received_share = {r:.4} (bytes read / bytes sent, median over points)"
        ));
    }
    if let Some(f) = filter {
        head.push_str(&format!("; {}", f.describe()));
    }
    if let Some(r) = reporting {
        head.push_str(&format!("; {}", r.describe()));
    }
    if let Some(eol) = csv.find('\n') {
        csv.insert_str(eol, &head);
    }
    csv
}

/// `--from-raw`: summarise an earlier sweep's points.
fn from_raw(args: &PcpArgs, raw: &std::path::Path, format: Format) -> anyhow::Result<ExitCode> {
    let label = raw.display().to_string();
    let text = std::fs::read_to_string(raw).with_context(|| format!("cannot read {label}"))?;
    let workload = match args.workload.as_str() {
        "netperf-udp" => Workload::NetperfUdp {
            sender: 0,
            receiver: 0,
        },
        "af-unix" => Workload::AfUnix {
            writer: 0,
            reader: 0,
        },
        "page-fault" => Workload::PageFault { tasks: 1 },
        other => {
            anyhow::bail!("--workload: unknown '{other}': use netperf-udp, af-unix or page-fault")
        }
    };
    let points = pcp::points_from_raw_csv(&text, &label)?;
    let mut fractions: Vec<u64> = Vec::new();
    for p in &points {
        if !fractions.contains(&p.fraction) {
            fractions.push(p.fraction);
        }
    }
    let (settings, filter) = summary(&fractions, &points, args.all_placements);
    // Summarised points may come from another machine: this host's free page reporting is
    // not theirs.
    let csv = sweep_csv(
        &workload,
        &settings,
        &points,
        filter.as_ref(),
        args.skb_defer_max,
        None,
        None,
    );
    let mut notes = vec![format!(
        "Summarised {} point(s) of {label}; nothing was run.",
        points.len()
    )];
    if let Some(f) = &filter {
        notes.push(format!("{}.", f.describe()));
    }
    if let Some(out) = &args.output {
        std::fs::write(out, &csv).with_context(|| format!("cannot write {}", out.display()))?;
        notes.push(format!("Fit CSV written to {}.", out.display()));
    }
    let report = Report {
        json: json!({"workload": workload, "unit": workload.unit(), "settings": settings,
            "placement": filter, "from_raw": label}),
        tables: vec![settings_table(&workload, &settings)],
        notes,
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}

/// The per-setting table.
fn settings_table(workload: &Workload, settings: &[pcp::Setting]) -> Table {
    let mut t = Table::new([
        "percpu_pagelist_high_fraction",
        "pcp->high median (pages)",
        "pcp->high min-max (pages)",
        &format!("score median ({})", workload.unit()),
        "score IQR",
        "score min-max",
        "n",
    ])
    .titled(format!(
        "{} on this host: score vs live pcp->high",
        workload.name()
    ));
    for s in settings {
        t.push([
            s.fraction.to_string(),
            format!("{:.0}", s.high.median),
            format!("{:.0}-{:.0}", s.high.min, s.high.max),
            sig(s.score.median, 4),
            format!("{}-{}", sig(s.score.q1, 4), sig(s.score.q3, 4)),
            format!("{}-{}", sig(s.score.min, 4), sig(s.score.max, 4)),
            s.score.n.to_string(),
        ]);
    }
    t
}

/// The two CPUs of a pair loop: `--cpus A,B` (`what` names them in the error), else a same-LLC
/// pair of the host (the first pair class it has); both must be online.
pub(super) fn cpu_pair(
    given: Option<&[u32]>,
    cpus: &[pcpmodel::measure::latency::HostCpu],
    what: &str,
) -> anyhow::Result<(u32, u32)> {
    let (a, b) = match given {
        Some([a, b]) => (*a, *b),
        Some(_) => anyhow::bail!("--cpus: give two CPUs, {what}"),
        None => {
            let classes = pair_classes(cpus, 1);
            classes
                .iter()
                .find(|(c, _)| *c == "same_llc")
                .or(classes.first())
                .map(|(_, p)| p[0])
                .unwrap_or((0, 0))
        }
    };
    for c in [a, b] {
        if !cpus.iter().any(|x| x.cpu == c) {
            anyhow::bail!("--cpus: CPU {c} is not online");
        }
    }
    Ok((a, b))
}

/// The real net.core.skb_defer_max file.
const SKB_DEFER_MAX_PATH: &str = "/proc/sys/net/core/skb_defer_max";

/// The journal of the skb_defer_max guard: beside the main one.
fn defer_journal(journal: &std::path::Path) -> PathBuf {
    let mut s = journal.as_os_str().to_owned();
    s.push(".skb-defer-max");
    PathBuf::from(s)
}

/// Runs `pcpmodel measure pcp`.
pub fn run(args: PcpArgs, format: Format) -> anyhow::Result<ExitCode> {
    if args.recover {
        for journal in [args.journal.clone(), defer_journal(&args.journal)] {
            match sysctl::recover(&journal)? {
                Some(r) => println!(
                    "Restored {} to {} from {}",
                    r.path.display(),
                    r.original,
                    journal.display()
                ),
                None => println!("No journal at {}: nothing to restore", journal.display()),
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(raw) = &args.from_raw {
        return from_raw(&args, raw, format);
    }
    if let Some(d) = args.skb_defer_max {
        pcpmodel::bounds::SKB_DEFER_MAX
            .check_flag("--skb-defer-max", f64::from(d))
            .map_err(anyhow::Error::msg)?;
        if args.workload == "page-fault" {
            anyhow::bail!(
                "--skb-defer-max: the page-fault workload sends no skbs; it applies to netperf-udp and af-unix"
            );
        }
    }
    let cpus = host_cpus(std::path::Path::new("/"))?;
    let ncpus = cpus.len() as u32;
    let workload = match args.workload.as_str() {
        w @ ("netperf-udp" | "af-unix") => {
            let (s, r) = cpu_pair(args.cpus.as_deref(), &cpus, "sender,receiver")?;
            if w == "af-unix" {
                Workload::AfUnix {
                    writer: s,
                    reader: r,
                }
            } else {
                Workload::NetperfUdp {
                    sender: s,
                    receiver: r,
                }
            }
        }
        "page-fault" => Workload::PageFault {
            tasks: args.tasks.unwrap_or(ncpus).max(1),
        },
        other => {
            anyhow::bail!("--workload: unknown '{other}': use netperf-udp, af-unix or page-fault")
        }
    };
    let secs = args.seconds.unwrap_or(if args.quick { 0.3 } else { 2.0 });
    if !(secs.is_finite() && secs > 0.0 && secs <= 600.0) {
        anyhow::bail!("--seconds: must be in (0, 600], got {secs}");
    }
    if !(1..=MAX_REPEATS).contains(&args.repeats) {
        anyhow::bail!(
            "--repeats {}: must be 1..={MAX_REPEATS} (each repeat runs every setting for --seconds; more than {MAX_REPEATS} would run for days)",
            args.repeats
        );
    }
    if let Some(t) = args.tasks {
        if !(1..=MAX_TASKS).contains(&t) {
            anyhow::bail!(
                "--tasks {t}: must be 1..={MAX_TASKS} (page-fault tasks are processes; PID_MAX_LIMIT is 2^22)"
            );
        }
    }
    let zi_label = args.zoneinfo.display().to_string();
    let zi_text = std::fs::read_to_string(&args.zoneinfo)
        .with_context(|| format!("cannot read {zi_label}"))?;
    let live = pcp::live_high(&zi_text, &zi_label)?;
    let fractions = match &args.fractions {
        Some(f) => {
            if let Some(bad) = f.iter().find(|&&x| x != 0 && x < 8) {
                anyhow::bail!("--fractions: {bad} is neither 0 nor >= 8 (the kernel refuses it)");
            }
            if let Some(big) = f.iter().find(|&&x| x > i32::MAX as u64) {
                anyhow::bail!(
                    "--fractions: {big} does not fit the sysctl (an int, at most {})",
                    i32::MAX
                );
            }
            if f.is_empty() || f.len() > MAX_FRACTIONS {
                anyhow::bail!("--fractions: give 1..={MAX_FRACTIONS} settings");
            }
            f.clone()
        }
        None => {
            let d = detect(std::path::Path::new("/"))?;
            let llc_pages = super::detect::modelled_machine(&d)
                .ok()
                .map(|(m, _)| m.llc_pages_per_domain())
                .unwrap_or(8192);
            let in_node0 = cpus.iter().filter(|c| c.node == 0).count() as u32;
            pcp::plan_fractions(live.managed_pages, in_node0, live.batch, llc_pages)
        }
    };
    let order = pcp::interleave(&fractions, args.repeats);
    let estimate = order.len() as f64 * (secs + 0.05);
    if let Some((la, running)) = sysctl::busy() {
        if la > 1.0 || running > 1 {
            eprintln!(
                "Warning: the machine is busy (load average {la:.2}, {running} runnable tasks in \
                 /proc/stat including this one): the scores will carry that noise"
            );
        }
    }
    // Read once, before the sweep: the warning now, the sweep's header after.
    let reporting =
        sysctl::free_page_reporting(std::path::Path::new("/sys")).filter(|r| r.active());
    if let Some(r) = reporting {
        eprintln!("Warning: {}", r.describe());
    }
    let in_node0 = cpus.iter().filter(|c| c.node == 0).count().max(1) as u64;
    if args.dry_run {
        let mut t = Table::new([
            "percpu_pagelist_high_fraction",
            "expected pcp->high (pages)",
            "how",
        ])
        .titled(format!(
            "Plan: {} on {}, {} repeat(s) interleaved, {secs} s per point, about {:.0} s",
            workload.name(),
            args.sysctl_path.display(),
            args.repeats,
            estimate
        ));
        for &f in &fractions {
            match live.managed_pages.checked_div(f) {
                None => t.push([
                    "0".to_string(),
                    "auto-tuned".into(),
                    "kernel default (read live during the run)".into(),
                ]),
                Some(per_zone) => {
                    let h = (per_zone / in_node0).max(4 * live.batch.max(0) as u64);
                    t.push([
                        f.to_string(),
                        h.to_string(),
                        format!(
                            "max({} managed / {f} / {in_node0} CPUs, 4 x batch {})",
                            live.managed_pages, live.batch
                        ),
                    ]);
                }
            }
        }
        let report = Report {
            json: json!({"dry_run": true, "workload": workload, "fractions": fractions,
                "order": order, "seconds_per_point": secs, "estimate_s": estimate,
                "sysctl": args.sysctl_path, "journal": args.journal}),
            tables: vec![t],
            notes: vec![format!(
                "Order: {}. Nothing was changed (--dry-run).",
                order
                    .iter()
                    .map(|(r, f)| format!("r{r}:{f}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )],
        };
        super::print_report(&report, format);
        return Ok(ExitCode::SUCCESS);
    }

    let (guard, recovered) = SysctlGuard::acquire(&args.sysctl_path, &args.journal)?;
    if let Some(r) = recovered {
        eprintln!(
            "Note: a journal from a run that did not finish was replayed: {} restored to {}",
            r.path.display(),
            r.original
        );
    }
    let guard = Arc::new(guard);
    let defer_guard = match args.skb_defer_max {
        Some(_) => {
            let (g, rec) =
                SysctlGuard::acquire(&args.skb_defer_max_path, &defer_journal(&args.journal))?;
            if let Some(r) = rec {
                eprintln!(
                    "Note: a journal from a run that did not finish was replayed: {} restored to {}",
                    r.path.display(),
                    r.original
                );
            }
            Some(Arc::new(g))
        }
        None => None,
    };
    let _restore_defer_on_unwind = defer_guard.as_ref().map(|g| RestoreOnDrop(Arc::clone(g)));
    // The signal thread holds a second reference, so the guard's own Drop would not run when
    // this thread unwinds from a panic: this one does.
    let _restore_on_unwind = RestoreOnDrop(Arc::clone(&guard));
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (g, st) = (Arc::clone(&guard), Arc::clone(&stop));
        let dg = defer_guard.clone();
        super::on_interrupt(move |sig| {
            st.store(true, Ordering::SeqCst);
            if let Some(dg) = &dg {
                match dg.restore() {
                    Ok(()) => eprintln!(
                        "\nInterrupted (signal {sig}): {} restored to {}",
                        dg.path().display(),
                        dg.original()
                    ),
                    Err(e) => eprintln!("\nInterrupted (signal {sig}); restoring failed: {e}"),
                }
            }
            match g.restore() {
                Ok(()) => eprintln!(
                    "\nInterrupted (signal {sig}): {} restored to {}",
                    g.path().display(),
                    g.original()
                ),
                Err(e) => eprintln!("\nInterrupted (signal {sig}); restoring failed: {e}"),
            }
        })?;
    }
    // Set only once the handler is in place: a signal in between would end the process with
    // the sysctl changed and nothing restoring it.
    if let (Some(g), Some(d)) = (&defer_guard, args.skb_defer_max) {
        g.set(u64::from(d))?;
    }
    if args.realtime {
        if let Err(e) = pcpmodel::measure::latency::set_fifo(true) {
            eprintln!("Warning: SCHED_FIFO refused ({e}): running under time sharing");
        }
    }
    let pb = super::progress_bar(order.len() as u64, args.no_progress);
    let result = pcp::sweep(
        &guard,
        &workload,
        &order,
        secs,
        ncpus,
        &args.zoneinfo,
        &stop,
        &mut |done, _total, f| {
            pb.set_position(done as u64);
            pb.set_message(format!("fraction {f}"));
        },
    );
    pb.finish_and_clear();
    if args.realtime {
        let _ = pcpmodel::measure::latency::set_fifo(false);
    }
    guard.restore()?;
    let defer_note = match &defer_guard {
        Some(g) => {
            g.restore()?;
            let now = std::fs::read_to_string(g.path())
                .unwrap_or_default()
                .trim()
                .to_string();
            Some((now == g.original(), now, g.original().to_string()))
        }
        None => None,
    };
    let points = result?;
    let now = std::fs::read_to_string(&args.sysctl_path)
        .unwrap_or_default()
        .trim()
        .to_string();
    let restored_ok = now == guard.original() && defer_note.as_ref().is_none_or(|(ok, _, _)| *ok);
    let (settings, filter) = summary(&fractions, &points, args.all_placements);
    let csv = sweep_csv(
        &workload,
        &settings,
        &points,
        filter.as_ref(),
        args.skb_defer_max,
        reporting,
        Some(secs),
    );
    if let Some(out) = &args.output {
        std::fs::write(out, &csv).with_context(|| format!("cannot write {}", out.display()))?;
    }
    if let Some(raw) = &args.raw {
        std::fs::write(raw, pcp::raw_csv(&workload, &points))
            .with_context(|| format!("cannot write {}", raw.display()))?;
    }
    let t = settings_table(&workload, &settings);
    let mut notes = vec![format!(
        "{} is back at {} (original {}){}.",
        args.sysctl_path.display(),
        now,
        guard.original(),
        if now == guard.original() {
            ""
        } else {
            ": NOT RESTORED"
        }
    )];
    if let Some(f) = &filter {
        notes.push(format!("{}.", f.describe()));
    }
    if let Some((ok, now, original)) = &defer_note {
        notes.push(format!(
            "{} was {} during the sweep and is back at {now} (original {original}){}.",
            args.skb_defer_max_path.display(),
            args.skb_defer_max.unwrap_or_default(),
            if *ok { "" } else { ": NOT RESTORED" }
        ));
    }
    if let Ok(text) = std::fs::read_to_string(&args.zoneinfo) {
        let low = pcp::below_high_min(&text, &zi_label).unwrap_or_default();
        if !low.is_empty() {
            notes.push(format!(
                "Live pcp->high left below high_min ({}): the kernel raises it only on that \
                 zone's next allocation or free on that CPU (decay_pcp_high() only lowers it); \
                 the sysctl itself is restored.",
                low.join("; ")
            ));
        }
    }
    if let Some(out) = &args.output {
        notes.push(format!(
            "Fit CSV written to {} (pcpmodel fit --workload netperf-pcp-high --data {}).",
            out.display(),
            out.display()
        ));
    }
    let report = Report {
        json: json!({"workload": workload, "unit": workload.unit(), "settings": settings,
            "points": points, "sysctl_restored": restored_ok, "original": guard.original(),
            "skb_defer_max": args.skb_defer_max, "placement": filter}),
        tables: vec![t],
        notes,
    };
    super::print_report(&report, format);
    Ok(if restored_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
