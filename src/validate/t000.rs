//! Thread 000: `rmqueue_bulk()` latency under zone->lock contention (funclatency, 600 s), AMD
//! EPYC 7W83 (one node, scale 5 and 0) and Intel Xeon 8260 (two nodes scale 5; node 0 only,
//! scale 5 and 0).
//!
//! Rows:
//! - **fitted**: per machine, the three parameters of [`crate::model::zonelock`]
//!   (`fixed_ns`, `lines_per_page`, `work_ns_per_page`) fitted to every average and every call
//!   rate (`count / 600 s`) of that machine; `avg_ns` and `calls_per_s` of each case.
//! - **held out**: (a) per machine, fitted to the scale-5 one-node histogram alone (its average
//!   and call rate; `fixed_ns` held at its derived prior, since scale 5 cannot see it), the
//!   scale-0 average and call rate; (b) Intel, fitted to the two one-node histograms, the
//!   two-node scale-5 average and call rate.
//! - **shape** (with the fitted parameters): the log2 bucket holding the mode (as `log2(lo_ns)`),
//!   p50 and p99 against the measured histogram's interpolated percentiles; the total variation
//!   distance between predicted and measured bucket fractions is given in the notes.

use crate::data::{self, Histogram000};
use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::model::zonelock::{workload_000, Prediction};
use crate::validate::{Role, TableValidation, ValidationRow};

pub use crate::fit::lock_calibration::{
    calibrate, calls_per_s, fit_cases, params_of, span, Calibration,
};

/// Total variation distance between predicted and measured bucket fractions (0 = identical,
/// 1 = disjoint), over the measured buckets.
pub fn tv_distance(pred: &Prediction, h: &Histogram000) -> Result<f64> {
    let fr = h.histogram.fractions();
    let mut d = 0.0;
    let mut covered = 0.0;
    for (b, f) in h.histogram.buckets().iter().zip(fr) {
        let m = pred.cdf(b.end_ns())? - pred.cdf(b.lo_ns as f64)?;
        covered += m;
        d += (m - f).abs();
    }
    Ok(0.5 * (d + (1.0 - covered).max(0.0)))
}

/// The predicted mode bucket (log2 of its `lo_ns`) over the measured buckets.
pub fn predicted_mode_log2(pred: &Prediction, h: &Histogram000) -> Result<u32> {
    let mut best = (0u32, -1.0);
    for b in h.histogram.buckets() {
        let m = pred.cdf(b.end_ns())? - pred.cdf(b.lo_ns as f64)?;
        if m > best.1 {
            best = (log2_lo(b.lo_ns), m);
        }
    }
    Ok(best.0)
}

fn log2_lo(lo: u64) -> u32 {
    if lo == 0 {
        0
    } else {
        63 - lo.leading_zeros()
    }
}

/// Validates thread 000.
pub fn validate() -> Result<TableValidation> {
    let all = data::histograms_000()?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut names: Vec<String> = all.iter().map(|h| h.machine.clone()).collect();
    names.dedup();
    for name in &names {
        let machine = Machine::builtin(name)?;
        let cases: Vec<&Histogram000> = all.iter().filter(|h| &h.machine == name).collect();
        let (model, report) = fit_cases(&machine, &cases, &[])?;
        let p = params_of(&report)?;
        if !report.converged {
            notes.push(format!(
                "{name}: the fit did not converge ({}); rows show its last values",
                report.termination
            ));
        }
        let how = format!(
            "fit of fixed_ns {:.0} ns, lines_per_page {:.3}, work_ns_per_page {:.0} ns to the averages and call rates of the {} histograms of {name} (relative RMS {:.1} %)",
            p.fixed_ns,
            p.lines_per_page,
            p.work_ns_per_page,
            cases.len(),
            100.0 * report.rms_rel.unwrap_or(f64::NAN)
        );
        for h in &cases {
            let pred = model.model.predict(
                &p,
                &workload_000(h.processes, span(h)),
                h.scale_max as u8,
                true,
            )?;
            rows.push(ValidationRow::new(
                "000",
                name,
                &h.case,
                "avg_ns",
                h.avg_ns as f64,
                pred.avg_ns,
                "ns",
                Role::Fitted,
                how.clone(),
            ));
            rows.push(ValidationRow::new(
                "000",
                name,
                &h.case,
                "calls_per_s",
                calls_per_s(h),
                pred.calls_per_s,
                "1/s",
                Role::Fitted,
                how.clone(),
            ));
            let mode = h
                .histogram
                .mode_bucket()
                .map(|b| log2_lo(b.lo_ns))
                .ok_or_else(|| Error::invalid(&h.case, "histogram", "no samples"))?;
            let pm = predicted_mode_log2(&pred, h)?;
            rows.push(ValidationRow::new(
                "000",
                name,
                &h.case,
                "mode_bucket_log2",
                f64::from(mode),
                f64::from(pm),
                "log2(ns)",
                Role::Fitted,
                format!(
                    "bucket 2^k..2^(k+1)-1 ns with the most calls; the issue asks for the measured bucket or the next ({})",
                    if pm == mode || pm == mode + 1 { "holds" } else { "does not hold" }
                ),
            ));
            for (q, pct) in [("p50_ns", 50.0), ("p99_ns", 99.0)] {
                if let Some(m) = h.histogram.percentile_ns(pct) {
                    rows.push(ValidationRow::new(
                        "000",
                        name,
                        &h.case,
                        q,
                        m,
                        pred.quantile(pct / 100.0)?,
                        "ns",
                        Role::Fitted,
                        "measured: linear interpolation inside the log2 bucket; predicted: the model's quantile (not fitted to)",
                    ));
                }
            }
            notes.push(format!(
                "{}: total variation distance between predicted and measured bucket fractions {:.3} (0 identical, 1 disjoint); predicted mode bucket 2^{pm}, measured 2^{mode}",
                h.case,
                tv_distance(&pred, h)?
            ));
        }

        // Held out (a): scale 5 alone -> scale 0, one node.
        let s5: Vec<&Histogram000> = cases
            .iter()
            .copied()
            .filter(|h| h.scale_max == 5 && h.nodes == 1)
            .collect();
        let s0: Vec<&Histogram000> = cases
            .iter()
            .copied()
            .filter(|h| h.scale_max == 0 && h.nodes == 1)
            .collect();
        if let (Some(a), Some(b)) = (s5.first(), s0.first()) {
            let (m5, r5) = fit_cases(&machine, &[a], &["fixed_ns"])?;
            let p5 = params_of(&r5)?;
            let pred = m5
                .model
                .predict(&p5, &workload_000(b.processes, span(b)), 0, false)?;
            let how = format!(
                "fitted to {} alone (lines_per_page {:.3}, work_ns_per_page {:.0} ns; fixed_ns held at its derived prior {:.0} ns: scale 5 cannot see it), predicted at scale 0",
                a.case, p5.lines_per_page, p5.work_ns_per_page, p5.fixed_ns
            );
            rows.push(ValidationRow::new(
                "000",
                name,
                &b.case,
                "avg_ns",
                b.avg_ns as f64,
                pred.avg_ns,
                "ns",
                Role::Seen,
                how.clone(),
            ));
            rows.push(ValidationRow::new(
                "000",
                name,
                &b.case,
                "calls_per_s",
                calls_per_s(b),
                pred.calls_per_s,
                "1/s",
                Role::Seen,
                how,
            ));
        }
        // Held out (b): one node -> two nodes.
        let one: Vec<&Histogram000> = cases.iter().copied().filter(|h| h.nodes == 1).collect();
        let two: Vec<&Histogram000> = cases.iter().copied().filter(|h| h.nodes > 1).collect();
        if !one.is_empty() {
            for t in &two {
                let (m1, r1) = fit_cases(&machine, &one, &[])?;
                let p1 = params_of(&r1)?;
                let pred = m1.model.predict(
                    &p1,
                    &workload_000(t.processes, span(t)),
                    t.scale_max as u8,
                    false,
                )?;
                let how = format!(
                    "fitted to the {} one-node histograms of {name} (all three parameters), predicted with {} zones",
                    one.len(),
                    t.nodes
                );
                rows.push(ValidationRow::new(
                    "000",
                    name,
                    &t.case,
                    "avg_ns",
                    t.avg_ns as f64,
                    pred.avg_ns,
                    "ns",
                    Role::Seen,
                    how.clone(),
                ));
                rows.push(ValidationRow::new(
                    "000",
                    name,
                    &t.case,
                    "calls_per_s",
                    calls_per_s(t),
                    pred.calls_per_s,
                    "1/s",
                    Role::Seen,
                    how,
                ));
            }
        }
    }
    notes.push(
        "below ~4 us the measured histograms hold 1-3 % of calls (most in 1024-2047 ns) that the loop cannot produce: 63 pages take longer; they are other rmqueue_bulk() callers (order > 0 refills, page tables, kernel threads), not modelled".to_string(),
    );
    notes.push(
        "epyc-7w83 tail: the measured histogram reaches 16-67 ms (90 calls); the model's tail ends near (procs x the longest hold): the KVM guest's lock-holder (vCPU) preemption is not modelled".to_string(),
    );
    Ok(TableValidation::new(
        "000",
        "rmqueue_bulk() latency under zone->lock contention (EPYC 7W83, Xeon 8260)",
        rows,
        vec![
            "fixed_ns (per machine)".to_string(),
            "lines_per_page (per machine)".to_string(),
            "work_ns_per_page (per machine)".to_string(),
        ],
        (6, &["avg_ns", "calls_per_s"]),
        notes,
    ))
}
