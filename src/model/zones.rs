//! Which NUMA nodes a workload's tasks run on ([`NodeSpan`]) and how they divide among the
//! nodes' zones ([`zone_shares`]): one process per CPU, spread evenly over the allowed nodes
//! (round-robin), or one task per core in hwloc's order ([`NodeSpan::Cores`]). The zone->lock
//! models queue each zone's share on that zone's lock; the workloads re-export these types.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;

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
