//! Cost models, one component per file. Each takes typed physical inputs and returns an estimate
//! with its terms; none reads files or command-line flags.
//!
//! - [`cache`]: where a reused line is found (private cache, LLC, DRAM) and what it costs.
//! - [`pcp`]: the PCP lists' drain/refill discipline and the reuse distance it gives a page.
//! - [`netperf`]: thread 004's producer/consumer throughput as a function of pcp->high.
//! - [`zonelock`]: thread 000's mmap/fill/munmap loop on zone->lock: pages per hold, hold times,
//!   rmqueue_bulk() latency histogram.
//! - [`lock`]: the zone->lock queue (finite-source FIFO spinlock): mean wait, utilisation,
//!   throughput, and the full distribution of time spent in one lock request.

pub mod cache;
pub mod highorder;
pub mod lock;
pub mod memcg;
pub mod netperf;
pub mod pcp;
pub mod vmstat;
pub mod zonelock;
