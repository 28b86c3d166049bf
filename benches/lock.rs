//! Speed of the zone->lock queue solver. Target: N = 1024 CPUs solves in well under 1 ms.
//!
//! Run with `cargo bench --bench lock`; the last lines print the mean time per solve.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use pcpmodel::model::lock::{
    machine_repairman, ClassShare, HoldAtom, HoldDist, HolderClass, LockQueue, ThinkLaw,
};

/// Refill and free classes sharing every CPU (the mmap/fill/munmap workload of seed 000).
fn mixed(n: u32) -> LockQueue {
    let ns = |pages: f64| 300.0 + 20.0 * pages;
    LockQueue {
        n_cpus: n,
        classes: vec![
            HolderClass::new(
                "refill",
                2e6,
                HoldDist::Discrete {
                    atoms: vec![
                        HoldAtom {
                            hold_ns: ns(63.0),
                            weight: 0.8,
                        },
                        HoldAtom {
                            hold_ns: ns(252.0),
                            weight: 0.15,
                        },
                        HoldAtom {
                            hold_ns: ns(2016.0),
                            weight: 0.05,
                        },
                    ],
                },
            )
            .with_share(ClassShare::Fraction(0.5)),
            HolderClass::new(
                "free",
                2e6,
                HoldDist::Gamma {
                    mean_ns: ns(63.0),
                    cv2: 0.3,
                },
            )
            .with_share(ClassShare::Fraction(0.5)),
        ],
        think: ThinkLaw::Exponential,
    }
}

fn dedicated(n: u32) -> LockQueue {
    LockQueue {
        n_cpus: n,
        classes: vec![
            HolderClass::new("refill", 2e6, HoldDist::Deterministic { hold_ns: 1560.0 })
                .with_share(ClassShare::Cpus(n / 2)),
            HolderClass::new(
                "free",
                1e6,
                HoldDist::Gamma {
                    mean_ns: 1560.0,
                    cv2: 0.3,
                },
            )
            .with_share(ClassShare::Cpus(n - n / 2)),
        ],
        think: ThinkLaw::Exponential,
    }
}

fn single_gamma(n: u32) -> LockQueue {
    LockQueue::single(
        n,
        2e6,
        HoldDist::Gamma {
            mean_ns: 2000.0,
            cv2: 0.5,
        },
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("lock");
    g.bench_function("machine_repairman_n1024", |b| {
        b.iter(|| machine_repairman(black_box(1024), 2e6, 2000.0))
    });
    g.bench_function("solve_single_gamma_n1024", |b| {
        let q = single_gamma(1024);
        b.iter(|| black_box(&q).solve())
    });
    g.bench_function("solve_mixed_two_class_n1024", |b| {
        let q = mixed(1024);
        b.iter(|| black_box(&q).solve())
    });
    g.bench_function("solve_dedicated_two_class_n1024", |b| {
        let q = dedicated(1024);
        b.iter(|| black_box(&q).solve())
    });
    g.bench_function("solve_mva_single_n1024", |b| {
        let q = single_gamma(1024);
        b.iter(|| black_box(&q).solve_mva())
    });
    g.sample_size(10);
    g.bench_function("latency_distribution_mixed_n64", |b| {
        let q = mixed(64);
        b.iter(|| black_box(&q).latency_distribution(0))
    });
    g.finish();
}

criterion_group!(benches, bench);

/// Mean wall time of `f` over `reps` calls, in µs.
fn time_us<T>(reps: u32, mut f: impl FnMut() -> T) -> f64 {
    let t = Instant::now();
    for _ in 0..reps {
        black_box(f());
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(reps)
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let (single, mixed_q, ded) = (single_gamma(1024), mixed(1024), dedicated(1024));
    println!("lock solver, N = 1024 CPUs (mean wall time per call):");
    println!(
        "  solve, one gamma class:        {:8.1} µs",
        time_us(2000, || single.solve())
    );
    println!(
        "  solve, two mixed classes:      {:8.1} µs",
        time_us(2000, || mixed_q.solve())
    );
    println!(
        "  solve, two dedicated classes:  {:8.1} µs",
        time_us(200, || ded.solve())
    );
    println!(
        "  latency distribution (mixed):  {:8.1} µs",
        time_us(5, || mixed_q.latency_distribution(0))
    );
}
