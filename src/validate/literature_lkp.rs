//! The kernel test robot's netperf SCTP_STREAM_MANY runs on `lkp-icl-2sp4` (2022), an
//! independent check of `models/workloads/netperf-sctp-stream.toml` on the machine it is
//! predicted on (`models/icelake-server.toml`, the same 2 x Xeon Platinum 8358 box), at 1 and
//! 64 pairs (`data/lkp/README.md`).
//!
//! Blind: the rows were added with the model and its files unchanged; the send order is the
//! kernel's for the job's 10 KiB send ([`sctp_data_chunk_order`]), one block per send as the
//! workload file has it, and the work per page is the file's (netperf UDP's, carried over from
//! thread 004's fit). Nothing is fitted to these rows.
//!
//! The rows are per pair: Mbit/s of payload, pages and allocations per send. What the model
//! cannot say (how busy the pairs' CPUs are) is computed from the reports in the note.

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::skb::sctp_data_chunk_order;
use crate::kernel::version::KernelVersion;
use crate::workload::{Knobs, Predicted, Registry};

use super::literature::{csv_rows, num};
use super::{Role, TableValidation, ValidationRow};

const TABLE: &str = "lkp/lkp_netperf_sctp_stream_many_10k_icelake_2022";
const THREAD: &str = "literature-lkp";
const MACHINE: &str = "icelake-server";
const WORKLOAD: &str = "netperf-sctp-stream";

/// One report's parent-commit run.
struct Run {
    pairs: u32,
    send_bytes: u64,
    kernel: KernelVersion,
    mbps_per_pair: f64,
    runtime_s: f64,
    sends: f64,
    pgalloc: Option<f64>,
    numa_hit: f64,
    /// Busy CPUs of the whole machine: 100 - idle %, or sys + soft + usr where no idle was
    /// printed (irq% is not printed: a lower bound by it), as a share.
    busy_share: f64,
}

fn opt(r: &std::collections::BTreeMap<String, String>, col: &str) -> Option<f64> {
    r.get(col).and_then(|v| v.trim().parse::<f64>().ok())
}

fn runs() -> Result<Vec<Run>> {
    let file = crate::data::table(TABLE)?.file;
    csv_rows(TABLE)?
        .iter()
        .map(|r| {
            let kernel =
                KernelVersion::parse_labeled(r.get("kernel").map_or("", String::as_str), file)?;
            let busy = match opt(r, "mpstat_idle_pct") {
                Some(idle) => 100.0 - idle,
                None => {
                    num(r, "mpstat_sys_pct", file)?
                        + num(r, "mpstat_soft_pct", file)?
                        + num(r, "mpstat_usr_pct", file)?
                }
            };
            Ok(Run {
                pairs: num(r, "pairs", file)? as u32,
                send_bytes: num(r, "send_size_bytes", file)? as u64,
                kernel,
                mbps_per_pair: num(r, "throughput_mbps_per_pair", file)?,
                runtime_s: num(r, "runtime_s", file)?,
                sends: num(r, "workload_sends", file)?,
                pgalloc: opt(r, "pgalloc_normal"),
                numa_hit: num(r, "numa_hit", file)?,
                busy_share: busy / 100.0,
            })
        })
        .collect()
}

/// A run beside the model's: what the rows and notes compare.
struct Outcome<'a> {
    run: &'a Run,
    /// Model: Mbit/s per pair, zone->lock utilisation, us per send.
    mbps: f64,
    util: f64,
    model_us_per_send: f64,
    /// Measured: wall us per send per pair, busy CPUs per pair.
    wall_us: f64,
    busy_per_pair: f64,
}

impl Outcome<'_> {
    /// Measured CPU time per send of a pair, us.
    fn cpu_us(&self) -> f64 {
        self.wall_us * self.busy_per_pair
    }
}

/// The model's run of `run`: the workload at the run's pairs, kernel and send order.
fn predict(machine: &Machine, run: &Run, order: u8) -> Result<Predicted> {
    let reg = Registry::builtin();
    let w = reg.resolve(WORKLOAD)?;
    let k = Knobs {
        kernel: Some(run.kernel),
        tasks: Some(run.pairs),
        order: Some(order),
        means_only: true,
        ..Knobs::default()
    };
    w.predict(machine, &k)
}

/// The LKP SCTP table: per-pair throughput at 1 and 64 pairs and their ratio, pages and
/// allocations per send; a note with the CPU accounting the reports print.
pub fn lkp_sctp() -> Result<TableValidation> {
    let machine = Machine::builtin(MACHINE)?;
    let cpus = f64::from(machine.cpus());
    let runs = runs()?;
    let mut rows = Vec::new();
    let mut out = Vec::new();
    for run in &runs {
        let order = sctp_data_chunk_order(run.send_bytes).ok_or_else(|| {
            Error::invalid(
                TABLE,
                "send_size_bytes",
                "a send this small is a slab object, not a page allocation: no row to predict",
            )
        })?;
        let pages_per_send = f64::from(1u32 << order);
        let p = predict(&machine, run, order)?;
        let util = p.output("zone_lock_utilisation").unwrap_or(0.0);
        // The op is one base page; a send moves `pages_per_send` of them and `send_bytes` of
        // payload.
        let mbps = p.throughput_per_task / pages_per_send * run.send_bytes as f64 * 8.0 / 1e6;
        let how = format!(
            "blind: {WORKLOAD} on {MACHINE}, kernel {}, {} pairs, one order-{order} block per {}-byte send, work per page carried over from netperf UDP; model: {:.0} ns per page per pair, zone->lock utilisation {util:.2}, queue slowdown {:.2}x",
            run.kernel,
            run.pairs,
            run.send_bytes,
            p.ns_per_op,
            p.output("queue_slowdown").unwrap_or(1.0),
        );
        rows.push(ValidationRow::new(
            THREAD,
            MACHINE,
            format!("{} pair(s), 10K sends: throughput per pair", run.pairs),
            "mbps_per_pair",
            run.mbps_per_pair,
            mbps,
            "Mbit/s",
            Role::Literature,
            how.clone(),
        ));
        if let Some(pg) = run.pgalloc {
            rows.push(ValidationRow::new(
                THREAD,
                MACHINE,
                format!("{} pair(s): pages allocated per send", run.pairs),
                "pages_per_send",
                pg / run.sends,
                pages_per_send,
                "pages",
                Role::Literature,
                format!("proc-vmstat.pgalloc_normal over netperf.workload; {how}"),
            ));
        }
        rows.push(ValidationRow::new(
            THREAD,
            MACHINE,
            format!("{} pair(s): page allocations per send", run.pairs),
            "allocations_per_send",
            run.numa_hit / run.sends,
            1.0,
            "allocations",
            Role::Literature,
            format!("numa_hit over netperf.workload; {how}"),
        ));
        out.push(Outcome {
            run,
            mbps,
            util,
            model_us_per_send: p.ns_per_op * pages_per_send / 1e3,
            wall_us: 1e6 * run.runtime_s * f64::from(run.pairs) / run.sends,
            busy_per_pair: run.busy_share * cpus / f64::from(run.pairs),
        });
    }
    let mut notes = vec![
        "source: the kernel test robot's reports (data/lkp/README.md), the parent commits' columns of two 2022 networking regressions on lkp-icl-2sp4 (models/icelake-server.toml), not runs of any PCP change; blind: added with the model and its files unchanged, nothing fitted".to_string(),
    ];
    if let (Some(one), Some(many)) = (
        out.iter().find(|o| o.run.pairs == 1),
        out.iter().find(|o| o.run.pairs > 1),
    ) {
        rows.push(ValidationRow::new(
            THREAD,
            MACHINE,
            format!("{} pairs / 1 pair: throughput per pair", many.run.pairs),
            "ratio",
            many.run.mbps_per_pair / one.run.mbps_per_pair,
            many.mbps / one.mbps,
            "ratio",
            Role::Literature,
            "the two rows above (the kernels differ: a 5.18-rc and a 5.19-rc tree, with no page-allocator change between them in `pcpmodel kernel changes`)",
        ));
        let facts: Vec<String> = out
            .iter()
            .map(|o| {
                format!(
                    "{} pair(s): {:.2} us per send per pair, {:.2} busy CPUs per pair",
                    o.run.pairs, o.wall_us, o.busy_per_pair,
                )
            })
            .collect();
        notes.push(format!(
            "the reports' CPU accounting (busy = 100 - idle %, or sys + soft + usr, over {} CPUs): {}; from 1 to {} pairs the wall time per send grows {:.2}x, the CPU time per send {:+.0} %",
            machine.cpus(),
            facts.join("; "),
            many.run.pairs,
            many.wall_us / one.wall_us,
            100.0 * (many.cpu_us() / one.cpu_us() - 1.0),
        ));
        notes.push(format!(
            "the machine is {:.0} % idle at {} pairs, so a pair's slowdown is sleep, which the model has no term for: its pairs run at their lone speed, offer zone->lock {:.2}x the measured rate and spin on it instead ({:.2} us per send)",
            100.0 * (1.0 - many.run.busy_share),
            many.run.pairs,
            many.wall_us / one.model_us_per_send,
            many.model_us_per_send,
        ));
    }
    // A saturated lock's throughput is a ceiling: where the measured pairs move more than the
    // model's saturated lock lets them, its hold per send (or its zone visits per send) is too
    // large, whatever else the pairs do.
    let nodes = f64::from(machine.topology.numa_nodes.value.max(1));
    for o in &out {
        let (pairs, measured, predicted, util) = (o.run.pairs, o.run.mbps_per_pair, o.mbps, o.util);
        if util < 0.99 || predicted <= 0.0 {
            continue;
        }
        let bits = o.run.send_bytes as f64 * 8.0;
        let per_zone = (f64::from(pairs) / nodes).ceil();
        let sends_per_s = predicted * 1e6 / bits;
        notes.push(format!(
            "a saturated lock is a ceiling: at {pairs} pairs the model's zone->lock (utilisation {util:.2}, {per_zone:.0} pairs per zone) lets a pair move {:.0} Mbit/s ({:.0} ns of hold per send); the measured pairs move {:.2}x that ceiling, so whatever their sleep, the model's hold or zone visits per send are too large",
            predicted,
            1e9 / (per_zone * sends_per_s),
            measured / predicted,
        ));
    }
    if let Some(r) = runs.iter().find(|r| r.pgalloc.is_some()) {
        let pages = r.pgalloc.unwrap_or(0.0) / r.sends;
        let allocs = r.numa_hit / r.sends;
        notes.push(format!(
            "pages per send ({} pair(s)): {:.2} pages in {:.2} allocations per {}-byte send, where the model takes one order-2 block (the DATA chunk's linear skb) and a reading of net/sctp gives two: neither accounts for the measured mix, and this host's kernel has no SCTP to trace",
            r.pairs,
            pages,
            allocs,
            r.send_bytes,
        ));
    }
    Ok(TableValidation::new(
        THREAD,
        "Kernel test robot 2022: netperf SCTP_STREAM_MANY 10K, per pair at 1 and 64 pairs (2 x Xeon 8358, lkp-icl-2sp4)",
        rows,
        Vec::new(),
        (0, &[]),
        notes,
    ))
}
