//! `pcpmodel predict`: one prediction with every term, for any workload the model covers.

use std::process::ExitCode;

use clap::ValueEnum;
use pcpmodel::fit::calibrate::{netperf_model, netperf_params};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::cache::Placement;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::Machine;

/// Workloads `predict` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Thread 004: netperf UDP, a sender CPU allocating order-3 page frags and a receiver CPU
    /// freeing them; varies with --high and --placement.
    NetperfUdp,
    /// Thread 000: P processes mmap, fill and munmap N bytes in a loop (zone->lock contention);
    /// varies with --procs, --nodes, --scale-max.
    MmapFill,
    /// Thread 001: netperf TCP_SENDFILE with memcg charging; varies with --batch, --cgroup-depth,
    /// --instances.
    MemcgNetperf,
    /// Thread 002: page_bench alloc+free cycles per page; varies with --threads, --numa-stat.
    PageBench,
    /// Thread 003: will-it-scale page_fault1 with 64 KiB folios; varies with --procs,
    /// --high-order-pcp.
    PageFault1,
}

/// Placement of producer and consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// SMT siblings of one core (shared L2).
    Smt,
    /// Two cores in one LLC domain.
    SameLlc,
    /// Two LLC domains of one socket (AMD CCDs).
    CrossLlc,
    /// Two sockets.
    CrossSocket,
}

impl From<PlacementArg> for Placement {
    fn from(p: PlacementArg) -> Placement {
        match p {
            PlacementArg::Smt => Placement::Smt,
            PlacementArg::SameLlc => Placement::SameLlc,
            PlacementArg::CrossLlc => Placement::CrossLlc,
            PlacementArg::CrossSocket => Placement::CrossSocket,
        }
    }
}

/// Arguments of `pcpmodel predict` (each workload reads the ones it needs).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Machine: built-in name or TOML file (default: the machine of the workload's thread;
    /// icelake-server for netperf-udp and mmap-fill, memcg-72cpu, broadwell-2s, kunpeng-920 for
    /// memcg-netperf, page-bench, page-fault1).
    #[arg(long)]
    pub machine: Option<String>,
    /// Workload.
    #[arg(long, value_enum, default_value_t = Workload::NetperfUdp)]
    pub workload: Workload,
    /// pcp->high of the freeing CPU, pages (netperf-udp). Default: the kernel's.
    #[arg(long)]
    pub high: Option<u32>,
    /// Where producer and consumer run (netperf-udp).
    #[arg(long, value_enum, default_value_t = PlacementArg::SameLlc)]
    pub placement: PlacementArg,
    /// Kernel version, e.g. 5.18 or 6.18 (default: 6.18, the newest the project models, for every
    /// workload; the threads ran 6.10, 6.0-rc1, 4.14, 6.9 and 5.18).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Model free_high (>= 5.18: a CPU freeing high-order pages without allocating drains its
    /// whole list on every free) instead of a fixed pcp->high (netperf-udp).
    #[arg(long)]
    pub free_high: bool,
    /// Processes (mmap-fill, page-fault1).
    #[arg(long)]
    pub procs: Option<u32>,
    /// NUMA nodes the processes run on: 1 or all (mmap-fill).
    #[arg(long)]
    pub nodes: Option<String>,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..=6 (mmap-fill).
    #[arg(long)]
    pub scale_max: Option<u32>,
    /// MEMCG_CHARGE_BATCH, pages (memcg-netperf).
    #[arg(long)]
    pub batch: Option<u32>,
    /// cgroup hierarchy depth (memcg-netperf).
    #[arg(long)]
    pub cgroup_depth: Option<u32>,
    /// netperf instances (memcg-netperf).
    #[arg(long)]
    pub instances: Option<u32>,
    /// Threads (page-bench).
    #[arg(long)]
    pub threads: Option<u32>,
    /// vm.numa_stat, 0 or 1 (page-bench).
    #[arg(long)]
    pub numa_stat: Option<u32>,
    /// Whether order-4 (64 KiB) pages are kept on PCP lists (page-fault1).
    #[arg(long)]
    pub high_order_pcp: Option<bool>,
}

impl Workload {
    /// The CLI name, e.g. `netperf-udp`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::NetperfUdp => "netperf-udp",
            Workload::MmapFill => "mmap-fill",
            Workload::MemcgNetperf => "memcg-netperf",
            Workload::PageBench => "page-bench",
            Workload::PageFault1 => "page-fault1",
        }
    }

    /// The kernel the workload's model is built on (its thread's kernel): the reference
    /// against which `not_modelled` lists the kernel changes the model leaves out.
    pub fn reference_kernel(self) -> KernelVersion {
        match self {
            Workload::NetperfUdp => pcpmodel::fit::calibrate::KERNEL_004,
            Workload::MmapFill => pcpmodel::model::zonelock::KERNEL_000,
            // Thread 001 measured 6.0-rc1.
            Workload::MemcgNetperf => KernelVersion::new(6, 0),
            Workload::PageBench => pcpmodel::model::vmstat::KERNEL_002,
            Workload::PageFault1 => pcpmodel::model::highorder::KERNEL_003,
        }
    }

    /// The built-in machine `predict` uses when `--machine` is not given.
    pub fn default_machine(self) -> &'static str {
        match self {
            Workload::NetperfUdp | Workload::MmapFill => "icelake-server",
            Workload::MemcgNetperf => "memcg-72cpu",
            Workload::PageBench => "broadwell-2s",
            Workload::PageFault1 => "kunpeng-920",
        }
    }
}

impl Args {
    /// `--machine`, or the workload's default machine.
    pub fn machine_name(&self) -> &str {
        self.machine
            .as_deref()
            .unwrap_or(self.workload.default_machine())
    }
}

/// Runs `pcpmodel predict`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    check_flags(&args)?;
    match args.workload {
        Workload::NetperfUdp => netperf(&args, format),
        Workload::MmapFill => super::zonelock::predict(&args, format),
        Workload::MemcgNetperf | Workload::PageBench | Workload::PageFault1 => {
            super::allocpath::predict(&args, format)
        }
    }
}

/// Checks the numeric flags against their physical ranges (src/bounds.rs).
fn check_flags(args: &Args) -> anyhow::Result<()> {
    use pcpmodel::bounds;
    let e = anyhow::Error::msg;
    let checks = [
        ("--high", args.high, bounds::PCP_HIGH_PAGES),
        ("--procs", args.procs, bounds::TASKS),
        ("--threads", args.threads, bounds::TASKS),
        ("--scale-max", args.scale_max, bounds::PCP_BATCH_SCALE_MAX),
        ("--numa-stat", args.numa_stat, bounds::SWITCH),
        ("--batch", args.batch, bounds::MEMCG_CHARGE_BATCH),
        ("--cgroup-depth", args.cgroup_depth, bounds::CGROUP_DEPTH),
        ("--instances", args.instances, bounds::TASKS),
    ];
    for (flag, v, r) in checks {
        if let Some(v) = v {
            r.check_flag(flag, f64::from(v)).map_err(e)?;
        }
    }
    Ok(())
}

/// Adds what the prediction leaves out on the requested kernel to `report`: a `not_modelled`
/// list and `reference_kernel` in the JSON, a table and a note per entry (or a note that
/// nothing is left out).
/// `set_by_flag` pairs a change key with the flag that sets its behaviour by hand (e.g.
/// MEMCG_CHARGE_BATCH by `--batch`); such a change is not listed when the flag was given.
pub fn add_not_modelled(
    report: &mut Report,
    workload: Workload,
    kernel: KernelVersion,
    set_by_flag: &[(&str, &str)],
) {
    let reference = workload.reference_kernel();
    let mut list = pcpmodel::kernel::changes::not_modelled(workload.name(), kernel, reference);
    list.retain(|n| {
        let flag = set_by_flag.iter().find(|(k, _)| *k == n.key);
        if let Some((_, flag)) = flag {
            report.notes.push(format!(
                "{} ({}, {}): set by hand with {flag}, so not listed as not modelled",
                n.commit.unwrap_or("(unverified)"),
                n.subject,
                n.version
            ));
        }
        flag.is_none()
    });
    if let Some(obj) = report.json.as_object_mut() {
        obj.insert(
            "not_modelled".to_string(),
            serde_json::to_value(&list).unwrap_or_default(),
        );
        obj.insert(
            "reference_kernel".to_string(),
            serde_json::json!(reference.to_string()),
        );
        obj.insert(
            "requested_kernel".to_string(),
            serde_json::json!(kernel.to_string()),
        );
    }
    if list.is_empty() {
        report.notes.push(format!(
            "not modelled: nothing known: every PCP change between kernel {kernel} and the \
             model's kernel {reference} that touches {} is implemented \
             (`pcpmodel kernel changes --from {reference} --to {kernel} --workload {}`)",
            workload.name(),
            workload.name()
        ));
        return;
    }
    let mut t = Table::new(["commit", "first version", "on kernel", "subject"]).titled(format!(
        "Not modelled: kernel {kernel} differs from the model's kernel {reference} in {} \
         change(s) the {} model does not implement",
        list.len(),
        workload.name()
    ));
    for n in &list {
        t.push([
            n.commit.unwrap_or("(unverified)").to_string(),
            n.version.to_string(),
            n.on_requested_kernel.to_string(),
            n.subject.to_string(),
        ]);
        report.notes.push(format!(
            "not modelled: {} ({}): {}",
            n.commit.unwrap_or("(unverified)"),
            n.subject,
            n.note
        ));
    }
    report.tables.push(t);
}

/// Emits a prediction of `args.workload` with its `not_modelled` list for the requested kernel
/// (`--kernel`, else [`KernelVersion::DEFAULT`], the kernel every prediction defaults to).
pub fn emit_predicted(args: &Args, report: &Report, format: Format) -> anyhow::Result<ExitCode> {
    let kernel = kernel_arg(&args.kernel, KernelVersion::DEFAULT)?;
    let mut r = report.clone();
    let mut by_flag = Vec::new();
    if args.batch.is_some() {
        by_flag.push(("memcg-charge-batch-64", "--batch"));
    }
    add_not_modelled(&mut r, args.workload, kernel, &by_flag);
    super::emit(&r, format)
}

/// Parses `--kernel`, defaulting to `default`.
pub fn kernel_arg(k: &Option<String>, default: KernelVersion) -> anyhow::Result<KernelVersion> {
    Ok(match k {
        Some(s) => KernelVersion::parse_labeled(s, "--kernel")?,
        None => default,
    })
}

fn netperf(args: &Args, format: Format) -> anyhow::Result<ExitCode> {
    let machine = Machine::resolve(args.machine_name())?;
    let kernel = kernel_arg(&args.kernel, KernelVersion::DEFAULT)?;
    let placement: Placement = args.placement.into();
    let mut model = netperf_model(&machine, placement, kernel)?;
    model.flow.free_high = args.free_high;
    let wp = netperf_params(&machine)?;
    let default = pcpmodel::fit::calibrate::default_pcp(&machine, kernel)?;
    let limit = pcpmodel::answer::optimal_high::sweep_limit(&default);
    if let Some(h) = args.high {
        if h > limit {
            anyhow::bail!(
                "--high {h}: above the most the kernel can set on {}: managed / 8 / CPUs = {limit} pages (vm.percpu_pagelist_high_fraction = 8, the sysctl's minimum)",
                machine.name
            );
        }
    }
    let high = args
        .high
        .unwrap_or_else(|| default.effective_high(model.flow.scale_max));
    let e = model.estimate(&wp.values, high)?;
    // 95 % interval from the same uncertainty optimal-high samples: the fitted (or carried-over)
    // workload parameters and the machine's latencies by provenance.
    let draws = wp.samples(200, 0x0F7_1A1);
    let mut rng = pcpmodel::fit::stats::SplitMix64::new(0x1A7E_5EED);
    let mut thr = Vec::with_capacity(draws.len());
    for q in &draws {
        let pm = pcpmodel::answer::optimal_high::perturb_latencies(&machine, &mut rng);
        let mut m = netperf_model(&pm, placement, kernel)?;
        m.flow = model.flow;
        if let Ok(x) = m.estimate(q, high) {
            thr.push(x.throughput_ops_per_s);
        }
    }
    let ci = [
        pcpmodel::fit::optimize::percentile(&thr, 2.5).unwrap_or(f64::NAN),
        pcpmodel::fit::optimize::percentile(&thr, 97.5).unwrap_or(f64::NAN),
    ];
    let d = &e.dynamics;
    let (rlo, rhi) = d.reuse.range_pages();
    let terms = Table::terms(
        format!(
            "netperf-udp on {} ({}), kernel {}.{}, pcp->high {high} pages",
            machine.name,
            placement.as_str(),
            kernel.major,
            kernel.minor
        ),
        "ns per 4 KiB page",
        &[
            ("fixed work", e.fixed_ns),
            ("lines in the consumer's private cache", e.private_ns),
            ("lines in the LLC", e.llc_ns),
            ("lines from DRAM", e.dram_ns),
            ("zone->lock / free-list transfers", e.lock_ns),
        ],
        e.ns_per_op,
    );
    let mut hits = Table::new(["level", "probability", "cost per line (ns)"])
        .titled("Where a reused line is found");
    let h = &model.hierarchy;
    for (name, p, c) in [
        (
            "private (other core's L2, or shared L2 for SMT)",
            e.probs.private,
            h.private_ns,
        ),
        ("LLC", e.probs.llc, h.llc_ns),
        ("DRAM", e.probs.dram, h.dram_ns),
    ] {
        hits.push([name.to_string(), format!("{p:.4}"), sig(c, 3)]);
    }
    let score = if wp.has_score { Some(e.score) } else { None };
    let json = serde_json::json!({
        "machine": machine.name,
        "workload": "netperf-udp",
        "kernel": format!("{}.{}", kernel.major, kernel.minor),
        "placement": placement.as_str(),
        "high_pages": high,
        "throughput_ops_per_s": e.throughput_ops_per_s,
        "throughput_ci95_ops_per_s": ci,
        "ns_per_op": e.ns_per_op,
        "op": "one 4 KiB page through producer and consumer",
        "score": score,
        "terms": {
            "fixed_ns": e.fixed_ns,
            "private_ns": e.private_ns,
            "llc_ns": e.llc_ns,
            "dram_ns": e.dram_ns,
            "lock_ns": e.lock_ns,
        },
        "hit_probabilities": e.probs,
        "reuse_distance_pages": { "mean": d.reuse.mean_pages(), "min": rlo, "max": rhi, "segments": d.reuse.segments },
        "drain_pages": d.drain_pages,
        "refill_pages": d.refill_pages,
        "regime": d.regime,
        "parameters": wp,
        "kernel_default": default,
    });
    let mut notes = vec![
        format!(
            "throughput {} pages/s (95 % interval {}-{}, from the workload parameters' and latencies' uncertainty) = {} MB/s of payload ({} ns per page){}",
            sig(e.throughput_ops_per_s, 4),
            sig(ci[0], 4),
            sig(ci[1], 4),
            sig(e.throughput_ops_per_s * 4096.0 / 1e6, 4),
            sig(e.ns_per_op, 4),
            score.map_or(String::new(), |s| format!(
                "; predicted netperf score {}",
                sig(s, 5)
            ))
        ),
        format!(
            "reuse distance {}-{} pages (mean {}), drains of {} pages, refills of {} pages: {}",
            sig(rlo, 4),
            sig(rhi, 4),
            sig(d.reuse.mean_pages(), 4),
            d.drain_pages,
            d.refill_pages,
            d.regime
        ),
    ];
    notes.push(match &wp.source {
        pcpmodel::fit::calibrate::WorkloadSource::Fitted { data } => format!(
            "fixed work {} ns/page fitted to {data}",
            sig(wp.values[1], 4)
        ),
        pcpmodel::fit::calibrate::WorkloadSource::CarriedOver { from } => format!(
            "no netperf measurements for {}: fixed work carried over as {} cycles/page from {} (geometric mean; spread propagated); no score scale",
            machine.name,
            sig(wp.fixed_cycles, 4),
            from.join(", ")
        ),
    });
    let report = Report {
        json,
        tables: vec![terms, hits],
        notes,
    };
    emit_predicted(args, &report, format)
}
