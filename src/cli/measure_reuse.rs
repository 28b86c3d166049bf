//! `pcpmodel measure reuse`: the time per page of a producer/consumer data path by reuse
//! distance on this host, beside the model's cache term for the same distances.

use std::process::ExitCode;

use pcpmodel::hw::machine::Machine;
use pcpmodel::measure::latency::host_cpus;
use pcpmodel::measure::reuse::{self, DEFAULT_DISTANCES};
use pcpmodel::model::cache::{page_access_cost, Hierarchy, Placement, ReuseDist};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel measure reuse`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
A writer thread copies 64 KiB chunks into a ring of buffers and a reader thread copies each out
(the writer at most 3 chunks ahead, as a socket's send buffer keeps it); the writer returns to a
chunk after the whole ring. The ring's size is the reuse distance: the pages of other traffic
between a page's free and its next allocation, which pcp->high sets in the kernel's flow. No
kernel is involved and nothing is changed; no root needed.

Beside each measured time the model's cache term for the same distance on --machine (default:
the detected host; give the machine file `measure latency --toml` wrote to use its latencies):
lines found in the other core's private cache, the LLC and DRAM (crate::model::cache). Both are
also shown as the increase over the smallest distance, which is what moves a pcp->high sweep.

Examples:
  pcpmodel measure reuse --seconds 0.2
  pcpmodel measure reuse --machine data/host/host-idle-2026-12-01.toml --distances 64,4096,65536")]
pub struct ReuseArgs {
    /// Writer and reader CPUs (default: a same-LLC pair).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Option<Vec<u32>>,
    /// Reuse distances, pages of 4 KiB (rounded up to whole 64 KiB chunks, at least 4 chunks).
    #[arg(long, value_delimiter = ',')]
    pub distances: Option<Vec<u64>>,
    /// Seconds timed per distance.
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Rounds over the distances (interleaved; the table shows medians).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Machine whose model is shown beside (built-in name or TOML file; default: detected).
    #[arg(long)]
    pub machine: Option<String>,
    /// Run both threads SCHED_FIFO (root): two spinning threads on a busy machine otherwise
    /// wait for each other's time slices, not for their caches.
    #[arg(long)]
    pub realtime: bool,
}

/// Runs `pcpmodel measure reuse`.
pub fn run(args: ReuseArgs, format: Format) -> anyhow::Result<ExitCode> {
    let cpus = host_cpus(std::path::Path::new("/"))?;
    let (w, r) = super::measure_pcp::cpu_pair(args.cpus.as_deref(), &cpus, "writer,reader")?;
    if !(1..=100).contains(&args.repeats) {
        anyhow::bail!("--repeats {}: must be 1..=100", args.repeats);
    }
    let distances = args
        .distances
        .clone()
        .unwrap_or_else(|| DEFAULT_DISTANCES.to_vec());
    if distances.is_empty() || distances.len() > 64 {
        anyhow::bail!("--distances: give 1..=64 distances");
    }
    if let Some(d) = distances.iter().find(|&&d| d == 0) {
        anyhow::bail!("--distances: {d} pages: a distance is at least one page");
    }
    let machine = match &args.machine {
        Some(m) => Machine::resolve(m)?,
        None => {
            let d = pcpmodel::hw::detect::detect(std::path::Path::new("/"))?;
            super::detect::modelled_machine(&d)?.0
        }
    };
    let h = Hierarchy::from_machine(&machine, Placement::SameLlc)?;
    let mlp = pcpmodel::assumptions::value("netperf::mlp_lines", 10.0);
    if let Some((la, running)) = pcpmodel::measure::latency::loadavg() {
        if la > 0.5 || running > 1 {
            eprintln!(
                "Warning: the machine is busy (load average {la:.2}, {running} running tasks including this one): the two spinning threads will wait for time slices{}",
                if args.realtime { "" } else { "; --realtime (root) helps" }
            );
        }
    }
    if args.realtime {
        if let Err(e) = pcpmodel::measure::latency::set_fifo(true) {
            eprintln!("Warning: SCHED_FIFO refused ({e}): running under time sharing");
        }
    }
    let pb = super::progress_bar((distances.len() * args.repeats) as u64, false);
    // (ns per page, c2c one way just before) per distance.
    let mut samples: Vec<Vec<(f64, Option<f64>)>> = vec![Vec::new(); distances.len()];
    let mut ring_pages = vec![0u64; distances.len()];
    for rep in 0..args.repeats {
        // Interleaved, rotated each round: drift spreads over every distance.
        for j in 0..distances.len() {
            let i = (j + rep) % distances.len();
            // Where the hypervisor has the two vCPUs right now (ping-pong, 5 x 5000 round trips).
            let c2c = if w == r {
                None
            } else {
                pcpmodel::measure::latency::ping_pong(w, r, 5000, 5)
                    .ok()
                    .and_then(|v| pcpmodel::measure::Spread::of(&v))
                    .map(|s| s.median)
            };
            let p = reuse::measure_distance(w, r, distances[i], args.seconds)?;
            samples[i].push((p.ns_per_page, c2c));
            ring_pages[i] = p.distance_pages;
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    // The samples of the dominant placement (the machine file's c2c is that mode's), unless
    // the c2c times form one mode.
    let all_c2c: Vec<f64> = samples.iter().flatten().filter_map(|s| s.1).collect();
    let modes = pcpmodel::measure::latency::modes(&all_c2c);
    let in_dominant = |c: Option<f64>| match (c, modes.as_slice()) {
        (Some(c), [a, b, ..]) => (c / a.median).ln().abs() <= (c / b.median).ln().abs(),
        _ => true,
    };
    let placement_note = (modes.len() >= 2).then(|| {
        format!(
            "c2c before each sample in two placements, {:.0} ns ({:.0} %) and {:.0} ns: the medians keep the samples of the first; a distance with none there keeps all",
            modes[0].median,
            100.0 * modes[0].share,
            modes[1].median
        )
    });
    let kept: Vec<Vec<f64>> = samples
        .iter()
        .map(|s| {
            let dom: Vec<f64> = s.iter().filter(|x| in_dominant(x.1)).map(|x| x.0).collect();
            if dom.is_empty() {
                s.iter().map(|x| x.0).collect()
            } else {
                dom
            }
        })
        .collect();
    if args.realtime {
        let _ = pcpmodel::measure::latency::set_fifo(false);
    }
    let median = |v: &[f64]| pcpmodel::measure::Spread::of(v).map_or(f64::NAN, |s| s.median);
    let meas: Vec<f64> = kept.iter().map(|s| median(s)).collect();
    let model: Vec<_> = ring_pages
        .iter()
        .map(|&d| page_access_cost(&h, &ReuseDist::uniform(d as f64, d as f64), 0.0, mlp))
        .collect();
    let (m0, c0) = (meas[0], model[0].total_ns);
    let mut t = Table::new([
        "distance (pages)",
        "distance (MiB)",
        "measured ns/page (median)",
        "measured increase",
        "model cache ns/page (private+LLC+DRAM)",
        "model increase",
    ])
    .titled(format!(
        "Reuse cost by distance: writer CPU {w}, reader CPU {r}; model on {}",
        machine.name
    ));
    let mut rows = Vec::new();
    for (i, &d) in ring_pages.iter().enumerate() {
        let c = &model[i];
        t.push([
            d.to_string(),
            sig(d as f64 / 256.0, 3),
            sig(meas[i], 4),
            format!("{:+.1}", meas[i] - m0),
            format!(
                "{} ({}+{}+{})",
                sig(c.total_ns, 4),
                sig(c.private_ns, 3),
                sig(c.llc_ns, 3),
                sig(c.dram_ns, 3)
            ),
            format!("{:+.1}", c.total_ns - c0),
        ]);
        let (ns, c2c): (Vec<f64>, Vec<Option<f64>>) = samples[i].iter().copied().unzip();
        rows.push(json!({"distance_pages": d, "measured_ns_per_page": meas[i],
            "samples_ns_per_page": ns, "samples_c2c_ns": c2c, "n_kept": kept[i].len(),
            "model_ns_per_page": c.total_ns,
            "model_private_ns": c.private_ns, "model_llc_ns": c.llc_ns, "model_dram_ns": c.dram_ns}));
    }
    let report = Report {
        json: json!({"writer_cpu": w, "reader_cpu": r, "machine": machine.name,
            "placements": modes, "placement_note": placement_note,
            "seconds": args.seconds, "repeats": args.repeats, "mlp_lines": mlp, "rows": rows}),
        tables: vec![t],
        notes: std::iter::once(format!(
            "The measured time includes both copies at every distance; the model's column is its cache term alone ({mlp} lines in flight), so compare the increases."
        ))
        .chain(placement_note.clone())
        .collect(),
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
