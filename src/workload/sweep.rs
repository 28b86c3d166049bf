//! The pieces of a pcp->high sweep that the workload kinds and the optimal-high answer share:
//! the highest pcp->high the sysctl can set ([`sweep_limit`]) and the machine latencies drawn
//! from their provenance's spread ([`perturb_latencies`], [`latency_rel_sd`]) for the sweep's
//! interval. The optimal-high answer re-exports them.

use crate::error::{Error, Result};
use crate::fit::calibrate::{default_pcp, DefaultPcp};
use crate::hw::machine::Machine;
use crate::kernel::pageset::{zone_highsize, MIN_PERCPU_PAGELIST_FRACTION};
use crate::kernel::version::KernelVersion;

/// Relative standard deviation given to a latency by its provenance kind (see the optimal-high
/// answer's module docs): `measured`, `spec`, `detected` 5 %; `derived` 10 %; `seed` (a thread's
/// approximate statement) 15 %; `assumed` (or anything else) 20 %.
pub fn latency_rel_sd(source: &crate::hw::provenance::Sourced<f64>) -> f64 {
    match source.kind() {
        Some("measured") | Some("spec") | Some("detected") => 0.05,
        Some("derived") => 0.10,
        Some("seed") => 0.15,
        _ => 0.20,
    }
}

/// A copy of `machine` with every latency (and measured reuse cost) multiplied by a log-normal factor of its provenance's
/// spread, drawn from `rng`.
pub fn perturb_latencies(machine: &Machine, rng: &mut crate::fit::stats::SplitMix64) -> Machine {
    let mut m = machine.clone();
    let mut f = |s: &mut crate::hw::provenance::Sourced<f64>| {
        let sd = latency_rel_sd(s);
        s.value *= (sd * rng.normal()).exp();
    };
    let l = &mut m.latency_ns;
    f(&mut l.l2_hit);
    f(&mut l.llc_hit);
    f(&mut l.c2c_smt);
    f(&mut l.c2c_same_llc);
    for o in [
        &mut l.c2c_cross_llc,
        &mut l.c2c_cross_socket,
        &mut l.dram_remote,
    ] {
        if let Some(s) = o.as_mut() {
            f(s);
        }
    }
    f(&mut l.dram_local);
    if let Some(r) = m.reuse_ns_per_page.as_mut() {
        f(&mut r.private);
        f(&mut r.llc);
        f(&mut r.dram);
    }
    m
}

/// The highest pcp->high the sysctl can set (fraction 8), pages.
pub fn sweep_limit(d: &DefaultPcp) -> u32 {
    zone_highsize(
        d.managed_pages,
        0,
        d.batch_pages,
        d.split_cpus,
        0,
        d.split_cpus,
        MIN_PERCPU_PAGELIST_FRACTION,
    )
}

/// The highest pcp->high the kernel can set on `machine` under `kernel` (its node-0 Normal
/// zone at vm.percpu_pagelist_high_fraction = 8, the sysctl's minimum), pages: [`sweep_limit`]
/// of the kernel's default configuration.
pub fn high_limit(machine: &Machine, kernel: KernelVersion) -> Result<u32> {
    Ok(sweep_limit(&default_pcp(machine, kernel)?))
}

/// Checks a pcp->high given by hand (`flag` names it in the error) against [`high_limit`]. Every
/// command that takes `--high` (predict, latency, scale-max, plot latency, explain, and the fit
/// of a producer-consumer kind) checks through here, so one value gets one answer everywhere.
pub fn check_high(flag: &str, high: u32, machine: &Machine, kernel: KernelVersion) -> Result<()> {
    let limit = high_limit(machine, kernel)?;
    if high > limit {
        return Err(Error::Unsupported(format!(
            "{flag} {high}: above the most the kernel can set on {}: managed / 8 / CPUs = {limit} pages (vm.percpu_pagelist_high_fraction = 8, the sysctl's minimum)",
            machine.name
        )));
    }
    Ok(())
}
