//! NUMA nodes and memory.

use super::sysfs::{meminfo_kb, numbered_dirs, parse_cpulist, read_opt, read_zoneinfo};
use super::{disp, Field};

use std::path::Path;

use crate::error::{Error, Result};
use crate::hw::machine::PAGE_BYTES;

/// The largest MAX_NUMNODES a kernel can be built with (`1 << CONFIG_NODES_SHIFT`, at most 10).
const MAX_NUMNODES: u32 = 1 << 10;

/// NUMA nodes and memory from sysfs nodes, /proc/meminfo and /proc/zoneinfo.
pub(super) struct MemoryFields {
    pub(super) numa_nodes: Field<u32>,
    pub(super) node_mib: Field<Vec<u64>>,
    pub(super) mem_total_mib: Field<u64>,
    pub(super) below_4g_mib: Field<u64>,
    pub(super) reserved_mib_per_node: Field<u64>,
    pub(super) normal_managed_pages: Field<Vec<u64>>,
    pub(super) dma32_managed_pages: Field<u64>,
}

pub(super) fn detect_memory(root: &Path) -> Result<MemoryFields> {
    let node_dir = root.join("sys/devices/system/node");
    // --- NUMA nodes and memory.
    let zoneinfo = read_zoneinfo(&root.join("proc/zoneinfo"))?;
    let mut nodes = numbered_dirs(&node_dir, "node")?;
    // node/online lists the online nodes in the CPU-list format; a nodeN directory of a node
    // not in it is not counted. Node ids stay below MAX_NUMNODES, at most 1 << 10
    // (CONFIG_NODES_SHIFT <= 10, include/linux/numa.h).
    let online_p = node_dir.join("online");
    if let Some(s) = read_opt(&online_p)? {
        let online = parse_cpulist(&s, &disp(&online_p), "online")?;
        if let Some(n) = online.iter().find(|n| **n >= MAX_NUMNODES) {
            return Err(Error::parse(
                disp(&online_p),
                1,
                "online",
                format!(
                    "node {n} is not a node id: ids stay below MAX_NUMNODES, at most {MAX_NUMNODES} (CONFIG_NODES_SHIFT <= 10)"
                ),
            ));
        }
        nodes.retain(|(n, _)| online.contains(n));
    }
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

    let normal_managed_pages = match zoneinfo.as_ref() {
        Some(z) if !node_list.is_empty() => {
            let per_node: Option<Vec<u64>> = node_list
                .iter()
                .map(|&n| {
                    z.iter()
                        .find(|((m, zone), _)| *m == n && zone == "Normal")
                        .map(|(_, p)| p.managed)
                        .filter(|&m| m > 0)
                })
                .collect();
            match per_node {
                Some(v) => {
                    Field::detected(v, "/proc/zoneinfo: 'managed' of each node's Normal zone")
                }
                None => Field::missing("a node without a Normal zone in /proc/zoneinfo"),
            }
        }
        _ => Field::missing("needs /proc/zoneinfo (managed pages)"),
    };
    let dma32_managed_pages = match zoneinfo.as_ref().and_then(|z| {
        z.iter()
            .find(|((n, zone), _)| *n == 0 && zone == "DMA32")
            .map(|(_, p)| p.managed)
    }) {
        Some(m) => Field::detected(m, "/proc/zoneinfo: 'managed' of node 0's DMA32 zone"),
        None => Field::missing("no DMA32 zone of node 0 in /proc/zoneinfo"),
    };

    Ok(MemoryFields {
        numa_nodes,
        node_mib,
        mem_total_mib,
        below_4g_mib,
        reserved_mib_per_node,
        normal_managed_pages,
        dma32_managed_pages,
    })
}
