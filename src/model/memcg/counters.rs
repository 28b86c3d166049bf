//! The page_counter hierarchy walked on a charge or uncharge: which cache lines each level
//! touches under each kernel variant ([`CounterCode`]), and the transfers per walk.

use serde::Serialize;

/// Which page_counter code the kernel runs (thread 001's series, each patch measured alone in
/// its v2 cover letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterCode {
    /// 6.0-rc1: `propagate_protected_usage()` always `atomic_long_xchg()`s `min_usage` and
    /// `low_usage` when protection is set; `usage` shares its line with `min`, `low`, `high`,
    /// `max`, `emin`, `min_usage`, `children_min_usage`.
    Rc1,
    /// Patch (A), "mm: page_counter: remove unneeded atomic ops for low/min": the protected usage
    /// is written only when it changes (never, here).
    FewerAtomics,
    /// Patch (B), "mm: page_counter: rearrange struct page_counter fields": `usage` alone on its
    /// line, the protection counters on a second line, the read-mostly limits on a third.
    SplitLayout,
    /// Both (A) and (B) (6.0).
    Both,
}

impl CounterCode {
    /// All variants.
    pub const ALL: [CounterCode; 4] = [
        CounterCode::Rc1,
        CounterCode::FewerAtomics,
        CounterCode::SplitLayout,
        CounterCode::Both,
    ];

    fn fewer_atomics(self) -> bool {
        matches!(self, CounterCode::FewerAtomics | CounterCode::Both)
    }

    fn split_layout(self) -> bool {
        matches!(self, CounterCode::SplitLayout | CounterCode::Both)
    }
}

/// One shared cache line a hierarchy walk touches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterLine {
    /// What the line holds, e.g. `level 1 (protected) usage`.
    pub name: String,
    /// Cache-line transfers per walk (mean of a charge walk and an uncharge walk; for
    /// `stats_flush_threshold`, per flush).
    pub transfers_per_walk: f64,
    /// Transfers per charge walk (`page_counter_try_charge()` and the `memory.high` loop).
    pub charge_transfers: f64,
    /// Transfers per uncharge walk (`page_counter_uncharge()` → `page_counter_cancel()`).
    pub uncharge_transfers: f64,
    /// Transfers per `stats_flush_threshold` flush.
    pub flush_transfers: f64,
    /// Cgroup level of the counter (0 the root; `None` for `stats_flush_threshold`): the leaf
    /// level (the depth) is the charged memcg's own, one copy per memcg when several sibling
    /// memcgs charge ([`super::MemcgModel::with_memcgs`]).
    pub level: Option<u32>,
}

/// Offset of `memory` (its `usage`) inside `struct mem_cgroup` in 6.0-rc1, bytes, derived from
/// the structure definitions on x86-64 without lockdep: `struct cgroup_subsys_state` is 200
/// bytes (`cgroup`, `ss` 8 + 8; `percpu_ref` 16; `sibling`, `children`, `rstat_css_node` 3 × 16;
/// `id`, `flags` 4 + 4; `serial_nr` 8; `online_cnt` 4 + 4 padding; `destroy_work` 32;
/// `destroy_rwork` 56; `parent` 8), then `struct mem_cgroup_id` 8. 6.0-rc1 puts no alignment on
/// `struct page_counter`, so `usage` sits 16 bytes into a cache line (the memcg itself is
/// kmalloc'd, line aligned). Config-dependent (lockdep, struct changes).
pub const RC1_MEMORY_OFFSET_BYTES: u32 = 208;

/// A field of `struct page_counter` (or next to it) that a walk touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Usage,
    Min,
    Low,
    High,
    Max,
    MinUsage,
    LowUsage,
    Watermark,
    Parent,
    /// `memcg->css.parent` (read by `parent_mem_cgroup()`), 8 bytes before `memory`.
    CssParent,
    /// `memcg->swap.usage` and `.high` (read by the `memory.high` loop; never written here).
    SwapUsage,
    SwapHigh,
}

/// Byte offset of a field from the start of `struct mem_cgroup`.
fn field_offset(f: Field, split: bool) -> i64 {
    // 6.0-rc1 layout: usage, min, low, high, max, emin, min_usage, children_min_usage, elow,
    // low_usage, children_low_usage, watermark, failcnt, parent (14 longs, 112 bytes).
    // Patch (B) layout: usage | emin, min_usage, children_min_usage, elow, low_usage,
    // children_low_usage, watermark, failcnt | min, low, high, max, parent (each part starts a
    // line: PC_PADDING; 192 bytes; the struct is ____cacheline_internodealigned_in_smp, so
    // `memory` moves from 208 up to 256).
    let (base, off, size) = if split {
        let off = match f {
            Field::Usage => 0,
            Field::MinUsage => 72,
            Field::LowUsage => 96,
            Field::Watermark => 112,
            Field::Min => 128,
            Field::Low => 136,
            Field::High => 144,
            Field::Max => 152,
            Field::Parent => 160,
            _ => 0,
        };
        (256, off, 192)
    } else {
        let off = match f {
            Field::Usage => 0,
            Field::Min => 8,
            Field::Low => 16,
            Field::High => 24,
            Field::Max => 32,
            Field::MinUsage => 48,
            Field::LowUsage => 72,
            Field::Watermark => 88,
            Field::Parent => 104,
            _ => 0,
        };
        (i64::from(RC1_MEMORY_OFFSET_BYTES), off, 112)
    };
    match f {
        Field::CssParent => 200,
        Field::SwapUsage => base + size,
        Field::SwapHigh => base + size + if split { 144 } else { 24 },
        _ => base + off,
    }
}

/// One access of a walk: the field and whether it is a locked read-modify-write.
type Access = (Field, bool);

/// The accesses of one level in one phase, 6.0-rc1 / 6.0 code (see [`counter_lines`]).
fn level_accesses(charge: bool, root: bool, protected: bool, fewer_atomics: bool) -> Vec<Access> {
    use Field::*;
    let mut a = vec![(Usage, true)];
    if charge {
        a.push((Max, false));
    }
    // propagate_protected_usage()
    a.push((Parent, false));
    if !root {
        let xchg = protected && !fewer_atomics;
        a.push((Min, false));
        a.push((MinUsage, xchg));
        a.push((Low, false));
        a.push((LowUsage, xchg));
    }
    if charge {
        a.push((Watermark, false));
    }
    a.push((Parent, false));
    a
}

/// The `memory.high` loop of `try_charge_memcg()` after a charge walk, one level.
fn high_accesses() -> Vec<Access> {
    use Field::*;
    vec![
        (Usage, false),
        (High, false),
        (SwapUsage, false),
        (SwapHigh, false),
        (CssParent, false),
    ]
}

/// The transfers of one hierarchy walk and of one flush, one entry per transfer, in program
/// order: each entry is the index of the line in [`counter_lines`] (same depth and code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WalkVisits {
    /// A charge walk: `page_counter_try_charge()` leaf to root, then the `memory.high` loop
    /// of `try_charge_memcg()` leaf to root.
    pub charge: Vec<usize>,
    /// An uncharge walk: `page_counter_uncharge()` → `page_counter_cancel()` leaf to root.
    pub uncharge: Vec<usize>,
    /// One `atomic_add()` on `stats_flush_threshold`.
    pub flush: Vec<usize>,
}

/// Appends to `out` the transfers of one level's accesses `acc` on the hot lines of that
/// level (`hot`: line number → index): each locked RMW is one transfer, each run of loads on a
/// line not broken by an RMW on that line is one.
fn emit_transfers(acc: &[Access], split: bool, hot: &[(i64, usize)], out: &mut Vec<usize>) {
    let mut in_run: Vec<i64> = Vec::new();
    for (f, rmw) in acc {
        let line = field_offset(*f, split).div_euclid(64);
        let Some(&(_, idx)) = hot.iter().find(|(l, _)| *l == line) else {
            continue;
        };
        if *rmw {
            out.push(idx);
            in_run.retain(|l| *l != line);
        } else if !in_run.contains(&line) {
            out.push(idx);
            in_run.push(line);
        }
    }
}

/// The lines and the program-order transfers of the walks, from the same accesses.
fn walk_structure(depth: u32, code: CounterCode) -> (Vec<CounterLine>, WalkVisits) {
    let split = code.split_layout();
    let fewer = code.fewer_atomics();
    let usage_line = field_offset(Field::Usage, split).div_euclid(64);
    let mut lines = Vec::new();
    // Per level (leaf first, as the walks go): its written lines and their indices.
    let mut hot_by_level: Vec<(u32, Vec<(i64, usize)>)> = Vec::new();
    for level in (0..=depth).rev() {
        let root = level == 0;
        let protected = level == 1;
        let mut hot: Vec<i64> = level_accesses(true, root, protected, fewer)
            .iter()
            .chain(&level_accesses(false, root, protected, fewer))
            .filter(|(_, rmw)| *rmw)
            .map(|(f, _)| field_offset(*f, split).div_euclid(64))
            .collect();
        hot.sort_unstable();
        hot.dedup();
        let what = if root {
            "root".to_string()
        } else if protected {
            format!("level {level} (protected)")
        } else {
            format!("level {level}")
        };
        let mut idx = Vec::new();
        for line in hot {
            let name = if line == usage_line {
                format!("{what} usage")
            } else {
                format!("{what} protection counters")
            };
            idx.push((line, lines.len()));
            lines.push(CounterLine {
                name,
                transfers_per_walk: 0.0,
                charge_transfers: 0.0,
                uncharge_transfers: 0.0,
                flush_transfers: 0.0,
                level: Some(level),
            });
        }
        hot_by_level.push((level, idx));
    }
    let flush = lines.len();
    lines.push(CounterLine {
        name: "stats_flush_threshold".to_string(),
        transfers_per_walk: 1.0,
        charge_transfers: 0.0,
        uncharge_transfers: 0.0,
        flush_transfers: 1.0,
        level: None,
    });
    let mut v = WalkVisits {
        charge: Vec::new(),
        uncharge: Vec::new(),
        flush: vec![flush],
    };
    for (level, hot) in &hot_by_level {
        let root = *level == 0;
        let protected = *level == 1;
        let charge = level_accesses(true, root, protected, fewer);
        emit_transfers(&charge, split, hot, &mut v.charge);
        let uncharge = level_accesses(false, root, protected, fewer);
        emit_transfers(&uncharge, split, hot, &mut v.uncharge);
    }
    for (_, hot) in &hot_by_level {
        emit_transfers(&high_accesses(), split, hot, &mut v.charge);
    }
    for &i in &v.charge {
        lines[i].charge_transfers += 1.0;
    }
    for &i in &v.uncharge {
        lines[i].uncharge_transfers += 1.0;
    }
    for l in lines.iter_mut().take(flush) {
        l.transfers_per_walk = 0.5 * (l.charge_transfers + l.uncharge_transfers);
    }
    (lines, v)
}

/// The shared lines a walk touches and the transfers each costs, derived from the code.
///
/// `depth` levels below the root; the top level (level 1) carries `memory.min`/`memory.low`
/// (thread 001). Each level's fields are placed at their byte offsets in `struct mem_cgroup`
/// (6.0-rc1: [`RC1_MEMORY_OFFSET_BYTES`], so `usage`, `min`, `low`, `high`, `max`, `emin` and
/// `css.parent` share a line and `min_usage` … `parent` the next; patch (B): the aligned
/// three-part layout). Accesses per level, in program order:
/// - charge walk (`page_counter_try_charge()`): RMW `usage`; load `max`;
///   `propagate_protected_usage()`: load `parent`, then (not at the root) load `min`,
///   `min_usage` (an `atomic_long_xchg()` at the protected level in 6.0-rc1), load `low`,
///   `low_usage` (xchg likewise); load `watermark`; load `parent` (loop);
/// - uncharge walk (`page_counter_cancel()`): RMW `usage`; the same propagation; load `parent`;
/// - after a charge walk, the `memory.high` loop of `try_charge_memcg()` reads `usage`, `high`,
///   `swap.usage`, `swap.high` and `css.parent` of every level (a separate phase).
///
/// Patch (A) (6.0's `propagate_protected_usage()`): the xchgs become loads, because the
/// protected usage never changes here (`low`/`min` far below `usage`).
///
/// Counting rule (heavy contention: the line leaves right after each access because the next
/// requester is already waiting): on a line that some walk writes, each locked RMW is one
/// transfer and each run of loads not broken by an RMW on that line, within one phase, is one
/// (loads issued together miss together); lines nobody writes cost nothing.
///
/// `stats_flush_threshold` (`memcg_rstat_updated()`, 6.0): one `atomic_add` each time a CPU's
/// |MEMCG_SOCK| updates pass `MEMCG_CHARGE_BATCH` pages: 1 per flush (flushes counted by
/// `simulate_stock`, not per walk). The same transfers in program order: [`walk_visits`].
pub fn counter_lines(depth: u32, code: CounterCode) -> Vec<CounterLine> {
    walk_structure(depth, code).0
}

/// The transfers of [`counter_lines`] in program order, one entry per transfer (the order
/// decides when two SMT siblings can share a transfer, see `MemcgModel::estimate`).
pub fn walk_visits(depth: u32, code: CounterCode) -> WalkVisits {
    walk_structure(depth, code).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_lines_of_thread_001() {
        let l = counter_lines(3, CounterCode::Rc1);
        // 4 usage lines, the protected level's second line, stats_flush_threshold.
        assert_eq!(l.len(), 6);
        let get =
            |l: &[CounterLine], name: &str| l.iter().find(|x| x.name == name).unwrap().clone();
        // usage 16 bytes into its line: the xchg'd protection counters are on the next line,
        // with watermark and parent: load parent, xchg, xchg, loads of watermark/parent = 4
        // (uncharge: load parent, xchg, xchg, load parent = 4).
        let p = get(&l, "level 1 (protected) protection counters");
        approx::assert_relative_eq!(p.charge_transfers, 4.0);
        approx::assert_relative_eq!(p.uncharge_transfers, 4.0);
        // usage line: RMW, loads (max, min, low), memory.high re-read (usage, high, css.parent)
        // = 3; uncharge RMW + loads = 2; the root has no propagation: 3 / 1.
        let u = get(&l, "level 1 (protected) usage");
        approx::assert_relative_eq!(u.charge_transfers, 3.0);
        approx::assert_relative_eq!(u.uncharge_transfers, 2.0);
        let r = get(&l, "root usage");
        approx::assert_relative_eq!(r.uncharge_transfers, 1.0);
        // Split layout (B): usage alone 2 / 1; protection line xchg, xchg, watermark = 3 / 2.
        let b = counter_lines(3, CounterCode::SplitLayout);
        let p = get(&b, "level 1 (protected) protection counters");
        approx::assert_relative_eq!(p.charge_transfers, 3.0);
        approx::assert_relative_eq!(p.uncharge_transfers, 2.0);
        assert!(b
            .iter()
            .filter(|x| x.name.ends_with("usage"))
            .all(|x| x.charge_transfers == 2.0 && x.uncharge_transfers == 1.0));
        // (A): no written protection line.
        assert_eq!(counter_lines(3, CounterCode::FewerAtomics).len(), 5);
        let both = counter_lines(3, CounterCode::Both);
        assert_eq!(both.len(), 5);
        assert!(both.iter().all(|x| x.transfers_per_walk <= 1.5));
    }
}
