//! The PCP fast path's cost carried across kernel versions: a work per allocation measured on
//! one kernel (for instance thread 002's page_bench01 cycles on 4.14) moved to another by the
//! code the fast path gained or lost in between.
//!
//! # Steps counted (`mm/page_alloc.c`, `rmqueue_pcplist()` and `free_unref_page()`)
//! - 6.0, 4b23a68f9536 "mm/page_alloc: protect PCP lists with a spinlock" (the kernel timeline's
//!   `pcp-spinlock`, [`crate::kernel::changes`]): `pcp_spin_trylock_irqsave()` takes
//!   `pcp->lock` on every PCP allocation and every PCP free, inside the IRQ-off section 4.14
//!   already had. On an uncontended lock that is one `lock cmpxchg` on a line the CPU owns and a
//!   plain store to release it: [`LOCKED_RMW_CYCLES`] per allocation and per free.
//! - 6.2, 5749077415994 "mm/page_alloc: leave IRQs enabled for per-cpu page allocations" (Mel
//!   Gorman, Nov 2022; backported to 6.1.57 stable, which a `major.minor` version cannot tell
//!   apart): `rmqueue_pcplist()` and `free_unref_page()` take `pcp_spin_trylock()` without
//!   `irqsave`, so the `local_irq_save()` / `local_irq_restore()` pair every PCP allocation and
//!   free had since before 4.14 is gone: [`IRQ_SAVE_RESTORE_CYCLES`] less on each. (The zone
//!   lock's own `spin_lock_irqsave()` moved into `rmqueue_bulk()` / `free_pcppages_bulk()` in
//!   the same commit; that is per hold, in [`crate::model::hold::CALL_CYCLES`].)
//!
//! # Not counted
//! - Debug or hardening options of a particular build (`CONFIG_DEBUG_VM`, init_on_alloc,
//!   lockdep): a build's options are an input the workload file would have to state.
//! - Other instruction-count changes between versions (watermark checks, NUMA counters since
//!   5.14 as plain per-CPU increments, `prep_new_page()` hooks): a few cycles each, unmeasured.

use crate::kernel::version::KernelVersion;

/// Cycles of an uncontended `lock cmpxchg` on a line in the CPU's own L1 plus the releasing
/// store, on Intel cores since Skylake: about 18-20 (Agner Fog's instruction tables, LOCK
/// CMPXCHG). Assumed for every machine.
pub const LOCKED_RMW_CYCLES: f64 = 20.0;

/// Cycles of a `local_irq_save()` / `local_irq_restore()` pair (`pushf; cli` ... `popf`):
/// 37 on a Haswell i7-4790K, measured by Jesper Brouer (fbd02630c6e3 "slub: initial bulk free
/// implementation": "local_irq_{save,restore}: 37 cycles(tsc)"). Assumed for every machine.
pub const IRQ_SAVE_RESTORE_CYCLES: f64 = 37.0;

/// One change to the fast path: the version that brought it, cycles it adds per PCP allocation
/// and per PCP free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// First kernel with the change.
    pub since: KernelVersion,
    /// The change, by its timeline key and subject.
    pub what: &'static str,
    /// Cycles added to each PCP allocation (negative: removed).
    pub alloc_cycles: f64,
    /// Cycles added to each PCP free.
    pub free_cycles: f64,
}

/// The steps counted (module docs), in version order.
pub fn steps() -> [Step; 2] {
    let rmw = crate::assumptions::value("fastpath::LOCKED_RMW_CYCLES", LOCKED_RMW_CYCLES);
    let irq =
        crate::assumptions::value("fastpath::IRQ_SAVE_RESTORE_CYCLES", IRQ_SAVE_RESTORE_CYCLES);
    [
        Step {
            since: KernelVersion::new(6, 0),
            what: "pcp-spinlock (4b23a68f9536): pcp->lock taken with spin_trylock on every PCP allocation and free",
            alloc_cycles: rmw,
            free_cycles: rmw,
        },
        Step {
            since: KernelVersion::new(6, 2),
            what: "pcp-irqs-enabled (5749077415994): PCP allocations and frees leave IRQs enabled (no local_irq_save/restore)",
            alloc_cycles: -irq,
            free_cycles: -irq,
        },
    ]
}

/// Cycles per allocation and per free that the fast path of `to` costs more than that of `from`
/// (negative when `to` is older and the steps between them added cycles), and the steps that
/// make the difference.
pub fn delta_cycles(from: KernelVersion, to: KernelVersion) -> (f64, f64, Vec<Step>) {
    let (lo, hi, sign) = if to >= from {
        (from, to, 1.0)
    } else {
        (to, from, -1.0)
    };
    let between: Vec<Step> = steps()
        .into_iter()
        .filter(|s| s.since > lo && s.since <= hi)
        .collect();
    let alloc = sign * between.iter().map(|s| s.alloc_cycles).sum::<f64>();
    let free = sign * between.iter().map(|s| s.free_cycles).sum::<f64>();
    (alloc, free, between)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: u32, b: u32) -> KernelVersion {
        KernelVersion::new(a, b)
    }

    /// 4.14 to 6.1 crosses the 6.0 pcp spinlock (one locked RMW each way); 6.1 to 6.10 crosses
    /// 6.2's IRQs-enabled PCP path (one IRQ save/restore pair less); 6.2 to 6.10 nothing
    /// counted; going back gives the opposite sign.
    #[test]
    fn deltas_follow_the_versions_crossed() {
        let (a, f, s) = delta_cycles(v(4, 14), v(6, 1));
        assert_eq!((a, f, s.len()), (LOCKED_RMW_CYCLES, LOCKED_RMW_CYCLES, 1));
        assert_eq!(delta_cycles(v(6, 1), v(6, 10)).0, -IRQ_SAVE_RESTORE_CYCLES);
        assert_eq!(delta_cycles(v(6, 2), v(6, 10)).0, 0.0);
        let (a, f, s) = delta_cycles(v(4, 14), v(6, 18));
        let both = LOCKED_RMW_CYCLES - IRQ_SAVE_RESTORE_CYCLES;
        assert_eq!((a, f, s.len()), (both, both, 2));
        assert_eq!(delta_cycles(v(6, 1), v(4, 14)).0, -LOCKED_RMW_CYCLES);
        // The step's own version counts as crossed: 5.19 -> 6.0 gains the lock.
        assert_eq!(delta_cycles(v(5, 19), v(6, 0)).0, LOCKED_RMW_CYCLES);
        assert_eq!(delta_cycles(v(6, 0), v(6, 0)).0, 0.0);
    }

    /// The steps are the timeline's: same versions as `pcp-spinlock` and `pcp-irqs-enabled`.
    #[test]
    fn steps_match_the_kernel_timeline() {
        for (step, key) in steps().iter().zip(["pcp-spinlock", "pcp-irqs-enabled"]) {
            let c = crate::kernel::changes::all()
                .iter()
                .find(|c| c.key == key)
                .expect("in the timeline");
            assert_eq!(step.since, c.version, "{key}");
            assert!(step.what.starts_with(key), "{key}");
        }
    }
}
