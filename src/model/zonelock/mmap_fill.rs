//! Thread 000's loop as the zone->lock model takes it ([`MmapFill`]): `P` processes each `mmap`
//! N bytes, write every page, `munmap`, and repeat. Every page is allocated (order 0) on the
//! fault path and freed at `munmap`, so one iteration of one process is an *allocation phase* of
//! `pages_per_iteration` order-0 allocations followed by a *free phase* of as many frees. And
//! [`AllocFreeRate`], the generic rate description later models reuse. The workloads re-export
//! both.
//!
//! # Assumptions
//! - Thread 000's Python loop (`mm = mmap.mmap(-1, size); mm[:] = b'\xff' * size; mm.close()`)
//!   allocates *two* buffers per iteration: the temporary `bytes` object (private anonymous
//!   memory, `malloc` -> `mmap`) and the shared mapping (`mmap(-1, ...)` is `MAP_SHARED`, i.e.
//!   shmem); both are faulted in order-0 pages (shmem THP is off by default) and freed when the
//!   temporary is dropped and the mapping closed. [`MmapFill::thread_000`] therefore uses
//!   `buffers_per_iteration = 2`. The count only sets how often the per-CPU batch state restarts
//!   its ramp (once per phase), which moves the prediction by well under 1 %.
//!
//! # References
//! Seed 000 (Yafang Shao, 2024-07): the script and "Run this script 10 times in parallel".

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::layout::PAGE_BYTES;
use crate::model::zones::NodeSpan;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_000_pages() {
        let w = MmapFill::thread_000(NodeSpan::One);
        assert_eq!(w.pages_per_iteration(), 2 * 1_572_864);
    }
}
