//! Argmax of a score over an integer knob (pcp->high), the range within 1% of the best, and an
//! interval for the argmax propagated from parameter uncertainty by sampling.
//!
//! The sweep is exhaustive (every integer in the range, no interpolation) up to
//! [`EXHAUSTIVE_MAX`] values, so the argmax is exact for the model; longer ranges are swept
//! geometrically with the argmax and the range's edges refined to one value; the 95% interval comes from re-running the argmax for parameter vectors drawn
//! from the fitted multivariate normal (mean = estimate, covariance from the fit), with a coarse
//! log-spaced grid refined around each sample's optimum.

use nalgebra::{DMatrix, DVector};

pub use crate::fit::stats::SplitMix64;
use serde::Serialize;

/// Longest range [`sweep_argmax`] sweeps in steps of 1. Longer ranges (a pcp->high sweep on a
/// node of many TiB reaches 2^31 pages) are swept geometrically: every value up to
/// `EXHAUSTIVE_MAX / 2` above the start, then steps of 1/[`GEOMETRIC_STEPS`] of the value, with
/// the argmax and the edges of the tolerance range refined to a single value. The work is then
/// about `EXHAUSTIVE_MAX / 2 + GEOMETRIC_STEPS * ln(hi / EXHAUSTIVE_MAX)` evaluations whatever
/// the range, instead of one per value.
pub const EXHAUSTIVE_MAX: u64 = 1 << 16;

/// Steps per e-fold of the geometric part of a long sweep (a relative step of 1/8192 = 0.012 %).
pub const GEOMETRIC_STEPS: f64 = 8192.0;

/// Result of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Argmax {
    /// Knob value with the highest score (the smallest such value on ties).
    pub best_x: u32,
    /// The highest score.
    pub best_score: f64,
    /// Smallest and largest knob value whose score is within `tolerance` of the best. The set may
    /// have holes; `within_is_contiguous` says whether it does.
    pub within: (u32, u32),
    /// Whether every value between `within.0` and `within.1` is within tolerance (on the
    /// geometric grid of a long sweep: every grid value).
    pub within_is_contiguous: bool,
    /// Relative tolerance used (0.01 for "within 1%").
    pub tolerance: f64,
    /// Number of knob values evaluated.
    pub evaluated: usize,
    /// True when every value of the range was evaluated; false for a long range swept
    /// geometrically (see [`EXHAUSTIVE_MAX`]).
    pub exhaustive: bool,
}

/// Sweeps `lo..=hi` and returns the argmax and the range within `tolerance` (relative) of the
/// best. Non-finite scores are skipped; `None` when none is finite. Ranges of up to
/// [`EXHAUSTIVE_MAX`] values are swept in steps of 1; longer ones geometrically, with the argmax
/// refined to a single value around the best grid point and the range's edges found by
/// bisection between grid points (exact when the score is unimodal between grid neighbours).
pub fn sweep_argmax(
    lo: u32,
    hi: u32,
    tolerance: f64,
    mut score: impl FnMut(u32) -> f64,
) -> Option<Argmax> {
    sweep_dyn(lo, hi, tolerance, &mut score)
}

fn sweep_dyn(
    lo: u32,
    hi: u32,
    tolerance: f64,
    score: &mut dyn FnMut(u32) -> f64,
) -> Option<Argmax> {
    let (lo, hi) = (lo.min(hi), hi.max(lo));
    let n = u64::from(hi - lo) + 1;
    if n <= EXHAUSTIVE_MAX {
        let xs: Vec<u32> = (lo..=hi).collect();
        return grid_argmax(&xs, tolerance, true, score);
    }
    // Geometric grid: every value near the start, then relative steps.
    let dense_end = lo.saturating_add((EXHAUSTIVE_MAX / 2) as u32);
    let mut xs: Vec<u32> = (lo..=dense_end).collect();
    let mut x = dense_end;
    while x < hi {
        let step = ((f64::from(x) / GEOMETRIC_STEPS).ceil() as u32).max(1);
        x = x.saturating_add(step).min(hi);
        xs.push(x);
    }
    let mut a = grid_argmax(&xs, tolerance, false, score)?;
    let mut evaluated = a.evaluated;
    // Refine the argmax between the grid neighbours of the best grid value.
    let i = xs.binary_search(&a.best_x).unwrap_or(0);
    let (l, r) = (xs[i.saturating_sub(1)], xs[(i + 1).min(xs.len() - 1)]);
    if r - l > 2 {
        if let Some(fine) = sweep_dyn(l, r, 0.0, score) {
            evaluated += fine.evaluated;
            if fine.best_score > a.best_score {
                a.best_x = fine.best_x;
                a.best_score = fine.best_score;
            }
        }
    }
    // Refine the edges of the tolerance range by bisection between grid values.
    let floor = a.best_score * (1.0 - tolerance);
    let mut inside = |x: u32, evaluated: &mut usize| {
        *evaluated += 1;
        let s = score(x);
        s.is_finite() && s >= floor
    };
    let (first, last) = a.within;
    let fi = xs.binary_search(&first).unwrap_or(0);
    if fi > 0 {
        let (mut out, mut inn) = (xs[fi - 1], first);
        while inn - out > 1 {
            let mid = out + (inn - out) / 2;
            if inside(mid, &mut evaluated) {
                inn = mid;
            } else {
                out = mid;
            }
        }
        a.within.0 = inn.min(a.best_x);
    }
    let li = xs.binary_search(&last).unwrap_or(xs.len() - 1);
    if li + 1 < xs.len() {
        let (mut inn, mut out) = (last, xs[li + 1]);
        while out - inn > 1 {
            let mid = inn + (out - inn) / 2;
            if inside(mid, &mut evaluated) {
                inn = mid;
            } else {
                out = mid;
            }
        }
        a.within.1 = inn.max(a.best_x);
    }
    a.within.0 = a.within.0.min(a.best_x);
    a.within.1 = a.within.1.max(a.best_x);
    a.evaluated = evaluated;
    Some(a)
}

/// Argmax and tolerance range over the values `xs` (ascending).
fn grid_argmax(
    xs: &[u32],
    tolerance: f64,
    exhaustive: bool,
    score: &mut dyn FnMut(u32) -> f64,
) -> Option<Argmax> {
    let values: Vec<f64> = xs.iter().map(|&x| score(x)).collect();
    let mut best: Option<(usize, f64)> = None;
    for (i, &s) in values.iter().enumerate() {
        if s.is_finite() && best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    let (bi, best_score) = best?;
    let floor = best_score * (1.0 - tolerance);
    let ok = |s: f64| s.is_finite() && s >= floor;
    let first = values.iter().position(|&s| ok(s)).unwrap_or(bi);
    let last = values.iter().rposition(|&s| ok(s)).unwrap_or(bi);
    let contiguous = values[first..=last].iter().all(|&s| ok(s));
    Some(Argmax {
        best_x: xs[bi],
        best_score,
        within: (xs[first], xs[last]),
        within_is_contiguous: contiguous,
        tolerance,
        evaluated: xs.len(),
        exhaustive,
    })
}

/// Argmax by a log-spaced coarse grid (0 and ~`points` values from 1 to `hi`) refined between
/// the coarse neighbours of each of the three best coarse points (a flat curve can have a narrow
/// peak, e.g. where a kernel rule changes regime, that a single refinement would miss). Each
/// refinement is exhaustive over up to 256 values, and narrows by successive grids of 64 points
/// over longer spans, so the work is bounded whatever `hi` is. Cheap enough to run for hundreds
/// of parameter samples.
pub fn fast_argmax(
    hi: u32,
    points: usize,
    mut score: impl FnMut(u32) -> f64,
) -> Option<(u32, f64)> {
    let points = points.clamp(2, 4096);
    let mut grid: Vec<u32> = vec![0];
    let hi_f = f64::from(hi.max(1));
    for i in 0..points {
        let x = (hi_f.powf(i as f64 / (points - 1).max(1) as f64)).round() as u32;
        if grid.last() != Some(&x) {
            grid.push(x);
        }
    }
    if grid.last() != Some(&hi) {
        grid.push(hi);
    }
    let scores: Vec<f64> = grid.iter().map(|&x| score(x)).collect();
    let mut order: Vec<usize> = (0..grid.len()).filter(|&i| scores[i].is_finite()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut best: Option<(u32, f64)> = None;
    for &bi in order.iter().take(3) {
        let lo = grid[bi.saturating_sub(1)];
        let up = grid[(bi + 1).min(grid.len() - 1)];
        if let Some((x, s)) = refine(lo, up, &mut score) {
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((x, s));
            }
        }
    }
    best
}

/// Argmax over `lo..=hi` by successive grids of 64 intervals (each around the best point of the
/// last) until the span is at most 256, then exhaustively.
fn refine(mut lo: u32, mut hi: u32, score: &mut dyn FnMut(u32) -> f64) -> Option<(u32, f64)> {
    const PARTS: u32 = 64;
    while hi - lo > 256 {
        let step = (hi - lo) / PARTS;
        let xs: Vec<u32> = (0..=PARTS).map(|k| lo + k * step).chain([hi]).collect();
        let (bi, _) = xs
            .iter()
            .map(|&x| score(x))
            .enumerate()
            .filter(|(_, s)| s.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
        let (l, r) = (xs[bi.saturating_sub(1)], xs[(bi + 1).min(xs.len() - 1)]);
        if r - l >= hi - lo {
            break;
        }
        (lo, hi) = (l, r);
    }
    let a = sweep_dyn(lo, hi, 0.0, score)?;
    Some((a.best_x, a.best_score))
}

/// Draws `n` parameter vectors from N(mean, cov) with a seeded generator. Falls back to the mean
/// when the covariance is not positive definite (then the interval collapses, and callers should
/// say so).
pub fn sample_normal(mean: &[f64], cov: &DMatrix<f64>, n: usize, seed: u64) -> Vec<Vec<f64>> {
    let k = mean.len();
    let chol = nalgebra::linalg::Cholesky::new(cov.clone());
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| match &chol {
            Some(c) => {
                let z = DVector::from_iterator(k, (0..k).map(|_| rng.normal()));
                let d = c.l() * z;
                mean.iter().zip(d.iter()).map(|(m, d)| m + d).collect()
            }
            None => mean.to_vec(),
        })
        .collect()
}

/// Percentile (0..=100) of a sample, linear interpolation; `None` for an empty sample.
pub fn percentile(values: &[f64], pct: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let pos = (pct / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let i = pos.floor() as usize;
    let f = pos - i as f64;
    Some(if i + 1 < v.len() {
        v[i] * (1.0 - f) + v[i + 1] * f
    } else {
        v[i]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_of_a_parabola_and_its_one_percent_range() {
        let a = sweep_argmax(0, 1000, 0.01, |x| {
            1.0 - ((x as f64 - 400.0) / 400.0).powi(2)
        })
        .unwrap();
        assert_eq!(a.best_x, 400);
        assert_eq!(a.evaluated, 1001);
        // 1 - (d/400)^2 >= 0.99  <=>  |d| <= 40
        assert_eq!(a.within, (360, 440));
        assert!(a.within_is_contiguous);
    }

    #[test]
    fn a_range_of_2_pow_31_values_is_swept_in_bounded_work_and_finds_the_peak() {
        // A parabola in log space peaking at 1_234_567, with a 1 % range of about ±14 %.
        let f = |x: u32| 1.0 - ((f64::from(x) + 1.0).ln() - 1_234_567f64.ln()).powi(2);
        let a = sweep_argmax(0, i32::MAX as u32, 0.01, f).unwrap();
        assert!(!a.exhaustive);
        assert!(a.evaluated < 200_000, "{} evaluations", a.evaluated);
        // The refinement is exhaustive between grid neighbours: the exact argmax.
        let exact = sweep_argmax(1_200_000, 1_270_000, 0.0, f).unwrap();
        assert_eq!(a.best_x, exact.best_x);
        // ln(x / x0)^2 <= 0.01 <=> x0 e^-0.1 <= x <= x0 e^0.1, bisected to one page.
        let (l, h) = (1_234_567.0 * (-0.1f64).exp(), 1_234_567.0 * 0.1f64.exp());
        // ±2: the bisection stops at one page, plus up to one for rounding the non-integer
        // bounds l and h to whole pages.
        assert!((f64::from(a.within.0) - l).abs() <= 2.0, "{:?}", a.within);
        assert!((f64::from(a.within.1) - h).abs() <= 2.0, "{:?}", a.within);
        let (x, _) = fast_argmax(i32::MAX as u32, 300, f).unwrap();
        assert!(x.abs_diff(a.best_x) <= 1, "{x} vs {}", a.best_x);
    }

    #[test]
    fn fast_argmax_agrees_with_exhaustive() {
        let f = |x: u32| -((x as f64).ln_1p() - 7.3).powi(2);
        let ex = sweep_argmax(0, 30000, 0.0, f).unwrap();
        let (fx, _) = fast_argmax(30000, 200, f).unwrap();
        assert_eq!(ex.best_x, fx);
        // A narrow peak on a flat curve, away from the broad maximum's coarse neighbourhood.
        let g = |x: u32| {
            let broad = 1.0 - ((x as f64).ln_1p() - 7.0).powi(2) * 1e-3;
            if (120..=130).contains(&x) {
                broad + 0.01
            } else {
                broad
            }
        };
        let ex = sweep_argmax(0, 30000, 0.0, g).unwrap();
        let (fx, _) = fast_argmax(30000, 300, g).unwrap();
        assert_eq!(ex.best_x, fx);
    }

    #[test]
    fn samples_have_the_requested_covariance() {
        let cov = DMatrix::from_row_slice(2, 2, &[4.0, 1.0, 1.0, 1.0]);
        let s = sample_normal(&[1.0, -2.0], &cov, 20000, 7);
        let n = s.len() as f64;
        let m0 = s.iter().map(|v| v[0]).sum::<f64>() / n;
        let m1 = s.iter().map(|v| v[1]).sum::<f64>() / n;
        let c01 = s.iter().map(|v| (v[0] - m0) * (v[1] - m1)).sum::<f64>() / n;
        let c00 = s.iter().map(|v| (v[0] - m0).powi(2)).sum::<f64>() / n;
        // Sampling error over 20 000 draws: sd of m0 sqrt(4/n) = 0.014, of m1 sqrt(1/n) = 0.007,
        // of c00 4 sqrt(2/n) = 0.04, of c01 sqrt((4 + 1)/n) = 0.016; the bounds are about 3.5-4
        // sd (a fixed seed: they only have to admit a correct sampler).
        assert!((m0 - 1.0).abs() < 0.05 && (m1 + 2.0).abs() < 0.03);
        assert!((c00 - 4.0).abs() < 0.15 && (c01 - 1.0).abs() < 0.06);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), Some(2.0));
    }
}
