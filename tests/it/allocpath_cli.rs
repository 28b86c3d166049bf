//! CLI and acceptance checks of threads 001-003 (tolerances stated per check).
use assert_cmd::Command;
use pcpmodel::validate::{t001, t002, t003, Role};

/// thread 003's table, computed once per test binary (deterministic, read by two tests).
fn t003_validated() -> &'static pcpmodel::validate::TableValidation {
    static V: std::sync::OnceLock<pcpmodel::validate::TableValidation> = std::sync::OnceLock::new();
    V.get_or_init(|| t003::validate().unwrap())
}

#[test]
fn memcg_sweep_json() {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["memcg", "--batch", "64", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["sweep"].as_array().unwrap().len() >= 10);
}

#[test]
fn predict_workloads_run() {
    for w in ["memcg-netperf", "page-bench", "page-fault1"] {
        Command::cargo_bin("pcpmodel")
            .unwrap()
            .args(["predict", "--workload", w, "--format", "json"])
            .assert()
            .success();
    }
}

#[test]
fn t001_calibration_and_held_out_gain() {
    // Two free parameters: fixed work from the root-memcg run, transfer_scale from batch 32;
    // both reproduced within 0.1 %. Batch 64 is held out. Issue 5 asks for the improvement within
    // 6 points of 62.7 % (+60.3 % with SMT siblings sharing transfers; tests/memcg_001.rs pins
    // it). What must hold here: the calibrated model has the counter lines saturated at batch 32,
    // so doubling the batch gains more than 30 % (half the measured gain: a model short of it has
    // lost the saturation), and the fully derived one (transfer_scale 1, cheaper transfers, lines
    // far from saturation) gains less than 20 % (+11.7 % when written), a third of the measured.
    let v = t001::validate().unwrap();
    // Each parameter is fitted to one measurement: the fit is exactly determined, so the fitted
    // rows reproduce their data by construction and test nothing about the model.
    assert_eq!(v.degrees_of_freedom, 0);
    let gain = |case: &str| {
        v.rows
            .iter()
            .find(|r| r.quantity == "improvement_pct" && r.case == case)
            .unwrap()
            .predicted
    };
    assert!(gain("batch 32->64") > 30.0);
    assert!(gain("derived, batch 32->64") < 20.0);
    let held = v.rows.iter().find(|r| r.case == "batch 32->64").unwrap();
    // Not fitted, but the SMT-sharing mechanism was added while this row was watched.
    assert_eq!(held.role, Role::Seen);
}

#[test]
fn t003_total_wait_falls_tenfold_and_shell8_small() {
    let v = t003_validated();
    let w: Vec<f64> = v
        .rows
        .iter()
        .filter(|r| r.quantity == "total_wait_ns")
        .map(|r| r.predicted)
        .collect();
    // Not issue 5's 10x (the model gives ~2e6x): the floor the measurement itself sets. 4.64 ms
    // of wait against 2 counted events with the patch, at most 6.30 of them at 95 % (Poisson) of
    // the measured 12.83 us: a fall of at least 57x (see tests/order4_pcp_003.rs).
    assert!(w[0] >= 4.64e6 / (6.30 * 12_830.0) * w[1], "{w:?}");
    let s = v
        .rows
        .iter()
        .find(|r| r.quantity == "score_change_pct")
        .unwrap();
    // "small, as measured" (0.28 %): below 1 % in magnitude.
    assert!(s.predicted.abs() < 1.0, "{s:?}");
}

#[test]
fn t002_within_3pct_and_saving_grows() {
    let v = t002::validate().unwrap();
    for r in v
        .rows
        .iter()
        .filter(|r| r.quantity == "cycles_per_page" && r.role == Role::Fitted)
    {
        // 3 %: three parameters on four points leave one degree of freedom (fitted rows at
        // +-0.9 % when written); a fitted row must do better than the held-out scale, the
        // leave-one-out errors of 3.5-3.6 %.
        assert!(r.rel_error.abs() <= 0.03, "{r:?}");
    }
    let s: Vec<f64> = v
        .rows
        .iter()
        .filter(|r| r.quantity == "saving_cycles")
        .map(|r| r.predicted)
        .collect();
    assert_eq!(s.len(), 2);
    assert!(s[1] > s[0]);
}

#[test]
fn t003_contended_falls_tenfold() {
    let v = t003_validated();
    let c: Vec<f64> = v
        .rows
        .iter()
        .filter(|r| r.quantity == "contended")
        .map(|r| r.predicted)
        .collect();
    // The measured floor (not issue 5's 10x; the model gives ~7.5e6x): 713 contended
    // acquisitions against 2 counted events, at most 6.30 at 95 % (Poisson): at least 113x.
    assert!(c[0] >= 713.0 / 6.30 * c[1], "{c:?}");
}
