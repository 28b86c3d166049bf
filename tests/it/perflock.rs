//! `perf lock contention`'s view of a queued spinlock (src/model/perflock.rs) against a
//! discrete-event simulation of the same lock in which the probe acts exactly as in the kernel:
//! an acquisition that finds at least two CPUs at the lock is traced, its hold carries the end
//! handler, and its reported wait the handlers' work.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use pcpmodel::fit::stats::SplitMix64;
use pcpmodel::model::lock::HoldAtom;
use pcpmodel::model::perflock::{observe_lock, PerfLockProbe, TRACED_MIN_AHEAD};

#[derive(PartialEq)]
struct Ev(f64, usize);
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0)
    }
}

/// (P(traced), mean reported wait of traced acquisitions) from a FIFO single-server simulation:
/// `n` CPUs, exponential think of mean `z`, deterministic hold `h`.
fn simulate(n: usize, z: f64, h: f64, probe: Option<&PerfLockProbe>, ops: usize) -> (f64, f64) {
    let mut rng = SplitMix64::new(0x5eed_0003);
    let mut expo = |m: f64| -> f64 { -m * (1.0 - rng.next_f64()).ln() };
    let mut ev: BinaryHeap<Ev> = (0..n).map(|k| Ev(expo(z), k)).collect();
    let mut departures: VecDeque<f64> = VecDeque::new();
    let mut last = 0.0f64;
    let (mut traced, mut wait) = (0usize, 0.0f64);
    for _ in 0..ops {
        let Some(Ev(t, k)) = ev.pop() else { break };
        while departures.front().is_some_and(|&d| d <= t) {
            departures.pop_front();
        }
        let at_lock = departures.len();
        let start = t.max(last);
        let is_traced = at_lock >= TRACED_MIN_AHEAD;
        let extra = match (probe, is_traced) {
            (Some(p), true) => p.end_under_lock_ns,
            _ => 0.0,
        };
        let dep = start + h + extra;
        last = dep;
        departures.push_back(dep);
        if is_traced {
            traced += 1;
            wait += start - t + probe.map_or(0.0, |p| p.reported_extra_ns());
        }
        ev.push(Ev(dep + expo(z), k));
    }
    (traced as f64 / ops as f64, wait / traced.max(1) as f64)
}

fn probe() -> PerfLockProbe {
    PerfLockProbe {
        begin_after_clock_ns: 500.0,
        end_before_clock_ns: 50.0,
        end_under_lock_ns: 314.0,
    }
}

#[test]
fn traced_share_and_wait_match_simulation_without_probe() {
    // Thread 003's operating point (23 CPUs per zone lock, 13.6 us think, 522 ns hold) and a
    // lightly loaded one.
    for (n, z, h) in [(23u32, 13_561.0, 522.0), (8, 3_000.0, 300.0)] {
        let atoms = [HoldAtom {
            hold_ns: h,
            weight: 1.0,
        }];
        let m = observe_lock(n, z, &atoms, None).unwrap();
        let (p, w) = simulate(n as usize, z, h, None, 400_000);
        // Exact for exponential think: only simulation noise (and the chain's cell
        // discretisation) separate them. Size of the noise: 400 000 acquisitions give a
        // binomial sd of sqrt(0.25 / 4e5) = 0.0008 on the traced share, and a relative sd of
        // about 1 / sqrt(traced) < 0.5 % on the mean wait (waits have a coefficient of
        // variation near 1); successive acquisitions within one busy period are correlated,
        // which we estimate inflates both by up to ~10x near saturation (batch means; not
        // measured here). 0.02 and 6 % are therefore 2.5 and ~1.5-2 such inflated sd, plus about
        // 1 % for the 64 elapsed-time cells of the embedded chain (ELAPSED_CELLS).
        assert!(
            (m.p_traced - p).abs() < 0.02,
            "n {n}: model {m:?} sim p {p}"
        );
        assert!(
            (m.wait_traced_ns / w - 1.0).abs() < 0.06,
            "n {n}: model {} sim {w}",
            m.wait_traced_ns
        );
        assert_eq!(m.iterations, 1);
    }
}

#[test]
fn probe_fixed_point_matches_simulation() {
    // With the probe the traced holds are longer; the model mixes them in independently
    // (perflock.rs), which ignores that long holds cluster in busy periods. Measured: at thread
    // 003's point the reported wait is 3 % low and the traced share 0.025 high; at the moderate
    // load (8 CPUs) 15 % low and 0.065 high. Tolerances: 18 % and 0.08.
    let pr = probe();
    for (n, z, h) in [(23u32, 13_561.0, 522.0), (8, 3_000.0, 300.0)] {
        let atoms = [HoldAtom {
            hold_ns: h,
            weight: 1.0,
        }];
        let m = observe_lock(n, z, &atoms, Some(&pr)).unwrap();
        let (p, w) = simulate(n as usize, z, h, Some(&pr), 400_000);
        assert!(
            (m.p_traced - p).abs() < 0.08,
            "n {n}: model {m:?} sim p {p}"
        );
        assert!(
            (m.reported_wait_ns / w - 1.0).abs() < 0.18,
            "n {n}: model {} sim {w}",
            m.reported_wait_ns
        );
        // The probe lengthens what perf reports beyond its own added work.
        let bare = observe_lock(n, z, &atoms, None).unwrap();
        assert!(m.reported_wait_ns > bare.wait_traced_ns + pr.reported_extra_ns());
    }
}

#[test]
fn idle_lock_traces_nothing_and_bad_probe_is_an_error() {
    let atoms = [HoldAtom {
        hold_ns: 100.0,
        weight: 1.0,
    }];
    let m = observe_lock(1, 1000.0, &atoms, Some(&probe())).unwrap();
    assert_eq!(m.p_traced, 0.0);
    assert!(m.reported_wait_ns.is_nan());
    let mut bad = probe();
    bad.end_under_lock_ns = f64::NAN;
    let e = observe_lock(4, 1000.0, &atoms, Some(&bad)).unwrap_err();
    assert!(e.to_string().contains("end_under_lock_ns"), "{e}");
}

/// page_fault1's think law is bimodal: each task faults `m` folios (one allocation per
/// `fault` ns of work) and then unmaps them (one free per `unmap` ns). Returns the same pair as
/// [`simulate`].
fn simulate_bimodal(
    n: usize,
    m: usize,
    fault: f64,
    unmap: f64,
    h: f64,
    probe: Option<&PerfLockProbe>,
    cycles: usize,
) -> (f64, f64) {
    let mut rng = SplitMix64::new(0x5eed_00b1);
    let period = m as f64 * (fault + unmap);
    let mut ev: BinaryHeap<Ev> = (0..n).map(|k| Ev(rng.next_f64() * period, k)).collect();
    let mut op = vec![0usize; n];
    let mut departures: VecDeque<f64> = VecDeque::new();
    let mut last = 0.0f64;
    let (mut all, mut traced, mut wait) = (0usize, 0usize, 0.0f64);
    while let Some(Ev(t, k)) = ev.pop() {
        while departures.front().is_some_and(|&d| d <= t) {
            departures.pop_front();
        }
        let is_traced = departures.len() >= TRACED_MIN_AHEAD;
        let start = t.max(last);
        let extra = match (probe, is_traced) {
            (Some(p), true) => p.end_under_lock_ns,
            _ => 0.0,
        };
        last = start + h + extra;
        departures.push_back(last);
        all += 1;
        if is_traced {
            traced += 1;
            wait += start - t + probe.map_or(0.0, |p| p.reported_extra_ns());
        }
        op[k] += 1;
        if op[k] < cycles * 2 * m {
            let think = if op[k] % (2 * m) < m { fault } else { unmap };
            ev.push(Ev(last + think, k));
        }
    }
    (traced as f64 / all as f64, wait / traced.max(1) as f64)
}

#[test]
fn bimodal_think_of_page_fault1_gives_the_same_traced_wait() {
    // Thread 003's point: 23 tasks per zone lock, 2048 folios per cycle, 26.5 us of work per
    // fault, 0.5 us per unmapped folio, 522 ns holds. The model uses an exponential think of
    // the mean. Measured (4 cycles per task): traced wait 1.16 us simulated vs 1.34 us model
    // for the lock alone (+16 %), 6.26 us vs 5.49 us with perf attached (-12 %); the traced
    // share with perf attached is 0.74 simulated against the model's 0.96, so only the wait is
    // asserted (20 %).
    let (m, fault, unmap, h) = (2048usize, 26_500.0, 500.0, 522.0);
    let z = (fault + unmap) / 2.0;
    let atoms = [HoldAtom {
        hold_ns: h,
        weight: 1.0,
    }];
    for pr in [None, Some(probe())] {
        let model = observe_lock(23, z, &atoms, pr.as_ref()).unwrap();
        let (_, w) = simulate_bimodal(23, m, fault, unmap, h, pr.as_ref(), 4);
        assert!(
            (model.reported_wait_ns / w - 1.0).abs() < 0.20,
            "probe {}: model {} sim {w}",
            pr.is_some(),
            model.reported_wait_ns
        );
    }
}
