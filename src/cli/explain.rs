//! `pcpmodel explain A B` and `pcpmodel plot explain A B`.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::answer::explain::{explain, Explanation, Shape};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::output::report::{Format, Report, Table};
use pcpmodel::Machine;

use super::args::kernel_arg;

/// Arguments of `pcpmodel explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Shows, for a set of pcp->high values, both machines' hit-level probabilities and cost terms side
by side; then gives machine A one of B's hardware parameters at a time (L2 size, LLC size,
inclusivity, core-to-core, LLC and DRAM latency, core count) and shows how the bypass penalty, the
optimal high and the DRAM cliff move; and ends with an explanation in words built from those
numbers.

Example:
  pcpmodel explain icelake-server skylake-desktop")]
pub struct Args {
    /// Machine A (built-in name or TOML file).
    pub a: String,
    /// Machine B.
    pub b: String,
    /// Workload whose flow is compared: a built-in producer-consumer workload or a workload
    /// file of that kind.
    #[arg(long, default_value = "netperf-udp")]
    pub workload: String,
    /// Kernel version (default: the workload's reference kernel, where its measurements ran:
    /// 5.17's rules for netperf-udp, thread 004's pcp->high table).
    #[arg(long)]
    pub kernel: Option<String>,
    /// pcp->high values for the side-by-side table, pages, comma-separated (default: 0, both
    /// L2s, 2x L2, LLC/2, > LLC). `--highs` is accepted as an alias.
    #[arg(long = "high", alias = "highs", value_delimiter = ',', value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PCP_HIGH_PAGES))]
    pub highs: Vec<u32>,
}

/// Arguments of `pcpmodel plot explain`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub args: Args,
    /// Output SVG file.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

fn compute(args: &Args) -> anyhow::Result<Explanation> {
    let w = pcpmodel::workload::resolve(&args.workload)?;
    let mut a = Machine::resolve(&args.a)?;
    let mut b = Machine::resolve(&args.b)?;
    if a.name == b.name && !a.same_values(&b) {
        // Two different machines under one name (a file copied from a built-in and edited):
        // each file is labelled by its path, or every line would name the same machine twice.
        let builtin = Machine::builtin_names();
        for (m, arg) in [(&mut a, &args.a), (&mut b, &args.b)] {
            if !builtin.contains(&arg.as_str()) {
                m.name = format!("{} ({arg})", m.name);
            }
        }
    }
    let kernel = kernel_arg(&args.kernel, w.spec.reference_kernel()?)?;
    // A pcp->high given by hand is one both machines' kernels can set (the one check of
    // every command taking --high).
    for h in &args.highs {
        for m in [&a, &b] {
            pcpmodel::workload::sweep::check_high("--high", *h, m, kernel)?;
        }
    }
    let mut highs = args.highs.clone();
    if highs.is_empty() {
        highs.push(0);
        for m in [&a, &b] {
            let l2 = m.l2_pages();
            let llc = m.llc_pages_per_domain();
            highs.extend([
                l2 as u32,
                2 * l2 as u32,
                (llc / 2) as u32,
                (llc + llc / 32) as u32,
            ]);
        }
        highs.sort_unstable();
        highs.dedup();
    }
    let knobs = pcpmodel::workload::Knobs {
        kernel: Some(kernel),
        means_only: true,
        ..Default::default()
    };
    Ok(explain(&w, &a, &b, &knobs, &highs)?)
}

fn shape_cells(s: &Shape) -> [String; 4] {
    [
        format!("{:.1}", s.bypass_penalty_pct),
        s.optimal_high_pages.to_string(),
        s.dram_cliff_pages
            .map_or("-".to_string(), |c| c.to_string()),
        s.kernel_default_high_pages.to_string(),
    ]
}

/// Runs `pcpmodel explain`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let e = compute(&args)?;
    let mut sbs = Table::new([
        "high (pages)".to_string(),
        format!("{} P(priv/LLC/DRAM)", e.a),
        format!("{} ns/page priv+LLC+DRAM+lock", e.a),
        format!("{} P(priv/LLC/DRAM)", e.b),
        format!("{} ns/page priv+LLC+DRAM+lock", e.b),
    ])
    .titled(format!(
        "Side by side (kernel {}, same LLC domain)",
        e.kernel
    ));
    let probs = |x: &pcpmodel::model::netperf::NetperfEstimate| {
        format!(
            "{:.2}/{:.2}/{:.2}",
            x.probs.private, x.probs.llc, x.probs.dram
        )
    };
    let terms = |x: &pcpmodel::model::netperf::NetperfEstimate| {
        format!(
            "{:.1}+{:.1}+{:.1}+{:.1}",
            x.private_ns, x.llc_ns, x.dram_ns, x.lock_ns
        )
    };
    for r in &e.side_by_side {
        sbs.push([
            r.high_pages.to_string(),
            probs(&r.a),
            terms(&r.a),
            probs(&r.b),
            terms(&r.b),
        ]);
    }
    let mut attr = Table::new([
        "configuration",
        "from",
        "to",
        "bypass penalty (%)",
        "optimal high (pages)",
        "DRAM cliff (pages)",
        "default high (pages)",
    ])
    .titled(format!(
        "Attribution: {} with one parameter of {} at a time",
        e.a, e.b
    ));
    let [p, o, c, d] = shape_cells(&e.shape_a);
    attr.push([e.a.clone(), "-".into(), "-".into(), p, o, c, d]);
    for s in &e.swaps {
        let [p, o, c, d] = shape_cells(&s.shape);
        attr.push([
            s.parameter.clone(),
            s.from.clone(),
            s.to.clone(),
            p,
            o,
            c,
            d,
        ]);
    }
    let [p, o, c, d] = shape_cells(&e.all_swapped);
    attr.push([
        format!("all of {}'s hardware", e.b),
        "-".into(),
        "-".into(),
        p,
        o,
        c,
        d,
    ]);
    let [p, o, c, d] = shape_cells(&e.shape_b);
    attr.push([e.b.clone(), "-".into(), "-".into(), p, o, c, d]);
    let report = Report {
        json: serde_json::to_value(&e)?,
        tables: vec![attr, sbs],
        notes: e.summary.clone(),
    };
    super::emit(&report, format)
}

/// Runs `pcpmodel plot explain`.
pub fn plot(args: PlotArgs, _format: Format) -> anyhow::Result<ExitCode> {
    let e = compute(&args.args)?;
    // compute() has parsed (and warned about) --kernel; its result carries the version.
    let kernel = KernelVersion::parse_labeled(&e.kernel, "--kernel")?;
    let mut curves = Vec::new();
    for name in [&args.args.a, &args.args.b] {
        let m = Machine::resolve(name)?;
        let knobs = pcpmodel::workload::Knobs {
            kernel: Some(kernel),
            placement: Some(pcpmodel::workload::spec::PlacementSpec::SameLlc),
            ..Default::default()
        };
        let o = pcpmodel::answer::optimal_high::optimal_high(
            &pcpmodel::workload::resolve(&args.args.workload)?,
            &m,
            &knobs,
            20,
        )?;
        curves.push((
            format!("{} (optimum {} pages)", m.name, o.optimal_high_pages),
            o.curve.iter().map(|c| (c.high_pages, c.relative)).collect(),
        ));
    }
    let svg = pcpmodel::output::plot::explain_svg(
        &format!(
            "{} vs {}: throughput vs pcp->high (kernel {})",
            e.a, e.b, e.kernel
        ),
        &curves,
    )?;
    std::fs::write(&args.output, svg)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    eprintln!("wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
