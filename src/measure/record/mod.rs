//! `pcpmodel record`: a workload's page flow on this host from the kmem tracepoints, written as
//! a flow file ([`flow`]) that `replay` runs through the model's kernel rules at other settings.
//!
//! The recording enables the kmem events ([`parse::EVENTS`]) through tracefs (mounting it if no
//! mount is found), streams `trace_pipe` into per-CPU runs while the command runs (or for the
//! given seconds), and reads each zone's pagesets from /proc/zoneinfo before and after. Every
//! tracefs file it changes is restored on every exit path ([`tracefs::TracefsGuard`]); the
//! binary's SIGINT/SIGTERM handler restores through the same guard, and `--recover` replays the
//! journal a SIGKILL leaves.

pub mod flow;
pub mod parse;
pub mod tracefs;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use flow::{FlowEnd, FlowMeta, FlowOut, FlowWriter, Pagesets, ZoneSpans};
use parse::{Grouper, EVENTS, MARKER_EVENTS};
use tracefs::TracefsGuard;

/// Default journal of the tracefs guard.
pub const DEFAULT_JOURNAL: &str = "/var/tmp/pcpmodel-record.journal";

/// Where tracefs is looked for, in order.
const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// tracefs directory (`None`: find it, or mount it at /sys/kernel/tracing).
    pub tracefs: Option<PathBuf>,
    /// Root of /proc (zoneinfo, sys/kernel/osrelease, the sysctls).
    pub proc_root: PathBuf,
    /// /sys/devices/system/cpu (each CPU's caches).
    pub cpu_root: PathBuf,
    /// Seconds to record: the whole recording without a command, at most this with one.
    pub seconds: Option<f64>,
    /// The command to run and record (empty: the whole system).
    pub command: Vec<String>,
    /// Keep only these CPUs' events (empty: all).
    pub cpus: Vec<u32>,
    /// Per-CPU trace buffer, KiB.
    pub buffer_kb: u64,
    /// The flow file to write.
    pub output: PathBuf,
    /// Journal of the tracefs guard.
    pub journal: PathBuf,
    /// Drain every pageset to its `high_max` before the start pagesets are read
    /// ([`settle_pagesets`]).
    pub settle: bool,
    /// Bring every CPU's lists down to the smallest high right before the start pagesets are
    /// read ([`drain_pagesets`]).
    pub drain_first: bool,
}

/// A recording set up: the guard holds the journal, nothing in tracefs changed yet.
pub struct Prepared {
    cfg: RecordConfig,
    tracefs: PathBuf,
    meta: FlowMeta,
    /// The guard (shared with the signal handler).
    pub guard: Arc<TracefsGuard>,
    /// What an earlier run's journal restored.
    pub recovered: Option<tracefs::Recovered>,
}

/// The result of a recording.
#[derive(Debug, Clone, Serialize)]
pub struct RecordSummary {
    /// The flow file written.
    pub output: String,
    /// Its size, bytes.
    pub bytes: u64,
    /// The recording's circumstances.
    pub meta: FlowMeta,
    /// Totals per CPU.
    pub end: FlowEnd,
    /// The command's exit status (`None`: no command, or stopped at --seconds).
    pub command_status: Option<i32>,
    /// Trace lines that were no event of the recording.
    pub skipped_lines: u64,
    /// Blocks taken under zone->lock not for the per-CPU lists.
    pub direct_zone_locked: u64,
    /// Frees in interrupt context while the CPU's pcp lock was held (to the buddy allocator).
    pub frees_direct: u64,
}

fn read_trim(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::io(path.display().to_string(), e))
}

/// The flow file's temporary name while it is written.
pub fn partial_path(output: &Path) -> PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// Per CPU, the last-level data or unified cache's size over the CPUs sharing it, bytes: the
/// kernel's `per_cpu_data_slice_size` (drivers/base/cacheinfo.c). CPUs whose sysfs does not
/// say are left out.
fn data_slices(cpu_root: &Path) -> std::collections::BTreeMap<String, u64> {
    use crate::hw::detect::sysfs::{parse_cpulist, parse_size_kib};
    let mut out = std::collections::BTreeMap::new();
    let Ok(dirs) = std::fs::read_dir(cpu_root) else {
        return out;
    };
    for d in dirs.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        let Some(cpu) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(indexes) = std::fs::read_dir(d.path().join("cache")) else {
            continue;
        };
        let mut last: Option<(u32, u64, usize)> = None;
        for i in indexes.flatten() {
            let p = i.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
            let (Some(ty), Some(level), Some(size), Some(shared)) = (
                read("type"),
                read("level"),
                read("size"),
                read("shared_cpu_list"),
            ) else {
                continue;
            };
            if !matches!(ty.trim(), "Data" | "Unified") {
                continue;
            }
            let label = p.display().to_string();
            let (Ok(level), Ok(kib), Ok(cpus)) = (
                level.trim().parse::<u32>(),
                parse_size_kib(&size, &label),
                parse_cpulist(&shared, &label, "shared_cpu_list"),
            ) else {
                continue;
            };
            if last.is_none_or(|l| level > l.0) {
                last = Some((level, kib * 1024, cpus.len()));
            }
        }
        if let Some((_, bytes, n)) = last.filter(|l| l.2 > 0) {
            out.insert(cpu.to_string(), bytes / n as u64);
        }
    }
    out
}

fn zoneinfo(proc_root: &Path) -> Result<Pagesets> {
    let z = crate::kernel::zoneinfo::read_zoneinfo(&proc_root.join("zoneinfo"))?;
    Ok(flow::pagesets_of(&z))
}

/// `vm.stat_refresh` writes [`settle_pagesets`] makes at most. Each write drains a pageset
/// whose live high is above `high_min` by at most `batch << CONFIG_PCP_BATCH_SCALE_MAX` pages
/// (`decay_pcp_high()`: 2016 at batch 63), so a pageset left at 500,000 pages takes about 250;
/// the loop also stops as soon as a write drains nothing.
const SETTLE_WRITES: u32 = 4096;

/// Pagesets whose `(value, limit)` by `pick` has the value above the limit:
/// (zone/cpu, value, limit).
fn over(
    p: &Pagesets,
    pick: impl Fn(&flow::PagesetValues) -> Option<(i64, i64)>,
) -> Vec<(String, u64, u64)> {
    let mut v = Vec::new();
    for (zone, z) in p {
        for (cpu, c) in &z.cpus {
            let Some((value, limit)) = pick(c) else {
                continue;
            };
            let (value, limit) = (value.max(0) as u64, limit.max(0) as u64);
            if value > limit {
                v.push((format!("{zone} cpu {cpu}"), value, limit));
            }
        }
    }
    v
}

/// Pagesets holding more than their `high_max`: (zone/cpu, count, high_max). Kernels before
/// 6.7 print no high_max: their pcp->high is the one limit.
fn over_high_max(p: &Pagesets) -> Vec<(String, u64, u64)> {
    over(p, |c| Some((c.count, c.high_max.unwrap_or(c.high))))
}

/// Auto-tuned pagesets whose live high is above their `high_min`: (zone/cpu, high, high_min).
/// An idle CPU's high decays there (`decay_pcp_high()`, by an eighth per vmstat tick); a high
/// left up by the previous setting or workload would let the next run's lists grow at once.
/// Kernels before 6.7 print no high_min: nothing auto-tunes there.
fn above_high_min(p: &Pagesets) -> Vec<(String, u64, u64)> {
    over(p, |c| c.high_min.map(|m| (c.high, m)))
}

/// Lets each CPU's lists reach the state an idle CPU reaches at the current sysctl before the
/// recording starts. Lowering `vm.percpu_pagelist_high_fraction` changes `high_min`/`high_max`
/// but frees nothing: the lists keep what the last setting let them hold, and until the vmstat
/// worker's `decay_pcp_high()` drains them, every free of the recorded workload drains too (a
/// transient of the previous setting, not a property of the workload at this one). Raising it
/// back to the default (0) leaves the live high where the fixed setting put it (the sysctl sets
/// only `high_min`/`high_max`), so the run starts with lists allowed to hold what the last
/// setting allowed. Writing `/proc/sys/vm/stat_refresh` runs that decay on every CPU now; it is
/// repeated until no pageset holds more than its `high_max` and no auto-tuned high is above its
/// `high_min`. Nothing is changed that needs restoring. Returns what was done for the flow's
/// meta (`None`: nothing to settle, or no stat_refresh file under this /proc root).
pub fn settle_pagesets(proc_root: &Path) -> Result<Option<String>> {
    let file = proc_root.join("sys/vm/stat_refresh");
    if !file.exists() {
        return Ok(None);
    }
    let label = file.display().to_string();
    let start = zoneinfo(proc_root)?;
    let first = over_high_max(&start);
    let first_high = above_high_min(&start);
    if first.is_empty() && first_high.is_empty() {
        return Ok(None);
    }
    let excess_of = |v: &[(String, u64, u64)]| v.iter().map(|(_, c, h)| c - h).sum::<u64>();
    let mut writes = 0;
    let mut left = first.clone();
    let mut left_high = first_high.clone();
    while (!left.is_empty() || !left_high.is_empty()) && writes < SETTLE_WRITES {
        let before = excess_of(&left) + excess_of(&left_high);
        // Opened without create: a /proc root without the file was handled above.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map_err(|e| Error::io(&label, e))?;
        std::io::Write::write_all(&mut f, b"1").map_err(|e| Error::io(&label, e))?;
        writes += 1;
        let now = zoneinfo(proc_root)?;
        left = over_high_max(&now);
        left_high = above_high_min(&now);
        if excess_of(&left) + excess_of(&left_high) >= before {
            break;
        }
    }
    let excess = excess_of(&first);
    let mut said = if first.is_empty() {
        String::new()
    } else {
        format!(
            "{} pageset(s) held {excess} pages over their high_max before the start; ",
            first.len()
        )
    };
    if !first_high.is_empty() {
        said.push_str(&format!(
            "{} auto-tuned pageset(s) had their live high up to {} pages above high_min; ",
            first_high.len(),
            first_high.iter().map(|(_, h, m)| h - m).max().unwrap_or(0)
        ));
    }
    said.push_str(&format!(
        "{writes} vm.stat_refresh write(s) (decay_pcp_high() on every CPU) settled them"
    ));
    let example = |v: &[(String, u64, u64)]| format!("e.g. {}: {} over {}", v[0].0, v[0].1, v[0].2);
    if !left.is_empty() {
        said.push_str(&format!(
            " except {} pageset(s) ({})",
            left.len(),
            example(&left)
        ));
    }
    if !left_high.is_empty() {
        said.push_str(&format!(
            "; {} high(s) still above high_min ({})",
            left_high.len(),
            example(&left_high)
        ));
    }
    Ok(Some(said))
}

/// Finds tracefs: (directory, whether it must be mounted there first).
fn locate_tracefs(given: Option<&Path>) -> Result<(PathBuf, bool)> {
    if let Some(d) = given {
        if !d.join("trace_pipe").exists() {
            return Err(Error::Unsupported(format!(
                "{}: no trace_pipe there (not a tracefs directory)",
                d.display()
            )));
        }
        return Ok((d.to_path_buf(), false));
    }
    for d in TRACEFS_DIRS {
        if Path::new(d).join("trace_pipe").exists() {
            return Ok((PathBuf::from(d), false));
        }
    }
    Ok((PathBuf::from(TRACEFS_DIRS[0]), true))
}

/// Pages on every pageset's lists.
fn pages_held(p: &Pagesets) -> i64 {
    p.values()
        .flat_map(|z| z.cpus.values())
        .map(|c| c.count.max(0))
        .sum()
}

/// The largest `vm.percpu_pagelist_high_fraction`: every zone's high then comes out below
/// `batch << 2`, the floor `zone_highsize()` keeps, so that is the high.
const SMALLEST_HIGH_FRACTION: i64 = i32::MAX as i64;

/// Brings every CPU's lists down to the smallest high the kernel allows (`batch << 2`, 252
/// pages at batch 63), whatever ran before: `vm.percpu_pagelist_high_fraction` is set to its
/// largest value for a moment, [`settle_pagesets`] runs `decay_pcp_high()` until no list is
/// above that high, and the sysctl goes back (through the guard, so it comes back on any exit
/// in between; after that the recorded command may set it as it likes). The lists keep at
/// most `batch << 2` pages, on the last lists of the kernel's round-robin (the decay drains
/// from the first). Recordings at several settings then start
/// alike, and a replay at another setting starts as they do. Returns what was done, for the
/// flow's meta.
pub fn drain_pagesets(proc_root: &Path, guard: &TracefsGuard) -> Result<String> {
    let fraction = proc_root.join("sys/vm/percpu_pagelist_high_fraction");
    for f in [&fraction, &proc_root.join("sys/vm/stat_refresh")] {
        if !f.exists() {
            return Err(Error::Unsupported(format!(
                "--drain-first: {} is missing (the lists are brought down through vm.percpu_pagelist_high_fraction and vm.stat_refresh's decay_pcp_high(), Linux 6.7 and later)",
                f.display()
            )));
        }
    }
    let before = pages_held(&zoneinfo(proc_root)?);
    let original = read_trim(&fraction)?;
    guard.set(&fraction, &SMALLEST_HIGH_FRACTION.to_string())?;
    let settled = settle_pagesets(proc_root);
    guard.put_back(&fraction)?;
    let settled = settled?;
    let after = pages_held(&zoneinfo(proc_root)?);
    Ok(format!(
        "the lists held {before} pages, and {after} after decay_pcp_high() at the smallest high (batch x 4; vm.percpu_pagelist_high_fraction {SMALLEST_HIGH_FRACTION} for a moment, then {original} again{})",
        settled.map_or(String::new(), |s| format!(": {s}"))
    ))
}

/// The sysctls that decide a recorded flow, by name, from `proc_root` (absent ones left out).
fn read_sysctls(proc_root: &Path) -> Result<std::collections::BTreeMap<String, i64>> {
    let mut sysctl = std::collections::BTreeMap::new();
    for (name, rel) in [
        (
            "vm.percpu_pagelist_high_fraction",
            "sys/vm/percpu_pagelist_high_fraction",
        ),
        ("net.core.skb_defer_max", "sys/net/core/skb_defer_max"),
    ] {
        let p = proc_root.join(rel);
        if p.exists() {
            let v = read_trim(&p)?;
            let n = v.parse::<i64>().map_err(|_| {
                Error::parse(
                    p.display().to_string(),
                    1,
                    name,
                    format!("'{v}' is not a number"),
                )
            })?;
            sysctl.insert(name.to_string(), n);
        }
    }
    Ok(sysctl)
}

/// The value each sysctl held at most of the samples, for those that ever differed from
/// `start` (a recorded command that sets its own sysctl, as `measure pcp --skb-defer-max 0`
/// does, runs its workload under that value, not the one read before it started).
fn sysctls_changed(
    start: &std::collections::BTreeMap<String, i64>,
    samples: &std::collections::BTreeMap<String, std::collections::BTreeMap<i64, u64>>,
) -> std::collections::BTreeMap<String, i64> {
    samples
        .iter()
        .filter(|(name, seen)| seen.keys().any(|v| start.get(*name) != Some(v)))
        .filter_map(|(name, seen)| {
            seen.iter()
                .max_by_key(|(_, n)| **n)
                .map(|(v, _)| (name.clone(), *v))
        })
        .collect()
}

impl Prepared {
    /// Checks everything the recording needs and takes the guard (replaying an earlier run's
    /// journal first). Changes nothing in tracefs but a mount, when none is found.
    pub fn new(cfg: RecordConfig) -> Result<Prepared> {
        if let Some(s) = cfg.seconds {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::Unsupported(format!(
                    "--seconds {s}: give a positive time"
                )));
            }
        }
        if cfg.command.is_empty() && cfg.seconds.is_none() {
            return Err(Error::Unsupported(
                "record: give a command after -- or --seconds for the whole system".into(),
            ));
        }
        let kernel = read_trim(&cfg.proc_root.join("sys/kernel/osrelease"))?;
        crate::kernel::version::KernelVersion::parse_release(&kernel)?;
        let sysctl = read_sysctls(&cfg.proc_root)?;
        let (dir, mount) = locate_tracefs(cfg.tracefs.as_deref())?;
        // SAFETY: geteuid has no preconditions.
        if cfg.tracefs.is_none() && unsafe { libc::geteuid() } != 0 {
            return Err(Error::Unsupported(
                "recording the kmem tracepoints needs root (tracefs); `cargo test` uses a fake tracefs directory"
                    .into(),
            ));
        }
        // Read here only to fail before anything changes; the flow's start pagesets are read
        // in `run`, once the ring buffer is allocated.
        zoneinfo(&cfg.proc_root)?;
        if mount {
            tracefs::mount_tracefs(&dir)?;
        }
        let (guard, recovered) = TracefsGuard::acquire(&cfg.journal, mount.then(|| dir.clone()))
            .inspect_err(|_| {
                if mount {
                    let _ = tracefs::unmount(&dir);
                }
            })?;
        let guard = Arc::new(guard);
        let mut events = Vec::new();
        for ev in EVENTS {
            let p = dir.join("events/kmem").join(ev).join("enable");
            if p.exists() {
                events.push(ev.to_string());
            } else {
                return Err(Error::Unsupported(format!(
                    "{}: this kernel has no {ev} event (the recording needs {})",
                    p.display(),
                    EVENTS.join(", ")
                )));
            }
        }
        // Markers where the kernel has them: without them direct frees inside a batched free
        // are not told apart (those after a refill or a drain still are).
        for ev in MARKER_EVENTS {
            if dir.join("events/kmem").join(ev).join("enable").exists() {
                events.push(ev.to_string());
            }
        }
        let meta = FlowMeta {
            kernel,
            date_utc: crate::measure::today_utc(),
            command: cfg.command.clone(),
            cpus: cfg.cpus.clone(),
            sysctl,
            events,
            buffer_size_kb: cfg.buffer_kb,
            data_slice_bytes: data_slices(&cfg.cpu_root),
            settled: None,
            drained: None,
        };
        Ok(Prepared {
            cfg,
            tracefs: dir,
            meta,
            guard,
            recovered,
        })
    }

    /// Records: enables the events, runs the command (or waits), streams the trace into the
    /// flow file, restores tracefs. `progress(seconds, lines so far)` is called about ten times
    /// a second.
    pub fn run(self, progress: &mut dyn FnMut(f64, u64)) -> Result<RecordSummary> {
        let Prepared {
            cfg,
            tracefs: dir,
            mut meta,
            guard,
            ..
        } = self;
        let partial = partial_path(&cfg.output);
        let label = cfg.output.display().to_string();
        let gz = cfg.output.extension().is_some_and(|e| e == "gz");
        guard.set(&dir.join("tracing_on"), "0")?;
        guard.set(&dir.join("buffer_size_kb"), &cfg.buffer_kb.to_string())?;
        for ev in &meta.events {
            guard.set(&dir.join("events/kmem").join(ev).join("enable"), "1")?;
        }
        // Empty the ring buffer (not a setting: nothing to restore).
        if dir.join("trace").exists() {
            std::fs::write(dir.join("trace"), "")
                .map_err(|e| Error::io(dir.join("trace").display().to_string(), e))?;
        }
        // The output and the reader are set up before the start pagesets are read: whatever
        // allocates pages between that read and tracing_on (a gzip encoder's state, a thread's
        // stack) moves the lists' counts unseen, and a list near its high then drains earlier
        // or later than its replay. The reader gets the start pagesets once tracing is on.
        let out = FlowOut::create(&partial, gz)?;
        let stop = Arc::new(AtomicBool::new(false));
        let lines = Arc::new(AtomicU64::new(0));
        let (started, start_rx) = std::sync::mpsc::channel::<(FlowMeta, Pagesets)>();
        let reader = {
            let (stop, lines) = (Arc::clone(&stop), Arc::clone(&lines));
            let pipe = dir.join("trace_pipe");
            let cpus = cfg.cpus.clone();
            let label = label.clone();
            std::thread::spawn(move || {
                let (meta, start) = start_rx.recv().map_err(|_| {
                    Error::Unsupported("the recording stopped before tracing started".into())
                })?;
                let writer = FlowWriter::new(out, &label, &meta, &start)?;
                stream(&pipe, &cpus, ZoneSpans::of(&start), writer, &stop, &lines)
            })
        };
        // The start pagesets, read last before tracing starts: resizing the ring buffer
        // allocated (or freed) buffer_size_kb per CPU through these same lists, so a count read
        // before it is not the one the recorded stream starts from.
        let begun = (|| {
            if cfg.settle {
                meta.settled = settle_pagesets(&cfg.proc_root)?;
            }
            if cfg.drain_first {
                meta.drained = Some(drain_pagesets(&cfg.proc_root, &guard)?);
            }
            let start = zoneinfo(&cfg.proc_root)?;
            guard.set(&dir.join("tracing_on"), "1")?;
            Ok::<_, Error>(start)
        })();
        let start = match begun {
            Ok(s) => s,
            Err(e) => {
                drop(started);
                let _ = reader.join();
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        // A reader that already failed has dropped its end: its error comes back at the join.
        let _ = started.send((meta.clone(), start));
        let t0 = Instant::now();
        let limit = cfg.seconds.map(Duration::from_secs_f64);
        let mut status = None;
        let mut seen: std::collections::BTreeMap<String, std::collections::BTreeMap<i64, u64>> =
            std::collections::BTreeMap::new();
        let mut child = if cfg.command.is_empty() {
            None
        } else {
            Some(
                std::process::Command::new(&cfg.command[0])
                    .args(&cfg.command[1..])
                    .spawn()
                    .map_err(|e| {
                        Error::Unsupported(format!("cannot run {}: {e}", cfg.command[0]))
                    })?,
            )
        };
        loop {
            progress(t0.elapsed().as_secs_f64(), lines.load(Ordering::Relaxed));
            // A sysctl unreadable for a moment is not a reason to stop recording.
            for (name, v) in read_sysctls(&cfg.proc_root).unwrap_or_default() {
                *seen.entry(name).or_default().entry(v).or_default() += 1;
            }
            if let Some(c) = child.as_mut() {
                if let Some(s) = c
                    .try_wait()
                    .map_err(|e| Error::Unsupported(format!("waiting for the command: {e}")))?
                {
                    status = s.code();
                    break;
                }
            }
            if limit.is_some_and(|l| t0.elapsed() >= l) {
                if let Some(c) = child.as_mut() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let seconds = t0.elapsed().as_secs_f64();
        guard.set(&dir.join("tracing_on"), "0")?;
        stop.store(true, Ordering::Relaxed);
        let streamed = reader
            .join()
            .map_err(|_| Error::Unsupported("the trace reader panicked".into()))?;
        let end_pagesets = zoneinfo(&cfg.proc_root);
        guard.restore()?;
        let (mut writer, skipped, direct, frees_direct) = streamed?;
        writer.set_sysctl_during(sysctls_changed(&meta.sysctl, &seen));
        let (end, out) = writer.finish(&end_pagesets?, seconds)?;
        out.close()
            .map_err(|e| Error::io(partial.display().to_string(), e))?;
        std::fs::rename(&partial, &cfg.output).map_err(|e| Error::io(&label, e))?;
        let bytes = std::fs::metadata(&cfg.output).map(|m| m.len()).unwrap_or(0);
        Ok(RecordSummary {
            output: label,
            bytes,
            meta,
            end,
            command_status: status,
            skipped_lines: skipped,
            direct_zone_locked: direct,
            frees_direct,
        })
    }
}

type Streamed<W> = Result<(FlowWriter<W>, u64, u64, u64)>;

/// Reads `trace_pipe` (non-blocking) into the writer until `stop` is set and the pipe is empty.
fn stream<W: std::io::Write>(
    pipe: &Path,
    cpus: &[u32],
    spans: ZoneSpans,
    mut writer: FlowWriter<W>,
    stop: &AtomicBool,
    lines: &AtomicU64,
) -> Streamed<W> {
    let label = pipe.display().to_string();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(pipe)
        .map_err(|e| Error::io(&label, e))?;
    let mut g = Grouper::new(cpus, spans);
    let mut buf = vec![0u8; 1 << 20];
    let mut tail = Vec::new();
    let mut out = Vec::new();
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(&label, e)),
        };
        if n == 0 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        tail.extend_from_slice(&buf[..n]);
        let cut = match tail.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None => continue,
        };
        for l in String::from_utf8_lossy(&tail[..cut]).lines() {
            g.feed(l, &mut out);
        }
        tail.drain(..cut);
        lines.fetch_add(out.len() as u64, Ordering::Relaxed);
        for l in out.drain(..) {
            writer.push(l)?;
        }
    }
    if !tail.is_empty() {
        g.feed(&String::from_utf8_lossy(&tail), &mut out);
    }
    g.finish(&mut out);
    for l in out.drain(..) {
        writer.push(l)?;
    }
    writer.set_refill_sources(std::mem::take(&mut g.refill_sources));
    Ok((writer, g.skipped, g.direct_zone_locked, g.frees_direct))
}
