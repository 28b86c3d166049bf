//! Calibration of the netperf (thread 004) model: fitting its two per-machine parameters on the
//! measured table, and carrying the workload over to machines without measurements.
//!
//! # Free parameters
//! Per machine: `score_scale` (the benchmark's units) and `fixed_ns` (work per page that does not
//! depend on where the page's lines are). Nothing is shared between machines; every other input
//! is physical and comes from the machine file (capacities, ways, inclusion policy, latencies) or
//! the kernel module (drain/refill rules on 5.18, the kernel of thread 004). 5 points and 2 free
//! parameters per machine leave 3 degrees of freedom each.
//!
//! # Carry-over to an unmeasured machine
//! The optimum depends on the workload only through `fixed_ns` relative to the memory terms. It is
//! carried over in core cycles (`fixed_ns · base_ghz`): the geometric mean over the measured
//! machines, with the spread between them (log-normal, σ of the logs) as its uncertainty, which is
//! large (two machines that differ by a factor of ~2.7) and is propagated into the interval of the
//! optimal high. The score's scale has no meaning on another machine: predictions there report
//! throughput in pages per second, not a score.

use nalgebra::DMatrix;
use serde::Serialize;

use crate::data;
use crate::error::{Error, Result};
use crate::fit::{fit, Dataset, FitModel, FitOptions, FitReport, Residual};
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::memo::Memo;
use crate::model::cache::{Hierarchy, Placement};
use crate::model::netperf::{NetperfModel, NetperfParams, DEFAULT_FIXED, PARAM_NAMES};
use crate::model::pcp::Flow;

/// The PCP rules of thread 004's pcp->high table: the parent of f26b3fa046 (the regression was
/// bisected on the 5.18 merge window; the timeline puts free_high in 5.18, so the parent's rules
/// are 5.17's). With free_high a receiver that never allocates would drain its list at every
/// free and the table's curve would be flat.
pub const KERNEL_004: KernelVersion = KernelVersion::new(5, 17);

/// The table the netperf model's per-machine parameters are fitted to (`op.work.table` of a
/// producer-consumer workload whose work is fitted per machine).
pub const TABLE_004: &str = "004_netperf_pcp_high";

/// Builds the netperf model of a machine for a placement and kernel, with thread 004's flow.
pub fn netperf_model(
    machine: &Machine,
    placement: Placement,
    kernel: KernelVersion,
) -> Result<NetperfModel> {
    Ok(NetperfModel {
        hierarchy: Hierarchy::from_machine(machine, placement)?,
        flow: Flow::netperf_004(kernel, 0),
        base_ghz: machine.clock.base_ghz.value,
        free_high_rule: None,
        run: None,
    })
}

/// Fit options of the netperf model: the physical parameters held at their defaults, relative
/// residuals, leave-one-out on.
pub fn netperf_fit_options(model: &dyn FitModel) -> FitOptions {
    let specs = model.params();
    FitOptions {
        fixed: DEFAULT_FIXED
            .iter()
            .filter_map(|n| specs.iter().find(|p| p.name == *n))
            .map(|p| (p.name.clone(), p.default))
            .collect(),
        residual: Residual::Relative,
        loo: true,
        ..FitOptions::default()
    }
}

/// Thread 004's measured rows for one machine as a dataset of the model.
pub fn netperf_dataset_004(model: &NetperfModel, machine: &str) -> Result<Dataset> {
    let rows: Vec<_> = data::netperf_004()?
        .into_iter()
        .filter(|p| p.machine == machine)
        .collect();
    if rows.is_empty() {
        return Err(Error::Unsupported(format!(
            "thread 004 has no measurements for machine {machine}"
        )));
    }
    Dataset::from_rows(
        model,
        rows.iter().map(|p| vec![p.high_pages as f64]).collect(),
        rows.iter().map(|p| p.score).collect(),
        format!("data/004_netperf_pcp_high.csv ({machine})"),
    )
}

/// Machines with thread-004 measurements.
pub fn measured_machines_004() -> Result<Vec<String>> {
    let mut v: Vec<String> = data::netperf_004()?
        .into_iter()
        .map(|p| p.machine)
        .collect();
    v.dedup();
    Ok(v)
}

/// Fits the netperf model to a machine's thread-004 table.
///
/// The fit is deterministic and asked for by thread 004's table and by every prediction that
/// carries its work per page over to another machine (each state of Huang's and Dhama's
/// tables): the result is memoised per process, keyed by the machine file and the assumed
/// constants moved on this thread, as [`crate::fit::lock_calibration::calibrate`] is.
pub fn fit_netperf_004(machine: &Machine) -> Result<(NetperfModel, FitReport)> {
    static MEMO: Memo<String, (NetperfModel, FitReport)> = Memo::new();
    let key = format!(
        "{}\u{0}{}",
        machine.to_toml_string()?,
        crate::assumptions::moved_key()
    );
    MEMO.get_or_try(key, || fit_netperf_004_uncached(machine))
}

fn fit_netperf_004_uncached(machine: &Machine) -> Result<(NetperfModel, FitReport)> {
    let model = netperf_model(machine, Placement::SameLlc, KERNEL_004)?;
    let ds = netperf_dataset_004(&model, &machine.name)?;
    let opts = netperf_fit_options(&model);
    let report = fit(&model, &ds, &opts)?;
    Ok((model, report))
}

/// Where the workload parameters used for a machine come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WorkloadSource {
    /// Fitted to this machine's own measurements.
    Fitted {
        /// The data.
        data: String,
    },
    /// Carried over from other machines in cycles per page.
    CarriedOver {
        /// The machines it was fitted on.
        from: Vec<String>,
    },
    /// Given by a workload file (its `op.work`, not fitted): no uncertainty, no score scale.
    Given {
        /// The file's source for it.
        source: String,
    },
}

/// The workload parameters for one machine with their uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadParams {
    /// Parameter values in [`PARAM_NAMES`] order.
    pub values: Vec<f64>,
    /// Names of the uncertain parameters, in `covariance` order.
    pub uncertain: Vec<String>,
    /// Covariance of the uncertain parameters (physical units).
    pub covariance: Vec<Vec<f64>>,
    /// Whether `score_scale` means anything on this machine.
    pub has_score: bool,
    /// Where the values come from.
    pub source: WorkloadSource,
    /// Fixed work per page in core cycles (`fixed_ns · base_ghz`).
    pub fixed_cycles: f64,
    /// Why the parameters were carried over although the machine bears the name of a measured
    /// one (a machine file that differs from the built-in of that name), for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl WorkloadParams {
    /// The parameters as a struct.
    pub fn params(&self) -> NetperfParams {
        NetperfParams::from_slice(&self.values)
    }

    /// Covariance as a matrix.
    pub fn covariance_matrix(&self) -> DMatrix<f64> {
        let k = self.uncertain.len();
        DMatrix::from_fn(k, k, |i, j| self.covariance[i][j])
    }

    /// Parameter vectors drawn from the uncertainty (for intervals), in [`PARAM_NAMES`] order.
    pub fn samples(&self, n: usize, seed: u64) -> Vec<Vec<f64>> {
        let idx: Vec<usize> = self
            .uncertain
            .iter()
            .filter_map(|u| PARAM_NAMES.iter().position(|p| p == u))
            .collect();
        let mean: Vec<f64> = idx.iter().map(|&i| self.values[i]).collect();
        let cov = self.covariance_matrix();
        let k = mean.len();
        // Every parameter a positive physical quantity: drawn log-normally with the same mean
        // and covariance (ln(1 + cov_ij / (m_i m_j)) in log space). A normal draw clamped at
        // zero put a wide carried-over spread's lower tail at "no work", which made the
        // interval's upper end the zero-work limit.
        let log_cov = DMatrix::from_fn(k, k, |i, j| (cov[(i, j)] / (mean[i] * mean[j])).ln_1p());
        let log_normal =
            mean.iter().all(|m| *m > 0.0 && m.is_finite()) && log_cov.iter().all(|x| x.is_finite());
        let draws = if log_normal {
            let log_mean: Vec<f64> = (0..k)
                .map(|i| mean[i].ln() - 0.5 * log_cov[(i, i)])
                .collect();
            crate::fit::optimize::sample_normal(&log_mean, &log_cov, n, seed)
        } else {
            crate::fit::optimize::sample_normal(&mean, &cov, n, seed)
        };
        draws
            .into_iter()
            .map(|s| {
                let mut v = self.values.clone();
                for (kk, &i) in idx.iter().enumerate() {
                    v[i] = if log_normal {
                        s[kk].exp()
                    } else {
                        // Physical bounds: positive quantities stay positive.
                        s[kk].max(1e-9 * self.values[i].abs().max(1.0))
                    };
                }
                v
            })
            .collect()
    }
}

fn fitted_params(machine: &Machine, report: &FitReport) -> Result<WorkloadParams> {
    if !report.converged {
        return Err(Error::Unsupported(format!(
            "the netperf fit on {} did not converge: {}",
            machine.name, report.termination
        )));
    }
    let values: Vec<f64> = PARAM_NAMES
        .iter()
        .map(|n| {
            report
                .params
                .iter()
                .find(|p| p.name == *n)
                .map(|p| p.value)
                .unwrap_or(f64::NAN)
        })
        .collect();
    let (uncertain, covariance) = match &report.covariance {
        Some(c) => (report.covariance_params.clone(), c.clone()),
        None => (Vec::new(), Vec::new()),
    };
    Ok(WorkloadParams {
        fixed_cycles: values[1] * machine.clock.base_ghz.value,
        values,
        uncertain,
        covariance,
        has_score: true,
        source: WorkloadSource::Fitted {
            data: format!("data/004_netperf_pcp_high.csv ({})", machine.name),
        },
        note: None,
    })
}

/// The netperf workload parameters for any machine: fitted on its own thread-004 data when it has
/// some, else carried over in cycles from the machines that do (see the module documentation).
///
/// Whether a machine is a measured one is decided by content, not by name: the thread-004
/// parameters were fitted to the built-in machine's hardware, so a machine file that merely
/// carries a measured machine's `name` (a copy with other caches, latencies or clocks) gets the
/// carried-over parameters, with a note saying so. A file with the built-in's values gets the
/// fitted ones, whatever its sources, description or notes say ([`Machine::same_values`]).
pub fn netperf_params(machine: &Machine) -> Result<WorkloadParams> {
    let measured = measured_machines_004()?;
    let mut note = None;
    if measured.contains(&machine.name) {
        if Machine::builtin(&machine.name).is_ok_and(|b| b.same_values(machine)) {
            let (_, report) = fit_netperf_004(machine)?;
            return fitted_params(machine, &report);
        }
        note = Some(format!(
            "this machine is named {0} but differs from the built-in {0}, whose thread-004 measurements were fitted on the built-in's hardware: its workload parameters are carried over as for any machine without measurements",
            machine.name
        ));
    }
    carried_over(machine, measured, note)
}

/// The netperf workload parameters with a given fixed work per page (`fixed_ns` on `machine`,
/// from a workload file's `op.work`): the other parameters at their defaults, nothing uncertain,
/// no score scale.
pub fn netperf_params_given(machine: &Machine, fixed_ns: f64, source: &str) -> WorkloadParams {
    let p = NetperfParams::with_fitted(1.0, fixed_ns);
    WorkloadParams {
        values: p.to_vec(),
        uncertain: Vec::new(),
        covariance: Vec::new(),
        has_score: false,
        source: WorkloadSource::Given {
            source: source.to_string(),
        },
        fixed_cycles: fixed_ns * machine.clock.base_ghz.value,
        note: None,
    }
}

/// The netperf workload parameters carried over in cycles from every machine thread 004
/// measured (geometric mean, spread as the uncertainty), whether or not `machine` is one of them:
/// what a producer-consumer workload other than thread 004's own uses (its per-page work was
/// never measured anywhere).
pub fn netperf_params_carried_over(machine: &Machine) -> Result<WorkloadParams> {
    carried_over(machine, measured_machines_004()?, None)
}

fn carried_over(
    machine: &Machine,
    measured: Vec<String>,
    note: Option<String>,
) -> Result<WorkloadParams> {
    let mut logs = Vec::new();
    for name in &measured {
        let m = Machine::builtin(name)?;
        let (_, report) = fit_netperf_004(&m)?;
        logs.push(fitted_params(&m, &report)?.fixed_cycles.ln());
    }
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let sd = if logs.len() > 1 {
        (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.5
    };
    let cycles = mean.exp();
    let fixed_ns = cycles / machine.clock.base_ghz.value;
    // Delta method: sd(fixed_ns) ≈ fixed_ns · sd(log).
    let sd_ns = fixed_ns * sd;
    let mut p = NetperfParams::with_fitted(1.0, fixed_ns);
    p.score_scale = 1.0;
    Ok(WorkloadParams {
        values: p.to_vec(),
        uncertain: vec!["fixed_ns".to_string()],
        covariance: vec![vec![sd_ns * sd_ns]],
        has_score: false,
        source: WorkloadSource::CarriedOver { from: measured },
        fixed_cycles: cycles,
        note,
    })
}

/// What the kernel configures by default for the PCP of the node-0 Normal zone (the zone a
/// netperf run on node 0 allocates from).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefaultPcp {
    /// Kernel version.
    pub kernel: String,
    /// pcp->batch, pages.
    pub batch_pages: u32,
    /// Fixed pcp->high (<= 6.6), pages.
    pub high_pages: Option<u32>,
    /// high_min (>= 6.7), pages.
    pub high_min_pages: Option<u32>,
    /// high_max (>= 6.7), pages.
    pub high_max_pages: Option<u32>,
    /// Managed pages of the zone.
    pub managed_pages: u64,
    /// CPUs the zone's high is split over.
    pub split_cpus: u32,
    /// Why each of the `high_*` fields that is None (JSON null) on this kernel does not apply
    /// (the JSON keys stay the same on every kernel; README, "Output contract").
    pub null_reasons: std::collections::BTreeMap<String, String>,
}

impl DefaultPcp {
    /// The high the kernel uses for a steady flow: the fixed high (<= 6.6), or on 6.7+ the value
    /// auto-tuning settles at for a pure consumer, `clamp(free_count + batch, high_min, high_max)`
    /// with `free_count` saturated at `batch << scale_max` (mm/page_alloc.c nr_pcp_high()).
    pub fn effective_high(&self, scale_max: u32) -> u32 {
        match (self.high_pages, self.high_min_pages, self.high_max_pages) {
            (Some(h), _, _) => h,
            (None, Some(lo), Some(hi)) => {
                let grown = (self.batch_pages << scale_max) + self.batch_pages;
                grown.clamp(lo, hi.max(lo))
            }
            _ => 0,
        }
    }
}

/// The kernel's default PCP configuration of `machine`'s node-0 Normal zone.
pub fn default_pcp(machine: &Machine, kernel: KernelVersion) -> Result<DefaultPcp> {
    use crate::kernel::config::{configure, KernelOptions};
    use crate::kernel::layout::ZoneKind;
    use crate::kernel::pageset::PcpHigh;
    let cfg = configure(machine, kernel, KernelOptions::default())?;
    let z = cfg
        .zone(0, ZoneKind::Normal)
        .or_else(|| cfg.zones.iter().rfind(|z| z.zone.managed_pages > 0))
        .ok_or_else(|| {
            Error::Unsupported(format!("machine {} has no populated zone", machine.name))
        })?;
    let (high, lo, hi) = match z.pcp.high {
        PcpHigh::Fixed { high_pages } => (Some(high_pages), None, None),
        PcpHigh::AutoTuned {
            high_min_pages,
            high_max_pages,
        } => (None, Some(high_min_pages), Some(high_max_pages)),
    };
    let mut null_reasons = std::collections::BTreeMap::new();
    if high.is_none() {
        null_reasons.insert(
            "high_pages".to_string(),
            format!("kernel {kernel} auto-tunes pcp->high between high_min_pages and high_max_pages (6.7 on): no fixed high"),
        );
    }
    for key in ["high_min_pages", "high_max_pages"] {
        if lo.is_none() {
            null_reasons.insert(
                key.to_string(),
                format!("kernel {kernel} has a fixed pcp->high (high_pages): no auto-tuning bounds before 6.7"),
            );
        }
    }
    Ok(DefaultPcp {
        null_reasons,
        kernel: format!("{}.{}", kernel.major, kernel.minor),
        batch_pages: z.pcp.batch_pages,
        high_pages: high,
        high_min_pages: lo,
        high_max_pages: hi,
        managed_pages: z.zone.managed_pages,
        split_cpus: z.split_cpus,
    })
}
