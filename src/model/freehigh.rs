//! The `free_high` trigger by kernel version: how often a CPU that frees high-order pages
//! (orders 1-3) without allocating drains its PCP list early, and how many pages each drain
//! takes to the buddy allocator (which the next allocation must then refill from the zone).
//!
//! # The kernel's rule (mm/page_alloc.c `free_unref_page_commit()` / `free_frozen_page_commit()`)
//! - 5.18 - 6.6 (f26b3fa04611): `free_high = free_factor && order && order <= 3`. `free_factor`
//!   grows by one at each ordinary drain (`nr_pcp_free()`, when `count >= high`) and is halved
//!   by every allocation on the CPU (`rmqueue_pcplist()`). So within one run of frees with no
//!   allocation, the list must first reach `high`; every high-order free after that drain sees
//!   `nr_pcp_high() = 0` and drains the whole list (`nr_pcp_free()` returns `count`).
//! - 6.7 - 6.15 (6ccdcb6d3a74, free_factor -> free_count): `free_high` once `free_count >=
//!   batch` (pages freed, halved by each allocation), the previous free was also of order 1-3
//!   (`PCPF_PREV_FREE_HIGH_ORDER`) and, with `PCPF_FREE_HIGH_BATCH` (the per-CPU slice of the
//!   LLC holds more than 3 batches), `count >= batch`. It drains `min(count, batch << scale)`.
//! - >= 6.16 (c544a952ba61, Nikhil Dhama): threshold `batch + high_min / 2`.
//! - `threshold_pages` set by hand (`--free-high-threshold`) replaces the 6.7+ threshold.
//! - 6.7+: `free_count += 1 << order` only while `free_count < batch << scale`, so a threshold
//!   above what free_count can reach never fires.
//!
//! # The run model (assumed)
//! Frees on the consumer CPU come in *runs*: consecutive frees of order `u = 2^order` pages with
//! no page allocation on that CPU between them. Between runs the CPU allocates, which halves
//! `free_count` / `free_factor` to about 0 (assumed: several allocations between runs). Run
//! lengths are exponential with mean `m` pages (assumed: memoryless ends of runs), and a run
//! starts with the list at `c0 = high / 2` (assumed: anywhere between empty and `high`).
//!
//! For threshold `T` (pages freed in the run before the first free_high):
//! - 6.7+: `T = max(threshold, 2u)`; first drain `min(c0 + T, batch << scale)` pages, then one
//!   drain per `g` pages freed (`g = ceil(batch / u) u` with PCPF_FREE_HIGH_BATCH: the list must
//!   hold a batch again; else `g = u`), each of `g` pages.
//! - 5.18 - 6.6: `T = high - c0`; the ordinary drain at `T` leaves `high - batch` pages
//!   (allocations between runs reset `free_factor`, so `nr_pcp_free()` frees `batch`), the next
//!   high-order free drains those, then every free drains itself (`g = u`).
//!
//! With `P(L >= T) = exp(-T/m)` and `E[L - T | L >= T] = m`:
//! `events per run = exp(-T/m) (1 + m/g)`, `pages drained by free_high per run =
//! exp(-T/m) (first + m)`; per page freed, divide by `m`.
//!
//! # Not modelled
//! Run lengths with a heavier tail than the exponential (bursts at connection close, loss
//! recovery); the list level's real distribution at a run's start; zone->lock queueing of the
//! extra holds among many CPUs (the kind charges line transfers per hold only).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::version::KernelVersion;

/// Inputs of the trigger model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TriggerInput {
    /// Kernel version (decides the rule).
    #[serde(serialize_with = "ser_version")]
    pub kernel: KernelVersion,
    /// Order of the frees (only 1..=3 can trigger).
    pub order: u32,
    /// pcp->batch, pages.
    pub batch_pages: u32,
    /// The list's high, pages: the fixed high (<= 6.6) or the live high the tuner settles at.
    pub high_pages: u32,
    /// pcp->high_min, pages (>= 6.16's threshold).
    pub high_min_pages: u32,
    /// CONFIG_PCP_BATCH_SCALE_MAX.
    pub scale_max: u32,
    /// PCPF_FREE_HIGH_BATCH is set on the CPU (>= 6.7).
    pub free_high_batch: bool,
    /// The free_count threshold set by hand, pages (>= 6.7 only).
    pub threshold_pages: Option<u32>,
    /// Mean run of frees without an allocation on the CPU, pages.
    pub run_mean_pages: f64,
}

fn ser_version<S: serde::Serializer>(
    v: &KernelVersion,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}.{}", v.major, v.minor))
}

/// What the trigger does to a stream of runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trigger {
    /// Pages freed in a run before the first free_high drain (infinite: never).
    pub threshold_pages: f64,
    /// free_high drains per page freed.
    pub events_per_page: f64,
    /// Pages leaving the list through free_high drains per page freed (at most 1).
    pub share: f64,
    /// Pages per free_high drain (mean).
    pub pages_per_event: f64,
}

impl Trigger {
    /// No free_high (kernel without it, or orders that never trigger it).
    pub fn none() -> Trigger {
        Trigger {
            threshold_pages: f64::INFINITY,
            events_per_page: 0.0,
            share: 0.0,
            pages_per_event: 0.0,
        }
    }
}

/// The free_count threshold of the kernel (>= 6.7), pages: `batch`, or `batch + high_min / 2`
/// from 6.16. None before 6.7 (no free_count).
pub fn kernel_threshold(kernel: KernelVersion, batch: u32, high_min: u32) -> Option<u32> {
    if !kernel.era().auto_tunes_high() {
        return None;
    }
    Some(if kernel.free_high_threshold_uses_high_min() {
        batch + high_min / 2
    } else {
        batch
    })
}

/// Evaluates the trigger (see the module documentation).
pub fn trigger(x: &TriggerInput) -> Result<Trigger> {
    if !(x.run_mean_pages.is_finite() && x.run_mean_pages > 0.0) {
        return Err(Error::invalid(
            "free_high trigger",
            "run_mean_pages",
            "must be a finite number > 0",
        ));
    }
    if x.batch_pages == 0 || x.scale_max > 6 || x.order > 10 {
        return Err(Error::invalid(
            "free_high trigger",
            "batch_pages/scale_max/order",
            "batch >= 1, scale_max 0..=6, order 0..=10",
        ));
    }
    let auto = x.kernel.era().auto_tunes_high();
    if x.threshold_pages.is_some() && !auto {
        return Err(Error::Unsupported(format!(
            "--free-high-threshold: kernel {} has no pcp->free_count (free_high follows free_factor before 6.7)",
            x.kernel
        )));
    }
    if !x.kernel.has_free_high() || x.order == 0 || x.order > 3 {
        return Ok(Trigger::none());
    }
    let u = f64::from(1u32 << x.order);
    let b = f64::from(x.batch_pages);
    let h = f64::from(x.high_pages);
    let m = x.run_mean_pages;
    let c0 = h / 2.0;
    let (t, first, g) = if auto {
        let thr = x
            .threshold_pages
            .or(kernel_threshold(x.kernel, x.batch_pages, x.high_min_pages));
        let t = f64::from(thr.unwrap_or(x.batch_pages)).max(2.0 * u);
        let cap = f64::from(x.batch_pages << x.scale_max);
        // free_count grows by `u` only while below `batch << scale`, so a run can raise it to
        // `ceil(cap / u) u` at most: a threshold above that never fires (6.16's `batch +
        // high_min / 2` with high_min above about 2 (cap - batch), as a sysctl-set high gives).
        if t > (cap / u).ceil() * u {
            return Ok(Trigger::none());
        }
        let g = if x.free_high_batch {
            (b / u).ceil() * u
        } else {
            u
        };
        (t, (c0 + t).min(cap), g)
    } else {
        // The ordinary drain at `high` leaves high - batch; the next free drains them.
        ((h - c0).max(u), (h - b).max(0.0) + u, u)
    };
    let p = (-t / m).exp();
    let events_per_run = p * (1.0 + m / g);
    let drained_per_run = p * (first + m);
    Ok(Trigger {
        threshold_pages: t,
        events_per_page: events_per_run / m,
        share: (drained_per_run / m).min(1.0),
        pages_per_event: if events_per_run > 0.0 {
            drained_per_run / events_per_run
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kernel: KernelVersion) -> TriggerInput {
        TriggerInput {
            kernel,
            order: 3,
            batch_pages: 63,
            high_pages: 1000,
            high_min_pages: 200,
            scale_max: 5,
            free_high_batch: true,
            threshold_pages: None,
            run_mean_pages: 64.0,
        }
    }

    #[test]
    fn thresholds_by_version() {
        assert_eq!(kernel_threshold(KernelVersion::new(6, 6), 63, 200), None);
        assert_eq!(
            kernel_threshold(KernelVersion::new(6, 12), 63, 200),
            Some(63)
        );
        assert_eq!(
            kernel_threshold(KernelVersion::new(6, 16), 63, 200),
            Some(163)
        );
    }

    #[test]
    fn a_higher_threshold_fires_less_and_drains_less() {
        let mut prev = f64::INFINITY;
        for k in [1, 2, 4, 5, 6, 8] {
            let mut x = input(KernelVersion::new(6, 12));
            x.threshold_pages = Some(63 * k);
            let t = trigger(&x).unwrap();
            assert!(t.events_per_page < prev, "{k}: {t:?}");
            assert!(t.share > 0.0 && t.share <= 1.0);
            prev = t.events_per_page;
        }
    }

    #[test]
    fn order_0_and_old_kernels_never_trigger_and_6_6_has_no_free_count() {
        let mut x = input(KernelVersion::new(6, 12));
        x.order = 0;
        assert_eq!(trigger(&x).unwrap().events_per_page, 0.0);
        let x = input(KernelVersion::new(5, 17));
        assert_eq!(trigger(&x).unwrap().share, 0.0);
        let mut x = input(KernelVersion::new(6, 6));
        assert!(trigger(&x).unwrap().events_per_page > 0.0);
        x.threshold_pages = Some(63);
        assert!(trigger(&x).is_err());
    }

    #[test]
    fn a_threshold_free_count_cannot_reach_never_fires() {
        // free_count stops growing at batch << scale (63 << 5 = 2016 pages): 6.16's threshold
        // batch + high_min / 2 passes it once high_min exceeds 2 (2016 - 63) = 3906 pages.
        let mut x = input(KernelVersion::new(6, 16));
        x.high_min_pages = 3900;
        assert!(trigger(&x).unwrap().events_per_page > 0.0);
        x.high_min_pages = 3920;
        assert_eq!(trigger(&x).unwrap(), Trigger::none());
        // A smaller CONFIG_PCP_BATCH_SCALE_MAX lowers the ceiling.
        let mut x = input(KernelVersion::new(6, 16));
        x.scale_max = 1;
        assert_eq!(trigger(&x).unwrap(), Trigger::none());
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut x = input(KernelVersion::new(6, 12));
        x.run_mean_pages = f64::NAN;
        assert!(trigger(&x).is_err());
    }
}
