//! Issue 5, thread 003 "Done when": page_fault1's contended acquisitions and total wait fall by
//! at least 10x with order-4 pages on the PCP lists; the average wait per contended acquisition
//! without them is within a factor of 2 of the measured 6.51 us; shell8's change is small. The
//! model's values come from `t003::validate()` (no fit); the measured ones from data/.

use pcpmodel::validate::{t003, Role};

/// Computed once per test binary: every test here reads the same deterministic result.
fn cached_t003_validate() -> &'static pcpmodel::validate::TableValidation {
    static V: std::sync::OnceLock<pcpmodel::validate::TableValidation> = std::sync::OnceLock::new();
    V.get_or_init(|| t003::validate().unwrap())
}

fn row<'a>(
    v: &'a pcpmodel::validate::TableValidation,
    case: &str,
    q: &str,
) -> &'a pcpmodel::validate::ValidationRow {
    v.rows
        .iter()
        .find(|r| r.case == case && r.quantity == q)
        .unwrap_or_else(|| panic!("no row {case} / {q}"))
}

#[test]
fn page_fault1_falls_tenfold_and_wait_within_factor_two() {
    let v = cached_t003_validate();
    let (off, on) = ("page_fault1 without", "page_fault1 with order-4 PCP");
    for q in ["contended", "total_wait_ns"] {
        let (a, b) = (row(v, off, q).predicted, row(v, on, q).predicted);
        assert!(a >= 10.0 * b, "{q}: {a} -> {b}");
    }
    let w = row(v, off, "avg_wait_ns");
    // Nothing is fitted in thread 003, but perf's handler costs were chosen after the gap to
    // this row was known: `seen`, not a blind test.
    assert_eq!(w.role, Role::Seen);
    // Tolerance: a factor of 2 either way (issue 5).
    let ratio = w.predicted / w.measured;
    assert!((0.5..=2.0).contains(&ratio), "{w:?}");
    let s = row(v, "shell8", "score_change_pct");
    assert!(s.predicted.abs() < 1.0, "{s:?}");
}

#[test]
fn predict_page_fault1_gives_both_views() {
    use assert_cmd::Command;
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", "page-fault1", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen = v["estimates"].as_array().unwrap();
    let alone = v["estimates_lock_alone"].as_array().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(alone.len(), 2);
    // perf's own hold makes the lock busier than it is alone.
    let u = |e: &serde_json::Value| e["utilisation"].as_f64().unwrap();
    assert!(u(&seen[0]) > u(&alone[0]));
    assert!(v["perf_lock_probe"]["end_under_lock_ns"].as_f64().unwrap() > 0.0);
    // Before 5.19 there is no tracepoint for perf to use: the output says so.
    let old = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", "page-fault1", "--kernel", "5.15"])
        .output()
        .unwrap();
    assert!(old.status.success());
    assert!(String::from_utf8_lossy(&old.stdout).contains("5.19"));
}
