//! The work per page of a host loop's two stages with every line local: one thread on one CPU
//! alternates a send (or write) and the receive (or read) of the same chunk, so the page frags
//! the send allocates are freed by the receive on the same CPU and reused from the top of its
//! list, hot in its own caches. Each call is timed on its own.
//!
//! In the two-CPU stream the stages run in parallel and the slower one sets the rate; the model's
//! fixed work per page ([`crate::model::netperf`]) is that stage's work without the cost of where
//! the page's lines are, which is what this loop measures: nothing is fitted to a sweep.
//! No root needed and nothing on the host is changed.

use std::io::{Read, Write};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::latency::{allowed_cpus, pin_current_thread, set_allowed_cpus};
use super::Spread;
use crate::error::{Error, Result};

/// The loops whose stages can be timed on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StageLoop {
    /// UDP over loopback, 65,507-byte datagrams ([`super::pcp::UDP_PAYLOAD`]).
    Udp,
    /// An AF_UNIX stream socket pair, 64 KiB writes and reads ([`super::pcp::AF_UNIX_CHUNK`]).
    AfUnix,
}

impl StageLoop {
    /// The loop's name in `measure pcp --workload`.
    pub fn name(self) -> &'static str {
        match self {
            StageLoop::Udp => "netperf-udp",
            StageLoop::AfUnix => "af-unix",
        }
    }

    /// The built-in workload that models the loop (the key of the machine file's
    /// `work_ns_per_page`).
    pub fn model_workload(self) -> &'static str {
        match self {
            StageLoop::Udp => "netperf-udp",
            StageLoop::AfUnix => "lmbench-af-unix",
        }
    }

    /// Names of the two stages.
    pub fn stage_names(self) -> [&'static str; 2] {
        match self {
            StageLoop::Udp => ["send", "receive"],
            StageLoop::AfUnix => ["write", "read"],
        }
    }
}

/// One timed run: ns per 4 KiB page of payload in each stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageRun {
    /// The sending (writing) stage, ns per page.
    pub send_ns_per_page: f64,
    /// The receiving (reading) stage, ns per page.
    pub recv_ns_per_page: f64,
    /// Pages of payload moved.
    pub pages: f64,
}

/// Repeated runs, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageWork {
    /// The loop.
    pub workload: &'static str,
    /// The CPU both stages ran on.
    pub cpu: u32,
    /// Seconds per run.
    pub seconds: f64,
    /// Every run, in order.
    pub runs: Vec<StageRun>,
    /// The sending stage over the runs, ns per page.
    pub send: Spread,
    /// The receiving stage over the runs, ns per page.
    pub recv: Spread,
}

impl StageWork {
    /// Whether the sending stage is the slower one (by median).
    fn send_is_slower(&self) -> bool {
        self.send.median >= self.recv.median
    }

    /// The slower stage's runs: its median is the work that sets a two-CPU stream's rate when
    /// no line has to move.
    pub fn bottleneck(&self) -> &Spread {
        if self.send_is_slower() {
            &self.send
        } else {
            &self.recv
        }
    }

    /// The slower stage's median, ns per page.
    pub fn bottleneck_ns_per_page(&self) -> f64 {
        self.bottleneck().median
    }

    /// Which stage is slower (its name).
    pub fn bottleneck_stage(&self, l: StageLoop) -> &'static str {
        l.stage_names()[usize::from(!self.send_is_slower())]
    }
}

/// A receive that waits longer than this has lost its datagram (it cannot on loopback with one
/// datagram in flight, but a run must never hang).
const RECV_TIMEOUT: Duration = Duration::from_millis(200);

/// Times `repeats` runs of `secs` seconds each of the loop on `cpu`.
pub fn measure(l: StageLoop, cpu: u32, secs: f64, repeats: usize) -> Result<StageWork> {
    if !(secs.is_finite() && secs > 0.0) || repeats == 0 {
        return Err(Error::Unsupported(format!(
            "measure work: {secs} s x {repeats} runs: need a positive time and at least one run"
        )));
    }
    let saved = allowed_cpus();
    let pinned = pin_current_thread(cpu);
    let runs: Result<Vec<StageRun>> = match pinned {
        Ok(()) => (0..repeats).map(|_| run_once(l, secs)).collect(),
        Err(e) => Err(e),
    };
    set_allowed_cpus(&saved);
    let runs = runs?;
    let spread = |f: fn(&StageRun) -> f64| {
        Spread::of(&runs.iter().map(f).collect::<Vec<_>>())
            .ok_or_else(|| Error::Unsupported(format!("measure work: {}: no finite run", l.name())))
    };
    Ok(StageWork {
        workload: l.name(),
        cpu,
        seconds: secs,
        send: spread(|r| r.send_ns_per_page)?,
        recv: spread(|r| r.recv_ns_per_page)?,
        runs,
    })
}

/// One run on the calling thread's CPU.
pub fn run_once(l: StageLoop, secs: f64) -> Result<StageRun> {
    let dur = Duration::from_secs_f64(secs);
    let (mut send_ns, mut recv_ns, mut bytes) = (0u128, 0u128, 0u64);
    let t0 = Instant::now();
    match l {
        StageLoop::Udp => {
            let e = |what: &str, err: std::io::Error| {
                Error::Unsupported(format!("measure work, UDP: {what}: {err}"))
            };
            let rx = UdpSocket::bind("127.0.0.1:0").map_err(|x| e("bind", x))?;
            rx.set_read_timeout(Some(RECV_TIMEOUT))
                .map_err(|x| e("timeout", x))?;
            let tx = UdpSocket::bind("127.0.0.1:0").map_err(|x| e("bind", x))?;
            tx.connect(rx.local_addr().map_err(|x| e("local_addr", x))?)
                .map_err(|x| e("connect", x))?;
            let buf = vec![0x5au8; super::pcp::UDP_PAYLOAD];
            let mut rb = vec![0u8; super::pcp::UDP_PAYLOAD + 1];
            while t0.elapsed() < dur {
                let a = Instant::now();
                tx.send(&buf).map_err(|x| e("send", x))?;
                let b = Instant::now();
                let n = rx.recv(&mut rb).map_err(|x| e("receive", x))?;
                let c = Instant::now();
                send_ns += (b - a).as_nanos();
                recv_ns += (c - b).as_nanos();
                bytes += n as u64;
            }
        }
        StageLoop::AfUnix => {
            let e = |what: &str, err: std::io::Error| {
                Error::Unsupported(format!("measure work, AF_UNIX: {what}: {err}"))
            };
            let (mut tx, mut rx) =
                std::os::unix::net::UnixStream::pair().map_err(|x| e("socketpair", x))?;
            rx.set_read_timeout(Some(RECV_TIMEOUT))
                .map_err(|x| e("timeout", x))?;
            let buf = vec![0x5au8; super::pcp::AF_UNIX_CHUNK];
            let mut rb = vec![0u8; super::pcp::AF_UNIX_CHUNK];
            while t0.elapsed() < dur {
                let a = Instant::now();
                tx.write_all(&buf).map_err(|x| e("write", x))?;
                let b = Instant::now();
                rx.read_exact(&mut rb).map_err(|x| e("read", x))?;
                let c = Instant::now();
                send_ns += (b - a).as_nanos();
                recv_ns += (c - b).as_nanos();
                bytes += rb.len() as u64;
            }
        }
    }
    let pages = bytes as f64 / 4096.0;
    if pages <= 0.0 {
        return Err(Error::Unsupported(format!(
            "measure work: {}: no payload moved in {secs} s",
            l.name()
        )));
    }
    Ok(StageRun {
        send_ns_per_page: send_ns as f64 / pages,
        recv_ns_per_page: recv_ns as f64 / pages,
        pages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_loops_move_pages_and_time_both_stages() {
        for l in [StageLoop::Udp, StageLoop::AfUnix] {
            let r = run_once(l, 0.02).unwrap();
            assert!(r.pages >= 16.0, "{l:?}: {r:?}");
            assert!(
                r.send_ns_per_page > 0.0 && r.recv_ns_per_page > 0.0,
                "{l:?}: {r:?}"
            );
        }
    }

    #[test]
    fn a_zero_time_is_refused() {
        assert!(measure(StageLoop::Udp, 0, 0.0, 1).is_err());
        assert!(measure(StageLoop::Udp, 0, 0.01, 0).is_err());
    }
}
