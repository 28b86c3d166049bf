//! Argmax of a score over an integer knob (pcp->high), the range within 1% of the best, and an
//! interval for the argmax propagated from parameter uncertainty by sampling.
//!
//! The sweep is exhaustive (every integer in the range, no interpolation), so the argmax is exact
//! for the model; the 95% interval comes from re-running the argmax for parameter vectors drawn
//! from the fitted multivariate normal (mean = estimate, covariance from the fit), with a coarse
//! log-spaced grid refined around each sample's optimum.

use nalgebra::{DMatrix, DVector};

pub use crate::stats::SplitMix64;
use serde::Serialize;

/// Result of an exhaustive sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Argmax {
    /// Knob value with the highest score (the smallest such value on ties).
    pub best_x: u32,
    /// The highest score.
    pub best_score: f64,
    /// Smallest and largest knob value whose score is within `tolerance` of the best. The set may
    /// have holes; `within_is_contiguous` says whether it does.
    pub within: (u32, u32),
    /// Whether every value between `within.0` and `within.1` is within tolerance.
    pub within_is_contiguous: bool,
    /// Relative tolerance used (0.01 for "within 1%").
    pub tolerance: f64,
    /// Number of knob values evaluated.
    pub evaluated: usize,
}

/// Sweeps `lo..=hi` in steps of 1 and returns the argmax and the range within `tolerance`
/// (relative) of the best. Non-finite scores are skipped; `None` when none is finite.
pub fn sweep_argmax(
    lo: u32,
    hi: u32,
    tolerance: f64,
    mut score: impl FnMut(u32) -> f64,
) -> Option<Argmax> {
    let n = (hi.saturating_sub(lo) as usize) + 1;
    let mut values = Vec::with_capacity(n);
    let mut best: Option<(u32, f64)> = None;
    for x in lo..=hi {
        let s = score(x);
        values.push(s);
        if s.is_finite() && best.is_none_or(|(_, b)| s > b) {
            best = Some((x, s));
        }
    }
    let (best_x, best_score) = best?;
    let floor = best_score * (1.0 - tolerance);
    let mut first = None;
    let mut last = best_x;
    for (i, s) in values.iter().enumerate() {
        if s.is_finite() && *s >= floor {
            let x = lo + i as u32;
            first.get_or_insert(x);
            last = x;
        }
    }
    let first = first.unwrap_or(best_x);
    let contiguous = values[(first - lo) as usize..=(last - lo) as usize]
        .iter()
        .all(|s| s.is_finite() && *s >= floor);
    Some(Argmax {
        best_x,
        best_score,
        within: (first, last),
        within_is_contiguous: contiguous,
        tolerance,
        evaluated: n,
    })
}

/// Argmax by a log-spaced coarse grid (0 and ~`points` values from 1 to `hi`) refined by an
/// exhaustive search between the coarse neighbours of each of the three best coarse points (a
/// flat curve can have a narrow peak, e.g. where a kernel rule changes regime, that a single
/// refinement would miss). Cheap enough to run for hundreds of parameter samples.
pub fn fast_argmax(
    hi: u32,
    points: usize,
    mut score: impl FnMut(u32) -> f64,
) -> Option<(u32, f64)> {
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
        if let Some(a) = sweep_argmax(lo, up, 0.0, &mut score) {
            if best.is_none_or(|(_, s)| a.best_score > s) {
                best = Some((a.best_x, a.best_score));
            }
        }
    }
    best
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
        assert!((m0 - 1.0).abs() < 0.05 && (m1 + 2.0).abs() < 0.03);
        assert!((c00 - 4.0).abs() < 0.15 && (c01 - 1.0).abs() < 0.06);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), Some(2.0));
    }
}
