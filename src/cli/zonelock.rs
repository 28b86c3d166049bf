//! zone->lock commands: `latency`, `scale-max`, `plot latency` for any workload whose kind
//! models zone->lock (resolved through [`pcpmodel::workload::registry`]; the case is built by
//! [`alloc_loop::lock_case`], whose docs give the rule for the lock's parameters).
//! `predict --workload mmap-fill` goes through the same kind via the registry.

use std::process::ExitCode;

use pcpmodel::data::{self, Histogram};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::zonelock::Prediction;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::workload::kinds::alloc_loop::{self, LockCase};
use pcpmodel::workload::{Knobs, NodeSpan, Workload};
use pcpmodel::Machine;

/// Arguments shared by `latency`, `scale-max` and `plot latency`.
#[derive(Debug, Clone, clap::Args)]
pub struct CaseArgs {
    /// Machine: built-in name or TOML file (default: the workload's default machine).
    #[arg(long)]
    pub machine: Option<String>,
    /// Workload: built-in name or TOML file (`pcpmodel workloads`); any workload whose kind
    /// models zone->lock.
    #[arg(long, default_value = "mmap-fill")]
    pub workload: String,
    /// Parallel tasks, one per CPU (default: the workload's count).
    #[arg(long, aliases = ["procs", "threads", "instances"], value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::TASKS))]
    pub tasks: Option<u32>,
    /// NUMA nodes the tasks run on: 1 (node 0) or all (default: the workload's).
    #[arg(long)]
    pub nodes: Option<String>,
    /// Kernel version (default: the workload's reference kernel; thread 000 ran 6.10).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Allocation order (default: the workload's).
    #[arg(long, value_parser = super::args::bounded::<u8>(&pcpmodel::bounds::ORDER))]
    pub order: Option<u8>,
    /// pcp->batch, pages, set by hand (default: the kernel's).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PCP_BATCH_PAGES))]
    pub batch: Option<u32>,
    /// pcp->high, pages, fixed (no auto-tuning; default: the kernel's).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PCP_HIGH_PAGES))]
    pub high: Option<u32>,
    /// Measurement interval for the count column, s (funclatency -i 600 in thread 000).
    #[arg(long, default_value_t = 600.0, value_parser = super::args::bounded::<f64>(&pcpmodel::bounds::DURATION_S))]
    pub duration_s: f64,
}

/// Arguments of `pcpmodel latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..=6: a build-time option of kernels >= 6.7 (default 5
    /// there; none before); thread 000 proposed a sysctl for it, which mainline did not merge.
    #[arg(long, value_parser = super::args::bounded::<u8>(&pcpmodel::bounds::PCP_BATCH_SCALE_MAX))]
    pub scale_max: Option<u8>,
}

/// Arguments of `pcpmodel scale-max`.
#[derive(Debug, clap::Args)]
pub struct ScaleMaxArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// Latency target: p99 of rmqueue_bulk() in microseconds.
    #[arg(long, value_parser = super::args::bounded::<f64>(&pcpmodel::bounds::LATENCY_TARGET_US))]
    pub p99_us: Option<f64>,
}

/// Arguments of `pcpmodel plot latency`.
#[derive(Debug, clap::Args)]
pub struct PlotLatencyArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..=6 (kernels >= 6.7, default 5 there).
    #[arg(long, value_parser = super::args::bounded::<u8>(&pcpmodel::bounds::PCP_BATCH_SCALE_MAX))]
    pub scale_max: Option<u8>,
    /// Measured histogram to draw beside the prediction (CSV lo_ns,hi_ns,count, as `pcpmodel
    /// import funclatency` writes). Default: thread 000's histogram of the same case, if any.
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    /// Output SVG file.
    #[arg(short = 'o', long)]
    pub output: std::path::PathBuf,
}

struct Solved {
    machine: Machine,
    workload: Workload,
    span: NodeSpan,
    kernel: KernelVersion,
    case: LockCase,
}

impl Solved {
    fn thread_000(&self) -> bool {
        self.workload.spec.thread.as_deref() == Some("000")
    }
}

fn setup(c: &CaseArgs, scale_max: Option<u8>) -> anyhow::Result<Solved> {
    let workload = pcpmodel::workload::resolve(&c.workload)?;
    if let Err(why) = workload.kind.refill_loop() {
        anyhow::bail!("--workload {}: {why}", workload.name());
    }
    let machine = Machine::resolve(
        c.machine
            .as_deref()
            .unwrap_or(&workload.spec.default_machine),
    )?;
    if let Some(s) = scale_max {
        check_scale(s)?;
    }
    if let Some(n) = &c.nodes {
        NodeSpan::parse(n, "--nodes")?;
    }
    // The kind's default kernel unless --kernel says otherwise (alloc-loop: the reference).
    let kernel = match &c.kernel {
        Some(_) => super::args::kernel_arg(&c.kernel, KernelVersion::DEFAULT)?,
        None => workload.kind.default_kernel(&workload.spec)?,
    };
    let knobs = Knobs {
        kernel: Some(kernel),
        batch: c.batch,
        high: c.high,
        order: c.order,
        tasks: c.tasks,
        nodes: c.nodes.clone(),
        scale_max,
        ..Knobs::default()
    };
    knobs.check()?;
    if let Some(h) = c.high {
        pcpmodel::workload::sweep::check_high("--high", h, &machine, kernel)?;
    }
    let case = alloc_loop::lock_case(&workload.spec, &machine, &knobs)?;
    Ok(Solved {
        span: case.nodes,
        machine,
        workload,
        kernel,
        case,
    })
}

fn check_scale(s: u8) -> anyhow::Result<()> {
    if s > 6 {
        anyhow::bail!("--scale-max {s}: CONFIG_PCP_BATCH_SCALE_MAX is 0..=6");
    }
    Ok(())
}

/// A quantile of the refill latency, NaN when the loop takes no refill hold.
fn q(pred: &Prediction, p: f64) -> anyhow::Result<f64> {
    if pred.calls_per_s > 0.0 {
        Ok(pred.quantile(p)?)
    } else {
        Ok(f64::NAN)
    }
}

/// Log2 bucket range covering the prediction from its 1e-5 to its 1 − 1e-6 quantile.
fn bucket_range(pred: &Prediction) -> anyhow::Result<(u32, u32)> {
    let lo = pred.quantile(1e-5)?.max(1.0);
    let hi = pred.quantile(1.0 - 1e-6)?.max(lo);
    let lo_exp = lo.log2().floor().clamp(0.0, 60.0) as u32;
    let hi_exp = (hi.log2().floor() as u32).clamp(lo_exp, 60);
    Ok((lo_exp, hi_exp))
}

/// Thread 000's measured histogram for this case, if there is one.
fn measured_000(
    machine: &str,
    procs: u32,
    span: NodeSpan,
    scale: u8,
) -> anyhow::Result<Option<(String, Histogram)>> {
    for h in data::histograms_000()? {
        let same_span = (h.nodes > 1) == (span == NodeSpan::All);
        if h.machine == machine
            && h.processes == procs
            && same_span
            && h.scale_max == u32::from(scale)
        {
            return Ok(Some((h.case.clone(), h.histogram)));
        }
    }
    Ok(None)
}

/// One `scale-max` setting's refill latency and throughput (its keys are the same for every
/// setting; the latency is NaN, JSON null, when the loop takes no refill).
fn summary_json(pred: &Prediction) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::json!({
        "avg_ns": pred.avg_ns,
        "p50_ns": q(pred, 0.5)?,
        "p99_ns": q(pred, 0.99)?,
        "p999_ns": q(pred, 0.999)?,
        "calls_per_s": pred.calls_per_s,
        "pages_per_s": pred.pages_per_s,
        "lock_utilisation": pred.lock_utilisation,
    }))
}

/// The keys every `latency` JSON of a refill loop has, whatever the kernel (README, "Output
/// contract"): the refill latency (null with its reason in `null_reasons` when the loop takes no
/// refill), `calls_per_s`, `pages_per_s` (pages allocated), `refill_pages_per_s` (pages the
/// refills move), `lock_utilisation`, the case, `histogram` (empty without refills), `zones`,
/// the parameters, the kind's terms and zone outputs, and `measured` (null with its reason when
/// thread 000 measured no histogram of the case).
fn case_json(
    s: &Solved,
    pred: &Prediction,
    histogram: Vec<serde_json::Value>,
    measured: Option<&(String, Histogram)>,
) -> anyhow::Result<serde_json::Value> {
    let t = alloc_loop::mean_terms(&s.case, pred);
    let mut null_reasons = serde_json::Map::new();
    let no_refill = alloc_loop::no_refill_reason(pred);
    let mut latency = |key: &str, v: anyhow::Result<f64>| -> anyhow::Result<serde_json::Value> {
        match &no_refill {
            Some(why) => {
                null_reasons.insert(key.to_string(), why.clone().into());
                Ok(serde_json::Value::Null)
            }
            None => Ok(serde_json::json!(v?)),
        }
    };
    let mut json = serde_json::json!({
        "avg_ns": latency("avg_ns", Ok(pred.avg_ns))?,
        "p50_ns": latency("p50_ns", q(pred, 0.5))?,
        "p99_ns": latency("p99_ns", q(pred, 0.99))?,
        "p999_ns": latency("p999_ns", q(pred, 0.999))?,
        "calls_per_s": pred.calls_per_s,
        "pages_per_s": alloc_loop::pages_allocated_per_s(&s.case, &t, s.case.tasks),
        "refill_pages_per_s": pred.pages_per_s,
        "lock_utilisation": pred.lock_utilisation,
        "machine": s.machine.name,
        "workload": s.workload.name(),
        "procs": s.case.tasks,
        "nodes": s.span.as_str(),
        "scale_max": s.case.scale_max_in_effect(),
        "histogram": histogram,
        "zones": serde_json::to_value(&pred.zones)?,
        "parameters": s.case.params,
        "parameters_source": s.case.params_source,
    });
    json["measured"] = match measured {
        Some((case, h)) => serde_json::json!({
            "case": case,
            "mean_ns_midpoint": h.mean_ns(),
            "histogram": h.buckets().iter().map(|b| serde_json::json!({
                "lo_ns": b.lo_ns, "hi_ns": b.hi_ns, "count": b.count
            })).collect::<Vec<_>>(),
        }),
        None => {
            null_reasons.insert(
                "measured".to_string(),
                "no measured histogram of this case: thread 000 measured its own workload only, on its machines, task counts and CONFIG_PCP_BATCH_SCALE_MAX values (kernels with the option)".into(),
            );
            serde_json::Value::Null
        }
    };
    if json["scale_max"].is_null() {
        null_reasons.insert(
            "scale_max".to_string(),
            format!(
                "kernel {} has no CONFIG_PCP_BATCH_SCALE_MAX (added in 6.7)",
                s.kernel
            )
            .into(),
        );
    }
    json["null_reasons"] = null_reasons.into();
    add_case_json(&mut json, s, pred)?;
    Ok(json)
}

fn zones_table(pred: &Prediction) -> Table {
    let mut t = Table::new([
        "node",
        "procs",
        "refill pages (mean)",
        "drain pages (mean)",
        "refill hold (us)",
        "drain hold (us)",
        "refill wait (us)",
        "lock utilisation",
        "refills/s",
    ])
    .titled("Per zone (one zone->lock each)");
    for z in &pred.zones {
        t.push([
            z.node.to_string(),
            z.procs.to_string(),
            sig(z.dynamics.mean_refill_pages(), 4),
            sig(z.dynamics.mean_free_pages(), 4),
            sig(z.refill_hold_ns / 1e3, 4),
            sig(z.free_hold_ns / 1e3, 4),
            sig(z.refill_wait_ns / 1e3, 4),
            format!("{:.3}", z.lock_utilisation),
            sig(z.refill_per_s, 4),
        ]);
    }
    t
}

fn params_note(c: &LockCase) -> String {
    format!(
        "parameters: fixed_ns {} ns, lines_per_page {}, work_ns_per_page {} ns ({})",
        sig(c.params.fixed_ns, 4),
        sig(c.params.lines_per_page, 3),
        sig(c.params.work_ns_per_page, 4),
        c.params_source
    )
}

/// Builds the `latency` report (also used by `predict --workload mmap-fill`).
fn latency_report(c: &CaseArgs, scale: Option<u8>) -> anyhow::Result<Report> {
    let s = setup(c, scale)?;
    let pred = s.case.predict(true)?;
    let scale = s.case.scale_max_in_effect();
    let procs = s.case.tasks;
    if pred.calls_per_s <= 0.0 {
        return no_refill_report(&s, &pred);
    }
    let (lo, hi) = bucket_range(&pred)?;
    let buckets = pred.log2_fractions(lo, hi)?;
    let measured = match scale {
        Some(sc) if s.thread_000() => measured_000(&s.machine.name, procs, s.span, sc)?,
        _ => None,
    };
    let mfrac = |lo_ns: u64| -> Option<f64> {
        let (_, h) = measured.as_ref()?;
        let tot = h.total_count() as f64;
        h.buckets()
            .iter()
            .find(|b| b.lo_ns == lo_ns)
            .map(|b| b.count as f64 / tot)
    };
    let maxf = buckets.iter().map(|b| b.2).fold(0.0, f64::max);
    let mut cols = vec![
        "lo (ns)".to_string(),
        "hi (ns)".to_string(),
        "fraction".to_string(),
        format!("count per {} s", sig(c.duration_s, 4)),
    ];
    if measured.is_some() {
        cols.push("measured fraction".to_string());
    }
    cols.push("distribution".to_string());
    let mut hist = Table::new(cols).titled(format!(
        "rmqueue_bulk() latency, {}: {procs} tasks on {} node(s) of {}, kernel {}, CONFIG_PCP_BATCH_SCALE_MAX {}",
        s.workload.name(),
        s.span.as_str(),
        s.machine.name,
        s.kernel,
        scale.map_or("none".to_string(), |x| x.to_string())
    ));
    let mut rows_json = Vec::new();
    for (l, h, f) in &buckets {
        let mut row = vec![
            l.to_string(),
            h.to_string(),
            format!("{f:.5}"),
            format!("{:.0}", f * pred.calls_per_s * c.duration_s),
        ];
        if measured.is_some() {
            row.push(mfrac(*l).map_or("-".to_string(), |m| format!("{m:.5}")));
        }
        let n = if maxf > 0.0 {
            (40.0 * f / maxf).round() as usize
        } else {
            0
        };
        row.push(format!("|{:<40}|", "*".repeat(n)));
        hist.push(row);
        rows_json.push(serde_json::json!({"lo_ns": l, "hi_ns": h, "fraction": f}));
    }
    let json = case_json(&s, &pred, rows_json, measured.as_ref())?;
    let mut notes = vec![format!(
        "avg {} us, p50 {} us, p99 {} us, p99.9 {} us; {} calls/s refilling {} pages/s ({} MB/s); lock utilisation {:.3}",
        sig(pred.avg_ns / 1e3, 4),
        sig(q(&pred, 0.5)? / 1e3, 4),
        sig(q(&pred, 0.99)? / 1e3, 4),
        sig(q(&pred, 0.999)? / 1e3, 4),
        sig(pred.calls_per_s, 4),
        sig(pred.pages_per_s, 4),
        sig(pred.pages_per_s * 4096.0 / 1e6, 4),
        pred.lock_utilisation
    )];
    notes.push(params_note(&s.case));
    notes.push(ns_per_alloc_note(&s, &pred));
    if let Some((case, _)) = &measured {
        notes.push(format!("measured fraction: thread 000, {case}"));
    }
    notes.push(
        "not modelled: decay_pcp_high() on the vmstat tick, other zone->lock users, vCPU preemption in a KVM guest (see `pcpmodel validate`)".to_string(),
    );
    Ok(Report {
        json,
        tables: vec![hist, zones_table(&pred), terms_table(&s, &pred)],
        notes,
    })
}

fn terms_table(s: &Solved, pred: &Prediction) -> Table {
    let t = alloc_loop::mean_terms(&s.case, pred);
    alloc_loop::terms_table(
        &t,
        format!(
            "One allocation of one task, {}: {} tasks, {} node(s) of {}",
            s.workload.name(),
            s.case.tasks,
            s.span.as_str(),
            s.machine.name
        ),
    )
}

fn ns_per_alloc_note(s: &Solved, pred: &Prediction) -> String {
    let t = alloc_loop::mean_terms(&s.case, pred);
    format!(
        "per allocation of one task: {} ns = work {} + lock hold per-page part {} + hand-over {} + wait {} ns{}",
        sig(t.ns_per_alloc, 4),
        sig(t.work_ns, 4),
        sig(t.hold_pages_ns, 4),
        sig(t.handover_ns, 4),
        sig(t.wait_ns, 4),
        if t.check_after_lock_ns > 0.0 {
            format!(
                " + check_new_pages() after the lock {} ns",
                sig(t.check_after_lock_ns, 4)
            )
        } else {
            String::new()
        }
    )
}

/// Workload, kind, kernel, the per-allocation terms and the per-zone outputs of the kind.
fn add_case_json(
    json: &mut serde_json::Value,
    s: &Solved,
    pred: &Prediction,
) -> anyhow::Result<()> {
    let t = alloc_loop::mean_terms(&s.case, pred);
    json["kind"] = s.workload.kind.name().into();
    json["kernel"] = s.kernel.to_string().into();
    json["tasks"] = s.case.tasks.into();
    json["order"] = s.case.shape.order.into();
    json["ns_per_alloc"] = t.ns_per_alloc.into();
    json["terms_per_alloc"] = serde_json::to_value(t)?;
    json["zone_outputs"] = serde_json::to_value(alloc_loop::zone_outputs(&s.case, pred))?;
    Ok(())
}

/// The report of a loop that takes no refill hold (e.g. page_bench01: every allocation is
/// served by the page freed just before).
fn no_refill_report(s: &Solved, pred: &Prediction) -> anyhow::Result<Report> {
    // The same keys as a loop with refills: the latency null with its reason, no histogram.
    let json = case_json(s, pred, Vec::new(), None)?;
    Ok(Report {
        json,
        tables: vec![zones_table(pred), terms_table(s, pred)],
        notes: vec![
            format!(
                "{} takes no rmqueue_bulk() refill in steady state: the PCP list serves every allocation, so there is no refill latency to show",
                s.workload.name()
            ),
            ns_per_alloc_note(s, pred),
            params_note(&s.case),
        ],
    })
}

/// Runs `pcpmodel latency`.
pub fn latency(args: LatencyArgs, format: Format) -> anyhow::Result<ExitCode> {
    let workload = pcpmodel::workload::resolve(&args.case.workload)?;
    if let (Err(why), true) = (workload.kind.refill_loop(), workload.kind.has_zone_lock()) {
        let r = own_lock_report(&args, &workload, &why)?;
        return super::emit(&r, format);
    }
    let r = latency_report(&args.case, args.scale_max)?;
    super::emit(&r, format)
}

/// `latency` for a kind that models zone->lock in a model of its own (not the refill loop): its
/// per-zone lock outputs from `predict` (means; percentiles where the kind gives them), no
/// histogram. The refill loop's knobs are refused, the kind's own go through its prediction.
fn own_lock_report(args: &LatencyArgs, w: &Workload, why: &str) -> anyhow::Result<Report> {
    let c = &args.case;
    for (flag, given) in [
        ("--batch", c.batch.is_some()),
        ("--high", c.high.is_some()),
        ("--scale-max", args.scale_max.is_some()),
        ("--nodes", c.nodes.is_some()),
    ] {
        if given {
            anyhow::bail!(
                "{flag}: workload {} (kind {}) has no refill loop for it to change: {why}",
                w.name(),
                w.kind.name()
            );
        }
    }
    let machine = Machine::resolve(c.machine.as_deref().unwrap_or(&w.spec.default_machine))?;
    let knobs = Knobs {
        kernel: match &c.kernel {
            Some(_) => Some(super::args::kernel_arg(&c.kernel, KernelVersion::DEFAULT)?),
            None => None,
        },
        tasks: c.tasks,
        order: c.order,
        ..Knobs::default()
    };
    knobs.check()?;
    let p = w.predict(&machine, &knobs)?;
    let us = |ns: f64| {
        if ns.is_finite() {
            sig(ns / 1e3, 4)
        } else {
            "-".to_string()
        }
    };
    let mut t = Table::new([
        "node",
        "side",
        "tasks",
        "acquisitions/s",
        "pages per acquisition",
        "hold mean (us)",
        "wait mean (us)",
        "wait p50 (us)",
        "wait p99 (us)",
        "lock utilisation",
    ])
    .titled(format!(
        "{}: zone->lock per zone on {} (kind {}'s own lock model)",
        w.name(),
        machine.name,
        w.kind.name()
    ));
    for z in &p.zones {
        for (side, l) in [("alloc", &z.alloc), ("free", &z.free)] {
            t.push([
                z.node.to_string(),
                side.to_string(),
                z.tasks.to_string(),
                sig(l.acquisitions_per_s, 4),
                sig(l.pages_per_acquisition, 4),
                us(l.hold.mean_ns),
                us(l.wait.mean_ns),
                us(l.wait.p50_ns),
                us(l.wait.p99_ns),
                sig(z.utilisation, 3),
            ]);
        }
    }
    Ok(Report {
        json: serde_json::json!({
            "workload": w.name(),
            "kind": w.kind.name(),
            "machine": machine.name,
            "zones": p.zones,
            "histogram": [],
        }),
        tables: vec![t],
        notes: std::iter::once(format!("no refill-latency histogram: {why}"))
            .chain(
                p.zones
                    .iter()
                    .any(|z| !z.alloc.wait.p50_ns.is_finite())
                    .then(|| "'-': the kind's model gives means only (no percentiles)".to_string()),
            )
            .collect(),
    })
}

/// Runs `pcpmodel scale-max`.
pub fn scale_max(args: ScaleMaxArgs, format: Format) -> anyhow::Result<ExitCode> {
    if let Some(t) = args.p99_us {
        pcpmodel::bounds::LATENCY_TARGET_US
            .check_flag("--p99-us", t)
            .map_err(anyhow::Error::msg)?;
    }
    let s = setup(&args.case, None)?;
    if !(s.kernel.has_pcp_batch_scale_max() || s.kernel.may_have_scale_max_backport()) {
        anyhow::bail!(
            "scale-max: kernel {} has no CONFIG_PCP_BATCH_SCALE_MAX (added in 6.7): nothing to choose; give --kernel 6.7 or later",
            s.kernel
        );
    }
    let mut preds = Vec::new();
    for scale in 0..=6u8 {
        let p = s.case.with_scale_max(scale).predict(true)?;
        preds.push((scale, p));
    }
    if preds
        .iter()
        .all(|(_, p)| !(p.calls_per_s > 0.0 && p.avg_ns.is_finite()))
    {
        anyhow::bail!(
            "scale-max: {} takes no rmqueue_bulk() refill in steady state on {} (the PCP list serves every allocation): CONFIG_PCP_BATCH_SCALE_MAX changes nothing here (`pcpmodel latency` shows the loop)",
            s.workload.name(),
            s.machine.name
        );
    }
    let best_tp = preds.iter().map(|(_, p)| p.pages_per_s).fold(0.0, f64::max);
    let target_ns = args.p99_us.map(|t| t * 1e3);
    let mut rows_json = Vec::new();
    let mut table = Table::new([
        "scale_max",
        "max pages per hold",
        "avg (us)",
        "p50 (us)",
        "p99 (us)",
        "p99.9 (us)",
        "calls/s",
        "pages/s",
        "throughput vs best (%)",
        "lock utilisation",
        "meets target",
    ])
    .titled(format!(
        "rmqueue_bulk() latency vs throughput, {}: {} tasks on {} node(s) of {}",
        s.workload.name(),
        s.case.tasks,
        s.span.as_str(),
        s.machine.name
    ));
    let mut chosen: Option<(u8, f64)> = None;
    for (scale, p) in &preds {
        let p99 = q(p, 0.99)?;
        let meets = target_ns.map(|t| p99 <= t);
        if meets == Some(true) && chosen.is_none_or(|(_, tp)| p.pages_per_s > tp) {
            chosen = Some((*scale, p.pages_per_s));
        }
        let max_hold = p
            .zones
            .iter()
            .flat_map(|z| z.dynamics.refill.iter().map(|r| r.0))
            .max()
            .unwrap_or(0);
        let rel = 100.0 * (p.pages_per_s / best_tp - 1.0);
        table.push([
            scale.to_string(),
            max_hold.to_string(),
            sig(p.avg_ns / 1e3, 4),
            sig(q(p, 0.5)? / 1e3, 4),
            sig(p99 / 1e3, 4),
            sig(q(p, 0.999)? / 1e3, 4),
            sig(p.calls_per_s, 4),
            sig(p.pages_per_s, 4),
            format!("{rel:+.1}"),
            format!("{:.3}", p.lock_utilisation),
            meets.map_or("-".to_string(), |m| {
                if m { "yes" } else { "no" }.to_string()
            }),
        ]);
        let mut j = summary_json(p)?;
        j["scale_max"] = (*scale).into();
        j["max_refill_pages"] = max_hold.into();
        j["throughput_vs_best_pct"] = rel.into();
        j["meets_target"] = serde_json::to_value(meets)?;
        rows_json.push(j);
    }
    let mut notes = Vec::new();
    match (args.p99_us, chosen) {
        (Some(t), Some((sc, tp))) => notes.push(format!(
            "CONFIG_PCP_BATCH_SCALE_MAX {sc} meets p99 <= {} us at the least throughput cost: {} pages/s, {:+.1} % vs the best setting",
            sig(t, 4),
            sig(tp, 4),
            100.0 * (tp / best_tp - 1.0)
        )),
        (Some(t), None) => notes.push(format!(
            "no setting 0..6 meets p99 <= {} us on this machine and workload",
            sig(t, 4)
        )),
        (None, _) => notes.push(
            "give --p99-us X to pick the setting that meets a latency target at the least throughput cost".to_string(),
        ),
    }
    notes.push(params_note(&s.case));
    let json = serde_json::json!({
        "machine": s.machine.name,
        "workload": s.workload.name(),
        "procs": s.case.tasks,
        "nodes": s.span.as_str(),
        "target_p99_us": args.p99_us,
        "chosen_scale_max": chosen.map(|c| c.0),
        "settings": rows_json,
        "parameters": s.case.params,
        "parameters_source": s.case.params_source,
    });
    super::emit(
        &Report {
            json,
            tables: vec![table],
            notes,
        },
        format,
    )
}

/// Runs `pcpmodel plot latency`.
pub fn plot_latency(args: PlotLatencyArgs, format: Format) -> anyhow::Result<ExitCode> {
    let s = setup(&args.case, args.scale_max)?;
    let pred = s.case.predict(true)?;
    if pred.calls_per_s <= 0.0 {
        anyhow::bail!(
            "plot latency: {} takes no rmqueue_bulk() refill in steady state (the PCP list serves every allocation): no latency to draw",
            s.workload.name()
        );
    }
    let scale = s.case.scale_max_in_effect();
    let measured: Option<(String, Histogram)> = match &args.data {
        Some(p) => {
            let text = pcpmodel::input::read_text(
                p,
                &p.display().to_string(),
                pcpmodel::input::MAX_CSV_BYTES,
            )?;
            Some((
                p.display().to_string(),
                Histogram::from_csv(&text, &p.display().to_string())?,
            ))
        }
        None => match scale {
            Some(sc) if s.thread_000() => measured_000(&s.machine.name, s.case.tasks, s.span, sc)?,
            _ => None,
        },
    };
    let (mut lo, mut hi) = bucket_range(&pred)?;
    if let Some((_, h)) = &measured {
        for b in h.buckets().iter().filter(|b| b.count > 0) {
            let e = if b.lo_ns == 0 {
                0
            } else {
                63 - b.lo_ns.leading_zeros()
            };
            lo = lo.min(e);
            hi = hi.max(e);
        }
    }
    let pb = pred.log2_fractions(lo, hi)?;
    let mb: Vec<f64> = match &measured {
        Some((_, h)) => {
            let tot = h.total_count().max(1) as f64;
            pb.iter()
                .map(|(l, _, _)| {
                    h.buckets()
                        .iter()
                        .find(|b| b.lo_ns == *l)
                        .map_or(0.0, |b| b.count as f64 / tot)
                })
                .collect()
        }
        None => Vec::new(),
    };
    let title = format!(
        "rmqueue_bulk() latency, {}: {}, {} tasks, {} node(s), scale_max {}",
        s.workload.name(),
        s.machine.name,
        s.case.tasks,
        s.span.as_str(),
        scale.map_or("none".to_string(), |x| x.to_string())
    );
    pcpmodel::output::plot_latency::draw_log2_histograms(
        &args.output,
        &title,
        &pb.iter().map(|b| (b.0, b.2)).collect::<Vec<_>>(),
        if mb.is_empty() { None } else { Some(&mb) },
        measured.as_ref().map(|m| m.0.as_str()),
    )?;
    let json = serde_json::json!({
        "output": args.output.display().to_string(),
        "buckets": pb.len(),
        "measured": measured.as_ref().map(|m| m.0.clone()),
    });
    let mut t = Table::new(["file", "buckets", "measured"]);
    t.push([
        args.output.display().to_string(),
        pb.len().to_string(),
        measured.map_or("-".to_string(), |m| m.0),
    ]);
    super::emit(
        &Report {
            json,
            tables: vec![t],
            notes: vec![],
        },
        format,
    )
}
