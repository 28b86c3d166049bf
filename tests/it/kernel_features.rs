//! Host feature detection (issue 12, item 3) on fake trees under tests/fixtures/kernel/hosts/.

use std::path::PathBuf;

use assert_cmd::Command;
use pcpmodel::kernel::changes::Feature;
use pcpmodel::kernel::features::{detect_features, Evidence};
use pcpmodel::kernel::KernelVersion;
use pcpmodel::Error;

fn host(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kernel/hosts")
        .join(name)
}

#[test]
fn a_6_6_stable_kernel_with_the_scale_max_backport_is_seen_from_its_config() {
    let fs = detect_features(&host("backport-6.6"), None).unwrap();
    assert_eq!(fs.version, Some(KernelVersion::new(6, 6)));
    assert_eq!(fs.pcp_batch_scale_max, Some(5));
    let c = fs
        .changes
        .iter()
        .find(|c| c.key == "pcp-batch-scale-max")
        .unwrap();
    assert_eq!(c.present, Some(true));
    assert_eq!(c.evidence, Some(Evidence::Config));
    assert_eq!(c.version_says, Some(false));
    assert!(c.disagrees_with_version());
    assert!(
        fs.notes.iter().any(|n| n.contains("backport")),
        "{:#?}",
        fs.notes
    );
    // The rest of the 6.7 series is not implied: no high_min lines, version 6.6.
    assert_eq!(fs.has("auto-tune"), Some(false));
    assert_eq!(fs.auto_tuning, Some(false));
    assert!(!fs.feature(Feature::ZoneinfoHighMinMax).unwrap().present);
    assert!(fs.feature(Feature::WatermarkBoost).unwrap().present);
}

#[test]
fn a_5_10_host_shows_the_old_fraction_sysctl_and_no_zoneinfo() {
    let fs = detect_features(&host("distro-5.10"), None).unwrap();
    assert_eq!(fs.version, Some(KernelVersion::new(5, 10)));
    let f = fs.feature(Feature::PercpuPagelistHighFraction).unwrap();
    assert!(!f.present && f.evidence == Evidence::Sysctl);
    assert_eq!(fs.has("high-from-low-wmark"), Some(false));
    assert_eq!(fs.has("double-batch"), Some(true)); // by version
    assert!(fs.feature(Feature::ZoneinfoHighMinMax).is_none());
    assert!(fs
        .notes
        .iter()
        .any(|n| n.contains("zoneinfo features unknown")));
}

#[test]
fn high_min_lines_in_zoneinfo_mean_auto_tuning() {
    // The version is overridden to 6.1: zoneinfo still shows auto-tuning (a backport).
    let fs = detect_features(&host("host-6.18"), Some(KernelVersion::new(6, 1))).unwrap();
    assert_eq!(fs.auto_tuning, Some(true));
    let c = fs.changes.iter().find(|c| c.key == "auto-tune").unwrap();
    assert_eq!(
        (c.present, c.evidence),
        (Some(true), Some(Evidence::Zoneinfo))
    );
    assert!(c.disagrees_with_version());
}

#[test]
fn an_empty_tree_knows_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let fs = detect_features(dir.path(), None).unwrap();
    assert_eq!(fs.version, None);
    assert!(fs.changes.iter().all(|c| c.present.is_none()));
    assert!(fs.notes.len() >= 3, "{:#?}", fs.notes);
}

#[test]
fn bad_files_are_errors_naming_file_line_and_field() {
    match detect_features(&host("bad-config"), None) {
        Err(Error::Parse {
            file, line, field, ..
        }) => {
            assert!(file.ends_with("boot/config-6.12.1"), "{file}");
            assert_eq!((line, field.as_str()), (2, "CONFIG_PCP_BATCH_SCALE_MAX"));
        }
        other => panic!("{other:?}"),
    }
    match detect_features(&host("bad-release"), None) {
        Err(Error::Parse { file, .. }) => assert!(file.ends_with("osrelease"), "{file}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cli_kernel_host_reports_features_and_configures_for_the_host_kernel() {
    let root = host("backport-6.6");
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["kernel", "--host", "--root"])
        .arg(&root)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["host"]["version"], "6.6");
    assert_eq!(j["host"]["pcp_batch_scale_max"], 5);
    // With a machine: the host's version and its CONFIG_PCP_BATCH_SCALE_MAX are used.
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["kernel", "--host", "--machine", "icelake-server", "--root"])
        .arg(&root)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["kernel"], "6.6");
    assert_eq!(j["pcp_batch_scale_max"], 5);
    Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["kernel", "--host", "--root"])
        .arg(host("bad-config"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("CONFIG_PCP_BATCH_SCALE_MAX"));
}
