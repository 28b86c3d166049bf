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
        "derived from the 6.0-rc1 code at the machine file's idle transfer ({:.0} ns; {:.0} ns cross-socket): the busiest line ('{busiest_name}') is {:.0} % busy, {:.0} Mbit/s at batch 32 and {:+.1} % at 64: {}",
        model.transfer_ns,
        cross_ns,
        100.0 * da.line_utilisation,
        da.throughput_mbps,
        100.0 * (db.throughput_mbps / da.throughput_mbps - 1.0),
        if da.line_utilisation >= 0.9 {
            format!(
                "near saturation, but idle transfers give only {:.0} % of the measured memcg cost per page",
                100.0 * (da.ns_per_page - p[0]) / (a.ns_per_page - p[0])
            )
        } else {
            "the code's traffic alone does not saturate the counters".to_string()
        }
    ));
    notes.push(format!(
        "calibrated: batch 32's throughput needs a transfer on the hammered lines to cost {:.2}x the idle mean ({:.0} ns); the busiest line is then {:.0} % busy at batch 32 and {:.0} % at 64. Held out, batch 64: {gain:+.1} % against {measured_gain:+.1} % measured (the issue asks for ±6 points): {}",
        p[1],
        p[1] * model.transfer_ns,
        100.0 * a.line_utilisation,
        100.0 * b.line_utilisation,
        if (gain - measured_gain).abs() <= 6.0 { "met" } else { "NOT met" },
    ));
    let (_, unshared_gain) = unshared_sensitivity()?;
    notes.push(format!(
        "SMT siblings share transfers: a CPU whose sibling is already queued for a counter line is served by the same transfer. With {:.0} threads per core (memcg-72cpu, assumed) that saves {:.0} % of transfers at batch 32 and {:.0} % at 64, more where the queue is longer; unshared, the gain would be +{:.0} %",
        model.threads_per_core,
        100.0 * a.sibling_shared,
        100.0 * b.sibling_shared,
        unshared_gain,
    ));
    notes.push(format!(
        "stock dynamics (6.0-rc1's consume/refill/drain_stock replayed): the sender only charges, a walk per B pages ({:.4} -> {:.4} per payload page); the receiver's drain_stock() returns B plus an overshoot ({:.1}, {:.1} pages per walk), so a doubled batch still halves the walks",
        a.charge_walks_per_page[0],
        b.charge_walks_per_page[0],
        a.pages_per_walk,
        b.pages_per_walk,
    ));
    let sens = placement_sensitivity()?;
    notes.push(format!(
        "placement: the ACK's wmem uncharge runs on the receiver CPU (ack_uncharge_on_sender 0; thread 001 does not say). On the sender, uncharges would empty the stock at batch 32 more than at 64: the held-out gain grows with their share, {} (refitted each)",
        sens.iter()
            .map(|(f, _, g)| format!("{f:.1}: {g:+.1} %"))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let both = fit_001(&model, &PARAM_NAMES[..2], &[32, 64], &[])?;
    let pb = values(&both);
    let root_b = model.root_throughput_mbps(&pb)?;
    notes.push(format!(
        "the other way round: fitting both parameters to batch 32 and 64 gives fixed work {:.0} ns and transfer_scale {:.2}; the root-memcg run, held out then, is predicted {:+.1} % off, the single-patch runs at {}",
        pb[0],
        pb[1],
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
        "the single-patch runs: at 6.0-rc1's field offsets (A) fewer atomics is predicted {:+.1} % off and (B) split layout {:+.1} % off, ranked the reverse of the cover letter; likely as queued plain loads can share one transfer, which the model does not count (notebooks/prototypes/memcg_read_sharing.py)",
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
