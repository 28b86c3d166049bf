//! Kind `memcg-charge`: netperf instances (a sender and a receiver CPU each) charging every
//! payload page to a cgroup hierarchy; the per-CPU charge stock refills and drains in batches
//! of MEMCG_CHARGE_BATCH, and each refill or drain walks the page_counter lines of every level,
//! which are queues of cores (thread 001's model, [`crate::model::memcg`]).
//!
//! # Inputs
//! `tasks.count` instances (`--tasks`, `--instances`), `params.cgroup_depth`
//! (`--cgroup-depth`), `params.memcg_charge_batch` (`--charge-batch`). The parameters (fixed
//! work from the root-memcg run, transfer scale fitted to 6.0-rc1 at batch 32) are thread
//! 001's calibration ([`crate::fit::memcg_calibration::calibrated_params`]).
//!
//! Several memcgs (issue 13 item 6): `tasks.memcgs` (`--memcgs`, default 1) sibling memcgs
//! share every charging CPU, their stock calls interleaved: after each call the CPU turns with
//! probability `params.memcg_redraw` (`--memcg-redraw`; default 1, per-call random
//! interleaving) to a memcg drawn uniformly. The stock holds one memcg before 6.16 and seven
//! from 6.16 (`--kernel`, default the file's `reference_kernel`;
//! [`crate::model::memcg::StockCode`]). One memcg is thread 001's model unchanged.

use crate::error::{Error, Result};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::memcg::{Interleave, MemcgModel, StockCode};
use crate::report::{sig, Report, Table};
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted};
use crate::workload::spec::WorkloadSpec;

/// Kind `memcg-charge`.
pub struct MemcgCharge;

/// The kernel a prediction evaluates: `--kernel`, else the file's `reference_kernel`.
fn kernel_of(w: &WorkloadSpec, k: &Knobs) -> Result<KernelVersion> {
    match k.kernel {
        Some(v) => Ok(v),
        None => w.reference_kernel(),
    }
}

/// MEMCG_CHARGE_BATCH and the cgroup depth of a workload with the knobs. The batch is
/// `--charge-batch`, else the file's `params.memcg_charge_batch` (a patched kernel), else the
/// kernel's own ([`crate::kernel::memcg::charge_batch`]).
fn inputs(w: &WorkloadSpec, k: &Knobs) -> Result<(u32, u32)> {
    let given = super::opt_param(
        w,
        k,
        "memcg_charge_batch",
        crate::bounds::MEMCG_CHARGE_BATCH,
    )?;
    let batch = match given {
        Some(b) => b as u32,
        None => crate::kernel::memcg::charge_batch(kernel_of(w, k)?),
    };
    let depth = super::param(w, k, "cgroup_depth", crate::bounds::CGROUP_DEPTH)?;
    Ok((batch, depth as u32))
}

/// The memcgs sharing each CPU, their interleaving and the stock code of the kernel, with
/// notes on values not taken from the file or the flags as they stand. Errors: `--memcgs` above
/// the instances, out-of-range values.
fn sharing(
    w: &WorkloadSpec,
    k: &Knobs,
    instances: u32,
) -> Result<(Interleave, StockCode, Vec<String>)> {
    let mut notes = Vec::new();
    let memcgs = match k.extra("memcgs") {
        Some(v) => {
            crate::bounds::MEMCGS
                .check_flag("--memcgs", v)
                .map_err(Error::Unsupported)?;
            if v > f64::from(instances) {
                return Err(Error::Unsupported(format!(
                    "--memcgs {v}: each memcg needs at least one of the {instances} instances"
                )));
            }
            v as u32
        }
        None => {
            let m = w.tasks.memcgs.as_ref().map_or(1, |m| m.value);
            if m > instances {
                // The file's memcgs hold its tasks; fewer instances (capped to the machine, or
                // --tasks) fill fewer memcgs.
                notes.push(format!(
                    "the file's {m} memcgs are more than the {instances} instances: {instances} memcgs, one instance each (--memcgs sets them)"
                ));
            }
            m.min(instances)
        }
    };
    let redraw = match k.extra("memcg_redraw") {
        Some(v) => {
            crate::bounds::PROBABILITY
                .check_flag("--memcg-redraw", v)
                .map_err(Error::Unsupported)?;
            v
        }
        None if w.params.contains_key("memcg_redraw") => {
            super::param(w, k, "memcg_redraw", crate::bounds::PROBABILITY)?
        }
        None => {
            if memcgs > 1 {
                notes.push("assumed: per-call random interleaving of the memcgs on each CPU (--memcg-redraw 1; the file gives no params.memcg_redraw)".to_string());
            }
            1.0
        }
    };
    let kernel = kernel_of(w, k)?;
    Ok((
        Interleave { memcgs, redraw },
        StockCode::for_kernel(kernel),
        notes,
    ))
}

/// Each instance is a sender and a receiver CPU.
fn check_instances(machine: &Machine, instances: u32) -> Result<()> {
    let cpus = machine.cpus();
    if u64::from(instances) * 2 > u64::from(cpus) {
        return Err(Error::Unsupported(format!(
            "{instances} instance(s) (--tasks, --instances or the file's tasks.count): each netperf instance needs a sender and a receiver CPU, and {} has {cpus} CPU(s) (at most {} instances)",
            machine.name,
            cpus / 2
        )));
    }
    Ok(())
}

impl Kind for MemcgCharge {
    fn name(&self) -> &'static str {
        "memcg-charge"
    }
    fn description(&self) -> &'static str {
        "sender/receiver instances charging every payload page to a cgroup hierarchy: per-CPU charge stock batching (MEMCG_CHARGE_BATCH) and page_counter cache lines as queues of cores (thread 001)"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        &[Mechanism::MemcgCharge]
    }
    fn knobs(&self) -> &'static [&'static str] {
        &[
            "tasks",
            "charge-batch",
            "cgroup-depth",
            "memcgs",
            "memcg-redraw",
        ]
    }
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        Some(&["tasks.count", "tasks.memcgs"])
    }
    fn params_read(&self) -> Option<&'static [&'static str]> {
        Some(&["memcg_charge_batch", "cgroup_depth", "memcg_redraw"])
    }
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("memcg_charge_batch", crate::bounds::MEMCG_CHARGE_BATCH),
            ("cgroup_depth", crate::bounds::CGROUP_DEPTH),
            ("memcg_redraw", crate::bounds::PROBABILITY),
        ]
    }
    fn check(&self, w: &WorkloadSpec) -> Result<()> {
        super::require_params(w, &["cgroup_depth"])
    }
    /// The file's reference kernel: its stock code and MEMCG_CHARGE_BATCH are that kernel's
    /// unless `--kernel` says otherwise.
    fn default_kernel(&self, w: &WorkloadSpec) -> Result<KernelVersion> {
        w.reference_kernel()
    }

    fn predict(&self, w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<Predicted> {
        let (batch, depth) = inputs(w, k)?;
        let (instances, capped) = super::tasks_capped(w, k, machine.cpus() / 2, &machine.name);
        check_instances(machine, instances)?;
        let (il, code, il_note) = sharing(w, k, instances)?;
        let model = MemcgModel::new(machine, instances, depth)?.with_memcgs(il, code)?;
        let p = crate::fit::memcg_calibration::calibrated_params()?.0;
        let e = model.estimate(&p, batch)?;
        let sw = model.switch_terms(batch, p[2])?;
        let t = Table::terms(
            format!(
                "{} on {}, batch {} pages, {} counter levels",
                w.name, machine.name, e.batch_pages, e.levels
            ),
            "ns per payload page",
            &[
                ("fixed work", e.fixed_ns_per_page),
                ("counter line transfers", e.counter_service_ns_per_page),
                ("waiting for counter lines", e.counter_wait_ns_per_page),
            ],
            e.ns_per_page,
        );
        let mut lines = Table::new([
            "counter line",
            "transfers per visit",
            "service per visit (ns)",
            "response per visit (ns)",
            "utilisation",
            "SMT-shared (%)",
        ])
        .titled("counter lines (one visit = one walk or flush touching the line)");
        for l in &e.lines {
            lines.push([
                l.name.clone(),
                format!("{:.2}", l.transfers_per_walk),
                sig(l.service_ns, 4),
                sig(l.response_ns, 4),
                format!("{:.3}", l.utilisation),
                format!("{:.1}", 100.0 * l.sibling_shared),
            ]);
        }
        let mut notes = vec![
            format!(
                "throughput {} Mbit/s per instance; busiest counter line {:.0} % busy",
                sig(e.throughput_mbps, 5),
                100.0 * e.line_utilisation
            ),
            format!(
                "{:.0} busy threads per core: SMT siblings queued at the same line share one transfer, {:.1} % of all transfers here (the more CPUs queue, the more they share)",
                e.threads_per_core,
                100.0 * e.sibling_shared
            ),
        ];
        notes.extend(capped);
        notes.extend(il_note);
        if il.memcgs > 1 {
            notes.push(format!(
                "{} memcgs share each CPU's charge stock ({} memcg{} per stock): consecutive calls switch memcg with probability {:.3}, {:.3} of calls find their memcg uncached, {:.3} eviction drains per charge ({:.2} per switch)",
                il.memcgs,
                code.slots(),
                if code.slots() == 1 { "" } else { "s" },
                sw.switch_probability,
                sw.miss_probability,
                sw.eviction_drains_per_charge,
                sw.drains_per_switch
            ));
        }
        let json = serde_json::json!({
            "workload": w.name,
            "machine": machine.name,
            "instances": instances,
            "cgroup_depth": depth,
            "memcgs": il.memcgs,
            "memcg_redraw": il.redraw,
            "stock_code": code,
            "stock_switching": sw,
            "parameters": p,
            "estimate": e,
        });
        let per_task = 1e9 / e.ns_per_page;
        Ok(Predicted {
            op: w.op.what.clone(),
            ns_per_op: e.ns_per_page,
            throughput_per_task: per_task,
            throughput_total: per_task * f64::from(instances),
            tasks: instances,
            zones: Vec::new(),
            outputs: vec![
                ("throughput_mbps".to_string(), e.throughput_mbps),
                (
                    "throughput_mbps_total".to_string(),
                    e.throughput_mbps * f64::from(instances),
                ),
                (
                    "counter_service_ns".to_string(),
                    e.counter_service_ns_per_page,
                ),
                ("counter_wait_ns".to_string(), e.counter_wait_ns_per_page),
                ("line_utilisation".to_string(), e.line_utilisation),
                ("walks_per_page".to_string(), e.walks_per_page),
                ("memcgs".to_string(), f64::from(il.memcgs)),
                (
                    "memcg_switch_probability".to_string(),
                    sw.switch_probability,
                ),
                (
                    "eviction_drains_per_charge".to_string(),
                    sw.eviction_drains_per_charge,
                ),
            ],
            report: Report {
                json,
                tables: vec![t, lines],
                notes,
            },
        })
    }

    fn native_fit(&self, w: &WorkloadSpec, m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        let (_, depth) = inputs(w, &Knobs::default())?;
        Ok(Some(Box::new(MemcgModel::new(
            m,
            w.tasks.count.value,
            depth,
        )?)))
    }

    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            (
                "memcg_charge_batch_pages",
                crate::bounds::MEMCG_CHARGE_BATCH,
            ),
            ("throughput_mbps", crate::bounds::THROUGHPUT_MBPS),
        ]
    }

    fn native_default_fixed(&self) -> &'static [&'static str] {
        &crate::model::memcg::DEFAULT_FIXED
    }
}
