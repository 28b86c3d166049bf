//! zone->lock model (thread 000): kernel batch dynamics, queue limits, the fit through the shared
//! engine, the acceptance numbers of issue 4, and the CLI contract.

use approx::assert_relative_eq;
use assert_cmd::Command;
use pcpmodel::data;
use pcpmodel::fit::{fit, Dataset, FitModel, FitOptions, Residual};
use pcpmodel::model::lock::{machine_repairman, HoldDist, LockQueue};
use pcpmodel::model::zonelock::*;
use pcpmodel::validate::{t000, Role};
use pcpmodel::workload::NodeSpan;
use pcpmodel::Machine;

fn epyc() -> Machine {
    Machine::builtin("epyc-7w83").unwrap()
}

#[test]
fn dynamics_ramp_to_batch_shifted_by_scale() {
    let m = ZoneLockModel::new(&epyc(), KERNEL_000).unwrap();
    for s in 0..=6u8 {
        let d = m.dynamics(&workload_000(10, NodeSpan::One), s).unwrap();
        let d = &d[0].2;
        let top = 63u32 << s;
        // Steady refills and drains move batch << scale pages (63 << 5 = 2016 at the default).
        assert_eq!(d.refill.last().unwrap().0, top, "scale {s}: {:?}", d.refill);
        assert_eq!(d.free.last().unwrap().0, top, "scale {s}: {:?}", d.free);
        // The ramp 63, 126, ... appears once per allocation phase.
        assert_eq!(
            d.refill.len(),
            usize::from(s) + 1,
            "scale {s}: {:?}",
            d.refill
        );
        // Pages are conserved: refilled pages = allocations served from refills.
        let refilled: u64 = d.refill.iter().map(|r| u64::from(r.0) * r.1).sum();
        let drained: u64 = d.free.iter().map(|r| u64::from(r.0) * r.1).sum();
        assert!(refilled <= d.pages_per_iteration + u64::from(top));
        assert!(drained <= d.pages_per_iteration);
        assert!(d.pages_per_iteration - drained <= u64::from(d.leftover_pages) + 1);
    }
}

#[test]
fn two_nodes_split_the_processes() {
    let x = Machine::builtin("xeon-8260").unwrap();
    let m = ZoneLockModel::new(&x, KERNEL_000).unwrap();
    let p = ZoneLockParams::default();
    let one = m
        .predict(&p, &workload_000(10, NodeSpan::One), 5, false)
        .unwrap();
    let two = m
        .predict(&p, &workload_000(10, NodeSpan::All), 5, false)
        .unwrap();
    assert_eq!(one.zones.len(), 1);
    assert_eq!(two.zones.len(), 2);
    assert_eq!(two.zones[0].procs + two.zones[1].procs, 10);
    // Half the contenders per lock: less utilisation and less waiting.
    assert!(two.lock_utilisation < one.lock_utilisation);
    assert!(two.avg_ns < one.avg_ns);
}

#[test]
fn queue_limits() {
    // One CPU: no wait, latency = hold.
    let q = LockQueue::single(1, 5000.0, HoldDist::Deterministic { hold_ns: 1000.0 });
    let s = q.solve().unwrap();
    assert_relative_eq!(s.wait_ns_mean, 0.0, epsilon = 1e-9);
    assert_relative_eq!(s.response_ns_mean, 1000.0, max_relative = 1e-9);
    // M/M/1//N known value: N = 2, rho = 1: p0 = 1/(1 + 2 + 2) = 0.2, U = 0.8.
    let mr = machine_repairman(2, 1000.0, 1000.0).unwrap();
    assert_relative_eq!(mr.utilisation, 0.8, max_relative = 1e-12);
    // Little's law on the whole loop: N = X (Z + R).
    let mr = machine_repairman(16, 9000.0, 1000.0).unwrap();
    assert_relative_eq!(
        16.0,
        mr.throughput_per_s * 1e-9 * (9000.0 + mr.response_ns_mean),
        max_relative = 1e-9
    );
    // Utilisation -> 1 makes the wait grow without bound.
    let mut last = 0.0;
    for z in [1e4, 1e3, 1e2, 10.0, 1.0] {
        let w = machine_repairman(64, z, 1000.0).unwrap().wait_ns_mean;
        assert!(w > last);
        last = w;
    }
    // At Z = 1 ns the lock is saturated: W -> (N - 1) S - Z = 63 us, the closed queue's
    // asymptote.
    assert!(last > 60.0 * 1000.0);
}

#[test]
fn queue_of_1024_cpus_is_fast() {
    let q = LockQueue::single(1024, 1e6, HoldDist::Exponential { mean_ns: 1000.0 });
    q.solve().unwrap();
    let t = std::time::Instant::now();
    let n = 20;
    for _ in 0..n {
        q.solve().unwrap();
    }
    let per = t.elapsed().as_secs_f64() / f64::from(n);
    // Well under a millisecond in release; debug builds are ~10-30x slower, so allow 20 ms here.
    assert!(per < 0.02, "{per} s per solve");
}

#[test]
fn issue_4_acceptance_numbers() {
    let v = t000::validate().unwrap();
    let hs = data::histograms_000().unwrap();
    assert_eq!(hs.len(), 5);
    for h in &hs {
        let fitted = |q: &str| {
            v.rows
                .iter()
                .find(|r| r.case == h.case && r.quantity == q && r.role == Role::Fitted)
                .unwrap_or_else(|| panic!("{} {q}", h.case))
        };
        // Issue 4's acceptance numbers: averages within 15 %, call rates within 25 % (3 free
        // parameters per machine). funclatency's histograms carry no repeat spread to derive a
        // tolerance from, so the bounds are the issue's.
        let a = fitted("avg_ns");
        assert!(a.rel_error.abs() < 0.15, "{}: {}", h.case, a.rel_error);
        let c = fitted("calls_per_s");
        assert!(c.rel_error.abs() < 0.25, "{}: {}", h.case, c.rel_error);
        // Mode in the measured bucket or the next one.
        let m = fitted("mode_bucket_log2");
        assert!(
            m.predicted == m.measured || m.predicted == m.measured + 1.0,
            "{}: mode 2^{} vs 2^{}",
            h.case,
            m.predicted,
            m.measured
        );
    }
    // Not fitted, within 35 % (issue 4's bound for held-out rows): scale 0 from scale 5 (both
    // machines), two nodes from one (Intel).
    // Labelled `seen`: the zone-lock constants were chosen with thread 000's histograms visible.
    let held: Vec<_> = v
        .rows
        .iter()
        .filter(|r| r.role == Role::Seen && r.quantity == "avg_ns")
        .collect();
    let cases: Vec<&str> = held.iter().map(|r| r.case.as_str()).collect();
    for c in [
        "epyc-7w83_1node_scale0",
        "xeon-8260_1node_scale0",
        "xeon-8260_2node_scale5",
    ] {
        assert!(cases.contains(&c), "{cases:?}");
    }
    for r in held {
        assert!(r.rel_error.abs() < 0.35, "{}: {}", r.case, r.rel_error);
    }
}

#[test]
fn histogram_fit_through_the_engine() {
    let m = ZoneLockHistFit::new(&epyc()).unwrap();
    let h = &data::histograms_000().unwrap()[0];
    let csv = h.histogram.to_csv();
    let ds = Dataset::from_csv_str(&csv, "epyc scale 5", &m).unwrap();
    let opts = FitOptions {
        residual: Residual::Absolute,
        loo: false,
        starts: 1,
        fixed: vec![("fixed_ns".to_string(), default_params(&m.model).fixed_ns)],
        ..FitOptions::default()
    };
    let r = fit(&m as &dyn FitModel, &ds, &opts).unwrap();
    let total: f64 = r.residuals.iter().map(|x| x.predicted).sum();
    // The fitted histogram carries the measured call count within 25 %: the same bound as the
    // call rate in issue 4 (the count is that rate times the traced interval).
    assert_relative_eq!(total, h.count as f64, max_relative = 0.25);
}

#[test]
fn params_out_of_bounds_are_errors() {
    assert!(ZoneLockParams::from_slice(&[1.0, 0.5, 1000.0]).is_err());
    assert!(ZoneLockParams::from_slice(&[1000.0, f64::NAN, 1000.0]).is_err());
    assert!(ZoneLockParams::from_slice(&[1000.0]).is_err());
}

fn bin() -> Command {
    Command::cargo_bin("pcpmodel").unwrap()
}

#[test]
fn latency_json_contract() {
    let out = bin()
        .args([
            "latency",
            "--machine",
            "xeon-8260",
            "--nodes",
            "all",
            "--scale-max",
            "5",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for k in [
        "avg_ns",
        "p50_ns",
        "p99_ns",
        "p999_ns",
        "calls_per_s",
        "lock_utilisation",
    ] {
        assert!(j[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let rows = j["histogram"].as_array().unwrap();
    let sum: f64 = rows.iter().map(|r| r["fraction"].as_f64().unwrap()).sum();
    // The buckets span the 1e-5 to 1 - 1e-6 quantiles (cli::zonelock bucket_range), so at most
    // 1.1e-5 of the mass falls outside them; floor/ceil to whole log2 buckets only adds mass.
    assert!(sum > 0.9999 && sum < 1.0001, "{sum}");
    for r in rows {
        assert!(r["lo_ns"].as_u64().unwrap() <= r["hi_ns"].as_u64().unwrap());
    }
    assert!(j["p50_ns"].as_f64() <= j["p99_ns"].as_f64());
    assert!(j["p99_ns"].as_f64() <= j["p999_ns"].as_f64());
}

#[test]
fn latency_csv_and_table() {
    bin()
        .args(["latency", "--format", "csv"])
        .assert()
        .success()
        .stdout(predicates::str::starts_with("lo (ns),hi (ns),fraction"));
    bin()
        .args(["latency", "--scale-max", "0"])
        .assert()
        .success()
        .stdout(predicates::str::contains("measured fraction"));
}

#[test]
fn scale_max_picks_a_setting() {
    let out = bin()
        .args([
            "scale-max",
            "--machine",
            "epyc-7w83",
            "--p99-us",
            "100",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(j["settings"].as_array().unwrap().len(), 7);
    let chosen = j["chosen_scale_max"].as_u64().unwrap();
    let s = &j["settings"][chosen as usize];
    assert!(s["p99_ns"].as_f64().unwrap() <= 100e3);
}

#[test]
fn plot_latency_writes_svg() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("lat.svg");
    bin()
        .args([
            "plot",
            "latency",
            "--machine",
            "xeon-8260",
            "--scale-max",
            "0",
            "-o",
        ])
        .arg(&f)
        .assert()
        .success();
    let s = std::fs::read_to_string(&f).unwrap();
    assert!(s.contains("<svg") && s.contains("measured"));
}

#[test]
fn bad_inputs_exit_2() {
    bin()
        .args(["latency", "--nodes", "3"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--nodes"));
    bin().args(["latency", "--scale-max", "9"]).assert().code(2);
    bin()
        .args(["latency", "--procs", "1000"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("procs"));
    bin()
        .args([
            "predict",
            "--workload",
            "mmap-fill",
            "--machine",
            "icelake-server",
        ])
        .assert()
        .success();
}

#[test]
fn imported_seed_histogram_feeds_the_zone_lock_fit() {
    // Thread 000's mail ships in tests/fixtures/seeds (their README says what each is).
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seeds/000_d917447a908c0973.txt");
    assert!(
        seed.exists(),
        "{} ships with the repository",
        seed.display()
    );
    let out = bin()
        .args(["import", "funclatency", "--index", "1"])
        .arg(&seed)
        .args(["--format", "csv"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let m = ZoneLockHistFit::new(&epyc()).unwrap();
    let ds = Dataset::from_csv_str(&text, "seed 000 #1", &m).unwrap();
    let h = &data::histograms_000().unwrap()[0];
    assert_eq!(ds.len(), h.histogram.buckets().len());
    let sum: f64 = ds.y.iter().sum();
    assert_eq!(sum as u64, h.histogram.total_count());
}

#[test]
fn zone_lock_summary_rows_name_their_quantity() {
    // The summary fit's `quantity` column is categorical: a name (or its position, as the
    // files written before it had a name), never an arbitrary number.
    let m = pcpmodel::model::zonelock::ZoneLockFit::new(&epyc()).unwrap();
    let named =
        "scale_max,procs,nodes,quantity,value\n5,10,1,avg_ns,50000\n5,10,1,calls_per_s,30000\n";
    let ds = Dataset::from_csv_str(named, "named", &m).unwrap();
    assert_eq!(ds.x[0][3], pcpmodel::model::zonelock::Q_AVG_NS);
    assert_eq!(ds.x[1][3], pcpmodel::model::zonelock::Q_CALLS_PER_S);
    let coded = named.replace("avg_ns", "0").replace("calls_per_s", "1");
    assert_eq!(Dataset::from_csv_str(&coded, "coded", &m).unwrap().x, ds.x);
    let bad = named.replace("calls_per_s", "p99_ns");
    let e = Dataset::from_csv_str(&bad, "bad.csv", &m)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.csv:3") && e.contains("quantity"), "{e}");
    assert!(e.contains("avg_ns, calls_per_s"), "{e}");
    assert!(Dataset::from_csv_str(&named.replace("1,avg_ns", "1,2"), "x", &m).is_err());
}
