//! Issue 3 acceptance: thread 004 reproduced with two free parameters per machine, the predicted
//! curves have the measured shapes, placement moves the costs the right way, and optimal-high runs
//! everywhere. Every expected value here is the model's own computation; tolerances are stated.

use pcpmodel::answer::optimal_high::OptimalHigh;
use pcpmodel::fit::calibrate::{netperf_model, netperf_params, KERNEL_004};
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::cache::Placement;
use pcpmodel::validate::{t004, Role};
use pcpmodel::workload::spec::PlacementSpec;
use pcpmodel::workload::Knobs;
use pcpmodel::Machine;

/// The kernel thread 004's pcp->high table ran: the parent of f26b3fa046 (free_high, 5.18 in
/// the timeline). With free_high a receiver that never allocates drains its list at every free
/// and the measured curve would be flat; the table's curve says it was not there.
const TABLE_KERNEL: KernelVersion = KernelVersion::new(5, 17);

/// optimal-high for thread 004's workload (netperf-udp) through the registry.
fn optimal_high(m: &Machine, k: KernelVersion, p: Placement, samples: usize) -> OptimalHigh {
    let placement = match p {
        Placement::Smt => PlacementSpec::Smt,
        Placement::SameLlc => PlacementSpec::SameLlc,
        Placement::CrossLlc => PlacementSpec::CrossLlc,
        Placement::CrossSocket => PlacementSpec::CrossSocket,
    };
    let knobs = Knobs {
        kernel: Some(k),
        placement: Some(placement),
        ..Knobs::default()
    };
    let w = pcpmodel::workload::resolve("netperf-udp").unwrap();
    pcpmodel::answer::optimal_high::optimal_high(&w, m, &knobs, samples).unwrap()
}

fn relative_at(machine: &str, placement: Placement, highs: &[u32]) -> (u32, Vec<f64>) {
    let m = Machine::builtin(machine).unwrap();
    let o = optimal_high(&m, TABLE_KERNEL, placement, 20);
    let model = netperf_model(&m, placement, KERNEL_004).unwrap();
    let p = netperf_params(&m).unwrap().values;
    let rel = highs
        .iter()
        .map(|&h| {
            model.estimate(&p, h).unwrap().throughput_ops_per_s / o.optimal_throughput_ops_per_s
        })
        .collect();
    (o.optimal_high_pages, rel)
}

#[test]
fn thread_004_fitted_within_3pct_rms_and_5pct_max() {
    // Issue 3's numbers. Thread 004 gives one run per setting, no spread to derive a tolerance
    // from; two parameters on five points leave three degrees of freedom (RMS 1.93 % and 0.66 %,
    // worst +3.5 % when written).
    let v = t004::validate().unwrap();
    for m in ["icelake-server", "skylake-desktop"] {
        let rms = v.rms_rel(Role::Fitted, Some(m), Some("score")).unwrap();
        assert!(rms <= 0.03, "{m}: fitted RMS {rms}");
        for r in v
            .rows
            .iter()
            .filter(|r| r.machine == m && r.role == Role::Fitted)
        {
            assert!(r.rel_error.abs() <= 0.05, "{m} {}: {}", r.case, r.rel_error);
        }
        // Leave-one-out rows exist for every point (reported, not asserted: they can be bad).
        let loo = v
            .rows
            .iter()
            .filter(|r| r.machine == m && r.role == Role::Loo && r.quantity == "score")
            .count();
        assert_eq!(loo, 5);
    }
}

#[test]
fn icelake_curve_has_the_measured_shape() {
    let m = Machine::builtin("icelake-server").unwrap();
    let o = optimal_high(&m, TABLE_KERNEL, Placement::SameLlc, 20);
    assert!(
        (640..=6144).contains(&o.optimal_high_pages),
        "{}",
        o.optimal_high_pages
    );
    let [lo, hi] = o.within_1pct_pages;
    assert!(
        lo <= 6144 && hi >= 640,
        "1% range {lo}-{hi} misses [640, 6144]"
    );
    // Measured: bypass at 0.75 and 12416 at 0.77 of the best; 0.85 is that widened by the 5 %
    // each fitted point may miss by, at both ends of the ratio (0.77 x 1.05 / 0.95).
    let (_, rel) = relative_at("icelake-server", Placement::SameLlc, &[0, 12416]);
    assert!(rel[0] <= 0.85, "bypass at {:.3} of the optimum", rel[0]);
    assert!(rel[1] <= 0.85, "12416 at {:.3} of the optimum", rel[1]);
}

#[test]
fn skylake_curve_is_flat_to_1024_and_falls_past_the_llc() {
    let (_, rel) = relative_at(
        "skylake-desktop",
        Placement::SameLlc,
        &[0, 64, 128, 1024, 2176],
    );
    // Measured: 0 to 1024 within 1.5 % of the best (0.986 at worst), 2176 at 0.858. Bounds:
    // 0.974 (flat as measured, less the 1.24 % largest fitted miss on this machine) and 0.90
    // (0.858 x 1.05, the 5 % a fitted point may miss by).
    for (h, r) in [0, 64, 128, 1024].iter().zip(&rel) {
        assert!(*r >= 0.974, "high {h}: {r:.4} of the best");
    }
    assert!(rel[4] <= 0.90, "2176: {:.4} of the best", rel[4]);
}

#[test]
fn smt_siblings_make_bypass_as_good_as_the_best() {
    // Shared L2: a reused line is an L2 hit at any small high, so bypass loses only the extra
    // zone->lock holds per page (lines moving between siblings, ~0.4 %). Same-LLC bypass loses
    // >= 15 % (the other core's L2 must be snooped; measured 25 %, see the icelake test).
    // 0.99: the 1 % range's own definition, well above the ~0.4 % lock cost.
    let (_, smt) = relative_at("icelake-server", Placement::Smt, &[0]);
    let (_, same) = relative_at("icelake-server", Placement::SameLlc, &[0]);
    assert!(smt[0] >= 0.99, "SMT bypass at {:.4} of the best", smt[0]);
    assert!(same[0] <= 0.85);
}

#[test]
fn cross_socket_makes_the_core_to_core_term_dearer() {
    let m = Machine::builtin("icelake-server").unwrap();
    let p = netperf_params(&m).unwrap().values;
    let same = netperf_model(&m, Placement::SameLlc, KERNEL_004)
        .unwrap()
        .estimate(&p, 0)
        .unwrap();
    let cross = netperf_model(&m, Placement::CrossSocket, KERNEL_004)
        .unwrap()
        .estimate(&p, 0)
        .unwrap();
    // The core-to-core term scales with the transfer latency: 110.88 ns cross-socket against
    // 51.10 ns inside the socket (measured, the machine file) is 2.17x; the private term also
    // holds L2 hits, which do not move, so more than 1.5x.
    assert!(cross.private_ns > 1.5 * same.private_ns);
    assert!(cross.ns_per_op > same.ns_per_op);
}

#[test]
fn optimal_high_runs_for_every_machine_and_a_detected_host() {
    for m in Machine::all_builtin().unwrap() {
        for k in [KERNEL_004, KernelVersion::new(6, 18)] {
            let o = optimal_high(&m, k, Placement::SameLlc, 10);
            assert!(o.within_1pct_pages[0] <= o.optimal_high_pages);
            assert!(o.ci95_pages[0] <= o.ci95_pages[1]);
        }
    }
    for root in [
        "tests/fixtures/sysfs/intel-xeon-gold-5222-2s",
        "tests/fixtures/sysfs/amd-ryzen9-5900x",
    ] {
        let d = pcpmodel::hw::detect::detect(std::path::Path::new(root)).unwrap();
        let (m, _) = d.to_machine().unwrap();
        let o = optimal_high(&m, KernelVersion::new(6, 18), Placement::SameLlc, 10);
        assert!(o.swept_pages[1] > 0);
    }
}

/// The receiving CPU's allocations per freed block are one measured value: the workload file
/// and the calibration's constant must agree (the file carries the trace's provenance).
#[test]
fn the_traced_receiver_allocations_are_one_value() {
    let w = pcpmodel::workload::resolve("netperf-udp").unwrap();
    let v = w.spec.param("consumer_allocs_per_free").unwrap();
    assert_eq!(v, pcpmodel::model::pcp::CONSUMER_ALLOCS_PER_FREE_004);
    let src = &w.spec.params["consumer_allocs_per_free"].source;
    assert!(src.starts_with("measured:"), "{src}");
}

/// Thread 004's subject, f26b3fa046 (-18.0 %), from the workload's own prediction on the
/// commit's kernel against its parent: within 10 points. The tolerance: the parent's default
/// pcp->high comes from the machine file's memory, not the robot's box, and the fit the score
/// rides on has a 2 % RMS; the sign and size come from free_high firing for the traced receiver.
#[test]
fn the_free_high_regression_comes_out_of_predict() {
    let measured = pcpmodel::data::regression_004().unwrap();
    let v = t004::validate().unwrap();
    for reg in &measured {
        let row = v
            .rows
            .iter()
            .find(|r| r.quantity == "change_pct" && r.machine == reg.machine)
            .unwrap();
        assert!(
            (row.predicted - reg.change_pct).abs() <= 10.0,
            "{}: predicted {} vs measured {}",
            reg.machine,
            row.predicted,
            reg.change_pct
        );
    }
}

/// This project's 2-vCPU host as measured (a committed machine file): on a zone split over two
/// CPUs, 6.16's free_high threshold (batch + high_min / 2) lies above the most free_count can
/// reach (batch << 5), so free_high never fires and the list's size decides.
const HOST: &str = "data/host/host-idle-2026-12-01.toml";

fn score_at(k: &Knobs, high: u32) -> f64 {
    let w = pcpmodel::workload::resolve("netperf-udp").unwrap();
    let m = Machine::resolve(HOST).unwrap();
    let k = Knobs {
        high: Some(high),
        means_only: true,
        ..k.clone()
    };
    w.predict(&m, &k).unwrap().throughput_per_task
}

/// On 6.18 the UDP receive path hands each read skb back to the sender's CPU (skb_defer_max 64
/// by default): the sender frees and reuses its own pages, no list is refilled or drained, and
/// pcp->high cannot move the prediction (equal to rounding). With skb_defer_max 0 the receiver
/// frees again and a list that fits the caches wins over one that does not.
#[test]
fn who_frees_decides_whether_pcp_high_matters_on_6_18() {
    let k618 = Knobs {
        kernel: Some(KernelVersion::new(6, 18)),
        ..Knobs::default()
    };
    let highs = [252u32, 1024, 8192, 30000];
    let deferred: Vec<f64> = highs.iter().map(|&h| score_at(&k618, h)).collect();
    let (lo, hi) = deferred
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi / lo - 1.0 < 1e-9, "{deferred:?}");
    let nodefer = k618.clone().with_extra("skb_defer_max", 0.0);
    let receiver: Vec<f64> = highs.iter().map(|&h| score_at(&nodefer, h)).collect();
    assert!(
        receiver[0] > 1.02 * receiver[3],
        "small high beats one beyond the LLC: {receiver:?}"
    );
    // Before 6.18 UDP never deferred: the default sysctl gives the receiver's flow.
    let k617 = Knobs {
        kernel: Some(KernelVersion::new(6, 17)),
        ..Knobs::default()
    };
    assert!(score_at(&k617, 252) > 1.02 * score_at(&k617, 30000));
}

/// A consumer that frees a share s of the pages (the producer frees the rest on its own list)
/// takes zone->lock s times as often per page as one that frees them all.
#[test]
fn a_consumer_share_scales_the_lock_visits() {
    use pcpmodel::model::pcp::{dynamics, Flow};
    let full = Flow::netperf_004(KernelVersion::new(5, 18), 1000);
    let half = Flow {
        consumer_free_share: 0.5,
        ..full
    };
    let (d1, d2) = (dynamics(&full).unwrap(), dynamics(&half).unwrap());
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
    assert!(close(
        d2.drain_holds_per_page(),
        0.5 * d1.drain_holds_per_page()
    ));
    assert!(close(
        d2.refill_holds_per_page,
        0.5 * d1.refill_holds_per_page
    ));
    assert!(d2.reuse.mean_pages() < d1.reuse.mean_pages());
}
