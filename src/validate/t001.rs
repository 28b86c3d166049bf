//! Thread 001: netperf TCP_SENDFILE throughput at MEMCG_CHARGE_BATCH 32 and 64 (36 instances,
//! 72 CPUs, three-level hierarchy).
//!
//! Two calibrations, both reported:
//! - **held out**: `transfers_per_visit` at its kernel-derived value (2), `fixed_ns_per_page`
//!   fitted to the batch-32 throughput alone; batch 64 and the improvement are predictions.
//! - **fitted**: both free parameters (`fixed_ns_per_page`, `transfers_per_visit`) fitted to both
//!   points; the improvement is then reproduced by construction (2 points, 2 parameters) and the
//!   row is marked fitted. The fitted transfers per visit is the model's reading of the data.

use crate::data;
use crate::error::{Error, Result};
use crate::fit::{fit, Dataset, FitModel, FitOptions, FitReport, Residual};
use crate::machine::Machine;
use crate::model::memcg::{MemcgModel, PARAM_NAMES};
use crate::validate::{Role, TableValidation, ValidationRow};

/// The model of thread 001's setup on its machine (36 instances, depth 3).
pub fn model_001() -> Result<MemcgModel> {
    MemcgModel::new(&Machine::builtin("memcg-72cpu")?, 36, 3)
}

/// Fits `free` parameters (the others at their defaults) to thread 001's rows whose batch is in
/// `batches`.
pub fn fit_001(model: &MemcgModel, free: &[&str], batches: &[u32]) -> Result<FitReport> {
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
            .map(|p| (p.name.clone(), p.default))
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

    // Held out: one free parameter on batch 32.
    let r1 = fit_001(&model, &[PARAM_NAMES[0]], &[32])?;
    let p1 = values(&r1);
    let a = model.estimate(&p1, 32)?;
    let b = model.estimate(&p1, 64)?;
    let how1 = format!(
        "fixed_ns_per_page fitted to batch 32 ({:.0} ns); transfers_per_visit {} (kernel-derived), stock pages per payload page {}",
        p1[0], p1[1], p1[2]
    );
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=32",
        "throughput_mbps",
        m32.throughput_mbps,
        a.throughput_mbps,
        "Mbit/s",
        Role::Fitted,
        how1.clone(),
    ));
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=64",
        "throughput_mbps",
        m64.throughput_mbps,
        b.throughput_mbps,
        "Mbit/s",
        Role::HeldOut,
        how1.clone(),
    ));
    let gain1 = 100.0 * (b.throughput_mbps / a.throughput_mbps - 1.0);
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch 32->64",
        "improvement_pct",
        measured_gain,
        gain1,
        "%",
        Role::HeldOut,
        how1,
    ));
    notes.push(format!(
        "with the kernel-derived cost of a counter visit (2 transfers of {:.0} ns) the counter lines are {:.0} % busy at batch 32: the model predicts +{gain1:.1} % for batch 64, far below the measured +{measured_gain:.1} %. Charging would have to cost far more per walk than the kernel code suggests (more transfers per visit, or more pages through the stock per payload page) for batching to matter this much",
        model.transfer_ns,
        100.0 * a.line_utilisation
    ));

    // Fitted: two free parameters on both points.
    let r2 = fit_001(&model, &[PARAM_NAMES[0], PARAM_NAMES[1]], &[32, 64])?;
    let p2 = values(&r2);
    let a2 = model.estimate(&p2, 32)?;
    let b2 = model.estimate(&p2, 64)?;
    let how2 = format!(
        "fixed_ns_per_page {:.0} ns and transfers_per_visit {:.2} fitted to both points ({}; 0 degrees of freedom)",
        p2[0], p2[1], r2.termination
    );
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=32",
        "throughput_mbps",
        m32.throughput_mbps,
        a2.throughput_mbps,
        "Mbit/s",
        Role::Fitted,
        how2.clone(),
    ));
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch=64",
        "throughput_mbps",
        m64.throughput_mbps,
        b2.throughput_mbps,
        "Mbit/s",
        Role::Fitted,
        how2.clone(),
    ));
    let gain2 = 100.0 * (b2.throughput_mbps / a2.throughput_mbps - 1.0);
    rows.push(ValidationRow::new(
        "001",
        &machine,
        "batch 32->64",
        "improvement_pct",
        measured_gain,
        gain2,
        "%",
        Role::Fitted,
        how2,
    ));
    notes.push(format!(
        "two-parameter fit: {:.2} transfers per counter visit (kernel-derived: 2), counter lines {:.0} % busy at batch 32 and {:.0} % at 64; the machine of thread 001 is itself assumed (memcg-72cpu), so the transfer time is too. The measured 62.7 % may also include patches 1-2 of the series (page_counter atomics and field layout), which this model does not separate",
        p2[1],
        100.0 * a2.line_utilisation,
        100.0 * b2.line_utilisation
    ));
    if !r2.converged {
        notes.push(format!(
            "the two-parameter fit did not converge: {}",
            r2.termination
        ));
    }
    Ok(TableValidation {
        thread: "001".to_string(),
        title: "netperf TCP_SENDFILE throughput vs MEMCG_CHARGE_BATCH (72 CPUs, 36 instances)"
            .to_string(),
        rows,
        free_params: vec![
            "fixed_ns_per_page (both calibrations)".to_string(),
            "transfers_per_visit (two-parameter calibration only)".to_string(),
        ],
        notes,
    })
}
