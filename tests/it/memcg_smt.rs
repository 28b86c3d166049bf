//! SMT-shared transfers on the memcg counter lines: the approximate mean value analysis in
//! `MemcgModel::estimate` (src/model/memcg.rs) against a discrete-event simulation of exactly
//! its assumptions:
//! - every CPU alternates an exponential think (the fixed work) and one episode (a charge walk,
//!   an uncharge walk or a flush, drawn from the two roles' mean mix), whose transfers it makes
//!   in program order (`walk_visits`);
//! - each line is one FCFS server of exponential transfers;
//! - a CPU that needs a line its core's sibling is queued for or being served at joins that
//!   request and is served by the same transfer.
//!
//! The simulation pairs CPUs into cores; without SMT every CPU is its own core and the analysis
//! is exact MVA. A property test checks the analysis's invariants on random networks.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use pcpmodel::fit::stats::SplitMix64;
use pcpmodel::hw::machine::Machine;
use pcpmodel::model::memcg::{CounterCode, MemcgModel, PAGE_BYTES};
use pcpmodel::validate::t001;

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

/// Throughput per instance, Mbit/s, simulated over `t_end_ns`: the model's CPUs, episode mix,
/// transfer time and fixed work; `core_of(cpu)` names each CPU's core.
fn simulate(
    model: &MemcgModel,
    params: &[f64],
    batch: u32,
    core_of: &dyn Fn(usize) -> usize,
    t_end_ns: f64,
) -> f64 {
    let rates = model.stock_rates(batch, params[2]).unwrap();
    let mean = |k: usize| 0.5 * (rates[0][k] + rates[1][k]);
    let v = &model.visits;
    let mix: Vec<(f64, &[usize])> = vec![
        (mean(0), &v.charge[..]),
        (mean(1), &v.uncharge[..]),
        (mean(2), &v.flush[..]),
    ];
    let rho: f64 = mix.iter().map(|m| m.0).sum();
    let think = params[0] / rho;
    let x = params[1] * model.transfer_ns;
    let n = model.charging_cpus as usize;
    let n_lines = model.lines.len();
    let mut rng = SplitMix64::new(0x5eed_0001);
    let mut expo = move |m: f64| -> f64 { -m * (1.0 - rng.next_f64()).ln() };
    let mut pick = SplitMix64::new(0x5eed_0002);
    let mut seq: Vec<usize> = vec![0; n];
    let mut pos: Vec<usize> = vec![0; n];
    let mut busy: Vec<Option<Vec<usize>>> = vec![None; n_lines];
    let mut queue: Vec<VecDeque<Vec<usize>>> = vec![VecDeque::new(); n_lines];
    let mut ev: BinaryHeap<Ev> = (0..n).map(|c| Ev(expo(think), c)).collect();
    let mut episodes = 0usize;
    // Places CPU `c` at the line of its current transfer; returns a completion to schedule.
    let arrive = |c: usize,
                  seq: &[usize],
                  pos: &[usize],
                  busy: &mut [Option<Vec<usize>>],
                  queue: &mut [VecDeque<Vec<usize>>]|
     -> Option<usize> {
        let l = mix[seq[c]].1[pos[c]];
        let core = core_of(c);
        if let Some(g) = busy[l].as_mut() {
            if core_of(g[0]) == core {
                g.push(c);
                return None;
            }
        }
        if let Some(g) = queue[l].iter_mut().find(|g| core_of(g[0]) == core) {
            g.push(c);
            return None;
        }
        if busy[l].is_none() {
            busy[l] = Some(vec![c]);
            Some(l)
        } else {
            queue[l].push_back(vec![c]);
            None
        }
    };
    while let Some(Ev(t, id)) = ev.pop() {
        if t > t_end_ns {
            break;
        }
        let mut moving = Vec::new();
        if id < n {
            // End of think: start an episode.
            let u = pick.next_f64() * rho;
            let mut acc = 0.0;
            seq[id] = mix.len() - 1;
            for (k, m) in mix.iter().enumerate() {
                acc += m.0;
                if u < acc {
                    seq[id] = k;
                    break;
                }
            }
            pos[id] = 0;
            moving.push(id);
        } else {
            let l = id - n;
            let group = busy[l].take().unwrap_or_default();
            if let Some(next) = queue[l].pop_front() {
                busy[l] = Some(next);
                ev.push(Ev(t + expo(x), n + l));
            }
            for c in group {
                pos[c] += 1;
                if pos[c] >= mix[seq[c]].1.len() {
                    episodes += 1;
                    ev.push(Ev(t + expo(think), c));
                } else {
                    moving.push(c);
                }
            }
        }
        for c in moving {
            if let Some(l) = arrive(c, &seq, &pos, &mut busy, &mut queue) {
                ev.push(Ev(t + expo(x), n + l));
            }
        }
    }
    let pages_per_ns = episodes as f64 / rho / (n as f64 * t_end_ns);
    pages_per_ns * PAGE_BYTES as f64 * 8.0 * 1e3
}

const T_END_NS: f64 = 4e7;

/// thread 001's calibration, fitted once per test binary (deterministic, read by every test).
fn calibrated() -> &'static Vec<f64> {
    static P: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    P.get_or_init(|| t001::calibrated_params().unwrap().0)
}

fn paired(n: usize) -> impl Fn(usize) -> usize {
    move |c| c % (n / 2)
}

#[test]
fn shared_transfers_match_simulation_on_thread_001() {
    let p = calibrated().clone();
    let base = t001::model_001().unwrap();
    assert_eq!(base.threads_per_core, 2.0);
    let n = base.charging_cpus as usize;
    let mut gains = Vec::new();
    for (code, batch) in [
        (CounterCode::Rc1, 32),
        (CounterCode::Rc1, 64),
        (CounterCode::FewerAtomics, 32),
        (CounterCode::SplitLayout, 32),
        (CounterCode::Both, 64),
    ] {
        let m = base.clone().with_code(code);
        let model = m.estimate(&p, batch).unwrap().throughput_mbps;
        let sim = simulate(&m, &p, batch, &paired(n), T_END_NS);
        let err = model / sim - 1.0;
        eprintln!("{code:?} batch {batch}: model {model:.0} Mbit/s, simulation {sim:.0}");
        // Tolerance 4 %: the analysis pairs siblings independently at their first transfer
        // on a line; the simulation's pairs are correlated (model +0.1..+1.1 % above it when written).
        assert!(
            err.abs() < 0.04,
            "{code:?} at {batch}: model {model:.0}, sim {sim:.0}"
        );
        if code == CounterCode::Rc1 {
            gains.push((model, sim));
        }
    }
    let model_gain = 100.0 * (gains[1].0 / gains[0].0 - 1.0);
    let sim_gain = 100.0 * (gains[1].1 / gains[0].1 - 1.0);
    eprintln!("gain 32 -> 64: model {model_gain:.1} %, simulation {sim_gain:.1} %");
    // Gain 32 -> 64 within 4 points of the simulation's: the gain is the ratio of two of the
    // throughputs above, whose pairing bias has the same sign at both batches (+1.1 % and +0.4 %
    // when written: 60.3 % against 61.4 %), so it largely cancels; 4 points is 2.5 % of the
    // ratio 1.6, within the 4 % each throughput is allowed.
    assert!(
        (model_gain - sim_gain).abs() < 4.0,
        "gain model {model_gain:.1} %, sim {sim_gain:.1} %"
    );
}

#[test]
fn without_smt_the_analysis_is_exact_mva_and_matches_simulation() {
    let p = calibrated().clone();
    let mut machine = Machine::builtin("memcg-72cpu").unwrap();
    machine.topology.threads_per_core.value = 1;
    machine.topology.cores_per_socket.value = 36;
    let m = MemcgModel::new(&machine, 36, 3).unwrap();
    assert_eq!(m.threads_per_core, 1.0);
    for batch in [32, 64] {
        let e = m.estimate(&p, batch).unwrap();
        assert!(e.sibling_shared.abs() < 1e-12);
        let sim = simulate(&m, &p, batch, &|c| c, T_END_NS);
        let err = e.throughput_mbps / sim - 1.0;
        // Exact MVA for exponential FCFS lines: only the simulation's sampling error over 40 ms
        // separates them (the SMT runs, which add the pairing bias, agree within 1.1 %).
        assert!(
            err.abs() < 0.02,
            "{batch}: model {}, sim {sim:.0}",
            e.throughput_mbps
        );
    }
}

#[test]
fn sharing_grows_with_the_queue() {
    // The busiest line's shared share falls when the doubled batch shortens its queue: the
    // mechanism that makes the gain smaller than with unshared transfers.
    let p = calibrated().clone();
    let m = t001::model_001().unwrap();
    let a = m.estimate(&p, 32).unwrap();
    let b = m.estimate(&p, 64).unwrap();
    let busiest =
        |e: &pcpmodel::model::memcg::MemcgEstimate| e.busiest_line().unwrap().sibling_shared;
    // Doubling the batch halves the walks per page, so the line's load halves; a sibling shares
    // a transfer when it finds the line queued, and the queue falls at least as fast as the load
    // (L = U / (1 - U) for one server), so the share must at least halve (0.26 -> 0.11 when
    // written).
    assert!(
        busiest(&b) < 0.5 * busiest(&a),
        "{} {}",
        busiest(&a),
        busiest(&b)
    );
    assert!(a.sibling_shared > b.sibling_shared);
    // Shares stay physical.
    for e in [&a, &b] {
        assert!(e
            .lines
            .iter()
            .all(|l| (0.0..=0.5).contains(&l.sibling_shared)));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// For any network of lines: sharing never slows the CPUs down, a line is never more than
    /// fully busy, a CPU pays at least half of every transfer after its first on a line, and
    /// with one thread per core the analysis is the same as without SMT.
    #[test]
    fn shared_mva_invariants(
        n in 1u32..200,
        think in 1.0f64..1e5,
        x in 1.0f64..500.0,
        seq in proptest::collection::vec(0usize..4, 1..20),
        rate in 0.01f64..2.0,
    ) {
        use pcpmodel::model::lines::{shared_mva, Episode};
        let roles = vec![vec![Episode { rate, visits: &seq }]];
        let one = shared_mva(n, 1.0, think, x, &roles, 4);
        let two = shared_mva(n, 2.0, think, x, &roles, 4);
        proptest::prop_assert!(two.x >= one.x * (1.0 - 1e-9), "{} < {}", two.x, one.x);
        for s in [&one, &two] {
            for l in 0..4 {
                let visits = seq.iter().filter(|v| **v == l).count() as f64;
                let u = s.x * s.service[l];
                proptest::prop_assert!(u <= 1.0 + 1e-9, "line {l} busy {u}");
                proptest::prop_assert!(s.resp[l] >= s.service[l] * (1.0 - 1e-9));
                if visits > 0.0 {
                    let floor = rate * x * (visits - 1.0) / 2.0;
                    proptest::prop_assert!(s.service[l] >= floor * (1.0 - 1e-9));
                }
            }
        }
        for l in 0..4 {
            let visits = seq.iter().filter(|v| **v == l).count() as f64;
            proptest::prop_assert!((one.service[l] - rate * x * visits).abs() <= 1e-9 * (1.0 + rate * x * visits));
        }
    }
}
