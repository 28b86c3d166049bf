//! The real kernel under a workload at several pcp->high settings.
//!
//! A sweep sets `vm.percpu_pagelist_high_fraction` (through a [`SysctlGuard`]) to each value of a
//! plan (the kernel default 0 first), runs a workload for a fixed time, and reads the live
//! pcp->high of every CPU from /proc/zoneinfo right after. Repeats are interleaved: repeat r runs
//! the settings rotated by r, so a slow drift of the machine spreads over all settings instead of
//! biasing one.
//!
//! Workloads:
//! - [`Workload::NetperfUdp`]: thread 004's path without netperf: a sender thread pinned to one
//!   CPU sends 65507-byte UDP datagrams (the largest, "64 KiB") over loopback to a receiver
//!   pinned to another. The skb data are page frags allocated on the sender's CPU and freed on
//!   the receiver's, so the receiver's pcp list is the one whose `high` matters. Score: received
//!   Mbit/s (10^6 bit/s of payload), as netperf UDP_STREAM reports on the receiving side.
//! - [`Workload::PageFault`]: N processes (fork), each pinned to CPU i mod ncpus, loop over
//!   mmap 16 MiB anonymous (no THP), write one byte per 4 KiB page, munmap. Score: pages faulted
//!   in and freed per second over all processes.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::latency::{pin_current_thread, set_allowed_cpus};
use super::sysctl::SysctlGuard;
use super::Spread;
use crate::error::{Error, Result};
use crate::kernel::zoneinfo::parse_zoneinfo;

/// A workload to run for real.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Workload {
    /// UDP stream over loopback, sender on `sender`, receiver on `receiver`.
    NetperfUdp {
        /// Sender CPU.
        sender: u32,
        /// Receiver CPU.
        receiver: u32,
    },
    /// An AF_UNIX stream socket pair (lmbench's bw_unix): `writer` writes 64 KiB chunks,
    /// `reader` reads them.
    AfUnix {
        /// Writer CPU.
        writer: u32,
        /// Reader CPU.
        reader: u32,
    },
    /// `tasks` processes faulting pages in and unmapping them.
    PageFault {
        /// Number of processes.
        tasks: u32,
    },
}

impl Workload {
    /// `netperf-udp` or `page-fault`.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::NetperfUdp { .. } => "netperf-udp",
            Workload::AfUnix { .. } => "af-unix",
            Workload::PageFault { .. } => "page-fault",
        }
    }

    /// Unit of the score.
    pub fn unit(&self) -> &'static str {
        match self {
            Workload::NetperfUdp { .. } => "Mbit/s received",
            Workload::AfUnix { .. } => "MB/s read",
            Workload::PageFault { .. } => "pages/s",
        }
    }

    /// The CPUs whose pcp->high the score depends on (the receiver for the UDP stream, every
    /// CPU that runs a task for the page-fault loop).
    pub fn consumer_cpus(&self, ncpus: u32) -> Vec<u32> {
        match *self {
            Workload::NetperfUdp { receiver, .. } => vec![receiver],
            Workload::AfUnix { reader, .. } => vec![reader],
            Workload::PageFault { tasks } => (0..tasks.min(ncpus.max(1))).collect(),
        }
    }

    /// Runs the workload for `secs` seconds and returns its score.
    pub fn run(&self, secs: f64, ncpus: u32) -> Result<f64> {
        Ok(self.run_counted(secs, ncpus)?.0)
    }

    /// Runs the workload for `secs` seconds: its score and, for the UDP stream, the share of
    /// the bytes sent that the receiver read (the rest was dropped at the full receive buffer,
    /// in the sender's softirq on loopback, where those pages are freed).
    pub fn run_counted(&self, secs: f64, ncpus: u32) -> Result<(f64, Option<f64>)> {
        match *self {
            Workload::NetperfUdp { sender, receiver } => {
                let (score, share) = udp_stream(sender, receiver, secs)?;
                Ok((score, Some(share)))
            }
            Workload::AfUnix { writer, reader } => {
                Ok((af_unix_stream(writer, reader, secs)?, None))
            }
            Workload::PageFault { tasks } => Ok((page_fault(tasks, ncpus, secs)?, None)),
        }
    }
}

/// Largest UDP payload over IPv4.
pub const UDP_PAYLOAD: usize = 65_507;

/// Read timeout of the streams' receiving sockets: bounds how long a read can outlast the
/// measured interval and how long draining waits for the sender to see the stop flag.
const READ_TIMEOUT: Duration = Duration::from_millis(50);

/// A sender thread pinned to `sender` calls `send` with a `chunk`-byte buffer until told to
/// stop, while this thread, pinned to `receiver`, calls `recv` for `secs` seconds; then it
/// keeps reading until the sender has seen the stop flag, so the sender never stays blocked on
/// a full socket. Returns the bytes read in the interval, its length in seconds, and the bytes
/// read and sent over the whole run (interval and drain). `send` returns the bytes it sent.
/// `recv` must time out (the sockets get [`READ_TIMEOUT`]).
fn pinned_stream<S, R>(
    label: &str,
    sender: u32,
    receiver: u32,
    secs: f64,
    chunk: usize,
    mut send: S,
    mut recv: R,
) -> Result<(u64, f64, u64, u64)>
where
    S: FnMut(&[u8]) -> Result<usize> + Send + 'static,
    R: FnMut(&mut [u8]) -> std::io::Result<usize>,
{
    let start = Arc::new(Barrier::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, st2) = (Arc::clone(&start), Arc::clone(&stop));
    let tx = std::thread::spawn(move || -> Result<u64> {
        let pinned = pin_current_thread(sender);
        s2.wait();
        pinned?;
        let buf = vec![0x5au8; chunk];
        let mut sent = 0u64;
        while !st2.load(Ordering::Relaxed) {
            sent += send(&buf)? as u64;
        }
        Ok(sent)
    });
    let saved = super::latency::allowed_cpus();
    let pinned = pin_current_thread(receiver);
    start.wait();
    let mut buf = vec![0u8; chunk + 1];
    let mut bytes = 0u64;
    let t0 = Instant::now();
    let dur = Duration::from_secs_f64(secs);
    if pinned.is_ok() {
        while t0.elapsed() < dur {
            if let Ok(n) = recv(&mut buf) {
                bytes += n as u64;
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut total = bytes;
    while !tx.is_finished() {
        if let Ok(n) = recv(&mut buf) {
            total += n as u64;
        }
    }
    set_allowed_cpus(&saved);
    let sent = tx
        .join()
        .map_err(|_| Error::Unsupported(format!("{label}: the sender panicked")))?;
    pinned?;
    let sent = sent?;
    Ok((bytes, elapsed, total, sent))
}

/// A UDP stream over loopback for `secs` seconds: Mbit/s received, and the share of the bytes
/// sent that were received.
fn udp_stream(sender: u32, receiver: u32, secs: f64) -> Result<(f64, f64)> {
    let e =
        |what: &str, err: std::io::Error| Error::Unsupported(format!("UDP stream: {what}: {err}"));
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(|x| e("bind", x))?;
    rx.set_read_timeout(Some(READ_TIMEOUT))
        .map_err(|x| e("timeout", x))?;
    let addr = rx.local_addr().map_err(|x| e("local_addr", x))?;
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(|x| e("bind", x))?;
    tx.connect(addr).map_err(|x| e("connect", x))?;
    // ENOBUFS/ECONNREFUSED are transient on loopback: the sender keeps sending.
    let send = move |buf: &[u8]| Ok(tx.send(buf).unwrap_or(0));
    let (bytes, secs, read, sent) = pinned_stream(
        "UDP stream",
        sender,
        receiver,
        secs,
        UDP_PAYLOAD,
        send,
        |b| rx.recv(b),
    )?;
    let share = if sent > 0 {
        (read as f64 / sent as f64).min(1.0)
    } else {
        f64::NAN
    };
    Ok((bytes as f64 * 8.0 / secs / 1e6, share))
}

/// lmbench bw_unix's transfer size: 64 KiB per write and read (`XFERSIZE`, src/bw_unix.c).
pub const AF_UNIX_CHUNK: usize = 64 << 10;

/// An AF_UNIX stream for `secs` seconds: MB/s (10^6 bytes) read by the reader.
fn af_unix_stream(writer: u32, reader: u32, secs: f64) -> Result<f64> {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let e = |what: &str, err: std::io::Error| {
        Error::Unsupported(format!("AF_UNIX stream: {what}: {err}"))
    };
    let (mut tx, mut rx) = UnixStream::pair().map_err(|x| e("socketpair", x))?;
    rx.set_read_timeout(Some(READ_TIMEOUT))
        .map_err(|x| e("timeout", x))?;
    let send = move |buf: &[u8]| {
        tx.write_all(buf)
            .map(|()| buf.len())
            .map_err(|x| e("write", x))
    };
    let (bytes, secs, _, _) = pinned_stream(
        "AF_UNIX stream",
        writer,
        reader,
        secs,
        AF_UNIX_CHUNK,
        send,
        |b| rx.read(&mut b[..AF_UNIX_CHUNK]),
    )?;
    Ok(bytes as f64 / secs / 1e6)
}

fn page_fault(tasks: u32, ncpus: u32, secs: f64) -> Result<f64> {
    const REGION: usize = 16 << 20;
    let tasks = tasks.max(1) as usize;
    // One shared page of counters, written by the children.
    let counters = super::map_anonymous(
        4096.max(tasks * 8),
        libc::MAP_SHARED,
        "page-fault: the counters",
    )?;
    let counters = counters as *mut u64;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(secs);
    let mut pids = Vec::new();
    for i in 0..tasks {
        // SAFETY: the child only makes system calls and writes its counter, then _exits: no
        // allocation, no lock that another thread of the parent could hold.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(i % ncpus.max(1) as usize, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                let mut pages = 0u64;
                while Instant::now() < deadline {
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        REGION,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p == libc::MAP_FAILED {
                        libc::_exit(1);
                    }
                    libc::madvise(p, REGION, libc::MADV_NOHUGEPAGE);
                    let base = p as *mut u8;
                    for off in (0..REGION).step_by(4096) {
                        std::ptr::write_volatile(base.add(off), 1);
                    }
                    libc::munmap(p, REGION);
                    pages += (REGION / 4096) as u64;
                }
                std::ptr::write_volatile(counters.add(i), pages);
                libc::_exit(0);
            }
        } else if pid < 0 {
            break;
        }
        pids.push(pid);
    }
    let mut failed = pids.len() < tasks;
    for pid in &pids {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe {
            libc::waitpid(*pid, &mut status, 0);
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            failed = true;
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    // SAFETY: the children have exited; the counters are ours.
    let total: u64 = (0..pids.len())
        .map(|i| unsafe { std::ptr::read_volatile(counters.add(i)) })
        .sum();
    unsafe {
        libc::munmap(counters.cast(), 4096.max(tasks * 8));
    }
    if failed {
        return Err(Error::Unsupported(
            "page-fault: a task could not be started or failed (fork or mmap)".into(),
        ));
    }
    Ok(total as f64 / elapsed)
}

/// The live pcp state of one zone: its managed pages and each CPU's `high`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveHigh {
    /// Managed pages of the zone.
    pub managed_pages: u64,
    /// (cpu, high) per CPU.
    pub high: Vec<(u32, i64)>,
    /// The per-CPU batch (first CPU's).
    pub batch: i64,
}

/// Reads node 0's zone that kernel allocations are served from, from a /proc/zoneinfo text: the
/// first zone of a GFP_KERNEL zonelist, the highest of DMA, DMA32 and Normal with managed pages
/// (a socket buffer or a page-table page never comes from Movable). Not the largest zone: a small
/// VM whose memory is hot-plugged later boots with DMA32 larger than Normal, and the sweep would
/// set and read the limits of a zone the workload does not touch.
pub fn live_high(text: &str, label: &str) -> Result<LiveHigh> {
    use crate::kernel::ZoneKind;
    let zi = parse_zoneinfo(text, label)?;
    let zone = zi
        .zones
        .iter()
        .filter(|z| z.node == 0 && !z.pagesets.is_empty() && z.managed_pages > 0)
        .filter(|z| matches!(z.kind, ZoneKind::Dma | ZoneKind::Dma32 | ZoneKind::Normal))
        .max_by_key(|z| z.kind)
        .ok_or_else(|| {
            Error::parse(
                label,
                0,
                "pagesets",
                "node 0 has no DMA, DMA32 or Normal zone with managed pages and pagesets",
            )
        })?;
    Ok(LiveHigh {
        managed_pages: zone.managed_pages,
        high: zone
            .pagesets
            .iter()
            .map(|p| (p.cpu, p.high_pages))
            .collect(),
        batch: zone.pagesets.first().map_or(0, |p| p.batch_pages),
    })
}

/// Zones and CPUs whose live pcp->high lies below its high_min (and is not 0): after a sweep
/// restores the sysctl, a zone without traffic keeps the high it decayed to until its next
/// allocation or free (`decay_pcp_high()` only lowers high). Returns "zone cpu high<high_min".
pub fn below_high_min(text: &str, label: &str) -> Result<Vec<String>> {
    let zi = parse_zoneinfo(text, label)?;
    let mut out = Vec::new();
    for z in &zi.zones {
        for p in &z.pagesets {
            if let Some(hmin) = p.high_min_pages {
                if p.high_pages != 0 && p.high_pages < hmin {
                    out.push(format!(
                        "node {} {:?} CPU {}: {} < {}",
                        z.node, z.kind, p.cpu, p.high_pages, hmin
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// The sysctl values of a sweep: the default 0, then fractions that put pcp->high near
/// `4 × batch`, LLC/8, LLC/2, 2 × LLC and 8 × LLC (pages), on a zone of `managed` pages split
/// over `cpus_in_node` CPUs (`high = managed / fraction / cpus`, fraction >= 8).
///
/// Where targets fall on one fraction (an LLC so large that 2 × LLC is past the largest high
/// the sysctl can give, fraction 8), the widest gap between planned highs gets its geometric
/// middle instead, until there are five settings besides the default or no gap is wider than
/// a factor of 2.
pub fn plan_fractions(managed: u64, cpus_in_node: u32, batch: i64, llc_pages: u64) -> Vec<u64> {
    let per_cpu = managed / u64::from(cpus_in_node.max(1));
    let targets = [
        (4 * batch.max(1)) as u64,
        llc_pages / 8,
        llc_pages / 2,
        2 * llc_pages,
        8 * llc_pages,
    ];
    let mut fixed: Vec<u64> = Vec::new();
    for t in targets {
        let f = (per_cpu / t.max(1)).max(8);
        if !fixed.contains(&f) {
            fixed.push(f);
        }
    }
    while fixed.len() < targets.len() {
        // Fractions in falling order are highs in rising order; the widest ratio between
        // neighbours is the widest gap in pcp->high.
        fixed.sort_unstable_by(|a, b| b.cmp(a));
        let widest = fixed
            .windows(2)
            .map(|w| (w[0] as f64 / w[1] as f64, w[0], w[1]))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((ratio, lo_high, hi_high)) = widest else {
            break;
        };
        let mid = ((lo_high as f64 * hi_high as f64).sqrt().round() as u64).max(8);
        if ratio < 2.0 || fixed.contains(&mid) {
            break;
        }
        fixed.push(mid);
    }
    fixed.sort_unstable_by(|a, b| b.cmp(a));
    let mut out = vec![0];
    out.extend(fixed);
    out
}

/// The order of the points: repeat r runs the settings rotated by r.
pub fn interleave(settings: &[u64], repeats: usize) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for r in 0..repeats {
        for k in 0..settings.len() {
            out.push((r, settings[(k + r) % settings.len()]));
        }
    }
    out
}

/// One run of the workload at one setting.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// vm.percpu_pagelist_high_fraction (0 = kernel default).
    pub fraction: u64,
    /// Repeat index.
    pub repeat: usize,
    /// Score (unit: [`Workload::unit`]).
    pub score: f64,
    /// Live pcp->high of each consumer CPU right after the run, pages.
    pub consumer_high: Vec<i64>,
    /// Live pcp->high of every CPU right after the run, pages.
    pub all_high: Vec<(u32, i64)>,
    /// netperf-udp and af-unix: one-way cache-line transfer between sender and receiver CPU
    /// measured just before the run (ping-pong, median of 5 x 5000 round trips), ns. In a VM it
    /// shows where the hypervisor placed the two vCPUs at that moment.
    pub c2c_ns: Option<f64>,
    /// netperf-udp: bytes the receiver read over bytes the sender sent (the rest was dropped
    /// at the receive buffer and freed on the sender's CPU).
    pub received_share: Option<f64>,
}

/// Medians and spread of one setting.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// vm.percpu_pagelist_high_fraction.
    pub fraction: u64,
    /// Score over the repeats.
    pub score: Spread,
    /// Consumer CPUs' live pcp->high over repeats and CPUs, pages.
    pub high: Spread,
}

/// Which points a sweep's summary keeps when the sender-receiver transfer latency measured
/// before each point falls into two placements (a VM's vCPUs moved between runs).
#[derive(Debug, Clone, Serialize)]
pub struct PlacementFilter {
    /// The placements' one-way transfer latencies, dominant first ([`crate::measure::latency::modes`]).
    pub modes: Vec<crate::measure::latency::Mode>,
    /// Points kept (in the dominant placement, or every point of a setting that has none there).
    pub kept: usize,
    /// Points measured.
    pub total: usize,
    /// Settings none of whose points ran in the dominant placement: all their points are kept.
    pub settings_without_dominant: Vec<u64>,
}

/// The points measured in the dominant placement of the two CPUs: the machine file's core-to-core
/// latency is that placement's (`measure latency` keeps the dominant mode), so a sweep compared
/// with the model keeps the points run there. Points without a c2c figure, and sweeps whose
/// latencies form one mode, are kept whole (None). A point belongs to the mode whose median is
/// nearer on a log scale.
pub fn dominant_placement(points: &[Point]) -> (Vec<Point>, Option<PlacementFilter>) {
    let c2c: Vec<f64> = points.iter().filter_map(|p| p.c2c_ns).collect();
    if c2c.len() != points.len() {
        return (points.to_vec(), None);
    }
    let modes = crate::measure::latency::modes(&c2c);
    if modes.len() < 2 {
        return (points.to_vec(), None);
    }
    let in_dominant = |p: &Point| {
        p.c2c_ns
            .is_some_and(|c| (c / modes[0].median).ln().abs() <= (c / modes[1].median).ln().abs())
    };
    let mut kept = Vec::new();
    let mut without = Vec::new();
    let mut fractions: Vec<u64> = points.iter().map(|p| p.fraction).collect();
    fractions.sort_unstable();
    fractions.dedup();
    for f in fractions {
        let all: Vec<&Point> = points.iter().filter(|p| p.fraction == f).collect();
        let dom: Vec<&Point> = all.iter().copied().filter(|p| in_dominant(p)).collect();
        if dom.is_empty() {
            without.push(f);
            kept.extend(all.into_iter().cloned());
        } else {
            kept.extend(dom.into_iter().cloned());
        }
    }
    // Run order, as measured.
    kept.sort_by_key(|p| {
        points
            .iter()
            .position(|q| q.fraction == p.fraction && q.repeat == p.repeat)
            .unwrap_or(usize::MAX)
    });
    let filter = PlacementFilter {
        modes,
        kept: kept.len(),
        total: points.len(),
        settings_without_dominant: without,
    };
    (kept, Some(filter))
}

impl PlacementFilter {
    /// One line for the CSV header and the notes.
    pub fn describe(&self) -> String {
        let m: Vec<String> = self
            .modes
            .iter()
            .map(|m| format!("{:.0} ns ({:.0} %)", m.median, 100.0 * m.share))
            .collect();
        let mut s = format!(
            "c2c before each point in two placements, {}: medians over the {} of {} points in the dominant one",
            m.join(" and "),
            self.kept,
            self.total
        );
        if !self.settings_without_dominant.is_empty() {
            s.push_str(&format!(
                " (fractions {:?} had none there: all their points)",
                self.settings_without_dominant
            ));
        }
        s
    }
}

/// Reads the CSV [`raw_csv`] writes back into points (the consumer high is the row's median;
/// per-CPU highs are not in the file). Errors name the file, line and column.
pub fn points_from_raw_csv(text: &str, label: &str) -> Result<Vec<Point>> {
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let skipped = text
        .lines()
        .take_while(|l| l.trim_start().starts_with('#'))
        .count();
    let mut r = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(body.as_bytes());
    let headers = r
        .headers()
        .map_err(|e| Error::parse(label, skipped + 1, "header", e.to_string()))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            Error::parse(
                label,
                skipped + 1,
                name,
                "missing column (the file `measure pcp --raw` writes has percpu_pagelist_high_fraction, repeat, score, pcp_high_pages, c2c_ns, received_share)",
            )
        })
    };
    let (cf, cr, cs, ch) = (
        need("percpu_pagelist_high_fraction")?,
        need("repeat")?,
        need("score")?,
        need("pcp_high_pages")?,
    );
    let (cc, cq) = (col("c2c_ns"), col("received_share"));
    let mut points = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = skipped + 2 + i;
        let rec = rec.map_err(|e| Error::parse(label, line, "row", e.to_string()))?;
        let num = |c: usize, name: &str| -> Result<f64> {
            let v = rec.get(c).unwrap_or("");
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    Error::parse(label, line, name, format!("'{v}' is not a number >= 0"))
                })
        };
        let opt = |c: Option<usize>, name: &str| -> Result<Option<f64>> {
            match c.and_then(|c| rec.get(c)).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(_) => num(c.unwrap_or(0), name).map(Some),
            }
        };
        let whole = |c: usize, name: &str| -> Result<f64> {
            let x = num(c, name)?;
            if x.fract() != 0.0 || x > 9.0e15 {
                return Err(Error::parse(
                    label,
                    line,
                    name,
                    format!("{x} is not a whole number"),
                ));
            }
            Ok(x)
        };
        points.push(Point {
            fraction: whole(cf, "percpu_pagelist_high_fraction")? as u64,
            repeat: whole(cr, "repeat")? as usize,
            score: num(cs, "score")?,
            consumer_high: vec![whole(ch, "pcp_high_pages")? as i64],
            all_high: Vec::new(),
            c2c_ns: opt(cc, "c2c_ns")?,
            received_share: opt(cq, "received_share")?,
        });
    }
    if points.is_empty() {
        return Err(Error::parse(label, skipped + 1, "row", "no data rows"));
    }
    Ok(points)
}

/// Summarises points per setting, in the order of `settings`.
pub fn summarise(settings: &[u64], points: &[Point]) -> Vec<Setting> {
    settings
        .iter()
        .filter_map(|&f| {
            let pts: Vec<&Point> = points.iter().filter(|p| p.fraction == f).collect();
            let scores: Vec<f64> = pts.iter().map(|p| p.score).collect();
            let highs: Vec<f64> = pts
                .iter()
                .flat_map(|p| p.consumer_high.iter().map(|&h| h as f64))
                .collect();
            Some(Setting {
                fraction: f,
                score: Spread::of(&scores)?,
                high: Spread::of(&highs)?,
            })
        })
        .collect()
}

/// The CSV `pcpmodel fit --workload netperf-pcp-high` reads (columns `pcp_high_pages`, `score`),
/// with the spread and the setting in further columns.
pub fn fit_csv(
    machine: &str,
    workload: &Workload,
    settings: &[Setting],
    run_s: Option<f64>,
) -> String {
    let mut s = format!(
        "# pcpmodel measure pcp --workload {}: score in {}, medians over repeats; pcp_high_pages \
         = median live pcp->high of the consumer CPU(s) from /proc/zoneinfo{}\n",
        workload.name(),
        workload.unit(),
        if run_s.is_some() {
            "; run_seconds = each point's run, the settings rotated in this file's order"
        } else {
            ""
        }
    );
    s.push_str(
        "machine,pcp_high_pages,score,score_q1,score_q3,score_min,score_max,n,high_min,high_max,\
         percpu_pagelist_high_fraction,workload",
    );
    s.push_str(if run_s.is_some() {
        ",run_seconds\n"
    } else {
        "\n"
    });
    let run = run_s.map_or(String::new(), |r| format!(",{r}"));
    for st in settings {
        s.push_str(&format!(
            "{machine},{:.0},{:.1},{:.1},{:.1},{:.1},{:.1},{},{:.0},{:.0},{},{}{run}\n",
            st.high.median,
            st.score.median,
            st.score.q1,
            st.score.q3,
            st.score.min,
            st.score.max,
            st.score.n,
            st.high.min,
            st.high.max,
            st.fraction,
            workload.name()
        ));
    }
    s
}

/// Every point as CSV (fraction, repeat, score, median consumer pcp->high, c2c ns), in run order.
pub fn raw_csv(workload: &Workload, points: &[Point]) -> String {
    let mut s = format!(
        "# pcpmodel measure pcp --workload {}: every point in run order; score in {}\n\
         percpu_pagelist_high_fraction,repeat,score,pcp_high_pages,c2c_ns,received_share\n",
        workload.name(),
        workload.unit()
    );
    for p in points {
        let h: Vec<f64> = p.consumer_high.iter().map(|&h| h as f64).collect();
        s.push_str(&format!(
            "{},{},{:.1},{},{},{}\n",
            p.fraction,
            p.repeat,
            p.score,
            Spread::of(&h).map_or(String::new(), |x| format!("{:.0}", x.median)),
            p.c2c_ns.map_or(String::new(), |c| format!("{c:.1}")),
            p.received_share
                .filter(|x| x.is_finite())
                .map_or(String::new(), |r| format!("{r:.4}"))
        ));
    }
    s
}

/// Median over the points of the bytes received over the bytes sent (the UDP stream), or None.
pub fn received_share_median(points: &[Point]) -> Option<f64> {
    let v: Vec<f64> = points
        .iter()
        .filter_map(|p| p.received_share)
        .filter(|x| x.is_finite())
        .collect();
    Spread::of(&v).map(|s| s.median)
}

/// Runs a sweep: for each planned point, set the sysctl, run, read /proc/zoneinfo. `stop` is
/// checked between points (a signal handler sets it); `progress(done, total)` after each.
#[allow(clippy::too_many_arguments)]
pub fn sweep(
    guard: &SysctlGuard,
    workload: &Workload,
    order: &[(usize, u64)],
    secs: f64,
    ncpus: u32,
    zoneinfo: &std::path::Path,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize, u64),
) -> Result<Vec<Point>> {
    let label = zoneinfo.display().to_string();
    let consumers = workload.consumer_cpus(ncpus);
    let mut points = Vec::new();
    for (i, &(repeat, fraction)) in order.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            return Err(Error::Unsupported("interrupted".into()));
        }
        progress(i, order.len(), fraction);
        guard.set(fraction)?;
        // Lowering the sysctl frees nothing: drain what the previous point left above the new
        // high_max now, so that the run measures this setting, not the old one's leftovers.
        if let Some(proc_root) = zoneinfo.parent() {
            super::record::settle_pagesets(proc_root)?;
        }
        let c2c_ns = match *workload {
            Workload::NetperfUdp { sender, receiver }
            | Workload::AfUnix {
                writer: sender,
                reader: receiver,
            } if sender != receiver => super::latency::ping_pong(sender, receiver, 5000, 5)
                .ok()
                .and_then(|v| Spread::of(&v))
                .map(|s| s.median),
            _ => None,
        };
        let (score, received_share) = workload.run_counted(secs, ncpus)?;
        let text = std::fs::read_to_string(zoneinfo).map_err(|e| Error::io(&label, e))?;
        let live = live_high(&text, &label)?;
        let consumer_high = live
            .high
            .iter()
            .filter(|(c, _)| consumers.contains(c))
            .map(|&(_, h)| h)
            .collect();
        points.push(Point {
            fraction,
            repeat,
            score,
            consumer_high,
            all_high: live.high,
            c2c_ns,
            received_share,
        });
    }
    progress(order.len(), order.len(), 0);
    guard.restore()?;
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_reads_the_zone_kernel_allocations_come_from() {
        // A 2-vCPU Firecracker guest right after boot: DMA32 manages 772,848 pages, Normal
        // 524,288 (the rest is hot-plugged later). A socket buffer comes from Normal first.
        let text =
            include_str!("../../tests/fixtures/kernel/zoneinfo/zoneinfo-6.18-dma32-larger.txt");
        let live = live_high(text, "zoneinfo").unwrap();
        assert_eq!(live.managed_pages, 524_288);
    }

    #[test]
    fn plan_reaches_the_targets() {
        // This VM: 4096000 managed pages, 2 CPUs, batch 63, 32 MiB LLC (8192 pages).
        let f = plan_fractions(4_096_000, 2, 63, 8192);
        assert_eq!(f[0], 0);
        assert_eq!(f.len(), 6);
        // The fraction is an integer, so high = 2048000 / f lands within 1/f of its target.
        for (x, target) in f[1..].iter().zip([252.0, 1024.0, 4096.0, 16384.0, 65536.0]) {
            let high = 2_048_000.0 / *x as f64;
            assert!(
                (high / target - 1.0).abs() <= 1.0 / *x as f64,
                "{x}: {high} vs {target}"
            );
        }
    }

    #[test]
    fn a_huge_llc_fills_the_gaps_instead_of_losing_settings() {
        // An Intel VM with a 260 MiB LLC (66560 pages): 2 x and 8 x LLC are past the largest
        // high (fraction 8), so both land on 8; the sweep still has five distinct settings.
        let f = plan_fractions(1_802_240, 2, 63, 66_560);
        assert_eq!(f[0], 0);
        assert_eq!(f.len(), 6, "{f:?}");
        let mut rest = f[1..].to_vec();
        rest.dedup();
        assert_eq!(rest.len(), 5, "{f:?}");
        assert!(rest.windows(2).all(|w| w[0] > w[1]), "{f:?}");
        assert_eq!(*rest.last().unwrap(), 8);
    }

    fn point(fraction: u64, repeat: usize, score: f64, c2c: f64) -> Point {
        Point {
            fraction,
            repeat,
            score,
            consumer_high: vec![100],
            all_high: Vec::new(),
            c2c_ns: Some(c2c),
            received_share: None,
        }
    }

    #[test]
    fn the_dominant_placement_is_kept_and_a_setting_without_it_keeps_all() {
        // Two placements of the vCPUs, 55 ns and 230 ns one way (this host's two modes); the
        // 230 ns points score lower (each transfer costs 4x).
        let mut pts = Vec::new();
        for r in 0..8 {
            pts.push(point(0, r, 100.0, 52.0 + r as f64));
            pts.push(point(8, r, 90.0, if r < 2 { 230.0 } else { 56.0 }));
        }
        pts.push(point(16, 0, 50.0, 240.0));
        let (kept, f) = dominant_placement(&pts);
        let f = f.expect("two modes");
        assert!(f.modes[0].median < 100.0 && f.modes[1].median > 200.0);
        assert_eq!(f.total, 17);
        assert_eq!(f.kept, 8 + 6 + 1);
        assert_eq!(f.settings_without_dominant, vec![16]);
        assert!(kept
            .iter()
            .filter(|p| p.fraction == 8)
            .all(|p| p.c2c_ns < Some(100.0)));
        // One placement: every point kept.
        let one: Vec<Point> = (0..12).map(|r| point(0, r, 1.0, 55.0)).collect();
        assert!(dominant_placement(&one).1.is_none());
    }

    #[test]
    fn raw_points_read_back_and_bad_cells_name_line_and_column() {
        let pts = vec![point(0, 0, 123.4, 55.5), point(8, 0, 99.0, 230.0)];
        let w = Workload::AfUnix {
            writer: 0,
            reader: 1,
        };
        let text = raw_csv(&w, &pts);
        let back = points_from_raw_csv(&text, "raw.csv").unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].fraction, 8);
        assert_eq!(back[0].c2c_ns, Some(55.5));
        let bad = text.replace("123.4", "abc");
        let e = points_from_raw_csv(&bad, "raw.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("raw.csv") && e.contains(":3") && e.contains("score"),
            "{e}"
        );
        let e = points_from_raw_csv("a,b\n1,2\n", "x.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("percpu_pagelist_high_fraction"), "{e}");
    }

    #[test]
    fn interleaving_rotates() {
        let o = interleave(&[0, 8, 16], 3);
        let r: Vec<u64> = o.iter().map(|p| p.1).collect();
        assert_eq!(r, [0, 8, 16, 8, 16, 0, 16, 0, 8]);
    }

    #[test]
    fn page_fault_loop_counts_pages() {
        let pages_per_s = page_fault(1, 1, 0.05).unwrap();
        assert!(pages_per_s > 0.0);
    }

    #[test]
    fn af_unix_stream_moves_bytes() {
        let mbs = af_unix_stream(0, 0, 0.05).unwrap();
        assert!(mbs > 0.0);
    }

    #[test]
    fn udp_stream_moves_bytes() {
        let (mbps, share) = udp_stream(0, 0, 0.05).unwrap();
        assert!(mbps > 0.0);
        // Bytes read over bytes sent: a share, whatever the loopback dropped.
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
