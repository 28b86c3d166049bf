//! Speed target of issue 3: a full sweep of pcp->high from 0 to high_max in steps of 1 must take
//! well under 50 ms in release. Prints the measured time per sweep for every built-in machine.

use criterion::{criterion_group, criterion_main, Criterion};
use pcpmodel::answer::optimal_high::{sweep, sweep_limit};
use pcpmodel::fit::calibrate::{default_pcp, netperf_model, netperf_params};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::cache::Placement;
use pcpmodel::Machine;

fn bench(c: &mut Criterion) {
    let kernel = KernelVersion::new(6, 18);
    for name in ["icelake-server", "skylake-desktop", "epyc-7w83"] {
        let m = Machine::builtin(name).unwrap();
        let model = netperf_model(&m, Placement::SameLlc, kernel).unwrap();
        let p = netperf_params(&m).unwrap().values;
        let limit = sweep_limit(&default_pcp(&m, kernel).unwrap());
        c.bench_function(&format!("full sweep 0..={limit} ({name})"), |b| {
            b.iter(|| sweep(&model, &p, limit))
        });
        // One plain figure, independent of criterion's statistics.
        let t = std::time::Instant::now();
        let n = 5;
        for _ in 0..n {
            std::hint::black_box(sweep(&model, &p, limit));
        }
        let per = t.elapsed().as_secs_f64() / f64::from(n) * 1e3;
        println!("{name}: full sweep of {} values of pcp->high: {per:.2} ms per sweep (target: well under 50 ms)", limit + 1);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
