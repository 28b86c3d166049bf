//! zone->lock queueing between producer-consumer pairs that share a zone: how much slower each
//! pair runs when `P` pairs refill and drain through one zone's lock than when it runs alone.
//!
//! # Model
//! A pair moves blocks of `order` from its producer CPU (which refills its PCP list from the
//! zone: `refill_holds_per_page` holds of `refill_pages` base pages) to its consumer CPU (which
//! drains to the zone: `drain_holds_per_page()` holds, ordinary drains and free_high drains each
//! at its own rate and size). Those rates and sizes come from the PCP dynamics of the
//! kernel ([`crate::model::pcp::dynamics`]); the holds from the zone->lock model with the hold
//! composed from the code ([`crate::model::hold`], the drain side by
//! [`crate::model::zonelock::ZoneLockModel::free_ns_per_page`]); the queue is the finite-source
//! FIFO of [`crate::model::lock`] over the zone's `2P` CPUs, refill and drain as dedicated
//! classes ([`crate::model::autotune::lock_outcome`]).
//!
//! The lone pair's time per page is the producer-consumer model's own (thread 004's fit or its
//! carry-over), which already holds that pair's holds and its two CPUs' collisions: the queue
//! adds only what the other pairs cause, as the ratio `T(P) / T(1)` of the queue's time per
//! block with `P` pairs to that with one. One pair is therefore exactly the unqueued model.
//!
//! # Approximations
//! - Each kind of drain (ordinary, free_high) enters at its mean size
//!   ([`crate::model::pcp::Dynamics::drain_kinds`]; one mean over both would understate the
//!   hold's variance that the finite-source queue uses); refills at theirs.
//! - Each side of a pair waits for its own holds; the pair runs at the slower side's pace.
//! - Pairs on other nodes use other zones: `P` counts the pairs of one node.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::autotune::{lock_outcome, FlowTally, ZoneLoad};
use crate::model::pcp::Dynamics;
use crate::model::zonelock::{ZoneLockModel, ZoneLockParams};

/// Blocks of the synthetic flow the queue is solved over (counts of holds are integers; 2^20
/// blocks keep their rounding below 1e-5 of any rate the model produces).
const UNITS: u64 = 1 << 20;

/// The queue's effect on one pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairQueue {
    /// Pairs on the zone.
    pub pairs_per_zone: u32,
    /// Time per page with `pairs_per_zone` pairs over the time of a lone pair (>= 1).
    pub slowdown: f64,
    /// Lock utilisation with `pairs_per_zone` pairs.
    pub utilisation: f64,
    /// Share of the pairs' busy CPU time spent waiting for zone->lock ([`crate::model::autotune::LockOutcome`]).
    pub contention: f64,
}

/// Solves the queue of `pairs_per_zone` pairs, each moving pages at `lone_ns_per_page` when
/// alone, with the drain/refill `dynamics` of their flow, blocks of `order`.
pub fn pair_queue(
    model: &ZoneLockModel,
    params: &ZoneLockParams,
    dynamics: &Dynamics,
    order: u8,
    lone_ns_per_page: f64,
    pairs_per_zone: u32,
) -> Result<PairQueue> {
    if !(lone_ns_per_page.is_finite() && lone_ns_per_page > 0.0) {
        return Err(Error::invalid(
            "pair queue",
            "lone_ns_per_page",
            format!("must be > 0, got {lone_ns_per_page}"),
        ));
    }
    if pairs_per_zone == 0 {
        return Err(Error::invalid(
            "pair queue",
            "pairs_per_zone",
            "must be >= 1",
        ));
    }
    let u = 1u64 << order;
    let pages = (UNITS * u) as f64;
    let side = |holds_per_page: f64, pages_per_hold: f64| -> Vec<(u32, u64)> {
        let holds = (pages * holds_per_page).round() as u64;
        if holds == 0 || !pages_per_hold.is_finite() {
            return Vec::new();
        }
        vec![(pages_per_hold.round().max(1.0) as u32, holds)]
    };
    let d = dynamics;
    let tally = FlowTally {
        refill: side(d.refill_holds_per_page, d.refill_pages),
        drain: d
            .drain_kinds
            .iter()
            .flat_map(|&(holds_per_page, size)| side(holds_per_page, size))
            .collect(),
        work_units: UNITS,
        ..FlowTally::default()
    };
    if tally.refill.is_empty() && tally.drain.is_empty() {
        return Ok(PairQueue {
            pairs_per_zone,
            slowdown: 1.0,
            utilisation: 0.0,
            contention: 0.0,
        });
    }
    let work_ns = lone_ns_per_page * u as f64;
    let solve = |pairs: u32| {
        lock_outcome(
            model,
            params,
            &tally,
            &ZoneLoad {
                cpus: 2 * pairs,
                work_ns,
                pairs: true,
                share: 0.5,
                order,
            },
        )
    };
    let one = solve(1)?;
    let many = if pairs_per_zone == 1 {
        one
    } else {
        solve(pairs_per_zone)?
    };
    Ok(PairQueue {
        pairs_per_zone,
        slowdown: (many.ns_per_unit / one.ns_per_unit).max(1.0),
        utilisation: many.utilisation,
        contention: many.contention,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::machine::Machine;
    use crate::kernel::version::KernelVersion;
    use crate::model::pcp::{dynamics, Flow};

    fn setup() -> (ZoneLockModel, ZoneLockParams, Dynamics) {
        let m = Machine::builtin("icelake-server").unwrap();
        let k = KernelVersion::new(5, 18);
        let mut z = ZoneLockModel::new(&m, k).unwrap();
        crate::model::zonelock::with_code_hold(&mut z);
        let p = ZoneLockParams {
            fixed_ns: 0.0,
            lines_per_page: 0.5,
            work_ns_per_page: 1.0,
        };
        // high 100 pages with batch 63 of order 3: a drain of about a batch every few frees.
        let d = dynamics(&Flow::netperf_004(k, 100)).unwrap();
        (z, p, d)
    }

    /// One pair is the unqueued model exactly (its own holds are in its fitted work); more
    /// pairs can only slow each pair down, and more so the more of them share the zone.
    #[test]
    fn one_pair_is_unqueued_and_more_pairs_only_slow_down() {
        let (z, p, d) = setup();
        let q1 = pair_queue(&z, &p, &d, 3, 500.0, 1).unwrap();
        assert_eq!(q1.slowdown, 1.0);
        let mut last = 1.0;
        for n in [2, 8, 32, 128] {
            let q = pair_queue(&z, &p, &d, 3, 500.0, n).unwrap();
            assert!(q.slowdown >= last - 1e-12, "{n}: {q:?}");
            assert!((0.0..=1.0 + 1e-9).contains(&q.utilisation), "{q:?}");
            last = q.slowdown;
        }
        // 128 pairs on one zone at 500 ns per page each move 256 M page-holds/s through the
        // lock: far past saturation, so the slowdown is large.
        assert!(last > 2.0, "{last}");
    }

    /// Drains of two sizes (ordinary and free_high) wait longer than drains of their mean size
    /// moving the same pages in the same holds: the queue sees the holds' spread (a FIFO's
    /// wait grows with the hold's second moment). Past saturation both give the lock's
    /// capacity, so the comparison is made below it.
    #[test]
    fn a_mixture_of_drain_sizes_waits_longer_than_its_mean() {
        let (z, p, d) = setup();
        let size = d.drain_kinds[0].1;
        // A tenth of the pages leave in drains 32 times as large as the rest's; the one-size
        // flow moves the same pages in the same number of holds, all of the mean size.
        let kinds = vec![(0.9 / size, size), (0.1 / (32.0 * size), 32.0 * size)];
        let holds: f64 = kinds.iter().map(|k| k.0).sum();
        let pages: f64 = kinds.iter().map(|k| k.0 * k.1).sum();
        assert!((pages - 1.0).abs() < 1e-12);
        let mut mix = d.clone();
        mix.drain_kinds = kinds;
        let mut one = mix.clone();
        one.drain_kinds = vec![(holds, 1.0 / holds)];
        // 500 and 1000 ns of work per page put the 8 pairs' lock at about 0.7 and 0.4.
        for work in [500.0, 1000.0] {
            let (a, b) = (
                pair_queue(&z, &p, &one, 3, work, 8).unwrap(),
                pair_queue(&z, &p, &mix, 3, work, 8).unwrap(),
            );
            assert!(a.utilisation < 0.9, "below saturation: {a:?}");
            // The lock carries the same time per page either way (a hold is linear in its
            // pages, and pages and holds are the same), so the extra wait is the spread's.
            assert!(
                (b.utilisation / a.utilisation - 1.0).abs() < 0.05,
                "{a:?} {b:?}"
            );
            assert!(
                b.contention > a.contention && b.slowdown > a.slowdown,
                "{a:?} {b:?}"
            );
        }
    }

    /// A flow that never takes the lock is never slowed; bad inputs are errors, not NaN.
    #[test]
    fn no_holds_no_queue_and_bad_inputs_refused() {
        let (z, p, mut d) = setup();
        d.refill_holds_per_page = 0.0;
        d.drain_kinds.clear();
        assert_eq!(pair_queue(&z, &p, &d, 3, 500.0, 64).unwrap().slowdown, 1.0);
        assert!(pair_queue(&z, &p, &d, 3, f64::NAN, 2).is_err());
        assert!(pair_queue(&z, &p, &d, 3, 500.0, 0).is_err());
    }
}
