//! The machine file schema: the TOML tables as typed structs (each value [`Sourced`]).

use super::PAGE_BYTES;
use crate::hw::provenance::Sourced;
use serde::{Deserialize, Serialize};

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
    /// Measured cost of reusing a page by where its lines are, for a producer/consumer pair on
    /// two cores of one LLC domain (`pcpmodel measure reuse --toml`). Where present it prices
    /// the cache term of that placement instead of `latencies x lines / lines in flight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_ns_per_page: Option<ReuseCosts>,
    /// Measured work per 4 KiB page of a host loop's slower stage with every line local, by the
    /// built-in workload that models the loop (`pcpmodel measure work --output`): where present
    /// it is that workload's fixed work on this machine, instead of thread 004's carried over.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub work_ns_per_page: std::collections::BTreeMap<String, Sourced<f64>>,
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
    /// Pages each node's Normal zone gives the buddy allocator (`managed` in /proc/zoneinfo),
    /// one entry per node, when read from the host: the zone layout takes them instead of
    /// deriving them from the sizes above (MiB rounding and where the reservations sit move
    /// that by hundreds of pages, and the kernel's pcp->high with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normal_managed_pages: Option<Sourced<Vec<u64>>>,
    /// Node 0's ZONE_DMA32 managed pages, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma32_managed_pages: Option<Sourced<u64>>,
    /// On a VM whose free memory the hypervisor drops (free page reporting, a balloon): what
    /// the host adds to the first touch of such a page, ns per 4 KiB page (its fault, the
    /// allocation and zeroing of host memory, the mapping). A list that grows pulls pages from
    /// the buddy allocator that may be dropped ones. Absent on bare metal (`measure backing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing_ns_per_page: Option<Sourced<f64>>,
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

/// The extra time to write a 4 KiB page, over a copy between cached buffers, by the level
/// that holds its lines when the producer core reuses it after the consumer core of the same
/// LLC domain read it: what a store stream pays there, with the hardware's prefetch, its
/// lines in flight and its coherence protocol (an AMD core that read a line may keep an owned
/// copy; Intel's non-inclusive LLC snoops the owner). ns per page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReuseCosts {
    /// Lines still in the consumer core's private L2.
    pub private: Sourced<f64>,
    /// Lines in the LLC only.
    pub llc: Sourced<f64>,
    /// Lines in neither: DRAM.
    pub dram: Sourced<f64>,
    /// The LLC capacity the same measurement shows for this placement, KiB, where it is below
    /// the nominal size (a VM's share of a host LLC other tenants also fill): the capacity the
    /// three costs were fitted at, and the one the model then uses in front of DRAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_kib: Option<Sourced<f64>>,
}

impl ReuseCosts {
    /// The three values with their field names, innermost first.
    pub fn named(&self) -> [(&'static str, &Sourced<f64>); 3] {
        [
            ("private", &self.private),
            ("llc", &self.llc),
            ("dram", &self.dram),
        ]
    }
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
