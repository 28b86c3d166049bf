//! Calibration of the memcg charge model (kind memcg-charge) on thread 001's tables:
//! `fixed_ns_per_page` from the root-memcg run of the v2 cover letter, `transfer_scale` fitted to
//! 6.0-rc1 at batch 32. Validation and prediction both use these functions.

use crate::data;
use crate::error::{Error, Result};
use crate::fit::{fit, Dataset, FitModel, FitOptions, FitReport, Residual};
use crate::hw::machine::Machine;
use crate::model::memcg::{CounterCode, MemcgModel, PAGE_BYTES, PARAM_NAMES};

/// One run of the v2 cover letter of thread 001's series (Shakeel Butt, "[PATCH v2 0/3] memcg:
/// optimize charge codepath", linux-mm, 2022-08): same machine and workload as thread 001, from
/// `data/001_memcg_cover_letter_v2.csv`.
#[derive(Debug, Clone)]
pub struct CoverLetterRun {
    /// Label, e.g. `run 3 (fewer_atomics)`.
    pub label: String,
    /// The page_counter code (`None`: the root memcg, no charging).
    pub code: Option<CounterCode>,
    /// MEMCG_CHARGE_BATCH, pages.
    pub batch_pages: u32,
    /// Average netperf throughput, Mbit/s, as printed.
    pub throughput_mbps: f64,
}

/// The cover letter's runs that thread 001's own message does not give (its rows 2 and 5 are
/// thread 001's two points): the root memcg (used to calibrate the fixed work) and the single
/// patches A, B and A+B+C (held-out comparisons).
pub fn cover_letter_runs() -> Result<Vec<CoverLetterRun>> {
    let file = "data/001_memcg_cover_letter_v2.csv";
    data::memcg_cover_letter_001()?
        .into_iter()
        .filter(|r| r.run != 2 && r.run != 5)
        .map(|r| {
            let code = match r.page_counter_code.as_str() {
                "root" => None,
                "rc1" => Some(CounterCode::Rc1),
                "fewer_atomics" => Some(CounterCode::FewerAtomics),
                "split_layout" => Some(CounterCode::SplitLayout),
                "both" => Some(CounterCode::Both),
                other => {
                    return Err(Error::invalid(
                        file,
                        "page_counter_code",
                        format!("run {}: unknown code '{other}'", r.run),
                    ))
                }
            };
            Ok(CoverLetterRun {
                label: format!("run {} ({})", r.run, r.page_counter_code),
                code,
                batch_pages: r.memcg_charge_batch_pages,
                throughput_mbps: r.throughput_mbps,
            })
        })
        .collect()
}

/// The model of thread 001's setup on its machine (36 instances, depth 3, 6.0-rc1).
pub fn model_001() -> Result<MemcgModel> {
    MemcgModel::new(&Machine::builtin("memcg-72cpu")?, 36, 3)
}

/// `fixed_ns_per_page` from the root-memcg run: the root's throughput is the fixed work alone.
pub fn fixed_ns_from_root() -> Result<f64> {
    let root = cover_letter_runs()?
        .into_iter()
        .find(|r| r.code.is_none())
        .ok_or_else(|| Error::Unsupported("thread 001: no root-memcg run".into()))?;
    Ok(PAGE_BYTES as f64 * 8.0 * 1e3 / root.throughput_mbps)
}

/// Fits `free` parameters to thread 001's rows whose batch is in `batches`; the others are held
/// at `fixed` when named there, else at their defaults.
pub fn fit_001(
    model: &MemcgModel,
    free: &[&str],
    batches: &[u32],
    fixed: &[(&str, f64)],
) -> Result<FitReport> {
    let rows: Vec<_> = data::memcg_001()?
        .into_iter()
        .filter(|p| batches.contains(&p.memcg_charge_batch_pages))
        .collect();
    if rows.is_empty() {
        return Err(Error::Unsupported(
            "no thread 001 rows for those batches".into(),
        ));
    }
    let ds = Dataset::from_rows(
        model as &dyn FitModel,
        rows.iter()
            .map(|p| vec![f64::from(p.memcg_charge_batch_pages)])
            .collect(),
        rows.iter().map(|p| p.throughput_mbps).collect(),
        "data/001_memcg_charge_batch.csv",
    )?;
    let specs = model.params();
    let opts = FitOptions {
        fixed: specs
            .iter()
            .filter(|p| !free.contains(&p.name.as_str()))
            .map(|p| {
                let v = fixed
                    .iter()
                    .find(|(n, _)| *n == p.name)
                    .map_or(p.default, |(_, v)| *v);
                (p.name.clone(), v)
            })
            .collect(),
        residual: Residual::Relative,
        loo: false,
        starts: 4,
        ..FitOptions::default()
    };
    fit(model as &dyn FitModel, &ds, &opts)
}

/// Parameter values of a report, in model order.
pub fn values(r: &FitReport) -> Vec<f64> {
    r.params.iter().map(|p| p.value).collect()
}

/// The calibrated parameters: `fixed_ns_per_page` from the root memcg, `transfer_scale` fitted
/// to 6.0-rc1 at batch 32, in model order; with the fit report.
pub fn calibrated_params() -> Result<(Vec<f64>, FitReport)> {
    let model = model_001()?;
    let t0 = fixed_ns_from_root()?;
    let r = fit_001(&model, &[PARAM_NAMES[1]], &[32], &[(PARAM_NAMES[0], t0)])?;
    Ok((values(&r), r))
}
