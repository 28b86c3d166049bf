//! Counts the kernel formulas and cost models need: cores, CPUs, LLC domains, cache sizes.

use super::PAGE_BYTES;

use super::schema::{CacheLevel, Machine};

impl Machine {
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
}
