//! Kind `high-order-fault`: tasks mapping, faulting in and unmapping folios of one order above
//! PAGE_ALLOC_COSTLY_ORDER, with or without that order on the PCP lists; zone->lock traffic from
//! the kernel's PCP state machine, contention from a finite-source queue, and what
//! `perf lock contention` reports of it (thread 003's model, [`crate::model::highorder`]).
//!
//! # Inputs
//! `op.order` (`--order`, 4..=8: above PAGE_ALLOC_COSTLY_ORDER, which is always on the lists,
//! and below the PMD THP order, which `pcp_allowed_order()` also always allows), `tasks.count`
//! (`--tasks`, `--procs`), `params.run_s`, `params.high_order_pcp` (`--high-order-pcp`; when
//! neither the knob is given the table shows both cases, the headline numbers are the file's
//! case), the kernel (`--kernel`). Parameters are derived, not fitted
//! ([`HighOrderModel::derived_params`]).
//!
//! # Zone outputs
//! Per node's Normal zone, with the lock left alone (no perf attached). The model does not
//! separate refills from drains: each side carries half the acquisitions (exact without the
//! order on the lists: one hold per allocation and one per free).

use crate::error::{Error, Result};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::highorder::{HighOrderEstimate, HighOrderModel, LockQuantity, PAGE_FAULT1_BYTES};
use crate::report::{sig, Report, Table};
use crate::workload::kind::{Kind, Knobs, LockSide, Mechanism, Predicted, Stat, ZoneOutput};
use crate::workload::spec::WorkloadSpec;

/// Kind `high-order-fault`.
pub struct HighOrderFault;

/// Orders the kind models (see the module docs).
const ORDERS: std::ops::RangeInclusive<u8> = 4..=8;

fn model(
    w: &WorkloadSpec,
    m: &Machine,
    kernel: KernelVersion,
    k: &Knobs,
) -> Result<(HighOrderModel, Option<String>)> {
    let order = super::order(w, k);
    if !ORDERS.contains(&order) {
        return Err(Error::Unsupported(format!(
            "order {order}: kind high-order-fault models orders {}..={} (lower orders are always on the PCP lists, order 9 is the PMD THP order pcp_allowed_order() always allows)",
            ORDERS.start(),
            ORDERS.end()
        )));
    }
    let run_s = super::param(w, k, "run_s", crate::bounds::DURATION_S)?;
    let (tasks, capped) = super::tasks_capped(w, k, m.cpus(), &m.name);
    let mut model = HighOrderModel::page_fault1(m, kernel, tasks, run_s)?;
    model.order = order;
    model.folios_per_cycle = (PAGE_FAULT1_BYTES >> (12 + u32::from(order))) as u32;
    Ok((model, capped))
}

/// The zone outputs of one estimate of the lock alone.
fn zones(model: &HighOrderModel, e: &HighOrderEstimate) -> Vec<ZoneOutput> {
    let acq_per_s = e.acquisitions / model.run_s / f64::from(model.zones);
    let holds: f64 = e.holds_by_blocks.iter().map(|(_, n)| n).sum();
    let blocks = if holds > 0.0 {
        e.holds_by_blocks
            .iter()
            .map(|(b, n)| f64::from(*b) * n)
            .sum::<f64>()
            / holds
    } else {
        1.0
    };
    let pages = blocks * f64::from(1u32 << model.order);
    let side = LockSide {
        acquisitions_per_s: acq_per_s / 2.0,
        pages_per_acquisition: pages,
        wait: Stat {
            mean_ns: e.wait_ns_mean,
            p50_ns: f64::NAN,
            p99_ns: f64::NAN,
        },
        hold: Stat {
            mean_ns: e.hold_ns_mean,
            p50_ns: f64::NAN,
            p99_ns: f64::NAN,
        },
        wait_ns_per_page: e.wait_ns_mean / pages,
    };
    let folios_per_s = if e.acquisitions_per_folio > 0.0 {
        acq_per_s / e.acquisitions_per_folio
    } else {
        0.0
    };
    let per_task_acq = acq_per_s / f64::from(model.tasks_per_zone);
    (0..model.zones)
        .map(|node| ZoneOutput {
            node,
            zone: "Normal".to_string(),
            tasks: model.tasks / model.zones + u32::from(node < model.tasks % model.zones),
            alloc: side,
            free: side,
            utilisation: e.utilisation,
            lock_cycle_share: per_task_acq * (e.wait_ns_mean + e.hold_ns_mean) / 1e9,
            alloc_bypass_pages_per_s: if e.high_order_pcp {
                0.0
            } else {
                folios_per_s * f64::from(1u32 << model.order)
            },
            free_high_drains_per_s: 0.0,
            pcp_pages_held: f64::NAN,
        })
        .collect()
}

impl Kind for HighOrderFault {
    fn name(&self) -> &'static str {
        "high-order-fault"
    }
    fn description(&self) -> &'static str {
        "tasks faulting in and unmapping high-order folios (mTHP), with or without the order on the PCP lists: zone->lock traffic from the PCP state machine, contention as perf lock contention reports it (thread 003)"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[
            Mechanism::PcpDynamics,
            Mechanism::ZoneLock,
            Mechanism::HighOrderPcp,
        ]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &["tasks", "order", "high-order-pcp"]
    }
    fn refill_loop(&self) -> std::result::Result<(), String> {
        Err(format!(
            "its kind '{}' models zone->lock inside its own fault model (one hold per folio allocated or freed without the order on the PCP lists, thread 003), not as the batched rmqueue_bulk() refill loop that latency's histogram, scale-max and plot latency solve (`latency` shows its per-zone lock means, `predict` the whole model)",
            self.name()
        ))
    }
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        Some(&["op.order", "tasks.count"])
    }
    fn params_read(&self) -> Option<&'static [&'static str]> {
        Some(&["run_s", "high_order_pcp"])
    }
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("run_s", crate::bounds::DURATION_S),
            ("high_order_pcp", crate::bounds::SWITCH),
        ]
    }
    fn check(&self, w: &WorkloadSpec) -> Result<()> {
        super::require_params(w, &["run_s", "high_order_pcp"])
    }

    fn predict(&self, w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<Predicted> {
        let kernel = k.kernel_or_default();
        let (model, capped) = model(w, machine, kernel, k)?;
        let p = model.derived_params(machine);
        let chosen = super::switch(w, k, "high_order_pcp")?;
        let cases: Vec<bool> = if k.extra("high_order_pcp").is_some() {
            vec![chosen]
        } else {
            vec![false, true]
        };
        let head = format!("order-{} on PCP", model.order);
        let mut t = Table::new([
            head.as_str(),
            "perf lock attached",
            "acquisitions",
            "acquisitions per folio",
            "lock utilisation",
            "P(lock held)",
            "P(traced)",
            "contended (traced acquisitions)",
            "total wait (us)",
            "avg wait (us)",
        ])
        .titled(format!(
            "{} on {}, kernel {}.{}, {} tasks, {} s",
            w.name, machine.name, kernel.major, kernel.minor, model.tasks, model.run_s
        ));
        let mut ests = Vec::new();
        let mut alone = Vec::new();
        for c in cases {
            let observed = model.estimate_observed(&p, c, &model.probe)?;
            let bare = model.estimate(&p, c)?;
            for (attached, e) in [(true, &observed), (false, &bare)] {
                t.push([
                    c.to_string(),
                    attached.to_string(),
                    sig(e.acquisitions, 4),
                    sig(e.acquisitions_per_folio, 3),
                    sig(e.utilisation, 3),
                    sig(e.p_contended, 3),
                    sig(e.p_traced, 3),
                    sig(e.contended, 4),
                    sig(e.total_wait_ns / 1e3, 4),
                    // An average over no contended acquisition is undefined, not NaN.
                    if e.contended > 0.0 && e.avg_wait_ns.is_finite() {
                        sig(e.avg_wait_ns / 1e3, 4)
                    } else {
                        "-".to_string()
                    },
                ]);
            }
            ests.push(observed);
            alone.push(bare);
        }
        let pick = |v: &[HighOrderEstimate]| -> Result<HighOrderEstimate> {
            v.iter()
                .find(|e| e.high_order_pcp == chosen)
                .cloned()
                .ok_or_else(|| Error::Unsupported("no estimate of the chosen case".into()))
        };
        let (seen, bare) = (pick(&ests)?, pick(&alone)?);
        let json = serde_json::json!({"workload": w.name, "machine": machine.name, "order": model.order, "parameters": p, "perf_lock_probe": model.probe, "estimates": ests, "estimates_lock_alone": alone});
        let mut notes = vec![
            format!(
                "derived parameters (no fit): fault {:.0} ns per folio, hold {:.0} ns lock hand-over + {:.0} ns buddy work per block",
                p[0], model.hold_fixed_ns, p[1]
            ),
            format!(
                "'contended' and the waits count what perf lock contention counts: acquisitions that find a pending waiter or a queue (qspinlock traces only those). With perf attached its contention_end handler runs inside the critical section (+{:.0} ns per traced hold) and {:.0} ns of handler work fall inside each reported wait (model/perflock.rs; assumed costs)",
                model.probe.end_under_lock_ns,
                model.probe.reported_extra_ns()
            ),
        ];
        notes.extend(capped);
        if kernel < KernelVersion::new(5, 19) {
            notes.push(format!(
                "kernel {}.{} has no lock:contention_begin/end tracepoints (added in 5.19), so perf lock contention cannot run there; read the 'perf lock attached = false' rows",
                kernel.major, kernel.minor
            ));
        }
        // Folios per task per second at the loaded rate (the lock alone), else unloaded.
        let folios_per_task_s = if bare.acquisitions > 0.0 && bare.acquisitions_per_folio > 0.0 {
            bare.acquisitions / bare.acquisitions_per_folio / f64::from(model.tasks) / model.run_s
        } else {
            bare.cycles_per_task as f64 * f64::from(model.folios_per_cycle) / model.run_s
        };
        let mut outputs: Vec<(String, f64)> = LockQuantity::ALL
            .iter()
            .map(|q| (q.name().to_string(), q.of(&seen)))
            .collect();
        outputs.extend([
            ("acquisitions".to_string(), bare.acquisitions),
            ("utilisation".to_string(), bare.utilisation),
            ("wait_ns_mean".to_string(), bare.wait_ns_mean),
        ]);
        Ok(Predicted {
            op: w.op.what.clone(),
            ns_per_op: 1e9 / folios_per_task_s,
            throughput_per_task: folios_per_task_s,
            throughput_total: folios_per_task_s * f64::from(model.tasks),
            tasks: model.tasks,
            zones: zones(&model, &bare),
            outputs,
            report: Report {
                json,
                tables: vec![t],
                notes,
            },
        })
    }

    fn native_fit(&self, w: &WorkloadSpec, m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        let (model, _) = model(w, m, w.reference_kernel()?, &Knobs::default())?;
        Ok(Some(Box::new(model)))
    }

    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        const QUANTITY_CODE: crate::bounds::Range = crate::bounds::Range::int(
            "quantity_code",
            0.0,
            2.0,
            "",
            "0 contended, 1 total_wait_ns, 2 avg_wait_ns",
        );
        &[
            ("high_order_pcp", crate::bounds::SWITCH),
            ("quantity_code", QUANTITY_CODE),
            ("value", crate::bounds::MEASURED_RATE),
        ]
    }

    fn native_default_fixed(&self) -> &'static [&'static str] {
        &crate::model::highorder::DEFAULT_FIXED
    }
}
