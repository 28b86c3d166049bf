//! Inputs (hold laws, holder classes, the queue) and outputs (solutions) of the lock queue.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

use super::laws::Law;
use super::INPUT;

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
    pub(super) views: Vec<ArrivalView>,
}

/// What a request of one class finds on arrival (means over the arrival-theorem network).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ArrivalView {
    /// Probability that the lock is held.
    pub(super) p_busy: f64,
    /// Class weights of the holder (in-service mix).
    pub(super) res_weights: Vec<f64>,
    /// Class weights of the waiting requests.
    pub(super) queue_weights: Vec<f64>,
    /// Other CPUs (largest possible number ahead).
    pub(super) others: usize,
}

/// Exact M/M/1//N solution (see `machine_repairman`).
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

/// Exact finite-source M/G/1//N mean values (see `finite_source_mg1`).
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
