//! Hold laws, validated and normalised: discrete atoms and the continuous laws, their moments,
//! CDFs and Laplace–Stieltjes transforms.

use crate::error::{Error, Result};

use super::exact::check_pos;
use super::special::{gamma_pq, gamma_quantile};
use super::types::HoldDist;
use super::INPUT;

// ---------------------------------------------------------------------------------------------
// Hold laws (validated, normalised)
// ---------------------------------------------------------------------------------------------

/// A discrete law: sorted distinct points with prefix sums for O(log n) CDFs.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Atoms {
    pub(super) x: Vec<f64>,
    pub(super) p: Vec<f64>,
    /// `cum_p[i] = Σ_{b<i} p_b` (length n+1).
    cum_p: Vec<f64>,
    /// `cum_px[i] = Σ_{b<i} p_b x_b` (length n+1).
    cum_px: Vec<f64>,
}

impl Atoms {
    /// From (x, weight) pairs with x > 0 and weights ≥ 0, total > 0: sorts, merges, normalises.
    pub(super) fn new(mut pts: Vec<(f64, f64)>) -> Atoms {
        pts.retain(|&(_, w)| w > 0.0);
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 = pts.iter().map(|p| p.1).sum();
        let mut x: Vec<f64> = Vec::with_capacity(pts.len());
        let mut p: Vec<f64> = Vec::with_capacity(pts.len());
        for (xi, wi) in pts {
            match x.last() {
                Some(&last) if (xi - last).abs() <= 1e-12 * xi.abs().max(last.abs()) => {
                    if let Some(lp) = p.last_mut() {
                        *lp += wi / total;
                    }
                }
                _ => {
                    x.push(xi);
                    p.push(wi / total);
                }
            }
        }
        let mut cum_p = Vec::with_capacity(x.len() + 1);
        let mut cum_px = Vec::with_capacity(x.len() + 1);
        cum_p.push(0.0);
        cum_px.push(0.0);
        for (xi, pi) in x.iter().zip(&p) {
            let (a, b) = (cum_p[cum_p.len() - 1], cum_px[cum_px.len() - 1]);
            cum_p.push(a + pi);
            cum_px.push(b + pi * xi);
        }
        Atoms {
            x,
            p,
            cum_p,
            cum_px,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.x.len()
    }

    pub(super) fn total(&self) -> f64 {
        self.cum_p.last().copied().unwrap_or(0.0)
    }

    pub(super) fn mean(&self) -> f64 {
        self.cum_px.last().copied().unwrap_or(0.0)
    }

    /// P(H ≤ t).
    pub(super) fn cdf(&self, t: f64) -> f64 {
        let i = self.x.partition_point(|&x| x <= t);
        self.cum_p[i]
    }

    /// P(H < t).
    pub(super) fn cdf_lt(&self, t: f64) -> f64 {
        let i = self.x.partition_point(|&x| x < t);
        self.cum_p[i]
    }

    /// `Σ_b p_b min(y, x_b)`.
    pub(super) fn mean_min(&self, y: f64) -> f64 {
        if y <= 0.0 {
            return 0.0;
        }
        let i = self.x.partition_point(|&x| x <= y);
        self.cum_px[i] + y * (self.total() - self.cum_p[i])
    }

    /// Convolution (sum of independent draws), merged.
    pub(super) fn convolve(&self, other: &Atoms) -> Atoms {
        let mut pts = Vec::with_capacity(self.len() * other.len());
        for (xa, pa) in self.x.iter().zip(&self.p) {
            for (xb, pb) in other.x.iter().zip(&other.p) {
                pts.push((xa + xb, pa * pb));
            }
        }
        Atoms::new(pts)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Law {
    Exp { mean: f64 },
    Gamma { shape: f64, scale: f64 },
    Discrete(Atoms),
}

impl Law {
    pub(super) fn from_hold(h: &HoldDist, field: &str) -> Result<Law> {
        let pos = |name: &str, v: f64| check_pos(&format!("{field}.{name}"), v);
        match h {
            HoldDist::Exponential { mean_ns } => {
                pos("mean_ns", *mean_ns)?;
                Ok(Law::Exp { mean: *mean_ns })
            }
            HoldDist::Gamma { mean_ns, cv2 } => {
                pos("mean_ns", *mean_ns)?;
                if !(cv2.is_finite() && *cv2 >= 0.0) {
                    return Err(Error::invalid(
                        INPUT,
                        format!("{field}.cv2"),
                        format!("must be finite and ≥ 0, got {cv2}"),
                    ));
                }
                if *cv2 < 1e-12 {
                    Ok(Law::Discrete(Atoms::new(vec![(*mean_ns, 1.0)])))
                } else if (*cv2 - 1.0).abs() < 1e-12 {
                    Ok(Law::Exp { mean: *mean_ns })
                } else {
                    Ok(Law::Gamma {
                        shape: 1.0 / cv2,
                        scale: mean_ns * cv2,
                    })
                }
            }
            HoldDist::Deterministic { hold_ns } => {
                pos("hold_ns", *hold_ns)?;
                Ok(Law::Discrete(Atoms::new(vec![(*hold_ns, 1.0)])))
            }
            HoldDist::Discrete { atoms } => {
                if atoms.is_empty() {
                    return Err(Error::invalid(
                        INPUT,
                        format!("{field}.atoms"),
                        "needs at least one atom",
                    ));
                }
                let mut total = 0.0;
                for (i, a) in atoms.iter().enumerate() {
                    pos(&format!("atoms[{i}].hold_ns"), a.hold_ns)?;
                    if !(a.weight.is_finite() && a.weight >= 0.0) {
                        return Err(Error::invalid(
                            INPUT,
                            format!("{field}.atoms[{i}].weight"),
                            format!("must be finite and ≥ 0, got {}", a.weight),
                        ));
                    }
                    total += a.weight;
                }
                if !(total > 0.0 && total.is_finite()) {
                    return Err(Error::invalid(
                        INPUT,
                        format!("{field}.atoms"),
                        "weights must have a finite positive sum",
                    ));
                }
                Ok(Law::Discrete(Atoms::new(
                    atoms.iter().map(|a| (a.hold_ns, a.weight)).collect(),
                )))
            }
        }
    }

    pub(super) fn mean(&self) -> f64 {
        match self {
            Law::Exp { mean } => *mean,
            Law::Gamma { shape, scale } => shape * scale,
            Law::Discrete(a) => a.mean(),
        }
    }

    /// Raw moments E[H^n], n = 0..=4.
    pub(super) fn raw_moments(&self) -> [f64; 5] {
        let mut m = [1.0; 5];
        match self {
            Law::Exp { mean } => {
                let mut f = 1.0;
                for (n, mn) in m.iter_mut().enumerate().skip(1) {
                    f *= n as f64 * mean;
                    *mn = f;
                }
            }
            Law::Gamma { shape, scale } => {
                let mut f = 1.0;
                for (n, mn) in m.iter_mut().enumerate().skip(1) {
                    f *= (shape + (n - 1) as f64) * scale;
                    *mn = f;
                }
            }
            Law::Discrete(a) => {
                for (n, mn) in m.iter_mut().enumerate().skip(1) {
                    *mn =
                        a.x.iter()
                            .zip(&a.p)
                            .map(|(x, p)| p * x.powi(n as i32))
                            .sum();
                }
            }
        }
        m
    }

    /// Discrete version for the embedded chain: itself if discrete; otherwise two atoms per
    /// probability bin at the bin's conditional mean ± its conditional standard deviation (bins
    /// of 0.1 up to 0.9, then halving tail bins down to 1 − 0.1·2⁻¹², then the rest), which
    /// keeps the first two moments of every bin, hence the mean and E[H²], exactly.
    pub(super) fn discretise(&self) -> Atoms {
        let (shape, scale) = match self {
            Law::Discrete(a) => return a.clone(),
            Law::Exp { mean } => (1.0, *mean),
            Law::Gamma { shape, scale } => (*shape, *scale),
        };
        let mut edges: Vec<f64> = (0..=9).map(|i| 0.1 * f64::from(i)).collect();
        edges.extend((1..=12).map(|i| 1.0 - 0.1 * 0.5f64.powi(i)));
        edges.push(1.0);
        // Quantiles (in units of `scale`) of each edge, then Q(a+1, ·) at them.
        let xq: Vec<f64> = edges.iter().map(|&p| gamma_quantile(shape, p)).collect();
        let q1: Vec<f64> = xq.iter().map(|&x| gamma_pq(shape + 1.0, x).1).collect();
        let q2: Vec<f64> = xq.iter().map(|&x| gamma_pq(shape + 2.0, x).1).collect();
        let mut pts = Vec::with_capacity(2 * edges.len());
        for i in 0..edges.len() - 1 {
            let w = edges[i + 1] - edges[i];
            let c = shape * scale * (q1[i] - q1[i + 1]) / w;
            let m2 = shape * (shape + 1.0) * scale * scale * (q2[i] - q2[i + 1]) / w;
            let sd = (m2 - c * c).max(0.0).sqrt().min(c);
            if !(c > 0.0 && c.is_finite()) {
                continue;
            }
            if sd > 1e-9 * c {
                pts.push((c - sd, 0.5 * w));
                pts.push((c + sd, 0.5 * w));
            } else {
                pts.push((c, w));
            }
        }
        Atoms::new(pts)
    }

    /// E[H²] / (2 E[H]): mean residual hold at a random instant.
    pub(super) fn residual_mean(&self) -> f64 {
        let m = self.raw_moments();
        m[2] / (2.0 * m[1])
    }

    pub(super) fn cdf(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        match self {
            Law::Exp { mean } => -(-t / mean).exp_m1(),
            Law::Gamma { shape, scale } => gamma_pq(*shape, t / scale).0,
            Law::Discrete(a) => a.cdf(t),
        }
    }

    pub(super) fn cdf_lt(&self, t: f64) -> f64 {
        match self {
            Law::Discrete(a) => a.cdf_lt(t),
            _ => self.cdf(t),
        }
    }

    /// CDF of the equilibrium residual: `(1/S) ∫_0^y (1 − F(x)) dx`.
    pub(super) fn residual_cdf(&self, y: f64) -> f64 {
        if y <= 0.0 {
            return 0.0;
        }
        match self {
            Law::Exp { mean } => -(-y / mean).exp_m1(),
            Law::Gamma { shape, scale } => {
                let (_, q) = gamma_pq(*shape, y / scale);
                let (p1, _) = gamma_pq(shape + 1.0, y / scale);
                let m = shape * scale;
                ((y * q + m * p1) / m).clamp(0.0, 1.0)
            }
            Law::Discrete(a) => (a.mean_min(y) / a.mean()).clamp(0.0, 1.0),
        }
    }

    /// `(ln β(s), ln(1 − β(s)))`, β the Laplace–Stieltjes transform, s > 0.
    pub(super) fn ln_lst(&self, s: f64) -> (f64, f64) {
        match self {
            Law::Exp { mean } => {
                let sm = s * mean;
                let l = sm.ln_1p();
                (-l, sm.ln() - l)
            }
            Law::Gamma { shape, scale } => {
                let lb = -shape * (s * scale).ln_1p();
                (lb, (-lb.exp_m1()).ln())
            }
            Law::Discrete(a) => {
                let mut lb = Lse::default();
                let mut one_minus = 0.0;
                for (x, p) in a.x.iter().zip(&a.p) {
                    lb.add(p.ln() - s * x);
                    one_minus -= p * (-s * x).exp_m1();
                }
                (lb.value(), one_minus.ln())
            }
        }
    }
}

/// `(ln β, ln(1 − β))` of a mixture with weights summing to 1.
pub(super) fn ln_lst_mix(parts: &[(f64, Law)], s: f64) -> (f64, f64) {
    if let [(_, law)] = parts {
        return law.ln_lst(s);
    }
    let (mut a, mut b) = (Lse::default(), Lse::default());
    for (w, l) in parts {
        let (lb, l1) = l.ln_lst(s);
        a.add(w.ln() + lb);
        b.add(w.ln() + l1);
    }
    (a.value(), b.value())
}

/// Streaming log-sum-exp.
struct Lse {
    max: f64,
    sum: f64,
}

impl Default for Lse {
    fn default() -> Self {
        Lse {
            max: f64::NEG_INFINITY,
            sum: 0.0,
        }
    }
}

impl Lse {
    pub(super) fn add(&mut self, x: f64) {
        if x == f64::NEG_INFINITY {
            return;
        }
        if x > self.max {
            self.sum = self.sum * (self.max - x).exp() + 1.0;
            self.max = x;
        } else {
            self.sum += (x - self.max).exp();
        }
    }

    pub(super) fn value(&self) -> f64 {
        if self.sum == 0.0 {
            f64::NEG_INFINITY
        } else {
            self.max + self.sum.ln()
        }
    }
}
