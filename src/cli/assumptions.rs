//! `pcpmodel assumptions`: every constant that is neither a hardware value nor a kernel constant.

use std::process::ExitCode;

use pcpmodel::assumptions;
use pcpmodel::output::report::{sig, Format, Report, Table};

/// Arguments of `pcpmodel assumptions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Lists the assumed constants the models use: value, unit, where it came from, a relative spread,
which seed threads' predictions use it, and which measured tables were visible while it was
chosen (from the git history). Rows of `pcpmodel validate` that depend on a constant chosen while
they were visible are labelled `seen`, not `held_out`.

Examples:
  pcpmodel assumptions
  pcpmodel assumptions --thread 000 --format json")]
pub struct Args {
    /// Only the constants one seed thread's predictions use ("000".."004").
    #[arg(long)]
    pub thread: Option<String>,
}

/// Runs `pcpmodel assumptions`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let threads = pcpmodel::validate::threads()?;
    let list = match &args.thread {
        Some(t) if threads.contains(t) => assumptions::for_thread(t),
        Some(t) => anyhow::bail!("--thread {t}: threads are {}", threads.join(", ")),
        None => assumptions::all(),
    };
    let mut t = Table::new([
        "name",
        "value",
        "unit",
        "spread (%)",
        "used by",
        "chosen while seeing",
        "provenance",
    ])
    .titled("Assumed constants (neither hardware values nor kernel constants)");
    for a in &list {
        t.push([
            a.name.to_string(),
            sig(a.value, 4),
            a.unit.to_string(),
            format!("{:.0}", 100.0 * a.rel_spread),
            a.used_by.join(" "),
            a.chosen_while_seeing.to_string(),
            a.provenance.to_string(),
        ]);
    }
    super::emit(
        &Report {
            json: serde_json::to_value(&list)?,
            tables: vec![t],
            notes: vec![],
        },
        format,
    )
}
