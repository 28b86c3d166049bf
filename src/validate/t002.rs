//! Thread 002: cycles per page allocation + free with vm.numa_stat 1 and 0, page_bench01
//! (1 thread) and page_bench03 (88 threads), 2-socket Broadwell.
//!
//! Rows: the four measurements fitted (3 free parameters: `base_cycles`, `event_cycles`,
//! `smt_gain`; 1 degree of freedom), each again held out (leave-one-out), and the saving
//! (on − off) at 1 and 88 threads.

use crate::data;
use crate::error::Result;
use crate::hw::machine::Machine;
use crate::model::vmstat::NumaStatModel;
use crate::validate::{Role, TableValidation, ValidationRow};

pub use crate::fit::numa_calibration::{fit_002, model_002};

/// Validates thread 002.
pub fn validate() -> Result<TableValidation> {
    let model = model_002()?;
    let report = fit_002(&model)?;
    let p: Vec<f64> = report.params.iter().map(|x| x.value).collect();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let how = format!(
        "base_cycles {:.1}, event_cycles {:.2}, smt_gain {:.3} fitted to the 4 points ({}; relative RMS {:.2} %)",
        p[0],
        p[1],
        p[2],
        report.termination,
        100.0 * report.rms_rel.unwrap_or(f64::NAN)
    );
    let case = |x: &[f64]| format!("threads={} numa_stat={}", x[0], x[1]);
    for r in &report.residuals {
        rows.push(ValidationRow::new(
            "002",
            &model.machine,
            case(&r.inputs),
            "cycles_per_page",
            r.measured,
            r.predicted,
            "cycles",
            Role::Fitted,
            how.clone(),
        ));
    }
    if let Some(loo) = &report.loo {
        for l in loo {
            if let Some(r) = report.residuals.iter().find(|r| r.row == l.row) {
                rows.push(ValidationRow::new(
                    "002",
                    &model.machine,
                    case(&r.inputs),
                    "cycles_per_page",
                    l.measured,
                    l.predicted_held_out,
                    "cycles",
                    Role::Loo,
                    "leave-one-out: 3 parameters fitted to the other 3 points (exactly determined)",
                ));
            }
        }
    }
    let pts = data::numa_stat_002()?;
    for threads in [1u32, 88] {
        let on = pts.iter().find(|x| x.threads == threads && x.numa_stat);
        let off = pts.iter().find(|x| x.threads == threads && !x.numa_stat);
        if let (Some(on), Some(off)) = (on, off) {
            let pon = model.estimate(&p, threads, true)?;
            let poff = model.estimate(&p, threads, false)?;
            rows.push(ValidationRow::new(
                "002",
                &model.machine,
                format!("threads={threads}"),
                "saving_cycles",
                on.cycles_per_page - off.cycles_per_page,
                pon.cycles_per_page - poff.cycles_per_page,
                "cycles",
                Role::Fitted,
                how.clone(),
            ));
            if threads == 88 {
                notes.push(format!(
                    "88 threads: SMT stretch {:.2}, fold into shared counters {:.3} cycles/page (threshold {} events); the saving grows with threads because SMT threads share a core, not from folding, and the measured growth exceeds what SMT gives: the 88-thread points carry the residual",
                    pon.smt_stretch, pon.fold_cycles, pon.fold_threshold
                ));
            }
        }
    }
    let old = NumaStatModel::new(
        &Machine::builtin("broadwell-2s")?,
        crate::kernel::version::KernelVersion::new(4, 14),
    )?;
    let o = old.estimate(&p, 88, true)?;
    notes.push(format!(
        "for comparison, on 4.14 (before Kemi Wang's threshold series: fold threshold {}) the same parameters give {:.0} cycles of folding per page at 88 threads (global counter line {:.0} % busy)",
        o.fold_threshold, o.fold_cycles, 100.0 * o.global_line_utilisation
    ));
    Ok(TableValidation::new(
        "002",
        "page_bench cycles per page with vm.numa_stat on/off (2-socket Broadwell)",
        rows,
        vec![
            "base_cycles".into(),
            "event_cycles".into(),
            "smt_gain".into(),
        ],
        (3, &["cycles_per_page"]),
        notes,
    ))
}
