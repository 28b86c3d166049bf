//! A run of finite length on a VM whose hypervisor drops free memory: the lists first grow from
//! where the run starts to their steady size, and each page they grow by costs the host's
//! backing (`memory.backing_ns_per_page`, `measure backing`). `predict --run-seconds` and
//! `compare` (the flag, or the sweep's `run_seconds` column) price it through the one
//! `Workload::predict`.

use crate::common::{json, run};

const BACKING_NS: f64 = 9000.0;

/// The built-in Ice Lake server with a measured-looking backing cost: a TOML table appended
/// after the file's own `[memory]`.
fn vm_machine(dir: &std::path::Path, backing: Option<f64>) -> String {
    let text = std::fs::read_to_string(format!(
        "{}/models/icelake-server.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let extra = backing.map_or(String::new(), |b| {
        format!(
            "\n[memory.backing_ns_per_page]\nvalue = {b}\nsource = \"measured: a test's value\"\n"
        )
    });
    let path = dir.join(format!("vm-{}.toml", backing.is_some()));
    std::fs::write(&path, format!("{text}{extra}")).unwrap();
    path.to_str().unwrap().to_string()
}

fn predicted(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["predict", "--workload", "lmbench-af-unix"];
    a.extend(args);
    json(&a)["predicted"].clone()
}

fn out(p: &serde_json::Value, name: &str) -> f64 {
    p["outputs"][name].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn a_run_that_must_grow_its_lists_pays_the_hosts_backing_and_long_runs_reach_the_steady_state() {
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), Some(BACKING_NS));
    let steady = predicted(&["--machine", &m, "--high", "20000"]);
    let held = out(&steady, "pcp_pages_held");
    let c = steady["ns_per_op"].as_f64().unwrap();
    // A list that drains only at its high holds about the high: the fill is most of it.
    assert!(held > 15000.0 && held <= 20000.0, "{held}");
    let from = |start: &str, secs: &str| {
        predicted(&[
            "--machine",
            &m,
            "--high",
            "20000",
            "--run-seconds",
            secs,
            "--run-start-pages",
            start,
        ])
    };
    // Starting at the steady lists there is nothing to grow: the steady state.
    let full = from(&format!("{held}"), "1");
    approx::assert_relative_eq!(full["ns_per_op"].as_f64().unwrap(), c, max_relative = 1e-9);
    // From empty lists a 1-s run grows them by `held` pages at 9 us each on top of the steady
    // cost: the time it adds is the fill times the backing, once. (To within the zone->lock
    // queue's slowdown, under 1 % for one pair, which stretches the steady part of each page
    // and not the host's backing.)
    let empty = from("0", "1");
    let n = 1e9 / empty["ns_per_op"].as_f64().unwrap();
    approx::assert_relative_eq!(n * c + held * BACKING_NS, 1e9, max_relative = 0.01);
    approx::assert_relative_eq!(out(&empty, "run_fill_pages"), held, max_relative = 1e-12);
    // Rates scale with it; a long run's fill is a vanishing share of its time.
    let k = c / empty["ns_per_op"].as_f64().unwrap();
    approx::assert_relative_eq!(
        out(&empty, "throughput_mbps"),
        out(&steady, "throughput_mbps") * k,
        max_relative = 1e-9
    );
    let long = from("0", "100000");
    approx::assert_relative_eq!(long["ns_per_op"].as_f64().unwrap(), c, max_relative = 1e-4);
    // A run too short to finish the fill is all fill: every page costs c + t.
    let short = from("0", "0.01");
    approx::assert_relative_eq!(
        short["ns_per_op"].as_f64().unwrap(),
        c + BACKING_NS,
        max_relative = 0.01 // the queue's slowdown again
    );
}

#[test]
fn without_a_measured_backing_a_run_is_the_steady_state_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), None);
    let steady = predicted(&["--machine", &m, "--high", "20000"]);
    let args = [
        "predict",
        "--workload",
        "lmbench-af-unix",
        "--machine",
        &m,
        "--high",
        "20000",
        "--run-seconds",
        "1",
        "--run-start-pages",
        "0",
    ];
    let j = json(&args);
    approx::assert_relative_eq!(
        j["predicted"]["ns_per_op"].as_f64().unwrap(),
        steady["ns_per_op"].as_f64().unwrap(),
        max_relative = 1e-12
    );
    let (code, stdout, _) = run(&args, dir.path());
    assert_eq!(code, 0);
    assert!(stdout.contains("memory.backing_ns_per_page"), "{stdout}");
}

#[test]
fn a_run_start_without_a_run_length_and_a_kind_without_lists_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(
        &[
            "predict",
            "--workload",
            "lmbench-af-unix",
            "--run-start-pages",
            "10",
        ],
        dir.path(),
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("--run-seconds"), "{err}");
    // memcg charge batching keeps no per-CPU page lists: no fill to size.
    let (code, _, err) = run(
        &[
            "predict",
            "--workload",
            "memcg-netperf",
            "--run-seconds",
            "1",
        ],
        dir.path(),
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("--run-seconds") && err.contains("pages its lists hold"),
        "{err}"
    );
}

#[test]
fn optimal_high_for_a_short_run_holds_large_highs_below_the_steady_states() {
    // A 1-s run must grow a large setting's lists from the default's, at 9 us a page: the
    // largest high here (31,200 pages) grows them by some 20,000 pages, about a fifth of the
    // run, so it loses at least a tenth against its steady state; and the best setting can
    // only move toward the lists the run starts with.
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), Some(BACKING_NS));
    let oh = |extra: &[&str]| {
        let mut a = vec![
            "optimal-high",
            "--workload",
            "lmbench-af-unix",
            "--machine",
            &m,
        ];
        a.extend(extra);
        json(&a)
    };
    let steady = oh(&[]);
    let run = oh(&["--run-seconds", "1"]);
    let last = |j: &serde_json::Value| {
        j["curve"].as_array().unwrap().last().unwrap()["relative"]
            .as_f64()
            .unwrap()
    };
    assert!(
        last(&run) < 0.9 * last(&steady),
        "{} {}",
        last(&run),
        last(&steady)
    );
    let best = |j: &serde_json::Value| j["optimal_high_pages"].as_f64().unwrap();
    assert!(
        best(&run) <= best(&steady),
        "{} {}",
        best(&run),
        best(&steady)
    );
}

#[test]
fn a_machine_with_a_negative_backing_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), Some(-5.0));
    let (code, _, err) = run(&["machine", "show", &m], dir.path());
    assert_ne!(code, 0);
    assert!(err.contains("memory.backing_ns_per_page"), "{err}");
}

const SWEEP: &str = "\
machine,pcp_high_pages,score,percpu_pagelist_high_fraction,workload,run_seconds
host,2000,5000,0,af-unix,1
host,10000,5000,74,af-unix,1
host,30000,1000,8,af-unix,1
";

fn compare_rows(dir: &std::path::Path, machine: &str, csv: &str) -> Vec<f64> {
    let path = dir.join("sweep.csv");
    std::fs::write(&path, csv).unwrap();
    let j = json(&[
        "compare",
        path.to_str().unwrap(),
        "--machine",
        machine,
        "--workload",
        "lmbench-af-unix",
    ]);
    j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["predicted_norm"].as_f64().unwrap())
        .collect()
}

#[test]
fn compare_prices_each_row_as_a_run_from_the_previous_rows_lists() {
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), Some(BACKING_NS));
    let with = compare_rows(dir.path(), &m, SWEEP);
    let steady: String = SWEEP
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string() + "\n")
        .collect();
    let without = compare_rows(dir.path(), &m, &steady);
    // The largest setting's lists grow from the middle row's (about 10,000 to 30,000 pages):
    // some 20,000 pages at 9 us, about a fifth of its 1-s run. The first row starts from the
    // last row's larger lists and grows nothing. So the last row, relative to the first, loses
    // about a fifth against the steady state: between a tenth and a third allows for the
    // lists' steady size sitting below the high by part of a drain.
    let rel = |v: &[f64]| v[2] / v[0];
    let loss = 1.0 - rel(&with) / rel(&without);
    assert!(loss > 0.1 && loss < 0.33, "{loss}: {with:?} {without:?}");
}

#[test]
fn a_sweep_whose_rows_disagree_on_the_run_length_is_refused_naming_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let m = vm_machine(dir.path(), Some(BACKING_NS));
    let path = dir.path().join("sweep.csv");
    std::fs::write(&path, SWEEP.replace("8,af-unix,1", "8,af-unix,2")).unwrap();
    let (code, _, err) = run(
        &[
            "compare",
            path.to_str().unwrap(),
            "--machine",
            &m,
            "--workload",
            "lmbench-af-unix",
        ],
        dir.path(),
    );
    assert_ne!(code, 0);
    assert!(err.contains(":4") && err.contains("run_seconds"), "{err}");
}

#[test]
fn measure_backing_writes_a_machine_that_loads_back() {
    // No root: it populates a small anonymous region; on bare metal or without free page
    // reporting the host's part is only the passes' spread, still a value the file takes.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.toml");
    let (code, stdout, err) = run(
        &[
            "measure",
            "backing",
            "--mib",
            "8",
            "--again",
            "1",
            "--machine",
            "icelake-server",
            "--output",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("host's part"), "{stdout}");
    let j = json(&["machine", "show", out.to_str().unwrap()]);
    let text = j.to_string();
    assert!(text.contains("backing_ns_per_page"), "{text}");
}
