//! CLI tests of `pcpmodel kernel` and `pcpmodel zoneinfo` on the binary.

use assert_cmd::Command;
use predicates::prelude::*;

const MACHINE: &str = "tests/fixtures/machines/icelake-2s-test.toml";

fn bin() -> Command {
    let mut c = Command::cargo_bin("pcpmodel").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn normal0(v: &serde_json::Value) -> serde_json::Value {
    v["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["node"] == 0 && z["zone"] == "Normal")
        .unwrap()
        .clone()
}

#[test]
fn kernel_5_18_json_has_fixed_high_near_421() {
    let v = json_of(&[
        "kernel",
        "--machine",
        MACHINE,
        "--kernel",
        "5.18",
        "--format",
        "json",
    ]);
    assert_eq!(v["kernel"], "5.18");
    assert_eq!(v["min_free_kbytes"], 90112);
    let z = normal0(&v);
    let high = z["pcp_high_pages"].as_u64().unwrap();
    assert!((420..=422).contains(&high), "{high}");
    assert_eq!(z["batch_pages"], 63);
    assert!(z.get("pcp_high_min_pages").is_none());
    for key in [
        "managed_pages",
        "min_pages",
        "low_pages",
        "high_pages",
        "promo_pages",
    ] {
        assert!(z[key].is_u64(), "{key}");
    }
}

#[test]
fn kernel_defaults_to_6_18_with_high_min_and_max() {
    let v = json_of(&["--format", "json", "kernel", "--machine", MACHINE]);
    assert_eq!(v["kernel"], "6.18");
    let z = normal0(&v);
    assert_eq!(z["pcp_high_max_pages"], 31200);
    let hmin = z["pcp_high_min_pages"].as_u64().unwrap();
    assert!((420..=422).contains(&hmin));
    assert!(z.get("pcp_high_pages").is_none());
    assert_eq!(v["pcp_batch_scale_max"], 5);
}

#[test]
fn kernel_table_and_csv_carry_units() {
    bin()
        .args(["kernel", "--machine", MACHINE, "--kernel", "5.18"])
        .assert()
        .success()
        .stdout(predicate::str::contains("pcp high (pages)"))
        .stdout(predicate::str::contains("min_free_kbytes 90112"));
    bin()
        .args(["kernel", "--machine", MACHINE, "--format", "csv"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "node,zone,managed (pages),min (pages)",
        ))
        .stdout(predicate::str::contains("0,Normal,15974400,"));
}

#[test]
fn kernel_sysctls_change_the_result() {
    let v = json_of(&[
        "kernel",
        "--machine",
        MACHINE,
        "--kernel",
        "6.18",
        "--percpu-pagelist-high-fraction",
        "8",
        "--format",
        "json",
    ]);
    let z = normal0(&v);
    assert_eq!(z["pcp_high_min_pages"], z["pcp_high_max_pages"]);
    let v = json_of(&[
        "kernel",
        "--machine",
        MACHINE,
        "--kernel",
        "5.18",
        "--thp",
        "never",
        "--format",
        "json",
    ]);
    assert_eq!(v["min_free"]["rule"], "sqrt");
    let v = json_of(&[
        "kernel",
        "--machine",
        MACHINE,
        "--kernel",
        "5.10",
        "--percpu-pagelist-fraction",
        "100",
        "--format",
        "json",
    ]);
    let z = normal0(&v);
    assert_eq!(z["pcp_high_pages"], 159_744); // 15,974,400 / 100
    assert_eq!(z["batch_pages"], 96);
}

#[test]
fn kernel_bad_input_exits_2_with_a_message() {
    for (args, msg) in [
        (vec!["--kernel", "five"], "--kernel"),
        (vec!["--kernel", "6.18", "--scale-max", "7"], "0..=6"),
        (vec!["--kernel", "6.1", "--scale-max", "5"], "6.7"),
        (
            vec!["--kernel", "6.1", "--percpu-pagelist-high-fraction", "3"],
            "-EINVAL",
        ),
        (
            vec!["--kernel", "6.1", "--percpu-pagelist-fraction", "10"],
            "5.14",
        ),
    ] {
        bin()
            .args(["kernel", "--machine", MACHINE])
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::starts_with("Error:"))
            .stderr(predicate::str::contains(msg));
    }
    bin()
        .args(["kernel", "--machine", "no-such-machine"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown machine"));
}

#[test]
fn zoneinfo_fixtures_match_and_exit_0() {
    for (file, kernel, cpus) in [
        ("host-6.18.txt", "6.18.44-fc-v857", "2"),
        ("icelake-5.18.txt", "5.18", "64"),
        ("desktop-6.6.txt", "6.6", "8"),
        ("numa2-6.18.txt", "6.18", "16"),
        ("handset-min-free-6.1.txt", "6.1", "4"),
    ] {
        bin()
            .args(["zoneinfo", &format!("tests/fixtures/zoneinfo/{file}")])
            .args(["--kernel", kernel, "--cpus-per-node", cpus])
            .assert()
            .code(0)
            .stdout(predicate::str::contains("MISMATCH").not())
            .stdout(predicate::str::contains("file (pages)"));
    }
}

#[test]
fn zoneinfo_json_reports_the_rule() {
    let v = json_of(&[
        "zoneinfo",
        "tests/fixtures/zoneinfo/host-6.18.txt",
        "--kernel",
        "6.18",
        "--cpus-per-node",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(v["all_match"], true);
    assert_eq!(v["min_free_kbytes"], 67584);
    assert_eq!(v["min_free"]["rule"], "thp_raise");
    let rows = v["rows"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["quantity"] == "pcp_high_min" && r["file"] == 2133 && r["status"] == "match"));
}

#[test]
fn zoneinfo_mismatch_exits_1() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/zoneinfo/host-6.18.txt"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoneinfo");
    std::fs::write(&path, text.replacen("batch:    63", "batch:    31", 1)).unwrap();
    bin()
        .args([
            "zoneinfo",
            path.to_str().unwrap(),
            "--kernel",
            "6.18",
            "--cpus-per-node",
            "2",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("MISMATCH"))
        .stdout(predicate::str::contains("1 of"));
    // Wrong CPU count: every high_min differs.
    bin()
        .args([
            "zoneinfo",
            "tests/fixtures/zoneinfo/host-6.18.txt",
            "--kernel",
            "6.18",
        ])
        .args(["--cpus-per-node", "4"])
        .assert()
        .code(1);
}

#[test]
fn zoneinfo_malformed_exits_2_naming_the_line() {
    for (file, line_field) in [
        ("bad-truncated.txt", "bad-truncated.txt:183: coun"),
        ("bad-non-numeric.txt", "bad-non-numeric.txt:154: managed"),
        (
            "bad-pageset-value.txt",
            "bad-pageset-value.txt:186: high_min",
        ),
    ] {
        bin()
            .args(["zoneinfo", &format!("tests/fixtures/zoneinfo/{file}")])
            .args(["--kernel", "6.18", "--cpus-per-node", "2"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(line_field));
    }
    bin()
        .args([
            "zoneinfo",
            "tests/fixtures/zoneinfo/no-such-file",
            "--kernel",
            "6.18",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no-such-file"));
    bin()
        .args([
            "zoneinfo",
            "tests/fixtures/zoneinfo/host-6.18.txt",
            "--kernel",
            "6.6",
        ])
        .args(["--cpus-per-node", "2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("6.13"));
}

/// `pcpmodel zoneinfo` with no arguments checks this host. Never skipped on Linux: the kernel
/// always provides /proc/zoneinfo and /proc/sys/kernel/osrelease. It passes on any state the
/// kernel allows, including a live pcp->high outside [high_min, high_max] after the bounds
/// moved ("live, explained").
#[cfg(target_os = "linux")]
#[test]
fn zoneinfo_on_this_host_matches() {
    bin()
        .arg("zoneinfo")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("values match"));
}

/// Repro T3-silent-kernel-version: `--kernel 6.18.foo` and `6.18.0.1.2.3` were read as 6.18.
/// A `--kernel` is MAJOR.MINOR or MAJOR.MINOR.PATCH; zoneinfo's `--kernel` (the release of the
/// kernel that wrote the file) also takes a `uname -r` string, but not extra dotted parts.
#[test]
fn kernel_versions_with_extra_parts_are_refused() {
    for bad in ["6.18.foo", "6.18.0.1.2.3", "6.18.0.1", "6.18.44-generic"] {
        bin()
            .args(["kernel", "--machine", "icelake-server", "--kernel", bad])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--kernel"))
            .stderr(predicate::str::contains("MAJOR.MINOR or MAJOR.MINOR.PATCH"));
    }
    // A flag has no line: the error names the flag, never a pseudo-location `--kernel:0:`
    // (issue 35), and says which value it refused.
    for (cmd, bad) in [
        (&["kernel", "--machine", "icelake-server"][..], "6.18.foo"),
        (
            &["predict", "--workload", "netperf-udp"][..],
            "6.18.0.1.2.3",
        ),
    ] {
        let out = bin().args(cmd).args(["--kernel", bad]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--kernel: ") && err.contains(bad), "{err}");
        assert!(!err.contains(":0:"), "{err}");
    }
    bin()
        .args([
            "kernel",
            "--machine",
            "icelake-server",
            "--kernel",
            "6.6.30",
        ])
        .assert()
        .code(0);
    for bad in ["6.18.foo", "6.18.0.1"] {
        bin()
            .args(["zoneinfo", "tests/fixtures/zoneinfo/host-6.18.txt"])
            .args(["--kernel", bad, "--cpus-per-node", "2"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--kernel"))
            .stderr(predicate::str::contains("kernel release"));
    }
}

/// A `--kernel` newer than the newest modelled kernel (6.19) runs on 6.19's rules and says so
/// on stderr, once; 6.18 and 6.19 themselves are modelled and print no warning.
#[test]
fn a_kernel_newer_than_modelled_warns_what_is_assumed() {
    for args in [
        &["kernel", "--machine", "icelake-server", "--kernel", "7.0"][..],
        &["kernel", "--machine", "icelake-server", "--kernel", "7.1"][..],
        &["predict", "--workload", "netperf-udp", "--kernel", "6.20"][..],
    ] {
        let out = bin().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr.matches("warning:").count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("newer than 6.19") && stderr.contains("6.19's rules are assumed"),
            "{args:?}: {stderr}"
        );
    }
    for v in ["6.18", "6.19"] {
        bin()
            .args(["kernel", "--machine", "icelake-server", "--kernel", v])
            .assert()
            .code(0)
            .stderr(predicate::str::contains("warning").not());
    }
}
