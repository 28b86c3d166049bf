//! Speed target of issue 33: `pcpmodel validate` (every built-in table) in <= 1.5 s on the
//! project's 2-vCPU machine type. Runs the library's validation of all tables
//! ([`pcpmodel::validate::table_jobs`], what `validate` runs) a few times in this process,
//! single-threaded, and prints the wall time of each table and of each run. The first run is
//! what the command costs (a fresh process); later runs show what per-process memos save.
//!
//! `cargo run --release --example validate_time`

use std::time::Instant;

/// Runs of all tables.
const RUNS: usize = 3;
/// The target for one run in a fresh process, s.
const TARGET_S: f64 = 1.5;

fn main() {
    let jobs = pcpmodel::validate::table_jobs(false).expect("built-in tables");
    let mut per_table = vec![Vec::with_capacity(RUNS); jobs.len()];
    let mut totals = Vec::with_capacity(RUNS);
    for run in 0..RUNS {
        let start = Instant::now();
        for (i, j) in jobs.iter().enumerate() {
            let t = Instant::now();
            let v = j.run().unwrap_or_else(|e| panic!("table {}: {e}", j.name));
            per_table[i].push((t.elapsed().as_secs_f64() * 1e3, v.rows.len()));
        }
        let total = start.elapsed().as_secs_f64();
        println!("run {}: all {} tables {:.3} s", run + 1, jobs.len(), total);
        totals.push(total);
    }
    println!("\n{:>24} {:>5} ms per run", "table", "rows");
    for (j, times) in jobs.iter().zip(&per_table) {
        let ms: Vec<String> = times.iter().map(|(ms, _)| format!("{ms:8.1}")).collect();
        println!("{:>24} {:>5} {}", j.name, times[0].1, ms.join(" "));
    }
    println!(
        "\nfirst run (a fresh process, as `pcpmodel validate`): {:.3} s (target <= {TARGET_S} s{})",
        totals[0],
        if totals[0] <= TARGET_S {
            ", met"
        } else {
            ", MISSED"
        }
    );
}
