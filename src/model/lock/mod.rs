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
//! Checked against a seeded discrete-event simulation of the same queue (`tests/it/lock.rs`; the
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

mod dedicated;
mod dist;
mod embedded;
mod exact;
mod laws;
mod mva;
mod solve;
mod special;
mod types;

pub use dist::{Bucket, Dist};
pub use embedded::{ELAPSED_CELLS, EMBEDDED_ATOMS_MAX};
pub use exact::{finite_source_mg1, machine_repairman};
pub use mva::MVA_LATTICE_MAX;
pub use types::{
    ClassShare, ClassSolution, FiniteSource, HoldAtom, HoldDist, HolderClass, LockQueue,
    LockSolution, MachineRepairman, Method, ThinkLaw,
};

/// Label used as the "file" of [`Error::Invalid`] for inputs built in code.
const INPUT: &str = "lock queue";

/// Largest number of CPUs accepted.
pub const MAX_CPUS: u32 = 1 << 16;

/// Largest number of atoms kept for one conditional latency component before switching to the
/// three-cumulant shifted gamma.
pub const ATOMS_PER_COMPONENT_MAX: usize = 256;

/// Total atoms kept over all components of one latency distribution.
const ATOMS_TOTAL_MAX: usize = 20_000;
