//! Load-to-use latency by pointer chasing, core-to-core latency by cache-line ping-pong, and the
//! LLC's inclusivity from CPUID.
//!
//! # Method
//! - **Load-to-use**: one pointer per 64-byte line, the lines linked into one random cycle
//!   (Sattolo's algorithm), so every load depends on the previous one and the hardware
//!   prefetchers cannot guess the next line. The chase loop is a few instructions of inline
//!   assembly on x86_64 and aarch64, so the result does not depend on the optimisation level
//!   (a debug build spills the pointer to the stack). Working sets: half the L1d, three
//!   quarters of the L2, half of one LLC instance, and eight times the LLC (at least 256 MiB)
//!   for DRAM. Buffers are 2 MiB aligned and `madvise(MADV_HUGEPAGE)`d, so a few TLB entries
//!   cover them; the fraction that really got huge pages is read back from /proc/self/smaps
//!   and reported. The DRAM set is measured again with `MADV_NOHUGEPAGE` (4 KiB pages): the
//!   difference is the page walk, kept apart from the DRAM latency.
//! - **Core-to-core**: two threads pinned with `sched_setaffinity` hand one cache line back and
//!   forth: each waits (reading) until the line holds its turn's value, then `lock cmpxchg`es it
//!   to the next. A round trip is two transfers; the value reported is round trip / 2 (one-way),
//!   the convention of `models/README.md`. One pair class per relation the topology has:
//!   SMT siblings, same LLC, another LLC of the socket, another socket.
//! - **Inclusivity**: CPUID deterministic cache parameters (leaf 4 on Intel, 0x8000001D on AMD),
//!   EDX bit 1 of the level-3 entry. A 0 says "not inclusive"; whether the LLC is a victim cache
//!   or merely non-inclusive is not in CPUID and is kept from the microarchitecture.
//!
//! Every value is the median of `repeats` runs, with quartiles and extremes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use serde::Serialize;

use super::Spread;
use crate::error::{Error, Result};
use crate::fit::stats::SplitMix64;
use crate::hw::detect::parse_cpulist;
use crate::hw::machine::{Machine, Policy};
use crate::hw::provenance::Sourced;

const LINE: usize = 64;
const HUGE: usize = 2 << 20;

/// What to measure and how long.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// Fewer loads and round trips per repeat (seconds in total instead of tens of seconds).
    pub quick: bool,
    /// Repeats of every measurement (median and spread over them).
    pub repeats: usize,
    /// Seed of the random permutations.
    pub seed: u64,
    /// Run the measuring threads SCHED_FIFO (priority 1, needs root): on a busy machine the
    /// time-sharing scheduler otherwise preempts them mid-measurement. The kernel's RT
    /// throttling (sched_rt_runtime_us) still leaves the rest of the machine 5 % of each second.
    pub realtime: bool,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig {
            quick: false,
            repeats: 7,
            seed: 0x5eed,
            realtime: false,
        }
    }
}

/// One load-to-use measurement.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    /// `L1`, `L2`, `LLC`, `DRAM`, `DRAM 4K pages`, `DRAM node N`.
    pub level: String,
    /// Working set, bytes.
    pub bytes: u64,
    /// Share of the buffer the kernel backed with huge pages (0..1), from /proc/self/smaps.
    pub huge_fraction: f64,
    /// Whether huge pages were asked for.
    pub huge_requested: bool,
    /// Dependent loads per repeat.
    pub loads: u64,
    /// ns per load over the repeats.
    pub ns: Spread,
}

/// One core-to-core pair class.
#[derive(Debug, Clone, Serialize)]
pub struct C2cRow {
    /// `smt`, `same_llc`, `cross_llc`, `cross_socket`.
    pub class: &'static str,
    /// The CPU pairs measured.
    pub pairs: Vec<(u32, u32)>,
    /// Round trips per repeat.
    pub round_trips: u64,
    /// One-way transfer (round trip / 2), ns, over all repeats of all pairs.
    pub ns: Spread,
}

/// The LLC's inclusivity as far as it could be told.
#[derive(Debug, Clone, Serialize)]
pub struct Inclusivity {
    /// `Some(true)` inclusive, `Some(false)` not inclusive, `None` unknown.
    pub inclusive: Option<bool>,
    /// How it was found (or why not).
    pub how: String,
}

/// Everything `measure latency` found.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// Date of the run (UTC).
    pub date: String,
    /// Load-to-use rows, innermost first.
    pub loads: Vec<LoadRow>,
    /// Core-to-core rows.
    pub c2c: Vec<C2cRow>,
    /// LLC inclusivity.
    pub llc_inclusive: Inclusivity,
    /// Load average (1 min) and runnable tasks when the run started.
    pub load_before: Option<(f64, u32)>,
    /// Statements about what could not be measured.
    pub notes: Vec<String>,
}

// ----- memory ----------------------------------------------------------------------------------

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
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::Unsupported(format!(
                "mmap of {} MiB failed: {}",
                map_len >> 20,
                std::io::Error::last_os_error()
            )));
        }
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

/// Links the buffer's lines into one random cycle (Sattolo) and returns the start.
fn link_cycle(buf: &Buffer, bytes: usize, seed: u64) -> *const usize {
    let lines = (bytes / LINE).max(2);
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..lines).rev() {
        let j = (rng.next_u64() % i as u64) as usize;
        order.swap(i, j);
    }
    // order is a random cyclic permutation: line k points to line order[k].
    let base = buf.ptr as usize;
    for (k, &next) in order.iter().enumerate() {
        // SAFETY: both lines lie inside the buffer (lines * 64 <= len), aligned to 8 bytes.
        unsafe {
            *((base + k * LINE) as *mut usize) = base + next as usize * LINE;
        }
    }
    base as *const usize
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

/// Measures ns per dependent load over a working set of `bytes`.
pub fn load_latency(
    bytes: u64,
    huge: bool,
    node: Option<u32>,
    loads: u64,
    repeats: usize,
    seed: u64,
) -> Result<(Spread, f64)> {
    let bytes = (bytes as usize).max(2 * LINE);
    let buf = Buffer::new(bytes, huge, node)?;
    let start = link_cycle(&buf, bytes, seed);
    // Warm up: one pass over the cycle brings the set into the caches it fits in.
    let lines = (bytes / LINE) as u64;
    let mut p = chase(start, lines.max(loads / 4));
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        p = chase(p, loads);
        samples.push(t.elapsed().as_nanos() as f64 / loads as f64);
    }
    std::hint::black_box(p);
    let spread = Spread::of(&samples)
        .ok_or_else(|| Error::Unsupported("no latency sample could be taken".into()))?;
    Ok((spread, buf.huge_fraction()))
}

// ----- affinity --------------------------------------------------------------------------------

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET bounds-checks the index.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error::Unsupported(format!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// The calling thread's allowed CPUs.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: sched_getaffinity fills a zeroed set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// Restores the calling thread's affinity to `cpus` (best effort).
pub fn set_allowed_cpus(cpus: &[u32]) {
    // SAFETY: as in pin_current_thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Switches the calling thread to SCHED_FIFO priority 1 (`on`) or back to SCHED_OTHER.
pub fn set_fifo(on: bool) -> std::result::Result<(), std::io::Error> {
    let param = libc::sched_param {
        sched_priority: i32::from(on),
    };
    let policy = if on {
        libc::SCHED_FIFO
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: a valid sched_param for the policy; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

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

// ----- topology --------------------------------------------------------------------------------

/// One online CPU as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCpu {
    /// Logical CPU number.
    pub cpu: u32,
    /// physical_package_id.
    pub package: i64,
    /// SMT siblings (thread_siblings_list), including itself.
    pub siblings: Vec<u32>,
    /// CPUs sharing its last-level cache, including itself.
    pub llc: Vec<u32>,
    /// NUMA node.
    pub node: u32,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Online CPUs from sysfs below `root` (`/` for the host).
pub fn host_cpus(root: &Path) -> Result<Vec<HostCpu>> {
    let online_rel = "sys/devices/system/cpu/online";
    let online = read(root, online_rel).ok_or_else(|| {
        Error::io(
            root.join(online_rel).display().to_string(),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let cpus = parse_cpulist(&online, online_rel, "online")?;
    let mut nodes: Vec<(u32, Vec<u32>)> = Vec::new();
    for n in 0..1024u32 {
        if let Some(t) = read(root, &format!("sys/devices/system/node/node{n}/cpulist")) {
            nodes.push((
                n,
                parse_cpulist(&t, "node cpulist", "cpulist").unwrap_or_default(),
            ));
        }
    }
    let mut out = Vec::new();
    for cpu in cpus {
        let base = format!("sys/devices/system/cpu/cpu{cpu}");
        let package = read(root, &format!("{base}/topology/physical_package_id"))
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let siblings = read(root, &format!("{base}/topology/thread_siblings_list"))
            .and_then(|t| parse_cpulist(&t, "thread_siblings_list", "siblings").ok())
            .unwrap_or_else(|| vec![cpu]);
        let mut llc = vec![cpu];
        let mut best_level = 0;
        for i in 0..8 {
            let Some(level) = read(root, &format!("{base}/cache/index{i}/level"))
                .and_then(|t| t.trim().parse::<u32>().ok())
            else {
                continue;
            };
            let kind = read(root, &format!("{base}/cache/index{i}/type")).unwrap_or_default();
            if level > best_level && kind.trim() != "Instruction" {
                if let Some(l) = read(root, &format!("{base}/cache/index{i}/shared_cpu_list"))
                    .and_then(|t| parse_cpulist(&t, "shared_cpu_list", "llc").ok())
                {
                    best_level = level;
                    llc = l;
                }
            }
        }
        let node = nodes
            .iter()
            .find(|(_, l)| l.contains(&cpu))
            .map_or(0, |(n, _)| *n);
        out.push(HostCpu {
            cpu,
            package,
            siblings,
            llc,
            node,
        });
    }
    Ok(out)
}

/// The pair classes of a topology, innermost first, each with up to `per_class` CPU pairs.
pub fn pair_classes(cpus: &[HostCpu], per_class: usize) -> Vec<(&'static str, Vec<(u32, u32)>)> {
    let names = ["smt", "same_llc", "cross_llc", "cross_socket"];
    let mut classes: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 4];
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            let k = if a.siblings.contains(&b.cpu) {
                0
            } else if a.llc.contains(&b.cpu) {
                1
            } else if a.package == b.package {
                2
            } else {
                3
            };
            // Spread the sample: skip pairs that reuse a CPU already in the class when possible.
            if classes[k].len() < per_class
                && !classes[k]
                    .iter()
                    .any(|&(x, y)| x == a.cpu || y == b.cpu || x == b.cpu || y == a.cpu)
            {
                classes[k].push((a.cpu, b.cpu));
            }
        }
    }
    names
        .into_iter()
        .zip(classes)
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

// ----- CPUID -----------------------------------------------------------------------------------

/// The LLC's inclusive bit from CPUID's deterministic cache parameters.
pub fn llc_inclusive_cpuid() -> Inclusivity {
    #[cfg(target_arch = "x86_64")]
    {
        #![allow(unused_unsafe)] // __cpuid_count is safe from Rust 1.87, unsafe before
        use std::arch::x86_64::__cpuid_count;
        // SAFETY: CPUID exists on every x86_64 CPU; leaves are checked against the maximum.
        let (max_basic, vendor_amd, max_ext, topoext) = unsafe {
            let l0 = __cpuid_count(0, 0);
            let amd = l0.ebx == 0x6874_7541 || l0.ebx == 0x6f67_7948; // "Auth", "Hygo"
            let e0 = __cpuid_count(0x8000_0000, 0);
            let topoext =
                e0.eax >= 0x8000_0001 && (__cpuid_count(0x8000_0001, 0).ecx >> 22) & 1 == 1;
            (l0.eax, amd, e0.eax, topoext)
        };
        let leaf = if vendor_amd {
            if max_ext < 0x8000_001D || !topoext {
                return Inclusivity {
                    inclusive: None,
                    how: "CPUID 0x8000001D (cache topology) not offered by this CPU".into(),
                };
            }
            0x8000_001Du32
        } else {
            if max_basic < 4 {
                return Inclusivity {
                    inclusive: None,
                    how: "CPUID leaf 4 not offered by this CPU".into(),
                };
            }
            4
        };
        let mut best: Option<(u32, u32, u32)> = None; // (level, subleaf, edx)
        for sub in 0..16 {
            // SAFETY: as above.
            let r = unsafe { __cpuid_count(leaf, sub) };
            let kind = r.eax & 0x1f;
            if kind == 0 {
                break;
            }
            let level = (r.eax >> 5) & 7;
            if (kind == 1 || kind == 3) && best.is_none_or(|(l, _, _)| level > l) {
                best = Some((level, sub, r.edx));
            }
        }
        match best {
            Some((level, sub, edx)) => {
                let bit = (edx >> 1) & 1 == 1;
                Inclusivity {
                    inclusive: Some(bit),
                    how: format!(
                        "CPUID leaf {leaf:#x} subleaf {sub} (L{level}), EDX bit 1 (inclusive) = {}",
                        u8::from(bit)
                    ),
                }
            }
            None => Inclusivity {
                inclusive: None,
                how: format!("CPUID leaf {leaf:#x} lists no data cache"),
            },
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Inclusivity {
            inclusive: None,
            how: "not an x86 CPU: no CPUID inclusive bit; unknown".into(),
        }
    }
}

// ----- the whole measurement ---------------------------------------------------------------------

/// Load average (1 min) and running tasks from /proc/loadavg.
pub fn loadavg() -> Option<(f64, u32)> {
    let t = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = t.split_whitespace();
    let l1: f64 = it.next()?.parse().ok()?;
    let running: u32 = it.nth(2)?.split('/').next()?.parse().ok()?;
    Some((l1, running))
}

/// Progress callback: (step name, steps done, steps in total).
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize);

/// Measures the host described by `machine` (from `detect`) and sysfs below `root`.
pub fn measure(
    machine: &Machine,
    root: &Path,
    cfg: &LatencyConfig,
    progress: Progress<'_>,
) -> Result<LatencyReport> {
    let load_before = loadavg();
    let kib = |level: u8| machine.cache(level).map(|c| c.size_bytes());
    let l1 = kib(1).unwrap_or(32 << 10);
    let l2 = kib(2).unwrap_or(1 << 20);
    let llc = machine
        .llc_index()
        .map(|i| machine.caches[i].size_bytes())
        .unwrap_or(32 << 20);
    let llc_total = llc * u64::from(machine.llc_domains().max(1));
    let dram = (8 * llc_total).max(256 << 20);
    let scale = if cfg.quick { 4 } else { 1 };
    let reps = cfg.repeats.max(1);
    let cpus = host_cpus(root)?;
    let nodes: Vec<u32> = {
        let mut n: Vec<u32> = cpus.iter().map(|c| c.node).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    let classes = pair_classes(&cpus, if cfg.quick { 1 } else { 3 });
    let mut plan: Vec<(String, u64, bool, Option<u32>, u64)> = vec![
        ("L1".into(), l1 / 2, true, None, 40_000_000 / scale),
        ("L2".into(), l2 * 3 / 4, true, None, 20_000_000 / scale),
        // Four L2s' worth (capped at half the LLC): past every private level, yet far enough
        // below the LLC that other tenants of a shared LLC (a cloud host's neighbours) do not
        // evict the set between rounds; at LLC/2 this VM measured 113-131 ns, close to DRAM.
        (
            "LLC".into(),
            (4 * l2).min(llc / 2).max(l2 * 2),
            true,
            None,
            8_000_000 / scale,
        ),
        ("DRAM".into(), dram, true, None, 2_000_000 / scale),
        ("DRAM 4K pages".into(), dram, false, None, 2_000_000 / scale),
    ];
    if nodes.len() > 1 {
        for &n in &nodes {
            plan.push((
                format!("DRAM node {n}"),
                dram,
                true,
                Some(n),
                2_000_000 / scale,
            ));
        }
    }
    let total = plan.len() + classes.len();
    let mut done = 0;
    let saved = allowed_cpus();
    let first_cpu = cpus.first().map_or(0, |c| c.cpu);
    pin_current_thread(first_cpu)?;
    let mut notes = Vec::new();
    if cfg.realtime {
        // Threads created from here on inherit the policy (PTHREAD_INHERIT_SCHED).
        if let Err(e) = set_fifo(true) {
            notes.push(format!(
                "SCHED_FIFO refused ({e}): measured under time sharing"
            ));
        }
    }
    let mut loads = Vec::new();
    let mut result = Ok(());
    for (i, (level, bytes, huge, node, n)) in plan.into_iter().enumerate() {
        progress(&format!("load-to-use {level}"), done, total);
        match load_latency(bytes, huge, node, n, reps, cfg.seed.wrapping_add(i as u64)) {
            Ok((ns, hf)) => loads.push(LoadRow {
                level,
                bytes,
                huge_fraction: hf,
                huge_requested: huge,
                loads: n,
                ns,
            }),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        done += 1;
    }
    set_allowed_cpus(&saved);
    if result.is_err() && cfg.realtime {
        let _ = set_fifo(false);
    }
    result?;
    let mut c2c = Vec::new();
    let trips = 40_000 / scale;
    // More, shorter repeats: a preempted repeat on a shared machine is one outlier, not a bias.
    let c2c_reps = (reps * 3).max(5);
    for (class, pairs) in classes {
        progress(&format!("core-to-core {class}"), done, total);
        let mut samples = Vec::new();
        for &(a, b) in &pairs {
            samples.extend(ping_pong(a, b, trips, c2c_reps)?);
        }
        let ns = Spread::of(&samples)
            .ok_or_else(|| Error::Unsupported(format!("no core-to-core sample for {class}")))?;
        c2c.push(C2cRow {
            class,
            pairs,
            round_trips: trips,
            ns,
        });
        done += 1;
    }
    if cfg.realtime {
        let _ = set_fifo(false);
    }
    progress("done", total, total);
    for r in &loads {
        if r.huge_requested && r.huge_fraction < 0.9 {
            notes.push(format!(
                "{}: only {:.0} % of the buffer got huge pages (THP off or fragmented memory): \
                 its latency includes TLB misses",
                r.level,
                100.0 * r.huge_fraction
            ));
        }
    }
    if !c2c.iter().any(|r| r.class == "smt") {
        notes.push("no SMT siblings online: c2c_smt not measured".into());
    }
    if cpus.len() < 2 {
        notes.push("one CPU online: no core-to-core measurement".into());
    }
    Ok(LatencyReport {
        date: super::today_utc(),
        loads,
        c2c,
        llc_inclusive: llc_inclusive_cpuid(),
        load_before,
        notes,
    })
}

impl LatencyReport {
    fn load(&self, level: &str) -> Option<&LoadRow> {
        self.loads.iter().find(|r| r.level == level)
    }

    fn class(&self, class: &str) -> Option<&C2cRow> {
        self.c2c.iter().find(|r| r.class == class)
    }

    /// Writes the measured values into `m` with `measured: pcpmodel measure <date>, ...`
    /// provenance; returns the dotted fields replaced. Fails (naming the field) when the
    /// measured values break the machine's ordering rules (e.g. an LLC latency above DRAM).
    pub fn apply_to(&self, m: &mut Machine) -> Result<Vec<String>> {
        let mut set = Vec::new();
        let load_src = |r: &LoadRow| {
            format!(
                "measured: pcpmodel measure {}, pointer chase over a random cycle of 64-byte \
                 lines in {} KiB ({}; {:.0} % huge pages), {}",
                self.date,
                r.bytes >> 10,
                if r.huge_requested {
                    "MADV_HUGEPAGE"
                } else {
                    "4 KiB pages"
                },
                100.0 * r.huge_fraction,
                r.ns.describe(2, "ns")
            )
        };
        let c2c_src = |r: &C2cRow| {
            format!(
                "measured: pcpmodel measure {}, cache-line ping-pong (lock cmpxchg) between \
                 pinned CPUs {}, one-way = round trip / 2, {} round trips per repeat, {}",
                self.date,
                r.pairs
                    .iter()
                    .map(|(a, b)| format!("{a}-{b}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                r.round_trips,
                r.ns.describe(1, "ns")
            )
        };
        let lat = &mut m.latency_ns;
        if let Some(r) = self.load("L2") {
            lat.l2_hit = Sourced::new(round2(r.ns.median), load_src(r));
            set.push("latency_ns.l2_hit".to_string());
        }
        if let Some(r) = self.load("LLC") {
            lat.llc_hit = Sourced::new(round2(r.ns.median), load_src(r));
            set.push("latency_ns.llc_hit".into());
        }
        if let Some(r) = self.load("DRAM") {
            lat.dram_local = Sourced::new(round2(r.ns.median), load_src(r));
            set.push("latency_ns.dram_local".into());
        }
        if let Some(r) = self.class("same_llc") {
            lat.c2c_same_llc = Sourced::new(round2(r.ns.median), c2c_src(r));
            set.push("latency_ns.c2c_same_llc".into());
        }
        if let Some(r) = self.class("smt") {
            lat.c2c_smt = Sourced::new(round2(r.ns.median), c2c_src(r));
            set.push("latency_ns.c2c_smt".into());
        } else if lat.c2c_smt.value > lat.c2c_same_llc.value {
            lat.c2c_smt = Sourced::new(
                lat.c2c_same_llc.value,
                "derived: no SMT siblings to measure; set to the measured c2c_same_llc (unused \
                 without SMT)",
            );
        }
        if let (Some(r), Some(_)) = (self.class("cross_llc"), &lat.c2c_cross_llc) {
            lat.c2c_cross_llc = Some(Sourced::new(round2(r.ns.median), c2c_src(r)));
            set.push("latency_ns.c2c_cross_llc".into());
        }
        if let (Some(r), Some(_)) = (self.class("cross_socket"), &lat.c2c_cross_socket) {
            lat.c2c_cross_socket = Some(Sourced::new(round2(r.ns.median), c2c_src(r)));
            set.push("latency_ns.c2c_cross_socket".into());
        }
        // Remote DRAM: the slowest other node seen from node 0's first CPU.
        let remote = self
            .loads
            .iter()
            .filter(|r| r.level.starts_with("DRAM node ") && r.level != "DRAM node 0")
            .max_by(|a, b| a.ns.median.total_cmp(&b.ns.median));
        if let (Some(r), Some(_)) = (remote, &lat.dram_remote) {
            lat.dram_remote = Some(Sourced::new(round2(r.ns.median), load_src(r)));
            set.push("latency_ns.dram_remote".into());
        }
        if let Some(i) = m.llc_index() {
            let inc = &self.llc_inclusive;
            let policy = &mut m.caches[i].policy;
            match inc.inclusive {
                Some(true) => {
                    *policy = Sourced::new(Policy::Inclusive, format!("detected: {}", inc.how));
                    set.push("cache.policy (LLC)".into());
                }
                Some(false) => {
                    let kept = if policy.value == Policy::Inclusive {
                        Policy::NonInclusive
                    } else {
                        policy.value
                    };
                    *policy = Sourced::new(
                        kept,
                        format!(
                            "detected: {}: not inclusive; victim vs non-inclusive is not in \
                             CPUID, {} kept from the microarchitecture",
                            inc.how,
                            kept.as_str()
                        ),
                    );
                    set.push("cache.policy (LLC)".into());
                }
                None => {}
            }
        }
        m.name = "host-measured".into();
        m.description = format!(
            "{} measured by `pcpmodel measure latency --toml` on {}",
            m.cpu.model.value, self.date
        );
        m.validate("measured machine")?;
        Ok(set)
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_visits_every_line() {
        let bytes = 64 * 1000;
        let buf = Buffer::new(bytes, false, None).unwrap();
        let start = link_cycle(&buf, bytes, 7);
        let mut p = start;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(p as usize));
            p = chase(p, 1);
        }
        assert_eq!(p, start, "one cycle through all 1000 lines");
    }

    #[test]
    fn pair_classes_from_topology() {
        let cpu = |cpu, package, siblings: Vec<u32>, llc: Vec<u32>| HostCpu {
            cpu,
            package,
            siblings,
            llc,
            node: package as u32,
        };
        // 2 sockets x 2 LLCs x 1 core x 2 threads.
        let cpus: Vec<HostCpu> = (0..8)
            .map(|c| {
                let core = c / 2;
                cpu(
                    c,
                    i64::from(c / 4),
                    vec![core * 2, core * 2 + 1],
                    vec![core * 2, core * 2 + 1],
                )
            })
            .collect();
        let classes = pair_classes(&cpus, 1);
        let names: Vec<&str> = classes.iter().map(|c| c.0).collect();
        assert_eq!(names, ["smt", "cross_llc", "cross_socket"]);
        assert_eq!(classes[0].1, [(0, 1)]);
        assert_eq!(classes[1].1, [(0, 2)]);
        assert_eq!(classes[2].1, [(0, 4)]);
    }
}
