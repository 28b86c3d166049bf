//! `pcpmodel measure backing`: what the hypervisor adds to the first touch of a guest page it
//! dropped (free page reporting), the cost a growing per-CPU list pays for each page it pulls.

use std::process::ExitCode;

use pcpmodel::hw::provenance::Sourced;
use pcpmodel::measure::backing;
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel measure backing`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
On a VM with free page reporting (virtio-balloon: /sys/module/page_reporting) the guest hands
free blocks of 2^page_reporting_order pages and up to the host, which drops them; the next touch
of such a page faults in the host. When a per-CPU list grows (a larger pcp->high, or a list
refilling after the vmstat decay drained it) it pulls its pages from the buddy allocator, and
many of them are dropped ones: each costs this much more than a page the host still backs.

The command populates an anonymous region, first from memory that has been free for a while (in
64 MiB chunks, timed one by one), then --again times in a row (the same pages, backed now): the
first pass's cost less the later ones' median is the host's part. The chunks show how much free
memory the host still backed (the first ones, as cheap as the later passes) and what a dropped
page costs (the rest). Run it when the VM has been quiet
for a minute, so that the reporting has caught up. No root needed; nothing is changed.

--output writes --machine with memory.backing_ns_per_page set: `predict --run-seconds` and
`compare` then price the fill of a list in a run of finite length (a steady state has no fill).

Examples:
  pcpmodel measure backing
  pcpmodel measure backing --mib 4096 --machine host.toml --output host.toml")]
pub struct BackingArgs {
    /// Region to populate, MiB (default: a quarter of MemAvailable, at most 4096).
    #[arg(long, value_parser = super::args::bounded::<u64>(&super::args::ranges::BACKING_MIB))]
    pub mib: Option<u64>,
    /// Passes after the first (the table shows their median).
    #[arg(long, default_value_t = 3, value_parser = super::args::bounded::<usize>(&super::args::ranges::SWEEP_REPEATS))]
    pub again: usize,
    /// Machine to write the measured cost into (built-in name or TOML file; default: detected).
    #[arg(long)]
    pub machine: Option<String>,
    /// Write --machine with memory.backing_ns_per_page set here (the report still goes to
    /// stdout).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Runs `pcpmodel measure backing`.
pub fn run(args: BackingArgs, format: Format) -> anyhow::Result<ExitCode> {
    let available = mem_available_mib();
    let mib = match args.mib {
        Some(m) => {
            if let Some(a) = available {
                if m > a / 2 {
                    anyhow::bail!(
                        "--mib {m}: more than half of the {a} MiB available; the region is populated in one call and would push the host into reclaim"
                    );
                }
            }
            m
        }
        None => available.map_or(1024, |a| (a / 4).clamp(1, 4096)),
    };
    let machine = super::machine_file::to_write(args.machine.as_deref(), args.output.is_some())?;
    let root = std::path::Path::new("/");
    let r = backing::measure(root, mib, args.again)?;
    let date = pcpmodel::measure::today_utc();
    let mut sorted = r.again_ns_per_page.clone();
    sorted.sort_by(f64::total_cmp);
    let mut t = Table::new(["pass", "ns per 4 KiB page"]).titled(format!(
        "Populating {mib} MiB of anonymous memory (allocate, zero, map; the first pass by MADV_POPULATE_WRITE in {} MiB chunks, the others by MAP_POPULATE)",
        pcpmodel::measure::backing::CHUNK_MIB
    ));
    t.push([
        "first (memory free for a while)".to_string(),
        sig(r.fresh_ns_per_page, 4),
    ]);
    for (i, x) in r.again_ns_per_page.iter().enumerate() {
        t.push([format!("again {}", i + 1), sig(*x, 4)]);
    }
    t.push([
        "host's part: first - median(again)".to_string(),
        sig(r.backing_ns_per_page, 4),
    ]);
    if !r.fresh_chunks_ns_per_page.is_empty() {
        t.push([
            "a page the host dropped: first-pass chunks after the backed ones - median(again)"
                .to_string(),
            r.dropped_ns_per_page.map_or("-".into(), |x| sig(x, 4)),
        ]);
    }
    let mut notes = vec![match (r.reporting_order, r.reported_mib_before) {
        (Some(o), Some(mib_rep)) => format!(
            "Free page reporting is on (page_reporting_order {o}: blocks of {} MiB and up); {} MiB reported to the host since boot. A page a growing list pulls from the buddy allocator costs up to {} ns more where the host dropped it.",
            sig((1u64 << o) as f64 * 4096.0 / 1048576.0, 3),
            sig(mib_rep, 4),
            sig(r.backing_ns_per_page, 3)
        ),
        (Some(o), None) => format!(
            "Free page reporting is on (page_reporting_order {o}). A page a growing list pulls from the buddy allocator costs up to {} ns more where the host dropped it.",
            sig(r.backing_ns_per_page, 3)
        ),
        _ => "No free page reporting here (/sys/module/page_reporting is absent): the host drops no free guest memory, so after the first touch since boot a list's pages cost nothing extra; the difference above is the spread of the passes.".to_string(),
    }];
    if !r.fresh_chunks_ns_per_page.is_empty() {
        notes.push(format!(
            "The first pass in {} MiB chunks: the first {} MiB came from free memory the host still backed (the guest keeps recently freed memory unreported for a while); the average above mixes them with the dropped pages{}. The machine file takes the average: a list's fill draws on both.",
            pcpmodel::measure::backing::CHUNK_MIB,
            r.backed_head_mib,
            r.dropped_ns_per_page.map_or(String::new(), |x| format!(", which cost {} ns more each", sig(x, 3)))
        ));
    }
    if let (Some(m), Some(path)) = (&machine, &args.output) {
        let mut m = m.clone();
        let source = format!(
            "measured: pcpmodel measure backing on {date}: {mib} MiB populated first after the memory was free ({} ns per page) and {} times right after ({}-{} ns per page), the difference{}",
            sig(r.fresh_ns_per_page, 4),
            r.again_ns_per_page.len(),
            sig(sorted[0], 4),
            sig(sorted[sorted.len() - 1], 4),
            match r.reporting_order {
                Some(o) => format!(", with free page reporting at order {o}"),
                None => ", without free page reporting".to_string(),
            }
        );
        m.memory.backing_ns_per_page = Some(Sourced::new(
            (r.backing_ns_per_page * 10.0).round() / 10.0,
            source,
        ));
        super::machine_file::write(
            &m,
            &format!(
                "memory.backing_ns_per_page measured by `pcpmodel measure backing` on {date}."
            ),
            "the measured backing",
            Some(path),
        )?;
        notes.push(format!(
            "{} written with memory.backing_ns_per_page = {} ns/page.",
            path.display(),
            sig(r.backing_ns_per_page, 4)
        ));
    }
    let report = Report {
        json: json!({"mib": mib, "run": r, "date_utc": date}),
        tables: vec![t],
        notes,
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
