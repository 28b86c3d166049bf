//! A machine file's measured work per page (`work_ns_per_page`, written by `measure work`): the
//! producer/consumer kind takes it as the workload's fixed work on that machine, a misspelt key
//! or an impossible value is refused with the field named, and `measure work` writes a file that
//! loads back.

use crate::common::run;
use std::path::{Path, PathBuf};

/// A copy of skylake-desktop with the given text appended, in a fresh directory.
fn machine_with(tag: &str, extra: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pcpmodel-work-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = include_str!("../../models/skylake-desktop.toml");
    let path = dir.join("m.toml");
    std::fs::write(&path, format!("{base}\n{extra}")).unwrap();
    (dir, path)
}

fn work_table(key: &str, ns: &str) -> String {
    format!("[work_ns_per_page.{key}]\nvalue = {ns}\nsource = \"measured: a test\"\n")
}

fn predict_json(machine: &Path, dir: &Path) -> serde_json::Value {
    let (code, out, err) = run(
        &[
            "predict",
            "--workload",
            "netperf-udp",
            "--machine",
            machine.to_str().unwrap(),
            "--high",
            "1024",
            "--format",
            "json",
        ],
        dir,
    );
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// The fixed work is one additive term of the time per page: two files that differ only in the
/// measured work differ in ns per page by exactly that difference (nothing else in the model
/// depends on it), and the prediction says where its work came from.
#[test]
fn the_measured_work_is_the_fixed_term() {
    let (d1, m1) = machine_with("a", &work_table("netperf-udp", "300"));
    let (d2, m2) = machine_with("b", &work_table("netperf-udp", "700"));
    let (a, b) = (predict_json(&m1, &d1), predict_json(&m2, &d2));
    let ns = |v: &serde_json::Value| v["ns_per_op"].as_f64().unwrap();
    assert!(
        (ns(&b) - ns(&a) - 400.0).abs() < 1e-6,
        "{} vs {}",
        ns(&a),
        ns(&b)
    );
    let source = &a["parameters"]["source"];
    assert_eq!(source["kind"], "given");
    assert!(
        source["source"]
            .as_str()
            .unwrap()
            .contains("work_ns_per_page.netperf-udp"),
        "{source}"
    );
    for d in [d1, d2] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A key that names no built-in workload would be silently unused; a work of zero or a NaN is no
/// measurement. Each is exit 2 naming the file's field.
#[test]
fn bad_work_entries_are_refused_with_the_field() {
    for (tag, key, ns) in [
        ("typo", "netperf-udpp", "300"),
        ("zero", "netperf-udp", "0"),
        ("nan", "netperf-udp", "nan"),
        ("case", "Netperf-UDP", "300"),
    ] {
        let (dir, m) = machine_with(tag, &work_table(key, ns));
        let (code, _, err) = run(
            &[
                "predict",
                "--workload",
                "netperf-udp",
                "--machine",
                m.to_str().unwrap(),
            ],
            &dir,
        );
        assert_eq!(code, 2, "{tag}: {err}");
        assert!(
            err.contains(&format!("work_ns_per_page.{key}")),
            "{tag}: {err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `measure work` needs no root: it times both stages, reports the slower one as the work, and
/// `--output` writes the machine with that value for the workload that models the loop. Times
/// are not checked (a shared test machine).
#[test]
fn measure_work_writes_a_machine_that_loads_back() {
    let dir = std::env::temp_dir().join(format!("pcpmodel-work-measure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("host.toml");
    let (code, out, err) = run(
        &[
            "measure",
            "work",
            "--workload",
            "af-unix",
            "--seconds",
            "0.02",
            "--repeats",
            "1",
            "--machine",
            "skylake-desktop",
            "--output",
            out_path.to_str().unwrap(),
            "--format",
            "json",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let w = v["work_ns_per_page"].as_f64().unwrap();
    let (s, r) = (
        v["stages"]["write"]["median"].as_f64().unwrap(),
        v["stages"]["read"]["median"].as_f64().unwrap(),
    );
    assert!(s > 0.0 && r > 0.0 && w == s.max(r), "{v}");
    assert_eq!(v["model_workload"], "lmbench-af-unix");
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        text.contains("[work_ns_per_page.lmbench-af-unix]"),
        "{text}"
    );
    let (code, out, err) = run(
        &[
            "predict",
            "--workload",
            "lmbench-af-unix",
            "--machine",
            out_path.to_str().unwrap(),
            "--format",
            "json",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("work_ns_per_page.lmbench-af-unix"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}
