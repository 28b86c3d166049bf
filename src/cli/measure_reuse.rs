//! `pcpmodel measure reuse`: the time per page of a producer/consumer data path by reuse
//! distance on this host, beside the model's cache term for the same distances.

use std::process::ExitCode;

use pcpmodel::hw::machine::Machine;
use pcpmodel::measure::latency::host_cpus;
use pcpmodel::measure::reuse;
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

The measured time less a copy between cached buffers (the copy's own work, which the model counts
as fixed work) is what reuse adds. Least squares over the model's hit probabilities at each distance
(non-negative) gives a cost per page for each level: --toml writes them into the machine file as
reuse_ns_per_page, which then replaces latency x lines / lines in flight for two cores of one LLC
domain. Give distances inside the L2, inside the LLC and beyond it: the defaults do (64 pages up
to the machine's caches, then 2x and 4x what its L2 and LLC hold, at most 4 GiB).

The ring's 32 KiB blocks are scattered by default, as the kernel's order-3 page frags are
(--layout sequential lays them in address order, where prefetch streams across blocks).

--from-json FILE fits an earlier run's samples again (its `--format json` output) without
measuring: the costs per level as this version of the model fits them, for --machine.

Examples:
  pcpmodel measure reuse --seconds 0.2
  pcpmodel measure reuse --realtime --repeats 10 --machine data/host/host-idle-2026-12-01.toml --output host-reuse.toml
  pcpmodel measure reuse --machine data/host/host-idle-2026-12-01.toml --distances 64,4096,65536
  pcpmodel measure reuse --from-json reuse.json --machine host.toml --output host.toml")]
pub struct ReuseArgs {
    /// Writer and reader CPUs (default: a same-LLC pair).
    #[arg(long, value_delimiter = ',', value_parser = super::args::bounded::<u32>(&super::args::ranges::CPU_ID))]
    pub cpus: Option<Vec<u32>>,
    /// Reuse distances, pages of 4 KiB (rounded up to whole 64 KiB chunks, at least 4 chunks).
    #[arg(long, value_delimiter = ',', value_parser = super::args::bounded::<u64>(&super::args::ranges::REUSE_DISTANCE))]
    pub distances: Option<Vec<u64>>,
    /// Seconds timed per distance.
    #[arg(long, default_value_t = 0.5, value_parser = super::args::bounded::<f64>(&super::args::ranges::POINT_SECONDS))]
    pub seconds: f64,
    /// Rounds over the distances (interleaved; the table shows medians).
    #[arg(long, default_value_t = 3, value_parser = super::args::bounded::<usize>(&super::args::ranges::SWEEP_REPEATS))]
    pub repeats: usize,
    /// Where the ring's 32 KiB blocks lie: scattered (a fixed random order, as the buddy
    /// allocator hands order-3 page frags out; the default) or sequential (address order: the
    /// hardware prefetchers stream from one chunk into the next, which the kernel's blocks do
    /// not allow).
    #[arg(long, value_enum, default_value_t = LayoutArg::Scattered)]
    pub layout: LayoutArg,
    /// Start each block's copy this many bytes into it (0-63; the source stays aligned): a
    /// copy at another alignment, as 65,507-byte UDP datagrams land in their page frags.
    #[arg(long, default_value_t = 0, value_parser = super::args::bounded::<u8>(&super::args::ranges::COPY_OFFSET))]
    pub offset: u8,
    /// Machine whose model is shown beside (built-in name or TOML file; default: detected).
    #[arg(long)]
    pub machine: Option<String>,
    /// Run both threads SCHED_FIFO (root): two spinning threads on a busy machine otherwise
    /// wait for each other's time slices, not for their caches.
    #[arg(long)]
    pub realtime: bool,
    /// Print only --machine (or the detected host) as a machine file with the measured
    /// `reuse_ns_per_page` (private, LLC, DRAM) added: the model then prices reuse with them.
    #[arg(long)]
    pub toml: bool,
    /// Also write that machine file here (the report still goes to stdout). Older spelling:
    /// --save-toml.
    #[arg(short = 'o', long, alias = "save-toml", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Fit the samples of an earlier run again (its `--format json` output) instead of
    /// measuring: its distances, samples, c2c times, cached copy, CPUs and layout.
    #[arg(long, value_name = "JSON")]
    pub from_json: Option<std::path::PathBuf>,
}

/// The samples of one run, measured now or read back ([`read_saved`]): what the fit needs.
struct Run {
    writer: u32,
    reader: u32,
    repeats: usize,
    layout: String,
    offset: u8,
    /// Times of the copy between cached buffers, ns per page (one per round).
    hot_ns: Vec<f64>,
    /// The rings' sizes, pages.
    ring_pages: Vec<u64>,
    /// Per ring: (ns per page, c2c one way just before) of each sample.
    samples: Vec<Vec<(f64, Option<f64>)>>,
}

/// The fields of a `measure reuse --format json` document that [`read_saved`] reads.
#[derive(serde::Deserialize)]
struct SavedDoc {
    writer_cpu: u32,
    reader_cpu: u32,
    repeats: usize,
    #[serde(default = "scattered")]
    layout: String,
    #[serde(default)]
    offset_bytes: u8,
    hot_copy_ns_per_page: f64,
    rows: Vec<SavedRow>,
}

/// One distance of a [`SavedDoc`].
#[derive(serde::Deserialize)]
struct SavedRow {
    distance_pages: u64,
    samples_ns_per_page: Vec<f64>,
    samples_c2c_ns: Vec<Option<f64>>,
}

fn scattered() -> String {
    "scattered".into()
}

/// Reads `path` (a `measure reuse --format json` document); errors name the file and field.
fn read_saved(path: &std::path::Path) -> anyhow::Result<Run> {
    let label = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {label}: {e}"))?;
    let d: SavedDoc = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("{label}: {e}; give the output of `measure reuse --format json`")
    })?;
    let bad = |field: &str, what: &str| anyhow::anyhow!("{label}: field {field}: {what}");
    let time = |t: f64| t.is_finite() && t > 0.0;
    if !(d.hot_copy_ns_per_page.is_finite() && d.hot_copy_ns_per_page >= 0.0) {
        return Err(bad("hot_copy_ns_per_page", "not a time >= 0"));
    }
    if d.rows.is_empty() || d.rows.len() > 64 {
        return Err(bad("rows", "empty or more than 64 distances"));
    }
    for (i, r) in d.rows.iter().enumerate() {
        if r.distance_pages == 0 || r.distance_pages > reuse::MAX_RING_BYTES / 4096 {
            return Err(bad(
                &format!("rows[{i}].distance_pages"),
                "not a ring size in pages",
            ));
        }
        if r.samples_ns_per_page.len() != r.samples_c2c_ns.len() {
            return Err(bad(
                &format!("rows[{i}].samples_c2c_ns"),
                &format!(
                    "{} times but {} samples",
                    r.samples_c2c_ns.len(),
                    r.samples_ns_per_page.len()
                ),
            ));
        }
        if let Some(j) = r.samples_ns_per_page.iter().position(|&t| !time(t)) {
            return Err(bad(
                &format!("rows[{i}].samples_ns_per_page[{j}]"),
                "not a time > 0",
            ));
        }
        if let Some(j) = r
            .samples_c2c_ns
            .iter()
            .position(|c| c.is_some_and(|c| !time(c)))
        {
            return Err(bad(
                &format!("rows[{i}].samples_c2c_ns[{j}]"),
                "not a time > 0 or null",
            ));
        }
    }
    eprintln!(
        "Fitting the {} distances of {label} again (writer CPU {}, reader CPU {}); nothing is measured.",
        d.rows.len(),
        d.writer_cpu,
        d.reader_cpu
    );
    Ok(Run {
        writer: d.writer_cpu,
        reader: d.reader_cpu,
        repeats: d.repeats,
        layout: d.layout,
        offset: d.offset_bytes,
        hot_ns: vec![d.hot_copy_ns_per_page],
        ring_pages: d.rows.iter().map(|r| r.distance_pages).collect(),
        samples: d
            .rows
            .into_iter()
            .map(|r| {
                r.samples_ns_per_page
                    .into_iter()
                    .zip(r.samples_c2c_ns)
                    .collect()
            })
            .collect(),
    })
}

/// `--layout` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    /// The ring's 32 KiB blocks in a fixed random order (the kernel's page frags).
    Scattered,
    /// The blocks in address order.
    Sequential,
}

impl From<LayoutArg> for reuse::Layout {
    fn from(a: LayoutArg) -> reuse::Layout {
        match a {
            LayoutArg::Scattered => reuse::Layout::Scattered,
            LayoutArg::Sequential => reuse::Layout::Sequential,
        }
    }
}

/// Runs `pcpmodel measure reuse`.
pub fn run(args: ReuseArgs, format: Format) -> anyhow::Result<ExitCode> {
    let saved = args.from_json.as_deref().map(read_saved).transpose()?;
    let (w, r) = match &saved {
        Some(s) => (s.writer, s.reader),
        None => {
            let cpus = host_cpus(std::path::Path::new("/"))?;
            super::measure_pcp::cpu_pair(args.cpus.as_deref(), &cpus, "writer,reader")?
        }
    };
    if !(1..=100).contains(&args.repeats) {
        anyhow::bail!("--repeats {}: must be 1..=100", args.repeats);
    }
    let machine = match &args.machine {
        Some(m) => Machine::resolve(m)?,
        None => super::machine_file::detected()?,
    };
    let h = Hierarchy::from_machine(&machine, Placement::SameLlc)?;
    let distances = args
        .distances
        .clone()
        .unwrap_or_else(|| reuse::distances_for(h.private_pages, h.any_cache_pages));
    if distances.is_empty() || distances.len() > 64 {
        anyhow::bail!("--distances: give 1..=64 distances");
    }
    if let Some(d) = distances.iter().find(|&&d| d == 0) {
        anyhow::bail!("--distances: {d} pages: a distance is at least one page");
    }
    let mlp = pcpmodel::assumptions::value("netperf::mlp_lines", 10.0);
    let run = match saved {
        Some(s) => s,
        None => measure(&args, w, r, &distances)?,
    };
    fit_and_report(&args, format, &machine, &h, mlp, run)
}

/// A run on this host: the writer on `w`, the reader on `r`, each of `distances`.
fn measure(args: &ReuseArgs, w: u32, r: u32, distances: &[u64]) -> anyhow::Result<Run> {
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
    let mut hot: Vec<f64> = Vec::new();
    for rep in 0..args.repeats {
        hot.push(reuse::measure_hot_copy(w, args.seconds.min(0.2))?);
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
            let p = reuse::measure_distance(
                w,
                r,
                distances[i],
                args.seconds,
                args.layout.into(),
                usize::from(args.offset),
            )?;
            samples[i].push((p.ns_per_page, c2c));
            ring_pages[i] = p.distance_pages;
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    if args.realtime {
        let _ = pcpmodel::measure::latency::set_fifo(false);
    }
    Ok(Run {
        writer: w,
        reader: r,
        repeats: args.repeats,
        layout: match args.layout {
            LayoutArg::Scattered => "scattered",
            LayoutArg::Sequential => "sequential",
        }
        .into(),
        offset: args.offset,
        hot_ns: hot,
        ring_pages,
        samples,
    })
}

/// Keeps the samples of the machine's placement, fits the costs per level and prints (and with
/// --toml / --output writes) the result.
fn fit_and_report(
    args: &ReuseArgs,
    format: Format,
    machine: &Machine,
    h: &Hierarchy,
    mlp: f64,
    run: Run,
) -> anyhow::Result<ExitCode> {
    let Run {
        writer: w,
        reader: r,
        repeats,
        layout,
        offset,
        hot_ns: hot,
        ring_pages,
        samples,
    } = run;
    let layout = layout.as_str();
    // The samples of the placement the machine describes: the c2c mode nearest its
    // c2c_same_llc (on a VM the hypervisor may move the two vCPUs between cores of one LLC
    // and cores of two, and the second prices every level differently), unless the c2c times
    // form one mode. A distance with no sample there has no measurement.
    let all_c2c: Vec<f64> = samples.iter().flatten().filter_map(|s| s.1).collect();
    let modes = pcpmodel::measure::latency::modes(&all_c2c);
    let target = modes
        .iter()
        .min_by(|a, b| {
            let d = |m: f64| (m / h.c2c_ns).ln().abs();
            d(a.median).total_cmp(&d(b.median))
        })
        .map(|m| m.median);
    let in_placement = |c: Option<f64>| match (c, modes.as_slice(), target) {
        (Some(c), [_, _, ..], Some(t)) => modes
            .iter()
            .all(|m| (c / t).ln().abs() <= (c / m.median).ln().abs()),
        _ => true,
    };
    let placement_note = (modes.len() >= 2).then(|| {
        format!(
            "c2c before each sample in {} placements ({}): the medians keep the samples of the one nearest the machine's same-LLC transfer ({:.0} ns); a distance with none there is not measured",
            modes.len(),
            modes
                .iter()
                .map(|m| format!("{:.0} ns, {:.0} %", m.median, 100.0 * m.share))
                .collect::<Vec<_>>()
                .join("; "),
            h.c2c_ns
        )
    });
    let kept: Vec<Vec<f64>> = samples
        .iter()
        .map(|s| {
            s.iter()
                .filter(|x| in_placement(x.1))
                .map(|x| x.0)
                .collect()
        })
        .collect();
    let median = |v: &[f64]| pcpmodel::measure::Spread::of(v).map_or(f64::NAN, |s| s.median);
    let meas: Vec<f64> = kept.iter().map(|s| median(s)).collect();
    let model: Vec<_> = ring_pages
        .iter()
        .map(|&d| page_access_cost(h, &ReuseDist::uniform(d as f64, d as f64), 0.0, mlp))
        .collect();
    let first = meas.iter().position(|m| m.is_finite()).unwrap_or(0);
    let (m0, c0) = (meas[first], model[first].total_ns);
    let hot_ns = median(&hot);
    let extra: Vec<f64> = meas.iter().map(|m| m - hot_ns).collect();
    let measured: Vec<usize> = (0..extra.len()).filter(|&i| extra[i].is_finite()).collect();
    // The levels fitted at the LLC capacity the times show (a VM's share of its host's LLC).
    let nominal_kib = machine.llc().map_or(0.0, |c| c.size_kib.value as f64);
    let h_nominal = {
        let mut m = machine.clone();
        m.reuse_ns_per_page = None;
        Hierarchy::from_machine(&m, Placement::SameLlc)?
    };
    let fit = reuse::fit_levels_and_llc(&h_nominal, nominal_kib, &ring_pages, &extra, mlp);
    let llc_found = fit.below_nominal(nominal_kib);
    let reuse::LlcFit {
        llc_kib,
        probs,
        levels,
        nominal_rms_ns: nominal_rms,
    } = fit;
    let mut t = Table::new([
        "distance (pages)",
        "distance (MiB)",
        "measured ns/page (median)",
        "measured increase",
        "model cache ns/page (private+LLC+DRAM)",
        "model increase",
        "measured - copy",
        "fitted levels",
    ])
    .titled(format!(
        "Reuse cost by distance: writer CPU {w}, reader CPU {r}, {layout} 32 KiB blocks; model on {}",
        machine.name
    ));
    let mut rows = Vec::new();
    for (i, &d) in ring_pages.iter().enumerate() {
        let c = &model[i];
        t.push([
            d.to_string(),
            sig(d as f64 / 256.0, 3),
            if meas[i].is_finite() {
                sig(meas[i], 4)
            } else {
                "- (none in this placement)".into()
            },
            format!("{:+.1}", meas[i] - m0),
            format!(
                "{} ({}+{}+{})",
                sig(c.total_ns, 4),
                sig(c.private_ns, 3),
                sig(c.llc_ns, 3),
                sig(c.dram_ns, 3)
            ),
            format!("{:+.1}", c.total_ns - c0),
            sig(extra[i], 4),
            levels.as_ref().map_or("-".into(), |f| {
                sig(
                    probs[i]
                        .iter()
                        .zip(&f.ns_per_page)
                        .map(|(p, c)| p * c)
                        .sum::<f64>(),
                    4,
                )
            }),
        ]);
        let (ns, c2c): (Vec<f64>, Vec<Option<f64>>) = samples[i].iter().copied().unzip();
        rows.push(json!({"distance_pages": d, "measured_ns_per_page": meas[i],
            "samples_ns_per_page": ns, "samples_c2c_ns": c2c, "n_kept": kept[i].len(),
            "model_ns_per_page": c.total_ns,
            "model_private_ns": c.private_ns, "model_llc_ns": c.llc_ns, "model_dram_ns": c.dram_ns}));
    }
    let date = pcpmodel::measure::today_utc();
    // What made the samples: this run, or an earlier one fitted again.
    let made = match &args.from_json {
        Some(p) => format!(
            "pcpmodel measure reuse --from-json {} on {date} (that run's samples fitted again)",
            p.display()
        ),
        None => format!("pcpmodel measure reuse on {date}"),
    };
    let c2c_note = target.map_or(String::new(), |m| format!(", c2c {m:.0} ns"));
    let levels_json = match &levels {
        Ok(f) => {
            json!({"private_ns_per_page": f.ns_per_page[0], "llc_ns_per_page": f.ns_per_page[1],
            "dram_ns_per_page": f.ns_per_page[2], "support": f.support,
            "residual_rms_ns": f.residual_rms_ns})
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut levels_table = Table::new(["level", "ns per page", "distances' worth of hits"])
        .titled(format!(
            "Reuse cost by level (measured - a {} ns/page copy between cached buffers; least squares over the model's hit probabilities)",
            sig(hot_ns, 3)
        ));
    if let Ok(f) = &levels {
        for (j, name) in ["private L2", "LLC", "DRAM"].iter().enumerate() {
            levels_table.push([
                name.to_string(),
                sig(f.ns_per_page[j], 4),
                format!("{:.1}", f.support[j]),
            ]);
        }
    }
    if args.toml || args.output.is_some() {
        let f = levels
            .as_ref()
            .map_err(|e| anyhow::anyhow!("no reuse costs to write: {e}"))?;
        let source = |j: usize| {
            format!(
                "measured: {made}, writer CPU {w}, reader CPU {r}{c2c_note}, {layout} 32 KiB blocks; {} distances x {} repeats, medians less a {:.0} ns/page cached copy, non-negative least squares over the model's hit probabilities (residual RMS {:.0} ns/page; {:.1} distances' worth at this level)",
                measured.len(),
                repeats,
                hot_ns,
                f.residual_rms_ns,
                f.support[j]
            )
        };
        let mut m = machine.clone();
        let sourced = |j: usize| {
            pcpmodel::hw::provenance::Sourced::new(
                (f.ns_per_page[j] * 10.0).round() / 10.0,
                source(j),
            )
        };
        m.reuse_ns_per_page = Some(pcpmodel::hw::machine::ReuseCosts {
            private: sourced(0),
            llc: sourced(1),
            dram: sourced(2),
            llc_kib: llc_found.map(|k| {
                pcpmodel::hw::provenance::Sourced::new(
                    k.round(),
                    format!(
                        "measured: {made}: the LLC capacity whose hit probabilities fit the reuse times best (residual RMS {:.0} ns/page; {} at the nominal {nominal_kib} KiB), of 21 from the nominal size down to 1/32 of it",
                        f.residual_rms_ns,
                        nominal_rms.map_or("no fit".to_string(), |r| format!("{r:.0}"))
                    ),
                )
            }),
        });
        let text = super::machine_file::write(
            &m,
            &format!(
                "reuse_ns_per_page measured by {}.",
                match &args.from_json {
                    Some(_) => made.clone(),
                    None if args.realtime => {
                        format!("`pcpmodel measure reuse --realtime` on {date}")
                    }
                    None => format!("`pcpmodel measure reuse` on {date}"),
                }
            ),
            "the measured reuse costs",
            args.output.as_deref(),
        )?;
        if args.toml {
            print!("{text}");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let report = Report {
        json: json!({"writer_cpu": w, "reader_cpu": r, "machine": machine.name, "layout": layout, "offset_bytes": offset,
            "placements": modes, "placement_note": placement_note,
            "seconds": args.seconds, "repeats": repeats, "mlp_lines": mlp,
            "from_json": args.from_json.as_ref().map(|p| p.display().to_string()),
            "hot_copy_ns_per_page": hot_ns, "levels": levels_json, "rows": rows,
            "llc_kib_nominal": nominal_kib, "llc_kib_fitted": llc_kib,
            "residual_rms_ns_at_nominal": nominal_rms}),
        tables: vec![t, levels_table],
        notes: std::iter::once(format!(
            "The measured time includes both copies at every distance; the model's column is its cache term alone ({}), so compare the increases.",
            h.level_cost_source(mlp)
        ))
        .chain(levels.as_ref().err().map(|e| format!("No cost per level: {e}")))
        .chain(llc_found.map(|k| {
            format!(
                "The times fit an LLC of {} MiB best, not the nominal {} MiB (residual {} against {} ns/page): the capacity this placement gets (other tenants of a host share its LLC). The costs per level are fitted at it, and the machine file written keeps it as reuse_ns_per_page.llc_kib.",
                sig(k / 1024.0, 3),
                sig(nominal_kib / 1024.0, 3),
                levels.as_ref().map_or("-".into(), |f| sig(f.residual_rms_ns, 3)),
                nominal_rms.map_or("-".into(), |r| sig(r, 3))
            )
        }))
        .chain(placement_note.clone())
        .collect(),
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
