//! CLI tests of the issue-3 commands: the JSON output contract, errors, exit codes and plots.

use assert_cmd::Command;
use predicates::prelude::*;

fn cmd() -> Command {
    Command::cargo_bin("pcpmodel").unwrap()
}

use crate::common::json;

#[test]
fn predict_json_contract() {
    let v = json(&[
        "predict",
        "--machine",
        "icelake-server",
        "--workload",
        "netperf-udp",
        "--high",
        "640",
    ]);
    for k in [
        "throughput_ops_per_s",
        "ns_per_op",
        "terms",
        "hit_probabilities",
        "reuse_distance_pages",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    let t = &v["terms"];
    let sum: f64 = ["fixed_ns", "private_ns", "llc_ns", "dram_ns", "lock_ns"]
        .iter()
        .map(|k| t[k].as_f64().unwrap())
        .sum();
    let ns = v["ns_per_op"].as_f64().unwrap();
    assert!((sum - ns).abs() < 1e-6 * ns, "terms {sum} vs total {ns}");
    let thr = v["throughput_ops_per_s"].as_f64().unwrap();
    assert!((thr * ns / 1e9 - 1.0).abs() < 1e-9);
    let ci = v["throughput_ci95_ops_per_s"].as_array().unwrap();
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert!(lo < thr && thr < hi, "{lo} < {thr} < {hi}");
}

#[test]
fn every_placement_is_accepted_or_refused_clearly() {
    for p in ["smt", "same-llc", "cross-socket"] {
        json(&[
            "predict",
            "--machine",
            "icelake-server",
            "--placement",
            p,
            "--high",
            "0",
        ]);
    }
    // The Icelake server has one LLC domain per socket: cross-llc is refused with a reason.
    cmd()
        .args([
            "predict",
            "--machine",
            "icelake-server",
            "--placement",
            "cross-llc",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("several LLC domains"));
    json(&[
        "predict",
        "--machine",
        "epyc-7w83",
        "--placement",
        "cross-llc",
        "--high",
        "0",
    ]);
}

#[test]
fn optimal_high_json_contract() {
    let v = json(&[
        "optimal-high",
        "--machine",
        "icelake-server",
        "--samples",
        "20",
    ]);
    for k in [
        "optimal_high_pages",
        "within_1pct_pages",
        "ci95_pages",
        "kernel_default_high_pages",
        "sysctl",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["within_1pct_pages"].as_array().unwrap().len(), 2);
    assert_eq!(v["ci95_pages"].as_array().unwrap().len(), 2);
    assert_eq!(v["sysctl"]["name"], "vm.percpu_pagelist_high_fraction");
}

#[test]
fn optimal_high_csv_is_the_curve() {
    let out = cmd()
        .args([
            "optimal-high",
            "--machine",
            "skylake-desktop",
            "--samples",
            "10",
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("high (pages),throughput (pages/s)"));
    assert!(text.lines().count() > 50);
}

#[test]
fn validate_json_rows_have_the_contract_fields() {
    let v = json(&["validate", "--thread", "004"]);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 21);
    // Per table: free parameters, assumed constants, degrees of freedom and counts by role.
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 1, "--thread computes one thread");
    for k in [
        "free_params",
        "assumed_constants",
        "degrees_of_freedom",
        "by_role",
    ] {
        assert!(tables[0].get(k).is_some(), "missing {k}");
    }
    for r in rows {
        for k in [
            "thread",
            "machine",
            "case",
            "quantity",
            "measured",
            "predicted",
            "unit",
            "rel_error",
            "role",
        ] {
            assert!(r.get(k).is_some(), "missing {k}");
        }
        // Thread 004: the fitted points, their leave-one-out refits, and the regression row,
        // which is `seen` (its free_high mechanism was changed in the commit that added it).
        assert!(
            ["fitted", "loo", "seen"].contains(&r["role"].as_str().unwrap()),
            "{}",
            r["role"]
        );
    }
}

#[test]
fn explain_attributes_and_summarises() {
    let v = json(&["explain", "icelake-server", "skylake-desktop"]);
    let swaps = v["swaps"].as_array().unwrap();
    let names: Vec<&str> = swaps
        .iter()
        .map(|s| s["parameter"].as_str().unwrap())
        .collect();
    for want in [
        "L2 size",
        "LLC size",
        "LLC inclusivity",
        "core-to-core",
        "LLC latency",
        "DRAM latency",
        "core count",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(want)),
            "no swap of {want}: {names:?}"
        );
    }
    // Inclusivity and core-to-core latency each remove most of the Icelake bypass penalty.
    let a = v["shape_a"]["bypass_penalty_pct"].as_f64().unwrap();
    for want in ["LLC inclusivity", "core-to-core"] {
        let s = swaps
            .iter()
            .find(|s| s["parameter"].as_str().unwrap().starts_with(want))
            .unwrap();
        assert!(
            s["shape"]["bypass_penalty_pct"].as_f64().unwrap() < 0.5 * a,
            "{want}"
        );
    }
    // The DRAM cliff follows the LLC size.
    let llc = swaps
        .iter()
        .find(|s| s["parameter"].as_str().unwrap().starts_with("LLC size"))
        .unwrap();
    assert!(
        llc["shape"]["dram_cliff_pages"].as_u64().unwrap()
            < v["shape_a"]["dram_cliff_pages"].as_u64().unwrap() / 2
    );
    assert!(!v["summary"].as_array().unwrap().is_empty());
}

#[test]
fn fit_reads_the_thread_table_and_reports_errors_with_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("icx.csv");
    std::fs::write(
        &good,
        "machine,pcp_high_pages,score\nicx,0,100662\nicx,320,117252\nicx,640,133149\nicx,6144,134674\nicx,12416,103193\n",
    )
    .unwrap();
    let v = json(&[
        "fit",
        "--model",
        "netperf-pcp-high",
        "--data",
        good.to_str().unwrap(),
        "--machine",
        "icelake-server",
    ]);
    assert_eq!(v["converged"], true);
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "pcp_high_pages,score\n0,100662\n320,abc\n640,133149\n",
    )
    .unwrap();
    cmd()
        .args([
            "fit",
            "--model",
            "netperf-pcp-high",
            "--data",
            bad.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.csv:3").and(predicate::str::contains("score")));
    let missing = dir.path().join("missing.csv");
    std::fs::write(&missing, "pcp_high_pages,throughput\n0,1\n1,2\n3,4\n").unwrap();
    cmd()
        .args([
            "fit",
            "--model",
            "netperf-pcp-high",
            "--data",
            missing.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("score"));
    let nan = dir.path().join("nan.csv");
    std::fs::write(&nan, "pcp_high_pages,score\n0,NaN\n1,2\n3,4\n").unwrap();
    cmd()
        .args([
            "fit",
            "--model",
            "netperf-pcp-high",
            "--data",
            nan.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nan.csv:2"));
    let short = dir.path().join("short.csv");
    std::fs::write(&short, "pcp_high_pages,score\n0,100662\n").unwrap();
    cmd()
        .args([
            "fit",
            "--model",
            "netperf-pcp-high",
            "--data",
            short.to_str().unwrap(),
        ])
        .assert()
        .code(2);
    cmd()
        .args(["fit", "--model", "nope", "--data", good.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("netperf-pcp-high"));
}

#[test]
fn plots_write_svg() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.svg");
    cmd()
        .args([
            "plot",
            "optimal-high",
            "--machine",
            "icelake-server",
            "--samples",
            "10",
            "-o",
            a.to_str().unwrap(),
        ])
        .assert()
        .success();
    let s = std::fs::read_to_string(&a).unwrap();
    assert!(s.starts_with("<svg") && s.contains("measured"));
    let b = dir.path().join("b.svg");
    cmd()
        .args([
            "plot",
            "explain",
            "icelake-server",
            "skylake-desktop",
            "-o",
            b.to_str().unwrap(),
        ])
        .assert()
        .success();
    assert!(std::fs::read_to_string(&b)
        .unwrap()
        .contains("skylake-desktop"));
}

/// An input that never ends (a device, a wrong path to a huge file) is read only up to the
/// input's size bound and refused with its name, instead of filling memory: `/dev/zero` as a
/// machine file, a workload file and a pasted report (repro: `machine show /dev/zero` took
/// 4.2 GB and 10 s before failing).
#[test]
fn endless_inputs_are_refused_at_the_size_bound() {
    for args in [
        vec!["machine", "show", "/dev/zero"],
        vec!["workload", "show", "/dev/zero"],
        vec!["import", "perf-lock", "/dev/zero"],
        vec!["zoneinfo", "/dev/zero", "--kernel", "6.8"],
    ] {
        let out = cmd().args(&args).assert().code(2).get_output().clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/dev/zero"), "{args:?}: {err}");
        assert!(err.contains("larger than"), "{args:?}: {err}");
    }
}
