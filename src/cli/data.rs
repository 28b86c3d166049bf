//! `pcpmodel data`: list the measured tables transcribed from the seed threads, or show one.

use std::process::ExitCode;

use pcpmodel::data;
use pcpmodel::output::report::{Format, Report, Table};

/// Arguments of `pcpmodel data`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Without NAME, lists the tables. With NAME, shows one: `--format csv` prints the CSV file as
compiled in, `--format json` an array of row objects (numbers as numbers, empty cells as null).

Examples:
  pcpmodel data
  pcpmodel data 004_netperf_pcp_high
  pcpmodel data 004_reg          # a prefix naming one table
  pcpmodel data 000_funclatency_epyc-7w83_1node_scale5 --format csv > hist.csv")]
pub struct Args {
    /// Table name (see the list); `.csv`, a leading `data/` and a unique prefix
    /// (`004_netperf`) are accepted.
    pub name: Option<String>,
}

/// Runs `pcpmodel data`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    match args.name {
        None => super::emit(&list_report()?, format),
        Some(name) => {
            let t = data::table(&name)?;
            if format == Format::Csv {
                // The file itself, byte for byte.
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(t.csv_text.as_bytes());
                let _ = out.flush();
                return Ok(ExitCode::SUCCESS);
            }
            super::emit(&show_report(&t)?, format)
        }
    }
}

fn list_report() -> anyhow::Result<Report> {
    let mut table = Table::new(["name", "thread", "rows", "description"]);
    let mut json = Vec::new();
    for t in data::catalogue() {
        let rows = t.row_count()?;
        table.push([
            t.name.to_string(),
            t.thread.to_string(),
            rows.to_string(),
            t.description.to_string(),
        ]);
        json.push(serde_json::json!({
            "name": t.name,
            "thread": t.thread,
            "file": t.file,
            "rows": rows,
            "columns": t.columns()?,
            "description": t.description,
        }));
    }
    Ok(Report {
        json: serde_json::Value::Array(json),
        tables: vec![table],
        notes: vec![
            "Sources, units of every column and known slips: data/README.md.".to_string(),
            "Show one table: pcpmodel data NAME [--format csv|json].".to_string(),
        ],
    })
}

fn show_report(t: &data::TableInfo) -> anyhow::Result<Report> {
    let mut table = Table::new(t.columns()?).titled(format!(
        "{} (thread {}, {}): {}",
        t.name, t.thread, t.file, t.description
    ));
    for r in t.rows()? {
        table.push(r);
    }
    Ok(Report {
        json: t.to_json()?,
        tables: vec![table],
        notes: vec![],
    })
}
