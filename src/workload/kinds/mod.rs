//! The kinds: one file per way of combining the mechanisms of `src/model/`.

pub mod alloc_loop;
pub mod high_order_fault;
pub mod memcg_charge;
pub mod numa_stat;
pub mod producer_consumer;

use crate::error::{Error, Result};
use crate::workload::kind::Knobs;
use crate::workload::spec::{PlacementSpec, WorkloadSpec};

/// Tasks (or pairs): `--tasks`, else the file's `tasks.count`.
pub(crate) fn tasks(w: &WorkloadSpec, k: &Knobs) -> u32 {
    k.tasks.unwrap_or(w.tasks.count.value)
}

/// Tasks with at most `cap` (what the machine holds, one task per CPU or per pair of CPUs): an
/// explicit `--tasks` is taken as given (the model refuses it if the machine cannot hold it);
/// the file's `tasks.count`, which is its thread's machine's, is capped at `cap`, with a note.
pub(crate) fn tasks_capped(
    w: &WorkloadSpec,
    k: &Knobs,
    cap: u32,
    machine: &str,
) -> (u32, Option<String>) {
    let cap = cap.max(1);
    match k.tasks {
        Some(t) => (t, None),
        None if w.tasks.count.value > cap => (
            cap,
            Some(format!(
                "the file's {} tasks do not fit {machine}: {cap} tasks, as many as it holds (--tasks sets them)",
                w.tasks.count.value
            )),
        ),
        None => (w.tasks.count.value, None),
    }
}

/// Allocation order: `--order`, else the file's `op.order`.
pub(crate) fn order(w: &WorkloadSpec, k: &Knobs) -> u8 {
    k.order.unwrap_or(w.op.order.value)
}

/// Placement of the partner: `--placement`, else the file's `op.placement`.
pub(crate) fn placement(w: &WorkloadSpec, k: &Knobs) -> Result<PlacementSpec> {
    k.placement
        .or(w.op.placement.as_ref().map(|p| p.value))
        .ok_or_else(|| {
            Error::invalid(
                format!("workload {}", w.name),
                "op.placement",
                "missing: the kind places a partner CPU (smt, same-llc, cross-llc, cross-socket)",
            )
        })
}

/// A kind-specific number: the knob `name`, else the file's `params.<name>` (an error naming
/// `params.<name>` when neither is set), checked against `range` under the knob's flag.
pub(crate) fn param(
    w: &WorkloadSpec,
    k: &Knobs,
    name: &str,
    range: crate::bounds::Range,
) -> Result<f64> {
    match k.extra(name) {
        Some(v) => {
            range
                .check_flag(&format!("--{}", crate::workload::kind::extra_flag(name)), v)
                .map_err(Error::Unsupported)?;
            Ok(v)
        }
        None => {
            let v = w.param(name)?;
            range
                .check_flag(&format!("params.{name}"), v)
                .map_err(|m| {
                    Error::invalid(format!("workload {}", w.name), format!("params.{name}"), m)
                })?;
            Ok(v)
        }
    }
}

/// [`param`] when the knob or the file sets `name`, else None (the kind's own default applies).
pub(crate) fn opt_param(
    w: &WorkloadSpec,
    k: &Knobs,
    name: &str,
    range: crate::bounds::Range,
) -> Result<Option<f64>> {
    if k.extra(name).is_none() && !w.params.contains_key(name) {
        return Ok(None);
    }
    param(w, k, name, range).map(Some)
}

/// A 0/1 switch ([`param`] with [`crate::bounds::SWITCH`]).
pub(crate) fn switch(w: &WorkloadSpec, k: &Knobs, name: &str) -> Result<bool> {
    Ok(param(w, k, name, crate::bounds::SWITCH)? == 1.0)
}

/// Checks that every name in `names` is among the file's `params` (a kind's `check`).
pub(crate) fn require_params(w: &WorkloadSpec, names: &[&str]) -> Result<()> {
    for n in names {
        w.param(n)?;
    }
    Ok(())
}

/// Checks `op.free_pages == op.alloc_pages`: the kinds that read both free every page they
/// allocate (in the interval, after it, or by the partner), so another ratio is not expressible.
pub(crate) fn require_every_page_freed(w: &WorkloadSpec) -> Result<()> {
    let (a, f) = (w.op.alloc_pages.value, w.op.free_pages.value);
    if a != f {
        return Err(Error::invalid(
            format!("workload {}", w.name),
            "op.free_pages",
            format!(
                "{f} pages freed per operation but {a} allocated: kind {} frees every page it allocates (freed_by says who and when), so the two must be equal",
                w.kind
            ),
        ));
    }
    Ok(())
}
