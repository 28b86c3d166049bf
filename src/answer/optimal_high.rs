//! The answer to "what should pcp->high be on this CPU, and which sysctl gets it?" for the
//! page flow of a workload whose kind has a reuse path (producer-consumer: thread 004's netperf and
//! the other sender/receiver workloads), built by the kind ([`crate::workload::Kind::reuse_model`]).
//!
//! 1. Sweep pcp->high exhaustively from 0 to the largest value the kernel can be told to use
//!    (`managed / 8 / ncpu`: `vm.percpu_pagelist_high_fraction = 8`, which is also 6.7+'s
//!    `high_max`) and take the argmax of throughput and the range within 1 % of it.
//! 2. A 95 % interval for the argmax: redo the argmax for inputs drawn from their uncertainty and
//!    take the 2.5th and 97.5th percentiles. Two sources are sampled together:
//!    - the fitted workload parameters (the fit's covariance on a measured machine, the spread
//!      between measured machines on another). They shift and scale the curve, so they move the
//!      1 % range but not the argmax;
//!    - the machine file's latencies, each log-normal with a relative spread set by its
//!      provenance ([`latency_rel_sd`]: 5 % for a measurement or vendor figure, 15 % for a
//!      thread's "~" statement, 20 % for an assumption). These move the argmax.
//!
//!    Capacities, ways and inclusion policy are taken as exact (they are vendor facts).
//! 3. The kernel's default: the fixed `pcp->high` (≤ 6.6) or `high_min`/`high_max` and where
//!    auto-tuning settles for this flow (6.7+), from the kernel module.
//! 4. The sysctl: `vm.percpu_pagelist_high_fraction = F` (≥ 5.14; 0 or ≥ 8) gives
//!    `high = max(managed / F / ncpu, batch << 2)` (mm/page_alloc.c zone_highsize()); the `F` whose
//!    high is closest to the optimum, or a plain statement when the optimum is below the floor
//!    `batch << 2` (e.g. bypass) and cannot be reached by the sysctl.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::calibrate::{default_pcp, DefaultPcp, WorkloadParams};
use crate::fit::optimize::{fast_argmax, percentile, sweep_argmax, Argmax};
use crate::hw::machine::Machine;
use crate::kernel::pageset::{zone_highsize, MIN_PERCPU_PAGELIST_FRACTION};
use crate::kernel::version::KernelVersion;
use crate::model::netperf::NetperfModel;
use crate::workload::kind::Knobs;
use crate::workload::registry::Workload;
pub use crate::workload::sweep::{latency_rel_sd, perturb_latencies, sweep_limit};

/// The sysctl advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SysctlAdvice {
    /// Sysctl name.
    pub name: String,
    /// Value to write (None when the optimum cannot be reached).
    pub value: Option<u32>,
    /// pcp->high that value gives, pages.
    pub resulting_high_pages: Option<u32>,
    /// Whether the resulting high is within the 1 % range of the optimum.
    pub within_1pct: bool,
    /// Predicted throughput at the resulting high relative to the optimum, percent (≤ 0).
    pub loss_pct: Option<f64>,
    /// In words.
    pub statement: String,
}

/// One point of the predicted curve with its 95 % band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    /// pcp->high, pages.
    pub high_pages: u32,
    /// Throughput, pages per second.
    pub throughput_ops_per_s: f64,
    /// Throughput relative to the optimum.
    pub relative: f64,
    /// 2.5th percentile of the relative throughput over parameter samples, lowered to
    /// `relative` when the draws all lie above it.
    pub relative_lo95: f64,
    /// 97.5th percentile, raised to `relative` when the draws all lie below it.
    pub relative_hi95: f64,
    /// Predicted score where the machine has a fitted score scale.
    pub score: Option<f64>,
    /// Hit probabilities: private cache, LLC, DRAM.
    pub p_private: f64,
    /// LLC.
    pub p_llc: f64,
    /// DRAM.
    pub p_dram: f64,
}

/// The full answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OptimalHigh {
    /// Machine name.
    pub machine: String,
    /// Workload.
    pub workload: String,
    /// Kernel version.
    pub kernel: String,
    /// Placement of producer and consumer.
    pub placement: String,
    /// The argmax, pages.
    pub optimal_high_pages: u32,
    /// Throughput at the optimum, pages per second.
    pub optimal_throughput_ops_per_s: f64,
    /// Smallest and largest high within 1 % of the best, pages.
    pub within_1pct_pages: [u32; 2],
    /// Whether every high in that range is within 1 %.
    pub within_1pct_contiguous: bool,
    /// 95 % interval of the argmax, pages. Always contains `optimal_high_pages`: the sampled
    /// optima's 2.5th..97.5th percentiles, widened to the estimate when the samples all fall on
    /// one side of it, and to the plateau when there is one (see `notes`).
    pub ci95_pages: [u32; 2],
    /// Smallest and largest high whose throughput is within [`PLATEAU_TOLERANCE`] of the best,
    /// pages: settings the model cannot rank against the optimum.
    pub plateau_pages: [u32; 2],
    /// Whether that range spans more than a factor [`PLATEAU_SPAN`]: the argmax is then decided by
    /// differences below the model's precision, and the 1 % range is the answer to read.
    pub plateau: bool,
    /// Where the optimum sits against the swept range: `interior`, `upper_edge` (the best value
    /// is the most the sysctl can set), `range_reaches_upper_edge` (the 1 % range does) or
    /// `lower_edge` (0: bypass), `plateau` (every swept high within 1 % of the best).
    pub sweep_edge: String,
    /// Memory the optimum holds on one CPU's list, MiB (pages × 4 KiB).
    pub memory_per_cpu_mib: f64,
    /// The same on every CPU of the machine, MiB (an upper bound: a list fills to high only on
    /// CPUs that free more than they allocate).
    pub memory_all_cpus_mib: f64,
    /// Parameter samples behind the interval.
    pub ci_samples: usize,
    /// The kernel's default high for this flow, pages.
    pub kernel_default_high_pages: u32,
    /// Throughput at the kernel default relative to the optimum, percent (≤ 0).
    pub kernel_default_loss_pct: f64,
    /// What the kernel configures.
    pub kernel_default: DefaultPcp,
    /// The sysctl that gets closest.
    pub sysctl: SysctlAdvice,
    /// Swept range, pages.
    pub swept_pages: [u32; 2],
    /// Workload parameters used.
    pub parameters: WorkloadParams,
    /// The curve on a log grid with its band.
    pub curve: Vec<CurvePoint>,
    /// Notes for people.
    pub notes: Vec<String>,
}

/// Throughput differences below this fraction of the best are treated as ties when describing the
/// optimum (0.1 %): well below the model's fitted error on thread 004 (1-2 % relative RMS), so
/// settings within it cannot be ranked. Presentation threshold, not a model constant.
pub const PLATEAU_TOLERANCE: f64 = 0.001;

/// A tie range ([`PLATEAU_TOLERANCE`]) wider than this factor (largest / smallest high) makes the
/// optimum a plateau: the argmax inside it carries no information.
pub const PLATEAU_SPAN: f64 = 1.5;

/// Throughput (pages/s) of the model at `high` with parameter vector `p`.
fn throughput(model: &NetperfModel, p: &[f64], high: u32) -> f64 {
    model
        .estimate(p, high)
        .map(|e| e.throughput_ops_per_s)
        .unwrap_or(f64::NAN)
}

/// Exhaustive sweep of 0..=`limit` in steps of 1.
pub fn sweep(model: &NetperfModel, p: &[f64], limit: u32) -> Option<Argmax> {
    sweep_with_tolerance(model, p, limit, 0.01)
}

/// [`sweep`] with the range reported at relative `tolerance` of the best.
fn sweep_with_tolerance(
    model: &NetperfModel,
    p: &[f64],
    limit: u32,
    tolerance: f64,
) -> Option<Argmax> {
    sweep_argmax(0, limit, tolerance, |h| throughput(model, p, h))
}

/// The 95 % interval of the optimum from the sampled optima's percentiles `sampled`, made to
/// contain the estimate `best` and, on a plateau, the whole tie range; with the reasons it was
/// widened, for the notes.
fn optimum_interval(
    sampled: [f64; 2],
    best: u32,
    plateau: Option<(u32, u32)>,
) -> ([u32; 2], Vec<String>) {
    let mut ci = [sampled[0].floor() as u32, sampled[1].ceil() as u32];
    let mut why = Vec::new();
    if best < ci[0] || best > ci[1] {
        why.push(format!(
            "the sampled optima's 95 % range ({}-{} pages) lies to one side of the estimate {best}: the samples perturb latencies and parameters around values whose optimum is the estimate, so the interval is widened to include it",
            ci[0], ci[1]
        ));
        ci = [ci[0].min(best), ci[1].max(best)];
    }
    if let Some((lo, hi)) = plateau {
        if lo < ci[0] || hi > ci[1] {
            why.push(format!(
                "plateau: every pcp->high from {lo} to {hi} pages is within {} % of the best, below what the model can rank, so the interval covers it; read the 1 % range",
                100.0 * PLATEAU_TOLERANCE
            ));
            ci = [ci[0].min(lo), ci[1].max(hi)];
        }
    }
    (ci, why)
}

/// The sysctl value whose resulting high is closest to `target`.
pub fn sysctl_for(
    d: &DefaultPcp,
    kernel: KernelVersion,
    target: u32,
    within: (u32, u32),
    score_at: impl Fn(u32) -> f64,
) -> SysctlAdvice {
    let name = "vm.percpu_pagelist_high_fraction".to_string();
    if !kernel.has_percpu_pagelist_high_fraction() {
        return SysctlAdvice {
            name: "vm.percpu_pagelist_fraction".to_string(),
            value: None,
            resulting_high_pages: None,
            within_1pct: false,
            loss_pct: None,
            statement: format!(
                "kernel {}.{} has vm.percpu_pagelist_fraction (high = managed / F, and it also sets batch); this advice covers 5.14 and later",
                kernel.major, kernel.minor
            ),
        };
    }
    let high_of = |f: u32| {
        zone_highsize(
            d.managed_pages,
            0,
            d.batch_pages,
            d.split_cpus,
            0,
            d.split_cpus,
            f,
        )
    };
    let floor = d.batch_pages << 2;
    let ncpu = u64::from(d.split_cpus.max(1));
    let ideal = d.managed_pages as f64 / (ncpu as f64 * f64::from(target.max(1)));
    let mut best: Option<(u32, u32)> = None;
    let centre = ideal.clamp(8.0, 1.0e9) as u64;
    for f in centre
        .saturating_sub(3)
        .max(u64::from(MIN_PERCPU_PAGELIST_FRACTION))..=centre + 3
    {
        let Ok(f) = u32::try_from(f) else { continue };
        let h = high_of(f);
        if best.is_none_or(|(_, bh)| h.abs_diff(target) < bh.abs_diff(target)) {
            best = Some((f, h));
        }
    }
    let Some((f, h)) = best else {
        return SysctlAdvice {
            name,
            value: None,
            resulting_high_pages: None,
            within_1pct: false,
            loss_pct: None,
            statement: "no sysctl value found".to_string(),
        };
    };
    let opt = score_at(target);
    // Clamp rounding noise so that "+0.0 %" is not printed as "-0.0 %".
    let loss = match 100.0 * (score_at(h) / opt - 1.0) {
        l if l.abs() < 0.05 => 0.0,
        l => l,
    };
    let within = h >= within.0 && h <= within.1;
    let auto = if kernel.era().auto_tunes_high() {
        " It also sets high_min = high_max, which turns auto-tuning off."
    } else {
        ""
    };
    let statement = if target < floor {
        format!(
            "cannot be reached: the optimum ({target} pages) is below the sysctl's floor batch << 2 = {floor} pages; the closest it gets is {h} pages (F = {f}, {loss:+.1} % throughput).{auto}"
        )
    } else {
        format!(
            "sysctl -w {name}={f} gives pcp->high = {h} pages ({}; {loss:+.1} % vs the optimum).{auto}",
            if within { "within 1 % of the best" } else { "outside the 1 % range" }
        )
    };
    SysctlAdvice {
        name,
        value: Some(f),
        resulting_high_pages: Some(h),
        within_1pct: within,
        loss_pct: Some(loss),
        statement,
    }
}

/// The built-in workloads whose kind has a reuse path (what `optimal-high` sweeps).
pub fn reuse_workloads() -> Result<Vec<String>> {
    Ok(crate::workload::Registry::builtin()
        .all_builtin()?
        .into_iter()
        .filter(|w| w.kind.has_reuse_path())
        .map(|w| w.spec.name)
        .collect())
}

/// Answers the question for `workload` on one machine with `knobs` (kernel, placement and the
/// kind's other knobs; `--high` is what is swept, so it is refused).
pub fn optimal_high(
    workload: &Workload,
    machine: &Machine,
    knobs: &Knobs,
    samples: usize,
) -> Result<OptimalHigh> {
    if !workload.kind.has_reuse_path() {
        return Err(Error::Unsupported(format!(
            "optimal-high: workload {} (kind {}) has no reuse path: freed pages are not reused through a cache, so pcp->high has no optimum to find; workloads with one: {}",
            workload.name(),
            workload.kind.name(),
            reuse_workloads()?.join(", ")
        )));
    }
    if knobs.high.is_some() {
        return Err(Error::Unsupported(
            "optimal-high sweeps pcp->high: --high cannot be set".to_string(),
        ));
    }
    knobs.check()?;
    knobs.check_read_by(workload.kind.as_ref(), workload.name())?;
    let reuse = workload.kind.reuse_model(&workload.spec, machine, knobs)?;
    let (kernel, placement) = (reuse.kernel, reuse.placement);
    let model = &reuse.model;
    let wp = reuse.params.clone();
    let d = default_pcp(machine, kernel)?;
    let limit = sweep_limit(&d);
    let p = wp.values.clone();
    let a = sweep(model, &p, limit).ok_or_else(|| {
        Error::Unsupported(format!(
            "no finite prediction for {} in 0..={limit}",
            machine.name
        ))
    })?;
    // Interval of the argmax: workload parameters and latencies sampled together.
    let draws = wp.samples(samples, 0x0F7_1A1);
    let mut rng = crate::fit::stats::SplitMix64::new(0x1A7E_5EED);
    let mut models = Vec::with_capacity(draws.len());
    for _ in 0..draws.len() {
        models.push(reuse.on(&perturb_latencies(machine, &mut rng))?);
    }
    let optima: Vec<Option<(u32, f64)>> = draws
        .iter()
        .zip(&models)
        .map(|(q, m)| fast_argmax(limit, 300, |h| throughput(m, q, h)))
        .collect();
    let argmaxes: Vec<f64> = optima.iter().flatten().map(|x| f64::from(x.0)).collect();
    let lo = percentile(&argmaxes, 2.5).unwrap_or(f64::from(a.best_x));
    let hi = percentile(&argmaxes, 97.5).unwrap_or(f64::from(a.best_x));
    let ties = sweep_with_tolerance(model, &p, limit, PLATEAU_TOLERANCE).unwrap_or(a.clone());
    let plateau = f64::from(ties.within.1) > PLATEAU_SPAN * f64::from(ties.within.0.max(1));
    let (ci95, ci_notes) = optimum_interval([lo, hi], a.best_x, plateau.then_some(ties.within));
    // Curve on a log grid with its band.
    let mut grid: Vec<u32> = vec![0];
    for i in 0..=120 {
        let x = (f64::from(limit.max(1))).powf(f64::from(i) / 120.0).round() as u32;
        if grid.last() != Some(&x) {
            grid.push(x);
        }
    }
    for extra in [a.best_x, a.within.0, a.within.1] {
        grid.push(extra);
    }
    grid.sort_unstable();
    grid.dedup();
    let best_of: Vec<f64> = optima.iter().map(|o| o.map_or(f64::NAN, |x| x.1)).collect();
    let mut curve = Vec::with_capacity(grid.len());
    for &h in &grid {
        let e = model.estimate(&p, h)?;
        let rel: Vec<f64> = draws
            .iter()
            .zip(&models)
            .zip(&best_of)
            .map(|((q, m), b)| throughput(m, q, h) / b)
            .collect();
        // The band is the draws' 2.5-97.5 percentiles, widened to hold the estimate itself
        // (as the optimum's interval is): with few draws, or a skewed spread, the draws alone
        // can miss the estimate, and an interval that excludes its own estimate says nothing.
        let relative = e.throughput_ops_per_s / a.best_score;
        let band = |pct: f64| percentile(&rel, pct).unwrap_or(relative);
        curve.push(CurvePoint {
            high_pages: h,
            throughput_ops_per_s: e.throughput_ops_per_s,
            relative,
            relative_lo95: band(2.5).min(relative),
            relative_hi95: band(97.5).max(relative),
            score: wp.has_score.then_some(e.score),
            p_private: e.probs.private,
            p_llc: e.probs.llc,
            p_dram: e.probs.dram,
        });
    }
    let default_high = reuse.kernel_high;
    let default_loss = 100.0
        * (model
            .estimate_default(&p, default_high)
            .map_or(f64::NAN, |e| e.throughput_ops_per_s)
            / a.best_score
            - 1.0);
    let sysctl = sysctl_for(&d, kernel, a.best_x, a.within, |h| throughput(model, &p, h));
    let mut notes: Vec<String> = wp.note.iter().cloned().collect();
    if let Some(r) = model.run {
        notes.push(format!(
            "every setting priced as a run of {} s that starts with {:.0} pages on the lists: the pages a setting's lists grow by beyond that cost {:.0} ns each (memory.backing_ns_per_page{}); the best setting for such a run, not for the steady state",
            r.seconds,
            r.start_pages,
            r.backing_ns_per_page,
            if machine.memory.backing_ns_per_page.is_none() {
                ": not in this machine file, so nothing"
            } else {
                ""
            }
        ));
    }
    notes.push(format!(
        "swept pcp->high 0..={limit} pages {} ({} evaluations); the upper end is managed / 8 / {} CPUs, the most vm.percpu_pagelist_high_fraction can give",
        if a.exhaustive {
            "in steps of 1".to_string()
        } else {
            format!(
                "in steps of 1 up to {}, then in steps of 1/{} of the value with the optimum and the 1 % range refined to one page",
                crate::fit::optimize::EXHAUSTIVE_MAX / 2,
                crate::fit::optimize::GEOMETRIC_STEPS
            )
        },
        a.evaluated,
        d.split_cpus
    ));
    if kernel.has_free_high() && model.flow.free_high_share > 0.0 {
        notes.push(format!(
            "free_high (>= 5.18) drains {:.0} % of the freed pages early at the kernel's default high (the trigger of crate::model::freehigh for the workload's runs of frees); the sweep holds that share at every high",
            100.0 * model.flow.free_high_share
        ));
    }
    notes.extend(ci_notes);
    let page_mib = crate::hw::machine::PAGE_BYTES as f64 / (1024.0 * 1024.0);
    let memory_per_cpu_mib = f64::from(a.best_x) * page_mib;
    let memory_all_cpus_mib = memory_per_cpu_mib * f64::from(machine.cpus());
    let sweep_edge = if a.within.0 == 0 && a.within.1 >= limit {
        "plateau"
    } else if a.best_x == 0 {
        "lower_edge"
    } else if a.best_x >= limit {
        "upper_edge"
    } else if a.within.1 >= limit {
        "range_reaches_upper_edge"
    } else {
        "interior"
    };
    match sweep_edge {
        "upper_edge" => notes.push(format!(
            "the optimum is at the sweep's upper edge ({} of at most {limit} pages, the most vm.percpu_pagelist_high_fraction can set): the model would take more if the kernel allowed it. It costs {:.1} MiB per CPU, {:.0} MiB if all {} CPUs held that much",
            a.best_x,
            memory_per_cpu_mib,
            memory_all_cpus_mib,
            machine.cpus()
        )),
        "range_reaches_upper_edge" => notes.push(format!(
            "the 1 % range reaches the sweep's upper edge ({limit} pages, the most vm.percpu_pagelist_high_fraction can set): anything from {} pages up is within 1 %, and more only costs memory ({:.1} MiB per CPU at the edge)",
            a.within.0,
            f64::from(limit) * page_mib
        )),
        "plateau" => notes.push(format!(
            "every pcp->high is within 1 % of the best ({}): the setting does not matter for this flow, keep the kernel's default",
            model.flow_regime()
        )),
        "lower_edge" => notes.push(
            "the optimum is pcp->high = 0: the list is bypassed and every free goes to the buddy allocator".to_string(),
        ),
        _ => {}
    }
    if argmaxes.len() < samples {
        notes.push(format!(
            "{} of {samples} parameter samples gave no finite optimum",
            samples - argmaxes.len()
        ));
    }
    if samples < 40 {
        notes.push(format!(
            "{samples} parameter sample(s): the 95 % intervals are a rough guide (40 draws put one in each 2.5 % tail; the default is 200)"
        ));
    }
    Ok(OptimalHigh {
        machine: machine.name.clone(),
        workload: workload.name().to_string(),
        kernel: format!("{}.{}", kernel.major, kernel.minor),
        placement: placement.as_str().to_string(),
        optimal_high_pages: a.best_x,
        optimal_throughput_ops_per_s: a.best_score,
        within_1pct_pages: [a.within.0, a.within.1],
        within_1pct_contiguous: a.within_is_contiguous,
        ci95_pages: ci95,
        plateau_pages: [ties.within.0, ties.within.1],
        plateau,
        sweep_edge: sweep_edge.to_string(),
        memory_per_cpu_mib,
        memory_all_cpus_mib,
        ci_samples: argmaxes.len(),
        kernel_default_high_pages: default_high,
        kernel_default_loss_pct: default_loss,
        kernel_default: d,
        sysctl,
        swept_pages: [0, limit],
        parameters: wp,
        curve,
        notes,
    })
}

#[cfg(test)]
mod interval_tests {
    use super::optimum_interval;

    #[test]
    fn interval_always_contains_the_estimate() {
        // A2: one sample whose optimum lies above the estimate.
        let (ci, why) = optimum_interval([3133.0, 3133.0], 2176, None);
        assert_eq!(ci, [2176, 3133]);
        assert_eq!(why.len(), 1);
        let (ci, why) = optimum_interval([900.0, 1100.0], 978, None);
        assert_eq!(ci, [900, 1100]);
        assert!(why.is_empty());
    }

    #[test]
    fn plateau_widens_the_interval_to_the_ties() {
        let (ci, why) = optimum_interval([967.0, 983.0], 978, Some((700, 2079)));
        assert_eq!(ci, [700, 2079]);
        assert_eq!(why.len(), 1);
    }
}
