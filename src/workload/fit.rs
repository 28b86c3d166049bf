//! The generic fit of any workload: [`WorkloadFit`] implements [`FitModel`] for a workload and
//! a CSV of measurements, whatever its kind.
//!
//! - Parameters: the workload file's quantities with `basis = "fitted"`, plus any the user frees
//!   by their dotted field (`fit --free op.work.ns`, `--free params.probe_ns`). Each starts at
//!   the file's value, carries the file's source as provenance, and is bounded by the physical
//!   range of its field ([`quantity_range`]).
//! - Inputs: the CSV's knob columns, numeric only (see [`KNOB_COLUMNS`]): `tasks`, `high`,
//!   `batch`, `order`, `scale_max`, `free_high_threshold`, `free_high` (0/1), and any other knob
//!   the kind reads (its [`super::kind::Kind::knobs`], with `-` written `_`), passed to it by
//!   name in [`Knobs::extra`]. The kernel, the NUMA span and the placement are not columns: they
//!   are one value per run (the kernel defaults to the workload's `reference_kernel`, the kernel
//!   its numbers were measured on).
//! - Target: the one CSV column named like an output of the kind's prediction
//!   ([`Predicted::output`]: `ns_per_op`, `throughput_per_task`, `throughput_total`, or a kind
//!   output such as `score`). Columns `label`, `name`, `machine` and `note` are ignored; any other
//!   column is an error naming the file, line and column number.
//!
//! `predict(p, x)` writes `p` into a copy of the workload file, builds [`Knobs`] from `x` and
//! returns `kind.predict(...).output(target)`: the fit sees exactly what `predict` computes.

use crate::bounds::{self, Range};
use crate::error::{Error, Result};
use crate::fit::{Dataset, FitModel, InputSpec, ParamSpec, TargetSpec};
use crate::hw::machine::Machine;

use super::kind::{Knobs, Predicted};
use super::registry::Workload;
use super::spec::{Basis, Quantity, WorkloadSpec};

/// CSV columns that label rows and are otherwise ignored.
pub const IGNORED_COLUMNS: &[&str] = &[
    "label",
    "name",
    "machine",
    "note",
    "high_label",
    "annotation",
];

/// The numeric knob columns with a field of [`Knobs`], and their valid ranges.
pub const KNOB_COLUMNS: &[(&str, Range)] = &[
    ("tasks", bounds::TASKS),
    ("high", bounds::PCP_HIGH_PAGES),
    ("batch", bounds::PCP_BATCH_PAGES),
    ("order", bounds::ORDER),
    ("scale_max", bounds::PCP_BATCH_SCALE_MAX),
    ("free_high_threshold", bounds::FREE_HIGH_THRESHOLD),
    ("free_high", bounds::SWITCH),
];

/// Knobs that are one value per run, never a CSV column (the message says how to set them).
const RUN_KNOBS: &[(&str, &str)] = &[
    (
        "kernel",
        "the kernel is one per run (--kernel; default the workload's reference_kernel)",
    ),
    ("nodes", "the NUMA span is the workload's tasks.nodes"),
    ("placement", "the placement is the workload's op.placement"),
];

/// Range of a kind-specific knob column (known names get their own range).
fn extra_knob_range(name: &str) -> Range {
    match name {
        "memcg_charge_batch" => bounds::MEMCG_CHARGE_BATCH,
        "cgroup_depth" => bounds::CGROUP_DEPTH,
        "memcgs" => bounds::MEMCGS,
        "memcg_redraw" => bounds::PROBABILITY,
        "numa_stat" | "high_order_pcp" => bounds::SWITCH,
        _ => Range::real(
            "a knob",
            0.0,
            1e12,
            "",
            "kind-specific knobs are non-negative numbers; 1e12 is the workload files' ceiling",
        ),
    }
}

/// Time per operation: 0..=1e7 ns.
const TIME_NS: Range = Range::real(
    "a time per operation",
    0.0,
    1e7,
    "ns",
    "10 ms per operation is beyond any page-allocator path (a page fault costs ~1 us)",
);
/// Cycles per operation: 0..=1e8.
const CYCLES: Range = Range::real(
    "cycles per operation",
    0.0,
    1e8,
    "cycles",
    "1e7 ns at 10 GHz, the fastest clock a machine file accepts",
);
/// Pages per operation or phase: 0..=2^40.
const PAGES: Range = Range::real(
    "a page count",
    0.0,
    1_099_511_627_776.0,
    "pages",
    "2^40 4 KiB pages are 4 PiB, more memory than any machine has",
);
/// A share of a whole: 0..=1.
const SHARE: Range = Range::real("a share", 0.0, 1.0, "", "a part of a whole");
/// Anything else: the workload files' own ceiling.
const OTHER: Range = Range::real(
    "a workload number",
    0.0,
    1e12,
    "",
    "every workload quantity is non-negative and at most 1e12 (src/workload/spec.rs check)",
);

/// The physical range (and unit) of a workload quantity, by its dotted field: times
/// (`op.work.ns`, `op.think_ns`, `params.*_ns`) 0..=1e7 ns; cycles (`op.work.cycles`,
/// `params.*_cycles`) 0..=1e8; bytes (`op.touch_bytes_per_page`, `params.*bytes*`) 0..=1 MiB;
/// page counts (`op.alloc_pages`, `op.free_pages`, `op.phase_pages`, `params.*_pages`)
/// 0..=2^40; shares and fractions (`params.*share*`, `*fraction*`) 0..=1; anything else
/// 0..=1e12. A fitted value is kept inside its range.
pub fn quantity_range(field: &str) -> Range {
    let leaf = field.rsplit('.').next().unwrap_or(field);
    if leaf == "ns" || leaf.ends_with("_ns") {
        TIME_NS
    } else if leaf == "cycles" || leaf.ends_with("_cycles") {
        CYCLES
    } else if leaf.contains("bytes") {
        crate::bounds::TOUCH_BYTES_PER_PAGE
    } else if leaf.ends_with("pages") {
        PAGES
    } else if leaf.contains("share") || leaf.contains("fraction") {
        SHARE
    } else {
        OTHER
    }
}

/// The unit of a named output of [`Predicted`].
pub fn output_unit(name: &str) -> &'static str {
    match name {
        "ns_per_op" => "ns",
        "throughput_per_task" | "throughput_total" => "ops/s",
        n if n.ends_with("_ns") => "ns",
        n if n.ends_with("_mbps") => "Mbit/s",
        n if n.ends_with("_pct") => "%",
        n if n.starts_with("cycles") => "cycles",
        _ => "",
    }
}

/// The quantity at a dotted field of a workload file, for writing.
pub fn quantity_mut<'a>(spec: &'a mut WorkloadSpec, field: &str) -> Option<&'a mut Quantity> {
    let o = &mut spec.op;
    match field {
        "op.alloc_pages" => Some(&mut o.alloc_pages),
        "op.free_pages" => Some(&mut o.free_pages),
        "op.touch_bytes_per_page" => Some(&mut o.touch_bytes_per_page),
        "op.work.ns" => o.work.ns.as_mut(),
        "op.work.cycles" => o.work.cycles.as_mut(),
        "op.think_ns" => o.think_ns.as_mut(),
        "op.phase_pages" => o.phase_pages.as_mut(),
        _ => field
            .strip_prefix("params.")
            .and_then(|k| spec.params.get_mut(k)),
    }
}

/// One input column.
#[derive(Debug, Clone, PartialEq)]
enum KnobColumn {
    Tasks,
    High,
    Batch,
    Order,
    ScaleMax,
    FreeHighThreshold,
    FreeHigh,
    Extra(String),
}

impl KnobColumn {
    fn of(name: &str) -> KnobColumn {
        match name {
            "tasks" => KnobColumn::Tasks,
            "high" => KnobColumn::High,
            "batch" => KnobColumn::Batch,
            "order" => KnobColumn::Order,
            "scale_max" => KnobColumn::ScaleMax,
            "free_high_threshold" => KnobColumn::FreeHighThreshold,
            "free_high" => KnobColumn::FreeHigh,
            other => KnobColumn::Extra(other.to_string()),
        }
    }

    /// Sets the knob (the value was range-checked as a whole number where it must be one).
    fn set(&self, k: &mut Knobs, v: f64) {
        let u = v.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        match self {
            KnobColumn::Tasks => k.tasks = Some(u),
            KnobColumn::High => k.high = Some(u),
            KnobColumn::Batch => k.batch = Some(u),
            KnobColumn::Order => k.order = Some(u.min(u32::from(u8::MAX)) as u8),
            KnobColumn::ScaleMax => k.scale_max = Some(u.min(u32::from(u8::MAX)) as u8),
            KnobColumn::FreeHighThreshold => k.free_high_threshold = Some(u),
            KnobColumn::FreeHigh => k.free_high = Some(u != 0),
            KnobColumn::Extra(n) => k.extra.push((n.clone(), v)),
        }
    }
}

/// A free parameter: the dotted field and its fit specification.
#[derive(Debug, Clone)]
struct FreeQuantity {
    field: String,
    spec: ParamSpec,
}

/// A workload as a [`FitModel`] over the columns of one CSV (see the module docs).
pub struct WorkloadFit {
    workload: Workload,
    machine: Machine,
    base: Knobs,
    params: Vec<FreeQuantity>,
    inputs: Vec<(String, KnobColumn, Range)>,
    target: String,
    name: String,
}

impl std::fmt::Debug for WorkloadFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadFit")
            .field("workload", &self.workload.spec.name)
            .field("machine", &self.machine.name)
            .field(
                "params",
                &self.params.iter().map(|p| &p.field).collect::<Vec<_>>(),
            )
            .field(
                "inputs",
                &self.inputs.iter().map(|i| &i.0).collect::<Vec<_>>(),
            )
            .field("target", &self.target)
            .finish()
    }
}

/// The header of a CSV: its 1-based line and the column names.
fn csv_header(text: &str, label: &str) -> Result<(usize, Vec<String>)> {
    use crate::fit::dataset::{csv_reader, header_line};
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let line = header_line(text).ok_or_else(|| {
        Error::parse(
            label,
            1,
            "header",
            "no header line (the file is empty or holds only comments)",
        )
    })?;
    let mut rdr = csv_reader(text);
    let h = rdr
        .headers()
        .map_err(|e| Error::parse(label, line, "header", e.to_string()))?;
    Ok((line, h.iter().map(str::to_string).collect()))
}

impl WorkloadFit {
    /// The generic fit of `workload` on `machine` for a CSV whose text is `csv` (`label` names
    /// it in errors): its header sets the inputs and the target. `base` holds the knobs that are
    /// one per run (the kernel); `free` names further quantities to fit by dotted field.
    ///
    /// Errors: an unknown column (`file:line:column`), no target column or two, a freed field
    /// the workload does not have, nothing to fit, or a workload whose kind cannot predict.
    pub fn for_csv(
        workload: &Workload,
        machine: &Machine,
        base: Knobs,
        csv: &str,
        label: &str,
        free: &[String],
    ) -> Result<WorkloadFit> {
        Self::build(workload, machine, base, csv, label, free, true)
    }

    /// As [`WorkloadFit::for_csv`], but a workload with nothing to fit is a model with no
    /// parameters (for blind predictions, as `validate` makes them).
    pub fn for_csv_blind(
        workload: &Workload,
        machine: &Machine,
        base: Knobs,
        csv: &str,
        label: &str,
        free: &[String],
    ) -> Result<WorkloadFit> {
        Self::build(workload, machine, base, csv, label, free, false)
    }

    fn build(
        workload: &Workload,
        machine: &Machine,
        base: Knobs,
        csv: &str,
        label: &str,
        free: &[String],
        need_params: bool,
    ) -> Result<WorkloadFit> {
        let (line, header) = csv_header(csv, label)?;
        let probe = Self::probe(workload, machine, &base)?;
        let outputs = probe.output_names();
        let knob_names = Self::knob_names(workload);
        let mut inputs = Vec::new();
        let mut target: Option<String> = None;
        for (i, col) in header.iter().enumerate() {
            let at = format!("{label}:{line}:{}", i + 1);
            if IGNORED_COLUMNS.contains(&col.as_str()) {
                continue;
            }
            if knob_names.iter().any(|(n, _)| n == col) {
                inputs.push(col.clone());
                continue;
            }
            if outputs.iter().any(|o| o == col) {
                if let Some(t) = &target {
                    return Err(Error::invalid(
                        at,
                        col.as_str(),
                        format!("a second target column (the first is '{t}'): give one measured output per CSV"),
                    ));
                }
                target = Some(col.clone());
                continue;
            }
            let why = RUN_KNOBS
                .iter()
                .find(|(n, _)| n == col)
                .map(|(_, w)| format!(": not a column, {w}"))
                .unwrap_or_else(|| {
                    format!(
                        ": not a knob kind '{}' reads ({}), nor one of its outputs ({}), nor an ignored label column ({})",
                        workload.kind.name(),
                        knob_names
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        outputs.join(", "),
                        IGNORED_COLUMNS.join(", ")
                    )
                });
            return Err(Error::invalid(
                at,
                col.as_str(),
                format!("unknown column{why}"),
            ));
        }
        let target = target.ok_or_else(|| {
            Error::parse(
                label,
                line,
                "header",
                format!(
                    "no target column: the header needs one output of workload {} ({})",
                    workload.spec.name,
                    outputs.join(", ")
                ),
            )
        })?;
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        Self::with_columns(workload, machine, base, &inputs, &target, free, need_params)
    }

    /// The generic fit with the inputs and target given by name (see [`WorkloadFit::for_csv`]).
    pub fn new(
        workload: &Workload,
        machine: &Machine,
        base: Knobs,
        inputs: &[&str],
        target: &str,
        free: &[String],
    ) -> Result<WorkloadFit> {
        Self::with_columns(workload, machine, base, inputs, target, free, true)
    }

    fn with_columns(
        workload: &Workload,
        machine: &Machine,
        base: Knobs,
        inputs: &[&str],
        target: &str,
        free: &[String],
        need_params: bool,
    ) -> Result<WorkloadFit> {
        let label = format!("workload {}", workload.spec.name);
        let knob_names = Self::knob_names(workload);
        let inputs = inputs
            .iter()
            .map(|n| {
                knob_names
                    .iter()
                    .find(|(k, _)| k == n)
                    .map(|(k, r)| (k.clone(), KnobColumn::of(k), *r))
                    .ok_or_else(|| {
                        Error::invalid(
                            &label,
                            *n,
                            format!(
                                "not a knob kind '{}' reads (knob columns: {})",
                                workload.kind.name(),
                                knob_names
                                    .iter()
                                    .map(|(n, _)| n.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let params = Self::free_quantities(&workload.spec, free, &label, need_params)?;
        Ok(WorkloadFit {
            name: workload.spec.name.clone(),
            workload: workload.clone(),
            machine: machine.clone(),
            base,
            params,
            inputs,
            target: target.to_string(),
        })
    }

    /// One prediction with the file's values and the run's knobs (to learn the output names).
    fn probe(workload: &Workload, machine: &Machine, base: &Knobs) -> Result<Predicted> {
        workload.predict(machine, base).map_err(|e| {
            Error::Unsupported(format!(
                "workload {} (kind {}) cannot predict, so it cannot be fitted: {e}",
                workload.spec.name,
                workload.kind.name()
            ))
        })
    }

    /// The knob columns the workload's kind reads, with their ranges.
    fn knob_names(workload: &Workload) -> Vec<(String, Range)> {
        let mut v: Vec<(String, Range)> = Vec::new();
        for k in workload.kind.knobs() {
            let n = k.replace('-', "_");
            if RUN_KNOBS.iter().any(|(r, _)| *r == n) || v.iter().any(|(x, _)| *x == n) {
                continue;
            }
            let r = KNOB_COLUMNS
                .iter()
                .find(|(c, _)| *c == n)
                .map_or_else(|| extra_knob_range(&n), |(_, r)| *r);
            v.push((n, r));
        }
        v
    }

    /// The quantities fitted: basis `fitted`, plus the freed fields.
    fn free_quantities(
        spec: &WorkloadSpec,
        free: &[String],
        label: &str,
        need_params: bool,
    ) -> Result<Vec<FreeQuantity>> {
        let all = spec.quantities();
        for f in free {
            if !all.iter().any(|(n, _)| n == f) {
                return Err(Error::invalid(
                    label,
                    f.as_str(),
                    format!(
                        "--free {f}: the workload has no such quantity (fields: {})",
                        all.iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let mut out = Vec::new();
        for (field, q) in &all {
            let freed = free.iter().any(|f| f == field);
            if q.basis != Basis::Fitted && !freed {
                continue;
            }
            let r = quantity_range(field);
            if !r.contains(q.value) {
                return Err(Error::invalid(
                    label,
                    field.as_str(),
                    format!(
                        "{} is outside the range a fit keeps it in ({}: {})",
                        q.value,
                        r.span(),
                        r.why
                    ),
                ));
            }
            let why = if q.basis == Basis::Fitted {
                "basis fitted in the workload file"
            } else {
                "freed with --free"
            };
            out.push(FreeQuantity {
                field: field.clone(),
                spec: ParamSpec::new(field.clone(), r.unit, q.value)
                    .with_bounds(r.lo, r.hi)
                    .with_provenance(q.source.clone())
                    .with_description(format!("{why}; bounded to {}: {}", r.span(), r.why)),
            });
        }
        if out.is_empty() && need_params {
            return Err(Error::Unsupported(format!(
                "workload {} has nothing to fit: none of its quantities has basis \"fitted\"; free one with --free FIELD (fields: {})",
                spec.name,
                all.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(out)
    }

    /// The workload file with `params` (in [`FitModel::params`] order) written in.
    pub fn spec_with(&self, params: &[f64]) -> WorkloadSpec {
        let mut s = self.workload.spec.clone();
        for (p, v) in self.params.iter().zip(params) {
            if let Some(q) = quantity_mut(&mut s, &p.field) {
                q.value = *v;
            }
        }
        s
    }

    /// The knobs of one row.
    pub fn knobs_for(&self, x: &[f64]) -> Knobs {
        let mut k = self.base.clone();
        for ((_, col, _), v) in self.inputs.iter().zip(x) {
            col.set(&mut k, *v);
        }
        k
    }

    /// The full prediction for one row with `params`.
    pub fn predict_full(&self, params: &[f64], x: &[f64]) -> Result<Predicted> {
        let spec = self.spec_with(params);
        let k = self.knobs_for(x);
        k.check()?;
        self.workload.kind.predict(&spec, &self.machine, &k)
    }

    /// The workload file's values of the parameters (no fit).
    pub fn file_values(&self) -> Vec<f64> {
        self.params.iter().map(|p| p.spec.default).collect()
    }

    /// Every column with its valid range (inputs, then the target).
    pub fn columns(&self) -> Vec<(String, Range)> {
        let t = if output_unit(&self.target) == "ns" {
            bounds::MEASURED_NS
        } else {
            bounds::MEASURED_RATE
        };
        self.inputs
            .iter()
            .map(|(n, _, r)| (n.clone(), *r))
            .chain(std::iter::once((self.target.clone(), t)))
            .collect()
    }

    /// Parses the CSV onto this model and checks every value against its column's range.
    pub fn dataset(&self, csv: &str, label: &str) -> Result<Dataset> {
        let ds = Dataset::from_csv_str(csv, label, self)?;
        let cols = self.columns();
        let refs: Vec<(&str, Range)> = cols.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        ds.check_ranges(&refs)?;
        Ok(ds)
    }

    /// The workload.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Whether anything is fitted (false only for [`WorkloadFit::for_csv_blind`]).
    pub fn has_params(&self) -> bool {
        !self.params.is_empty()
    }

    /// The target column.
    pub fn target_name(&self) -> &str {
        &self.target
    }
}

impl FitModel for WorkloadFit {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self) -> Vec<ParamSpec> {
        self.params.iter().map(|p| p.spec.clone()).collect()
    }

    fn inputs(&self) -> Vec<InputSpec> {
        self.inputs
            .iter()
            .map(|(n, _, r)| InputSpec::new(n.clone(), r.unit))
            .collect()
    }

    fn target(&self) -> TargetSpec {
        TargetSpec::new(self.target.clone(), output_unit(&self.target))
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let p = self.predict_full(params, x)?;
        p.output(&self.target).ok_or_else(|| {
            Error::Unsupported(format!(
                "workload {}: the prediction has no output '{}' (outputs: {})",
                self.name,
                self.target,
                p.output_names().join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_the_field_names() {
        assert_eq!(quantity_range("op.work.ns").unit, "ns");
        assert_eq!(quantity_range("params.probe_ns").hi, 1e7);
        assert_eq!(quantity_range("op.work.cycles").unit, "cycles");
        assert_eq!(quantity_range("op.touch_bytes_per_page").unit, "bytes");
        assert_eq!(quantity_range("op.phase_pages").unit, "pages");
        assert_eq!(quantity_range("params.alloc_work_share").hi, 1.0);
        assert_eq!(quantity_range("params.cgroup_depth").hi, 1e12);
    }

    #[test]
    fn every_quantity_of_the_builtin_files_can_be_written() {
        for b in super::super::registry::BUILTIN {
            let mut s = WorkloadSpec::from_toml_str(b.toml, b.name).unwrap();
            let fields: Vec<String> = s.quantities().into_iter().map(|(f, _)| f).collect();
            for f in fields {
                let q = quantity_mut(&mut s, &f).unwrap_or_else(|| panic!("{}: {f}", b.name));
                q.value += 1.0;
            }
        }
    }
}
