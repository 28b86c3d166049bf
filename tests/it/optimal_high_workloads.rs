//! Issue 11: every built-in workload with a reuse path runs through optimal-high on every
//! built-in machine, dispatched through the one workload registry; a workload without one is
//! refused with its kind and the list of those that have one.

use assert_cmd::Command;
use pcpmodel::answer::optimal_high::{optimal_high, reuse_workloads};
use pcpmodel::workload::{Knobs, Registry};
use pcpmodel::Machine;

#[test]
fn every_reuse_workload_on_every_machine() {
    let workloads: Vec<_> = Registry::builtin()
        .all_builtin()
        .unwrap()
        .into_iter()
        .filter(|w| w.kind.has_reuse_path())
        .collect();
    // The five producer-consumer workloads (thread 004's and the four stream ones).
    assert!(workloads.len() >= 5, "{}", workloads.len());
    let machines = Machine::all_builtin().unwrap();
    for w in &workloads {
        for m in &machines {
            // 20 samples: the interval is not asserted on here, only that it is computed.
            let o = optimal_high(w, m, &Knobs::default(), 20)
                .unwrap_or_else(|e| panic!("{} on {}: {e}", w.name(), m.name));
            let what = format!("{} on {}", w.name(), m.name);
            assert_eq!(o.workload, w.name());
            let [lo, hi] = o.swept_pages;
            assert!(
                (lo..=hi).contains(&o.optimal_high_pages),
                "{what}: optimum {} outside {lo}..={hi}",
                o.optimal_high_pages
            );
            let [a, b] = o.within_1pct_pages;
            assert!(
                a <= o.optimal_high_pages && o.optimal_high_pages <= b && b <= hi,
                "{what}: 1 % range {a}-{b} vs optimum {}",
                o.optimal_high_pages
            );
            assert!(o.optimal_throughput_ops_per_s > 0.0, "{what}");
            assert!(o.ci95_pages[0] <= o.ci95_pages[1], "{what}");
        }
    }
}

#[test]
fn reuse_workloads_are_the_producer_consumer_ones() {
    let names = reuse_workloads().unwrap();
    for n in [
        "netperf-udp",
        "netperf-udp-stream",
        "netperf-tcp-stream",
        "iperf3-tcp",
        "lmbench-af-unix",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    assert!(!names.iter().any(|x| x == "mmap-fill"));
}

#[test]
fn cli_refuses_a_workload_without_reuse_path() {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["optimal-high", "--workload", "mmap-fill", "--samples", "20"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let kind = pcpmodel::workload::resolve("mmap-fill")
        .unwrap()
        .kind
        .name();
    assert!(err.contains("mmap-fill"), "{err}");
    assert!(err.contains(&format!("kind {kind}")), "{err}");
    assert!(err.contains("netperf-udp-stream"), "{err}");
    assert!(err.contains("lmbench-af-unix"), "{err}");
}

/// `optimal-high --workload W --machine epyc-7w83 --samples 20 --format json EXTRA...`: its
/// JSON (the command must succeed).
fn optimal_high_json(workload: &str, extra: &[&str]) -> serde_json::Value {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            "optimal-high",
            "--workload",
            workload,
            "--machine",
            "epyc-7w83",
        ])
        .args(["--samples", "20", "--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{workload} {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn cli_runs_another_reuse_workload() {
    let v = optimal_high_json("iperf3-tcp", &[]);
    assert_eq!(v["workload"], "iperf3-tcp");
    assert_eq!(v["machine"], "epyc-7w83");
}

#[test]
fn optimal_high_takes_the_kinds_knobs_as_flags() {
    let run = |extra: &[&str]| {
        optimal_high_json("iperf3-tcp", extra)["optimal_high_pages"]
            .as_u64()
            .unwrap()
    };
    // pcp->batch sets how many pages each drain returns, so a batch of 31 instead of the
    // kernel's 63 moves the sweep's answer: the flag reaches the kind. (iperf3's consumer
    // allocates between frees, so its list fills towards high; lmbench's reader is a pure
    // consumer whose free_high drains keep the list near a batch whatever high is, and its
    // sweep is flat.)
    assert_ne!(run(&[]), run(&["--batch", "31"]));
    // Flags the kind cannot use, or out of range, are errors naming the flag.
    for (bad, what) in [
        (vec!["--scale-max", "9"], "--scale-max"),
        (vec!["--kernel", "6.1", "--scale-max", "3"], "scale-max"),
        (vec!["--nodes", "3"], "--nodes"),
    ] {
        let out = Command::cargo_bin("pcpmodel")
            .unwrap()
            .args(["optimal-high", "--workload", "lmbench-af-unix"])
            .args(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(what),
            "{bad:?}"
        );
    }
}
