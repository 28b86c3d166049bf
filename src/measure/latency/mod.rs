//! Load-to-use latency by pointer chasing, core-to-core latency by cache-line ping-pong, and the
//! LLC's inclusivity from CPUID.
//!
//! # Method
//! - **Load-to-use** (`chase`): one pointer per 64-byte line, the lines linked into one random
//!   cycle, so every load depends on the previous one and the prefetchers cannot guess the next
//!   line. The chase loop is a few instructions of inline assembly on x86_64 and aarch64.
//!   Working sets: half the L1d; a quarter of the L2, at least four L1s (a cyclic pass over four
//!   times the L1 evicts its lines before their reuse; a quarter leaves the rest of the L2 to
//!   an SMT sibling the guest cannot see: on the 2-vCPU cloud VM a 256 KiB set in the 512 KiB L2
//!   measured 4.9-6.8 ns and a 384 KiB one 6.7-7.3 ns, run to run, against 3.92-3.96 ns, twelve
//!   cycles, for 128 KiB); four L2s for the LLC (capped at half of it); eight times the LLC (at
//!   least 256 MiB) for DRAM. The order is uniformly random over all lines: a page-local order
//!   (each 4 KiB page's lines before the next page's) spares the TLB but lets the prefetchers
//!   in: on Zen 3 it measured the 2 MiB LLC set at 6.4 ns instead of 17.4 ns. Up to the LLC set
//!   the TLB is no issue there (4 KiB and 2 MiB pages measured the same). Buffers are 2 MiB
//!   aligned and `madvise(MADV_HUGEPAGE)`d (the share that got huge pages is read back from
//!   /proc/self/smaps); DRAM is measured again with 4 KiB pages: the difference is the page
//!   walk, kept apart from the DRAM latency.
//! - **Core-to-core** (`c2c`): two threads pinned with `sched_setaffinity` hand one cache line
//!   back and forth (`lock cmpxchg`); one-way = round trip / 2, the convention of
//!   `models/README.md`. One pair class per relation the topology has.
//! - **Inclusivity**: CPUID deterministic cache parameters, EDX bit 1 of the LLC's entry.
//!
//! # Estimator
//! The measurement runs in rounds; each round runs every level's short trials (after a warm-up
//! pass over its set) and then a few short ping-pong windows per CPU pair, all pinned to one
//! CPU. A level's value is the median of its round medians: a trial disturbed by preemption,
//! an interrupt or a neighbour's burst is one outlier among many, and a slow drift of the
//! machine (other tenants, vCPU placement) reaches every level alike instead of the one
//! measured at that moment. Its 95 % confidence interval comes from order statistics (no
//! assumption about the distribution). Core-to-core windows are split into modes
//! ([`c2c::modes`]): on a virtual machine the two vCPUs may sit on SMT siblings, on cores that
//! share an L3, or on different L3s, and the hypervisor moves them; the dominant mode is the
//! value, the other is reported.

mod c2c;
mod chase;
mod report;
mod topo;

use std::path::Path;

use serde::Serialize;

use super::Spread;
use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use chase::ChaseSet;

pub use c2c::{modes, ping_pong, Mode};
pub use chase::load_latency;
pub use report::{repeat_check, Estimate, RepeatRow, REPEAT_TOLERANCE_PCT};
pub use topo::{
    allowed_cpus, host_cpus, llc_inclusive_cpuid, pair_classes, pin_current_thread,
    set_allowed_cpus, set_fifo, HostCpu,
};

/// Timed trials of every level per round.
const TRIALS_PER_ROUND: usize = 5;
/// Ping-pong windows per CPU pair per round.
const WINDOWS_PER_ROUND: usize = 4;
/// Round trips per ping-pong window: 2000 transfers, 0.1-0.5 ms at 50-250 ns, short enough that
/// a window rarely straddles a preemption or a vCPU move.
const ROUND_TRIPS_PER_WINDOW: u64 = 1000;

/// What to measure and how long.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// Half the loads per trial and one CPU pair per class.
    pub quick: bool,
    /// Rounds of interleaved trials (every level's median is the median of its round medians).
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
            repeats: 101,
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
    /// Dependent loads per trial.
    pub loads: u64,
    /// Timed trials per round.
    pub trials_per_round: usize,
    /// ns per load: spread of the round medians (its median is the value).
    pub ns: Spread,
    /// The value with its confidence interval and the spread of single trials.
    pub estimate: Estimate,
}

/// One core-to-core pair class.
#[derive(Debug, Clone, Serialize)]
pub struct C2cRow {
    /// `smt`, `same_llc`, `cross_llc`, `cross_socket`.
    pub class: &'static str,
    /// The CPU pairs measured.
    pub pairs: Vec<(u32, u32)>,
    /// Round trips per window.
    pub round_trips: u64,
    /// One-way transfer (round trip / 2), ns, over all windows of all pairs.
    pub ns: Spread,
    /// The modes of the windows, dominant first (two when the placement changed).
    pub modes: Vec<Mode>,
    /// The dominant mode's windows: its median is the value.
    pub estimate: Estimate,
}

impl C2cRow {
    /// The value: the dominant mode's median one-way transfer, ns.
    pub fn value(&self) -> f64 {
        self.estimate.value
    }
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
    /// Rounds of interleaved trials.
    pub rounds: usize,
    /// Load-to-use rows, innermost first.
    pub loads: Vec<LoadRow>,
    /// Core-to-core rows.
    pub c2c: Vec<C2cRow>,
    /// LLC inclusivity.
    pub llc_inclusive: Inclusivity,
    /// Whether the CPU says it runs under a hypervisor (the `hypervisor` CPUID flag).
    pub virtualized: bool,
    /// Load average (1 min) and runnable tasks when the run started.
    pub load_before: Option<(f64, u32)>,
    /// Statements about what could not be measured or how to read it.
    pub notes: Vec<String>,
}

/// Load average (1 min) and running tasks from /proc/loadavg.
pub fn loadavg() -> Option<(f64, u32)> {
    let t = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = t.split_whitespace();
    let l1: f64 = it.next()?.parse().ok()?;
    let running: u32 = it.nth(2)?.split('/').next()?.parse().ok()?;
    Some((l1, running))
}

/// Whether /proc/cpuinfo (below `root`) lists the `hypervisor` flag.
fn virtualized(root: &Path) -> bool {
    std::fs::read_to_string(root.join("proc/cpuinfo")).is_ok_and(|t| {
        t.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

/// Progress callback: (step name, steps done, steps in total).
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize);

/// The chased sets, every level's trials per round, every class's ping-pong windows.
type Samples = (Vec<ChaseSet>, Vec<Vec<Vec<f64>>>, Vec<Vec<f64>>);

/// One level to chase.
struct Level {
    name: String,
    bytes: u64,
    huge: bool,
    node: Option<u32>,
    /// Fits in the caches: warmed with two full passes before each round's trials.
    fits: bool,
    loads: u64,
}

/// Measures the host described by `machine` (from `detect`) and sysfs below `root`.
pub fn measure(
    machine: &Machine,
    root: &Path,
    cfg: &LatencyConfig,
    progress: Progress<'_>,
) -> Result<LatencyReport> {
    let load_before = loadavg();
    let size = |level: u8| machine.cache(level).map(|c| c.size_bytes());
    let l1 = size(1).unwrap_or(32 << 10);
    let l2 = size(2).unwrap_or(1 << 20);
    let llc = machine
        .llc_index()
        .map(|i| machine.caches[i].size_bytes())
        .unwrap_or(32 << 20);
    let llc_total = llc * u64::from(machine.llc_domains().max(1));
    let dram = (8 * llc_total).max(256 << 20);
    let scale = if cfg.quick { 2 } else { 1 };
    let rounds = cfg.repeats.max(1);
    let cpus = host_cpus(root)?;
    let nodes: Vec<u32> = {
        let mut n: Vec<u32> = cpus.iter().map(|c| c.node).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    let classes = pair_classes(&cpus, if cfg.quick { 1 } else { 3 });
    let level = |name: &str, bytes: u64, huge, node, fits, loads: u64| Level {
        name: name.into(),
        bytes,
        huge,
        node,
        fits,
        loads: loads / scale,
    };
    let mut plan = vec![
        level("L1", l1 / 2, true, None, true, 200_000),
        // A quarter of the L2, at least four L1s: see the module's doc for why.
        level("L2", (l2 / 4).max(4 * l1), true, None, true, 100_000),
        // Four L2s' worth (capped at half the LLC): past every private level, yet far enough
        // below the LLC that other tenants of a shared LLC (a cloud host's neighbours) do not
        // evict the set between rounds; at LLC/2 this VM measured 113-131 ns, close to DRAM.
        level(
            "LLC",
            (4 * l2).min(llc / 2).max(l2 * 2),
            true,
            None,
            true,
            40_000,
        ),
        level("DRAM", dram, true, None, false, 8_000),
        level("DRAM 4K pages", dram, false, None, false, 8_000),
    ];
    if nodes.len() > 1 {
        for &n in &nodes {
            plan.push(level(
                &format!("DRAM node {n}"),
                dram,
                true,
                Some(n),
                false,
                8_000,
            ));
        }
    }
    let saved = allowed_cpus();
    let first_cpu = cpus.first().map_or(0, |c| c.cpu);
    let mut notes = Vec::new();
    if cfg.realtime {
        // Threads created from here on inherit the policy (PTHREAD_INHERIT_SCHED).
        if let Err(e) = set_fifo(true) {
            notes.push(format!(
                "SCHED_FIFO refused ({e}): measured under time sharing"
            ));
        }
    }
    let run = (|| -> Result<Samples> {
        pin_current_thread(first_cpu)?;
        let mut sets = Vec::new();
        for (i, l) in plan.iter().enumerate() {
            progress(&format!("mapping {}", l.name), 0, rounds);
            let seed = cfg.seed.wrapping_add(i as u64);
            sets.push(ChaseSet::new(l.bytes, l.huge, l.node, seed)?);
        }
        // trials[level][round] = that round's trials.
        let mut trials = vec![Vec::with_capacity(rounds); plan.len()];
        let mut windows = vec![Vec::new(); classes.len()];
        for r in 0..rounds {
            progress("interleaved trials", r, rounds);
            for k in 0..plan.len() {
                // Rotate the order so no level always follows the same one.
                let i = (k + r) % plan.len();
                let (l, set) = (&plan[i], &mut sets[i]);
                set.warm(if l.fits { 2 * set.lines } else { 2_000 });
                trials[i].push((0..TRIALS_PER_ROUND).map(|_| set.time(l.loads)).collect());
            }
            for (c, (_, pairs)) in classes.iter().enumerate() {
                for &(a, b) in pairs {
                    let w = ping_pong(a, b, ROUND_TRIPS_PER_WINDOW / scale, WINDOWS_PER_ROUND)?;
                    windows[c].extend(w);
                }
            }
        }
        Ok((sets, trials, windows))
    })();
    set_allowed_cpus(&saved);
    if cfg.realtime {
        let _ = set_fifo(false);
    }
    let (sets, trials, windows) = run?;
    progress("done", rounds, rounds);
    let mut loads = Vec::new();
    for ((l, set), per_round) in plan.into_iter().zip(&sets).zip(trials) {
        let round_medians: Vec<f64> = per_round
            .iter()
            .filter_map(|t| Spread::of(t).map(|s| s.median))
            .collect();
        let all: Vec<f64> = per_round.concat();
        let no_sample = || Error::Unsupported(format!("no latency sample for {}", l.name));
        loads.push(LoadRow {
            ns: Spread::of(&round_medians).ok_or_else(no_sample)?,
            estimate: Estimate::of(&round_medians, &all).ok_or_else(no_sample)?,
            level: l.name,
            bytes: l.bytes,
            huge_fraction: set.huge_fraction(),
            huge_requested: l.huge,
            loads: l.loads,
            trials_per_round: TRIALS_PER_ROUND,
        });
    }
    let mut c2c = Vec::new();
    for ((class, pairs), w) in classes.into_iter().zip(windows) {
        let no_sample = || Error::Unsupported(format!("no core-to-core sample for {class}"));
        let m = modes(&w);
        let dominant = report::dominant_windows(&w, &m);
        c2c.push(C2cRow {
            class,
            pairs,
            round_trips: ROUND_TRIPS_PER_WINDOW / scale,
            ns: Spread::of(&w).ok_or_else(no_sample)?,
            estimate: Estimate::of(&dominant, &w).ok_or_else(no_sample)?,
            modes: m,
        });
    }
    let virt = virtualized(root);
    notes.extend(report::notes(&loads, &c2c, virt));
    if cpus.len() < 2 {
        notes.push("one CPU online: no core-to-core measurement".into());
    }
    Ok(LatencyReport {
        date: super::today_utc(),
        rounds,
        loads,
        c2c,
        llc_inclusive: llc_inclusive_cpuid(),
        virtualized: virt,
        load_before,
        notes,
    })
}
