//! `pcpmodel workloads` (the built-in workloads, or with `--kinds` the kinds) and
//! `pcpmodel workload show NAME|FILE` (every field with its provenance and basis).

use std::process::ExitCode;

use pcpmodel::output::report::{Format, Report, Table};
use pcpmodel::workload::fit::quantity_range;
use pcpmodel::workload::registry::{Origin, Registry, Workload};
use pcpmodel::workload::spec::{Basis, WorkloadSpec};
use serde_json::json;

use super::args::resolve_workload;

/// Arguments of `pcpmodel workloads`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
A workload is one TOML file (models/workloads/README.md: schema, provenance rules, how to add
one); its `kind` is the Rust evaluator that combines the mechanisms for it. Every command that
takes --workload accepts a built-in name, an alias, or a path to such a file.

Examples:
  pcpmodel workloads
  pcpmodel workloads --kinds
  pcpmodel workload show netperf-udp
  pcpmodel workload show netperf-udp --format json > my.json   # the file itself, as JSON")]
pub struct ListArgs {
    /// List the kinds (evaluators) instead: mechanisms, knobs, and which workloads use each.
    #[arg(long)]
    pub kinds: bool,
}

/// Arguments of `pcpmodel workload`.
#[derive(Debug, clap::Args)]
pub struct WorkloadArgs {
    #[command(subcommand)]
    pub action: WorkloadAction,
}

/// `pcpmodel workload <action>`.
#[derive(Debug, clap::Subcommand)]
pub enum WorkloadAction {
    /// Show a workload: every field with its unit, basis and source (JSON: the spec itself).
    Show {
        /// Built-in workload name or alias, or a path to a workload TOML file.
        workload: String,
    },
    /// Write a producer-consumer workload whose flow fields (block order, who frees, the
    /// receiver's allocations and runs of frees) are measured from a recorded flow
    /// (`pcpmodel record`), the rest taken from a template workload.
    #[command(after_help = "\
The pair is found in the flow: the sender is the CPU that allocated the most pages, the block
order the order of most of its pages, the receiver the other CPU that freed the most blocks of
that order. A flow in which no other CPU frees them (a process freeing its own pages) is refused.
The template (--like) gives what a page flow cannot show: the work per page, the bytes touched,
the placement. A flow recorded around `pcpmodel measure pcp --workload netperf-udp|af-unix`
picks its template itself.

Examples:
  pcpmodel workload from-flow udp.flow.gz -o udp.toml
  pcpmodel workload from-flow my.flow.gz --like iperf3-tcp --name my-tcp -o my.toml
  pcpmodel optimal-high --flow udp.flow.gz --machine host.toml")]
    FromFlow(FromFlowArgs),
}

/// Arguments of `pcpmodel workload from-flow`.
#[derive(Debug, Clone, clap::Args)]
pub struct FromFlowArgs {
    /// The flow file (`pcpmodel record`).
    pub flow: std::path::PathBuf,
    /// Template workload of kind producer-consumer: built-in name or TOML file (default: the
    /// host loop the flow recorded, when it was one).
    #[arg(long)]
    pub like: Option<String>,
    /// Name of the new workload (default: the flow file's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Write the TOML here (default: stdout).
    #[arg(short = 'o', long = "output")]
    pub output: Option<std::path::PathBuf>,
}

impl FromFlowArgs {
    /// The workload's TOML text and the measured pair.
    pub fn build(&self) -> anyhow::Result<(String, pcpmodel::measure::flow_workload::PairShape)> {
        use pcpmodel::measure::flow_workload as fw;
        let like = match &self.like {
            Some(l) => l.clone(),
            None => fw::default_template(&self.flow)?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: the flow was not recorded around a host loop the model knows: name a producer-consumer template with --like (e.g. netperf-udp, iperf3-tcp)",
                        self.flow.display()
                    )
                })?
                .to_string(),
        };
        let (text, label) = fw::template_text(&like)?;
        let name = self.name.clone().unwrap_or_else(|| {
            let f = self
                .flow
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| "flow".into());
            f.trim_end_matches(".gz")
                .trim_end_matches(".flow")
                .to_string()
        });
        Ok(fw::workload_from_flow(&self.flow, &text, &label, &name)?)
    }
}

fn mechanisms(w: &Workload) -> String {
    w.kind
        .mechanisms()
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `pcpmodel workloads`.
pub fn list(args: ListArgs, format: Format) -> anyhow::Result<ExitCode> {
    let reg = Registry::builtin();
    let all = reg.all_builtin()?;
    if args.kinds {
        return list_kinds(&reg, &all, format);
    }
    let mut t = Table::new([
        "name",
        "kind",
        "mechanisms",
        "default machine",
        "reference kernel",
        "thread",
        "source",
    ]);
    let mut arr = Vec::new();
    for w in &all {
        let s = &w.spec;
        t.push([
            s.name.clone(),
            s.kind.clone(),
            mechanisms(w),
            s.default_machine.clone(),
            s.reference_kernel.clone(),
            s.thread.clone().unwrap_or_else(|| "-".into()),
            s.source.clone(),
        ]);
        arr.push(json!({
            "name": s.name,
            "aliases": s.aliases,
            "kind": s.kind,
            "mechanisms": w.kind.mechanisms(),
            "default_machine": s.default_machine,
            "reference_kernel": s.reference_kernel,
            "thread": s.thread,
            "source": s.source,
            "description": s.description,
        }));
    }
    let mut notes: Vec<String> = all
        .iter()
        .filter(|w| !w.spec.aliases.is_empty())
        .map(|w| {
            format!(
                "{} is also called {}",
                w.spec.name,
                w.spec.aliases.join(", ")
            )
        })
        .collect();
    notes.push(
        "Every field with its source and basis: `pcpmodel workload show NAME`; the kinds: \
         `pcpmodel workloads --kinds`; a new workload is one TOML file (models/workloads/README.md)."
            .into(),
    );
    super::emit(
        &Report {
            json: serde_json::Value::Array(arr),
            tables: vec![t],
            notes,
        },
        format,
    )
}

fn list_kinds(reg: &Registry, all: &[Workload], format: Format) -> anyhow::Result<ExitCode> {
    let mut t = Table::new([
        "kind",
        "mechanisms",
        "knobs",
        "native fit columns",
        "built-in workloads",
        "description",
    ]);
    let mut arr = Vec::new();
    for k in reg.kinds() {
        let used: Vec<&str> = all
            .iter()
            .filter(|w| w.kind.name() == k.name())
            .map(|w| w.spec.name.as_str())
            .collect();
        let mech: Vec<&str> = k.mechanisms().iter().map(|m| m.as_str()).collect();
        let native: Vec<&str> = k.native_columns().iter().map(|(c, _)| *c).collect();
        t.push([
            k.name().to_string(),
            mech.join(", "),
            k.knobs().join(", "),
            if native.is_empty() {
                "-".to_string()
            } else {
                native.join(", ")
            },
            used.join(", "),
            k.description().to_string(),
        ]);
        arr.push(json!({
            "kind": k.name(),
            "description": k.description(),
            "mechanisms": mech,
            "knobs": k.knobs(),
            "native_columns": native,
            "workloads": used,
        }));
    }
    super::emit(
        &Report {
            json: serde_json::Value::Array(arr),
            tables: vec![t],
            notes: vec![
                "A kind is one Rust file under src/workload/kinds/ implementing the Kind trait and one line in Registry::builtin (models/workloads/README.md)."
                    .into(),
                "native fit columns: the CSV a kind's own fit reads (`pcpmodel fit --workload W`); other CSVs go through the generic fit of knob columns.".into(),
            ],
        },
        format,
    )
}

fn basis(b: Basis) -> &'static str {
    match b {
        Basis::Given => "given",
        Basis::Fitted => "fitted",
        Basis::Measured => "measured",
        Basis::Derived => "derived",
    }
}

/// The rows of `workload show`: field, value, unit, basis, source.
fn show_table(s: &WorkloadSpec) -> Table {
    let mut t = Table::new(["field", "value", "unit", "basis", "source"]);
    let mut text = |field: &str, value: &str, source: &str| {
        t.push([field, value, "", "", source]);
    };
    text("name", &s.name, "");
    text("kind", &s.kind, "");
    if !s.aliases.is_empty() {
        text("aliases", &s.aliases.join(", "), "");
    }
    text("default_machine", &s.default_machine, "");
    text("reference_kernel", &s.reference_kernel, "");
    text("thread", s.thread.as_deref().unwrap_or("-"), "");
    let o = &s.op;
    text("op.what", &o.what, "");
    text("op.order", &o.order.value.to_string(), &o.order.source);
    text(
        "op.freed_by",
        &json_word(&o.freed_by.value),
        &o.freed_by.source,
    );
    if let Some(p) = &o.placement {
        text("op.placement", &json_word(&p.value), &p.source);
    }
    if let Some(k) = &o.work.kernel {
        text(
            "op.work.kernel",
            k,
            "the work is the allocator's fast path measured on this kernel; alloc-loop adds the fast path's changes up to the run's kernel (src/model/fastpath.rs)",
        );
    }
    text(
        "tasks.count",
        &s.tasks.count.value.to_string(),
        &s.tasks.count.source,
    );
    text("tasks.nodes", &s.tasks.nodes.value, &s.tasks.nodes.source);
    text(
        "tasks.mode",
        &json_word(&s.tasks.mode.value),
        &s.tasks.mode.source,
    );
    for (field, q) in s.quantities() {
        t.push([
            field.clone(),
            pcpmodel::bounds::show(q.value),
            quantity_range(&field).unit.to_string(),
            basis(q.basis).to_string(),
            q.source.clone(),
        ]);
    }
    t
}

/// A serde enum's word (`partner`, `same-llc`).
fn json_word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Runs `pcpmodel workload from-flow`.
fn from_flow(a: &FromFlowArgs, format: Format) -> anyhow::Result<ExitCode> {
    let (text, shape) = a.build()?;
    match &a.output {
        Some(p) => {
            std::fs::write(p, &text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
            let mut t = Table::new(["measured", "value"]).titled(format!(
                "{} written from {}",
                p.display(),
                a.flow.display()
            ));
            for (k, v) in [
                ("sender CPU", shape.sender_cpu.to_string()),
                ("receiver CPU", shape.receiver_cpu.to_string()),
                ("block order", shape.order.to_string()),
                ("blocks allocated", shape.blocks_allocated.to_string()),
                (
                    "share freed on the receiver",
                    format!("{:.4}", shape.receiver_share()),
                ),
                (
                    "receiver allocations per block freed",
                    format!("{:.4}", shape.allocs_per_free()),
                ),
                (
                    "receiver's free run (page-weighted mean, pages)",
                    format!("{:.1}", shape.free_run_pages),
                ),
            ] {
                t.push([k.to_string(), v]);
            }
            let report = Report {
                json: json!({ "output": p.display().to_string(), "shape": shape }),
                tables: vec![t],
                notes: vec![],
            };
            super::print_report(&report, format);
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `pcpmodel workload show` or `from-flow`.
pub fn show(args: WorkloadArgs, format: Format) -> anyhow::Result<ExitCode> {
    let workload = match args.action {
        WorkloadAction::Show { workload } => workload,
        WorkloadAction::FromFlow(a) => return from_flow(&a, format),
    };
    let w = resolve_workload(&workload)?;
    let s = &w.spec;
    let origin = match &w.origin {
        Origin::Builtin => format!("built-in models/workloads/{}.toml", s.name),
        Origin::File(p) => format!("file {p}"),
    };
    let mut notes = vec![
        format!("{}: {} ({origin})", s.name, s.description),
        format!("source: {}", s.source),
        format!(
            "kind {}: {} (mechanisms: {})",
            w.kind.name(),
            w.kind.description(),
            mechanisms(&w)
        ),
        "basis: given = stated by the source; fitted = fitted to the data the source names (`fit` refits it); measured = measured directly; derived = computed, the source says how.".into(),
    ];
    let unread = pcpmodel::workload::kind::unread_fields(w.kind.as_ref());
    if !unread.is_empty() {
        notes.push(format!(
            "not read by kind {}: {} (they document the workload; no prediction uses them)",
            w.kind.name(),
            unread.join(", ")
        ));
    }
    if !s.unknown.is_empty() {
        notes.push("Not known:".into());
        notes.extend(s.unknown.iter().map(|u| format!("  - {u}")));
    }
    super::emit(
        &Report {
            json: serde_json::to_value(s)?,
            tables: vec![show_table(s).titled(format!("Workload {}", s.name))],
            notes,
        },
        format,
    )
}
