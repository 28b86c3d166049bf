//! `pcpmodel fit`: bad input is exit 2 naming the file, line and column (or the flag), a fit
//! that does not converge is exit 1, a converged fit no better than a constant warns on stderr,
//! `--fix` provenance names the user and the value, and held-out predictions are held out.
//! Reproducers C2, C3, H3b, S5 and S6 of issue 10 (inputs in tests/fixtures/repro/).

use std::path::{Path, PathBuf};

use crate::common;
use common::run;
use pcpmodel::fit::{fit, Dataset, FitModel, FitOptions, Residual};
use pcpmodel::Machine;

fn repro(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/repro")
        .join(id)
}

#[test]
fn c2_c3_huge_starts_are_a_flag_error_not_an_abort() {
    for (id, n) in [("C2", "4294967296"), ("C3", "18446744073709551615")] {
        let (code, _, err) = run(
            &[
                "fit",
                "--model",
                "netperf-pcp-high",
                "--data",
                "data.csv",
                "--starts",
                n,
            ],
            &repro(id),
        );
        assert_eq!(code, 2, "{id}: {err}");
        assert!(err.contains("--starts") && err.contains("1..=256"), "{err}");
    }
}

#[test]
fn h3b_a_batch_of_2_pow_31_pages_is_a_located_error_not_a_hang() {
    let (code, _, err) = run(
        &[
            "fit",
            "--model",
            "memcg-netperf",
            "--data",
            "data.csv",
            "--machine",
            "memcg-72cpu",
            "--starts",
            "1",
            "--no-loo",
        ],
        &repro("H3b"),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("data.csv:3: memcg_charge_batch_pages"),
        "{err}"
    );
}

#[test]
fn s5_negative_and_huge_measurements_are_refused_with_line_and_column() {
    for (file, line) in [("data.csv", 2), ("data_huge.csv", 3)] {
        let (code, _, err) = run(
            &[
                "fit",
                "--model",
                "netperf-pcp-high",
                "--data",
                file,
                "--no-loo",
            ],
            &repro("S5"),
        );
        assert_eq!(code, 2, "{file}: {err}");
        assert!(err.contains(&format!("{file}:{line}: score")), "{err}");
    }
}

#[test]
fn s6_bad_inputs_are_exit_2_with_line_and_column_not_non_convergence() {
    for (model, file, at) in [
        ("netperf-pcp-high", "data.csv", "data.csv:3: pcp_high_pages"),
        ("page-bench", "numa.csv", "numa.csv:3: numa_stat"),
    ] {
        let (code, _, err) = run(
            &["fit", "--model", model, "--data", file, "--no-loo"],
            &repro("S6"),
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(at), "{err}");
        assert!(!err.contains("did not converge"), "{err}");
    }
}

#[test]
fn fix_provenance_says_the_user_fixed_it_and_at_what() {
    let (code, out, err) = run(
        &[
            "fit",
            "--model",
            "netperf-pcp-high",
            "--data",
            "data.csv",
            "--no-loo",
            "--fix",
            "fixed_ns=1234",
            "--format",
            "json",
        ],
        &repro("C2"),
    );
    assert!(code == 0 || code == 1, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let p = j["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "fixed_ns")
        .unwrap();
    assert_eq!(p["fixed"], true);
    let prov = p["provenance"].as_str().unwrap();
    assert!(prov.contains("fixed by the user at 1234"), "{prov}");
}

#[test]
fn a_fit_no_better_than_a_constant_warns_on_stderr() {
    // Thread 000's funclatency paste (index 1) against the EPYC zone-lock model: the model's
    // bounds cannot reach the measured shape and the converged fit's residuals exceed the spread
    // of the counts about their mean.
    let (code, _, err) = run(
        &[
            "fit",
            "--model",
            "zone-lock",
            "--data",
            "hist.csv",
            "--residual",
            "absolute",
            "--no-loo",
            "--starts",
            "1",
        ],
        &repro("LOO"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: the fit converged, but its rms residual"),
        "{err}"
    );
}

#[test]
fn held_out_predictions_differ_from_in_sample_ones_when_a_parameter_ends_on_a_bound() {
    // In this fit lines_per_page and work_ns_per_page end on their bounds. Refits without a row
    // used to start at the saturated internal coordinate (derivative < 1e-17), could not move,
    // and returned the in-sample prediction for all 20 rows; started off the bound they move, so
    // some held-out prediction must differ from the in-sample one.
    let m = Machine::builtin("epyc-7w83").unwrap();
    let model = pcpmodel::model::zonelock::ZoneLockHistFit::new(&m).unwrap();
    let text = std::fs::read_to_string(repro("LOO").join("hist.csv")).unwrap();
    let ds = Dataset::from_csv_str(&text, "hist.csv", &model).unwrap();
    let fixed_ns = model.params()[0].default;
    let opts = FitOptions {
        residual: Residual::Absolute,
        starts: 1,
        fixed: vec![("fixed_ns".into(), fixed_ns)],
        ..FitOptions::default()
    };
    let r = fit(&model, &ds, &opts).unwrap();
    assert!(r.converged, "{}", r.termination);
    let loo = r.loo.as_ref().expect("leave-one-out rows");
    let differ = loo
        .iter()
        .zip(&r.residuals)
        .filter(|(l, x)| {
            (l.predicted_held_out - x.predicted).abs() > 1e-6 * x.predicted.abs().max(1.0)
        })
        .count();
    assert!(
        differ > 0,
        "every held-out prediction equals the in-sample one"
    );
}
