//! The PCP flow level of the host loop: a kmem tracepoint trace of an AF_UNIX stream pair
//! (`tools/trace_pcp_flow.py --json`: allocations and frees by order, refill and drain calls
//! with their sizes, the pagesets before the run) beside the model's kernel rules
//! ([`crate::kernel::ops::PcpState`] stepped by [`crate::model::autotune::PairFlow`]) run over
//! the same flow: the same kernel version, the pageset limits the trace recorded, the frag
//! orders the kernel allocates for the write size ([`crate::kernel::skb`]) and the host's pace.
//! Nothing is fitted: every row is a blind prediction of what the real kernel did.
//!
//! The zone compared is the one the writer's allocations come from: `Normal` of the writer's
//! node, else `DMA32` (unmovable allocations take the highest zone that has memory; `Movable`
//! serves only movable ones). The model starts with empty lists and records after a warm-up,
//! so it compares steady states; the trace starts wherever the host's lists were.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::kernel::ops::PcpState;
use crate::kernel::pageset::{PcpHigh, PcpLimits};
use crate::kernel::skb::{SNDBUF_MAX, SOCK_MIN_SNDBUF};
use crate::kernel::version::KernelVersion;
use crate::model::autotune::PairFlow;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pageset {
    count: u64,
    high: u64,
    batch: u64,
    high_min: Option<u64>,
    high_max: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct ZonePagesets {
    managed: u64,
    cpus: BTreeMap<String, Pageset>,
}

#[derive(Debug, Deserialize)]
struct Runs {
    pages: u64,
    runs: u64,
}

#[derive(Debug, Default, Deserialize)]
struct PageRuns {
    alloc: Option<Runs>,
}

#[derive(Debug, Deserialize)]
struct CpuTrace {
    events: BTreeMap<String, u64>,
    /// Runs of allocations and of frees on the CPU (base pages), where the trace has them.
    #[serde(default)]
    page_runs: PageRuns,
    drain_pages_per_call: Vec<(u64, u64)>,
    refill_pages_per_call: Vec<(u64, u64)>,
}

#[derive(Debug, Deserialize)]
struct TraceFile {
    writes: u64,
    write_bytes: u64,
    seconds: f64,
    writer_cpu: u32,
    reader_cpu: u32,
    writer_node: u32,
    wmem_default: u64,
    kernel: String,
    #[serde(default)]
    command: Vec<String>,
    /// `udp` for a UDP stream (`trace_pcp_flow.py --udp`); absent for the AF_UNIX pair.
    #[serde(default)]
    flow: Option<String>,
    /// Payload bytes moved (UDP: the datagrams' payload).
    #[serde(default)]
    bytes: Option<u64>,
    pagesets_before: BTreeMap<String, ZonePagesets>,
    cpus: BTreeMap<String, CpuTrace>,
}

/// One compared quantity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRow {
    /// What is compared.
    pub quantity: String,
    /// Its unit.
    pub unit: String,
    /// The host kernel's value (from the trace).
    pub host: f64,
    /// The model's value.
    pub model: f64,
    /// (model - host) / host, %; None when the host's value is 0.
    pub error_pct: Option<f64>,
    /// The model's steady state (empty lists, a long run, the first quarter not recorded),
    /// where it differs in kind from the replay of the traced span.
    pub steady_state: Option<f64>,
}

/// The trace beside the model.
#[derive(Debug, Clone, Serialize)]
pub struct TraceComparison {
    /// Kernel version the trace was taken on (and the model ran).
    pub kernel: String,
    /// Zone compared (`node/zone`).
    pub zone: String,
    /// The reader's pageset limits the model was given, in words.
    pub limits: String,
    /// Orders of the frags one write allocates.
    pub write_orders: Vec<u8>,
    /// Writes in the trace.
    pub writes: u64,
    /// Compared quantities.
    pub rows: Vec<TraceRow>,
    /// What to keep in mind.
    pub notes: Vec<String>,
}

/// The fastest a socket pair could move payload, bytes per second (a bound, not a measurement).
const MAX_BYTES_PER_S: f64 = 1e13;
/// Blocks simulated at most (10^7 writes of lmbench's 4 frags: 120 s at 12 us a write), so
/// that large writes (many frags each) take no longer than small ones.
const MAX_SIM_BLOCKS: f64 = 4e7;

fn positive(label: &str, field: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::invalid(
            label,
            field,
            format!("must be > 0, got {v}"),
        ))
    }
}

/// A page count of the pageset, checked against its range (all of them fit a u32).
fn pages_in(label: &str, field: String, v: u64, range: crate::bounds::Range) -> Result<u32> {
    match range.problem(v as f64) {
        Some(msg) => Err(Error::invalid(label, field, msg)),
        None => Ok(v as u32),
    }
}

/// The zone the writer's frags come from (`node/zone`), its pagesets, the reader's pageset and
/// the limits the model is given (the reader's, for both pagesets).
fn reader_limits<'a>(
    t: &'a TraceFile,
    kernel: KernelVersion,
    label: &str,
) -> Result<(String, &'a ZonePagesets, &'a Pageset, PcpLimits)> {
    let (zone, pagesets) = ["Normal", "DMA32"]
        .iter()
        .find_map(|z| {
            let key = format!("{}/{z}", t.writer_node);
            t.pagesets_before.get(&key).map(|p| (key, p))
        })
        .ok_or_else(|| {
            Error::invalid(
                label,
                "pagesets_before",
                format!(
                    "no Normal or DMA32 zone of node {} (the writer's)",
                    t.writer_node
                ),
            )
        })?;
    let base = format!("pagesets_before.{zone}.cpus.{}", t.reader_cpu);
    let reader = pagesets
        .cpus
        .get(&t.reader_cpu.to_string())
        .ok_or_else(|| Error::invalid(label, &base, "missing"))?;
    let field = |name: &str| format!("{base}.{name}");
    let batch = pages_in(
        label,
        field("batch"),
        reader.batch,
        crate::bounds::PCP_BATCH_PAGES,
    )?;
    let high_pages = |v: Option<u64>, name: &str| -> Result<u32> {
        let v = v.ok_or_else(|| Error::invalid(label, field(name), "missing: 6.7+ prints it"))?;
        pages_in(label, field(name), v, crate::bounds::PCP_HIGH_PAGES)
    };
    let high = if kernel.era().auto_tunes_high() {
        let lo = high_pages(reader.high_min, "high_min")?;
        let hi = high_pages(reader.high_max, "high_max")?;
        if lo > hi {
            return Err(Error::invalid(
                label,
                field("high_min"),
                format!("{lo} pages is above high_max {hi}: the kernel keeps high_min <= high_max (zone_set_pageset_high_and_batch())"),
            ));
        }
        PcpHigh::AutoTuned {
            high_min_pages: lo,
            high_max_pages: hi,
        }
    } else {
        PcpHigh::Fixed {
            high_pages: high_pages(Some(reader.high), "high")?,
        }
    };
    let limits = PcpLimits {
        batch_pages: batch,
        high,
    };
    Ok((zone, pagesets, reader, limits))
}

/// The last object key before `line`:`column` (1-based) of `text`: the field whose value a
/// JSON error points into (serde_json names the position, not the field).
fn key_before(text: &str, line: usize, column: usize) -> Option<&str> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let end = (start + column).min(text.len());
    let head = text.get(..end)?;
    let colon = head.rfind("\":")?;
    let open = head[..colon].rfind('"')?;
    let key = &head[open + 1..colon];
    (!key.is_empty() && key.len() < 64).then_some(key)
}

/// The traced flow: an AF_UNIX pair or a UDP stream.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Traced {
    AfUnix,
    Udp,
}

impl Traced {
    fn of(t: &TraceFile, label: &str) -> Result<Traced> {
        match t.flow.as_deref() {
            None | Some("af-unix") | Some("af_unix") | Some("unix") => Ok(Traced::AfUnix),
            Some("udp") => Ok(Traced::Udp),
            Some(other) => Err(Error::invalid(
                label,
                "flow",
                format!(
                    "'{other}': the comparison knows the AF_UNIX pair (no flow field) and `udp`"
                ),
            )),
        }
    }

    /// What one message is, and the two CPUs' names.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Traced::AfUnix => ("write", "writer", "reader"),
            Traced::Udp => ("datagram", "sender", "receiver"),
        }
    }
}

/// The run's own fields: an AF_UNIX pair (not a command), its writes, duration, write size,
/// rate and send buffer within what a host can do; returns the writes and seconds.
fn check_run(t: &TraceFile, label: &str) -> Result<(f64, f64)> {
    if !t.command.is_empty() {
        return Err(Error::invalid(
            label,
            "command",
            format!(
                "the trace ran `{}`, not the AF_UNIX pair: only the pair's flow has a model to compare with",
                t.command.join(" ")
            ),
        ));
    }
    let writes = positive(label, "writes", t.writes as f64)?;
    let seconds = positive(label, "seconds", t.seconds)?;
    if seconds > 3600.0 {
        return Err(Error::invalid(
            label,
            "seconds",
            format!("{seconds} s: a trace of the kmem events fills any buffer within minutes"),
        ));
    }
    if let Some(msg) =
        crate::workload::kinds::producer_consumer::AF_UNIX_WRITE_BYTES.problem(t.write_bytes as f64)
    {
        return Err(Error::invalid(label, "write_bytes", msg));
    }
    // The UDP comparison reads the datagram size from the bytes moved.
    if let (Some(b), Some("udp")) = (t.bytes, t.flow.as_deref()) {
        if b > t.writes.saturating_mul(t.write_bytes) {
            return Err(Error::invalid(
                label,
                "bytes",
                format!(
                    "{b} B is more than {} writes of {} B can move",
                    t.writes, t.write_bytes
                ),
            ));
        }
    }
    // A write copies its bytes twice (in and out): no host moves 10 TB/s through a socket.
    let rate = writes * t.write_bytes as f64 / seconds;
    if rate > MAX_BYTES_PER_S {
        return Err(Error::invalid(
            label,
            "writes",
            format!(
                "{} writes of {} B in {seconds} s is {} GB/s: beyond any memory copy ({} GB/s)",
                t.writes,
                t.write_bytes,
                crate::report::sig(rate / 1e9, 3),
                MAX_BYTES_PER_S / 1e9
            ),
        ));
    }
    if !(SOCK_MIN_SNDBUF..=SNDBUF_MAX).contains(&t.wmem_default) {
        return Err(Error::invalid(
            label,
            "wmem_default",
            format!(
                "{} B is outside {SOCK_MIN_SNDBUF}..={SNDBUF_MAX} B: SOCK_MIN_SNDBUF and INT_MAX bound a send buffer",
                t.wmem_default
            ),
        ));
    }
    Ok((writes, seconds))
}

/// Reads a trace (`label` names it in errors) and compares it with the model.
pub fn compare_trace(text: &str, label: &str) -> Result<TraceComparison> {
    let t: TraceFile = serde_json::from_str(text).map_err(|e| {
        Error::parse(
            label,
            e.line(),
            key_before(text, e.line(), e.column()).unwrap_or("trace JSON"),
            format!(
                "{e} (expected the output of tools/trace_pcp_flow.py --json with an AF_UNIX pair)"
            ),
        )
    })?;
    let (writes, seconds) = check_run(&t, label)?;
    let kernel = KernelVersion::parse_release_labeled(&t.kernel, label)?;
    if !kernel.era().auto_tunes_high() && kernel < KernelVersion::new(5, 14) {
        return Err(Error::Unsupported(format!(
            "{label}: kernel {kernel}: the trace comparison follows the PCP rules of 5.14 and later (split high, free_high, auto-tuning)"
        )));
    }
    let (zone, pagesets, reader, limits) = reader_limits(&t, kernel, label)?;
    let traced = Traced::of(&t, label)?;
    let writer_ps = pagesets
        .cpus
        .get(&t.writer_cpu.to_string())
        .ok_or_else(|| {
            Error::invalid(
                label,
                format!("pagesets_before.{zone}.cpus.{}", t.writer_cpu),
                "missing",
            )
        })?;
    let (msg, wname, rname) = traced.words();
    // Blocks per message, and the orders of one message's blocks in the kernel's order. A UDP
    // datagram takes a fractional number of the socket's 32 KiB frag pages: the model's
    // message is then one block, scaled back per datagram.
    let (orders, blocks_per_msg) = match traced {
        Traced::AfUnix => {
            let o = crate::kernel::skb::unix_stream_write_orders(t.write_bytes, t.wmem_default);
            let n = o.len() as f64;
            (o, n)
        }
        Traced::Udp => {
            let payload = t
                .bytes
                .map_or(t.write_bytes, |b| b / t.writes.max(1))
                .min(crate::measure::pcp::UDP_PAYLOAD as u64);
            let pages = crate::kernel::skb::udp_datagram_frag_pages(payload);
            if pages <= 0.0 {
                return Err(Error::invalid(
                    label,
                    "bytes",
                    format!("{payload} B datagrams are copied into the skb's linear part: no page allocation to compare"),
                ));
            }
            (vec![crate::kernel::skb::SKB_FRAG_PAGE_ORDER], pages)
        }
    };
    if orders.is_empty() {
        return Err(Error::invalid(
            label,
            "write_bytes",
            format!(
                "{} B writes allocate no page: with a {} B send buffer (wmem_default) each skb carries at most (sndbuf / 2 - 64) B, which fits its linear part (kmalloc); nothing to compare",
                t.write_bytes, t.wmem_default
            ),
        ));
    }
    let cpu = |c: u32| {
        t.cpus
            .get(&c.to_string())
            .ok_or_else(|| Error::invalid(label, format!("cpus.{c}"), "missing"))
    };
    let (wc, rc) = (cpu(t.writer_cpu)?, cpu(t.reader_cpu)?);
    // Who frees and what the reader allocates are flow facts the trace measured: the blocks
    // of the flow's largest order freed on the writer's CPU (the network stack handing skbs
    // back, datagrams dropped in the sender's softirq), and the reader's own order-0
    // allocations per block it frees.
    let top = orders.iter().copied().max().unwrap_or(0);
    let count = |c: &CpuTrace, e: &str, o: u8| {
        c.events
            .get(&format!("{e} order {o}"))
            .copied()
            .unwrap_or(0) as f64
    };
    let (w_frees, r_frees) = (
        count(wc, "mm_page_free", top),
        count(rc, "mm_page_free", top),
    );
    let writer_free_share = if w_frees + r_frees > 0.0 {
        w_frees / (w_frees + r_frees)
    } else {
        0.0
    };
    let reader_allocs_per_block = if r_frees > 0.0 && top > 0 {
        count(rc, "mm_page_alloc", 0) / r_frees
    } else {
        0.0
    };
    // The reader's allocations come in runs (the trace's page_runs): pages per run.
    let reader_alloc_burst_pages = match &rc.page_runs.alloc {
        Some(a) if a.runs > 0 && a.pages >= a.runs => a.pages as f64 / a.runs as f64,
        _ => 1.0,
    };
    let mut w = PcpState::new(kernel, limits, None)?;
    let mut r = PcpState::new(kernel, limits, None)?;
    let work_ns = seconds * 1e9 / (writes * blocks_per_msg / orders.len() as f64);
    let flow = PairFlow {
        orders: orders.clone(),
        work_ns,
        tick_ns: 1e9,
        span_ns: (120e9_f64).min(MAX_SIM_BLOCKS / orders.len() as f64 * work_ns),
        reader_allocs_per_block,
        reader_alloc_burst_pages,
        writer_free_share,
    };
    let steady = flow.run(&mut w, &mut r)?;
    // The replay: the traced span from the pagesets the trace recorded at its start (count and
    // live high of both CPUs), every event recorded.
    let (mut w, mut r) = (
        PcpState::new(kernel, limits, None)?,
        PcpState::new(kernel, limits, None)?,
    );
    // zoneinfo records a pageset's count, not its lists: the count is put on the order-0
    // list, which the flow's blocks are not allocated from. It counts toward high and drains
    // as the kernel's does; the writer's first blocks come from refills, as the traces show
    // (every order-3 allocation of the writer was refilled from the zone).
    for (st, ps) in [(&mut w, writer_ps), (&mut r, reader)] {
        st.add_pages(0, u32::try_from(ps.count).unwrap_or(u32::MAX))?;
        if kernel.era().auto_tunes_high() {
            st.high_pages = u32::try_from(ps.high)
                .unwrap_or(u32::MAX)
                .clamp(st.high_min_pages, st.high_max_pages);
        }
    }
    let replay_flow = PairFlow {
        span_ns: seconds * 1e9,
        ..flow.clone()
    };
    let tally = replay_flow.run_recording(&mut w, &mut r, 0.0)?;
    // The model's counts per message: per work unit (one `orders` list) scaled to the
    // message's blocks.
    let per_msg = orders.len() as f64 / blocks_per_msg;
    let units = tally.work_units.max(1) as f64 * per_msg;
    let steady_units = steady.work_units.max(1) as f64 * per_msg;
    let mut rows = Vec::new();
    let mut row = |quantity: String, unit: &str, host: f64, model: f64, steady: Option<f64>| {
        rows.push(TraceRow {
            quantity,
            unit: unit.into(),
            host,
            model,
            error_pct: (host != 0.0).then(|| 100.0 * (model / host - 1.0)),
            steady_state: steady,
        })
    };
    let mut distinct = orders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    for &o in distinct.iter().rev() {
        let n = orders.iter().filter(|&&x| x == o).count() as f64 * blocks_per_msg
            / orders.len() as f64;
        let freed_by_reader = if o == top {
            1.0 - writer_free_share
        } else {
            1.0
        };
        let ev = |c: &CpuTrace, e: &str| {
            c.events
                .get(&format!("{e} order {o}"))
                .copied()
                .unwrap_or(0) as f64
                / writes
        };
        row(
            format!("order-{o} allocations on the {wname}'s CPU"),
            &format!("per {msg}"),
            ev(wc, "mm_page_alloc"),
            n,
            None,
        );
        row(
            format!("order-{o} frees on the {rname}'s CPU"),
            &format!("per {msg}"),
            ev(rc, "mm_page_free"),
            n * freed_by_reader,
            None,
        );
    }
    // Refills by size: every size either side shows at least once per 10 000 writes.
    let host_refill: BTreeMap<u64, f64> = wc
        .refill_pages_per_call
        .iter()
        .map(|&(p, n)| (p, n as f64 / writes))
        .collect();
    let model_refill: BTreeMap<u64, f64> = tally
        .refill
        .iter()
        .map(|&(p, n)| (u64::from(p), n as f64 / units))
        .collect();
    let steady_refill: BTreeMap<u64, f64> = steady
        .refill
        .iter()
        .map(|&(p, n)| (u64::from(p), n as f64 / steady_units))
        .collect();
    let mut sizes: Vec<u64> = host_refill
        .iter()
        .chain(model_refill.iter())
        .filter(|(_, &v)| v >= 1e-4)
        .map(|(&p, _)| p)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    for p in sizes {
        row(
            format!("{wname}'s refills of {p} pages"),
            &format!("per {msg}"),
            host_refill.get(&p).copied().unwrap_or(0.0),
            model_refill.get(&p).copied().unwrap_or(0.0),
            Some(steady_refill.get(&p).copied().unwrap_or(0.0)),
        );
    }
    let mean = |h: &[(u64, u64)]| {
        let n: u64 = h.iter().map(|pc| pc.1).sum();
        let p: u64 = h.iter().map(|pc| pc.0 * pc.1).sum();
        (n as f64, if n > 0 { p as f64 / n as f64 } else { 0.0 })
    };
    let (hd, hd_mean) = mean(&rc.drain_pages_per_call);
    let md: Vec<(u64, u64)> = tally
        .drain
        .iter()
        .map(|&(p, n)| (u64::from(p), n))
        .collect();
    let (mdn, md_mean) = mean(&md);
    let sd: Vec<(u64, u64)> = steady
        .drain
        .iter()
        .map(|&(p, n)| (u64::from(p), n))
        .collect();
    let (sdn, sd_mean) = mean(&sd);
    row(
        format!("{rname}'s drains (zone->lock holds of free_pcppages_bulk())"),
        &format!("per {msg}"),
        hd / writes,
        mdn / units,
        Some(sdn / steady_units),
    );
    row(
        "pages per drain (mean)".into(),
        "pages",
        hd_mean,
        md_mean,
        Some(sd_mean),
    );
    let start = reader.count;
    Ok(TraceComparison {
        kernel: kernel.to_string(),
        zone: zone.clone(),
        limits: match limits.high {
            PcpHigh::AutoTuned {
                high_min_pages,
                high_max_pages,
            } => format!(
                "batch {}, high_min {high_min_pages}, high_max {high_max_pages} pages (the reader's, before the run; live high then {})",
                limits.batch_pages, reader.high
            ),
            PcpHigh::Fixed { high_pages } => {
                format!("batch {}, high {high_pages} pages", limits.batch_pages)
            }
        },
        write_orders: orders,
        writes: t.writes,
        rows,
        notes: vec![
            format!(
                "zone {zone} ({} managed pages): the {wname}'s frags come from it; the model's {wname} and {rname} pagesets get the {rname}'s limits",
                pagesets.managed
            ),
            format!(
                "measured in the trace and given to the model: {:.4} of the order-{top} blocks freed on the {wname}'s CPU, {:.4} order-0 allocations on the {rname}'s CPU per block it frees in runs of {:.1} pages{}",
                writer_free_share,
                reader_allocs_per_block,
                reader_alloc_burst_pages,
                if traced == Traced::Udp {
                    format!("; {} frag pages of 32 KiB per datagram (crate::kernel::skb::udp_datagram_frag_pages)", crate::report::sig(blocks_per_msg, 5))
                } else {
                    String::new()
                }
            ),
            format!(
                "the model replays the traced span ({seconds} s at the host's pace, {} us per {msg}) from the pagesets the trace began with (the {rname}'s list held {start} pages); the steady state starts empty and records after a quarter of a run of up to 120 s (4e7 blocks)",
                crate::report::sig(seconds * 1e6 / writes, 3)
            ),
            format!("nothing fitted: the refill and drain sizes are the kernel's rules (crate::kernel::ops) for the recorded limits, the frag orders crate::kernel::skb's for the {msg} size"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"writes": 1000, "bytes": 65536000, "write_bytes": 65536, "seconds": 0.02,
      "writer_cpu": 0, "reader_cpu": 1, "writer_node": 0, "wmem_default": 212992, "command": [],
      "kernel": "6.18.44", "overrun": {"0": 0, "1": 0},
      "pagesets_before": {"0/Normal": {"managed": 1000000, "cpus": {
        "0": {"count": 0, "high": 0, "batch": 63, "high_min": 5000, "high_max": 40000},
        "1": {"count": 0, "high": 0, "batch": 63, "high_min": 5000, "high_max": 40000}}}},
      "pagesets_after": {},
      "cpus": {"0": {"events": {"mm_page_alloc order 3": 1000}, "drain_calls": 0,
                     "drain_pages_per_call": [], "refill_calls": 143,
                     "refill_pages_per_call": [[56, 143]]},
               "1": {"events": {"mm_page_free order 3": 1000}, "drain_calls": 7,
                     "drain_pages_per_call": [[2020, 7]], "refill_calls": 0,
                     "refill_pages_per_call": []}}}"#;

    /// The model's per-write counts are the kernel's: one page of each frag order per write,
    /// refills of batch >> order blocks (56 pages of order 3, 1/7 per write).
    #[test]
    fn a_trace_is_compared_row_by_row() {
        let c = compare_trace(GOOD, "t.json").unwrap();
        assert_eq!(c.write_orders, vec![3, 2, 1, 0]);
        let r = |q: &str| c.rows.iter().find(|r| r.quantity == q).unwrap();
        assert_eq!(r("order-3 allocations on the writer's CPU").model, 1.0);
        assert_eq!(r("order-3 allocations on the writer's CPU").host, 1.0);
        let refill = r("writer's refills of 56 pages");
        assert!((refill.model - 1.0 / 7.0).abs() < 1e-3, "{refill:?}");
    }

    /// A UDP stream: datagrams of 65507 B take 65507 / 32768 frag pages of order 3 each; the
    /// share the sender frees and the receiver's allocation runs come from the trace.
    #[test]
    fn a_udp_trace_is_compared_per_datagram() {
        let udp = GOOD
            .replace("\"command\": [],", "\"command\": [], \"flow\": \"udp\",")
            .replace("\"bytes\": 65536000", "\"bytes\": 65507000")
            .replace(
                "\"0\": {\"events\": {\"mm_page_alloc order 3\": 1000}",
                "\"0\": {\"events\": {\"mm_page_alloc order 3\": 2000, \"mm_page_free order 3\": 200}",
            )
            .replace(
                "\"1\": {\"events\": {\"mm_page_free order 3\": 1000}",
                "\"1\": {\"events\": {\"mm_page_free order 3\": 1800}",
            );
        let c = compare_trace(&udp, "u.json").unwrap();
        assert_eq!(c.write_orders, vec![3]);
        let r = |q: &str| c.rows.iter().find(|r| r.quantity == q).unwrap();
        let per = 65_507.0 / 32_768.0;
        let alloc = r("order-3 allocations on the sender's CPU");
        assert!((alloc.model - per).abs() < 1e-9, "{alloc:?}");
        // 200 of 2000 blocks freed on the sender: the receiver frees 0.9 of them.
        let free = r("order-3 frees on the receiver's CPU");
        assert!((free.model - 0.9 * per).abs() < 1e-9, "{free:?}");
        assert!(
            c.notes.iter().any(|n| n.contains("0.1000")),
            "{:?}",
            c.notes
        );
        let bad = udp.replace("\"flow\": \"udp\"", "\"flow\": \"sctp\"");
        let e = compare_trace(&bad, "u.json").unwrap_err().to_string();
        assert!(e.contains("u.json") && e.contains("flow"), "{e}");
    }

    /// Damaged traces are errors naming the file and the field, never a comparison with zeros.
    #[test]
    fn bad_traces_name_the_field() {
        for (from, to, field) in [
            ("\"writes\": 1000", "\"writes\": 0", "writes"),
            ("\"seconds\": 0.02", "\"seconds\": -1", "seconds"),
            (
                "\"writer_node\": 0",
                "\"writer_node\": 3",
                "pagesets_before",
            ),
            (
                "\"reader_cpu\": 1",
                "\"reader_cpu\": 7",
                "pagesets_before.0/Normal.cpus.7",
            ),
            (
                "\"batch\": 63, \"high_min\": 5000, \"high_max\": 40000}}}}",
                "\"batch\": 0, \"high_min\": 5000, \"high_max\": 40000}}}}",
                "batch",
            ),
            (
                "\"kernel\": \"6.18.44\"",
                "\"kernel\": \"banana\"",
                "kernel version",
            ),
            (
                "\"write_bytes\": 65536",
                "\"write_bytes\": 100",
                "write_bytes",
            ),
            ("\"writes\": 1000,", "", "writes"),
            ("\"command\": []", "\"command\": [\"gcc\"]", "command"),
            ("\"writes\": 1000", "\"writes\": -5", "writes"),
            ("\"seconds\": 0.02", "\"seconds\": \"fast\"", "seconds"),
            ("\"seconds\": 0.02", "\"seconds\": 1e-12", "writes"),
            (
                "\"wmem_default\": 212992",
                "\"wmem_default\": 0",
                "wmem_default",
            ),
            (
                "\"high_min\": 5000, \"high_max\": 40000}}}}",
                "\"high_min\": 50000, \"high_max\": 40000}}}}",
                "high_min",
            ),
            (
                "\"write_bytes\": 65536",
                "\"write_bytes\": 0",
                "write_bytes",
            ),
            (
                "\"batch\": 63, \"high_min\": 5000, \"high_max\": 40000}}}}",
                "\"batch\": 70000, \"high_min\": 5000, \"high_max\": 40000}}}}",
                "batch",
            ),
        ] {
            let bad = GOOD.replacen(from, to, 1);
            assert_ne!(bad, GOOD, "{from}");
            let e = compare_trace(&bad, "t.json").unwrap_err().to_string();
            assert!(
                e.contains("t.json") && e.contains(field),
                "{from} -> {to}: {e}"
            );
        }
    }
}
