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
    // Issue 5 asks for a tenfold fall; the model predicts millions-fold, so 10x would pass a
    // model that had lost most of the mechanism. The bounds are what the physics and the data
    // guarantee:
    // - with order 4 on the PCP lists only the ramp to the auto-tuned pcp->high takes the lock,
    //   so acquisitions fall by `acq` (~530x); the lock is then less busy, so the share of
    //   acquisitions that find a waiter (what perf counts) cannot rise: the contended count
    //   falls by at least `acq` (the model: ~7.5e6x);
    // - the measured falls are floors: 713 contended acquisitions against 2 counted events,
    //   whose 95 % one-sided Poisson upper limit is 6.30, so the contended count falls by at
    //   least 713 / 6.30 = 113x, and the total wait (4.64 ms against at most 6.30 waits of the
    //   measured 12.83 us) by at least 57x. The wait per traced acquisition rises with the patch
    //   (measured 6.51 -> 12.83 us), so the total wait is bounded by the data only.
    let model = t003::model_003().unwrap();
    let p = model.derived_params(&pcpmodel::Machine::builtin("kunpeng-920").unwrap());
    let e_off = model.estimate_observed(&p, false, &model.probe).unwrap();
    let e_on = model.estimate_observed(&p, true, &model.probe).unwrap();
    let acq = e_off.acquisitions / e_on.acquisitions;
    assert!(
        acq > 1.0,
        "acquisitions {} -> {}",
        e_off.acquisitions,
        e_on.acquisitions
    );
    let (c_off, c_on) = (
        row(v, off, "contended").predicted,
        row(v, on, "contended").predicted,
    );
    // The rows are the estimates recomputed here.
    assert_eq!((c_off, c_on), (e_off.contended, e_on.contended));
    assert!(
        c_off >= acq.max(713.0 / 6.30) * c_on,
        "contended: {c_off} -> {c_on} (acquisitions {acq:.0}x)"
    );
    let (t_off, t_on) = (
        row(v, off, "total_wait_ns").predicted,
        row(v, on, "total_wait_ns").predicted,
    );
    assert!(
        t_off >= 4.64e6 / (6.30 * 12_830.0) * t_on,
        "total wait: {t_off} -> {t_on}"
    );
    let w = row(v, off, "avg_wait_ns");
    // Nothing is fitted in thread 003, but perf's handler costs were chosen after the gap to
    // this row was known: `seen`, not a blind test.
    assert_eq!(w.role, Role::Seen);
    // Tolerance: a factor of 2 either way (issue 5).
    let ratio = w.predicted / w.measured;
    assert!((0.5..=2.0).contains(&ratio), "{w:?}");
    let s = row(v, "shell8", "score_change_pct");
    // Small: the change is 100 x share x (lock time saved per folio / work per folio), so it is
    // positive (the patch only removes lock time) and below 100 x share = 2 % whatever the lock
    // costs; with the derived costs it is 0.07 % (1040 of 28167 ns saved), against the measured
    // +0.28 %. 1 % is the "small", half the structural bound.
    assert!(s.predicted > 0.0 && s.predicted < 1.0, "{s:?}");
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
