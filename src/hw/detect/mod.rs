//! Host detection from sysfs and /proc.
//!
//! [`detect`] reads a root directory laid out like `/` (the real host, or a fake tree under
//! `tests/fixtures/sysfs/`):
//!
//! | what | where |
//! |---|---|
//! | CPUs | `sys/devices/system/cpu/online`, `sys/devices/system/cpu/cpuN/` |
//! | sockets, cores, SMT | `cpuN/topology/{physical_package_id,core_id,thread_siblings_list}` |
//! | caches | `cpuN/cache/indexK/{level,type,size,ways_of_associativity,coherency_line_size,shared_cpu_list}` |
//! | NUMA | `sys/devices/system/node/nodeN/{cpulist,meminfo}` |
//! | memory | `proc/meminfo` (MemTotal), `proc/zoneinfo` (present/managed pages, optional) |
//! | CPU model, vendor | `proc/cpuinfo` (`model name`, `vendor_id`, `cpu family`, `model`, arm64 `CPU implementer`/`CPU part`) |
//! | clocks | `cpuN/cpufreq/{base_frequency,cpuinfo_max_freq}`, else `@ x.xxGHz` in the model name, else `cpu MHz` |
//!
//! Every field carries a [`Status`]: `detected` (read directly), `derived` (computed from what
//! was read; the source says from what) or `missing`. Sysfs never says whether a cache is
//! inclusive, and no file gives load or transfer latencies: those are always `missing`, and
//! detection never guesses them silently. [`Detected::to_machine`] fills every missing value with
//! a value labelled `"assumed: missing from sysfs, typical value for <vendor>"` so that the
//! models can run on a detected host, and returns the list of fields it filled that way.
//!
//! Files that are absent make a field `missing`; files that exist but cannot be parsed are an
//! [`Error::Parse`] naming the file, line and field.

mod caches;
mod cpu;
mod memory;
pub(crate) mod sysfs;
mod to_machine;
mod vendor;

pub use sysfs::{parse_cpulist, parse_size_kib};

use caches::{classify_caches, detect_caches};
use cpu::{detect_clocks, detect_cpus, detect_identity, detect_topology};
use memory::{detect_memory, MemoryFields};
use sysfs::read_cpuinfo;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::{Policy, Sharing};

/// How a detected field was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Read directly from a file.
    Detected,
    /// Computed from values that were read (the source says how).
    Derived,
    /// Not available from sysfs or /proc (the source says why).
    Missing,
}

impl Status {
    /// `detected`, `derived` or `missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Detected => "detected",
            Status::Derived => "derived",
            Status::Missing => "missing",
        }
    }
}

/// One detected value with its status and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field<T> {
    /// The value, `None` when missing.
    pub value: Option<T>,
    /// How it was obtained.
    pub status: Status,
    /// Which file (detected), from what (derived) or why not (missing).
    pub source: String,
}

impl<T> Field<T> {
    /// A value read directly from `source`.
    pub fn detected(value: T, source: impl Into<String>) -> Self {
        Field {
            value: Some(value),
            status: Status::Detected,
            source: source.into(),
        }
    }

    /// A value computed as `how` says.
    pub fn derived(value: T, how: impl Into<String>) -> Self {
        Field {
            value: Some(value),
            status: Status::Derived,
            source: how.into(),
        }
    }

    /// No value; `why` says what was looked for.
    pub fn missing(why: impl Into<String>) -> Self {
        Field {
            value: None,
            status: Status::Missing,
            source: why.into(),
        }
    }

    /// The source string for a machine file: `"detected: ..."` or `"derived: ..."`.
    fn machine_source(&self) -> String {
        format!("{}: {}", self.status.as_str(), self.source)
    }
}

/// One cache level as seen by the first online CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetectedCache {
    /// The sysfs directory name, e.g. `index2`.
    pub index: String,
    /// 1, 2, 3, ...
    pub level: u8,
    /// `data`, `instruction` or `unified`.
    pub kind: String,
    /// Capacity of one instance, KiB.
    pub size_kib: Field<u64>,
    /// Line size, bytes.
    pub line_bytes: Field<u64>,
    /// Associativity.
    pub ways: Field<u64>,
    /// Logical CPUs sharing one instance.
    pub shared_cpus: Field<u32>,
    /// Distinct instances over all CPUs (distinct `shared_cpu_list` values).
    pub instances: Field<u32>,
    /// Who shares an instance, derived from `shared_cpus`.
    pub shared_by: Field<Sharing>,
    /// Inclusion policy: never in sysfs; `private` is derived for core-private levels.
    pub policy: Field<Policy>,
}

/// Everything [`detect`] found, field by field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detected {
    /// The root that was read (`/` for the host).
    pub root: String,
    /// CPU model string.
    pub cpu_model: Field<String>,
    /// `intel`, `amd`, `arm` or `unknown`.
    pub vendor: Field<String>,
    /// Microarchitecture, derived from the CPU family/model numbers when known.
    pub microarchitecture: Field<String>,
    /// Online logical CPUs.
    pub cpus: Field<u32>,
    /// Sockets (distinct physical package ids).
    pub sockets: Field<u32>,
    /// Physical cores per socket.
    pub cores_per_socket: Field<u32>,
    /// Hardware threads per core.
    pub threads_per_core: Field<u32>,
    /// NUMA nodes with CPUs.
    pub numa_nodes: Field<u32>,
    /// LLC instances per socket.
    pub llc_domains_per_socket: Field<u32>,
    /// Memory per NUMA node (with CPUs), MiB.
    pub node_mib: Field<Vec<u64>>,
    /// `MemTotal` of /proc/meminfo, MiB.
    pub mem_total_mib: Field<u64>,
    /// RAM below 4 GiB (node 0's DMA + DMA32 present pages), MiB.
    pub below_4g_mib: Field<u64>,
    /// Present but unmanaged memory per node, less the memmap, MiB.
    pub reserved_mib_per_node: Field<u64>,
    /// Each node's Normal zone's managed pages (/proc/zoneinfo).
    pub normal_managed_pages: Field<Vec<u64>>,
    /// Node 0's DMA32 managed pages (/proc/zoneinfo).
    pub dma32_managed_pages: Field<u64>,
    /// Cache levels of the first online CPU, in sysfs index order.
    pub caches: Vec<DetectedCache>,
    /// Base clock, GHz.
    pub base_ghz: Field<f64>,
    /// Maximum clock, GHz.
    pub max_ghz: Field<f64>,
    /// Latencies by machine-file name (`l2_hit`, ...): always missing, sysfs has none.
    pub latency_ns: Vec<(String, Field<f64>)>,
    /// Entries that should be directories but are not (a `cpu0/cache/index3` that is a file):
    /// what they describe could not be read.
    pub unreadable: Vec<String>,
}

/// One row of the flat view of a [`Detected`]: for tables and JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Dotted field name, e.g. `topology.sockets` or `cache.L2.size_kib`.
    pub name: String,
    /// The value as JSON (`null` when missing).
    pub value: serde_json::Value,
    /// Unit, empty for counts and names.
    pub unit: &'static str,
    /// Status.
    pub status: Status,
    /// Source, derivation or reason.
    pub source: String,
}

// ----- detection ----------------------------------------------------------------------------

/// Reads sysfs and /proc under `root` (`/` for the running host) and describes what it finds.
///
/// Missing files make fields [`Status::Missing`]; malformed files are an [`Error::Parse`]; a
/// root that is not a directory is an [`Error::Io`].
pub fn detect(root: &Path) -> Result<Detected> {
    if !root.is_dir() {
        let why = if root.exists() {
            "not a directory"
        } else {
            "no such directory"
        };
        return Err(Error::io(
            root.display().to_string(),
            std::io::Error::new(std::io::ErrorKind::NotFound, why),
        ));
    }
    let cpuinfo = read_cpuinfo(&root.join("proc/cpuinfo"))?;
    let processors = cpuinfo.as_ref().map(|(_, n)| *n);
    let info = cpuinfo.map(|(m, _)| m).unwrap_or_default();
    let (cpu_model, vendor, microarchitecture) = detect_identity(&info);
    let (cpu_dirs, cpus) = detect_cpus(&root.join("sys/devices/system/cpu"), processors)?;
    let (sockets, mut cores_per_socket, mut threads_per_core) = detect_topology(&cpu_dirs)?;
    let mut caches = detect_caches(&cpu_dirs)?;
    let unreadable: Vec<String> = cpu_dirs
        .first()
        .map(|(_, d)| non_dir_entries(&d.join("cache"), "index"))
        .unwrap_or_default();

    // SMT from the L1 when topology is missing.
    if threads_per_core.value.is_none() {
        if let Some(n) = caches
            .iter()
            .find(|c| c.level == 1)
            .and_then(|c| c.shared_cpus.value)
        {
            threads_per_core =
                Field::derived(n, "CPUs sharing one L1 (cpuN/cache/index0/shared_cpu_list)");
        }
    }
    if cores_per_socket.value.is_none() {
        if let (Some(c), Some(s), Some(t)) = (cpus.value, sockets.value, threads_per_core.value) {
            if s > 0 && t > 0 {
                cores_per_socket = Field::derived(c / s / t, "CPUs / sockets / threads per core");
            }
        }
    }

    let tpc = threads_per_core.value.unwrap_or(1).max(1);
    let llc_domains_per_socket = classify_caches(&mut caches, tpc, sockets.value);
    let MemoryFields {
        numa_nodes,
        node_mib,
        mem_total_mib,
        below_4g_mib,
        reserved_mib_per_node,
        normal_managed_pages,
        dma32_managed_pages,
    } = detect_memory(root)?;
    let (base_ghz, max_ghz) = detect_clocks(&cpu_dirs, &info)?;
    let latency_ns = [
        "l2_hit",
        "llc_hit",
        "c2c_smt",
        "c2c_same_llc",
        "c2c_cross_llc",
        "c2c_cross_socket",
        "dram_local",
        "dram_remote",
    ]
    .iter()
    .map(|n| {
        (
            n.to_string(),
            Field::missing("latencies are not in sysfs or /proc: measure them with `pcpmodel measure latency --toml` (or core-to-core-latency, Intel MLC, lmbench)"),
        )
    })
    .collect();

    Ok(Detected {
        root: root.display().to_string(),
        cpu_model,
        vendor,
        microarchitecture,
        cpus,
        sockets,
        cores_per_socket,
        threads_per_core,
        numa_nodes,
        llc_domains_per_socket,
        node_mib,
        mem_total_mib,
        below_4g_mib,
        reserved_mib_per_node,
        normal_managed_pages,
        dma32_managed_pages,
        caches,
        base_ghz,
        max_ghz,
        latency_ns,
        unreadable,
    })
}

/// Entries `<prefix>N` of `dir` that are not directories (shown as root-relative paths).
fn non_dir_entries(dir: &Path, prefix: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .is_some_and(|n| n.parse::<u32>().is_ok())
                && !e.path().is_dir()
        })
        .map(|e| disp(&e.path()))
        .collect();
    out.sort();
    out
}

/// Online CPUs: id and sysfs directory.
type CpuDirs = Vec<(u32, PathBuf)>;

/// The path as shown in error messages.
fn disp(p: &Path) -> String {
    p.display().to_string()
}
