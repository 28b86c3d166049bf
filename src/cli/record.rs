//! `pcpmodel record`: a workload's page flow from the kmem tracepoints, as a flow file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use pcpmodel::measure::record::{self, tracefs, Prepared, RecordConfig};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel record`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Records every page allocation and free (mm_page_alloc, mm_page_free; a batched free is traced
by mm_page_free too, so mm_page_free_batched only marks a task inside the pcp lock) with its
CPU, task and order, and the kernel's refills (mm_page_alloc_zone_locked with percpu_refill=1,
grouped per rmqueue_bulk() call) and drains (mm_page_pcpu_drain, grouped per
free_pcppages_bulk() call, with the pages each list gave), while CMD runs or for --seconds.
The flow file holds per CPU the runs of allocations and frees by order, migratetype and task
(a free's type is its pageblock's, as the recording saw it allocated, refilled or drained), the
recorded refills and drains, each zone's pagesets from /proc/zoneinfo at the start (read last,
right before tracing starts) and the end, the kernel version and the sysctls that decide the
flow (vm.percpu_pagelist_high_fraction, net.core.skb_defer_max). It is text, one line per run,
written as the trace streams in. A free in interrupt context while the task holds the pcp
lock goes past the lists (a `b` line).

Needs root. tracefs is mounted if no mount is found. Every tracefs file changed (tracing_on,
buffer_size_kb, the events' enable) is journalled first and restored on every exit: a normal
end, an error, Ctrl-C, SIGTERM; after a SIGKILL, `pcpmodel record --recover` restores from the
journal (and the next recording does so before it starts).

Before the start, any pageset holding more than its high_max is drained through
/proc/sys/vm/stat_refresh (--no-settle skips it): lowering vm.percpu_pagelist_high_fraction frees
nothing, and a recording made right after would show the old setting's pages draining.

With --drain-first every CPU's lists are drained to the smallest high (batch x 4 pages) right
before the start, so that recordings at several settings start alike, whatever ran before them,
and `replay` at another setting starts as they do.

Examples:
  sudo pcpmodel record --drain-first -o make.flow -- make -j2
  sudo pcpmodel record --seconds 10 -o udp.flow -- netperf -t UDP_STREAM -l 10
  sudo pcpmodel record --seconds 5 --cpus 0,1 -o idle.flow
  sudo pcpmodel record --recover")]
pub struct RecordArgs {
    /// Seconds to record: the whole system for this long without a command; with a command,
    /// at most this long (the command is then killed).
    #[arg(long, value_parser = super::args::bounded::<f64>(&super::args::ranges::RECORD_SECONDS))]
    pub seconds: Option<f64>,
    /// The flow file to write.
    #[arg(
        short = 'o',
        long,
        value_name = "FLOW",
        default_value = "pcpmodel.flow"
    )]
    pub output: PathBuf,
    /// Keep only these CPUs' events (comma separated; default every CPU).
    #[arg(long, value_delimiter = ',', value_parser = super::args::bounded::<u32>(&super::args::ranges::CPU_ID))]
    pub cpus: Option<Vec<u32>>,
    /// Per-CPU trace buffer during the recording, KiB.
    #[arg(long, default_value_t = 16384, value_parser = super::args::bounded::<u64>(&super::args::ranges::TRACE_BUFFER_KB))]
    pub buffer_kb: u64,
    /// Journal of the tracefs values (lets a later run restore after a SIGKILL).
    #[arg(long, default_value = record::DEFAULT_JOURNAL)]
    pub journal: PathBuf,
    /// Only replay the journal (restore what a killed recording left changed) and exit.
    #[arg(long)]
    pub recover: bool,
    /// Start from the lists as they are. By default, a pageset holding more than its high_max
    /// (what the sysctl last allowed, before it was lowered) is first drained by writing
    /// /proc/sys/vm/stat_refresh (the vmstat worker's decay, run now), so that the recording
    /// shows the workload at this setting, not the previous setting's leftovers draining.
    #[arg(long)]
    pub no_settle: bool,
    /// Bring every CPU's lists down to the smallest high (batch x 4 pages) right before the
    /// start: vm.percpu_pagelist_high_fraction is set to its largest value for a moment (journalled
    /// like the tracefs files, so a signal or `--recover` puts it back) and the vmstat decay
    /// drains the lists to that high; the sysctl is back before tracing starts, and the recorded
    /// command may then set it.
    /// Recordings at several settings then start alike instead of from whatever ran before,
    /// and `replay` at another setting starts as they do: the protocol for checking a replay
    /// against recordings at other settings. Linux 6.7+.
    #[arg(long)]
    pub drain_first: bool,
    /// tracefs directory (default: found, or mounted at /sys/kernel/tracing).
    #[arg(long, hide = true)]
    pub tracefs: Option<PathBuf>,
    /// Root of /proc (zoneinfo, osrelease, sysctls).
    #[arg(long, hide = true, default_value = "/proc")]
    pub proc: PathBuf,
    /// The CPUs' sysfs directory (their caches).
    #[arg(long, hide = true, default_value = "/sys/devices/system/cpu")]
    pub sys_cpu: PathBuf,
    /// The command to record, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn say_recovered(r: &tracefs::Recovered, journal: &std::path::Path) -> String {
    format!(
        "restored {} tracefs file(s){} from {}",
        r.restored.len(),
        r.unmounted
            .as_ref()
            .map_or(String::new(), |m| format!(" and unmounted {}", m.display())),
        journal.display()
    )
}

/// Runs `pcpmodel record`.
pub fn run(args: RecordArgs, format: Format) -> anyhow::Result<ExitCode> {
    if args.recover {
        match tracefs::recover(&args.journal)? {
            Some(r) => println!("{}", say_recovered(&r, &args.journal)),
            None => println!(
                "No journal at {}: nothing to restore",
                args.journal.display()
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = RecordConfig {
        tracefs: args.tracefs.clone(),
        proc_root: args.proc.clone(),
        cpu_root: args.sys_cpu.clone(),
        seconds: args.seconds,
        command: args.command.clone(),
        cpus: args.cpus.clone().unwrap_or_default(),
        buffer_kb: args.buffer_kb,
        output: args.output.clone(),
        journal: args.journal.clone(),
        settle: !args.no_settle,
        drain_first: args.drain_first,
    };
    let prepared = Prepared::new(cfg)?;
    if let Some(r) = &prepared.recovered {
        eprintln!(
            "Note: a journal from a recording that did not finish was replayed: {}",
            say_recovered(r, &args.journal)
        );
    }
    let partial = record::partial_path(&args.output);
    {
        // Weak: a panic unwinding the recording drops the last strong reference, and the
        // guard's own Drop restores.
        let g = Arc::downgrade(&prepared.guard);
        let partial = partial.clone();
        super::on_interrupt(move |sig| {
            match g.upgrade().map_or(Ok(()), |g| g.restore()) {
                Ok(()) => eprintln!("\nInterrupted (signal {sig}): tracefs restored"),
                Err(e) => eprintln!("\nInterrupted (signal {sig}); restoring failed: {e}"),
            }
            let _ = std::fs::remove_file(&partial);
        })?;
    }
    let pb = super::progress_bar(0, false);
    let s = prepared.run(&mut |secs, lines| {
        pb.set_message(format!("recording: {secs:.1} s, {lines} flow lines"));
        pb.tick();
    });
    pb.finish_and_clear();
    let s = match s {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
    };
    let mut t = Table::new([
        "CPU",
        "allocations",
        "pages allocated",
        "frees",
        "pages freed",
        "refills",
        "pages per refill",
        "drains",
        "pages per drain",
        "lost events",
    ])
    .titled(format!(
        "{} s recorded on kernel {} into {} ({} lines, {} bytes)",
        sig(s.end.seconds, 3),
        s.meta.kernel,
        s.output,
        s.end.lines,
        s.bytes
    ));
    let per = |pages: u64, n: u64| {
        if n == 0 {
            "-".to_string()
        } else {
            sig(pages as f64 / n as f64, 3)
        }
    };
    for (cpu, c) in &s.end.cpus {
        t.push([
            cpu.clone(),
            c.allocs.to_string(),
            c.alloc_pages.to_string(),
            c.frees.to_string(),
            c.free_pages.to_string(),
            c.refills.to_string(),
            per(c.refill_pages, c.refills),
            c.drains.to_string(),
            per(c.drain_pages, c.drains),
            c.lost.to_string(),
        ]);
    }
    let mut notes =
        vec!["tracefs restored (tracing_on, buffer_size_kb, the events' enable).".to_string()];
    if let Some(settled) = &s.meta.settled {
        notes.push(format!(
            "Before the start: {settled} (lowering the sysctl frees nothing; --no-settle records the drain instead)."
        ));
    }
    if let Some(drained) = &s.meta.drained {
        notes.push(format!(
            "Drained before the start (--drain-first): {drained}."
        ));
    }
    for (name, v) in &s.end.sysctl_during {
        notes.push(format!(
            "{name} was {} at the start and {v} for most of the recording (the command set it): the flow carries {v}.",
            s.meta.sysctl.get(name).map_or("unset".to_string(), |x| x.to_string())
        ));
    }
    if s.frees_direct > 0 {
        notes.push(format!(
            "{} frees came in interrupt context while their CPU's pcp lock was held: they went to the buddy allocator past the lists (`b` lines).",
            s.frees_direct
        ));
    }
    let lost: u64 = s.end.cpus.values().map(|c| c.lost).sum();
    if lost > 0 {
        notes.push(format!(
            "The trace lost {lost} events (the reader fell behind): raise --buffer-kb or record fewer CPUs; runs around a loss are cut short."
        ));
    }
    if let Some(code) = s.command_status {
        if code != 0 {
            notes.push(format!("The command exited with status {code}."));
        }
    }
    let report = Report {
        json: json!({"output": s.output, "bytes": s.bytes, "meta": s.meta, "end": s.end,
            "command_status": s.command_status, "skipped_lines": s.skipped_lines,
            "direct_zone_locked": s.direct_zone_locked, "frees_direct": s.frees_direct}),
        tables: vec![t],
        notes,
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
