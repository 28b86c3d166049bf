//! Every numeric flag of every subcommand takes a negative-looking value (`--high -1`) and refuses
//! it naming the flag and its accepted range, exit 2, no panic: reproducer T3-cli-negative-unlocated
//! of issue 35 (clap used to answer "unexpected argument '-1' found", naming neither). The list is
//! complete: the binary's unit test `every_numeric_flag_refuses_minus_one_naming_flag_and_range`
//! walks the clap tree and fails on a numeric flag this file does not name.

use assert_cmd::Command;

/// (subcommand path, flag, other arguments the command requires).
const FLAGS: &[(&str, &str, &[&str])] = &[
    (
        "kernel",
        "--percpu-pagelist-high-fraction",
        &["--machine", "icelake-server"],
    ),
    (
        "kernel",
        "--percpu-pagelist-fraction",
        &["--machine", "icelake-server"],
    ),
    ("kernel", "--scale-max", &["--machine", "icelake-server"]),
    (
        "kernel",
        "--watermark-scale-factor",
        &["--machine", "icelake-server"],
    ),
    (
        "kernel",
        "--min-free-kbytes",
        &["--machine", "icelake-server"],
    ),
    ("zoneinfo", "--cpus-per-node", &[]),
    ("zoneinfo", "--percpu-pagelist-high-fraction", &[]),
    ("zoneinfo", "--watermark-scale-factor", &[]),
    ("predict", "--high", &[]),
    ("predict", "--batch", &[]),
    ("predict", "--free-high-threshold", &[]),
    ("predict", "--order", &[]),
    ("predict", "--tasks", &[]),
    ("predict", "--scale-max", &[]),
    ("predict", "--skb-defer-max", &[]),
    ("predict", "--run-seconds", &[]),
    ("predict", "--run-start-pages", &["--run-seconds", "1"]),
    ("predict", "--charge-batch", &[]),
    ("predict", "--cgroup-depth", &[]),
    ("predict", "--memcgs", &[]),
    ("predict", "--memcg-redraw", &[]),
    ("predict", "--numa-stat", &[]),
    ("optimal-high", "--samples", &[]),
    ("optimal-high", "--batch", &[]),
    ("optimal-high", "--free-high-threshold", &[]),
    ("optimal-high", "--order", &[]),
    ("optimal-high", "--tasks", &[]),
    ("optimal-high", "--scale-max", &[]),
    ("optimal-high", "--skb-defer-max", &[]),
    ("optimal-high", "--run-seconds", &[]),
    ("optimal-high", "--run-start-pages", &["--run-seconds", "1"]),
    ("explain", "--high", &["icelake-server", "skylake-desktop"]),
    (
        "fit",
        "--starts",
        &["--workload", "netperf-udp", "no-such.csv"],
    ),
    ("latency", "--tasks", &[]),
    ("latency", "--order", &[]),
    ("latency", "--batch", &[]),
    ("latency", "--high", &[]),
    ("latency", "--duration-s", &[]),
    ("latency", "--scale-max", &[]),
    ("scale-max", "--tasks", &[]),
    ("scale-max", "--order", &[]),
    ("scale-max", "--batch", &[]),
    ("scale-max", "--high", &[]),
    ("scale-max", "--duration-s", &[]),
    ("scale-max", "--p99-us", &[]),
    ("memcg", "--charge-batch", &[]),
    ("memcg", "--cgroup-depth", &[]),
    ("memcg", "--tasks", &[]),
    ("plot optimal-high", "--samples", &["-o", "x.svg"]),
    ("plot optimal-high", "--batch", &["-o", "x.svg"]),
    (
        "plot optimal-high",
        "--free-high-threshold",
        &["-o", "x.svg"],
    ),
    ("plot optimal-high", "--order", &["-o", "x.svg"]),
    ("plot optimal-high", "--tasks", &["-o", "x.svg"]),
    ("plot optimal-high", "--scale-max", &["-o", "x.svg"]),
    ("plot optimal-high", "--skb-defer-max", &["-o", "x.svg"]),
    ("plot optimal-high", "--run-seconds", &["-o", "x.svg"]),
    (
        "plot optimal-high",
        "--run-start-pages",
        &["-o", "x.svg", "--run-seconds", "1"],
    ),
    (
        "plot explain",
        "--high",
        &["icelake-server", "skylake-desktop", "-o", "x.svg"],
    ),
    ("plot latency", "--tasks", &["-o", "x.svg"]),
    ("plot latency", "--order", &["-o", "x.svg"]),
    ("plot latency", "--batch", &["-o", "x.svg"]),
    ("plot latency", "--high", &["-o", "x.svg"]),
    ("plot latency", "--duration-s", &["-o", "x.svg"]),
    ("plot latency", "--scale-max", &["-o", "x.svg"]),
    ("import", "--index", &["funclatency", "no-such.txt"]),
    ("measure latency", "--repeats", &[]),
    (
        "measure pcp",
        "--seconds",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    (
        "measure pcp",
        "--repeats",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    (
        "measure pcp",
        "--fractions",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    (
        "measure pcp",
        "--cpus",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    (
        "measure pcp",
        "--tasks",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    (
        "measure pcp",
        "--skb-defer-max",
        &["--workload", "netperf-udp", "--dry-run"],
    ),
    ("measure reuse", "--cpus", &[]),
    ("measure reuse", "--distances", &[]),
    ("measure reuse", "--seconds", &[]),
    ("measure reuse", "--repeats", &[]),
    ("measure reuse", "--offset", &[]),
    ("measure work", "--cpu", &["--workload", "netperf-udp"]),
    ("measure work", "--seconds", &["--workload", "netperf-udp"]),
    ("measure work", "--repeats", &["--workload", "netperf-udp"]),
    ("measure backing", "--mib", &[]),
    ("measure backing", "--again", &[]),
    ("record", "--seconds", &[]),
    ("record", "--cpus", &[]),
    ("record", "--buffer-kb", &[]),
    ("replay", "--high", &["x.flow"]),
    ("replay", "--fraction", &["x.flow"]),
    ("replay", "--batch", &["x.flow"]),
    ("replay", "--scale-max", &["x.flow"]),
    ("compare", "--batch", &["no-such.csv"]),
    ("compare", "--free-high-threshold", &["no-such.csv"]),
    ("compare", "--order", &["no-such.csv"]),
    ("compare", "--tasks", &["no-such.csv"]),
    ("compare", "--scale-max", &["no-such.csv"]),
    ("compare", "--skb-defer-max", &["no-such.csv"]),
    ("compare", "--run-seconds", &["no-such.csv"]),
    (
        "compare",
        "--run-start-pages",
        &["no-such.csv", "--run-seconds", "1"],
    ),
];

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_numeric_flag_refuses_minus_one_naming_the_flag_and_its_range() {
    let mut bad = Vec::new();
    for (path, flag, rest) in FLAGS {
        let mut args: Vec<&str> = path.split_whitespace().collect();
        args.extend_from_slice(rest);
        args.extend_from_slice(&[flag, "-1"]);
        let (code, err) = run(&args);
        if code != Some(2)
            || !err.contains(&format!("{flag} -1"))
            || !err.contains("..=")
            || err.contains("panicked")
            || err.contains("unexpected argument")
        {
            bad.push(format!("{args:?}: exit {code:?}: {err}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The reproducer's two commands as written: `--high -1` and a negative fraction.
#[test]
fn t3_cli_negative_unlocated_reproducer() {
    let (code, err) = run(&["predict", "--workload", "netperf-udp", "--high", "-1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--high -1") && err.contains("0..=2147483647 pages"),
        "{err}"
    );
    let (code, err) = run(&["measure", "latency", "--quick", "--repeats", "-0.5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--repeats -0.5") && err.contains("1..=1000"),
        "{err}"
    );
}

/// `--flag=-1` and a non-number are refused the same way; a non-numeric flag given a negative
/// number is refused by that flag's own check, not by clap's "unexpected argument".
#[test]
fn other_spellings_of_a_bad_number_name_the_flag() {
    // An older spelling (`--batch`, now --charge-batch) is still read; the message names the
    // flag's one spelling.
    let (code, err) = run(&["memcg", "--batch=-5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--charge-batch -5") && err.contains("1..=65536"),
        "{err}"
    );
    let (code, err) = run(&["predict", "--tasks", "many"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--tasks many: not a number") && err.contains("1..=8192"),
        "{err}"
    );
    let (code, err) = run(&["predict", "--nodes", "-1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--nodes") && !err.contains("unexpected argument"),
        "{err}"
    );
}
