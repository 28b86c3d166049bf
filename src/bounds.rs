//! The valid range of every number a user can give, in one place, each with its physical
//! reason.
//!
//! Machine files ([`crate::hw::machine::Machine::validate`]), fit CSVs (the column ranges of each
//! kind's own fit, [`crate::workload::Kind::native_columns`]) and the command-line flags check their values against these ranges, so
//! that an impossible value is an error naming the file, line and field (or the flag) instead of
//! a hang, an abort on a huge allocation, or a confident answer about a machine that cannot
//! exist. The ranges are generous: each admits every shipping machine and kernel with room to
//! spare, and refuses only what cannot be (or cannot be computed in bounded work).
//!
//! | quantity | range | why |
//! |---|---|---|
//! | sockets | 1..=64 | the largest shared-memory machines ship 32 sockets (HPE Superdome Flex) |
//! | cores per socket | 1..=1024 | the largest shipping CPUs have 192-288 cores |
//! | threads per core | 1..=8 | SMT8 (IBM POWER) is the most any CPU has |
//! | NUMA nodes | 1..=1024 | the kernel's MAX_NUMNODES is 1 << NODES_SHIFT, NODES_SHIFT <= 10 |
//! | LLC domains per socket | 1..=64 | AMD Zen parts have at most 16 CCDs per socket |
//! | CPUs in total | 1..=8192 | CONFIG_NR_CPUS is at most 8192 on x86-64 (MAXSMP) |
//! | memory per node | 1 MiB..=64 TiB | 12 channels x 2 DIMMs x 256 GiB = 6 TiB per socket today |
//! | memory in total | ..=4 PiB | x86-64 5-level paging addresses 52 bits (4 PiB) |
//! | sizeof(struct page) | 32..=256 bytes | 64 bytes on x86-64; debug options add at most a few words |
//! | cache instance | 1 KiB..=2 GiB | the largest caches shipped hold 96 MiB per CCD, 1.1 GiB per socket |
//! | cache ways | 1..=64 | shipping caches have 2 to 20 ways; 64 leaves room |
//! | cache line | 16..=1024 bytes, a power of two | shipped lines are 32, 64, 128 or 256 bytes |
//! | latencies | 0.1 ns..=10 us | an L1 hit is ~1 ns; remote DRAM over a CXL switch ~1 us |
//! | clocks | 0.1..=10 GHz | no CPU ships above 6.2 GHz |
//! | pcp->high | 0..=2^31-1 pages | `int high` in struct per_cpu_pages |
//! | pcp->batch | 1..=2^31-1 pages | `int batch` in struct per_cpu_pages |
//! | MEMCG_CHARGE_BATCH | 1..=65536 pages | 64 in the kernel; 65536 leaves 256 MiB charged per CPU |
//! | cgroup depth | 0..=64 | real hierarchies are below 10 levels deep |
//! | processes, threads | 1..=8192 | one per CPU, at most CONFIG_NR_CPUS |
//! | memcgs | 1..=8192 | at least one task each |
//! | probabilities | 0..=1 | |
//! | fit starts | 1..=256 | each start is a full Levenberg-Marquardt run |
//! | interval samples | 1..=10000 | the 2.5/97.5 percentiles settle long before |
//! | vm.min_free_kbytes | 0..=2^31-1 kB | an `int` sysctl; also below the machine's memory |
//! | measured counts and rates | 0..=1e15 | above any rate a benchmark can count |
//! | measured times | 0..=1e13 ns | almost three hours for a single call of an allocator path |
//!
//! Work is bounded by the input size as well: the `pcp->high` sweep steps geometrically over
//! ranges longer than [`crate::fit::optimize::EXHAUSTIVE_MAX`] values (see [`crate::fit::optimize`]).

use crate::error::{Error, Result};

/// A closed range of valid values with its unit and the physical reason for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// What the value is, in words (`cache ways`).
    pub what: &'static str,
    /// Smallest valid value.
    pub lo: f64,
    /// Largest valid value.
    pub hi: f64,
    /// Unit (`ns`, `pages`, empty for counts).
    pub unit: &'static str,
    /// Whether the value must be a whole number.
    pub integer: bool,
    /// The physical reason for the range, in words.
    pub why: &'static str,
}

impl Range {
    pub const fn int(
        what: &'static str,
        lo: f64,
        hi: f64,
        unit: &'static str,
        why: &'static str,
    ) -> Range {
        Range {
            what,
            lo,
            hi,
            unit,
            integer: true,
            why,
        }
    }

    pub const fn real(
        what: &'static str,
        lo: f64,
        hi: f64,
        unit: &'static str,
        why: &'static str,
    ) -> Range {
        Range {
            what,
            lo,
            hi,
            unit,
            integer: false,
            why,
        }
    }

    /// Whether `v` is in the range (finite, whole if it must be).
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite() && v >= self.lo && v <= self.hi && (!self.integer || v.fract() == 0.0)
    }

    /// `None` when `v` is valid, else a message that says what is wrong and why the range is
    /// what it is.
    pub fn problem(&self, v: f64) -> Option<String> {
        if self.contains(v) {
            return None;
        }
        let unit = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        };
        let shown = show(v);
        Some(if !v.is_finite() {
            format!(
                "{shown} is not a finite number ({}: {})",
                self.span(),
                self.why
            )
        } else if self.integer && v.fract() != 0.0 && v >= self.lo && v <= self.hi {
            format!(
                "{shown}{unit} is not a whole number ({} counts whole units)",
                self.what
            )
        } else {
            format!("{shown}{unit} is outside {}: {}", self.span(), self.why)
        })
    }

    /// `lo..=hi unit`.
    pub fn span(&self) -> String {
        let unit = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        };
        format!("{}..={}{unit}", show(self.lo), show(self.hi))
    }

    /// Checks `v`; the error names `file` and `field` ([`Error::Invalid`]).
    pub fn check(&self, file: &str, field: &str, v: f64) -> Result<()> {
        match self.problem(v) {
            None => Ok(()),
            Some(m) => Err(Error::invalid(file, field, m)),
        }
    }

    /// Checks a command-line flag's value; the message names the flag.
    pub fn check_flag(&self, flag: &str, v: f64) -> std::result::Result<(), String> {
        match self.problem(v) {
            None => Ok(()),
            Some(m) => Err(format!("{flag} {}: {m}", show(v))),
        }
    }
}

/// A number as people write it: integers without a fraction, huge and tiny values in
/// exponent form.
pub fn show(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.is_finite() && (v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-3)) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

// ----- machines --------------------------------------------------------------------------------

/// Populated sockets.
pub const SOCKETS: Range = Range::int(
    "topology.sockets",
    1.0,
    64.0,
    "",
    "the largest shared-memory machines ship 32 sockets (HPE Superdome Flex)",
);
/// Physical cores per socket.
pub const CORES_PER_SOCKET: Range = Range::int(
    "topology.cores_per_socket",
    1.0,
    1024.0,
    "",
    "the largest shipping CPUs have 192 to 288 cores",
);
/// Hardware threads per core.
pub const THREADS_PER_CORE: Range = Range::int(
    "topology.threads_per_core",
    1.0,
    8.0,
    "",
    "SMT8 (IBM POWER) is the most any CPU has",
);
/// NUMA nodes.
pub const NUMA_NODES: Range = Range::int(
    "topology.numa_nodes",
    1.0,
    1024.0,
    "",
    "the kernel's MAX_NUMNODES is 1 << NODES_SHIFT and NODES_SHIFT is at most 10",
);
/// LLC domains per socket.
pub const LLC_DOMAINS_PER_SOCKET: Range = Range::int(
    "topology.llc_domains_per_socket",
    1.0,
    64.0,
    "",
    "AMD Zen parts have at most 16 CCDs per socket",
);
/// Logical CPUs in the machine.
pub const CPUS: Range = Range::int(
    "the number of CPUs (sockets x cores x threads)",
    1.0,
    8192.0,
    "",
    "CONFIG_NR_CPUS is at most 8192 on x86-64 (MAXSMP)",
);
/// Installed memory of one NUMA node, MiB.
pub const NODE_MIB: Range = Range::int(
    "memory per NUMA node",
    1.0,
    67_108_864.0,
    "MiB",
    "64 TiB; the largest nodes shipped hold a few TiB (12 channels x 2 DIMMs x 256 GiB = 6 TiB)",
);
/// Installed memory of the whole machine, MiB.
pub const TOTAL_MIB: Range = Range::int(
    "memory in total",
    1.0,
    4_294_967_296.0,
    "MiB",
    "4 PiB, what x86-64 5-level paging can address (52 physical address bits)",
);
/// `sizeof(struct page)`, bytes.
pub const STRUCT_PAGE_BYTES: Range = Range::int(
    "memory.struct_page_bytes",
    32.0,
    256.0,
    "bytes",
    "sizeof(struct page) is 64 bytes on x86-64; debug options add at most a few words",
);
/// Capacity of one cache instance, KiB.
pub const CACHE_KIB: Range = Range::int(
    "a cache instance",
    1.0,
    2_097_152.0,
    "KiB",
    "2 GiB; the largest caches shipped hold 96 MiB per CCD (AMD 3D V-Cache)",
);
/// Associativity.
pub const CACHE_WAYS: Range = Range::int(
    "cache ways",
    1.0,
    64.0,
    "",
    "shipping caches have 2 to 20 ways",
);
/// Cache line, bytes.
pub const CACHE_LINE_BYTES: Range = Range::int(
    "a cache line",
    16.0,
    1024.0,
    "bytes",
    "shipped cache lines are 32, 64, 128 or 256 bytes",
);
/// Any latency in a machine file, ns.
pub const LATENCY_NS: Range = Range::real(
    "a latency",
    0.1,
    10_000.0,
    "ns",
    "an L1 hit takes about 1 ns and remote DRAM behind a CXL switch about 1 us",
);
/// Extra time to write a reused 4 KiB page, by the level holding its lines, ns per page.
pub const REUSE_NS_PER_PAGE: Range = Range::real(
    "a page's reuse cost",
    0.0,
    100_000.0,
    "ns per page",
    "64 lines from remote DRAM one at a time take about 10 us; a store stream overlaps them",
);
/// A measured run's length (`--run-seconds`), s.
pub const RUN_SECONDS: Range = Range::real(
    "a run",
    1e-3,
    1e9,
    "s",
    "a run shorter than a millisecond moves a handful of pages; 1e9 s is a steady state",
);
/// Pages on the lists when a run starts (`--run-start-pages`).
pub const RUN_START_PAGES: Range = Range::real(
    "a run's starting lists",
    0.0,
    1e9,
    "pages",
    "the lists of one pair hold at most a zone's pages",
);
/// What a hypervisor adds to the first touch of a guest page it dropped, ns per 4 KiB page.
pub const BACKING_NS_PER_PAGE: Range = Range::real(
    "a host's backing of a dropped guest page",
    0.0,
    1_000_000.0,
    "ns per page",
    "a host fault that allocates and zeroes a 4 KiB page takes about 1-20 us; 1 ms is a host swapping",
);
/// A host loop's work per 4 KiB page with every line local (`measure work`), ns per page.
pub const WORK_NS_PER_PAGE: Range = Range::real(
    "a loop's work per page",
    1.0,
    1_000_000.0,
    "ns per page",
    "copying a cached page takes about 100 ns on any current core; a millisecond per page is no longer a stream",
);
/// Clock frequency, GHz.
pub const CLOCK_GHZ: Range = Range::real("a clock", 0.1, 10.0, "GHz", "no CPU ships above 6.2 GHz");

// ----- kernel knobs ------------------------------------------------------------------------------

/// pcp->high, pages.
pub const PCP_HIGH_PAGES: Range = Range::int(
    "pcp->high",
    0.0,
    2_147_483_647.0,
    "pages",
    "pcp->high is an int in struct per_cpu_pages",
);
/// MEMCG_CHARGE_BATCH, pages.
pub const MEMCG_CHARGE_BATCH: Range = Range::int(
    "MEMCG_CHARGE_BATCH",
    1.0,
    65_536.0,
    "pages",
    "the kernel uses 64; 65536 pages would leave 256 MiB charged but unused per CPU",
);
/// cgroup hierarchy depth below the root.
pub const CGROUP_DEPTH: Range = Range::int(
    "the cgroup depth",
    1.0,
    64.0,
    "levels",
    "a task's memcg is at least one level below the root (the root memcg is not charged); real hierarchies are less than 10 levels deep",
);
/// Memory cgroups sharing the CPUs of a workload.
pub const MEMCGS: Range = Range::int(
    "the number of memcgs",
    1.0,
    8192.0,
    "",
    "each memcg holds at least one task, and there are at most CONFIG_NR_CPUS tasks here",
);
/// A probability.
pub const PROBABILITY: Range = Range::real("a probability", 0.0, 1.0, "", "it is a probability");
/// Processes or threads of a benchmark (one per CPU).
pub const TASKS: Range = Range::int(
    "the number of tasks",
    1.0,
    8192.0,
    "",
    "one per CPU, and CONFIG_NR_CPUS is at most 8192",
);
/// vm.min_free_kbytes.
pub const MIN_FREE_KBYTES: Range = Range::int(
    "vm.min_free_kbytes",
    0.0,
    2_147_483_647.0,
    "kB",
    "the sysctl is an int",
);
/// vm.watermark_scale_factor (the kernel's proc handler allows 1..=3000).
pub const WATERMARK_SCALE_FACTOR: Range = Range::int(
    "vm.watermark_scale_factor",
    1.0,
    3000.0,
    "",
    "the kernel's sysctl handler accepts 1..=3000 (30 % of memory)",
);
/// vm.percpu_pagelist_high_fraction (and the older vm.percpu_pagelist_fraction).
pub const PAGELIST_FRACTION: Range = Range::int(
    "the pagelist fraction",
    0.0,
    2_147_483_647.0,
    "",
    "the sysctl is an int: 0, or 8 and above",
);
/// `net.core.skb_defer_max`: an int sysctl with `extra1 = SYSCTL_ZERO`
/// (net/core/sysctl_net_core.c).
pub const SKB_DEFER_MAX: Range = Range::int(
    "net.core.skb_defer_max",
    0.0,
    2_147_483_647.0,
    "skbs",
    "the sysctl takes 0..INT_MAX",
);

/// `CONFIG_PCP_BATCH_SCALE_MAX`.
pub const PCP_BATCH_SCALE_MAX: Range = Range::int(
    "CONFIG_PCP_BATCH_SCALE_MAX",
    0.0,
    6.0,
    "",
    "Kconfig range 0..=6",
);

// ----- work ---------------------------------------------------------------------------------------

/// The largest buddy order of any modelled kernel: MAX_ORDER - 1 = 10 before 6.4, MAX_PAGE_ORDER =
/// 10 after (include/linux/mmzone.h, x86-64 and arm64 with 4 KiB pages).
pub const MAX_ORDER_ANY: u8 = 10;

/// An allocation order (`--order`, a workload's `op.order`).
pub const ORDER: Range = Range::int(
    "an allocation order",
    0.0,
    10.0,
    "",
    "the buddy allocator's orders run 0..=MAX_PAGE_ORDER = 10 with 4 KiB pages",
);

/// pcp->batch set by hand (`--batch` on workloads that take it), pages.
pub const PCP_BATCH_PAGES: Range = Range::int(
    "pcp->batch",
    1.0,
    65536.0,
    "pages",
    "zone_batchsize() caps batch at rounddown_pow_of_two(1 MiB / PAGE_SIZE) - 1 = 255 by itself; a hand-set batch beyond 65536 pages (256 MiB) could not fit a per-CPU list",
);

/// Bytes a page's use moves (`op.touch_bytes_per_page`, and the generic fit's bound on any
/// `*bytes*` quantity): 0..=1 MiB.
pub const TOUCH_BYTES_PER_PAGE: Range = Range::real(
    "bytes touched per page",
    0.0,
    1_048_576.0,
    "bytes",
    "256 passes over a 4 KiB page; more is a copy loop, not a page workload",
);

/// The free_high trigger threshold set by hand (`--free-high-threshold`), pages.
pub const FREE_HIGH_THRESHOLD: Range = Range::int(
    "free_high threshold",
    0.0,
    1048576.0,
    "pages",
    "free_count is compared against batch (6.7) or batch + high_min / 2 (6.15 on); more than 4 GiB of pages could not accumulate on one list",
);

/// Starts of the fit's multi-start.
pub const FIT_STARTS: Range = Range::int(
    "--starts",
    1.0,
    256.0,
    "",
    "each start is a full Levenberg-Marquardt run; 256 strata of a Latin hypercube cover any \
     parameter range this crate fits",
);
/// Parameter samples for an interval.
pub const SAMPLES: Range = Range::int(
    "--samples",
    1.0,
    10_000.0,
    "",
    "each sample re-runs the model; the 2.5 and 97.5 percentiles settle long before 10000",
);
/// A latency target, µs (`scale-max --p99-us`).
pub const LATENCY_TARGET_US: Range = Range::real(
    "a latency target",
    1e-3,
    1e9,
    "us",
    "from a nanosecond to a quarter of an hour for one rmqueue_bulk() call",
);
/// Measurement interval, s.
pub const DURATION_S: Range = Range::real(
    "the measurement interval",
    1e-3,
    1e7,
    "s",
    "from a millisecond to about four months",
);

// ----- measurements -------------------------------------------------------------------------------

/// A measured count or rate (calls, transactions, a benchmark score, Mbit/s).
pub const MEASURED_RATE: Range = Range::real(
    "a measured count or rate",
    0.0,
    1e15,
    "",
    "no benchmark counts more than 1e15 of anything per run",
);
/// A measured time of one operation, ns (also the edges of a latency histogram's buckets).
pub const MEASURED_NS: Range = Range::real(
    "a measured time",
    0.0,
    1e13,
    "ns",
    "1e13 ns is almost three hours for one call of an allocator path",
);
/// A 0/1 switch in a data file (`numa_stat`, `high_order_pcp`).
pub const SWITCH: Range = Range::int("a switch", 0.0, 1.0, "", "it is off (0) or on (1)");
/// Cycles per page of an allocator benchmark.
pub const MEASURED_CYCLES: Range = Range::real(
    "cycles per page",
    0.0,
    1e9,
    "cycles",
    "a page alloc+free costs about 100 to 10^4 cycles; 1e9 is a third of a second per page",
);
/// A measured network throughput, Mbit/s.
pub const THROUGHPUT_MBPS: Range = Range::real(
    "a throughput",
    0.0,
    1e9,
    "Mbit/s",
    "1e9 Mbit/s is 1 Pbit/s, a hundred times the memory bandwidth of the largest servers",
);
/// A count of events in a histogram bucket (funclatency and bpftrace keep u64 counters).
pub const HIST_COUNT: Range = Range::int(
    "a histogram count",
    0.0,
    1.8e19,
    "",
    "a count of calls: a whole number; the tools keep it in a u64",
);
/// A latency histogram bucket's bound, ns (whole nanoseconds, as funclatency prints them).
pub const BUCKET_NS: Range = Range::int(
    "a bucket bound",
    0.0,
    1e13,
    "ns",
    "funclatency's log2 buckets are whole ns; 1e13 ns is almost three hours for one call",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_nan_infinity_fractions_and_the_outside() {
        assert!(CACHE_WAYS.contains(16.0));
        assert!(!CACHE_WAYS.contains(4_294_967_296.0));
        assert!(!CACHE_WAYS.contains(2.5));
        assert!(!LATENCY_NS.contains(f64::NAN));
        assert!(!LATENCY_NS.contains(1e308));
        assert!(!LATENCY_NS.contains(-1.0));
        let m = CACHE_WAYS.problem(4_294_967_296.0).unwrap();
        assert!(m.contains("4294967296") && m.contains("1..=64"), "{m}");
    }
}
