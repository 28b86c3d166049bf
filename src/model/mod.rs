//! Cost models, one component per file. Each takes typed physical inputs and returns an estimate
//! with its terms; none reads files or command-line flags.
//!
//! - [`cache`]: where a reused line is found (private cache, LLC, DRAM) and what it costs.
//! - [`fastpath`]: the PCP fast path's cycles carried across kernel versions (the 6.0 pcp
//!   spinlock), for work measured on one kernel and run on another.
//! - [`pcp`]: the PCP lists' drain/refill discipline and the reuse distance it gives a page.
//! - [`freehigh`]: the free_high trigger by kernel version (free_factor, free_count >= batch,
//!   batch + high_min / 2): how often runs of high-order frees drain the list early, and how much.
//! - [`netperf`]: thread 004's producer/consumer throughput as a function of pcp->high.
//! - [`zonelock`]: thread 000's mmap/fill/munmap loop on zone->lock: pages per hold, hold times,
//!   rmqueue_bulk() latency histogram; `zonelock::generic` for any allocation loop (kind
//!   `alloc-loop`).
//! - [`lock`]: the zone->lock queue (finite-source FIFO spinlock): mean wait, utilisation,
//!   throughput, and the full distribution of time spent in one lock request.
//! - [`lines`]: contended cache lines: transfers between cores, shared by SMT siblings, and the
//!   approximate MVA of a closed network of such lines.
//! - [`memcg`]: memcg charge batching (thread 001): the per-CPU charge stock and the contended
//!   page_counter lines of the cgroup hierarchy ([`lines`]); netperf throughput.
//! - [`vmstat`]: NUMA event counters on the allocation path (thread 002): per-CPU increments,
//!   folds into shared counters, SMT sharing; page_bench cycles per page with vm.numa_stat on/off.
//! - [`numa_fold`]: the fold of per-CPU NUMA counter diffs into the shared zone and global
//!   counter lines: events between folds by kernel, lines and writers, queueing ([`lines`]).
//! - [`pairqueue`]: zone->lock queueing between producer-consumer pairs sharing a zone (the
//!   slowdown over a lone pair).
//! - [`highorder`]: high-order pages on PCP lists (thread 003): zone->lock traffic of 64 KiB
//!   folios with and without order 4 on the lists (the kernel's PCP state machine stepped), and
//!   the contention it causes.
//! - [`autotune`]: PCP high auto-tuning (6.7) stepped in time per workload (process exits,
//!   writer/reader pairs, vmstat-tick decay) and the cumulative states of Huang Ying's series.
//! - [`stream`]: a recorded stream of allocations and frees stepped through the kernel's PCP
//!   rules, one pageset per CPU and zone (`pcpmodel replay`).
//! - [`zones`]: which NUMA nodes a workload's tasks run on and how they divide among the nodes'
//!   zones.
//! - [`perflock`]: what `perf lock contention` counts on a queued spinlock and what its BPF
//!   handlers add to the waits and holds it reports (thread 003).

pub mod autotune;
pub mod buddy;
pub mod cache;
pub mod fastpath;
pub mod fill;
pub mod freehigh;
pub mod highorder;
pub mod hold;
pub mod lines;
pub mod lock;
pub mod lrulock;
pub mod memcg;
pub mod netperf;
pub mod numa_fold;
pub mod pairqueue;
pub mod pcp;
pub mod perflock;
pub mod reader_burst;
pub mod stream;
pub mod vmstat;
pub mod zonelock;
pub mod zones;
