//! Calibration of the zone->lock model (kind alloc-loop) on thread 000's `rmqueue_bulk()`
//! histograms: the three parameters (`fixed_ns`, `lines_per_page`, `work_ns_per_page`) fitted per
//! measured machine, and carried over to machines without measurements. The validation of the
//! same tables ([`crate::validate`]) and every prediction of a workload whose lock parameters are
//! fitted use these functions; prediction code reaches them here, never through validation.

use crate::data::{self, Histogram000};
use crate::error::Result;
use crate::fit::{fit, Dataset, FitOptions, FitReport};
use crate::hw::machine::Machine;
use crate::memo::Memo;
use crate::model::zonelock::{
    default_params, ZoneLockFit, ZoneLockParams, Q_AVG_NS, Q_CALLS_PER_S,
};
use crate::model::zones::NodeSpan;

/// The family of tables the lock's parameters are fitted to (`op.work.table` of a workload whose
/// lock and work are fitted together): the summary and histograms `data/000_funclatency_*.csv`.
pub const TABLE: &str = "000_funclatency";

/// The workload span of a thread-000 case.
pub fn span(h: &Histogram000) -> NodeSpan {
    if h.nodes > 1 {
        NodeSpan::All
    } else {
        NodeSpan::One
    }
}

/// Measured calls per second of a case (`count / duration`).
pub fn calls_per_s(h: &Histogram000) -> f64 {
    h.count as f64 / h.duration_s.max(1) as f64
}

/// Fits the model of `machine` to the given thread-000 cases (avg and call rate of each),
/// holding the named parameters at their derived priors.
///
/// The fit is deterministic, and the same one is asked for more than once (thread 000's table
/// fits each machine's cases, [`calibrate`] fits them again for the workloads that reuse
/// them, and the one-node fit is redone for each two-node case): the report is memoised per
/// process, keyed by the machine file, the cases, the held parameters and the assumed
/// constants moved on this thread; the model returned is built afresh.
pub fn fit_cases(
    machine: &Machine,
    cases: &[&Histogram000],
    fixed: &[&str],
) -> Result<(ZoneLockFit, FitReport)> {
    static MEMO: Memo<String, FitReport> = Memo::new();
    let key = format!(
        "{}\u{0}{cases:?}\u{0}{fixed:?}\u{0}{}",
        machine.to_toml_string()?,
        crate::assumptions::moved_key()
    );
    // The model the fit built, when it ran (a stored report comes with a new one).
    let mut fitted = None;
    let r = MEMO.get_or_try(key, || {
        let (model, r) = fit_cases_uncached(machine, cases, fixed)?;
        fitted = Some(model);
        Ok(r)
    })?;
    let model = match fitted {
        Some(model) => model,
        None => ZoneLockFit::new(machine)?,
    };
    Ok((model, r))
}

fn fit_cases_uncached(
    machine: &Machine,
    cases: &[&Histogram000],
    fixed: &[&str],
) -> Result<(ZoneLockFit, FitReport)> {
    let model = ZoneLockFit::new(machine)?;
    let mut x = Vec::new();
    let mut y = Vec::new();
    for h in cases {
        let row = |q: f64| {
            vec![
                f64::from(h.scale_max),
                f64::from(h.processes),
                f64::from(h.nodes),
                q,
            ]
        };
        x.push(row(Q_AVG_NS));
        y.push(h.avg_ns as f64);
        x.push(row(Q_CALLS_PER_S));
        y.push(calls_per_s(h));
    }
    let mut ds = Dataset::from_rows(&model, x, y, format!("thread 000, {}", machine.name))?;
    ds.row_labels = cases
        .iter()
        .flat_map(|h| {
            [
                format!("{} avg_ns", h.case),
                format!("{} calls_per_s", h.case),
            ]
        })
        .collect();
    let prior = default_params(&model.model);
    let opts = FitOptions {
        loo: false,
        fixed: fixed
            .iter()
            .map(|n| {
                let v = match *n {
                    "fixed_ns" => prior.fixed_ns,
                    "lines_per_page" => prior.lines_per_page,
                    _ => prior.work_ns_per_page,
                };
                (n.to_string(), v)
            })
            .collect(),
        ..FitOptions::default()
    };
    let report = fit(&model, &ds, &opts)?;
    Ok((model, report))
}

/// Parameters from a fit report.
pub fn params_of(report: &FitReport) -> Result<ZoneLockParams> {
    ZoneLockParams::from_slice(&report.params.iter().map(|p| p.value).collect::<Vec<_>>())
}

/// How the parameters of a machine were obtained.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Calibration {
    /// The parameters.
    pub params: ZoneLockParams,
    /// In words.
    pub source: String,
}

/// The parameters for `machine`: fitted to its thread-000 histograms when it has some; else the
/// measured machines' `lines_per_page` and `work_ns_per_page` (geometric means) with `fixed_ns`
/// derived for this machine.
///
/// The result is memoised per (machine file, moved assumed constants): the fits take tens of ms
/// and every prediction of an alloc-loop workload on the machine needs them.
pub fn calibrate(machine: &Machine) -> Result<Calibration> {
    static MEMO: Memo<String, Calibration> = Memo::new();
    let key = format!(
        "{}\u{0}{}",
        machine.to_toml_string()?,
        crate::assumptions::moved_key()
    );
    MEMO.get_or_try(key, || calibrate_uncached(machine))
}

fn calibrate_uncached(machine: &Machine) -> Result<Calibration> {
    let all = data::histograms_000()?;
    let mine: Vec<&Histogram000> = all.iter().filter(|h| h.machine == machine.name).collect();
    if !mine.is_empty() {
        let (_, r) = fit_cases(machine, &mine, &[])?;
        return Ok(Calibration {
            params: params_of(&r)?,
            source: format!(
                "fitted to the {} thread-000 histogram(s) of {} (averages and call rates; relative RMS {:.1} %)",
                mine.len(),
                machine.name,
                100.0 * r.rms_rel.unwrap_or(f64::NAN)
            ),
        });
    }
    let mut names: Vec<String> = all.iter().map(|h| h.machine.clone()).collect();
    names.dedup();
    let mut lpp = Vec::new();
    let mut work = Vec::new();
    for n in &names {
        let m = Machine::builtin(n)?;
        let cases: Vec<&Histogram000> = all.iter().filter(|h| &h.machine == n).collect();
        let (_, r) = fit_cases(&m, &cases, &[])?;
        let p = params_of(&r)?;
        lpp.push(p.lines_per_page.ln());
        work.push(p.work_ns_per_page.ln());
    }
    let gm = |v: &[f64]| (v.iter().sum::<f64>() / v.len().max(1) as f64).exp();
    let model =
        crate::model::zonelock::ZoneLockModel::new(machine, crate::model::zonelock::KERNEL_000)?;
    let prior = default_params(&model);
    Ok(Calibration {
        params: ZoneLockParams {
            fixed_ns: prior.fixed_ns,
            lines_per_page: gm(&lpp),
            work_ns_per_page: gm(&work),
        },
        source: format!(
            "no thread-000 measurements for {}: lines_per_page and work_ns_per_page carried over from {} (geometric mean), fixed_ns derived for this machine",
            machine.name,
            names.join(", ")
        ),
    })
}
