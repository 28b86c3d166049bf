//! The README's example inputs (examples/inputs/, issue 35) are what their README says they
//! are, and outputs the README shows never print a non-number to a user.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").expect("binary built")
}

/// halbuer-order0.csv is derived, not measured anew: each of its rows must be an order-0 row
/// of the literature table it names, `cores` as `tasks` and `default_ns` as `ns_per_op`, and
/// every order-0 row must be there. Exact equality: the numbers are copied, not computed.
#[test]
fn halbuer_example_is_the_order0_rows_of_the_literature_table() {
    let src = "data/literature/halbuer_2023-02_rmqueue_bulk_zone_lock_alloc_latency_vs_cores.csv";
    let example = std::fs::read_to_string(repo("examples/inputs/halbuer-order0.csv")).unwrap();
    let mut lines = example.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("# example derived from ") && first.contains(src),
        "{first}"
    );
    assert_eq!(lines.next(), Some("tasks,ns_per_op"));
    let got: Vec<(String, String)> = lines
        .map(|l| {
            let (a, b) = l.split_once(',').expect("two columns");
            (a.to_string(), b.to_string())
        })
        .collect();

    let mut rdr = csv::Reader::from_path(repo(src)).unwrap();
    let h = rdr.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).expect(name);
    let (size, cores, default_ns) = (
        col("page_size_corrected_per_author"),
        col("cores"),
        col("default_ns"),
    );
    let want: Vec<(String, String)> = rdr
        .records()
        .map(|r| r.unwrap())
        .filter(|r| r[size].starts_with("order-0"))
        .map(|r| (r[cores].to_string(), r[default_ns].to_string()))
        .collect();
    assert_eq!(want.len(), 12, "Halbuer's order-0 table has 12 core counts");
    assert_eq!(got, want);
}

/// The paste is thread 000's text: its first histogram imports to the buckets of
/// data/000_funclatency_epyc-7w83_1node_scale5.csv (the README fits it next).
#[test]
fn funclatency_paste_imports_to_the_epyc_histogram_of_data() {
    let out = pcpmodel()
        .current_dir(repo(""))
        .args([
            "import",
            "funclatency",
            "examples/inputs/funclatency-paste.txt",
        ])
        .args(["--index", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<(u64, u64, u64)> = csv::Reader::from_reader(&out.stdout[..])
        .records()
        .map(|r| {
            let r = r.unwrap();
            (
                r[0].parse().unwrap(),
                r[1].parse().unwrap(),
                r[2].parse().unwrap(),
            )
        })
        .collect();
    let want = pcpmodel::data::histograms_000().unwrap();
    let epyc = want
        .iter()
        .find(|h| h.case.contains("epyc") && h.case.contains("scale5"))
        .expect("the EPYC scale-5 histogram");
    let want: Vec<(u64, u64, u64)> = epyc
        .histogram
        .buckets()
        .iter()
        .map(|b| (b.lo_ns, b.hi_ns, b.count))
        .collect();
    assert_eq!(got, want);
}

/// Issue 35: `predict --workload page-bench` printed "inf events" on a kernel whose NUMA
/// counters never fold. The spacing is infinite there; the table must say so in words.
#[test]
fn page_bench_prediction_prints_no_inf() {
    let out = pcpmodel()
        .args(["predict", "--workload", "page-bench"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !text
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "inf" || w == "NaN"),
        "{text}"
    );
    assert!(text.contains("never fold"), "{text}");
}
