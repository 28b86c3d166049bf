//! The latency distribution of one lock request (wait + hold): [`Dist`], its quantiles and
//! log2 buckets, and its construction from the mean values.

use crate::error::{Error, Result};
use serde::Serialize;

use super::embedded::PwLinear;
use super::laws::{Atoms, Law};
use super::special::{gamma_pq, log_sum_exp, normal_cdf};
use super::types::ArrivalView;
use super::{ATOMS_PER_COMPONENT_MAX, ATOMS_TOTAL_MAX, INPUT};

/// Bounds of the dispersion exponent α = 2 / (1 + cv²) of the count distribution.
const ALPHA_MIN: f64 = 0.1;
const ALPHA_MAX: f64 = 4.0;

// ---------------------------------------------------------------------------------------------
// Latency distribution
// ---------------------------------------------------------------------------------------------

/// One conditional latency law (given the number found ahead).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Comp {
    /// The requester's own hold (nobody ahead).
    Own,
    /// Atoms (own hold + full holds of those queued) plus the holder's equilibrium residual.
    AtomsRes(Atoms),
    /// Atoms plus a residual with its own piecewise-linear CDF.
    AtomsPw(Atoms, PwLinear),
    /// All mass at one point.
    Point(f64),
    /// Normal (third cumulant ≈ 0).
    Normal { mean: f64, sd: f64 },
    /// `shift + Gamma(shape, scale)`.
    Gamma { shift: f64, shape: f64, scale: f64 },
}

/// One log2 latency bucket, in funclatency's convention: `lo_ns -> hi_ns` with both ends
/// included for integer ns, i.e. the continuous interval `[lo_ns, hi_ns + 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bucket {
    /// Lowest ns in the bucket.
    pub lo_ns: u64,
    /// Highest ns in the bucket.
    pub hi_ns: u64,
    /// Probability mass.
    pub mass: f64,
}

/// Distribution of the time one lock request takes (wait + hold), in ns. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Dist {
    pub(super) mean_ns: f64,
    pub(super) second_moment_ns2: f64,
    pub(super) p_ahead: Vec<f64>,
    /// `E[T | k]`, the mean latency given `k` CPUs found at the lock, aligned with `p_ahead`.
    pub(super) mean_given_ahead: Vec<f64>,
    pub(super) own: Law,
    pub(super) res: Vec<(f64, Law)>,
    pub(super) comps: Vec<(f64, Comp)>,
    /// Whether the count distribution could be calibrated to the solved mean.
    pub(super) calibrated: bool,
}

/// Cumulants (κ1, κ2, κ3) from raw moments.
pub(super) fn cumulants(m: &[f64; 5]) -> [f64; 3] {
    [
        m[1],
        (m[2] - m[1] * m[1]).max(0.0),
        m[3] - 3.0 * m[1] * m[2] + 2.0 * m[1].powi(3),
    ]
}

pub(super) fn fit_comp(k: [f64; 3]) -> Comp {
    let [mu, var, k3] = k;
    let sd = var.sqrt();
    if sd <= 1e-12 * mu {
        return Comp::Point(mu);
    }
    let skew = k3 / (sd * sd * sd);
    if skew <= 1e-3 {
        return Comp::Normal { mean: mu, sd };
    }
    let shape = 4.0 / (skew * skew);
    let scale = sd * skew / 2.0;
    let shift = mu - shape * scale;
    if shift >= 0.0 {
        Comp::Gamma {
            shift,
            shape,
            scale,
        }
    } else {
        Comp::Gamma {
            shift: 0.0,
            shape: mu * mu / var,
            scale: var / mu,
        }
    }
}

/// `P(k | k ≥ 1) ∝ (M−1)!/(M−k)! r^{k−1}`, k = 1..=M, with `E[k | k ≥ 1] = target` (clamped to
/// [1, M]). Returns the probabilities and whether the target was reachable.
fn ahead_shape(m: usize, target: f64, alpha: f64) -> (Vec<f64>, bool) {
    if m <= 1 {
        return (vec![1.0; m.max(1)], (target - 1.0).abs() < 1e-9);
    }
    let mf = m as f64;
    let mut h = Vec::with_capacity(m);
    h.push(0.0);
    for k in 2..=m {
        let prev = h[k - 2];
        h.push(prev + alpha * (mf - (k - 1) as f64).ln());
    }
    let probs = |theta: f64| -> Vec<f64> {
        let lw: Vec<f64> = h
            .iter()
            .enumerate()
            .map(|(i, hk)| hk + i as f64 * theta)
            .collect();
        let lse = log_sum_exp(&lw);
        lw.iter().map(|w| (w - lse).exp()).collect()
    };
    let moments = |p: &[f64]| -> (f64, f64) {
        let mean: f64 = p
            .iter()
            .enumerate()
            .map(|(i, pk)| (i + 1) as f64 * pk)
            .sum();
        let m2: f64 = p
            .iter()
            .enumerate()
            .map(|(i, pk)| ((i + 1) as f64).powi(2) * pk)
            .sum();
        (mean, (m2 - mean * mean).max(0.0))
    };
    let ok = target >= 1.0 - 1e-9 && target <= mf + 1e-9;
    let t = target.clamp(1.0, mf);
    if t <= 1.0 + 1e-12 {
        let mut p = vec![0.0; m];
        p[0] = 1.0;
        return (p, ok);
    }
    if t >= mf - 1e-12 {
        let mut p = vec![0.0; m];
        p[m - 1] = 1.0;
        return (p, ok);
    }
    let (mut lo, mut hi) = (-60.0 - mf.ln(), 60.0);
    let mut theta = 0.0;
    let mut best = probs(theta);
    for _ in 0..200 {
        let (mean, var) = moments(&best);
        let err = mean - t;
        if err.abs() <= 1e-12 * t {
            break;
        }
        if err > 0.0 {
            hi = theta;
        } else {
            lo = theta;
        }
        let newton = if var > 0.0 {
            theta - err / var
        } else {
            f64::NAN
        };
        theta = if newton.is_finite() && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if hi - lo < 1e-14 {
            break;
        }
        best = probs(theta);
    }
    (best, ok)
}

pub(super) fn build_dist(
    laws: &[Law],
    class: usize,
    own: Option<&Law>,
    view: &ArrivalView,
    wait_mean: f64,
) -> Dist {
    let own = own.unwrap_or(&laws[class]).clone();
    let own_m = own.raw_moments();
    let own_k = cumulants(&own_m);
    let s_own = own_m[1];
    let trivial = Dist {
        mean_ns: s_own,
        second_moment_ns2: own_m[2],
        p_ahead: vec![1.0],
        mean_given_ahead: vec![s_own],
        own: own.clone(),
        res: Vec::new(),
        comps: vec![(1.0, Comp::Own)],
        calibrated: wait_mean.abs() <= 1e-9 * s_own,
    };
    if view.others == 0 || view.p_busy <= 0.0 {
        return trivial;
    }
    let res: Vec<(f64, Law)> = view
        .res_weights
        .iter()
        .zip(laws)
        .filter(|(w, _)| **w > 0.0)
        .map(|(w, l)| (*w, l.clone()))
        .collect();
    let queue: Vec<(f64, Law)> = view
        .queue_weights
        .iter()
        .zip(laws)
        .filter(|(w, _)| **w > 0.0)
        .map(|(w, l)| (*w, l.clone()))
        .collect();
    if res.is_empty() || queue.is_empty() {
        return trivial;
    }
    // Residual raw moments E[Res^n] = Σ w_j E[H_j^{n+1}] / ((n+1) S_j); queue mixture moments.
    let mut res_m = [1.0, 0.0, 0.0, 0.0, 0.0];
    for (w, l) in &res {
        let m = l.raw_moments();
        for n in 1..4 {
            res_m[n] += w * m[n + 1] / ((n + 1) as f64 * m[1]);
        }
    }
    let mut q_m = [1.0, 0.0, 0.0, 0.0, 0.0];
    for (w, l) in &queue {
        let m = l.raw_moments();
        for n in 1..5 {
            q_m[n] += w * m[n];
        }
    }
    let res_k = cumulants(&res_m);
    let q_k = cumulants(&q_m);
    let p_busy = view.p_busy.min(1.0);
    let m_others = view.others;
    let queued_max = p_busy * (m_others as f64 - 1.0);
    let queued_raw = (wait_mean - p_busy * res_k[0]) / q_k[0];
    let queued = queued_raw.clamp(0.0, queued_max);
    let alpha = (2.0 / (1.0 + q_k[1] / (q_k[0] * q_k[0]))).clamp(ALPHA_MIN, ALPHA_MAX);
    let (shape, reachable) = ahead_shape(m_others, 1.0 + queued / p_busy, alpha);
    let mut p_ahead = Vec::with_capacity(m_others + 1);
    p_ahead.push(1.0 - p_busy);
    p_ahead.extend(shape.iter().map(|p| p * p_busy));

    // Atoms path: own hold discrete, queue holds discrete.
    let own_atoms = match &own {
        Law::Discrete(a) => Some(a.clone()),
        _ => None,
    };
    let queue_atoms = if queue.iter().all(|(_, l)| matches!(l, Law::Discrete(_))) {
        let mut pts = Vec::new();
        for (w, l) in &queue {
            if let Law::Discrete(a) = l {
                pts.extend(a.x.iter().zip(&a.p).map(|(x, p)| (*x, w * p)));
            }
        }
        Some(Atoms::new(pts))
    } else {
        None
    };
    let mut comps = Vec::with_capacity(p_ahead.len());
    comps.push((p_ahead[0], Comp::Own));
    let mut conv = own_atoms;
    let mut atoms_used = 0usize;
    let mut mean = p_ahead[0] * own_k[0];
    let mut m2 = p_ahead[0] * own_m[2];
    let mut mean_given_ahead = Vec::with_capacity(p_ahead.len());
    mean_given_ahead.push(own_k[0]);
    for (i, &w) in p_ahead.iter().enumerate().skip(1) {
        let kq = (i - 1) as f64;
        let kk = [
            own_k[0] + res_k[0] + kq * q_k[0],
            own_k[1] + res_k[1] + kq * q_k[1],
            own_k[2] + res_k[2] + kq * q_k[2],
        ];
        mean_given_ahead.push(kk[0]);
        mean += w * kk[0];
        m2 += w * (kk[1] + kk[0] * kk[0]);
        if i >= 2 {
            conv = match (&conv, &queue_atoms) {
                (Some(c), Some(q)) if c.len() * q.len() <= 16 * ATOMS_PER_COMPONENT_MAX => {
                    Some(c.convolve(q))
                }
                _ => None,
            };
        }
        let comp = match &conv {
            Some(c)
                if c.len() <= ATOMS_PER_COMPONENT_MAX
                    && atoms_used + c.len() <= ATOMS_TOTAL_MAX =>
            {
                atoms_used += c.len();
                Comp::AtomsRes(c.clone())
            }
            _ => {
                conv = None;
                fit_comp(kk)
            }
        };
        if w > 0.0 {
            comps.push((w, comp));
        }
    }
    Dist {
        mean_ns: mean,
        second_moment_ns2: m2,
        p_ahead,
        mean_given_ahead,
        own,
        res,
        comps,
        calibrated: (queued_raw - queued).abs() <= 1e-9 * queued_raw.abs().max(1.0) && reachable,
    }
}

impl Dist {
    /// Mean latency (wait + hold) in ns. Equals the solved `response_ns_mean` of the class unless
    /// [`Dist::is_calibrated`] is false.
    pub fn mean(&self) -> f64 {
        self.mean_ns
    }

    /// Standard deviation of the latency in ns.
    pub fn std_dev_ns(&self) -> f64 {
        (self.second_moment_ns2 - self.mean_ns * self.mean_ns)
            .max(0.0)
            .sqrt()
    }

    /// Probability that the request finds the lock held.
    pub fn p_contended(&self) -> f64 {
        1.0 - self.p_ahead.first().copied().unwrap_or(1.0)
    }

    /// `P(k)`, k = 0..=N−1: probability that the request finds k CPUs at the lock.
    pub fn ahead_probabilities(&self) -> &[f64] {
        &self.p_ahead
    }

    /// `(P(k ≥ m), E[T | k ≥ m])`: the probability that a request finds at least `m` CPUs at
    /// the lock (holder included) and its mean latency (wait + hold) given that; the mean is NaN
    /// when the probability is 0. `m = 1` is ordinary contention; `m = 2` is what
    /// `perf lock contention` counts on a qspinlock (see [`crate::model::lock`]'s callers).
    pub fn given_ahead_at_least(&self, m: usize) -> (f64, f64) {
        let (mut p, mut pt) = (0.0, 0.0);
        for (pk, tk) in self.p_ahead.iter().zip(&self.mean_given_ahead).skip(m) {
            p += pk;
            pt += pk * tk;
        }
        if p > 0.0 {
            (p, pt / p)
        } else {
            (0.0, f64::NAN)
        }
    }

    /// Mean of the requester's own hold, ns (`E[T | k = 0]`).
    pub fn own_hold_mean_ns(&self) -> f64 {
        self.own.mean()
    }

    /// Whether the count distribution reproduces the solved mean wait (false only when the solved
    /// wait lies outside what the residual-plus-queue form can represent; then the mean is off).
    pub fn is_calibrated(&self) -> bool {
        self.calibrated
    }

    fn res_cdf(&self, y: f64) -> f64 {
        self.res.iter().map(|(w, l)| w * l.residual_cdf(y)).sum()
    }

    fn comp_cdf(&self, c: &Comp, x: f64, strict: bool) -> f64 {
        match c {
            Comp::Own => {
                if strict {
                    self.own.cdf_lt(x)
                } else {
                    self.own.cdf(x)
                }
            }
            Comp::AtomsRes(a) => {
                // P(atom + Res ≤ x): only atoms below x contribute.
                let n = a.x.partition_point(|&xa| xa < x);
                a.x[..n]
                    .iter()
                    .zip(&a.p[..n])
                    .map(|(xa, pa)| pa * self.res_cdf(x - xa))
                    .sum()
            }
            Comp::AtomsPw(a, r) => {
                let n = a.x.partition_point(|&xa| xa < x);
                a.x[..n]
                    .iter()
                    .zip(&a.p[..n])
                    .map(|(xa, pa)| pa * r.cdf(x - xa))
                    .sum()
            }
            Comp::Point(m) => {
                if x > *m || (!strict && x == *m) {
                    1.0
                } else {
                    0.0
                }
            }
            Comp::Normal { mean, sd } => {
                let z = (x - mean) / sd;
                if z > 40.0 {
                    1.0
                } else if z < -40.0 {
                    0.0
                } else {
                    normal_cdf(z)
                }
            }
            Comp::Gamma {
                shift,
                shape,
                scale,
            } => {
                if x <= *shift {
                    return 0.0;
                }
                if *shape >= 1.0 {
                    let sd = shape.sqrt() * scale;
                    if x > shift + shape * scale + 50.0 * sd {
                        return 1.0;
                    }
                }
                gamma_pq(*shape, (x - shift) / scale).0
            }
        }
    }

    fn cdf_impl(&self, x: f64, strict: bool) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        let s: f64 = self
            .comps
            .iter()
            .map(|(w, c)| w * self.comp_cdf(c, x, strict))
            .sum();
        s.clamp(0.0, 1.0)
    }

    /// `P(T ≤ x_ns)`.
    pub fn cdf(&self, x_ns: f64) -> f64 {
        self.cdf_impl(x_ns, false)
    }

    /// Smallest `x` (ns) with `P(T ≤ x) ≥ p`, for 0 < p < 1.
    pub fn quantile(&self, p: f64) -> Result<f64> {
        if !(p > 0.0 && p < 1.0) {
            return Err(Error::invalid(
                INPUT,
                "quantile.p",
                format!("must be in (0, 1), got {p}"),
            ));
        }
        let mut lo = 0.0;
        let mut hi = self.mean_ns.max(1e-9) * 2.0;
        let mut doublings = 0;
        while self.cdf(hi) < p {
            lo = hi;
            hi *= 2.0;
            doublings += 1;
            if doublings > 2000 || !hi.is_finite() {
                return Err(Error::Unsupported(format!(
                    "lock latency quantile {p}: no upper bracket"
                )));
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if self.cdf(mid) >= p {
                hi = mid;
            } else {
                lo = mid;
            }
            if hi - lo <= 1e-12 * hi {
                break;
            }
        }
        Ok(hi)
    }

    /// `P(lo_ns ≤ T < hi_ns)`.
    pub fn mass_in(&self, lo_ns: f64, hi_ns: f64) -> Result<f64> {
        if lo_ns.is_nan() || hi_ns.is_nan() || lo_ns > hi_ns {
            return Err(Error::invalid(
                INPUT,
                "mass_in",
                format!("need lo ≤ hi (not NaN), got [{lo_ns}, {hi_ns})"),
            ));
        }
        Ok((self.cdf_impl(hi_ns, true) - self.cdf_impl(lo_ns, true)).max(0.0))
    }

    /// funclatency's log2 buckets `2^e -> 2^(e+1) − 1` for e = lo_exp..=hi_exp (bucket 0 is
    /// `0 -> 1`). Mass outside the range is not reported.
    pub fn log2_buckets(&self, lo_exp: u32, hi_exp: u32) -> Result<Vec<Bucket>> {
        if lo_exp > hi_exp || hi_exp > 62 {
            return Err(Error::invalid(
                INPUT,
                "log2_buckets",
                format!("need lo_exp ≤ hi_exp ≤ 62, got {lo_exp}..={hi_exp}"),
            ));
        }
        (lo_exp..=hi_exp)
            .map(|e| {
                let lo = if e == 0 { 0 } else { 1u64 << e };
                let hi = (1u64 << (e + 1)) - 1;
                let mass = self.mass_in(lo as f64, (hi + 1) as f64)?;
                Ok(Bucket {
                    lo_ns: lo,
                    hi_ns: hi,
                    mass,
                })
            })
            .collect()
    }
}
