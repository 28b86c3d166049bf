//! `pcpmodel import`: read pasted measurement text (funclatency, bpftrace, perf lock) and print
//! it in the CSV schema the fitter takes.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use pcpmodel::import::{
    self, ImportedHistogram, LockContentionRow, LockTarget, ParseOptions, TimeUnit,
};
use pcpmodel::output::report::{sig, Format, Report, Table};

/// Text formats `pcpmodel import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// BCC funclatency log2 histograms (nsecs/usecs/msecs), with or without the avg line.
    Funclatency,
    /// bpftrace hist() or lhist() maps.
    Bpftrace,
    /// perf lock contention tables (default, -l, -t or -g output).
    PerfLock,
}

/// Unit bpftrace values were recorded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum UnitArg {
    /// Nanoseconds (e.g. `hist(nsecs - @start[tid])`).
    #[default]
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl From<UnitArg> for TimeUnit {
    fn from(u: UnitArg) -> TimeUnit {
        match u {
            UnitArg::Ns => TimeUnit::Ns,
            UnitArg::Us => TimeUnit::Us,
            UnitArg::Ms => TimeUnit::Ms,
            UnitArg::S => TimeUnit::S,
        }
    }
}

/// Arguments of `pcpmodel import`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Pasted mail is fine: '> ' quote prefixes at any depth and quoted-printable (=3D, soft breaks)
are undone first. A text holding several histograms gives all of them, in order.

No data is dropped silently. A row that cannot be read (a bad bound, a stray byte, a negative
count, an unknown unit, a perf-lock row missing its caller) is an error naming the file, line
and field (exit 2); --lenient skips such rows instead, with one warning per row on stderr.
Bucket gaps are handled the same way for funclatency and bpftrace: both tools print every
bucket from the first to the last non-empty one, so a missing bucket means lost rows: an error,
or with --lenient a warning, the gap kept in the output and its samples not counted.
perf-lock values are bounded as perf stores them: contended <= 4294967295 (unsigned int),
times < 2^64 ns, and min <= avg <= max <= total, avg = total / contended within the printed
rounding.

Output (default --format csv, which `pcpmodel fit --data` reads; --format table for people):
  histograms, one selected (only one found, or --index N):  lo_ns,hi_ns,count
  histograms, several:                                     histogram,lo_ns,hi_ns,count
  perf-lock: table,line,contended,total_wait_ns,max_wait_ns,min_wait_ns,avg_wait_ns,kind,lock_type,key,name
Bucket bounds are inclusive ns; usecs/msecs buckets are widened to whole units
(usecs 4 -> 7 is 4000..7999 ns).

Examples:
  pcpmodel import funclatency paste.txt --index 1 > hist.csv
  pcpmodel fit --workload zone-lock --data hist.csv --residual absolute
  pcpmodel import funclatency reply.eml --lenient --format table
  sudo bpftrace lat.bt | pcpmodel import bpftrace - --unit us --index 1
  pcpmodel import perf-lock contention.txt --format json")]
pub struct Args {
    /// Format of the text.
    #[arg(value_enum)]
    pub kind: Kind,
    /// File to read, or `-` for standard input.
    pub input: String,
    /// Unit the bpftrace values were recorded in (bpftrace only; funclatency says its unit).
    /// Required unless every map's name says it (`@ns`, `@usecs`, `@lat_ms`, ...): a bpftrace
    /// histogram carries no unit, and a wrong guess scales every bucket by 1000.
    #[arg(long, value_enum)]
    pub unit: Option<UnitArg>,
    /// Keep only the N-th histogram (1-based, in text order).
    #[arg(long, value_parser = super::args::bounded::<usize>(&super::args::ranges::HISTOGRAM_INDEX))]
    pub index: Option<usize>,
    /// Skip unreadable rows (and accept the bucket gaps they leave) with a warning per row on
    /// stderr, instead of stopping with an error. For pasted mail that got mangled.
    #[arg(long)]
    pub lenient: bool,
}

/// Runs `pcpmodel import`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let (text, label) = read_input(&args.input)?;
    if args.unit.is_some() && args.kind != Kind::Bpftrace {
        anyhow::bail!("--unit applies to bpftrace only (funclatency prints its unit)");
    }
    if args.index.is_some() && args.kind == Kind::PerfLock {
        anyhow::bail!("--index applies to histograms only");
    }
    let opts = ParseOptions {
        lenient: args.lenient,
    };
    let (report, skipped) = match args.kind {
        Kind::Funclatency => {
            let p = import::funclatency_with(&text, &label, opts)?;
            (histogram_report(p.items, args.index, &label)?, p.skipped)
        }
        Kind::Bpftrace => {
            let unit = match (args.unit, unit_from_map_names(&text)) {
                (Some(u), _) => u,
                (None, Some(u)) => u,
                (None, None) => anyhow::bail!(
                    "{label}: bpftrace histograms carry no unit: give --unit ns|us|ms|s (the unit of the value the script passed to hist()/lhist(), e.g. --unit ns for nsecs - @start[tid]); a map named @ns, @us, @ms (or @nsecs, @usecs, @msecs) says it"
                ),
            };
            let p = import::bpftrace_with(&text, &label, unit.into(), opts)?;
            (histogram_report(p.items, args.index, &label)?, p.skipped)
        }
        Kind::PerfLock => {
            let p = import::perf_lock_with(&text, &label, opts)?;
            (lock_report(p.items), p.skipped)
        }
    };
    for s in &skipped {
        eprintln!("warning: skipped (--lenient): {}", s.reason);
    }
    if !skipped.is_empty() {
        eprintln!(
            "warning: {} row(s) or gap(s) skipped in {label}; the output lacks their data",
            skipped.len()
        );
    }
    super::emit(&report, format)
}

/// The unit every map of a bpftrace paste names, when all name the same one (`@us:`,
/// `@usecs[...]:`, `@lat_ns:`); None when a map's name says no unit or two maps disagree.
fn unit_from_map_names(text: &str) -> Option<UnitArg> {
    let mut found: Option<UnitArg> = None;
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix('@') else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !rest[name.len()..].trim_start().starts_with([':', '[']) {
            continue;
        }
        let last = name.rsplit('_').next().unwrap_or("").to_ascii_lowercase();
        let u = match last.as_str() {
            "ns" | "nsecs" => UnitArg::Ns,
            "us" | "usecs" => UnitArg::Us,
            "ms" | "msecs" => UnitArg::Ms,
            _ => return None,
        };
        match found {
            Some(f) if f != u => return None,
            _ => found = Some(u),
        }
    }
    found
}

fn read_input(input: &str) -> anyhow::Result<(String, String)> {
    let cap = pcpmodel::input::MAX_TEXT_BYTES;
    let too_big = |label: &str| {
        anyhow::anyhow!(
            "{label}: larger than {} MiB, the most a pasted report is read to (is it the right file?)",
            cap >> 20
        )
    };
    let mut bytes = Vec::new();
    if input == "-" {
        std::io::stdin()
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
        if bytes.len() as u64 > cap {
            return Err(too_big("<stdin>"));
        }
        return Ok((
            String::from_utf8_lossy(&bytes).into_owned(),
            "<stdin>".to_string(),
        ));
    }
    if std::path::Path::new(input).is_dir() {
        anyhow::bail!("{input}: is a directory, not a file");
    }
    std::fs::File::open(input)
        .and_then(|f| f.take(cap + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading {input}"))?;
    if bytes.len() as u64 > cap {
        return Err(too_big(input));
    }
    // Mail archives are not always UTF-8; undecodable bytes become U+FFFD.
    Ok((
        String::from_utf8_lossy(&bytes).into_owned(),
        input.to_string(),
    ))
}

fn histogram_report(
    all: Vec<ImportedHistogram>,
    index: Option<usize>,
    label: &str,
) -> anyhow::Result<Report> {
    let n = all.len();
    let chosen: Vec<(usize, ImportedHistogram)> = match index {
        Some(k) if k == 0 || k > n => {
            anyhow::bail!("--index {k}: {label} holds {n} histogram(s), numbered 1 to {n}")
        }
        Some(k) => all.into_iter().enumerate().skip(k - 1).take(1).collect(),
        None => all.into_iter().enumerate().collect(),
    };
    let single = chosen.len() == 1;
    let mut tables = Vec::new();
    let mut csv = if single {
        Table::new(["lo_ns", "hi_ns", "count"])
    } else {
        Table::new(["histogram", "lo_ns", "hi_ns", "count"])
    };
    let mut json = Vec::new();
    let mut notes = Vec::new();
    for (i, h) in &chosen {
        let num = i + 1;
        let mut t = Table::new(["lo (ns)", "hi (ns)", "count"]).titled(format!(
            "#{num} {} (line {}, {:?}, printed in {})",
            h.label,
            h.line,
            h.format,
            h.unit.name()
        ));
        for b in h.histogram.buckets() {
            let cells = [
                b.lo_ns.to_string(),
                b.hi_ns.to_string(),
                b.count.to_string(),
            ];
            t.push(cells.clone());
            if single {
                csv.push(cells);
            } else {
                csv.push(std::iter::once(num.to_string()).chain(cells));
            }
        }
        tables.push(t);
        let sum = h.histogram.total_count();
        let mut note = format!(
            "#{num}: {} samples in buckets; midpoint mean {} ns; p50 {} ns; p99 {} ns",
            sum,
            opt(h.histogram.mean_ns()),
            opt(h.histogram.percentile_ns(50.0)),
            opt(h.histogram.percentile_ns(99.0)),
        );
        if let (Some(avg), Some(count)) = (h.printed_avg_ns, h.printed_count) {
            let gap = match sum.cmp(&count) {
                std::cmp::Ordering::Equal => "bucket sum equal".to_string(),
                std::cmp::Ordering::Less => format!("bucket sum short by {}", count - sum),
                std::cmp::Ordering::Greater => format!("bucket sum OVER by {}", sum - count),
            };
            note.push_str(&format!("; printed avg {avg} ns, count {count} ({gap})"));
        }
        notes.push(note);
        json.push(serde_json::json!({
            "index": num,
            "label": h.label,
            "line": h.line,
            "format": h.format,
            "unit": h.unit,
            "bucket_count_sum": sum,
            "printed_avg_ns": h.printed_avg_ns,
            "printed_total_ns": h.printed_total_ns,
            "printed_count": h.printed_count,
            "mean_ns_midpoint": h.histogram.mean_ns(),
            "buckets": h.histogram.buckets(),
        }));
    }
    if !single {
        notes.push(format!(
            "{} histograms; select one with --index N for the plain lo_ns,hi_ns,count schema.",
            chosen.len()
        ));
    }
    // --format csv prints the first table: the fitter's schema.
    tables.insert(0, csv);
    let report = Report {
        json: serde_json::Value::Array(json),
        tables,
        notes,
    };
    Ok(report)
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| sig(v, 4)).unwrap_or_else(|| "-".to_string())
}

fn ns_cell(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn lock_report(rows: Vec<LockContentionRow>) -> Report {
    let mut t = Table::new([
        "table",
        "line",
        "contended",
        "total_wait_ns",
        "max_wait_ns",
        "min_wait_ns",
        "avg_wait_ns",
        "kind",
        "lock_type",
        "key",
        "name",
    ]);
    for r in &rows {
        let (kind, lock_type, key, name) = match &r.target {
            LockTarget::Caller { lock_type, caller } => {
                ("caller", lock_type.clone(), String::new(), caller.clone())
            }
            LockTarget::Address {
                address,
                symbol,
                lock_type,
            } => (
                "address",
                lock_type.clone().unwrap_or_default(),
                address.clone(),
                symbol.clone(),
            ),
            LockTarget::Task { pid, comm } => {
                ("task", String::new(), pid.to_string(), comm.clone())
            }
            LockTarget::Cgroup { name } => ("cgroup", String::new(), String::new(), name.clone()),
        };
        t.push([
            r.table.to_string(),
            r.line.to_string(),
            r.contended.to_string(),
            ns_cell(r.total_wait.ns),
            ns_cell(r.max_wait.ns),
            r.min_wait
                .as_ref()
                .map(|w| ns_cell(w.ns))
                .unwrap_or_default(),
            ns_cell(r.avg_wait.ns),
            kind.to_string(),
            lock_type,
            key,
            name,
        ]);
    }
    let tables_n = rows.last().map(|r| r.table).unwrap_or(0);
    Report {
        json: serde_json::to_value(&rows).unwrap_or(serde_json::Value::Null),
        tables: vec![t],
        notes: vec![format!(
            "{} rows in {} table(s); times converted exactly from the printed decimals (2 decimals in their unit).",
            rows.len(),
            tables_n
        )],
    }
}
