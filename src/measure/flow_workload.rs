//! A workload file from a recorded flow (`pcpmodel workload from-flow`): the flow facts of a
//! producer-consumer workload measured from the recording instead of assumed. A template
//! workload (a built-in or a file of kind `producer-consumer`) supplies what a page flow cannot
//! show (the work per page, the bytes touched, the placement); the flow supplies the order of the
//! blocks, which CPU frees them, the allocations on the freeing CPU and its runs of frees, each
//! with `measured:` provenance naming the flow file.
//!
//! The pair is found from the flow: the sender is the CPU that allocated the most pages, the
//! block order the order of most of its pages, the receiver the other CPU that freed the most
//! blocks of that order. A flow where no other CPU frees that order (a process freeing its own
//! pages) is no producer-consumer flow, and is refused.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::skb::{free_site, FreeSite};
use crate::kernel::version::KernelVersion;
use crate::measure::record::flow::{open_flow, FlowLine, FlowReader, Op};

/// The sysctl that decides who frees a received skb.
const SKB_DEFER_SYSCTL: &str = "net.core.skb_defer_max";

/// What a flow shows of a producer-consumer pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairShape {
    /// The CPU that allocates the blocks.
    pub sender_cpu: u32,
    /// The other CPU that frees the most of them.
    pub receiver_cpu: u32,
    /// Order of the blocks.
    pub order: u8,
    /// Blocks of that order the sender allocated.
    pub blocks_allocated: u64,
    /// Blocks of that order freed on the receiver's CPU.
    pub freed_on_receiver: u64,
    /// Blocks of that order freed on the sender's CPU.
    pub freed_on_sender: u64,
    /// Allocations (any order) on the receiver's CPU.
    pub receiver_allocs: u64,
    /// Page-weighted mean run of pages freed on the receiver's CPU between two of its
    /// allocations.
    pub free_run_pages: f64,
    /// Kernel recorded.
    pub kernel: String,
    /// `net.core.skb_defer_max` at the recording (None: not recorded).
    pub skb_defer_max: Option<i64>,
    /// Seconds recorded.
    pub seconds: f64,
    /// Events the trace lost.
    pub lost: u64,
}

impl PairShape {
    /// Share of the blocks freed on the receiver's CPU (of those freed on either CPU).
    pub fn receiver_share(&self) -> f64 {
        let n = self.freed_on_receiver + self.freed_on_sender;
        if n == 0 {
            0.0
        } else {
            self.freed_on_receiver as f64 / n as f64
        }
    }

    /// Allocations on the receiver's CPU per block it freed.
    pub fn allocs_per_free(&self) -> f64 {
        if self.freed_on_receiver == 0 {
            0.0
        } else {
            self.receiver_allocs as f64 / self.freed_on_receiver as f64
        }
    }
}

#[derive(Default)]
struct CpuCounts {
    alloc_pages_by_order: BTreeMap<u8, u64>,
    allocs_by_order: BTreeMap<u8, u64>,
    frees_by_order: BTreeMap<u8, u64>,
    allocs: u64,
    run: u64,
    run_sq: f64,
    run_sum: f64,
}

impl CpuCounts {
    fn end_run(&mut self) {
        if self.run > 0 {
            let r = self.run as f64;
            self.run_sq += r * r;
            self.run_sum += r;
            self.run = 0;
        }
    }
}

/// Measures the pair of a flow read from `r`.
pub fn pair_shape<R: BufRead>(mut r: FlowReader<R>, label: &str) -> Result<PairShape> {
    let mut cpus: BTreeMap<u32, CpuCounts> = BTreeMap::new();
    let mut lost = 0;
    while let Some(l) = r.next_line()? {
        match l {
            FlowLine::Run {
                cpu,
                op,
                order,
                count,
                repeat,
                ..
            } => {
                let c = cpus.entry(cpu).or_default();
                let n = count * repeat;
                match op {
                    Op::Alloc => {
                        c.end_run();
                        c.allocs += n;
                        *c.allocs_by_order.entry(order).or_default() += n;
                        *c.alloc_pages_by_order.entry(order).or_default() += n << order;
                    }
                    // Who frees: a direct free is this CPU's as much as one to its lists.
                    Op::Free | Op::FreeDirect => {
                        c.run += n << order;
                        *c.frees_by_order.entry(order).or_default() += n;
                    }
                }
            }
            FlowLine::Lost { events, .. } => lost += events,
            _ => {}
        }
    }
    for c in cpus.values_mut() {
        c.end_run();
    }
    let pages = |c: &CpuCounts| c.alloc_pages_by_order.values().sum::<u64>();
    let (&sender, s) = cpus
        .iter()
        .max_by_key(|(_, c)| pages(c))
        .filter(|(_, c)| pages(c) > 0)
        .ok_or_else(|| Error::invalid(label, "flow", "the flow has no allocations"))?;
    let (&order, _) = s
        .alloc_pages_by_order
        .iter()
        .max_by_key(|(_, p)| **p)
        .expect("a CPU with pages has an order");
    let freed = |c: &CpuCounts| c.frees_by_order.get(&order).copied().unwrap_or(0);
    let receiver = cpus
        .iter()
        .filter(|(c, _)| **c != sender)
        .max_by_key(|(_, c)| freed(c))
        .filter(|(_, c)| freed(c) > 0);
    let Some((&receiver, rc)) = receiver else {
        return Err(Error::invalid(
            label,
            "flow",
            format!(
                "no CPU but the sender (CPU {sender}) frees order-{order} blocks: not a producer-consumer flow (from-flow writes that kind only)"
            ),
        ));
    };
    let own = rc.allocs_by_order.get(&order).copied().unwrap_or(0);
    if freed(rc) < 2 * own {
        return Err(Error::invalid(
            label,
            "flow",
            format!(
                "CPU {receiver} frees {} order-{order} blocks and allocates {own} itself: each CPU frees about what it allocates, a process flow, not a producer-consumer one (from-flow writes that kind only)",
                freed(rc)
            ),
        ));
    }
    let end = r.end.clone().unwrap_or_default();
    Ok(PairShape {
        sender_cpu: sender,
        receiver_cpu: receiver,
        order,
        blocks_allocated: s.allocs_by_order.get(&order).copied().unwrap_or(0),
        freed_on_receiver: freed(rc),
        freed_on_sender: freed(s),
        receiver_allocs: rc.allocs,
        free_run_pages: if rc.run_sum > 0.0 {
            rc.run_sq / rc.run_sum
        } else {
            0.0
        },
        kernel: r.meta.kernel.clone(),
        skb_defer_max: r.sysctl(SKB_DEFER_SYSCTL),
        seconds: end.seconds,
        lost,
    })
}

/// A sourced value as a TOML inline table.
fn sourced(value: toml::Value, source: String) -> toml::Value {
    let mut t = toml::Table::new();
    t.insert("value".into(), value);
    t.insert("source".into(), toml::Value::String(source));
    toml::Value::Table(t)
}

/// The workload TOML of `template_toml` (a producer-consumer workload) with the flow facts of
/// the flow at `flow` measured, named `name`. Returns the text and the shape measured.
pub fn workload_from_flow(
    flow: &std::path::Path,
    template_toml: &str,
    template_label: &str,
    name: &str,
) -> Result<(String, PairShape)> {
    let label = flow.display().to_string();
    let shape = pair_shape(open_flow(flow)?, &label)?;
    let mut doc: toml::Table = toml::from_str(template_toml)
        .map_err(|e| Error::invalid(template_label, "toml", e.to_string()))?;
    if doc.get("kind").and_then(|k| k.as_str()) != Some("producer-consumer") {
        return Err(Error::invalid(
            template_label,
            "kind",
            "from-flow fills a producer-consumer workload: give one with --like",
        ));
    }
    let kernel = KernelVersion::parse_release(&shape.kernel)
        .map_err(|e| Error::invalid(&label, "meta.kernel", e.to_string()))?;
    let socket = doc
        .get("op")
        .and_then(|o| o.get("socket"))
        .and_then(|s| s.get("value"))
        .and_then(|v| v.as_str())
        .map(|s| {
            serde_json::from_value::<crate::kernel::skb::Socket>(serde_json::Value::String(
                s.into(),
            ))
            .map_err(|e| Error::invalid(template_label, "op.socket", e.to_string()))
        })
        .transpose()?;
    let defer = shape
        .skb_defer_max
        .and_then(|d| u32::try_from(d).ok())
        .unwrap_or(crate::kernel::skb::SKB_DEFER_MAX_DEFAULT);
    let site = socket.map_or(FreeSite::Receiver, |s| free_site(s, kernel, defer).0);
    let share_param = match site {
        FreeSite::Receiver => "receiver_free_share",
        FreeSite::Sender => "receiver_free_share_deferred",
    };
    let at = format!(
        "{label} (kernel {}, {:.2} s, sender CPU {}, receiver CPU {})",
        shape.kernel, shape.seconds, shape.sender_cpu, shape.receiver_cpu
    );
    let template_name = doc
        .get("name")
        .and_then(|n| n.as_str())
        .unwrap_or_default()
        .to_string();
    let template_name = template_name.as_str();
    doc.insert("name".into(), toml::Value::String(name.into()));
    doc.insert(
        "description".into(),
        toml::Value::String(format!(
            "{name}: the flow of {label} on the template {template_label}"
        )),
    );
    doc.insert(
        "source".into(),
        toml::Value::String(format!(
            "measured: pcpmodel workload from-flow {label}; fields without measured: provenance are {template_label}'s"
        )),
    );
    doc.remove("aliases");
    doc.remove("thread");
    let like = doc
        .get("like")
        .and_then(|l| l.as_str())
        .map(str::to_string)
        .or_else(|| {
            crate::workload::registry::is_builtin_name(template_name)
                .then(|| template_name.to_string())
        });
    if let Some(l) = like {
        doc.insert("like".into(), toml::Value::String(l));
    }
    let op = doc
        .get_mut("op")
        .and_then(|o| o.as_table_mut())
        .ok_or_else(|| Error::invalid(template_label, "op", "missing"))?;
    op.insert(
        "order".into(),
        sourced(
            toml::Value::Integer(i64::from(shape.order)),
            format!(
                "measured: {at}: most of the sender's pages came in order-{} blocks ({} blocks)",
                shape.order, shape.blocks_allocated
            ),
        ),
    );
    let params = doc
        .entry("params")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| Error::invalid(template_label, "params", "not a table"))?;
    params.insert(
        "consumer_allocs_per_free".into(),
        sourced(
            toml::Value::Float(shape.allocs_per_free()),
            format!(
                "measured: {at}: {} allocations on the receiver's CPU while it freed {} order-{} blocks",
                shape.receiver_allocs, shape.freed_on_receiver, shape.order
            ),
        ),
    );
    if shape.free_run_pages > 0.0 {
        params.insert(
            "free_run_pages".into(),
            sourced(
                toml::Value::Float(shape.free_run_pages.max(1.0)),
                format!(
                    "measured: {at}: page-weighted mean run of pages the receiver's CPU freed between two of its allocations"
                ),
            ),
        );
    }
    params.insert(
        share_param.into(),
        sourced(
            toml::Value::Float(shape.receiver_share()),
            format!(
                "measured: {at}: {} of {} order-{} blocks freed on the receiver's CPU, the rest on the sender's",
                shape.freed_on_receiver,
                shape.freed_on_receiver + shape.freed_on_sender,
                shape.order
            ),
        ),
    );
    let text = format!(
        "# Written by `pcpmodel workload from-flow {label}` from the template {template_label}.\n{}",
        toml::to_string(&doc).map_err(|e| Error::invalid(&label, "toml", e.to_string()))?
    );
    // It must load as a workload.
    crate::workload::registry::Registry::builtin().from_toml_str(
        &text,
        &format!("from-flow {label}"),
        crate::workload::registry::Origin::Builtin,
    )?;
    Ok((text, shape))
}

/// The built-in template for a flow recorded around `pcpmodel measure pcp --workload W`: the
/// model's workload of that host loop (None for any other command).
pub fn default_template(flow: &std::path::Path) -> Result<Option<&'static str>> {
    let r = open_flow(flow)?;
    let cmd = &r.meta.command;
    let w = cmd
        .iter()
        .position(|a| a == "--workload")
        .and_then(|i| cmd.get(i + 1));
    Ok(match w.map(String::as_str) {
        Some("netperf-udp") => Some("netperf-udp"),
        Some("af-unix") => Some("lmbench-af-unix"),
        _ => None,
    })
}

/// The template's TOML text and label: a built-in workload's file, or a file.
pub fn template_text(name_or_path: &str) -> Result<(String, String)> {
    if let Some(b) = crate::workload::registry::BUILTIN
        .iter()
        .find(|b| b.name == name_or_path)
    {
        return Ok((
            b.toml.to_string(),
            format!("models/workloads/{}.toml", b.name),
        ));
    }
    let p = std::path::Path::new(name_or_path);
    let text = crate::input::read_text(p, name_or_path, crate::input::MAX_TOML_BYTES)?;
    Ok((text, name_or_path.to_string()))
}
