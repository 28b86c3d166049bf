//! Kind `producer-consumer`: sender/receiver pairs, the sender CPU allocating pages of one order
//! (skb page frags), the receiver CPU freeing them after copying the payload out (thread 004's
//! netperf UDP model, [`crate::model::netperf`]). Per pair: fixed work per 4 KiB page, the cost
//! of the payload lines where the receiver finds them (its private cache, the LLC or DRAM, from
//! the reuse distance the PCP drain/refill rules of the kernel give,
//! [`crate::model::pcp::dynamics`]), and the zone->lock / free-list lines moving between the two
//! CPUs per hold.
//!
//! # Inputs
//! `op.order` (`--order`), `op.placement` (`--placement`), `tasks.count` pairs (`--tasks`),
//! `tasks.nodes` (`--nodes`), `params.consumer_allocs_per_free`; kernel knobs `--kernel`,
//! `--high` (the receiver's pcp->high, default the kernel's), `--batch`, `--scale-max`,
//! `--free-high`, `--free-high-threshold`, `params.free_run_pages` (the free_high trigger,
//! [`crate::model::freehigh`]: runs of frees without an allocation on the consumer CPU; without
//! it, `2^order / consumer_allocs_per_free` pages, [`free_run_from_allocs`]).
//! `params.af_unix_write_bytes` (optional) is the size of the writer's `write()` on an AF_UNIX
//! stream: the time-stepped flow of the Huang validation (crate::model::autotune::PairFlow)
//! then allocates and frees the frags the kernel builds for it, several orders per write
//! (crate::kernel::skb); this kind's steady-state model moves blocks of `op.order`.
//!
//! # Fixed work
//! A file's `op.work` with `basis = "fitted"` takes the work per page from thread 004's
//! calibration ([`crate::fit::calibrate`]); any other basis takes the file's value (ns, or
//! cycles at the machine's base clock) with no uncertainty and no score scale. A fitted work that
//! names its table (`table = "004_netperf_pcp_high"`) is fitted on a machine the table measures
//! and carried over in cycles elsewhere ([`crate::fit::calibrate::netperf_params`]); a fitted
//! work without a table is carried over in cycles on every machine
//! ([`crate::fit::calibrate::netperf_params_carried_over`]): its own per-page work was never
//! measured, and the UDP fit of one machine is no better an estimate of it than the mean over
//! the machines.
//!
//! # Several pairs
//! Pairs spread evenly over the LLC domains of the allowed nodes; the pairs of one domain split
//! its capacity evenly (assumed: each pair streams its own pages through it). The pairs of one
//! node queue on its zone->lock ([`crate::model::pairqueue`]: refills and drains at the rates
//! and sizes of the PCP dynamics, holds composed from the code, the finite-source queue); each
//! pair runs `T(P) / T(1)` slower than alone, so one pair is the unqueued model (thread 004's)
//! exactly. `optimal-high` sweeps the lone pair's model (the reuse path): the queue's
//! dependence on pcp->high is in `predict` only. Not modelled: memory bandwidth shared between
//! pairs, and a network link's rate for pairs whose producer and consumer are on different
//! machines. More pairs than the nodes' CPUs hold (two each) are refused with the number that
//! fits: they would time-share the CPUs, and context switches are not modelled (issue 35: the
//! time-shared figures printed beside the per-pair ones disagreed). With one pair the model is
//! thread 004's exactly.

use crate::error::{Error, Result};
use crate::fit::calibrate::{
    default_pcp, netperf_model, netperf_params, netperf_params_carried_over, netperf_params_given,
    WorkloadParams, WorkloadSource, TABLE_004,
};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::kernel::layout::PAGE_BYTES;
use crate::kernel::skb::{free_site, FreeSite, SKB_DEFER_MAX_DEFAULT};
use crate::kernel::version::KernelVersion;
use crate::model::cache::Placement;
use crate::model::netperf::NetperfModel;
use crate::report::{sig, Report, Table};
use crate::workload::kind::{Kind, Knobs, Mechanism, Predicted, ReuseModel};
use crate::workload::spec::FreedBy;
use crate::workload::sweep::{check_high, perturb_latencies};

/// Valid `params.consumer_allocs_per_free`.
const CONSUMER_ALLOCS_PER_FREE: crate::bounds::Range =
    crate::bounds::Range::real("allocations per free", 0.0, 1e3, "", "a rate");

/// Valid `params.receiver_free_share` and `params.receiver_free_share_deferred`.
const RECEIVER_FREE_SHARE: crate::bounds::Range =
    crate::bounds::Range::real("share of pages", 0.0, 1.0, "", "a share");

/// Valid `params.free_run_pages`.
const FREE_RUN_PAGES: crate::bounds::Range =
    crate::bounds::Range::real("pages", 1e-3, 1e9, "", "a run length");

/// The workload's `write()` size (`params.af_unix_write_bytes`) and the orders of the frags the
/// kernel allocates for it with the default send buffer; None when the file gives no write size.
pub fn af_unix_write_orders(w: &WorkloadSpec) -> Option<(u64, Vec<u8>)> {
    let bytes = w.params.get("af_unix_write_bytes")?.value as u64;
    Some((
        bytes,
        crate::kernel::skb::unix_stream_write_orders(bytes, crate::kernel::skb::WMEM_DEFAULT),
    ))
}

/// Valid `params.af_unix_write_bytes`.
pub const AF_UNIX_WRITE_BYTES: crate::bounds::Range = crate::bounds::Range::int(
    "bytes per write",
    1.0,
    1_073_741_824.0,
    "bytes",
    "one write() of at most 1 GiB",
);
use crate::workload::spec::{Basis, WorkloadSpec};
use crate::workload::NodeSpan;

/// Kind `producer-consumer`.
pub struct ProducerConsumer;

/// The run of frees without an allocation of a pure consumer (`consumer_allocs_per_free = 0`)
/// when the file gives no `params.free_run_pages`: it never ends, taken as 1e9 pages (4 TB of
/// frees, longer than any run measured; the trigger model's `exp(-T / run)` is then 1 to 1e-6
/// for any threshold the kernel can have), so the free_high trigger follows the kernel's rule.
pub const PURE_CONSUMER_RUN_PAGES: f64 = 1e9;

/// The mean run of frees without an allocation on the consumer CPU, base pages, when the file
/// gives no `params.free_run_pages`: `2^order / a` for `a` allocations per free (each free one
/// block of the order, allocations interleaved at random: geometric runs), capped at
/// [`PURE_CONSUMER_RUN_PAGES`], which is also the pure consumer's (`a = 0`). Continuous in `a`
/// down to 0.
pub fn free_run_from_allocs(allocs_per_free: f64, order: u8) -> f64 {
    let u = f64::from(1u32 << order.min(20));
    if allocs_per_free > 0.0 {
        (u / allocs_per_free).min(PURE_CONSUMER_RUN_PAGES)
    } else {
        PURE_CONSUMER_RUN_PAGES
    }
}

/// The free_high trigger's mean run of frees, base pages: `--free-run-pages` or the file's
/// `params.free_run_pages` (range-checked), else [`free_run_from_allocs`].
fn free_run_pages(w: &WorkloadSpec, k: &Knobs, allocs_per_free: f64, order: u8) -> Result<f64> {
    Ok(super::opt_param(w, k, "free_run_pages", FREE_RUN_PAGES)?
        .unwrap_or_else(|| free_run_from_allocs(allocs_per_free, order)))
}

const KNOBS: &[&str] = &[
    "high",
    "placement",
    "free-high",
    "free-high-threshold",
    "free-run-pages",
    "order",
    "tasks",
    "nodes",
    "batch",
    "scale-max",
    "skb-defer-max",
    "run-seconds",
    "run-start-pages",
];

/// The pairs' model on `machine`: thread 004's flow with the workload's order and consumer
/// allocations, the kernel's knobs, and the LLC capacity shared by `sharers` pairs.
#[derive(Debug, Clone, Copy)]
struct Setup {
    placement: Placement,
    kernel: KernelVersion,
    order: u8,
    consumer_allocs_per_free: f64,
    batch: Option<u32>,
    scale_max: Option<u8>,
    free_high: bool,
    /// The free_high trigger: the file's mean run of frees without an allocation on the
    /// consumer CPU (`params.free_run_pages`), the knob's threshold and the high it applies to.
    free_run_pages: f64,
    free_high_threshold: Option<u32>,
    high: Option<u32>,
    sharers: u32,
    /// Share of the pages the receiver's CPU frees (the rest the sender frees itself: all of
    /// them when the kernel hands read skbs back to the allocating CPU,
    /// [`crate::kernel::skb::free_site`]).
    receiver_share: f64,
    /// Blocks of each order a message's frags take ([`frag_blocks`]).
    frag_blocks: [u16; 11],
}

/// Blocks of each order one message allocates when the file's write is frags of several
/// orders (`params.af_unix_write_bytes`); all 0 otherwise (blocks of `op.order`).
fn frag_blocks(w: &WorkloadSpec) -> [u16; 11] {
    let mut n = [0u16; 11];
    if let Some((_, orders)) = af_unix_write_orders(w) {
        for o in orders {
            if let Some(c) = n.get_mut(usize::from(o)) {
                *c = c.saturating_add(1);
            }
        }
    }
    n
}

impl Setup {
    fn model(&self, machine: &Machine) -> Result<NetperfModel> {
        let mut model = netperf_model(machine, self.placement, self.kernel)?;
        model.flow.order = u32::from(self.order);
        model.flow.consumer_allocs_per_free = self.consumer_allocs_per_free;
        if let Some(b) = self.batch {
            model.flow.batch_pages = b;
        }
        if let Some(s) = self.scale_max {
            model.flow.scale_max = u32::from(s);
        }
        model.flow.free_high = self.free_high;
        model.flow.consumer_free_share = self.receiver_share;
        model.flow.frag_blocks = self.frag_blocks;
        model.flow.same_cpu = self.receiver_share <= 0.0;
        if model.flow.same_cpu {
            // The sender frees what it allocates: its frees and allocations interleave, so
            // free_count is halved between frees and free_high has no run to fire on (0 drains
            // in 17,790 frees on this host's UDP trace).
            model.flow.free_high = false;
        } else if !self.free_high {
            let x = free_high_trigger_input(machine, self, &model, self.free_run_pages)?;
            let t = crate::model::freehigh::trigger(&x)?;
            model.flow.free_high_share = t.share;
            model.flow.free_high_pages_per_event = t.pages_per_event;
            model.free_high_rule = Some(x);
        } else if self.free_high && self.free_high_threshold.is_some() {
            return Err(Error::Unsupported(
                "--free-high-threshold with --free-high: --free-high models free_high as always on, so there is no trigger for a threshold to move; give one of the two".into(),
            ));
        }
        if self.sharers > 1 {
            let llc_pages = machine.llc().map_or(0.0, |l| {
                l.size_kib.value as f64 * 1024.0 / PAGE_BYTES as f64
            });
            let k = f64::from(self.sharers);
            model.hierarchy.any_cache_pages -= llc_pages * (1.0 - 1.0 / k);
        }
        Ok(model)
    }
}

/// The inputs of the consumer CPU's free_high trigger ([`crate::model::freehigh`]) for runs
/// of `run_pages` mean: the kernel's rule (or the knob's threshold), the list's high (`--high`,
/// else the kernel's, [`kernel_high`]) and high_min (from 6.7 a sysctl-set high pins high_min
/// to it, else the default's), and PCPF_FREE_HIGH_BATCH from the machine's per-CPU LLC slice.
fn free_high_trigger_input(
    machine: &Machine,
    s: &Setup,
    model: &NetperfModel,
    run_pages: f64,
) -> Result<crate::model::freehigh::TriggerInput> {
    let default = default_pcp(machine, s.kernel)?;
    let f = &model.flow;
    let auto = s.kernel.era().auto_tunes_high();
    let (high_pages, high_min_pages) = match s.high {
        Some(h) if auto => (h, h),
        Some(h) => (h, default.high_min_pages.unwrap_or(0)),
        None => (
            kernel_high_with(machine, model, &default)?,
            default.high_min_pages.unwrap_or(0),
        ),
    };
    Ok(crate::model::freehigh::TriggerInput {
        kernel: s.kernel,
        order: f.order,
        batch_pages: f.batch_pages,
        high_pages,
        high_min_pages,
        scale_max: f.scale_max,
        free_high_batch: auto
            && crate::model::autotune::free_high_batch_flag(machine, f.batch_pages),
        threshold_pages: s.free_high_threshold,
        run_mean_pages: run_pages,
    })
}

/// The consumer's pcp->high the kernel runs the flow at when `--high` does not set it: the
/// fixed high (<= 6.6), or on 6.7+ the time-average live high of the pageset the flow frees
/// to, from the kernel's auto-tuning rules stepped through the flow
/// ([`crate::model::autotune::live_high`]: the consumer's own allocations, the sender's share
/// of the frees, free_high).
pub fn kernel_high(machine: &Machine, model: &NetperfModel) -> Result<u32> {
    kernel_high_with(machine, model, &default_pcp(machine, model.flow.kernel)?)
}

/// [`kernel_high`] with the kernel's default pageset of the machine already at hand.
fn kernel_high_with(
    machine: &Machine,
    model: &NetperfModel,
    default: &crate::fit::calibrate::DefaultPcp,
) -> Result<u32> {
    use crate::kernel::pageset::{PcpHigh, PcpLimits};
    use crate::model::autotune::{
        free_high_batch_flag, live_high, LiveHighFlow, PairFlow, LIVE_HIGH_PACE_NS_PER_PAGE,
        VMSTAT_INTERVAL_NS,
    };
    let f = &model.flow;
    let (Some(lo), Some(hi)) = (default.high_min_pages, default.high_max_pages) else {
        return Ok(default.effective_high(f.scale_max));
    };
    let order = u8::try_from(f.order).unwrap_or(u8::MAX);
    let pages = f64::from(1u32 << f.order.min(9));
    let writer_free_share = if f.same_cpu {
        1.0
    } else {
        (1.0 - f.consumer_free_share).clamp(0.0, 1.0)
    };
    let flow = LiveHighFlow {
        limits: PcpLimits {
            batch_pages: f.batch_pages,
            high: PcpHigh::AutoTuned {
                high_min_pages: lo,
                high_max_pages: hi,
            },
        },
        scale_max: u8::try_from(f.scale_max).ok(),
        free_high_batch: free_high_batch_flag(machine, f.batch_pages),
        pair: PairFlow {
            orders: vec![order],
            work_ns: crate::assumptions::value(
                "autotune::LIVE_HIGH_PACE_NS_PER_PAGE",
                LIVE_HIGH_PACE_NS_PER_PAGE,
            ) * pages,
            tick_ns: VMSTAT_INTERVAL_NS,
            span_ns: 4.0 * VMSTAT_INTERVAL_NS,
            reader_allocs_per_block: f.consumer_allocs_per_free * pages,
            reader_alloc_burst_pages: 1.0,
            writer_free_share,
        },
    };
    Ok(live_high(f.kernel, &flow)?.round() as u32)
}

/// The pairs' model on a machine (what `predict` evaluates and `optimal-high` sweeps).
pub struct PairsModel {
    /// One pair's flow, its workload parameters and how to rebuild it on another machine.
    pub reuse: ReuseModel,
    /// Pairs.
    pub pairs: u32,
    /// Pairs running at once.
    pub running: u32,
    /// Pairs sharing one LLC domain.
    pub sharers: u32,
    /// The nodes the pairs run on (`--nodes`, else the file's).
    pub nodes: NodeSpan,
    /// The file's tasks.count when it was more pairs than the machine runs at once (and
    /// `pairs` is then the number that fits).
    pub capped_from: Option<u32>,
}

/// The run `k` asks for ([`crate::workload::RUN_SECONDS`], [`crate::workload::RUN_START_PAGES`]):
/// from the given pages, or from what the kernel's default setting holds (where `measure pcp`
/// leaves the lists between points), with the machine's backing cost per page.
fn run_spec(
    model: &crate::model::netperf::NetperfModel,
    values: &[f64],
    kernel_high: u32,
    machine: &Machine,
    k: &Knobs,
) -> Result<Option<crate::model::fill::RunSpec>> {
    let (seconds, start) = (
        k.extra(crate::workload::RUN_SECONDS),
        k.extra(crate::workload::RUN_START_PAGES),
    );
    let Some(seconds) = seconds else {
        return match start {
            Some(_) => Err(Error::Unsupported(
                "--run-start-pages: give --run-seconds too (the start of which run?)".into(),
            )),
            None => Ok(None),
        };
    };
    crate::bounds::RUN_SECONDS
        .check_flag("--run-seconds", seconds)
        .map_err(Error::Unsupported)?;
    let start_pages = match start {
        Some(s) => {
            crate::bounds::RUN_START_PAGES
                .check_flag("--run-start-pages", s)
                .map_err(Error::Unsupported)?;
            s
        }
        None => model
            .estimate_default(values, kernel_high)?
            .dynamics
            .pages_held(),
    };
    Ok(Some(crate::model::fill::RunSpec {
        seconds,
        start_pages,
        backing_ns_per_page: machine
            .memory
            .backing_ns_per_page
            .as_ref()
            .map_or(0.0, |b| b.value),
    }))
}

/// Builds the pairs' model for workload `w` on `machine` with knobs `k`: the order,
/// `consumer_allocs_per_free`, placement, `--batch`/`--scale-max`/`--free-high`, the LLC shared
/// by the pairs of one domain, the fixed work (fitted, carried over or given; module docs), and
/// a run of finite length where `k` asks for one.
pub fn pairs_model(w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<PairsModel> {
    let kernel = k.kernel_or_default();
    let order = super::order(w, k);
    // Orders no kernel keeps on the PCP lists are refused; orders 1-3 before 5.13 carry the
    // timeline's "not modelled" note for 44042b449872 (crate::kernel::changes), as every
    // change the model does not follow does.
    if !crate::kernel::ops::pcp_allowed_order(KernelVersion::DEFAULT.max(kernel), order) {
        return Err(Error::Unsupported(format!(
            "workload {} at order {order}: no kernel keeps order-{order} pages on the PCP lists (pcp_allowed_order(): order 0, and from 5.13 orders 1-3 and 9), so every allocation and free takes zone->lock in the buddy allocator; kind producer-consumer models pages flowing through the PCP lists: give order 0-3 or 9",
            w.name
        )));
    }
    let placement: Placement = super::placement(w, k)?.into();
    let asked = super::tasks(w, k);
    let nodes = match &k.nodes {
        Some(s) => NodeSpan::parse(s, "--nodes")?,
        None => w.nodes()?,
    };
    // More pairs than run at once would time-share the CPUs, and context switches are not
    // modelled: a --tasks given by hand is refused with the number that fits; the file's
    // default is capped to it (as `latency` caps its default tasks), with a note.
    let fit = fitting_pairs(machine, nodes);
    if asked > fit && k.tasks.is_some() {
        return Err(Error::Unsupported(format!(
            "--tasks {asked}: {asked} sender/receiver pairs need {} CPUs, and {} has {} on the node(s) they run on: at most {fit} pair(s) run at once; pairs time-sharing CPUs (context switches, the scheduler) are not modelled: give 1..={fit} pairs",
            u64::from(asked) * 2,
            machine.name,
            nodes.nodes_on(machine) * machine.cpus_per_node()
        )));
    }
    let pairs = asked.min(fit);
    let capped_from = (asked > fit).then_some(asked);
    let running = running_pairs(machine, pairs, nodes);
    let consumer_allocs_per_free =
        super::param(w, k, "consumer_allocs_per_free", CONSUMER_ALLOCS_PER_FREE)?;
    let (site, _) = free_site_of(w, k, kernel);
    let receiver_share = receiver_share(w, k, site)?;
    let setup = Setup {
        placement,
        kernel,
        order,
        consumer_allocs_per_free,
        batch: k.batch,
        scale_max: k.scale_max,
        free_high: k.free_high.unwrap_or(false),
        free_run_pages: free_run_pages(w, k, consumer_allocs_per_free, order)?,
        free_high_threshold: k.free_high_threshold,
        high: k.high,
        sharers: llc_sharers(machine, running, nodes),
        receiver_share,
        frag_blocks: frag_blocks(w),
    };
    let mut model = setup.model(machine)?;
    let high = kernel_high(machine, &model)?;
    let params = work_params(w, machine)?;
    model.run = run_spec(&model, &params.values, high, machine, k)?;
    let flow = model.flow;
    let rebuild = move |m: &Machine| {
        let mut x = setup.model(m)?;
        x.flow = flow;
        Ok(x)
    };
    Ok(PairsModel {
        reuse: ReuseModel::new(model, params, kernel, placement, high, rebuild),
        pairs,
        running,
        sharers: setup.sharers,
        nodes,
        capped_from,
    })
}

/// zone->lock queueing of `running` pairs spread over `nodes` ([`crate::model::pairqueue`]):
/// the pairs of one node share its zone; holds composed from the code as for every workload
/// but thread 000's.
fn pair_queue_of(
    w: &WorkloadSpec,
    machine: &Machine,
    kernel: KernelVersion,
    order: u8,
    e: &crate::model::netperf::NetperfEstimate,
    running: u32,
    nodes: NodeSpan,
) -> Result<crate::model::pairqueue::PairQueue> {
    let per_zone = running.div_ceil(nodes.nodes_on(machine).max(1)).max(1);
    let mut zl = crate::model::zonelock::ZoneLockModel::new(machine, kernel)?;
    crate::model::zonelock::with_code_hold(&mut zl);
    let block_ns = e.ns_per_op * f64::from(1u32 << order);
    let (params, _) = super::alloc_loop::lock_params(w, machine, block_ns)?;
    crate::model::pairqueue::pair_queue(&zl, &params, &e.dynamics, order, e.ns_per_op, per_zone)
}

/// Which CPU frees the workload's pages on `kernel`: the receiver, unless the file's
/// `op.socket` defers skb freeing to the allocating CPU on that kernel with `--skb-defer-max`
/// (default the kernel's [`SKB_DEFER_MAX_DEFAULT`]); with the reason in words.
pub fn free_site_of(w: &WorkloadSpec, k: &Knobs, kernel: KernelVersion) -> (FreeSite, String) {
    let defer_max = k
        .extra("skb_defer_max")
        .map_or(SKB_DEFER_MAX_DEFAULT, |d| d as u32);
    match &w.op.socket {
        Some(s) => free_site(s.value, kernel, defer_max),
        None => (
            FreeSite::Receiver,
            "the workload names no socket (op.socket): the receiver frees every page".to_string(),
        ),
    }
}

/// A note when the file measured the receiver's share for the other free site only (a flow
/// recorded with another `net.core.skb_defer_max` than this prediction's): the prediction then
/// runs on the kind's default share, which the user should know.
fn other_site_measured_share(w: &WorkloadSpec, k: &Knobs, site: FreeSite) -> Option<String> {
    let (used, other, flag) = match site {
        FreeSite::Receiver => (
            "receiver_free_share",
            "receiver_free_share_deferred",
            "skb_defer_max above 0",
        ),
        FreeSite::Sender => (
            "receiver_free_share_deferred",
            "receiver_free_share",
            "--skb-defer-max 0",
        ),
    };
    let measured = |name: &str| {
        w.params
            .get(name)
            .filter(|q| q.source.starts_with("measured:"))
    };
    if k.extra(used).is_some() || measured(used).is_some() {
        return None;
    }
    let q = measured(other)?;
    Some(format!(
        "params.{other} = {} was measured for the other free site; this prediction's site reads params.{used} ({}): a prediction of the recorded flow needs {flag}",
        sig(q.value, 3),
        w.params
            .get(used)
            .map_or("not given: the kind's default".to_string(), |u| sig(u.value, 3))
    ))
}

/// Share of the pages the receiver's CPU frees at free site `site`: `params.receiver_free_share`
/// (default 1: the receiver frees all; below 1 when the sender frees the datagrams dropped in
/// its own softirq) when the receiver frees, `params.receiver_free_share_deferred` (default 0:
/// the deferral hands every skb back; above 0 when the receiver frees what overflows the defer
/// list) when the kernel hands skbs back to the sender.
fn receiver_share(w: &WorkloadSpec, k: &Knobs, site: FreeSite) -> Result<f64> {
    let (name, default) = match site {
        FreeSite::Receiver => ("receiver_free_share", 1.0),
        FreeSite::Sender => ("receiver_free_share_deferred", 0.0),
    };
    Ok(super::opt_param(w, k, name, RECEIVER_FREE_SHARE)?.unwrap_or(default))
}

/// Pairs running at once: two CPUs per pair, at most the CPUs of `nodes` (more pairs are
/// refused by [`pairs_model`]; the `running / pairs` share below stays 1 unless a one-CPU
/// machine runs its one pair on one CPU).
fn running_pairs(machine: &Machine, pairs: u32, nodes: NodeSpan) -> u32 {
    pairs.min(fitting_pairs(machine, nodes)).max(1)
}

/// Pairs that run at once on the CPUs of `nodes`: two CPUs each (at least one pair, which then
/// shares one CPU on a one-CPU machine).
fn fitting_pairs(machine: &Machine, nodes: NodeSpan) -> u32 {
    let cpus = nodes.nodes_on(machine) * machine.cpus_per_node();
    (cpus / 2).max(1)
}

/// Pairs sharing one LLC domain when `running` pairs spread evenly over the domains of `nodes`.
fn llc_sharers(machine: &Machine, running: u32, nodes: NodeSpan) -> u32 {
    let n = nodes.nodes_on(machine);
    let nodes_total = machine.topology.numa_nodes.value.max(1);
    let domains = (machine.llc_domains() * n / nodes_total).max(1);
    running.div_ceil(domains)
}

/// The workload parameters: the file's given work, else thread 004's fit or carry-over (see
/// the module docs).
fn work_params(w: &WorkloadSpec, machine: &Machine) -> Result<WorkloadParams> {
    if let Some(q) = w.op.work.quantity().filter(|q| q.basis != Basis::Fitted) {
        let ns = w.op.work.ns_at(machine.clock.base_ghz.value);
        if ns <= 0.0 {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.work",
                "a given fixed work per page must be > 0 (basis = \"fitted\" takes thread 004's)",
            ));
        }
        return Ok(netperf_params_given(machine, ns, &q.source));
    }
    if let Some(ns) = measured_work(w, machine)? {
        return Ok(ns);
    }
    if let Some(t) = w.op.work.fitted_table() {
        if t != TABLE_004 {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.work.table",
                format!("'{t}': kind producer-consumer fits its work per machine only to '{TABLE_004}'; drop the table to carry the fit over in cycles"),
            ));
        }
        netperf_params(machine)
    } else {
        netperf_params_carried_over(machine)
    }
}

/// The machine file's measured work for this workload (`work_ns_per_page`, written by `measure
/// work`), or `None`. Every key must name a built-in workload: a misspelt one would otherwise
/// be silently unused.
fn measured_work(w: &WorkloadSpec, machine: &Machine) -> Result<Option<WorkloadParams>> {
    if let Some(key) = machine
        .work_ns_per_page
        .keys()
        .find(|k| !crate::workload::registry::is_builtin_name(k))
    {
        return Err(Error::invalid(
            format!("machine {}", machine.name),
            format!("work_ns_per_page.{key}"),
            format!("'{key}' names no built-in workload (see `pcpmodel workloads`); `measure work` writes the workload that models the loop it timed"),
        ));
    }
    let found = std::iter::once(&w.name)
        .chain(w.like.as_ref())
        .find_map(|n| machine.work_ns_per_page.get(n).map(|s| (n, s)));
    Ok(found.map(|(n, s)| {
        netperf_params_given(
            machine,
            s.value,
            &format!("the machine file's work_ns_per_page.{n}, {}", s.source),
        )
    }))
}

impl Kind for ProducerConsumer {
    fn name(&self) -> &'static str {
        "producer-consumer"
    }
    fn description(&self) -> &'static str {
        "sender/receiver pairs: the sender allocates pages of one order, the receiver frees them; cost per page from where the receiver finds the payload lines (PCP reuse distance vs caches) and zone->lock line transfers (thread 004)"
    }
    fn mechanisms(&self) -> &'static [Mechanism] {
        // zone->lock enters as line transfers per hold and, between pairs, as a queue whose
        // slowdown scales the pair (crate::model::pairqueue); the per-zone outputs of the
        // ZoneLock mechanism (latency's) are the alloc-loop kind's.
        &[Mechanism::PcpDynamics, Mechanism::CacheReuse]
    }
    fn knobs(&self) -> &'static [&'static str] {
        KNOBS
    }
    fn fields_read(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "op.order",
            "op.alloc_pages",
            "op.free_pages",
            "op.freed_by",
            "op.placement",
            "op.work",
            "tasks.count",
            "tasks.nodes",
        ])
    }
    fn params_read(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "consumer_allocs_per_free",
            "free_run_pages",
            "af_unix_write_bytes",
            "receiver_free_share",
            "receiver_free_share_deferred",
        ])
    }
    fn param_ranges(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("consumer_allocs_per_free", CONSUMER_ALLOCS_PER_FREE),
            ("free_run_pages", FREE_RUN_PAGES),
            ("af_unix_write_bytes", AF_UNIX_WRITE_BYTES),
            ("receiver_free_share", RECEIVER_FREE_SHARE),
            ("receiver_free_share_deferred", RECEIVER_FREE_SHARE),
        ]
    }
    fn check(&self, w: &WorkloadSpec) -> Result<()> {
        super::require_params(w, &["consumer_allocs_per_free"])?;
        if w.op.freed_by.value != FreedBy::Partner {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.freed_by",
                format!(
                    "kind producer-consumer has the partner (the receiver) free every page; freed_by = {} is another kind's (alloc-loop: same or later)",
                    serde_json::to_string(&w.op.freed_by.value).unwrap_or_default()
                ),
            ));
        }
        super::require_every_page_freed(w)?;
        if w.op.work.quantity().is_none() {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.work",
                "missing: give ns or cycles per page, or basis = \"fitted\" for thread 004's calibration",
            ));
        }
        if let Some(q) = w.op.work.quantity().filter(|q| q.basis != Basis::Fitted) {
            if q.value <= 0.0 {
                return Err(Error::invalid(
                    format!("workload {}", w.name),
                    "op.work",
                    "a given fixed work per page must be > 0 (basis = \"fitted\" takes thread 004's)",
                ));
            }
        }
        if w.op.placement.is_none() {
            return Err(Error::invalid(
                format!("workload {}", w.name),
                "op.placement",
                "missing: kind producer-consumer places the receiver (smt, same-llc, cross-llc, cross-socket)",
            ));
        }
        Ok(())
    }

    fn predict(&self, w: &WorkloadSpec, machine: &Machine, k: &Knobs) -> Result<Predicted> {
        let PairsModel {
            reuse,
            pairs,
            running,
            sharers,
            nodes,
            capped_from,
        } = pairs_model(w, machine, k)?;
        let (model, wp, kernel, placement) =
            (&reuse.model, &reuse.params, reuse.kernel, reuse.placement);
        let default = default_pcp(machine, kernel)?;
        // Also checked by Workload::predict; kept here for the fit, which calls the kind.
        if let Some(h) = k.high {
            check_high("--high", h, machine, kernel)?;
        }
        let high = k.high.unwrap_or(reuse.kernel_high);
        // A `--high` is a sysctl-set high (the free_high trigger moves with it); without one the
        // kernel's default limits hold.
        let at = |m: &NetperfModel, q: &[f64]| match k.high {
            Some(h) => m.estimate(q, h),
            None => m.estimate_default(q, reuse.kernel_high),
        };
        let e = at(model, &wp.values)?;
        let q = pair_queue_of(
            w,
            machine,
            kernel,
            model.flow.order as u8,
            &e,
            running,
            nodes,
        )?;
        let slow = q.slowdown;
        let (site, site_why) = free_site_of(w, k, kernel);
        // 95 % interval from the same uncertainty optimal-high samples: the fitted (or
        // carried-over) workload parameters and the machine's latencies by provenance.
        let draws = wp.samples(200, 0x0F7_1A1);
        let mut rng = crate::fit::stats::SplitMix64::new(0x1A7E_5EED);
        let mut thr = Vec::with_capacity(draws.len());
        for q in &draws {
            let m = reuse.on(&perturb_latencies(machine, &mut rng))?;
            if let Ok(x) = at(&m, q) {
                thr.push(x.throughput_ops_per_s);
            }
        }
        let ci = [
            crate::fit::optimize::percentile(&thr, 2.5).unwrap_or(f64::NAN) / slow,
            crate::fit::optimize::percentile(&thr, 97.5).unwrap_or(f64::NAN) / slow,
        ];
        let d = &e.dynamics;
        let (rlo, rhi) = d.reuse.range_pages();
        let terms = Table::terms(
            format!(
                "{} on {} ({}), kernel {}.{}, pcp->high {high} pages",
                w.name,
                machine.name,
                placement.as_str(),
                kernel.major,
                kernel.minor
            ),
            "ns per 4 KiB page",
            &[
                ("fixed work", e.fixed_ns),
                ("lines in the consumer's private cache", e.private_ns),
                ("lines in the LLC", e.llc_ns),
                ("lines from DRAM", e.dram_ns),
                ("zone->lock / free-list transfers", e.lock_ns),
                ("struct pages of drained blocks", e.struct_page_ns),
                (
                    "zone->lock queueing behind other pairs",
                    e.ns_per_op * (slow - 1.0),
                ),
            ],
            e.ns_per_op * slow,
        );
        let h = &model.hierarchy;
        let mlp = crate::model::netperf::NetperfParams::from_slice(&wp.values).mlp_lines;
        let mut hits = Table::new(["level", "probability", "cost per page (ns)"]).titled(format!(
            "Where a reused line is found (cost: {})",
            h.level_cost_source(mlp)
        ));
        let per_page = h.level_page_ns(mlp);
        for (name, p, c) in [
            (
                "private (other core's L2, or shared L2 for SMT)",
                e.probs.private,
                per_page[0],
            ),
            ("LLC", e.probs.llc, per_page[1]),
            ("DRAM", e.probs.dram, per_page[2]),
        ] {
            hits.push([name.to_string(), format!("{p:.4}"), sig(c, 3)]);
        }
        let score = if wp.has_score {
            Some(e.score / slow)
        } else {
            None
        };
        let thr_pair = e.throughput_ops_per_s / slow;
        let ns_pair = e.ns_per_op * slow;
        let mbps = thr_pair * PAGE_BYTES as f64 * 8.0 / 1e6;
        let json = serde_json::json!({
            "machine": machine.name,
            "workload": w.name,
            "kernel": format!("{}.{}", kernel.major, kernel.minor),
            "placement": placement.as_str(),
            "high_pages": high,
            "order": model.flow.order,
            "batch_pages": model.flow.batch_pages,
            "pairs": pairs,
            "pairs_running": running,
            "pairs_per_llc_domain": sharers,
            "throughput_ops_per_s": thr_pair,
            "throughput_ci95_ops_per_s": ci,
            "ns_per_op": ns_pair,
            "zone_lock_queue": q,
            "op": "one 4 KiB page through producer and consumer",
            "score": score,
            "terms": {
                "fixed_ns": e.fixed_ns,
                "private_ns": e.private_ns,
                "llc_ns": e.llc_ns,
                "dram_ns": e.dram_ns,
                "lock_ns": e.lock_ns,
                "struct_page_ns": e.struct_page_ns,
                "queue_ns": e.ns_per_op * (slow - 1.0),
            },
            "hit_probabilities": e.probs,
            "reuse_distance_pages": { "mean": d.reuse.mean_pages(), "min": rlo, "max": rhi, "segments": d.reuse.segments },
            "drain_pages": d.drain_pages,
            "refill_pages": d.refill_pages,
            "regime": d.regime,
            "run": e.run,
            "free_site": { "cpu": site, "why": site_why },
            "parameters": wp,
            "kernel_default": default,
        });
        let mut notes = vec![
            format!(
                "throughput {} pages/s{} (95 % interval {}-{}, from the workload parameters' and latencies' uncertainty) = {} MB/s of payload ({} ns per page){}{}",
                sig(thr_pair, 4),
                // One pair's figure: with several, say so and give the sum the
                // operations/s line states (issue 35: the two read as disagreeing).
                if pairs > 1 { " per pair" } else { "" },
                sig(ci[0], 4),
                sig(ci[1], 4),
                sig(thr_pair * 4096.0 / 1e6, 4),
                sig(ns_pair, 4),
                score.map_or(String::new(), |s| format!(
                    "; predicted netperf score {}",
                    sig(s, 5)
                )),
                if pairs > 1 {
                    format!(
                        "; {pairs} pairs: {} pages/s in all",
                        // pairs x share = the pairs that run at once
                        sig(thr_pair * f64::from(running), 4)
                    )
                } else {
                    String::new()
                }
            ),
            format!(
                "reuse distance {}-{} pages (mean {}), drains of {} pages, refills of {} pages: {}",
                sig(rlo, 4),
                sig(rhi, 4),
                sig(d.reuse.mean_pages(), 4),
                d.drain_pages,
                d.refill_pages,
                d.regime
            ),
        ];
        if w.op.socket.is_some() {
            notes.push(format!(
                "freed by the {}: {site_why}",
                match site {
                    FreeSite::Sender => "sender's CPU",
                    FreeSite::Receiver => "receiver's CPU",
                }
            ));
            if let Some(n) = other_site_measured_share(w, k, site) {
                notes.push(n);
            }
        }
        notes.push(match &wp.source {
            WorkloadSource::Fitted { data } => format!(
                "fixed work {} ns/page fitted to {data}",
                sig(wp.values[1], 4)
            ),
            WorkloadSource::Given { source } => format!(
                "fixed work {} ns/page given ({source}); no score scale",
                sig(wp.values[1], 4)
            ),
            WorkloadSource::CarriedOver { from } => format!(
                "no {} measurements for {}: fixed work carried over as {} cycles/page from {} (geometric mean; spread propagated); no score scale",
                w.op.work.fitted_table().unwrap_or(&w.name),
                machine.name,
                sig(wp.fixed_cycles, 4),
                from.join(", ")
            ),
        });
        if let Some((bytes, orders)) = af_unix_write_orders(w) {
            notes.push(format!(
                "a {bytes} B write() on an AF_UNIX stream is frags of orders {orders:?} (crate::kernel::skb): the reuse distance and the zone->lock holds per page mix each order's by its pages (an order's refill chunk lasts as many writes as it holds blocks); the drain and refill sizes shown are order {}'s",
                model.flow.order
            ));
        }
        if let Some(asked) = capped_from {
            notes.push(format!(
                "{pairs} pairs: the workload file's tasks.count {asked} is more than {} runs at once (two CPUs a pair, {} CPUs on the node(s) used); pairs time-sharing CPUs are not modelled, so the {pairs} that fit are (--tasks sets the number)",
                machine.name,
                nodes.nodes_on(machine) * machine.cpus_per_node()
            ));
        }
        // Pairs beyond the CPUs time-share them: each runs running/pairs of the time.
        let share = f64::from(running) / f64::from(pairs);
        if running < pairs {
            notes.push(format!(
                "{pairs} pairs on {} CPUs: {running} run at once, each pair gets {:.2} of a CPU pair (context switches not modelled)",
                2 * running,
                share
            ));
        }
        if pairs > 1 {
            notes.push(format!(
                "{pairs} pairs, {} per LLC domain sharing its capacity evenly (assumed); {} pairs per zone queue on its zone->lock: each pair runs {:.3}x slower than alone (lock utilisation {:.3}, {:.1} % of the pairs' busy CPU time waiting; crate::model::pairqueue); shared memory bandwidth is not modelled",
                sharers,
                q.pairs_per_zone,
                slow,
                q.utilisation,
                100.0 * q.contention,
            ));
        }
        let mut outputs = vec![
            ("throughput_mbps".to_string(), mbps * share),
            (
                "throughput_mbps_total".to_string(),
                mbps * f64::from(running),
            ),
            ("throughput_ci95_lo_ops_per_s".to_string(), ci[0]),
            ("throughput_ci95_hi_ops_per_s".to_string(), ci[1]),
            ("high_pages".to_string(), f64::from(high)),
            ("fixed_ns".to_string(), e.fixed_ns),
            ("private_ns".to_string(), e.private_ns),
            ("llc_ns".to_string(), e.llc_ns),
            ("dram_ns".to_string(), e.dram_ns),
            ("lock_ns".to_string(), e.lock_ns),
            ("struct_page_ns".to_string(), e.struct_page_ns),
            ("queue_ns".to_string(), e.ns_per_op * (slow - 1.0)),
            ("queue_slowdown".to_string(), slow),
            ("zone_lock_utilisation".to_string(), q.utilisation),
            ("reuse_distance_pages".to_string(), d.reuse.mean_pages()),
            ("pcp_pages_held".to_string(), d.pages_held()),
        ];
        if let (Some(f), Some(r)) = (e.run, model.run) {
            outputs.extend([
                ("run_seconds".to_string(), r.seconds),
                ("run_start_pages".to_string(), r.start_pages),
                ("run_fill_pages".to_string(), f.fill_pages),
                ("run_backing_share".to_string(), f.backing_share),
                (
                    "steady_ns_per_op".to_string(),
                    f.steady_ns_per_page * slow / share,
                ),
            ]);
            notes.push(if machine.memory.backing_ns_per_page.is_none() {
                format!(
                    "a {} s run from {:.0} pages on the lists: machine {} has no memory.backing_ns_per_page (bare metal, or not measured: `measure backing`), so growing the lists by {:.0} pages costs nothing beyond the steady state",
                    r.seconds, r.start_pages, machine.name, f.fill_pages
                )
            } else {
                format!(
                    "a {} s run from {:.0} pages on the lists: they grow by {:.0} pages, each {:.0} ns more where the host dropped it (memory.backing_ns_per_page); {:.1} % of the run goes to that{}, {:.0} ns per page against {:.0} at the steady state (the terms above are the steady state's)",
                    r.seconds,
                    r.start_pages,
                    f.fill_pages,
                    r.backing_ns_per_page,
                    100.0 * f.backing_share,
                    if f.filled { "" } else { " and the lists are still growing when it ends" },
                    f.run_ns_per_page,
                    f.steady_ns_per_page
                )
            });
        }
        // free_high on every kernel (0 where it does not fire, a predicted zero): the same
        // keys whatever the kernel.
        let f = &model.flow;
        let (fh_share, fh_per_page) = if f.free_high {
            // --free-high: every free drains the list, which holds its own block.
            (1.0, 1.0 / f64::from(1u32 << f.order.min(20)))
        } else if f.free_high_share > 0.0 {
            // Drains per page freed = pages drained early per page / pages per drain.
            (
                f.free_high_share,
                f.free_high_share / f.free_high_pages_per_event,
            )
        } else {
            (0.0, 0.0)
        };
        outputs.push(("free_high_share".to_string(), fh_share));
        outputs.push(("free_high_events_per_page".to_string(), fh_per_page));
        outputs.push((
            "free_high_events_per_s".to_string(),
            fh_per_page * thr_pair * f64::from(running),
        ));
        if let Some(s) = score {
            outputs.insert(0, ("score".to_string(), s));
        }
        Ok(Predicted {
            op: w.op.what.clone(),
            ns_per_op: ns_pair / share,
            throughput_per_task: thr_pair * share,
            throughput_total: thr_pair * f64::from(running),
            tasks: pairs,
            zones: Vec::new(),
            outputs,
            report: Report {
                json,
                tables: vec![terms, hits],
                notes,
            },
        })
    }

    fn reuse_model(&self, w: &WorkloadSpec, m: &Machine, k: &Knobs) -> Result<ReuseModel> {
        Ok(pairs_model(w, m, k)?.reuse)
    }

    fn native_fit(&self, w: &WorkloadSpec, m: &Machine) -> Result<Option<Box<dyn FitModel>>> {
        let setup = Setup {
            placement: super::placement(w, &Knobs::default())?.into(),
            kernel: w.reference_kernel()?,
            order: w.op.order.value,
            consumer_allocs_per_free: w.param("consumer_allocs_per_free")?,
            batch: None,
            scale_max: None,
            free_high: false,
            free_run_pages: free_run_pages(
                w,
                &Knobs::default(),
                w.param("consumer_allocs_per_free")?,
                w.op.order.value,
            )?,
            free_high_threshold: None,
            high: None,
            sharers: 1,
            receiver_share: receiver_share(
                w,
                &Knobs::default(),
                free_site_of(w, &Knobs::default(), w.reference_kernel()?).0,
            )?,
            frag_blocks: frag_blocks(w),
        };
        Ok(Some(Box::new(setup.model(m)?)))
    }

    fn native_columns(&self) -> &'static [(&'static str, crate::bounds::Range)] {
        &[
            ("pcp_high_pages", crate::bounds::PCP_HIGH_PAGES),
            ("score", crate::bounds::MEASURED_RATE),
        ]
    }

    fn native_default_fixed(&self) -> &'static [&'static str] {
        &crate::model::netperf::DEFAULT_FIXED
    }
}
