//! The blind prediction held against a measured sweep: relative error per setting, rank
//! agreement (Kendall tau-b), whether the measured best lies in the predicted 1 % range, and
//! how far a fit on the same data moves each parameter.
//!
//! The netperf model predicts a score in the units of the data it was fitted on
//! (`score = score_scale / ns_per_page`); a blind prediction for a new machine has no score
//! units (`score_scale` = 1), so predicted and measured scores are both divided by their
//! geometric mean over the settings before comparing. The error therefore measures the shape
//! of the curve (which settings win and by how much), not the absolute throughput.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::calibrate::{netperf_fit_options, WorkloadSource};
use crate::fit::{fit, CsvColumns, Dataset, SWEEP_COLUMNS};
use crate::hw::machine::Machine;

/// Kendall's tau-b of two equally long series (ties in either count as neither concordant nor
/// discordant). `None` with fewer than two points or when either series is constant.
pub fn kendall_tau_b(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    let (mut conc, mut disc, mut ta, mut tb) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        for j in i + 1..n {
            let da = (a[i] - a[j]).signum() * f64::from(u8::from(a[i] != a[j]));
            let db = (b[i] - b[j]).signum() * f64::from(u8::from(b[i] != b[j]));
            match (da == 0.0, db == 0.0) {
                (true, true) => {}
                (true, false) => ta += 1.0,
                (false, true) => tb += 1.0,
                (false, false) => {
                    if da == db {
                        conc += 1.0
                    } else {
                        disc += 1.0
                    }
                }
            }
        }
    }
    let denom = ((conc + disc + ta) * (conc + disc + tb)).sqrt();
    (denom > 0.0).then(|| (conc - disc) / denom)
}

/// One setting: measured and predicted.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// pcp->high, pages.
    pub high_pages: f64,
    /// Measured score (the CSV's unit).
    pub measured: f64,
    /// Measured score / geometric mean of the measured scores.
    pub measured_norm: f64,
    /// Blind prediction / geometric mean of the blind predictions.
    pub predicted_norm: f64,
    /// predicted_norm / measured_norm - 1, percent.
    pub error_pct: f64,
}

/// One parameter before and after fitting to the measured sweep.
#[derive(Debug, Clone, Serialize)]
pub struct ParamMove {
    /// Parameter name.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Blind value.
    pub blind: f64,
    /// Fitted value.
    pub fitted: f64,
    /// Held fixed in the fit.
    pub fixed: bool,
    /// Ended at a bound of its allowed range.
    pub at_bound: bool,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Model used.
    pub model: String,
    /// The workload compared (its name; `model` is the fit model that carries its sweep).
    pub workload: String,
    /// Machine name.
    pub machine: String,
    /// Where the blind parameters came from.
    pub blind_source: String,
    /// Per setting, in the CSV's order.
    pub rows: Vec<Row>,
    /// Root mean square of the relative errors, percent.
    pub rms_error_pct: f64,
    /// Kendall tau-b of the settings ranked by measured and by predicted score.
    pub kendall_tau: Option<f64>,
    /// Predicted 1 % range of pcp->high (pages), over a log grid spanning the measured highs.
    pub predicted_range: (f64, f64),
    /// pcp->high of the measured best setting, pages.
    pub measured_best_high: f64,
    /// Whether the measured best lies in the predicted 1 % range.
    pub best_in_range: bool,
    /// Parameters, blind vs fitted to the same CSV.
    pub params: Vec<ParamMove>,
    /// Whether that fit converged.
    pub fit_converged: bool,
    /// Remarks on the CSV (columns not read, a machine column naming another host).
    pub notes: Vec<String>,
    /// RMS relative error of the fit, percent.
    pub fit_rms_pct: Option<f64>,
    /// The run each row was priced as, s (the flag or the sweep's `run_seconds` column); None:
    /// the steady state.
    pub run_seconds: Option<f64>,
}

fn geo_mean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// The workload compared (an alias of netperf-udp), named in [`Comparison::model`].
const MODEL: &str = "netperf-pcp-high";

/// `measure pcp`'s names for its host loops and the built-in workload that models each (the
/// page-fault loop is will-it-scale's page_fault1 with a 16 MiB region: `--workload` a copy
/// with its `phase_pages`, e.g. data/host/host-page-fault.toml, for the host's own region).
pub const HOST_LOOPS: &[(&str, &str)] = &[
    ("netperf-udp", "netperf-udp"),
    ("af-unix", "lmbench-af-unix"),
    ("page-fault", "will-it-scale-page-fault1"),
];

/// The workload that models `measure pcp`'s loop `name` (`name` itself when it is no loop).
pub fn model_workload(name: &str) -> &str {
    HOST_LOOPS
        .iter()
        .find(|(l, _)| *l == name)
        .map_or(name, |(_, w)| w)
}

/// A workload's score at each pcp->high through [`crate::workload::Workload::predict`]: the
/// predicted operations per second of one task (a blind model has no score units; the
/// comparison is of shapes). No parameters: nothing here is fitted.
struct PredictAtHigh<'a> {
    w: &'a crate::workload::Workload,
    machine: &'a Machine,
    knobs: &'a crate::workload::Knobs,
}

impl crate::fit::FitModel for PredictAtHigh<'_> {
    fn name(&self) -> &str {
        self.w.name()
    }
    fn params(&self) -> Vec<crate::fit::ParamSpec> {
        Vec::new()
    }
    fn inputs(&self) -> Vec<crate::fit::InputSpec> {
        vec![crate::fit::InputSpec::new("pcp_high_pages", "pages")]
    }
    fn target(&self) -> crate::fit::TargetSpec {
        crate::fit::TargetSpec::new("score", "operations per second")
    }
    fn predict(&self, _params: &[f64], x: &[f64]) -> Result<f64> {
        let h = x.first().copied().unwrap_or(f64::NAN);
        if !(h.is_finite() && (0.0..=f64::from(u32::MAX)).contains(&h)) {
            return Err(Error::invalid(
                "compare",
                "pcp_high_pages",
                format!("{h} is not a page count"),
            ));
        }
        let k = crate::workload::Knobs {
            high: Some(h.round() as u32),
            ..self.knobs.clone()
        };
        Ok(1e9 / self.w.predict(self.machine, &k)?.ns_per_op)
    }
}

/// Compares the blind netperf prediction for `machine` with the sweep in `csv` (text; `label`
/// names it in errors).
///
/// The prediction is the workload's own model on `knobs`' kernel (its PCP rules and who frees
/// the pages: `skb_defer_max` among the knobs' extras), the one `predict` and `optimal-high`
/// evaluate.
pub fn compare_netperf(
    machine: &Machine,
    csv: &str,
    label: &str,
    knobs: &crate::workload::Knobs,
) -> Result<Comparison> {
    // Thread 004's workload (netperf-udp, by its alias) as its kind builds it for the knobs.
    compare_sweep(
        &crate::workload::resolve(MODEL)?,
        machine,
        csv,
        label,
        knobs,
    )
}

/// A measured sweep of workload `w` (columns pcp_high_pages, score) beside the blind
/// prediction. A workload with a reuse path is predicted by the model its kind builds, and
/// that model's parameters are then fitted to the sweep; any other through
/// [`crate::workload::Workload::predict`] at each setting, with nothing to fit.
pub fn compare_sweep(
    w: &crate::workload::Workload,
    machine: &Machine,
    csv: &str,
    label: &str,
    knobs: &crate::workload::Knobs,
) -> Result<Comparison> {
    use crate::workload::{RUN_SECONDS, RUN_START_PAGES};
    // A run length (the flag, or the sweep's run_seconds column) prices each row as a run
    // from the previous row's lists; the steady state is predicted without it.
    let run_s = match knobs.extra(RUN_SECONDS) {
        Some(s) => Some(s),
        None => run_seconds_column(csv, label)?,
    };
    let start_given = knobs.extra(RUN_START_PAGES);
    if start_given.is_some() && run_s.is_none() {
        return Err(Error::Unsupported(
            "--run-start-pages: give --run-seconds too, or a sweep with a run_seconds column (the start of which run?)".into(),
        ));
    }
    let mut steady_knobs = knobs.clone();
    steady_knobs
        .extra
        .retain(|(n, _)| n != RUN_SECONDS && n != RUN_START_PAGES);
    let knobs = &steady_knobs;
    if !w.kind.knobs().contains(&"high") {
        return Err(Error::Unsupported(format!(
            "compare: workload {} (kind {}) has no pcp->high knob, so no prediction of it moves with the sweep's setting; compare takes workloads whose kind reads --high (producer-consumer, alloc-loop)",
            w.name(),
            w.kind.name()
        )));
    }
    let reuse = if w.kind.has_reuse_path() {
        Some(w.kind.reuse_model(&w.spec, machine, knobs)?)
    } else {
        None
    };
    let model: Box<dyn crate::fit::FitModel + '_> = match &reuse {
        Some(r) => Box::new(r.model.clone()),
        None => Box::new(PredictAtHigh { w, machine, knobs }),
    };
    // The sweep `measure pcp --output` writes, or thread 004's table (`data 004_netperf_pcp_high
    // --format csv`): their other columns are accepted and not read; any other column is an
    // error.
    let mut allowed: Vec<&str> = SWEEP_COLUMNS.to_vec();
    allowed.extend(["high_label", "annotation"]);
    let mut ds = Dataset::from_csv_str_with(
        csv,
        label,
        model.as_ref(),
        CsvColumns {
            allowed: &allowed,
            aliases: &[],
        },
    )?;
    ds.check_ranges(w.kind.native_columns())?;
    // A loop's rows fit the workload that models it, or a user's file of the same kind (a
    // copy of it for the host's own parameters).
    let user_file = matches!(w.origin, crate::workload::registry::Origin::File(_));
    let same_kind =
        |m: &str| crate::workload::resolve(m).is_ok_and(|b| b.kind.name() == w.kind.name());
    let loop_names: Vec<&str> = HOST_LOOPS
        .iter()
        .filter(|(_, m)| *m == w.name() || (user_file && same_kind(m)))
        .map(|(l, _)| *l)
        .collect();
    let mut names = vec![w.name()];
    names.extend(&loop_names);
    if w.name() == "netperf-udp" {
        names.push(MODEL);
    }
    names.dedup();
    ds.check_workload(&format!("the workload compared, {}", w.name()), &names)?;
    let mut notes = vec![format!(
        "predicted for kernel {} ({})",
        knobs.kernel_or_default(),
        reuse.as_ref().map_or_else(
            || format!("the {} kind's rules", w.kind.name()),
            |r| regimes_by_setting(&r.model, &r.params.values, &ds.x)
        )
    )];
    if let Some(n) = ds.select_machine(&machine.name) {
        notes.push(n);
    }
    if let Some(n) = ds.check_machine(&machine.name, |m| Machine::builtin(m).is_ok())? {
        notes.push(n);
    }
    let header = crate::fit::dataset::header_line(csv).unwrap_or(0);
    let mut settings: Vec<f64> = ds.x.iter().map(|x| x[0]).collect();
    settings.sort_by(f64::total_cmp);
    settings.dedup();
    if settings.len() < 2 {
        return Err(Error::parse(
            label,
            header,
            "pcp_high_pages",
            format!(
                "{} row(s), all at pcp_high_pages {}: need at least two settings to compare \
                 (a curve's shape needs two points)",
                ds.len(),
                settings.first().map_or("-".into(), |h| format!("{h}"))
            ),
        ));
    }
    if let Some(i) = ds.y.iter().position(|y| !y.is_finite() || *y <= 0.0) {
        return Err(Error::parse(
            label,
            ds.lines[i],
            "score",
            format!(
                "data row {}: {} is not a positive score (scores are compared as ratios)",
                i + 1,
                ds.y[i]
            ),
        ));
    }
    // run_seconds is read here, not by the model's dataset.
    let not_read: Vec<&String> = ds
        .columns_not_read
        .iter()
        .filter(|c| !(run_s.is_some() && c.as_str() == "run_seconds"))
        .collect();
    if !not_read.is_empty() {
        notes.push(format!(
            "columns not read: {}",
            not_read
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let blind = reuse.as_ref().map(|r| r.params.clone());
    let blind_source = match blind.as_ref().map(|b| (&b.source, b.fixed_cycles)) {
        Some((WorkloadSource::Fitted { data }, _)) => {
            format!("fitted to {data} (this machine has thread-004 data: not blind for it)")
        }
        Some((WorkloadSource::Given { source }, _)) => {
            format!("given ({source}); nothing fitted to {label}")
        }
        Some((WorkloadSource::CarriedOver { from }, cycles)) => format!(
            "carried over from {} ({cycles:.0} cycles/page fixed work); nothing fitted to {label}",
            from.join(", "),
        ),
        None => format!(
            "the workload file's values through its kind ({}); nothing fitted to {label}",
            w.kind.name()
        ),
    };
    let values: Vec<f64> = blind.as_ref().map_or_else(Vec::new, |b| b.values.clone());
    let mut pred = model.predict_many(&values, &ds.x)?;
    if let Some(run_s) = run_s {
        notes.push(run_fill_rows(
            w,
            machine,
            knobs,
            &ds.x,
            run_s,
            start_given,
            &mut pred,
        )?);
    }
    if pred.iter().any(|p| !p.is_finite() || *p <= 0.0) {
        return Err(Error::Unsupported(
            "the blind prediction is not finite".into(),
        ));
    }
    let (gm, gp) = (geo_mean(&ds.y), geo_mean(&pred));
    let rows: Vec<Row> =
        ds.x.iter()
            .zip(ds.y.iter().zip(&pred))
            .map(|(x, (m, p))| {
                let (mn, pn) = (m / gm, p / gp);
                Row {
                    high_pages: x[0],
                    measured: *m,
                    measured_norm: mn,
                    predicted_norm: pn,
                    error_pct: 100.0 * (pn / mn - 1.0),
                }
            })
            .collect();
    let rms_error_pct =
        (rows.iter().map(|r| r.error_pct.powi(2)).sum::<f64>() / rows.len() as f64).sqrt();
    let kendall_tau = kendall_tau_b(&ds.y, &pred);
    // Predicted 1 % range over a log grid from 1 page to 4 x the largest measured high.
    // (At most the largest pcp->high the kernel holds, an int: 4 x a measured 2^31 - 1 is not
    // a page count.)
    let top = (ds.x.iter().map(|x| x[0]).fold(1.0, f64::max) * 4.0)
        .clamp(2.0, crate::bounds::PCP_HIGH_PAGES.hi);
    // A full prediction per point where there is no fast model: a coarser grid.
    let steps = if reuse.is_some() { 400 } else { 60 };
    let grid: Vec<f64> = (0..=steps)
        .map(|i| (top.ln() * f64::from(i) / f64::from(steps)).exp().round())
        .chain(ds.x.iter().map(|x| x[0]))
        .collect();
    let xs: Vec<Vec<f64>> = grid.iter().map(|h| vec![*h]).collect();
    let curve = model.predict_many(&values, &xs)?;
    let best = curve.iter().cloned().fold(f64::MIN, f64::max);
    let inside: Vec<f64> = grid
        .iter()
        .zip(&curve)
        .filter(|(_, c)| **c >= 0.99 * best)
        .map(|(h, _)| *h)
        .collect();
    let predicted_range = (
        inside.iter().cloned().fold(f64::MAX, f64::min),
        inside.iter().cloned().fold(f64::MIN, f64::max),
    );
    let ibest = (0..ds.y.len())
        .max_by(|&a, &b| ds.y[a].total_cmp(&ds.y[b]))
        .unwrap_or(0);
    let measured_best_high = ds.x[ibest][0];
    let best_in_range =
        measured_best_high >= predicted_range.0 && measured_best_high <= predicted_range.1;
    let (params, fit_converged, fit_rms_pct) = if reuse.is_none() {
        notes.push(format!(
            "no fit: kind {} has no sweep model with parameters to fit; the comparison is the blind prediction's",
            w.kind.name()
        ));
        (Vec::new(), false, None)
    } else {
        // Fit on the same data: score_scale starts at the blind prediction's implied scale.
        let mut opts = netperf_fit_options(model.as_ref());
        opts.loo = false;
        let specs = model.params();
        let scale = gm / gp;
        opts.initial = specs
            .iter()
            .zip(&values)
            .map(|(s, v)| {
                let v = if s.name == "score_scale" {
                    *v * scale
                } else {
                    *v
                };
                (s.name.clone(), v)
            })
            .filter(|(n, _)| !opts.fixed.iter().any(|(f, _)| f == n))
            .collect();
        let rep = fit(model.as_ref(), &ds, &opts)?;
        if run_s.is_some() {
            notes.push(
                "the fit on the same CSV is of the steady state: a run's fill is priced in the blind prediction, not fitted".into(),
            );
        }
        let params = specs
            .iter()
            .zip(&values)
            .filter_map(|(s, v)| {
                let f = rep.params.iter().find(|p| p.name == s.name)?;
                Some(ParamMove {
                    name: s.name.clone(),
                    unit: s.unit.clone(),
                    blind: if s.name == "score_scale" {
                        v * scale
                    } else {
                        *v
                    },
                    fitted: f.value,
                    fixed: f.fixed,
                    at_bound: f.at_bound,
                })
            })
            .collect();
        (params, rep.converged, rep.rms_rel.map(|r| 100.0 * r))
    };
    Ok(Comparison {
        model: model.name().to_string(),
        workload: w.name().to_string(),
        machine: machine.name.clone(),
        blind_source,
        rows,
        rms_error_pct,
        kendall_tau,
        predicted_range,
        measured_best_high,
        best_in_range,
        params,
        fit_converged,
        notes,
        fit_rms_pct,
        run_seconds: run_s,
    })
}

/// The sweep's run length from its `run_seconds` column (`measure pcp --output` writes it):
/// `None` without the column; an error naming the line if rows disagree or a cell is not a
/// length.
fn run_seconds_column(csv: &str, label: &str) -> Result<Option<f64>> {
    let mut lines = csv
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((_, header)) = lines.next() else {
        return Ok(None);
    };
    let Some(col) = header.split(',').position(|c| c.trim() == "run_seconds") else {
        return Ok(None);
    };
    let mut value: Option<f64> = None;
    for (i, l) in lines {
        let cell = l.split(',').nth(col).unwrap_or("").trim();
        let v: f64 = cell.parse().map_err(|_| {
            Error::parse(
                label,
                i + 1,
                "run_seconds",
                format!("'{cell}' is not a number of seconds"),
            )
        })?;
        crate::bounds::RUN_SECONDS
            .check_flag("run_seconds", v)
            .map_err(|m| Error::parse(label, i + 1, "run_seconds", m))?;
        match value {
            Some(x) if (x - v).abs() > 1e-9 * x => {
                return Err(Error::parse(
                    label,
                    i + 1,
                    "run_seconds",
                    format!("{v} s where the rows above say {x} s: one sweep has one run length"),
                ))
            }
            _ => value = Some(v),
        }
    }
    Ok(value)
}

/// Prices each row of a sweep as a run of `run_s` seconds through
/// [`crate::workload::Workload::predict`]: the run starts from the lists the previous row's
/// setting held (`measure pcp` rotates the settings in the file's order, and trims the lists
/// to the new setting before a run), or from `start` pages where given. Scales `pred` (steady
/// scores) by the run's rate over the steady rate; returns the note that says so.
fn run_fill_rows(
    w: &crate::workload::Workload,
    machine: &Machine,
    knobs: &crate::workload::Knobs,
    xs: &[Vec<f64>],
    run_s: f64,
    start: Option<f64>,
    pred: &mut [f64],
) -> Result<String> {
    use crate::workload::{RUN_SECONDS, RUN_START_PAGES};
    let at = |h: f64| crate::workload::Knobs {
        high: Some(h.round() as u32),
        means_only: true,
        ..knobs.clone()
    };
    let held = |h: f64| -> Result<f64> {
        let p = w.predict(machine, &at(h))?;
        p.output("pcp_pages_held").ok_or_else(|| {
            Error::Unsupported(format!(
                "run_seconds: workload {} (kind {}) does not report the pages its lists hold, so a run's fill has no size here",
                w.name(),
                w.kind.name()
            ))
        })
    };
    let n = xs.len();
    // Each row's steady lists, once: the next row's run starts from them.
    let starts: Vec<f64> = match start {
        Some(s) => vec![s; n],
        None => {
            let held: Vec<f64> = xs.iter().map(|x| held(x[0])).collect::<Result<_>>()?;
            (0..n).map(|i| held[(i + n - 1) % n]).collect()
        }
    };
    let mut worst = (0.0f64, 0.0f64);
    for (i, (x, &s)) in xs.iter().zip(&starts).enumerate() {
        let h = x[0];
        let k = at(h)
            .with_extra(RUN_SECONDS, run_s)
            .with_extra(RUN_START_PAGES, s);
        let p = w.predict(machine, &k)?;
        let steady = p.output("steady_ns_per_op").unwrap_or(p.ns_per_op);
        pred[i] *= steady / p.ns_per_op;
        let share = p.output("run_backing_share").unwrap_or(0.0);
        if share > worst.0 {
            worst = (share, h);
        }
    }
    Ok(match &machine.memory.backing_ns_per_page {
        None => format!(
            "each row a run of {run_s} s: machine {} has no memory.backing_ns_per_page (bare metal, or not measured: `measure backing`), so a run's fill costs nothing beyond the steady state",
            machine.name
        ),
        Some(b) => format!(
            "each row a run of {run_s} s from {}, its lists' growth priced at {} ns per page the host backs (memory.backing_ns_per_page); the most: {:.1} % of the run at {:.0} pages",
            if start.is_some() { "the pages given" } else { "the previous row's lists (measure pcp's rotation)" },
            b.value,
            100.0 * worst.0,
            worst.1
        ),
    })
}

/// The kernel rule that governs the flow at each swept setting, runs of settings under one rule
/// joined: "252-4096 pages: ...; 16384-69632 pages: ...".
fn regimes_by_setting(
    model: &crate::model::netperf::NetperfModel,
    params: &[f64],
    x: &[Vec<f64>],
) -> String {
    let mut highs: Vec<u32> = x.iter().map(|v| v[0] as u32).collect();
    highs.sort_unstable();
    highs.dedup();
    let mut runs: Vec<(u32, u32, String)> = Vec::new();
    for h in highs {
        let r = model
            .estimate(params, h)
            .map_or_else(|e| format!("no regime: {e}"), |e| e.dynamics.regime);
        match runs.last_mut() {
            Some(last) if last.2 == r => last.1 = h,
            _ => runs.push((h, h, r)),
        }
    }
    runs.iter()
        .map(|(a, b, r)| {
            if a == b {
                format!("{a} pages: {r}")
            } else {
                format!("{a}-{b} pages: {r}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_b() {
        assert_eq!(
            kendall_tau_b(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]),
            Some(1.0)
        );
        assert_eq!(
            kendall_tau_b(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]),
            Some(-1.0)
        );
        assert_eq!(kendall_tau_b(&[1.0, 1.0], &[1.0, 2.0]), None);
        // One swap among four: (6 - 2 * 1) / 6.
        let t = kendall_tau_b(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!((t - 4.0 / 6.0).abs() < 1e-12);
    }
}
