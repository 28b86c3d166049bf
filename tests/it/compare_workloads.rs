//! `pcpmodel compare` takes every loop `measure pcp` runs: the page-fault sweep through
//! `predict --high` of its workload (nothing fitted), chosen from the CSV's `workload` column
//! when `--workload` is not given; a loop's rows are refused against another benchmark.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_pcpmodel");
const HOST: &str = "data/host/host-idle-2026-12-01.toml";
const SWEEP: &str = "data/host/page-fault.csv";

fn compare(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("compare")
        .args(args)
        .args(["--machine", HOST, "--format", "json", "--quiet"])
        .output()
        .unwrap()
}

/// Data rows of a `measure pcp` CSV (header and comments excluded).
fn data_rows(path: &str) -> usize {
    let text = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count()
        - 1
}

#[test]
fn the_page_fault_sweep_is_compared_through_its_workload() {
    for workload in [None, Some("data/host/host-page-fault.toml")] {
        let mut args = vec![SWEEP];
        if let Some(w) = workload {
            args.extend(["--workload", w]);
        }
        let out = compare(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let expect = workload.map_or("will-it-scale-page-fault1", |_| "host-page-fault");
        assert_eq!(j["model"], expect);
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), data_rows(SWEEP));
        for r in rows {
            let p = r["predicted_norm"].as_f64().unwrap();
            assert!(p.is_finite() && p > 0.0, "{r}");
        }
        // A blind prediction through the kind: nothing is fitted, and it says so.
        assert_eq!(j["params"].as_array().map(Vec::len), Some(0));
        assert!(j["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("no fit")));
    }
}

#[test]
fn a_loops_rows_are_refused_against_another_benchmark() {
    let out = compare(&[SWEEP, "--workload", "netperf-udp"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("page-fault.csv:") && err.contains("workload"),
        "{err}"
    );
}

#[test]
fn a_sweep_taken_under_free_page_reporting_says_what_the_model_leaves_out() {
    // A sweep's first comment line records free page reporting (a VM handing free memory back
    // to its hypervisor); compare then notes that the refaults are not priced. Without it, no
    // such note.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(format!("{}/{SWEEP}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    assert!(first.starts_with('#'), "{first}");
    let notes_of = |csv: &str| {
        let path = dir.path().join("sweep.csv");
        std::fs::write(&path, csv).unwrap();
        let out = compare(&[path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let says = |notes: &[String]| notes.iter().any(|n| n.contains("free page reporting"));
    assert!(!says(&notes_of(&text)));
    let reported = format!(
        "{first}; free page reporting on (page_reporting_order 9): free buddy blocks of 2048 KiB and up go back to the hypervisor\n{rest}"
    );
    assert!(says(&notes_of(&reported)));
}
