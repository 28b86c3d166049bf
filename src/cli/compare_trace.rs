//! `pcpmodel compare-trace`: the host kernel's PCP traffic (a kmem tracepoint trace) beside the
//! model's kernel rules run over the same flow.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::measure::trace::compare_trace;
use pcpmodel::output::report::{sig, Format, Report, Table};

/// Arguments of `pcpmodel compare-trace`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The trace is what tools/trace_pcp_flow.py --json writes (root, tracefs): an AF_UNIX stream pair,
writer and reader pinned, with the kmem tracepoints on (page allocations and frees by order,
zone-locked refills, per-CPU drains) and the pagesets of /proc/zoneinfo before and after. The
model runs the kernel's PCP rules for the trace's kernel version and recorded limits over the
same writes (the frag orders the kernel allocates for the write size) and prints each quantity
beside the host's. Nothing is fitted.

Exit status: 0 compared; 2 bad input (the message names the file and field).

Example:
  sudo python3 tools/trace_pcp_flow.py --seconds 2 --json > trace.json
  pcpmodel compare-trace trace.json")]
pub struct Args {
    /// The JSON `tools/trace_pcp_flow.py --json` writes.
    pub trace: PathBuf,
}

/// Runs `pcpmodel compare-trace`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let label = args.trace.display().to_string();
    let text = pcpmodel::input::read_text(&args.trace, &label, pcpmodel::input::MAX_TEXT_BYTES)?;
    let c = compare_trace(&text, &label)?;
    let mut t = Table::new([
        "quantity",
        "unit",
        "host kernel",
        "model (replay)",
        "error (%)",
        "model (steady state)",
    ])
    .titled(format!(
        "{label}: kernel {}, zone {}, {} messages of blocks of orders {:?}; model given {}",
        c.kernel, c.zone, c.writes, c.write_orders, c.limits
    ));
    for r in &c.rows {
        t.push([
            r.quantity.clone(),
            r.unit.clone(),
            sig(r.host, 5),
            sig(r.model, 5),
            r.error_pct.map_or("-".into(), |e| format!("{e:+.1}")),
            r.steady_state.map_or("-".into(), |x| sig(x, 5)),
        ]);
    }
    let report = Report {
        json: serde_json::to_value(&c)?,
        tables: vec![t],
        notes: c.notes.clone(),
    };
    super::print_report(&report, format);
    Ok(ExitCode::SUCCESS)
}
