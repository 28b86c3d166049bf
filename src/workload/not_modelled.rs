//! What a prediction leaves out on the requested kernel: the PCP changes between the workload's
//! `reference_kernel` and the requested one that its kind's model does not implement
//! ([`crate::kernel::changes::not_modelled`]). Every prediction through
//! [`super::registry::Workload::predict`] carries the list: `not_modelled`, `reference_kernel`
//! and `requested_kernel` in the JSON, a table and one note per entry (or a note that nothing is
//! left out).

use crate::error::Result;
use crate::kernel::changes;
use crate::kernel::version::KernelVersion;
use crate::report::{Report, Table};

use super::kind::Knobs;
use super::spec::WorkloadSpec;

/// The name under which [`crate::kernel::changes::CHANGES`] tracks the model a kind evaluates
/// (`affects` / `implemented_in`): the model of the thread the kind was built for. `None` for
/// a kind added at run time.
pub fn changes_key(kind: &str) -> Option<&'static str> {
    match kind {
        "producer-consumer" => Some("netperf-udp"),
        "alloc-loop" => Some("mmap-fill"),
        "memcg-charge" => Some("memcg-netperf"),
        "numa-stat" => Some("page-bench"),
        "high-order-fault" => Some("page-fault1"),
        _ => None,
    }
}

/// Adds the `not_modelled` list of `spec` (evaluated by kind `kind`) on the knobs' kernel
/// (default [`KernelVersion::DEFAULT`]) to `report`.
pub fn add(report: &mut Report, spec: &WorkloadSpec, kind: &str, knobs: &Knobs) -> Result<()> {
    let reference = spec.reference_kernel()?;
    let kernel = knobs.kernel_or_default();
    let Some(key) = changes_key(kind) else {
        insert(report, &[], reference, kernel);
        report.notes.push(format!(
            "not modelled: unknown: no kernel changes are tracked for kind {kind}"
        ));
        return Ok(());
    };
    let list = changes::not_modelled(key, kernel, reference);
    insert(report, &list, reference, kernel);
    if list.is_empty() {
        report.notes.push(format!(
            "not modelled: nothing known: every PCP change between kernel {kernel} and the \
             model's kernel {reference} that touches the {kind} model (tracked as {key}) is \
             implemented (`pcpmodel kernel changes --from {reference} --to {kernel} --workload {key}`)"
        ));
        return Ok(());
    }
    let mut t = Table::new(["commit", "first version", "on kernel", "subject"]).titled(format!(
        "Not modelled: kernel {kernel} differs from the model's kernel {reference} in {} \
         change(s) the {key} model does not implement",
        list.len()
    ));
    for n in &list {
        t.push([
            n.commit.unwrap_or("(unverified)").to_string(),
            n.version.to_string(),
            n.on_requested_kernel.to_string(),
            n.subject.to_string(),
        ]);
        report.notes.push(format!(
            "not modelled: {} ({}): {}",
            n.commit.unwrap_or("(unverified)"),
            n.subject,
            n.note
        ));
    }
    report.tables.push(t);
    Ok(())
}

fn insert(
    report: &mut Report,
    list: &[changes::NotModelled],
    reference: KernelVersion,
    kernel: KernelVersion,
) {
    if let Some(obj) = report.json.as_object_mut() {
        obj.insert(
            "not_modelled".to_string(),
            serde_json::to_value(list).unwrap_or_default(),
        );
        obj.insert(
            "reference_kernel".to_string(),
            serde_json::json!(reference.to_string()),
        );
        obj.insert(
            "requested_kernel".to_string(),
            serde_json::json!(kernel.to_string()),
        );
    }
}
