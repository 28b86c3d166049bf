//! Nikhil Dhama (AMD, 2025): the free_high trigger threshold (`data/literature/README.md`
//! section B), predicted with nothing fitted to it on `models/epyc-9965-2s.toml` (the CPU model
//! is assumed there: 2 x 192 cores, SMT2, the published "384 vCPUs on each node").
//!
//! iperf3 is the producer-consumer kind (`models/workloads/iperf3-tcp.toml`) with the free_high
//! trigger of [`crate::model::freehigh`]: runs of frees without an allocation on the freeing
//! CPU (`params.free_run_pages`, assumed 16 pages), the kernel's threshold by version or the
//! swept `free_count >= k batch` set with `--free-high-threshold`. lmbench3 AF_UNIX is
//! `lmbench-af-unix` (a pure consumer: its runs never end, derived from the file's
//! `consumer_allocs_per_free = 0`); kbuild is the `kbuild` approximation (order 0: free_high
//! never applies). Scores are ratios of predicted throughput (kbuild: of time per page).
//!
//! A measured change of exactly 0 (score 100 vs 100) has no direction: those rows have
//! quantity `ratio_no_change` and stay out of the direction summary.

use crate::error::Result;
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::freehigh::kernel_threshold;
use crate::workload::{Knobs, Registry};

use super::literature::{csv_rows, num};
use super::{Role, TableValidation, ValidationRow};

const SWEEP: &str = "literature/nikhil_dhama_amd_2025_free_high_threshold_iperf3_sweep";
const MULTI: &str = "literature/nikhil_dhama_amd_2025_free_high_multi_benchmark";
const MACHINE: &str = "epyc-9965-2s";
/// Pairs: the table does not say; the prose's regression appears going from 32 to 64 pairs.
pub const PAIRS: u32 = 64;

/// One setting of the kernel: version and free_count threshold (pages; None: the kernel's).
#[derive(Clone, Copy)]
struct Setting {
    kernel: KernelVersion,
    threshold: Option<u32>,
}

fn v(major: u32, minor: u32) -> KernelVersion {
    KernelVersion::new(major, minor)
}

/// Predicted (throughput pages/s, ns per page, free_high events/s, zone->lock queue slowdown
/// of a pair over a lone pair, lock utilisation) of `workload`.
fn predict(workload: &str, machine: &Machine, s: Setting) -> Result<(f64, f64, f64, f64, f64)> {
    let reg = Registry::builtin();
    let w = reg.resolve(workload)?;
    let mut k = Knobs {
        kernel: Some(s.kernel),
        free_high_threshold: s.threshold,
        means_only: true,
        ..Knobs::default()
    };
    if workload == "iperf3-tcp" {
        k.tasks = Some(PAIRS);
        k.nodes = Some("all".into());
    }
    let p = w.predict(machine, &k)?;
    let events = p.output("free_high_events_per_s").unwrap_or(0.0);
    Ok((
        p.throughput_total,
        p.ns_per_op,
        events,
        p.output("queue_slowdown").unwrap_or(1.0),
        p.output("zone_lock_utilisation").unwrap_or(0.0),
    ))
}

/// The predicted value of the row whose case is `case`.
fn predicted_of(rows: &[ValidationRow], case: &str) -> Option<f64> {
    rows.iter().find(|r| r.case == case).map(|r| r.predicted)
}

/// The kernel's batch and high_min on the machine (6.12 defaults).
fn batch_and_high_min(machine: &Machine) -> Result<(u32, u32)> {
    let d = crate::fit::calibrate::default_pcp(machine, v(6, 12))?;
    Ok((d.batch_pages, d.high_min_pages.unwrap_or(0)))
}

fn ratio_row(table: &str, case: String, measured: f64, predicted: f64, how: &str) -> ValidationRow {
    let quantity = if measured == 1.0 {
        "ratio_no_change"
    } else {
        "ratio"
    };
    ValidationRow::new(
        table,
        MACHINE,
        case,
        quantity,
        measured,
        predicted,
        "x",
        Role::Literature,
        how,
    )
}

const HOW_IPERF: &str = "producer-consumer kind, iperf3-tcp, 64 pairs over both nodes (assumed), free_high trigger with runs of 16 pages (assumed, one 64 KiB GRO ACK); nothing fitted to this table";

/// The iperf3 sweep: score and free_high events vs the threshold (`free_count >= k batch`).
pub fn dhama_sweep() -> Result<TableValidation> {
    let machine = Machine::builtin(MACHINE)?;
    let (batch, _) = batch_and_high_min(&machine)?;
    let base = predict(
        "iperf3-tcp",
        &machine,
        Setting {
            kernel: v(6, 6),
            threshold: None,
        },
    )?;
    let table = csv_rows(SWEEP)?;
    let mut measured: Vec<(Option<u32>, f64, f64)> = Vec::new();
    for r in &table {
        let setting = r.get("kernel_or_setting").cloned().unwrap_or_default();
        let k = if setting.starts_with("v6.6") {
            None
        } else if setting.starts_with("v6.12") {
            Some(1)
        } else {
            setting
                .trim()
                .strip_prefix("batch*")
                .and_then(|x| x.parse::<u32>().ok())
        };
        measured.push((
            k,
            num(r, "iperf3_score_rel_v6.6_base100", SWEEP)?,
            num(r, "num_free_high_events", SWEEP)?,
        ));
    }
    let (m_base_score, m_base_events) = measured
        .iter()
        .find(|m| m.0.is_none())
        .map_or((100.0, f64::NAN), |m| (m.1, m.2));
    let (m_k1_score, m_k1_events) = measured
        .iter()
        .find(|m| m.0 == Some(1))
        .map_or((f64::NAN, f64::NAN), |m| (m.1, m.2));
    let k1 = predict(
        "iperf3-tcp",
        &machine,
        Setting {
            kernel: v(6, 12),
            threshold: Some(batch),
        },
    )?;
    let t = "literature-dhama-sweep";
    let mut rows = Vec::new();
    for &(k, ms, me) in &measured {
        let Some(k) = k else { continue };
        let p = if k == 1 {
            k1
        } else {
            predict(
                "iperf3-tcp",
                &machine,
                Setting {
                    kernel: v(6, 12),
                    threshold: Some(batch * k),
                },
            )?
        };
        rows.push(ratio_row(
            t,
            format!("iperf3 score, free_count >= batch*{k} on 6.12 / v6.6"),
            ms / m_base_score,
            p.0 / base.0,
            HOW_IPERF,
        ));
        if k > 1 {
            rows.push(ratio_row(
                t,
                format!("iperf3 score, batch*{k} / batch*1"),
                ms / m_k1_score,
                p.0 / k1.0,
                HOW_IPERF,
            ));
            rows.push(ratio_row(
                t,
                format!("free_high events, batch*{k} / batch*1"),
                me / m_k1_events,
                p.2 / k1.2,
                HOW_IPERF,
            ));
        }
    }
    rows.push(ratio_row(
        t,
        "free_high events, v6.6 / v6.12 (batch*1)".into(),
        m_base_events / m_k1_events,
        base.2 / k1.2,
        "v6.6: free_high only after an ordinary drain in the same run (free_factor > 0), i.e. a run of high/2 pages (assumed list level high/2 at a run's start)",
    ));
    let notes = vec![
        format!("every threshold of the sweep is set as free_count >= k x {batch} (the kernel's batch on this machine) on kernel 6.12; events are predicted free_high drains per second over the 64 pairs, compared as ratios (the table's counts are over a 20 s run)"),
        "the event ratios fall much faster with the threshold in the model than measured: exponential runs of 16 pages make a run of 5 batches e^-19 rare, while the measured counts say runs of free_high size are rare but often several hundred pages long, a heavier tail than assumed".to_string(),
        format!(
            "the score ratios: 32 pairs queue on each zone->lock (crate::model::pairqueue); in the model 6.12's drains are fewer and larger than 6.6's, so its lock carries less time per page and v6.12 / v6.6 is {:.3}, not the measured drop; the model fires {} free_high drains per second, the table {}",
            k1.0 / base.0,
            crate::report::sig(k1.2, 3),
            crate::report::sig(m_k1_events / 20.0, 3),
        ),
        "the threshold rows with a measured score of exactly 100 (batch*5, 6, 8 vs v6.6) have no measured direction: they are kept as ratio_no_change rows, outside the direction summary".to_string(),
    ];
    Ok(TableValidation::new(
        t,
        "Nikhil Dhama 2025: iperf3 score and free_high events vs the free_high threshold (2-node AMD, assumed 2 x EPYC 9965)",
        rows,
        vec![],
        (0, &[]),
        notes,
    ))
}

/// The multi-benchmark table: iperf3, lmbench3 AF_UNIX and kbuild on v6.6, v6.12, 6.12 with
/// `free_count >= 5 batch` and 6.12 with `batch + high_min / 2`, relative to v6.6.
pub fn dhama_multi() -> Result<TableValidation> {
    let machine = Machine::builtin(MACHINE)?;
    let (batch, high_min) = batch_and_high_min(&machine)?;
    let avg = kernel_threshold(v(6, 16), batch, high_min);
    let setting_of = |label: &str| -> Option<Setting> {
        if label.starts_with("v6.6") {
            Some(Setting {
                kernel: v(6, 6),
                threshold: None,
            })
        } else if label.contains("batch*5") {
            Some(Setting {
                kernel: v(6, 12),
                threshold: Some(batch * 5),
            })
        } else if label.contains("avg_threshold") {
            Some(Setting {
                kernel: v(6, 12),
                threshold: avg,
            })
        } else if label.starts_with("v6.12") {
            Some(Setting {
                kernel: v(6, 12),
                threshold: None,
            })
        } else {
            None
        }
    };
    let t = "literature-dhama-multi";
    let mut rows = Vec::new();
    let table = csv_rows(MULTI)?;
    // lmbench's file is a pure consumer (consumer_allocs_per_free = 0): the kind itself
    // takes its run of frees as never ending (producer_consumer::PURE_CONSUMER_RUN_PAGES).
    for (bench, workload, lower_better) in [
        ("iperf3", "iperf3-tcp", false),
        ("lmbench3 AF_UNIX", "lmbench-af-unix", false),
        ("netperf SCTP_STREAM_MANY", "netperf-sctp-stream", false),
        ("kbuild", "kbuild", true),
    ] {
        let base_row = table.iter().find(|r| {
            r.get("benchmark").map(String::as_str) == Some(bench)
                && r.get("kernel_or_setting")
                    .is_some_and(|s| s.starts_with("v6.6"))
        });
        let Some(base_row) = base_row else { continue };
        let m_base = num(base_row, "score_rel_v6.6_base100", MULTI)?;
        let m_base_ev = num(base_row, "num_free_high_events", MULTI).ok();
        let s0 = setting_of("v6.6").unwrap_or(Setting {
            kernel: v(6, 6),
            threshold: None,
        });
        // The threshold knob applies only where the workload has runs (iperf3, lmbench).
        let usable = |s: Setting| Setting {
            threshold: if workload == "kbuild" {
                None
            } else {
                s.threshold
            },
            ..s
        };
        let p0 = predict(workload, &machine, usable(s0))?;
        for r in table
            .iter()
            .filter(|r| r.get("benchmark").map(String::as_str) == Some(bench))
        {
            let label = r.get("kernel_or_setting").cloned().unwrap_or_default();
            let Some(s) = setting_of(&label).filter(|s| s.kernel != v(6, 6)) else {
                continue;
            };
            let p = predict(workload, &machine, usable(s))?;
            let m = num(r, "score_rel_v6.6_base100", MULTI)? / m_base;
            let pr = if lower_better { p.1 / p0.1 } else { p.0 / p0.0 };
            let how = match workload {
                "iperf3-tcp" => HOW_IPERF.to_string(),
                "lmbench-af-unix" => "producer-consumer kind, lmbench-af-unix (16 pairs): a pure consumer (consumer_allocs_per_free = 0), so its run of frees never ends and free_high fires at any threshold below batch << 5; nothing fitted".to_string(),
                "netperf-sctp-stream" => "producer-consumer kind, netperf-sctp-stream (64 pairs over both nodes): one order-3 block per 16 KiB send, a pure consumer like lmbench's; work per page carried over from netperf UDP; nothing fitted".to_string(),
                _ => "alloc-loop kind, kbuild approximation (order 0: free_high never applies; the change is auto-tuning's); build time ratio = ns per page ratio; nothing fitted".to_string(),
            };
            rows.push(ratio_row(
                t,
                format!(
                    "{bench} {}, {label} / v6.6",
                    if lower_better { "time" } else { "score" }
                ),
                m,
                pr,
                &how,
            ));
            if let (Some(b), Ok(e)) = (m_base_ev, num(r, "num_free_high_events", MULTI)) {
                if workload != "kbuild" && p0.2 > 0.0 {
                    rows.push(ratio_row(
                        t,
                        format!("{bench} free_high events, {label} / v6.6"),
                        e / b,
                        p.2 / p0.2,
                        &how,
                    ));
                }
            }
        }
    }
    let notes = vec![
        "netperf SCTP_STREAM_MANY (rows added with the table visible): the score ratios carry the model's saturated zone->lock, where Huang Ying's SCTP rows (literature-huang) say the real lock is lightly loaded: the pairs sleep between sends, which the model has no term for (literature-lkp)".to_string(),
        "kbuild's free_high events (2 on every kernel) are not compared: the kbuild file is order 0, where free_high never applies (the 2 measured are orders 1-3 frees the approximation does not describe)".to_string(),
        format!("the avg_threshold rows use free_count >= batch + high_min/2 = {} pages on kernel 6.12 (batch {batch}, high_min {high_min} of this machine's 6.12 defaults)", avg.unwrap_or(0)),
        "lmbench3 AF_UNIX: v6.6 drains the list at every high-order free of a pure consumer, 6.7+ once it holds a batch, so v6.6's many small drains load the queued zone->lock far more and the predicted gain is far above the measured; readers that also allocate, not in the file, would lighten both".to_string(),
        format!("iperf3 events vs v6.6: the model's v6.6 trigger needs a run of about high/2 pages, which exponential 16-page runs almost never reach, so its event ratios are far off ({} for v6.12 / v6.6): real runs have a heavier tail. Its v6.12 / v6.6 score has the wrong direction too (the sweep's notes)",
            predicted_of(&rows, "iperf3 free_high events, v6.12 / v6.6").map_or("-".to_string(), |x| crate::report::sig(x, 2))),
    ];
    Ok(TableValidation::new(
        t,
        "Nikhil Dhama 2025: free_high threshold vs v6.6 across benchmarks (2-node AMD, assumed 2 x EPYC 9965)",
        rows,
        vec![],
        (0, &[]),
        notes,
    ))
}
