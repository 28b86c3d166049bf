//! Speed target of issue 35: the shipped thread-000 histograms fit with `fit --workload
//! mmap-fill HIST.csv --residual absolute --no-loo` in <= 5 s on their own machine. Prints, for
//! each compiled-in scale-5 histogram, the wall time of the whole fit (4 starts, as the CLI) on
//! the machine it was measured on and on the workload's default machine, with the evaluations
//! each start spent.
//!
//! `cargo run --release --example zonelock_fit_time`

use pcpmodel::fit::{fit, Dataset, FitOptions, Residual};
use pcpmodel::workload::resolve;
use pcpmodel::Machine;
use std::time::Instant;

fn main() {
    let w = resolve("mmap-fill").expect("built-in workload");
    for (table, measured_on) in [
        ("000_funclatency_xeon-8260_1node_scale5", "xeon-8260"),
        ("000_funclatency_epyc-7w83_1node_scale5", "epyc-7w83"),
    ] {
        let csv = pcpmodel::data::table(table).expect("table").csv_text;
        let mut machines = vec![measured_on, w.spec.default_machine.as_str()];
        machines.dedup();
        for machine in machines {
            let m = Machine::builtin(machine).expect("built-in machine");
            let t = Instant::now();
            let model = w
                .kind
                .native_fit(&w.spec, &m)
                .expect("fit model")
                .expect("mmap-fill has its thread's fit");
            let ds = Dataset::from_csv_str(csv, table, model.as_ref()).expect("dataset");
            // As the CLI: the kind's default-fixed parameters held at their derived values.
            let fixed = model
                .params()
                .into_iter()
                .filter(|p| w.kind.native_default_fixed().contains(&p.name.as_str()))
                .map(|p| (p.name, p.default))
                .collect();
            let opts = FitOptions {
                fixed,
                residual: Residual::Absolute,
                loo: false,
                ..Default::default()
            };
            let rep = fit(model.as_ref(), &ds, &opts).expect("fit");
            let evals: Vec<usize> = rep.starts.iter().map(|s| s.n_evals).collect();
            println!(
                "{table} on {machine:>10}: {:6.2} s, evaluations per start {evals:?}, converged {}",
                t.elapsed().as_secs_f64(),
                rep.converged
            );
        }
    }
    println!("target: <= 5 s on the machine the histogram was measured on");
}
