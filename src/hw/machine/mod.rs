//! Machine descriptions: topology, memory, caches, latencies and clock, each value with its
//! provenance (`Sourced`).
//!
//! Machine files live in `models/` (TOML, one per machine) and are compiled into the binary; a path
//! to a TOML file of the same schema can be used wherever a built-in name is accepted.
//!
//! Units are in the field names: `_mib`, `_kib`, `_bytes`, `_ns`, `_ghz`.
//!
//! [`Machine::validate`] rejects machines that cannot exist (an LLC smaller than the L2, zero
//! cores, a negative or NaN latency, latencies out of order, a source string without a known
//! kind, ...) with `Error::Invalid` naming the file and the dotted field. Helpers such as
//! [`Machine::cpus`], [`Machine::cpus_per_node`], [`Machine::l2_bytes`] and
//! [`Machine::llc_bytes_per_domain`] give the counts the kernel formulas and cost models need.
//!
//! ```
//! use pcpmodel::Machine;
//! let m = Machine::builtin("icelake-server").unwrap();
//! assert_eq!(m.cpus(), 128);
//! assert_eq!(m.cpus_per_node(), 64);
//! assert_eq!(m.l2_pages(), 320);           // 1.25 MiB L2 = 320 pages (seed 004)
//! assert_eq!(m.llc_pages_per_domain(), 12288); // 48 MiB LLC = 12288 pages
//! ```

mod counts;
mod load;
mod schema;
mod validate;

pub use load::{field_line, BuiltinMachine, BUILTIN};
pub(crate) use load::{locate_invalid, toml_error};
pub use schema::{
    CacheLevel, Clock, Cpu, Latencies, Machine, Memory, Policy, ReuseCosts, Sharing, Topology,
};

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;
