//! `pcpmodel memcg`: thread 001's sweep of MEMCG_CHARGE_BATCH (`predict --workload
//! memcg-netperf` goes through the workload registry's kind memcg-charge).

use std::process::ExitCode;

use pcpmodel::model::memcg::MemcgModel;
use pcpmodel::output::report::{sig, Format, Report, Table};
use pcpmodel::validate::t001;
use pcpmodel::Machine;

/// Arguments of `pcpmodel memcg`.
#[derive(Debug, clap::Args)]
pub struct MemcgArgs {
    /// Machine: built-in name or TOML file.
    #[arg(long, default_value = "memcg-72cpu")]
    pub machine: String,
    /// MEMCG_CHARGE_BATCH to compare with, 1..=65536 pages (the sweep runs 1..=1024 around it);
    /// `predict --charge-batch` is the same knob. Older spelling: --batch.
    #[arg(long = "charge-batch", alias = "batch", default_value_t = 64, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::MEMCG_CHARGE_BATCH))]
    pub batch: u32,
    /// cgroup hierarchy depth below the root, 1..=64.
    #[arg(long, default_value_t = 3, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::CGROUP_DEPTH))]
    pub cgroup_depth: u32,
    /// netperf instances (each a sender and a receiver CPU: at most half the machine's CPUs).
    /// Default: thread 001's 36, or half the machine's CPUs where it has fewer than 72. Older
    /// spelling: --instances.
    #[arg(long = "tasks", aliases = ["instances", "threads", "procs"], value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::TASKS))]
    pub instances: Option<u32>,
}

/// Checks that the instances fit the machine (each instance is a sender and a receiver CPU);
/// the flags' physical ranges are checked when they are parsed (`args::bounded`).
fn check_instances(machine: &Machine, instances: Option<u32>) -> anyhow::Result<()> {
    if let Some(i) = instances {
        let cpus = machine.cpus();
        if u64::from(i) * 2 > u64::from(cpus) {
            anyhow::bail!(
                "--tasks {i}: each netperf instance needs a sender and a receiver CPU, and {} has {cpus} CPUs (at most {} instances)",
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

/// `memcg --instances` by default: thread 001's netperf instances on its 72-CPU machine.
const DEFAULT_INSTANCES: u32 = 36;

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
    check_instances(&machine, args.instances)?;
    // The default fits the machine, as `latency` clamps its default tasks to the CPUs: thread
    // 001's 36 instances need 72 CPUs (issue 35, T3-memcg-default-instances).
    let instances = args
        .instances
        .unwrap_or_else(|| DEFAULT_INSTANCES.min(machine.cpus() / 2).max(1));
    let model = MemcgModel::new(&machine, instances, args.cgroup_depth)?;
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
        machine.name, instances, args.cgroup_depth
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
        "instances": instances,
        "cgroup_depth": args.cgroup_depth,
        "parameters": p,
        "sweep": json_rows,
        "flattens_at_batch": flat_at,
        "flat_gain_pct": FLAT_GAIN_PCT,
    });
    let mut notes = vec![
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
    if args.instances.is_none() && instances < DEFAULT_INSTANCES {
        notes.push(format!(
            "instances: {instances}, half of {}'s {} CPUs (the default, thread 001's {DEFAULT_INSTANCES}, needs {} CPUs); --tasks sets it",
            machine.name,
            machine.cpus(),
            2 * DEFAULT_INSTANCES
        ));
    }
    super::emit(
        &Report {
            json,
            tables: vec![t],
            notes,
        },
        format,
    )
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
