//! `pcpmodel explain A B` for every ordered pair of built-in machines (repro
//! T3-explain-epyc-zero-cores: with an 8-CCD EPYC as A and a 4-core desktop as B, the core-count
//! swap gave A B's 4 cores over its own 8 LLC domains, "0 core(s) per LLC domain", exit 2).
//! Every pair runs through the library (the binary adds only flag checks and rendering); the
//! binary runs the pairs of the reproducer.

use assert_cmd::Command;
use pcpmodel::answer::explain::{explain, llc_domains_for};
use pcpmodel::hw::machine::Machine;
use pcpmodel::kernel::KernelVersion;

#[test]
fn every_ordered_pair_of_builtin_machines_explains() {
    let all = Machine::all_builtin().unwrap();
    assert!(all.len() >= 2);
    let w = pcpmodel::workload::resolve("netperf-udp").unwrap();
    let knobs = pcpmodel::workload::Knobs {
        kernel: Some(KernelVersion::DEFAULT),
        means_only: true,
        ..Default::default()
    };
    let mut failures = Vec::new();
    for a in &all {
        for b in &all {
            if a.name == b.name {
                continue;
            }
            match explain(&w, a, b, &knobs, &[0, 64]) {
                Ok(e) => {
                    let core = e
                        .swaps
                        .iter()
                        .find(|s| s.parameter.starts_with("core count"))
                        .unwrap_or_else(|| panic!("{} -> {}: no core-count swap", a.name, b.name));
                    assert!(
                        core.shape.bypass_penalty_pct.is_finite(),
                        "{} -> {}",
                        a.name,
                        b.name
                    );
                }
                Err(err) => failures.push(format!("{} -> {}: {err}", a.name, b.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn core_swap_keeps_a_s_llc_domain_size() {
    // One LLC per socket stays one, whatever the core count.
    assert_eq!(llc_domains_for(64, 4, 1), 1);
    // An 8-core-CCX chip with B's 4 cores: one domain of 4, not 8 domains of 0.
    assert_eq!(llc_domains_for(4, 8, 8), 1);
    assert_eq!(llc_domains_for(64, 8, 8), 8);
    assert_eq!(llc_domains_for(24, 8, 8), 3);
    // A prime count cannot be split: one domain.
    assert_eq!(llc_domains_for(13, 4, 4), 1);
    // Never fewer than two cores per domain, never more than 64 domains.
    assert_eq!(llc_domains_for(6, 1, 6), 3);
    assert!(llc_domains_for(256, 2, 32) <= 64);
}

#[test]
fn binary_explains_the_reproducer_pairs() {
    for (a, b) in [
        ("epyc-7w83", "skylake-desktop"),
        ("kunpeng-920", "skylake-desktop"),
        ("epyc-9965-2s", "skylake-desktop"),
        ("skylake-desktop", "epyc-7w83"),
    ] {
        let out = Command::cargo_bin("pcpmodel")
            .unwrap()
            .args(["explain", a, b, "--format", "json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "explain {a} {b}: {stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let core = v["swaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["parameter"].as_str().unwrap().starts_with("core count"))
            .unwrap();
        assert!(
            core["parameter"]
                .as_str()
                .unwrap()
                .contains("LLC domain size"),
            "{core}"
        );
    }
}

/// explain compares the flow the workload's kind builds (the one predict and optimal-high
/// evaluate): another producer-consumer workload is explained, a kind without a page-reuse
/// model is refused with its name.
#[test]
fn explain_takes_the_workload_and_refuses_kinds_without_reuse() {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            "explain",
            "icelake-server",
            "skylake-desktop",
            "--workload",
            "lmbench-af-unix",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // lmbench-af-unix's reference kernel (its flow's measured conditions) is the default.
    assert_eq!(v["kernel"], "5.18");
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            "explain",
            "icelake-server",
            "skylake-desktop",
            "--workload",
            "bulk-alloc-order0",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bulk-alloc-order0") && err.contains("reuse"),
        "{err}"
    );
}
