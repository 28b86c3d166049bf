//! Thread 001 (MEMCG_CHARGE_BATCH 32 -> 64): the held-out gain, the single-patch runs and the
//! stock dynamics, as computed by the model. The criterion (gain within 6 points of the
//! measured 62.7 %) is NOT met (the model gives about +77 %), so these tests pin the current
//! values to catch regressions instead of asserting the criterion.
use assert_cmd::Command;
use pcpmodel::validate::{t001, Role};

fn row(v: &pcpmodel::validate::TableValidation, case: &str) -> (f64, f64) {
    let r = v
        .rows
        .iter()
        .find(|r| r.case == case)
        .unwrap_or_else(|| panic!("no row {case}"));
    (r.measured, r.predicted)
}

#[test]
fn held_out_gain_pinned() {
    let v = t001::validate().unwrap();
    // Fitted rows: reproduced within 0.1 %.
    for r in v.rows.iter().filter(|r| r.role == Role::Fitted) {
        assert!(r.rel_error.abs() <= 1e-3, "{r:?}");
    }
    let (measured, gain) = row(&v, "batch 32->64");
    approx::assert_relative_eq!(measured, 62.79, epsilon = 0.01);
    // Current value +77.5 %: pinned to 73..82 (the criterion 62.7 ± 6 is not met).
    assert!(gain > 73.0 && gain < 82.0, "{gain}");
    assert!(
        (gain - measured).abs() > 6.0,
        "criterion met now: turn this into the acceptance test"
    );
    // Fully derived (transfer_scale 1): +13.2 %, pinned to 9..18.
    let (_, derived) = row(&v, "derived, batch 32->64");
    assert!(derived > 9.0 && derived < 18.0, "{derived}");
}

#[test]
fn single_patch_runs_pinned() {
    let v = t001::validate().unwrap();
    // Relative errors now: (A) +2.5 %, (B) +30.9 %, (A+B+C) +3.8 %; pinned ±5 points.
    for (case, err) in [
        ("run 3 (fewer_atomics) (cover letter v2), batch=32", 2.5),
        ("run 4 (split_layout) (cover letter v2), batch=32", 30.9),
        ("run 6 (both) (cover letter v2), batch=64", 3.8),
    ] {
        let (m, p) = row(&v, case);
        let e = 100.0 * (p / m - 1.0);
        assert!((e - err).abs() < 5.0, "{case}: {e}");
    }
}

#[test]
fn placement_only_raises_the_gain() {
    // Moving wmem uncharges to the sender CPU (0 -> 0.5 -> 1) makes the gain grow.
    let s = t001::placement_sensitivity().unwrap();
    assert_eq!(s.len(), 3);
    assert!(s[0].2 <= s[1].2 + 0.5 && s[1].2 <= s[2].2 + 0.5, "{s:?}");
    assert!(s.iter().all(|x| x.2 > 62.7 + 6.0), "{s:?}");
}

#[test]
fn memcg_cli_reports_stock_terms() {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["memcg", "--batch", "48", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sweep = v["sweep"].as_array().unwrap();
    let at = |b: u64| {
        sweep
            .iter()
            .find(|e| e["batch_pages"].as_u64() == Some(b))
            .unwrap()
    };
    // Pages per walk: the batch plus the drain overshoot (< one 19-page skb).
    for b in [32u64, 48, 64] {
        let ppw = at(b)["pages_per_walk"].as_f64().unwrap();
        assert!(ppw >= b as f64 && ppw < b as f64 + 19.0, "{b}: {ppw}");
    }
    let w32 = at(32)["walks_per_page"].as_f64().unwrap();
    let w64 = at(64)["walks_per_page"].as_f64().unwrap();
    approx::assert_relative_eq!(w32 / w64, 2.0, max_relative = 0.02);
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", "memcg-netperf", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["estimate"]["charge_walks_per_page"]
            .as_array()
            .unwrap()
            .len()
            == 2
    );
    assert_eq!(v["parameters"].as_array().unwrap().len(), 3);
}
