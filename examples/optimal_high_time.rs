//! Speed target of issue 32: `optimal-high` on a built-in machine answers in <= 100 ms end to
//! end. Prints, for every built-in machine, the wall time of the whole answer (the reuse model,
//! the kernel's live high, the full sweep and the default sample count of the interval) in this
//! process, first call (cold memo) and the median of five more.
//!
//! `cargo run --release --example optimal_high_time`

use pcpmodel::answer::optimal_high::optimal_high;
use pcpmodel::workload::{resolve, Knobs};
use pcpmodel::Machine;
use std::time::Instant;

/// The CLI's default `--samples`.
const SAMPLES: usize = 200;

fn main() {
    let w = resolve("netperf-udp").expect("built-in workload");
    let mut worst: f64 = 0.0;
    for name in Machine::builtin_names() {
        let m = Machine::builtin(name).expect("built-in machine");
        let time = || {
            let t = Instant::now();
            let r = optimal_high(&w, &m, &Knobs::default(), SAMPLES);
            (t.elapsed().as_secs_f64() * 1e3, r.is_ok())
        };
        let (first, ok) = time();
        let mut rest: Vec<f64> = (0..5).map(|_| time().0).collect();
        rest.sort_by(f64::total_cmp);
        worst = worst.max(first);
        println!(
            "{name:>20}: first {first:7.1} ms, median of 5 more {:7.1} ms{}",
            rest[2],
            if ok { "" } else { " (the answer was an error)" }
        );
    }
    println!("slowest first answer: {worst:.1} ms (target: <= 100 ms end to end)");
}
