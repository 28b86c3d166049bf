//! Published measurements beyond the five threads (`data/literature/`), predicted with nothing
//! fitted to them: validate rows with role [`Role::Literature`].
//!
//! Each table is predicted on a machine file and a workload file built from public facts
//! (`models/xeon-gold-6252-2s.toml`, `models/broadwell-2s.toml`,
//! `models/workloads/bulk-alloc-order0.toml`, ...). The only fitted numbers used are those of
//! other tables (thread 000's zone->lock parameters, thread 002's page_bench cycles), by the
//! rules written in the kinds' docs. The rows compare ratios between settings on one machine
//! (the measure: direction of change and size of change) and, where the table is
//! absolute and the model's absolute scale is meaningful, the absolute value too.
//!
//! Huang Ying's auto-tuning series has its own file, [`super::literature_huang`]; Nikhil
//! Dhama's free_high trigger tables too, [`super::literature_dhama`].
//!
//! Tables without rows, and why:
//! - `nviennot_*`: machine inputs (core-to-core latency), not predictions.

use crate::data;
use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::version::KernelVersion;
use crate::model::numa_fold::FoldRule;
use crate::workload::{Knobs, Registry};

use super::{Role, TableValidation, ValidationRow};

/// A compiled-in table's rows as maps from column name to cell.
pub(super) fn csv_rows(name: &str) -> Result<Vec<std::collections::BTreeMap<String, String>>> {
    let t = data::table(name)?;
    let cols = t.columns()?;
    Ok(t.rows()?
        .into_iter()
        .map(|r| cols.iter().cloned().zip(r).collect())
        .collect())
}

pub(super) fn num(
    row: &std::collections::BTreeMap<String, String>,
    col: &str,
    file: &str,
) -> Result<f64> {
    row.get(col)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| Error::parse(file, 0, col, "not a number"))
}

const HALBUER: &str = "literature/halbuer_2023-02_rmqueue_bulk_zone_lock_alloc_latency_vs_cores";
const KEMI: &str = "literature/kemiwang_2017-08_numa_counter_threshold_page_bench03_broadwell";
const JORDAN: &str =
    "literature/danieljordan_2018-01_pcp_batch310_high1860_will-it-scale_page_fault1";

/// Halbuer 2023: ns per allocation of an in-kernel bulk allocation loop vs cores (Default
/// kernel column), order 0 and order 9, on the dual Xeon Gold 6252 (threads on socket 0).
pub fn halbuer() -> Result<TableValidation> {
    let reg = Registry::builtin();
    let machine = Machine::builtin("xeon-gold-6252-2s")?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (order_label, workload) in [
        ("order-0", "bulk-alloc-order0"),
        ("order-9", "bulk-alloc-order9"),
    ] {
        let w = reg.resolve(workload)?;
        let measured: Vec<(u32, f64)> = csv_rows(HALBUER)?
            .iter()
            .filter(|r| {
                r.get("page_size_corrected_per_author")
                    .is_some_and(|v| v.starts_with(order_label))
            })
            .map(|r| {
                Ok((
                    num(r, "cores", HALBUER)? as u32,
                    num(r, "default_ns", HALBUER)?,
                ))
            })
            .collect::<Result<_>>()?;
        let predicted = |n: u32| -> Result<crate::workload::Predicted> {
            let k = Knobs {
                kernel: Some(KernelVersion::new(6, 1)),
                tasks: Some(n),
                nodes: Some("one".into()),
                means_only: true,
                ..Knobs::default()
            };
            w.predict(&machine, &k)
        };
        let predict = |n: u32| -> Result<f64> { Ok(predicted(n)?.ns_per_op) };
        let base_m = measured.first().map(|m| m.1).unwrap_or(f64::NAN);
        let one = predicted(1)?;
        let base_p = one.ns_per_op;
        if order_label == "order-0" {
            notes.push(one_core_note(
                &measured,
                &one,
                w.spec.param_or("clock_ghz", f64::NAN),
            )?);
        }
        let mut pairs = Vec::with_capacity(measured.len());
        for &(n, m) in &measured {
            let p = predict(n)?;
            pairs.push((n, m, p));
            rows.push(ValidationRow::new(
                "literature-halbuer",
                &machine.name,
                format!("{workload} {n} cores"),
                "ns_per_alloc",
                m,
                p,
                "ns",
                Role::Literature,
                "alloc-loop kind on kernel 6.1, nothing fitted to this table (refill hold composed from the code, crate::model::hold; work: the allocation's share of thread 002's page_bench01 alloc+free cycles on 4.14, split as Mel Gorman's pagealloc benchmark splits 4.10's, moved to 6.1 by crate::model::fastpath)",
            ));
            if n > 1 {
                rows.push(ValidationRow::new(
                    "literature-halbuer",
                    &machine.name,
                    format!("{workload} {n} cores / 1 core"),
                    "ratio",
                    m / base_m,
                    p / base_p,
                    "x",
                    Role::Literature,
                    "ratio of two predictions on one machine",
                ));
            }
        }
        if order_label == "order-9" {
            notes.push(order9_note(&pairs));
        }
    }
    notes.push("not held out: the refill hold is composed from the code (crate::model::hold: cycles per call, block and struct page, struct pages streamed from DRAM, a hand-over of zone lines), a mechanism chosen with this table visible; no value was taken from it".to_string());
    notes.push("not held out: the work outside the lock is the allocation's share of page_bench01's pair, 125 of 168 as Mel Gorman's pagealloc benchmark splits 4.10 (131 cycles), chosen with this table visible; his 4.6 split (117 cycles) would leave every order-0 ratio row outside 25 %".to_string());
    Ok(TableValidation::new(
        "literature-halbuer",
        "Halbuer 2023: in-kernel bulk allocation, ns per allocation vs cores (Xeon Gold 6252)",
        rows,
        vec![],
        (0, &[]),
        notes,
    ))
}

/// Halbuer's order-9 rows in numbers: the one-core time and the saturated slope (ns per
/// allocation per added core, from 4 to the most cores), measured and predicted.
fn order9_note(rows: &[(u32, f64, f64)]) -> String {
    let one = rows.iter().find(|r| r.0 == 1);
    let (lo, hi) = (
        rows.iter().find(|r| r.0 == 4),
        rows.iter().max_by_key(|r| r.0),
    );
    let (Some(one), Some(lo), Some(hi)) = (one, lo, hi) else {
        return "order 9: the table lacks the 1, 4 or largest core count".into();
    };
    let dn = f64::from(hi.0 - lo.0);
    let (sm, sp) = ((hi.1 - lo.1) / dn, (hi.2 - lo.2) / dn);
    format!(
        "order 9: 6.1 checks all 512 struct pages of a block under the lock (check_pcp_refill); one core is {:+.1} % off, but the saturated slope from {} to {} cores, {:.2} us per allocation per core, is {:+.0} % off: the measured hold grows with contention beyond the model's hand-over",
        100.0 * (one.2 / one.1 - 1.0),
        lo.0,
        hi.0,
        sp / 1000.0,
        100.0 * (sp / sm - 1.0),
    )
}

/// Halbuer's order-0 one-core time, split by what his own table bounds and what the model
/// gives. With the lock saturated (`n` cores, `ns(n) ≈ n × occupancy`), `min ns(n) / n` over
/// the saturated rows is the lock's time per page under contention, which no one-core hold can
/// exceed (contention only adds hand-overs and colder lines). So `ns(1) − min ns(n) / n` is a
/// lower bound on the time per allocation spent outside zone->lock at one core, computed from
/// the measurements alone; the note sets it against the workload's work per allocation.
fn one_core_note(
    measured: &[(u32, f64)],
    one: &crate::workload::Predicted,
    ghz: f64,
) -> Result<String> {
    let m1 = measured
        .iter()
        .find(|m| m.0 == 1)
        .map(|m| m.1)
        .ok_or_else(|| Error::parse(HALBUER, 0, "cores", "no one-core row"))?;
    // Saturated rows: from 4 cores on the measured time per allocation grows by cores x a
    // constant (the table's slope from 4 to 24 cores is within 4 % of its mean per core).
    let occupancy = measured
        .iter()
        .filter(|m| m.0 >= 4)
        .map(|m| m.1 / f64::from(m.0))
        .fold(f64::INFINITY, f64::min);
    let outside_bound = m1 - occupancy;
    let out = |name: &str| one.output(name).unwrap_or(f64::NAN);
    let work = out("work_ns_per_alloc");
    let hold = out("hold_pages_ns_per_alloc");
    Ok(format!(
        "order 0, one core: {p:.0} ns = {work:.0} ns of work + {hold:.0} ns of refill hold. The saturated rows give the lock at least {occupancy:.1} ns per page, so at least {outside_bound:.0} ns per allocation ({c:.0} cycles at {ghz} GHz) lies outside the lock: 6.1's fast path as his kernel was built costs more than the model's",
        p = one.ns_per_op,
        c = outside_bound * ghz,
    ))
}

/// Kemi Wang 2017: page_bench03 (88 threads) cycles per page alloc+free vs the NUMA counter
/// fold threshold, on the 2-socket Broadwell of thread 002.
pub fn kemi_wang() -> Result<TableValidation> {
    let model = super::t002::model_002()?;
    let fit = super::t002::fit_002(&model)?;
    let p: Vec<f64> = fit.params.iter().map(|x| x.value).collect();
    let mut rows = Vec::new();
    // v1 of the series (every threshold but 65533) kept the s8 code's overstep with s16 diffs;
    // v2 (65533) reset u16 diffs to 0: the fold period follows the code each row ran.
    let rule_of = |r: &std::collections::BTreeMap<String, String>| {
        if r.get("series_version").is_some_and(|v| v.starts_with("v2")) {
            FoldRule::Reset
        } else {
            FoldRule::Overstep
        }
    };
    // The ratios are taken to the row the author compares every other row with: the "system
    // by default" row of v1's session (his published percentages, e.g. "394(-26.6%)", are
    // ratios to it), not to v2's 65533 row, measured nine days later in another session, whose
    // 25-cycle step below v1's plateau is not a threshold effect (the fold is under 1 cycle
    // per page from 4096 up).
    let table = csv_rows(KEMI)?;
    let base_row = table
        .iter()
        .find(|r| {
            r.get("annotation_as_published")
                .is_some_and(|a| a.contains("system by default"))
        })
        .ok_or_else(|| {
            Error::invalid(
                KEMI,
                "annotation_as_published",
                "no row is marked \"system by default\" (the author's base of comparison)",
            )
        })?;
    let base_t = base_row
        .get("numa_counter_threshold")
        .map_or("", |t| t.trim())
        .to_string();
    let base_th = base_t.parse::<u32>().map_err(|_| {
        Error::invalid(
            KEMI,
            "numa_counter_threshold",
            format!("the default row's threshold {base_t:?} is not a number"),
        )
    })?;
    let reference = model.estimate_with_fold(&p, 88, true, Some(base_th), rule_of(base_row))?;
    let reference_m = num(base_row, "cpu_cycles_per_page_alloc_free", KEMI)?;
    for r in &table {
        let m = num(r, "cpu_cycles_per_page_alloc_free", KEMI)?;
        let t = r.get("numa_counter_threshold").cloned().unwrap_or_default();
        let e = match t.trim().parse::<u32>() {
            Ok(th) => model.estimate_with_fold(&p, 88, true, Some(th), rule_of(r))?,
            Err(_) => model.estimate(&p, 88, false)?,
        };
        let case = format!("88 threads, threshold {t}");
        rows.push(ValidationRow::new(
            "literature-kemiwang",
            &model.machine,
            case.clone(),
            "cycles_per_page",
            m,
            e.cycles_per_page,
            "cycles",
            Role::Literature,
            format!(
                "numa-stat model with thread 002's fitted parameters (another table), threshold set by hand; {:?} fold every {:.0} events of an item; fold {:.1} cycles = zone lines {:.1} + global line {:.1} (utilisation {:.2}) + NR_FREE_CMA_PAGES read misses queued at the line's home {:.1} (home utilisation {:.2})",
                e.fold_rule,
                e.events_between_folds,
                e.fold_cycles,
                e.zone_fold_cycles,
                e.global_fold_cycles,
                e.global_line_utilisation,
                e.cma_read_cycles,
                e.cma_line_utilisation
            ),
        ));
        if t.trim() != base_t {
            rows.push(ValidationRow::new(
                "literature-kemiwang",
                &model.machine,
                format!("{case} / threshold {base_t} (the author's base)"),
                "ratio",
                m / reference_m,
                e.cycles_per_page / reference.cycles_per_page,
                "x",
                Role::Literature,
                "ratio of two predictions on one machine",
            ));
        }
    }
    let notes = vec![
        "what the model counts: a local allocation bumps NUMA_HIT and NUMA_LOCAL; a per-CPU diff folds every T + 1 + T/2 events in v1, T + 1 in v2 (the 65533 row), a lock xadd on a zone line and the global line; with CONFIG_CMA=y the node's cores re-read NUMA_HIT's line".to_string(),
        "not held out: after each fold the readers of NR_FREE_CMA_PAGES queue at the line's home (the law of ticket-lock collapse, Boyd-Wickizer et al. 2012), a mechanism chosen with these rows visible; its service times are the machine file's, nothing is fitted".to_string(),
        "the ratios are to the author's base, v1's \"system by default\" row (threshold 125); the 65533 (v2) and zone_statistics-disabled rows come from another session or code, and their measured drops exceed the predicted by about the step between v1's plateau and v2 (next note)".to_string(),
        "from threshold 4096 up the fold term is under 1 cycle per page, yet v1's rows sit above v2's 65533 row: v1's per-event code loads the per-CPU threshold and handles a signed overstep, v2 compares with a constant; the model has one per-event cost (thread 002's fit)".to_string(),
    ];
    Ok(TableValidation::new(
        "literature-kemiwang",
        "Kemi Wang 2017: page_bench03 cycles per page vs NUMA counter threshold (2-socket Broadwell, 88 threads)",
        rows,
        vec![],
        (0, &[]),
        notes,
    ))
}

/// Daniel Jordan 2018: will-it-scale page_fault1 (process mode) speedup of pcp batch 310 /
/// high 1860 over the 4.15-rc2 defaults, by task count, on a 2-socket E5-2699 v4 (the
/// broadwell-2s machine file).
pub fn daniel_jordan() -> Result<TableValidation> {
    let reg = Registry::builtin();
    let machine = Machine::builtin("broadwell-2s")?;
    let w = reg.resolve("will-it-scale-page-fault1")?;
    let rows_in = csv_rows(JORDAN)?;
    let kernel_rows = |kern: &str| -> Result<std::collections::BTreeMap<u32, f64>> {
        rows_in
            .iter()
            .filter(|r| r.get("kern_no").map(String::as_str) == Some(kern))
            .map(|r| {
                Ok((
                    num(r, "ntask", JORDAN)? as u32,
                    num(r, "proc_pgf_per_s", JORDAN)?,
                ))
            })
            .collect()
    };
    let base = kernel_rows("1")?;
    // Kernel 4: kernel 2 plus Jordan's lru_lock scaling and LRU splicing (not PCP changes).
    let lru_fixed = kernel_rows("4")?;
    let mut lru_note = String::new();
    let mut rows = Vec::new();
    for r in rows_in
        .iter()
        .filter(|r| r.get("kern_no").map(String::as_str) == Some("2"))
    {
        let n = num(r, "ntask", JORDAN)? as u32;
        let m = num(r, "proc_pgf_per_s", JORDAN)?;
        let Some(b) = base.get(&n) else { continue };
        let predict = |batch: Option<u32>, high: Option<u32>| -> Result<f64> {
            let k = Knobs {
                kernel: Some(KernelVersion::new(4, 15)),
                tasks: Some(n),
                batch,
                high,
                means_only: true,
                ..Knobs::default()
            };
            Ok(w.predict(&machine, &k)?.throughput_total)
        };
        let p_base = predict(None, None)?;
        let p_big = predict(Some(310), Some(1860))?;
        if let Some(l) = lru_fixed.get(&n) {
            // The note gives the largest task count, where the model is furthest above.
            lru_note = format!(
                "at {n} tasks with batch 310 the model gives {} M faults/s, above the measured {} and {} with his lru_lock changes on top",
                crate::report::sig(p_big / 1e6, 3),
                crate::report::sig(m / 1e6, 3),
                crate::report::sig(l / 1e6, 3)
            );
        }
        rows.push(ValidationRow::new(
            "literature-jordan",
            &machine.name,
            format!("{n} tasks, 4.15-rc2 defaults"),
            "pgf_per_s",
            *b,
            p_base,
            "faults/s",
            Role::Literature,
            "alloc-loop kind on 4.15, process mode, will-it-scale's placement (one task per core, node 0's cores first: the file's nodes = cores); the work outside the allocator is the file's derived 1381 ns per page; total page faults per second over the tasks",
        ));
        rows.push(ValidationRow::new(
            "literature-jordan",
            &machine.name,
            format!("{n} tasks, batch 310 high 1860 / default"),
            "ratio",
            m / b,
            p_big / p_base,
            "x",
            Role::Literature,
            "alloc-loop kind on 4.15, process mode, will-it-scale's placement (one task per core, node 0's cores first); nothing fitted to this table",
        ));
    }
    Ok(TableValidation::new(
        "literature-jordan",
        "Daniel Jordan 2018: will-it-scale page_fault1 speedup of pcp batch 310 / high 1860 over 4.15-rc2 (2 x E5-2699 v4)",
        rows,
        vec![],
        (0, &[]),
        vec![
            "the model ranks the two locks the other way round from Jordan's kernels: its zone->lock stays busier than the LRU lock it queues in series (crate::model::lrulock), so the larger batch gains far more than measured, where his kernels 3 and 4 say the LRU lock limits from 16 tasks".to_string(),
            format!(
                "absolute page faults: {lru_note}: its zone->lock gains more from the larger batch than any measured kernel, so this workload's hold per page is too large or too batch-sensitive"
            ),
            "not held out, chosen with these rows visible: will-it-scale's placement (node 0's cores first), sequential munmap frees whose drains link to the block just added (an L2 hit; crate::model::hold::BlockPattern), and the LRU lock in series with per-page cycles counted from the code".to_string(),
        ],
    ))
}

/// What it would take for Jordan's table (`validate --what-it-would-take`): the scale on the
/// LRU lock's per-page cycles (`lrulock::ADD_CYCLES_PER_PAGE` and `RELEASE_CYCLES_PER_PAGE`
/// together, both assumed from instruction counts) at which the batch-310 speedup at 16 tasks
/// equals the measured one, and what the other rows then predict. A heavier LRU hold makes the
/// LRU lock the limit, which is what Jordan's own lru_lock kernels say; the analysis asks
/// whether that alone explains the table. A note, never applied to a row.
pub fn jordan_what_it_would_take() -> Result<Vec<String>> {
    use crate::assumptions::with_moved;
    use crate::model::lrulock::{ADD_CYCLES_PER_PAGE, RELEASE_CYCLES_PER_PAGE};
    let reg = Registry::builtin();
    let machine = Machine::builtin("broadwell-2s")?;
    let w = reg.resolve("will-it-scale-page-fault1")?;
    let rows_in = csv_rows(JORDAN)?;
    let measured = |kern: &str, n: u32| -> Result<Option<f64>> {
        for r in &rows_in {
            if r.get("kern_no").map(String::as_str) == Some(kern)
                && num(r, "ntask", JORDAN)? as u32 == n
            {
                return Ok(Some(num(r, "proc_pgf_per_s", JORDAN)?));
            }
        }
        Ok(None)
    };
    let predict = |scale: f64, n: u32, big: bool| -> Result<f64> {
        with_moved(
            "lrulock::ADD_CYCLES_PER_PAGE",
            scale * ADD_CYCLES_PER_PAGE,
            || {
                with_moved(
                    "lrulock::RELEASE_CYCLES_PER_PAGE",
                    scale * RELEASE_CYCLES_PER_PAGE,
                    || {
                        let k = Knobs {
                            kernel: Some(KernelVersion::new(4, 15)),
                            tasks: Some(n),
                            batch: big.then_some(310),
                            high: big.then_some(1860),
                            means_only: true,
                            ..Knobs::default()
                        };
                        Ok(w.predict(&machine, &k)?.throughput_total)
                    },
                )
            },
        )
    };
    let ratio = |scale: f64, n: u32| -> Result<f64> {
        Ok(predict(scale, n, true)? / predict(scale, n, false)?)
    };
    const CHOOSE: u32 = 16;
    let (Some(b16), Some(m16)) = (measured("1", CHOOSE)?, measured("2", CHOOSE)?) else {
        return Ok(vec![]);
    };
    let f = |x: f64| crate::report::sig(x, 3);
    let Some(k) = breakeven(|s| ratio(s, CHOOSE), m16 / b16, 1.0, 16.0)? else {
        return Ok(vec![format!(
            "what it would take (Jordan, an analysis, not applied to any row): no LRU hold between 1 and 16 x the assumed cycles brings the 16-task batch-310 speedup to the measured {}: a heavier LRU lock alone does not explain the table",
            f(m16 / b16)
        )]);
    };
    let mut parts = Vec::new();
    let mut misses = 0;
    for n in [1u32, 4, 16, 32, 64] {
        let (Some(b), Some(m)) = (measured("1", n)?, measured("2", n)?) else {
            continue;
        };
        let (pb, pr) = (predict(k, n, false)?, ratio(k, n)?);
        if n != CHOOSE {
            misses += usize::from((pr - m / b).abs() > 0.25 * (m / b - 1.0).abs());
        }
        misses += usize::from((pb / b - 1.0).abs() > 0.25);
        parts.push(format!(
            "{n} tasks: speedup {} (measured {}), defaults {} M/s (measured {})",
            f(pr),
            f(m / b),
            f(pb / 1e6),
            f(b / 1e6)
        ));
    }
    Ok(vec![format!(
        "what it would take (Jordan, an analysis, not applied to any row): the 16-task batch-310 speedup equals the measured {} with the LRU lock's per-page cycles x {} of the assumed ({} and {} cycles per added and released page); then {}. Only the 16-task speedup chose the scale; of the other 4 speedups (within 25 % of the measured change) and 5 absolute rows (within 25 %), {misses} miss{}",
        f(m16 / b16),
        f(k),
        f(k * ADD_CYCLES_PER_PAGE),
        f(k * RELEASE_CYCLES_PER_PAGE),
        parts.join("; "),
        if misses == 0 {
            ": a heavier LRU hold alone would explain the table"
        } else {
            ": a heavier LRU hold alone does not explain the whole table"
        }
    )])
}

/// The scale in `[lo, hi]` at which the decreasing `f` equals `target`, by bisection on a log
/// scale (`None` when `target` is not between `f(hi)` and `f(lo)`).
pub(crate) fn breakeven(
    f: impl Fn(f64) -> Result<f64>,
    target: f64,
    lo: f64,
    hi: f64,
) -> Result<Option<f64>> {
    let (mut a, mut b) = (lo.ln(), hi.ln());
    if !(f(lo)? >= target && f(hi)? <= target) {
        return Ok(None);
    }
    // 8 halvings of the range's octaves: the scale to within 2 % over 6 octaves, finer than
    // any table's own spread.
    for _ in 0..8 {
        let m = 0.5 * (a + b);
        if f(m.exp())? >= target {
            a = m;
        } else {
            b = m;
        }
    }
    Ok(Some((0.5 * (a + b)).exp()))
}

/// A literature table's validator, named by the `thread` of its rows.
pub type LiteratureTable = (&'static str, fn() -> Result<TableValidation>);

/// Every literature table with rows, in report order, not yet computed (for callers that
/// report progress or time them one by one).
pub fn tables() -> Vec<LiteratureTable> {
    vec![
        ("literature-halbuer", halbuer),
        ("literature-kemiwang", kemi_wang),
        ("literature-jordan", daniel_jordan),
        ("literature-huang", super::literature_huang::huang_cover),
        (
            "literature-huang-prose",
            super::literature_huang::huang_prose,
        ),
        (
            "literature-dhama-sweep",
            super::literature_dhama::dhama_sweep,
        ),
        (
            "literature-dhama-multi",
            super::literature_dhama::dhama_multi,
        ),
        ("literature-lkp", super::literature_lkp::lkp_sctp),
    ]
}

/// Every literature table with rows.
pub fn all() -> Result<Vec<TableValidation>> {
    tables().into_iter().map(|(_, f)| f()).collect()
}

/// The summary of ratio rows: (rows, direction right, within 25 % of the measured
/// change). The change of a ratio row is `ratio - 1`; its direction is right when the predicted
/// and measured changes have the same sign (zero counting as its own sign); within 25 % when the predicted change is within 25 %
/// of the measured change.
pub fn ratio_summary(t: &TableValidation) -> (usize, usize, usize) {
    let r: Vec<_> = t.rows.iter().filter(|r| r.quantity == "ratio").collect();
    let dir = r
        .iter()
        .filter(|r| {
            // f64::signum(0.0) is 1.0: a predicted "no change" is not the direction of a
            // measured rise (nor of a fall).
            let sign = |x: f64| if x == 0.0 { 0.0 } else { x.signum() };
            sign(r.measured - 1.0) == sign(r.predicted - 1.0)
        })
        .count();
    let within = r
        .iter()
        .filter(|r| {
            let dm = r.measured - 1.0;
            dm != 0.0 && ((r.predicted - 1.0) - dm).abs() <= 0.25 * dm.abs()
        })
        .count();
    (r.len(), dir, within)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-core bound is arithmetic on the measured rows: a saturated lock at 40 ns per
    /// page (160 ns at 4 cores, 320 ns at 8) leaves at least 100 - 40 = 60 ns of a 100 ns
    /// one-core allocation outside the lock; rows below 4 cores are not taken as saturated.
    #[test]
    fn one_core_bound_is_computed_from_the_saturated_rows() {
        let measured = [(1, 100.0), (2, 60.0), (4, 160.0), (8, 320.0)];
        let one = crate::workload::Predicted {
            op: "op".into(),
            ns_per_op: 70.0,
            throughput_per_task: 0.0,
            throughput_total: 0.0,
            tasks: 1,
            zones: vec![],
            outputs: vec![
                ("work_ns_per_alloc".into(), 40.0),
                ("hold_pages_ns_per_alloc".into(), 30.0),
            ],
            report: Default::default(),
        };
        let note = one_core_note(&measured, &one, 2.0).unwrap();
        assert!(note.contains("at least 40.0 ns"), "{note}");
        assert!(
            note.contains("at least 60 ns per allocation (120 cycles"),
            "{note}"
        );
        assert!(one_core_note(&[(4, 160.0)], &one, 2.0).is_err());
    }
}
