//! Kind `numa-stat`: an in-kernel loop allocating and freeing one order-0 page at a time on
//! each of its threads, with the per-CPU NUMA counters and their folds into the shared counters
//! (thread 002's model, [`crate::model::vmstat`]).
//!
//! # Inputs
//! `tasks.count` threads (`--tasks`, `--threads`), `params.numa_stat` (vm.numa_stat, 0 or 1;
//! `--numa-stat`), the kernel (`--kernel`: the fold threshold changed in 4.15). The three
//! parameters are fitted to thread 002's four rows ([`crate::fit::numa_calibration::fit_002`]).

use crate::error::Result;
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::model::vmstat::NumaStatModel;
use crate::report::{Report, Table};
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `numa-stat`.
pub struct NumaStat;

impl Kind for NumaStat {
    fn name(&self) -> &'static str {
        "numa-stat"
    }
    fn description(&self) -> &'static str {
        "threads allocating and freeing order-0 pages in a loop: base alloc+free cycles, per-CPU NUMA counters and their folds into shared counter lines (thread 002)"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[Mechanism::NumaCounters]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &["tasks", "numa-stat"]
    }
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        Some(&["tasks.count"])
    }
    fn params_read(&self) -> Option<&'static [&'static str]> {
        Some(&["numa_stat"])
    }
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[("numa_stat", crate::bounds::SWITCH)]
    }
    fn check(&self, w: &WorkloadSpec) -> Result<()> {
        super::require_params(w, &["numa_stat"])
    }

    fn predict(&self, w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<Predicted> {
        let kernel = k.kernel_or_default();
        let fit_model = crate::fit::numa_calibration::model_002()?;
        let r = crate::fit::numa_calibration::fit_002(&fit_model)?;
        let p: Vec<f64> = r.params.iter().map(|x| x.value).collect();
        let model = NumaStatModel::new(machine, kernel)?;
        let (threads, capped) = super::tasks_capped(w, k, machine.cpus(), &machine.name);
        let on = super::switch(w, k, "numa_stat")?;
        let ns = u32::from(on);
        let e = model.estimate(&p, threads, on)?;
        let t = Table::terms(
            format!(
                "{} on {}, kernel {}.{}, {threads} threads, vm.numa_stat {ns}",
                w.name, machine.name, kernel.major, kernel.minor
            ),
            "cycles per page",
            &[
                ("alloc + free", e.base_cycles),
                ("per-CPU NUMA counters", e.local_counter_cycles),
                ("folds into shared counters", e.fold_cycles),
            ],
            e.cycles_per_page,
        );
        // A kernel whose counters never fold has an infinite spacing: say so in words, never
        // print "inf" to a user.
        let between = if e.events_between_folds.is_finite() {
            format!(
                "{:.0} events of an item between folds",
                e.events_between_folds
            )
        } else {
            "the per-CPU counters never fold".to_string()
        };
        let mut notes = vec![format!(
            "SMT stretch {:.2}; fold threshold {} events, {:?} rule ({between}); parameters fitted to thread 002",
            e.smt_stretch, e.fold_threshold, e.fold_rule
        )];
        notes.extend(capped);
        let mut json = serde_json::json!({"workload": w.name, "machine": machine.name, "parameters": p, "estimate": e});
        // events_between_folds is infinite (JSON null) when the counters never fold; the keys
        // stay the same on every kernel, with the reason beside it (README, "Output contract").
        let mut null_reasons = serde_json::Map::new();
        if !e.events_between_folds.is_finite() {
            null_reasons.insert(
                "events_between_folds".to_string(),
                format!(
                    "infinite: the per-CPU NUMA counters never fold into the shared ones on kernel {}.{} ({:?} rule)",
                    kernel.major, kernel.minor, e.fold_rule
                )
                .into(),
            );
        }
        json["estimate"]["null_reasons"] = null_reasons.into();
        let ns_per_op = e.cycles_per_page / model.tsc_ghz;
        let per_task = 1e9 / ns_per_op;
        Ok(Predicted {
            op: w.op.what.clone(),
            ns_per_op,
            throughput_per_task: per_task,
            throughput_total: per_task * f64::from(threads),
            tasks: threads,
            zones: Vec::new(),
            outputs: vec![
                ("cycles_per_page".to_string(), e.cycles_per_page),
                ("base_cycles".to_string(), e.base_cycles),
                ("counter_cycles".to_string(), e.local_counter_cycles),
                ("fold_cycles".to_string(), e.fold_cycles),
            ],
            report: Report {
                json,
                tables: vec![t],
                notes,
            },
        })
    }

    fn native_fit(&self, w: &WorkloadSpec, m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        Ok(Some(Box::new(NumaStatModel::new(
            m,
            w.reference_kernel()?,
        )?)))
    }

    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("threads", crate::bounds::TASKS),
            ("numa_stat", crate::bounds::SWITCH),
            ("cycles_per_page", crate::bounds::MEASURED_CYCLES),
        ]
    }
}
