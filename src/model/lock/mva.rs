//! Mean value analysis with the residual-life correction (exact lattice, Bard–Schweitzer).

use crate::error::{Error, Result};

use super::laws::Law;
use super::solve::{assemble, rel_eq, ClassMeans, Validated};
use super::types::{ArrivalView, LockSolution, Method};

/// Largest population lattice (Π (N_c + 1)) solved by exact multi-class MVA; beyond it the
/// Bard–Schweitzer approximation is used.
pub const MVA_LATTICE_MAX: usize = 1 << 16;

/// The arrival view from the class means `q`, `u` of the network an arrival sees.
fn view_from(q: &[f64], u: &[f64], fallback: &[f64], others: usize) -> ArrivalView {
    let u_tot: f64 = u.iter().sum();
    let waiting: Vec<f64> = q.iter().zip(u).map(|(q, u)| (q - u).max(0.0)).collect();
    let w_tot: f64 = waiting.iter().sum();
    let norm = |v: &[f64], tot: f64| -> Vec<f64> {
        if tot > 0.0 {
            v.iter().map(|x| x / tot).collect()
        } else {
            fallback.to_vec()
        }
    };
    ArrivalView {
        p_busy: u_tot.clamp(0.0, 1.0),
        res_weights: norm(u, u_tot),
        queue_weights: norm(&waiting, w_tot),
        others,
    }
}

/// `W = Σ_j [(Q_j − U_j) S_j + U_j res_j]`.
fn mva_wait(q: &[f64], u: &[f64], s: &[f64], res: &[f64]) -> f64 {
    q.iter()
        .zip(u)
        .zip(s.iter().zip(res))
        .map(|((q, u), (s, r))| (q - u).max(0.0) * s + u * r)
        .sum()
}

/// Mixed classes, MVA recursion over the population n = 1..=N of one routing chain.
pub(super) fn solve_mva_chain(v: &Validated) -> Result<LockSolution> {
    let c = v.laws.len();
    let s: Vec<f64> = v.laws.iter().map(Law::mean).collect();
    let res: Vec<f64> = v.laws.iter().map(Law::residual_mean).collect();
    let z: f64 = v.mix.iter().zip(&v.think).map(|(p, z)| p * z).sum();
    let s_bar: f64 = v.mix.iter().zip(&s).map(|(p, s)| p * s).sum();
    let mut q = vec![0.0; c];
    let mut u = vec![0.0; c];
    let mut view = view_from(&q, &u, &v.mix, 0);
    let (mut x, mut w) = (0.0, 0.0);
    for n in 1..=v.n {
        if n == v.n {
            view = view_from(&q, &u, &v.mix, v.n - 1);
        }
        w = mva_wait(&q, &u, &s, &res);
        x = n as f64 / (z + s_bar + w);
        for j in 0..c {
            q[j] = v.mix[j] * x * (s[j] + w);
            u[j] = v.mix[j] * x * s[j];
        }
    }
    let exp_hold = v.laws.iter().all(|l| matches!(l, Law::Exp { .. }))
        && v.laws.iter().all(|l| rel_eq(l.mean(), s[0]));
    let equal_think = v.think.iter().all(|&t| rel_eq(t, v.think[0]));
    let per = v
        .mix
        .iter()
        .map(|p| ClassMeans {
            cpus: p * v.n as f64,
            x_per_ns: p * x,
            wait_ns: w,
            view: view.clone(),
        })
        .collect();
    Ok(assemble(
        v,
        Method::MvaResidual,
        exp_hold && equal_think,
        per,
    ))
}

/// Dedicated classes: exact MVA over the population lattice, or Bard–Schweitzer when the lattice
/// is larger than [`MVA_LATTICE_MAX`].
pub(super) fn solve_mva_dedicated(v: &Validated) -> Result<LockSolution> {
    let c = v.laws.len();
    let s: Vec<f64> = v.laws.iter().map(Law::mean).collect();
    let res: Vec<f64> = v.laws.iter().map(Law::residual_mean).collect();
    let n_tot = v.n as f64;
    let fallback: Vec<f64> = v.cpus.iter().map(|&n| n as f64 / n_tot).collect();
    let mut lattice: usize = 1;
    let mut strides = Vec::with_capacity(c);
    for &nc in &v.cpus {
        strides.push(lattice);
        lattice = match lattice.checked_mul(nc + 1) {
            Some(l) if l <= MVA_LATTICE_MAX => l,
            _ => return solve_schweitzer(v, &s, &res, &fallback),
        };
    }
    let mut q = vec![0.0; lattice * c];
    let mut u = vec![0.0; lattice * c];
    let mut digits = vec![0usize; c];
    let mut last_x = vec![0.0; c];
    let mut last_w = vec![0.0; c];
    for idx in 1..lattice {
        // increment the mixed-radix counter
        for (d, &nc) in digits.iter_mut().zip(&v.cpus) {
            if *d < nc {
                *d += 1;
                break;
            }
            *d = 0;
        }
        for k in 0..c {
            if digits[k] == 0 {
                continue;
            }
            let prev = idx - strides[k];
            let w = mva_wait(
                &q[prev * c..prev * c + c],
                &u[prev * c..prev * c + c],
                &s,
                &res,
            );
            let x = digits[k] as f64 / (v.think[k] + s[k] + w);
            q[idx * c + k] = x * (s[k] + w);
            u[idx * c + k] = x * s[k];
            last_x[k] = x;
            last_w[k] = w;
        }
    }
    let top = lattice - 1;
    let per = (0..c)
        .map(|k| {
            let prev = top - strides[k];
            ClassMeans {
                cpus: v.cpus[k] as f64,
                x_per_ns: last_x[k],
                wait_ns: last_w[k],
                view: view_from(
                    &q[prev * c..prev * c + c],
                    &u[prev * c..prev * c + c],
                    &fallback,
                    v.n - 1,
                ),
            }
        })
        .collect();
    Ok(assemble(v, Method::MvaResidual, false, per))
}

fn solve_schweitzer(
    v: &Validated,
    s: &[f64],
    res: &[f64],
    fallback: &[f64],
) -> Result<LockSolution> {
    let c = v.laws.len();
    let ncs: Vec<f64> = v.cpus.iter().map(|&n| n as f64).collect();
    // Start from an even spread of each class over think and hold.
    let mut q: Vec<f64> = ncs.iter().map(|n| n * 0.5).collect();
    let mut u = vec![0.0; c];
    let mut x = vec![0.0; c];
    let mut w = vec![0.0; c];
    let reduced = |vals: &[f64], k: usize| -> Vec<f64> {
        vals.iter()
            .enumerate()
            .map(|(j, val)| {
                if j == k {
                    val * (ncs[j] - 1.0) / ncs[j]
                } else {
                    *val
                }
            })
            .collect()
    };
    let mut converged = false;
    for iter in 0..200_000 {
        for k in 0..c {
            w[k] = mva_wait(&reduced(&q, k), &reduced(&u, k), s, res);
            x[k] = ncs[k] / (v.think[k] + s[k] + w[k]);
        }
        let damp = if iter < 500 { 1.0 } else { 0.5 };
        let mut change: f64 = 0.0;
        for k in 0..c {
            let qn = x[k] * (s[k] + w[k]);
            let un = x[k] * s[k];
            change = change
                .max((qn - q[k]).abs() / ncs[k])
                .max((un - u[k]).abs());
            q[k] += damp * (qn - q[k]);
            u[k] += damp * (un - u[k]);
        }
        if change < 1e-13 {
            converged = true;
            break;
        }
    }
    if !converged {
        return Err(Error::Unsupported(
            "lock queue: Bard–Schweitzer MVA did not converge for these dedicated classes".into(),
        ));
    }
    let per = (0..c)
        .map(|k| ClassMeans {
            cpus: ncs[k],
            x_per_ns: x[k],
            wait_ns: w[k],
            view: view_from(&reduced(&q, k), &reduced(&u, k), fallback, v.n - 1),
        })
        .collect();
    Ok(assemble(v, Method::SchweitzerResidual, false, per))
}
