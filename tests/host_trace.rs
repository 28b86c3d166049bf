//! The kernel's PCP rules as the model steps them (crate::kernel::ops::PcpState through
//! crate::model::autotune::PairFlow), held against the real kernel's: the kmem tracepoints of
//! this project's host (kernel 6.18) under an AF_UNIX stream pair writing 64 KiB at a time
//! (`tools/trace_pcp_flow.py --seconds 2 --json`, data/host/trace-af-unix-64k-2026-12-02.json).
//! The model gets the host's pageset limits and the kernel's frag orders; nothing is fitted.

use pcpmodel::kernel::ops::PcpState;
use pcpmodel::kernel::pageset::{PcpHigh, PcpLimits};
use pcpmodel::kernel::skb::{unix_stream_write_orders, WMEM_DEFAULT};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::autotune::PairFlow;
use serde_json::Value;

const TRACE: &str = include_str!("../data/host/trace-af-unix-64k-2026-12-02.json");

fn per_call(cpu: &Value, key: &str) -> Vec<(u64, u64)> {
    cpu[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|pc| (pc[0].as_u64().unwrap(), pc[1].as_u64().unwrap()))
        .collect()
}

#[test]
fn the_af_unix_pair_refills_and_drains_as_the_host_kernel_did() {
    let t: Value = serde_json::from_str(TRACE).unwrap();
    let writes = t["writes"].as_u64().unwrap() as f64;
    // The writer ran on CPU 0, the reader on CPU 1; their zone was Normal.
    let ps = &t["pagesets_before"]["0/Normal"]["cpus"]["1"];
    let limits = PcpLimits {
        batch_pages: ps["batch"].as_u64().unwrap() as u32,
        high: PcpHigh::AutoTuned {
            high_min_pages: ps["high_min"].as_u64().unwrap() as u32,
            high_max_pages: ps["high_max"].as_u64().unwrap() as u32,
        },
    };
    let k = KernelVersion::new(6, 18);
    let mut w = PcpState::new(k, limits, None).unwrap();
    let mut r = PcpState::new(k, limits, None).unwrap();
    let orders = unix_stream_write_orders(65536, WMEM_DEFAULT);
    assert_eq!(orders, vec![3, 2, 1, 0]);
    let flow = PairFlow {
        orders,
        // The host's pace: 2 s over the writes, on each side.
        work_ns: 2e9 / writes,
        tick_ns: 1e9,
        span_ns: 120e9,
    };
    let tally = flow.run(&mut w, &mut r).unwrap();
    let units = tally.work_units as f64;

    // Refills: rmqueue_bulk() of batch >> order blocks for orders 1-3 (56, 60, 62 pages) and,
    // for order 0, batch << CONFIG_PCP_BATCH_SCALE_MAX (alloc_factor at its cap: 2016). The
    // rates are the kernel's arithmetic (1/7, 1/15, 1/31, 1/2016 per write); 2 % covers the
    // recorded span's cut through the refill cycles (the shortest is 7 writes, the order-0 one
    // 2016 writes: the host's 2 s saw about 52 of them).
    let measured = per_call(&t["cpus"]["0"], "refill_pages_per_call");
    for pages in [56u64, 60, 62, 2016] {
        let m = measured.iter().find(|pc| pc.0 == pages).unwrap().1 as f64 / writes;
        let p = tally
            .refill
            .iter()
            .find(|pc| u64::from(pc.0) == pages)
            .map_or(0.0, |pc| pc.1 as f64)
            / units;
        let tol = if pages == 2016 { 0.06 } else { 0.02 };
        assert!(
            (p / m - 1.0).abs() < tol,
            "refills of {pages} pages per write: model {p}, host {m}"
        );
    }

    // Drains of the pure consumer: free_pcppages_bulk() of clamp(free_count, batch, high -
    // batch) pages, free_count capped at batch << 5 = 2016, so about 2016 pages plus the last
    // block's overshoot. The host's mean drain (its few short decay drains included) against
    // the model's: within 1 %, the spread of the overshoot and of the decay drains.
    let drains = per_call(&t["cpus"]["1"], "drain_pages_per_call");
    let n: u64 = drains.iter().map(|pc| pc.1).sum();
    let host_mean = drains.iter().map(|pc| pc.0 * pc.1).sum::<u64>() as f64 / n as f64;
    let dn: u64 = tally.drain.iter().map(|pc| pc.1).sum();
    let model_mean = tally
        .drain
        .iter()
        .map(|pc| u64::from(pc.0) * pc.1)
        .sum::<u64>() as f64
        / dn as f64;
    assert!(
        (model_mean / host_mean - 1.0).abs() < 0.01,
        "pages per drain: model {model_mean}, host {host_mean}"
    );
}
