//! Core-to-core latency by a cache-line ping-pong, and the modes of its windows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use serde::Serialize;

use super::{allowed_cpus, pin_current_thread, set_allowed_cpus};
use crate::error::{Error, Result};

// ----- core to core ----------------------------------------------------------------------------

#[repr(align(128))]
struct PaddedLine(AtomicU64);

/// Waits until `*line == first + 2k`, then CASes it to `first + 2k + 1`, for k in 0..n.
#[inline(never)]
fn ping_side(line: &AtomicU64, first: u64, n: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let ptr = line.as_ptr();
        // SAFETY: ptr points at a live, aligned u64 shared only through atomic instructions.
        unsafe {
            std::arch::asm!(
                "2:",
                "mov rax, qword ptr [{ptr}]",
                "cmp rax, {exp}",
                "jne 2b",
                "lock cmpxchg qword ptr [{ptr}], {new}",
                "jne 2b",
                "add {exp}, 2",
                "add {new}, 2",
                "dec {n}",
                "jnz 2b",
                ptr = in(reg) ptr,
                exp = inout(reg) first => _,
                new = inout(reg) first + 1 => _,
                n = inout(reg) n.max(1) => _,
                out("rax") _,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut exp = first;
        for _ in 0..n.max(1) {
            loop {
                if line.load(Ordering::Relaxed) == exp
                    && line
                        .compare_exchange(exp, exp + 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                {
                    break;
                }
                std::hint::spin_loop();
            }
            exp += 2;
        }
    }
}

/// One-way transfer time (round trip / 2), ns, between CPUs `a` and `b`: `repeats` samples of
/// `round_trips` round trips each.
pub fn ping_pong(a: u32, b: u32, round_trips: u64, repeats: usize) -> Result<Vec<f64>> {
    let line = Arc::new(PaddedLine(AtomicU64::new(0)));
    let barrier = Arc::new(Barrier::new(2));
    let (l2, b2) = (Arc::clone(&line), Arc::clone(&barrier));
    let reps = repeats.max(1);
    let warm = (round_trips / 10).max(100);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f2 = Arc::clone(&fail);
    let other = std::thread::spawn(move || -> Result<()> {
        let pinned = pin_current_thread(b);
        if pinned.is_err() {
            f2.store(true, Ordering::SeqCst);
        }
        b2.wait();
        pinned?;
        if f2.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut first = 1;
        ping_side(&l2.0, first, warm);
        first += 2 * warm;
        for _ in 0..reps {
            b2.wait();
            ping_side(&l2.0, first, round_trips);
            first += 2 * round_trips;
        }
        Ok(())
    });
    let saved = allowed_cpus();
    let pinned = pin_current_thread(a);
    if pinned.is_err() {
        fail.store(true, Ordering::SeqCst);
    }
    barrier.wait();
    let mut samples = Vec::new();
    if !fail.load(Ordering::SeqCst) {
        let mut first = 0;
        ping_side(&line.0, first, warm);
        first += 2 * warm;
        for _ in 0..reps {
            barrier.wait();
            let t = Instant::now();
            ping_side(&line.0, first, round_trips);
            // The other side's last CAS ends the round trip.
            while line.0.load(Ordering::Acquire) != first + 2 * round_trips {
                std::hint::spin_loop();
            }
            samples.push(t.elapsed().as_nanos() as f64 / (2 * round_trips) as f64);
            first += 2 * round_trips;
        }
    }
    set_allowed_cpus(&saved);
    let joined = other
        .join()
        .map_err(|_| Error::Unsupported("ping-pong thread panicked".into()))?;
    pinned?;
    joined?;
    Ok(samples)
}

/// One cluster of ping-pong windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mode {
    /// Median one-way transfer of the windows in this cluster, ns.
    pub median: f64,
    /// Share of all windows in this cluster (0..1).
    pub share: f64,
}

/// Smallest share of the windows a second mode must hold to count (a few preempted or
/// straddling windows are outliers, not a placement).
const MODE_MIN_SHARE: f64 = 0.1;
/// Ratio of two modes' medians that makes them two placements: transfers through a shared L2
/// (SMT siblings), a shared L3 and across L3s differ by 1.5-4x on x86 servers, while the windows
/// of one placement spread by a few percent.
pub(super) const MODE_MIN_RATIO: f64 = 1.4;
/// Least jump between neighbouring sorted windows at the split: two placements leave an empty
/// gap between their clusters.
const MODE_MIN_GAP: f64 = 1.15;

/// Splits windows into one mode, or two when they form two clusters (see the constants); the
/// dominant (larger share) mode first.
pub fn modes(samples: &[f64]) -> Vec<Mode> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = |s: &[f64]| {
        let m = s.len() / 2;
        if s.len() % 2 == 1 {
            s[m]
        } else {
            0.5 * (s[m - 1] + s[m])
        }
    };
    let one = vec![Mode {
        median: med(&v),
        share: 1.0,
    }];
    let min_side = ((n as f64) * MODE_MIN_SHARE).ceil().max(1.0) as usize;
    if n < 2 * min_side || n < 10 {
        return one;
    }
    let split = (min_side..=n - min_side)
        .max_by(|&a, &b| (v[a] / v[a - 1]).total_cmp(&(v[b] / v[b - 1])))
        .unwrap_or(min_side);
    let (lo, hi) = v.split_at(split);
    if v[split] / v[split - 1] < MODE_MIN_GAP || med(hi) / med(lo) < MODE_MIN_RATIO {
        return one;
    }
    let mut m = vec![
        Mode {
            median: med(lo),
            share: lo.len() as f64 / n as f64,
        },
        Mode {
            median: med(hi),
            share: hi.len() as f64 / n as f64,
        },
    ];
    if m[1].share > m[0].share {
        m.swap(0, 1);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tight_cluster_is_one_mode() {
        let w: Vec<f64> = (0..50).map(|i| 60.0 + f64::from(i % 5)).collect();
        let m = modes(&w);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].share, 1.0);
    }

    #[test]
    fn two_placements_are_two_modes_dominant_first() {
        let mut w: Vec<f64> = (0..30).map(|i| 220.0 + f64::from(i % 7)).collect();
        w.extend((0..70).map(|i| 60.0 + f64::from(i % 3)));
        w.push(5000.0); // one preempted window: an outlier, not a mode
        let m = modes(&w);
        assert_eq!(m.len(), 2);
        assert!((m[0].median - 61.0).abs() < 1.0, "{m:?}");
        assert!((m[1].median - 223.0).abs() < 4.0, "{m:?}");
        assert!((m[0].share - 70.0 / 101.0).abs() < 1e-9);
    }
}
