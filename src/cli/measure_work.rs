//! `pcpmodel measure work`: a host loop's work per page with every line local (one CPU, the
//! send and the receive of each chunk alternating), the fixed work of the model's
//! producer/consumer kind on this machine.

use std::process::ExitCode;

use pcpmodel::hw::provenance::Sourced;
use pcpmodel::measure::latency::host_cpus;
use pcpmodel::measure::work::{self, StageLoop};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// The loops `measure work` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkLoop {
    /// UDP over loopback, 65,507-byte datagrams (the model's netperf-udp)
    NetperfUdp,
    /// An AF_UNIX stream socket pair, 64 KiB writes and reads (the model's lmbench-af-unix)
    AfUnix,
}

/// Arguments of `pcpmodel measure work`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
One thread on one CPU sends a chunk and receives it, over and over, timing each call: the pages
the send allocates are freed by the receive on the same CPU and reused from the top of its
per-CPU list, hot in its own caches, so no line moves between cores and the zone->lock is seldom
taken. What each call costs is then the stage's own work: protocol, copies at cache speed,
system calls. In `measure pcp`'s two-CPU stream the two stages run in parallel and the slower
one sets the rate; the model's fixed work per page is that stage's work, to which it adds what
the page's lines cost where pcp->high puts them and the zone->lock's line transfers.

--output writes --machine (default: the detected host) with the slower stage's median as
work_ns_per_page for the workload that models the loop (netperf-udp, lmbench-af-unix). The model
then uses it on that machine instead of thread 004's work carried over in cycles; it is measured
apart from any sweep, so a `compare` against a sweep stays blind. No root needed; nothing on the
host is changed.

Examples:
  pcpmodel measure work --workload netperf-udp
  pcpmodel measure work --workload af-unix --machine data/host/host-idle-2026-12-01.toml --output host.toml")]
pub struct WorkArgs {
    /// The loop to time.
    #[arg(long, value_enum)]
    pub workload: WorkLoop,
    /// CPU both stages run on (default: the first allowed CPU).
    #[arg(long, value_parser = super::args::bounded::<u32>(&super::args::ranges::CPU_ID))]
    pub cpu: Option<u32>,
    /// Seconds per run.
    #[arg(long, default_value_t = 1.0, value_parser = super::args::bounded::<f64>(&super::args::ranges::POINT_SECONDS))]
    pub seconds: f64,
    /// Runs (the table shows medians and the spread).
    #[arg(long, default_value_t = 5, value_parser = super::args::bounded::<usize>(&super::args::ranges::SWEEP_REPEATS))]
    pub repeats: usize,
    /// Machine to write the measured work into (built-in name or TOML file; default: detected).
    #[arg(long)]
    pub machine: Option<String>,
    /// Write --machine with the measured work_ns_per_page added here (the report still goes
    /// to stdout).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

/// Runs `pcpmodel measure work`.
pub fn run(args: WorkArgs, format: Format) -> anyhow::Result<ExitCode> {
    let l = match args.workload {
        WorkLoop::NetperfUdp => StageLoop::Udp,
        WorkLoop::AfUnix => StageLoop::AfUnix,
    };
    let cpus = host_cpus(std::path::Path::new("/"))?;
    let allowed = pcpmodel::measure::latency::allowed_cpus();
    let cpu = match args.cpu {
        Some(c) => {
            if !cpus.iter().any(|x| x.cpu == c) {
                anyhow::bail!("--cpu {c}: CPU {c} is not online");
            }
            c
        }
        None => allowed
            .first()
            .copied()
            .or_else(|| cpus.first().map(|x| x.cpu))
            .unwrap_or(0),
    };
    let machine = super::machine_file::to_write(args.machine.as_deref(), args.output.is_some())?;
    if let Some((la, running)) = pcpmodel::measure::latency::loadavg() {
        if la > 0.5 || running > 1 {
            eprintln!(
                "Warning: the machine is busy (load average {la:.2}, {running} running tasks including this one): another task on CPU {cpu} adds its time to the calls"
            );
        }
    }
    let pb = super::progress_bar(1, args.seconds * args.repeats as f64 <= 1.0);
    pb.set_message(format!("{} on CPU {cpu}", l.name()));
    let r = work::measure(l, cpu, args.seconds, args.repeats)?;
    pb.finish_and_clear();
    let [sn, rn] = l.stage_names();
    let date = pcpmodel::measure::today_utc();
    let mut t =
        Table::new(["stage", "median (ns/page)", "IQR", "min-max", "runs"]).titled(format!(
            "{} on CPU {cpu}: work per 4 KiB page with every line local ({} s x {} runs)",
            l.name(),
            args.seconds,
            args.repeats
        ));
    for (name, s) in [(sn, &r.send), (rn, &r.recv)] {
        t.push([
            name.to_string(),
            sig(s.median, 4),
            format!("{}-{}", sig(s.q1, 4), sig(s.q3, 4)),
            format!("{}-{}", sig(s.min, 4), sig(s.max, 4)),
            s.n.to_string(),
        ]);
    }
    let bottleneck = r.bottleneck_ns_per_page();
    let slower = r.bottleneck_stage(l);
    let slow = r.bottleneck();
    let mut notes = vec![format!(
        "The slower stage is the {slower} ({} ns/page): in a two-CPU stream it sets the rate before any line moves; that is the model's fixed work for {} on this machine.",
        sig(bottleneck, 4),
        l.model_workload()
    )];
    if let (Some(m), Some(path)) = (&machine, &args.output) {
        let mut m = m.clone();
        let source = format!(
            "measured: pcpmodel measure work --workload {} on {date}, CPU {cpu}, {} runs of {} s: the {slower} stage's median with every line local (IQR {}-{} ns per page; {sn} {} / {rn} {} ns per page), apart from any pcp->high sweep",
            l.name(),
            args.repeats,
            args.seconds,
            sig(slow.q1, 4),
            sig(slow.q3, 4),
            sig(r.send.median, 4),
            sig(r.recv.median, 4),
        );
        m.work_ns_per_page.insert(
            l.model_workload().to_string(),
            Sourced::new((bottleneck * 10.0).round() / 10.0, source),
        );
        super::machine_file::write(
            &m,
            &format!(
                "work_ns_per_page.{} measured by `pcpmodel measure work` on {date}.",
                l.model_workload()
            ),
            "the measured work",
            Some(path),
        )?;
        notes.push(format!(
            "{} written with work_ns_per_page.{} = {} ns/page.",
            path.display(),
            l.model_workload(),
            sig(bottleneck, 4)
        ));
    }
    let report = Report {
        json: json!({"workload": l.name(), "model_workload": l.model_workload(), "cpu": cpu,
            "seconds": args.seconds, "repeats": args.repeats,
            "stages": {sn: r.send, rn: r.recv}, "runs": r.runs,
            "bottleneck_stage": slower, "work_ns_per_page": bottleneck}),
        tables: vec![t],
        notes,
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
