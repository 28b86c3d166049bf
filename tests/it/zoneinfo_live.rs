//! `pcpmodel zoneinfo` on the live states of `pcp->high` the kernel produces (6.7+ lazy
//! updates), on values it cannot produce, and on malformed files (issue 10, reproducers A1, S7,
//! S12). Every input is a fixture under tests/fixtures/.

use assert_cmd::Command;
use pcpmodel::kernel::zoneinfo::{classify_live_high, LiveHigh};
use predicates::prelude::*;

fn bin() -> Command {
    let mut c = Command::cargo_bin("pcpmodel").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn zoneinfo(file: &str, kernel: &str, cpus: &str) -> assert_cmd::assert::Assert {
    bin()
        .args([
            "zoneinfo",
            file,
            "--kernel",
            kernel,
            "--cpus-per-node",
            cpus,
        ])
        .assert()
}

/// Repro A1: a real 6.18 host whose DMA32 pcp->high (1938) sits below its high_min (4315).
/// pageset_update() raised high_min without touching pcp->high and the zone saw no refill or
/// free since: the kernel's own state, so exit 0 with the reason.
#[test]
fn a1_high_below_high_min_is_live_explained() {
    zoneinfo(
        "tests/fixtures/repro/A1/zoneinfo.txt",
        "6.18.44-fc-v769",
        "2",
    )
    .code(0)
    .stdout(predicate::str::contains("MISMATCH").not())
    .stdout(predicate::str::contains("live, explained"))
    .stdout(predicate::str::contains("below high_min"))
    .stdout(predicate::str::contains("values match"));
}

#[test]
fn each_live_state_outside_the_bounds_is_explained() {
    for (file, kernel, cpus, reasons) in [
        (
            "live-below-min-6.18.txt",
            "6.18",
            "2",
            &["below high_min"][..],
        ),
        (
            "live-above-max-6.18.txt",
            "6.18",
            "2",
            &["above high_max"][..],
        ),
        (
            "live-outside-bounds-6.8.txt",
            "6.8",
            "8",
            &["below high_min", "above high_max"][..],
        ),
    ] {
        let out = bin()
            .args(["zoneinfo", &format!("tests/fixtures/zoneinfo/{file}")])
            .args(["--kernel", kernel, "--cpus-per-node", cpus])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{file}: {stdout}");
        assert!(!stdout.contains("MISMATCH"), "{file}: {stdout}");
        for r in reasons {
            assert!(stdout.contains(r), "{file} should say '{r}': {stdout}");
        }
    }
}

#[test]
fn json_rows_carry_the_explanation() {
    let out = bin()
        .args([
            "zoneinfo",
            "tests/fixtures/zoneinfo/live-below-min-6.18.txt",
        ])
        .args([
            "--kernel",
            "6.18",
            "--cpus-per-node",
            "2",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["all_match"], true);
    assert_eq!(v["live_explained"], 1);
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "live_explained")
        .expect("one explained row");
    assert_eq!(row["zone"], "DMA32");
    assert_eq!(row["file"], serde_json::json!([1938, 1938]));
    assert!(row["explanation"]
        .as_str()
        .unwrap()
        .contains("pageset_update() does not touch pcp->high"));
}

/// Values no sequence of kernel updates gives: a non-zero high below batch << 2 = 4, and one
/// above an eighth of the zone's span (the largest high_max any split can have).
#[test]
fn impossible_live_values_exit_1() {
    for file in ["bad-live-high-3-6.18.txt", "bad-live-high-huge-6.18.txt"] {
        zoneinfo(&format!("tests/fixtures/zoneinfo/{file}"), "6.18", "2")
            .code(1)
            .stdout(predicate::str::contains("MISMATCH"))
            .stdout(predicate::str::contains(
                "no kernel update gives this pcp->high",
            ));
    }
}

#[test]
fn classification_follows_the_kernel_rules() {
    // high_min 2133, high_max 12288, a zone spanning 5505024 pages (ceiling 688128).
    let c = |h| classify_live_high(h, 2133, 12288, 5_505_024);
    assert_eq!(c(0), LiveHigh::InRange);
    assert_eq!(c(2133), LiveHigh::InRange);
    assert_eq!(c(12288), LiveHigh::InRange);
    assert_eq!(c(4), LiveHigh::BelowMin);
    assert_eq!(c(2132), LiveHigh::BelowMin);
    assert_eq!(c(12289), LiveHigh::AboveMax);
    assert_eq!(c(688_128), LiveHigh::AboveMax);
    assert_eq!(c(3), LiveHigh::Impossible);
    assert_eq!(c(688_129), LiveHigh::Impossible);
    // A tiny zone: the ceiling is never below 4 * 63 pages.
    assert_eq!(classify_live_high(250, 8, 16, 100), LiveHigh::AboveMax);
    // high_min above high_max (huge watermark_scale_factor on a small zone): both ends count.
    assert_eq!(classify_live_high(30, 40, 20, 1 << 20), LiveHigh::InRange);
}

/// Repro S7: a zone printed twice is an error naming the second header's line.
#[test]
fn s7_duplicated_zone_is_an_error_naming_the_line() {
    zoneinfo("tests/fixtures/repro/S7/zoneinfo.txt", "6.8", "8")
        .code(2)
        .stderr(predicate::str::contains("zoneinfo.txt:193: zone:"))
        .stderr(predicate::str::contains(
            "appears twice (first at line 132)",
        ));
}

/// Repro S7: `cpu: 4000000000` is no CPU id the kernel can have (NR_CPUS <= 8192).
#[test]
fn s7_absurd_cpu_id_is_an_error_naming_the_line() {
    zoneinfo("tests/fixtures/repro/S7/zoneinfo_cpu.txt", "6.8", "8")
        .code(2)
        .stderr(predicate::str::contains("zoneinfo_cpu.txt:34: cpu:"))
        .stderr(predicate::str::contains("4000000000"));
}

#[test]
fn out_of_range_and_inconsistent_values_are_errors() {
    let host = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/zoneinfo/host-6.18.txt"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, from, to, want) in [
        // A pageset value is a C int, never negative.
        ("neg", "count:    0", "count:    -5", ":84: count:"),
        ("big", "count:    0", "count:    4294967296", ":84: count:"),
        // The same CPU twice in a zone.
        ("dupcpu", "cpu: 1", "cpu: 0", ":90: cpu:"),
        // More managed pages than present ones.
        (
            "managed",
            "managed  772807",
            "managed  99999999",
            ":108: managed:",
        ),
        // Beyond 2^40 pages (52-bit physical addresses).
        (
            "huge",
            "spanned  1044480",
            "spanned  99999999999999",
            ":106: spanned:",
        ),
        (
            "node",
            "Node 0, zone   Normal",
            "Node 5000, zone   Normal",
            ":145: Node:",
        ),
    ] {
        let path = dir.path().join(name);
        assert!(host.contains(from), "{from}");
        std::fs::write(&path, host.replacen(from, to, 1)).unwrap();
        zoneinfo(path.to_str().unwrap(), "6.18", "2")
            .code(2)
            .stderr(predicate::str::contains(want));
    }
}

/// Repro S12: `--cpus-per-node 0` is refused, naming the flag.
#[test]
fn s12_zero_cpus_per_node_is_refused() {
    zoneinfo("tests/fixtures/zoneinfo/host-6.18.txt", "6.18", "0")
        .code(2)
        .stderr(predicate::str::contains("--cpus-per-node"));
}

/// T3-silent-zoneinfo-unread-fields: a value the kernel cannot print in a line the checker does
/// not read (protection, a counter, start_pfn) passed as "all values match". Each mutant of the
/// real 6.18 file is now an error naming its line and field.
#[test]
fn malformed_fields_the_checker_does_not_read_are_refused_with_their_line() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/zoneinfo/host-6.18.txt"
    ))
    .unwrap();
    assert!(pcpmodel::kernel::zoneinfo::parse_zoneinfo(&text, "host-6.18.txt").is_ok());
    let mutants: &[(&str, &str, &str)] = &[
        (
            "protection: (0, 3018, 3786, 3786, 3786)",
            "protection: (0, -1, 3786, 3786, 3786)",
            "protection",
        ),
        (
            "protection: (0, 3018, 3786, 3786, 3786)",
            "protection: (0, nan, 3786, 3786, 3786)",
            "protection",
        ),
        (
            "protection: (0, 3018, 3786, 3786, 3786)",
            "protection: (0, 99999999999999999999999, 3786, 3786, 3786)",
            "protection",
        ),
        (
            "protection: (0, 3018, 3786, 3786, 3786)",
            "protection: 0, 3018",
            "protection",
        ),
        ("nr_free_pages 3840", "nr_free_pages abc", "nr_free_pages"),
        (
            "nr_free_pages 3840",
            "nr_free_pages 3840 7",
            "nr_free_pages",
        ),
        (
            "vm stats threshold: 4",
            "vm stats threshold: -4",
            "vm stats threshold",
        ),
        (
            "start_pfn:           1\n",
            "start_pfn:           -1\n",
            "start_pfn",
        ),
    ];
    for (from, to, field) in mutants {
        let (i, _) = text.match_indices(from).next().expect("fixture line");
        let line = text[..i].lines().count();
        let bad = text.replacen(from, to, 1);
        let e = pcpmodel::kernel::zoneinfo::parse_zoneinfo(&bad, "z.txt")
            .expect_err(to)
            .to_string();
        assert!(e.contains(&format!("z.txt:{line}")), "{to}: {e}");
        assert!(e.contains(field), "{to}: {e}");
    }
}
