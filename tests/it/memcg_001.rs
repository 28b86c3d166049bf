//! Thread 001 (MEMCG_CHARGE_BATCH 32 -> 64): the acceptance criterion (held-out gain
//! within 6 points of the measured 62.7 %, at most two free parameters), the single-patch runs
//! and the stock dynamics, as computed by the model.
use assert_cmd::Command;
use pcpmodel::validate::{t001, Role};

/// Computed once per test binary: every test here reads the same deterministic result.
fn cached_t001_validate() -> &'static pcpmodel::validate::TableValidation {
    static V: std::sync::OnceLock<pcpmodel::validate::TableValidation> = std::sync::OnceLock::new();
    V.get_or_init(|| t001::validate().unwrap())
}

fn row(v: &pcpmodel::validate::TableValidation, case: &str) -> (f64, f64) {
    let r = v
        .rows
        .iter()
        .find(|r| r.case == case)
        .unwrap_or_else(|| panic!("no row {case}"));
    (r.measured, r.predicted)
}

#[test]
fn held_out_gain_within_six_points() {
    let v = cached_t001_validate();
    // Two free parameters, each fitted to one measurement.
    assert_eq!(v.free_params.len(), 2);
    // Each parameter is fitted to one measurement: the fit is exactly determined, so the fitted
    // rows reproduce their data by construction and test nothing about the model.
    assert_eq!(v.degrees_of_freedom, 0);
    assert_eq!(
        v.rows.iter().filter(|r| r.role == Role::Fitted).count(),
        2,
        "root memcg and 6.0-rc1 at batch 32"
    );
    let (measured, gain) = row(v, "batch 32->64");
    approx::assert_relative_eq!(measured, 62.79, epsilon = 0.01);
    // Criterion: within 6 percentage points (model +60.3 % when written).
    assert!((gain - measured).abs() <= 6.0, "{gain}");
    let (m64, p64) = row(v, "batch=64");
    // The held-out throughput: with the batch-32 row fitted exactly (to 0.1 %), the criterion's
    // 6 points of gain are 6 / (100 + 62.8) = 3.7 % of the batch-64 throughput (-1.55 % when
    // written).
    assert!(
        (p64 / m64 - 1.0).abs() < 6.0 / (100.0 + measured) + 0.001,
        "{p64} vs {m64}"
    );
    // Fully derived (transfer_scale 1): cheaper transfers leave the counter lines less busy at
    // batch 32, so doubling the batch gains less than in the calibrated model, but still gains.
    let (_, derived) = row(v, "derived, batch 32->64");
    assert!(derived > 0.0 && derived < gain, "{derived} vs {gain}");
}

#[test]
fn unshared_transfers_would_miss_the_criterion() {
    // Without SMT siblings sharing transfers the gain is +77.5 % (the former model).
    let (scale, gain) = t001::unshared_sensitivity().unwrap();
    assert!(gain > 62.8 + 6.0, "{gain}");
    // transfer_scale refitted without sharing: above 1 (the batch-32 row needs dearer transfers
    // than the machine's latency) and below the value fitted with sharing (2.52 when written):
    // a sibling that shares a transfer does not pay it, so reproducing the same batch-32
    // throughput with sharing needs dearer transfers than without.
    let shared = t001::calibrated_params().unwrap().0[1];
    assert!(scale > 1.0 && scale < shared, "{scale} vs shared {shared}");
}

#[test]
fn single_patch_runs_lie_between_the_unpatched_kernel_and_the_root_memcg() {
    // The patches only remove memcg accounting work, so each predicted run is faster than the
    // unpatched 6.0-rc1 at the same batch and slower than the root memcg (no accounting at all),
    // which bounds every memcg run from above. Their errors against the cover letter are shown by
    // validate, not pinned here.
    let v = cached_t001_validate();
    let (_, root) = row(v, "root memcg (cover letter v2)");
    for (case, unpatched) in [
        (
            "run 3 (fewer_atomics) (cover letter v2), batch=32",
            "batch=32",
        ),
        (
            "run 4 (split_layout) (cover letter v2), batch=32",
            "batch=32",
        ),
        ("run 6 (both) (cover letter v2), batch=64", "batch=64"),
    ] {
        let (_, p) = row(v, case);
        let (_, base) = row(v, unpatched);
        assert!(
            p > base && p < root,
            "{case}: {p} vs {unpatched} {base}, root {root}"
        );
    }
}

#[test]
fn placement_only_raises_the_gain() {
    // Moving wmem uncharges to the sender CPU (0 -> 0.5 -> 1) makes the gain grow; the held
    // value 0 gives the smallest.
    let s = t001::placement_sensitivity().unwrap();
    assert_eq!(s.len(), 3);
    // Strictly: the refits are deterministic and the steps are +21.9 and +1.3 points when
    // written (60.3, 82.2, 83.5 %), far above the refit's convergence (the former half-point
    // slack had no reason).
    assert!(s[0].2 < s[1].2 && s[1].2 < s[2].2, "{s:?}");
    // Half the uncharges on the sender already leaves the criterion's window (62.7 + 6 points).
    assert!(s[1].2 > 62.7 + 6.0, "{s:?}");
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
    // Walks per page are 1 / (batch + overshoot), and the overshoot grows with the batch (1.15
    // and 2.30 pages when written), so the ratio is 2; 2 % is 1.3 pages of overshoot at batch
    // 64, about half the overshoot itself.
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
