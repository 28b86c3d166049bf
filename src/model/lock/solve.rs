//! [`LockQueue`]'s entry points: input validation, dispatch to the solvers, assembly of the
//! solution.

use crate::error::{Error, Result};

use super::dedicated::solve_dedicated_fixed_point;
use super::dist::{build_dist, Dist};
use super::embedded::build_dist_embedded;
use super::exact::{check_n, check_pos, solve_takacs};
use super::laws::{Atoms, Law};
use super::mva::{solve_mva_chain, solve_mva_dedicated};
use super::types::{
    ArrivalView, ClassShare, ClassSolution, HoldDist, HolderClass, LockQueue, LockSolution, Method,
    ThinkLaw,
};
use super::INPUT;

impl LockQueue {
    /// A queue with one class.
    pub fn single(n_cpus: u32, think_ns_mean: f64, hold: HoldDist) -> Self {
        LockQueue {
            n_cpus,
            classes: vec![HolderClass::new("lock", think_ns_mean, hold)],
            think: ThinkLaw::Exponential,
        }
    }

    /// Index of the class called `name`.
    pub fn class_index(&self, name: &str) -> Result<usize> {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| Error::Unknown {
                kind: "lock holder class",
                name: name.to_string(),
                hint: format!(
                    ": {}",
                    self.classes
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// Solves the queue with the best method for its inputs (see the module docs): exact
    /// M/M/1//N or Takács where they apply, MVA with the residual correction otherwise.
    pub fn solve(&self) -> Result<LockSolution> {
        let v = self.validated()?;
        match v.mode {
            Mode::Mixed => {
                let exp_hold = v.laws.iter().all(|l| matches!(l, Law::Exp { .. }))
                    && v.laws.iter().all(|l| rel_eq(l.mean(), v.laws[0].mean()));
                let think_exact = self.think == ThinkLaw::Exponential || exp_hold;
                Ok(solve_takacs(&v, exp_hold, think_exact))
            }
            Mode::Dedicated => solve_dedicated_fixed_point(&v),
        }
    }

    /// Solves with MVA and the residual-life correction regardless of the inputs (for comparison
    /// with [`LockQueue::solve`]).
    pub fn solve_mva(&self) -> Result<LockSolution> {
        let v = self.validated()?;
        match v.mode {
            Mode::Mixed => solve_mva_chain(&v),
            Mode::Dedicated => solve_mva_dedicated(&v),
        }
    }

    /// Distribution of the time a request of class `class` (index into `classes`) spends in one
    /// lock request: wait + hold. See the module docs for the method.
    pub fn latency_distribution(&self, class: usize) -> Result<Dist> {
        let sol = self.solve()?;
        self.latency_distribution_from(&sol, class)
    }

    /// As [`LockQueue::latency_distribution`], reusing a solution of this queue.
    pub fn latency_distribution_from(&self, sol: &LockSolution, class: usize) -> Result<Dist> {
        self.distribution_from(sol, class, false)
    }

    /// The distribution of class `class`'s wait alone (its response without its own hold:
    /// zero when it finds the lock free), from a solution of this queue. Its mean is the
    /// solved mean wait.
    pub fn wait_distribution_from(&self, sol: &LockSolution, class: usize) -> Result<Dist> {
        self.distribution_from(sol, class, true)
    }

    fn distribution_from(&self, sol: &LockSolution, class: usize, wait_only: bool) -> Result<Dist> {
        // The requester's own hold replaced by a point at (numerically) zero for the wait.
        let zero = wait_only.then(|| Law::Discrete(Atoms::new(vec![(1e-9, 1.0)])));
        let v = self.validated()?;
        let view = sol.views.get(class).ok_or_else(|| {
            Error::invalid(
                INPUT,
                "class",
                format!(
                    "class index {class} out of range (0..{})",
                    self.classes.len()
                ),
            )
        })?;
        let cs = sol.classes.get(class).ok_or_else(|| {
            Error::invalid(
                INPUT,
                "class",
                format!("class index {class} has no solution"),
            )
        })?;
        let chain = matches!(
            sol.method,
            Method::FiniteSourceExact | Method::FiniteSourceAggregated
        );
        if chain {
            let z: f64 = v.mix.iter().zip(&v.think).map(|(p, z)| p * z).sum();
            if let Some(mut d) = build_dist_embedded(v.n, z, &v.mix, &v.laws, class, zero.as_ref())
            {
                let target = if wait_only {
                    cs.wait_ns_mean
                } else {
                    cs.response_ns_mean
                };
                d.calibrated = (d.mean_ns - target).abs() <= 1e-3 * cs.response_ns_mean;
                return Ok(d);
            }
        }
        Ok(build_dist(
            &v.laws,
            class,
            zero.as_ref(),
            view,
            cs.wait_ns_mean,
        ))
    }

    fn validated(&self) -> Result<Validated> {
        check_n(self.n_cpus)?;
        if self.classes.is_empty() {
            return Err(Error::invalid(
                INPUT,
                "classes",
                "at least one holder class is needed",
            ));
        }
        let names: Vec<String> = self.classes.iter().map(|c| c.name.clone()).collect();
        let mut laws = Vec::with_capacity(self.classes.len());
        let mut think = Vec::with_capacity(self.classes.len());
        let mut fractions = Vec::new();
        let mut cpus = Vec::new();
        for (i, c) in self.classes.iter().enumerate() {
            let f = format!("classes[{i}]({})", c.name);
            check_pos(&format!("{f}.think_ns_mean"), c.think_ns_mean)?;
            think.push(c.think_ns_mean);
            laws.push(Law::from_hold(&c.hold, &format!("{f}.hold"))?);
            match c.share {
                ClassShare::Fraction(p) => {
                    check_pos(&format!("{f}.share"), p)?;
                    fractions.push(p);
                }
                ClassShare::Cpus(n) => {
                    if n == 0 {
                        return Err(Error::invalid(
                            INPUT,
                            format!("{f}.share"),
                            "a class needs at least one CPU",
                        ));
                    }
                    cpus.push(n);
                }
            }
        }
        if !fractions.is_empty() && !cpus.is_empty() {
            return Err(Error::invalid(
                INPUT,
                "classes.share",
                "all classes must use the same kind of share (all Fraction or all Cpus)",
            ));
        }
        if !cpus.is_empty() {
            let total: u64 = cpus.iter().map(|&n| u64::from(n)).sum();
            if total != u64::from(self.n_cpus) {
                return Err(Error::invalid(
                    INPUT,
                    "classes.share",
                    format!(
                        "CPUs per class sum to {total}, but n_cpus is {}",
                        self.n_cpus
                    ),
                ));
            }
            if cpus.len() == 1 {
                return Ok(Validated {
                    n: self.n_cpus as usize,
                    names,
                    laws,
                    think,
                    mix: vec![1.0],
                    cpus: vec![self.n_cpus as usize],
                    mode: Mode::Mixed,
                });
            }
            return Ok(Validated {
                n: self.n_cpus as usize,
                names,
                laws,
                think,
                mix: Vec::new(),
                cpus: cpus.iter().map(|&n| n as usize).collect(),
                mode: Mode::Dedicated,
            });
        }
        let total: f64 = fractions.iter().sum();
        let mix: Vec<f64> = fractions.iter().map(|p| p / total).collect();
        Ok(Validated {
            n: self.n_cpus as usize,
            names,
            laws,
            think,
            mix,
            cpus: Vec::new(),
            mode: Mode::Mixed,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Mixed,
    Dedicated,
}

pub(super) struct Validated {
    pub(super) n: usize,
    pub(super) names: Vec<String>,
    pub(super) laws: Vec<Law>,
    pub(super) think: Vec<f64>,
    /// Request mix (mixed mode).
    pub(super) mix: Vec<f64>,
    /// CPUs per class (dedicated mode).
    pub(super) cpus: Vec<usize>,
    mode: Mode,
}

pub(super) fn rel_eq(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Assembles a [`LockSolution`] from per-class means (all in ns / per ns).
pub(super) struct ClassMeans {
    pub(super) cpus: f64,
    pub(super) x_per_ns: f64,
    pub(super) wait_ns: f64,
    pub(super) view: ArrivalView,
}

pub(super) fn assemble(
    v: &Validated,
    method: Method,
    exact: bool,
    per: Vec<ClassMeans>,
) -> LockSolution {
    let mut classes = Vec::with_capacity(per.len());
    let mut views = Vec::with_capacity(per.len());
    let (mut x_tot, mut u_tot, mut l_tot, mut w_acc, mut r_acc, mut pc_acc) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (i, c) in per.into_iter().enumerate() {
        let s = v.laws[i].mean();
        let r = c.wait_ns + s;
        let q = c.x_per_ns * r;
        let u = c.x_per_ns * s;
        x_tot += c.x_per_ns;
        u_tot += u;
        l_tot += q;
        w_acc += c.x_per_ns * c.wait_ns;
        r_acc += c.x_per_ns * r;
        pc_acc += c.x_per_ns * c.view.p_busy;
        classes.push(ClassSolution {
            name: v.names.get(i).cloned().unwrap_or_default(),
            cpus: c.cpus,
            throughput_per_s: c.x_per_ns * 1e9,
            utilisation: u,
            hold_ns_mean: s,
            wait_ns_mean: c.wait_ns,
            response_ns_mean: r,
            queue_len_mean: q,
            p_contended: c.view.p_busy,
        });
        views.push(c.view);
    }
    let per_x = |a: f64| if x_tot > 0.0 { a / x_tot } else { 0.0 };
    LockSolution {
        method,
        exact,
        n_cpus: v.n as u32,
        utilisation: u_tot,
        throughput_per_s: x_tot * 1e9,
        queue_len_mean: l_tot,
        wait_ns_mean: per_x(w_acc),
        response_ns_mean: per_x(r_acc),
        p_contended: per_x(pc_acc),
        classes,
        views,
    }
}
