//! Machine A vs machine B for a producer/consumer workload's flow (thread 004's netperf by
//! default), built by the workload's kind as `predict` builds it: the cost terms side by side,
//! and an attribution that swaps one hardware parameter at a time from A to B and shows how the
//! bypass penalty, the optimal high and the DRAM cliff move. Every number comes from the same
//! model (`model::netperf` on `model::cache` and `model::pcp`); nothing is recomputed ad hoc.
//!
//! Definitions (all at the machine's own fitted or carried-over workload parameters):
//! - **bypass penalty**: `1 − throughput(high = 0) / throughput(optimum)`;
//! - **optimal high**: the argmax over `0..=limit`, `limit` three times the larger machine's
//!   cache capacity in front of DRAM;
//! - **DRAM cliff**: the smallest high above the optimum at which throughput has fallen 10 %
//!   below the optimum.
//!
//! When a parameter is swapped, the workload (fixed work per page in ns) stays machine A's, so
//! the change is the hardware's alone.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::optimize::fast_argmax;
use crate::hw::machine::{Machine, Policy};
use crate::model::netperf::{NetperfEstimate, NetperfModel};
use crate::workload::kind::Knobs;
use crate::workload::registry::Workload;

/// The three shape numbers of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shape {
    /// Throughput lost by bypassing the PCP (high = 0), percent.
    pub bypass_penalty_pct: f64,
    /// The optimal pcp->high, pages.
    pub optimal_high_pages: u32,
    /// Where throughput has fallen 10 % below the optimum on the high side, pages (None: not
    /// within the swept range).
    pub dram_cliff_pages: Option<u32>,
    /// The kernel's default pcp->high on this (possibly modified) machine, pages.
    pub kernel_default_high_pages: u32,
}

/// One row of the attribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Swap {
    /// Which parameter was given B's value.
    pub parameter: String,
    /// A's value and B's value, as text with units.
    pub from: String,
    /// B's value.
    pub to: String,
    /// A's shape with this one parameter from B.
    pub shape: Shape,
}

/// Both machines' estimate at one high.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideBySide {
    /// pcp->high, pages.
    pub high_pages: u32,
    /// Machine A's estimate.
    pub a: NetperfEstimate,
    /// Machine B's estimate.
    pub b: NetperfEstimate,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// Machine A.
    pub a: String,
    /// Machine B.
    pub b: String,
    /// Kernel version.
    pub kernel: String,
    /// Swept range, pages.
    pub limit_pages: u32,
    /// Cost terms at a set of highs.
    pub side_by_side: Vec<SideBySide>,
    /// A's shape, B's shape.
    pub shape_a: Shape,
    /// B's shape.
    pub shape_b: Shape,
    /// One parameter at a time from B into A.
    pub swaps: Vec<Swap>,
    /// A with all of B's hardware (and A's workload).
    pub all_swapped: Shape,
    /// Plain-language explanation built from the numbers above.
    pub summary: Vec<String>,
}

fn shape_of(model: &NetperfModel, p: &[f64], limit: u32, default_high: u32) -> Result<Shape> {
    let thr = |h: u32| {
        model
            .estimate(p, h)
            .map(|e| e.throughput_ops_per_s)
            .unwrap_or(f64::NAN)
    };
    let (best_x, best) = fast_argmax(limit, 300, thr).unwrap_or((0, f64::NAN));
    // First crossing of 0.9 * best above the optimum, by bisection on a log grid.
    let mut cliff = None;
    let mut prev = best_x;
    let mut h = best_x.max(1);
    while h <= limit {
        if thr(h) < 0.9 * best {
            let (mut lo, mut hi) = (prev, h);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if thr(mid) < 0.9 * best {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            cliff = Some(hi);
            break;
        }
        prev = h;
        h = ((f64::from(h) * 1.05).ceil() as u32).max(h + 1);
    }
    Ok(Shape {
        bypass_penalty_pct: 100.0 * (1.0 - thr(0) / best),
        optimal_high_pages: best_x,
        dram_cliff_pages: cliff,
        kernel_default_high_pages: default_high,
    })
}

/// Compares machine `a` with machine `b` for workload `w` with knobs `k` (the kernel among
/// them): each machine's model is the one the workload's kind builds for it
/// ([`crate::workload::Kind::reuse_model`], what `predict` and `optimal-high` evaluate), with
/// its own fitted or carried-over parameters; a swapped machine keeps A's.
pub fn explain(
    w: &Workload,
    a: &Machine,
    b: &Machine,
    k: &Knobs,
    highs: &[u32],
) -> Result<Explanation> {
    if !w.kind.has_reuse_path() {
        return Err(Error::Unsupported(format!(
            "explain: workload {} (kind {}) has no page-reuse model to compare machines with; explain takes producer-consumer workloads (netperf-udp, lmbench-af-unix, ...)",
            w.name(),
            w.kind.name()
        )));
    }
    let on = |m: &Machine| w.kind.reuse_model(&w.spec, m, k);
    let (ra, rb) = (on(a)?, on(b)?);
    let kernel = ra.kernel;
    let pa = ra.params.values.clone();
    let pb = rb.params.values.clone();
    let (ma, mb) = (ra.model.clone(), rb.model.clone());
    let cap = |m: &NetperfModel| m.hierarchy.any_cache_pages;
    let limit = (3.0 * cap(&ma).max(cap(&mb))).ceil() as u32;
    let shape_a = shape_of(&ma, &pa, limit, ra.kernel_high)?;
    let shape_b = shape_of(&mb, &pb, limit, rb.kernel_high)?;

    let mut side_by_side = Vec::new();
    for &h in highs {
        side_by_side.push(SideBySide {
            high_pages: h,
            a: ma.estimate(&pa, h)?,
            b: mb.estimate(&pb, h)?,
        });
    }

    // One parameter at a time: A's machine with B's value.
    type Edit = Box<dyn Fn(&mut Machine)>;
    let mut edits: Vec<(String, String, String, Edit)> = Vec::new();
    if let (Some(ia), Some(ib)) = (a.l2_index(), b.l2_index()) {
        let v = b.caches[ib].size_kib.value;
        let w = b.caches[ib].ways.value;
        edits.push((
            "L2 size (and ways)".into(),
            format!(
                "{} KiB {}-way",
                a.caches[ia].size_kib.value, a.caches[ia].ways.value
            ),
            format!("{v} KiB {w}-way"),
            Box::new(move |m: &mut Machine| {
                if let Some(i) = m.l2_index() {
                    m.caches[i].size_kib.value = v;
                    m.caches[i].ways.value = w;
                }
            }),
        ));
    }
    if let (Some(ia), Some(ib)) = (a.llc_index(), b.llc_index()) {
        let v = b.caches[ib].size_kib.value;
        let w = b.caches[ib].ways.value;
        edits.push((
            "LLC size (and ways)".into(),
            format!(
                "{} KiB {}-way",
                a.caches[ia].size_kib.value, a.caches[ia].ways.value
            ),
            format!("{v} KiB {w}-way"),
            Box::new(move |m: &mut Machine| {
                if let Some(i) = m.llc_index() {
                    m.caches[i].size_kib.value = v;
                    m.caches[i].ways.value = w;
                }
            }),
        ));
        let pol = b.caches[ib].policy.value;
        edits.push((
            "LLC inclusivity".into(),
            policy_name(a.caches[ia].policy.value).into(),
            policy_name(pol).into(),
            Box::new(move |m: &mut Machine| {
                if let Some(i) = m.llc_index() {
                    m.caches[i].policy.value = pol;
                }
            }),
        ));
    }
    let lat = |name: &str, fa: f64, fb: f64, set: fn(&mut Machine, f64)| {
        (
            name.to_string(),
            format!("{fa} ns"),
            format!("{fb} ns"),
            Box::new(move |m: &mut Machine| set(m, fb)) as Edit,
        )
    };
    edits.push(lat(
        "core-to-core latency",
        a.latency_ns.c2c_same_llc.value,
        b.latency_ns.c2c_same_llc.value,
        |m, v| m.latency_ns.c2c_same_llc.value = v,
    ));
    edits.push(lat(
        "LLC latency",
        a.latency_ns.llc_hit.value,
        b.latency_ns.llc_hit.value,
        |m, v| m.latency_ns.llc_hit.value = v,
    ));
    edits.push(lat(
        "DRAM latency",
        a.latency_ns.dram_local.value,
        b.latency_ns.dram_local.value,
        |m, v| m.latency_ns.dram_local.value = v,
    ));
    {
        // B's core count in A's chip design. A's cores per LLC domain is the chip's (a CCX of
        // eight cores sharing one L3 on an EPYC, a socket-wide L3 on most Intel parts), as is
        // the LLC size per domain: B's cores are laid out in domains of A's size, as many
        // domains as they fill. Taking B's cores per socket with A's number of domains instead
        // made A's 8 CCDs share 4 cores (0 cores per LLC domain, repro
        // T3-explain-epyc-zero-cores). See `llc_domains_for`.
        let (s, c, t, n) = (
            b.topology.sockets.value,
            b.topology.cores_per_socket.value,
            b.topology.threads_per_core.value,
            b.topology.numa_nodes.value,
        );
        let d = llc_domains_for(
            c,
            a.cores_per_llc_domain(),
            a.topology.llc_domains_per_socket.value,
        );
        let mem = b.memory.clone();
        let domains = |n: u32| if n == 1 { "domain" } else { "domains" };
        edits.push((
            "core count, in A's LLC domain size (and memory: they set the default high together)"
                .into(),
            format!(
                "{} CPUs, {} LLC {} x {} cores per socket",
                a.cpus(),
                a.topology.llc_domains_per_socket.value,
                domains(a.topology.llc_domains_per_socket.value),
                a.cores_per_llc_domain()
            ),
            format!(
                "{} CPUs, {d} LLC {} x {} cores per socket",
                b.cpus(),
                domains(d),
                c / d
            ),
            Box::new(move |m: &mut Machine| {
                m.topology.sockets.value = s;
                m.topology.cores_per_socket.value = c;
                m.topology.threads_per_core.value = t;
                m.topology.numa_nodes.value = n;
                m.topology.llc_domains_per_socket.value = d;
                if d == 1 {
                    // One domain: no pair of cores crosses an LLC (the machine schema has
                    // c2c_cross_llc only with several domains).
                    m.latency_ns.c2c_cross_llc = None;
                }
                m.memory = mem.clone();
            }),
        ));
    }
    let mut swaps = Vec::new();
    let mut all = a.clone();
    for (name, from, to, edit) in &edits {
        let mut m = a.clone();
        edit(&mut m);
        edit(&mut all);
        let r = on(&m)?;
        swaps.push(Swap {
            parameter: name.clone(),
            from: from.clone(),
            to: to.clone(),
            shape: shape_of(&r.model, &pa, limit, r.kernel_high)?,
        });
    }
    let r = on(&all)?;
    let all_swapped = shape_of(&r.model, &pa, limit, r.kernel_high)?;
    let summary = summarise(
        a,
        b,
        &ma,
        &mb,
        &pa,
        &pb,
        &shape_a,
        &shape_b,
        &swaps,
        &all_swapped,
    )?;
    Ok(Explanation {
        a: a.name.clone(),
        b: b.name.clone(),
        kernel: format!("{}.{}", kernel.major, kernel.minor),
        limit_pages: limit,
        side_by_side,
        shape_a,
        shape_b,
        swaps,
        all_swapped,
        summary,
    })
}

/// LLC domains per socket for `cores` cores per socket on a chip whose LLC domains hold
/// `cores_per_domain` cores (`domains_now` of them per socket today).
///
/// A chip with one LLC per socket keeps one: its L3 is shared by the whole socket whatever the
/// core count. A chip of several domains keeps its domain size as far as `cores` allows: the
/// divisor `d` of `cores` whose `cores / d` is nearest `cores_per_domain` (ties: fewer, larger
/// domains), with at least two cores per domain (the same-LLC placement needs a pair) and at
/// most 64 domains (the machine schema's bound). 4 cores on an 8-core-CCX EPYC: one domain of
/// 4; 64 cores: 8 domains of 8; 24 cores: 3 domains of 8.
pub fn llc_domains_for(cores: u32, cores_per_domain: u32, domains_now: u32) -> u32 {
    // The machine schema's bound on LLC domains per socket.
    const MAX_LLC_DOMAINS: u32 = 64;
    if domains_now <= 1 || cores <= 1 {
        return 1;
    }
    let want = cores_per_domain.max(2);
    (1..=cores)
        .filter(|d| cores.is_multiple_of(*d) && cores / d >= 2 && *d <= MAX_LLC_DOMAINS)
        .min_by_key(|d| ((cores / d).abs_diff(want), *d))
        .unwrap_or(1)
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Inclusive => "inclusive",
        Policy::NonInclusive => "non-inclusive",
        Policy::Victim => "victim (non-inclusive)",
        Policy::Private => "private",
    }
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    a: &Machine,
    b: &Machine,
    ma: &NetperfModel,
    mb: &NetperfModel,
    pa: &[f64],
    pb: &[f64],
    sa: &Shape,
    sb: &Shape,
    swaps: &[Swap],
    all: &Shape,
) -> Result<Vec<String>> {
    let ea = ma.estimate(pa, 0)?;
    let eb = mb.estimate(pb, 0)?;
    let (lo, hi) = ea.dynamics.reuse.range_pages();
    let mut out = Vec::new();
    let describe = |m: &Machine, md: &NetperfModel, e: &NetperfEstimate, s: &Shape| {
        let h = &md.hierarchy;
        if let Some(c) = h.measured_page_ns {
            return format!(
                "On {} bypassing the PCP (high 0) costs {:.1} % of the best throughput. A page is reused after {:.0}-{:.0} pages of other traffic; with a {:.0}-page L2 {:.0} % of its lines are still in the freeing core's L2. The machine file's measured reuse costs price such a page at {:.0} ns, {:.0} ns from the LLC and {:.0} ns from DRAM ({:.0} ns of {:.0} ns per page).",
                m.name,
                s.bypass_penalty_pct,
                lo,
                hi,
                h.private_pages,
                100.0 * e.probs.private,
                c[0],
                c[1],
                c[2],
                e.private_ns,
                e.ns_per_op
            );
        }
        format!(
            "On {} bypassing the PCP (high 0) costs {:.1} % of the best throughput. A page is reused after {:.0}-{:.0} pages of other traffic; with a {:.0}-page L2 {:.0} % of its lines are still in the freeing core's L2, and its {} LLC {} at {:.1} ns per line against {:.1} ns for a line already in the LLC ({:.0} ns of {:.0} ns per page).",
            m.name,
            s.bypass_penalty_pct,
            lo,
            hi,
            h.private_pages,
            100.0 * e.probs.private,
            policy_name(h.llc_policy),
            if h.llc_policy == Policy::Inclusive {
                "holds a clean copy and serves it itself"
            } else {
                "has no copy, so the owner core is snooped"
            },
            h.private_ns,
            h.llc_ns,
            e.private_ns,
            e.ns_per_op
        )
    };
    out.push(describe(a, ma, &ea, sa));
    out.push(describe(b, mb, &eb, sb));
    let mut ranked: Vec<&Swap> = swaps.iter().collect();
    ranked.sort_by(|x, y| {
        let dx = (x.shape.bypass_penalty_pct - sa.bypass_penalty_pct).abs();
        let dy = (y.shape.bypass_penalty_pct - sa.bypass_penalty_pct).abs();
        dy.total_cmp(&dx)
    });
    let parts: Vec<String> = ranked
        .iter()
        .take(3)
        .map(|s| {
            format!(
                "{} ({} -> {}): {:.1} % -> {:.1} %",
                s.parameter, s.from, s.to, sa.bypass_penalty_pct, s.shape.bypass_penalty_pct
            )
        })
        .collect();
    out.push(format!(
        "Giving {} one of {}'s hardware parameters at a time, the bypass penalty moves most with: {}. With all of {}'s hardware it becomes {:.1} % ({} itself: {:.1} %; the rest is the workload's fixed cost per page, which differs between the machines).",
        a.name,
        b.name,
        parts.join("; "),
        b.name,
        all.bypass_penalty_pct,
        b.name,
        sb.bypass_penalty_pct
    ));
    let cliff = |s: &Shape| {
        s.dram_cliff_pages
            .map_or("beyond the swept range".to_string(), |c| {
                format!("{c} pages")
            })
    };
    let llc_swap = swaps.iter().find(|s| s.parameter.starts_with("LLC size"));
    out.push(format!(
        "The DRAM cliff (10 % below the best) is at {} on {} (L2 + LLC in front of DRAM: {:.0} pages) and {} on {} ({:.0} pages){}.",
        cliff(sa),
        a.name,
        ma.hierarchy.any_cache_pages,
        cliff(sb),
        b.name,
        mb.hierarchy.any_cache_pages,
        llc_swap.map_or(String::new(), |s| format!(
            "; with {}'s LLC alone, {}'s cliff moves to {}",
            b.name,
            a.name,
            cliff(&s.shape)
        ))
    ));
    out.push(format!(
        "The optimum is {} pages on {} and {} pages on {}; the kernel's default is {} and {} pages.",
        sa.optimal_high_pages,
        a.name,
        sb.optimal_high_pages,
        b.name,
        sa.kernel_default_high_pages,
        sb.kernel_default_high_pages
    ));
    Ok(out)
}
