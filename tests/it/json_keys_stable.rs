//! The JSON of `predict` and `latency` has the same keys whatever the kernel version: a
//! quantity that does not apply on a kernel is null with a reason in the `null_reasons` object
//! beside it (for `predicted.outputs`, a flat map of numbers, in `predicted.null_reasons`),
//! never a missing key, and never a 0 that contradicts another output.
//!
//! Before: kbuild-cgroups on 6.7 (PCP high auto-tuned: no refill in steady state) dropped
//! `outputs.refill_latency_*` from `predict` and `avg_ns`, `p50_ns`, `p99_ns`, `pages_per_s`,
//! `zones` from `latency`, and reported `outputs.pages_per_s` 0 beside `throughput_total`
//! 3.67e6 allocations (pages) per second.

use std::collections::BTreeSet;

use assert_cmd::Command;
use pcpmodel::workload::Registry;
use serde_json::Value;

const KERNELS: [&str; 4] = ["5.18", "6.6", "6.7", "6.18"];

/// The command's JSON, or None when it refuses the case (the workload does not predict on
/// that kernel, or its kind has no refill loop for `latency`).
fn run(cmd: &str, workload: &str, kernel: &str) -> Option<Value> {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            cmd,
            "--workload",
            workload,
            "--kernel",
            kernel,
            "--format",
            "json",
            "--quiet",
        ])
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// Dotted paths of every object member, recursively. Arrays are values (their length is data:
/// zones, histogram buckets, notes), and so are the `null_reasons` maps (their keys name what
/// is null in this run). A member that is null here stands for its whole subtree: `skip`
/// collects its path so that the other kernels' members under it are left out too.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>, nulls: &mut BTreeSet<String>) {
    let Value::Object(m) = v else { return };
    for (k, x) in m {
        let p = format!("{prefix}{k}");
        out.insert(p.clone());
        if k == "null_reasons" {
            continue;
        }
        if x.is_null() {
            nulls.insert(p.clone());
        }
        paths(x, &format!("{p}."), out, nulls);
    }
}

/// Every null member has a non-empty reason: in the `null_reasons` of its object, or for a
/// member of `predicted.outputs` in `predicted.null_reasons`.
fn nulls_have_reasons(v: &Value, parent: Option<&Value>, name: &str, what: &str) {
    let Value::Object(m) = v else { return };
    for (k, x) in m {
        if k == "null_reasons" {
            continue;
        }
        if x.is_null() {
            let holder = if name == "outputs" { parent } else { Some(v) };
            let why = holder
                .and_then(|h| h.get("null_reasons"))
                .and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or("");
            assert!(
                !why.is_empty(),
                "{what}: {name}.{k} is null without a reason"
            );
        }
        nulls_have_reasons(x, Some(v), k, what);
    }
}

fn check_command(cmd: &str, workloads: &[String]) {
    let mut compared = 0;
    for w in workloads {
        let runs: Vec<(&str, Value)> = KERNELS
            .iter()
            .filter_map(|k| run(cmd, w, k).map(|j| (*k, j)))
            .collect();
        let mut sets = Vec::new();
        let mut nulls = BTreeSet::new();
        for (k, j) in &runs {
            nulls_have_reasons(j, None, "", &format!("{cmd} {w} {k}"));
            let (mut s, mut n) = (BTreeSet::new(), BTreeSet::new());
            paths(j, "", &mut s, &mut n);
            nulls.extend(n);
            sets.push((*k, s));
        }
        let under_null = |p: &String| nulls.iter().any(|n| p.starts_with(&format!("{n}.")));
        let sets: Vec<(&str, BTreeSet<String>)> = sets
            .into_iter()
            .map(|(k, s)| (k, s.into_iter().filter(|p| !under_null(p)).collect()))
            .collect();
        if let Some((k0, first)) = sets.first() {
            compared += 1;
            for (k, s) in &sets[1..] {
                assert_eq!(
                    first.symmetric_difference(s).collect::<Vec<_>>(),
                    Vec::<&String>::new(),
                    "{cmd} --workload {w}: keys differ between kernels {k0} and {k}"
                );
            }
        }
    }
    assert!(compared > 0, "{cmd}: no workload ran");
}

fn builtin_workloads() -> Vec<String> {
    Registry::builtin()
        .all_builtin()
        .unwrap()
        .iter()
        .map(|w| w.name().to_string())
        .collect()
}

#[test]
fn predict_keys_do_not_change_with_the_kernel() {
    check_command("predict", &builtin_workloads());
}

#[test]
fn latency_keys_do_not_change_with_the_kernel() {
    // Only the kinds with a refill loop run `latency`; the others are refused on every kernel.
    check_command("latency", &builtin_workloads());
}

#[test]
fn kbuild_cgroups_pages_per_s_is_its_throughput_on_6_7() {
    // kbuild-cgroups allocates order-0 pages: one operation is one page, so `pages_per_s` and
    // `throughput_total` are the same quantity and agree to floating-point rounding (1e-12),
    // on 6.7 where no refill takes zone->lock and on 6.6 where refills do (refilled pages are
    // then fewer than allocated ones: frees refill the lists too).
    for k in ["6.6", "6.7"] {
        let j = run("predict", "kbuild-cgroups", k).unwrap();
        let p = &j["predicted"];
        let tp = p["throughput_total"].as_f64().unwrap();
        let pages = p["outputs"]["pages_per_s"].as_f64().unwrap();
        assert!(tp > 0.0);
        assert!(
            (pages / tp - 1.0).abs() < 1e-12,
            "{k}: pages_per_s {pages} vs throughput_total {tp}"
        );
        let refilled = p["outputs"]["refill_pages_per_s"].as_f64().unwrap();
        assert!(
            refilled <= pages * (1.0 + 1e-12),
            "{k}: {refilled} > {pages}"
        );
        // `latency` reports the same pages per second as `predict`.
        let l = run("latency", "kbuild-cgroups", k).unwrap();
        let lp = l["pages_per_s"].as_f64().unwrap();
        assert!((lp / tp - 1.0).abs() < 1e-12, "{k}: latency {lp} vs {tp}");
    }
    // 6.7's auto-tuned pcp->high: no refill, so the refill latency is null (with its reason,
    // checked for every workload above), not a number.
    let j = run("predict", "kbuild-cgroups", "6.7").unwrap();
    let out = &j["predicted"]["outputs"];
    if out["calls_per_s"].as_f64().unwrap() == 0.0 {
        assert!(out["refill_latency_mean_ns"].is_null());
        assert!(out["refill_latency_p99_ns"].is_null());
    }
}
