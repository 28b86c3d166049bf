//! Workloads: what the processes do, as inputs to the cost models.
//!
//! - [`MmapFill`]: thread 000's loop. `P` processes each `mmap` N bytes, write every page,
//!   `munmap`, and repeat. Every page is allocated (order 0) on the fault path and freed at
//!   `munmap`, so one iteration of one process is an *allocation phase* of `pages_per_iteration`
//!   order-0 allocations followed by a *free phase* of as many frees, on the CPU the process runs
//!   on. The time a page costs outside zone->lock (fault entry, zeroing, the user's write, the
//!   unmap) is a model parameter, not a workload input.
//! - [`AllocFreeRate`]: the generic description later models reuse: order-0 allocation and free
//!   rates per CPU and the CPUs and nodes doing them.
//! - [`NodeSpan`] / [`zone_shares`]: which NUMA nodes the processes run on (thread 000 confines
//!   them to node 0 with a cpuset cgroup) and how many of them allocate from each node's zone.
//!
//! # Assumptions
//! - One process per CPU, never migrated; processes spread evenly over the allowed nodes
//!   (round-robin) and over the LLC domains of each node.
//! - Memory policy is the default local allocation: a process allocates from, and frees to, the
//!   Normal zone of its own node (the 6 GiB per process fits in one node's memory).
//! - Thread 000's Python loop (`mm = mmap.mmap(-1, size); mm[:] = b'\xff' * size; mm.close()`)
//!   allocates *two* buffers per iteration: the temporary `bytes` object (private anonymous
//!   memory, `malloc` -> `mmap`) and the shared mapping (`mmap(-1, ...)` is `MAP_SHARED`, i.e.
//!   shmem); both are faulted in order-0 pages (shmem THP is off by default) and freed when the
//!   temporary is dropped and the mapping closed. [`MmapFill::thread_000`] therefore uses
//!   `buffers_per_iteration = 2`. The count only sets how often the per-CPU batch state restarts
//!   its ramp (once per phase), which moves the prediction by well under 1 %.
//!
//! # References
//! Seed 000 (Yafang Shao, 2024-07): the script and "Run this script 10 times in parallel";
//! "Using the cpuset cgroup, we can restrict the test script to run on NUMA node 0 only".

pub mod fit;
pub mod kind;
pub mod kinds;
pub mod not_modelled;
pub mod registry;
pub mod spec;

pub use fit::WorkloadFit;
pub use kind::{Kind, Knobs, Mechanism, Predicted, ReuseModel};
pub use registry::{resolve, Registry, Workload};
pub use spec::WorkloadSpec;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;

/// NUMA nodes the workload's processes may run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeSpan {
    /// Node 0 only (a cpuset cgroup).
    One,
    /// Every node of the machine, the tasks spread evenly.
    All,
    /// One task per physical core in the order hwloc lists the cores (package by package),
    /// wrapping onto the cores again past the last: will-it-scale's placement (`main.c` binds
    /// task `i` to hwloc's `HWLOC_OBJ_CORE` number `i % cores`). Tasks fill node 0's cores
    /// before node 1's, so 32 tasks on two 22-core sockets run 22 + 10.
    Cores,
}

impl NodeSpan {
    /// Parses `1` / `one`, `all` or `cores`.
    pub fn parse(s: &str, field: &str) -> Result<NodeSpan> {
        match s.trim() {
            "1" | "one" => Ok(NodeSpan::One),
            "all" => Ok(NodeSpan::All),
            "cores" => Ok(NodeSpan::Cores),
            other => Err(Error::parse(
                "command line",
                0,
                field,
                format!("'{other}': use 1, all or cores"),
            )),
        }
    }

    /// `1`, `all` or `cores`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeSpan::One => "1",
            NodeSpan::All => "all",
            NodeSpan::Cores => "cores",
        }
    }

    /// Number of nodes used on `machine`.
    pub fn nodes_on(self, machine: &Machine) -> u32 {
        match self {
            NodeSpan::One => 1,
            NodeSpan::All | NodeSpan::Cores => machine.topology.numa_nodes.value.max(1),
        }
    }
}

/// Thread 000's loop: `procs` processes each mmap, fill and munmap `bytes_per_buffer` bytes,
/// `buffers_per_iteration` buffers per iteration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MmapFill {
    /// Parallel processes (one per CPU).
    pub procs: u32,
    /// Bytes of one buffer (6 GiB in thread 000).
    pub bytes_per_buffer: u64,
    /// Buffers allocated then freed per iteration (2 for thread 000's Python script).
    pub buffers_per_iteration: u32,
    /// Nodes the processes run on.
    pub nodes: NodeSpan,
}

impl MmapFill {
    /// Thread 000's workload: 10 processes, 6 GiB, two buffers per iteration (see the module
    /// docs), on `nodes`.
    pub fn thread_000(nodes: NodeSpan) -> MmapFill {
        MmapFill {
            procs: 10,
            bytes_per_buffer: 6 << 30,
            buffers_per_iteration: 2,
            nodes,
        }
    }

    /// Order-0 pages allocated (and later freed) by one process per iteration.
    pub fn pages_per_iteration(&self) -> u64 {
        self.bytes_per_buffer.div_ceil(PAGE_BYTES) * u64::from(self.buffers_per_iteration)
    }

    /// Checks the inputs against the machine.
    pub fn validate(&self, machine: &Machine) -> Result<()> {
        let label = "workload mmap-fill";
        if self.procs == 0 {
            return Err(Error::invalid(label, "procs", "must be at least 1"));
        }
        if self.bytes_per_buffer < PAGE_BYTES {
            return Err(Error::invalid(
                label,
                "bytes_per_buffer",
                format!("must be at least one page ({PAGE_BYTES} bytes)"),
            ));
        }
        if self.buffers_per_iteration == 0 {
            return Err(Error::invalid(
                label,
                "buffers_per_iteration",
                "must be at least 1",
            ));
        }
        let cpus = self.nodes.nodes_on(machine) * machine.cpus_per_node();
        if self.procs > cpus {
            return Err(Error::invalid(
                label,
                "procs",
                format!(
                    "{} processes but only {cpus} CPUs on {} node(s) of {} (one process per CPU is assumed)",
                    self.procs,
                    self.nodes.nodes_on(machine),
                    machine.name
                ),
            ));
        }
        Ok(())
    }

    /// The same loop as a generic rate description, given the time one page costs outside
    /// zone->lock and the mean lock time per page (both ns).
    pub fn as_rate(&self, ns_per_page: f64) -> AllocFreeRate {
        let rate = if ns_per_page > 0.0 {
            1e9 / ns_per_page
        } else {
            f64::INFINITY
        };
        AllocFreeRate {
            cpus: self.procs,
            nodes: self.nodes,
            order: 0,
            alloc_pages_per_s_per_cpu: rate,
            free_pages_per_s_per_cpu: rate,
            phase_pages: Some(self.pages_per_iteration()),
        }
    }
}

/// A generic allocation/free load: `cpus` CPUs each allocating and freeing pages of one order at
/// the given rates. `phase_pages` says whether allocations and frees alternate in long phases
/// (`Some(pages per phase)`, as in an mmap/munmap loop) or interleave page by page (`None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocFreeRate {
    /// CPUs doing the work.
    pub cpus: u32,
    /// Nodes they run on.
    pub nodes: NodeSpan,
    /// Allocation order.
    pub order: u8,
    /// Allocation rate of one CPU, pages/s.
    pub alloc_pages_per_s_per_cpu: f64,
    /// Free rate of one CPU, pages/s.
    pub free_pages_per_s_per_cpu: f64,
    /// Pages per allocation phase and per free phase, when they alternate in phases.
    pub phase_pages: Option<u64>,
}

/// One zone's share of a workload: the node, and how many of the processes allocate from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ZoneShare {
    /// NUMA node of the zone (its Normal zone).
    pub node: u32,
    /// Processes (CPUs) allocating from and freeing to this zone.
    pub procs: u32,
}

/// How `procs` processes on `nodes` divide among the nodes' zones (round-robin; nodes with no
/// process are left out).
pub fn zone_shares(machine: &Machine, procs: u32, nodes: NodeSpan) -> Vec<ZoneShare> {
    let n = nodes.nodes_on(machine).max(1);
    if nodes == NodeSpan::Cores {
        // Task i on core i % cores, the cores numbered node by node.
        let cores = (machine.cpus() / machine.topology.threads_per_core.value.max(1)).max(1);
        let per_node = cores.div_ceil(n).max(1);
        let mut count = vec![0u32; n as usize];
        for i in 0..procs {
            count[((i % cores) / per_node).min(n - 1) as usize] += 1;
        }
        return count
            .into_iter()
            .enumerate()
            .map(|(node, procs)| ZoneShare {
                node: node as u32,
                procs,
            })
            .filter(|z| z.procs > 0)
            .collect();
    }
    (0..n)
        .map(|node| ZoneShare {
            node,
            procs: procs / n + u32::from(node < procs % n),
        })
        .filter(|z| z.procs > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_000_pages() {
        let w = MmapFill::thread_000(NodeSpan::One);
        assert_eq!(w.pages_per_iteration(), 2 * 1_572_864);
    }

    #[test]
    fn shares_split_round_robin() {
        let m = Machine::builtin("xeon-8260").unwrap();
        let s = zone_shares(&m, 10, NodeSpan::All);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].procs + s[1].procs, 10);
        let s = zone_shares(&m, 3, NodeSpan::All);
        assert_eq!((s[0].procs, s[1].procs), (2, 1));
        let s = zone_shares(&m, 10, NodeSpan::One);
        assert_eq!(s, vec![ZoneShare { node: 0, procs: 10 }]);
    }

    /// will-it-scale's placement: one task per core, node 0's cores first, then wrapping onto
    /// the cores' second threads (2 x 22 cores: 16 -> 16 + 0, 32 -> 22 + 10, 64 -> 42 + 22).
    #[test]
    fn cores_fill_node_by_node_then_wrap() {
        let m = Machine::builtin("broadwell-2s").unwrap();
        let split = |t: u32| {
            zone_shares(&m, t, NodeSpan::Cores)
                .iter()
                .map(|z| (z.node, z.procs))
                .collect::<Vec<_>>()
        };
        assert_eq!(split(16), vec![(0, 16)]);
        assert_eq!(split(32), vec![(0, 22), (1, 10)]);
        assert_eq!(split(64), vec![(0, 42), (1, 22)]);
        assert_eq!(
            NodeSpan::parse("cores", "--nodes").unwrap(),
            NodeSpan::Cores
        );
    }

    #[test]
    fn node_span_parse() {
        assert_eq!(NodeSpan::parse("all", "--nodes").unwrap(), NodeSpan::All);
        assert_eq!(NodeSpan::parse("1", "--nodes").unwrap(), NodeSpan::One);
        assert!(NodeSpan::parse("2", "--nodes").is_err());
    }
}
