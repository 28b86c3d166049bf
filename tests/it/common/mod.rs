//! Helpers shared by the CLI tests (`mod common;` in a test file): the binary, and one run of
//! it with its exit code and output.
#![allow(dead_code)] // each test file uses the part it needs

use std::path::Path;

use assert_cmd::Command;

/// The `pcpmodel` binary of this build.
pub fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").unwrap()
}

/// `pcpmodel ARGS` run in `dir`: (exit code, stdout, stderr); -1 when killed by a signal.
pub fn run(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = pcpmodel().current_dir(dir).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `pcpmodel ARGS --format json`, which must succeed (its stderr is the failure message), parsed.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = pcpmodel()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
