//! Sensitivities of validate's rows to the assumed constants (src/assumptions.rs): moving a
//! constant through the registry changes nothing when the moved value is the default, and a
//! row that is linear in a constant moves in proportion.

use pcpmodel::assumptions::{value, with_moved};
use pcpmodel::validate::{sensitivities, t003};

#[test]
fn moving_a_constant_to_its_own_value_changes_no_row() {
    let base = t003::validate().unwrap();
    let same = with_moved(
        "highorder::NODE_STORE_GBPS_ASSUMED",
        pcpmodel::model::highorder::NODE_STORE_GBPS_ASSUMED,
        || t003::validate().unwrap(),
    );
    assert_eq!(base.rows, same.rows);
    // The move is undone when the closure returns.
    assert_eq!(value("highorder::NODE_STORE_GBPS_ASSUMED", 1.0), 1.0);
}

#[test]
fn shell8_change_is_proportional_to_the_assumed_order4_share() {
    // score_change_pct = 100 x share x saved / work: doubling the share (its spread is 100 %)
    // doubles the row; nothing else in the table depends on the share.
    let base = t003::validate().unwrap();
    let s = sensitivities(&base).unwrap();
    let share = s
        .iter()
        .find(|x| x.constant == "t003::SHELL8_ORDER4_SHARE")
        .expect("the share is movable");
    assert_eq!(share.quantity, "score_change_pct");
    // Exact up to floating-point rounding.
    assert!((share.delta_pct - 100.0).abs() < 1e-9, "{share:?}");
    // A faster node store shortens faults, so the lock is busier: waits cannot fall.
    let store = s
        .iter()
        .find(|x| x.constant == "highorder::NODE_STORE_GBPS_ASSUMED")
        .unwrap();
    assert!(store.delta_pct >= 0.0, "{store:?}");
}
