//! `pcpmodel predict`: one prediction with every term, for any workload: a built-in name or a
//! workload TOML file, resolved by the library's registry and evaluated by its kind with the
//! kernel knobs given as flags.

use std::process::ExitCode;

use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::output::report::Format;
use pcpmodel::workload::{resolve, Knobs, Predicted, Workload};
use pcpmodel::Machine;

use super::args::{kernel_arg, PcpKnobArgs, PlacementArg};

/// Arguments of `pcpmodel predict` (each workload's kind reads the knobs it lists in
/// `pcpmodel workloads`; a knob it does not read is an error).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Workloads are built-in names (models/workloads/*.toml: netperf-udp, netperf-udp-stream,
netperf-tcp-stream, iperf3-tcp, lmbench-af-unix, netperf-sctp-stream, memcg-netperf,
memcg-netperf-cgroups, page-bench, page-fault1-64k, mmap-fill) or a path to a workload TOML file of the same schema. Every number of a workload file
carries its source; the flags below override the file's values.

Examples:
  pcpmodel predict --workload netperf-udp --high 100
  pcpmodel predict --workload lmbench-af-unix --machine epyc-7w83 --placement cross-llc
  pcpmodel predict --workload memcg-netperf --charge-batch 32
  pcpmodel predict --workload memcg-netperf-cgroups --kernel 6.16 --memcgs 6
  pcpmodel predict --workload page-bench --tasks 88 --numa-stat 0
  pcpmodel predict --workload page-fault1 --high-order-pcp false
  pcpmodel predict --workload my-workload.toml --order 2")]
pub struct Args {
    /// Machine: built-in name or TOML file (default: the workload file's default_machine).
    #[arg(long)]
    pub machine: Option<String>,
    /// Workload: a built-in name (or alias) or a workload TOML file.
    #[arg(long, default_value = "netperf-udp")]
    pub workload: String,
    /// Kernel version, e.g. 5.18 or 6.18 (default: 6.18, the newest the project models; for
    /// alloc-loop workloads their file's reference_kernel, where their parameters come from).
    #[arg(long)]
    pub kernel: Option<String>,
    /// pcp->high of the freeing CPU, pages (default: the kernel's).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PCP_HIGH_PAGES))]
    pub high: Option<u32>,
    /// pcp->batch, free_high threshold, order, tasks, nodes, CONFIG_PCP_BATCH_SCALE_MAX (for
    /// MEMCG_CHARGE_BATCH use --charge-batch).
    #[command(flatten)]
    pub pcp: PcpKnobArgs,
    /// Where producer and consumer run (default: the workload file's op.placement).
    #[arg(long, value_enum)]
    pub placement: Option<PlacementArg>,
    /// Model free_high (>= 5.18: a CPU freeing high-order pages without allocating drains its
    /// whole list on every free) instead of a fixed pcp->high.
    #[arg(long)]
    pub free_high: bool,
    /// MEMCG_CHARGE_BATCH, pages (memcg-charge workloads).
    #[arg(long, alias = "memcg-charge-batch", value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::MEMCG_CHARGE_BATCH))]
    pub charge_batch: Option<u32>,
    /// cgroup hierarchy depth (memcg-charge workloads).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::CGROUP_DEPTH))]
    pub cgroup_depth: Option<u32>,
    /// Memory cgroups sharing each charging CPU's charge stock (memcg-charge workloads).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::MEMCGS))]
    pub memcgs: Option<u32>,
    /// Probability that after a stock call a CPU turns to a memcg drawn afresh, 0..=1
    /// (memcg-charge workloads with --memcgs; 1: per-call random interleaving).
    #[arg(long, value_parser = super::args::bounded::<f64>(&pcpmodel::bounds::PROBABILITY))]
    pub memcg_redraw: Option<f64>,
    /// vm.numa_stat, 0 or 1 (numa-stat workloads).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::SWITCH))]
    pub numa_stat: Option<u32>,
    /// Whether the workload's high order is kept on PCP lists (high-order-fault workloads).
    #[arg(long)]
    pub high_order_pcp: Option<bool>,
}

impl Args {
    /// The knobs the flags set.
    fn knobs(&self) -> anyhow::Result<Knobs> {
        let mut k = Knobs {
            means_only: false,
            kernel: match &self.kernel {
                Some(_) => Some(kernel_arg(&self.kernel, KernelVersion::DEFAULT)?),
                None => None,
            },
            high: self.high,
            free_high: self.free_high.then_some(true),
            placement: self.placement.map(Into::into),
            ..Knobs::default()
        };
        self.pcp.apply(&mut k)?;
        for (name, v) in [
            ("memcg_charge_batch", self.charge_batch),
            ("cgroup_depth", self.cgroup_depth),
            ("numa_stat", self.numa_stat),
            ("high_order_pcp", self.high_order_pcp.map(u32::from)),
            ("memcgs", self.memcgs),
        ] {
            if let Some(v) = v {
                k = k.with_extra(name, f64::from(v));
            }
        }
        if let Some(v) = self.memcg_redraw {
            k = k.with_extra("memcg_redraw", v);
        }
        Ok(k)
    }
}

/// Runs `pcpmodel predict`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let w = resolve(&args.workload)?;
    if w.kind.name() == "memcg-charge" {
        if let Some(b) = args.pcp.batch {
            anyhow::bail!(
                "--batch {b}: --batch is pcp->batch; workload {} (kind memcg-charge) takes MEMCG_CHARGE_BATCH as --charge-batch {b}",
                w.name()
            );
        }
    }
    let knobs = args.knobs()?;
    let machine = Machine::resolve(args.machine.as_deref().unwrap_or(&w.spec.default_machine))?;
    let p = w.predict(&machine, &knobs)?;
    super::emit(&report(&w, p), format)
}

/// The kind's report with the headline numbers (and the workload's kind and origin) in the JSON
/// under `predicted`, and one note with them.
fn report(w: &Workload, p: Predicted) -> pcpmodel::output::report::Report {
    let mut r = p.report.clone();
    let outputs: serde_json::Map<String, serde_json::Value> = p
        .outputs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    // Null with a reason, never silently (README, "Output contract"). The kind's report puts
    // its reasons in `null_reasons`: those for its outputs go beside `predicted.outputs`, the
    // rest stay beside the report's own members; a null nobody explained gets a plain reason.
    let mut kind_reasons = match r
        .json
        .as_object_mut()
        .and_then(|o| o.remove("null_reasons"))
    {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let mut null_reasons = serde_json::Map::new();
    for name in p.output_names() {
        if let Some(why) = kind_reasons.remove(&name) {
            null_reasons.insert(name, why);
        }
    }
    if let Some(obj) = r.json.as_object() {
        for (k, v) in obj {
            if v.is_null() && !kind_reasons.contains_key(k) {
                let why = if k == "score" {
                    "no fitted score scale for this workload and machine (the work per page is carried over or given, not fitted to a score)".to_string()
                } else {
                    format!(
                        "kind {}'s model gives no value for {k} in this case",
                        w.kind.name()
                    )
                };
                kind_reasons.insert(k.clone(), why.into());
            }
        }
    }
    if let Some(obj) = r.json.as_object_mut() {
        obj.insert("null_reasons".to_string(), kind_reasons.into());
    }
    for name in p.output_names() {
        let finite = p.output(&name).is_some_and(f64::is_finite);
        if !finite && !null_reasons.contains_key(&name) {
            null_reasons.insert(
                name.clone(),
                format!(
                    "kind {}'s model gives no finite value for {name} in this case",
                    w.kind.name()
                )
                .into(),
            );
        }
    }
    if let Some(obj) = r.json.as_object_mut() {
        obj.insert(
            "predicted".to_string(),
            serde_json::json!({
                "workload": w.name(),
                "kind": w.kind.name(),
                "origin": w.origin,
                "op": p.op,
                "ns_per_op": p.ns_per_op,
                "throughput_per_task": p.throughput_per_task,
                "throughput_total": p.throughput_total,
                "tasks": p.tasks,
                "zones": p.zones,
                "outputs": outputs,
                "null_reasons": null_reasons,
            }),
        );
    }
    r.notes.insert(
        0,
        format!(
            "{} (kind {}): {} ns per operation ({}) per task, {} operations/s over {} task(s)",
            w.name(),
            w.kind.name(),
            pcpmodel::output::report::sig(p.ns_per_op, 4),
            p.op,
            pcpmodel::output::report::sig(p.throughput_total, 4),
            p.tasks
        ),
    );
    r
}
