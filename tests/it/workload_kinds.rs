//! The kinds producer-consumer, memcg-charge, numa-stat and high-order-fault through the
//! workload registry: every built-in workload of these kinds runs on every built-in machine,
//! the thread workloads give what their models give when called directly (the path `predict`
//! used before the registry), knobs override the file, and a user's workload file runs through
//! `pcpmodel predict --workload FILE`.

use assert_cmd::Command;
use pcpmodel::fit::calibrate::{default_pcp, netperf_model, netperf_params, KERNEL_004};
use pcpmodel::fit::FitModel;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::cache::Placement;
use pcpmodel::model::highorder::{HighOrderModel, KERNEL_003};
use pcpmodel::model::memcg::MemcgModel;
use pcpmodel::model::vmstat::{NumaStatModel, KERNEL_002};
use pcpmodel::model::zonelock::ZoneLockHistFit;
use pcpmodel::workload::registry::Registry;
use pcpmodel::workload::{resolve, Knobs};
use pcpmodel::Machine;

const MY_KINDS: [&str; 4] = [
    "producer-consumer",
    "memcg-charge",
    "numa-stat",
    "high-order-fault",
];

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/workloads/order2-smt.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn every_builtin_workload_of_these_kinds_runs_on_every_builtin_machine() {
    let all = Registry::builtin().all_builtin().unwrap();
    let mine: Vec<_> = all
        .iter()
        .filter(|w| MY_KINDS.contains(&w.kind.name()))
        .collect();
    // Four producer-consumer files besides thread 004's, and threads 001-004.
    assert!(mine.len() >= 8, "{}", mine.len());
    for m in Machine::all_builtin().unwrap() {
        for w in &mine {
            let p = w
                .predict(&m, &Knobs::default())
                .unwrap_or_else(|e| panic!("{} on {}: {e}", w.name(), m.name));
            assert!(
                p.ns_per_op.is_finite() && p.ns_per_op > 0.0,
                "{} on {}: {}",
                w.name(),
                m.name,
                p.ns_per_op
            );
            assert!(p.throughput_total > 0.0 && p.tasks >= 1);
            assert!(p.report.json["not_modelled"].is_array());
        }
    }
}

/// Exact equality: the kinds call the same functions with the same inputs as the old CLI path;
/// any difference is a changed input.
#[test]
fn netperf_udp_is_thread_004s_model() {
    let m = Machine::builtin("icelake-server").unwrap();
    // The thread's kernel: on 6.18 the kind's UDP flow is the sender's own (skb deferral), which
    // the thread's model does not have.
    let kernel = KERNEL_004;
    let old = {
        let model = netperf_model(&m, Placement::SameLlc, kernel).unwrap();
        let wp = netperf_params(&m).unwrap();
        let high = default_pcp(&m, kernel)
            .unwrap()
            .effective_high(model.flow.scale_max);
        model.estimate(&wp.values, high).unwrap()
    };
    let p = resolve("netperf-udp")
        .unwrap()
        .predict(
            &m,
            &Knobs {
                kernel: Some(kernel),
                ..Knobs::default()
            },
        )
        .unwrap();
    // The kind adds the free_high trigger, which the thread's kernel (f26b3fa046's parent) does
    // not have: equal to 1e-9 relative (rounding).
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
    assert!(
        close(p.ns_per_op, old.ns_per_op),
        "{} vs {}",
        p.ns_per_op,
        old.ns_per_op
    );
    assert!(close(p.output("score").unwrap(), old.score));
    // --high and --placement reach the model.
    let k = Knobs {
        kernel: Some(kernel),
        high: Some(100),
        placement: Some(pcpmodel::workload::spec::PlacementSpec::Smt),
        ..Knobs::default()
    };
    let old100 = netperf_model(&m, Placement::Smt, kernel)
        .unwrap()
        .estimate(&netperf_params(&m).unwrap().values, 100)
        .unwrap();
    let p100 = resolve("netperf-pcp-high")
        .unwrap()
        .predict(&m, &k)
        .unwrap();
    assert!(close(p100.ns_per_op, old100.ns_per_op));
}

#[test]
fn memcg_netperf_is_thread_001s_model() {
    let m = Machine::builtin("memcg-72cpu").unwrap();
    let p = pcpmodel::validate::t001::calibrated_params().unwrap().0;
    let w = resolve("memcg-netperf").unwrap();
    for (batch, depth) in [(64u32, 3u32), (32, 1)] {
        let old = MemcgModel::new(&m, 36, depth)
            .unwrap()
            .estimate(&p, batch)
            .unwrap();
        let k = Knobs::default()
            .with_extra("memcg_charge_batch", f64::from(batch))
            .with_extra("cgroup_depth", f64::from(depth));
        let new = w.predict(&m, &k).unwrap();
        assert_eq!(new.ns_per_op, old.ns_per_page);
        assert_eq!(new.output("throughput_mbps"), Some(old.throughput_mbps));
    }
    // Without a batch the kernel's MEMCG_CHARGE_BATCH applies: 32 at the file's reference
    // kernel (6.0), 64 from 6.1; nothing is left unmodelled.
    for (kernel, batch) in [(None, 32.0), (Some(KernelVersion::new(6, 1)), 64.0)] {
        let by_hand = Knobs {
            kernel,
            ..Knobs::default()
        }
        .with_extra("memcg_charge_batch", batch)
        .with_extra("cgroup_depth", 3.0);
        let by_kernel = Knobs {
            kernel,
            ..Knobs::default()
        }
        .with_extra("cgroup_depth", 3.0);
        let p = w.predict(&m, &by_kernel).unwrap();
        assert_eq!(p.ns_per_op, w.predict(&m, &by_hand).unwrap().ns_per_op);
        let nm = &p.report.json["not_modelled"];
        assert_eq!(nm.as_array().map(Vec::len), Some(0), "{nm}");
    }
}

#[test]
fn page_bench_is_thread_002s_model() {
    let m = Machine::builtin("broadwell-2s").unwrap();
    let fit =
        pcpmodel::validate::t002::fit_002(&pcpmodel::validate::t002::model_002().unwrap()).unwrap();
    let p: Vec<f64> = fit.params.iter().map(|x| x.value).collect();
    let old = NumaStatModel::new(&m, KernelVersion::DEFAULT)
        .unwrap()
        .estimate(&p, 88, false)
        .unwrap();
    let k = Knobs {
        tasks: Some(88),
        ..Knobs::default()
    }
    .with_extra("numa_stat", 0.0);
    let new = resolve("page-bench").unwrap().predict(&m, &k).unwrap();
    assert_eq!(new.output("cycles_per_page"), Some(old.cycles_per_page));
}

#[test]
fn page_fault1_is_thread_003s_model_with_zones() {
    let m = Machine::builtin("kunpeng-920").unwrap();
    let model = HighOrderModel::page_fault1(&m, KernelVersion::DEFAULT, 90, 10.0).unwrap();
    let p = model.derived_params(&m);
    let w = resolve("page-fault1").unwrap();
    for on in [false, true] {
        let old = model.estimate_observed(&p, on, &model.probe).unwrap();
        let k = Knobs::default().with_extra("high_order_pcp", f64::from(u8::from(on)));
        let new = w.predict(&m, &k).unwrap();
        assert_eq!(new.output("contended"), Some(old.contended));
        assert_eq!(new.output("total_wait_ns"), Some(old.total_wait_ns));
        // One zone per node (kunpeng-920: 4), the tasks spread over them.
        assert_eq!(new.zones.len(), 4);
        assert_eq!(new.zones.iter().map(|z| z.tasks).sum::<u32>(), 90);
        assert!(new.zones.iter().all(|z| z.utilisation > 0.0));
    }
}

#[test]
fn knobs_a_kind_does_not_read_and_missing_params_are_errors() {
    let m = Machine::builtin("broadwell-2s").unwrap();
    let k = Knobs {
        high: Some(10),
        ..Knobs::default()
    };
    let e = resolve("page-bench")
        .unwrap()
        .predict(&m, &k)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--high"), "{e}");
    let text = std::fs::read_to_string(fixture()).unwrap().replace(
        "consumer_allocs_per_free = { value = 0.0, source = \"assumed: a pure consumer\" }",
        "",
    );
    let e = Registry::builtin()
        .from_toml_str(
            &text,
            "edited.toml",
            pcpmodel::workload::registry::Origin::Builtin,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("params.consumer_allocs_per_free"), "{e}");
}

#[test]
fn a_workload_file_with_its_own_order_and_placement_runs_through_predict() {
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", &fixture(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["order"], 2);
    assert_eq!(v["placement"], "smt");
    assert_eq!(v["pairs"], 2);
    assert_eq!(v["predicted"]["kind"], "producer-consumer");
    assert!(v["predicted"]["ns_per_op"].as_f64().unwrap() > 0.0);
    // The flags override the file.
    let out = Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", &fixture(), "--order", "3"])
        .args(["--placement", "same-llc", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["order"], 3);
    assert_eq!(v["placement"], "same-llc");
}

#[test]
fn memcg_batch_flag_points_to_charge_batch() {
    Command::cargo_bin("pcpmodel")
        .unwrap()
        .args(["predict", "--workload", "memcg-netperf", "--batch", "32"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--charge-batch"));
}

type ThreadModel = fn(&Machine) -> Box<dyn FitModel>;
/// Workload, the thread's model, one input row, the parameters held fixed, the CSV columns.
type ThreadCase = (
    &'static str,
    ThreadModel,
    Vec<f64>,
    &'static [&'static str],
    usize,
);

/// The kinds' native fit models are the threads' own models (what `fit --model` built before
/// the kinds had fits): the same prediction for the same parameters and inputs, exactly; the
/// columns and the physical parameters held fixed are the threads'.
#[test]
fn native_fits_are_the_thread_models() {
    let cases: [ThreadCase; 5] = [
        (
            "netperf-pcp-high",
            |m| Box::new(netperf_model(m, Placement::SameLlc, KERNEL_004).unwrap()),
            vec![640.0],
            &pcpmodel::model::netperf::DEFAULT_FIXED,
            2,
        ),
        (
            "memcg-netperf",
            |m| Box::new(MemcgModel::new(m, 36, 3).unwrap()),
            vec![32.0],
            &pcpmodel::model::memcg::DEFAULT_FIXED,
            2,
        ),
        (
            "page-bench",
            |m| Box::new(NumaStatModel::new(m, KERNEL_002).unwrap()),
            vec![88.0, 1.0],
            &[],
            3,
        ),
        (
            "page-fault1",
            |m| Box::new(HighOrderModel::page_fault1(m, KERNEL_003, 90, 10.0).unwrap()),
            vec![1.0, 2.0],
            &pcpmodel::model::highorder::DEFAULT_FIXED,
            3,
        ),
        (
            "zone-lock",
            |m| Box::new(ZoneLockHistFit::new(m).unwrap()),
            vec![4096.0, 8191.0],
            &["fixed_ns"],
            3,
        ),
    ];
    for (workload, thread_model, x, fixed, columns) in cases {
        let w = resolve(workload).unwrap();
        let m = Machine::builtin(&w.spec.default_machine).unwrap();
        let native = w.kind.native_fit(&w.spec, &m).unwrap().unwrap();
        let old = thread_model(&m);
        let p: Vec<f64> = old.params().iter().map(|s| s.default).collect();
        // Equal: the native fit runs at the workload's reference kernel, the thread's (for
        // netperf-udp f26b3fa046's parent, without free_high): 1e-9 relative (rounding).
        let (new, old) = (
            native.predict(&p, &x).unwrap(),
            old.predict(&p, &x).unwrap(),
        );
        assert!((new / old - 1.0).abs() < 1e-9, "{workload}: {new} vs {old}");
        assert_eq!(w.kind.native_columns().len(), columns, "{workload}");
        assert_eq!(w.kind.native_default_fixed(), fixed, "{workload}");
    }
    // Other alloc-loop workloads have no histogram of their own: the generic fit.
    let w = resolve("kbuild").unwrap();
    let m = Machine::builtin(&w.spec.default_machine).unwrap();
    assert!(w.kind.native_fit(&w.spec, &m).unwrap().is_none());
}

#[test]
fn a_given_fixed_work_replaces_thread_004s_calibration() {
    // 2000 cycles per page, at icelake-server's base clock.
    let text = std::fs::read_to_string(fixture()).unwrap().replace(
        r#"work = { ns = { value = 0, source = "fitted: thread 004's fixed work, carried over in cycles (src/fit/calibrate.rs)", basis = "fitted" } }"#,
        r#"work = { cycles = { value = 2000, source = "assumed: a test value" } }"#,
    );
    assert!(text.contains("cycles = { value = 2000"));
    let w = Registry::builtin()
        .from_toml_str(
            &text,
            "given.toml",
            pcpmodel::workload::registry::Origin::Builtin,
        )
        .unwrap();
    let m = Machine::builtin("icelake-server").unwrap();
    let p = w.predict(&m, &Knobs::default()).unwrap();
    let fixed = p.output("fixed_ns").unwrap();
    assert!(
        (fixed - 2000.0 / m.clock.base_ghz.value).abs() < 1e-9,
        "{fixed}"
    );
    assert_eq!(p.output("score"), None);
}

/// Producer-consumer pairs queue on their node's zone->lock: one pair is the unqueued model
/// (slowdown exactly 1, so thread 004's single-pair numbers are untouched), and more pairs on a
/// node can only slow each pair down (crate::model::pairqueue).
#[test]
fn producer_consumer_pairs_queue_on_the_zone_lock() {
    let w = pcpmodel::workload::resolve("iperf3-tcp").unwrap();
    let m = pcpmodel::Machine::builtin("epyc-9965-2s").unwrap();
    let run = |pairs: u32| {
        let p = w
            .predict(
                &m,
                &pcpmodel::workload::Knobs {
                    tasks: Some(pairs),
                    nodes: Some("one".into()),
                    means_only: true,
                    ..Default::default()
                },
            )
            .unwrap();
        (
            p.output("queue_slowdown").unwrap(),
            p.throughput_per_task,
            p.output("zone_lock_utilisation").unwrap(),
        )
    };
    let (s1, t1, _) = run(1);
    assert_eq!(s1, 1.0);
    let mut last = (s1, t1);
    for n in [4, 16, 64] {
        let (s, t, u) = run(n);
        assert!(
            s >= last.0 && t <= last.1 * (1.0 + 1e-9),
            "{n}: {s} {t} vs {last:?}"
        );
        assert!((0.0..=1.0 + 1e-9).contains(&u), "{u}");
        last = (s, t);
    }
}

/// The free_high trigger's run of frees follows `consumer_allocs_per_free` when the file gives
/// no `params.free_run_pages` (2^order / a pages, random interleaving), so a pure consumer
/// (a = 0, runs that never end) and one that allocates once per billion frees predict the same:
/// the model is continuous in a at 0 (it once jumped from 1287 to 1339 ns per page for
/// lmbench on icelake-server, where a > 0 dropped the trigger altogether). The free_high share
/// at a = 1e-9 differs from a = 0 by exp(-T / 8e9) - exp(-T / 1e9) for thresholds T of a few
/// hundred pages, under 1e-6: the predictions agree to 1e-6.
#[test]
fn producer_consumer_is_continuous_in_consumer_allocations_at_zero() {
    let m = Machine::builtin("icelake-server").unwrap();
    let at = |a: f64| {
        let mut w = resolve("lmbench-af-unix").unwrap();
        w.spec
            .params
            .get_mut("consumer_allocs_per_free")
            .expect("lmbench gives it")
            .value = a;
        w.predict(&m, &Knobs::default()).unwrap().ns_per_op
    };
    let (zero, tiny, small) = (at(0.0), at(1e-9), at(1e-3));
    assert!((tiny / zero - 1.0).abs() < 1e-6, "{zero} vs {tiny}");
    // One allocation per thousand frees (a run of 8000 pages) changes little either.
    assert!((small / zero - 1.0).abs() < 0.01, "{zero} vs {small}");
}
