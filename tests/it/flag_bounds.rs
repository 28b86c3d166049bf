//! Numeric flags bounded by physics (src/bounds.rs): a value outside its range is exit 2 with a
//! message naming the flag, and work never grows with a user number past its cap. Reproducers H3
//! and S12 of issue 10.

use assert_cmd::Command;

fn err_of(args: &[&str]) -> String {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn h3_memcg_batch_of_2_pow_32_is_refused_not_42_seconds() {
    let e = err_of(&["memcg", "--batch", "4294967295"]);
    assert!(
        e.contains("--charge-batch 4294967295") && e.contains("1..=65536"),
        "{e}"
    );
}

#[test]
fn s12_flags_out_of_their_physical_range_name_the_flag() {
    for (args, flag) in [
        (&["memcg", "--instances", "1000"][..], "--tasks 1000"),
        (
            &[
                "kernel",
                "--machine",
                "icelake-server",
                "--min-free-kbytes",
                "4294967296",
            ][..],
            "--min-free-kbytes",
        ),
        (
            &[
                "predict",
                "--machine",
                "icelake-server",
                "--high",
                "99999999",
            ][..],
            "--high 99999999",
        ),
        (
            &[
                "kernel",
                "--machine",
                "skylake-desktop",
                "--kernel",
                "99.99",
            ][..],
            "--kernel",
        ),
        (&["memcg", "--cgroup-depth", "100000"][..], "--cgroup-depth"),
        (&["optimal-high", "--samples", "1000000"][..], "--samples"),
        (
            &["predict", "--workload", "page-bench", "--numa-stat", "2"][..],
            "--numa-stat",
        ),
        (
            &[
                "kernel",
                "--machine",
                "icelake-server",
                "--watermark-scale-factor",
                "0",
            ][..],
            "--watermark-scale-factor",
        ),
    ] {
        let e = err_of(args);
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}
