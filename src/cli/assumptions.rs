//! `pcpmodel assumptions`: the registry of every value that is neither a hardware value nor a
//! kernel constant: the code's assumed constants and the `assumed` fields of the built-in model
//! files, each with the tables that were visible when it was chosen.

use std::process::ExitCode;

use pcpmodel::assumptions;
use pcpmodel::output::report::{sig, Format, Report, Table};

/// Arguments of `pcpmodel assumptions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Lists the registry: the assumed constants the models and validators use, and every field of the
built-in machine and workload files whose source says `assumed`. Each entry has its value, unit,
source, a relative spread, the commit that gave it its current value and the validation tables
whose data was in the repository then (`seen_tables`, from `git log -S`: data/assumed-seen.csv,
written by tools/assumed_seen.py; the seed threads' tables count as visible from the start).
A validation row that depends on an entry chosen while its table was visible is not a blind test.

Examples:
  pcpmodel assumptions
  pcpmodel assumptions --thread 000
  pcpmodel assumptions --thread literature --format json")]
pub struct Args {
    /// Only the constants one seed thread's predictions use ("000".."004"), or `literature`.
    #[arg(long)]
    pub thread: Option<String>,
}

/// Runs `pcpmodel assumptions`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let mut known = pcpmodel::validate::threads()?;
    known.push("literature".into());
    let all = assumptions::registry()?;
    let list: Vec<_> = match &args.thread {
        Some(t) if known.contains(t) => all
            .into_iter()
            .filter(|e| e.used_by.iter().any(|u| u == t))
            .collect(),
        Some(t) => anyhow::bail!("--thread {t}: give one of {}", known.join(", ")),
        None => all,
    };
    let mut t = Table::new([
        "id",
        "value",
        "unit",
        "spread (%)",
        "used by",
        "introduced",
        "tables seen",
        "source",
    ])
    .titled("The registry: assumed values (neither hardware values nor kernel constants)");
    for e in &list {
        let seen = if e.seen_tables.is_empty() {
            "none".to_string()
        } else {
            let threads = e
                .seen_tables
                .iter()
                .filter(|s| !s.starts_with("literature"))
                .count();
            let lit = e.seen_tables.len() - threads;
            format!("{threads} thread, {lit} literature")
        };
        t.push([
            e.id.clone(),
            e.value
                .map(|v| sig(v, 4))
                .or(e.value_text.clone())
                .unwrap_or_default(),
            e.unit.clone(),
            format!("{:.0}", 100.0 * e.rel_spread),
            e.used_by.join(" "),
            e.introduced.clone(),
            seen,
            e.source.chars().take(90).collect(),
        ]);
    }
    let constants = list.iter().filter(|e| e.kind == "constant").count();
    super::emit(
        &Report {
            json: serde_json::to_value(&list)?,
            tables: vec![t],
            notes: vec![format!(
                "{} entries: {constants} constants, {} model-file fields.",
                list.len(),
                list.len() - constants
            )],
        },
        format,
    )
}
