//! Several memcgs sharing one CPU's charge stock (issue 13 item 6): the limits the kernel code
//! fixes (one memcg is thread 001's model exactly; per-call random interleaving on a one-memcg
//! stock drains once per switch; seven slots hold up to seven memcgs without evicting) and the
//! kind's `--memcgs`.

use pcpmodel::hw::machine::Machine;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::model::memcg::{
    simulate_shared_stock, simulate_stock, Interleave, MemcgModel, SendfileFlow, StockCode,
    FLOW_CYCLE_SKBS,
};
use pcpmodel::workload::kind::Knobs;
use pcpmodel::workload::registry::resolve;

fn model(memcgs: u32, redraw: f64, code: StockCode) -> MemcgModel {
    let m = Machine::builtin("memcg-72cpu").unwrap();
    MemcgModel::new(&m, 36, 3)
        .unwrap()
        .with_memcgs(Interleave { memcgs, redraw }, code)
        .unwrap()
}

fn params() -> Vec<f64> {
    pcpmodel::validate::t001::calibrated_params().unwrap().0
}

#[test]
fn one_memcg_is_thread_001s_model_exactly() {
    let m = Machine::builtin("memcg-72cpu").unwrap();
    let p = params();
    for batch in [32, 64] {
        let old = MemcgModel::new(&m, 36, 3)
            .unwrap()
            .estimate(&p, batch)
            .unwrap();
        for code in [StockCode::Single, StockCode::MultiRandom] {
            let new = model(1, 1.0, code).estimate(&p, batch).unwrap();
            assert_eq!(new, old);
        }
    }
    // The shared-stock code with one memcg runs the same rules as simulate_stock: the same
    // counts, call for call.
    let ops = SendfileFlow::thread_001().cpu_ops(FLOW_CYCLE_SKBS).unwrap();
    for role in [&ops.sender, &ops.receiver] {
        for b in [8, 32, 64] {
            let one = simulate_stock(b, role, 1, 4).unwrap();
            let il = Interleave {
                memcgs: 1,
                redraw: 1.0,
            };
            let shared = simulate_shared_stock(b, StockCode::Single, il, role, 1, 4).unwrap();
            assert_eq!(shared.stock, one);
            assert_eq!(shared.switches + shared.evictions, 0);
        }
    }
}

#[test]
fn random_interleaving_on_one_slot_drains_once_per_switch() {
    let p = params();
    let many = model(64, 1.0, StockCode::Single);
    let t = many.switch_terms(64, p[2]).unwrap();
    // Switch probability s (M − 1)/M = 63/64; the simulation draws ~10^6 calls, so its share is
    // within ~0.001 of that (binomial standard error 1.2e-4).
    assert!((t.switch_probability - 63.0 / 64.0).abs() < 0.002, "{t:?}");
    // A switch evicts the cached memcg; the drain walks unless the stock was empty, which needs
    // the previous memcg to have overflowed it (> 64 pages) in its run: at least 4 calls of 16-19
    // pages in a row for one memcg, probability ~ (1/64)^3. So drains per switch ~ 1.
    assert!(
        t.drains_per_switch > 0.98 && t.drains_per_switch <= 1.0,
        "{t:?}"
    );
    // Each switch also costs the new memcg a charge walk (its consume_stock() fails): hierarchy
    // walks per payload page go from ~2.15/64 per role to about one per call.
    let one = model(1, 1.0, StockCode::Single).estimate(&p, 64).unwrap();
    let e = many.estimate(&p, 64).unwrap();
    assert!(e.walks_per_page > 10.0 * one.walks_per_page, "{e:?}");
    assert!(e.throughput_mbps < one.throughput_mbps);
}

#[test]
fn seven_slots_hold_seven_memcgs_without_evicting() {
    let p = params();
    let one = model(1, 1.0, StockCode::Single);
    let seven = model(7, 1.0, StockCode::MultiRandom);
    let t = seven.switch_terms(64, p[2]).unwrap();
    // Seven memcgs never find all seven slots taken by others: no eviction at all.
    assert_eq!(t.eviction_drains_per_charge, 0.0, "{t:?}");
    // Each memcg's slot sees that memcg's calls in their order, as a stock of its own would:
    // walks per payload page as with one memcg, up to the stock left at the ends of the window
    // (< 64 pages of ~70 000 per memcg and role: 0.1 %; 1 % allowed).
    let a = one.stock_rates(64, p[2]).unwrap();
    let b = seven.stock_rates(64, p[2]).unwrap();
    for r in 0..2 {
        for k in 0..2 {
            let (x, y) = (a[r][k], b[r][k]);
            assert!((x - y).abs() <= 0.01 * x.max(y), "{a:?} vs {b:?}");
        }
    }
    // Same walks, but each memcg's own counter lines carry 1/7 of the leaf traffic: never slower.
    let e1 = one.estimate(&p, 64).unwrap();
    let e7 = seven.estimate(&p, 64).unwrap();
    assert!(e7.throughput_mbps >= e1.throughput_mbps * (1.0 - 1e-9));
    // On a one-memcg stock (≤ 6.15) the same seven memcgs drain at most switches.
    let single = model(7, 1.0, StockCode::Single)
        .switch_terms(64, p[2])
        .unwrap();
    assert!(single.eviction_drains_per_charge > 0.5, "{single:?}");
}

#[test]
fn many_memcgs_miss_seven_slots_as_uniform_references_do() {
    let p = params();
    // 70 memcgs drawn uniformly and independently per call: whatever the victim choice, the
    // slots hold at most 7 of the 70, so a call finds its memcg with probability ≤ 7/70 (less
    // when an overflow drain has emptied a slot). Misses: 0.9 to 0.92 (overflow drains are
    // rare: a slot has to gather > 64 pages between evictions).
    for code in [StockCode::MultiRandom, StockCode::MultiRoundRobin] {
        let t = model(70, 1.0, code).switch_terms(64, p[2]).unwrap();
        assert!(
            t.miss_probability > 0.9 - 0.003 && t.miss_probability < 0.92,
            "{code:?} {t:?}"
        );
    }
}

#[test]
fn kind_reads_memcgs_and_the_kernel() {
    let w = resolve("memcg-netperf").unwrap();
    let m = Machine::builtin("memcg-72cpu").unwrap();
    let base = w.predict(&m, &Knobs::default()).unwrap();
    let one = w
        .predict(&m, &Knobs::default().with_extra("memcgs", 1.0))
        .unwrap();
    assert_eq!(one.ns_per_op, base.ns_per_op);
    assert_eq!(one.output("memcgs"), Some(1.0));
    let k8 = Knobs::default().with_extra("memcgs", 8.0);
    let old = w.predict(&m, &k8).unwrap();
    let new = w
        .predict(
            &m,
            &Knobs {
                kernel: Some(KernelVersion::new(6, 16)),
                ..k8.clone()
            },
        )
        .unwrap();
    // 6.0 (reference kernel): one memcg per stock, 8 memcgs interleaved per call: drains.
    assert!(old.ns_per_op > base.ns_per_op);
    assert!(old.output("eviction_drains_per_charge").unwrap() > 0.5);
    // 6.16: 8 memcgs on 7 slots still evict, far less than on one slot.
    assert!(new.ns_per_op < old.ns_per_op);
    // More memcgs than instances: each memcg needs a task.
    assert!(w
        .predict(&m, &Knobs::default().with_extra("memcgs", 37.0))
        .is_err());
    assert!(w
        .predict(&m, &Knobs::default().with_extra("memcg_redraw", 1.5))
        .is_err());
}
