//! The kernel as a timeline: the mainline commits that change PCP behaviour, as data.
//!
//! Each [`Change`] names the commit (id, subject, first mainline version), what it changes in
//! this crate's terms, where the id and version come from, and which parts of the crate
//! implement it. [`CHANGES`] covers 4.14 to the newest code read (a linux-mm tree after
//! 6.18-rc1). [`changes_between`] lists what differs between two kernels; [`applying`] what a
//! kernel has; [`not_modelled`] what a prediction for a workload on a kernel leaves out.
//!
//! # Evidence
//! Ids are 12 hex digits of the mainline commit. An id is **verified** when it was read in a
//! mainline shortlog or `git log` listing, a `Fixes:` tag or a later commit message that cites
//! it with its subject (the `id_source` says which). Ids seen only in linux-next / mm-tree
//! listings (which rebase) are not given: `commit` is `None`. A version is `verified` only when
//! a dated source places the commit in that release; otherwise `version_note` says how it was
//! inferred.
//!
//! # What "not modelled" means
//! Every workload model is calibrated on the kernel of its thread (its *reference* kernel, e.g.
//! 5.18 for netperf-udp). A prediction for another kernel is complete only if every change
//! between the two that touches the workload is implemented. [`not_modelled`] lists the
//! others: present on the requested kernel and absent on the reference one, or the reverse.

use serde::Serialize;

use crate::kernel::version::KernelVersion;

/// What part of the allocator a change touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    /// `pcp->batch` (`zone_batchsize()`).
    Batch,
    /// `pcp->high` and its bounds.
    High,
    /// The free path (`free_unref_page_commit()`, `free_pcppages_bulk()`).
    FreePath,
    /// The allocation path (`rmqueue_pcplist()`, `rmqueue_bulk()`).
    AllocPath,
    /// Locking of the PCP lists.
    Locking,
    /// Per-CPU statistics counters (`zone_statistics()`, vmstat).
    Stats,
    /// Which CPU frees a page another CPU allocated (the network stack's deferred skb
    /// freeing, [`crate::kernel::skb::free_site`]).
    FreeSite,
    /// memcg charging.
    Memcg,
    /// Watermarks and `min_free_kbytes`.
    Watermarks,
    /// What `/proc/zoneinfo` prints.
    Zoneinfo,
}

impl Area {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Area::Batch => "batch",
            Area::High => "high",
            Area::FreePath => "free_path",
            Area::AllocPath => "alloc_path",
            Area::Locking => "locking",
            Area::Stats => "stats",
            Area::FreeSite => "free_site",
            Area::Memcg => "memcg",
            Area::Watermarks => "watermarks",
            Area::Zoneinfo => "zoneinfo",
        }
    }
}

/// A feature a live host can show, so that a backport or revert is seen whatever the version
/// says (see [`crate::kernel::features`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// `/proc/sys/vm/numa_stat` exists.
    NumaStatSysctl,
    /// `/proc/sys/vm/percpu_pagelist_high_fraction` exists (and `percpu_pagelist_fraction`
    /// does not).
    PercpuPagelistHighFraction,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` is in the kernel config.
    PcpBatchScaleMax,
    /// `/proc/zoneinfo` prints `high_min` / `high_max`.
    ZoneinfoHighMinMax,
    /// `/proc/zoneinfo` prints a `boost` line.
    WatermarkBoost,
    /// `/proc/zoneinfo` prints a `promo` line.
    PromoWatermark,
}

impl Feature {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::NumaStatSysctl => "numa_stat_sysctl",
            Feature::PercpuPagelistHighFraction => "percpu_pagelist_high_fraction",
            Feature::PcpBatchScaleMax => "pcp_batch_scale_max",
            Feature::ZoneinfoHighMinMax => "zoneinfo_high_min_max",
            Feature::WatermarkBoost => "watermark_boost",
            Feature::PromoWatermark => "promo_watermark",
        }
    }
}

/// Workload models of `predict`, by their CLI names, plus `kernel` for the configuration
/// formulas (`kernel`, `zoneinfo`), `ops` for the page-by-page [`crate::kernel::PcpState`] and
/// `fastpath` for the fast path's cycles across versions ([`crate::model::fastpath`]).
pub const WORKLOADS: [&str; 5] = [
    "netperf-udp",
    "mmap-fill",
    "memcg-netperf",
    "page-bench",
    "page-fault1",
];

/// One PCP-relevant mainline commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Short stable name, e.g. `"double-batch"`.
    pub key: &'static str,
    /// Mainline commit id (12 hex digits), or None when no mainline id was verified.
    pub commit: Option<&'static str>,
    /// Where the id (or its absence) comes from.
    pub id_source: &'static str,
    /// Commit subject.
    pub subject: &'static str,
    /// First mainline release with the commit.
    pub version: KernelVersion,
    /// True when a dated source places the commit in `version`.
    pub version_verified: bool,
    /// How the version was established.
    pub version_note: &'static str,
    /// Area.
    pub area: Area,
    /// What changes, in this crate's terms.
    pub effect: &'static str,
    /// Where the crate implements it (`kernel`, `ops`, or workload names), empty if nowhere.
    pub implemented_in: &'static [&'static str],
    /// Workloads whose prediction the change touches.
    pub affects: &'static [&'static str],
    /// How it is implemented, or why not.
    pub model_note: &'static str,
    /// A host feature that shows the change, when one exists.
    pub feature: Option<Feature>,
}

impl Change {
    /// True when `version` has the change (by mainline version).
    pub fn present_in(&self, version: KernelVersion) -> bool {
        version >= self.version
    }

    /// True when the crate implements it anywhere.
    pub fn implemented(&self) -> bool {
        !self.implemented_in.is_empty()
    }

    /// True when it touches `workload` and that workload's model does not implement it.
    pub fn not_modelled_for(&self, workload: &str) -> bool {
        self.affects.contains(&workload) && !self.implemented_in.contains(&workload)
    }

    /// `"implemented"`, `"partly"` (implemented somewhere, not in every affected workload) or
    /// `"not modelled"`.
    pub fn status(&self) -> &'static str {
        if self.implemented_in.is_empty() {
            "not modelled"
        } else if self
            .affects
            .iter()
            .any(|w| !self.implemented_in.contains(w))
        {
            "partly"
        } else {
            "implemented"
        }
    }

    /// The commit id, or `"(unverified)"`.
    pub fn commit_text(&self) -> &'static str {
        self.commit.unwrap_or("(unverified)")
    }
}

const fn v(major: u32, minor: u32) -> KernelVersion {
    KernelVersion::new(major, minor)
}

const SHORTLOG_514: &str = "full id in a stored mainline `git log` listing of the 5.14 merge \
                            window (search corpus, file id 67051115469)";

/// The changes, oldest first.
pub const CHANGES: &[Change] = &[
    Change {
        key: "numa-stat-call-sites",
        commit: Some("3a321d2a3dde"),
        id_source: "Fixes: tag of Andrey Ryabinin's NUMA_INTERLEAVE_HIT fix (linux-mm, 2017); \
                    drgn contrib script comment",
        subject: "mm: change the call sites of numa statistics items",
        version: v(4, 14),
        version_verified: true,
        version_note: "drgn source comment: \"(in v4.14)\"; in mhocko's mmotm since-4.13 branch \
                       shortlog (12 Sep 2017) with the threshold patch",
        area: Area::Stats,
        effect: "NUMA hit/miss/local/other become separate per-CPU counters (vm_numa_stat) \
                 instead of zone vmstat items",
        implemented_in: &[],
        affects: &[],
        model_note: "no cost change by itself (it prepares the threshold change); page-bench \
                     counts NUMA events per allocation on every version",
        feature: None,
    },
    Change {
        key: "numa-stat-threshold",
        commit: Some("1d90ca897cb0"),
        id_source: "cited by Kemi Wang (Dec 2017) and a Fixes: tag of Janne Huttunen's patch",
        subject: "mm: update NUMA counter threshold size",
        version: v(4, 14),
        version_verified: false,
        version_note: "same series and mmotm branch as 3a321d2a3dde (in v4.14); issue 12 \
                       and src/model/vmstat.rs say 4.15",
        area: Area::Stats,
        effect: "NUMA counters fold into the global counter every NUMA_STATS_THRESHOLD = \
                 65533 events instead of calculate_normal_threshold() (<= 125)",
        implemented_in: &["page-bench"],
        affects: &["page-bench"],
        model_note: "page-bench fold_threshold() switches at 4.15 (thread 002's kernel); a 4.14 \
                     prediction uses the old threshold, which this evidence says is one \
                     release late",
        feature: None,
    },
    Change {
        key: "numa-stat-sysctl",
        commit: Some("4518085e127d"),
        id_source: "Fixes: tag of Muchun Song's numa_stat sysctl fix; cited in linux-mm \
                    2018 (\"one can now avoid the overhead completely since 4518085e127d\")",
        subject: "mm, sysctl: make NUMA stats configurable",
        version: v(4, 15),
        version_verified: false,
        version_note: "v5 posted 18 Oct 2017 (thread 002), after 4.14-rc1: 4.15 merge window",
        area: Area::Stats,
        effect: "vm.numa_stat = 0 turns zone_statistics() off (static branch)",
        implemented_in: &["page-bench"],
        affects: &["page-bench"],
        model_note: "page-bench --numa-stat 0|1",
        feature: Some(Feature::NumaStatSysctl),
    },
    Change {
        key: "double-batch",
        commit: Some("d8a759b57035"),
        id_source: "cited with its subject by Liu Shixin's pcp_free patches (linux-mm, Aug \
                    2022) and Mel Gorman's 2018 reply; SUSE kernel changelog",
        subject: "mm, page_alloc: double zone's batchsize",
        version: v(4, 19),
        version_verified: false,
        version_note: "RFC 11 Jul 2018 (Aaron Lu), after 4.18-rc1: 4.19 merge window; issue \
                       12 says 4.19",
        area: Area::Batch,
        effect: "zone_batchsize() cap 512 KiB -> 1 MiB: batch 31 -> 63 (high 186 -> 378) for \
                 zones above ~1.4 GiB",
        implemented_in: &["kernel", "ops"],
        affects: &[],
        model_note: "pageset::zone_batchsize() caps at 128 pages before 4.19 (tests/\
                     kernel_changes.rs); the workload models take batch 63 from their threads",
        feature: None,
    },
    Change {
        key: "watermark-boost",
        commit: None,
        id_source: "not verified (Mel Gorman's external-fragmentation series, 5.0)",
        subject: "mm: reclaim small amounts of memory when an external fragmentation event \
                  occurs",
        version: v(5, 0),
        version_verified: false,
        version_note: "zoneinfo prints `boost` from this change; version from the series' \
                       merge window, not read from a tree",
        area: Area::Watermarks,
        effect: "watermark_boost added to every watermark; zoneinfo prints `boost`",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "zoneinfo check subtracts boost before comparing watermarks",
        feature: Some(Feature::WatermarkBoost),
    },
    Change {
        key: "min-free-kbytes-bound",
        commit: None,
        id_source: "not verified (Joel Savitz, \"mm/page_alloc: increase default \
                    min_free_kbytes bound\")",
        subject: "mm/page_alloc: increase default min_free_kbytes bound",
        version: v(5, 7),
        version_verified: false,
        version_note: "5.4 tree clamps at 65536, 5.10.228 at 262144; 5.7 is the patch's merge \
                       window",
        area: Area::Watermarks,
        effect: "computed min_free_kbytes clamp 65536 -> 262144 kB",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "KernelVersion::min_free_kbytes_upper_bound()",
        feature: None,
    },
    Change {
        key: "high-order-pcp",
        commit: Some("44042b449872"),
        id_source: SHORTLOG_514,
        subject: "mm/page_alloc: allow high-order pages to be stored on the per-cpu lists",
        version: v(5, 13),
        version_verified: false,
        version_note: "author date 28 Jun 2021 in a blame; issue 12 and the design notes say \
                       5.13 (5.14 shortlog listing also holds it)",
        area: Area::FreePath,
        effect: "orders 1-3 and the THP order are cached on PCP lists; before, every order > 0 \
                 allocation and free takes zone->lock (rmqueue_buddy / __free_one_page)",
        implemented_in: &["ops"],
        affects: &["netperf-udp", "page-fault1"],
        model_note: "PcpState keeps only order 0 before 5.13; the netperf-udp and page-fault1 \
                     models assume high-order PCP lists (their threads are 5.18 and 6.9)",
        feature: None,
    },
    Change {
        key: "local-lock",
        commit: Some("dbbee9d5cd83"),
        id_source: "Fixes: tags of the __alloc_pages_bulk fixes (2021); 5.14 listing",
        subject: "mm/page_alloc: convert per-cpu list protection to local_lock",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing",
        area: Area::Locking,
        effect: "PCP lists protected by local_lock (IRQs off on !PREEMPT_RT, as before)",
        implemented_in: &[],
        affects: &[],
        model_note: "no cost change on !PREEMPT_RT; not modelled",
        feature: None,
    },
    Change {
        key: "numa-basic-counters",
        commit: Some("f19298b9516c"),
        id_source: SHORTLOG_514,
        subject: "mm/vmstat: convert NUMA statistics to basic NUMA counters",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing",
        area: Area::Stats,
        effect: "NUMA events become raw per-CPU counters with no fold threshold, summed when \
                 read: no shared cache line on the allocation path",
        implemented_in: &["page-bench"],
        affects: &["page-bench"],
        model_note: "page-bench: numa_fold::FoldRule::Never from 5.14, no fold term; the \
                     per-event cost stays thread 002's fitted 4.15 value",
        feature: None,
    },
    Change {
        key: "high-from-low-wmark",
        commit: Some("74f44822097c"),
        id_source: "full id in stored mainline listings of the 5.14 merge window",
        subject: "mm/page_alloc: introduce vm.percpu_pagelist_high_fraction",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing, with \"disassociate the pcp->high \
                       from pcp->batch\" and \"calculate pcp->high based on zone sizes and \
                       active CPUs\" (Mel Gorman, May 2021)",
        area: Area::High,
        effect: "pcp->high = max(low_wmark / node CPUs, 4 * batch) instead of 6 * batch; \
                 vm.percpu_pagelist_fraction replaced by vm.percpu_pagelist_high_fraction",
        implemented_in: &["kernel", "ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "pageset::zone_highsize(); netperf-udp takes the kernel's default high",
        feature: Some(Feature::PercpuPagelistHighFraction),
    },
    Change {
        key: "free-factor",
        commit: Some("3b12e7e97938"),
        id_source: "full id in stored mainline listings of the 5.14 merge window",
        subject: "mm/page_alloc: scale the number of pages that are batch freed",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing",
        area: Area::FreePath,
        effect: "frees drain clamp(batch << free_factor, batch, high - batch) pages per \
                 zone->lock hold; free_factor grows per drain, halves per allocation",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "model::pcp drain size for 5.14-6.6",
        feature: None,
    },
    Change {
        key: "reclaim-active",
        commit: Some("c49c2c47dab6"),
        id_source: "full id in stored mainline listings of the 5.14 merge window",
        subject: "mm/page_alloc: limit the number of pages on PCP lists when reclaim is active",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing",
        area: Area::High,
        effect: "under ZONE_RECLAIM_ACTIVE the free cut-off is min(4 * batch, high)",
        implemented_in: &["ops"],
        affects: &[],
        model_note: "PcpState zone flag; the workload models assume no memory pressure",
        feature: None,
    },
    Change {
        key: "cpuless-split",
        commit: Some("203c06eef579"),
        id_source: SHORTLOG_514,
        subject: "mm/page_alloc: split pcp->high across all online CPUs for cpuless nodes",
        version: v(5, 14),
        version_verified: true,
        version_note: "in the 5.14 merge window listing",
        area: Area::High,
        effect: "zone_highsize() divides by all online CPUs when the node has none",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "pageset::zone_highsize()",
        feature: None,
    },
    Change {
        key: "free-high",
        commit: Some("f26b3fa04611"),
        id_source: "kernel test robot report \"[mm/page_alloc] f26b3fa046: \
                    netperf.Throughput_Mbps -18.0% regression\" (Apr 2022, thread 004 era)",
        subject: "mm/page_alloc: limit number of high-order pages on PCP during bulk free",
        version: v(5, 18),
        version_verified: false,
        version_note: "robot report of 20 Apr 2022 says \"on mainline\" (5.18-rc); design notes",
        area: Area::FreePath,
        effect: "free_high: a CPU that frees orders 1-3 without allocating (free_factor > 0) \
                 drains its whole PCP (high cut to 0)",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "PcpState decides when it fires; netperf-udp follows the 5.18-6.6 \
                     rule for runs of frees (crate::model::freehigh::trigger from the \
                     consumer's allocations per free); --free-high forces it on",
        feature: None,
    },
    Change {
        key: "promo-watermark",
        commit: Some("c574bbe91703"),
        id_source: "cited in src/kernel/version.rs (NUMA balancing memory tiering)",
        subject: "NUMA balancing: optimize page placement for memory tiering system",
        version: v(5, 18),
        version_verified: false,
        version_note: "WMARK_PROMO present in a 6.0/6.1-era tree; 5.18 from the series",
        area: Area::Watermarks,
        effect: "a fourth watermark, promo = high + (high - low)",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "watermarks::setup_per_zone_wmarks()",
        feature: Some(Feature::PromoWatermark),
    },
    Change {
        key: "tcp-defer-free",
        commit: Some("68822bdf76f1"),
        id_source: "Eric Dumazet's \"net: generalize skb freeing deferral to per-cpu lists\" \
                    (net-next, April 2022), cited by later skb_attempt_defer_free() patches",
        subject: "net: generalize skb freeing deferral to per-cpu lists",
        version: v(5, 19),
        version_verified: false,
        version_note: "net-next for the 5.19 merge window (April 2022), with the \
                       net.core.skb_defer_max sysctl (default 64)",
        area: Area::FreeSite,
        effect: "TCP's receive path hands a read skb to the CPU that allocated it \
                 (skb_attempt_defer_free(), skb->alloc_cpu): over loopback the sender's CPU \
                 frees its own frags unless net.core.skb_defer_max is 0",
        implemented_in: &["netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "kernel::skb::free_site; producer-consumer workloads with op.socket = \
                     \"tcp\" free on the sender (flow on one CPU: no refills or drains) with \
                     --skb-defer-max above 0",
        feature: None,
    },
    Change {
        key: "pcp-spinlock",
        commit: Some("4b23a68f9536"),
        id_source: "Fixes: tag of Lecopzer Chen's CMA fix; cited by Michal Hocko (Sep 2024)",
        subject: "mm/page_alloc: protect PCP lists with a spinlock",
        version: v(6, 0),
        version_verified: false,
        version_note: "series posted 20 Apr 2022, in next-20220614 (syzbot thread): 6.0 merge \
                       window",
        area: Area::Locking,
        effect: "pcp->lock with spin_trylock: a failed trylock falls back to the buddy \
                 allocator (one zone->lock hold); remote CPUs can drain without IPIs",
        implemented_in: &[],
        affects: &["mmap-fill"],
        model_note: "not modelled: the zone->lock model assumes the trylock succeeds; the \
                     lock's cost on the fast path (one locked RMW per PCP allocation and free) \
                     is in src/model/fastpath.rs, for a work measured on another kernel \
                     (op.work.kernel)",
        feature: None,
    },
    Change {
        key: "memcg-charge-batch-64",
        commit: Some("1813e51eece0"),
        id_source: "thread 001 (Shakeel Butt's patch, 22 Aug 2022); cited by Michal Hocko's \
                    kselftest fix (2 Dec 2022)",
        subject: "memcg: increase MEMCG_CHARGE_BATCH to 64",
        version: v(6, 1),
        version_verified: false,
        version_note: "posted after 6.0-rc1 (\"for easy acceptance to 6.0\"); the Dec 2022 \
                       kselftest fix says it has landed: 6.1",
        area: Area::Memcg,
        effect: "per-CPU memcg charge stock refilled 64 pages at a time instead of 32: half \
                 the page_counter hierarchy walks",
        implemented_in: &["memcg-netperf"],
        affects: &["memcg-netperf"],
        model_note: "Model: kernel::memcg::charge_batch gives the kernel's MEMCG_CHARGE_BATCH; \
                     --charge-batch or params.memcg_charge_batch override it",
        feature: None,
    },
    Change {
        key: "pcp-irqs-enabled",
        commit: Some("574907741599"),
        id_source: "\"[ Upstream commit 5749077415994eb02d660b2559b9d8278521e73d ]\" in the \
                    6.1-stable review of the patch (Greg Kroah-Hartman, 9 Oct 2023)",
        subject: "mm/page_alloc: leave IRQs enabled for per-cpu page allocations",
        version: v(6, 2),
        version_verified: false,
        version_note: "posted 18 Nov 2022 (lkml 20221118101714.19590-3-mgorman), in mm-unstable \
                       before the 6.2 merge window; also backported to 6.1.57 stable, which a \
                       major.minor version cannot tell apart",
        area: Area::Locking,
        effect: "rmqueue_pcplist() and free_unref_page() take pcp->lock with spin_trylock and \
                 IRQs enabled: no local_irq_save/restore per PCP allocation and free; \
                 rmqueue_bulk() and free_pcppages_bulk() take zone->lock with \
                 spin_lock_irqsave themselves",
        implemented_in: &["fastpath"],
        affects: &[],
        model_note: "src/model/fastpath.rs: one IRQ save/restore pair (37 cycles) less per PCP \
                     allocation and free, for a work measured on another kernel \
                     (op.work.kernel); the zone->lock hold's call cost assumes \
                     spin_lock_irqsave on every kernel",
        feature: None,
    },
    Change {
        key: "no-drain-on-exit",
        commit: Some("ca71fe1ad922"),
        id_source: "mainline listing of the 6.7 merge window (\"mm: PCP high auto-tuning\" \
                    series)",
        subject: "mm, pcp: avoid to drain PCP when process exit",
        version: v(6, 7),
        version_verified: true,
        version_note: "Andrew Morton's MM pull for 6.7-rc1 lists the series (1 Nov 2023)",
        area: Area::FreePath,
        effect: "free_high needs two high-order frees in a row (PCPF_PREV_FREE_HIGH_ORDER)",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "PcpState flags; in netperf-udp's flow every free is of the flow's order, so \
                     the previous free was high-order whenever the order is 1-3 \
                     (crate::model::freehigh)",
        feature: None,
    },
    Change {
        key: "free-high-batch",
        commit: Some("362d37a106dd"),
        id_source: "mainline listing of the 6.7 merge window",
        subject: "mm, pcp: reduce lock contention for draining high-order pages",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series (M67)",
        area: Area::FreePath,
        effect: "free_high drains min(count, batch << scale) instead of the whole list, and \
                 with PCPF_FREE_HIGH_BATCH (LLC slice > 3 * batch) waits for count >= batch",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "PcpState; netperf-udp's trigger drains min(count, batch << scale) and waits \
                     for count >= batch with PCPF_FREE_HIGH_BATCH from the machine's LLC slice \
                     (crate::model::freehigh, crate::kernel::ops::pcpf_free_high_batch)",
        feature: None,
    },
    Change {
        key: "pcp-batch-scale-max",
        commit: Some("52166607ecc9"),
        id_source: "mainline listing of the 6.7 merge window; 6.6-stable backport (Aug 2024)",
        subject: "mm: restrict the pcp batch scale factor to avoid too long latency",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series; backported to 6.6.y",
        area: Area::FreePath,
        effect: "CONFIG_PCP_BATCH_SCALE_MAX (default 5, 0..6) caps free_count / alloc_factor: \
                 at most batch << 5 = 2016 pages per zone->lock hold",
        implemented_in: &["kernel", "ops", "netperf-udp", "mmap-fill"],
        affects: &["netperf-udp", "mmap-fill"],
        model_note: "KernelOptions.pcp_batch_scale_max; mmap-fill --scale-max",
        feature: Some(Feature::PcpBatchScaleMax),
    },
    Change {
        key: "alloc-factor",
        commit: Some("c0a242394cb9"),
        id_source: "mainline listing of the 6.7 merge window",
        subject: "mm, page_alloc: scale the number of pages that are batch allocated",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series",
        area: Area::AllocPath,
        effect: "order-0 refills move batch << alloc_factor pages per rmqueue_bulk()",
        implemented_in: &["ops", "netperf-udp", "mmap-fill"],
        affects: &["netperf-udp", "mmap-fill"],
        model_note: "model::pcp refill size on 6.7+; zonelock model",
        feature: None,
    },
    Change {
        key: "auto-tune-framework",
        commit: Some("90b41691b988"),
        id_source: "cited with its subject by the 2024 \"pcp free pages not in MemFree\" \
                    patches; 6.7 listing",
        subject: "mm: add framework for PCP high auto-tuning",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series",
        area: Area::High,
        effect: "pcp->high_min = zone_highsize(0), pcp->high_max = zone_highsize(8); \
                 pcp->high moves between them",
        implemented_in: &["kernel", "ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "pageset limits; netperf-udp takes high_min/high_max from the kernel's \
                     formulas and the live high between them from the auto-tuning rules \
                     stepped through its flow (producer_consumer::kernel_high)",
        feature: None,
    },
    Change {
        key: "auto-tune",
        commit: Some("51a755c56dc0"),
        id_source: "Fixes: tags of MengEn Sun's and Songtang Liu's patches",
        subject: "mm: tune PCP high automatically",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series",
        area: Area::High,
        effect: "refills raise pcp->high by batch, frees above high raise it to free_count + \
                 batch, decay_pcp_high() lowers it by 1/8 per vmstat tick",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp", "mmap-fill"],
        model_note: "PcpState::decay_pcp_high; netperf-udp takes the consumer's time-average \
                     live high from autotune::live_high (the kernel's rules stepped through \
                     its flow)",
        feature: None,
    },
    Change {
        key: "below-high",
        commit: Some("57c0419c5f0e"),
        id_source: "mainline listing of the 6.7 merge window",
        subject: "mm, pcp: decrease PCP high if free pages < high watermark",
        version: v(6, 7),
        version_verified: true,
        version_note: "6.7 auto-tuning series",
        area: Area::High,
        effect: "ZONE_BELOW_HIGH: pcp->high cut by max(free_count, batch) per free",
        implemented_in: &["ops"],
        affects: &[],
        model_note: "PcpState zone flag; the workload models assume no memory pressure",
        feature: None,
    },
    Change {
        key: "free-count",
        commit: Some("6ccdcb6d3a74"),
        id_source: "kernel test robot report (stress-ng.judy -4.7%) on torvalds/linux master",
        subject: "mm, pcp: reduce detecting time of consecutive high order page freeing",
        version: v(6, 7),
        version_verified: true,
        version_note: "last patch of the 6.7 auto-tuning series",
        area: Area::FreePath,
        effect: "free_factor -> free_count: free_high fires once free_count >= batch (pages \
                 freed since the last allocation, halved per allocation)",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "PcpState; netperf-udp's drains are clamp(free_count, batch, high - batch) \
                     with free_count from the consumer's allocations (crate::model::pcp), and \
                     its free_high trigger counts free_count (crate::model::freehigh)",
        feature: None,
    },
    Change {
        key: "zoneinfo-high-min-max",
        commit: None,
        id_source: "not verified: only linux-next / mm-tree ids seen (MengEn Sun, posted 10 \
                    Oct 2024)",
        subject: "mm: add pcp high_min high_max to proc zoneinfo",
        version: v(6, 13),
        version_verified: false,
        version_note: "posted after 6.12-rc1; in a 6.13 merge-window shortlog; the real 6.18 \
                       zoneinfo has it",
        area: Area::Zoneinfo,
        effect: "zoneinfo prints high_min and high_max per CPU",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "zoneinfo parser accepts both formats",
        feature: Some(Feature::ZoneinfoHighMinMax),
    },
    Change {
        key: "rmqueue-bulk-fallbacks",
        commit: Some("90abee6d7895"),
        id_source: "kernel test robot report (vm-scalability +208.7 %) \"merged into \
                    mainline\"; 6.14-stable review (12 May 2025)",
        subject: "mm: page_alloc: speed up fallbacks in rmqueue_bulk()",
        version: v(6, 15),
        version_verified: false,
        version_note: "backported to 6.14.y in May 2025 after it reached mainline: 6.15",
        area: Area::AllocPath,
        effect: "rmqueue_bulk() finds a fallback block once per refill instead of searching \
                 the free lists page by page (zone->lock hold shorter under fragmentation)",
        implemented_in: &[],
        affects: &["mmap-fill"],
        model_note: "not modelled: the zone->lock hold model assumes no migratetype fallback",
        feature: None,
    },
    Change {
        key: "free-high-threshold",
        commit: Some("c544a952ba61"),
        id_source: "kernel test robot report on linus/master; Nikhil Dhama's reply compares \
                    \"v6.15 vanilla\" with \"v6.15 with (c544a952ba)\"",
        subject: "mm: pcp: increase pcp->free_count threshold to trigger free_high",
        version: v(6, 16),
        version_verified: false,
        version_note: "not in v6.15 (tested on top of it), on linus/master in mid 2025: 6.16",
        area: Area::FreePath,
        effect: "free_high fires only once free_count >= batch + high_min / 2",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "PcpState::free threshold; netperf-udp's trigger uses batch + high_min / 2 \
                     from 6.16 (crate::model::freehigh)",
        feature: None,
    },
    Change {
        key: "memcg-multi-stock",
        commit: Some("f735eebe55f8"),
        id_source: "Fixes: tags of Ran Xiaokai's kselftest fix (Apr 2026) and Shakeel Butt's \
                    round-robin victim fix (May 2026)",
        subject: "memcg: multi-memcg percpu charge cache",
        version: v(6, 16),
        version_verified: false,
        version_note: "posted 16 Apr 2025 with fixes to 30 Apr 2025 in the mm tree: the 6.16 \
                       merge window; Harry Yoo (May 2026) says it affects 6.18",
        area: Area::Memcg,
        effect: "the per-CPU charge stock caches up to 7 memcgs (NR_MEMCG_STOCK) instead of \
                 one: a charge for another memcg evicts a random slot only when all 7 are taken",
        implemented_in: &["memcg-netperf"],
        affects: &["memcg-netperf"],
        model_note: "model::memcg::shared (StockCode from the kernel); matters only with \
                     --memcgs > 1",
        feature: None,
    },
    Change {
        key: "udp-defer-free",
        commit: None,
        id_source: "not verified: Eric Dumazet's \"udp: use skb_attempt_defer_free()\" \
                    (net-next 2025); skb_consume_udp() calls skb_attempt_defer_free() in the \
                    stored 6.18-era net/ipv4/udp.c",
        subject: "udp: use skb_attempt_defer_free()",
        version: v(6, 18),
        version_verified: false,
        version_note: "this project's 6.18 host frees every frag of a UDP loopback stream on \
                       the sender's CPU with skb_defer_max 64 and on the receiver's with 0 \
                       (data/host/flows/trace-udp-*.json); the first release is inferred",
        area: Area::FreeSite,
        effect: "UDP's receive path hands a read skb to the CPU that allocated it: the \
                 sender's CPU frees its own frags unless net.core.skb_defer_max is 0",
        implemented_in: &["netperf-udp"],
        affects: &["netperf-udp"],
        model_note: "kernel::skb::free_site; producer-consumer workloads with op.socket = \
                     \"udp\" free on the sender (flow on one CPU: no refills or drains) with \
                     --skb-defer-max above 0",
        feature: None,
    },
    Change {
        key: "batched-free",
        commit: None,
        id_source: "not verified: only mm-tree ids seen (Joshua Hahn, \"[PATCH v5 3/3] \
                    mm/page_alloc: Batch page freeing in free_frozen_page_commit\", Oct 2025, \
                    with \"... in decay_pcp_high\" and \"... drain_pages_zone\")",
        subject: "mm/page_alloc: Batch page freeing in free_frozen_page_commit",
        version: v(6, 19),
        version_verified: false,
        version_note: "posted after 6.18-rc1, in the newest linux-mm tree read; no tag",
        area: Area::FreePath,
        effect: "bulk frees release zone->lock (and the pcp lock) every batch pages: at most \
                 batch (63) pages per zone->lock hold",
        implemented_in: &["ops", "netperf-udp"],
        affects: &["netperf-udp", "mmap-fill"],
        model_note: "Era::BatchedFree in ops and model::pcp; the mmap-fill zone->lock model \
                     keeps one hold per bulk free",
        feature: None,
    },
    Change {
        key: "batchsize-clarify",
        commit: None,
        id_source: "not verified: only the posting seen (Joshua Hahn, v2, 9 Oct 2025)",
        subject: "mm/page_alloc: Clarify batch tuning in zone_batchsize",
        version: v(6, 19),
        version_verified: false,
        version_note: "posted after 6.18-rc1; no tag",
        area: Area::Batch,
        effect: "zone_batchsize() rewritten (managed >> 12, cap 256 KiB before the *4 \
                 rounding); returns >= 1; \"no functional change\"",
        implemented_in: &["kernel"],
        affects: &[],
        model_note: "pageset::zone_batchsize() >= 6.19 form, same numbers",
        feature: None,
    },
];

/// Every change.
pub fn all() -> &'static [Change] {
    CHANGES
}

/// The change with `key`.
pub fn by_key(key: &str) -> Option<&'static Change> {
    CHANGES.iter().find(|c| c.key == key)
}

/// Which way a change goes between two kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Present in the second kernel, absent in the first.
    Added,
    /// Present in the first kernel, absent in the second (going back in time).
    Removed,
}

/// The changes that differ between `from` and `to`, oldest first: those with `from <
/// version <= to` (added) or, when `to < from`, `to < version <= from` (removed).
pub fn changes_between(
    from: KernelVersion,
    to: KernelVersion,
) -> Vec<(Direction, &'static Change)> {
    CHANGES
        .iter()
        .filter_map(|c| match (c.present_in(from), c.present_in(to)) {
            (false, true) => Some((Direction::Added, c)),
            (true, false) => Some((Direction::Removed, c)),
            _ => None,
        })
        .collect()
}

/// The changes `version` has, oldest first.
pub fn applying(version: KernelVersion) -> Vec<&'static Change> {
    CHANGES.iter().filter(|c| c.present_in(version)).collect()
}

/// One behaviour a prediction leaves out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotModelled {
    /// The change's key.
    pub key: &'static str,
    /// Commit id, or None when not verified.
    pub commit: Option<&'static str>,
    /// Commit subject.
    pub subject: &'static str,
    /// First mainline version.
    pub version: KernelVersion,
    /// `"present"`: the requested kernel has it and the model's reference kernel does not;
    /// `"absent"`: the reverse.
    pub on_requested_kernel: &'static str,
    /// What it would change, and what the model does instead.
    pub note: String,
}

/// The changes a `workload` prediction on `requested` leaves out, given the model's
/// `reference` kernel (the kernel of its thread). Empty when every change between the two that
/// touches the workload is implemented.
pub fn not_modelled(
    workload: &str,
    requested: KernelVersion,
    reference: KernelVersion,
) -> Vec<NotModelled> {
    changes_between(reference, requested)
        .into_iter()
        .filter(|(_, c)| c.not_modelled_for(workload))
        .map(|(d, c)| {
            let (state, verb) = match d {
                Direction::Added => ("present", "has"),
                Direction::Removed => ("absent", "lacks"),
            };
            NotModelled {
                key: c.key,
                commit: c.commit,
                subject: c.subject,
                version: c.version,
                on_requested_kernel: state,
                note: format!(
                    "kernel {requested} {verb} it (since {}), the {workload} model is built on \
                     {reference}: {}. Model: {}",
                    c.version, c.effect, c.model_note
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_keys_unique() {
        for w in CHANGES.windows(2) {
            assert!(
                w[0].version <= w[1].version,
                "{} after {}",
                w[1].key,
                w[0].key
            );
        }
        let mut keys: Vec<_> = CHANGES.iter().map(|c| c.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), CHANGES.len());
        for c in CHANGES {
            if let Some(id) = c.commit {
                assert_eq!(id.len(), 12, "{}", c.key);
                assert!(id.chars().all(|ch| ch.is_ascii_hexdigit()), "{}", c.key);
            }
            for w in c.affects.iter().chain(c.implemented_in) {
                assert!(
                    WORKLOADS.contains(w) || ["kernel", "ops", "fastpath"].contains(w),
                    "{}: unknown workload {w}",
                    c.key
                );
            }
        }
    }
}
