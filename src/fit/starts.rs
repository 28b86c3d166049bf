//! Multi-start: the Latin-hypercube start points, and the check for a parameter that ran away.

use super::stats::{normal_quantile, SplitMix64};
use super::transform::{interior, Transform};
use super::{FitOptions, ParamSpec};

/// Factor beyond which a parameter is taken to have run away (see [`runaway`]).
const RUNAWAY_FACTOR: f64 = 1e10;

/// A parameter without an upper (or lower) bound that LM pushed to more than
/// [`RUNAWAY_FACTOR`] times its start magnitude (or, when that is 0, to more than
/// `RUNAWAY_FACTOR` units) has no finite optimum: LM may still report "converged" because the
/// residuals stop changing, but the fit has diverged.
pub(super) fn runaway(
    specs: &[ParamSpec],
    free: &[usize],
    start: &[f64],
    full: &[f64],
) -> Option<String> {
    free.iter().find_map(|&j| {
        let s = &specs[j];
        if (s.upper - s.lower).is_finite() {
            return None;
        }
        let reference = s.default.abs().max(start[j].abs());
        let limit = RUNAWAY_FACTOR * if reference > 0.0 { reference } else { 1.0 };
        let p = full[j];
        (!p.is_finite() || p.abs() > limit).then(|| {
            format!(
                "parameter {} ran away to {p:e} {} (more than {RUNAWAY_FACTOR:e} times its start \
                 value): the data do not bound it",
                s.name, s.unit
            )
        })
    })
}

/// Start points (physical, free parameters): `p0`, then `opts.starts - 1` points from a Latin
/// hypercube: each parameter's range is cut into `starts - 1` strata of equal probability, each
/// stratum is used once (in a seeded random order) with a seeded random position inside it.
/// Within both bounds the strata are uniform (log-uniform when `0 < lo` and `hi / lo >= 100`);
/// otherwise they are normal quantiles `u0 + 1.5 z` of the internal coordinate (or
/// `p0 + max(|p0|, 1) z` without bounds).
pub(super) fn start_points(
    specs: &[ParamSpec],
    free: &[usize],
    transforms: &[Transform],
    p0: &[f64],
    opts: &FitOptions,
) -> Vec<Vec<f64>> {
    let mut rng = SplitMix64::new(opts.seed);
    let extra = opts.starts.saturating_sub(1);
    let mut starts = vec![p0.to_vec()];
    if extra == 0 {
        return starts;
    }
    // One shuffled stratum order per parameter (Fisher-Yates).
    let orders: Vec<Vec<usize>> = free
        .iter()
        .map(|_| {
            let mut o: Vec<usize> = (0..extra).collect();
            for i in (1..extra).rev() {
                let r = (rng.next_u64() % (i as u64 + 1)) as usize;
                o.swap(i, r);
            }
            o
        })
        .collect();
    starts.extend((0..extra).map(|s| {
        free.iter()
            .enumerate()
            .map(|(c, &j)| {
                let stratum = orders[c][s] as f64;
                let q = (stratum + rng.next_f64()) / extra as f64;
                let r = 0.02 + 0.96 * q;
                let t = transforms[c];
                let p = match t {
                    Transform::Both(lo, hi) if lo > 0.0 && hi / lo >= 100.0 => {
                        (lo.ln() + r * (hi.ln() - lo.ln())).exp()
                    }
                    Transform::Both(lo, hi) => lo + r * (hi - lo),
                    Transform::Lower(_) | Transform::Upper(_) => {
                        t.to_physical(t.to_internal(p0[c]) + 1.5 * normal_quantile(r))
                    }
                    Transform::Identity => p0[c] + p0[c].abs().max(1.0) * normal_quantile(r),
                };
                interior(&specs[j], p)
            })
            .collect::<Vec<f64>>()
    }));
    starts
}
