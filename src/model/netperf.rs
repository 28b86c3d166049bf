//! The composed throughput model for thread 004's netperf workload (a producer CPU allocating
//! page frags, a consumer CPU freeing them), as a function of the consumer's pcp->high.
//!
//! # Equation (per 4 KiB base page of payload)
//! ```text
//!   ns_per_page = fixed_ns                                  (protocol work, copies at cache speed)
//!               + page_access_ns(high)                      (cache::page_access_cost: private / LLC / DRAM)
//!               + lock_lines · c2c_ns · (holds_drain + holds_refill)   (zone->lock and free-list lines
//!                                                             bouncing between the two CPUs, per page)
//!               + drained_blocks_per_page · (P_llc · llc_ns + P_dram · dram_ns)(age)
//!                                                            (a drained block's struct page, untouched
//!                                                             for its age on the list: one miss per block)
//!   score       = score_scale / ns_per_page
//! ```
//! `fixed_ns` and `score_scale` are the two per-machine free parameters (the benchmark's units and
//! the protocol work are not physics we can derive); everything that makes the curve bend (cache
//! capacities, ways, inclusion policy, latencies, the kernel's drain/refill rules) comes from the
//! machine file and the kernel module and is not fitted.
//!
//! # Carrying the workload over to machines without measurements
//! The shape of the curve depends on `fixed_ns` only through the ratio of memory cost to fixed
//! work. For an unmeasured machine `fixed_ns` is taken from the measured machines in *cycles* per
//! page (`fixed_ns · base_ghz`), using their mean and spread as the uncertainty. `score_scale`
//! does not affect the optimum.

use serde::Serialize;

use crate::error::Result;
use crate::model::cache::{hit_probs, page_access_cost, Hierarchy, HitProbs, PageAccessCost};
use crate::model::freehigh::{trigger, TriggerInput};
use crate::model::pcp::{dynamics, Dynamics, Flow};

/// Misses a drained block's struct-page lines cost: `__free_one_page()` reads the block's own
/// struct page, its buddy's and the order+1 buddy's, independent loads whose misses overlap.
/// Assumed ([`crate::assumptions`]).
pub const STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK: f64 = 1.0;

/// Parameters of the netperf model (physical units in the names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NetperfParams {
    /// Benchmark score × ns per page (score = score_scale / ns_per_page).
    pub score_scale: f64,
    /// Work per 4 KiB page that does not depend on where the page's lines are, ns.
    pub fixed_ns: f64,
    /// Line requests in flight while streaming a page.
    pub mlp_lines: f64,
    /// Cache lines that move between the two CPUs per zone->lock hold.
    pub lock_lines_per_hold: f64,
    /// Other data resident in the caches that the page data cannot use, pages.
    pub resident_pages: f64,
}

impl NetperfParams {
    /// Defaults: `mlp_lines` 10, `lock_lines_per_hold` 3, no resident data; the two fitted values
    /// must be supplied.
    pub fn with_fitted(score_scale: f64, fixed_ns: f64) -> Self {
        NetperfParams {
            score_scale,
            fixed_ns,
            mlp_lines: crate::assumptions::value("netperf::mlp_lines", 10.0),
            lock_lines_per_hold: crate::assumptions::value("netperf::lock_lines_per_hold", 3.0),
            resident_pages: 0.0,
        }
    }
}

/// The model's estimate with every term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetperfEstimate {
    /// Predicted benchmark score (same units as the measurements the scale was fitted on).
    pub score: f64,
    /// Pages per second through the producer → consumer pipeline.
    pub throughput_ops_per_s: f64,
    /// ns per 4 KiB page (one "op").
    pub ns_per_op: f64,
    /// Term: fixed work, ns per page.
    pub fixed_ns: f64,
    /// Term: lines found in the consumer's private cache, ns per page.
    pub private_ns: f64,
    /// Term: lines found in the LLC, ns per page.
    pub llc_ns: f64,
    /// Term: lines fetched from DRAM, ns per page.
    pub dram_ns: f64,
    /// Term: zone->lock and free-list line transfers, ns per page.
    pub lock_ns: f64,
    /// Term: drained blocks' struct-page lines found outside the drainer's L2, ns per page.
    pub struct_page_ns: f64,
    /// Hit-level probabilities of a reused line.
    pub probs: HitProbs,
    /// The PCP dynamics (drain/refill sizes, reuse distance).
    pub dynamics: Dynamics,
    /// A run of finite length ([`NetperfModel::run`]): its fill, whose cost the score,
    /// throughput and ns per op above include (the terms are the steady state's).
    pub run: Option<crate::model::fill::RunFill>,
}

/// Predicts the netperf score for one flow on one hierarchy.
pub fn predict(h: &Hierarchy, flow: &Flow, p: &NetperfParams) -> Result<NetperfEstimate> {
    let dynamics = dynamics(flow)?;
    let access: PageAccessCost =
        page_access_cost(h, &dynamics.reuse, p.resident_pages, p.mlp_lines);
    // The lock word and list heads are written by the other CPU: a modified-line transfer, even
    // behind an inclusive LLC.
    let lock_ns = p.lock_lines_per_hold
        * h.c2c_ns
        * (dynamics.drain_holds_per_page() + dynamics.refill_holds_per_page);
    // A drained block's struct page: `__free_one_page()` writes it (and reads its buddy's and
    // the order+1 buddy's, independent loads that overlap with it) under zone->lock, one miss
    // per block at the level where a line untouched for the block's age on the list is found.
    // An L2 hit, the drainer's own line, costs a few ns and is left out.
    let age = hit_probs(h, &dynamics.drain_age, p.resident_pages);
    let misses = crate::assumptions::value(
        "netperf::STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK",
        STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK,
    );
    let struct_page_ns =
        dynamics.drained_blocks_per_page * misses * (age.llc * h.llc_ns + age.dram * h.dram_ns);
    let ns = p.fixed_ns + access.total_ns + lock_ns + struct_page_ns;
    Ok(NetperfEstimate {
        score: p.score_scale / ns,
        throughput_ops_per_s: 1e9 / ns,
        ns_per_op: ns,
        fixed_ns: p.fixed_ns,
        private_ns: access.private_ns,
        llc_ns: access.llc_ns,
        dram_ns: access.dram_ns,
        lock_ns,
        struct_page_ns,
        probs: access.probs,
        dynamics,
        run: None,
    })
}

/// Names of the model's parameters, in `FitModel` order.
pub const PARAM_NAMES: [&str; 5] = [
    "score_scale",
    "fixed_ns",
    "mlp_lines",
    "lock_lines_per_hold",
    "resident_pages",
];

/// Parameters that are physical and held fixed unless the user frees them (`fit --free NAME`).
pub const DEFAULT_FIXED: [&str; 3] = ["mlp_lines", "lock_lines_per_hold", "resident_pages"];

impl NetperfParams {
    /// From a parameter vector in [`PARAM_NAMES`] order.
    pub fn from_slice(p: &[f64]) -> NetperfParams {
        let g = |i: usize, d: f64| p.get(i).copied().unwrap_or(d);
        NetperfParams {
            score_scale: g(0, 1.0),
            fixed_ns: g(1, 500.0),
            mlp_lines: g(2, 10.0),
            lock_lines_per_hold: g(3, 3.0),
            resident_pages: g(4, 0.0),
        }
    }

    /// As a vector in [`PARAM_NAMES`] order.
    pub fn to_vec(&self) -> Vec<f64> {
        vec![
            self.score_scale,
            self.fixed_ns,
            self.mlp_lines,
            self.lock_lines_per_hold,
            self.resident_pages,
        ]
    }
}

/// The netperf-vs-pcp->high model on one machine and placement, as a [`crate::fit::FitModel`]:
/// input `high_pages`, target `score`.
#[derive(Debug, Clone)]
pub struct NetperfModel {
    /// The machine's hierarchy for the placement.
    pub hierarchy: Hierarchy,
    /// Flow template; `high_pages` is replaced by each row's input.
    pub flow: Flow,
    /// Base clock of the machine, GHz (to express `fixed_ns` in cycles).
    pub base_ghz: f64,
    /// The consumer's free_high trigger at the kernel's default limits
    /// ([`crate::model::freehigh`]), when the flow's frees come in runs that can fire it. Each
    /// high [`NetperfModel::estimate`] is asked about is a high set through the sysctl, so the
    /// trigger is evaluated again there: the list's high, and from 6.7 `high_min` equal to it
    /// (`vm.percpu_pagelist_high_fraction` pins high_min and high_max to the set value), which
    /// moves 6.16's threshold `batch + high_min / 2`.
    pub free_high_rule: Option<TriggerInput>,
    /// A run of finite length instead of the steady state ([`crate::model::fill`]): every
    /// estimate then prices the lists' growth from the run's start to that setting's steady
    /// size.
    pub run: Option<crate::model::fill::RunSpec>,
}

impl NetperfModel {
    /// The kernel rule that governs the flow, in words (the PCP dynamics' regime at the flow's
    /// own high), or why it could not be derived.
    pub fn flow_regime(&self) -> String {
        match dynamics(&self.flow) {
            Ok(d) => d.regime,
            Err(e) => format!("no regime: {e}"),
        }
    }

    /// Predicts one high set through the sysctl (`vm.percpu_pagelist_high_fraction`), with a
    /// parameter vector in [`PARAM_NAMES`] order: the free_high trigger, where the flow has one,
    /// is evaluated at that high ([`NetperfModel::free_high_rule`]).
    pub fn estimate(&self, params: &[f64], high_pages: u32) -> Result<NetperfEstimate> {
        let mut f = self.flow;
        f.high_pages = high_pages;
        if let Some(rule) = &self.free_high_rule {
            let mut x = *rule;
            x.high_pages = high_pages;
            if x.kernel.era().auto_tunes_high() {
                x.high_min_pages = high_pages;
            }
            let t = trigger(&x)?;
            f.free_high_share = t.share;
            f.free_high_pages_per_event = t.pages_per_event;
        }
        Ok(self.priced(predict(
            &self.hierarchy,
            &f,
            &NetperfParams::from_slice(params),
        )?))
    }

    /// `e` as a run of [`NetperfModel::run`], where one is set: the lists grow from the run's
    /// start to `e`'s steady size, each page at the host's backing cost.
    fn priced(&self, mut e: NetperfEstimate) -> NetperfEstimate {
        if let Some(r) = self.run {
            let f = crate::model::fill::run_fill(
                e.ns_per_op,
                e.dynamics.pages_held() - r.start_pages,
                r.backing_ns_per_page,
                r.seconds,
            );
            let k = f.steady_ns_per_page / f.run_ns_per_page;
            e.ns_per_op = f.run_ns_per_page;
            e.throughput_ops_per_s *= k;
            e.score *= k;
            e.run = Some(f);
        }
        e
    }

    /// Predicts the kernel's default setting: the list at `kernel_high` (the fixed high, or the
    /// live high auto-tuning settles at) under the default limits, whose free_high trigger the
    /// flow already carries.
    pub fn estimate_default(&self, params: &[f64], kernel_high: u32) -> Result<NetperfEstimate> {
        let mut f = self.flow;
        f.high_pages = kernel_high;
        Ok(self.priced(predict(
            &self.hierarchy,
            &f,
            &NetperfParams::from_slice(params),
        )?))
    }
}

impl crate::fit::FitModel for NetperfModel {
    fn name(&self) -> &str {
        "netperf-pcp-high"
    }

    fn params(&self) -> Vec<crate::fit::ParamSpec> {
        use crate::fit::ParamSpec;
        vec![
            ParamSpec::new("score_scale", "score*ns/page", 1.0e8)
                .with_bounds(1.0, 1.0e15)
                .with_provenance("assumed: free per machine; the benchmark's score units are not given")
                .with_description("score = score_scale / ns_per_page"),
            ParamSpec::new("fixed_ns", "ns/page", 500.0)
                .with_bounds(1.0, 1.0e5)
                .with_provenance("assumed: free per machine; protocol work per 4 KiB page is not derived")
                .with_description("work per page that does not depend on where its lines are"),
            ParamSpec::new("mlp_lines", "lines", crate::assumptions::value("netperf::mlp_lines", 10.0))
                .with_bounds(1.0, 48.0)
                .with_provenance(
                    "assumed: line requests in flight streaming a page; Skylake 10-12 and Ice Lake 16 L1D fill buffers (Intel optimization manual)",
                )
                .with_description("memory-level parallelism; degenerate with fixed_ns and score_scale on one machine"),
            ParamSpec::new("lock_lines_per_hold", "lines", crate::assumptions::value("netperf::lock_lines_per_hold", 3.0))
                .with_bounds(0.0, 16.0)
                .with_provenance(
                    "assumed: zone->lock word, free_area list head and the zone's NR_FREE_PAGES counter move between the CPUs per hold",
                )
                .with_description("modified lines transferred per zone->lock hold"),
            ParamSpec::new("resident_pages", "pages", 0.0)
                .with_bounds(0.0, 1.0e6)
                .with_provenance("assumed: page data dominates what the consumer touches")
                .with_description("other data resident in the caches, 4 KiB pages"),
        ]
    }

    fn inputs(&self) -> Vec<crate::fit::InputSpec> {
        vec![crate::fit::InputSpec::new("pcp_high_pages", "pages")]
    }

    fn target(&self) -> crate::fit::TargetSpec {
        crate::fit::TargetSpec::new("score", "benchmark score")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let h = x.first().copied().unwrap_or(f64::NAN);
        if !(h.is_finite() && h >= 0.0 && h <= f64::from(u32::MAX)) {
            return Err(crate::Error::invalid(
                "netperf model",
                "pcp_high_pages",
                format!("{h} is not a page count"),
            ));
        }
        Ok(self.estimate(params, h.round() as u32)?.score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::version::KernelVersion;
    use crate::model::cache::Placement;

    #[test]
    fn drained_struct_pages_cost_misses_only_once_the_list_outgrows_the_caches() {
        // Ice Lake server (1.25 MiB L2, 48 MiB LLC per socket): a list of 252 pages drains
        // blocks freed moments before (L2), one of 60,000 pages (234 MiB) blocks whose struct
        // pages left the caches, one DRAM miss per 8-page block.
        let m = crate::hw::machine::Machine::builtin("icelake-server").unwrap();
        let h = Hierarchy::from_machine(&m, Placement::SameLlc).unwrap();
        let p = NetperfParams::with_fitted(1.0e8, 500.0);
        let mut f = Flow::netperf_004(KernelVersion::new(5, 17), 252);
        f.consumer_allocs_per_free = 1.0;
        let small = predict(&h, &f, &p).unwrap();
        f.high_pages = 60_000;
        let large = predict(&h, &f, &p).unwrap();
        assert!(small.struct_page_ns < 1.0, "{}", small.struct_page_ns);
        // Within 1 %: the survival's tail past 5x the caches.
        assert!(
            (large.struct_page_ns - h.dram_ns / 8.0).abs() <= 0.01 * h.dram_ns / 8.0,
            "{} vs {}",
            large.struct_page_ns,
            h.dram_ns / 8.0
        );
    }
}
