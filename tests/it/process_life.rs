//! A task that frees part of its pages while it runs (kind alloc-loop's `params.life_free_share`,
//! `alloc_run_pages`, `life_free_run_pages`, `Freeing::Lives`; measured for cc1 on the project's
//! host, and held to the host kernel in tests/host_trace.rs): the life's runs add up, a life
//! with no frees is the phase loop to the last bit, and the kernel's rules then keep
//! `alloc_factor` low (a free halves it, 6.7+), so refills stay small.

use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::autotune::{pageset, FlowTally, ProcessFlow, SeriesState};
use pcpmodel::model::zonelock::generic::{Freeing, Life, LoopShape, MAX_LIFE_RUNS};
use pcpmodel::model::zonelock::PcpOverride;
use pcpmodel::model::zonelock::ZoneLockModel;
use pcpmodel::workload::NodeSpan;
use pcpmodel::Machine;

/// 1000 pages, 650 of them freed while it runs, after allocation runs of 225 pages; frees of
/// whatever is owed.
const LIFE_1000: Life = Life {
    pages: 1000,
    life_free_pages: 650,
    alloc_run_pages: 225,
    free_run_pages: 1,
};

#[test]
fn a_life_frees_its_share_after_each_run_and_the_rest_at_the_end() {
    let life = LIFE_1000;
    let runs = life.runs().unwrap();
    // ceil(1000 / 225) = 5 runs of 225, 225, 225, 225 and 100 allocations.
    assert_eq!(
        runs.iter().map(|r| r.0).collect::<Vec<_>>(),
        [225, 225, 225, 225, 100]
    );
    assert_eq!(runs.iter().map(|r| r.0).sum::<u64>(), 1000);
    assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 1000);
    // floor(650 n / 1000) freed once n are allocated: 146 after the first run, 292 after the
    // second; the last run's frees are its share (650 - 585 = 65) and the 350 left at exit.
    assert_eq!(runs[0].1, 146);
    assert_eq!(runs[0].1 + runs[1].1, 292);
    assert_eq!(runs[4].1, 65 + 350);
    // No frees during the life: one run, every page freed at its end.
    let none = Life::at_exit(1000);
    assert_eq!(none.runs().unwrap(), vec![(1000, 1000)]);
}

#[test]
fn impossible_lives_are_errors_not_hangs() {
    let bad = |pages, life_free_pages, alloc_run_pages| {
        Life {
            pages,
            life_free_pages,
            alloc_run_pages,
            free_run_pages: 1,
        }
        .runs()
        .unwrap_err()
        .to_string()
    };
    assert!(bad(0, 0, 1).contains("pages >= 1"));
    assert!(bad(10, 11, 1).contains("life frees <= pages"));
    assert!(bad(10, 0, 0).contains("runs >= 1 page"));
    // 2^40 pages in runs of one page would be stepped a trillion times.
    let e = bad(1 << 40, 0, 1);
    assert!(e.contains(&MAX_LIFE_RUNS.to_string()), "{e}");
}

fn model(kernel: KernelVersion) -> ZoneLockModel {
    ZoneLockModel::new(&Machine::builtin("icelake-server").unwrap(), kernel).unwrap()
}

fn dynamics(
    kernel: KernelVersion,
    freeing: Freeing,
    over: PcpOverride,
) -> pcpmodel::model::zonelock::BatchDynamics {
    let shape = LoopShape { order: 0, freeing };
    let mut z = model(kernel)
        .loop_dynamics(1, NodeSpan::One, &shape, None, over)
        .unwrap();
    z.remove(0).2
}

#[test]
fn a_life_without_frees_is_the_phase_loop() {
    // A fixed high of 2000 pages, so that 6.10 refills too (auto-tuned, the list would hold a
    // whole life).
    let over = PcpOverride {
        batch: None,
        high: Some(2000),
    };
    for kernel in [KernelVersion::new(6, 6), KernelVersion::new(6, 10)] {
        let phases = dynamics(kernel, Freeing::Phases(16_384), over);
        let life = dynamics(kernel, Freeing::Lives(Life::at_exit(16_384)), over);
        assert!(!phases.refill.is_empty(), "{kernel}");
        assert_eq!(phases.refill, life.refill, "{kernel}");
        assert_eq!(phases.free, life.free, "{kernel}");
    }
}

#[test]
fn frees_during_the_life_keep_refills_small_on_6_7_and_later() {
    // 6.10: each refill of an uninterrupted allocation phase doubles (alloc_factor++ up to
    // CONFIG_PCP_BATCH_SCALE_MAX = 5: 63, 126, ..., bounded by high - count - batch); any free
    // halves alloc_factor. A life that frees 65 % while it runs, after allocation runs of 225
    // pages, restarts the ramp every run, and the pages it freed are allocated again from the
    // list: fewer pages come from the zone, in smaller refills. pcp->high is fixed at 2000
    // pages (high_min = high_max): auto-tuned, this machine's list would hold a whole life and
    // neither loop would refill at all.
    let k = KernelVersion::new(6, 10);
    let over = PcpOverride {
        batch: None,
        high: Some(2000),
    };
    let phases = dynamics(k, Freeing::Phases(16_384), over);
    let life = dynamics(
        k,
        Freeing::Lives(Life {
            pages: 16_384,
            life_free_pages: 10_650,
            alloc_run_pages: 225,
            free_run_pages: 1,
        }),
        over,
    );
    let mean = |h: &[(u32, u64)]| {
        let (p, n) = h
            .iter()
            .fold((0u64, 0u64), |a, &(p, n)| (a.0 + u64::from(p) * n, a.1 + n));
        (p as f64 / n.max(1) as f64, p)
    };
    let (phase_mean, phase_pages) = mean(&phases.refill);
    let (life_mean, life_pages) = mean(&life.refill);
    assert!(life_mean < phase_mean, "{life_mean} vs {phase_mean}");
    assert!(life_pages < phase_pages, "{life_pages} vs {phase_pages}");
    // At most a run's 225 pages can be wanted before a free resets the ramp.
    assert!(
        life.refill.iter().all(|&(p, _)| p <= 252),
        "{:?}",
        life.refill
    );
}

#[test]
fn the_time_stepped_process_flow_follows_the_same_life() {
    // The flow behind Huang Ying's kbuild rows (crate::model::autotune) steps the same runs:
    // without life frees it moves every page through the zone at least once per life on 6.6
    // (the list holds a few hundred pages, a life 16384); with them the freed pages come back
    // from the list and fewer pages are refilled per page of the life.
    let m = model(KernelVersion::new(6, 6));
    let run = |life_free_pages, alloc_run_pages| {
        let flow = ProcessFlow {
            life: Life {
                pages: 16_384,
                life_free_pages,
                alloc_run_pages,
                free_run_pages: 1,
            },
            work_ns: 61_000.0,
            share: 0.99,
            pgd_order: 1,
            tick_ns: 1e9,
            processes: 8,
            tick_phase: 0.0,
        };
        let mut st = pageset(&m, SeriesState::Base, 0).unwrap();
        let t: FlowTally = flow.run(&mut st).unwrap();
        t.zone_alloc_pages as f64 / t.work_units as f64
    };
    let all_at_exit = run(0, 16_384);
    // 65 % freed, in small runs (not cc1's: see host_trace).
    let measured_life = run(10_650, 225);
    // Every page but the few the list carries between lives is refilled.
    assert!(all_at_exit > 0.95, "{all_at_exit}");
    // Most of the 65 % freed while it runs come back from the list; a free run of about 146
    // pages on a list already near 6.6's high (a few hundred pages here) drains some of them.
    assert!(measured_life < 0.5, "{measured_life}");
}

#[test]
fn frees_owed_are_freed_in_runs_of_the_given_size() {
    // 650 of 1000 pages owed at 0.65 per page allocated, in runs of whole multiples of 300: after
    // 225 allocations 146 are owed (none freed), after 450 292 (none), after 675 438 (300 freed),
    // after 900 585 (285 owed: none), at the end 650 owed: 300 more, and the 400 left at exit.
    let life = Life {
        free_run_pages: 300,
        ..LIFE_1000
    };
    let runs = life.runs().unwrap();
    assert_eq!(
        runs,
        vec![
            (225, 0),
            (225, 0),
            (225, 300),
            (225, 0),
            (100, 300 + 50 + 350)
        ]
    );
    assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 1000);
}

#[test]
fn predict_says_which_life_it_stepped() {
    // A user reading `predict` sees the life the loop stepped, with the params it came from.
    let out = assert_cmd::Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", "kbuild"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("each task's life: 16384 allocations in runs of 1400")
            && text.contains("params.life_free_share"),
        "{text}"
    );
}
