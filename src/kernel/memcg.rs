//! Memory-cgroup constants of the kernel by version.
//!
//! `MEMCG_CHARGE_BATCH` (include/linux/memcontrol.h): the pages a CPU's charge stock takes from
//! the page_counter hierarchy at a time. 32 until 6.0; 64 from 6.1 (1813e51eece0, "memcg:
//! increase MEMCG_CHARGE_BATCH to 64", the patch of thread 001).

use super::version::KernelVersion;

/// The first kernel with `MEMCG_CHARGE_BATCH` 64.
pub const CHARGE_BATCH_64_VERSION: KernelVersion = KernelVersion::new(6, 1);

/// `MEMCG_CHARGE_BATCH` of kernel `v`, pages.
pub fn charge_batch(v: KernelVersion) -> u32 {
    if v >= CHARGE_BATCH_64_VERSION {
        64
    } else {
        32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constant doubled once, in 6.1; thread 001 measured 6.0-rc1 at 32 (its base) and 64.
    #[test]
    fn charge_batch_by_version() {
        assert_eq!(charge_batch(KernelVersion::new(6, 0)), 32);
        assert_eq!(charge_batch(KernelVersion::new(6, 1)), 64);
        assert_eq!(charge_batch(KernelVersion::new(6, 18)), 64);
    }
}
