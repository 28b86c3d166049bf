//! Regression tests for the CLI reproducers T3-* of issue 35 (inputs copied to
//! tests/fixtures/repro/T3-*/, see its README): each gives a clear located error or a correct
//! answer, within 10 s. T3-cli-negative-unlocated is also run flag by flag in
//! tests/cli_negative.rs.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/repro")
        .join(id)
}

/// `pcpmodel ARGS` in `dir`, failing the test when it takes more than 10 s (the bound
/// for every reproducer) or dies of a signal or a panic.
fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let t = Instant::now();
    let r = common::run(args, dir);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(10), "{args:?} took {took:?}");
    assert!(r.0 >= 0, "{args:?} died of a signal: {}", r.2);
    assert!(!r.2.contains("panicked"), "{args:?} panicked: {}", r.2);
    r
}

fn run(args: &[&str]) -> (i32, String, String) {
    run_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--format", "json"]);
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{a:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{a:?}: {e}: {out}"))
}

/// A machine's CPU count from its own description (sockets x cores x threads).
fn cpus(machine: &str) -> u64 {
    let m = json(&["machine", "show", machine]);
    let t = &m["topology"];
    ["sockets", "cores_per_socket", "threads_per_core"]
        .iter()
        .map(|k| t[*k]["value"].as_u64().unwrap())
        .product()
}

/// A machine's CPUs on one NUMA node (spread evenly, as its description's nodes are).
fn cpus_per_node(machine: &str) -> u64 {
    let m = json(&["machine", "show", machine]);
    cpus(machine) / m["topology"]["numa_nodes"]["value"].as_u64().unwrap()
}

/// The first number after `marker` in `text` (digits, '.', 'e').
fn number_after(text: &str, marker: &str) -> f64 {
    let i = text
        .find(marker)
        .unwrap_or_else(|| panic!("no '{marker}' in {text}"));
    let rest = &text[i + marker.len()..];
    let s: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e')
        .collect();
    s.parse()
        .unwrap_or_else(|_| panic!("no number after '{marker}': {rest}"))
}

#[test]
fn t3_cli_negative_unlocated() {
    let (code, _, err) = run(&["predict", "--workload", "netperf-udp", "--high", "-1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--high -1") && err.contains("0..=2147483647"),
        "{err}"
    );
    let (code, _, err) = run(&["measure", "latency", "--quick", "--repeats", "-0.5"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--repeats -0.5") && err.contains("1..=1000"),
        "{err}"
    );
}

/// More sender/receiver pairs than the machine runs at once are refused with the number that
/// fits (two CPUs a pair on the node they run on: half of one node's CPUs, read from the
/// machine's own description); at that number both throughput lines state one figure.
#[test]
fn t3_odd_pairs_oversubscribed_refused_with_the_pairs_that_fit() {
    let fit = cpus_per_node("icelake-server") / 2;
    let pred = [
        "predict",
        "--workload",
        "netperf-udp",
        "--nodes",
        "1",
        "--tasks",
    ];
    let (code, out, err) = run(&[&pred[..], &["8192"]].concat());
    assert_eq!(code, 2, "{out}{err}");
    // The reproducer's own command (the workload's nodes) is refused the same way.
    let (code, _, e) = run(&["predict", "--workload", "netperf-udp", "--tasks", "8192"]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--tasks 8192") && e.contains("give 1.."), "{e}");
    assert!(
        err.contains("--tasks 8192") && err.contains(&format!("give 1..={fit} pairs")),
        "{err}"
    );
    let over = (fit + 1).to_string();
    let (code, _, err) = run(&[&pred[..], &[over.as_str()]].concat());
    assert_eq!(code, 2, "{err}");
    let fits = fit.to_string();
    let (code, out, err) = run(&[&pred[..], &[fits.as_str()]].concat());
    assert_eq!(code, 0, "{err}");
    // The operations/s over all tasks and the per-pair throughput times the pairs are one
    // quantity (an operation is one page through a pair); they differ only by the printed
    // rounding to 4 significant digits (0.05 %).
    let ops = number_after(&out, "per task,");
    let all = number_after(&out, &format!("{fit} pairs:"));
    assert!((ops - all).abs() <= 1e-3 * ops, "{ops} vs {all}: {out}");
}

/// `--high` gets one answer from every command: the most the kernel can set is the node-0
/// Normal zone's pcp->high at vm.percpu_pagelist_high_fraction = 8 (the sysctl's minimum), as
/// `kernel` computes it; that value is accepted and one page more refused by latency, predict
/// and explain alike.
#[test]
fn t3_odd_pairs_one_high_limit_for_every_command() {
    let (m, k) = ("xeon-gold-6252-2s", "6.10");
    let cfg = json(&[
        "kernel",
        "--machine",
        m,
        "--kernel",
        k,
        "--percpu-pagelist-high-fraction",
        "8",
    ]);
    let z = cfg["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["node"] == 0 && z["zone"] == "Normal")
        .unwrap();
    let limit = z["pcp_high_max_pages"].as_u64().unwrap();
    assert_eq!(z["pcp_high_min_pages"].as_u64(), Some(limit), "{z}");
    let (ok, over) = (limit.to_string(), (limit + 1).to_string());
    let commands: [Vec<&str>; 3] = [
        vec!["latency", "--workload", "bulk-alloc-order0", "--machine", m],
        vec!["predict", "--workload", "netperf-udp", "--machine", m],
        vec!["explain", m, m],
    ];
    for c in &commands {
        for (h, want) in [(&ok, 0), (&over, 2)] {
            let mut a = c.clone();
            a.extend_from_slice(&["--kernel", k, "--high", h]);
            let (code, _, err) = run(&a);
            assert_eq!(code, want, "{a:?}: {err}");
            if want == 2 {
                assert!(
                    err.contains(&format!("--high {over}"))
                        && err.contains(&format!("= {limit} pages")),
                    "{a:?}: {err}"
                );
            }
        }
    }
    // The reproducer's own command.
    let (code, _, err) = run(&[
        "latency",
        "--workload",
        "bulk-alloc-order0",
        "--high",
        "2147483647",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--high 2147483647: above the most"), "{err}");
}

/// memcg's default instances fit the machine: thread 001's 36 where there are 72 CPUs, else
/// half the CPUs (a sender and a receiver CPU each).
#[test]
fn t3_memcg_default_instances_fit_the_machine() {
    let d = json(&["memcg", "--machine", "skylake-desktop"]);
    assert_eq!(d["instances"].as_u64(), Some(cpus("skylake-desktop") / 2));
    let d = json(&["memcg", "--machine", "memcg-72cpu"]);
    assert_eq!(d["instances"].as_u64(), Some(36));
    // Given by hand, too many is still an error naming the flag.
    let (code, _, err) = run(&["memcg", "--machine", "skylake-desktop", "--tasks", "5"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--tasks 5") && err.contains("at most 4"),
        "{err}"
    );
}

#[test]
fn t3_explain_epyc_zero_cores_both_orders() {
    for (a, b) in [
        ("epyc-7w83", "skylake-desktop"),
        ("skylake-desktop", "epyc-7w83"),
        ("kunpeng-920", "skylake-desktop"),
    ] {
        let (code, out, err) = run(&["explain", a, b]);
        assert_eq!(code, 0, "explain {a} {b}: {err}");
        assert!(!err.contains("0 core(s) per LLC domain"), "{err}");
        assert!(out.contains(a) && out.contains(b), "{out}");
    }
}

/// Versions parse strictly: a fourth part or a non-numeric patch is an error naming the file
/// and line (or the flag), not 6.18.
#[test]
fn t3_silent_kernel_version_is_an_error() {
    let dir = fixture("T3-silent-kernel-version");
    let (code, _, err) = run_in(&dir, &["predict", "--workload", "w.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("w.toml:10") && err.contains("reference_kernel") && err.contains("6.18.0.1"),
        "{err}"
    );
    for v in ["6.18.foo", "6.18.0.1.2.3"] {
        let (code, _, err) = run(&["kernel", "--machine", "icelake-server", "--kernel", v]);
        assert_eq!(code, 2, "{v}: {err}");
        assert!(err.contains("--kernel") && err.contains(v), "{err}");
    }
}

/// op.phase_pages = 2^32 (inside its documented bound) answers at once, and correctly: with
/// phases of 2^28 pages or more the transient at a phase's turn (the per-CPU lists filling or
/// emptying, a few thousand pages) is below 1e-5 of the phase, so 2^32 must give the 2^28
/// answer; 0.5 % leaves room for the model's own discretisation and nothing for a wrong regime.
#[test]
fn t3_hang_phase_pages_answers_within_10_s() {
    let dir = fixture("T3-hang-phase-pages");
    let text = std::fs::read_to_string(dir.join("w.toml")).unwrap();
    assert!(text.contains("phase_pages = { value = 4294967296"));
    let big = json(&[
        "latency",
        "--workload",
        dir.join("w.toml").to_str().unwrap(),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let shorter = tmp.path().join("w.toml");
    std::fs::write(
        &shorter,
        text.replace(
            "phase_pages = { value = 4294967296",
            "phase_pages = { value = 268435456",
        ),
    )
    .unwrap();
    let small = json(&["latency", "--workload", shorter.to_str().unwrap()]);
    for key in ["avg_ns", "p99_ns", "calls_per_s", "pages_per_s"] {
        let (a, b) = (big[key].as_f64().unwrap(), small[key].as_f64().unwrap());
        assert!(a.is_finite() && a > 0.0, "{key} {a}");
        assert!((a - b).abs() <= 5e-3 * b, "{key}: 2^32 {a} vs 2^28 {b}");
    }
}

/// A workload file's default pairs beyond what the machine runs at once (lmbench-af-unix's 16 on
/// an 8-CPU desktop) are capped to the pairs that fit, said in a note, not time-shared.
#[test]
fn t3_odd_pairs_file_default_capped_with_a_note() {
    let fit = cpus_per_node("skylake-desktop") / 2;
    let (code, out, err) = run(&[
        "predict",
        "--workload",
        "lmbench-af-unix",
        "--machine",
        "skylake-desktop",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("over {fit} task(s)")), "{out}");
    assert!(out.contains("tasks.count 16 is more than"), "{out}");
}
