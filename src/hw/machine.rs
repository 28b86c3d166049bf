//! Machine descriptions: topology, memory, caches, latencies and clock, each value with its
//! provenance ([`Sourced`]).
//!
//! Machine files live in `models/` (TOML, one per machine) and are compiled into the binary; a path
//! to a TOML file of the same schema can be used wherever a built-in name is accepted.
//!
//! Units are in the field names: `_mib`, `_kib`, `_bytes`, `_ns`, `_ghz`.
//!
//! [`Machine::validate`] rejects machines that cannot exist (an LLC smaller than the L2, zero
//! cores, a negative or NaN latency, latencies out of order, a source string without a known
//! kind, ...) with [`Error::Invalid`] naming the file and the dotted field. Helpers such as
//! [`Machine::cpus`], [`Machine::cpus_per_node`], [`Machine::l2_bytes`] and
//! [`Machine::llc_bytes_per_domain`] give the counts the kernel formulas and cost models need.
//!
//! ```
//! use pcpmodel::Machine;
//! let m = Machine::builtin("icelake-server").unwrap();
//! assert_eq!(m.cpus(), 128);
//! assert_eq!(m.cpus_per_node(), 64);
//! assert_eq!(m.l2_pages(), 320);           // 1.25 MiB L2 = 320 pages (seed 004)
//! assert_eq!(m.llc_pages_per_domain(), 12288); // 48 MiB LLC = 12288 pages
//! ```

use serde::{Deserialize, Serialize};

use crate::bounds;
use crate::error::{Error, Result};
use crate::hw::provenance::{Sourced, SOURCE_KINDS};

/// One machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Short name used on the command line (`icelake-server`).
    pub name: String,
    /// One line for people: CPU model, sockets, where it appears in the seed threads.
    pub description: String,
    /// CPU model string, vendor and microarchitecture.
    pub cpu: Cpu,
    /// Sockets, cores, threads, NUMA nodes, LLC domains.
    pub topology: Topology,
    /// Installed memory and the reservations that decide each zone's managed pages.
    pub memory: Memory,
    /// Cache levels, innermost first.
    #[serde(rename = "cache")]
    pub caches: Vec<CacheLevel>,
    /// Load-to-use and transfer latencies in ns.
    pub latency_ns: Latencies,
    /// Clock frequencies.
    pub clock: Clock,
    /// Plain statements of what is not known about this machine.
    #[serde(default)]
    pub unknown: Vec<String>,
}

/// CPU identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Marketing model string, e.g. "Intel Xeon Platinum 8358".
    pub model: Sourced<String>,
    /// "intel", "amd", "arm", or "unknown".
    pub vendor: String,
    /// Microarchitecture, e.g. "Ice Lake-SP", "Zen 3", "Skylake-S".
    pub microarchitecture: Sourced<String>,
}

/// Topology counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Populated sockets.
    pub sockets: Sourced<u32>,
    /// Physical cores per socket.
    pub cores_per_socket: Sourced<u32>,
    /// Hardware threads per core (2 with SMT/Hyper-Threading).
    pub threads_per_core: Sourced<u32>,
    /// NUMA nodes with CPUs and memory (as the kernel sees them in the measured setup).
    pub numa_nodes: Sourced<u32>,
    /// Last-level-cache domains per socket (1 on Intel; CCDs/CCXs on AMD Zen).
    pub llc_domains_per_socket: Sourced<u32>,
}

/// Memory sizes that decide the zone layout (see `kernel::layout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// Installed RAM per NUMA node, MiB (one entry per node).
    pub node_mib: Sourced<Vec<u64>>,
    /// RAM below the 4 GiB boundary (ZONE_DMA + ZONE_DMA32 on node 0), MiB.
    pub below_4g_mib: Sourced<u64>,
    /// Memory per node that never reaches the buddy allocator besides the memmap
    /// (firmware, kernel image, crashkernel, per-CPU areas...), MiB.
    pub reserved_mib_per_node: Sourced<u64>,
    /// Size of `struct page` (memmap cost per 4 KiB page), bytes.
    pub struct_page_bytes: Sourced<u64>,
}

/// Who shares a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// Private to one core (shared by its SMT siblings).
    Core,
    /// Shared by the cores of one LLC domain (a CCD/CCX on AMD, a socket on Intel).
    LlcDomain,
    /// Shared by a whole socket.
    Socket,
}

/// How a cache level relates to the levels inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// A core-private level (L1, L2); its relation to the outer level is given by the outer level.
    Private,
    /// Holds a copy of every line of the inner levels: a clean line in another core's L2 is also
    /// here and can be served from here.
    Inclusive,
    /// Neither inclusive nor exclusive, filled on miss (not a victim cache).
    NonInclusive,
    /// Filled by evictions from the inner level (Intel Skylake-SP and later, AMD Zen L3): a line
    /// that sits in another core's L2 is usually not here and must be snooped from that core.
    Victim,
}

/// One cache level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevel {
    /// 1, 2, 3.
    pub level: u8,
    /// "data", "instruction" or "unified".
    pub kind: String,
    /// Capacity of one instance, KiB.
    pub size_kib: Sourced<u64>,
    /// Line size, bytes.
    pub line_bytes: Sourced<u64>,
    /// Associativity.
    pub ways: Sourced<u64>,
    /// Who shares one instance.
    pub shared_by: Sourced<Sharing>,
    /// Inclusion policy relative to inner levels.
    pub policy: Sourced<Policy>,
}

/// Latencies, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latencies {
    /// L2 hit (load-to-use), ns.
    pub l2_hit: Sourced<f64>,
    /// LLC hit (load-to-use, within the requester's LLC domain), ns.
    pub llc_hit: Sourced<f64>,
    /// Cache-line transfer between SMT siblings of one core, ns.
    pub c2c_smt: Sourced<f64>,
    /// Cache-line transfer from another core's private cache in the same LLC domain, ns.
    pub c2c_same_llc: Sourced<f64>,
    /// Transfer from a core in another LLC domain of the same socket, ns (only with several
    /// LLC domains per socket).
    #[serde(default)]
    pub c2c_cross_llc: Option<Sourced<f64>>,
    /// Transfer from a core on another socket, ns (only with several sockets).
    #[serde(default)]
    pub c2c_cross_socket: Option<Sourced<f64>>,
    /// Local DRAM load latency, ns.
    pub dram_local: Sourced<f64>,
    /// Remote (other socket) DRAM load latency, ns (only with several sockets).
    #[serde(default)]
    pub dram_remote: Option<Sourced<f64>>,
}

/// Clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    /// Base frequency, GHz.
    pub base_ghz: Sourced<f64>,
    /// Maximum single-core turbo frequency, GHz.
    #[serde(default)]
    pub max_ghz: Option<Sourced<f64>>,
}

/// A built-in machine file: name and TOML text, compiled in.
pub struct BuiltinMachine {
    /// File stem, e.g. `icelake-server`.
    pub name: &'static str,
    /// TOML text.
    pub toml: &'static str,
}

macro_rules! builtin {
    ($($name:literal),* $(,)?) => {
        &[$(BuiltinMachine {
            name: $name,
            toml: include_str!(concat!("../../models/", $name, ".toml")),
        }),*]
    };
}

/// The machine files in `models/`, compiled into the binary (see `models/README.md` for where
/// each value comes from).
pub const BUILTIN: &[BuiltinMachine] = builtin![
    "icelake-server",
    "skylake-desktop",
    "epyc-7w83",
    "xeon-8260",
    "broadwell-2s",
    "memcg-72cpu",
    "kunpeng-920",
    "xeon-gold-6252-2s",
];

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;

impl Sharing {
    /// The snake_case name used in machine files.
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Core => "core",
            Sharing::LlcDomain => "llc_domain",
            Sharing::Socket => "socket",
        }
    }
}

impl Policy {
    /// The snake_case name used in machine files.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Private => "private",
            Policy::Inclusive => "inclusive",
            Policy::NonInclusive => "non_inclusive",
            Policy::Victim => "victim",
        }
    }
}

impl CacheLevel {
    /// Capacity of one instance, bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_kib.value.saturating_mul(1024)
    }

    /// Capacity of one instance in 4 KiB pages (rounded down).
    pub fn size_pages(&self) -> u64 {
        self.size_bytes() / PAGE_BYTES
    }

    /// True for caches that hold data (`data` or `unified`), false for instruction caches.
    pub fn holds_data(&self) -> bool {
        self.kind != "instruction"
    }
}

impl Machine {
    /// Parses and validates a machine from TOML text; `label` names the file in errors.
    ///
    /// A value that parses but is impossible is an [`Error::Parse`] naming the file, the line of
    /// the key and the dotted field (an [`Error::Invalid`] when the field has no line of its own).
    pub fn from_toml_str(text: &str, label: &str) -> Result<Machine> {
        let m: Machine = toml::from_str(text).map_err(|e| toml_error(label, text, &e))?;
        m.validate(label).map_err(|e| locate_invalid(e, text))?;
        Ok(m)
    }

    /// Loads a machine from a TOML file.
    pub fn from_path(path: &std::path::Path) -> Result<Machine> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&label, e))?;
        Self::from_toml_str(&text, &label)
    }

    /// A built-in machine by name.
    pub fn builtin(name: &str) -> Result<Machine> {
        let b = BUILTIN
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| Error::Unknown {
                kind: "machine",
                name: name.to_string(),
                hint: format!(
                    ": built-in machines are {} (or give a path to a TOML file)",
                    BUILTIN
                        .iter()
                        .map(|b| b.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        Self::from_toml_str(b.toml, &format!("built-in models/{}.toml", b.name))
    }

    /// A built-in name, or else a path to a TOML file.
    pub fn resolve(name_or_path: &str) -> Result<Machine> {
        if BUILTIN.iter().any(|b| b.name == name_or_path) {
            return Self::builtin(name_or_path);
        }
        let p = std::path::Path::new(name_or_path);
        if p.exists() {
            return Self::from_path(p);
        }
        // A name that looks like a path is a file that does not exist, not an unknown built-in.
        if name_or_path.contains(std::path::MAIN_SEPARATOR) || name_or_path.ends_with(".toml") {
            return Err(Error::Io {
                path: name_or_path.to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such machine file (built-in machines are named without .toml: see `pcpmodel machines`)",
                ),
            });
        }
        Self::builtin(name_or_path)
    }

    /// Every built-in machine.
    pub fn all_builtin() -> Result<Vec<Machine>> {
        BUILTIN.iter().map(|b| Self::builtin(b.name)).collect()
    }

    /// Serialises the machine back to TOML (the schema of `models/*.toml`).
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::Unsupported(format!("cannot write TOML: {e}")))
    }

    // ----- counts -------------------------------------------------------------------------

    /// Physical cores in the machine: sockets × cores per socket.
    pub fn cores(&self) -> u32 {
        self.topology
            .sockets
            .value
            .saturating_mul(self.topology.cores_per_socket.value)
    }

    /// Logical CPUs (hardware threads): sockets × cores per socket × threads per core.
    pub fn cpus(&self) -> u32 {
        self.cores()
            .saturating_mul(self.topology.threads_per_core.value)
    }

    /// Logical CPUs per NUMA node (what the kernel's `cpumask_weight(cpumask_of_node(nid))`
    /// gives when CPUs are spread evenly). 0 only for an unvalidated machine with no nodes.
    pub fn cpus_per_node(&self) -> u32 {
        self.cpus()
            .checked_div(self.topology.numa_nodes.value)
            .unwrap_or(0)
    }

    /// Last-level-cache domains in the whole machine: sockets × LLC domains per socket.
    pub fn llc_domains(&self) -> u32 {
        self.topology
            .sockets
            .value
            .saturating_mul(self.topology.llc_domains_per_socket.value)
    }

    /// Mean core-to-core transfer, ns, between two CPUs of one socket spread evenly over
    /// `domains` LLC domains: `c2c_same_llc` with probability `1/domains`, otherwise
    /// `c2c_cross_llc` (the same-LLC value when the file has none or `domains ≤ 1`).
    pub fn c2c_over_llc_domains_ns(&self, domains: f64) -> f64 {
        let lat = &self.latency_ns;
        match &lat.c2c_cross_llc {
            Some(x) if domains > 1.0 => {
                (lat.c2c_same_llc.value + (domains - 1.0) * x.value) / domains
            }
            _ => lat.c2c_same_llc.value,
        }
    }

    /// Physical cores sharing one LLC instance. 0 only for an unvalidated machine.
    pub fn cores_per_llc_domain(&self) -> u32 {
        self.topology
            .cores_per_socket
            .value
            .checked_div(self.topology.llc_domains_per_socket.value)
            .unwrap_or(0)
    }

    /// Installed RAM over all nodes, MiB.
    pub fn total_mib(&self) -> u64 {
        self.memory.node_mib.value.iter().sum()
    }

    // ----- caches -------------------------------------------------------------------------

    /// The data (or unified) cache of the given level, if the machine has one.
    pub fn cache(&self, level: u8) -> Option<&CacheLevel> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.holds_data())
    }

    /// Index in `caches` of the L2 (the data or unified level 2).
    pub fn l2_index(&self) -> Option<usize> {
        self.caches
            .iter()
            .position(|c| c.level == 2 && c.holds_data())
    }

    /// Index in `caches` of the last-level cache: the outermost data-holding level.
    pub fn llc_index(&self) -> Option<usize> {
        self.caches
            .iter()
            .enumerate()
            .filter(|(_, c)| c.holds_data())
            .max_by_key(|(_, c)| c.level)
            .map(|(i, _)| i)
    }

    /// The L2 cache. A validated machine always has one.
    pub fn l2(&self) -> Option<&CacheLevel> {
        self.l2_index().map(|i| &self.caches[i])
    }

    /// The last-level cache: the outermost data-holding level. A validated machine always has
    /// one.
    pub fn llc(&self) -> Option<&CacheLevel> {
        self.llc_index().map(|i| &self.caches[i])
    }

    /// Capacity of one L2 instance, bytes (0 if there is no L2, which validation rejects).
    pub fn l2_bytes(&self) -> u64 {
        self.l2().map_or(0, CacheLevel::size_bytes)
    }

    /// Capacity of one L2 instance in 4 KiB pages (320 on the Icelake server).
    pub fn l2_pages(&self) -> u64 {
        self.l2_bytes() / PAGE_BYTES
    }

    /// Capacity of one LLC instance (one LLC domain), bytes.
    pub fn llc_bytes_per_domain(&self) -> u64 {
        self.llc().map_or(0, CacheLevel::size_bytes)
    }

    /// Capacity of one LLC instance in 4 KiB pages (12288 on the Icelake server).
    pub fn llc_pages_per_domain(&self) -> u64 {
        self.llc_bytes_per_domain() / PAGE_BYTES
    }

    // ----- validation ---------------------------------------------------------------------

    /// Every sourced value with its dotted field path (`latency_ns.dram_local`), for validation
    /// and for `pcpmodel machine show`.
    pub fn sources(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = Vec::new();
        out.push(("cpu.model".into(), &self.cpu.model.source));
        out.push((
            "cpu.microarchitecture".into(),
            &self.cpu.microarchitecture.source,
        ));
        let t = &self.topology;
        out.push(("topology.sockets".into(), &t.sockets.source));
        out.push((
            "topology.cores_per_socket".into(),
            &t.cores_per_socket.source,
        ));
        out.push((
            "topology.threads_per_core".into(),
            &t.threads_per_core.source,
        ));
        out.push(("topology.numa_nodes".into(), &t.numa_nodes.source));
        out.push((
            "topology.llc_domains_per_socket".into(),
            &t.llc_domains_per_socket.source,
        ));
        let m = &self.memory;
        out.push(("memory.node_mib".into(), &m.node_mib.source));
        out.push(("memory.below_4g_mib".into(), &m.below_4g_mib.source));
        out.push((
            "memory.reserved_mib_per_node".into(),
            &m.reserved_mib_per_node.source,
        ));
        out.push((
            "memory.struct_page_bytes".into(),
            &m.struct_page_bytes.source,
        ));
        for (i, c) in self.caches.iter().enumerate() {
            let p = format!("cache[{i}]");
            out.push((format!("{p}.size_kib"), &c.size_kib.source));
            out.push((format!("{p}.line_bytes"), &c.line_bytes.source));
            out.push((format!("{p}.ways"), &c.ways.source));
            out.push((format!("{p}.shared_by"), &c.shared_by.source));
            out.push((format!("{p}.policy"), &c.policy.source));
        }
        for (name, s) in self.latency_ns.named() {
            out.push((format!("latency_ns.{name}"), &s.source));
        }
        out.push(("clock.base_ghz".into(), &self.clock.base_ghz.source));
        if let Some(x) = &self.clock.max_ghz {
            out.push(("clock.max_ghz".into(), &x.source));
        }
        out
    }

    /// Checks that the machine is physically possible; `label` names the file in errors.
    ///
    /// Rejected, each with [`Error::Invalid`] naming `label` and the dotted field:
    /// - an empty name; a vendor other than `intel`, `amd`, `arm`, `unknown`;
    /// - zero sockets, cores, threads, NUMA nodes or LLC domains; NUMA nodes that do not divide
    ///   the CPUs evenly or fit neither inside nor across sockets; LLC domains that do not divide
    ///   the cores of a socket;
    /// - `node_mib` with a length other than `numa_nodes` or a zero entry; `below_4g_mib` above
    ///   4096 or above node 0's memory; reservations that eat a whole node; a zero
    ///   `struct page`;
    /// - no caches, no L2, levels out of order, a zero size / way count, a line size that is not
    ///   a power of two, an unknown kind, an L1 not private to a core, an outer level smaller
    ///   than an inner one, an inclusive level smaller than the inner caches it must hold;
    /// - a latency that is negative, zero, NaN or infinite; `l2_hit < llc_hit < dram_local`
    ///   violated; SMT transfer slower than a same-LLC transfer; a cross-LLC or cross-socket
    ///   transfer faster than a same-LLC one; remote DRAM faster than local;
    ///   `c2c_cross_socket` and `dram_remote` present unless there are several sockets (and
    ///   `c2c_cross_socket` missing when there are); `c2c_cross_llc` present iff
    ///   `llc_domains_per_socket > 1`;
    /// - a clock that is not positive and finite, a max clock below base;
    /// - a source string not of the form `"<kind>: <details>"` with a kind from
    ///   [`crate::hw::provenance::SOURCE_KINDS`].
    pub fn validate(&self, label: &str) -> Result<()> {
        let bad = |field: &str, msg: String| Err(Error::invalid(label, field, msg));

        // Sources first: a value with an unknown provenance is not trusted further.
        for (path, s) in self.sources() {
            check_source(label, &path, s)?;
        }

        if self.name.trim().is_empty() {
            return bad("name", "must not be empty".into());
        }
        if !["intel", "amd", "arm", "unknown"].contains(&self.cpu.vendor.as_str()) {
            return bad(
                "cpu.vendor",
                format!(
                    "'{}' is not one of intel, amd, arm, unknown",
                    self.cpu.vendor
                ),
            );
        }

        // Topology.
        let t = &self.topology;
        for (f, v, r) in [
            ("topology.sockets", t.sockets.value, bounds::SOCKETS),
            (
                "topology.cores_per_socket",
                t.cores_per_socket.value,
                bounds::CORES_PER_SOCKET,
            ),
            (
                "topology.threads_per_core",
                t.threads_per_core.value,
                bounds::THREADS_PER_CORE,
            ),
            (
                "topology.numa_nodes",
                t.numa_nodes.value,
                bounds::NUMA_NODES,
            ),
            (
                "topology.llc_domains_per_socket",
                t.llc_domains_per_socket.value,
                bounds::LLC_DOMAINS_PER_SOCKET,
            ),
        ] {
            r.check(label, f, f64::from(v))?;
        }
        let (sockets, cores, nodes, llcs) = (
            t.sockets.value,
            t.cores_per_socket.value,
            t.numa_nodes.value,
            t.llc_domains_per_socket.value,
        );
        let cpus = u64::from(sockets) * u64::from(cores) * u64::from(t.threads_per_core.value);
        bounds::CPUS.check(label, "topology.cores_per_socket", cpus as f64)?;
        if u64::from(nodes) > cpus || cpus % u64::from(nodes) != 0 {
            return bad(
                "topology.numa_nodes",
                format!("{nodes} NUMA nodes do not divide the {cpus} CPUs evenly"),
            );
        }
        if nodes % sockets != 0 && sockets % nodes != 0 {
            return bad(
                "topology.numa_nodes",
                format!(
                    "{nodes} NUMA nodes on {sockets} sockets: a node must lie inside one socket \
                     or span whole sockets"
                ),
            );
        }
        if cores % llcs != 0 {
            return bad(
                "topology.llc_domains_per_socket",
                format!("{llcs} LLC domains do not divide the {cores} cores of a socket"),
            );
        }

        // Memory.
        let m = &self.memory;
        if m.node_mib.value.len() != nodes as usize {
            return bad(
                "memory.node_mib",
                format!(
                    "has {} entries but topology.numa_nodes is {nodes}",
                    m.node_mib.value.len()
                ),
            );
        }
        if let Some(i) = m.node_mib.value.iter().position(|&x| x == 0) {
            return bad(
                "memory.node_mib",
                format!("node {i} has no memory (machine files describe nodes with memory)"),
            );
        }
        for (i, &v) in m.node_mib.value.iter().enumerate() {
            if let Some(msg) = bounds::NODE_MIB.problem(v as f64) {
                return bad("memory.node_mib", format!("node {i}: {msg}"));
            }
        }
        let total: u64 = m
            .node_mib
            .value
            .iter()
            .fold(0u64, |a, &v| a.saturating_add(v));
        bounds::TOTAL_MIB.check(label, "memory.node_mib", total as f64)?;
        let node0 = m.node_mib.value.first().copied().unwrap_or(0);
        if m.below_4g_mib.value > 4096 {
            return bad(
                "memory.below_4g_mib",
                format!(
                    "{} MiB is more than the 4096 MiB below 4 GiB",
                    m.below_4g_mib.value
                ),
            );
        }
        if m.below_4g_mib.value > node0 {
            return bad(
                "memory.below_4g_mib",
                format!(
                    "{} MiB below 4 GiB is more than node 0's {node0} MiB",
                    m.below_4g_mib.value
                ),
            );
        }
        let smallest = m.node_mib.value.iter().copied().min().unwrap_or(0);
        if m.reserved_mib_per_node.value >= smallest {
            return bad(
                "memory.reserved_mib_per_node",
                format!(
                    "{} MiB reserved per node leaves nothing of the smallest node ({smallest} MiB)",
                    m.reserved_mib_per_node.value
                ),
            );
        }
        bounds::STRUCT_PAGE_BYTES.check(
            label,
            "memory.struct_page_bytes",
            m.struct_page_bytes.value as f64,
        )?;

        self.validate_caches(label)?;
        self.validate_latencies(label)?;

        // Clock.
        let base = self.clock.base_ghz.value;
        bounds::CLOCK_GHZ.check(label, "clock.base_ghz", base)?;
        if let Some(max) = &self.clock.max_ghz {
            bounds::CLOCK_GHZ.check(label, "clock.max_ghz", max.value)?;
            if max.value < base {
                return bad(
                    "clock.max_ghz",
                    format!("{} GHz is below the base clock {base} GHz", max.value),
                );
            }
        }
        Ok(())
    }

    fn validate_caches(&self, label: &str) -> Result<()> {
        let bad = |field: String, msg: String| Err(Error::invalid(label, field, msg));
        if self.caches.is_empty() {
            return bad(
                "cache".into(),
                "a machine needs at least one cache level".into(),
            );
        }
        let mut prev_level = 0u8;
        // The largest data-holding instance seen at an inner level, and its index.
        let mut inner_max: Option<(usize, u64)> = None;
        let mut level_max: Option<(usize, u64)> = None;
        for (i, c) in self.caches.iter().enumerate() {
            let p = format!("cache[{i}]");
            if c.level == 0 || c.level > 4 {
                return bad(
                    format!("{p}.level"),
                    format!("level {} is not 1..=4", c.level),
                );
            }
            if c.level < prev_level {
                return bad(
                    format!("{p}.level"),
                    format!(
                        "caches must be listed innermost first: L{} after L{prev_level}",
                        c.level
                    ),
                );
            }
            if !["data", "instruction", "unified"].contains(&c.kind.as_str()) {
                return bad(
                    format!("{p}.kind"),
                    format!("'{}' is not one of data, instruction, unified", c.kind),
                );
            }
            bounds::CACHE_KIB.check(label, &format!("{p}.size_kib"), c.size_kib.value as f64)?;
            bounds::CACHE_WAYS.check(label, &format!("{p}.ways"), c.ways.value as f64)?;
            let line = c.line_bytes.value;
            bounds::CACHE_LINE_BYTES.check(label, &format!("{p}.line_bytes"), line as f64)?;
            if !line.is_power_of_two() {
                return bad(
                    format!("{p}.line_bytes"),
                    format!("{line} is not a power of two"),
                );
            }
            // At least one set: ways x line <= capacity.
            if c.ways.value.saturating_mul(line) > c.size_bytes() {
                return bad(
                    format!("{p}.ways"),
                    format!(
                        "{} ways of {line}-byte lines need {} bytes, more than the {} KiB of the \
                         cache (a cache has at least one set)",
                        c.ways.value,
                        c.ways.value.saturating_mul(line),
                        c.size_kib.value
                    ),
                );
            }
            if c.level == 1 && c.shared_by.value != Sharing::Core {
                return bad(
                    format!("{p}.shared_by"),
                    "an L1 cache is private to a core".into(),
                );
            }
            if c.level == 1 && c.policy.value != Policy::Private {
                return bad(
                    format!("{p}.policy"),
                    "an L1 cache has policy 'private'".into(),
                );
            }
            if c.shared_by.value == Sharing::Socket
                && self.topology.llc_domains_per_socket.value > 1
            {
                return bad(
                    format!("{p}.shared_by"),
                    "shared by a whole socket, but the socket has several LLC domains".into(),
                );
            }
            if !c.holds_data() {
                prev_level = c.level;
                continue;
            }
            if c.level > prev_level {
                // Entering a new level: the previous level's largest instance becomes "inner".
                if let Some(lm) = level_max {
                    inner_max = Some(match inner_max {
                        Some(im) if im.1 >= lm.1 => im,
                        _ => lm,
                    });
                }
                level_max = None;
            }
            let size = c.size_bytes();
            if let Some((j, inner)) = inner_max {
                if size < inner {
                    return bad(
                        format!("{p}.size_kib"),
                        format!(
                            "L{} ({} KiB) is smaller than the inner cache[{j}] ({} KiB)",
                            c.level,
                            c.size_kib.value,
                            inner / 1024
                        ),
                    );
                }
            }
            if c.policy.value == Policy::Inclusive {
                let held = self.inner_bytes_held(c);
                if size < held {
                    return bad(
                        format!("{p}.size_kib"),
                        format!(
                            "inclusive L{} ({} KiB) cannot hold the {} KiB of inner caches it \
                             covers",
                            c.level,
                            c.size_kib.value,
                            held / 1024
                        ),
                    );
                }
            }
            level_max = Some(match level_max {
                Some(lm) if lm.1 >= size => lm,
                _ => (i, size),
            });
            prev_level = c.level;
        }
        if self.l2().is_none() {
            return bad(
                "cache".into(),
                "no level-2 data or unified cache (the PCP cache model needs one)".into(),
            );
        }
        Ok(())
    }

    /// Bytes of inner data caches (levels below `outer`) covered by one instance of `outer`.
    fn inner_bytes_held(&self, outer: &CacheLevel) -> u64 {
        let cores = u64::from(match outer.shared_by.value {
            Sharing::Core => 1,
            Sharing::LlcDomain => self.cores_per_llc_domain(),
            Sharing::Socket => self.topology.cores_per_socket.value,
        });
        self.caches
            .iter()
            .filter(|c| c.level < outer.level && c.holds_data())
            .map(|c| c.size_bytes())
            .sum::<u64>()
            .saturating_mul(cores)
    }

    fn validate_latencies(&self, label: &str) -> Result<()> {
        let bad = |field: &str, msg: String| Err(Error::invalid(label, field, msg));
        let l = &self.latency_ns;
        for (name, s) in l.named() {
            bounds::LATENCY_NS.check(label, &format!("latency_ns.{name}"), s.value)?;
        }
        if l.l2_hit.value >= l.llc_hit.value {
            return bad(
                "latency_ns.llc_hit",
                format!(
                    "LLC hit ({} ns) must be slower than L2 hit ({} ns)",
                    l.llc_hit.value, l.l2_hit.value
                ),
            );
        }
        if l.llc_hit.value >= l.dram_local.value {
            return bad(
                "latency_ns.dram_local",
                format!(
                    "local DRAM ({} ns) must be slower than an LLC hit ({} ns)",
                    l.dram_local.value, l.llc_hit.value
                ),
            );
        }
        if l.c2c_smt.value > l.c2c_same_llc.value {
            return bad(
                "latency_ns.c2c_smt",
                format!(
                    "SMT-sibling transfer ({} ns) slower than a same-LLC transfer ({} ns)",
                    l.c2c_smt.value, l.c2c_same_llc.value
                ),
            );
        }
        let sockets = self.topology.sockets.value;
        let llcs = self.topology.llc_domains_per_socket.value;
        match (&l.c2c_cross_llc, llcs > 1) {
            (None, true) => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    format!("required: {llcs} LLC domains per socket"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    "given, but there is one LLC domain per socket".into(),
                )
            }
            (Some(x), true) if x.value < l.c2c_same_llc.value => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    format!(
                        "cross-LLC transfer ({} ns) faster than a same-LLC one ({} ns)",
                        x.value, l.c2c_same_llc.value
                    ),
                )
            }
            _ => {}
        }
        match (&l.c2c_cross_socket, sockets > 1) {
            (None, true) => {
                return bad(
                    "latency_ns.c2c_cross_socket",
                    format!("required: {sockets} sockets"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.c2c_cross_socket",
                    "given, but there is one socket".into(),
                )
            }
            (Some(x), true) => {
                let floor = l
                    .c2c_cross_llc
                    .as_ref()
                    .map_or(l.c2c_same_llc.value, |c| c.value.max(l.c2c_same_llc.value));
                if x.value < floor {
                    return bad(
                        "latency_ns.c2c_cross_socket",
                        format!(
                            "cross-socket transfer ({} ns) faster than a transfer inside the \
                             socket ({floor} ns)",
                            x.value
                        ),
                    );
                }
            }
            _ => {}
        }
        match (
            &l.dram_remote,
            sockets > 1 || self.topology.numa_nodes.value > 1,
        ) {
            (None, true) if sockets > 1 => {
                return bad(
                    "latency_ns.dram_remote",
                    format!("required: {sockets} sockets"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.dram_remote",
                    "given, but there is one socket and one NUMA node".into(),
                )
            }
            (Some(x), true) if x.value <= l.dram_local.value => {
                return bad(
                    "latency_ns.dram_remote",
                    format!(
                        "remote DRAM ({} ns) must be slower than local DRAM ({} ns)",
                        x.value, l.dram_local.value
                    ),
                )
            }
            _ => {}
        }
        Ok(())
    }
}

impl Latencies {
    /// The latencies that are present, by field name, in file order.
    pub fn named(&self) -> Vec<(&'static str, &Sourced<f64>)> {
        let mut v = vec![
            ("l2_hit", &self.l2_hit),
            ("llc_hit", &self.llc_hit),
            ("c2c_smt", &self.c2c_smt),
            ("c2c_same_llc", &self.c2c_same_llc),
        ];
        if let Some(x) = &self.c2c_cross_llc {
            v.push(("c2c_cross_llc", x));
        }
        if let Some(x) = &self.c2c_cross_socket {
            v.push(("c2c_cross_socket", x));
        }
        v.push(("dram_local", &self.dram_local));
        if let Some(x) = &self.dram_remote {
            v.push(("dram_remote", x));
        }
        v
    }
}

/// Checks that a source string reads `"<kind>: <details>"` with a known kind.
fn check_source(label: &str, path: &str, source: &str) -> Result<()> {
    let field = format!("{path}.source");
    let Some((head, details)) = source.split_once(':') else {
        return Err(Error::invalid(
            label,
            field,
            format!(
                "'{source}' is not of the form \"<kind>: <details>\" (kinds: {})",
                SOURCE_KINDS.join(", ")
            ),
        ));
    };
    let head = head.trim();
    // "seed" alone is not enough: it must say which thread ("seed 004").
    let known = SOURCE_KINDS.iter().any(|k| {
        (head == *k && *k != "seed")
            || (*k == "seed"
                && head
                    .strip_prefix("seed ")
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())))
    });
    if !known || source.starts_with(char::is_whitespace) {
        return Err(Error::invalid(
            label,
            field,
            format!(
                "'{head}' is not a source kind; use one of {} (seed as \"seed NNN\")",
                SOURCE_KINDS.join(", ")
            ),
        ));
    }
    if details.trim().is_empty() {
        return Err(Error::invalid(
            label,
            field,
            format!("'{source}' says nothing after the kind"),
        ));
    }
    Ok(())
}

/// Converts a toml error into an [`Error::Parse`] with a 1-based line number.
pub(crate) fn toml_error(label: &str, text: &str, e: &toml::de::Error) -> Error {
    let line = e
        .span()
        .map(|s| {
            let end = s.start.min(text.len());
            text.as_bytes()[..end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        })
        .unwrap_or(0);
    // Name the key of the offending line (`cores_per_socket = { value = -3, ... }`) when there is
    // one, so the error says which field as well as where.
    let field = text
        .lines()
        .nth(line.saturating_sub(1))
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim())
        .filter(|k| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.\"".contains(c))
        })
        .unwrap_or("toml");
    Error::parse(label, line, field, e.message().to_string())
}

/// Turns an [`Error::Invalid`] about a dotted field of a machine file into an [`Error::Parse`]
/// with the line of that field in `text` (other errors pass through).
fn locate_invalid(e: Error, text: &str) -> Error {
    match e {
        Error::Invalid {
            file,
            field,
            message,
        } => match field_line(text, &field) {
            Some(line) => Error::Parse {
                file,
                line,
                field,
                message,
            },
            None => Error::Invalid {
                file,
                field,
                message,
            },
        },
        other => other,
    }
}

/// The 1-based line of a dotted field (`cache[2].ways`, `latency_ns.dram_local`, `name`) in a
/// machine file, or of its closest enclosing table; `None` when neither is in the text.
pub fn field_line(text: &str, field: &str) -> Option<usize> {
    let field = field.strip_suffix(".source").unwrap_or(field);
    // Every key and table header with its full dotted path.
    let mut found: Vec<(String, usize)> = Vec::new();
    let mut table = String::new();
    let mut arrays: Vec<(String, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.split("]]").next()) {
            let name = name.trim().to_string();
            let idx = match arrays.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => {
                    *k += 1;
                    *k - 1
                }
                None => {
                    arrays.push((name.clone(), 1));
                    0
                }
            };
            table = format!("{name}[{idx}]");
            found.push((table.clone(), i + 1));
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            table = name.trim().to_string();
            found.push((table.clone(), i + 1));
            continue;
        }
        if let Some((key, _)) = line.split_once('=') {
            let key = key.trim().trim_matches('"');
            let path = if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            };
            found.push((path, i + 1));
        }
    }
    let mut want = field.to_string();
    loop {
        if let Some((_, l)) = found.iter().find(|(p, _)| *p == want) {
            return Some(*l);
        }
        // The enclosing table: drop the last component (`cache[2].ways` -> `cache[2]`).
        match want.rfind('.') {
            Some(k) => want.truncate(k),
            None => return None,
        }
    }
}
