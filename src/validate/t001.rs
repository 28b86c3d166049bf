//! Thread 001: netperf TCP_SENDFILE throughput at MEMCG_CHARGE_BATCH 32 and 64 (36 instances,
//! 72 CPUs, three-level hierarchy).
//!
//! Calibration (two free parameters, each fitted to one measurement):
//! - `fixed_ns_per_page` from the same workload in the **root memcg** (no charging at all: the
//!   root's sockets get no `sk_memcg`), reported in the v2 cover letter of thread 001's series;
//! - `transfer_scale` (cost of a transfer on a hammered counter line over the idle core-to-core
//!   latency) from 6.0-rc1 at batch 32.
//!
//! The third parameter, `ack_uncharge_on_sender`, is held at 0 (not fitted); the notes give the
//! held-out gain for 0, 0.5 and 1 ([`placement_sensitivity`]).
//!
//! Held out: batch 64 (thread 001's patch), the 32 → 64 improvement, and the cover letter's
//! runs with patch (A) alone, (B) alone and (A+B+C), each predicted by changing only the
//! code-derived transfers per line ([`crate::model::memcg::counter_lines`]). The fully derived
//! case (`transfer_scale` = 1) is listed too.

use crate::data;
use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::model::memcg::PARAM_NAMES;
use crate::validate::{Role, TableValidation, ValidationRow};

pub use crate::fit::memcg_calibration::{
    calibrated_params, cover_letter_runs, fit_001, fixed_ns_from_root, model_001, values,
    CoverLetterRun,
};

/// The held-out gain 32 → 64 for `ack_uncharge_on_sender` 0, 0.5 and 1, each with
/// `fixed_ns_per_page` from the root-memcg run and `transfer_scale` refitted at batch 32:
/// `(fraction, transfer_scale, gain %)`.
pub fn placement_sensitivity() -> Result<Vec<(f64, f64, f64)>> {
    let model = model_001()?;
    let t0 = fixed_ns_from_root()?;
    let mut out = Vec::new();
    for f in [0.0, 0.5, 1.0] {
        let r = fit_001(
            &model,
            &[PARAM_NAMES[1]],
            &[32],
            &[(PARAM_NAMES[0], t0), (PARAM_NAMES[2], f)],
        )?;
        let p = values(&r);
        let a = model.estimate(&p, 32)?.throughput_mbps;
        let b = model.estimate(&p, 64)?.throughput_mbps;
        out.push((f, p[1], 100.0 * (b / a - 1.0)));
    }
    Ok(out)
}

/// The held-out gain 32 → 64 when every CPU pays each of its transfers itself (SMT siblings
/// not sharing their core's copy: `threads_per_core` forced to 1, transfers still between
/// cores), with `fixed_ns_per_page` from the root-memcg run and `transfer_scale` refitted at
/// batch 32: `(transfer_scale, gain %)`.
pub fn unshared_sensitivity() -> Result<(f64, f64)> {
    let mut model = model_001()?;
    model.threads_per_core = 1.0;
    let t0 = fixed_ns_from_root()?;
    let r = fit_001(&model, &[PARAM_NAMES[1]], &[32], &[(PARAM_NAMES[0], t0)])?;
    let p = values(&r);
    let a = model.estimate(&p, 32)?.throughput_mbps;
    let b = model.estimate(&p, 64)?.throughput_mbps;
    Ok((p[1], 100.0 * (b / a - 1.0)))
}

/// Validates thread 001.
pub fn validate() -> Result<TableValidation> {
    let model = model_001()?;
    let pts = data::memcg_001()?;
    let m32 = pts
        .iter()
        .find(|p| p.memcg_charge_batch_pages == 32)
        .ok_or_else(|| Error::Unsupported("thread 001: no batch-32 row".into()))?;
    let m64 = pts
        .iter()
        .find(|p| p.memcg_charge_batch_pages == 64)
        .ok_or_else(|| Error::Unsupported("thread 001: no batch-64 row".into()))?;
    let measured_gain = 100.0 * (m64.throughput_mbps / m32.throughput_mbps - 1.0);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let machine = model.machine.clone();
    let (p, report) = calibrated_params()?;
    let how_fit = format!(
        "fixed_ns_per_page {:.0} ns from the root-memcg run; transfer_scale {:.2} fitted to 6.0-rc1 at batch 32 ({})",
        p[0], p[1], report.termination
    );
    let how_held = format!(
        "not fitted (but seen: the SMT-sharing mechanism was added while this row was watched): root-memcg fixed work {:.0} ns and transfer_scale {:.2}; only the batch or the code-derived transfers per line change",
        p[0], p[1]
    );
    let runs = cover_letter_runs()?;
    let root = runs
        .iter()
        .find(|r| r.code.is_none())
        .ok_or_else(|| Error::Unsupported("thread 001: no root-memcg run".into()))?;
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "root memcg (cover letter v2)",
        "throughput_mbps",
        root.throughput_mbps,
        model.root_throughput_mbps(&p)?,
        "Mbit/s",
        Role::Fitted,
        how_fit.clone(),
    ));
    let a = model.estimate(&p, 32)?;
    let b = model.estimate(&p, 64)?;
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=32",
        "throughput_mbps",
        m32.throughput_mbps,
        a.throughput_mbps,
        "Mbit/s",
        Role::Fitted,
        how_fit,
    ));
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=64",
        "throughput_mbps",
        m64.throughput_mbps,
        b.throughput_mbps,
        "Mbit/s",
        Role::Seen,
        how_held.clone(),
    ));
    let gain = 100.0 * (b.throughput_mbps / a.throughput_mbps - 1.0);
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch 32->64",
        "improvement_pct",
        measured_gain,
        gain,
        "%",
        Role::Seen,
        how_held.clone(),
    ));
    let mut variant_err = Vec::new();
    for run in runs.iter().filter(|r| r.code.is_some()) {
        let Some(code) = run.code else { continue };
        let e = model
            .clone()
            .with_code(code)
            .estimate(&p, run.batch_pages)?;
        variant_err.push((
            run.label.clone(),
            100.0 * (e.throughput_mbps / run.throughput_mbps - 1.0),
        ));
        rows.push(ValidationRow::new(
            "001",
            &machine,
            format!("{} (cover letter v2), batch={}", run.label, run.batch_pages),
            "throughput_mbps",
            run.throughput_mbps,
            e.throughput_mbps,
            "Mbit/s",
            Role::Seen,
            how_held.clone(),
        ));
    }
    // Fully derived: transfer_scale 1 (the idle core-to-core latency).
    let pd = [p[0], 1.0, p[2]];
    let da = model.estimate(&pd, 32)?;
    let db = model.estimate(&pd, 64)?;
    let how_d = format!(
        "derived: root-memcg fixed work {:.0} ns, transfers at the idle mean core-to-core latency ({:.0} ns, transfer_scale 1)",
        p[0], model.transfer_ns
    );
    for (case, meas, pred, unit, q) in [
        (
            "derived, batch=32",
            m32.throughput_mbps,
            da.throughput_mbps,
            "Mbit/s",
            "throughput_mbps",
        ),
        (
            "derived, batch=64",
            m64.throughput_mbps,
            db.throughput_mbps,
            "Mbit/s",
            "throughput_mbps",
        ),
        (
            "derived, batch 32->64",
            measured_gain,
            100.0 * (db.throughput_mbps / da.throughput_mbps - 1.0),
            "%",
            "improvement_pct",
        ),
    ] {
        rows.push(ValidationRow::new(
            "001",
            &machine,
            case,
            q,
            meas,
            pred,
            unit,
            Role::Alternative,
            how_d.clone(),
        ));
    }
    let busiest = a.busiest_line();
    let busiest_name = busiest.map_or("-", |l| l.name.as_str());
    let cross_ns = Machine::builtin("memcg-72cpu")?
        .latency_ns
        .c2c_cross_socket
        .map_or(f64::NAN, |x| x.value);
    notes.push(format!(
        "derivation (6.0-rc1 code, heavy contention): the busiest line is the '{busiest_name}' line, {:.1} transfers per visit; each CPU walks the hierarchy {:.4} times per payload page at batch 32. At the machine file's idle transfer ({:.0} ns mean; {:.0} ns cross-socket) the lines are {:.0} % busy and the model gives {:.0} Mbit/s at batch 32 (measured {:.0}) and {:+.1} % for batch 64: {}",
        busiest.map_or(0.0, |l| l.transfers_per_walk),
        a.walks_per_page,
        model.transfer_ns,
        cross_ns,
        100.0 * da.line_utilisation,
        da.throughput_mbps,
        m32.throughput_mbps,
        100.0 * (db.throughput_mbps / da.throughput_mbps - 1.0),
        if da.line_utilisation >= 0.9 {
            format!(
                "the code-derived traffic already brings the busiest line near saturation at batch 32, but idle-latency transfers give only {:.0} % of the measured memcg cost per page",
                100.0 * (da.ns_per_page - p[0]) / (a.ns_per_page - p[0])
            )
        } else {
            "the code-derived traffic alone does not saturate the counters at batch 32".to_string()
        }
    ));
    let busiest_of =
        |e: &crate::model::memcg::MemcgEstimate| e.busiest_line().map_or(0.0, |l| l.sibling_shared);
    notes.push(format!(
        "calibrated: the measured batch-32 throughput needs a transfer on the hammered lines to cost {:.2}x the idle mean between cores ({:.0} ns, {:.1}x the cross-socket latency): the busiest line is then {:.0} % busy at batch 32 and {:.0} % at 64. Held out, batch 64 is predicted at {gain:+.1} % (measured {measured_gain:+.1} %, {:+.1} points; the issue asks for ±6): {}. The single-patch runs: {}",
        p[1],
        p[1] * model.transfer_ns,
        p[1] * model.transfer_ns / cross_ns,
        100.0 * a.line_utilisation,
        100.0 * b.line_utilisation,
        gain - measured_gain,
        if (gain - measured_gain).abs() <= 6.0 { "met" } else { "NOT met" },
        variant_err
            .iter()
            .map(|(l, e)| format!("{l} {e:+.1} %"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let (unshared_scale, unshared_gain) = unshared_sensitivity()?;
    notes.push(format!(
        "SMT siblings share transfers: the two threads of a core share its L1D, so a CPU whose sibling is already queued for (or fetching) a counter line is served by the same transfer, and the two then walk on together (a load merges into the sibling's outstanding miss; for a locked RMW it is assumed that the sibling's operation runs on the core's copy before the core answers the next core's snoop). With {:.0} busy threads per core (memcg-72cpu: 2 sockets x 18 cores x SMT2, assumed) a CPU pays {:.0} % fewer transfers at batch 32 and {:.0} % fewer at 64; on the busiest line {:.0} % and {:.0} %. The more CPUs queue at a line, the more often siblings meet there, so the line moves more work per transfer when it is hammered and less when the doubled batch shortens its queue: that is what keeps the gain below the +{:.0} % that unshared transfers give (every CPU paying its own transfers, transfer_scale refitted to {:.2}). The sharing is an approximate mean value analysis (siblings meet independently at their first transfer on a line); tests/memcg_smt.rs checks it against a discrete-event simulation of the same assumptions (throughputs of all five charged runs within 4 %, the gain within 4 points). It rests on the machine: seed 001 gives only '72 CPUs', and a 72-core machine without SMT would give the unshared +{:.0} %",
        model.threads_per_core,
        100.0 * a.sibling_shared,
        100.0 * b.sibling_shared,
        100.0 * busiest_of(&a),
        100.0 * busiest_of(&b),
        unshared_gain,
        unshared_scale,
        unshared_gain,
    ));
    notes.push(format!(
        "stock dynamics (the 6.0-rc1 socket accounting replayed through consume_stock/refill_stock/drain_stock, simulate_stock): the sender CPU only charges (10 KiB sendfile chunks of 1-3 pages, 16-17-page sk_rmem charges of each 64 KiB skb), so it walks once per B pages exactly ({:.4} -> {:.4} charge walks per payload page, ratio {:.2}); the receiver only uncharges one skb (16-19 pages) at a time and drain_stock() returns B plus an overshoot ({:.1} pages per walk at 32, {:.1} at 64; ratio of uncharge walks {:.2}). A doubled batch halves the walks: the overshoot does not soften the gain. stats_flush_threshold (memcg_rstat_updated, no atomic_read guard before 6.1) gets {:.4} atomics per payload page at 32, also halved at 64",
        a.charge_walks_per_page[0],
        b.charge_walks_per_page[0],
        a.charge_walks_per_page[0] / b.charge_walks_per_page[0],
        a.pages_per_walk,
        b.pages_per_walk,
        a.uncharge_walks_per_page[1] / b.uncharge_walks_per_page[1],
        a.flushes_per_page,
    ));
    let sens = placement_sensitivity()?;
    notes.push(format!(
        "placement (ack_uncharge_on_sender, held at 0: the ACK's softirq runs tcp_ack() on the receiver CPU unless netperf owns its socket; thread 001 cannot tell): if the wmem uncharge of an ACKed skb runs on the sender CPU, that CPU mixes 16-19-page uncharges with its charges; at batch 32 a 17-page uncharge on a half-full stock passes the batch and drain_stock() empties the stock the next charge needs, at 64 it mostly does not, so the gain grows: {} (transfer_scale refitted at batch 32 for each). The held-out gain therefore depends on where the ACKs are processed, which thread 001 does not report",
        sens.iter()
            .map(|(f, s, g)| format!("{f:.1} -> {g:+.1} % (transfer_scale {s:.2})"))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let both = fit_001(&model, &PARAM_NAMES[..2], &[32, 64], &[])?;
    let pb = values(&both);
    let root_b = model.root_throughput_mbps(&pb)?;
    notes.push(format!(
        "the other way round: fitting both parameters to thread 001's two points (batch 32 and 64) gives fixed work {:.0} ns and transfer_scale {:.2}; the root-memcg run, held out then, is predicted at {:.0} Mbit/s (measured {:.0}, {:+.1} %), the single-patch runs at {}",
        pb[0],
        pb[1],
        root_b,
        root.throughput_mbps,
        100.0 * (root_b / root.throughput_mbps - 1.0),
        runs.iter()
            .filter_map(|r| r.code.map(|c| (r, c)))
            .map(|(r, c)| {
                model
                    .clone()
                    .with_code(c)
                    .estimate(&pb, r.batch_pages)
                    .map(|e| format!("{} {:+.1} %", r.label, 100.0 * (e.throughput_mbps / r.throughput_mbps - 1.0)))
            })
            .collect::<Result<Vec<_>>>()?
            .join(", "),
    ));
    let err_of = |key: &str| {
        variant_err
            .iter()
            .find(|(l, _)| l.contains(key))
            .map_or(f64::NAN, |x| x.1)
    };
    notes.push(format!(
        "what is left: the single-patch runs. With every field at its 6.0-rc1 byte offset (struct page_counter is not cache-aligned in 6.0-rc1: usage sits 16 bytes into a line with the limits and css.parent, both xchg'd protection counters share the next line with watermark and parent), (A) fewer atomics is predicted {:+.1} % and (B) split layout {:+.1} %: the model ranks (B) above (A), the cover letter measured the reverse. Moving the read-mostly fields off the written lines helps less than counting each run of plain loads as one transfer says (several CPUs can share a read copy; locked RMWs serialise), so the load rule probably over-weights the loads; the offset is config-dependent (lockdep, struct changes). A likely reason: plain loads do not need the line exclusively, so reads queued one after another can be served together, while every locked RMW serialises. A prototype simulation (notebooks/prototypes/memcg_read_sharing.py, not part of the model) in which consecutive queued reads share one transfer, on top of the SMT sharing, gave (A) -5.6 %, (B) +6.3 %, A+B+C 0.0 %, and a gain of +59 % with transfer_scale refitted: the ranking of (A) and (B) comes right. It is not adopted: its mean value analysis is 2 points low on the gain against that simulation, and whether the home agent serves same-address reads at once or one at a time from the LLC is not settled. Transfers are taken as exponential (product form within the analysis). The machine of thread 001 is assumed (memcg-72cpu), so are its idle transfer time and its SMT",
        err_of("fewer_atomics"),
        err_of("split_layout"),
    ));
    if !report.converged {
        notes.push(format!(
            "the transfer_scale fit did not converge: {}",
            report.termination
        ));
    }
    Ok(TableValidation::new(
        "001",
        "netperf TCP_SENDFILE throughput vs MEMCG_CHARGE_BATCH (72 CPUs, 36 instances)",
        rows,
        vec![
            "fixed_ns_per_page (root-memcg run)".to_string(),
            "transfer_scale (6.0-rc1 at batch 32)".to_string(),
        ],
        (2, &["throughput_mbps"]),
        notes,
    ))
}
