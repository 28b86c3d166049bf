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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::{
    CacheLevel, Clock, Cpu, Latencies, Machine, Memory, Policy, Sharing, Topology, PAGE_BYTES,
};
use crate::hw::provenance::Sourced;

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

// ----- small readers ------------------------------------------------------------------------

/// Reads a file, trimmed; `Ok(None)` when it does not exist.
fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path.display().to_string(), e)),
    }
}

fn parse_num<T: std::str::FromStr>(path: &Path, field: &str, text: &str) -> Result<T> {
    text.trim().parse::<T>().map_err(|_| {
        Error::parse(
            path.display().to_string(),
            1,
            field,
            format!("'{}' is not a number", text.trim()),
        )
    })
}

/// Reads a number from a one-value file; `Ok(None)` when the file does not exist.
fn read_num<T: std::str::FromStr>(path: &Path, field: &str) -> Result<Option<T>> {
    match read_opt(path)? {
        Some(s) => parse_num(path, field, &s).map(Some),
        None => Ok(None),
    }
}

/// Parses a kernel CPU list such as `0-5,12-17` (empty string = empty list).
pub fn parse_cpulist(text: &str, file: &str, field: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let bad = || Error::parse(file, 1, field, format!("'{part}' is not a CPU list entry"));
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.trim().parse().map_err(|_| bad())?;
                let b: u32 = b.trim().parse().map_err(|_| bad())?;
                if b < a || b - a > 1 << 16 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

/// Parses a sysfs cache size such as `32K`, `1280K`, `48M` into KiB.
pub fn parse_size_kib(text: &str, file: &str) -> Result<u64> {
    let t = text.trim();
    let bad = || Error::parse(file, 1, "size", format!("'{t}' is not a cache size"));
    let (num, mult) = match t.chars().last() {
        Some('K') | Some('k') => (&t[..t.len() - 1], 1),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1024),
        Some('G') | Some('g') => (&t[..t.len() - 1], 1024 * 1024),
        Some(c) if c.is_ascii_digit() => {
            return t.parse::<u64>().map(|b| b / 1024).map_err(|_| bad())
        }
        _ => return Err(bad()),
    };
    num.trim()
        .parse::<u64>()
        .map_err(|_| bad())?
        .checked_mul(mult)
        .ok_or_else(bad)
}

/// Numbered subdirectories `<prefix>N` of `dir`, sorted by N.
fn numbered_dirs(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir.display().to_string(), e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|s| s.parse::<u32>().ok())
        {
            if entry.path().is_dir() {
                out.push((n, entry.path()));
            }
        }
    }
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// `key : value` lines of /proc/cpuinfo for the first processor block, plus the processor count.
fn read_cpuinfo(path: &Path) -> Result<Option<(BTreeMap<String, String>, u32)>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    let mut first = BTreeMap::new();
    let mut processors = 0u32;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "processor" {
            processors += 1;
        }
        first.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    Ok(Some((first, processors)))
}

/// `Key: N kB` of a meminfo file (also `Node N Key: N kB`), in kB.
fn meminfo_kb(path: &Path, key: &str) -> Result<Option<u64>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    for (i, line) in text.lines().enumerate() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k.split_whitespace().last() == Some(key) {
            let num = v.split_whitespace().next().unwrap_or("");
            return num.parse::<u64>().map(Some).map_err(|_| {
                Error::parse(
                    path.display().to_string(),
                    i + 1,
                    key,
                    format!("'{}' is not a number of kB", v.trim()),
                )
            });
        }
    }
    Ok(None)
}

/// Present and managed pages per (node, zone) from /proc/zoneinfo.
#[derive(Debug, Default)]
struct ZonePages {
    present: u64,
    managed: u64,
}

fn read_zoneinfo(path: &Path) -> Result<Option<BTreeMap<(u32, String), ZonePages>>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    let file = path.display().to_string();
    let mut zones: BTreeMap<(u32, String), ZonePages> = BTreeMap::new();
    let mut current: Option<(u32, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            if let Some((n, z)) = rest.split_once(',') {
                let node: u32 = n.trim().parse().map_err(|_| {
                    Error::parse(
                        &file,
                        i + 1,
                        "Node",
                        format!("'{}' is not a node id", n.trim()),
                    )
                })?;
                let zone = z
                    .trim()
                    .strip_prefix("zone")
                    .unwrap_or(z)
                    .trim()
                    .to_string();
                zones.entry((node, zone.clone())).or_default();
                current = Some((node, zone));
            }
            continue;
        }
        let mut it = t.split_whitespace();
        let (Some(key), Some(val), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if key != "present" && key != "managed" {
            continue;
        }
        let Some(cur) = &current else { continue };
        let v: u64 = val
            .parse()
            .map_err(|_| Error::parse(&file, i + 1, key, format!("'{val}' is not a page count")))?;
        if let Some(z) = zones.get_mut(cur) {
            if key == "present" {
                z.present = v;
            } else {
                z.managed = v;
            }
        }
    }
    Ok(Some(zones))
}

// ----- vendor knowledge -------------------------------------------------------------------

fn vendor_of(cpuinfo: &BTreeMap<String, String>) -> Option<(&'static str, String)> {
    if let Some(v) = cpuinfo.get("vendor_id") {
        let vendor = match v.as_str() {
            "GenuineIntel" => "intel",
            "AuthenticAMD" | "HygonGenuine" => "amd",
            _ => "unknown",
        };
        return Some((vendor, format!("/proc/cpuinfo vendor_id '{v}'")));
    }
    cpuinfo.get("CPU implementer").map(|imp| {
        (
            "arm",
            format!("/proc/cpuinfo CPU implementer {imp} (an arm64 CPU)"),
        )
    })
}

fn parse_int_auto(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Microarchitecture from x86 family/model/stepping or arm64 implementer/part, for the parts
/// this crate's machines use; `None` when not in the table.
fn microarchitecture_of(cpuinfo: &BTreeMap<String, String>) -> Option<(String, String)> {
    let get = |k: &str| cpuinfo.get(k).and_then(|v| parse_int_auto(v));
    if let (Some(imp), Some(part)) = (get("CPU implementer"), get("CPU part")) {
        let name = match (imp, part) {
            (0x48, 0xd01) => "TaiShan v110 (HiSilicon Kunpeng 920)",
            (0x41, 0xd0c) => "Neoverse N1",
            (0x41, 0xd40) => "Neoverse V1",
            (0x41, 0xd49) => "Neoverse N2",
            (0x41, 0xd4f) => "Neoverse V2",
            _ => return None,
        };
        return Some((
            name.to_string(),
            format!("/proc/cpuinfo CPU implementer {imp:#x}, CPU part {part:#x}"),
        ));
    }
    let (family, model) = (get("cpu family")?, get("model")?);
    let stepping = get("stepping").unwrap_or(0);
    let name = match cpuinfo.get("vendor_id").map(String::as_str) {
        Some("GenuineIntel") if family == 6 => match model {
            0x3f => "Haswell-EP",
            0x4f | 0x56 => "Broadwell-EP",
            0x4e | 0x5e => "Skylake (client)",
            0x8e | 0x9e => "Kaby Lake / Coffee Lake (client)",
            0x55 if stepping >= 10 => "Cooper Lake-SP",
            0x55 if stepping >= 5 => "Cascade Lake-SP",
            0x55 => "Skylake-SP",
            0x6a | 0x6c => "Ice Lake-SP",
            0x8f => "Sapphire Rapids",
            0xcf => "Emerald Rapids",
            0xad => "Granite Rapids",
            _ => return None,
        },
        Some("AuthenticAMD") => match (family, model) {
            (0x17, 0x00..=0x2f) => "Zen / Zen+",
            (0x17, _) => "Zen 2",
            (0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => "Zen 4",
            (0x19, _) => "Zen 3",
            (0x1a, _) => "Zen 5",
            _ => return None,
        },
        _ => return None,
    };
    Some((
        name.to_string(),
        format!("/proc/cpuinfo cpu family {family}, model {model}, stepping {stepping}"),
    ))
}

/// Typical latencies used to fill what sysfs cannot give, by vendor (ns).
struct Typical {
    what: &'static str,
    l2_hit: f64,
    llc_hit: f64,
    c2c_smt: f64,
    c2c_same_llc: f64,
    c2c_cross_llc: f64,
    c2c_cross_socket: f64,
    dram_local: f64,
    dram_remote: f64,
}

fn typical(vendor: &str) -> Typical {
    match vendor {
        // Zen 3 figures: the built-in epyc-7w83 (c2c measured on an EPYC 7763) and published
        // L2/L3/DRAM values; cross-socket from the same EPYC 7763 matrix (median ~304 ns).
        "amd" => Typical {
            what: "amd (Zen 3 class: published L2/L3/DRAM, c2c from the EPYC 7763 matrix)",
            l2_hit: 3.4,
            llc_hit: 13.0,
            c2c_smt: 10.0,
            c2c_same_llc: 25.0,
            c2c_cross_llc: 120.0,
            c2c_cross_socket: 300.0,
            dram_local: 110.0,
            dram_remote: 190.0,
        },
        "arm" => Typical {
            what: "arm (Kunpeng 920 / Neoverse N1 class server)",
            l2_hit: 4.0,
            llc_hit: 35.0,
            c2c_smt: 4.0,
            c2c_same_llc: 45.0,
            c2c_cross_llc: 90.0,
            c2c_cross_socket: 160.0,
            dram_local: 110.0,
            dram_remote: 180.0,
        },
        // Intel Xeon SP figures: seed 004 (LLC ~20 ns, c2c ~50 ns, DRAM 80+ ns) and the
        // Xeon 8358 matrix (cross-socket ~111 ns).
        _ => Typical {
            what: if vendor == "intel" {
                "intel (Xeon Scalable class: seed 004 and the Xeon 8358 matrix)"
            } else {
                "an unknown vendor (Intel Xeon Scalable class figures)"
            },
            l2_hit: 4.7,
            llc_hit: 20.0,
            c2c_smt: 7.0,
            c2c_same_llc: 50.0,
            c2c_cross_llc: 80.0,
            c2c_cross_socket: 110.0,
            dram_local: 85.0,
            dram_remote: 140.0,
        },
    }
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

/// CPU model, vendor and microarchitecture from the first /proc/cpuinfo block.
fn detect_identity(
    info: &BTreeMap<String, String>,
) -> (Field<String>, Field<String>, Field<String>) {
    // --- CPU identity from /proc/cpuinfo.
    let cpu_model = if let Some(m) = info.get("model name") {
        Field::detected(m.clone(), "/proc/cpuinfo model name")
    } else if let Some((name, how)) =
        microarchitecture_of(info).filter(|_| info.contains_key("CPU implementer"))
    {
        Field::derived(
            name,
            format!("{how} (arm64 /proc/cpuinfo has no model name)"),
        )
    } else {
        Field::missing("no 'model name' in /proc/cpuinfo")
    };
    let vendor = match vendor_of(info) {
        Some((v, how)) => Field::derived(v.to_string(), how),
        None => Field::missing("no vendor_id or CPU implementer in /proc/cpuinfo"),
    };
    let microarchitecture = match microarchitecture_of(info) {
        Some((name, how)) => Field::derived(name, how),
        None => Field::missing(
            "not in sysfs; the CPU family/model in /proc/cpuinfo is not in pcpmodel's table",
        ),
    };

    (cpu_model, vendor, microarchitecture)
}

/// The online CPUs' sysfs directories, and their count (from /proc/cpuinfo's `processors` when
/// sysfs has none).
fn detect_cpus(cpu_dir: &Path, processors: Option<u32>) -> Result<(CpuDirs, Field<u32>)> {
    // --- Online CPUs.
    let dirs = numbered_dirs(cpu_dir, "cpu")?;
    let online_path = cpu_dir.join("online");
    let online: Option<BTreeSet<u32>> = match read_opt(&online_path)? {
        Some(s) => Some(
            parse_cpulist(&s, &disp(&online_path), "online")?
                .into_iter()
                .collect(),
        ),
        None => None,
    };
    let cpu_dirs: CpuDirs = dirs
        .into_iter()
        .filter(|(n, _)| online.as_ref().is_none_or(|o| o.contains(n)))
        .collect();
    let cpus = if !cpu_dirs.is_empty() {
        let how = if online.is_some() {
            "cpuN directories listed in /sys/devices/system/cpu/online"
        } else {
            "cpuN directories in /sys/devices/system/cpu"
        };
        Field::detected(cpu_dirs.len() as u32, how)
    } else if let Some(n) = processors.filter(|n| *n > 0) {
        Field::derived(n, "processor entries in /proc/cpuinfo (no cpuN in sysfs)")
    } else {
        Field::missing("no /sys/devices/system/cpu/cpuN and no /proc/cpuinfo")
    };

    Ok((cpu_dirs, cpus))
}

/// Sockets, cores per socket and threads per core from `cpuN/topology`.
fn detect_topology(cpu_dirs: &[(u32, PathBuf)]) -> Result<(Field<u32>, Field<u32>, Field<u32>)> {
    // --- Topology.
    let mut packages: BTreeSet<u32> = BTreeSet::new();
    let mut cores: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut max_siblings = 0u32;
    let mut have_topology = !cpu_dirs.is_empty();
    for (_, d) in cpu_dirs {
        let t = d.join("topology");
        let pkg_p = t.join("physical_package_id");
        let core_p = t.join("core_id");
        let (Some(pkg), Some(core)) = (
            read_num::<i64>(&pkg_p, "physical_package_id")?,
            read_num::<i64>(&core_p, "core_id")?,
        ) else {
            have_topology = false;
            break;
        };
        // physical_package_id is -1 on some virtual machines: one package.
        let pkg = u32::try_from(pkg).unwrap_or(0);
        let core = u32::try_from(core).unwrap_or(0);
        packages.insert(pkg);
        cores.insert((pkg, core));
        let sib_p = t.join("thread_siblings_list");
        if let Some(s) = read_opt(&sib_p)? {
            let n = parse_cpulist(&s, &disp(&sib_p), "thread_siblings_list")?.len() as u32;
            max_siblings = max_siblings.max(n);
        }
    }
    Ok(if have_topology {
        let s = packages.len() as u32;
        let per: Vec<usize> = packages
            .iter()
            .map(|p| cores.iter().filter(|(q, _)| q == p).count())
            .collect();
        let max_per = per.iter().copied().max().unwrap_or(0) as u32;
        let even = per.iter().all(|&c| c as u32 == max_per);
        let cps_how = if even {
            "distinct (physical_package_id, core_id) per package in cpuN/topology".to_string()
        } else {
            format!(
                "largest count of distinct core_id per package in cpuN/topology (uneven: {per:?})"
            )
        };
        let tpc = if max_siblings > 0 {
            Field::detected(
                max_siblings,
                "largest thread_siblings_list in cpuN/topology",
            )
        } else {
            Field::missing("no thread_siblings_list in cpuN/topology")
        };
        (
            Field::detected(s, "distinct physical_package_id in cpuN/topology"),
            if even {
                Field::detected(max_per, cps_how)
            } else {
                Field::derived(max_per, cps_how)
            },
            tpc,
        )
    } else {
        (
            Field::missing("no cpuN/topology/physical_package_id"),
            Field::missing("no cpuN/topology/core_id"),
            Field::missing("no cpuN/topology/thread_siblings_list"),
        )
    })
}

/// The cache levels of the first online CPU, with instance counts over all CPUs. Sharing and
/// policy are filled in by [`classify_caches`].
fn detect_caches(cpu_dirs: &[(u32, PathBuf)]) -> Result<Vec<DetectedCache>> {
    // --- Caches of the first online CPU, and instance counts over all CPUs.
    let mut caches = Vec::new();
    if let Some((first_id, first)) = cpu_dirs.first() {
        for (k, idx_dir) in numbered_dirs(&first.join("cache"), "index")? {
            let index = format!("index{k}");
            let level_p = idx_dir.join("level");
            let Some(level) = read_num::<u8>(&level_p, "level")? else {
                continue;
            };
            let kind = match read_opt(&idx_dir.join("type"))?.as_deref() {
                Some("Data") => "data",
                Some("Instruction") => "instruction",
                Some("Unified") => "unified",
                Some(other) => {
                    return Err(Error::parse(
                        disp(&idx_dir.join("type")),
                        1,
                        "type",
                        format!("'{other}' is not Data, Instruction or Unified"),
                    ))
                }
                None => "unified",
            };
            let base = format!("/sys/devices/system/cpu/cpu{first_id}/cache/{index}");
            let size_p = idx_dir.join("size");
            let size_kib = match read_opt(&size_p)? {
                Some(s) => {
                    Field::detected(parse_size_kib(&s, &disp(&size_p))?, format!("{base}/size"))
                }
                None => Field::missing(format!("no {base}/size")),
            };
            let ways = match read_num::<u64>(
                &idx_dir.join("ways_of_associativity"),
                "ways_of_associativity",
            )? {
                Some(w) if w > 0 => Field::detected(w, format!("{base}/ways_of_associativity")),
                // 0 means fully associative or unknown to the kernel.
                _ => Field::missing(format!("no usable {base}/ways_of_associativity")),
            };
            let line_bytes =
                match read_num::<u64>(&idx_dir.join("coherency_line_size"), "coherency_line_size")?
                {
                    Some(l) if l > 0 => Field::detected(l, format!("{base}/coherency_line_size")),
                    _ => Field::missing(format!("no usable {base}/coherency_line_size")),
                };
            let shared_p = idx_dir.join("shared_cpu_list");
            let (shared_cpus, instances) = match read_opt(&shared_p)? {
                Some(s) => {
                    let n = parse_cpulist(&s, &disp(&shared_p), "shared_cpu_list")?.len() as u32;
                    let mut sets: BTreeSet<Vec<u32>> = BTreeSet::new();
                    for (_, d) in cpu_dirs {
                        let p = d.join("cache").join(&index).join("shared_cpu_list");
                        if let Some(s) = read_opt(&p)? {
                            sets.insert(parse_cpulist(&s, &disp(&p), "shared_cpu_list")?);
                        }
                    }
                    (
                        Field::detected(n, format!("{base}/shared_cpu_list")),
                        Field::derived(
                            sets.len() as u32,
                            format!("distinct cpuN/cache/{index}/shared_cpu_list over all CPUs"),
                        ),
                    )
                }
                None => (
                    Field::missing(format!("no {base}/shared_cpu_list")),
                    Field::missing(format!("no cpuN/cache/{index}/shared_cpu_list")),
                ),
            };
            caches.push(DetectedCache {
                index,
                level,
                kind: kind.to_string(),
                size_kib,
                line_bytes,
                ways,
                shared_cpus,
                instances,
                shared_by: Field::missing("not yet derived"),
                policy: Field::missing("not yet derived"),
            });
        }
    }
    caches.sort_by_key(|c| c.level);

    Ok(caches)
}

/// Derives who shares each cache level and which levels are core-private; returns the LLC
/// domains per socket.
fn classify_caches(caches: &mut [DetectedCache], tpc: u32, sockets: Option<u32>) -> Field<u32> {
    // Sharing and policy of each level; LLC domains.
    let outermost = caches
        .iter()
        .filter(|c| c.kind != "instruction")
        .map(|c| c.level)
        .max();
    for c in caches.iter_mut() {
        c.shared_by = match c.shared_cpus.value {
            Some(n) if n <= tpc => Field::derived(
                Sharing::Core,
                format!("shared by {n} CPU(s), no more than the {tpc} thread(s) of a core"),
            ),
            Some(n) => Field::derived(
                Sharing::LlcDomain,
                format!("shared by {n} CPUs, more than one core"),
            ),
            None => Field::missing("no shared_cpu_list"),
        };
        c.policy = if c.shared_by.value == Some(Sharing::Core) && Some(c.level) != outermost {
            Field::derived(
                Policy::Private,
                "core-private level (its relation to the outer level is that level's policy)",
            )
        } else {
            Field::missing("inclusivity is not in sysfs")
        };
    }
    let llc = caches
        .iter()
        .rfind(|c| c.kind != "instruction" && Some(c.level) == outermost);
    match (llc.and_then(|c| c.instances.value), sockets) {
        (Some(i), Some(s)) if s > 0 && i >= s && i % s == 0 => Field::derived(
            i / s,
            format!(
                "{i} distinct L{} shared_cpu_list over all CPUs / {s} socket(s)",
                llc.map_or(0, |c| c.level)
            ),
        ),
        _ => Field::missing("no LLC shared_cpu_list (or it does not split evenly over sockets)"),
    }
}

/// NUMA nodes and memory from sysfs nodes, /proc/meminfo and /proc/zoneinfo.
struct MemoryFields {
    numa_nodes: Field<u32>,
    node_mib: Field<Vec<u64>>,
    mem_total_mib: Field<u64>,
    below_4g_mib: Field<u64>,
    reserved_mib_per_node: Field<u64>,
}

fn detect_memory(root: &Path) -> Result<MemoryFields> {
    let node_dir = root.join("sys/devices/system/node");
    // --- NUMA nodes and memory.
    let zoneinfo = read_zoneinfo(&root.join("proc/zoneinfo"))?;
    let nodes = numbered_dirs(&node_dir, "node")?;
    let mut cpu_nodes: Vec<u32> = Vec::new();
    for (n, d) in &nodes {
        let p = d.join("cpulist");
        if let Some(s) = read_opt(&p)? {
            if !parse_cpulist(&s, &disp(&p), "cpulist")?.is_empty() {
                cpu_nodes.push(*n);
            }
        }
    }
    let numa_nodes = if !cpu_nodes.is_empty() {
        Field::detected(
            cpu_nodes.len() as u32,
            "nodeN with a non-empty cpulist in /sys/devices/system/node",
        )
    } else if nodes.is_empty() {
        Field::derived(
            1,
            "no /sys/devices/system/node: a kernel without NUMA has one node",
        )
    } else {
        Field::missing("no nodeN/cpulist")
    };
    let mem_total_mib = match meminfo_kb(&root.join("proc/meminfo"), "MemTotal")? {
        Some(kb) => Field::detected(kb / 1024, "/proc/meminfo MemTotal"),
        None => Field::missing("no MemTotal in /proc/meminfo"),
    };
    let present_mib = |node: u32| -> Option<u64> {
        let z = zoneinfo.as_ref()?;
        let pages: u64 = z
            .iter()
            .filter(|((n, _), _)| *n == node)
            .map(|(_, p)| p.present)
            .sum();
        (pages > 0).then_some(pages * PAGE_BYTES / (1 << 20))
    };
    let node_list: Vec<u32> = if cpu_nodes.is_empty() && nodes.is_empty() {
        vec![0]
    } else {
        cpu_nodes.clone()
    };
    let node_mib = if let Some(v) = node_list
        .iter()
        .map(|&n| present_mib(n))
        .collect::<Option<Vec<u64>>>()
    {
        Field::derived(
            v,
            "sum of 'present' pages of each node's zones in /proc/zoneinfo x 4 KiB (RAM the kernel sees, without firmware holes)",
        )
    } else {
        let mut v = Vec::new();
        for (_, d) in nodes.iter().filter(|(n, _)| cpu_nodes.contains(n)) {
            match meminfo_kb(&d.join("meminfo"), "MemTotal")? {
                Some(kb) => v.push(kb / 1024),
                None => {
                    v.clear();
                    break;
                }
            }
        }
        if !v.is_empty() && v.len() == cpu_nodes.len() {
            Field::derived(v, "nodeN/meminfo MemTotal (under-counts installed RAM by the memmap and firmware reservations)")
        } else if let (Some(t), true) = (mem_total_mib.value, node_list.len() == 1) {
            Field::derived(vec![t], "/proc/meminfo MemTotal for the single node (under-counts installed RAM by the memmap and firmware reservations)")
        } else {
            Field::missing("no /proc/zoneinfo, nodeN/meminfo or MemTotal")
        }
    };
    let below_4g_mib = match zoneinfo.as_ref() {
        Some(z) => {
            let pages: u64 = z
                .iter()
                .filter(|((n, zone), _)| *n == 0 && (zone == "DMA" || zone == "DMA32"))
                .map(|(_, p)| p.present)
                .sum();
            Field::derived(
                pages * PAGE_BYTES / (1 << 20),
                "node 0 'present' pages of zones DMA + DMA32 in /proc/zoneinfo x 4 KiB",
            )
        }
        None => Field::missing("needs /proc/zoneinfo (DMA and DMA32 present pages)"),
    };
    let reserved_mib_per_node = match zoneinfo.as_ref() {
        Some(z) if !node_list.is_empty() => {
            let mut total_mib = 0u64;
            for &n in &node_list {
                let (present, managed) = z
                    .iter()
                    .filter(|((m, _), _)| *m == n)
                    .fold((0u64, 0u64), |(p, m), (_, zp)| {
                        (p + zp.present, m + zp.managed)
                    });
                let unmanaged = present.saturating_sub(managed) * PAGE_BYTES;
                let memmap = present * 64;
                total_mib += unmanaged.saturating_sub(memmap) / (1 << 20);
            }
            Field::derived(
                total_mib / node_list.len() as u64,
                "mean over nodes of (present - managed pages) x 4 KiB - present x 64 B of memmap, from /proc/zoneinfo",
            )
        }
        _ => Field::missing("needs /proc/zoneinfo (present and managed pages)"),
    };

    Ok(MemoryFields {
        numa_nodes,
        node_mib,
        mem_total_mib,
        below_4g_mib,
        reserved_mib_per_node,
    })
}

/// Base and maximum clocks.
fn detect_clocks(
    cpu_dirs: &[(u32, PathBuf)],
    info: &BTreeMap<String, String>,
) -> Result<(Field<f64>, Field<f64>)> {
    // --- Clocks.
    let (base_ghz, max_ghz) = {
        let freq = cpu_dirs.first().map(|(_, d)| d.join("cpufreq"));
        let khz = |name: &str| -> Result<Option<u64>> {
            match &freq {
                Some(f) => read_num::<u64>(&f.join(name), name),
                None => Ok(None),
            }
        };
        let base = if let Some(k) = khz("base_frequency")? {
            Field::detected(k as f64 / 1e6, "cpuN/cpufreq/base_frequency (kHz)")
        } else if let Some(g) = info.get("model name").and_then(|m| ghz_in_model_name(m)) {
            Field::derived(g, "the '@ x.xxGHz' in /proc/cpuinfo model name")
        } else if let Some(mhz) = info.get("cpu MHz").and_then(|s| s.parse::<f64>().ok()) {
            Field::derived(
                mhz / 1000.0,
                "/proc/cpuinfo 'cpu MHz' (the current or nominal clock, not necessarily the base)",
            )
        } else {
            Field::missing("no cpufreq/base_frequency, no GHz in the model name, no cpu MHz")
        };
        let max = match khz("cpuinfo_max_freq")? {
            Some(k) => Field::detected(k as f64 / 1e6, "cpuN/cpufreq/cpuinfo_max_freq (kHz)"),
            None => Field::missing("no cpuN/cpufreq/cpuinfo_max_freq"),
        };
        (base, max)
    };

    Ok((base_ghz, max_ghz))
}

/// The `2.40` of `Intel(R) Xeon(R) Platinum 8260 CPU @ 2.40GHz`.
fn ghz_in_model_name(model: &str) -> Option<f64> {
    let (_, after) = model.rsplit_once('@')?;
    let t = after.trim();
    let num = t.strip_suffix("GHz").or_else(|| t.strip_suffix("Ghz"))?;
    num.trim().parse().ok().filter(|g: &f64| *g > 0.0)
}

fn level_name(c: &DetectedCache) -> String {
    match c.kind.as_str() {
        "data" => format!("L{}d", c.level),
        "instruction" => format!("L{}i", c.level),
        _ => format!("L{}", c.level),
    }
}

fn row<T: Serialize>(name: impl Into<String>, unit: &'static str, f: &Field<T>) -> Row {
    Row {
        name: name.into(),
        value: f
            .value
            .as_ref()
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or(serde_json::Value::Null),
        unit,
        status: f.status,
        source: f.source.clone(),
    }
}

impl Detected {
    /// The flat view: one row per field, names as in machine files (`topology.sockets`,
    /// `cache.L2.size_kib`, `latency_ns.l2_hit`, ...).
    pub fn rows(&self) -> Vec<Row> {
        let mut r = vec![
            row("cpu.model", "", &self.cpu_model),
            row("cpu.vendor", "", &self.vendor),
            row("cpu.microarchitecture", "", &self.microarchitecture),
            row("cpus", "", &self.cpus),
            row("topology.sockets", "", &self.sockets),
            row("topology.cores_per_socket", "", &self.cores_per_socket),
            row("topology.threads_per_core", "", &self.threads_per_core),
            row("topology.numa_nodes", "", &self.numa_nodes),
            row(
                "topology.llc_domains_per_socket",
                "",
                &self.llc_domains_per_socket,
            ),
            row("memory.total_mib", "MiB", &self.mem_total_mib),
            row("memory.node_mib", "MiB", &self.node_mib),
            row("memory.below_4g_mib", "MiB", &self.below_4g_mib),
            row(
                "memory.reserved_mib_per_node",
                "MiB",
                &self.reserved_mib_per_node,
            ),
        ];
        for c in &self.caches {
            let p = format!("cache.{}", level_name(c));
            r.push(row(format!("{p}.size_kib"), "KiB", &c.size_kib));
            r.push(row(format!("{p}.line_bytes"), "bytes", &c.line_bytes));
            r.push(row(format!("{p}.ways"), "", &c.ways));
            r.push(row(format!("{p}.shared_cpus"), "CPUs", &c.shared_cpus));
            r.push(row(format!("{p}.instances"), "", &c.instances));
            r.push(row(format!("{p}.shared_by"), "", &c.shared_by));
            r.push(row(format!("{p}.policy"), "", &c.policy));
        }
        r.push(row("clock.base_ghz", "GHz", &self.base_ghz));
        r.push(row("clock.max_ghz", "GHz", &self.max_ghz));
        for (n, f) in &self.latency_ns {
            r.push(row(format!("latency_ns.{n}"), "ns", f));
        }
        r
    }

    /// A complete, validated [`Machine`] for the detected host: detected and derived values as
    /// they are, every missing value filled with one labelled `"assumed: missing from sysfs,
    /// typical value for <vendor>"`. Returns the machine and the dotted names of the fields
    /// filled by assumption (all latencies and the LLC policy at least).
    ///
    /// An error, saying what is missing, when the root lacks what a machine cannot be described
    /// without ([`Detected::missing_essentials`]): detection then does not invent a machine. The
    /// machine returned loads again from its TOML and is usable by the cost models.
    pub fn to_machine(&self) -> Result<(Machine, Vec<String>)> {
        let missing = self.missing_essentials();
        if !missing.is_empty() {
            return Err(Error::Unsupported(format!(
                "{}: not enough to describe a machine: {}",
                self.root,
                missing.join("; ")
            )));
        }
        let (m, assumed) = self.build_machine()?;
        let label = format!("detected from {}", self.root);
        let again = Machine::from_toml_str(&m.to_toml_string()?, &label)?;
        crate::model::cache::Hierarchy::from_machine(
            &again,
            crate::model::cache::Placement::SameLlc,
        )
        .map_err(|e| {
            Error::Unsupported(format!(
                "{}: the detected machine cannot be modelled: {e}",
                self.root
            ))
        })?;
        Ok((m, assumed))
    }

    /// What the root lacks that a machine cannot be described without: the CPUs, the cache
    /// hierarchy (an L2 and a level beyond it), the memory, and anything that should be a
    /// directory but is not. Empty for a usable root.
    pub fn missing_essentials(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.cpus.value.is_none() {
            v.push("the CPUs (no sys/devices/system/cpu/cpuN and no proc/cpuinfo)".to_string());
        }
        let data: Vec<&DetectedCache> = self
            .caches
            .iter()
            .filter(|c| c.kind != "instruction")
            .collect();
        if data.is_empty() {
            v.push("the caches (no sys/devices/system/cpu/cpuN/cache/indexN)".to_string());
        } else if !data.iter().any(|c| c.level == 2) {
            v.push("the L2 cache (no cache/indexN with level 2)".to_string());
        } else if !data.iter().any(|c| c.level > 2) {
            v.push("a cache level beyond L2 (no cache/indexN with level 3)".to_string());
        }
        if self.mem_total_mib.value.is_none() && self.node_mib.value.is_none() {
            v.push(
                "the memory (no proc/meminfo MemTotal, no nodeN/meminfo, no proc/zoneinfo)"
                    .to_string(),
            );
        }
        for u in &self.unreadable {
            v.push(format!(
                "{u} is not a directory, so the cache level it describes could not be read"
            ));
        }
        v
    }

    /// Values that were read or derived but are implausible for real hardware, in words: a
    /// reservation of more than a quarter of a node, memory below 4 GiB above node 0's.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let (Some(r), Some(nodes)) = (self.reserved_mib_per_node.value, &self.node_mib.value) {
            if let Some(&smallest) = nodes.iter().min() {
                if smallest > 0 && r * 4 > smallest {
                    w.push(format!(
                        "memory.reserved_mib_per_node: {r} MiB is {:.0} % of the smallest node ({smallest} MiB); firmware, the kernel image and crashkernel take a few percent: memory may be ballooned, offline or hot-removed, so the zone sizes (and the kernel's pcp->high) derived from it are those of this moment",
                        100.0 * r as f64 / smallest as f64
                    ));
                }
            }
        }
        if let (Some(b), Some(nodes)) = (self.below_4g_mib.value, &self.node_mib.value) {
            if nodes.first().is_some_and(|&n0| b > n0) {
                w.push(format!(
                    "memory.below_4g_mib: {b} MiB below 4 GiB is more than node 0's {} MiB",
                    nodes[0]
                ));
            }
        }
        w
    }

    fn build_machine(&self) -> Result<(Machine, Vec<String>)> {
        let mut assumed: Vec<String> = Vec::new();
        let vendor = self
            .vendor
            .value
            .clone()
            .unwrap_or_else(|| "unknown".into());
        let ty = typical(&vendor);
        let label = format!("detected from {}", self.root);

        // Takes a field's value, or fills it with an assumption and records the field name.
        fn fill<T: Clone>(
            f: &Field<T>,
            name: &str,
            default: T,
            why: String,
            assumed: &mut Vec<String>,
        ) -> Sourced<T> {
            match &f.value {
                Some(v) if f.status != Status::Missing => {
                    Sourced::new(v.clone(), f.machine_source())
                }
                _ => {
                    assumed.push(name.to_string());
                    Sourced::new(default, why)
                }
            }
        }
        let miss = |what: &str| {
            format!(
                "assumed: missing from sysfs ({what}), typical value for {}",
                ty.what
            )
        };

        let cpus = self.cpus.value.unwrap_or(1).max(1);
        let sockets = fill(
            &self.sockets,
            "topology.sockets",
            1,
            miss("no package ids; one socket"),
            &mut assumed,
        );
        let threads = fill(
            &self.threads_per_core,
            "topology.threads_per_core",
            1,
            miss("no SMT information; no SMT"),
            &mut assumed,
        );
        let cores = fill(
            &self.cores_per_socket,
            "topology.cores_per_socket",
            (cpus / sockets.value.max(1) / threads.value.max(1)).max(1),
            miss("no core ids; CPUs / sockets / threads"),
            &mut assumed,
        );
        let numa_nodes = fill(
            &self.numa_nodes,
            "topology.numa_nodes",
            1,
            miss("no NUMA nodes; one node"),
            &mut assumed,
        );
        let llc_domains = fill(
            &self.llc_domains_per_socket,
            "topology.llc_domains_per_socket",
            1,
            miss("no LLC sharing; one LLC per socket"),
            &mut assumed,
        );
        let nodes = numa_nodes.value.max(1) as u64;
        let total = self.mem_total_mib.value.unwrap_or(16384);
        let node_mib = fill(
            &self.node_mib,
            "memory.node_mib",
            vec![(total / nodes).max(1); nodes as usize],
            miss("no per-node memory; MemTotal split evenly"),
            &mut assumed,
        );
        let node0 = node_mib.value.first().copied().unwrap_or(0);
        let smallest = node_mib.value.iter().copied().min().unwrap_or(0);
        let below_4g = fill(
            &self.below_4g_mib,
            "memory.below_4g_mib",
            node0.min(2048),
            miss("no /proc/zoneinfo; 2 GiB below the 32-bit PCI window, at most node 0"),
            &mut assumed,
        );
        let mut reserved = fill(
            &self.reserved_mib_per_node,
            "memory.reserved_mib_per_node",
            64.min(smallest / 2),
            miss("no /proc/zoneinfo; 64 MiB of kernel image and firmware reservations"),
            &mut assumed,
        );
        if reserved.value >= smallest {
            // A node that is mostly unmanaged (ballooned or offline memory): keep the machine
            // valid and say so.
            reserved = Sourced::new(
                smallest.saturating_sub(1),
                format!(
                    "{} (clamped below the smallest node, {smallest} MiB)",
                    reserved.source
                ),
            );
        }
        // sizeof(struct page) is never exposed; not counted as a missing measurement.
        let struct_page = Sourced::new(
            64,
            "assumed: not exposed by sysfs; sizeof(struct page) is 64 bytes on 64-bit kernels with default configs",
        );

        // Caches: data and unified levels, plus instruction caches for completeness.
        let mut caches = Vec::new();
        let data_levels: Vec<&DetectedCache> = self.caches.iter().collect();
        let outermost = data_levels
            .iter()
            .filter(|c| c.kind != "instruction")
            .map(|c| c.level)
            .max();
        let l2_kib = self
            .caches
            .iter()
            .find(|c| c.level == 2 && c.kind != "instruction")
            .and_then(|c| c.size_kib.value)
            .unwrap_or(0);
        for c in &data_levels {
            let p = format!("cache.{}", level_name(c));
            let typical_kib = match c.level {
                1 => 32,
                2 => 1024,
                _ => 32768,
            };
            let size = fill(
                &c.size_kib,
                &format!("{p}.size_kib"),
                typical_kib,
                miss("no size"),
                &mut assumed,
            );
            let line = fill(
                &c.line_bytes,
                &format!("{p}.line_bytes"),
                64,
                miss("no line size"),
                &mut assumed,
            );
            let ways = fill(
                &c.ways,
                &format!("{p}.ways"),
                if c.level == 1 { 8 } else { 16 },
                miss("no associativity"),
                &mut assumed,
            );
            let shared_by = fill(
                &c.shared_by,
                &format!("{p}.shared_by"),
                if c.level <= 2 {
                    Sharing::Core
                } else {
                    Sharing::LlcDomain
                },
                miss("no shared_cpu_list; L1/L2 private, L3 per LLC domain"),
                &mut assumed,
            );
            let (pol, why) = if Some(c.level) == outermost && c.level > 1 {
                match vendor.as_str() {
                    "amd" => (Policy::Victim, "inclusivity; AMD Zen L3 is a victim cache"),
                    "intel" if l2_kib >= 1024 => (
                        Policy::Victim,
                        "inclusivity; Intel parts with an L2 of 1 MiB or more (Skylake-SP and later servers) have a non-inclusive victim LLC",
                    ),
                    "intel" => (
                        Policy::Inclusive,
                        "inclusivity; Intel parts with a small L2 (client parts, Broadwell and older servers) have an inclusive LLC",
                    ),
                    _ => (Policy::NonInclusive, "inclusivity; non-inclusive assumed"),
                }
            } else {
                (
                    Policy::Private,
                    "inclusivity; inner level treated as core-private",
                )
            };
            let policy = fill(
                &c.policy,
                &format!("{p}.policy"),
                pol,
                miss(why),
                &mut assumed,
            );
            caches.push(CacheLevel {
                level: c.level,
                kind: c.kind.clone(),
                size_kib: size,
                line_bytes: line,
                ways,
                shared_by,
                policy,
            });
        }
        if !caches
            .iter()
            .any(|c| c.level == 2 && c.kind != "instruction")
        {
            // Without an L2 the cache models cannot run: assume the vendor's typical levels.
            for (level, kind, kib, shared, pol) in [
                (1u8, "data", 32u64, Sharing::Core, Policy::Private),
                (2, "unified", 1024, Sharing::Core, Policy::Private),
                (
                    3,
                    "unified",
                    32768,
                    Sharing::LlcDomain,
                    if vendor == "intel" {
                        Policy::Victim
                    } else {
                        Policy::NonInclusive
                    },
                ),
            ] {
                if caches
                    .iter()
                    .any(|c| c.level == level && c.kind != "instruction")
                {
                    continue;
                }
                let p = format!("cache.L{level}");
                assumed.push(format!("{p} (whole level)"));
                let why = miss("no such cache level in sysfs");
                caches.push(CacheLevel {
                    level,
                    kind: kind.into(),
                    size_kib: Sourced::new(kib, why.clone()),
                    line_bytes: Sourced::new(64, why.clone()),
                    ways: Sourced::new(if level == 1 { 8 } else { 16 }, why.clone()),
                    shared_by: Sourced::new(shared, why.clone()),
                    policy: Sourced::new(pol, why),
                });
            }
            caches.sort_by_key(|c| c.level);
        }

        // Latencies: always assumed; only those the topology needs.
        let mut lat = |name: &str, v: f64| -> Sourced<f64> {
            assumed.push(format!("latency_ns.{name}"));
            Sourced::new(v, miss("latencies are not in sysfs or /proc"))
        };
        let multi_socket = sockets.value > 1;
        let latency_ns = Latencies {
            l2_hit: lat("l2_hit", ty.l2_hit),
            llc_hit: lat("llc_hit", ty.llc_hit),
            c2c_smt: lat("c2c_smt", ty.c2c_smt),
            c2c_same_llc: lat("c2c_same_llc", ty.c2c_same_llc),
            c2c_cross_llc: (llc_domains.value > 1).then(|| lat("c2c_cross_llc", ty.c2c_cross_llc)),
            c2c_cross_socket: multi_socket.then(|| lat("c2c_cross_socket", ty.c2c_cross_socket)),
            dram_local: lat("dram_local", ty.dram_local),
            dram_remote: multi_socket.then(|| lat("dram_remote", ty.dram_remote)),
        };

        let base = fill(
            &self.base_ghz,
            "clock.base_ghz",
            2.5,
            miss("no clock information"),
            &mut assumed,
        );
        let max_ghz = match (&self.max_ghz.value, self.max_ghz.status) {
            (Some(v), s) if s != Status::Missing && *v >= base.value => {
                Some(Sourced::new(*v, self.max_ghz.machine_source()))
            }
            _ => None,
        };

        let model = fill(
            &self.cpu_model,
            "cpu.model",
            "unknown CPU".to_string(),
            miss("no model name"),
            &mut assumed,
        );
        let uarch = fill(
            &self.microarchitecture,
            "cpu.microarchitecture",
            "unknown".to_string(),
            miss("family/model not in pcpmodel's table"),
            &mut assumed,
        );
        let mut unknown = vec![
            "Every latency: sysfs and /proc give none (values are typical for the vendor)."
                .to_string(),
            "The inclusion policy of the LLC: not in sysfs.".to_string(),
        ];
        if self.node_mib.status == Status::Derived && self.node_mib.source.contains("MemTotal") {
            unknown.push(
                "Installed RAM: MemTotal under-counts it by the memmap and reservations.".into(),
            );
        }
        let m = Machine {
            name: "detected".into(),
            description: format!(
                "Host detected from {} ({})",
                self.root,
                self.cpu_model.value.as_deref().unwrap_or("unknown CPU")
            ),
            cpu: Cpu {
                model,
                vendor: if ["intel", "amd", "arm"].contains(&vendor.as_str()) {
                    vendor.clone()
                } else {
                    "unknown".into()
                },
                microarchitecture: uarch,
            },
            topology: Topology {
                sockets,
                cores_per_socket: cores,
                threads_per_core: threads,
                numa_nodes,
                llc_domains_per_socket: llc_domains,
            },
            memory: Memory {
                node_mib,
                below_4g_mib: below_4g,
                reserved_mib_per_node: reserved,
                struct_page_bytes: struct_page,
            },
            caches,
            latency_ns,
            clock: Clock {
                base_ghz: base,
                max_ghz,
            },
            unknown,
        };
        m.validate(&label).map_err(|e| locate_in_sysfs(&m, e))?;
        Ok((m, assumed))
    }
}

/// An [`Error::Invalid`] about a field of a detected machine, re-labelled with the sysfs or proc
/// file the field was read from (its provenance), so the user sees which file holds the
/// impossible value. Other errors, and fields that were derived or assumed, pass through.
fn locate_in_sysfs(m: &Machine, e: Error) -> Error {
    let Error::Invalid {
        file,
        field,
        message,
    } = e
    else {
        return e;
    };
    let json = serde_json::to_value(m).unwrap_or_default();
    let mut node = &json;
    for part in field.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        node = &node[key];
        if let Some(i) = index {
            node = &node[i];
        }
    }
    match node["source"].as_str() {
        Some(src) if src.starts_with("detected") => Error::Invalid {
            file: src.to_string(),
            field,
            message,
        },
        _ => Error::Invalid {
            file,
            field,
            message,
        },
    }
}
