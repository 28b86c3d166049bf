//! The kernel formulas against values quoted in the kernel source and the real 6.18 host.

use pcpmodel::kernel::layout::{ZoneKind, ZoneSpec};
use pcpmodel::kernel::pageset::{
    pageset_batch, zone_batchsize, zone_highsize, zone_set_pageset_high_and_batch, PagesetInputs,
    PagesetTunables,
};
use pcpmodel::kernel::watermarks::{
    calculate_min_free_kbytes, decide_min_free_kbytes, nr_free_buffer_pages,
    set_recommended_min_free_kbytes, setup_per_zone_wmarks, ThpMode,
};
use pcpmodel::kernel::{Era, KernelVersion, MinFreeRule, PcpHigh};

fn v(major: u32, minor: u32) -> KernelVersion {
    KernelVersion::new(major, minor)
}

fn zone(kind: ZoneKind, managed: u64) -> ZoneSpec {
    ZoneSpec {
        node: 0,
        kind,
        present_pages: managed,
        managed_pages: managed,
    }
}

/// The real 6.18 host of tests/fixtures/zoneinfo/host-6.18.txt.
fn host_zones() -> Vec<ZoneSpec> {
    vec![
        zone(ZoneKind::Dma, 3840),
        zone(ZoneKind::Dma32, 772_807),
        zone(ZoneKind::Normal, 196_608),
        zone(ZoneKind::Movable, 0),
        zone(ZoneKind::Device, 0),
    ]
}

#[test]
fn min_free_kbytes_follows_the_table_in_the_kernel_comment() {
    // init_per_zone_wmark_min() comment: 16MB: 512k ... 4096MB: 8192k, 16384MB: 16384k.
    for (mb, kb) in [
        (16u64, 512u64),
        (64, 1024),
        (1024, 4096),
        (4096, 8192),
        (16384, 16384),
    ] {
        assert_eq!(
            calculate_min_free_kbytes(mb * 1024, v(6, 18)),
            kb,
            "{mb} MB"
        );
    }
    assert_eq!(calculate_min_free_kbytes(1, v(6, 18)), 128);
    let huge = 16u64 << 40; // 16 TiB in kB
    assert_eq!(calculate_min_free_kbytes(huge, v(5, 4)), 65_536);
    assert_eq!(calculate_min_free_kbytes(huge, v(5, 10)), 262_144);
}

#[test]
fn khugepaged_recommends_22528_kb_per_zone() {
    let big = 100_000_000;
    assert_eq!(set_recommended_min_free_kbytes(2, big), 45_056);
    assert_eq!(set_recommended_min_free_kbytes(3, big), 67_584);
    assert_eq!(set_recommended_min_free_kbytes(4, big), 90_112);
    // Capped at nr_free_buffer_pages / 20 on small machines: 100,000 pages -> 5000 pages.
    assert_eq!(set_recommended_min_free_kbytes(3, 100_000), 20_000);
}

#[test]
fn host_6_18_watermarks_reproduce() {
    let zones = host_zones();
    let d = decide_min_free_kbytes(&zones, ThpMode::Madvise, 10, v(6, 18)).unwrap();
    assert_eq!(d.rule, MinFreeRule::ThpRaise);
    assert_eq!(d.min_free_kbytes, 67_584);
    assert_eq!(d.thp_nr_zones, 3);
    let wm = setup_per_zone_wmarks(&zones, 67_584, 10, v(6, 18)).unwrap();
    let got: Vec<(u64, u64, u64, Option<u64>)> = wm
        .iter()
        .map(|w| (w.min_pages, w.low_pages, w.high_pages, w.promo_pages))
        .collect();
    assert_eq!(
        got,
        vec![
            (66, 82, 98, Some(114)),
            (13_416, 16_770, 20_124, Some(23_478)),
            (3413, 4266, 5119, Some(5972)),
            (32, 32, 32, Some(32)), // unpopulated Movable: clamp(0, 32, 128), no delta
            (0, 0, 0, Some(0)),
        ]
    );
    // Without THP the sqrt rule gives a much smaller reserve (kernel-pcp.md §10: Normal min
    // about 398 pages).
    let d = decide_min_free_kbytes(&zones, ThpMode::Never, 10, v(6, 18)).unwrap();
    assert_eq!(d.rule, MinFreeRule::Sqrt);
    assert_eq!(d.min_free_kbytes, 7892); // int_sqrt(973,255 * 4 * 16)
    let wm = setup_per_zone_wmarks(&zones, d.min_free_kbytes, 10, v(6, 18)).unwrap();
    assert_eq!(wm[2].min_pages, 398);
    // Before 5.18 there is no promo watermark; before 6.6 Movable counts as lowmem.
    let wm = setup_per_zone_wmarks(&zones, 67_584, 10, v(5, 15)).unwrap();
    assert_eq!(wm[2].promo_pages, None);
    assert_eq!(wm[3].min_pages, 0);
}

#[test]
fn nr_free_buffer_pages_skips_zones_above_normal() {
    let zones = vec![zone(ZoneKind::Normal, 1000), zone(ZoneKind::Movable, 500)];
    assert_eq!(nr_free_buffer_pages(&zones, None), 1000);
    assert_eq!(nr_free_buffer_pages(&zones, Some(&[100, 0])), 900);
}

#[test]
fn batch_is_63_from_688_mib_and_1_for_dma() {
    for ver in [v(5, 10), v(5, 18), v(6, 18), v(6, 19)] {
        assert_eq!(pageset_batch(196_608, ver), 63);
        assert_eq!(pageset_batch(176_128, ver), 63);
        assert_eq!(pageset_batch(176_127, ver), 31);
        // kernel-pcp.md §1 says 31 from 88,064 pages; the formula gives 31 from 90,112
        // (min(managed >> 10, 256) / 4 must reach 22).
        assert_eq!(pageset_batch(90_112, ver), 31);
        assert_eq!(pageset_batch(90_111, ver), 15);
        assert_eq!(pageset_batch(4_194_304, ver), 63); // 16 GiB
        assert_eq!(pageset_batch(3840, ver), 1);
    }
    assert_eq!(
        zone_batchsize(3840, v(6, 18)),
        0,
        "the old code returned 0 (LIFO batch:0)"
    );
    assert_eq!(zone_batchsize(3840, v(6, 19)), 1);
}

#[test]
fn highsize_matches_the_host_and_the_floor() {
    // Host Normal: low 4266 over 2 CPUs; high_max (196608 / 8) / 2.
    assert_eq!(zone_highsize(196_608, 4266, 63, 2, 0, 2, 0), 2133);
    assert_eq!(zone_highsize(196_608, 4266, 63, 2, 0, 2, 8), 12_288);
    // DMA: low 82 / 2 = 41 > 4 * batch 1.
    assert_eq!(zone_highsize(3840, 82, 1, 2, 0, 2, 0), 41);
    // The batch << 2 floor.
    assert_eq!(zone_highsize(196_608, 100, 63, 64, 0, 128, 0), 252);
    // cpu_online adds one CPU; a CPU-less node splits over all online CPUs.
    assert_eq!(zone_highsize(196_608, 4266, 63, 2, 1, 2, 0), 1422);
    assert_eq!(zone_highsize(1_000_000, 64_000, 63, 0, 0, 128, 0), 500);
}

#[test]
fn pageset_limits_per_era() {
    let inputs = PagesetInputs {
        managed_pages: 196_608,
        low_wmark_pages: 4266,
        cpus_on_node: 2,
        online_cpus: 2,
    };
    let none = PagesetTunables::default();
    let l = zone_set_pageset_high_and_batch(inputs, none, v(5, 13)).unwrap();
    assert_eq!(
        (l.batch_pages, l.high),
        (63, PcpHigh::Fixed { high_pages: 378 })
    );
    let l = zone_set_pageset_high_and_batch(inputs, none, v(6, 6)).unwrap();
    assert_eq!(l.high, PcpHigh::Fixed { high_pages: 2133 });
    let l = zone_set_pageset_high_and_batch(inputs, none, v(6, 18)).unwrap();
    assert_eq!(
        l.high,
        PcpHigh::AutoTuned {
            high_min_pages: 2133,
            high_max_pages: 12_288
        }
    );
    // percpu_pagelist_high_fraction 16: managed / 16 / 2 CPUs, auto-tuning off.
    let f16 = PagesetTunables {
        percpu_pagelist_high_fraction: 16,
        percpu_pagelist_fraction: 0,
    };
    let l = zone_set_pageset_high_and_batch(inputs, f16, v(6, 18)).unwrap();
    assert_eq!(
        l.high,
        PcpHigh::AutoTuned {
            high_min_pages: 6144,
            high_max_pages: 6144
        }
    );
    // percpu_pagelist_fraction (<= 5.13): high = managed / f, batch = min(high / 4, 96).
    let f8 = PagesetTunables {
        percpu_pagelist_high_fraction: 0,
        percpu_pagelist_fraction: 8,
    };
    let l = zone_set_pageset_high_and_batch(inputs, f8, v(5, 10)).unwrap();
    assert_eq!(
        (l.batch_pages, l.high),
        (96, PcpHigh::Fixed { high_pages: 24_576 })
    );
    // The sysctls exist only in their own range, and refuse 1..7.
    assert!(zone_set_pageset_high_and_batch(inputs, f8, v(5, 14)).is_err());
    assert!(zone_set_pageset_high_and_batch(inputs, f16, v(5, 13)).is_err());
    let f3 = PagesetTunables {
        percpu_pagelist_high_fraction: 3,
        percpu_pagelist_fraction: 0,
    };
    assert!(zone_set_pageset_high_and_batch(inputs, f3, v(6, 1)).is_err());
}

#[test]
fn versions_parse_and_fall_into_eras() {
    for (text, major, minor) in [
        ("5.18", 5, 18),
        ("6.18.44-fc-v857", 6, 18),
        ("v6.6.30", 6, 6),
        ("6.1.0-18-amd64\n", 6, 1),
        ("5.15.0+", 5, 15),
    ] {
        // Release strings (uname -r) are read by parse_release; parse takes X.Y[.Z] only.
        assert_eq!(
            KernelVersion::parse_release(text).unwrap(),
            v(major, minor),
            "{text}"
        );
    }
    for (text, major, minor) in [("5.18", 5, 18), ("6.6.30", 6, 6)] {
        assert_eq!(
            KernelVersion::parse(text).unwrap(),
            v(major, minor),
            "{text}"
        );
    }
    for junk in [
        "", "six", "6", "6.", "6.x", "6.18rc1", "1.0", ".5", "6.18.0.1",
    ] {
        assert!(KernelVersion::parse(junk).is_err(), "{junk:?}");
        assert!(KernelVersion::parse_release(junk).is_err(), "{junk:?}");
    }
    for release in ["6.18.44-fc-v857", "v6.6.30", "5.15.0+"] {
        assert!(KernelVersion::parse(release).is_err(), "{release:?}");
    }
    assert_eq!(v(5, 13).era(), Era::Legacy);
    assert_eq!(v(5, 14).era(), Era::SplitHigh);
    assert_eq!(v(6, 6).era(), Era::SplitHigh);
    assert_eq!(v(6, 7).era(), Era::AutoTune);
    assert_eq!(v(6, 18).era(), Era::AutoTune);
    assert_eq!(v(6, 19).era(), Era::BatchedFree);
    assert_eq!(v(7, 0).era(), Era::BatchedFree);
    assert!(!v(5, 17).has_free_high() && v(5, 18).has_free_high());
    assert!(!v(6, 6).has_pcp_batch_scale_max() && v(6, 7).has_pcp_batch_scale_max());
    assert!(v(6, 6).may_have_scale_max_backport());
    assert!(!v(6, 12).zoneinfo_has_high_min_max() && v(6, 13).zoneinfo_has_high_min_max());
    assert!(!v(6, 15).free_high_threshold_uses_high_min());
    assert!(v(6, 16).free_high_threshold_uses_high_min());
    assert!(!v(6, 18).frees_in_batch_chunks() && v(6, 19).frees_in_batch_chunks());
    assert_eq!(v(5, 6).min_free_kbytes_upper_bound(), 65_536);
    assert_eq!(v(5, 7).min_free_kbytes_upper_bound(), 262_144);
    assert_eq!(v(6, 18).to_string(), "6.18");
}
