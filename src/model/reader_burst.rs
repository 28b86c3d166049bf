//! A line that every core of a group reads on each operation and that any of them now and then
//! writes: after each write every other core's copy is invalid, so their next reads all miss,
//! within about one operation of each other, and queue at the line's home, which serves the
//! requests for one line one after another. This is the mechanism behind ticket-lock collapse
//! (Boyd-Wickizer et al., "Non-scalable locks are dangerous", 2012: the waiters' re-reads of the
//! lock line after a release are serviced one at a time) applied to any line read by many cores
//! and written by some (issue 13 item 5: `NR_FREE_CMA_PAGES`, which `zone_watermark_fast()`
//! reads on every allocation, shares its line with `NUMA_HIT`, which every fold writes).
//!
//! # Service per request (machine file values only)
//! - the write (a `lock xadd`'s read-for-ownership): one transfer between cores;
//! - the first read after it: one transfer between cores (the writer holds the only valid copy,
//!   Modified);
//! - each later read of the same burst: an LLC hit when the LLC is inclusive (the first read's
//!   fill left an up-to-date copy there; `cache.policy = "inclusive"`), otherwise one more
//!   transfer between cores (a victim or non-inclusive LLC does not keep a line that moved
//!   between cores, so a sharer forwards it). The same rule as [`crate::model::cache`]'s line in
//!   another core's private cache on the same LLC.
//!
//! # The loop ([`burst_cost`])
//! Each thread repeats one operation: `other_ns` of its own time, then a read of the line (an
//! allocation's watermark check), and on every `P`-th operation a write of it right after the
//! read (the fold). A core's copy is valid until another core's write starts its service (the
//! read-for-ownership sends the invalidations). A read on a valid copy costs nothing here; a
//! read on a stale one sends the core's one request, or waits for the one already out (SMT
//! siblings share it). All requests, writes and reads, are served first come, first served at
//! the home; a read right after a write pays `first_read_ns`, a read after a read
//! `reread_ns`. Two estimates:
//! - the closed loop simulated event by event at the granularity of misses and writes (the
//!   hits in between are counted, not stepped), from fixed pseudo-random phases, for
//!   [`BURSTS`] writes after [`WARMUP`]: deterministic for given inputs; the threads' time per
//!   operation comes out of it, so no fixed point over the line's own cost is needed;
//! - when the home is under [`ISOLATED_BELOW`] busy, bursts that never meet
//!   ([`isolated_cost`]): each write on an idle home, the other threads' next reads at uniform
//!   points of their operation, averaged over [`ISOLATED_BURSTS`] draws. Exact as writes become
//!   rare, cheap, and continuous in the inputs (the fit of thread 002 runs through it); a test
//!   holds the two estimates together at the switch.
//!
//! # Not modelled
//! - Out-of-order execution overlapping a miss with the rest of the operation: a miss is
//!   waited in full (the value feeds a branch, so only a correct prediction hides it).
//! - The writes of other lines the threads make (they are the caller's `other_ns`).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::error::{Error, Result};
use crate::fit::stats::SplitMix64;

/// Writes simulated per estimate, after [`WARMUP`] more: the mean waits settle to about 2 %
/// (tests).
pub const BURSTS: usize = 300;

/// Writes simulated before the counts start (the random initial phases settle).
pub const WARMUP: usize = 30;

/// Inputs of one estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstInputs {
    /// Cores that read the line.
    pub cores: u32,
    /// Threads per core (SMT siblings share the core's copy and its one request).
    pub threads_per_core: u32,
    /// Time of one operation of a thread outside this line, ns.
    pub other_ns: f64,
    /// Operations of a thread between two of its writes (`P`, at least 1).
    pub ops_between_writes: u64,
    /// Service of a write at the home, ns (a transfer between cores).
    pub write_ns: f64,
    /// Service of the first read after a write, ns (a transfer between cores).
    pub first_read_ns: f64,
    /// Service of each later read, ns (LLC hit if inclusive, else a transfer).
    pub reread_ns: f64,
}

/// What the line costs, per operation of one thread (mean over the threads).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BurstCost {
    /// Waiting for the line on reads, ns per operation.
    pub read_ns: f64,
    /// The writes' service and queueing, ns per operation.
    pub write_ns: f64,
    /// Share of time the home is serving the line.
    pub utilisation: f64,
}

/// A time that orders totally (`f64::total_cmp`), for the event heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ord64(f64);

impl Eq for Ord64 {}

impl PartialOrd for Ord64 {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Ord64 {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// One thread: its next operation starts its read at `next`, and `left` operations remain
/// until (and including) its write; `ver` marks its live event in the heap.
#[derive(Debug, Clone, Copy)]
struct Thread {
    next: f64,
    left: u64,
    ver: u64,
}

fn check(x: &BurstInputs) -> Result<()> {
    const INPUT: &str = "reader burst";
    if !(x.other_ns.is_finite() && x.other_ns > 0.0) {
        return Err(Error::invalid(
            INPUT,
            "other_ns",
            format!("must be > 0 and finite, got {}", x.other_ns),
        ));
    }
    for (v, f) in [
        (x.write_ns, "write_ns"),
        (x.first_read_ns, "first_read_ns"),
        (x.reread_ns, "reread_ns"),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(Error::invalid(INPUT, f, format!("must be >= 0, got {v}")));
        }
    }
    if x.cores == 0 || x.threads_per_core == 0 || x.ops_between_writes == 0 {
        return Err(Error::invalid(
            INPUT,
            "cores",
            "needs at least one core with one thread and ops_between_writes >= 1",
        ));
    }
    Ok(())
}

/// Utilisation of the home below which bursts are taken as isolated: the next write comes
/// after 20 bursts' service on average, so bursts almost never meet and the isolated estimate
/// ([`isolated_cost`]) is the closed loop's within its own sampling noise (tests).
pub const ISOLATED_BELOW: f64 = 0.05;

/// Bursts averaged by [`isolated_cost`].
pub const ISOLATED_BURSTS: usize = 200;

/// The line's cost (module docs): the isolated estimate when the home is nearly idle, else the
/// closed loop simulated.
pub fn burst_cost(x: &BurstInputs) -> Result<BurstCost> {
    check(x)?;
    let iso = isolated_cost(x);
    if iso.utilisation < ISOLATED_BELOW {
        Ok(iso)
    } else {
        Ok(closed_cost(x))
    }
}

/// Bursts that never meet: each write lands on an idle home and invalidates the other copies
/// as its service starts; the other cores' threads read next at uniform points of their
/// operation (`other_ns`) from then, their cores' requests are served one after another behind
/// the write. Exact as writes become rare; deterministic and continuous in the inputs.
pub fn isolated_cost(x: &BurstInputs) -> BurstCost {
    let (cores, tpc) = (x.cores.max(1) as usize, x.threads_per_core.max(1) as usize);
    let p = x.ops_between_writes.max(1) as f64;
    let mut rng = SplitMix64::new(0x15_0b57);
    let mut req: Vec<(f64, usize)> = Vec::with_capacity(cores);
    let mut reads = vec![0.0f64; cores * tpc];
    let (mut wait, mut service) = (0.0, 0.0);
    for _ in 0..ISOLATED_BURSTS {
        let writer = ((rng.next_f64() * cores as f64) as usize).min(cores - 1);
        req.clear();
        for c in 0..cores {
            let mut first = f64::INFINITY;
            for k in 0..tpc {
                let r = rng.next_f64() * x.other_ns;
                reads[c * tpc + k] = r;
                first = first.min(r);
            }
            if c != writer {
                req.push((first, c));
            }
        }
        req.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        // Times from the write's start: its invalidations go out as its service starts, so
        // the first readers queue behind it.
        let mut free = x.write_ns;
        for (i, &(at, c)) in req.iter().enumerate() {
            let s = if i == 0 { x.first_read_ns } else { x.reread_ns };
            free = at.max(free) + s;
            service += s;
            wait += reads[c * tpc..(c + 1) * tpc]
                .iter()
                .map(|r| (free - r).max(0.0))
                .sum::<f64>();
        }
    }
    let n = ISOLATED_BURSTS as f64;
    // Per write: `wait / n` of reading and `service / n + write_ns` of the home; writes per
    // ns: cores x threads / (P x other_ns).
    let writes_per_ns = (cores * tpc) as f64 / (p * x.other_ns);
    BurstCost {
        read_ns: wait / n / p,
        write_ns: x.write_ns / p,
        utilisation: (writes_per_ns * (service / n + x.write_ns)).min(1.0),
    }
}

/// The line at its home: the newest version written (`version`: reads served from now on get
/// it), the newest whose invalidation has reached the other cores (`seen`), each core's
/// version and outstanding request (completion time), the home's next free time, whether the
/// last service was a write.
#[derive(Debug, Clone)]
struct Home {
    version: u64,
    seen: u64,
    core_ver: Vec<u64>,
    fill: Vec<Option<f64>>,
    free: f64,
    dirty: bool,
}

impl Home {
    fn new(cores: usize) -> Home {
        Home {
            version: 0,
            seen: 0,
            core_ver: vec![0; cores],
            fill: vec![None; cores],
            free: 0.0,
            dirty: false,
        }
    }

    /// A read by core `c` at `at`: when it completes, and the home's service it took (0 for a
    /// hit or a wait on the core's outstanding request).
    fn read(&mut self, c: usize, at: f64, x: &BurstInputs) -> (f64, f64) {
        match self.fill[c] {
            // The core's request is out (a sibling's miss): wait for it.
            Some(f) if f > at => (f, 0.0),
            _ if self.core_ver[c] < self.seen => {
                let s = if self.dirty {
                    x.first_read_ns
                } else {
                    x.reread_ns
                };
                self.dirty = false;
                let done = at.max(self.free) + s;
                self.free = done;
                self.fill[c] = Some(done);
                self.core_ver[c] = self.version;
                (done, s)
            }
            _ => (at, 0.0),
        }
    }

    /// A write by core `c` arriving at `at`: its service start (the invalidations go out) and
    /// end.
    fn write(&mut self, c: usize, at: f64, x: &BurstInputs) -> (f64, f64) {
        let start = at.max(self.free);
        self.free = start + x.write_ns;
        self.dirty = true;
        self.version += 1;
        self.core_ver[c] = self.version;
        self.fill[c] = None;
        (start, self.free)
    }

    /// Whether core `c`'s copy is current as far as the invalidations go.
    fn valid(&self, c: usize) -> bool {
        self.core_ver[c] >= self.seen
    }
}

/// The closed loop simulated (module docs).
fn closed_cost(x: &BurstInputs) -> BurstCost {
    let (cores, tpc) = (x.cores as usize, x.threads_per_core as usize);
    let n = cores * tpc;
    let (tau, p) = (x.other_ns, x.ops_between_writes);
    let mut rng = SplitMix64::new(0x5eed_b0b5);
    let mut th: Vec<Thread> = (0..n)
        .map(|_| Thread {
            next: rng.next_f64() * tau,
            left: 1 + ((rng.next_f64() * p as f64) as u64).min(p - 1),
            ver: 0,
        })
        .collect();
    let mut home = Home::new(cores);
    // A thread's event is its next miss when its core's copy is stale, else its writing
    // operation (the hits before it are counted when it runs).
    let event_time = |t: &Thread, valid: bool| {
        if valid {
            t.next + (t.left - 1) as f64 * tau
        } else {
            t.next
        }
    };
    // Heap entries: (time, sequence, event); a thread's operation carries its `ver`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Ev {
        Op { thread: usize, ver: u64 },
        Write { thread: usize },
        Inval { version: u64, core: usize },
    }
    let mut heap: BinaryHeap<Reverse<(Ord64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<(Ord64, u64, Ev)>>, t: f64, e: Ev| {
        seq += 1;
        heap.push(Reverse((Ord64(t), seq, e)));
    };
    for (i, t) in th.iter().enumerate() {
        let e = Ev::Op {
            thread: i,
            ver: t.ver,
        };
        push(&mut heap, event_time(t, true), e);
    }
    let (mut writes, mut ops, mut read_wait, mut write_cost, mut busy) =
        (0usize, 0u64, 0.0, 0.0, 0.0);
    let mut t0 = 0.0f64;
    while let Some(Reverse((Ord64(at), _, ev))) = heap.pop() {
        let counting = writes >= WARMUP;
        match ev {
            Ev::Op { thread: i, ver } => {
                if ver != th[i].ver {
                    continue;
                }
                let c = i / tpc;
                // Hits skipped up to this operation (a writing operation after hits).
                let skipped = ((at - th[i].next) / tau).round().max(0.0) as u64;
                let skipped = skipped.min(th[i].left - 1);
                th[i].left -= skipped;
                if counting {
                    ops += skipped + 1;
                }
                let (done, s) = home.read(c, at, x);
                if counting {
                    read_wait += done - at;
                    busy += s;
                }
                th[i].left -= 1;
                if th[i].left == 0 {
                    // Between its read and its write's service (`left == 0` until then).
                    push(&mut heap, done, Ev::Write { thread: i });
                } else {
                    th[i].next = done + tau;
                    th[i].ver += 1;
                    let valid = home.valid(c);
                    let e = Ev::Op {
                        thread: i,
                        ver: th[i].ver,
                    };
                    push(&mut heap, event_time(&th[i], valid), e);
                }
            }
            Ev::Write { thread: i } => {
                let c = i / tpc;
                let (start, end) = home.write(c, at, x);
                if counting {
                    write_cost += end - at;
                    busy += x.write_ns;
                }
                writes += 1;
                if writes == WARMUP {
                    t0 = end;
                }
                if writes >= WARMUP + BURSTS {
                    break;
                }
                th[i].left = p;
                th[i].next = end + tau;
                th[i].ver += 1;
                let e = Ev::Op {
                    thread: i,
                    ver: th[i].ver,
                };
                push(&mut heap, event_time(&th[i], true), e);
                // The read-for-ownership invalidates the other copies as its service starts;
                // a reader that misses from then on queues behind the write.
                let version = home.version;
                push(&mut heap, start, Ev::Inval { version, core: c });
            }
            Ev::Inval {
                version: v,
                core: c,
            } => {
                home.seen = home.seen.max(v);
                // Every other core whose copy is older is stale from now: its threads miss at
                // their next operation (the ones before now were hits).
                for (j, t) in th.iter_mut().enumerate() {
                    let cj = j / tpc;
                    // A thread waiting for its own write (`left == 0`) is rescheduled then.
                    if cj == c || t.left == 0 || home.valid(cj) {
                        continue;
                    }
                    if t.next < at {
                        let k = ((at - t.next) / tau).ceil() as u64;
                        let k = k.min(t.left - 1);
                        t.next += k as f64 * tau;
                        t.left -= k;
                        if counting {
                            ops += k;
                        }
                    }
                    t.ver += 1;
                    let e = Ev::Op {
                        thread: j,
                        ver: t.ver,
                    };
                    push(&mut heap, t.next, e);
                }
                // Each invalidation leaves the rescheduled threads' old operations in the heap
                // (skipped when popped); with rare writes they lie far ahead and pile up, so
                // every pop pays for a heap of them. Dropping them changes nothing: the events
                // are popped in (time, sequence) order, and a stale one does nothing.
                if heap.len() > 8 * n + 64 {
                    heap.retain(|Reverse((_, _, e))| match *e {
                        Ev::Op { thread, ver } => ver == th[thread].ver,
                        _ => true,
                    });
                }
            }
        }
    }
    let ops = ops.max(1) as f64;
    let span = (home.free - t0).max(f64::MIN_POSITIVE);
    BurstCost {
        read_ns: read_wait / ops,
        write_ns: write_cost / ops,
        utilisation: (busy / span).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(p: u64) -> BurstInputs {
        BurstInputs {
            cores: 22,
            threads_per_core: 2,
            other_ns: 150.0,
            ops_between_writes: p,
            write_ns: 40.0,
            first_read_ns: 40.0,
            reread_ns: 18.0,
        }
    }

    #[test]
    fn two_single_thread_cores_pay_one_transfer_per_write_each() {
        // Each write invalidates the other core as its service starts; that core's next read
        // (uniform over its 150 ns operation) pays one transfer, plus the rest of the write
        // when it comes within the write's 40 ns: 40 + 40^2 / (2 x 150) = 45.3 ns per write.
        // The writer pays its write, 40 ns. Per operation: divided by P.
        let mut x = input(10_000);
        x.cores = 2;
        x.threads_per_core = 1;
        let per_op = |ns: f64| ns / 10_000.0;
        // The isolated estimate draws the phase afresh per write: within 5 % (200 draws).
        let c = burst_cost(&x).unwrap();
        assert!(
            (c.read_ns / per_op(40.0 + 1600.0 / 300.0) - 1.0).abs() < 0.05,
            "{c:?}"
        );
        assert!((c.write_ns / per_op(40.0) - 1.0).abs() < 1e-9, "{c:?}");
        // Two threads in a closed loop lock their phases (nothing random after the start):
        // each write costs the reader between one transfer and one transfer plus the write.
        let c = closed_cost(&x);
        assert!(
            c.read_ns >= per_op(40.0) * 0.99 && c.read_ns <= per_op(80.0) * 1.01,
            "{c:?}"
        );
    }

    #[test]
    fn many_readers_queue_behind_each_other() {
        // 21 other cores re-read within about 50 ns of each other (the first of two threads'
        // 150 ns phases): the home serves them in 40 + 20 x 18 = 400 ns, so a miss waits far
        // more than one transfer.
        let c = burst_cost(&input(10_000)).unwrap();
        let per_miss = c.read_ns * 10_000.0 / 21.0;
        assert!(
            per_miss > 100.0 && per_miss < 400.0,
            "{per_miss} ns per core per write"
        );
    }

    #[test]
    fn cost_grows_as_writes_get_more_frequent() {
        let mut prev = 0.0;
        for p in [100_000, 1000, 200, 50] {
            let c = burst_cost(&input(p)).unwrap();
            let total = c.read_ns + c.write_ns;
            assert!(total > prev, "P {p}: {total} <= {prev}");
            prev = total;
        }
    }

    /// The loop of the module docs stepped one operation at a time (no hits skipped), with the
    /// same [`Home`]: a check of [`closed_cost`]'s skipping of hits and rescheduling on
    /// invalidations. Returns (read wait, write cost) per operation.
    fn stepped(x: &BurstInputs, writes_wanted: usize) -> (f64, f64) {
        let (cores, tpc) = (x.cores as usize, x.threads_per_core as usize);
        let n = cores * tpc;
        let p = x.ops_between_writes;
        let mut rng = SplitMix64::new(7);
        // Events: (time, seq, kind): kind 0 = operation of thread, 1 = write of thread,
        // 2 = invalidation by core (with version).
        type Entry = Reverse<(Ord64, u64, u8, usize, u64)>;
        let mut heap: BinaryHeap<Entry> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut left: Vec<u64> = (0..n)
            .map(|_| 1 + ((rng.next_f64() * p as f64) as u64).min(p - 1))
            .collect();
        for i in 0..n {
            seq += 1;
            heap.push(Reverse((Ord64(rng.next_f64() * x.other_ns), seq, 0, i, 0)));
        }
        let mut home = Home::new(cores);
        let (mut writes, mut ops, mut rw, mut ww) = (0usize, 0u64, 0.0, 0.0);
        while let Some(Reverse((Ord64(at), _, kind, i, v))) = heap.pop() {
            let counting = writes >= WARMUP;
            match kind {
                0 => {
                    let (done, _) = home.read(i / tpc, at, x);
                    if counting {
                        ops += 1;
                        rw += done - at;
                    }
                    left[i] -= 1;
                    seq += 1;
                    if left[i] == 0 {
                        heap.push(Reverse((Ord64(done), seq, 1, i, 0)));
                    } else {
                        heap.push(Reverse((Ord64(done + x.other_ns), seq, 0, i, 0)));
                    }
                }
                1 => {
                    let c = i / tpc;
                    let (start, end) = home.write(c, at, x);
                    if counting {
                        ww += end - at;
                    }
                    writes += 1;
                    if writes >= WARMUP + writes_wanted {
                        break;
                    }
                    left[i] = p;
                    seq += 1;
                    heap.push(Reverse((Ord64(end + x.other_ns), seq, 0, i, 0)));
                    seq += 1;
                    heap.push(Reverse((Ord64(start), seq, 2, c, home.version)));
                }
                _ => home.seen = home.seen.max(v),
            }
        }
        (rw / ops as f64, ww / ops as f64)
    }

    #[test]
    fn the_skipping_simulation_matches_one_stepped_operation_by_operation() {
        // Light, moderate and heavy use of the home; within 10 % (different random phases,
        // 300 writes each).
        for p in [400u64, 60, 20] {
            let x = BurstInputs {
                cores: 6,
                ..input(p)
            };
            let c = closed_cost(&x);
            let (r, w) = stepped(&x, BURSTS);
            assert!(
                (c.read_ns / r - 1.0).abs() < 0.1,
                "P {p}: {c:?} vs stepped {r}"
            );
            assert!(
                (c.write_ns / w - 1.0).abs() < 0.1,
                "P {p}: {c:?} vs stepped {w}"
            );
        }
    }

    #[test]
    fn isolated_and_closed_agree_where_bursts_rarely_meet() {
        // At the switch (utilisation 0.05) the two estimates must agree to within the closed
        // loop's sampling noise (300 writes: a few %), so the switch does not jump.
        let mut p = 100u64;
        while isolated_cost(&input(p)).utilisation > ISOLATED_BELOW {
            p *= 2;
        }
        let (a, b) = (isolated_cost(&input(p)), closed_cost(&input(p)));
        assert!(
            (a.read_ns / b.read_ns - 1.0).abs() < 0.1,
            "P {p}: {a:?} vs {b:?}"
        );
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut x = input(100);
        x.other_ns = f64::NAN;
        assert!(burst_cost(&x).is_err());
        let mut x = input(100);
        x.ops_between_writes = 0;
        assert!(burst_cost(&x).is_err());
        let mut x = input(100);
        x.cores = 0;
        assert!(burst_cost(&x).is_err());
    }
}
