//! `pcpmodel replay`: a flow file through the kernel's PCP rules. The flows are written here
//! with the library's writer (no root, no tracefs), small enough that the kernel's rules can be
//! followed by hand.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

use crate::common;
use pcpmodel::measure::record::flow::{
    FlowLine, FlowMeta, FlowWriter, Op, PagesetValues, Pagesets, ZonePagesets,
};
use serde_json::Value;

fn meta(kernel: &str, fraction: i64) -> FlowMeta {
    FlowMeta {
        kernel: kernel.into(),
        date_utc: "2026-12-06".into(),
        command: vec![],
        cpus: vec![],
        sysctl: [("vm.percpu_pagelist_high_fraction".to_string(), fraction)]
            .into_iter()
            .collect(),
        events: vec!["mm_page_alloc".into()],
        buffer_size_kb: 1024,
        data_slice_bytes: BTreeMap::new(),
        settled: None,
        drained: None,
    }
}

/// Two zones of two CPUs each: DMA32 (zone 0) and Normal (zone 1), 6.6-style fixed high.
fn pagesets(high: i64, batch: i64, count: i64) -> Pagesets {
    let cpus = |h: i64| -> BTreeMap<String, PagesetValues> {
        (0..2)
            .map(|c| {
                (
                    c.to_string(),
                    PagesetValues {
                        count,
                        high: h,
                        batch,
                        high_min: None,
                        high_max: None,
                    },
                )
            })
            .collect()
    };
    let zone = |start: u64, managed: u64| ZonePagesets {
        managed,
        start_pfn: Some(start),
        spanned: Some(managed),
        low_wmark: Some(managed / 256),
        cpus: cpus(high),
    };
    [
        ("0/DMA32".to_string(), zone(0x1000, 700_000)),
        ("0/Normal".to_string(), zone(0x10_0000, 1_100_000)),
    ]
    .into_iter()
    .collect()
}

fn run(cpu: u32, zone: u8, op: Op, order: u8, count: u64) -> FlowLine {
    FlowLine::Run {
        cpu,
        zone: Some(zone),
        pid: 9,
        op,
        order,
        count,
        repeat: 1,
        mt: None,
    }
}

/// Writes `lines` as a flow of kernel `kernel` to `path` and returns it.
fn write_flow(path: &Path, m: &FlowMeta, sets: &Pagesets, lines: &[FlowLine]) -> PathBuf {
    let f = std::fs::File::create(path).unwrap();
    let mut w = FlowWriter::new(std::io::BufWriter::new(f), "t", m, sets).unwrap();
    for l in lines {
        w.push(*l).unwrap();
    }
    let (_, mut out) = w.finish(sets, 1.0).unwrap();
    out.flush().unwrap();
    path.to_path_buf()
}

fn replay_json(flow: &Path, extra: &[&str]) -> Value {
    let flow = flow.to_str().unwrap();
    let args: Vec<&str> = ["replay", flow]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    common::json(&args)
}

fn quantity(v: &Value, name: &str) -> (Option<f64>, f64) {
    let q = v["quantities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == name)
        .unwrap_or_else(|| panic!("no quantity {name}"));
    (q["recorded"].as_f64(), q["replayed"].as_f64().unwrap())
}

/// A sender on CPU 0 allocating 1000 order-0 pages in zone 1 (recorded: 125 refills of 8), a
/// receiver on CPU 1 freeing them (recorded: the drains a kernel with high 20, batch 8 made).
fn sender_receiver(dir: &Path) -> PathBuf {
    let mut lines = Vec::new();
    for _ in 0..125 {
        lines.push(FlowLine::Refill {
            cpu: 0,
            zone: Some(1),
            pages: 8,
            mt: None,
        });
        lines.push(run(0, 1, Op::Alloc, 0, 8));
    }
    lines.push(run(1, 1, Op::Free, 0, 1000));
    write_flow(
        &dir.join("pair.flow"),
        &meta("6.6.0", 0),
        &pagesets(20, 8, 0),
        &lines,
    )
}

#[test]
fn json_lists_every_quantity_with_recorded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let v = replay_json(&sender_receiver(dir.path()), &[]);
    let qs = v["quantities"].as_array().unwrap();
    for q in qs {
        for k in ["name", "unit", "recorded", "replayed"] {
            assert!(q.get(k).is_some(), "{q} has no {k}");
        }
    }
    // Refills of order-0 pages move `batch` pages each on 6.6 (nr_pcp_alloc() is the fixed
    // batch before 6.7): 1000 allocations from an empty list are 125 refills of 8, what the
    // recorded lines say.
    assert_eq!(quantity(&v, "refills"), (Some(125.0), 125.0));
    assert_eq!(quantity(&v, "pages per refill").1, 8.0);
    // Every page freed is either drained or still held: pages are conserved.
    let drained = v["pagesets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["replayed"]["free_pages"].as_f64().unwrap())
        .sum::<f64>();
    assert_eq!(drained, 1000.0);
    assert!(quantity(&v, "drains").1 > 0.0);
}

#[test]
fn a_larger_batch_halves_the_refills_and_events_stay_in_their_zone() {
    let dir = tempfile::tempdir().unwrap();
    let flow = sender_receiver(dir.path());
    // batch 16: the same 1000 pages in ceil(1000 / 16) = 63 refills.
    let v = replay_json(&flow, &["--batch", "16"]);
    assert_eq!(quantity(&v, "refills").1, 63.0);
    // Only zone 1 (Normal) saw events: the pagesets listed are Normal's.
    for p in v["pagesets"].as_array().unwrap() {
        assert_eq!(p["zone"], "0/Normal");
    }
}

#[test]
fn a_fraction_recomputes_high_from_the_zone_and_a_high_sets_it() {
    let dir = tempfile::tempdir().unwrap();
    let flow = sender_receiver(dir.path());
    // Fraction 100 on 1,100,000 managed pages over 2 CPUs: high 5500 (zone_highsize()).
    let v = replay_json(&flow, &["--fraction", "100"]);
    let limits = v["pagesets"][0]["limits"].as_str().unwrap().to_string();
    assert!(limits.contains("high 5500"), "{limits}");
    // A receiver that never reaches high 5500 never drains.
    assert_eq!(quantity(&v, "drains").1, 0.0);
    let v = replay_json(&flow, &["--high", "5000"]);
    assert!(v["setting"].as_str().unwrap().contains("pcp->high 5000"));
    assert_eq!(quantity(&v, "drains").1, 0.0);
}

#[test]
fn a_gzipped_flow_replays_as_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let flow = sender_receiver(dir.path());
    let gz = dir.path().join("pair.flow.gz");
    let mut e = flate2_write(&gz);
    e.write_all(&std::fs::read(&flow).unwrap()).unwrap();
    e.finish().unwrap();
    let (a, b) = (replay_json(&flow, &[]), replay_json(&gz, &[]));
    assert_eq!(a["quantities"], b["quantities"]);
}

fn flate2_write(p: &Path) -> flate2::write::GzEncoder<std::fs::File> {
    flate2::write::GzEncoder::new(
        std::fs::File::create(p).unwrap(),
        flate2::Compression::fast(),
    )
}

#[test]
fn bad_flows_are_errors_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let flow = sender_receiver(dir.path());
    let text = std::fs::read_to_string(&flow).unwrap();
    let fail = |name: &str, body: &str, want: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let out = Command::cargo_bin("pcpmodel")
            .unwrap()
            .arg("replay")
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        for w in want {
            assert!(err.contains(w), "{name}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    let cut: String = text.lines().take(40).map(|l| format!("{l}\n")).collect();
    fail("cut.flow", &cut, &["cut.flow:41", "truncated"]);
    fail(
        "edited.flow",
        &text.replace("f 1 1 9 0 1000", "f 1 1 9 0 999"),
        &["end.cpus.1"],
    );
    fail(
        "zone.flow",
        &text.replace("f 1 1 9 0 1000", "f 1 7 9 0 1000"),
        &["zone", "2 zones"],
    );
    fail(
        "v1.flow",
        &text.replace(pcpmodel::measure::record::flow::MAGIC, "# pcpmodel flow 1"),
        &["v1.flow:1", "record the flow again"],
    );
    fail(
        "kernel.flow",
        &text.replace("\"6.6.0\"", "\"banana\""),
        &["kernel.flow:2", "meta.kernel"],
    );
    // A kernel older than any whose PCP formulas are modelled.
    fail(
        "old.flow",
        &text.replace("\"6.6.0\"", "\"3.10.0\""),
        &["old.flow:2", "meta.kernel", "oldest"],
    );
}

#[test]
fn an_auto_tuned_flow_without_bounds_is_refused() {
    // A 6.18 flow whose pagesets lack high_min/high_max (a pre-6.13 zoneinfo format edited in).
    let dir = tempfile::tempdir().unwrap();
    let flow = write_flow(
        &dir.path().join("618.flow"),
        &meta("6.18.0", 0),
        &pagesets(20, 8, 0),
        &[run(0, 1, Op::Alloc, 0, 8)],
    );
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .arg("replay")
        .arg(&flow)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("high_min"), "{err}");
}

const SWEEP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/host/flows/sweep-typed-2026-12-06"
);

#[test]
fn host_pair_flows_replay_the_kernels_refills_and_drains_at_their_setting() {
    // The same stream of allocations and frees through the kernel's rules: what differs is what
    // the engine cannot see (the lists' contents at the start, inferred from the recording, and
    // the order of two CPUs' events within a trace tick). 10 % is the bound.
    for w in ["netperf-udp", "af-unix"] {
        for f in [0, 8, 100, 1000, 4000] {
            let flow = PathBuf::from(format!("{SWEEP}/{w}-f{f}.flow.gz"));
            let v = replay_json(&flow, &[]);
            for q in ["refills", "drains"] {
                let (rec, rep) = quantity(&v, q);
                let rec = rec.unwrap();
                assert!(rec >= 100.0, "{w} f{f}: {q} {rec}");
                let err = (rep - rec).abs() / rec;
                assert!(err <= 0.10, "{w} f{f}: {q} recorded {rec}, replayed {rep}");
            }
        }
    }
}

#[test]
fn the_defaults_pair_flows_replayed_blind_meet_the_kernel_at_every_other_setting() {
    // The flow recorded at the kernel's default, replayed at each other recorded setting with
    // the lists as that recording found them before its workload ran (machine state, read from
    // its start /proc/zoneinfo), against the rates the kernel made there. Same bound as above:
    // the stream is the default's, so what the other run's own stream did differently (its
    // receiver's timing at another setting) is part of the error.
    for w in ["netperf-udp", "af-unix"] {
        let base = format!("{SWEEP}/{w}-f0.flow.gz");
        for f in [8, 100, 1000, 4000] {
            let other = format!("{SWEEP}/{w}-f{f}.flow.gz");
            let v = replay_json(
                Path::new(&base),
                &["--against", &other, "--start-from-against"],
            );
            for q in [
                "refills per 1000 allocations",
                "drains per 1000 allocations",
            ] {
                let (rec, rep) = quantity(&v, q);
                let rec = rec.unwrap();
                let err = (rep - rec).abs() / rec;
                assert!(err <= 0.10, "{w} f{f}: {q} recorded {rec}, replayed {rep}");
            }
        }
    }
}

#[test]
fn from_flow_measures_the_pair_and_refuses_a_process_flow() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("udp.toml");
    let flow = format!("{SWEEP}/netperf-udp-f0.flow.gz");
    Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["workload", "from-flow", &flow, "-o"])
        .arg(&out)
        .assert()
        .success();
    // The share of order-3 blocks freed on the receiver's CPU, counted here from the flow's
    // lines.
    let mut r = pcpmodel::measure::record::flow::open_flow(Path::new(&flow)).unwrap();
    let mut freed: BTreeMap<u32, u64> = BTreeMap::new();
    while let Some(l) = r.next_line().unwrap() {
        if let FlowLine::Run {
            cpu,
            op: Op::Free,
            order: 3,
            count,
            repeat,
            ..
        } = l
        {
            *freed.entry(cpu).or_default() += count * repeat;
        }
    }
    let share = freed[&1] as f64 / (freed[&0] + freed[&1]) as f64;
    let text = std::fs::read_to_string(&out).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    // 6.18 with skb_defer_max 64 hands UDP skbs back to the sender: the receiver's share is
    // the deferred one.
    let got = doc["params"]["receiver_free_share_deferred"]["value"]
        .as_float()
        .unwrap();
    assert!((got - share).abs() < 1e-12, "{got} vs {share}");
    assert_eq!(doc["like"].as_str(), Some("netperf-udp"));
    assert!(doc["params"]["receiver_free_share_deferred"]["source"]
        .as_str()
        .unwrap()
        .starts_with("measured: "));
    // It is a workload: show reads it back.
    Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["workload", "show"])
        .arg(&out)
        .assert()
        .success();
    // Predicted under the recorded skb_defer_max the measured share applies; under another
    // the free site changes, and the prediction says the flow's share was not used.
    let note = "was measured for the other free site";
    let predict = |extra: &[&str]| {
        let o = Command::cargo_bin("pcpmodel")
            .unwrap()
            .args(["predict", "--kernel", "6.18", "--workload"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(!predict(&[]).contains(note));
    let other = predict(&["--skb-defer-max", "0"]);
    assert!(
        other.contains(note) && other.contains("skb_defer_max above 0"),
        "{other}"
    );
    let o = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            "workload",
            "from-flow",
            &format!("{SWEEP}/page-fault-f0.flow.gz"),
        ])
        .args(["--like", "netperf-udp"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("process flow"));
}

#[test]
fn optimal_high_answers_for_a_recorded_flow() {
    let o = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args([
            "optimal-high",
            "--flow",
            &format!("{SWEEP}/af-unix-f0.flow.gz"),
        ])
        .args(["--samples", "20", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["optimal_high_pages"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn a_machine_adds_the_modelled_zone_lock_side() {
    let flow = PathBuf::from(format!("{SWEEP}/netperf-udp-f0.flow.gz"));
    let big = replay_json(&flow, &["--machine", "icelake-server"]);
    let small = replay_json(
        &flow,
        &["--machine", "icelake-server", "--fraction", "1000"],
    );
    let hold = |v: &Value| quantity(v, "zone->lock hold per drain (modelled)").1;
    // A drain's hold is a call plus a cost per block: the default's drains return about 250
    // order-3 blocks, those at fraction 1000 (free_high with PCPF_FREE_HIGH_BATCH) about 8.
    let (b, s) = (hold(&big), hold(&small));
    assert!(b > 10.0 * s && s > 0.0, "{b} vs {s}");
    // Modelled rows have no recorded value: the tracepoints carry no times.
    assert_eq!(
        quantity(&big, "zone->lock wait per visit (modelled)").0,
        None
    );
}

#[test]
fn a_page_fault_loops_reuse_distances_spread_over_its_region() {
    // The loop maps 16 MiB (4096 pages), touches them and unmaps them. The list is LIFO: the
    // k-th page the next pass allocates is the one freed k-th from the end of the unmap, with k
    // pages allocated since. So the distances spread evenly over 0..4096 pages: 256/4096 =
    // 6.25 % within 256 pages, 25 % within 1024, nearly all within 4096. The rest are refills
    // and the other CPU's process; 2 points of slack.
    let v = replay_json(
        &PathBuf::from(format!("{SWEEP}/page-fault-f0.flow.gz")),
        &[],
    );
    let share = |n: &str| quantity(&v, n).1;
    let a = share("allocations reused within 1 MiB allocated (256 pages)");
    let b = share("allocations reused within 4 MiB allocated (1024 pages)");
    let c = share("allocations reused within 16 MiB allocated (4096 pages)");
    assert!((a - 6.25).abs() < 2.0, "{a}");
    assert!((b - 25.0).abs() < 2.0, "{b}");
    assert!(c > 95.0, "{c}");
}

#[test]
fn a_larger_llc_holds_more_of_a_page_fault_loops_reused_pages() {
    // The loop's pages come back within 16 MiB of data (the test above): an LLC slice that
    // holds 16 MiB finds most of them, one of a few MiB finds fewer, and writing a page costs
    // less where more of its lines are found.
    let flow = PathBuf::from(format!("{SWEEP}/page-fault-f0.flow.gz"));
    let on = |m: &str| replay_json(&flow, &["--machine", m]);
    let (small, big) = (on("skylake-desktop"), on("icelake-server"));
    let llc = |v: &Value| quantity(v, "allocated blocks found in the LLC (modelled)").1;
    let cost = |v: &Value| {
        quantity(
            v,
            "writing an allocated page, by where its lines are (modelled)",
        )
        .1
    };
    assert!(llc(&big) > llc(&small), "{} vs {}", llc(&big), llc(&small));
    assert!(
        cost(&big) < cost(&small),
        "{} vs {}",
        cost(&big),
        cost(&small)
    );
}

#[test]
fn lists_can_start_as_another_snapshot_shows_them() {
    // The same receiver stream at high 5000: from the recorded start (empty lists) its 1000
    // frees never reach high; from a snapshot where CPU 1 already holds 4990 pages (what
    // earlier work left), the 10th free reaches high and drains.
    let dir = tempfile::tempdir().unwrap();
    let flow = sender_receiver(dir.path());
    let v = replay_json(&flow, &["--high", "5000"]);
    assert_eq!(quantity(&v, "drains").1, 0.0);
    let full = write_flow(
        &dir.path().join("full.flow"),
        &meta("6.6.0", 0),
        &pagesets(20, 8, 4990),
        &[run(0, 1, Op::Alloc, 0, 1)],
    );
    let f = full.to_str().unwrap();
    let v = replay_json(
        &flow,
        &["--high", "5000", "--against", f, "--start-from-against"],
    );
    assert!(quantity(&v, "drains per 1000 allocations").1 > 0.0);
    let notes = v["notes"].to_string();
    assert!(notes.contains("full.flow's start"), "{notes}");
    // Without --start-from-against the same blind replay starts as recorded: no drains.
    let v = replay_json(&flow, &["--high", "5000", "--against", f]);
    assert_eq!(quantity(&v, "drains per 1000 allocations").1, 0.0);
    // The flag needs --against; a missing zoneinfo copy is an error naming it.
    let p = flow.to_str().unwrap();
    let (code, _, err) = common::run(&["replay", p, "--start-from-against"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--against"), "{err}");
    let (code, _, err) = common::run(&["replay", p, "--start-zoneinfo", "nope.txt"], dir.path());
    assert_ne!(code, 0);
    assert!(err.contains("nope.txt"), "{err}");
}

/// 50 loops of 16 allocations and 16 frees on CPU 0, zone 1.
fn loop_of_16() -> Vec<FlowLine> {
    loop_of(16)
}

/// 50 loops of `pages` allocations and `pages` frees on CPU 0, zone 1.
fn loop_of(pages: u64) -> Vec<FlowLine> {
    (0..50)
        .flat_map(|_| {
            [
                run(0, 1, Op::Alloc, 0, pages),
                run(0, 1, Op::Free, 0, pages),
            ]
        })
        .collect()
}

#[test]
fn a_setting_where_the_start_decides_shows_both_ends() {
    // A loop of 16 allocations and 16 frees on one CPU at high 20 (6.6, batch 8). From full
    // lists every loop's frees reach the high and drain, and the next loop refills; from
    // empty lists the list holds the whole loop and neither happens again. A replay at another
    // setting runs both starts and says so.
    let dir = tempfile::tempdir().unwrap();
    let lines = loop_of_16();
    let flow = write_flow(
        &dir.path().join("loop.flow"),
        &meta("6.6.0", 0),
        &pagesets(20, 8, 20),
        &lines,
    );
    let v = replay_json(&flow, &["--high", "20"]);
    let settled = quantity(&v, "refills per 1000 allocations").1;
    let (rec, empty) = quantity(&v, "refills per 1000 allocations, from empty lists");
    assert_eq!(rec, None);
    assert!(settled > 10.0 * empty.max(1.0), "{settled} vs {empty}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("The start matters"), "{notes}");
    // At the recorded setting the replay is the check against the kernel: one start only.
    let v = replay_json(&flow, &[]);
    assert!(!v["quantities"].to_string().contains("from empty lists"));
}

#[test]
fn a_recording_that_started_from_drained_lists_replays_from_them_alone() {
    // `record --drain-first` drains the lists before the start: a recording at another
    // setting made the same way starts from the same lists, so the replay there has one start,
    // the recorded one, and no second end to show.
    let dir = tempfile::tempdir().unwrap();
    let lines = loop_of_16();
    let mut m = meta("6.6.0", 0);
    m.drained = Some("the lists held 20 pages, and 0 after decay_pcp_high()".into());
    let flow = write_flow(
        &dir.path().join("loop.flow"),
        &m,
        &pagesets(20, 8, 0),
        &lines,
    );
    let v = replay_json(&flow, &["--high", "20"]);
    assert!(!v["quantities"].to_string().contains("from empty lists"));
    let notes = v["notes"].to_string();
    assert!(notes.contains("started from lists drained"), "{notes}");
    assert!(!notes.contains("The start matters"), "{notes}");
    // From empty lists the loop fits under the high: after the first refill, none again.
    let (_, refills) = quantity(&v, "refills");
    assert!(refills <= 2.0, "{refills}");
}

#[test]
fn other_runs_replay_at_the_same_setting_and_show_their_spread() {
    // Two runs of a loop, one of 16 pages per round and one of 40: at high 20 the first fits
    // a round under the high from empty lists and the second drains and refills every round,
    // so the runs' replays there differ, and the replay says by how much.
    let dir = tempfile::tempdir().unwrap();
    let a = write_flow(
        &dir.path().join("a.flow"),
        &meta("6.6.0", 0),
        &pagesets(20, 8, 0),
        &loop_of_16(),
    );
    let big = loop_of(40);
    let b = write_flow(
        &dir.path().join("b.flow"),
        &meta("6.6.0", 0),
        &pagesets(20, 8, 0),
        &big,
    );
    let v = replay_json(&a, &["--high", "20", "--run", b.to_str().unwrap()]);
    let runs = v["runs"].as_array().expect("a runs array");
    assert_eq!(runs.len(), 2, "the main flow and the other run");
    let rate = |i: usize| runs[i]["replayed"][0].as_f64().unwrap();
    assert!(
        rate(1) > 2.0 * rate(0).max(1.0),
        "{} vs {}",
        rate(0),
        rate(1)
    );
    let notes = v["notes"].to_string();
    assert!(notes.contains("2 runs of the workload"), "{notes}");
    // At a run's own setting the replay is the check against the kernel: no runs to compare.
    common::pcpmodel()
        .args(["replay", a.to_str().unwrap(), "--run", b.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--run replays other runs at another setting",
        ));
}
