//! The kernel's PCP rules as the model steps them (crate::kernel::ops::PcpState through
//! crate::model::autotune::PairFlow, by crate::measure::trace::compare_trace), held against
//! the real kernel's: the kmem tracepoints of this project's host (kernel 6.18) under an AF_UNIX
//! stream pair writing 64 KiB at a time (`tools/trace_pcp_flow.py --seconds 2 --json`,
//! data/host/trace-af-unix-64k-2026-12-02.json). The model gets the host's pageset limits and
//! the kernel's frag orders; nothing is fitted.

use pcpmodel::measure::trace::{compare_trace, TraceRow};

const TRACE: &str = include_str!("../data/host/trace-af-unix-64k-2026-12-02.json");

#[test]
fn the_af_unix_pair_refills_and_drains_as_the_host_kernel_did() {
    let c = compare_trace(TRACE, "trace-af-unix-64k-2026-12-02.json").unwrap();
    assert_eq!(c.write_orders, vec![3, 2, 1, 0]);
    let row = |q: &str| -> &TraceRow {
        c.rows
            .iter()
            .find(|r| r.quantity == q)
            .unwrap_or_else(|| panic!("{q}: {:?}", c.rows))
    };
    let err = |q: &str| row(q).error_pct.unwrap().abs();
    // One page of each order per write on each side: the kernel's frag split. The host's
    // counts add the writer's and reader's few other allocations (under 3 % of a write).
    for o in 0..=3 {
        assert!(err(&format!("order-{o} allocations on the writer's CPU")) < 3.0);
        assert!(err(&format!("order-{o} frees on the reader's CPU")) < 3.0);
    }
    // Refills of batch >> order blocks (56, 60, 62 pages for orders 3, 2, 1): 1/7, 1/15, 1/31
    // per write. 2 % covers the trace's cut through the refill cycles (a few thousand each).
    for p in [56, 60, 62] {
        assert!(err(&format!("writer's refills of {p} pages")) < 2.0, "{p}");
    }
    // Order 0 refills batch << CONFIG_PCP_BATCH_SCALE_MAX = 2016 pages once alloc_factor is at
    // its cap: one per 2016 writes, about 50 in the trace (Poisson spread 14 %).
    assert!(err("writer's refills of 2016 pages") < 20.0);
    // The pure consumer's drains: clamp(free_count, batch, high - batch) pages with free_count
    // capped at batch << 5 = 2016, plus the last block's overshoot. Mean within 1 %.
    assert!(err("pages per drain (mean)") < 1.0);
}

/// The command: the recorded trace compares (exit 0, every row in the JSON); a damaged one is
/// an error naming the file and the field (exit 2), never a table of zeros.
#[test]
fn compare_trace_command_reads_the_trace_and_refuses_a_damaged_one() {
    let dir = std::env::temp_dir().join(format!("pcpmodel-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("trace.json");
    std::fs::write(&good, TRACE).unwrap();
    let out = assert_cmd::Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["compare-trace", "--format", "json"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["rows"].as_array().unwrap().len() >= 12, "{v}");
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        TRACE.replacen("\"writer_cpu\": 0", "\"writer_cpu\": 9", 1),
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("pcpmodel")
        .unwrap()
        .arg("compare-trace")
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.json") && err.contains("cpus.9"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
