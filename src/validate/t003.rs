//! Thread 003: `perf lock contention` on zone->lock for will-it-scale page_fault1 (90 tasks,
//! 64 KiB mTHP) with and without order-4 pages on PCP lists, and unixbench shell8.
//!
//! Calibration: `fault_ns_per_folio` and `hold_ns_per_block` are fitted to the two measurements
//! of page_fault1 *without* the patch that are independent (contended count and average wait;
//! the total wait is their product). Everything *with* the patch is held out. shell8: the score
//! change is predicted from the same parameters with an assumed share of order-4 allocations.

use crate::data;
use crate::error::{Error, Result};
use crate::fit::{fit, Dataset, FitModel, FitOptions, FitReport, Residual};
use crate::machine::Machine;
use crate::model::highorder::{HighOrderModel, KERNEL_003, PARAM_NAMES};
use crate::validate::{Role, TableValidation, ValidationRow};

/// Share of shell8's page allocations that are 64 KiB folios (assumed: shell scripts fork and
/// exec small processes whose anonymous regions are mostly below 64 KiB).
pub const SHELL8_ORDER4_SHARE: f64 = 0.02;

/// The page_fault1 model of thread 003 (90 tasks, 10 s, kunpeng-920, 6.9).
pub fn model_003() -> Result<HighOrderModel> {
    HighOrderModel::page_fault1(&Machine::builtin("kunpeng-920")?, KERNEL_003, 90, 10.0)
}

/// Fits the two free parameters to page_fault1 without the patch.
pub fn fit_003(model: &HighOrderModel) -> Result<FitReport> {
    let row = data::perf_lock_003()?
        .into_iter()
        .find(|r| r.workload == "page_fault1" && !r.patched)
        .ok_or_else(|| Error::Unsupported("thread 003: no unpatched page_fault1 row".into()))?;
    let ds = Dataset::from_rows(
        model as &dyn FitModel,
        vec![vec![0.0, 0.0], vec![0.0, 2.0]],
        vec![row.contended as f64, row.avg_wait_ns],
        "data/003_perf_lock.csv (page_fault1, without)",
    )?;
    let opts = FitOptions {
        fixed: vec![(PARAM_NAMES[2].to_string(), 500.0)],
        residual: Residual::Relative,
        loo: false,
        starts: 6,
        ..FitOptions::default()
    };
    fit(model as &dyn FitModel, &ds, &opts)
}

/// Validates thread 003.
pub fn validate() -> Result<TableValidation> {
    let model = model_003()?;
    let report = fit_003(&model)?;
    let p: Vec<f64> = report.params.iter().map(|x| x.value).collect();
    let machine = model.machine.clone();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let how_fit = format!(
        "fault_ns_per_folio {:.0} and hold_ns_per_block {:.0} fitted to contended and avg wait without the patch ({})",
        p[0], p[1], report.termination
    );
    let how_held = format!(
        "held out: the parameters fitted without the patch ({:.0} ns per fault, {:.0} ns per block), order 4 on the PCP lists stepped through the kernel's nr_pcp_alloc/nr_pcp_high/nr_pcp_free",
        p[0], p[1]
    );
    let lock = data::perf_lock_003()?;
    let mut pred = Vec::new();
    for patched in [false, true] {
        let e = model.estimate(&p, patched)?;
        let meas: Vec<_> = lock
            .iter()
            .filter(|r| r.workload == "page_fault1" && r.patched == patched)
            .collect();
        let contended: f64 = meas.iter().map(|r| r.contended as f64).sum();
        let total: f64 = meas.iter().map(|r| r.total_wait_ns).sum();
        let avg = if contended > 0.0 {
            total / contended
        } else {
            f64::NAN
        };
        let case = if patched {
            "page_fault1 with order-4 PCP"
        } else {
            "page_fault1 without"
        };
        let (r_c, r_a, r_t) = if patched {
            (Role::HeldOut, Role::HeldOut, Role::HeldOut)
        } else {
            (Role::Fitted, Role::Fitted, Role::Fitted)
        };
        let how = if patched {
            how_held.clone()
        } else {
            how_fit.clone()
        };
        rows.push(ValidationRow::new(
            "003",
            &machine,
            case,
            "contended",
            contended,
            e.contended,
            "acquisitions",
            r_c,
            how.clone(),
        ));
        rows.push(ValidationRow::new(
            "003",
            &machine,
            case,
            "total_wait_ns",
            total,
            e.total_wait_ns,
            "ns",
            r_t,
            how.clone(),
        ));
        rows.push(ValidationRow::new(
            "003",
            &machine,
            case,
            "avg_wait_ns",
            avg,
            e.avg_wait_ns,
            "ns",
            r_a,
            how,
        ));
        pred.push(e);
    }
    if let [off, on] = &pred[..] {
        notes.push(format!(
            "page_fault1: {:.3e} -> {:.3e} zone->lock acquisitions over the run; pcp->high auto-tunes to {} pages (the 2048-folio working set is {} pages), so after the ramp each task's unmapped folios are reused from its PCP list; predicted fall in contended acquisitions {:.0}x (measured {:.0}x), in total wait {:.0}x (measured {:.0}x)",
            off.acquisitions,
            on.acquisitions,
            on.final_high_pages,
            model.folios_per_cycle * 16,
            off.contended / on.contended.max(1e-300),
            713.0 / 2.0,
            off.total_wait_ns / on.total_wait_ns.max(1e-300),
            4.64e6 / 25.66e3
        ));
        notes.push(format!(
            "without the patch the lock is {:.1} % busy per zone with {} tasks each: the fit reads the 6.51 us average wait as holds of {:.0} ns per block, much longer than a buddy split or merge should take; other holders (order-0 bulk refills and drains of page tables) that the model leaves out are the likely cause",
            100.0 * off.utilisation,
            model.tasks_per_zone,
            p[1]
        ));
        // shell8: a small share of order-4 allocations; the change is the lock time saved per
        // folio relative to the work per folio (8 copies on the same machine).
        let sh =
            HighOrderModel::page_fault1(&Machine::builtin("kunpeng-920")?, KERNEL_003, 8, 10.0)?;
        let s_off = sh.estimate(&p, false)?;
        let s_on = sh.estimate(&p, true)?;
        let per_folio = |e: &crate::model::highorder::HighOrderEstimate| {
            if e.acquisitions > 0.0 {
                e.acquisitions_per_folio * (e.hold_ns_mean + e.total_wait_ns / e.acquisitions)
            } else {
                0.0
            }
        };
        let saved = per_folio(&s_off) - per_folio(&s_on);
        let work = p[0] + p[2] + per_folio(&s_off);
        let change = 100.0 * SHELL8_ORDER4_SHARE * saved / work;
        for sc in data::shell8_score_003()? {
            rows.push(ValidationRow::new("003", &sc.machine, "shell8", "score_change_pct", sc.stated_improvement_pct, change, "%", Role::HeldOut, format!("lock time saved per 64 KiB folio ({saved:.0} ns of {work:.0} ns) x assumed order-4 share {SHELL8_ORDER4_SHARE} of shell8's allocations")));
        }
        notes.push("shell8: only the score change is predicted; its perf-lock rows are dominated by order-0 rmqueue_pcplist traffic (fork/exec), which this model does not cover".to_string());
    }
    if let Some(f) = report.params.first() {
        if f.value >= 0.99 * 1e8 {
            notes.push(format!(
                "the fit pushes fault_ns_per_folio to its upper bound ({:.0} ns): only an almost idle lock gives as few as 713 contended acquisitions in 10 s, so the fitted rate is not physical (one task cycle then outlasts the run, the PCP ramp never finishes, and the with-patch case keeps refilling 3 blocks per hold); the absolute counts of thread 003 are not reproduced by a lock loaded only by order-4 folios",
                f.value
            ));
        }
    }
    if !report.converged {
        notes.push(format!("the fit did not converge: {}", report.termination));
    }
    Ok(TableValidation {
        thread: "003".to_string(),
        title: "zone->lock contention with order-4 pages on PCP lists (page_fault1, shell8)"
            .to_string(),
        rows,
        free_params: vec!["fault_ns_per_folio".into(), "hold_ns_per_block".into()],
        notes,
    })
}
