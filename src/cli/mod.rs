//! Command-line interface: one file per subcommand. Each subcommand turns its arguments into
//! library calls and returns a [`Report`] (or prints one) and an exit code.
//!
//! Only this file (the dispatcher) imports the subcommand files, including for the nested
//! subcommands of `plot` and `measure`; what several of them share is in [`args`] or here.
//!
//! Exit codes: 0 success; 1 the command ran but its check failed (a `zoneinfo` mismatch, a fit
//! that did not converge), like `diff`; 2 bad input or another error (message on stderr).

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use pcpmodel::output::report::{Format, Report};

mod args;
mod assumptions;
mod compare;
mod compare_trace;
mod data;
mod detect;
mod explain;
mod fit;
mod import;
mod kernel;
mod machine_file;
mod machines;
mod measure;
mod measure_backing;
mod measure_pcp;
mod measure_reuse;
mod measure_work;
mod memcg;
mod optimal_high;
mod predict;
mod record;
mod replay;
mod validate;
mod workloads;
mod zoneinfo;
mod zonelock;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum FormatArg {
    /// Aligned tables with units, for people.
    #[default]
    Table,
    /// One JSON document, for notebooks and scripts.
    Json,
    /// The primary table as CSV.
    Csv,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
        }
    }
}

const AFTER_HELP: &str = "\
Machines are named by a built-in name (see `pcpmodel machines`) or a path to a TOML file of the
same schema (see `pcpmodel machine show icelake-server --format json`).

Exit status: 0 success; 1 a check failed (zoneinfo mismatch, fit did not converge); 2 error.

Examples:
  pcpmodel machines
  pcpmodel kernel --machine icelake-server --kernel 5.18
  pcpmodel zoneinfo                      # check this host's /proc/zoneinfo against the formulas
  pcpmodel detect --format json > host.json";

/// Analytic model of the Linux page allocator's per-CPU page lists (PCP).
#[derive(Debug, Parser)]
#[command(name = "pcpmodel", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// Output format: table (people), json or csv (notebooks, scripts). Default table;
    /// `import` defaults to csv (the fitter's input).
    #[arg(long, global = true, value_enum)]
    pub format: Option<FormatArg>,

    /// No progress on stderr (progress is drawn only when stderr is a terminal, for work that
    /// takes more than about a second).
    #[arg(long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the built-in machines.
    Machines(machines::ListArgs),
    /// Show one machine (built-in name or TOML path) with the provenance of every value.
    Machine(machines::MachineArgs),
    /// List the built-in workloads (name, kind, mechanisms, machine, kernel, thread, source);
    /// `--kinds` lists the kinds.
    Workloads(workloads::ListArgs),
    /// Show one workload (built-in name, alias or TOML path) with the basis and source of every
    /// value.
    Workload(workloads::WorkloadArgs),
    /// What the kernel configures on a machine: every zone's watermarks, batch and high.
    Kernel(kernel::Args),
    /// Check a /proc/zoneinfo against the kernel's formulas (exit 1 on any mismatch).
    Zoneinfo(zoneinfo::Args),
    /// Describe the running host (or a fake sysfs/proc tree) as a machine.
    Detect(detect::Args),
    /// One prediction with every term (throughput, ns per op, hit levels, reuse distance).
    Predict(predict::Args),
    /// The best pcp->high for a machine, its 1% range and 95% interval, the kernel default and
    /// the sysctl that gets closest.
    OptimalHigh(optimal_high::Args),
    /// Machine A vs B: cost terms side by side and a one-parameter-at-a-time attribution.
    Explain(explain::Args),
    /// Fit a workload's parameters to a CSV of measurements (exit 1 if the fit does not
    /// converge).
    Fit(fit::Args),
    /// zone->lock: rmqueue_bulk() latency histogram, percentiles and lock utilisation.
    Latency(zonelock::LatencyArgs),
    /// zone->lock: latency vs throughput for CONFIG_PCP_BATCH_SCALE_MAX 0..6.
    ScaleMax(zonelock::ScaleMaxArgs),
    /// memcg charge batching: throughput vs MEMCG_CHARGE_BATCH.
    ///
    /// netperf TCP_SENDFILE over loopback in a cgroup hierarchy (thread 001's workload): the
    /// 6.0 per-CPU charge stock replayed to count hierarchy walks per payload page, each walk's
    /// transfers on the page_counter cache lines, and those lines as queues of cores (SMT
    /// siblings queued at the same line share one transfer). Parameters: fixed work from the
    /// root-memcg run, transfer_scale fitted to 6.0-rc1 at batch 32 (thread 001).
    ///
    /// Columns: throughput per instance (Mbit/s); gain over half the batch (%); counter-line
    /// ns per payload page (transfers + waiting); utilisation of the busiest line; share of
    /// transfers SMT siblings shared (%). `predict --workload memcg-netperf` gives one batch with
    /// every line.
    Memcg(memcg::MemcgArgs),
    /// Draw a figure as SVG.
    Plot {
        /// What to draw.
        #[command(subcommand)]
        kind: PlotKind,
    },
    /// Every built-in measurement table (or one workload against a CSV): measured vs predicted,
    /// fitted, left out or blind.
    Validate(validate::Args),
    /// Every assumed constant (neither hardware nor kernel): value, unit, provenance, spread,
    /// and the tables visible while it was chosen.
    Assumptions(assumptions::Args),
    /// List or show the measured tables transcribed from the seed threads.
    Data(data::Args),
    /// Read pasted measurements (funclatency, bpftrace, perf lock) into the fitter's CSV schema.
    Import(import::Args),
    /// Measure this host: latencies (`measure latency`), the kernel's PCP under load (`measure pcp`).
    Measure {
        /// What to measure.
        #[command(subcommand)]
        what: MeasureWhat,
    },
    /// A measured sweep (`measure pcp --output`) beside the blind prediction, then fitted.
    Compare(compare::Args),
    /// A kmem tracepoint trace of the host kernel (tools/trace_pcp_flow.py --json) beside the
    /// model's kernel rules over the same flow: refills and drains per write, their sizes.
    CompareTrace(compare_trace::Args),
    /// Record a workload's page flow from the kmem tracepoints (root) into a flow file: runs of
    /// allocations and frees per CPU, task and order, the kernel's refills and drains, the
    /// pagesets before and after. A free in interrupt context while its CPU's pcp lock is held
    /// is kept apart (it goes to the buddy allocator). tracefs is restored on every exit.
    Record(record::RecordArgs),
    /// Replay a recorded flow through the kernel's PCP rules at the recorded setting (the
    /// check against the kernel's own refills and drains) or another: --high, --fraction,
    /// --batch, --scale-max, --kernel. At another setting the lists start as it leaves them once
    /// settled.
    Replay(replay::Args),
}

/// What to draw (`pcpmodel plot ...`: SVG figures).
#[derive(Debug, Subcommand)]
pub enum PlotKind {
    /// Predicted score vs pcp->high with its 95% band and the measured points.
    OptimalHigh(optimal_high::PlotArgs),
    /// Two machines' curves side by side with their cost terms.
    Explain(explain::PlotArgs),
    /// Predicted vs measured log2 latency histogram (thread 000).
    Latency(zonelock::PlotLatencyArgs),
}

/// What to measure (`pcpmodel measure latency|pcp`: the running host).
#[derive(Debug, Subcommand)]
pub enum MeasureWhat {
    /// Load-to-use latency (L1, L2, LLC, DRAM) and core-to-core latency per pair class.
    ///
    /// Pointer chase over a random cyclic permutation of 64-byte lines (2 MiB pages where THP
    /// allows, and DRAM again with 4 KiB pages so the page walk is kept apart); cache-line
    /// ping-pong (lock cmpxchg) between two pinned threads for each pair class the topology
    /// has (SMT siblings, same LLC, another LLC, another socket); local and remote DRAM per
    /// NUMA node; the LLC's inclusive bit from CPUID. Rounds of short interleaved trials, all
    /// pinned to one CPU: every level's value is the median of its round medians, with a 95 %
    /// confidence interval and the spread of single trials; core-to-core windows are split
    /// into modes (a VM's vCPUs move between host cores). Run it on an idle machine: other
    /// runnable tasks are noise. --repeat-check runs it all twice and says whether each level
    /// repeats within 10 %.
    #[command(after_help = "\
Examples:
  pcpmodel measure latency --quick
  pcpmodel measure latency --realtime --repeat-check
  pcpmodel measure latency --toml > host.toml && pcpmodel optimal-high --machine host.toml")]
    Latency(measure::LatencyArgs),
    /// The real kernel's PCP behaviour under a workload at several pcp->high settings.
    Pcp(Box<measure_pcp::PcpArgs>),
    /// The time per page of a producer/consumer data path by reuse distance (no kernel, no
    /// root), beside the model's cache term for the same distances.
    Reuse(measure_reuse::ReuseArgs),
    /// A host loop's work per page with every line local (one CPU, no root): the fixed work
    /// of the model's producer/consumer kind on this machine, measured apart from any sweep.
    Work(measure_work::WorkArgs),
    /// What the hypervisor adds to the first touch of a guest page it dropped (free page
    /// reporting): the cost per page a growing per-CPU list pays on a VM (no root).
    Backing(measure_backing::BackingArgs),
}

/// Runs `on_signal(signal)` on the first SIGINT or SIGTERM (in a thread of its own), then exits
/// with 128 + the signal: how the commands that change the host restore it when interrupted.
pub(crate) fn on_interrupt(on_signal: impl FnOnce(i32) + Send + 'static) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install the SIGINT/SIGTERM handler")?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            on_signal(sig);
            std::process::exit(128 + sig);
        }
    });
    Ok(())
}

/// `--quiet` was given: no progress on stderr.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A progress bar on stderr for `total` steps (hidden when stderr is not a terminal, with
/// `--quiet`, or when `hidden`).
pub fn progress_bar(total: u64, hidden: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let quiet = hidden || QUIET.load(std::sync::atomic::Ordering::Relaxed);
    let pb = ProgressBar::with_draw_target(
        Some(total),
        if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

/// A spinner with elapsed time on stderr for work whose steps the library does not report
/// (hidden like [`progress_bar`]); finish it with `finish_and_clear`.
pub fn spinner(msg: impl Into<std::borrow::Cow<'static, str>>) -> indicatif::ProgressBar {
    let pb = progress_bar(1, false);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message(msg);
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}

/// The command tree with every argument that takes a value allowed to take a negative-looking
/// one: `--high -1` reaches `--high`'s value parser (which refuses it, naming the flag and its
/// range; [`args::bounded`]) instead of clap's "unexpected argument '-1' found", which names
/// neither.
pub fn command() -> clap::Command {
    fn allow_negative(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(allow_negative)
    }
    allow_negative(<Cli as clap::CommandFactory>::command())
}

/// Parses the command line and runs the subcommand.
pub fn run() -> anyhow::Result<ExitCode> {
    let mut cmd = command();
    let matches = match cmd.clone().try_get_matches() {
        Ok(m) => m,
        // A numeric flag out of its range (args::bounded): "Error: --flag V: why", exit 2, like
        // every other bad input (main prints it), instead of clap's usage block.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            anyhow::bail!("{}", first.strip_prefix("error: ").unwrap_or(first))
        }
        Err(e) => e.exit(),
    };
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.format(&mut cmd).exit());
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    let format: Format = cli.format.unwrap_or_default().into();
    match cli.command {
        Command::Machines(a) => machines::list(a, format),
        Command::Machine(a) => machines::show(a, format),
        Command::Workloads(a) => workloads::list(a, format),
        Command::Workload(a) => workloads::show(a, format),
        Command::Kernel(a) => kernel::run(a, format),
        Command::Zoneinfo(a) => zoneinfo::run(a, format),
        Command::Detect(a) => detect::run(a, format),
        Command::Data(a) => data::run(a, format),
        Command::Validate(a) => validate::run(a, format),
        Command::Assumptions(a) => assumptions::run(a, format),
        Command::Predict(a) => predict::run(a, format),
        Command::OptimalHigh(a) => optimal_high::run(a, format),
        Command::Explain(a) => explain::run(a, format),
        Command::Fit(a) => fit::run(a, format),
        Command::Latency(a) => zonelock::latency(a, format),
        Command::ScaleMax(a) => zonelock::scale_max(a, format),
        Command::Memcg(a) => memcg::memcg(a, format),
        Command::Plot { kind } => match kind {
            PlotKind::OptimalHigh(a) => optimal_high::plot(a, format),
            PlotKind::Explain(a) => explain::plot(a, format),
            PlotKind::Latency(a) => zonelock::plot_latency(a, format),
        },
        Command::Import(a) => import::run(a, cli.format.map_or(Format::Csv, Into::into)),
        Command::Measure { what } => match what {
            MeasureWhat::Latency(a) => measure::run_latency(a, format),
            MeasureWhat::Pcp(a) => measure_pcp::run(*a, format),
            MeasureWhat::Reuse(a) => measure_reuse::run(a, format),
            MeasureWhat::Work(a) => measure_work::run(a, format),
            MeasureWhat::Backing(a) => measure_backing::run(a, format),
        },
        Command::Compare(a) => compare::run(a, format),
        Command::CompareTrace(a) => compare_trace::run(a, format),
        Command::Record(a) => record::run(a, format),
        Command::Replay(a) => replay::run(a, format),
    }
}

/// Prints a report to stdout and returns success.
pub fn emit(report: &Report, format: Format) -> anyhow::Result<ExitCode> {
    print_report(report, format);
    Ok(ExitCode::SUCCESS)
}

/// Prints a report to stdout.
pub fn print_report(report: &Report, format: Format) {
    use std::io::Write;
    let text = report.render(format);
    let mut out = std::io::stdout().lock();
    // A closed pipe (`pcpmodel ... | head`) ends quietly.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    /// Every (subcommand path, --flag) whose value is a number.
    fn numeric_flags() -> Vec<(String, String)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
            let numeric = [
                TypeId::of::<u8>(),
                TypeId::of::<u16>(),
                TypeId::of::<u32>(),
                TypeId::of::<u64>(),
                TypeId::of::<usize>(),
                TypeId::of::<i32>(),
                TypeId::of::<i64>(),
                TypeId::of::<f64>(),
            ];
            for a in cmd.get_arguments() {
                let t = a.get_value_parser().type_id();
                if numeric.iter().any(|n| t == *n) {
                    let flag = a
                        .get_long()
                        .map_or_else(|| a.get_id().to_string(), |l| format!("--{l}"));
                    out.push((path.trim().to_string(), flag));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&super::command(), "", &mut out);
        out
    }

    /// Every numeric flag of every subcommand takes a negative-looking value and refuses it with
    /// its flag and range; and tests/it/cli_negative.rs runs each one end to end (the list there is
    /// written out, so this keeps it complete).
    #[test]
    fn every_numeric_flag_refuses_minus_one_naming_flag_and_range() {
        // Whitespace dropped: rustfmt may break a row over lines.
        let listed: String = include_str!("../../tests/it/cli_negative.rs")
            .split_whitespace()
            .collect();
        let flags = numeric_flags();
        assert!(flags.len() > 40, "{flags:?}");
        let cmd = super::command();
        for (path, flag) in &flags {
            let mut c = &cmd;
            for p in path.split_whitespace() {
                c = c.find_subcommand(p).unwrap();
            }
            let a = c
                .get_arguments()
                .find(|a| a.get_long().map(|l| format!("--{l}")).as_deref() == Some(flag))
                .unwrap();
            assert!(a.is_allow_negative_numbers_set(), "{path} {flag}");
            // The argument alone (none of the numeric ones requires or conflicts with another).
            let e = clap::Command::new("t")
                .arg(a.clone())
                .try_get_matches_from(["t", flag.as_str(), "-1"])
                .expect_err(&format!("{path} {flag} -1 accepted"))
                .to_string();
            assert!(
                e.contains(&format!("{flag} -1")) && e.contains("..="),
                "{path} {flag}: {e}"
            );
            let row = format!("\"{path}\",\"{flag}\"");
            assert!(
                listed.contains(&row.replace(' ', "")),
                "tests/it/cli_negative.rs does not run ({row})"
            );
        }
    }
}
