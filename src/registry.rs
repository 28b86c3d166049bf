//! The models `pcpmodel fit` knows, in one list: name, what it predicts, how to build it for a
//! machine, and which parameters are physical (held fixed unless the user frees them).
//!
//! A new model costs one entry here and one file under `src/model/`.

use crate::bounds::{self, Range};
use crate::error::{Error, Result};
use crate::fit::calibrate::{netperf_model, KERNEL_004};
use crate::fit::FitModel;
use crate::hw::machine::Machine;
use crate::model::cache::Placement;

/// One fittable model.
pub struct ModelEntry {
    /// Name on the command line.
    pub name: &'static str,
    /// One line for people: what it predicts from which inputs.
    pub description: &'static str,
    /// Machine used when the user names none.
    pub default_machine: &'static str,
    /// Builds the model for a machine.
    pub build: fn(&Machine) -> Result<Box<dyn FitModel>>,
    /// Physical parameters held at their defaults unless freed (`fit --free NAME`).
    pub default_fixed: &'static [&'static str],
    /// The valid range of each CSV column (see [`crate::bounds`]): a value outside is an error
    /// naming the file, line and column before any fitting.
    pub columns: &'static [(&'static str, Range)],
}

/// `high_order_pcp`'s quantity codes: 0 contended, 1 total_wait_ns, 2 avg_wait_ns.
const QUANTITY_CODE_003: Range = Range::int(
    "quantity_code",
    0.0,
    2.0,
    "",
    "0 contended, 1 total_wait_ns, 2 avg_wait_ns",
);

fn build_netperf(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(netperf_model(m, Placement::SameLlc, KERNEL_004)?))
}

fn build_memcg(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(crate::model::memcg::MemcgModel::new(m, 36, 3)?))
}

fn build_page_bench(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(crate::model::vmstat::NumaStatModel::new(
        m,
        crate::model::vmstat::KERNEL_002,
    )?))
}

fn build_page_fault1(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(
        crate::model::highorder::HighOrderModel::page_fault1(
            m,
            crate::model::highorder::KERNEL_003,
            90,
            10.0,
        )?,
    ))
}

fn build_zone_lock(m: &Machine) -> Result<Box<dyn FitModel>> {
    Ok(Box::new(crate::model::zonelock::ZoneLockHistFit::new(m)?))
}

/// Every registered model.
pub fn models() -> Vec<ModelEntry> {
    vec![ModelEntry {
        name: "netperf-pcp-high",
        description:
            "thread 004: netperf score vs the consumer's pcp->high (columns pcp_high_pages, score)",
        default_machine: "icelake-server",
        build: build_netperf,
        default_fixed: &crate::model::netperf::DEFAULT_FIXED,
        columns: &[
            ("pcp_high_pages", bounds::PCP_HIGH_PAGES),
            ("score", bounds::MEASURED_RATE),
        ],
    },
    ModelEntry {
        name: "memcg-netperf",
        description: "thread 001: netperf throughput vs MEMCG_CHARGE_BATCH, 36 instances, depth 3 (columns memcg_charge_batch_pages, throughput_mbps)",
        default_machine: "memcg-72cpu",
        build: build_memcg,
        default_fixed: &crate::model::memcg::DEFAULT_FIXED,
        columns: &[
            ("memcg_charge_batch_pages", bounds::MEMCG_CHARGE_BATCH),
            ("throughput_mbps", bounds::THROUGHPUT_MBPS),
        ],
    },
    ModelEntry {
        name: "page-bench",
        description: "thread 002: cycles per page alloc+free vs threads and vm.numa_stat (columns threads, numa_stat, cycles_per_page)",
        default_machine: "broadwell-2s",
        build: build_page_bench,
        default_fixed: &[],
        columns: &[
            ("threads", bounds::TASKS),
            ("numa_stat", bounds::SWITCH),
            ("cycles_per_page", bounds::MEASURED_CYCLES),
        ],
    },
    ModelEntry {
        name: "page-fault1",
        description: "thread 003: zone->lock contention of page_fault1 with 64 KiB folios, 90 tasks, 10 s, as perf lock contention reports it (traced acquisitions, handler costs; columns high_order_pcp, quantity_code, value)",
        default_machine: "kunpeng-920",
        build: build_page_fault1,
        default_fixed: &crate::model::highorder::DEFAULT_FIXED,
        columns: &[
            ("high_order_pcp", bounds::SWITCH),
            ("quantity_code", QUANTITY_CODE_003),
            ("value", bounds::MEASURED_RATE),
        ],
    },
    ModelEntry {
        name: "zone-lock",
        description: "thread 000: rmqueue_bulk() log2 latency histogram of 10 mmap/fill/munmap loops, scale 5, one node, 600 s (columns lo_ns, hi_ns, count; fit with absolute residuals)",
        default_machine: "epyc-7w83",
        build: build_zone_lock,
        default_fixed: &["fixed_ns"],
        columns: &[
            ("lo_ns", bounds::BUCKET_NS),
            ("hi_ns", bounds::BUCKET_NS),
            ("count", bounds::HIST_COUNT),
        ],
    }]
}

/// The model called `name`.
pub fn find(name: &str) -> Result<ModelEntry> {
    let all = models();
    let names: Vec<&str> = all.iter().map(|m| m.name).collect();
    let hint = format!(": models are {}", names.join(", "));
    all.into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::Unknown {
            kind: "model",
            name: name.to_string(),
            hint,
        })
}
