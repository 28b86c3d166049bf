//! Cache-hierarchy model: where a reused line is found, and what fetching it costs.
//!
//! # Question
//! A page freed by the *consumer* CPU is later allocated and written by the *producer* CPU. Between
//! the free and the reuse the consumer touched `D` other pages (the reuse distance, from
//! [`crate::model::pcp`]). Where are the page's lines when the producer writes them, and what does
//! each line cost?
//!
//! # Survival of a line in a set-associative cache
//! A cache of capacity `C` pages with `W` ways has `S = C·64/W` sets per 4 KiB page of lines; page
//! frames are spread over the sets by their physical address (and by the slice hash in an LLC). After
//! `D` further distinct pages pass through, the number of newer lines that landed in our line's set is
//! Binomial(`64·D`, `1/S_lines`) ≈ Poisson(λ = `W·D/C`). With LRU-like replacement the line survives
//! while fewer than `W` newer lines share its set:
//!
//! ```text
//!     s(D; C, W) = P[Poisson(W·D/C) ≤ W − 1]
//! ```
//!
//! This is a smooth step centred just below `D = C` whose relative width is about `1/√W`: the
//! smoothing comes from the associativity and address spread, not from a tuning knob. For `D`
//! uniform on `[a, b)` the average has a closed form, because
//! `∫₀^Λ P[Poisson(λ) ≤ W−1] dλ = E[min(N_Λ, W)]` with `N_Λ ~ Poisson(Λ)`:
//!
//! ```text
//!     s̄(a, b) = (E[min(N_{kb}, W)] − E[min(N_{ka}, W)]) / (k (b − a)),   k = W / C
//! ```
//!
//! which costs O(W) per evaluation (a full sweep of pcp->high stays cheap).
//!
//! # Levels and capacities
//! - **private**: the line is still in the consumer core's private L2 (for SMT siblings: in the L2
//!   they share). Capacity: the L2 minus the resident footprint of other data.
//! - **LLC**: the line left the L2 but is still in the last-level cache the producer can reach. For a
//!   *victim* (or non-inclusive, filled-by-eviction) LLC the lines enter the LLC when the L2 evicts
//!   them, so the distinct capacity in front of DRAM is `L2 + LLC`; for an *inclusive* LLC every
//!   line in an L2 is also in the LLC, so the capacity is the LLC alone.
//! - **DRAM**: neither.
//!
//! `P(private) = s(D; C₂, W₂)`, `P(any cache) = max(P(private), s(D; C_total, W_llc))`,
//! `P(LLC) = P(any cache) − P(private)`, `P(DRAM) = 1 − P(any cache)`.
//!
//! # Cost per line, by placement of producer and consumer
//! | placement | private | LLC | DRAM |
//! |---|---|---|---|
//! | SMT siblings | L2 hit | LLC hit | local DRAM |
//! | same LLC domain, inclusive LLC | LLC hit (the LLC holds a clean copy and serves it; the invalidation of the consumer's copy overlaps) | LLC hit | local DRAM |
//! | same LLC domain, victim / non-inclusive LLC | core-to-core (the LLC has no copy: the owner core is snooped) | LLC hit | local DRAM |
//! | different LLC domains | cross-domain c2c | cross-domain c2c (the line sits in the consumer's domain LLC) | local DRAM |
//! | different sockets | cross-socket c2c | cross-socket c2c (remote LLC) | local DRAM (the page's home is the producer's node) |
//!
//! # Memory-level parallelism
//! Writing a 4 KiB page is a stream of `64` line requests (RFOs) that the core overlaps: with `m`
//! requests in flight (bounded by the L1D fill buffers; the L2 streamer prefetches ahead) the page
//! costs `64 · latency / m`. `m` multiplies every memory term alike, so when the fixed cost per page
//! is fitted, `m` only sets the physical reading of that fixed cost; it does not change the shape of a
//! curve. The default (10 lines) is between the 10–12 fill buffers of Skylake and the 16 of Ice Lake.
//!
//! # Validity
//! Single producer/consumer pair on an otherwise quiet machine; page data dominates what the
//! consumer touches; replacement is LRU-like (Intel's adaptive LLC policies and AMD's are close
//! enough for a smooth step); lines are written whole (RFO), so a private copy in the consumer's L2
//! is clean (read-only there).
//!
//! # References
//! Seed 004 (Aaron Lu, 2022-06): "core-2-core transfer latency is usually at ~50ns while llc load
//! latency is ~20ns on server machine", "dram, which is usually 80+ns"; Huang Ying: "The size of the
//! private L2 cache of SKL server is much larger than that of SKL client". Intel's description of the
//! Skylake-SP non-inclusive LLC with a snoop filter (Intel Xeon Scalable platform brief, 2017).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::{Machine, Policy};

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;

/// Where producer and consumer run relative to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Two hardware threads of one core: they share the L1 and L2.
    Smt,
    /// Two cores sharing one LLC domain (a socket on Intel, a CCD on AMD Zen).
    SameLlc,
    /// Two cores of one socket in different LLC domains (AMD CCDs).
    CrossLlc,
    /// Two cores on different sockets.
    CrossSocket,
}

impl Placement {
    /// The command-line spelling (`smt`, `same-llc`, `cross-llc`, `cross-socket`).
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Smt => "smt",
            Placement::SameLlc => "same-llc",
            Placement::CrossLlc => "cross-llc",
            Placement::CrossSocket => "cross-socket",
        }
    }
}

/// Whether the cost models can use `machine`: its cache hierarchy builds for the default
/// placement (two cores sharing an LLC domain, [`Placement::SameLlc`]). `pcpmodel detect` and
/// `pcpmodel measure` check a detected machine with it before offering it.
pub fn check_modelled(machine: &Machine) -> Result<()> {
    Hierarchy::from_machine(machine, Placement::SameLlc).map(|_| ())
}

/// The cache levels and per-line costs that matter for one producer/consumer placement on one
/// machine. Capacities in 4 KiB pages, latencies in ns per line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hierarchy {
    /// Placement this hierarchy was built for.
    pub placement: Placement,
    /// Private (consumer-side) cache capacity, pages: the L2 (shared by SMT siblings).
    pub private_pages: f64,
    /// Associativity of the private cache.
    pub private_ways: f64,
    /// Distinct capacity in front of DRAM, pages (L2 + LLC for a victim LLC, LLC if inclusive).
    pub any_cache_pages: f64,
    /// Associativity of the LLC.
    pub llc_ways: f64,
    /// LLC inclusion policy.
    pub llc_policy: Policy,
    /// Cost of a line found in the private level, ns.
    pub private_ns: f64,
    /// Cost of a line found in the LLC, ns.
    pub llc_ns: f64,
    /// Cost of a line fetched from DRAM, ns.
    pub dram_ns: f64,
    /// Transfer of a *modified* line between the producer and consumer cores, ns (what a lock
    /// word or a list head costs when the other CPU wrote it last).
    pub c2c_ns: f64,
    /// Cache-line size, bytes.
    pub line_bytes: f64,
    /// The machine's measured cost of writing a reused page by level (private, LLC, DRAM), ns
    /// per page, where the machine file has it for this placement
    /// ([`crate::hw::machine::ReuseCosts`]); it replaces `lines x latency / lines in flight`.
    pub measured_page_ns: Option<[f64; 3]>,
}

impl Hierarchy {
    /// Builds the hierarchy of `machine` for `placement`. Fails when the machine cannot host the
    /// placement (e.g. `cross-socket` on one socket, `smt` without SMT, `cross-llc` with one LLC
    /// domain per socket).
    pub fn from_machine(machine: &Machine, placement: Placement) -> Result<Hierarchy> {
        let label = format!("machine {}", machine.name);
        let l2 = machine
            .l2()
            .ok_or_else(|| Error::invalid(&label, "cache", "no level-2 cache"))?;
        let llc = machine
            .llc()
            .ok_or_else(|| Error::invalid(&label, "cache", "no cache levels"))?;
        if llc.level <= 2 {
            return Err(Error::invalid(&label, "cache", "no cache level beyond L2"));
        }
        let t = &machine.topology;
        let lat = &machine.latency_ns;
        let page_kib = PAGE_BYTES as f64 / 1024.0;
        let l2_pages = l2.size_kib.value as f64 / page_kib;
        // The machine's measured reuse costs are of two cores of one LLC domain: that placement
        // only. They were fitted at the capacity they carry (a VM's share of the host's LLC),
        // else at the nominal size.
        let measured = machine
            .reuse_ns_per_page
            .as_ref()
            .filter(|_| placement == Placement::SameLlc);
        let measured_llc_kib = measured.and_then(|r| r.llc_kib.as_ref()).map(|s| s.value);
        let llc_pages = measured_llc_kib.unwrap_or(llc.size_kib.value as f64) / page_kib;
        let policy = llc.policy.value;
        let any = match policy {
            Policy::Inclusive => llc_pages,
            Policy::Victim | Policy::NonInclusive | Policy::Private => llc_pages + l2_pages,
        };
        let need = |o: &Option<crate::Sourced<f64>>, field: &str| -> Result<f64> {
            o.as_ref().map(|s| s.value).ok_or_else(|| {
                Error::Unsupported(format!(
                    "placement {} needs latency_ns.{field}, which machine {} does not have",
                    placement.as_str(),
                    machine.name
                ))
            })
        };
        let (private_ns, llc_ns, c2c_ns) = match placement {
            Placement::Smt => {
                if t.threads_per_core.value < 2 {
                    return Err(Error::Unsupported(format!(
                        "placement smt needs SMT; machine {} has 1 thread per core",
                        machine.name
                    )));
                }
                (lat.l2_hit.value, lat.llc_hit.value, lat.c2c_smt.value)
            }
            Placement::SameLlc => {
                let cores = u64::from(t.sockets.value) * u64::from(t.cores_per_socket.value);
                let domains =
                    u64::from(t.sockets.value) * u64::from(t.llc_domains_per_socket.value);
                if cores < 2 * domains.max(1) {
                    return Err(Error::Unsupported(format!(
                        "placement same-llc needs two cores in an LLC domain; machine {} has {} core(s) per LLC domain",
                        machine.name,
                        cores / domains.max(1)
                    )));
                }
                let private =
                    crate::model::lines::from_other_core_ns(machine, lat.c2c_same_llc.value);
                (private, lat.llc_hit.value, lat.c2c_same_llc.value)
            }
            Placement::CrossLlc => {
                if t.llc_domains_per_socket.value < 2 {
                    return Err(Error::Unsupported(format!(
                        "placement cross-llc needs several LLC domains per socket; machine {} has one",
                        machine.name
                    )));
                }
                let x = need(&lat.c2c_cross_llc, "c2c_cross_llc")?;
                (x, x, x)
            }
            Placement::CrossSocket => {
                if t.sockets.value < 2 {
                    return Err(Error::Unsupported(format!(
                        "placement cross-socket needs two sockets; machine {} has one",
                        machine.name
                    )));
                }
                let x = need(&lat.c2c_cross_socket, "c2c_cross_socket")?;
                (x, x, x)
            }
        };
        Ok(Hierarchy {
            placement,
            private_pages: l2_pages,
            private_ways: l2.ways.value as f64,
            any_cache_pages: any,
            llc_ways: llc.ways.value as f64,
            llc_policy: policy,
            private_ns,
            llc_ns,
            dram_ns: lat.dram_local.value,
            c2c_ns,
            line_bytes: l2.line_bytes.value as f64,
            measured_page_ns: measured.map(|r| [r.private.value, r.llc.value, r.dram.value]),
        })
    }

    /// Lines in a 4 KiB page.
    pub fn lines_per_page(&self) -> f64 {
        PAGE_BYTES as f64 / self.line_bytes
    }

    /// Cost of writing a reused page whose lines are all at one level (private, LLC, DRAM), ns
    /// per page: the machine's measured costs where it has them, else `lines x latency /
    /// mlp_lines`.
    pub fn level_page_ns(&self, mlp_lines: f64) -> [f64; 3] {
        self.measured_page_ns.unwrap_or_else(|| {
            let scale = self.lines_per_page() / mlp_lines.max(1.0);
            [
                scale * self.private_ns,
                scale * self.llc_ns,
                scale * self.dram_ns,
            ]
        })
    }

    /// Where [`Hierarchy::level_page_ns`] comes from, in words.
    pub fn level_cost_source(&self, mlp_lines: f64) -> String {
        if self.measured_page_ns.is_some() {
            "measured per page (the machine file's reuse_ns_per_page)".into()
        } else {
            format!(
                "latency x {:.0} lines / {mlp_lines} in flight",
                self.lines_per_page()
            )
        }
    }
}

/// One component of a reuse distance distribution: `D = offset + X + Y` with `X ~ U[0, a)` and
/// `Y ~ U[0, b)` independent (a trapezoid; a uniform when one width is 0; a point when both are).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Segment {
    /// Probability of this component.
    pub weight: f64,
    /// Smallest distance, pages.
    pub offset_pages: f64,
    /// Width of the first uniform, pages.
    pub a_pages: f64,
    /// Width of the second uniform, pages.
    pub b_pages: f64,
}

/// Reuse distance distribution: a mixture of [`Segment`]s, in 4 KiB pages touched by the
/// consumer between a page's free and its reuse by the producer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReuseDist {
    /// Components; weights sum to 1.
    pub segments: Vec<Segment>,
}

impl ReuseDist {
    /// A single uniform on `[lo, hi)` pages (a point mass when `lo == hi`).
    pub fn uniform(lo_pages: f64, hi_pages: f64) -> ReuseDist {
        let (lo, hi) = if lo_pages <= hi_pages {
            (lo_pages, hi_pages)
        } else {
            (hi_pages, lo_pages)
        };
        ReuseDist {
            segments: vec![Segment {
                weight: 1.0,
                offset_pages: lo.max(0.0),
                a_pages: hi.max(0.0) - lo.max(0.0),
                b_pages: 0.0,
            }],
        }
    }

    /// Mean reuse distance, pages.
    pub fn mean_pages(&self) -> f64 {
        self.segments
            .iter()
            .map(|s| s.weight * (s.offset_pages + 0.5 * (s.a_pages + s.b_pages)))
            .sum()
    }

    /// Smallest and largest reuse distance over components of non-zero weight, pages.
    pub fn range_pages(&self) -> (f64, f64) {
        let live = self.segments.iter().filter(|s| s.weight > 0.0);
        let lo = live
            .clone()
            .map(|s| s.offset_pages)
            .fold(f64::INFINITY, f64::min);
        let hi = live
            .map(|s| s.offset_pages + s.a_pages + s.b_pages)
            .fold(0.0, f64::max);
        (lo, hi)
    }

    /// Average survival probability over this distribution in a cache of `capacity_pages` with
    /// `ways`.
    pub fn survival(&self, capacity_pages: f64, ways: f64) -> f64 {
        self.segments
            .iter()
            .map(|s| s.weight * survival_trapezoid(s, capacity_pages, ways))
            .sum()
    }
}

/// `P[Poisson(λ) ≤ k]`, summed in a stable way (λ up to ~10⁴ is fine for k ≤ 64).
pub fn poisson_cdf(k: u32, lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    // Sum terms in log space from the mode downwards would be more careful; for k ≤ 64 and the
    // λ we meet (≤ a few hundred) direct recursion on exp(-λ) underflows only where the CDF is ~0.
    let mut term = (-lambda).exp();
    if term == 0.0 {
        // exp(-λ) underflowed: the CDF at k ≤ 64 is below 1e-300 unless λ is near k; use logs.
        let mut s = 0.0;
        let mut log_term = -lambda;
        for j in 0..=k {
            if j > 0 {
                log_term += lambda.ln() - (j as f64).ln();
            }
            s += log_term.exp();
        }
        return s.min(1.0);
    }
    let mut s = term;
    for j in 1..=k {
        term *= lambda / j as f64;
        s += term;
    }
    s.min(1.0)
}

/// `E[min(N, W)]` for `N ~ Poisson(λ)`: `Σ_{j=1..W} P[N ≥ j]`.
fn expected_min_poisson(lambda: f64, ways: u32) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    let mut term = (-lambda).exp();
    let mut cdf = term; // P[N ≤ 0]
    let mut s = 0.0;
    for j in 1..=ways {
        s += 1.0 - cdf; // P[N ≥ j] = 1 − P[N ≤ j−1]
        term *= lambda / j as f64;
        cdf += term;
    }
    s.max(0.0)
}

/// Survival of a line after `d_pages` further distinct pages in a cache of `capacity_pages` with
/// `ways`: `P[Poisson(W·d/C) ≤ W − 1]`. Non-positive capacity means nothing survives.
pub fn survival(d_pages: f64, capacity_pages: f64, ways: f64) -> f64 {
    if capacity_pages <= 0.0 {
        return 0.0;
    }
    let w = ways.round().max(1.0);
    poisson_cdf(w as u32 - 1, w * d_pages.max(0.0) / capacity_pages)
}

/// Average of [`survival`] over `d` uniform on `[lo, hi)` pages (closed form, see module docs).
pub fn survival_avg(lo: f64, hi: f64, capacity_pages: f64, ways: f64) -> f64 {
    if capacity_pages <= 0.0 {
        return 0.0;
    }
    let w = ways.round().max(1.0);
    let k = w / capacity_pages;
    let (lo, hi) = (lo.max(0.0), hi.max(0.0));
    if hi - lo < 1e-9 {
        return survival(lo, capacity_pages, ways);
    }
    // Large λ: both E[min] saturate at W and the difference underflows to ~0; guard exp(-λ) = 0.
    let wi = w as u32;
    let e = |lam: f64| {
        if lam > w + 40.0 * w.sqrt() + 60.0 {
            w
        } else {
            expected_min_poisson(lam, wi)
        }
    };
    ((e(k * hi) - e(k * lo)) / (k * (hi - lo))).clamp(0.0, 1.0)
}

/// `G(Λ) = ∫₀^Λ E[min(N_λ, W)] dλ = W·Λ − Σ_{i=1..W} (W − i + 1)·P[N_Λ ≥ i]`.
fn second_integral(lambda: f64, ways: u32) -> f64 {
    let w = f64::from(ways);
    if lambda <= 0.0 {
        return 0.0;
    }
    // Far past the step every P[N ≥ i] is 1: G = WΛ − W(W+1)/2.
    if lambda > w + 40.0 * w.sqrt() + 60.0 {
        return w * lambda - w * (w + 1.0) / 2.0;
    }
    let mut term = (-lambda).exp();
    let mut cdf = term; // P[N ≤ 0]
    let mut s = 0.0;
    for i in 1..=ways {
        s += (w - f64::from(i) + 1.0) * (1.0 - cdf);
        term *= lambda / f64::from(i);
        cdf += term;
    }
    w * lambda - s
}

/// Average of [`survival`] over one [`Segment`] (closed form through the second integral of the
/// survival function: `E = [G(k(c+a+b)) − G(k(c+a)) − G(k(c+b)) + G(kc)] / (k² a b)`).
pub fn survival_trapezoid(seg: &Segment, capacity_pages: f64, ways: f64) -> f64 {
    let (c, a, b) = (
        seg.offset_pages.max(0.0),
        seg.a_pages.max(0.0),
        seg.b_pages.max(0.0),
    );
    if a < 1e-6 || b < 1e-6 {
        return survival_avg(c, c + a + b, capacity_pages, ways);
    }
    if capacity_pages <= 0.0 {
        return 0.0;
    }
    let w = ways.round().max(1.0);
    let k = w / capacity_pages;
    let g = |x: f64| second_integral(k * x, w as u32);
    let v = (g(c + a + b) - g(c + a) - g(c + b) + g(c)) / (k * k * a * b);
    v.clamp(0.0, 1.0)
}

/// Probability of finding a reused line at each level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HitProbs {
    /// In the consumer's private cache (or the L2 shared by SMT siblings).
    pub private: f64,
    /// In the LLC (and no longer in the private cache).
    pub llc: f64,
    /// In neither: fetched from DRAM.
    pub dram: f64,
}

/// Expected memory cost of writing one reused page.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PageAccessCost {
    /// Hit-level probabilities.
    pub probs: HitProbs,
    /// Expected cost per line, ns: before overlap from the latencies, or the measured cost per
    /// page spread over its lines (after overlap) where the machine has one.
    pub ns_per_line: f64,
    /// Share of the page cost from lines in the private level, ns per page.
    pub private_ns: f64,
    /// Share from lines in the LLC, ns per page.
    pub llc_ns: f64,
    /// Share from DRAM, ns per page.
    pub dram_ns: f64,
    /// Total, ns per page: `lines · Σ P·latency / mlp`.
    pub total_ns: f64,
}

/// Hit-level probabilities for a reuse distribution, with `resident_pages` of other data occupying
/// the caches (it reduces the capacity left for page data).
pub fn hit_probs(h: &Hierarchy, reuse: &ReuseDist, resident_pages: f64) -> HitProbs {
    let private = reuse.survival(h.private_pages - resident_pages, h.private_ways);
    let any = reuse
        .survival(h.any_cache_pages - resident_pages, h.llc_ways)
        .max(private);
    HitProbs {
        private,
        llc: (any - private).max(0.0),
        dram: (1.0 - any).max(0.0),
    }
}

/// Expected cost of writing one reused 4 KiB page with `mlp_lines` line requests in flight,
/// or at the machine's measured cost per page and level where it has one
/// ([`Hierarchy::measured_page_ns`]; `mlp_lines` is then not used).
pub fn page_access_cost(
    h: &Hierarchy,
    reuse: &ReuseDist,
    resident_pages: f64,
    mlp_lines: f64,
) -> PageAccessCost {
    let p = hit_probs(h, reuse, resident_pages);
    let (private_ns, llc_ns, dram_ns) = match h.measured_page_ns {
        Some(c) => (p.private * c[0], p.llc * c[1], p.dram * c[2]),
        None => {
            let scale = h.lines_per_page() / mlp_lines.max(1.0);
            (
                scale * p.private * h.private_ns,
                scale * p.llc * h.llc_ns,
                scale * p.dram * h.dram_ns,
            )
        }
    };
    PageAccessCost {
        probs: p,
        ns_per_line: if h.measured_page_ns.is_some() {
            (private_ns + llc_ns + dram_ns) / h.lines_per_page()
        } else {
            p.private * h.private_ns + p.llc * h.llc_ns + p.dram * h.dram_ns
        },
        private_ns,
        llc_ns,
        dram_ns,
        total_ns: private_ns + llc_ns + dram_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn poisson_cdf_known_values() {
        // P[Poisson(1) <= 0] = e^-1; P[Poisson(2) <= 2] = 5 e^-2.
        assert_relative_eq!(poisson_cdf(0, 1.0), (-1.0f64).exp(), epsilon = 1e-12);
        assert_relative_eq!(poisson_cdf(2, 2.0), 5.0 * (-2.0f64).exp(), epsilon = 1e-12);
        assert_relative_eq!(poisson_cdf(11, 2000.0), 0.0, epsilon = 1e-12);
    }

    #[test]
    fn survival_is_a_smooth_step_at_capacity() {
        let c = 320.0;
        // P[Poisson(20 d / C) <= 19]: 1 at d = 0, 0.9965 at C/2, 0.470 at C (a Poisson's median
        // is near its mean, so just under 1/2), 4e-4 at 2C.
        assert!(survival(0.0, c, 20.0) > 0.999);
        assert!(survival(0.5 * c, c, 20.0) > 0.99);
        let mid = survival(c, c, 20.0);
        assert_relative_eq!(mid, 0.470, epsilon = 0.001);
        assert!(survival(2.0 * c, c, 20.0) < 0.001);
        // Fewer ways: a wider step.
        assert!(survival(0.5 * c, c, 4.0) < survival(0.5 * c, c, 20.0));
    }

    #[test]
    fn uniform_average_matches_numeric_integral() {
        for &(lo, hi, c, w) in &[
            (0.0, 112.0, 64.0, 4.0),
            (257.0, 383.0, 320.0, 20.0),
            (12290.0, 12542.0, 12608.0, 12.0),
            (10.0, 10.0, 64.0, 4.0),
        ] {
            let n = 20000;
            let num: f64 = if hi > lo {
                (0..n)
                    .map(|i| survival(lo + (hi - lo) * (i as f64 + 0.5) / n as f64, c, w))
                    .sum::<f64>()
                    / n as f64
            } else {
                survival(lo, c, w)
            };
            assert_relative_eq!(survival_avg(lo, hi, c, w), num, epsilon = 1e-6);
        }
    }

    #[test]
    fn trapezoid_average_matches_numeric_double_integral() {
        for &(c, a, b, cap, w) in &[
            (63.0, 514.0, 56.0, 320.0, 20.0),
            (0.0, 8.0, 112.0, 64.0, 4.0),
            (12290.0, 252.0, 56.0, 12608.0, 12.0),
        ] {
            let n = 400;
            let mut num = 0.0;
            for i in 0..n {
                for j in 0..n {
                    let d = c + a * (i as f64 + 0.5) / n as f64 + b * (j as f64 + 0.5) / n as f64;
                    num += survival(d, cap, w);
                }
            }
            num /= (n * n) as f64;
            let seg = Segment {
                weight: 1.0,
                offset_pages: c,
                a_pages: a,
                b_pages: b,
            };
            assert_relative_eq!(survival_trapezoid(&seg, cap, w), num, epsilon = 1e-5);
        }
    }

    #[test]
    fn probabilities_sum_to_one() {
        let h = Hierarchy {
            placement: Placement::SameLlc,
            private_pages: 320.0,
            private_ways: 20.0,
            any_cache_pages: 12608.0,
            llc_ways: 12.0,
            llc_policy: Policy::Victim,
            private_ns: 52.0,
            llc_ns: 20.0,
            dram_ns: 85.0,
            c2c_ns: 52.0,
            line_bytes: 64.0,
            measured_page_ns: None,
        };
        for d in [0.0, 300.0, 1000.0, 12000.0, 50000.0] {
            let p = hit_probs(&h, &ReuseDist::uniform(d, d + 126.0), 0.0);
            assert_relative_eq!(p.private + p.llc + p.dram, 1.0, epsilon = 1e-9);
            assert!(p.private >= 0.0 && p.llc >= 0.0 && p.dram >= 0.0);
        }
        let c = page_access_cost(&h, &ReuseDist::uniform(0.0, 112.0), 0.0, 10.0);
        // Measured costs per page replace latency x lines / lines in flight, level by level.
        let hm = Hierarchy {
            measured_page_ns: Some([105.0, 70.0, 340.0]),
            ..h.clone()
        };
        let near = page_access_cost(&hm, &ReuseDist::uniform(0.0, 112.0), 0.0, 10.0);
        assert_relative_eq!(near.total_ns, 105.0, max_relative = 1e-4);
        let far = page_access_cost(&hm, &ReuseDist::uniform(60000.0, 60000.0), 0.0, 10.0);
        assert_relative_eq!(far.total_ns, 340.0, max_relative = 1e-6);
        // Short distances on a victim LLC: nearly every line from the other core, 64 lines / 10.
        // Up to 112 pages against this private cache, the survival P[Poisson(W d / C) <= W - 1]
        // leaves the other core's share at 1 - 3e-6; 1e-4 covers that LLC share.
        assert_relative_eq!(c.total_ns, 6.4 * 52.0, max_relative = 1e-4);
    }
    #[test]
    fn a_measured_llc_share_is_the_capacity_in_front_of_dram_for_that_placement() {
        use crate::hw::machine::ReuseCosts;
        use crate::hw::provenance::Sourced;
        let mut m = Machine::builtin("icelake-server").unwrap();
        let nominal = Hierarchy::from_machine(&m, Placement::SameLlc).unwrap();
        let llc_kib = m.llc().unwrap().size_kib.value as f64;
        let costs = |kib: f64| ReuseCosts {
            private: Sourced::new(100.0, "measured: a test"),
            llc: Sourced::new(150.0, "measured: a test"),
            dram: Sourced::new(400.0, "measured: a test"),
            llc_kib: Some(Sourced::new(kib, "measured: a test")),
        };
        m.reuse_ns_per_page = Some(costs(llc_kib / 4.0));
        m.validate("test").unwrap();
        let shared = Hierarchy::from_machine(&m, Placement::SameLlc).unwrap();
        // A quarter of the LLC: its pages less three quarters of the nominal LLC's.
        let llc_pages = llc_kib / (PAGE_BYTES as f64 / 1024.0);
        assert_relative_eq!(
            shared.any_cache_pages,
            nominal.any_cache_pages - 0.75 * llc_pages,
            max_relative = 1e-12
        );
        // More than the LLC holds is not a measurement of it.
        m.reuse_ns_per_page = Some(costs(llc_kib * 2.0));
        let e = m.validate("test").unwrap_err().to_string();
        assert!(e.contains("reuse_ns_per_page.llc_kib"), "{e}");
    }
}
