//! `pcpmodel detect --root`: an empty or partial root is an error that says what is missing
//! (exit 2), a cache index that is not a directory is reported as unreadable, and a machine it
//! does write loads again. Reproducers S11 and S11b of issue 10.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").unwrap()
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

#[test]
fn s11_an_empty_root_is_an_error_listing_what_is_missing() {
    let dir = std::env::temp_dir().join(format!("pcpmodel-empty-root-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for extra in [&["--toml"][..], &[][..]] {
        let out = pcpmodel()
            .args(["detect", "--root"])
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        for what in ["the CPUs", "the caches", "the memory"] {
            assert!(err.contains(what), "{err}");
        }
        if !extra.is_empty() {
            assert!(out.stdout.is_empty(), "no invented machine on stdout");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn s11b_an_l3_index_that_is_a_file_is_reported_unreadable() {
    let root = fixture("repro/S11b/sys_root");
    let out = pcpmodel()
        .args(["detect", "--toml", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cache/index3 is not a directory"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_complete_root_writes_a_machine_that_loads_again() {
    let out = pcpmodel()
        .args(["detect", "--toml", "--root"])
        .arg(fixture("sysfs/intel-xeon-gold-5222-2s"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let m = pcpmodel::Machine::from_toml_str(&text, "host.toml").unwrap();
    assert!(m.llc().is_some_and(|c| c.level == 3));
}
