//! Importers: the seed threads' own text must parse to exactly the numbers transcribed in
//! data/, from the full seed files (copies in tests/fixtures/seeds) and from verbatim excerpts in
//! tests/fixtures/import/; hand-made samples cover the other formats and malformed input.

use std::path::{Path, PathBuf};

use approx::assert_relative_eq;
use assert_cmd::Command;
use pcpmodel::data::{self, Bucket};
use pcpmodel::import::{self, HistogramFormat, ImportedHistogram, LockTarget, TimeUnit};

fn fixture(name: &str) -> (String, String) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name);
    let text = std::fs::read_to_string(&p).expect("fixture present");
    (text, p.display().to_string())
}

/// The five seed threads, copied into tests/fixtures/seeds (their README says what each is).
fn seeds_dir() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Some(root.join("tests/fixtures/seeds")).filter(|p| p.is_dir())
}

fn seed(prefix: &str) -> Option<(String, String)> {
    let dir = seeds_dir().expect("tests/fixtures/seeds ships with the repository");
    let entry = std::fs::read_dir(&dir)
        .expect("readable seeds dir")
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with(prefix))?;
    let bytes = std::fs::read(entry.path()).expect("readable seed");
    Some((
        String::from_utf8_lossy(&bytes).into_owned(),
        entry.path().display().to_string(),
    ))
}

/// Every bucket, avg, total and count equal to data/000_*.
fn assert_matches_000(got: &[ImportedHistogram]) {
    let want = data::histograms_000().expect("data/000 loads");
    assert_eq!(got.len(), 5, "exactly five histograms");
    assert_eq!(want.len(), 5);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.format, HistogramFormat::Funclatency);
        assert_eq!(g.unit, TimeUnit::Ns);
        assert_eq!(
            g.histogram.buckets(),
            w.histogram.buckets(),
            "buckets of {}",
            w.case
        );
        assert_eq!(g.printed_avg_ns, Some(w.avg_ns), "avg of {}", w.case);
        assert_eq!(g.printed_total_ns, Some(w.total_ns), "total of {}", w.case);
        assert_eq!(g.printed_count, Some(w.count), "count of {}", w.case);
    }
}

#[test]
fn seed_000_gives_the_five_histograms_of_data() {
    let (text, label) = seed("000_").expect("the seed ships in tests/fixtures/seeds");
    let got = import::funclatency(&text, &label).expect("seed 000 parses");
    assert_matches_000(&got);
}

#[test]
fn excerpt_000_gives_the_five_histograms_of_data() {
    let (text, label) = fixture("000_excerpt.txt");
    let got = import::funclatency(&text, &label).expect("excerpt parses");
    assert_matches_000(&got);
    // The archive flattened the mail onto one line: every histogram reports line 1.
    assert!(got.iter().all(|h| h.line == 1));
}

/// Rows equal to data/003 and grouped in the four printed tables.
fn assert_matches_003(rows: &[import::LockContentionRow]) {
    let want = data::perf_lock_003().expect("data/003 loads");
    assert_eq!(rows.len(), want.len());
    let tables: Vec<usize> = rows.iter().map(|r| r.table).collect();
    assert_eq!(tables, [1, 2, 3, 3, 3, 4, 4]);
    for (g, w) in rows.iter().zip(&want) {
        assert_eq!(g.contended, w.contended);
        // Exact decimal conversion: equal to the transcribed ns.
        assert_relative_eq!(g.total_wait.ns, w.total_wait_ns, max_relative = 1e-12);
        assert_relative_eq!(g.max_wait.ns, w.max_wait_ns, max_relative = 1e-12);
        assert_relative_eq!(g.avg_wait.ns, w.avg_wait_ns, max_relative = 1e-12);
        assert_eq!(g.total_wait.text, w.total_wait_text);
        assert_eq!(g.max_wait.text, w.max_wait_text);
        assert_eq!(g.avg_wait.text, w.avg_wait_text);
        assert!(g.min_wait.is_none());
        assert_eq!(
            g.target,
            LockTarget::Caller {
                lock_type: w.lock_type.clone(),
                caller: w.caller.clone()
            }
        );
    }
    // Table k of the text is (workload, patched) group k of data/, in the same order.
    let mut groups: Vec<(String, bool)> = Vec::new();
    for w in &want {
        let key = (w.workload.clone(), w.patched);
        if groups.last() != Some(&key) {
            groups.push(key);
        }
    }
    for (g, w) in rows.iter().zip(&want) {
        assert_eq!(groups[g.table - 1], (w.workload.clone(), w.patched));
    }
}

#[test]
fn seed_003_gives_the_perf_lock_rows_of_data() {
    let (text, label) = seed("003_").expect("the seed ships in tests/fixtures/seeds");
    assert_matches_003(&import::perf_lock(&text, &label).expect("seed 003 parses"));
}

#[test]
fn excerpt_003_gives_the_perf_lock_rows_of_data() {
    let (text, label) = fixture("003_excerpt.txt");
    assert_matches_003(&import::perf_lock(&text, &label).expect("excerpt parses"));
}

#[test]
fn multiline_quoted_printable_reply() {
    let (text, label) = fixture("funclatency_multiline_qp.txt");
    let got = import::funclatency(&text, &label).expect("parses");
    assert_eq!(got.len(), 1);
    let want = data::histograms_000().expect("data");
    let xeon = &want[2];
    assert_eq!(xeon.case, "xeon-8260_2node_scale5");
    assert_eq!(got[0].histogram.buckets(), xeon.histogram.buckets());
    assert_eq!(got[0].line, 9, "header line counted through soft breaks");
    // `count: 1110=` + newline + `263` is one number.
    assert_eq!(got[0].printed_count, Some(1_110_263));
    assert_eq!(got[0].printed_avg_ns, Some(96_173));
}

#[test]
fn funclatency_usecs_without_avg_line() {
    let (text, label) = fixture("funclatency_usecs.txt");
    let got = import::funclatency(&text, &label).expect("parses");
    assert_eq!(got.len(), 1);
    let h = &got[0];
    assert_eq!(h.unit, TimeUnit::Us);
    assert_eq!(h.line, 4);
    assert_eq!(h.printed_count, None);
    let b = h.histogram.buckets();
    // usecs `2 -> 3` covers 2000..=3999 ns.
    assert_eq!(
        b[1],
        Bucket {
            lo_ns: 2000,
            hi_ns: 3999,
            count: 1000
        }
    );
    assert_eq!(b[0].lo_ns, 0);
    assert_eq!(b[4].hi_ns, 31_999);
    assert_eq!(h.histogram.total_count(), 1422);
    assert!(h.histogram.is_contiguous());
}

#[test]
fn funclatency_errors_name_the_line() {
    let (text, label) = fixture("funclatency_malformed.txt");
    let e = import::funclatency(&text, &label)
        .expect_err("bad count")
        .to_string();
    assert!(e.contains("funclatency_malformed.txt:3: count:"), "{e}");
    assert!(e.contains("12x"), "{e}");

    let (text, label) = fixture("funclatency_gap.txt");
    let e = import::funclatency(&text, &label)
        .expect_err("gap")
        .to_string();
    assert!(e.contains("funclatency_gap.txt:3:"), "{e}");
    assert!(e.contains("ended at 1023"), "{e}");

    let e = import::funclatency("no histogram here\n", "x.txt").expect_err("none");
    assert!(e.to_string().contains("no funclatency histogram"), "{e}");

    let e = import::funclatency("  nsecs : count distribution\n\nbye\n", "h.txt")
        .expect_err("header only");
    assert!(e.to_string().starts_with("h.txt:1: header:"), "{e}");

    let e = import::funclatency(
        "nsecs : count distribution\n0 -> 1 : 3\navg = 1 nsecs, total: x nsecs, count: 3\n",
        "a.txt",
    )
    .expect_err("bad avg line");
    assert!(e.to_string().starts_with("a.txt:3: total:"), "{e}");
}

#[test]
fn funclatency_literal_equals_outside_quoted_printable() {
    let text = "nsecs : count distribution\n0 -> 1 : 1\n2 -> 3 : 1\navg = 2 nsecs, total: 4 nsecs, count: 2\n";
    let got = import::funclatency(text, "t").expect("parses");
    assert_eq!(got[0].printed_avg_ns, Some(2));
    assert_eq!(got[0].printed_count, Some(2));
}

#[test]
fn bpftrace_hist_maps_in_order() {
    let (text, label) = fixture("bpftrace_hist.txt");
    let got = import::bpftrace(&text, &label, TimeUnit::Ns).expect("parses");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].label, "@ns[rmqueue_bulk]");
    assert_eq!(got[0].line, 4);
    assert_eq!(got[0].format, HistogramFormat::BpftraceHist);
    let b = got[0].histogram.buckets();
    assert_eq!(
        b[1],
        Bucket {
            lo_ns: 512,
            hi_ns: 1023,
            count: 262
        }
    );
    assert_eq!(b[5].lo_ns, 8192);
    assert_eq!(b[5].hi_ns, 16383);
    assert_eq!(got[0].histogram.total_count(), 3 + 262 + 3110 + 901 + 17);
    assert_eq!(got[1].label, "@ns[free_pcppages_bulk]");
    let b = got[1].histogram.buckets();
    assert_eq!((b[0].lo_ns, b[0].hi_ns), (0, 0));
    assert_eq!((b[1].lo_ns, b[1].hi_ns), (1, 1));
    assert_eq!((b[2].lo_ns, b[2].hi_ns), (2, 3));
    assert!(got[1].histogram.is_log2());

    let us = import::bpftrace(&text, &label, TimeUnit::Us).expect("parses");
    assert_eq!(us[0].histogram.buckets()[1].lo_ns, 512_000);
    assert_eq!(us[0].histogram.buckets()[1].hi_ns, 1_023_999);
}

#[test]
fn bpftrace_lhist_and_open_buckets() {
    let (text, label) = fixture("bpftrace_lhist.txt");
    let got = import::bpftrace(&text, &label, TimeUnit::Us).expect("parses");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].format, HistogramFormat::BpftraceLhist);
    let b = got[0].histogram.buckets();
    assert_eq!(b.len(), 3, "empty open-ended rows dropped");
    assert_eq!(
        b[1],
        Bucket {
            lo_ns: 10_000,
            hi_ns: 19_999,
            count: 10
        }
    );

    let (text, label) = fixture("bpftrace_lhist_overflow.txt");
    let e = import::bpftrace(&text, &label, TimeUnit::Us)
        .expect_err("samples above the range")
        .to_string();
    assert!(e.contains("bpftrace_lhist_overflow.txt:4: bucket:"), "{e}");

    let e = import::bpftrace("@x:\n[1, 2)  5 |@|\n[4, 3)  1 |@|\n", "b.txt", TimeUnit::Ns)
        .expect_err("inverted");
    assert!(e.to_string().starts_with("b.txt:3:"), "{e}");
    let e = import::bpftrace("@x:\n[1 2)  5 |@|\n", "b.txt", TimeUnit::Ns).expect_err("no comma");
    assert!(e.to_string().starts_with("b.txt:2:"), "{e}");
}

#[test]
fn perf_lock_address_mode_and_min_wait() {
    let (text, label) = fixture("perf_lock_addr.txt");
    let rows = import::perf_lock(&text, &label).expect("parses");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].line, 4);
    assert_eq!(
        rows[0].target,
        LockTarget::Address {
            address: "ffff9d4140030600".into(),
            symbol: "zone->lock".into(),
            lock_type: Some("spinlock".into())
        }
    );
    assert_relative_eq!(rows[0].total_wait.ns, 1_110_000.0);
    assert_eq!(
        rows[1].target,
        LockTarget::Address {
            address: "ffffffff93f5e2c0".into(),
            symbol: "rcu_state".into(),
            lock_type: None
        }
    );
    assert_relative_eq!(rows[1].total_wait.ns, 143_200.0);

    let (text, label) = fixture("perf_lock_minwait.txt");
    let rows = import::perf_lock(&text, &label).expect("parses");
    assert_eq!(rows.len(), 2);
    assert_relative_eq!(rows[0].total_wait.ns, 5.52e9);
    assert_relative_eq!(rows[0].min_wait.as_ref().expect("min").ns, 1020.0);
    assert_relative_eq!(rows[0].avg_wait.ns, 4_370_000.0);
    assert_relative_eq!(rows[1].total_wait.ns, 870.0);
    assert_eq!(rows[1].total_wait.text, "870 ns");
    assert!(rows.iter().all(|r| r.table == 1));
}

#[test]
fn perf_lock_headerless_task_rows() {
    let text = "      12      1.00 ms    200.00 us     83.33 us        4242   kworker/0:1\n";
    let rows = import::perf_lock(text, "t").expect("parses");
    assert_eq!(
        rows[0].target,
        LockTarget::Task {
            pid: 4242,
            comm: "kworker/0:1".into()
        }
    );
}

#[test]
fn perf_lock_errors_name_the_line() {
    let (text, label) = fixture("perf_lock_malformed.txt");
    let e = import::perf_lock(&text, &label)
        .expect_err("bad time")
        .to_string();
    assert!(e.contains("perf_lock_malformed.txt:4: max wait:"), "{e}");
    assert!(e.contains("sixty"), "{e}");
    let e = import::perf_lock("nothing to see\n", "p.txt").expect_err("none");
    assert!(
        e.to_string().contains("no perf lock contention rows"),
        "{e}"
    );
}

// ----------------------------------------------------------------------------------- CLI

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").expect("binary built")
}

#[test]
fn cli_import_one_histogram_prints_the_fitter_schema() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/000_excerpt.txt");
    let out = pcpmodel()
        .args(["import", "funclatency"])
        .arg(&p)
        .args(["--index", "3", "--format", "csv"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let want = data::table("000_funclatency_xeon-8260_2node_scale5").expect("table");
    assert_eq!(String::from_utf8_lossy(&out.stdout), want.csv_text);
}

#[test]
fn cli_import_several_histograms_adds_an_index_column() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/000_excerpt.txt");
    let out = pcpmodel()
        .args(["import", "funclatency"])
        .arg(&p)
        .args(["--format", "csv"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.starts_with("histogram,lo_ns,hi_ns,count\n1,0,1,0\n"),
        "{s}"
    );
    assert_eq!(s.lines().count(), 1 + 26 + 23 + 22 + 23 + 22);

    let out = pcpmodel()
        .args(["import", "funclatency"])
        .arg(&p)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(5));
    assert_eq!(v[0]["printed_count"], 1_305_242);
    assert_eq!(v[0]["bucket_count_sum"], 1_305_239);
}

#[test]
fn cli_import_reads_stdin_and_bpftrace_units() {
    let (text, _) = fixture("bpftrace_hist.txt");
    let out = pcpmodel()
        .args([
            "import", "bpftrace", "-", "--unit", "us", "--index", "2", "--format", "csv",
        ])
        .write_stdin(text)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "lo_ns,hi_ns,count\n0,999,1\n1000,1999,0\n2000,3999,1\n"
    );
}

#[test]
fn cli_import_perf_lock_csv() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/003_excerpt.txt");
    let out = pcpmodel()
        .args(["import", "perf-lock"])
        .arg(&p)
        .args(["--format", "csv"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    let mut lines = s.lines();
    assert_eq!(
        lines.next(),
        Some("table,line,contended,total_wait_ns,max_wait_ns,min_wait_ns,avg_wait_ns,kind,lock_type,key,name")
    );
    assert_eq!(
        lines.next(),
        Some("1,1,713,4640000,74370,,6510,caller,spinlock,,__alloc_pages+0x23c")
    );
    assert_eq!(s.lines().count(), 8);
}

#[test]
fn cli_import_errors_exit_2_with_the_line() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import/funclatency_malformed.txt");
    pcpmodel()
        .args(["import", "funclatency"])
        .arg(&p)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "funclatency_malformed.txt:3: count:",
        ));
    pcpmodel()
        .args(["import", "funclatency", "/nonexistent/file.txt"])
        .assert()
        .code(2)
        .stderr(predicates::str::starts_with(
            "Error: reading /nonexistent/file.txt",
        ));
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/000_excerpt.txt");
    pcpmodel()
        .args(["import", "funclatency"])
        .arg(&p)
        .args(["--index", "6"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("numbered 1 to 5"));
}

// ----------------------------------------------------------------------------------- fuzz

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// The parsers return errors, never panic, on arbitrary text made of the characters their
    /// formats use.
    #[test]
    fn parsers_never_panic(text in "[0-9a-fKMGnsecudmx@\\[\\](),.:|*> =3DE\\n\t-]{0,200}") {
        let _ = import::funclatency(&text, "fuzz");
        let _ = import::bpftrace(&text, "fuzz", TimeUnit::Ns);
        let _ = import::perf_lock(&text, "fuzz");
    }

    /// Well-formed funclatency rows with any counts round-trip exactly.
    #[test]
    fn funclatency_round_trip(counts in proptest::collection::vec(0u64..1_000_000_000, 1..30)) {
        let mut text = String::from("     nsecs               : count     distribution\n");
        for (k, c) in counts.iter().enumerate() {
            let (lo, hi) = if k == 0 { (0u64, 1u64) } else { (1u64 << k, (1u64 << (k + 1)) - 1) };
            text.push_str(&format!("{lo:>20} -> {hi:<20} : {c:<8} |{:40}|\n", ""));
        }
        let got = import::funclatency(&text, "rt").expect("parses");
        let back: Vec<u64> = got[0].histogram.buckets().iter().map(|b| b.count).collect();
        proptest::prop_assert_eq!(back, counts);
        proptest::prop_assert!(got[0].histogram.is_log2() && got[0].histogram.is_contiguous());
    }
}
