//! The kernel's own PCP and watermark formulas, by version range.
//!
//! Every function here is a pure integer function named after the kernel function it mirrors,
//! with the version range and a citation of mm/page_alloc.c in its documentation. The map of
//! formulas by version is `shared/design/kernel-pcp.md`; the ranges are in [`version`].
//!
//! - [`version`]: [`KernelVersion`] and [`Era`] (<= 5.13, 5.14 - 6.6, 6.7 - 6.18, >= 6.19).
//! - [`watermarks`]: `min_free_kbytes` (sqrt rule, khugepaged raise) and
//!   `__setup_per_zone_wmarks()`.
//! - [`pageset`]: `zone_batchsize()`, `zone_highsize()`, `pcp->high` / `high_min` / `high_max`.
//! - [`ops`]: [`PcpState`], one pageset stepped allocation by allocation, free by free.
//! - [`layout`]: a machine's zones and managed pages.
//! - [`config`]: [`configure`], all of the above for a machine.
//! - [`zoneinfo`]: a `/proc/zoneinfo` parser and a check of its numbers against the formulas.
//! - [`changes`]: the PCP-relevant mainline commits by version, what each changes, and which
//!   the crate implements.
//! - [`features`]: the features a host shows (zoneinfo fields, vm sysctls, kernel config,
//!   version), read from a root directory.
//!
//! # Example
//! ```
//! use pcpmodel::kernel::{pageset, KernelVersion};
//! let v = KernelVersion::parse_release("6.18.44-generic").unwrap();
//! assert_eq!(pageset::pageset_batch(196_608, v), 63);
//! ```

pub mod changes;
pub mod config;
pub mod features;
pub mod layout;
pub mod memcg;
pub mod ops;
pub mod pageset;
pub mod skb;
pub mod version;
pub mod watermarks;
pub mod zoneinfo;

pub use changes::{Change, NotModelled};
pub use config::{configure, configure_zones, KernelConfig, KernelOptions, ZoneConfig};
pub use features::{detect_features, FeatureSet};
pub use layout::{zone_layout, ZoneKind, ZoneLayout, ZoneSpec};
pub use ops::{AllocStep, DecayStep, FreeStep, PcpFlags, PcpState, ZoneFlags};
pub use pageset::{PcpHigh, PcpLimits};
pub use version::{Era, KernelVersion};
pub use watermarks::{MinFreeDecision, MinFreeRule, ThpMode, Watermarks};
pub use zoneinfo::{
    check_zoneinfo, parse_zoneinfo, CheckOptions, CpusPerNode, ZoneInfo, ZoneinfoCheck,
};
