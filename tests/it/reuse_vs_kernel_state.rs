//! Cross-check of the closed-form reuse distance of `model::pcp` against a page-by-page
//! simulation driven by the kernel module's own state machine (`kernel::ops::PcpState`): a
//! consumer CPU frees pages to the head of its list, `free()` says how many pages each drain
//! returns (taken from the tail, oldest first), the buddy list is a LIFO stack, and the producer's
//! `alloc()` says when and how much it refills. The reuse distance of each page is the number of
//! base pages the consumer freed between the page's free and its next allocation.

use std::collections::VecDeque;

use pcpmodel::kernel::ops::PcpState;
use pcpmodel::kernel::pageset::{PcpHigh, PcpLimits};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::pcp::{dynamics, Flow};

/// Simulates `steps` page handovers and returns the reuse distances (base pages) seen after a
/// warm-up.
fn simulate(
    version: KernelVersion,
    high: u32,
    order: u8,
    steps: usize,
    consumer_allocates: bool,
    free_high_batch: bool,
) -> Vec<f64> {
    let limits = if version.era().auto_tunes_high() {
        PcpHigh::AutoTuned {
            high_min_pages: high,
            high_max_pages: high,
        }
    } else {
        PcpHigh::Fixed { high_pages: high }
    };
    let limits = PcpLimits {
        batch_pages: 63,
        high: limits,
    };
    let mut consumer = PcpState::new(version, limits, None).unwrap();
    consumer.flags.free_high_batch = free_high_batch;
    let mut producer = PcpState::new(version, limits, None).unwrap();
    let u = 1u64 << order;
    // Pages are ids; the buddy stack starts with a large reservoir of never-used pages.
    let mut buddy: Vec<u64> = (0..1_000_000).rev().collect();
    let mut producer_list: VecDeque<u64> = VecDeque::new();
    let mut consumer_list: VecDeque<u64> = VecDeque::new(); // front = head (newest)
    let mut freed_at: std::collections::HashMap<u64, u64> = Default::default();
    let mut out = Vec::new();
    for (frees, step) in (0_u64..).zip(0..steps) {
        // Producer allocates one block.
        let a = producer.alloc(order).unwrap();
        for _ in 0..a.refill_blocks {
            producer_list.push_back(buddy.pop().unwrap());
        }
        let page = producer_list.pop_front().unwrap();
        if let Some(t) = freed_at.remove(&page) {
            if step > steps / 4 {
                out.push(((frees - t) * u) as f64);
            }
        }
        // Consumer frees it.
        consumer_list.push_front(page);
        freed_at.insert(page, frees);
        let f = consumer.free(order).unwrap();
        if consumer_allocates {
            // One order-0 allocation on the consumer CPU per page it frees: it halves
            // free_factor / free_count (rmqueue_pcplist) without touching the flow's list.
            consumer.alloc(0).unwrap();
        }
        let mut drained = f.drained_pages() as u64;
        while drained > 0 {
            // free_pcppages_bulk takes the oldest block first; a block counts 2^order pages.
            let Some(old) = consumer_list.pop_back() else {
                break;
            };
            buddy.push(old);
            drained = drained.saturating_sub(u);
        }
    }
    out
}

fn check(version: KernelVersion, high: u32, order: u8, consumer_allocates: bool) {
    let sim = simulate(version, high, order, 60_000, consumer_allocates, false);
    assert!(!sim.is_empty());
    let mean_sim = sim.iter().sum::<f64>() / sim.len() as f64;
    let mut flow = Flow::netperf_004(version, high);
    flow.order = u32::from(order);
    flow.consumer_allocs_per_free = if consumer_allocates { 1.0 } else { 0.0 };
    let d = dynamics(&flow).unwrap();
    let mean_model = d.reuse.mean_pages();
    let (lo, hi) = d.reuse.range_pages();
    let mut s = sim.clone();
    s.sort_by(f64::total_cmp);
    let p = |q: f64| s[((s.len() - 1) as f64 * q) as usize];
    // Tolerances, from what the closed form leaves out:
    // - mean: the burial term is the closed form's least certain piece. It puts a share
    //   R/(6Δ) of pages one cycle Δ later (mean +R/6), from independent uniform leftovers; the
    //   simulated LIFO stack buries anywhere from nothing (6.7, order 0, high 320: drains and
    //   refills in lockstep, simulated mean 441 against the model's 491) to about R/2 (order 3
    //   with Δ ≈ R: 11 pages above the model with R = 56; 6.7, order 0, high 6144: 521 pages
    //   above with R = 2016). So the mean may be off by R/3 either way, plus one block u, the
    //   unit in which ages are counted.
    // - 2nd-90th percentiles: inside the model's range widened by one drain/refill granule. The
    //   closed form takes the drain's and refill's phases as continuous uniforms; the kernel
    //   drains at the first free that reaches `high` and refills at the first allocation that
    //   finds the list empty, so each edge moves by up to one granule (p2 at 232 against the
    //   range's 257 for 5.17, high 320, batch drains). The model's burial tail is lighter than
    //   the simulated LIFO stack's when Δ ≈ R (p98 a few cycles later): a known limitation
    //   documented in model::pcp, so the top decile is not checked.
    let granule = d.drain_pages.max(d.refill_pages);
    let u = f64::from(1u32 << order);
    let tol = d.refill_pages / 3.0 + u;
    assert!(
        (mean_sim - mean_model).abs() <= tol,
        "{version} high {high} order {order}: simulated mean {mean_sim:.0} vs model {mean_model:.0} (tolerance {tol:.0}, range {lo}-{hi})"
    );
    assert!(
        p(0.02) >= lo - granule && p(0.90) <= hi + granule,
        "{version} high {high} order {order}: simulated p2-p90 {}-{} vs model {lo}-{hi}",
        p(0.02),
        p(0.90)
    );
}

#[test]
fn closed_form_matches_kernel_state_machine_on_5_17() {
    // 5.17: the 5.14-6.6 free_factor rules without free_high (as in thread 004's experiment).
    for high in [0, 64, 320, 640, 2176, 6144] {
        check(KernelVersion::new(5, 17), high, 3, false);
        check(KernelVersion::new(5, 17), high, 3, true);
    }
}

#[test]
fn closed_form_matches_kernel_state_machine_on_6_7_order_0() {
    for high in [320, 640, 6144] {
        check(KernelVersion::new(6, 7), high, 0, false);
    }
}

#[test]
fn free_high_drains_of_a_batch_match_the_kernel_state_machine() {
    // 6.18, a pure consumer of order-3 blocks at a fixed high of 252 pages with
    // PCPF_FREE_HIGH_BATCH (an LLC slice of more than 3 batches): free_high fires once the list
    // holds a batch (8 blocks, 64 pages) and drains it whole, so a page waits on the list for
    // up to 64 pages of frees, then goes through the buddy stack to the producer's refills of
    // 7 blocks. The closed form takes that as a list of 64 pages draining 64 (simulated mean
    // 112 pages, model 101).
    let v = KernelVersion::new(6, 18);
    let sim = simulate(v, 252, 3, 60_000, false, true);
    let mean_sim = sim.iter().sum::<f64>() / sim.len() as f64;
    let mut flow = Flow::netperf_004(v, 252);
    flow.consumer_allocs_per_free = 0.0;
    flow.free_high_share = 1.0;
    flow.free_high_pages_per_event = 64.0;
    let d = dynamics(&flow).unwrap();
    // The tolerance of `check`: a third of a refill (the burial term) plus one block.
    let tol = d.refill_pages / 3.0 + 8.0;
    assert!(
        (mean_sim - d.reuse.mean_pages()).abs() <= tol,
        "simulated mean {mean_sim:.0} vs model {:.0} (tolerance {tol:.0})",
        d.reuse.mean_pages()
    );
    // Without the flag every high-order free drains the list: the bypass (simulated mean 56
    // pages, what the model gave with the flag until the batch residence was added).
    let bypass = simulate(v, 252, 3, 60_000, false, false);
    let mean_bypass = bypass.iter().sum::<f64>() / bypass.len() as f64;
    assert!(
        mean_bypass + 32.0 < mean_sim,
        "{mean_bypass:.0} vs {mean_sim:.0}"
    );
}

#[test]
#[ignore]
fn print_quantiles() {
    for (v, h, o, a) in [
        ((5, 17), 320, 3, false),
        ((5, 17), 320, 3, true),
        ((5, 17), 640, 3, true),
        ((5, 17), 2176, 3, true),
        ((5, 17), 0, 3, false),
        ((5, 17), 640, 3, false),
        ((6, 7), 320, 0, false),
    ] {
        let mut s = simulate(KernelVersion::new(v.0, v.1), h, o, 60_000, a, false);
        s.sort_by(f64::total_cmp);
        let q: Vec<String> = [0.0, 0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98, 1.0]
            .iter()
            .map(|q| format!("{:.0}", s[((s.len() - 1) as f64 * q) as usize]))
            .collect();
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        let mut flow = Flow::netperf_004(KernelVersion::new(v.0, v.1), h);
        flow.order = u32::from(o);
        flow.consumer_allocs_per_free = if a { 1.0 } else { 0.0 };
        let d = dynamics(&flow).unwrap();
        println!(
            "{v:?} high {h} order {o} allocating {a}: mean {mean:.0} (model {:.0}, range {:?}) quantiles {}",
            d.reuse.mean_pages(),
            d.reuse.range_pages(),
            q.join(" ")
        );
    }
}
