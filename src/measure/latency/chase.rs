//! Load-to-use latency by pointer chasing: the buffer, the cycle through it, the chase loop.

use std::time::Instant;

use super::super::Spread;
use crate::error::{Error, Result};
use crate::fit::stats::SplitMix64;

pub(super) const LINE: usize = 64;
const HUGE: usize = 2 << 20;

/// An anonymous mapping, 2 MiB aligned, unmapped on drop.
struct Buffer {
    map: *mut libc::c_void,
    map_len: usize,
    ptr: *mut u8,
    len: usize,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: map/map_len are exactly what mmap returned.
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

impl Buffer {
    /// Maps `len` bytes (rounded up to 2 MiB), advises huge pages or not, binds to `node` when
    /// given, and touches every page.
    fn new(len: usize, huge: bool, node: Option<u32>) -> Result<Buffer> {
        let len = len.div_ceil(HUGE) * HUGE;
        let map_len = len + HUGE;
        let map = crate::measure::map_anonymous(map_len, libc::MAP_PRIVATE, "pointer chase")?;
        let addr = map as usize;
        let ptr = (addr.div_ceil(HUGE) * HUGE) as *mut u8;
        let buf = Buffer {
            map,
            map_len,
            ptr,
            len,
        };
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: the range lies inside the mapping. Failure only means no THP: reported later.
        unsafe {
            libc::madvise(ptr.cast(), len, advice);
        }
        if let Some(n) = node {
            bind_to_node(ptr, len, n)?;
        }
        // SAFETY: inside the mapping; touching faults every page in.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(buf)
    }

    /// Share of the buffer backed by huge pages, from /proc/self/smaps (0 when unreadable).
    fn huge_fraction(&self) -> f64 {
        let Ok(text) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0.0;
        };
        let (lo, hi) = (self.ptr as usize, self.ptr as usize + self.len);
        let mut in_range = false;
        let mut huge_kib = 0u64;
        for line in text.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        in_range = a < hi && b > lo;
                        continue;
                    }
                }
            }
            if in_range {
                if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                    let kib: u64 = rest
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse()
                        .unwrap_or(0);
                    huge_kib += kib;
                }
            }
        }
        ((huge_kib * 1024) as f64 / self.len as f64).min(1.0)
    }
}

fn bind_to_node(ptr: *mut u8, len: usize, node: u32) -> Result<()> {
    const MPOL_BIND: libc::c_long = 2;
    let mut mask = [0u64; 16];
    if node as usize >= mask.len() * 64 {
        return Err(Error::Unsupported(format!("node {node} out of range")));
    }
    mask[node as usize / 64] |= 1 << (node % 64);
    // SAFETY: mbind on a range of our own mapping with a valid node mask.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            (mask.len() * 64) as libc::c_ulong,
            0u32,
        )
    };
    if rc != 0 {
        return Err(Error::Unsupported(format!(
            "mbind to node {node} failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// A uniformly random order of `lines` lines (Fisher-Yates): linked in this order they make
/// one cycle through every line.
pub(super) fn visit_order(lines: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    let mut order: Vec<u32> = (0..lines as u32).collect();
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// Links the buffer's first `lines` lines into one cycle in `order` (every line once) and
/// returns its start.
fn link_cycle(buf: &Buffer, order: &[u32]) -> *const usize {
    let base = buf.ptr as usize;
    for (k, &line) in order.iter().enumerate() {
        let next = order[(k + 1) % order.len()];
        // SAFETY: both lines lie inside the buffer (lines * 64 <= len), aligned to 8 bytes.
        unsafe {
            *((base + line as usize * LINE) as *mut usize) = base + next as usize * LINE;
        }
    }
    (base + order[0] as usize * LINE) as *const usize
}

/// Follows `n` (> 0) dependent pointers from `p`.
#[inline(never)]
fn chase(p: *const usize, n: u64) -> *const usize {
    let n = n.max(1);
    #[cfg(target_arch = "x86_64")]
    {
        let mut p = p;
        let mut n = n;
        // SAFETY: p starts a cycle of valid pointers inside a live buffer.
        unsafe {
            std::arch::asm!(
                "2:",
                "mov {p}, qword ptr [{p}]",
                "dec {n}",
                "jnz 2b",
                p = inout(reg) p,
                n = inout(reg) n,
                options(nostack, readonly),
            );
        }
        let _ = n;
        p
    }
    #[cfg(target_arch = "aarch64")]
    {
        let mut p = p;
        let mut n = n;
        // SAFETY: as above.
        unsafe {
            std::arch::asm!(
                "2:",
                "ldr {p}, [{p}]",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                p = inout(reg) p,
                n = inout(reg) n,
                options(nostack, readonly),
            );
        }
        let _ = n;
        p
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let mut p = p;
        for _ in 0..n {
            // SAFETY: as above.
            p = unsafe { std::ptr::read_volatile(p) } as *const usize;
        }
        p
    }
}

/// A working set linked into one cycle, ready to be chased in short timed trials.
pub(super) struct ChaseSet {
    buf: Buffer,
    pos: *const usize,
    /// Lines in the cycle.
    pub lines: u64,
}

impl ChaseSet {
    /// Maps `bytes` (huge pages asked for or refused, bound to `node` when given) and links its
    /// lines into one random cycle.
    pub fn new(bytes: u64, huge: bool, node: Option<u32>, seed: u64) -> Result<ChaseSet> {
        let bytes = (bytes as usize).max(2 * LINE);
        let buf = Buffer::new(bytes, huge, node)?;
        let order = visit_order(bytes / LINE, seed);
        let pos = link_cycle(&buf, &order);
        Ok(ChaseSet {
            buf,
            pos,
            lines: order.len() as u64,
        })
    }

    /// Follows `n` pointers untimed (brings the set back into the caches it fits in).
    pub fn warm(&mut self, n: u64) {
        self.pos = chase(self.pos, n);
    }

    /// Follows `n` pointers and returns ns per load.
    pub fn time(&mut self, n: u64) -> f64 {
        let t = Instant::now();
        self.pos = chase(self.pos, n);
        let ns = t.elapsed().as_nanos() as f64 / n.max(1) as f64;
        std::hint::black_box(self.pos);
        ns
    }

    /// Share of the buffer backed by huge pages (0..1).
    pub fn huge_fraction(&self) -> f64 {
        self.buf.huge_fraction()
    }
}

/// Measures ns per dependent load over a working set of `bytes` in one go: a warm-up pass, then
/// `repeats` timed runs of `loads` loads (a uniformly random cycle). `measure` uses short
/// interleaved trials instead; this is the simple form for callers that want one number.
pub fn load_latency(
    bytes: u64,
    huge: bool,
    node: Option<u32>,
    loads: u64,
    repeats: usize,
    seed: u64,
) -> Result<(Spread, f64)> {
    let mut set = ChaseSet::new(bytes, huge, node, seed)?;
    set.warm(set.lines.max(loads / 4));
    let samples: Vec<f64> = (0..repeats.max(1)).map(|_| set.time(loads)).collect();
    let spread = Spread::of(&samples)
        .ok_or_else(|| Error::Unsupported("no latency sample could be taken".into()))?;
    Ok((spread, set.huge_fraction()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_visits_every_line() {
        let lines = 1000;
        let mut set = ChaseSet::new(64 * lines, false, None, 7).unwrap();
        let start = set.pos;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..lines {
            assert!(seen.insert(set.pos as usize));
            set.warm(1);
        }
        assert_eq!(set.pos, start, "one cycle through all {lines} lines");
    }
}
