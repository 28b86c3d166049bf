//! Calibration of the NUMA-statistics model (kind numa-stat) on thread 002's four rows: three
//! parameters (`base_cycles`, `event_cycles`, `smt_gain`), leave-one-out on. Validation and
//! prediction both use these functions.

use crate::data;
use crate::error::Result;
use crate::fit::{fit, Dataset, FitModel, FitOptions, FitReport, Residual};
use crate::hw::machine::Machine;
use crate::memo::Memo;
use crate::model::vmstat::{NumaStatModel, KERNEL_002};

/// The model of thread 002's machine and kernel.
pub fn model_002() -> Result<NumaStatModel> {
    NumaStatModel::new(&Machine::builtin("broadwell-2s")?, KERNEL_002)
}

/// Fits the three parameters to the four rows (leave-one-out on).
///
/// The fit is deterministic, and thread 002's table, Kemi Wang's literature table and the
/// numa-stat workloads all ask for it: the report is memoised per process, keyed by the model
/// (machine file included) and the assumed constants moved on this thread, as
/// [`crate::fit::lock_calibration::calibrate`] memoises thread 000's fits.
pub fn fit_002(model: &NumaStatModel) -> Result<FitReport> {
    static MEMO: Memo<String, FitReport> = Memo::new();
    let key = format!("{model:?}\u{0}{}", crate::assumptions::moved_key());
    MEMO.get_or_try(key, || fit_002_uncached(model))
}

fn fit_002_uncached(model: &NumaStatModel) -> Result<FitReport> {
    let pts = data::numa_stat_002()?;
    let ds = Dataset::from_rows(
        model as &dyn FitModel,
        pts.iter()
            .map(|p| vec![f64::from(p.threads), if p.numa_stat { 1.0 } else { 0.0 }])
            .collect(),
        pts.iter().map(|p| p.cycles_per_page).collect(),
        "data/002_numa_stat_cycles.csv",
    )?;
    let opts = FitOptions {
        residual: Residual::Relative,
        loo: true,
        starts: 4,
        ..FitOptions::default()
    };
    fit(model as &dyn FitModel, &ds, &opts)
}
