//! Kind `alloc-loop` (issue 11): thread 000's mmap-fill through the kind equals the zone->lock
//! model it generalises; Halbuer's bulk allocation growth ns(24)/ns(1) meets issue 11's
//! criterion; every built-in machine runs every alloc-loop workload through `latency`.

use assert_cmd::Command;
use pcpmodel::hw::machine::BUILTIN as MACHINES;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::zonelock::{workload_000, ZoneLockModel};
use pcpmodel::validate::t000::calibrate;
use pcpmodel::workload::{resolve, Knobs, NodeSpan, Registry};
use pcpmodel::Machine;

/// Halbuer, "Re: [PATCH] mm: reduce lock contention of pcp buffer refill" (linux-mm,
/// 2023-02-07), Default kernel, order-0 rows (printed under "Huge pages"; the author confirmed
/// the headings were swapped): ns per allocation with `cores` threads on socket 0 of a dual Xeon
/// Gold 6252, read from data/literature/.
fn halbuer_order0_ns(cores: u32) -> f64 {
    let text = include_str!(
        "../../data/literature/halbuer_2023-02_rmqueue_bulk_zone_lock_alloc_latency_vs_cores.csv"
    );
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|x| x == name).unwrap();
    let (c_size, c_cores, c_ns) = (
        col("page_size_corrected_per_author"),
        col("cores"),
        col("default_ns"),
    );
    r.records()
        .map(|x| x.unwrap())
        .find(|x| x[c_size].starts_with("order-0") && x[c_cores] == *cores.to_string())
        .map(|x| x[c_ns].parse().unwrap())
        .unwrap_or_else(|| panic!("no order-0 row for {cores} cores"))
}

fn predict(workload: &str, machine: &str, tasks: u32) -> pcpmodel::workload::Predicted {
    let w = resolve(workload).unwrap();
    let m = Machine::builtin(machine).unwrap();
    w.predict(
        &m,
        &Knobs {
            tasks: Some(tasks),
            ..Knobs::default()
        },
    )
    .unwrap()
}

#[test]
fn mmap_fill_through_the_kind_is_the_zone_lock_model() {
    // Same machine, kernel, parameters and loop: the kind must give the model's numbers to the
    // last bit (it is the same code, reached through the workload file).
    let m = Machine::builtin("xeon-8260").unwrap();
    let cal = calibrate(&m).unwrap();
    let model = ZoneLockModel::new(&m, KernelVersion::new(6, 10)).unwrap();
    let old = model
        .predict(&cal.params, &workload_000(10, NodeSpan::One), 5, false)
        .unwrap();
    let w = resolve("mmap-fill").unwrap();
    let case =
        pcpmodel::workload::kinds::alloc_loop::lock_case(&w.spec, &m, &Knobs::default()).unwrap();
    let new = case.predict(false).unwrap();
    assert_eq!(old.avg_ns.to_bits(), new.avg_ns.to_bits());
    assert_eq!(old.calls_per_s.to_bits(), new.calls_per_s.to_bits());
    assert_eq!(old.zones[0].dynamics.refill, new.zones[0].dynamics.refill);
    assert_eq!(old.zones[0].dynamics.free, new.zones[0].dynamics.free);
}

#[test]
fn bulk_alloc_order0_growth_against_issue_11() {
    let one = predict("bulk-alloc-order0", "xeon-gold-6252-2s", 1);
    let many = predict("bulk-alloc-order0", "xeon-gold-6252-2s", 24);
    let ratio = many.ns_per_op / one.ns_per_op;
    let measured = halbuer_order0_ns(24) / halbuer_order0_ns(1); // 8.70
    let out = |p: &pcpmodel::workload::Predicted, k: &str| p.output(k).unwrap();

    // Issue 11's criterion: |ratio / 8.7 - 1| <= 30 %, with nothing fitted to Halbuer's
    // table: the refill hold composed from the code (crate::model::hold), the work outside the
    // lock the allocation's share of page_bench01's pair as Mel Gorman's pagealloc benchmark
    // splits it. The model gives about 10.1x (+17 %). The band is the issue's; the miss left
    // is the one-core time (below), which no public source fixes closer.
    assert!(
        (ratio / measured - 1.0).abs() <= 0.30,
        "ratio {ratio:.2} against Halbuer's 8.7 (issue 11: within 30 %)"
    );
    // The model still over-predicts the growth: its one-core time is short of 127 ns.
    assert!(ratio > measured, "{ratio}");

    // Why: at 24 tasks the lock is saturated, so each allocation waits for the other 23
    // tasks' refills: ns(24) = 24 · S24 with S24 the lock time per page (hold + hand-over, 63
    // pages per refill on 6.1); at 1 task ns(1) = w + S1 (no hand-over).
    assert!(out(&many, "lock_utilisation") > 0.99);
    // 6.1 refills a fixed batch: zone_batchsize() of a >= 1 GiB zone is 63 pages.
    assert_eq!(many.zones[0].alloc.pages_per_acquisition, 63.0);
    // Nothing is freed in the interval: no drain, and about half a batch on each list.
    assert_eq!(many.zones[0].free.acquisitions_per_s, 0.0);
    let held = many.zones[0].pcp_pages_held / 24.0;
    assert!((held - 31.0).abs() < 1.0, "{held}");
    assert_eq!(out(&one, "wait_ns_per_alloc"), 0.0);
    let s1 = out(&one, "hold_pages_ns_per_alloc") + out(&one, "handover_ns_per_alloc");
    let s24 = out(&many, "hold_pages_ns_per_alloc") + out(&many, "handover_ns_per_alloc");
    let w = out(&one, "work_ns_per_alloc");
    // The closed form holds to the queue's precision at saturation (the think time overlaps
    // the others' holds exactly when w < 23 S): 1 %.
    let closed = 24.0 * s24 / (w + s1);
    assert!((ratio / closed - 1.0).abs() < 0.01, "{ratio} vs {closed}");
    // S1 from the code at 2.1 GHz: (60 cycles per block + 8 cycles of check) / 2.1 GHz +
    // a streamed struct-page line (max(L2 4.7 ns, 85 ns / 16 in flight) = 5.3 ns) + 60 call
    // cycles / 63 pages = 38.1 ns. S24 adds the hand-over: (23/24) (8 zone lines x 47.5 ns
    // c2c + 2 stream restarts x 85 ns) / 63 = 8.4 ns. Exact arithmetic, so 0.1 %.
    let s1_code = (60.0 + 8.0) / 2.1 + 85.0 / 16.0 + 60.0 / 2.1 / 63.0;
    assert!((s1 / s1_code - 1.0).abs() < 1e-3, "{s1} vs {s1_code}");
    let s24_code = s1_code + 23.0 / 24.0 * (8.0 * 47.5 + 2.0 * 85.0) / 63.0;
    assert!((s24 / s24_code - 1.0).abs() < 1e-3, "{s24} vs {s24_code}");
    // w: the allocation's share of thread 002's page_bench01 alloc+free on 4.14 (176 x 125 /
    // 168 = 131 cycles, the share from Mel Gorman's pagealloc split on 4.10) plus the one
    // locked RMW of 6.0's pcp->lock (20 cycles, crate::model::fastpath), at 2.1 GHz. Exact:
    // 0.1 %.
    let w_code = (131.0 + 20.0) / 2.1;
    assert!((w / w_code - 1.0).abs() < 1e-3, "{w} vs {w_code}");
    // So the saturated time per allocation, 24 x 46.5 = 1116 ns, is Halbuer's 1105 ns within
    // a few %; the miss is at one task: w + S1 = 72 + 38 = 110 ns against 127 ns. The
    // measured ratio needs w + S1 = 24 x 46.5 / 8.7 = 128 ns, i.e. w of about 90 ns (190
    // cycles) where the code gives 151. The one-task time is checked for scale only: 25 %.
    assert!((one.ns_per_op / halbuer_order0_ns(1) - 1.0).abs() < 0.25);
    assert!((many.ns_per_op / halbuer_order0_ns(24) - 1.0).abs() < 0.10);
}

#[test]
fn bulk_alloc_order9_takes_one_refill_per_two_blocks() {
    // 6.1 keeps order 9 on the PCP lists: a refill moves max(batch >> 9, 2) = 2 blocks.
    let p = predict("bulk-alloc-order9", "xeon-gold-6252-2s", 1);
    assert_eq!(p.zones[0].alloc.pages_per_acquisition, 1024.0);
    assert_eq!(p.zones[0].alloc_bypass_pages_per_s, 0.0);
}

#[test]
fn interleaved_order0_takes_no_lock_and_orders_off_the_lists_bypass() {
    let p = predict("page-bench01", "broadwell-2s", 1);
    assert_eq!(p.zones[0].alloc.acquisitions_per_s, 0.0);
    assert_eq!(p.zones[0].free.acquisitions_per_s, 0.0);
    // Order 4 on 6.1 is not kept on PCP lists: every allocation takes zone->lock itself.
    let w = resolve("page-bench01").unwrap();
    let m = Machine::builtin("broadwell-2s").unwrap();
    let k = Knobs {
        order: Some(4),
        kernel: Some(KernelVersion::new(6, 1)),
        ..Knobs::default()
    };
    let p = w.predict(&m, &k).unwrap();
    let z = &p.zones[0];
    assert!(z.alloc_bypass_pages_per_s > 0.0);
    assert_eq!(z.alloc.pages_per_acquisition, 16.0);
}

#[test]
fn scale_max_only_where_the_kernel_has_it() {
    let w = resolve("bulk-alloc-order0").unwrap();
    let m = Machine::builtin("xeon-gold-6252-2s").unwrap();
    let k = Knobs {
        kernel: Some(KernelVersion::new(6, 1)),
        scale_max: Some(3),
        ..Knobs::default()
    };
    assert!(w.predict(&m, &k).is_err());
    let k = Knobs {
        kernel: Some(KernelVersion::new(6, 10)),
        scale_max: Some(3),
        ..Knobs::default()
    };
    assert!(w.predict(&m, &k).is_ok());
}

#[test]
fn every_machine_runs_every_alloc_loop_workload_through_latency() {
    let reg = Registry::builtin();
    let workloads: Vec<_> = reg
        .all_builtin()
        .unwrap()
        .into_iter()
        .filter(|w| w.kind.name() == "alloc-loop")
        .collect();
    assert!(workloads.len() >= 7);
    for b in MACHINES {
        let m = Machine::builtin(b.name).unwrap();
        for w in &workloads {
            let nodes = w.spec.nodes().unwrap().nodes_on(&m);
            let tasks = w.spec.tasks.count.value.min(nodes * m.cpus_per_node());
            let out = Command::cargo_bin("pcpmodel")
                .unwrap()
                .args(["latency", "--format", "json", "--workload", w.name()])
                .args(["--machine", b.name, "--tasks", &tasks.to_string()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{} on {}: {}",
                w.name(),
                b.name,
                String::from_utf8_lossy(&out.stderr)
            );
            let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let ns = j["ns_per_alloc"].as_f64().unwrap();
            let work = j["terms_per_alloc"]["work_ns"].as_f64().unwrap();
            // An allocation costs at least its work outside the allocator.
            assert!(
                ns.is_finite() && ns >= work * 0.999,
                "{} on {}",
                w.name(),
                b.name
            );
        }
    }
}

#[test]
fn latency_runs_or_refuses_every_builtin_workload_by_its_kind() {
    // Every built-in workload runs through `latency`: the refill loop's histogram (alloc-loop),
    // or, for a kind with a zone->lock model of its own (high-order-fault), that model's
    // per-zone means; a kind without zone->lock is refused with a message naming its kind,
    // never another kind's error (page-fault1-64k once reached the alloc-loop solver and was
    // told "kind alloc-loop needs work > 0").
    let reg = Registry::builtin();
    for w in reg.all_builtin().unwrap() {
        let cmd = Command::cargo_bin("pcpmodel")
            .unwrap()
            .args(["latency", "--quiet", "--workload", w.name()])
            .assert();
        match (w.kind.refill_loop(), w.kind.has_zone_lock()) {
            (Ok(()), _) => {
                cmd.success();
            }
            (Err(_), true) => {
                let out = String::from_utf8(cmd.success().get_output().stdout.clone()).unwrap();
                assert!(out.contains("own lock model"), "{}: {out}", w.name());
            }
            (Err(_), false) => {
                let err = String::from_utf8(cmd.failure().get_output().stderr.clone()).unwrap();
                assert!(err.contains(w.kind.name()), "{}: {err}", w.name());
                assert!(
                    !err.contains("kind alloc-loop needs"),
                    "{}: {err}",
                    w.name()
                );
            }
        }
    }
}

/// `op.work.kernel` moves a fast-path work to the run's kernel: the same file on 5.19 and on
/// 6.1 differs by the 6.0 pcp spinlock's locked RMW (20 cycles at the file's 2.1 GHz) per
/// allocation, to rounding; a kernel that does not parse is refused at load with the file's
/// line and the field.
#[test]
fn work_kernel_shifts_the_fast_path_and_is_checked() {
    let w = resolve("bulk-alloc-order0").unwrap();
    let m = Machine::builtin("xeon-gold-6252-2s").unwrap();
    let run = |k: KernelVersion| {
        w.predict(
            &m,
            &Knobs {
                tasks: Some(1),
                kernel: Some(k),
                ..Knobs::default()
            },
        )
        .unwrap()
        .output("work_ns_per_alloc")
        .unwrap()
    };
    let shift = run(KernelVersion::new(6, 1)) - run(KernelVersion::new(5, 19));
    assert!((shift - 20.0 / 2.1).abs() < 1e-9, "{shift}");

    let text = include_str!("../../models/workloads/bulk-alloc-order0.toml")
        .replace("kernel = \"4.14\" }", "kernel = \"four\" }");
    let line = text
        .lines()
        .position(|l| l.contains("kernel = \"four\""))
        .unwrap()
        + 1;
    let err = pcpmodel::workload::spec::WorkloadSpec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("w.toml:{line}")), "{err}");
    assert!(err.contains("op.work.kernel"), "{err}");
}

/// zone->lock as a ticket spinlock (arm64 before 4.18 in the model's rule) against the queued
/// lock of the next kernel on the same machine and loop: equal with at most one waiter, and
/// past saturation the ticket lock's total throughput falls with each added task while the
/// queued lock's stays flat (Boyd-Wickizer et al. 2012's collapse).
#[test]
fn ticket_lock_throughput_collapses_where_queued_flattens() {
    let w = resolve("bulk-alloc-order0").unwrap();
    let m = Machine::builtin("kunpeng-920").unwrap();
    let total = |k: KernelVersion, tasks: u32| {
        let p = w
            .predict(
                &m,
                &Knobs {
                    tasks: Some(tasks),
                    kernel: Some(k),
                    means_only: true,
                    ..Knobs::default()
                },
            )
            .unwrap();
        p.throughput_total
    };
    let (ticket, queued) = (KernelVersion::new(4, 17), KernelVersion::new(4, 18));
    // Two tasks: at most one waiter, whose hand-off is the same one transfer either way.
    assert!((total(ticket, 2) / total(queued, 2) - 1.0).abs() < 1e-9);
    let t: Vec<f64> = [8, 16, 24].iter().map(|&n| total(ticket, n)).collect();
    let q: Vec<f64> = [8, 16, 24].iter().map(|&n| total(queued, n)).collect();
    assert!(t[0] > t[1] && t[1] > t[2], "ticket {t:?}");
    // Queued: flat past saturation (the FIFO queue's throughput is bounded by 1 / hold); 5 %
    // covers the hand-over's small growth with the mix of cores.
    assert!(q[2] > 0.95 * q[0], "queued {q:?}");
    assert!(t[2] < 0.85 * q[2], "ticket {t:?} vs queued {q:?}");
}

/// The LRU lock in series with zone->lock (crate::model::lrulock): page_fault1's pages go on
/// the LRU, so its tasks also queue there. One task pays exactly the composed holds (no wait);
/// 16 tasks on one node wait for it too, and the loop is no faster with it than without it
/// (`lru_pages = 0`): in a closed queueing network more time at one station never raises the
/// throughput; it rises by less than the LRU hold, because the tasks then wait less for the
/// saturated zone->lock.
#[test]
fn page_fault1_queues_on_the_lru_lock_too() {
    let w = resolve("will-it-scale-page-fault1").unwrap();
    let m = Machine::builtin("broadwell-2s").unwrap();
    let case = |tasks: u32, lru: Option<f64>| {
        let k = Knobs {
            tasks: Some(tasks),
            kernel: Some(KernelVersion::new(4, 15)),
            extra: lru
                .map(|v| vec![("lru_pages".to_string(), v)])
                .unwrap_or_default(),
            ..Knobs::default()
        };
        pcpmodel::workload::kinds::alloc_loop::lock_case(&w.spec, &m, &k).unwrap()
    };
    let one = case(1, None);
    let pred = one.predict(false).unwrap();
    let lru = pred.zones[0].lru.expect("page_fault1 goes on the LRU");
    assert_eq!(lru.wait_ns_per_page, 0.0);
    assert!(lru.hold_ns_per_page > 0.0);
    let c16 = case(16, None);
    let with = c16.predict(false).unwrap();
    let without = case(16, Some(0.0)).predict(false).unwrap();
    assert!(without.zones[0].lru.is_none());
    let l16 = with.zones[0].lru.unwrap();
    assert!(l16.wait_ns_per_page > 0.0 && l16.utilisation < 1.0 + 1e-9);
    let t = |c: &pcpmodel::workload::kinds::alloc_loop::LockCase,
             p: &pcpmodel::model::zonelock::Prediction| {
        pcpmodel::workload::kinds::alloc_loop::mean_terms(c, p).ns_per_alloc
    };
    let (t_with, t_without) = (t(&c16, &with), t(&case(16, Some(0.0)), &without));
    assert!(
        t_with >= t_without && t_with <= t_without + l16.response_ns_per_page(),
        "{t_with} vs {t_without}"
    );
}

/// With a pcp->high that holds the whole region, page_fault1 takes no zone->lock at all, and the
/// time per page is its work plus the LRU lock's hold (one task: no wait), not the work alone.
#[test]
fn a_loop_without_zone_traffic_still_pays_the_lru_lock() {
    let w = resolve("will-it-scale-page-fault1").unwrap();
    let m = Machine::builtin("broadwell-2s").unwrap();
    let k = Knobs {
        tasks: Some(1),
        kernel: Some(KernelVersion::new(4, 15)),
        high: Some(100_000),
        batch: Some(63),
        ..Knobs::default()
    };
    let case = pcpmodel::workload::kinds::alloc_loop::lock_case(&w.spec, &m, &k).unwrap();
    let pred = case.predict(false).unwrap();
    let z = &pred.zones[0];
    assert_eq!(
        z.dynamics.refills() + z.dynamics.drains(),
        0,
        "{:?}",
        z.dynamics
    );
    let lru = z.lru.unwrap();
    let t = pcpmodel::workload::kinds::alloc_loop::mean_terms(&case, &pred);
    let expect = case.params.work_ns_per_page + lru.hold_ns_per_page;
    assert!((t.ns_per_alloc - expect).abs() < 1e-9 * expect, "{t:?}");
    assert!(lru.hold_ns_per_page > 0.0 && lru.wait_ns_per_page == 0.0);
}
