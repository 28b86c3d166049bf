//! `pcpmodel optimal-high` and `pcpmodel plot optimal-high`.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::answer::optimal_high::{optimal_high, OptimalHigh};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::workload::{Knobs, Workload};
use pcpmodel::Machine;

use super::args::{kernel_arg, PcpKnobArgs, PlacementArg};

/// Arguments of `pcpmodel optimal-high`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sweeps pcp->high from 0 to the largest value vm.percpu_pagelist_high_fraction can set, in steps of
one page, and reports the best value, the range within 1% of it, a 95% interval propagated from the
fitted parameters' uncertainty, what the kernel configures by default, and the sysctl value that
comes closest. Machines without measurements use workload parameters carried over from the measured
ones (cycles per page), with their spread in the interval.

Workloads whose kind has a reuse path (freed pages reused through a cache) resolve through the
registry like `predict`'s; any other is refused with the list of those that have one.

Examples:
  pcpmodel optimal-high --machine icelake-server
  pcpmodel optimal-high --workload iperf3-tcp --machine epyc-7w83
  pcpmodel optimal-high --machine skylake-desktop --kernel 5.18 --format json
  pcpmodel optimal-high --workload lmbench-af-unix --tasks 8 --batch 31
  pcpmodel detect --toml > host.toml && pcpmodel optimal-high --machine host.toml")]
pub struct Args {
    /// Machine: built-in name or TOML file (e.g. from `pcpmodel detect --toml`).
    #[arg(long, default_value = "icelake-server")]
    pub machine: String,
    /// Workload: a built-in name (or alias) or a workload TOML file whose kind has a reuse path
    /// (producer-consumer: netperf-udp, netperf-udp-stream, netperf-tcp-stream, iperf3-tcp,
    /// lmbench-af-unix; `pcpmodel workloads` lists them).
    #[arg(long, default_value = "netperf-udp")]
    pub workload: String,
    /// Kernel version (decides the default high, auto-tuning and the sysctl's semantics).
    #[arg(long, default_value = "6.18")]
    pub kernel: String,
    /// Where producer and consumer run (default: the workload file's `op.placement`).
    #[arg(long, value_enum)]
    pub placement: Option<PlacementArg>,
    /// Parameter samples for the 95% interval.
    #[arg(long, default_value_t = 200, value_parser = super::args::bounded::<usize>(&pcpmodel::bounds::SAMPLES))]
    pub samples: usize,
    /// The kernel's knobs other than pcp->high (which is swept).
    #[command(flatten)]
    pub knobs: PcpKnobArgs,
    /// A recorded flow (`pcpmodel record`): the workload is `workload from-flow FLOW` (its flow
    /// fields measured, the rest from --like, else from the host loop the flow recorded).
    #[arg(long, value_name = "FLOW", conflicts_with = "workload")]
    pub flow: Option<PathBuf>,
    /// With --flow: the template workload (see `workload from-flow --help`).
    #[arg(long, requires = "flow")]
    pub like: Option<String>,
}

/// Arguments of `pcpmodel plot optimal-high`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub args: Args,
    /// Output SVG file.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

/// A signed percentage with two decimals that never prints "-0.00".
fn pct(x: f64) -> String {
    if x.abs() < 0.005 {
        "0.00".to_string()
    } else {
        format!("{x:+.2}")
    }
}

/// Computes the answer for the arguments.
pub fn compute(args: &Args) -> anyhow::Result<(Workload, OptimalHigh)> {
    let workload = match &args.flow {
        Some(flow) => {
            let a = super::workloads::FromFlowArgs {
                flow: flow.clone(),
                like: args.like.clone(),
                name: None,
                output: None,
            };
            let (text, _) = a.build()?;
            pcpmodel::workload::Registry::builtin().from_toml_str(
                &text,
                &format!("from-flow {}", flow.display()),
                pcpmodel::workload::registry::Origin::Builtin,
            )?
        }
        None => pcpmodel::workload::resolve(&args.workload)?,
    };
    pcpmodel::bounds::SAMPLES
        .check_flag("--samples", args.samples as f64)
        .map_err(anyhow::Error::msg)?;
    let machine = Machine::resolve(&args.machine)?;
    let kernel: KernelVersion = kernel_arg(&Some(args.kernel.clone()), KernelVersion::DEFAULT)?;
    let pb = super::spinner(format!(
        "optimal-high: sweeping {} on {} and {} samples for the interval",
        workload.name(),
        machine.name,
        args.samples
    ));
    let mut knobs = Knobs {
        kernel: Some(kernel),
        placement: args.placement.map(Into::into),
        ..Knobs::default()
    };
    args.knobs.apply(&mut knobs)?;
    let o = optimal_high(&workload, &machine, &knobs, args.samples);
    pb.finish_and_clear();
    let o = o?;
    Ok((workload, o))
}

/// Runs `pcpmodel optimal-high`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let (_, o) = compute(&args)?;
    let mut t = Table::new(["quantity", "value", "unit"]).titled(format!(
        "Optimal pcp->high for {} on {} (kernel {}, {})",
        o.workload, o.machine, o.kernel, o.placement
    ));
    let within = [
        "within 1% of the best".to_string(),
        format!("{}-{}", o.within_1pct_pages[0], o.within_1pct_pages[1]),
        "pages".to_string(),
    ];
    if o.plateau {
        // On a plateau the argmax is decided by differences the model cannot rank: the 1 % range
        // is the answer, the argmax a detail.
        t.push(within.clone());
        t.push([
            format!(
                "ties within {} % (plateau)",
                100.0 * pcpmodel::answer::optimal_high::PLATEAU_TOLERANCE
            ),
            format!("{}-{}", o.plateau_pages[0], o.plateau_pages[1]),
            "pages".to_string(),
        ]);
    }
    t.push([
        if o.plateau {
            "argmax inside the plateau"
        } else {
            "optimal pcp->high"
        },
        &o.optimal_high_pages.to_string(),
        "pages",
    ]);
    t.push([
        "memory at that high, per CPU".to_string(),
        sig(o.memory_per_cpu_mib, 3),
        "MiB".to_string(),
    ]);
    t.push([
        "memory if every CPU held it".to_string(),
        sig(o.memory_all_cpus_mib, 3),
        "MiB".to_string(),
    ]);
    if !o.plateau {
        t.push(within);
    }
    if o.sweep_edge != "interior" {
        t.push([
            "optimum at the sweep's edge".to_string(),
            o.sweep_edge.replace('_', " "),
            format!("(swept {}-{} pages)", o.swept_pages[0], o.swept_pages[1]),
        ]);
    }
    t.push([
        "95% interval of the optimum".to_string(),
        format!("{}-{}", o.ci95_pages[0], o.ci95_pages[1]),
        "pages".to_string(),
    ]);
    match (
        o.kernel_default.high_pages,
        o.kernel_default.high_min_pages,
        o.kernel_default.high_max_pages,
    ) {
        (None, Some(lo), Some(hi)) => {
            t.push([
                "kernel default: live pcp->high this flow settles at".to_string(),
                o.kernel_default_high_pages.to_string(),
                "pages".to_string(),
            ]);
            t.push([
                "kernel default: high_min / high_max".to_string(),
                format!("{lo} / {hi}"),
                "pages".to_string(),
            ]);
        }
        _ => t.push([
            "kernel default: pcp->high (fixed)".to_string(),
            o.kernel_default_high_pages.to_string(),
            "pages".to_string(),
        ]),
    }
    t.push([
        "throughput at the default vs the best".to_string(),
        pct(o.kernel_default_loss_pct),
        "%".to_string(),
    ]);
    t.push([
        "best throughput".to_string(),
        sig(o.optimal_throughput_ops_per_s, 4),
        "pages/s".to_string(),
    ]);
    if let (Some(v), Some(h)) = (o.sysctl.value, o.sysctl.resulting_high_pages) {
        t.push([
            format!("{} (closest)", o.sysctl.name),
            v.to_string(),
            "".to_string(),
        ]);
        t.push([
            "pcp->high with that sysctl".to_string(),
            h.to_string(),
            "pages".to_string(),
        ]);
    }
    let d = &o.kernel_default;
    let mut notes = vec![format!("sysctl: {}", o.sysctl.statement)];
    notes.push(match (d.high_pages, d.high_min_pages, d.high_max_pages) {
        (Some(h), _, _) => format!(
            "kernel {} configures pcp->high = {h} pages (batch {}, {} CPUs share the node-0 Normal zone of {} managed pages)",
            d.kernel, d.batch_pages, d.split_cpus, d.managed_pages
        ),
        (None, Some(lo), Some(hi)) => format!(
            "kernel {} auto-tunes pcp->high between high_min {lo} and high_max {hi} pages (batch {}); for this flow the live high averages {} pages (the kernel's tuning rules stepped through the flow, crate::model::autotune::live_high)",
            d.kernel, d.batch_pages, o.kernel_default_high_pages
        ),
        _ => String::new(),
    });
    notes.push(match &o.parameters.source {
        pcpmodel::fit::calibrate::WorkloadSource::Fitted { data } => format!(
            "workload parameters fitted to {data}; the 95% interval samples their covariance and the machine's latencies by provenance ({} samples): the fitted parameters move the 1% range, the latencies move the optimum",
            o.ci_samples
        ),
        pcpmodel::fit::calibrate::WorkloadSource::Given { source } => format!(
            "fixed work given ({source}); the 95% interval samples the machine's latencies by provenance ({} samples)",
            o.ci_samples
        ),
        pcpmodel::fit::calibrate::WorkloadSource::CarriedOver { from } => format!(
            "no measurements of {} on this machine: fixed work carried over as {} cycles/page from {} (geometric mean, log-spread and the machine's latency uncertainty propagated into the interval, {} samples)",
            o.workload,
            sig(o.parameters.fixed_cycles, 4),
            from.join(", "),
            o.ci_samples
        ),
    });
    notes.extend(o.notes.iter().cloned());
    let mut curve = Table::new([
        "high (pages)",
        "throughput (pages/s)",
        "relative",
        "rel lo95",
        "rel hi95",
        "P(private)",
        "P(LLC)",
        "P(DRAM)",
    ])
    .titled("Curve (log grid)");
    for c in &o.curve {
        curve.push([
            c.high_pages.to_string(),
            sig(c.throughput_ops_per_s, 5),
            format!("{:.4}", c.relative),
            format!("{:.4}", c.relative_lo95),
            format!("{:.4}", c.relative_hi95),
            format!("{:.3}", c.p_private),
            format!("{:.3}", c.p_llc),
            format!("{:.3}", c.p_dram),
        ]);
    }
    let tables = match format {
        // CSV carries the curve (what a notebook plots); JSON everything.
        Format::Csv => vec![curve],
        _ => vec![t],
    };
    let report = Report {
        json: serde_json::to_value(&o)?,
        tables,
        notes,
    };
    super::emit(&report, format)
}

/// Runs `pcpmodel plot optimal-high`.
pub fn plot(args: PlotArgs, _format: Format) -> anyhow::Result<ExitCode> {
    let (w, o) = compute(&args.args)?;
    // Thread 004's measured scores belong on its own workload's curve only.
    let measured: Vec<(u32, f64)> = if w.spec.thread.as_deref() == Some("004") {
        pcpmodel::data::netperf_004()?
            .into_iter()
            .filter(|p| p.machine == o.machine)
            .map(|p| (p.high_pages as u32, p.score))
            .collect()
    } else {
        Vec::new()
    };
    let svg = pcpmodel::output::plot::optimal_high_svg(&o, &measured)?;
    std::fs::write(&args.output, svg)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    eprintln!("wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
