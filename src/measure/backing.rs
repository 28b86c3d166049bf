//! What a hypervisor adds to the first touch of a guest page it dropped.
//!
//! A VM with free page reporting (virtio-balloon; `/sys/module/page_reporting`) hands free buddy
//! blocks of `2^page_reporting_order` pages and up to the host, which drops them; the next touch
//! of such a page faults in the host, which allocates, zeroes and maps host memory. A per-CPU
//! list that grows (a larger pcp->high, a list refilling after the vmstat decay drained it)
//! pulls its pages from the buddy allocator, and on such a VM many of them are dropped ones.
//!
//! The measurement populates an anonymous region (`MAP_POPULATE`: the kernel allocates and
//! zeroes every page inside one call, no user fault per page) once from memory that has been
//! free for a while, then again right after freeing it (the same pages, now backed): the
//! difference per page is the host's part. Needs no root and changes nothing.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};

/// Where the kernel's free page reporting keeps its parameters.
const REPORTING: &str = "sys/module/page_reporting/parameters";

/// One `measure backing` run.
#[derive(Debug, Clone, Serialize)]
pub struct BackingRun {
    /// Region populated per pass, MiB.
    pub mib: u64,
    /// First pass (pages free for a while), ns per 4 KiB page.
    pub fresh_ns_per_page: f64,
    /// The first pass by [`CHUNK_MIB`] chunks in the order the kernel handed them out, ns per
    /// 4 KiB page (empty where the kernel cannot populate a range: before 5.14): free memory
    /// the host still backs comes first, dropped memory after it.
    pub fresh_chunks_ns_per_page: Vec<f64>,
    /// MiB at the start of the first pass that cost no more than 1.5 x the later passes'
    /// median: free memory the host still backed.
    pub backed_head_mib: u64,
    /// The first pass's chunks after that head, less the later passes' median: what a page the
    /// host dropped costs, ns per 4 KiB page (None when no chunk was dropped memory).
    pub dropped_ns_per_page: Option<f64>,
    /// The passes right after (the pages the previous pass freed), ns per 4 KiB page.
    pub again_ns_per_page: Vec<f64>,
    /// Fresh minus the median of the later passes (at least 0), ns per 4 KiB page.
    pub backing_ns_per_page: f64,
    /// `page_reporting_order` where free page reporting is present.
    pub reporting_order: Option<u32>,
    /// MiB the guest had reported to the host since boot when the run started.
    pub reported_mib_before: Option<f64>,
}

/// The kernel's free page reporting order under `root` (`/` on the host), if reporting is on.
pub fn reporting_order(root: &Path) -> Option<u32> {
    std::fs::read_to_string(root.join(REPORTING).join("page_reporting_order"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn reported_mib(root: &Path) -> Option<f64> {
    let kib: f64 = std::fs::read_to_string(root.join(REPORTING).join("reported_kib"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// The first pass's chunk, MiB.
pub const CHUNK_MIB: u64 = 64;

/// Populates `mib` MiB of anonymous memory in [`CHUNK_MIB`] chunks (`MADV_POPULATE_WRITE`) and
/// frees it: ns per 4 KiB page of each chunk; `None` where the kernel has no such advice.
fn populate_chunks(mib: u64) -> Result<Option<Vec<f64>>> {
    let len = usize::try_from(mib << 20)
        .map_err(|_| Error::Unsupported(format!("{mib} MiB does not fit this address space")))?;
    let p = super::map_anonymous(len, libc::MAP_PRIVATE, "measure backing")?;
    let chunk = (CHUNK_MIB << 20) as usize;
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < len {
        let n = chunk.min(len - off);
        let t = Instant::now();
        // SAFETY: the range lies inside the mapping made above.
        let r =
            unsafe { libc::madvise(p.cast::<u8>().add(off).cast(), n, libc::MADV_POPULATE_WRITE) };
        if r != 0 {
            // SAFETY: `p` is the mapping of `len` bytes made above.
            unsafe { libc::munmap(p, len) };
            return Ok(None);
        }
        out.push(t.elapsed().as_secs_f64() * 1e9 / (n / 4096) as f64);
        off += n;
    }
    // SAFETY: `p` is the mapping of `len` bytes made above.
    unsafe { libc::munmap(p, len) };
    Ok(Some(out))
}

/// Populates `mib` MiB of anonymous memory in one call and frees it: ns per 4 KiB page.
fn populate(mib: u64) -> Result<f64> {
    let len = usize::try_from(mib << 20)
        .map_err(|_| Error::Unsupported(format!("{mib} MiB does not fit this address space")))?;
    let t = Instant::now();
    let p = super::map_anonymous(
        len,
        libc::MAP_PRIVATE | libc::MAP_POPULATE,
        "measure backing",
    )?;
    let dt = t.elapsed().as_secs_f64();
    // SAFETY: `p` is the mapping of `len` bytes made above.
    unsafe { libc::munmap(p, len) };
    Ok(dt * 1e9 / (len / 4096) as f64)
}

/// The first pass's chunks split at the first one dearer than 1.5 x `backed` (the later
/// passes' median, ns per page): how many came before it, and the median of the rest less
/// `backed` (what a dropped page costs; None when every chunk was backed memory).
pub fn split_chunks(chunks: &[f64], backed: f64) -> (usize, Option<f64>) {
    let head = chunks.iter().take_while(|&&c| c <= 1.5 * backed).count();
    let mut tail: Vec<f64> = chunks[head..].to_vec();
    tail.sort_by(f64::total_cmp);
    let dropped = (!tail.is_empty()).then(|| (tail[tail.len() / 2] - backed).max(0.0));
    (head, dropped)
}

/// Populates `mib` MiB once, then `again` more times in a row; `root` is where /sys is read.
pub fn measure(root: &Path, mib: u64, again: usize) -> Result<BackingRun> {
    let reported_mib_before = reported_mib(root);
    let t = Instant::now();
    let (fresh, chunks) = match populate_chunks(mib)? {
        Some(c) => (
            t.elapsed().as_secs_f64() * 1e9 / ((mib << 20) / 4096) as f64,
            c,
        ),
        None => (populate(mib)?, Vec::new()),
    };
    let mut again_ns = Vec::with_capacity(again);
    for _ in 0..again.max(1) {
        again_ns.push(populate(mib)?);
    }
    let mut sorted = again_ns.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let (head, dropped) = split_chunks(&chunks, median);
    Ok(BackingRun {
        mib,
        fresh_ns_per_page: fresh,
        backed_head_mib: (head as u64 * CHUNK_MIB).min(mib),
        dropped_ns_per_page: dropped,
        fresh_chunks_ns_per_page: chunks,
        again_ns_per_page: again_ns,
        backing_ns_per_page: (fresh - median).max(0.0),
        reporting_order: reporting_order(root),
        reported_mib_before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_region_populates_and_the_difference_is_not_negative() {
        let r = measure(Path::new("/nonexistent-root"), 4, 2).unwrap();
        assert!(r.fresh_ns_per_page > 0.0 && r.fresh_ns_per_page.is_finite());
        assert_eq!(r.again_ns_per_page.len(), 2);
        assert!(r.backing_ns_per_page >= 0.0);
        assert_eq!(r.reporting_order, None);
        assert_eq!(r.reported_mib_before, None);
    }

    #[test]
    fn chunks_split_where_dropped_memory_begins() {
        // 1.1 us a page while the host still backs the memory, 12 us after: the shape the Zen 4
        // VM showed (2.6 GiB backed, then dropped pages).
        let chunks = [1100.0, 1150.0, 1080.0, 12_500.0, 11_900.0, 12_100.0];
        let (head, dropped) = split_chunks(&chunks, 1100.0);
        assert_eq!(head, 3);
        assert_eq!(dropped, Some(11_000.0));
        assert_eq!(split_chunks(&chunks[..3], 1100.0), (3, None));
    }

    #[test]
    fn the_reporting_order_is_read_from_sysfs() {
        let d = std::env::temp_dir().join(format!("pcpmodel-backing-{}", std::process::id()));
        let p = d.join(REPORTING);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("page_reporting_order"), "9\n").unwrap();
        std::fs::write(p.join("reported_kib"), "2048\n").unwrap();
        assert_eq!(reporting_order(&d), Some(9));
        assert_eq!(reported_mib(&d), Some(2.0));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
