//! Cost models. Each file is one component with typed inputs and typed outputs; none reads files
//! or command-line flags.
//!
//! - [`lock`]: the zone->lock queue (finite-source FIFO spinlock): mean wait, utilisation,
//!   throughput, and the full distribution of time spent in one lock request.

pub mod lock;
