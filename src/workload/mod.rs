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
pub mod sweep;

pub use fit::WorkloadFit;
pub use kind::{Kind, Knobs, Mechanism, Predicted, ReuseModel};
pub use registry::{resolve, Registry, Workload, RUN_SECONDS, RUN_START_PAGES};
pub use spec::WorkloadSpec;

pub use crate::model::zonelock::mmap_fill::{AllocFreeRate, MmapFill};
pub use crate::model::zones::{zone_shares, NodeSpan, ZoneShare};

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;
