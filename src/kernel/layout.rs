//! Zone layout of a machine: which zones each NUMA node has and how many pages each manages.
//!
//! # Equations (4 KiB pages)
//! For NUMA node `n` with `node_mib[n]` MiB:
//! - `node_pages = node_mib * 256`
//! - `memmap_pages = node_pages * struct_page_bytes / 4096` (the node's `struct page` array)
//! - `reserved_pages = reserved_mib_per_node * 256`
//!
//! Node 0 holds the zones below 4 GiB:
//! - ZONE_DMA: present [`DMA_PRESENT_PAGES`] = 3998, managed [`DMA_MANAGED_PAGES`] = 3840;
//! - ZONE_DMA32: managed = `below_4g_mib * 256 - 4096` (4096 pages = the 16 MiB DMA span);
//! - ZONE_NORMAL: managed = `node_pages - below_4g_mib * 256 - memmap_pages - reserved_pages`.
//!
//! Every other node holds only ZONE_NORMAL: managed = `node_pages - memmap_pages -
//! reserved_pages`. CPUs per node = `sockets * cores_per_socket * threads_per_core /
//! numa_nodes`.
//!
//! # Assumptions
//! - x86-64 with 4 KiB pages, ZONE_DMA (first 16 MiB) and ZONE_DMA32 (up to 4 GiB), no
//!   ZONE_MOVABLE (no `movablecore=` / `kernelcore=`), no memory hotplug.
//! - memblock allocates top-down, so the memmap and other boot reservations come out of each
//!   node's highest zone (Normal), not out of DMA/DMA32.
//! - The DMA numbers (present 3998, managed 3840) are typical for x86-64 firmware: they are the
//!   values of the real 6.18 host in `tests/fixtures/host-6.18-zoneinfo.txt`. Real DMA32
//!   managed counts are a little lower (holes below 4 GiB).
//! - CPUs are spread evenly over nodes.
//!
//! # Validity
//! Machines whose memory is split evenly enough that every Normal zone is positive. A real
//! machine's managed counts differ by firmware reservations, crashkernel, hugepages reserved at
//! boot and so on; `reserved_mib_per_node` stands for all of them.
//!
//! # References
//! mm/mm_init.c / mm/page_alloc.c `free_area_init()` and `memblock_free_all()` (zone spans,
//! present vs managed pages); the 6.18 host zoneinfo fixture for the DMA zone.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;

/// Pages spanned by ZONE_DMA (the first 16 MiB).
pub const DMA_SPAN_PAGES: u64 = 4096;
/// Present pages of ZONE_DMA on a typical x86-64 machine (the real 6.18 host fixture).
pub const DMA_PRESENT_PAGES: u64 = 3998;
/// Managed pages of ZONE_DMA on a typical x86-64 machine (the real 6.18 host fixture).
pub const DMA_MANAGED_PAGES: u64 = 3840;
/// Pages per MiB with 4 KiB pages.
pub const PAGES_PER_MIB: u64 = 256;
/// Size of a base page (4 KiB), bytes: the one definition in the crate (every kernel formula
/// here counts 4 KiB pages; x86-64 and the arm64 machines of the threads use 4 KiB pages).
pub const PAGE_BYTES: u64 = 4096;

/// A zone type, in the kernel's `enum zone_type` order (x86-64 configuration, plus HighMem for
/// files from 32-bit machines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ZoneKind {
    /// ZONE_DMA (first 16 MiB on x86).
    #[serde(rename = "DMA")]
    Dma,
    /// ZONE_DMA32 (below 4 GiB).
    #[serde(rename = "DMA32")]
    Dma32,
    /// ZONE_NORMAL.
    Normal,
    /// ZONE_HIGHMEM (32-bit only).
    HighMem,
    /// ZONE_MOVABLE.
    Movable,
    /// ZONE_DEVICE.
    Device,
}

impl ZoneKind {
    /// The name `/proc/zoneinfo` prints.
    pub fn name(self) -> &'static str {
        match self {
            ZoneKind::Dma => "DMA",
            ZoneKind::Dma32 => "DMA32",
            ZoneKind::Normal => "Normal",
            ZoneKind::HighMem => "HighMem",
            ZoneKind::Movable => "Movable",
            ZoneKind::Device => "Device",
        }
    }

    /// The kind for a name as `/proc/zoneinfo` prints it.
    pub fn from_name(name: &str) -> Option<ZoneKind> {
        [
            ZoneKind::Dma,
            ZoneKind::Dma32,
            ZoneKind::Normal,
            ZoneKind::HighMem,
            ZoneKind::Movable,
            ZoneKind::Device,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    /// At or below ZONE_NORMAL (`gfp_zone(GFP_USER)`): counted by `nr_free_buffer_pages()` and
    /// by the khugepaged `nr_zones`.
    pub fn at_most_normal(self) -> bool {
        matches!(self, ZoneKind::Dma | ZoneKind::Dma32 | ZoneKind::Normal)
    }
}

impl std::fmt::Display for ZoneKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One zone: where it is and how many pages it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneSpec {
    /// NUMA node id.
    pub node: u32,
    /// Zone type.
    pub kind: ZoneKind,
    /// Pages with memory behind them (`present`).
    pub present_pages: u64,
    /// Pages the buddy allocator manages (`managed`): what every formula uses.
    pub managed_pages: u64,
}

impl ZoneSpec {
    /// A zone with managed pages (`populated_zone()` tests `present`, but a zone with present
    /// and no managed pages has no usable pageset either).
    pub fn is_populated(&self) -> bool {
        self.present_pages > 0 && self.managed_pages > 0
    }
}

/// The zones of a machine and its CPUs per node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneLayout {
    /// Every populated zone, node by node, in zone order.
    pub zones: Vec<ZoneSpec>,
    /// CPUs on each node (index = node id).
    pub cpus_per_node: Vec<u32>,
    /// All online CPUs.
    pub online_cpus: u32,
    /// How the numbers were obtained, for people.
    pub notes: Vec<String>,
}

/// Builds the zone layout of `machine` (see the module documentation for the equations).
pub fn zone_layout(machine: &Machine) -> Result<ZoneLayout> {
    let label = format!("machine '{}'", machine.name);
    let mem = &machine.memory;
    let topo = &machine.topology;
    let nodes = topo.numa_nodes.value;
    if nodes == 0 {
        return Err(Error::invalid(
            &label,
            "topology.numa_nodes",
            "must be at least 1",
        ));
    }
    let node_mib = &mem.node_mib.value;
    if node_mib.len() != nodes as usize {
        return Err(Error::invalid(
            &label,
            "memory.node_mib",
            format!(
                "has {} entries but topology.numa_nodes is {nodes}",
                node_mib.len()
            ),
        ));
    }
    let cpus = u64::from(topo.sockets.value)
        * u64::from(topo.cores_per_socket.value)
        * u64::from(topo.threads_per_core.value);
    if cpus == 0 {
        return Err(Error::invalid(
            &label,
            "topology",
            "sockets * cores_per_socket * threads_per_core is 0",
        ));
    }
    if cpus % u64::from(nodes) != 0 {
        return Err(Error::invalid(
            &label,
            "topology.numa_nodes",
            format!("{cpus} CPUs do not split evenly over {nodes} nodes"),
        ));
    }
    let cpus_on_node = u32::try_from(cpus / u64::from(nodes))
        .map_err(|_| Error::invalid(&label, "topology", "too many CPUs"))?;
    let online_cpus =
        u32::try_from(cpus).map_err(|_| Error::invalid(&label, "topology", "too many CPUs"))?;
    let struct_page = mem.struct_page_bytes.value;
    if struct_page == 0 || struct_page > PAGE_BYTES {
        return Err(Error::invalid(
            &label,
            "memory.struct_page_bytes",
            format!("{struct_page} is not a plausible struct page size (1..4096 bytes)"),
        ));
    }
    let below_4g_pages = mem
        .below_4g_mib
        .value
        .checked_mul(PAGES_PER_MIB)
        .ok_or_else(|| Error::invalid(&label, "memory.below_4g_mib", "too large"))?;
    if below_4g_pages <= DMA_SPAN_PAGES {
        return Err(Error::invalid(
            &label,
            "memory.below_4g_mib",
            format!(
                "{} MiB leaves no ZONE_DMA32 above the 16 MiB of ZONE_DMA",
                mem.below_4g_mib.value
            ),
        ));
    }
    if below_4g_pages > 4 * 1024 * PAGES_PER_MIB {
        return Err(Error::invalid(
            &label,
            "memory.below_4g_mib",
            "is more than 4096 MiB",
        ));
    }
    let reserved_pages = mem
        .reserved_mib_per_node
        .value
        .checked_mul(PAGES_PER_MIB)
        .ok_or_else(|| Error::invalid(&label, "memory.reserved_mib_per_node", "too large"))?;

    let mut zones = Vec::new();
    for (n, &mib) in node_mib.iter().enumerate() {
        let field = format!("memory.node_mib[{n}]");
        let node_pages = mib
            .checked_mul(PAGES_PER_MIB)
            .ok_or_else(|| Error::invalid(&label, &field, "too large"))?;
        let memmap_pages = node_pages
            .checked_mul(struct_page)
            .ok_or_else(|| Error::invalid(&label, &field, "too large"))?
            / PAGE_BYTES;
        let node = n as u32;
        let (normal_present, normal_cost) = if n == 0 {
            zones.push(ZoneSpec {
                node,
                kind: ZoneKind::Dma,
                present_pages: DMA_PRESENT_PAGES,
                managed_pages: DMA_MANAGED_PAGES,
            });
            let dma32 = below_4g_pages - DMA_SPAN_PAGES;
            let dma32_managed = match &mem.dma32_managed_pages {
                Some(m) if m.value > dma32 => {
                    return Err(Error::invalid(
                        &label,
                        "memory.dma32_managed_pages",
                        format!(
                        "{} pages is more than ZONE_DMA32 spans ({dma32} pages from below_4g_mib)",
                        m.value
                    ),
                    ))
                }
                Some(m) => m.value,
                None => dma32,
            };
            zones.push(ZoneSpec {
                node,
                kind: ZoneKind::Dma32,
                present_pages: dma32,
                managed_pages: dma32_managed,
            });
            (
                node_pages.checked_sub(below_4g_pages),
                below_4g_pages + memmap_pages + reserved_pages,
            )
        } else {
            (Some(node_pages), memmap_pages + reserved_pages)
        };
        let managed = match &mem.normal_managed_pages {
            // Read from the host: the kernel's own count.
            Some(m) => {
                let f = format!("memory.normal_managed_pages[{n}]");
                let v = *m.value.get(n).ok_or_else(|| {
                    Error::invalid(
                        &label,
                        "memory.normal_managed_pages",
                        format!(
                            "{} entries for {} nodes: one per node",
                            m.value.len(),
                            node_mib.len()
                        ),
                    )
                })?;
                match normal_present {
                    Some(p) if v > p => {
                        return Err(Error::invalid(
                            &label,
                            &f,
                            format!("{v} pages is more than the Normal zone spans ({p} pages)"),
                        ))
                    }
                    _ => Some(v).filter(|v| *v > 0),
                }
            }
            None => node_pages.checked_sub(normal_cost).filter(|m| *m > 0),
        };
        match (normal_present, managed) {
            (Some(present), Some(managed)) => zones.push(ZoneSpec {
                node,
                kind: ZoneKind::Normal,
                present_pages: present,
                managed_pages: managed,
            }),
            _ => {
                return Err(Error::invalid(
                    &label,
                    &field,
                    format!(
                        "{mib} MiB is too small: node {n} needs more than {} pages for \
                         below-4G memory, memmap ({memmap_pages} pages) and reservations \
                         ({reserved_pages} pages) to leave a Normal zone",
                        normal_cost
                    ),
                ))
            }
        }
    }
    let notes = vec![
        format!(
            "zone layout derived from memory.node_mib, below_4g_mib, reserved_mib_per_node and \
             struct_page_bytes ({struct_page} bytes per 4 KiB page): memmap and reservations \
             come out of each node's Normal zone (memblock allocates top-down)"
        ),
        format!(
            "ZONE_DMA present {DMA_PRESENT_PAGES} / managed {DMA_MANAGED_PAGES} pages: assumed, \
             typical x86-64 (the real 6.18 host fixture)"
        ),
        format!("{cpus_on_node} CPUs per node ({cpus} CPUs over {nodes} nodes, assumed even)"),
    ];
    Ok(ZoneLayout {
        zones,
        cpus_per_node: vec![cpus_on_node; nodes as usize],
        online_cpus,
        notes,
    })
}
