//! Zone layout of a machine and the kernel configuration built on it.

use approx::assert_abs_diff_eq;
use pcpmodel::kernel::layout::{zone_layout, DMA_MANAGED_PAGES};
use pcpmodel::kernel::{
    configure, KernelOptions, KernelVersion, MinFreeRule, PcpHigh, ThpMode, ZoneKind,
};
use pcpmodel::Machine;

fn icelake() -> Machine {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/machines/icelake-2s-test.toml");
    Machine::from_path(&path).unwrap()
}

#[test]
fn layout_of_the_seed_004_machine() {
    let l = zone_layout(&icelake()).unwrap();
    let managed: Vec<(u32, ZoneKind, u64)> = l
        .zones
        .iter()
        .map(|z| (z.node, z.kind, z.managed_pages))
        .collect();
    // node_pages = 65536 * 256 = 16,777,216; memmap = 262,144; reserved = 16,384.
    assert_eq!(
        managed,
        vec![
            (0, ZoneKind::Dma, DMA_MANAGED_PAGES),
            (0, ZoneKind::Dma32, 2048 * 256 - 4096),
            (0, ZoneKind::Normal, 16_777_216 - 524_288 - 262_144 - 16_384),
            (1, ZoneKind::Normal, 16_777_216 - 262_144 - 16_384),
        ]
    );
    assert_eq!(l.cpus_per_node, vec![64, 64]);
    assert_eq!(l.online_cpus, 128);
}

/// DONE-WHEN of the kernel task: seed 004 says "the pcp->high capped at 421" on this machine
/// with 5.18; the formulas give 420 with this layout. Tolerance: +/- 1 page (the thread gives
/// no managed counts, so the layout is an estimate).
#[test]
fn kernel_5_18_normal_high_is_421_within_one() {
    let cfg = configure(
        &icelake(),
        KernelVersion::new(5, 18),
        KernelOptions::default(),
    )
    .unwrap();
    assert_eq!(cfg.min_free.rule, MinFreeRule::ThpRaise);
    assert_eq!(cfg.min_free.min_free_kbytes, 90_112); // 4 zones * 22528 kB
    let normal = cfg.zone(0, ZoneKind::Normal).unwrap();
    assert_eq!(normal.pcp.batch_pages, 63);
    let PcpHigh::Fixed { high_pages } = normal.pcp.high else {
        panic!("5.18 has a fixed pcp->high")
    };
    assert_abs_diff_eq!(f64::from(high_pages), 421.0, epsilon = 1.0);
}

#[test]
fn kernel_6_18_normal_high_min_and_max() {
    let cfg = configure(
        &icelake(),
        KernelVersion::new(6, 18),
        KernelOptions::default(),
    )
    .unwrap();
    let normal = cfg.zone(0, ZoneKind::Normal).unwrap();
    let PcpHigh::AutoTuned {
        high_min_pages,
        high_max_pages,
    } = normal.pcp.high
    else {
        panic!("6.18 auto-tunes pcp->high")
    };
    // high_min is 5.18's fixed high (zone_highsize at the default fraction): the same 421 from
    // seed 004 within one page, for the same reason (the layout is an estimate).
    assert_abs_diff_eq!(f64::from(high_min_pages), 421.0, epsilon = 1.0);
    // floor(floor(15,974,400 / 8) / 64) = 31,200: "~31,2xx".
    assert_eq!(high_max_pages, 31_200);
}

#[test]
fn without_thp_the_high_is_lower() {
    let opts = KernelOptions {
        thp: ThpMode::Never,
        ..KernelOptions::default()
    };
    let cfg = configure(&icelake(), KernelVersion::new(5, 18), opts).unwrap();
    assert_eq!(cfg.min_free.rule, MinFreeRule::Sqrt);
    let PcpHigh::Fixed { high_pages } = cfg.zone(0, ZoneKind::Normal).unwrap().pcp.high else {
        panic!()
    };
    // design note: about 337 without the khugepaged raise. The formulas give 336 on this
    // layout; +/- 1 page as for 421 above (the layout's managed counts are an estimate).
    assert_abs_diff_eq!(f64::from(high_pages), 337.0, epsilon = 1.0);
}

#[test]
fn kernel_5_13_high_is_six_batches() {
    let cfg = configure(
        &icelake(),
        KernelVersion::new(5, 13),
        KernelOptions::default(),
    )
    .unwrap();
    let n = cfg.zone(1, ZoneKind::Normal).unwrap();
    assert_eq!(n.pcp.batch_pages, 63);
    assert_eq!(n.pcp.high, PcpHigh::Fixed { high_pages: 378 });
    let dma = cfg.zone(0, ZoneKind::Dma).unwrap();
    assert_eq!(dma.pcp.batch_pages, 1);
    assert_eq!(dma.pcp.high, PcpHigh::Fixed { high_pages: 0 });
}

#[test]
fn too_small_memory_is_an_error_not_a_panic() {
    let mut m = icelake();
    m.memory.node_mib.value = vec![2048, 65536];
    let e = zone_layout(&m).unwrap_err().to_string();
    assert!(e.contains("memory.node_mib[0]"), "{e}");
    let mut m = icelake();
    m.memory.node_mib.value = vec![65536];
    assert!(zone_layout(&m)
        .unwrap_err()
        .to_string()
        .contains("node_mib"));
    let mut m = icelake();
    m.memory.below_4g_mib.value = 16;
    assert!(zone_layout(&m)
        .unwrap_err()
        .to_string()
        .contains("below_4g_mib"));
    let mut m = icelake();
    m.topology.numa_nodes.value = 0;
    assert!(zone_layout(&m).is_err());
}

#[test]
fn a_configured_zone_gives_a_pcp_state_to_step() {
    let cfg = configure(
        &icelake(),
        KernelVersion::new(5, 18),
        KernelOptions::default(),
    )
    .unwrap();
    let mut s = cfg.pcp_state(0, ZoneKind::Normal).unwrap();
    let mut holds = Vec::new();
    for _ in 0..2000 {
        holds.extend(s.free(0).unwrap().drained_pages_per_hold);
    }
    // high 420 here (not 421): 63, 126, 252, then high - batch = 357.
    assert_eq!(&holds[..4], &[63, 126, 252, 357]);
    assert!(cfg.pcp_state(1, ZoneKind::Dma).is_err());
    let cfg = configure(
        &icelake(),
        KernelVersion::new(6, 18),
        KernelOptions::default(),
    )
    .unwrap();
    let s = cfg.pcp_state(1, ZoneKind::Normal).unwrap();
    assert_eq!(s.pcp_batch_scale_max(), Some(5));
    assert_eq!(s.high_pages, 0, "pcp->high starts at 0 on 6.7+");
}

/// Managed pages read from a host's zoneinfo replace the derived ones; a count the zone cannot
/// hold (more than it spans) or one entry short is an error naming the field.
#[test]
fn managed_pages_from_the_host_replace_the_derivation_and_are_checked() {
    use pcpmodel::Sourced;
    let mut m = icelake();
    let derived = zone_layout(&m).unwrap();
    let normal = |l: &pcpmodel::kernel::layout::ZoneLayout, n: u32| {
        l.zones
            .iter()
            .find(|z| z.node == n && z.kind == ZoneKind::Normal)
            .unwrap()
            .managed_pages
    };
    let given: Vec<u64> = (0..2).map(|n| normal(&derived, n) - 1000).collect();
    m.memory.normal_managed_pages = Some(Sourced::new(given.clone(), "detected: test"));
    let l = zone_layout(&m).unwrap();
    assert_eq!(normal(&l, 0), given[0]);
    assert_eq!(normal(&l, 1), given[1]);
    m.memory.normal_managed_pages = Some(Sourced::new(vec![given[0]], "detected: test"));
    let e = zone_layout(&m).unwrap_err().to_string();
    assert!(e.contains("memory.normal_managed_pages"), "{e}");
    m.memory.normal_managed_pages = Some(Sourced::new(vec![u64::MAX / 8, 1], "detected: test"));
    let e = zone_layout(&m).unwrap_err().to_string();
    assert!(e.contains("memory.normal_managed_pages[0]"), "{e}");
}
