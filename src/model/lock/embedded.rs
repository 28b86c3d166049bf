//! Exact arrival view for one chain with exponential think and discrete holds: the
//! departure-embedded chain and the holder's elapsed-time cells.

use super::dist::{cumulants, fit_comp, Comp, Dist};
use super::laws::{Atoms, Law};
use super::special::log_sum_exp;
use super::{ATOMS_PER_COMPONENT_MAX, ATOMS_TOTAL_MAX};

// ---------------------------------------------------------------------------------------------
// Exact arrival view for one chain with exponential think and discrete holds
// ---------------------------------------------------------------------------------------------

/// Cells per hold atom for the holder's elapsed time.
pub const ELAPSED_CELLS: usize = 64;
/// Cells per atom for atoms that stand in for a continuous hold law.
const ELAPSED_CELLS_CONTINUOUS: usize = 16;
/// Components with `k` up to this keep the holder's residual as a piecewise-linear CDF.
const PW_COMPONENTS_MAX: usize = 128;
/// Largest number of distinct hold atoms (all classes) for the embedded-chain method.
pub const EMBEDDED_ATOMS_MAX: usize = 256;

/// A continuous CDF that is linear between breakpoints.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PwLinear {
    xs: Vec<f64>,
    fs: Vec<f64>,
}

impl PwLinear {
    /// From uniform cells `(lo, hi, weight)` with lo < hi.
    fn from_cells(cells: &[(f64, f64, f64)]) -> PwLinear {
        let total: f64 = cells.iter().map(|c| c.2).sum();
        let mut ev: Vec<(f64, f64)> = Vec::with_capacity(2 * cells.len());
        for &(lo, hi, w) in cells {
            if w > 0.0 && hi > lo {
                let dens = w / total / (hi - lo);
                ev.push((lo, dens));
                ev.push((hi, -dens));
            }
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut xs = Vec::with_capacity(ev.len());
        let mut fs = Vec::with_capacity(ev.len());
        let (mut dens, mut f) = (0.0, 0.0);
        for (x, dd) in ev {
            if let Some(&last) = xs.last() {
                f += dens * (x - last);
                if x == last {
                    dens += dd;
                    continue;
                }
            }
            xs.push(x);
            fs.push(f.min(1.0));
            dens += dd;
        }
        if let Some(l) = fs.last_mut() {
            *l = 1.0;
        }
        PwLinear { xs, fs }
    }

    pub(super) fn cdf(&self, y: f64) -> f64 {
        let i = self.xs.partition_point(|&x| x <= y);
        if i == 0 {
            return 0.0;
        }
        if i >= self.xs.len() {
            return 1.0;
        }
        let (x0, x1, f0, f1) = (self.xs[i - 1], self.xs[i], self.fs[i - 1], self.fs[i]);
        f0 + (f1 - f0) * (y - x0) / (x1 - x0)
    }
}

/// `a` range outside which Bin(m, q) has negligible mass (< 1e-17).
fn binom_window(m: usize, q: f64) -> (usize, usize) {
    if q <= 0.0 {
        return (0, 0);
    }
    if q >= 1.0 {
        return (m, m);
    }
    let mf = m as f64;
    let mean = mf * q;
    let sd = (mf * q * (1.0 - q)).sqrt();
    let lo = (mean - 15.0 * sd - 5.0).floor().max(0.0) as usize;
    let hi = ((mean + 15.0 * sd + 5.0).ceil().min(mf)) as usize;
    (lo.min(m), hi.max(lo).min(m))
}

/// Bin(m, q) pmf on `lo..=hi` into `out` (cleared), by the ratio recurrence from the mode, so
/// one `exp` per window.
fn binom_pmf_window(lf: &[f64], m: usize, q: f64, lo: usize, hi: usize, out: &mut Vec<f64>) {
    out.clear();
    out.resize(hi - lo + 1, 0.0);
    if q <= 0.0 {
        if lo == 0 {
            out[0] = 1.0;
        }
        return;
    }
    if q >= 1.0 {
        if hi == m {
            out[hi - lo] = 1.0;
        }
        return;
    }
    let (lq, l1mq) = (q.ln(), (-q).ln_1p());
    let mode = (((m + 1) as f64 * q).floor() as usize).clamp(lo, hi);
    let odds = q / (1.0 - q);
    out[mode - lo] = binom_lpmf(lf, m, mode, lq, l1mq).exp();
    for a in mode..hi {
        out[a + 1 - lo] = out[a - lo] * ((m - a) as f64 / (a + 1) as f64) * odds;
    }
    for a in (lo + 1..=mode).rev() {
        out[a - 1 - lo] = out[a - lo] * (a as f64 / (m - a + 1) as f64) / odds;
    }
}

/// ln of the Bin(m, q) pmf at a, with `lf` = ln factorials.
fn binom_lpmf(lf: &[f64], m: usize, a: usize, ln_q: f64, ln_1mq: f64) -> f64 {
    let mut v = lf[m] - lf[a] - lf[m - a];
    if a > 0 {
        v += a as f64 * ln_q;
    }
    if a < m {
        v += (m - a) as f64 * ln_1mq;
    }
    v
}

fn lse2(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if hi == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// Stationary law `d_0..d_{N−1}` of the number left behind at departures (finite-source M/G/1,
/// holds = `atoms`, think rate `lambda`), from the cut equations
/// `π_{c+1} β(λ(N−c−1)) = Σ_{i≤c} π_i P(A_i ≥ c + 2 − max(i, 1))` (all terms positive), in logs.
fn departure_chain(n: usize, lambda: f64, atoms: &Atoms, lf: &[f64]) -> Vec<f64> {
    if n == 1 {
        return vec![1.0];
    }
    let lp: Vec<f64> = atoms.p.iter().map(|p| p.ln()).collect();
    let (mut mixed, mut pmf): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut acc = vec![f64::NEG_INFINITY; n];
    let mut lpi = vec![f64::NEG_INFINITY; n];
    let mut terms = Vec::with_capacity(atoms.len());
    for i in 0..n {
        lpi[i] = if i == 0 {
            0.0
        } else {
            // ln β(λ(N − i)) = ln Σ_b p_b e^{−λ(N−i) x_b}
            terms.clear();
            terms.extend(
                atoms
                    .x
                    .iter()
                    .zip(&lp)
                    .map(|(x, lpb)| lpb - lambda * (n - i) as f64 * x),
            );
            acc[i - 1] - log_sum_exp(&terms)
        };
        if i + 2 > n {
            break;
        }
        let j = i.max(1);
        let m = n - j;
        let (mut lo, mut hi) = (m, 0);
        for &x in &atoms.x {
            let (l, h) = binom_window(m, -(-lambda * x).exp_m1());
            lo = lo.min(l);
            hi = hi.max(h);
        }
        // ln P(A ≥ t) for t = lo..=hi, from the suffix sums of the mixture pmf.
        mixed.clear();
        mixed.resize(hi - lo + 1, 0.0);
        for (b, &x) in atoms.x.iter().enumerate() {
            let q = -(-lambda * x).exp_m1();
            let (l, h) = binom_window(m, q);
            binom_pmf_window(lf, m, q, l, h, &mut pmf);
            for (a, v) in (l..=h).zip(&pmf) {
                mixed[a - lo] += atoms.p[b] * v;
            }
        }
        let mut ltail = vec![f64::NEG_INFINITY; hi - lo + 2];
        let mut acc_tail = 0.0f64;
        for a in (lo..=hi).rev() {
            acc_tail += mixed[a - lo];
            ltail[a - lo] = acc_tail.ln();
        }
        for (c, slot) in acc.iter_mut().enumerate().take(n - 1).skip(i) {
            let t = c + 2 - j;
            let lt = if t <= lo {
                0.0
            } else if t > hi {
                break;
            } else {
                ltail[t - lo]
            };
            *slot = lse2(*slot, lpi[i] + lt);
        }
    }
    let lse = log_sum_exp(&lpi);
    lpi.iter().map(|l| (l - lse).exp()).collect()
}

/// Latency distribution for one routing chain with exponential think (rate `1/z`) and discrete
/// holds: exact law of (k ahead, holder's hold) from the departure chain; the holder's elapsed
/// time is resolved into [`ELAPSED_CELLS`] cells per hold atom. `None` when not applicable.
pub(super) fn build_dist_embedded(
    n: usize,
    z: f64,
    mix: &[f64],
    laws: &[Law],
    class: usize,
    own: Option<&Law>,
) -> Option<Dist> {
    let mut pts = Vec::new();
    let all_discrete = laws.iter().all(|l| matches!(l, Law::Discrete(_)));
    for (w, l) in mix.iter().zip(laws) {
        let a = l.discretise();
        pts.extend(a.x.iter().zip(&a.p).map(|(x, p)| (*x, w * p)));
    }
    let hold = Atoms::new(pts);
    if hold.len() > EMBEDDED_ATOMS_MAX || n < 2 {
        return None;
    }
    let own = match own {
        Some(l) => l.clone(),
        None => laws.get(class)?.clone(),
    };
    let own_atoms = match &own {
        Law::Discrete(a) if all_discrete => Some(a.clone()),
        _ => None,
    };
    // Exact moments of the holds of those queued (the request mix).
    let mut q_m = [1.0, 0.0, 0.0, 0.0, 0.0];
    for (w, l) in mix.iter().zip(laws) {
        let m = l.raw_moments();
        for i in 1..5 {
            q_m[i] += w * m[i];
        }
    }
    let lambda = 1.0 / z;
    let mut lf = Vec::with_capacity(n + 1);
    lf.push(0.0);
    for i in 1..=n {
        let prev = lf[i - 1];
        lf.push(prev + (i as f64).ln());
    }
    let d = departure_chain(n, lambda, &hold, &lf);
    // Number present when a service starts.
    let mut ps = vec![0.0; n];
    ps[1] = d[0] + d.get(1).copied().unwrap_or(0.0);
    ps[2..n].copy_from_slice(&d[2..n]);

    // Cells of elapsed time per atom: fine for atoms of discrete laws, coarse for atoms that
    // only stand in for a continuous law.
    let fine: Vec<f64> = laws
        .iter()
        .filter_map(|l| match l {
            Law::Discrete(a) => Some(a.x.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let is_fine = |x: f64| {
        fine.iter()
            .any(|&f| (f - x).abs() <= 1e-12 * f.abs().max(x.abs()))
    };
    let nb = hold.len();
    let g_of: Vec<usize> = hold
        .x
        .iter()
        .map(|&x| {
            if is_fine(x) {
                ELAPSED_CELLS
            } else {
                ELAPSED_CELLS_CONTINUOUS
            }
        })
        .collect();
    let mut offset = Vec::with_capacity(nb + 1);
    offset.push(0usize);
    for g in &g_of {
        let last = offset[offset.len() - 1];
        offset.push(last + g);
    }
    let n_cells = offset[nb];
    let mut pk = vec![0.0; n];
    let mut rm = vec![[0.0f64; 3]; n];
    let mut cells: Vec<Vec<f64>> = vec![Vec::new(); PW_COMPONENTS_MAX.min(n - 1) + 1];
    // P(Bin(m, q) ≥ a + 1) from a window of tails: 1 below it, 0 above it.
    let tail_at = |lo: usize, t: &[f64], a: usize| -> f64 {
        if a < lo {
            1.0
        } else {
            t.get(a - lo).copied().unwrap_or(0.0)
        }
    };
    let (mut pmf, mut cur, mut prev): (Vec<f64>, Vec<f64>, Vec<f64>) =
        (Vec::new(), Vec::new(), Vec::new());
    for (j, &psj) in ps.iter().enumerate().skip(1) {
        if psj < 1e-15 {
            continue;
        }
        let m = n - j;
        for b in 0..nb {
            let (xb, wjb, g_cells) = (hold.x[b], psj * hold.p[b], g_of[b]);
            prev.clear();
            let (mut prev_lo, mut prev_hi) = (0usize, 0usize);
            for g in 0..g_cells {
                let s = xb * (g + 1) as f64 / g_cells as f64;
                let q = -(-lambda * s).exp_m1();
                let (lo, hi) = binom_window(m, q);
                binom_pmf_window(&lf, m, q, lo, hi, &mut pmf);
                // cur[a − lo] = P(Bin ≥ a + 1) for a = lo..=hi
                cur.clear();
                cur.resize(hi - lo + 1, 0.0);
                let mut acc = 0.0;
                for a in (lo..=hi).rev() {
                    cur[a - lo] = acc;
                    acc += pmf[a - lo];
                }
                let a_lo = lo.min(prev_lo);
                let a_hi = hi.max(prev_hi).min(m - 1);
                let (r_lo, r_hi) = (xb - s, xb - xb * g as f64 / g_cells as f64);
                let mid = [
                    0.5 * (r_lo + r_hi),
                    (r_lo * r_lo + r_lo * r_hi + r_hi * r_hi) / 3.0,
                    (r_lo + r_hi) * (r_lo * r_lo + r_hi * r_hi) / 4.0,
                ];
                for a in a_lo..=a_hi {
                    let before = if g == 0 {
                        0.0
                    } else {
                        tail_at(prev_lo, &prev, a)
                    };
                    let w = wjb * (tail_at(lo, &cur, a) - before);
                    if w <= 0.0 {
                        continue;
                    }
                    let k = j + a;
                    pk[k] += w;
                    for (r, mm) in rm[k].iter_mut().zip(&mid) {
                        *r += w * mm;
                    }
                    if let Some(cv) = cells.get_mut(k) {
                        if cv.is_empty() {
                            cv.resize(n_cells, 0.0);
                        }
                        cv[offset[b] + g] += w;
                    }
                }
                std::mem::swap(&mut prev, &mut cur);
                prev_lo = lo;
                prev_hi = hi;
            }
        }
    }
    // Assemble components.
    let own_m = own.raw_moments();
    let own_k = cumulants(&own_m);
    let q_k = cumulants(&q_m);
    let mut p_ahead = pk;
    p_ahead[0] = d[0];
    let total: f64 = p_ahead.iter().sum();
    for p in p_ahead.iter_mut() {
        *p /= total;
    }
    let mut comps = vec![(p_ahead[0], Comp::Own)];
    let mut mean = p_ahead[0] * own_k[0];
    let mut m2 = p_ahead[0] * own_m[2];
    // Placeholder for states never seen (weight 0): own hold + k − 1 queued holds.
    let mut mean_given_ahead: Vec<f64> = (0..n)
        .map(|k| own_k[0] + k.saturating_sub(1) as f64 * q_k[0])
        .collect();
    let mut conv = own_atoms;
    let mut atoms_used = 0usize;
    for k in 1..n {
        if k >= 2 {
            conv = match &conv {
                Some(c) if c.len() * hold.len() <= 16 * ATOMS_PER_COMPONENT_MAX => {
                    Some(c.convolve(&hold))
                }
                _ => None,
            };
        }
        let w = p_ahead[k];
        if w <= 0.0 || rm[k][0] <= 0.0 {
            continue;
        }
        let wk = w * total; // un-normalised weight used for the moment sums
        let r_m = [1.0, rm[k][0] / wk, rm[k][1] / wk, rm[k][2] / wk, 0.0];
        let r_k = cumulants(&r_m);
        let kq = (k - 1) as f64;
        let kk = [
            own_k[0] + r_k[0] + kq * q_k[0],
            own_k[1] + r_k[1] + kq * q_k[1],
            own_k[2] + r_k[2] + kq * q_k[2],
        ];
        mean_given_ahead[k] = kk[0];
        mean += w * kk[0];
        m2 += w * (kk[1] + kk[0] * kk[0]);
        let comp = match (&conv, cells.get(k)) {
            (Some(c), Some(cv))
                if c.len() <= ATOMS_PER_COMPONENT_MAX
                    && atoms_used + c.len() <= ATOMS_TOTAL_MAX
                    && !cv.is_empty() =>
            {
                atoms_used += c.len();
                let mut list: Vec<(f64, f64, f64)> = Vec::new();
                for b in 0..nb {
                    let (xb, gc) = (hold.x[b], g_of[b] as f64);
                    for g in 0..g_of[b] {
                        let w = cv[offset[b] + g];
                        if w > 0.0 {
                            let (lo, hi) = (1.0 - (g + 1) as f64 / gc, 1.0 - g as f64 / gc);
                            list.push((xb * lo, xb * hi, w));
                        }
                    }
                }
                Comp::AtomsPw(c.clone(), PwLinear::from_cells(&list))
            }
            _ => fit_comp(kk),
        };
        comps.push((w, comp));
    }
    Some(Dist {
        mean_ns: mean,
        second_moment_ns2: m2,
        p_ahead,
        mean_given_ahead,
        own,
        res: Vec::new(),
        comps,
        calibrated: true,
    })
}
