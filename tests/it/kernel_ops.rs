//! The PCP state machine stepped through known sequences.

use pcpmodel::kernel::ops::{MigrateType, PcpState, ZoneFlags};
use pcpmodel::kernel::{KernelVersion, PcpHigh, PcpLimits};

fn fixed(batch: u32, high: u32) -> PcpLimits {
    PcpLimits {
        batch_pages: batch,
        high: PcpHigh::Fixed { high_pages: high },
    }
}

fn auto(batch: u32, high_min: u32, high_max: u32) -> PcpLimits {
    PcpLimits {
        batch_pages: batch,
        high: PcpHigh::AutoTuned {
            high_min_pages: high_min,
            high_max_pages: high_max,
        },
    }
}

/// Frees `n` order-0 pages and returns every non-empty hold, in order.
fn free_many(s: &mut PcpState, n: usize, order: u8) -> Vec<u32> {
    let mut holds = Vec::new();
    for _ in 0..n {
        holds.extend(s.free(order).unwrap().drained_pages_per_hold);
    }
    holds
}

#[test]
fn v5_18_frees_drain_63_126_252_then_358() {
    // kernel-pcp.md §4a: high 421, batch 63, free_factor grows while batch << ff < high - batch.
    let mut s = PcpState::new(KernelVersion::new(5, 18), fixed(63, 421), None).unwrap();
    let holds = free_many(&mut s, 2000, 0);
    assert_eq!(&holds[..6], &[63, 126, 252, 358, 358, 358]);
    assert!(holds.iter().all(|&h| h <= 421 - 63));
    // The first drain happens exactly when count reaches high.
    let mut s = PcpState::new(KernelVersion::new(5, 18), fixed(63, 421), None).unwrap();
    for _ in 0..420 {
        assert!(s.free(0).unwrap().drained_pages_per_hold.is_empty());
    }
    assert_eq!(s.free(0).unwrap().drained_pages_per_hold, vec![63]);
    assert_eq!(s.count_pages, 421 - 63);
}

#[test]
fn v5_18_an_allocation_halves_free_factor() {
    let mut s = PcpState::new(KernelVersion::new(5, 18), fixed(63, 421), None).unwrap();
    free_many(&mut s, 421 + 63, 0); // two drains (63, 126): free_factor 2
    assert_eq!(s.free_factor, 2);
    let a = s.alloc(0).unwrap();
    assert_eq!(a.refill_pages, 0, "the list had pages");
    assert_eq!(s.free_factor, 1);
}

#[test]
fn v5_18_free_high_drains_everything_on_a_high_order_free() {
    let mut s = PcpState::new(KernelVersion::new(5, 18), fixed(63, 421), None).unwrap();
    free_many(&mut s, 421, 0); // one drain, free_factor 1, count 358
    assert_eq!(s.free_factor, 1);
    let step = s.free(2).unwrap();
    assert!(step.free_high);
    assert_eq!(step.drained_pages_per_hold, vec![358 + 4]);
    assert_eq!(s.count_pages, 0);
    // 5.17 has no free_high.
    let mut s = PcpState::new(KernelVersion::new(5, 17), fixed(63, 421), None).unwrap();
    free_many(&mut s, 421, 0);
    let step = s.free(2).unwrap();
    assert!(!step.free_high);
    assert!(step.drained_pages_per_hold.is_empty());
}

#[test]
fn v5_14_reclaim_active_caps_high_at_four_batches() {
    let mut s = PcpState::new(KernelVersion::new(5, 15), fixed(63, 421), None).unwrap();
    s.zone_flags = ZoneFlags {
        reclaim_active: true,
        below_high: false,
    };
    let holds = free_many(&mut s, 252, 0);
    assert_eq!(holds, vec![63]);
}

#[test]
fn v5_13_drains_one_batch_at_high() {
    let mut s = PcpState::new(KernelVersion::new(5, 13), fixed(63, 378), None).unwrap();
    let holds = free_many(&mut s, 2000, 0);
    assert!(holds.iter().all(|&h| h == 63), "{holds:?}");
    // DMA boot-like pageset: high 0, batch 1: every free goes straight back.
    let mut s = PcpState::new(KernelVersion::new(5, 13), fixed(1, 0), None).unwrap();
    assert_eq!(free_many(&mut s, 5, 0), vec![1; 5]);
}

#[test]
fn refill_sizes_before_6_7() {
    let mut s = PcpState::new(KernelVersion::new(6, 1), fixed(63, 421), None).unwrap();
    let a = s.alloc(0).unwrap();
    assert_eq!((a.refill_blocks, a.refill_pages), (63, 63));
    assert_eq!(s.count_pages, 62);
    let a = s.alloc(2).unwrap(); // max(63 >> 2, 2) = 15 blocks of 4 pages
    assert_eq!((a.refill_blocks, a.refill_pages), (15, 60));
    let a = s.alloc(5).unwrap(); // order 5 is not on PCP lists
    assert!(a.bypassed_pcp);
    assert_eq!(a.refill_pages, 32);
    // 5.12: only order 0 on PCP lists.
    let mut s = PcpState::new(KernelVersion::new(5, 12), fixed(63, 378), None).unwrap();
    assert!(s.alloc(1).unwrap().bypassed_pcp);
}

#[test]
fn v6_7_frees_hold_at_most_batch_shifted_by_scale() {
    for (scale, cap) in [(5u8, 2016u32), (0, 63), (3, 504)] {
        let mut s = PcpState::new(
            KernelVersion::new(6, 18),
            auto(63, 421, 31_200),
            Some(scale),
        )
        .unwrap();
        let holds = free_many(&mut s, 50_000, 0);
        assert!(!holds.is_empty());
        assert!(holds.iter().all(|&h| h <= cap), "scale {scale}: {holds:?}");
        assert_eq!(*holds.iter().max().unwrap(), cap, "scale {scale}");
    }
    // The first drain at high_min: clamp(free_count 421, 63, 421 - 63) = 358; high grows to 484.
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), None).unwrap();
    let holds = free_many(&mut s, 421, 0);
    assert_eq!(holds, vec![358]);
    assert_eq!(s.high_pages, 484);
}

#[test]
fn v6_19_frees_in_chunks_of_batch() {
    let mut s = PcpState::new(KernelVersion::new(6, 19), auto(63, 421, 31_200), None).unwrap();
    let mut totals = Vec::new();
    for _ in 0..50_000 {
        let step = s.free(0).unwrap();
        assert!(step.drained_pages_per_hold.iter().all(|&h| h <= 63));
        if step.drained_pages() > 0 {
            totals.push(step.drained_pages());
        }
    }
    // Same totals per free as 6.18, only split: the largest free still moves 2016 pages.
    assert_eq!(totals.iter().max(), Some(&2016));
    let step = {
        let mut s6 = PcpState::new(KernelVersion::new(6, 19), auto(63, 421, 31_200), None).unwrap();
        let mut last = None;
        for _ in 0..421 {
            let st = s6.free(0).unwrap();
            if st.drained_pages() > 0 {
                last = Some(st);
            }
        }
        last.unwrap()
    };
    assert_eq!(step.drained_pages_per_hold, vec![63, 63, 63, 63, 63, 43]);
}

#[test]
fn v6_7_alloc_factor_doubles_refills_up_to_scale() {
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), Some(5)).unwrap();
    let mut refills = Vec::new();
    for _ in 0..20_000 {
        let a = s.alloc(0).unwrap();
        if a.refill_pages > 0 {
            refills.push(a.refill_pages);
        }
    }
    assert_eq!(&refills[..6], &[63, 126, 252, 504, 1008, 2016]);
    assert!(refills.iter().all(|&r| r <= 2016));
    // A free halves alloc_factor.
    let before = s.alloc_factor;
    s.free(0).unwrap();
    assert_eq!(s.alloc_factor, before >> 1);
    // Scale 0: every refill is one batch.
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), Some(0)).unwrap();
    for _ in 0..5000 {
        let a = s.alloc(0).unwrap();
        assert!(a.refill_pages == 0 || a.refill_pages == 63);
    }
}

#[test]
fn v6_7_free_high_needs_two_high_order_frees_in_a_row() {
    let v = KernelVersion::new(6, 14); // threshold free_count >= batch
    let mut s = PcpState::new(v, auto(63, 421, 31_200), None).unwrap();
    s.add_pages(0, 100).unwrap();
    for _ in 0..70 {
        // order-0 frees build up free_count without reaching high
        s.free(0).unwrap();
    }
    assert!(s.free_count_pages >= 63);
    assert!(
        !s.free(1).unwrap().free_high,
        "first high-order free only sets the flag"
    );
    let step = s.free(1).unwrap();
    assert!(step.free_high);
    assert_eq!(step.drained_pages_per_hold, vec![174]); // min(count, 2016): everything
                                                        // 6.16+: threshold batch + high_min / 2 = 273.
    let mut s = PcpState::new(KernelVersion::new(6, 16), auto(63, 421, 31_200), None).unwrap();
    for _ in 0..70 {
        s.free(0).unwrap();
    }
    s.free(1).unwrap();
    assert!(!s.free(1).unwrap().free_high, "free_count 74 < 273");
}

#[test]
fn v6_7_decay_lowers_high_by_an_eighth() {
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), None).unwrap();
    s.high_pages = 8000;
    s.add_pages(0, 7000).unwrap();
    let d = s.decay_pcp_high().unwrap();
    assert_eq!(s.high_pages, 7000);
    assert!(d.todo);
    assert!(d.drained_pages_per_hold.is_empty());
    let d = s.decay_pcp_high().unwrap();
    assert_eq!(s.high_pages, 6125);
    assert_eq!(d.drained_pages_per_hold, vec![875]);
    // Floors at high_min, and reports nothing more to do.
    for _ in 0..100 {
        s.decay_pcp_high().unwrap();
    }
    assert_eq!(s.high_pages, 421);
    assert!(!s.decay_pcp_high().unwrap().todo);
    // Not on 6.6.
    let mut old = PcpState::new(KernelVersion::new(6, 6), fixed(63, 421), None).unwrap();
    assert!(old.decay_pcp_high().is_err());
}

#[test]
fn settling_leaves_the_lists_an_idle_cpu_keeps_at_the_setting() {
    // A list left at 9,682 pages by the default (its live high too), the sysctl then fixing
    // high at 4,096 (the sysctl sets high_min/high_max, not the live high): the repeated decay
    // (what `record`'s vm.stat_refresh writes run) lowers the high by an eighth a time and
    // drains the 5,586 pages over 4,096.
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 4096, 4096), None).unwrap();
    s.high_pages = 9682;
    s.add_pages(0, 9682).unwrap();
    assert_eq!(s.settle(4096), 9682 - 4096);
    assert_eq!((s.count_pages, s.high_pages), (4096, 4096));
    // An auto-tuned live high decays to high_min; the lists keep what fits under it.
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), None).unwrap();
    s.high_pages = 8000;
    s.add_pages(0, 300).unwrap();
    assert_eq!(s.settle(4096), 0);
    assert_eq!((s.count_pages, s.high_pages), (300, 421));
    // 6.6 has no decay: nothing moves.
    let mut old = PcpState::new(KernelVersion::new(6, 6), fixed(63, 421), None).unwrap();
    old.add_pages(0, 1000).unwrap();
    assert_eq!(old.settle(4096), 0);
}

#[test]
fn v6_19_decay_drains_in_batch_chunks() {
    let mut s = PcpState::new(KernelVersion::new(6, 19), auto(63, 421, 31_200), None).unwrap();
    s.high_pages = 1000;
    s.add_pages(0, 1000).unwrap();
    s.high_pages = 1000;
    let d = s.decay_pcp_high().unwrap();
    assert_eq!(s.high_pages, 875);
    assert_eq!(d.drained_pages_per_hold, vec![63, 62]);
}

#[test]
fn drain_pages_zone_holds() {
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), Some(5)).unwrap();
    s.add_pages(0, 5000).unwrap();
    assert_eq!(s.drain_pages_zone(), vec![2016, 2016, 968]);
    let mut s = PcpState::new(KernelVersion::new(6, 1), fixed(63, 421), None).unwrap();
    s.add_pages(0, 5000).unwrap();
    assert_eq!(s.drain_pages_zone(), vec![5000]);
}

#[test]
fn reclaim_and_below_high_lower_the_live_high() {
    let mut s = PcpState::new(KernelVersion::new(6, 18), auto(63, 421, 31_200), None).unwrap();
    s.high_pages = 3000;
    s.zone_flags.reclaim_active = true;
    let step = s.free(0).unwrap();
    // high = max(3000 - max(free_count 1, 63), 421) = 2937; returns min(252, 2937): 1 < 252.
    assert_eq!(s.high_pages, 2937);
    assert!(step.drained_pages_per_hold.is_empty());
    s.zone_flags = ZoneFlags {
        reclaim_active: false,
        below_high: true,
    };
    s.free(0).unwrap();
    assert_eq!(s.high_pages, 2874);
}

#[test]
fn bad_parameters_are_errors() {
    let v618 = KernelVersion::new(6, 18);
    assert!(PcpState::new(v618, auto(63, 421, 31_200), Some(7)).is_err());
    assert!(PcpState::new(KernelVersion::new(6, 1), fixed(63, 421), Some(5)).is_err());
    assert!(PcpState::new(KernelVersion::new(6, 6), fixed(63, 421), Some(5)).is_ok());
    assert!(PcpState::new(v618, fixed(63, 421), None).is_err());
    assert!(PcpState::new(KernelVersion::new(5, 18), auto(63, 1, 2), None).is_err());
    assert!(PcpState::new(v618, auto(63, 500, 400), None).is_err());
    assert!(PcpState::new(v618, auto(0, 400, 500), None).is_err());
    let mut s = PcpState::new(v618, auto(63, 421, 31_200), None).unwrap();
    assert!(s.alloc(11).is_err());
    assert!(s.free(11).is_err());
}

#[test]
fn v6_6_backport_caps_free_factor() {
    let mut s = PcpState::new(KernelVersion::new(6, 6), fixed(63, 10_000), Some(1)).unwrap();
    let holds = free_many(&mut s, 20_000, 0);
    assert!(holds.iter().all(|&h| h <= 126), "{holds:?}");
    let mut s = PcpState::new(KernelVersion::new(6, 6), fixed(63, 10_000), None).unwrap();
    let holds = free_many(&mut s, 40_000, 0);
    assert_eq!(holds.iter().max(), Some(&(10_000 - 63)));
}

#[test]
fn each_migratetype_has_its_own_list_and_a_drain_takes_the_freed_list_first() {
    // 6.6, high 100, batch 10. A movable list full of pages does not serve an unmovable
    // allocation: rmqueue_pcplist() looks only at the list of the order and type asked for.
    let mut s = PcpState::new(KernelVersion::new(6, 6), fixed(10, 100), None).unwrap();
    s.add_pages_mt(0, MigrateType::Movable, 50).unwrap();
    let a = s.alloc_mt(0, MigrateType::Unmovable).unwrap();
    assert_eq!(a.refill_pages, 10);
    assert_eq!(s.list_blocks_mt(0, MigrateType::Unmovable), 9);
    assert_eq!(s.list_blocks_mt(0, MigrateType::Movable), 50);
    // Unmovable frees bring the count (59 + n) to high at the 41st: the drain starts at the
    // unmovable list (free_pcppages_bulk()'s pindex), and only when that list is empty moves
    // on, in pindex order, to the movable one.
    let mut drained = 0;
    for _ in 0..41 {
        drained += s
            .free_mt(0, MigrateType::Unmovable)
            .unwrap()
            .drained_pages();
    }
    assert!(drained > 0);
    let unmovable_left = s.list_blocks_mt(0, MigrateType::Unmovable);
    let movable_left = s.list_blocks_mt(0, MigrateType::Movable);
    assert_eq!(unmovable_left + movable_left, s.count_pages);
    assert!(
        unmovable_left == 0 || movable_left == 50,
        "the movable list was drained while the unmovable one held {unmovable_left}"
    );
    // A reclaimable allocation refills its own list, whatever the others hold.
    assert!(
        s.alloc_mt(0, MigrateType::Reclaimable)
            .unwrap()
            .refill_pages
            > 0
    );
    // Kernel numbers past the PCP types are freed to the movable lists.
    assert_eq!(MigrateType::from_kernel(4), MigrateType::Movable);
    assert_eq!(MigrateType::from_kernel(2), MigrateType::Reclaimable);
}
