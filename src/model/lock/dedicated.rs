//! Dedicated classes (`N_c` CPUs per class) solved as one Takács chain with the classes'
//! throughput mix (a scalar fixed point in the wait).

use crate::error::Result;

use super::exact::{takacs_view, Takacs};
use super::laws::Law;
use super::solve::{assemble, rel_eq, ClassMeans, Validated};
use super::types::{ArrivalView, LockSolution, Method};

/// Dedicated classes as one chain whose request mix is the classes' throughput mix: find the
/// wait `W` with `W = W_Takács(p(W))`, `p_c(W) ∝ N_c / (Z_c + S_c + W)` (Illinois regula falsi).
pub(super) fn solve_dedicated_fixed_point(v: &Validated) -> Result<LockSolution> {
    let s: Vec<f64> = v.laws.iter().map(Law::mean).collect();
    let eval = |w: f64| -> (Vec<f64>, f64, Takacs, ArrivalView) {
        let x: Vec<f64> = (0..s.len())
            .map(|c| v.cpus[c] as f64 / (v.think[c] + s[c] + w))
            .collect();
        let x_tot: f64 = x.iter().sum();
        let mix: Vec<f64> = x.iter().map(|xc| xc / x_tot).collect();
        let z: f64 = mix.iter().zip(&v.think).map(|(p, z)| p * z).sum();
        let (t, view) = takacs_view(v.n, z, &mix, &v.laws);
        (x, t.wait_ns - w, t, view)
    };
    // g(W) = W_Takács(p(W)) − W is positive at 0 and negative at the saturation bound
    // N·max S; start the upper end at g(0) and widen it until g changes sign.
    let w_max = v.n as f64 * s.iter().copied().fold(0.0, f64::max);
    let (mut a, mut b) = (0.0, 0.0);
    let (_, mut ga, ..) = eval(a);
    let mut gb = ga;
    if ga > 0.0 {
        b = ga.min(w_max);
        loop {
            gb = eval(b).1;
            if gb <= 0.0 || b >= w_max {
                break;
            }
            a = b;
            ga = gb;
            b = (2.0 * b).min(w_max);
        }
    }
    let mut side = 0i32;
    let mut w = a;
    if ga > 0.0 && gb < 0.0 {
        for _ in 0..200 {
            w = (a * gb - b * ga) / (gb - ga);
            let (_, gw, ..) = eval(w);
            if gw.abs() <= 1e-11 * w.max(1e-300) || (b - a) <= 1e-12 * b {
                break;
            }
            if gw > 0.0 {
                a = w;
                ga = gw;
                if side == 1 {
                    gb *= 0.5;
                }
                side = 1;
            } else {
                b = w;
                gb = gw;
                if side == -1 {
                    ga *= 0.5;
                }
                side = -1;
            }
        }
    } else if gb >= 0.0 {
        w = b;
    }
    let (x, _, _, view) = eval(w);
    let per = x
        .iter()
        .enumerate()
        .map(|(c, xc)| ClassMeans {
            cpus: v.cpus[c] as f64,
            x_per_ns: *xc,
            wait_ns: w,
            view: view.clone(),
        })
        .collect();
    let identical =
        v.laws.iter().all(|l| *l == v.laws[0]) && v.think.iter().all(|&t| rel_eq(t, v.think[0]));
    Ok(assemble(v, Method::FiniteSourceDedicated, identical, per))
}
