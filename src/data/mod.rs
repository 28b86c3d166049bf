//! Measured tables from the five seed threads, compiled in (see `data/README.md`).
//!
//! Every table of numbers printed in the seed threads (`shared/seeds/000..004`) is transcribed
//! into one CSV file under `data/`, with a header row whose column names carry their units.
//! The files are compiled into the library with `include_str!`; [`catalogue`](mod@catalogue)
//! lists them and the typed loaders ([`histograms_000`], [`memcg_001`], [`numa_stat_002`], [`perf_lock_003`],
//! [`shell8_score_003`], [`netperf_004`], [`hardware_facts`]) parse them with the `csv` crate and
//! serde. A parse error names the file, the 1-based line and the column.
//!
//! Values are transcribed as printed, slips included; `data/README.md` lists the known slips
//! (the 40 MiB / 12288 pages sentence of thread 004; the funclatency bucket sums of thread 000
//! that fall a few samples short of the printed `count`).
//!
//! This module also holds the reusable [`Histogram`] type (contiguous or gapped, usually log2,
//! buckets with inclusive integer bounds in ns) used for measured and predicted latency
//! distributions.

use serde::de::DeserializeOwned;
use serde::Deserialize;

pub mod catalogue;

use crate::error::{Error, Result};

pub use catalogue::{TableInfo, TABLES};

/// Every compiled-in table, in thread order.
pub fn catalogue() -> Vec<TableInfo> {
    TABLES.to_vec()
}

/// A compiled-in table by name (file stem, with or without `.csv` and a leading `data/`), or by
/// a prefix that names exactly one table (`004_netperf` for `004_netperf_pcp_high`; a prefix
/// also matches after a table's folder, `halbuer` for `literature/halbuer_...`). An exact name
/// always wins; a prefix that fits several tables is an error listing them.
pub fn table(name: &str) -> Result<TableInfo> {
    let stem = name.strip_suffix(".csv").unwrap_or(name);
    let stem = stem.strip_prefix("data/").unwrap_or(stem);
    if let Some(t) = TABLES.iter().find(|t| t.name == stem) {
        return Ok(*t);
    }
    let matches: Vec<TableInfo> = if stem.is_empty() {
        Vec::new()
    } else {
        TABLES
            .iter()
            .filter(|t| {
                let base = t.name.rsplit('/').next().unwrap_or(t.name);
                t.name.starts_with(stem) || base.starts_with(stem)
            })
            .copied()
            .collect()
    };
    match matches.len() {
        1 => Ok(matches[0]),
        0 => Err(Error::Unknown {
            kind: "table",
            name: name.to_string(),
            hint: format!(
                ": tables are {}",
                TABLES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ),
        }),
        _ => Err(Error::Unsupported(format!(
            "table name '{name}' is ambiguous: it begins {} tables ({}); give more of the name",
            matches.len(),
            matches
                .iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

pub(crate) fn reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::None)
        .from_reader(text.as_bytes())
}

/// Converts a csv error into [`Error::Parse`] naming file, line and column.
pub(crate) fn csv_error(file: &str, e: &csv::Error, headers: Option<&csv::StringRecord>) -> Error {
    match e.kind() {
        csv::ErrorKind::Deserialize { pos, err } => {
            let line = pos.as_ref().map(|p| p.line() as usize).unwrap_or(0);
            let field = err
                .field()
                .and_then(|i| headers.and_then(|h| h.get(i as usize)))
                .map(str::to_string)
                .or_else(|| err.field().map(|i| format!("column {}", i + 1)))
                .unwrap_or_else(|| "record".to_string());
            Error::parse(file, line, field, err.kind().to_string())
        }
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => Error::parse(
            file,
            pos.as_ref().map(|p| p.line() as usize).unwrap_or(0),
            "record",
            format!("{len} fields where the header has {expected_len}"),
        ),
        _ => Error::parse(
            file,
            e.position().map(|p| p.line() as usize).unwrap_or(0),
            "record",
            e.to_string(),
        ),
    }
}

/// A record whose text spans lines: an unclosed (or stray) quote made the csv reader run a
/// cell on over the lines after it, whose rows would be lost (a trimming reader even hides
/// the line breaks inside the cell). `text[start..end]` is the record as the reader consumed
/// it (blank and `#` comment lines before it are skipped here). No measurement CSV this
/// project reads has a value spanning lines, so it is an error naming the line where the
/// record starts, the column where the quote opened (counted on that line) and the data row.
pub(crate) fn refuse_multiline_record<H: AsRef<str>>(
    text: &str,
    (start, end): (u64, u64),
    headers: &[H],
    file: &str,
    line: usize,
    row: usize,
) -> Result<()> {
    let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
        return Ok(());
    };
    let Some(mut body) = text.get(start..end.min(text.len())) else {
        return Ok(());
    };
    while let Some(nl) = body.find('\n') {
        let first = &body[..nl];
        if first.trim().is_empty() || first.starts_with('#') {
            body = &body[nl + 1..];
        } else {
            break;
        }
    }
    let body = body.trim_end_matches(['\n', '\r']);
    let Some(nl) = body.find('\n') else {
        return Ok(());
    };
    let i = body[..nl].matches(',').count();
    let spans = body.matches('\n').count() + 1;
    let column = headers
        .get(i)
        .map_or_else(|| format!("column {}", i + 1), |h| h.as_ref().to_string());
    Err(Error::parse(
        file,
        line,
        column,
        format!(
            "data row {row}: a quoted value runs over {spans} lines: an unclosed quote? The rows inside it would be lost (a value cannot span lines)"
        ),
    ))
}

/// Parses CSV text with a header row into typed rows; `file` names the file in errors.
/// Each row comes with its 1-based line number.
pub fn parse_csv<T: DeserializeOwned>(text: &str, file: &str) -> Result<Vec<(usize, T)>> {
    let mut rdr = reader(text);
    let headers = rdr
        .headers()
        .map_err(|e| csv_error(file, &e, None))?
        .clone();
    let names: Vec<&str> = headers.iter().collect();
    let mut out = Vec::new();
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(csv_error(file, &e, Some(&headers))),
        }
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
        let span = (
            rec.position().map_or(0, |p| p.byte()),
            rdr.position().byte(),
        );
        refuse_multiline_record(text, span, &names, file, line, out.len() + 1)?;
        let row: T = rec
            .deserialize(Some(&headers))
            .map_err(|e| csv_error(file, &e, Some(&headers)))?;
        out.push((line, row));
    }
    Ok(out)
}

fn load<T: DeserializeOwned>(name: &str) -> Result<Vec<(usize, T)>> {
    let t = table(name)?;
    parse_csv(t.csv_text, t.file)
}

// ---------------------------------------------------------------------------------------------
// Histogram

/// One histogram bucket: samples with `lo_ns <= latency <= hi_ns` (both bounds inclusive, as
/// BCC prints them: `512 -> 1023`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    /// Smallest latency in the bucket, ns (inclusive).
    pub lo_ns: u64,
    /// Largest latency in the bucket, ns (inclusive).
    pub hi_ns: u64,
    /// Number of samples.
    pub count: u64,
}

impl Bucket {
    /// Exclusive upper bound, ns (`hi_ns + 1`), as f64 so that `u64::MAX` does not overflow.
    pub fn end_ns(&self) -> f64 {
        self.hi_ns as f64 + 1.0
    }

    /// Width of the bucket's continuous range `[lo_ns, hi_ns + 1)`, ns.
    pub fn width_ns(&self) -> f64 {
        self.end_ns() - self.lo_ns as f64
    }

    /// Midpoint of `[lo_ns, hi_ns + 1)`, ns: 768 for `512 -> 1023`.
    pub fn mid_ns(&self) -> f64 {
        (self.lo_ns as f64 + self.end_ns()) / 2.0
    }

    /// True for a BCC/bpftrace log2 bucket: `0 -> 1`, or `2^k -> 2^(k+1) - 1`, or the bpftrace
    /// singletons `[0]` and `[1]`.
    pub fn is_log2(&self) -> bool {
        match (self.lo_ns, self.hi_ns) {
            (0, 0) | (0, 1) | (1, 1) => true,
            (lo, hi) => lo.is_power_of_two() && lo.checked_mul(2).map(|d| d - 1) == Some(hi),
        }
    }
}

/// A latency histogram: buckets in ascending order, non-overlapping, counts as integers.
///
/// Summary statistics treat each bucket as a uniform distribution over its continuous range
/// `[lo_ns, hi_ns + 1)`: the mean uses bucket midpoints, percentiles interpolate linearly inside
/// the bucket where the cumulative count crosses the rank. For log2 buckets the midpoint mean
/// overestimates the true mean when the density falls within a bucket (it did by 8-16 % on the
/// thread-000 histograms); compare predicted and measured histograms bucket by bucket, or both
/// through the same midpoint rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Histogram {
    buckets: Vec<Bucket>,
}

impl Histogram {
    /// Builds a histogram, checking that buckets are ordered, non-overlapping, have
    /// `lo_ns <= hi_ns`, and that the total count fits in a u64. `label` names the source in
    /// errors (a bucket by its index: see [`Histogram::from_lines`] for text with lines).
    pub fn new(buckets: Vec<Bucket>, label: &str) -> Result<Histogram> {
        Histogram::checked(buckets.into_iter().map(|b| (None, b)).collect(), label)
    }

    /// [`Histogram::new`] for buckets read from text: each bucket with its 1-based line in
    /// `file`, which an error names (`file:line: field: ...`).
    pub fn from_lines(rows: Vec<(usize, Bucket)>, file: &str) -> Result<Histogram> {
        Histogram::checked(rows.into_iter().map(|(l, b)| (Some(l), b)).collect(), file)
    }

    fn checked(rows: Vec<(Option<usize>, Bucket)>, label: &str) -> Result<Histogram> {
        let fail = |i: usize, line: Option<usize>, field: &str, msg: String| match line {
            Some(l) => Error::parse(label, l, field, msg),
            None => Error::invalid(label, format!("buckets[{i}]"), msg),
        };
        let mut total: u64 = 0;
        for (i, (line, b)) in rows.iter().enumerate() {
            if b.lo_ns > b.hi_ns {
                return Err(fail(
                    i,
                    *line,
                    "bucket",
                    format!("lo_ns {} is above hi_ns {}", b.lo_ns, b.hi_ns),
                ));
            }
            if i > 0 {
                let prev = &rows[i - 1].1;
                if b.lo_ns <= prev.hi_ns {
                    return Err(fail(
                        i,
                        *line,
                        "bucket",
                        format!(
                            "bucket {} -> {} overlaps or precedes the previous bucket {} -> {}",
                            b.lo_ns, b.hi_ns, prev.lo_ns, prev.hi_ns
                        ),
                    ));
                }
            }
            total = total.checked_add(b.count).ok_or_else(|| {
                fail(
                    i,
                    *line,
                    "count",
                    format!(
                        "the counts up to this bucket sum beyond {} (u64): no histogram holds that many samples",
                        u64::MAX
                    ),
                )
            })?;
        }
        Ok(Histogram {
            buckets: rows.into_iter().map(|(_, b)| b).collect(),
        })
    }

    /// The buckets, ascending.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// Consumes the histogram, returning its buckets.
    pub fn into_buckets(self) -> Vec<Bucket> {
        self.buckets
    }

    /// Sum of all bucket counts.
    pub fn total_count(&self) -> u64 {
        // Cannot overflow: checked in `new`.
        self.buckets.iter().map(|b| b.count).sum()
    }

    /// True when every bucket starts right after the previous one ends.
    pub fn is_contiguous(&self) -> bool {
        self.buckets
            .windows(2)
            .all(|w| w[0].hi_ns.checked_add(1) == Some(w[1].lo_ns))
    }

    /// True when every bucket is a log2 bucket ([`Bucket::is_log2`]).
    pub fn is_log2(&self) -> bool {
        self.buckets.iter().all(Bucket::is_log2)
    }

    /// Fraction of samples in each bucket (all zero for an empty histogram).
    pub fn fractions(&self) -> Vec<f64> {
        let n = self.total_count();
        self.buckets
            .iter()
            .map(|b| {
                if n == 0 {
                    0.0
                } else {
                    b.count as f64 / n as f64
                }
            })
            .collect()
    }

    /// Mean latency from bucket midpoints, ns; `None` when there are no samples.
    pub fn mean_ns(&self) -> Option<f64> {
        let n = self.total_count();
        if n == 0 {
            return None;
        }
        let s: f64 = self
            .buckets
            .iter()
            .map(|b| b.mid_ns() * b.count as f64)
            .sum();
        Some(s / n as f64)
    }

    /// The `p`-th percentile (0..=100) in ns, interpolating linearly within the bucket where the
    /// cumulative count reaches `p/100 * total`. `None` when there are no samples or `p` is
    /// outside 0..=100.
    pub fn percentile_ns(&self, p: f64) -> Option<f64> {
        let n = self.total_count();
        if n == 0 || !(0.0..=100.0).contains(&p) {
            return None;
        }
        let rank = p / 100.0 * n as f64;
        let mut cum = 0.0;
        let mut last_nonzero = None;
        for b in &self.buckets {
            if b.count == 0 {
                continue;
            }
            let c = b.count as f64;
            if cum + c >= rank {
                let frac = ((rank - cum) / c).clamp(0.0, 1.0);
                return Some(b.lo_ns as f64 + frac * b.width_ns());
            }
            cum += c;
            last_nonzero = Some(b);
        }
        last_nonzero.map(Bucket::end_ns)
    }

    /// The bucket with the most samples (the first one on a tie); `None` when there are no
    /// samples.
    pub fn mode_bucket(&self) -> Option<&Bucket> {
        let mut best: Option<&Bucket> = None;
        for b in &self.buckets {
            let better = match best {
                None => b.count > 0,
                Some(m) => b.count > m.count,
            };
            if better {
                best = Some(b);
            }
        }
        best
    }

    /// The histogram as CSV text `lo_ns,hi_ns,count` (the schema `pcpmodel import` prints and
    /// [`Histogram::from_csv`] reads).
    pub fn to_csv(&self) -> String {
        let mut s = String::from("lo_ns,hi_ns,count\n");
        for b in &self.buckets {
            s.push_str(&format!("{},{},{}\n", b.lo_ns, b.hi_ns, b.count));
        }
        s
    }

    /// Reads a histogram from CSV text with header `lo_ns,hi_ns,count`; `file` names the file
    /// in errors.
    pub fn from_csv(text: &str, file: &str) -> Result<Histogram> {
        Histogram::from_lines(parse_csv(text, file)?, file)
    }
}

// ---------------------------------------------------------------------------------------------
// Thread 000: funclatency histograms of rmqueue_bulk()

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Summary000Row {
    case: String,
    machine: String,
    cpu_model: String,
    numa_nodes_used: u32,
    cpuset_node0_only: bool,
    pcp_batch_scale_max: u32,
    processes: u32,
    mmap_bytes: u64,
    duration_s: u64,
    avg_ns: u64,
    total_ns: u64,
    count: u64,
    histogram_table: String,
    comment: String,
}

/// One funclatency run of thread 000: `funclatency -T -i 600 rmqueue_bulk` while 10 processes
/// loop mmap(6 GiB) / fill / munmap.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram000 {
    /// Case name, e.g. `epyc-7w83_1node_scale5`.
    pub case: String,
    /// Machine name (`epyc-7w83`, `xeon-8260`).
    pub machine: String,
    /// CPU model string as printed.
    pub cpu_model: String,
    /// NUMA nodes the workload ran on.
    pub nodes: u32,
    /// True when the workload was restricted to node 0 with a cpuset cgroup.
    pub cpuset_node0_only: bool,
    /// `vm.pcp_batch_scale_max` (CONFIG_PCP_BATCH_SCALE_MAX): 5 (default) or 0.
    pub scale_max: u32,
    /// Parallel workload processes (10).
    pub processes: u32,
    /// Bytes each process maps, fills and unmaps per loop (6 GiB).
    pub mmap_bytes: u64,
    /// Measurement interval, s (`-i 600`).
    pub duration_s: u64,
    /// Printed `avg`, ns (funclatency prints `total / count` truncated).
    pub avg_ns: u64,
    /// Printed `total`, ns.
    pub total_ns: u64,
    /// Printed `count` (may exceed the bucket sum by a few; see data/README.md).
    pub count: u64,
    /// Name of the bucket table in [`TABLES`].
    pub histogram_table: String,
    /// The author's sentence after the histogram, verbatim.
    pub comment: String,
    /// The buckets (every printed row, zero buckets included).
    pub histogram: Histogram,
}

/// The five rmqueue_bulk() histograms of thread 000, in the order printed.
pub fn histograms_000() -> Result<Vec<Histogram000>> {
    let summary: Vec<(usize, Summary000Row)> = load("000_funclatency_summary")?;
    let mut out = Vec::with_capacity(summary.len());
    for (line, r) in summary {
        let t = table(&r.histogram_table).map_err(|e| {
            Error::parse(
                "data/000_funclatency_summary.csv",
                line,
                "histogram_table",
                e.to_string(),
            )
        })?;
        let histogram = Histogram::from_csv(t.csv_text, t.file)?;
        out.push(Histogram000 {
            case: r.case,
            machine: r.machine,
            cpu_model: r.cpu_model,
            nodes: r.numa_nodes_used,
            cpuset_node0_only: r.cpuset_node0_only,
            scale_max: r.pcp_batch_scale_max,
            processes: r.processes,
            mmap_bytes: r.mmap_bytes,
            duration_s: r.duration_s,
            avg_ns: r.avg_ns,
            total_ns: r.total_ns,
            count: r.count,
            histogram_table: r.histogram_table,
            comment: r.comment,
            histogram,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Thread 001: memcg charge batch

/// One netperf run of thread 001 (36 × `netperf -t TCP_SENDFILE -- -m 10K` on 72 CPUs, three
/// cgroup levels).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemcgPoint {
    /// Machine name (`memcg-72cpu`).
    pub machine: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Parallel netperf instances.
    pub netperf_instances: u32,
    /// Depth of the cgroup hierarchy the workload ran in.
    pub cgroup_levels: u32,
    /// Kernel as printed (`6.0-rc1`, `6.0-rc1 + patch`).
    pub kernel: String,
    /// MEMCG_CHARGE_BATCH, pages.
    pub memcg_charge_batch_pages: u32,
    /// Average netperf throughput, Mbit/s.
    pub throughput_mbps: f64,
    /// Improvement over the baseline as stated in the thread, percent (on the patched row).
    pub stated_improvement_pct: Option<f64>,
    /// Row label as printed.
    pub label: String,
}

/// The two netperf throughputs of thread 001.
pub fn memcg_001() -> Result<Vec<MemcgPoint>> {
    Ok(strip_lines(load("001_memcg_charge_batch")?))
}

// ---------------------------------------------------------------------------------------------
// Thread 002: numa_stat

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NumaStatRow {
    machine: String,
    benchmark: String,
    threads: u32,
    numa_stat: u8,
    cycles_per_page: f64,
    stated_drop_pct: Option<f64>,
}

/// Cycles per page allocation + free in thread 002 (Jesper Brouer's page_bench).
#[derive(Debug, Clone, PartialEq)]
pub struct NumaStatPoint {
    /// Machine name (`broadwell-2s`).
    pub machine: String,
    /// `page_bench01` (1 thread) or `page_bench03` (88 threads).
    pub benchmark: String,
    /// Benchmark threads.
    pub threads: u32,
    /// `vm.numa_stat` setting: true = 1 (counters updated), false = 0.
    pub numa_stat: bool,
    /// CPU cycles per page allocated and freed.
    pub cycles_per_page: f64,
    /// Drop versus numa_stat=1 as stated in the thread, percent (on the numa_stat=0 rows).
    pub stated_drop_pct: Option<f64>,
}

/// The four cycles-per-page numbers of thread 002.
pub fn numa_stat_002() -> Result<Vec<NumaStatPoint>> {
    let file = "data/002_numa_stat_cycles.csv";
    load::<NumaStatRow>("002_numa_stat_cycles")?
        .into_iter()
        .map(|(line, r)| {
            let numa_stat = match r.numa_stat {
                0 => false,
                1 => true,
                v => {
                    return Err(Error::parse(
                        file,
                        line,
                        "numa_stat",
                        format!("{v} is not 0 or 1"),
                    ))
                }
            };
            Ok(NumaStatPoint {
                machine: r.machine,
                benchmark: r.benchmark,
                threads: r.threads,
                numa_stat,
                cycles_per_page: r.cycles_per_page,
                stated_drop_pct: r.stated_drop_pct,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Thread 003: perf lock contention

/// One `perf lock contention` row of thread 003. Wait times are kept both as printed
/// (`4.64 ms`) and converted to ns (4640000): the printed value has two decimals in its unit,
/// so the ns value is exact to the print, not to the measurement.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfLockRow {
    /// Machine name (`kunpeng-920`; the thread does not name the machine).
    pub machine: String,
    /// `page_fault1` (will-it-scale, 90 tasks, 64K mTHP) or `shell8` (unixbench).
    pub workload: String,
    /// False: without the patches; true: with high-order pages on the PCP lists.
    pub patched: bool,
    /// 1-based row within the (workload, patched) table, in printed order.
    pub row: u32,
    /// Contended acquisitions.
    pub contended: u64,
    /// Total wait as printed.
    pub total_wait_text: String,
    /// Total wait, ns.
    pub total_wait_ns: f64,
    /// Maximum wait as printed.
    pub max_wait_text: String,
    /// Maximum wait, ns.
    pub max_wait_ns: f64,
    /// Average wait as printed.
    pub avg_wait_text: String,
    /// Average wait, ns.
    pub avg_wait_ns: f64,
    /// Lock type as printed (`spinlock`).
    pub lock_type: String,
    /// Caller symbol+offset as printed (QP soft breaks joined).
    pub caller: String,
}

/// The seven perf lock contention rows of thread 003.
pub fn perf_lock_003() -> Result<Vec<PerfLockRow>> {
    Ok(strip_lines(load("003_perf_lock")?))
}

/// A change stated in a thread without the underlying numbers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatedChange {
    /// Machine name.
    pub machine: String,
    /// Benchmark as named in the thread.
    pub benchmark: String,
    /// What was compared.
    pub metric: String,
    /// Stated improvement, percent.
    pub stated_improvement_pct: f64,
    /// The sentence, verbatim.
    pub quote: String,
}

/// The stated shell8 score improvement (0.28 %) of thread 003.
pub fn shell8_score_003() -> Result<Vec<StatedChange>> {
    Ok(strip_lines(load("003_shell8_score")?))
}

// ---------------------------------------------------------------------------------------------
// Thread 004: netperf vs pcp->high

/// One netperf score at a forced pcp->high in thread 004.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetperfPoint {
    /// Machine name (`icelake-server`, `skylake-desktop`).
    pub machine: String,
    /// pcp->high, pages.
    #[serde(rename = "pcp_high_pages")]
    pub high_pages: u64,
    /// netperf score as printed (higher is better; the thread's metric is
    /// netperf.Throughput_Mbps).
    pub score: f64,
    /// The pcp->high cell as printed, e.g. `6144(1/2 llc)`.
    pub high_label: String,
    /// The author's note after the score, verbatim, if any.
    pub annotation: Option<String>,
}

/// The regression of thread 004's subject line.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionPoint {
    /// Machine name.
    pub machine: String,
    /// Commit that changed the behaviour.
    pub commit: String,
    /// The benchmark metric.
    pub metric: String,
    /// Change of the metric, after vs before, percent.
    pub change_pct: f64,
    /// What "before" is.
    pub before: String,
    /// What "after" is.
    pub after: String,
    /// Verbatim source.
    pub quote: String,
}

/// The regression reported in thread 004's subject line (one row).
pub fn regression_004() -> Result<Vec<RegressionPoint>> {
    Ok(strip_lines(load("004_regression")?))
}

/// One run of the v2 cover letter of thread 001's series.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverLetterRun {
    /// Row number as printed (1-6).
    pub run: u32,
    /// Which page_counter code ran: `root` (no charging), `rc1`, `fewer_atomics` (patch A),
    /// `split_layout` (patch B), `both` (A and B).
    pub page_counter_code: String,
    /// MEMCG_CHARGE_BATCH, pages (64 with patch C).
    pub memcg_charge_batch_pages: u32,
    /// Average netperf throughput per instance, Mbit/s.
    pub throughput_mbps: f64,
    /// Change vs the root memcg as printed, percent.
    pub change_vs_root_pct: Option<f64>,
    /// The printed row, verbatim.
    pub quote: String,
}

/// The six runs of the v2 cover letter of thread 001's series.
pub fn memcg_cover_letter_001() -> Result<Vec<CoverLetterRun>> {
    Ok(strip_lines(load("001_memcg_cover_letter_v2")?))
}

/// The ten netperf points of thread 004.
pub fn netperf_004() -> Result<Vec<NetperfPoint>> {
    Ok(strip_lines(load("004_netperf_pcp_high")?))
}

// ---------------------------------------------------------------------------------------------
// Hardware facts

/// A hardware or setup fact stated in a thread.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareFact {
    /// Seed thread (`000`..`004`).
    pub thread: String,
    /// Machine name; `None` for a statement about every machine of the thread or none.
    pub machine: Option<String>,
    /// What the fact is about (`l2_size`, `c2c_latency`, `cpus`, ...).
    pub fact: String,
    /// The value as text (numbers in plain decimal; see [`HardwareFact::number`]).
    pub value: String,
    /// Unit of `value` (`pages`, `MiB`, `ns`, `cpus`, `text`, ...).
    pub unit: String,
    /// `=` exact, `~` approximate, `>=` at least (as in "80+ns").
    pub relation: String,
    /// The sentence the fact comes from, verbatim (QP decoded).
    pub quote: String,
    /// Reading notes: interpretation of units, known slips.
    pub note: Option<String>,
}

impl HardwareFact {
    /// The value as a number, when it is one.
    pub fn number(&self) -> Option<f64> {
        self.value.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// The value in bytes, for sizes (`bytes`, `KiB`, `MiB`, `GiB`, `pages` of 4 KiB,
    /// `order-3 pages` of 32 KiB); `None` otherwise.
    pub fn size_bytes(&self) -> Option<f64> {
        let per: f64 = match self.unit.as_str() {
            "bytes" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "pages" => 4096.0,
            "order-3 pages" => 8.0 * 4096.0,
            _ => return None,
        };
        self.number().map(|v| v * per)
    }

    /// True when the note marks the value as a slip in the source.
    pub fn is_slip(&self) -> bool {
        self.note.as_deref().is_some_and(|n| n.starts_with("slip"))
    }
}

/// Every hardware/setup fact stated in the five threads.
pub fn hardware_facts() -> Result<Vec<HardwareFact>> {
    Ok(strip_lines(load("hardware_facts")?))
}

fn strip_lines<T>(rows: Vec<(usize, T)>) -> Vec<T> {
    rows.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn h(b: &[(u64, u64, u64)]) -> Histogram {
        Histogram::new(
            b.iter()
                .map(|&(lo_ns, hi_ns, count)| Bucket {
                    lo_ns,
                    hi_ns,
                    count,
                })
                .collect(),
            "test",
        )
        .expect("valid test histogram")
    }

    #[test]
    fn every_table_parses_and_has_rows() {
        for t in catalogue() {
            assert!(t.row_count().expect("parses") > 0, "{}", t.name);
            assert!(t.to_json().expect("json").is_array());
        }
    }

    #[test]
    fn histogram_statistics() {
        let x = h(&[(0, 1, 0), (2, 3, 2), (4, 7, 2)]);
        assert_eq!(x.total_count(), 4);
        assert!(x.is_contiguous() && x.is_log2());
        // midpoints 3 and 6
        assert_relative_eq!(x.mean_ns().expect("mean"), 4.5);
        // median: rank 2 reached at the end of bucket [2,4)
        assert_relative_eq!(x.percentile_ns(50.0).expect("p50"), 4.0);
        assert_relative_eq!(x.percentile_ns(75.0).expect("p75"), 6.0);
        assert_relative_eq!(x.percentile_ns(100.0).expect("p100"), 8.0);
        assert_relative_eq!(x.percentile_ns(0.0).expect("p0"), 2.0);
        assert_eq!(x.mode_bucket().map(|b| b.lo_ns), Some(2));
        assert!(x.percentile_ns(101.0).is_none());
        assert!(h(&[(0, 1, 0)]).mean_ns().is_none());
    }

    #[test]
    fn histogram_rejects_overlap_and_inverted() {
        let b = |lo_ns, hi_ns| Bucket {
            lo_ns,
            hi_ns,
            count: 1,
        };
        assert!(Histogram::new(vec![b(0, 3), b(3, 7)], "t").is_err());
        assert!(Histogram::new(vec![b(4, 3)], "t").is_err());
        let e = Histogram::new(
            vec![
                Bucket {
                    lo_ns: 0,
                    hi_ns: 1,
                    count: u64::MAX,
                },
                b(2, 3),
            ],
            "t",
        );
        assert!(e.is_err());
    }

    #[test]
    fn csv_errors_name_file_line_and_column() {
        let e = Histogram::from_csv("lo_ns,hi_ns,count\n0,1,5\n2,x,4\n", "h.csv")
            .expect_err("bad cell");
        let s = e.to_string();
        assert!(s.starts_with("h.csv:3: hi_ns:"), "{s}");
        let e = Histogram::from_csv("lo_ns,hi_ns,count\n0,1\n", "h.csv").expect_err("short");
        assert!(e.to_string().starts_with("h.csv:2:"), "{e}");
    }

    #[test]
    fn unknown_table_lists_names() {
        let e = table("nope").expect_err("unknown");
        assert!(e.to_string().contains("004_netperf_pcp_high"));
        assert!(table("data/004_netperf_pcp_high.csv").is_ok());
    }
}
