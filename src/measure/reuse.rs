//! The cost of reusing a page by reuse distance, measured on the host with the data path of a
//! producer/consumer pair and no kernel in it: a writer thread copies 64 KiB chunks into a
//! ring of buffers, a reader thread copies each chunk out once it is written (the writer stays
//! at most [`LEAD_CHUNKS`] chunks ahead, as a socket's send buffer holds it), and the writer
//! comes back to a chunk after the whole ring: `distance` pages of other chunks were written
//! and read in between. That is the reuse the model's cache term prices
//! ([`crate::model::cache::page_access_cost`]): a page freed by the consumer and allocated
//! again by the producer `distance` pages later, its lines then in the other core's cache, the
//! LLC or DRAM. Time per page over the ring's distance shows how the host prices each level
//! for this pattern (store streams, hardware prefetch, the coherence protocol), which a load
//! latency alone does not.
//!
//! Where the chunks lie matters as much as how far apart they are reused. The kernel's page
//! frags are order-3 blocks (32 KiB) at the addresses the buddy allocator hands out, so the
//! producer writes 32 KiB runs scattered over memory; a ring laid out in address order lets the
//! hardware prefetchers stream from one chunk into the next, which the kernel's blocks do not
//! allow. [`Layout::Scattered`] (the default) places the ring's 32 KiB blocks in a fixed random
//! order; [`Layout::Sequential`] keeps address order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::latency::pin_current_thread;
use crate::error::{Error, Result};

/// Bytes per chunk: one 64 KiB write, as the socket loops write.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Pages of 4 KiB per chunk.
pub const CHUNK_PAGES: u64 = (CHUNK_BYTES / 4096) as u64;
/// How far the writer may run ahead of the reader, chunks: about a socket's default send
/// buffer (212,992 B), so the reader copies out lines the writer has just written.
pub const LEAD_CHUNKS: u64 = 3;
/// The smallest ring, chunks (the lead plus one: the writer never overwrites an unread chunk).
pub const MIN_CHUNKS: u64 = LEAD_CHUNKS + 1;
/// The largest ring, bytes (4 GiB: past the largest LLCs, 320 MiB on Emerald Rapids, and past
/// the reach of a TLB of 2 MiB pages; only the distances asked for are allocated).
pub const MAX_RING_BYTES: u64 = 1 << 32;

/// Bytes of one block of the ring: an order-3 page frag (`SKB_FRAG_PAGE_ORDER`, 32 KiB).
pub const BLOCK_BYTES: usize = 32 * 1024;

/// Where the ring's blocks lie in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// The 32 KiB blocks in a fixed random order over the ring, as the buddy allocator hands
    /// order-3 page frags out.
    Scattered,
    /// The blocks in address order (hardware prefetch streams across chunks).
    Sequential,
}

/// Block slots of a ring of `blocks` blocks: the identity for [`Layout::Sequential`], a fixed
/// random permutation (Fisher-Yates with a xorshift generator and a fixed seed, so every run
/// lays the ring out alike) for [`Layout::Scattered`].
pub fn block_slots(blocks: usize, layout: Layout) -> Vec<usize> {
    let mut slots: Vec<usize> = (0..blocks).collect();
    if layout == Layout::Scattered {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..blocks).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            slots.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    slots
}

/// One reuse distance's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReusePoint {
    /// Pages written and read between two writes of the same page.
    pub distance_pages: u64,
    /// Time per 4 KiB page through the pair (the slower side sets it), ns.
    pub ns_per_page: f64,
    /// Pages moved while timing.
    pub pages: u64,
}

/// Copies `src` into `dst`: the copy the kernel's `copy_from_user()` / `copy_to_user()` do.
fn copy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// A buffer whose first byte is page-aligned (4096), so every copy here runs between buffers
/// at the same offset in their pages, as the kernel's copies into and out of page frags do.
/// The heap would place them anywhere: on AMD Zen 3 a `rep movsb` copy whose destination sits
/// a few bytes above its source modulo 4096 runs about 15 times slower (measured on this
/// project's host: 1,400 against 90 ns per cached 4 KiB page), which would decide the result.
struct PageAligned {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl PageAligned {
    fn new(len: usize, fill: u8) -> PageAligned {
        let buf = vec![fill; len + 4096];
        let off = (4096 - buf.as_ptr() as usize % 4096) % 4096;
        PageAligned { buf, off, len }
    }
    fn as_slice(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// A raw pointer the two threads share; each chunk is written by one side at a time, ordered
/// by the counters.
#[derive(Clone, Copy)]
struct Ring(*mut u8);
// SAFETY: the writer touches chunk k only while `read > k - chunks` and before `written > k`;
// the reader only after `written > k` and before `read > k` (Acquire/Release on the counters),
// so no chunk is accessed by both threads at once.
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

/// Measures one reuse distance: `distance_pages` rounded up to whole chunks (at least
/// [`MIN_CHUNKS`]), the writer pinned to `writer` and the reader to `reader`, the ring's blocks
/// laid out by `layout`, one warm-up pass over the ring twice, then `secs` seconds timed. With
/// `offset` > 0 each block's copy starts `offset` bytes into it and stops a line short of its
/// end (the source stays page-aligned): a copy at another alignment, as a stream of 65,507-byte
/// UDP datagrams lands in its page frags.
pub fn measure_distance(
    writer: u32,
    reader: u32,
    distance_pages: u64,
    secs: f64,
    layout: Layout,
    offset: usize,
) -> Result<ReusePoint> {
    if offset >= 64 {
        return Err(Error::invalid(
            "measure reuse",
            "--offset",
            format!("{offset} bytes: give 0..=63 (an offset within a cache line)"),
        ));
    }
    let span = if offset == 0 {
        BLOCK_BYTES
    } else {
        BLOCK_BYTES - 64
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 600.0) {
        return Err(Error::invalid(
            "measure reuse",
            "--seconds",
            format!("must be in (0, 600], got {secs}"),
        ));
    }
    let chunks = distance_pages.div_ceil(CHUNK_PAGES).max(MIN_CHUNKS);
    let bytes = chunks * CHUNK_BYTES as u64;
    if bytes > MAX_RING_BYTES {
        return Err(Error::invalid(
            "measure reuse",
            "--distances",
            format!(
                "{distance_pages} pages is a ring of {} MiB: at most {} MiB",
                bytes >> 20,
                MAX_RING_BYTES >> 20
            ),
        ));
    }
    // Every page touched once, so no fault lands in the timing.
    let mut ring = PageAligned::new(bytes as usize, 1);
    let base = Ring(ring.as_mut_slice().as_mut_ptr());
    // Chunk k's blocks are logical blocks k * PER .. (k + 1) * PER of the ring, each at its slot.
    const PER: usize = CHUNK_BYTES / BLOCK_BYTES;
    let slots = Arc::new(block_slots(bytes as usize / BLOCK_BYTES, layout));
    let wslots = Arc::clone(&slots);
    let written = Arc::new(AtomicU64::new(0));
    let read = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let warm = 2 * chunks;
    // One CPU for both sides (a smoke run): a waiting side gives the CPU up instead of spinning
    // out its time slice.
    let shared_cpu = writer == reader;
    let wait = move || {
        if shared_cpu {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    };
    let (w2, r2, s2) = (Arc::clone(&written), Arc::clone(&read), Arc::clone(&stop));
    let handle = std::thread::spawn(move || -> Result<()> {
        pin_current_thread(writer)?;
        let src = PageAligned::new(CHUNK_BYTES, 7);
        let src = src.as_slice();
        let ring = base;
        let mut k: u64 = 0;
        while !s2.load(Ordering::Relaxed) {
            // Wait for room: at most LEAD_CHUNKS unread chunks.
            while k >= r2.load(Ordering::Acquire) + LEAD_CHUNKS {
                if s2.load(Ordering::Relaxed) {
                    return Ok(());
                }
                wait();
            }
            let first = (k % chunks) as usize * PER;
            for b in 0..PER {
                let off = wslots[first + b] * BLOCK_BYTES;
                // SAFETY: see `Ring`; the block lies inside the ring.
                let dst = unsafe { std::slice::from_raw_parts_mut(ring.0.add(off + offset), span) };
                copy(dst, &src[b * BLOCK_BYTES..b * BLOCK_BYTES + span]);
            }
            k += 1;
            w2.store(k, Ordering::Release);
        }
        Ok(())
    });
    // The reader runs in its own thread too: the calling thread only waits, so under SCHED_FIFO
    // it never spins on a CPU where a new thread (which inherits its affinity) must first run
    // to pin itself.
    let (w3, r3) = (Arc::clone(&written), Arc::clone(&read));
    let reader_handle = std::thread::spawn(move || -> Result<(u64, Duration)> {
        let (written, read) = (w3, r3);
        let ring = base;
        pin_current_thread(reader)?;
        let mut dst = PageAligned::new(CHUNK_BYTES, 0);
        let dst = dst.as_mut_slice();
        let mut k: u64 = 0;
        let mut t0: Option<(Instant, u64)> = None;
        let give_up = Instant::now() + Duration::from_secs_f64(secs * 20.0 + 30.0);
        loop {
            while written.load(Ordering::Acquire) <= k {
                if Instant::now() > give_up {
                    return Err(Error::Unsupported(
                        "measure reuse: the writer stopped advancing (is its CPU online?)".into(),
                    ));
                }
                wait();
            }
            let first = (k % chunks) as usize * PER;
            for b in 0..PER {
                let off = slots[first + b] * BLOCK_BYTES;
                // SAFETY: see `Ring`; the block lies inside the ring.
                let src = unsafe { std::slice::from_raw_parts(ring.0.add(off + offset), span) };
                copy(&mut dst[b * BLOCK_BYTES..b * BLOCK_BYTES + span], src);
            }
            std::hint::black_box(&dst);
            k += 1;
            read.store(k, Ordering::Release);
            match t0 {
                None if k >= warm => t0 = Some((Instant::now(), k)),
                Some((t, k0)) => {
                    let el = t.elapsed();
                    if el.as_secs_f64() >= secs {
                        return Ok((k - k0, el));
                    }
                }
                None => {}
            }
        }
    });
    let outcome = reader_handle
        .join()
        .map_err(|_| Error::Unsupported("measure reuse: the reader thread panicked".into()))
        .and_then(|r| r);
    stop.store(true, Ordering::Relaxed);
    let joined = handle
        .join()
        .map_err(|_| Error::Unsupported("measure reuse: the writer thread panicked".into()))?;
    drop(ring);
    joined?;
    let (n, el) = outcome?;
    let pages = n * CHUNK_PAGES;
    Ok(ReusePoint {
        distance_pages: chunks * CHUNK_PAGES,
        ns_per_page: el.as_secs_f64() * 1e9 / pages.max(1) as f64,
        pages,
    })
}

/// The time per 4 KiB page of copying a 64 KiB chunk between two buffers that stay in the
/// CPU's own caches, on `cpu`, timed for `secs` seconds: the copy's work at cache speed, which
/// the model counts in a workload's fixed work. What a reused page costs beyond it is the
/// cache term.
pub fn measure_hot_copy(cpu: u32, secs: f64) -> Result<f64> {
    if !(secs.is_finite() && secs > 0.0 && secs <= 600.0) {
        return Err(Error::invalid(
            "measure reuse",
            "--seconds",
            format!("must be in (0, 600], got {secs}"),
        ));
    }
    std::thread::spawn(move || -> Result<f64> {
        pin_current_thread(cpu)?;
        let src = PageAligned::new(CHUNK_BYTES, 7);
        let src = src.as_slice();
        let mut dst = PageAligned::new(CHUNK_BYTES, 0);
        let dst = dst.as_mut_slice();
        // Warm both buffers into the caches.
        for _ in 0..64 {
            copy(dst, src);
        }
        let t = Instant::now();
        let mut n: u64 = 0;
        while t.elapsed().as_secs_f64() < secs {
            for _ in 0..16 {
                copy(dst, std::hint::black_box(src));
                std::hint::black_box(&mut *dst);
            }
            n += 16;
        }
        Ok(t.elapsed().as_secs_f64() * 1e9 / (n * CHUNK_PAGES) as f64)
    })
    .join()
    .map_err(|_| Error::Unsupported("measure reuse: the copy thread panicked".into()))?
}

/// Per-level reuse costs fitted to measured times: `extra(d) = Σ P_level(d) · cost_level`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LevelFit {
    /// ns per page for lines in the consumer's private L2, the LLC and DRAM.
    pub ns_per_page: [f64; 3],
    /// Probability mass each level had over the distances (how well it is identified: a
    /// level below one distance's worth is not).
    pub support: [f64; 3],
    /// RMS of the residuals, ns per page.
    pub residual_rms_ns: f64,
}

/// The levels fitted at the LLC capacity the times show ([`fit_levels_and_llc`]).
#[derive(Debug)]
pub struct LlcFit {
    /// The LLC capacity fitted at, KiB (the nominal size, or less where that fits better).
    pub llc_kib: f64,
    /// The model's (private, LLC, DRAM) hit probabilities at each distance at that capacity.
    pub probs: Vec<[f64; 3]>,
    /// The costs per level at that capacity.
    pub levels: Result<LevelFit>,
    /// The residual at the nominal capacity, ns per page (None: no fit there).
    pub nominal_rms_ns: Option<f64>,
}

impl LlcFit {
    /// The capacity, where the times put it below the nominal `nominal_kib` (within 1 %: not).
    pub fn below_nominal(&self, nominal_kib: f64) -> Option<f64> {
        (self.llc_kib < nominal_kib * 0.99).then_some(self.llc_kib)
    }
}

/// The least drop in residual, ns per page, that lets [`fit_levels_and_llc`] put the LLC below
/// its nominal size.
pub const LLC_FIT_GAIN_NS: f64 = 0.1;

/// Steps of [`fit_levels_and_llc`]'s capacity scan below the nominal size: 2^(-k/4) for k in
/// 1..=20, down to 1/32 of it.
pub const LLC_SCAN_STEPS: i32 = 20;

/// [`fit_levels`] at LLC capacities from `nominal_kib` down to 1/32 of it (a VM shares its
/// host's LLC with other tenants): the capacity with the least residual is the one the times
/// show, and the costs are those fitted there. `h` is the hierarchy at the nominal capacity,
/// `distances` the rings measured (pages), `extra` the measured ns per page beyond a cached
/// copy at each (not finite: not measured there), `mlp` the lines in flight of the model.
pub fn fit_levels_and_llc(
    h: &crate::model::cache::Hierarchy,
    nominal_kib: f64,
    distances: &[u64],
    extra: &[f64],
    mlp: f64,
) -> LlcFit {
    use crate::model::cache::{page_access_cost, ReuseDist, PAGE_BYTES};
    let page_kib = PAGE_BYTES as f64 / 1024.0;
    let others_pages = h.any_cache_pages - nominal_kib / page_kib;
    let measured: Vec<usize> = (0..extra.len().min(distances.len()))
        .filter(|&i| extra[i].is_finite())
        .collect();
    let fit_at = |llc_kib: f64| {
        let mut hs = h.clone();
        hs.any_cache_pages = others_pages + llc_kib / page_kib;
        let probs: Vec<[f64; 3]> = distances
            .iter()
            .map(|&d| {
                let p =
                    page_access_cost(&hs, &ReuseDist::uniform(d as f64, d as f64), 0.0, mlp).probs;
                [p.private, p.llc, p.dram]
            })
            .collect();
        let levels = fit_levels(
            &measured.iter().map(|&i| probs[i]).collect::<Vec<_>>(),
            &measured.iter().map(|&i| extra[i]).collect::<Vec<_>>(),
        );
        LlcFit {
            llc_kib,
            probs,
            levels,
            nominal_rms_ns: None,
        }
    };
    let rms = |x: &LlcFit| {
        x.levels
            .as_ref()
            .map_or(f64::INFINITY, |f| f.residual_rms_ns)
    };
    let nominal = fit_at(nominal_kib);
    let nominal_rms_ns = nominal.levels.as_ref().ok().map(|f| f.residual_rms_ns);
    let scanned = (1..=LLC_SCAN_STEPS)
        .map(|k| fit_at(nominal_kib * 2f64.powf(-f64::from(k) / 4.0)))
        .min_by(|a, b| rms(a).total_cmp(&rms(b)));
    // A share below the nominal only where it fits clearly better: by 1 % of the residual and
    // 0.1 ns per page at least (far below what medians of timed copies resolve; equal times at
    // every distance fit any capacity alike, to rounding).
    let best = match scanned {
        Some(s) if rms(&s) < rms(&nominal) - (0.01 * rms(&nominal)).max(LLC_FIT_GAIN_NS) => s,
        _ => nominal,
    };
    LlcFit {
        nominal_rms_ns,
        ..best
    }
}

/// Non-negative least squares of `y ≈ P · c` over three levels, where row `i` of `probs` is
/// the model's (private, LLC, DRAM) hit probabilities at distance `i` and `y[i]` the measured
/// extra ns per page there. Exact for three unknowns: every subset of free levels is solved
/// and the feasible one with the least residual kept. Fails when a level has less than one
/// distance's worth of probability (no measurement can price it) or the inputs are not finite.
pub fn fit_levels(probs: &[[f64; 3]], y: &[f64]) -> Result<LevelFit> {
    use nalgebra::{DMatrix, DVector};
    let n = probs.len();
    if n != y.len() || n < 3 {
        return Err(Error::invalid(
            "measure reuse",
            "--distances",
            format!("{n} distance(s): the three levels need at least three"),
        ));
    }
    if y.iter()
        .chain(probs.iter().flatten())
        .any(|v| !v.is_finite())
    {
        return Err(Error::invalid(
            "measure reuse",
            "times",
            "a measured time or hit probability is not finite".to_string(),
        ));
    }
    let mut support = [0.0; 3];
    for row in probs {
        for (s, p) in support.iter_mut().zip(row) {
            *s += p;
        }
    }
    const NAMES: [&str; 3] = ["private L2", "LLC", "DRAM"];
    if let Some(j) = (0..3).find(|&j| support[j] < 1.0) {
        return Err(Error::invalid(
            "measure reuse",
            "--distances",
            format!(
                "no distance reuses pages mostly from the {} ({:.2} distances' worth): add distances there",
                NAMES[j], support[j]
            ),
        ));
    }
    let mut best: Option<([f64; 3], f64)> = None;
    for mask in 1u8..8 {
        let cols: Vec<usize> = (0..3).filter(|j| mask & (1 << j) != 0).collect();
        let a = DMatrix::from_fn(n, cols.len(), |i, k| probs[i][cols[k]]);
        let b = DVector::from_column_slice(y);
        let Ok(x) = a.clone().svd(true, true).solve(&b, 1e-12) else {
            continue;
        };
        if x.iter().any(|v| *v < 0.0 || !v.is_finite()) {
            continue;
        }
        let mut c = [0.0; 3];
        for (k, &j) in cols.iter().enumerate() {
            c[j] = x[k];
        }
        let r = (&a * &x - &b).norm_squared();
        if best.is_none_or(|(_, br)| r < br) {
            best = Some((c, r));
        }
    }
    // All-zero costs are feasible too (every measured extra at or below 0).
    let zero = y.iter().map(|v| v * v).sum::<f64>();
    let (c, r) = match best {
        Some((c, r)) if r <= zero => (c, r),
        _ => ([0.0; 3], zero),
    };
    Ok(LevelFit {
        ns_per_page: c,
        support,
        residual_rms_ns: (r / n as f64).sqrt(),
    })
}

/// The default distances, pages: 64 (inside one L2) to 65,536 (256 MiB, beyond any LLC).
pub const DEFAULT_DISTANCES: [u64; 8] = [64, 256, 1024, 2048, 4096, 8192, 16384, 65536];

/// Distances for a machine whose private level holds `private_pages` and whose caches hold
/// `any_cache_pages` in front of DRAM: [`DEFAULT_DISTANCES`] below a sixteenth of the caches,
/// then 1/8, 1/4, 1/2, 1, 2 and 4 times the caches (capped at [`MAX_RING_BYTES`]), so that the
/// LLC's capacity is seen where it ends (a VM may get less of it than its nominal size) and
/// the largest distances land in DRAM on any LLC (the fixed list stops at 256 MiB, inside a
/// 260 MiB LLC).
pub fn distances_for(private_pages: f64, any_cache_pages: f64) -> Vec<u64> {
    let max_pages = MAX_RING_BYTES / 4096;
    let caches = any_cache_pages.max(private_pages).max(1.0);
    let mut d: Vec<u64> = DEFAULT_DISTANCES
        .iter()
        .copied()
        .filter(|&x| (x as f64) < caches / 16.0)
        .collect();
    for k in [0.125, 0.25, 0.5, 1.0, 2.0, 4.0] {
        let x = ((caches * k) as u64).clamp(1, max_pages);
        if !d.contains(&x) {
            d.push(x);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run on CPU 0 for both sides (any host has it): every distance gives a finite
    /// time per page and the ring is at least the lead plus one chunk. No timing is checked.
    #[test]
    fn a_short_run_moves_pages() {
        let p = measure_distance(0, 0, 1, 0.01, Layout::Scattered, 0).unwrap();
        assert!(measure_distance(0, 0, 1, 0.01, Layout::Scattered, 5).is_ok());
        assert!(measure_distance(0, 0, 1, 0.01, Layout::Scattered, 64).is_err());
        assert_eq!(p.distance_pages, MIN_CHUNKS * CHUNK_PAGES);
        assert!(p.ns_per_page.is_finite() && p.ns_per_page > 0.0 && p.pages > 0);
        assert!(measure_distance(0, 0, 1 << 40, 0.01, Layout::Scattered, 0).is_err());
        assert!(measure_distance(0, 0, 64, f64::NAN, Layout::Sequential, 0).is_err());
        let c = measure_hot_copy(0, 0.01).unwrap();
        assert!(c.is_finite() && c > 0.0);
    }

    /// Times made from known level costs are fitted back exactly (the system is linear), a
    /// negative cost is clamped to zero, and a level no distance reaches is refused.
    #[test]
    fn the_llc_share_the_times_show_is_found() {
        // Times made by the model itself at a quarter of a 260 MiB LLC (private 150, LLC 160,
        // DRAM 330 ns per page): the scan finds that capacity (a step of the scan: 2^-8/4) and
        // the costs back, and at the nominal size fits worse.
        let m = crate::hw::machine::Machine::builtin("sapphire-rapids-2s-224").unwrap();
        let h = crate::model::cache::Hierarchy::from_machine(
            &m,
            crate::model::cache::Placement::SameLlc,
        )
        .unwrap();
        let nominal = m.llc().unwrap().size_kib.value as f64;
        let d = distances_for(h.private_pages, h.any_cache_pages);
        let mut quarter = h.clone();
        quarter.any_cache_pages -= 0.75 * nominal / 4.0; // KiB to 4 KiB pages
        let extra: Vec<f64> = d
            .iter()
            .map(|&x| {
                let u = crate::model::cache::ReuseDist::uniform(x as f64, x as f64);
                let p = crate::model::cache::hit_probs(&quarter, &u, 0.0);
                150.0 * p.private + 160.0 * p.llc + 330.0 * p.dram
            })
            .collect();
        let f = fit_levels_and_llc(&h, nominal, &d, &extra, 10.0);
        assert_eq!(f.below_nominal(nominal), Some(nominal / 4.0));
        let c = f.levels.as_ref().unwrap().ns_per_page;
        for (got, want) in c.iter().zip([150.0, 160.0, 330.0]) {
            assert!((got - want).abs() < 1e-6 * want, "{c:?}");
        }
        assert!(f.nominal_rms_ns.unwrap() > 1.0, "{:?}", f.nominal_rms_ns);
        // The same time at every distance fits any capacity alike: no share below the
        // nominal is claimed.
        let flat = vec![100.0; d.len()];
        let f = fit_levels_and_llc(&h, nominal, &d, &flat, 10.0);
        assert!(f.levels.is_ok());
        assert_eq!(f.below_nominal(nominal), None);
    }

    #[test]
    fn default_distances_reach_past_any_llc() {
        // A 32 MiB LLC + 512 KiB L2 (Zen 3): the fixed list below a sixteenth of the caches,
        // then 1/8 to 4 times them.
        let d = distances_for(128.0, 8320.0);
        assert_eq!(d, vec![64, 256, 1040, 2080, 4160, 8320, 16640, 33280]);
        // A 260 MiB LLC + 2 MiB L2 (Emerald Rapids): the largest two are past 1 GiB of data.
        let d = distances_for(512.0, 67072.0);
        assert!(d.iter().rev().take(2).all(|&x| x >= 134_144), "{d:?}");
        // Capped at the largest ring.
        let d = distances_for(512.0, 1e9);
        assert_eq!(*d.last().unwrap(), MAX_RING_BYTES / 4096);
    }

    #[test]
    fn scattered_slots_are_a_fixed_permutation() {
        let a = block_slots(4096, Layout::Scattered);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..4096).collect::<Vec<_>>());
        assert_eq!(
            a,
            block_slots(4096, Layout::Scattered),
            "the same layout every run"
        );
        // Scattered: few neighbours stay neighbours (a random permutation keeps about 1 in
        // 4096 of them; a streaming layout keeps all).
        let kept = a.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(kept < 40, "{kept} adjacent pairs kept");
        assert_eq!(
            block_slots(8, Layout::Sequential),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn levels_fit_back() {
        let probs = [
            [1.0, 0.0, 0.0],
            [0.5, 0.5, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.6, 0.4],
            [0.0, 0.0, 1.0],
        ];
        let truth = [150.0, 250.0, 400.0];
        let y: Vec<f64> = probs
            .iter()
            .map(|p| p.iter().zip(&truth).map(|(a, b)| a * b).sum())
            .collect();
        let f = fit_levels(&probs, &y).unwrap();
        for (a, b) in f.ns_per_page.iter().zip(&truth) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        assert!(f.residual_rms_ns < 1e-6);
        let y2: Vec<f64> = probs
            .iter()
            .map(|p| 300.0 * (p[1] + p[2]) - 50.0 * p[0])
            .collect();
        let f2 = fit_levels(&probs, &y2).unwrap();
        assert_eq!(f2.ns_per_page[0], 0.0);
        let only_near = [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.8, 0.2, 0.0]];
        assert!(fit_levels(&only_near, &[1.0, 2.0, 3.0]).is_err());
        assert!(fit_levels(&probs, &[f64::NAN, 1.0, 1.0, 1.0, 1.0]).is_err());
    }
}
