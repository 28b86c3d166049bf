//! Special functions: log-sum-exp, incomplete gamma, normal CDF.

use crate::fit::stats::ln_gamma;

// ---------------------------------------------------------------------------------------------
// Special functions
// ---------------------------------------------------------------------------------------------

pub(super) fn log_sum_exp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// ln(1 + e^a) without overflow.
pub(super) fn softplus(a: f64) -> f64 {
    if a > 0.0 {
        a + (-a).exp().ln_1p()
    } else {
        a.exp().ln_1p()
    }
}

/// 1 / (1 + e^{−a}).
pub(super) fn sigmoid(a: f64) -> f64 {
    if a >= 0.0 {
        1.0 / (1.0 + (-a).exp())
    } else {
        let e = a.exp();
        e / (1.0 + e)
    }
}

/// Regularised incomplete gamma functions (P(a, x), Q(a, x)), a > 0.
/// Series for x < a + 1, Lentz continued fraction otherwise; Wilson–Hilferty for a > 1e4.
pub(super) fn gamma_pq(a: f64, x: f64) -> (f64, f64) {
    if x.is_nan() || a.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    if x <= 0.0 {
        return (0.0, 1.0);
    }
    if x.is_infinite() {
        return (1.0, 0.0);
    }
    if a > 1e4 {
        let v = 1.0 / (9.0 * a);
        let z = ((x / a).cbrt() - (1.0 - v)) / v.sqrt();
        return (normal_cdf(z), normal_cdf(-z));
    }
    let ln_pre = -x + a * x.ln() - ln_gamma(a);
    if x < a + 1.0 {
        let mut ap = a;
        let mut del = 1.0 / a;
        let mut sum = del;
        for _ in 0..100_000 {
            ap += 1.0;
            del *= x / ap;
            sum += del;
            if del.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        let p = (ln_pre + sum.ln()).exp().clamp(0.0, 1.0);
        (p, 1.0 - p)
    } else {
        const TINY: f64 = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..100_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < TINY {
                d = TINY;
            }
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-16 {
                break;
            }
        }
        let q = (ln_pre + h.ln()).exp().clamp(0.0, 1.0);
        (1.0 - q, q)
    }
}

/// `x` with P(a, x) = p (unit scale), by bisection; 0 for p ≤ 0 and ∞ for p ≥ 1.
pub(super) fn gamma_quantile(a: f64, p: f64) -> f64 {
    if p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let mut hi = a.max(1.0);
    while gamma_pq(a, hi).0 < p {
        hi *= 2.0;
        if !hi.is_finite() {
            return hi;
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gamma_pq(a, mid).0 < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-14 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Standard normal CDF, Φ(z) = ½ erfc(−z/√2), via Q(½, z²/2).
pub(super) fn normal_cdf(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    let q = gamma_pq(0.5, 0.5 * z * z).1;
    if z < 0.0 {
        0.5 * q
    } else {
        1.0 - 0.5 * q
    }
}
