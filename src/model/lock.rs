//! The zone->lock queue: a finite-source (closed) FIFO single-server queue.
//!
//! # What is modelled
//! `zone->lock` is a queued spinlock (qspinlock: FIFO hand-over). N CPUs run the workload; each
//! alternates between *thinking* (work that does not need the lock, mean `Z_c` ns) and one *lock
//! request* of class `c` (a refill by `rmqueue_bulk()` or a drain by `free_pcppages_bulk()`), which
//! waits for the CPUs ahead of it and then *holds* the lock for `S_c` ns on average. Both kernel
//! functions move all their pages "under a single hold of the lock" (`mm/page_alloc.c`,
//! `rmqueue_bulk()` and `free_pcppages_bulk()`, 5.14–6.18; at most `batch << CONFIG_PCP_BATCH_SCALE_MAX`
//! = 63 << 5 = 2016 pages per hold in 6.7–6.18, see `shared/design/kernel-pcp.md` §4–5). The hold
//! time of a class is a distribution, because the pages per hold vary: [`HoldDist`] is exponential,
//! gamma (mean and squared coefficient of variation `cv²`), deterministic or discrete (pages per
//! hold → hold ns, see [`HoldDist::from_pages`]).
//!
//! Classes share the CPUs in one of two ways ([`ClassShare`]):
//! - **mixed** (`Fraction`): every CPU issues requests of every class; class `c` is a fraction
//!   `p_c` of all requests. One routing chain; mean think `Z̄ = Σ p_c Z_c`, hold mixture
//!   `S̄ = Σ p_c S_c`. This is the mmap/fill/munmap workload of seed 000.
//! - **dedicated** (`Cpus`): `N_c` CPUs issue only class-`c` requests (multi-chain network).
//!
//! # Equations
//! Notation: `λ = 1/Z̄`, `β(s) = E[e^{-sH}]` the Laplace–Stieltjes transform of the hold time,
//! `res_c = E[H_c²] / (2 S_c) = S_c (1 + cv_c²) / 2` the mean residual hold seen at a random
//! instant.
//!
//! 1. **M/M/1//N (machine repairman), exact** ([`machine_repairman`]). With `ρ = S/Z`, the number at
//!    the lock has `p_k ∝ N!/(N−k)! · ρ^k`, computed as log-ratios
//!    `ln p_k − ln p_{k−1} = ln(N−k+1) + ln ρ` and normalised by log-sum-exp (no factorial overflow
//!    at N = 65 536). `U = 1 − p_0`, `X = U/S`, `L = Σ k p_k`, `R = L/X`, `W = R − S`. The
//!    probability that a request finds the lock held is `U(N−1)` (arrival theorem). Insensitive to
//!    the think-time law (product form, BCMP delay station).
//! 2. **M/G/1//N, exact mean values** ([`finite_source_mg1`]; Takács 1962): exponential think,
//!    any hold law,
//!    `1/p_0 = 1 + N λ S Σ_{j=0}^{N−1} C(N−1, j) Π_{i=1}^{j} (1 − β(iλ)) / β(iλ)`,
//!    evaluated in logs with `ln(1 − β)` from `expm1`/`log1p`. Then `U = 1 − p_0`, `X = U/S`,
//!    `L = N − X Z`, `R = L/X`, `W = R − S`. A request finds the lock free with probability
//!    `π_0 = N p_0 / (N − L)` (arrivals in state `k` occur at rate `(N−k)/Z`). With exponential
//!    holds this is item 1. [`LockQueue::solve`] uses it for mixed classes (hold = the request
//!    mix of the class laws): exact when the think law is exponential and the classes' think
//!    means are equal ([`Method::FiniteSourceExact`]); otherwise the think mix is replaced by an
//!    exponential of its mean ([`Method::FiniteSourceAggregated`], or `exact = false` for
//!    [`ThinkLaw::General`]).
//! 3. **Dedicated classes** ([`Method::FiniteSourceDedicated`], approximate): one chain whose
//!    request mix is the classes' throughput mix, `p_c ∝ X_c = N_c / (Z_c + S_c + W)`, with
//!    `W = W_Takács(p)`; the scalar fixed point in `W` is found by Illinois regula falsi. It keeps
//!    `U ≤ 1` and Little's law `N_c = X_c (Z_c + R_c)` for every class; it is exact when the
//!    classes are identical.
//! 4. **MVA with the residual-life correction** ([`LockQueue::solve_mva`], for comparison; Reiser
//!    & Lavenberg 1980 for the recursion, Lazowska et al. 1984 §7.4.2 for the FCFS correction).
//!    For a population vector `n` and class `c`, with values of the network with one class-`c`
//!    customer fewer (`n − e_c`, arrival theorem):
//!    `W_c(n) = Σ_j [ (Q_j − U_j) S_j + U_j res_j ](n − e_c)`  (the holder's residual plus full holds
//!    of those queued), `R_c = S_c + W_c`, `X_c = n_c / (Z_c + R_c)`, `Q_c = X_c R_c`, `U_c = X_c S_c`.
//!    Exact for one class with exponential holds (then it equals item 1). Dedicated classes use
//!    the full population lattice up to [`MVA_LATTICE_MAX`] points, then the Bard–Schweitzer
//!    estimate `Q_j(n − e_c) ≈ Q_j(n) (n_j − δ_jc)/n_j` iterated to a fixed point. Known flaw, the
//!    reason `solve` does not use it: near saturation with `cv² < 1` it overestimates throughput
//!    (`U` can exceed 1, because an arrival does not see the time-average state when holds are
//!    not exponential); its mean latency was 5–25 % below simulation at `U ≥ 0.85`.
//!
//! # Latency distribution (wait + hold of one request)
//! A request of class `c` finds `k` CPUs at the lock (0 ≤ k ≤ N−1). Given `k ≥ 1`, its latency is
//! `T = R + H_1 + … + H_{k−1} + H_own`: the remaining hold `R` of the current holder, the full
//! holds of the `k − 1` waiting CPUs (fresh draws from the request mix) and its own hold. With
//! `k = 0`, `T = H_own`. `P(T ≤ t) = Σ_k P(k) P(T ≤ t | k)`.
//!
//! **One chain, exponential think (the `FiniteSource*` methods): departure-embedded chain.**
//! `k` and `R` are strongly dependent (long holds build long queues), so both come from the
//! exact finite-source M/G/1 analysis instead of from means:
//! - `d_i`, the number left behind at a departure, solves the skip-free chain
//!   `i → max(i,1) − 1 + A`, `A ~ Bin(N − max(i,1), 1 − e^{−λH})`, through its cut equations
//!   `d_{c+1} β(λ(N−c−1)) = Σ_{i≤c} d_i P(A_i ≥ c + 2 − max(i,1))` (only positive terms; in logs).
//!   A service starts with `j = max(i, 1)` present.
//! - The tagged request is the `(a+1)`-th arrival during a service that began with `j` present and
//!   has hold `x_b`; it sees `k = j + a`, and it arrives by elapsed time `s` with probability
//!   `P(Bin(N − j, 1 − e^{−λs}) ≥ a + 1)`. Differences of these binomial tails over
//!   [`ELAPSED_CELLS`] cells of `s` per hold atom give the exact joint law of `(k, holder's hold,
//!   elapsed cell)`, so `P(k)` is exact and the residual given `k` is a mixture of uniforms on
//!   the cells (piecewise-linear CDF). `P(k = 0) = d_0` equals Takács' `π_0`.
//! - Gamma and exponential holds enter the chain as two atoms per probability bin (the bin's
//!   conditional mean ± standard deviation, keeping `E[H]` and `E[H²]` exact); the requester's own
//!   hold and the waiting holds keep their exact laws.
//! - The mean of the distribution equals the solved mean to ≈1e-5 (cell discretisation).
//!
//! **Otherwise (dedicated classes, exponential holds, more than [`EMBEDDED_ATOMS_MAX`] atoms):**
//! `P(k ≥ 1)` is the solved probability of contention and, given `k ≥ 1`,
//! `P(k | k ≥ 1) ∝ [(M−1)!/(M−k)!]^α · r^{k−1}` (`M = N − 1`, the product-form shape of the network
//! an arrival sees), with dispersion `α = 2/(1 + cv²_q)` (diffusion analogy, `cv²_q` of the
//! waiting holds, clamped to [0.1, 4]) and `r` set by safeguarded Newton so that the mean latency
//! equals the solved `S_own + W`; `R` is the equilibrium residual of the in-service class mix.
//! For M/M/1//N (`α = 1`, `r = ρ`) this is the exact arrival-theorem law.
//!
//! **Conditional law given `k`.** `k = 0`: the hold law itself (exact). `k ≥ 1` with discrete
//! holds: `H_own + H_1 + … + H_{k−1}` convolved exactly on merged atoms (at most
//! [`ATOMS_PER_COMPONENT_MAX`] per component), `P(T ≤ t | k) = Σ_a p_a F_R(t − x_a)`. Otherwise a
//! shifted gamma matching the first three cumulants (cumulants of independent terms add), or a
//! two-moment gamma when the fitted shift would be negative; for exponential holds of equal means
//! this is exactly Erlang(k+1).
//!
//! # Accuracy
//! Checked against a seeded discrete-event simulation of the same queue (`tests/lock.rs`; the
//! ignored `survey_against_simulation` prints the table; 400 000 requests per case, U 0.3–1,
//! N = 4, 10, 64; worst relative errors):
//!
//! | method | mean | p50 | p99 |
//! |---|---|---|---|
//! | `MachineRepairman`, `FiniteSourceExact`, discrete holds | 0.4 % | 0.8 % | 1.9 % |
//! | `FiniteSourceExact`, gamma holds (cv² 0.25–4) | 1.6 % (simulation noise; the mean is exact) | 2.1 % | 1.8 % |
//! | `FiniteSourceAggregated` (think means 1.5 Z and 0.66 Z) | 1.3 % | 9.2 % | 5.1 % |
//! | `FiniteSourceDedicated`, N = 64 | 0.7 % | 1.6 % | 7.4 % |
//! | `FiniteSourceDedicated`, N = 10 | 4.8 % | 8.9 % | 17.5 % |
//! | `FiniteSourceDedicated`, N = 4 | 12 % | 16 % | 31 % |
//! | `ThinkLaw::General` (uniform think, deterministic hold) | 6.0 % | 5.2 % | 11 % |
//!
//! # Assumptions and validity
//! - FIFO hand-over (qspinlock's MCS queue). The hand-over cost (the lock's cache line moving
//!   between cores) belongs in the hold time the caller supplies; it is not added here.
//! - Holds are independent of each other and of the queue; in mixed mode each request's class is
//!   an independent draw from the mix.
//! - Think times: exponential gives the exact results; [`ThinkLaw::General`] is treated as
//!   exponential of the same mean (exact only for exponential holds, by insensitivity).
//! - Validity: 1 ≤ N ≤ [`MAX_CPUS`]; all means finite and > 0. Cost: `solve` is O(N·classes)
//!   (≈30 µs for one class and ≈130 µs for two at N = 1024, release build); the latency
//!   distribution of the embedded chain is about O(N·window·atoms·cells) (≈0.1 s at N = 1024,
//!   a few ms at N = 64).
//!
//! # References
//! - L. Takács, *Introduction to the Theory of Queues*, 1962, ch. 5 (finite-source M/G/1).
//! - M. Reiser, S. S. Lavenberg, "Mean-value analysis of closed multichain queuing networks",
//!   JACM 27(2), 1980.
//! - P. Schweitzer, "Approximate analysis of multiclass closed networks of queues", 1979;
//!   Y. Bard, "Some extensions to multiclass queueing network analysis", 1979.
//! - E. Lazowska, J. Zahorjan, G. S. Graham, K. Sevcik, *Quantitative System Performance*, 1984.
//! - E. B. Wilson, M. M. Hilferty, "The distribution of chi-square", PNAS 17, 1931 (large-shape
//!   gamma CDF).
//! - L. Kleinrock, *Queueing Systems* vol. 1, 1975, §5.6 (embedded Markov chain at departures).
//! - Linux `mm/page_alloc.c`: `rmqueue_bulk()`, `free_pcppages_bulk()`, `nr_pcp_alloc()`,
//!   `nr_pcp_free()` (6.7–6.18); `shared/design/kernel-pcp.md` §4–6.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fit::stats::ln_gamma;

/// Label used as the "file" of [`Error::Invalid`] for inputs built in code.
const INPUT: &str = "lock queue";

/// Largest number of CPUs accepted.
pub const MAX_CPUS: u32 = 1 << 16;

/// Largest population lattice (Π (N_c + 1)) solved by exact multi-class MVA; beyond it the
/// Bard–Schweitzer approximation is used.
pub const MVA_LATTICE_MAX: usize = 1 << 16;

/// Largest number of atoms kept for one conditional latency component before switching to the
/// three-cumulant shifted gamma.
pub const ATOMS_PER_COMPONENT_MAX: usize = 256;

/// Bounds of the dispersion exponent α = 2 / (1 + cv²) of the count distribution.
const ALPHA_MIN: f64 = 0.1;
const ALPHA_MAX: f64 = 4.0;

/// Total atoms kept over all components of one latency distribution.
const ATOMS_TOTAL_MAX: usize = 20_000;

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// One point of a discrete hold-time distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldAtom {
    /// Hold time in ns (> 0).
    pub hold_ns: f64,
    /// Relative weight (≥ 0; the weights are normalised).
    pub weight: f64,
}

/// Distribution of the time one request holds the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldDist {
    /// Exponential with the given mean.
    Exponential {
        /// Mean hold in ns.
        mean_ns: f64,
    },
    /// Gamma with the given mean and squared coefficient of variation (`cv2 = 0`: deterministic,
    /// `cv2 = 1`: exponential).
    Gamma {
        /// Mean hold in ns.
        mean_ns: f64,
        /// Variance / mean².
        cv2: f64,
    },
    /// Every hold takes exactly this long.
    Deterministic {
        /// Hold in ns.
        hold_ns: f64,
    },
    /// A discrete distribution (e.g. pages per hold mapped to ns).
    Discrete {
        /// The points; weights need not sum to 1.
        atoms: Vec<HoldAtom>,
    },
}

impl HoldDist {
    /// A discrete hold distribution from pages moved per hold:
    /// `hold_ns = fixed_ns + pages × ns_per_page` for each `(pages, weight)`.
    pub fn from_pages(
        pages_weights: &[(u32, f64)],
        fixed_ns: f64,
        ns_per_page: f64,
    ) -> Result<Self> {
        if !(fixed_ns.is_finite() && fixed_ns >= 0.0) {
            return Err(Error::invalid(
                INPUT,
                "hold.fixed_ns",
                format!("must be finite and ≥ 0, got {fixed_ns}"),
            ));
        }
        if !(ns_per_page.is_finite() && ns_per_page >= 0.0) {
            return Err(Error::invalid(
                INPUT,
                "hold.ns_per_page",
                format!("must be finite and ≥ 0, got {ns_per_page}"),
            ));
        }
        let atoms = pages_weights
            .iter()
            .map(|&(pages, weight)| HoldAtom {
                hold_ns: fixed_ns + f64::from(pages) * ns_per_page,
                weight,
            })
            .collect();
        let d = HoldDist::Discrete { atoms };
        d.validate("hold")?;
        Ok(d)
    }

    /// Checks the parameters; `field` names this distribution in the error.
    pub fn validate(&self, field: &str) -> Result<()> {
        Law::from_hold(self, field).map(|_| ())
    }

    /// Mean hold in ns (NaN if the distribution is invalid).
    pub fn mean_ns(&self) -> f64 {
        Law::from_hold(self, "hold")
            .map(|l| l.mean())
            .unwrap_or(f64::NAN)
    }

    /// Squared coefficient of variation (NaN if the distribution is invalid).
    pub fn cv2(&self) -> f64 {
        match Law::from_hold(self, "hold") {
            Ok(l) => {
                let m = l.raw_moments();
                (m[2] - m[1] * m[1]).max(0.0) / (m[1] * m[1])
            }
            Err(_) => f64::NAN,
        }
    }
}

/// How the CPUs divide among the request classes. All classes of a queue use the same variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassShare {
    /// Every CPU issues this class for this fraction of its requests (normalised over classes).
    Fraction(f64),
    /// This many CPUs issue only this class; the counts sum to `n_cpus`.
    Cpus(u32),
}

/// One class of lock holders (e.g. `refill` by `rmqueue_bulk()`, `free` by `free_pcppages_bulk()`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolderClass {
    /// Name used in results and errors.
    pub name: String,
    /// Mean time between the end of one hold and the next request of this class, in ns (> 0).
    pub think_ns_mean: f64,
    /// Hold-time distribution.
    pub hold: HoldDist,
    /// Share of requests or of CPUs.
    pub share: ClassShare,
}

impl HolderClass {
    /// A class with `share = Fraction(1.0)`.
    pub fn new(name: impl Into<String>, think_ns_mean: f64, hold: HoldDist) -> Self {
        HolderClass {
            name: name.into(),
            think_ns_mean,
            hold,
            share: ClassShare::Fraction(1.0),
        }
    }

    /// Sets the share.
    pub fn with_share(mut self, share: ClassShare) -> Self {
        self.share = share;
        self
    }
}

/// Law of the think times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkLaw {
    /// Exponential think times (exact finite-source results).
    #[default]
    Exponential,
    /// Any law with the given mean (MVA; exact only with exponential holds).
    General,
}

/// The queue: CPUs, holder classes, think-time law.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockQueue {
    /// CPUs contending for the lock (customers of the closed queue).
    pub n_cpus: u32,
    /// The holder classes (at least one).
    pub classes: Vec<HolderClass>,
    /// Law of the think times.
    #[serde(default)]
    pub think: ThinkLaw,
}

// ---------------------------------------------------------------------------------------------
// Outputs
// ---------------------------------------------------------------------------------------------

/// Which solution method produced a [`LockSolution`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Exact M/M/1//N (product form).
    MachineRepairman,
    /// Exact finite-source M/G/1//N mean values (Takács).
    FiniteSourceExact,
    /// Takács with unequal class think means replaced by their mix mean (approximate).
    FiniteSourceAggregated,
    /// Dedicated classes: Takács on the throughput-weighted class mix, solved as a fixed point in
    /// the wait (approximate; exact when the classes are identical).
    FiniteSourceDedicated,
    /// MVA over the full population lattice with the residual-life correction.
    MvaResidual,
    /// Bard–Schweitzer approximate MVA with the residual-life correction.
    SchweitzerResidual,
}

/// Mean values for one class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSolution {
    /// Class name.
    pub name: String,
    /// CPUs issuing this class: `N_c` (dedicated) or `p_c N` (mixed, the mean number).
    pub cpus: f64,
    /// Lock acquisitions of this class per second.
    pub throughput_per_s: f64,
    /// Fraction of time the lock is held by this class.
    pub utilisation: f64,
    /// Mean hold in ns.
    pub hold_ns_mean: f64,
    /// Mean wait before acquiring, in ns.
    pub wait_ns_mean: f64,
    /// Mean wait + hold, in ns.
    pub response_ns_mean: f64,
    /// Mean number of this class's requests at the lock (holding or waiting).
    pub queue_len_mean: f64,
    /// Probability that a request of this class finds the lock held.
    pub p_contended: f64,
}

/// Mean values of the solved queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockSolution {
    /// Method used.
    pub method: Method,
    /// Whether the method is exact for these inputs.
    pub exact: bool,
    /// CPUs.
    pub n_cpus: u32,
    /// Fraction of time the lock is held.
    pub utilisation: f64,
    /// Lock acquisitions per second, all classes.
    pub throughput_per_s: f64,
    /// Mean number of requests at the lock (holding or waiting).
    pub queue_len_mean: f64,
    /// Mean wait per acquisition in ns (acquisition-weighted over classes).
    pub wait_ns_mean: f64,
    /// Mean wait + hold per acquisition in ns.
    pub response_ns_mean: f64,
    /// Probability that a request finds the lock held (acquisition-weighted).
    pub p_contended: f64,
    /// Per-class values, in input order.
    pub classes: Vec<ClassSolution>,
    /// What an arriving request of each class sees (used for the latency distribution).
    #[serde(skip)]
    views: Vec<ArrivalView>,
}

/// What a request of one class finds on arrival (means over the arrival-theorem network).
#[derive(Debug, Clone, PartialEq)]
struct ArrivalView {
    /// Probability that the lock is held.
    p_busy: f64,
    /// Class weights of the holder (in-service mix).
    res_weights: Vec<f64>,
    /// Class weights of the waiting requests.
    queue_weights: Vec<f64>,
    /// Other CPUs (largest possible number ahead).
    others: usize,
}

/// Exact M/M/1//N solution (see [`machine_repairman`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineRepairman {
    /// `p_k`, k = 0..=N: probability that k CPUs are at the lock (holding or waiting).
    pub state_probabilities: Vec<f64>,
    /// Fraction of time the lock is held (1 − p_0).
    pub utilisation: f64,
    /// Acquisitions per second.
    pub throughput_per_s: f64,
    /// Mean number at the lock.
    pub queue_len_mean: f64,
    /// Mean wait in ns.
    pub wait_ns_mean: f64,
    /// Mean wait + hold in ns.
    pub response_ns_mean: f64,
    /// Probability that a request finds the lock held (U of the N−1 system).
    pub p_contended: f64,
}

/// Exact finite-source M/G/1//N mean values (see [`finite_source_mg1`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FiniteSource {
    /// Fraction of time the lock is free.
    pub p_idle: f64,
    /// Fraction of time the lock is held.
    pub utilisation: f64,
    /// Acquisitions per second.
    pub throughput_per_s: f64,
    /// Mean number at the lock.
    pub queue_len_mean: f64,
    /// Mean wait in ns.
    pub wait_ns_mean: f64,
    /// Mean wait + hold in ns.
    pub response_ns_mean: f64,
    /// Probability that a request finds the lock held.
    pub p_contended: f64,
}

// ---------------------------------------------------------------------------------------------
// Public solvers
// ---------------------------------------------------------------------------------------------

fn check_n(n_cpus: u32) -> Result<()> {
    if n_cpus == 0 || n_cpus > MAX_CPUS {
        return Err(Error::invalid(
            INPUT,
            "n_cpus",
            format!("must be between 1 and {MAX_CPUS}, got {n_cpus}"),
        ));
    }
    Ok(())
}

fn check_pos(field: &str, v: f64) -> Result<()> {
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

struct Takacs {
    p_idle: f64,
    utilisation: f64,
    x_per_ns: f64,
    queue_len: f64,
    wait_ns: f64,
    hold_mean: f64,
    p_contended: f64,
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
            if let Some(mut d) = build_dist_embedded(v.n, z, &v.mix, &v.laws, class) {
                d.calibrated =
                    (d.mean_ns - cs.response_ns_mean).abs() <= 1e-3 * cs.response_ns_mean;
                return Ok(d);
            }
        }
        Ok(build_dist(&v.laws, class, view, cs.wait_ns_mean))
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

struct Validated {
    n: usize,
    names: Vec<String>,
    laws: Vec<Law>,
    think: Vec<f64>,
    /// Request mix (mixed mode).
    mix: Vec<f64>,
    /// CPUs per class (dedicated mode).
    cpus: Vec<usize>,
    mode: Mode,
}

fn rel_eq(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Assembles a [`LockSolution`] from per-class means (all in ns / per ns).
struct ClassMeans {
    cpus: f64,
    x_per_ns: f64,
    wait_ns: f64,
    view: ArrivalView,
}

fn assemble(v: &Validated, method: Method, exact: bool, per: Vec<ClassMeans>) -> LockSolution {
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

/// Takács for the request mix `mix` (sums to 1) and the arrival view it implies.
fn takacs_view(n: usize, z: f64, mix: &[f64], laws: &[Law]) -> (Takacs, ArrivalView) {
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

fn solve_takacs(v: &Validated, exp_hold: bool, think_exact: bool) -> LockSolution {
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

/// Dedicated classes as one chain whose request mix is the classes' throughput mix: find the
/// wait `W` with `W = W_Takács(p(W))`, `p_c(W) ∝ N_c / (Z_c + S_c + W)` (Illinois regula falsi).
fn solve_dedicated_fixed_point(v: &Validated) -> Result<LockSolution> {
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
fn solve_mva_chain(v: &Validated) -> Result<LockSolution> {
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
fn solve_mva_dedicated(v: &Validated) -> Result<LockSolution> {
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

// ---------------------------------------------------------------------------------------------
// Hold laws (validated, normalised)
// ---------------------------------------------------------------------------------------------

/// A discrete law: sorted distinct points with prefix sums for O(log n) CDFs.
#[derive(Debug, Clone, PartialEq)]
struct Atoms {
    x: Vec<f64>,
    p: Vec<f64>,
    /// `cum_p[i] = Σ_{b<i} p_b` (length n+1).
    cum_p: Vec<f64>,
    /// `cum_px[i] = Σ_{b<i} p_b x_b` (length n+1).
    cum_px: Vec<f64>,
}

impl Atoms {
    /// From (x, weight) pairs with x > 0 and weights ≥ 0, total > 0: sorts, merges, normalises.
    fn new(mut pts: Vec<(f64, f64)>) -> Atoms {
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

    fn len(&self) -> usize {
        self.x.len()
    }

    fn total(&self) -> f64 {
        self.cum_p.last().copied().unwrap_or(0.0)
    }

    fn mean(&self) -> f64 {
        self.cum_px.last().copied().unwrap_or(0.0)
    }

    /// P(H ≤ t).
    fn cdf(&self, t: f64) -> f64 {
        let i = self.x.partition_point(|&x| x <= t);
        self.cum_p[i]
    }

    /// P(H < t).
    fn cdf_lt(&self, t: f64) -> f64 {
        let i = self.x.partition_point(|&x| x < t);
        self.cum_p[i]
    }

    /// `Σ_b p_b min(y, x_b)`.
    fn mean_min(&self, y: f64) -> f64 {
        if y <= 0.0 {
            return 0.0;
        }
        let i = self.x.partition_point(|&x| x <= y);
        self.cum_px[i] + y * (self.total() - self.cum_p[i])
    }

    /// Convolution (sum of independent draws), merged.
    fn convolve(&self, other: &Atoms) -> Atoms {
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
enum Law {
    Exp { mean: f64 },
    Gamma { shape: f64, scale: f64 },
    Discrete(Atoms),
}

impl Law {
    fn from_hold(h: &HoldDist, field: &str) -> Result<Law> {
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

    fn mean(&self) -> f64 {
        match self {
            Law::Exp { mean } => *mean,
            Law::Gamma { shape, scale } => shape * scale,
            Law::Discrete(a) => a.mean(),
        }
    }

    /// Raw moments E[H^n], n = 0..=4.
    fn raw_moments(&self) -> [f64; 5] {
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
    fn discretise(&self) -> Atoms {
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
    fn residual_mean(&self) -> f64 {
        let m = self.raw_moments();
        m[2] / (2.0 * m[1])
    }

    fn cdf(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        match self {
            Law::Exp { mean } => -(-t / mean).exp_m1(),
            Law::Gamma { shape, scale } => gamma_pq(*shape, t / scale).0,
            Law::Discrete(a) => a.cdf(t),
        }
    }

    fn cdf_lt(&self, t: f64) -> f64 {
        match self {
            Law::Discrete(a) => a.cdf_lt(t),
            _ => self.cdf(t),
        }
    }

    /// CDF of the equilibrium residual: `(1/S) ∫_0^y (1 − F(x)) dx`.
    fn residual_cdf(&self, y: f64) -> f64 {
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
    fn ln_lst(&self, s: f64) -> (f64, f64) {
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
fn ln_lst_mix(parts: &[(f64, Law)], s: f64) -> (f64, f64) {
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
    fn add(&mut self, x: f64) {
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

    fn value(&self) -> f64 {
        if self.sum == 0.0 {
            f64::NEG_INFINITY
        } else {
            self.max + self.sum.ln()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Special functions
// ---------------------------------------------------------------------------------------------

fn log_sum_exp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// ln(1 + e^a) without overflow.
fn softplus(a: f64) -> f64 {
    if a > 0.0 {
        a + (-a).exp().ln_1p()
    } else {
        a.exp().ln_1p()
    }
}

/// 1 / (1 + e^{−a}).
fn sigmoid(a: f64) -> f64 {
    if a >= 0.0 {
        1.0 / (1.0 + (-a).exp())
    } else {
        let e = a.exp();
        e / (1.0 + e)
    }
}

/// Regularised incomplete gamma functions (P(a, x), Q(a, x)), a > 0.
/// Series for x < a + 1, Lentz continued fraction otherwise; Wilson–Hilferty for a > 1e4.
fn gamma_pq(a: f64, x: f64) -> (f64, f64) {
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
fn gamma_quantile(a: f64, p: f64) -> f64 {
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
fn normal_cdf(z: f64) -> f64 {
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

// ---------------------------------------------------------------------------------------------
// Latency distribution
// ---------------------------------------------------------------------------------------------

/// One conditional latency law (given the number found ahead).
#[derive(Debug, Clone, PartialEq)]
enum Comp {
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
    mean_ns: f64,
    second_moment_ns2: f64,
    p_ahead: Vec<f64>,
    /// `E[T | k]`, the mean latency given `k` CPUs found at the lock, aligned with `p_ahead`.
    mean_given_ahead: Vec<f64>,
    own: Law,
    res: Vec<(f64, Law)>,
    comps: Vec<(f64, Comp)>,
    /// Whether the count distribution could be calibrated to the solved mean.
    calibrated: bool,
}

/// Cumulants (κ1, κ2, κ3) from raw moments.
fn cumulants(m: &[f64; 5]) -> [f64; 3] {
    [
        m[1],
        (m[2] - m[1] * m[1]).max(0.0),
        m[3] - 3.0 * m[1] * m[2] + 2.0 * m[1].powi(3),
    ]
}

fn fit_comp(k: [f64; 3]) -> Comp {
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

fn build_dist(laws: &[Law], class: usize, view: &ArrivalView, wait_mean: f64) -> Dist {
    let own = laws[class].clone();
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
struct PwLinear {
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

    fn cdf(&self, y: f64) -> f64 {
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
fn build_dist_embedded(n: usize, z: f64, mix: &[f64], laws: &[Law], class: usize) -> Option<Dist> {
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
    let own = laws.get(class)?.clone();
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
