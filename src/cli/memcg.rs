//! Threads 001-003 commands: `memcg`, and `predict --workload memcg-netperf|page-bench|page-fault1`.
//! (Owned by the allocation-path model work.)

use std::process::ExitCode;

use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::highorder::HighOrderModel;
use pcpmodel::model::memcg::MemcgModel;
use pcpmodel::model::vmstat::NumaStatModel;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::validate::{t001, t002};
use pcpmodel::Machine;

use super::predict::{kernel_arg, Workload};

/// Arguments of `pcpmodel memcg`.
#[derive(Debug, clap::Args)]
pub struct MemcgArgs {
    /// Machine: built-in name or TOML file.
    #[arg(long, default_value = "memcg-72cpu")]
    pub machine: String,
    /// MEMCG_CHARGE_BATCH to compare with, 1..=65536 pages (the sweep runs 1..=1024 around it).
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// cgroup hierarchy depth below the root, 0..=64.
    #[arg(long, default_value_t = 3)]
    pub cgroup_depth: u32,
    /// netperf instances (each a sender and a receiver CPU: at most half the machine's CPUs).
    #[arg(long, default_value_t = 36)]
    pub instances: u32,
}

/// Checks the memcg flags against their physical ranges (src/bounds.rs): the batch, the depth,
/// and instances that fit the machine (each instance is a sender and a receiver CPU).
fn memcg_flags(
    machine: &Machine,
    batch: Option<u32>,
    depth: Option<u32>,
    instances: Option<u32>,
) -> anyhow::Result<()> {
    use pcpmodel::bounds;
    let e = anyhow::Error::msg;
    if let Some(b) = batch {
        bounds::MEMCG_CHARGE_BATCH
            .check_flag("--batch", f64::from(b))
            .map_err(e)?;
    }
    if let Some(d) = depth {
        bounds::CGROUP_DEPTH
            .check_flag("--cgroup-depth", f64::from(d))
            .map_err(e)?;
    }
    if let Some(i) = instances {
        bounds::TASKS
            .check_flag("--instances", f64::from(i))
            .map_err(e)?;
        let cpus = machine.cpus();
        if u64::from(i) * 2 > u64::from(cpus) {
            anyhow::bail!(
                "--instances {i}: each netperf instance needs a sender and a receiver CPU, and {} has {cpus} CPUs (at most {} instances)",
                machine.name,
                cpus / 2
            );
        }
    }
    Ok(())
}

/// Parameters of the memcg model: fixed work from the root-memcg run, transfer scale fitted to
/// 6.0-rc1 at batch 32 (thread 001's calibration).
fn memcg_params() -> anyhow::Result<Vec<f64>> {
    Ok(t001::calibrated_params()?.0)
}

/// A doubling that gains less than this, percent, counts as flat in `memcg`'s summary line.
const FLAT_GAIN_PCT: f64 = 5.0;

/// The smallest batch from which every doubling in `doublings` (batch, gain of the doubling that
/// ends at batch, percent; in increasing batch order) gains less than `limit_pct`: later
/// doublings that gain more (the curve is not monotone where a counter line stops saturating)
/// move it up. None when the last doubling still gains `limit_pct` or more.
fn flattens_at(doublings: &[(u32, f64)], limit_pct: f64) -> Option<u32> {
    let mut flat = None;
    for &(b, g) in doublings.iter().rev() {
        if g >= limit_pct {
            break;
        }
        flat = Some(b);
    }
    flat
}

/// Runs `pcpmodel memcg`.
pub fn memcg(args: MemcgArgs, format: Format) -> anyhow::Result<ExitCode> {
    let machine = Machine::resolve(&args.machine)?;
    memcg_flags(
        &machine,
        Some(args.batch),
        Some(args.cgroup_depth),
        Some(args.instances),
    )?;
    let model = MemcgModel::new(&machine, args.instances, args.cgroup_depth)?;
    let p = memcg_params()?;
    let mut batches: Vec<u32> = (0..=10).map(|i| 1u32 << i).collect();
    if !batches.contains(&args.batch) {
        batches.push(args.batch);
        batches.sort_unstable();
    }
    let mut t = Table::new([
        "batch (pages)",
        "throughput (Mbit/s)",
        "gain vs half batch (%)",
        "counter ns per page",
        "line utilisation",
        "SMT-shared transfers (%)",
    ])
    .titled(format!(
        "memcg charge batching on {}, {} instances, depth {}",
        machine.name, args.instances, args.cgroup_depth
    ));
    let mut json_rows = Vec::new();
    let mut prev: Option<f64> = None;
    // (batch, gain of doubling from batch / 2 to batch) for the powers of two.
    let mut doublings: Vec<(u32, f64)> = Vec::new();
    for b in &batches {
        let e = model.estimate(&p, *b)?;
        let gain = prev.map(|x| 100.0 * (e.throughput_mbps / x - 1.0));
        if b.is_power_of_two() {
            if let Some(g) = gain {
                doublings.push((*b, g));
            }
            prev = Some(e.throughput_mbps);
        }
        t.push([
            b.to_string(),
            sig(e.throughput_mbps, 5),
            gain.map_or(String::new(), |g| format!("{g:.1}")),
            sig(
                e.counter_service_ns_per_page + e.counter_wait_ns_per_page,
                4,
            ),
            format!("{:.3}", e.line_utilisation),
            format!("{:.1}", 100.0 * e.sibling_shared),
        ]);
        json_rows.push(e);
    }
    let flat_at = flattens_at(&doublings, FLAT_GAIN_PCT);
    let json = serde_json::json!({
        "machine": machine.name,
        "instances": args.instances,
        "cgroup_depth": args.cgroup_depth,
        "parameters": p,
        "sweep": json_rows,
        "flattens_at_batch": flat_at,
        "flat_gain_pct": FLAT_GAIN_PCT,
    });
    let notes = vec![
        format!(
            "parameters: fixed_ns_per_page {:.0} ns (root-memcg run), transfer_scale {:.2} (fitted to 6.0-rc1 at batch 32), ack_uncharge_on_sender {} (held)",
            p[0], p[1], p[2]
        ),
        match flat_at {
            Some(b) => format!(
                "every doubling of the batch from {} pages up to {} gains less than {FLAT_GAIN_PCT} % (rows from batch {b} on)",
                b / 2,
                batches.last().copied().unwrap_or(b)
            ),
            None => format!(
                "the last doubling in the sweep still gains {FLAT_GAIN_PCT} % or more: the gain does not flatten below {} pages",
                batches.last().copied().unwrap_or(0)
            ),
        },
    ];
    super::emit(
        &Report {
            json,
            tables: vec![t],
            notes,
        },
        format,
    )
}

/// `pcpmodel predict --workload memcg-netperf|page-bench|page-fault1`.
pub fn predict(args: &super::predict::Args, format: Format) -> anyhow::Result<ExitCode> {
    match args.workload {
        Workload::MemcgNetperf => {
            let machine = Machine::resolve(args.machine_name())?;
            memcg_flags(&machine, args.batch, args.cgroup_depth, args.instances)?;
            let model = MemcgModel::new(
                &machine,
                args.instances.unwrap_or(36),
                args.cgroup_depth.unwrap_or(3),
            )?;
            let p = memcg_params()?;
            let e = model.estimate(&p, args.batch.unwrap_or(64))?;
            let t = Table::terms(
                format!(
                    "memcg-netperf on {}, batch {} pages, {} counter levels",
                    machine.name, e.batch_pages, e.levels
                ),
                "ns per payload page",
                &[
                    ("fixed work", e.fixed_ns_per_page),
                    ("counter line transfers", e.counter_service_ns_per_page),
                    ("waiting for counter lines", e.counter_wait_ns_per_page),
                ],
                e.ns_per_page,
            );
            let mut lines = Table::new([
                "counter line",
                "transfers per visit",
                "service per visit (ns)",
                "response per visit (ns)",
                "utilisation",
                "SMT-shared (%)",
            ])
            .titled("counter lines (one visit = one walk or flush touching the line)");
            for l in &e.lines {
                lines.push([
                    l.name.clone(),
                    format!("{:.2}", l.transfers_per_walk),
                    sig(l.service_ns, 4),
                    sig(l.response_ns, 4),
                    format!("{:.3}", l.utilisation),
                    format!("{:.1}", 100.0 * l.sibling_shared),
                ]);
            }
            let notes = vec![
                format!(
                    "throughput {} Mbit/s per instance; busiest counter line {:.0} % busy",
                    sig(e.throughput_mbps, 5),
                    100.0 * e.line_utilisation
                ),
                format!(
                    "{:.0} busy threads per core: SMT siblings queued at the same line share one transfer, {:.1} % of all transfers here (the more CPUs queue, the more they share)",
                    e.threads_per_core,
                    100.0 * e.sibling_shared
                ),
            ];
            let json = serde_json::json!({"workload": "memcg-netperf", "machine": machine.name, "parameters": p, "estimate": e});
            super::predict::emit_predicted(
                args,
                &Report {
                    json,
                    tables: vec![t, lines],
                    notes,
                },
                format,
            )
        }
        Workload::PageBench => {
            let machine = Machine::resolve(args.machine_name())?;
            let kernel = kernel_arg(&args.kernel, KernelVersion::DEFAULT)?;
            let fit_model = t002::model_002()?;
            let r = t002::fit_002(&fit_model)?;
            let p: Vec<f64> = r.params.iter().map(|x| x.value).collect();
            let model = NumaStatModel::new(&machine, kernel)?;
            let threads = args.threads.unwrap_or(1);
            let ns = args.numa_stat.unwrap_or(1);
            if ns > 1 {
                anyhow::bail!("--numa-stat must be 0 or 1, got {ns}");
            }
            let e = model.estimate(&p, threads, ns == 1)?;
            let t = Table::terms(
                format!(
                    "page-bench on {}, kernel {}.{}, {threads} threads, vm.numa_stat {ns}",
                    machine.name, kernel.major, kernel.minor
                ),
                "cycles per page",
                &[
                    ("alloc + free", e.base_cycles),
                    ("per-CPU NUMA counters", e.local_counter_cycles),
                    ("folds into shared counters", e.fold_cycles),
                ],
                e.cycles_per_page,
            );
            let notes = vec![format!(
                "SMT stretch {:.2}; fold threshold {} events; parameters fitted to thread 002",
                e.smt_stretch, e.fold_threshold
            )];
            let json = serde_json::json!({"workload": "page-bench", "machine": machine.name, "parameters": p, "estimate": e});
            super::predict::emit_predicted(
                args,
                &Report {
                    json,
                    tables: vec![t],
                    notes,
                },
                format,
            )
        }
        Workload::PageFault1 => {
            let machine = Machine::resolve(args.machine_name())?;
            let kernel = kernel_arg(&args.kernel, KernelVersion::DEFAULT)?;
            let model =
                HighOrderModel::page_fault1(&machine, kernel, args.procs.unwrap_or(90), 10.0)?;
            let p = model.derived_params(&machine);
            let cases: Vec<bool> = match args.high_order_pcp {
                Some(b) => vec![b],
                None => vec![false, true],
            };
            let mut t = Table::new([
                "order-4 on PCP",
                "perf lock attached",
                "acquisitions",
                "acquisitions per folio",
                "lock utilisation",
                "P(lock held)",
                "P(traced)",
                "contended (traced acquisitions)",
                "total wait (us)",
                "avg wait (us)",
            ])
            .titled(format!(
                "page-fault1 on {}, kernel {}.{}, {} tasks, 10 s",
                machine.name, kernel.major, kernel.minor, model.tasks
            ));
            let mut ests = Vec::new();
            let mut alone = Vec::new();
            for c in cases {
                let observed = model.estimate_observed(&p, c, &model.probe)?;
                let bare = model.estimate(&p, c)?;
                for (attached, e) in [(true, &observed), (false, &bare)] {
                    t.push([
                        c.to_string(),
                        attached.to_string(),
                        sig(e.acquisitions, 4),
                        sig(e.acquisitions_per_folio, 3),
                        sig(e.utilisation, 3),
                        sig(e.p_contended, 3),
                        sig(e.p_traced, 3),
                        sig(e.contended, 4),
                        sig(e.total_wait_ns / 1e3, 4),
                        sig(e.avg_wait_ns / 1e3, 4),
                    ]);
                }
                ests.push(observed);
                alone.push(bare);
            }
            let json = serde_json::json!({"workload": "page-fault1", "machine": machine.name, "parameters": p, "perf_lock_probe": model.probe, "estimates": ests, "estimates_lock_alone": alone});
            let mut notes = vec![
                format!(
                    "derived parameters (no fit): fault {:.0} ns per folio, hold {:.0} ns lock hand-over + {:.0} ns buddy work per block",
                    p[0], model.hold_fixed_ns, p[1]
                ),
                format!(
                    "'contended' and the waits count what perf lock contention counts: acquisitions that find a pending waiter or a queue (qspinlock traces only those). With perf attached its contention_end handler runs inside the critical section (+{:.0} ns per traced hold) and {:.0} ns of handler work fall inside each reported wait (model/perflock.rs; assumed costs)",
                    model.probe.end_under_lock_ns,
                    model.probe.reported_extra_ns()
                ),
            ];
            if kernel < KernelVersion::new(5, 19) {
                notes.push(format!(
                    "kernel {}.{} has no lock:contention_begin/end tracepoints (added in 5.19), so perf lock contention cannot run there; read the 'perf lock attached = false' rows",
                    kernel.major, kernel.minor
                ));
            }
            super::predict::emit_predicted(
                args,
                &Report {
                    json,
                    tables: vec![t],
                    notes,
                },
                format,
            )
        }
        _ => anyhow::bail!(
            "workload {:?} is not an allocation-path workload",
            args.workload
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::flattens_at;

    #[test]
    fn flat_point_is_after_the_last_large_doubling() {
        // The A4 shape: a small gain early (2: 4.3 %) followed by large ones must not be "flat".
        let d = [
            (2, 4.3),
            (4, 13.8),
            (8, 17.2),
            (16, 9.0),
            (32, 17.0),
            (64, 9.4),
            (128, 4.8),
            (256, 2.4),
        ];
        assert_eq!(flattens_at(&d, 5.0), Some(128));
        assert_eq!(flattens_at(&d[..6], 5.0), None);
        assert_eq!(flattens_at(&[(2, 1.0), (4, 0.5)], 5.0), Some(2));
    }
}
