//! What a machine or workload file may say, checked when it is loaded (so `machine show` and
//! `workload show` refuse what `predict` would) and what a command refuses instead of printing
//! NaN. Each case was found by mutating the built-in files (probe of 2026-12-02); every error
//! names the file and exits 2.

use assert_cmd::Command;

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").unwrap()
}

/// Writes `text` to a temporary file `name` and returns the command's exit code and stderr.
fn run(dir: &tempfile::TempDir, name: &str, text: &str, args: &[&str]) -> (i32, String) {
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap().to_string();
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if *a == "FILE" {
                path.clone()
            } else {
                a.to_string()
            }
        })
        .collect();
    let out = pcpmodel().args(&args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn set_line(src: &str, key: &str, line: &str) -> String {
    let out: String = src
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{key} = ")) {
                line.to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(out, src, "{key}: the mutation did not apply");
    out
}

/// An escape sequence in a name or description would be printed raw to the terminal (a
/// clear-screen sequence cleared it): text fields hold printable text only.
#[test]
fn control_characters_in_text_fields_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = set_line(
        include_str!("../../models/skylake-desktop.toml"),
        "name",
        "name = \"sky\\u001b[2Jlake\"",
    );
    let (code, err) = run(&dir, "m.toml", &m, &["machine", "show", "FILE"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("m.toml:2: name: contains the control character U+001B"),
        "{err}"
    );
    let w = set_line(
        include_str!("../../models/workloads/mmap-fill.toml"),
        "what",
        "what = \"a page\\u001b[31m\"",
    );
    let (code, err) = run(&dir, "w.toml", &w, &["workload", "show", "FILE"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("op.what: contains the control character"),
        "{err}"
    );
}

/// A memory description whose zones the kernel could not lay out (no ZONE_DMA32 above
/// ZONE_DMA) was shown by `machine show` and refused only by `predict`: now at load.
#[test]
fn a_machine_whose_zones_cannot_be_laid_out_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let m = set_line(
        include_str!("../../models/skylake-desktop.toml"),
        "below_4g_mib",
        "below_4g_mib = { value = 16, source = \"assumed: x\" }",
    );
    let (code, err) = run(&dir, "m.toml", &m, &["machine", "show", "FILE"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("m.toml:24: memory.below_4g_mib"), "{err}");
}

/// A sender/receiver pair needs two CPUs of one LLC domain for the default same-llc placement:
/// a machine with one core per domain was modelled as if it had a partner (pairs clamped to 1).
#[test]
fn a_pair_needs_two_cores_of_an_llc_domain() {
    let dir = tempfile::tempdir().unwrap();
    let m = set_line(
        include_str!("../../models/skylake-desktop.toml"),
        "cores_per_socket",
        "cores_per_socket = { value = 1, source = \"assumed: x\" }",
    );
    let (code, err) = run(&dir, "m.toml", &m, &["predict", "--machine", "FILE"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("same-llc needs two cores in an LLC domain"),
        "{err}"
    );
}

/// `op.phase_pages` is a whole number of pages >= 1: 0 or 0.5 silently meant "interleaved";
/// a cgroup depth of 0 passed the flag check and failed in the model.
#[test]
fn phase_pages_and_cgroup_depth_are_checked_where_they_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let src = include_str!("../../models/workloads/mmap-fill.toml");
    for v in ["0", "0.5"] {
        let w = set_line(
            src,
            "phase_pages",
            &format!("phase_pages = {{ value = {v}, source = \"assumed: x\" }}"),
        );
        let (code, err) = run(&dir, "w.toml", &w, &["workload", "show", "FILE"]);
        assert_eq!(code, 2, "{v}: {err}");
        assert!(err.contains("op.phase_pages"), "{v}: {err}");
    }
    let out = pcpmodel()
        .args(["memcg", "--cgroup-depth", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cgroup-depth"));
}

/// A loop the PCP list serves entirely takes no refill: `scale-max` says so instead of a table
/// of NaN (page_bench01 allocates and frees one page at a time).
#[test]
fn scale_max_refuses_a_loop_without_refills() {
    let out = pcpmodel()
        .args([
            "scale-max",
            "--workload",
            "page-bench01",
            "--kernel",
            "6.10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("takes no rmqueue_bulk() refill"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NaN"));
}

/// A kernel older than the formulas modelled (4.6, watermark_scale_factor) is refused: 2.6.11
/// was computed with a DMA32 zone and a THP min_free_kbytes it did not have.
#[test]
fn kernels_older_than_the_formulas_are_refused() {
    for k in ["2.6.11", "3.10", "4.5"] {
        let out = pcpmodel()
            .args(["kernel", "--machine", "icelake-server", "--kernel", k])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{k}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("older than 4.6"),
            "{k}"
        );
    }
    pcpmodel()
        .args(["kernel", "--machine", "icelake-server", "--kernel", "4.6"])
        .assert()
        .success();
}

/// A machine file whose values equal a measured built-in's is that machine, whatever its
/// source texts say: it gets the built-in's fitted parameters (a copy with one edited
/// `source` string was carried over, 63 % slower per page).
#[test]
fn a_copy_with_edited_sources_keeps_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    let src = include_str!("../../models/icelake-server.toml");
    let text = src.replacen("source = \"spec: ", "source = \"spec: (edited) ", 1);
    assert_ne!(text, src);
    let f = dir.path().join("m.toml");
    std::fs::write(&f, text).unwrap();
    let run = |m: &str| -> f64 {
        let out = pcpmodel()
            .args(["predict", "--machine", m, "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["predicted"]["ns_per_op"].as_f64().unwrap()
    };
    assert_eq!(run(f.to_str().unwrap()), run("icelake-server"));
}

/// A carried-over work per page with a wide spread is drawn log-normally: the throughput
/// interval's upper end is no longer the zero-work limit (for xeon-8260 it was 8.0 M pages/s,
/// the rate with the 1032 ns of fixed work set to 0, against 0.86 M at the estimate).
#[test]
fn a_wide_carried_over_spread_does_not_reach_zero_work() {
    let out = pcpmodel()
        .args(["predict", "--machine", "xeon-8260", "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["predicted"];
    let est = p["throughput_per_task"].as_f64().unwrap();
    let hi = p["outputs"]["throughput_ci95_hi_ops_per_s"]
        .as_f64()
        .unwrap();
    let lo = p["outputs"]["throughput_ci95_lo_ops_per_s"]
        .as_f64()
        .unwrap();
    let fixed = p["outputs"]["fixed_ns"].as_f64().unwrap();
    let ns = p["ns_per_op"].as_f64().unwrap();
    let zero_work = 1e9 / (ns - fixed);
    assert!(lo < est && est < hi, "{lo} {est} {hi}");
    // The zero-work rate is an upper limit no draw of a positive work reaches (a 5 % margin
    // for the latencies' own spread, which the draws perturb too).
    assert!(hi < 0.95 * zero_work, "{hi} vs zero-work {zero_work}");
}
