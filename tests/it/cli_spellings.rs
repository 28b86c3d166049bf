//! One flag spelling per concept (issue 35; README "One spelling per concept"): the older
//! spellings are still read, as hidden aliases, and give the same answer as the one spelling.

use crate::common;

use std::path::Path;

fn out(args: &[&str]) -> String {
    let (code, out, err) = common::run(args, Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

#[test]
fn older_spellings_give_the_same_answer() {
    for (old, new) in [
        (
            &[
                "memcg",
                "--machine",
                "skylake-desktop",
                "--instances",
                "2",
                "--batch",
                "32",
            ][..],
            &[
                "memcg",
                "--machine",
                "skylake-desktop",
                "--tasks",
                "2",
                "--charge-batch",
                "32",
            ][..],
        ),
        (
            &["predict", "--workload", "page-bench", "--threads", "8"][..],
            &["predict", "--workload", "page-bench", "--tasks", "8"][..],
        ),
        (
            &["latency", "--workload", "mmap-fill", "--procs", "4"][..],
            &["latency", "--workload", "mmap-fill", "--tasks", "4"][..],
        ),
        (
            &[
                "validate",
                "--workload",
                "models/workloads/bulk-alloc-order0.toml",
                "--data",
                "examples/inputs/halbuer-order0.csv",
            ][..],
            &[
                "validate",
                "--workload",
                "models/workloads/bulk-alloc-order0.toml",
                "examples/inputs/halbuer-order0.csv",
            ][..],
        ),
    ] {
        let (a, b) = (out(old), out(new));
        assert_eq!(a, b, "{old:?} vs {new:?}");
    }
}

/// `--help` lists one spelling: the older ones are hidden aliases, not visible ones.
#[test]
fn help_lists_one_spelling() {
    let help = out(&["predict", "--help"]);
    assert!(!help.contains("aliases: --threads"), "{help}");
    let help = out(&["fit", "--help"]);
    assert!(!help.contains("aliases: --model"), "{help}");
    let help = out(&["measure", "pcp", "--help"]);
    assert!(help.contains("-o, --output"), "{help}");
    for sub in [["measure", "latency"], ["measure", "reuse"]] {
        let help = out(&[sub[0], sub[1], "--help"]);
        assert!(help.contains("-o, --output"), "{help}");
    }
    let help = out(&["compare", "--help"]);
    assert!(help.contains("--data"), "{help}");
}
