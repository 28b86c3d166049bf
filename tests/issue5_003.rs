//! Issue 5, thread 003 "Done when": page_fault1's contended acquisitions and total wait fall by
//! at least 10x with order-4 pages on the PCP lists; the average wait per contended acquisition
//! without them is within a factor of 2 of the measured 6.51 us; shell8's change is small. The
//! model's values come from `t003::validate()` (no fit); the measured ones from data/.

use pcpmodel::validate::{t003, Role};

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
    let v = t003::validate().unwrap();
    let (off, on) = ("page_fault1 without", "page_fault1 with order-4 PCP");
    for q in ["contended", "total_wait_ns"] {
        let (a, b) = (row(&v, off, q).predicted, row(&v, on, q).predicted);
        assert!(a >= 10.0 * b, "{q}: {a} -> {b}");
    }
    let w = row(&v, off, "avg_wait_ns");
    assert_eq!(w.role, Role::HeldOut);
    // Tolerance: a factor of 2 either way (issue 5).
    let ratio = w.predicted / w.measured;
    assert!((0.5..=2.0).contains(&ratio), "{w:?}");
    let s = row(&v, "shell8", "score_change_pct");
    assert!(s.predicted.abs() < 1.0, "{s:?}");
}

#[test]
fn notes_give_the_lock_alone_and_the_count_gap() {
    // The agreement rests on perf's own cost (perflock.rs): validate must say what the lock
    // alone gives and that the absolute counts disagree.
    let v = t003::validate().unwrap();
    let all = v.notes.join("\n");
    assert!(all.contains("The lock alone"), "{all}");
    assert!(all.contains("absolute counts do not agree"), "{all}");
}
