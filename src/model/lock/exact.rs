//! Exact finite-source solvers: M/M/1//N (machine repairman) and Takács' M/G/1//N, and the
//! mixed-class solution built on Takács.

use crate::error::{Error, Result};

use super::laws::{ln_lst_mix, Law};
use super::solve::{assemble, rel_eq, ClassMeans, Validated};
use super::special::{log_sum_exp, sigmoid, softplus};
use super::types::{ArrivalView, FiniteSource, HoldDist, LockSolution, MachineRepairman, Method};
use super::{INPUT, MAX_CPUS};

// ---------------------------------------------------------------------------------------------
// Public solvers
// ---------------------------------------------------------------------------------------------

pub(super) fn check_n(n_cpus: u32) -> Result<()> {
    if n_cpus == 0 || n_cpus > MAX_CPUS {
        return Err(Error::invalid(
            INPUT,
            "n_cpus",
            format!("must be between 1 and {MAX_CPUS}, got {n_cpus}"),
        ));
    }
    Ok(())
}

pub(super) fn check_pos(field: &str, v: f64) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(Error::invalid(
            INPUT,
            field,
            format!("must be finite and > 0, got {v}"),
        ));
    }
    Ok(())
}

/// Exact M/M/1//N: `n_cpus` CPUs, exponential holds of mean `hold_ns_mean`, think mean
/// `think_ns_mean` (any think law: the result is insensitive to it).
pub fn machine_repairman(
    n_cpus: u32,
    think_ns_mean: f64,
    hold_ns_mean: f64,
) -> Result<MachineRepairman> {
    check_n(n_cpus)?;
    check_pos("think_ns_mean", think_ns_mean)?;
    check_pos("hold_ns_mean", hold_ns_mean)?;
    let p = mm1n_probabilities(n_cpus as usize, hold_ns_mean / think_ns_mean);
    let u = 1.0 - p[0];
    let x = u / hold_ns_mean; // per ns
    let l: f64 = p.iter().enumerate().map(|(k, pk)| k as f64 * pk).sum();
    let r = if n_cpus == 1 {
        hold_ns_mean
    } else {
        (l / x).max(hold_ns_mean)
    };
    let p_contended = if n_cpus == 1 {
        0.0
    } else {
        1.0 - mm1n_probabilities(n_cpus as usize - 1, hold_ns_mean / think_ns_mean)[0]
    };
    Ok(MachineRepairman {
        state_probabilities: p,
        utilisation: u,
        throughput_per_s: x * 1e9,
        queue_len_mean: l,
        wait_ns_mean: r - hold_ns_mean,
        response_ns_mean: r,
        p_contended,
    })
}

/// `p_k ∝ N!/(N−k)! ρ^k`, k = 0..=n, normalised in logs.
fn mm1n_probabilities(n: usize, rho: f64) -> Vec<f64> {
    let ln_rho = rho.ln();
    let mut lw = Vec::with_capacity(n + 1);
    lw.push(0.0);
    for k in 1..=n {
        let prev = lw[k - 1];
        lw.push(prev + ((n - k + 1) as f64).ln() + ln_rho);
    }
    let lse = log_sum_exp(&lw);
    lw.iter().map(|w| (w - lse).exp()).collect()
}

/// Exact finite-source M/G/1//N mean values (Takács): exponential think with mean
/// `think_ns_mean`, holds drawn from `hold`.
pub fn finite_source_mg1(n_cpus: u32, think_ns_mean: f64, hold: &HoldDist) -> Result<FiniteSource> {
    check_n(n_cpus)?;
    check_pos("think_ns_mean", think_ns_mean)?;
    let law = Law::from_hold(hold, "hold")?;
    let t = takacs(n_cpus as usize, think_ns_mean, &[(1.0, law)]);
    Ok(FiniteSource {
        p_idle: t.p_idle,
        utilisation: t.utilisation,
        throughput_per_s: t.x_per_ns * 1e9,
        queue_len_mean: t.queue_len,
        wait_ns_mean: t.wait_ns,
        response_ns_mean: t.wait_ns + t.hold_mean,
        p_contended: t.p_contended,
    })
}

pub(super) struct Takacs {
    pub(super) p_idle: f64,
    pub(super) utilisation: f64,
    pub(super) x_per_ns: f64,
    pub(super) queue_len: f64,
    pub(super) wait_ns: f64,
    pub(super) hold_mean: f64,
    pub(super) p_contended: f64,
}

/// Takács' formula for a hold mixture `parts` (weights sum to 1) and exponential think of mean `z`.
fn takacs(n: usize, z: f64, parts: &[(f64, Law)]) -> Takacs {
    let s: f64 = parts.iter().map(|(w, l)| w * l.mean()).sum();
    let lambda = 1.0 / z;
    // ln T_j = ln C(N-1, j) + Σ_{i≤j} [ln(1-β(iλ)) - ln β(iλ)]
    let mut ln_t = Vec::with_capacity(n);
    ln_t.push(0.0);
    let mut acc = 0.0;
    for j in 1..n {
        let (lb, l1mb) = ln_lst_mix(parts, j as f64 * lambda);
        acc += ((n - j) as f64).ln() - (j as f64).ln() + l1mb - lb;
        ln_t.push(acc);
    }
    let a = (n as f64 * lambda * s).ln() + log_sum_exp(&ln_t);
    // p0 = 1/(1+e^A)
    let ln_p0 = -softplus(a);
    let p0 = ln_p0.exp();
    let u = sigmoid(a);
    let x = u / s;
    let nf = n as f64;
    let l = (nf - x * z).clamp(u, nf);
    let (w, p_contended) = if n == 1 {
        (0.0, 0.0)
    } else {
        let r = l / x;
        let pi0 = (nf.ln() + ln_p0 - (x * z).ln()).exp().clamp(0.0, 1.0);
        ((r - s).max(0.0), 1.0 - pi0)
    };
    Takacs {
        p_idle: p0,
        utilisation: u,
        x_per_ns: x,
        queue_len: l,
        wait_ns: w,
        hold_mean: s,
        p_contended,
    }
}

/// Takács for the request mix `mix` (sums to 1) and the arrival view it implies.
pub(super) fn takacs_view(n: usize, z: f64, mix: &[f64], laws: &[Law]) -> (Takacs, ArrivalView) {
    let parts: Vec<(f64, Law)> = mix.iter().copied().zip(laws.iter().cloned()).collect();
    let t = takacs(n, z, &parts);
    let s_bar = t.hold_mean;
    let res_w: Vec<f64> = mix
        .iter()
        .zip(laws)
        .map(|(p, l)| p * l.mean() / s_bar)
        .collect();
    let view = ArrivalView {
        p_busy: t.p_contended,
        res_weights: res_w,
        queue_weights: mix.to_vec(),
        others: n - 1,
    };
    (t, view)
}

pub(super) fn solve_takacs(v: &Validated, exp_hold: bool, think_exact: bool) -> LockSolution {
    let z: f64 = v.mix.iter().zip(&v.think).map(|(p, z)| p * z).sum();
    let equal_think = v.think.iter().all(|&t| rel_eq(t, v.think[0]));
    let (t, view) = takacs_view(v.n, z, &v.mix, &v.laws);
    let per = v
        .mix
        .iter()
        .map(|p| ClassMeans {
            cpus: p * v.n as f64,
            x_per_ns: p * t.x_per_ns,
            wait_ns: t.wait_ns,
            view: view.clone(),
        })
        .collect();
    let (method, exact) = match (exp_hold, equal_think) {
        (true, true) => (Method::MachineRepairman, true),
        (false, true) => (Method::FiniteSourceExact, think_exact),
        (_, false) => (Method::FiniteSourceAggregated, false),
    };
    assemble(v, method, exact, per)
}
