//! Huang Ying's "PCP high auto-tuning" series (2023, merged in 6.7): validate rows with role
//! [`Role::Literature`] for its cover-letter tables and its changelogs' prose numbers
//! (`data/literature/huang_*`, README section A). Nothing is fitted to them.
//!
//! The series' states are [`SeriesState`]s of [`crate::model::autotune`]: `base` (6.6),
//! `patch5` (6.7 with `high_min == high_max`, which is the series up to its patch 5 for the
//! page flows modelled here) and the merged series (6.7, auto-tuning; v3 `patch9` = v1/v2
//! `patch10`; the reply of 2023-09-21 stops at `patch7`). Each workload's page flow is stepped in
//! simulated time through the kernel's own pageset for the state, with `decay_pcp_high()` on
//! the vmstat tick, and its zone->lock holds go through the lock queue of
//! [`crate::model::zonelock`] with the hold composed from the code as every workload but
//! thread 000's has it ([`crate::model::zonelock::with_code_hold`],
//! [`crate::model::hold`]).
//!
//! - kbuild (8 cgroups x `make -j 28`): `models/workloads/kbuild-cgroups.toml` on
//!   `models/sapphire-rapids-2s-224.toml` (assumed part); the table's counts are per build
//!   (fixed work), so the rows compare counts per page of working set.
//! - lmbench3 UNIX, 16 pairs: `models/workloads/lmbench-af-unix.toml` on `icelake-server` (the
//!   128-CPU 2-socket Ice Lake of seed 004, assumed to be the same lab's machine); work per page
//!   carried over from thread 004's fit.
//! - netperf SCTP_STREAM_MANY, 64 pairs: `models/workloads/netperf-sctp-stream.toml` on the
//!   same machine, work per base page carried over likewise: netperf's default 16 KiB
//!   send is one DATA chunk whose linear skb is an order-3 block from kmalloc_large(), freed
//!   by the receiver; a pure consumer like lmbench's reader.
//!
//! # What the counts are counted over ([`CountBasis`])
//! A build is fixed work: kbuild's counts (free_high, alloc_zone) are compared per page of
//! working set. netperf runs for a fixed time (`-l`, 10 s by default) and lmbench's `benchmp()`
//! picks its iteration count from timing (`ENOUGH`), so their counts are over a run of fixed
//! duration: a count ratio is the per-page ratio times the throughput ratio. The SCTP rows of
//! the table show it (computed in the notes): in every state the measured alloc_zone ratio
//! equals the perf ratio to 0.1 %, and free_high over perf is the kernel rule's 1/8 per block.
//! Compared per page moved instead, lmbench's and SCTP's 12 alloc_zone rows would set the
//! model's per-page 1.00 against a measured 1.05-1.13 and get their direction wrong.

use crate::error::Result;
use crate::hw::machine::Machine;
use crate::memo::Memo;
use crate::model::autotune::{
    lock_outcome, pageset, FlowTally, LockOutcome, PairFlow, ProcessFlow, SeriesState, ZoneLoad,
};
use crate::model::zonelock::with_code_hold;
use crate::model::zonelock::ZoneLockModel;
use crate::workload::kinds::alloc_loop::lock_params;
use crate::workload::Registry;

use super::literature::{breakeven, csv_rows, num};
use super::{Role, TableValidation, ValidationRow};

const COVER: &str = "literature/huang_pcp_autotune_series_2023_cover_tables";
const PROSE: &str = "literature/huang_pcp_series_2023_patch_changelog_prose_numbers";
const KBUILD_MACHINE: &str = "sapphire-rapids-2s-224";
const LMBENCH_MACHINE: &str = "icelake-server";
/// The built-in workload of the cover tables' netperf SCTP_STREAM_MANY rows.
const SCTP_WORKLOAD: &str = "netperf-sctp-stream";
/// Tick phases a process flow is run at (their tallies are summed).
pub const TICK_PHASES: u32 = 4;
/// Processes one kbuild flow steps back to back (the first quarter warms up).
pub const PROCESSES: u32 = 8;
/// Pages a compiler process faults when the workload file gives no `op.phase_pages`.
pub const DEFAULT_PHASE_PAGES: f64 = 16_384.0;
/// Share of a process's work done while it allocates when the file gives no
/// `params.alloc_work_share`.
pub const DEFAULT_ALLOC_WORK_SHARE: f64 = 0.99;
/// The lmbench pair flow's vmstat interval, ns (the kernel's default `stat_interval`, 1 s).
pub const PAIR_TICK_NS: f64 = 1e9;
/// The lmbench pair flow's simulated span, ns (the first quarter warms up).
pub const PAIR_SPAN_NS: f64 = 4e9;

/// One workload in one state of the series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatePrediction {
    /// Time per unit of work of one CPU (kbuild: page of working set; lmbench: block sent), ns.
    pub ns_per_unit: f64,
    /// Share of CPU time spent waiting for zone->lock.
    pub contention: f64,
    /// Pages allocated from the zone per unit of work.
    pub zone_alloc_per_unit: f64,
    /// `free_high` drains per unit of work.
    pub free_high_per_unit: f64,
    /// Time-average pages on the PCP lists of one CPU (lmbench: of one pair).
    pub mean_pcp_pages: f64,
    /// Live `pcp->high` at the end of the run, pages.
    pub final_high_pages: u32,
}

fn per_unit(t: &FlowTally, x: u64) -> f64 {
    x as f64 / t.work_units.max(1) as f64
}

impl StatePrediction {
    fn new(tally: &FlowTally, out: &LockOutcome) -> StatePrediction {
        StatePrediction {
            ns_per_unit: out.ns_per_unit,
            contention: out.contention,
            zone_alloc_per_unit: per_unit(tally, tally.zone_alloc_pages),
            free_high_per_unit: per_unit(tally, tally.free_high_drains),
            mean_pcp_pages: tally.mean_pcp_pages,
            final_high_pages: tally.final_high_pages,
        }
    }
}

/// kbuild (8 cgroups x make -j 28) on the assumed 224-CPU machine in `state`.
pub fn kbuild(state: SeriesState) -> Result<StatePrediction> {
    kbuild_with(state, 1.0)
}

/// [`kbuild`] with the workload file's compile work per page scaled by `work_scale` (the
/// what-it-would-take analysis of [`what_it_would_take`]; 1 is the prediction).
fn kbuild_with(state: SeriesState, work_scale: f64) -> Result<StatePrediction> {
    let reg = Registry::builtin();
    let w = reg.resolve("kbuild-cgroups")?.spec;
    let machine = Machine::builtin(KBUILD_MACHINE)?;
    let mut model = ZoneLockModel::new(&machine, state.kernel())?;
    with_code_hold(&mut model);
    // A compiler process frees its own pages at exit, in about the order it faulted them, as
    // the kind alloc-loop treats its phases (crate::model::hold::BlockPattern).
    model.block_pattern = crate::model::hold::BlockPattern::Sequential;
    let work = w.op.work.ns_at(machine.clock.base_ghz.value) * work_scale;
    let pages =
        w.op.phase_pages
            .as_ref()
            .map_or(DEFAULT_PHASE_PAGES, |q| q.value) as u64;
    let share = w.param_or("alloc_work_share", DEFAULT_ALLOC_WORK_SHARE);
    // The process's life as the kind alloc-loop reads it (params.life_free_share,
    // alloc_run_pages, life_free_run_pages): all at exit unless the file says it frees while
    // it runs.
    let life = crate::workload::kinds::alloc_loop::life_or_phases(&w, pages)?
        .life()
        .unwrap_or(crate::model::zonelock::generic::Life::at_exit(pages));
    let mut tally = FlowTally::default();
    for i in 0..TICK_PHASES {
        let flow = ProcessFlow {
            life,
            work_ns: work,
            share,
            pgd_order: w.param_or("exit_pgd_order", 1.0) as u8,
            tick_ns: w.param_or("vmstat_interval_ms", 1000.0) * 1e6,
            processes: PROCESSES,
            tick_phase: f64::from(i) / f64::from(TICK_PHASES),
        };
        let mut st = pageset(&model, state, 0)?;
        tally.merge(&flow.run(&mut st)?);
    }
    let (params, _) = lock_params(&w, &machine, work)?;
    let nodes = machine.topology.numa_nodes.value.max(1);
    let cpus = (w.tasks.count.value / nodes).max(1);
    let out = lock_outcome(
        &model,
        &params,
        &tally,
        &ZoneLoad {
            cpus,
            work_ns: work,
            pairs: false,
            share,
            order: 0,
        },
    )?;
    Ok(StatePrediction::new(&tally, &out))
}

/// lmbench3 UNIX (AF_UNIX) 16 pairs on the 128-CPU Ice Lake in `state`.
pub fn lmbench(state: SeriesState) -> Result<StatePrediction> {
    pairs_with("lmbench-af-unix", state, 1.0)
}

/// netperf SCTP_STREAM_MANY, 64 pairs, on the 128-CPU Ice Lake in `state`: one order-3 block
/// per 16 KiB send (`models/workloads/netperf-sctp-stream.toml`).
pub fn sctp(state: SeriesState) -> Result<StatePrediction> {
    pairs_with(SCTP_WORKLOAD, state, 1.0)
}

/// [`lmbench`] with the carried-over work per page scaled by `work_scale` (see [`kbuild_with`]).
fn lmbench_with(state: SeriesState, work_scale: f64) -> Result<StatePrediction> {
    pairs_with("lmbench-af-unix", state, work_scale)
}

/// A writer/reader pair workload of the producer-consumer kind (lmbench's, SCTP's) on the
/// 128-CPU Ice Lake in `state`: a message is one write() (its frags, [`crate::kernel::skb`])
/// or one block of the file's order; its pairs spread evenly over the nodes.
fn pairs_with(workload: &str, state: SeriesState, work_scale: f64) -> Result<StatePrediction> {
    let reg = Registry::builtin();
    let w = reg.resolve(workload)?.spec;
    let machine = Machine::builtin(LMBENCH_MACHINE)?;
    let mut model = ZoneLockModel::new(&machine, state.kernel())?;
    with_code_hold(&mut model);
    let order = w.op.order.value;
    let carried = crate::fit::calibrate::netperf_params_carried_over(&machine)?;
    let work_page = work_scale * carried.fixed_cycles / machine.clock.base_ghz.value;
    // A message is one write(): its frags as the kernel allocates them (several orders), or
    // one block of the file's order when the file gives no write size.
    let orders = crate::workload::kinds::producer_consumer::af_unix_write_orders(&w)
        .map_or(vec![order], |(_, orders)| orders);
    let pages: u32 = orders.iter().map(|&o| 1u32 << o).sum();
    let work = work_page * f64::from(pages);
    let flow = PairFlow {
        orders,
        work_ns: work,
        tick_ns: PAIR_TICK_NS,
        span_ns: PAIR_SPAN_NS,
        reader_allocs_per_block: 0.0,
        reader_alloc_burst_pages: 1.0,
        writer_free_share: 0.0,
    };
    let mut wr = pageset(&model, state, 0)?;
    let mut rd = pageset(&model, state, 0)?;
    let tally = flow.run(&mut wr, &mut rd)?;
    let (params, _) = lock_params(&w, &machine, work)?;
    let nodes = machine.topology.numa_nodes.value.max(1);
    let pairs = (w.tasks.count.value / nodes).max(1);
    let out = lock_outcome(
        &model,
        &params,
        &tally,
        &ZoneLoad {
            cpus: 2 * pairs,
            work_ns: work,
            pairs: true,
            share: 0.5,
            order,
        },
    )?;
    Ok(StatePrediction::new(&tally, &out))
}

/// The state a table label stands for, per benchmark (None: not expressed).
fn state_of(label: &str, benchmark: &str, version: &str) -> Option<SeriesState> {
    let last = if version.starts_with("v3") {
        "patch9"
    } else if version.contains("reply") {
        "patch7"
    } else {
        "patch10"
    };
    match label {
        "base" => Some(SeriesState::Base),
        "patch5" => Some(SeriesState::NoAutoTune),
        // alloc_factor (patch 5) scales order-0 refills only: lmbench's one order-0 frag per
        // write refills 63 pages at a time without it and up to 2016 with it, a difference of
        // under 1/63 zone->lock hold per write (of about 0.45): patch 3 and patch 5 are taken
        // as one state. SCTP's flow is order 3 only, so alloc_factor changes nothing in it.
        "patch3" if benchmark.starts_with("lmbench") || benchmark.starts_with("netperf_SCTP") => {
            Some(SeriesState::NoAutoTune)
        }
        l if l == last => Some(SeriesState::AutoTune),
        _ => None,
    }
}

const STATES: [SeriesState; 3] = [
    SeriesState::Base,
    SeriesState::NoAutoTune,
    SeriesState::AutoTune,
];

fn idx(s: SeriesState) -> usize {
    STATES.iter().position(|x| *x == s).unwrap_or(0)
}

/// Both workloads in every state.
///
/// Deterministic, and both Huang tables (cover letters and prose) read them: memoised per
/// process, keyed by the assumed constants moved on this thread.
pub fn predictions() -> Result<(Vec<StatePrediction>, Vec<StatePrediction>)> {
    type Both = (Vec<StatePrediction>, Vec<StatePrediction>);
    static MEMO: Memo<String, Both> = Memo::new();
    MEMO.get_or_try(crate::assumptions::moved_key(), predictions_uncached)
}

fn predictions_uncached() -> Result<(Vec<StatePrediction>, Vec<StatePrediction>)> {
    let k = STATES.iter().map(|s| kbuild(*s)).collect::<Result<_>>()?;
    let l = STATES.iter().map(|s| lmbench(*s)).collect::<Result<_>>()?;
    Ok((k, l))
}

/// What a table row measured against its base row: perf ratio, lock contention (%, with the
/// base's), free_high and zone allocation ratios (NaN when not measured).
struct Measured {
    perf: f64,
    lock: f64,
    lock_base: f64,
    free_high: f64,
    alloc_zone: f64,
}

/// Where the rows go and how they are labelled.
struct Sink<'a> {
    rows: &'a mut Vec<ValidationRow>,
    thread: &'a str,
    machine: &'a str,
    /// The benchmark's perf is a score (higher is better), not a time.
    score: bool,
    /// What its counts are counted over.
    counts: CountBasis,
}

impl<'a> Sink<'a> {
    /// Rows of `thread` for `bench`: kbuild's machine (perf a time) or lmbench's (a score).
    fn new(rows: &'a mut Vec<ValidationRow>, thread: &'a str, bench: Bench) -> Sink<'a> {
        let kbuild = bench == Bench::Kbuild;
        Sink {
            rows,
            thread,
            machine: if kbuild {
                KBUILD_MACHINE
            } else {
                LMBENCH_MACHINE
            },
            score: !kbuild,
            counts: bench.count_basis(),
        }
    }

    /// The benchmark's perf in `p` over `b`, as its table states it (time or score).
    fn perf_ratio(&self, p: &StatePrediction, b: &StatePrediction) -> f64 {
        if self.score {
            b.ns_per_unit / p.ns_per_unit
        } else {
            p.ns_per_unit / b.ns_per_unit
        }
    }

    fn row(&mut self, case: &str, q: &str, mv: f64, pv: f64, unit: &str) {
        if mv.is_finite() && pv.is_finite() {
            self.rows.push(ValidationRow::new(
                self.thread,
                self.machine,
                case,
                q,
                mv,
                pv,
                unit,
                Role::Literature,
                "the kernel's pageset stepped in simulated time (model::autotune), zone->lock queue with the hold composed from the code (model::hold); nothing fitted to this table",
            ));
        }
    }

    /// The absolute lock contention of `p`, and with `b` (the base prediction) the ratio rows.
    fn push(&mut self, case: &str, m: &Measured, p: &StatePrediction, b: Option<&StatePrediction>) {
        self.row(
            &format!("{case} lock contend"),
            "lock_contend_pct",
            m.lock,
            100.0 * p.contention,
            "%",
        );
        let Some(b) = b else { return };
        let perf_p = self.perf_ratio(p, b);
        let r = [
            ("perf", m.perf, perf_p),
            (
                "lock contend",
                m.lock / m.lock_base,
                p.contention / b.contention,
            ),
            (
                "free_high",
                m.free_high,
                self.counts
                    .ratio(p.free_high_per_unit, b.free_high_per_unit, p, b),
            ),
            (
                "alloc_zone",
                m.alloc_zone,
                self.counts
                    .ratio(p.zone_alloc_per_unit, b.zone_alloc_per_unit, p, b),
            ),
        ];
        for (what, mv, pv) in r {
            self.row(&format!("{case} {what} / before"), "ratio", mv, pv, "x");
        }
    }
}

fn cell(r: &std::collections::BTreeMap<String, String>, col: &str) -> String {
    r.get(col).cloned().unwrap_or_default()
}

fn num_or_nan(r: &std::collections::BTreeMap<String, String>, col: &str) -> f64 {
    num(r, col, COVER).unwrap_or(f64::NAN)
}

/// The cover letters' tables: kbuild (8 cgroups x make -j 28, and the reply's make -j 224) and
/// lmbench UNIX rows whose state the model expresses, each against its table's base row.
pub fn huang_cover() -> Result<TableValidation> {
    let (kb, lm) = predictions()?;
    let sc: Vec<_> = STATES.iter().map(|s| sctp(*s)).collect::<Result<_>>()?;
    let mut rows = Vec::new();
    for c in cover_cases()? {
        let preds = match c.bench {
            Bench::Kbuild => &kb,
            Bench::Lmbench => &lm,
            Bench::Sctp => &sc,
        };
        let mut sink = Sink::new(&mut rows, "literature-huang", c.bench);
        let b = (c.state != SeriesState::Base).then_some(&preds[0]);
        sink.push(&c.case, &c.measured, &preds[idx(c.state)], b);
    }
    Ok(TableValidation::new(
        "literature-huang",
        "Huang Ying 2023: PCP high auto-tuning series, cover-letter tables (kbuild on 224 CPUs, lmbench UNIX and netperf SCTP on 128 CPUs)",
        rows,
        vec![],
        (0, &[]),
        notes(&kb, &lm)
            .into_iter()
            .chain([count_basis_note()?, sctp_note(&sc)])
            .collect(),
    ))
}

/// A benchmark of the cover tables the model expresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bench {
    Kbuild,
    Lmbench,
    Sctp,
}

impl Bench {
    /// The benchmark of a table's `benchmark` cell (None: not expressed).
    fn of(cell: &str) -> Option<Bench> {
        if cell == "kbuild" {
            Some(Bench::Kbuild)
        } else if cell.starts_with("lmbench") {
            Some(Bench::Lmbench)
        } else if cell.starts_with("netperf_SCTP_STREAM_MANY") {
            Some(Bench::Sctp)
        } else {
            None
        }
    }
}

/// What a benchmark's counts (free_high drains, zone allocations) are counted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountBasis {
    /// Per unit of fixed work (a kernel build): the predicted ratio is the per-unit ratio.
    FixedWork,
    /// Over a run of fixed duration (netperf's `-l`, lmbench's time-calibrated `benchmp()`):
    /// the predicted ratio is the per-unit ratio times the throughput ratio.
    FixedDuration,
}

impl CountBasis {
    /// The ratio of a count between `p` and its base `b`, from the per-unit counts and, for a
    /// run of fixed duration, the units each run gets through (`1 / ns_per_unit`).
    pub fn ratio(
        self,
        per_unit_p: f64,
        per_unit_b: f64,
        p: &StatePrediction,
        b: &StatePrediction,
    ) -> f64 {
        let per_unit = per_unit_p / per_unit_b;
        match self {
            CountBasis::FixedWork => per_unit,
            CountBasis::FixedDuration => per_unit * b.ns_per_unit / p.ns_per_unit,
        }
    }
}

impl Bench {
    /// How the table counts this benchmark's events (see [`CountBasis`]).
    fn count_basis(self) -> CountBasis {
        match self {
            Bench::Kbuild => CountBasis::FixedWork,
            Bench::Lmbench | Bench::Sctp => CountBasis::FixedDuration,
        }
    }
}

/// One row of the cover tables whose state the model expresses, with its table's base row.
struct CoverCase {
    bench: Bench,
    state: SeriesState,
    case: String,
    measured: Measured,
}

/// The cover tables' kbuild, lmbench UNIX and netperf SCTP rows the model expresses (the -j 112 run of v1
/// and other benchmarks have no workload here).
fn cover_cases() -> Result<Vec<CoverCase>> {
    let table = csv_rows(COVER)?;
    let mut out = Vec::new();
    for r in &table {
        let bench = cell(r, "benchmark");
        let setup = cell(r, "test_setup_as_published");
        let version = cell(r, "series_version");
        let Some(which) = Bench::of(&bench) else {
            continue;
        };
        let is_kbuild = which == Bench::Kbuild;
        if setup.contains("-j 112") {
            continue;
        }
        let Some(state) = state_of(&cell(r, "kernel"), &bench, &version) else {
            continue;
        };
        let Some(base) = table.iter().find(|b| {
            cell(b, "kernel") == "base"
                && cell(b, "series_version") == version
                && cell(b, "benchmark") == bench
                && cell(b, "test_setup_as_published") == setup
        }) else {
            continue;
        };
        let setup_short = if setup.contains("-j 224") {
            "make -j 224"
        } else if is_kbuild {
            "8 cgroups x make -j 28"
        } else if which == Bench::Sctp {
            "64 pairs"
        } else {
            "16 pairs"
        };
        out.push(CoverCase {
            bench: which,
            state,
            case: format!("{bench} {setup_short} {version} {}", cell(r, "kernel")),
            measured: Measured {
                perf: num_or_nan(r, "perf_rel_base100") / 100.0,
                lock: num_or_nan(r, "lock_contend_pct"),
                lock_base: num_or_nan(base, "lock_contend_pct"),
                free_high: num_or_nan(r, "free_high_rel_base100") / 100.0,
                alloc_zone: num_or_nan(r, "alloc_zone_rel_base100") / 100.0,
            },
        });
    }
    Ok(out)
}

/// The `--what-it-would-take` notes of the cover table (lmbench, kbuild, then SCTP): see
/// `what_it_would_take`. Seconds of work, so not part of [`huang_cover`].
pub fn cover_what_it_would_take() -> Result<Vec<String>> {
    const BENCHES: [Bench; 3] = [Bench::Lmbench, Bench::Kbuild, Bench::Sctp];
    let mut seen: [StateMeans; 3] = Default::default();
    for c in cover_cases()? {
        if let Some(i) = BENCHES.iter().position(|b| *b == c.bench) {
            seen[i].add(c.state, &c.measured);
        }
    }
    BENCHES
        .iter()
        .zip(&seen)
        .map(|(b, m)| what_it_would_take(*b, m))
        .collect()
}

/// A running mean (NaN while empty).
#[derive(Debug, Default, Clone, Copy)]
struct Mean {
    sum: f64,
    n: f64,
}

impl Mean {
    fn add(&mut self, x: f64) {
        if x.is_finite() {
            self.sum += x;
            self.n += 1.0;
        }
    }

    fn get(self) -> f64 {
        self.sum / self.n
    }
}

/// The table's measured lock contention (%) and perf ratio by state (index [`idx`]).
#[derive(Debug, Default)]
struct StateMeans {
    contention: [Mean; 3],
    perf: [Mean; 3],
}

impl StateMeans {
    fn add(&mut self, state: SeriesState, m: &Measured) {
        self.contention[idx(state)].add(m.lock);
        if state != SeriesState::Base {
            self.perf[idx(state)].add(m.perf);
        }
    }

    /// Mean measured contention (%) and perf ratio in `state` (NaN when the table has none).
    fn mean(&self, state: SeriesState) -> (f64, f64) {
        (
            self.contention[idx(state)].get(),
            self.perf[idx(state)].get(),
        )
    }
}

/// Range of work scales the analysis searches: 16x lighter (below that lmbench's simulated
/// seconds of flow cost seconds of run time each, and a 4 KiB page's two copies alone need
/// more than 1/16 of the carried-over work) to 4x heavier.
const SCALE_RANGE: (f64, f64) = (1.0 / 16.0, 4.0);

/// What it would take: the scale on the one assumed input that decides the absolute contention
/// (the work per page: carried over from netperf UDP for lmbench, assumed for kbuild) at which
/// the base state's contention equals the table's mean, and what the other states then
/// predict against the table. An analysis for the reader, never applied to a prediction: if
/// the other states then agree, the assumed work is the likely culprit; if not, the model
/// lacks a mechanism.
fn what_it_would_take(bench: Bench, seen: &StateMeans) -> Result<String> {
    let is_kbuild = bench == Bench::Kbuild;
    let run = |st: SeriesState, k: f64| match bench {
        Bench::Kbuild => kbuild_with(st, k),
        Bench::Lmbench => lmbench_with(st, k),
        Bench::Sctp => pairs_with(SCTP_WORKLOAD, st, k),
    };
    let (name, mid) = match bench {
        Bench::Kbuild => ("kbuild", "patch5"),
        Bench::Lmbench => ("lmbench", "patch3/patch5"),
        Bench::Sctp => ("SCTP", "patch3/patch5"),
    };
    let range = SCALE_RANGE;
    let f = |x: f64| crate::report::sig(x, 3);
    let (base_c, _) = seen.mean(SeriesState::Base);
    let k = breakeven(
        |k| Ok(100.0 * run(SeriesState::Base, k)?.contention),
        base_c,
        range.0,
        range.1,
    )?;
    let Some(k) = k else {
        let lo = run(SeriesState::Base, range.0)?;
        return Ok(format!(
            "what it would take ({name}, an analysis, not applied): no work per page between {} and {} x the assumed reaches the measured base contention {} % (at {} x: {} %): a wrong work per page alone does not explain the table",
            f(range.0),
            f(range.1),
            f(base_c),
            f(range.0),
            f(100.0 * lo.contention)
        ));
    };
    let p: Vec<StatePrediction> = STATES.iter().map(|s| run(*s, k)).collect::<Result<_>>()?;
    let perf = |i: usize| {
        if is_kbuild {
            p[i].ns_per_unit / p[0].ns_per_unit
        } else {
            p[0].ns_per_unit / p[i].ns_per_unit
        }
    };
    let (mid_c, mid_p) = seen.mean(SeriesState::NoAutoTune);
    let (fin_c, fin_p) = seen.mean(SeriesState::AutoTune);
    // The verdict: do the rows that did not choose the scale agree within 25 %?
    let off = |p: f64, m: f64| !m.is_finite() || (p - m).abs() > 0.25 * m.abs();
    let misses = [
        off(100.0 * p[1].contention, mid_c),
        off(100.0 * p[2].contention, fin_c),
        off(perf(1) - 1.0, mid_p - 1.0),
        off(perf(2) - 1.0, fin_p - 1.0),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    let verdict = if misses == 0 {
        "all four within 25 %: a wrong work per page alone would explain the table".to_string()
    } else {
        let n = if misses == 4 {
            "all four".to_string()
        } else {
            format!("{misses} of the four")
        };
        format!("{n} miss by more than 25 % (on the change, for the perf ratios): a wrong work per page alone does not explain the table")
    };
    Ok(format!(
        "what it would take ({name}, an analysis, not applied to any row): the base contention reaches the table's mean {} % with the work per page x {} of the assumed; at that work the model gives {mid} {} % contention (measured mean {} %) and perf ratio {} (measured {}), auto-tuned {} % (measured {} %) and perf ratio {} (measured {}). Only the base contention chose the scale; of the others, {verdict}",
        f(base_c),
        f(k),
        f(100.0 * p[1].contention),
        f(mid_c),
        f(perf(1)),
        f(mid_p),
        f(100.0 * p[2].contention),
        f(fin_c),
        f(perf(2)),
        f(fin_p),
    ))
}

/// A prose change "+72.2%" / "-3.5%" as a ratio (NaN when absent).
fn change_ratio(s: &str) -> f64 {
    s.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .map_or(f64::NAN, |c| 1.0 + c / 100.0)
}

fn pct(s: &str) -> f64 {
    s.trim().trim_end_matches('%').parse().unwrap_or(f64::NAN)
}

/// The changelogs' prose numbers: lmbench UNIX under patch 3 (the state after patch 1 is the
/// base for this order-3 flow: two order-3 frees in a row still take free_high) and kbuild under
/// patch 7 (v3: after patches 1-6 = `patch5`). The kbuild numbers of v3 patch 5 (12.6 % -> 11.0
/// %) have no row: the state before it (fixed high, patch 1 and 3) is not one the model builds.
pub fn huang_prose() -> Result<TableValidation> {
    let (kb, lm) = predictions()?;
    let mut rows = Vec::new();
    for r in &csv_rows(PROSE)? {
        let patch = cell(r, "patch");
        let is_kbuild = cell(r, "benchmark").starts_with("kbuild");
        let (before, after, preds) = if patch.contains("03/10") && !is_kbuild {
            (SeriesState::Base, SeriesState::NoAutoTune, &lm)
        } else if patch.contains("7/9") && is_kbuild {
            (SeriesState::NoAutoTune, SeriesState::AutoTune, &kb)
        } else {
            continue;
        };
        let (p, b) = (&preds[idx(after)], &preds[idx(before)]);
        let q = cell(r, "quantity_as_published");
        let change = change_ratio(&cell(r, "change_as_published"));
        let (lo, hi) = (pct(&cell(r, "before")), pct(&cell(r, "after")));
        let case = format!(
            "{} {}",
            if is_kbuild { "kbuild" } else { "lmbench UNIX" },
            patch
                .split(']')
                .next()
                .unwrap_or("")
                .trim_start_matches('[')
        );
        let bench = if is_kbuild {
            Bench::Kbuild
        } else {
            Bench::Lmbench
        };
        let mut sink = Sink::new(&mut rows, "literature-huang-prose", bench);
        let perf_p = sink.perf_ratio(p, b);
        if q.starts_with("cycles% of spinlock") {
            sink.row(
                &format!("{case} lock contend after"),
                "lock_contend_pct",
                hi,
                100.0 * p.contention,
                "%",
            );
            sink.row(
                &format!("{case} lock contend / before"),
                "ratio",
                hi / lo,
                p.contention / b.contention,
                "x",
            );
        } else if q.contains("free_high") {
            let pv = sink
                .counts
                .ratio(p.free_high_per_unit, b.free_high_per_unit, p, b);
            sink.row(
                &format!("{case} free_high / before"),
                "ratio",
                change,
                pv,
                "x",
            );
        } else if q.contains("allocated from zone") {
            let pv = sink
                .counts
                .ratio(p.zone_alloc_per_unit, b.zone_alloc_per_unit, p, b);
            sink.row(
                &format!("{case} alloc_zone / before"),
                "ratio",
                change,
                pv,
                "x",
            );
        } else if q.contains("bandwidth") || q.contains("build time") {
            sink.row(
                &format!("{case} perf / before"),
                "ratio",
                change,
                perf_p,
                "x",
            );
        }
    }
    Ok(TableValidation::new(
        "literature-huang-prose",
        "Huang Ying 2023: PCP series changelogs' prose numbers (lmbench UNIX patch 3, kbuild patch 7)",
        rows,
        vec![],
        (0, &[]),
        notes(&kb, &lm)
            .into_iter()
            .chain([count_basis_note()?])
            .collect(),
    ))
}

/// Range (min, max) of the table's `count` ratio over its perf ratio in the non-base rows of
/// `bench` (None when it has no such row).
fn count_over_perf(
    cases: &[CoverCase],
    bench: Bench,
    count: fn(&Measured) -> f64,
) -> Option<(f64, f64)> {
    cases
        .iter()
        .filter(|c| c.bench == bench && c.state != SeriesState::Base)
        .map(|c| count(&c.measured) / c.measured.perf)
        .filter(|x| x.is_finite())
        .fold(None, |acc, x| match acc {
            None => Some((x, x)),
            Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
        })
}

/// What the counts are counted over, with the table's own evidence ([`CountBasis`]).
fn count_basis_note() -> Result<String> {
    let cases = cover_cases()?;
    let f = |r: Option<(f64, f64)>| {
        r.map_or("-".to_string(), |(lo, hi)| {
            format!(
                "{}-{}",
                crate::report::sig(lo, 4),
                crate::report::sig(hi, 4)
            )
        })
    };
    let az = |m: &Measured| m.alloc_zone;
    let fh = |m: &Measured| m.free_high;
    Ok(format!(
        "counts are per build for kbuild, per fixed-duration run for netperf and lmbench (per-page ratio x throughput ratio). Over perf: SCTP {} alloc_zone, {} free_high, the kernel's rules per page; lmbench {} and {}, zone traffic the model's flow lacks",
        f(count_over_perf(&cases, Bench::Sctp, az)),
        f(count_over_perf(&cases, Bench::Sctp, fh)),
        f(count_over_perf(&cases, Bench::Lmbench, az)),
        f(count_over_perf(&cases, Bench::Lmbench, fh)),
    ))
}

/// What the predictions say beyond the rows, and the model's known gaps.
fn notes(kb: &[StatePrediction], lm: &[StatePrediction]) -> Vec<String> {
    let mut n = Vec::new();
    let f = |x: f64| crate::report::sig(x, 3);
    n.push(format!(
        "kbuild pages held on one CPU's PCP lists (time average): base {}, patch5 {}, auto-tuned {} (live high at the end {}); Huang reports +18.4 % average used memory during kbuild with auto-tuning (v3), not a row",
        f(kb[0].mean_pcp_pages),
        f(kb[1].mean_pcp_pages),
        f(kb[2].mean_pcp_pages),
        kb[2].final_high_pages
    ));
    n.push(format!(
        "lmbench pages held on one pair's PCP lists: base {}, patch5 {}, auto-tuned {}",
        f(lm[0].mean_pcp_pages),
        f(lm[1].mean_pcp_pages),
        f(lm[2].mean_pcp_pages)
    ));
    n.push("kbuild's only free_high source in the model is the order-1 PGD freed at exit (Huang's patch 1 changelog); once two high-order frees in a row are needed it never fires, so the model's free_high ratio is 0 where the measurement keeps 3-9 % (other high-order frees: slab, pipes, kernel stacks)".to_string());
    n.push("kbuild's lock contention is far below the measured: in the model only the compiler process takes zone->lock (no page cache, slab, page tables or the build's many small processes); the allocation rate is not the gap (tools/compile_churn.py: 37-135 us of CPU per page, the file 61 us)".to_string());
    n.push("not held out (values from this project's host, chosen with these rows visible): a compiler process frees about 66 % of its pages while it runs, in runs of about 1400 allocations and 3500 frees (data/host/trace-compile-*.json), as the host kernel's zone traffic confirms (tests/it/host_trace.rs)".to_string());
    n.push("not held out: lmbench and kbuild take the zone->lock hold composed from the code, as every workload outside thread 000 does, a consistency choice made with these rows visible; no value was taken from the table".to_string());
    n.push("lmbench's lock is far less contended in the model than measured, with holds charged per block freed as __free_one_page() runs (crate::model::hold); buddy merges do not make up the difference: a simulation of its flow (crate::model::buddy::circulating) gives 0.13 per free".to_string());
    n.push("not held out: a refill of recently freed, scattered blocks pays no struct-page stream restart, and a drain's later blocks link to the block freed just before (an L2 hit): readings of the code made with this table visible".to_string());
    n.push("not held out (found by tracing this project's host with these rows visible): a 64 KiB bw_unix write() allocates its frags as one page each of orders 3, 2, 1 and 0 (crate::kernel::skb), so on 6.6 each write makes three free_high drains".to_string());
    n.push("for pairs, contention is lock waits over the CPUs' busy time (perf's cycles event stops while a CPU idles, and a pair's waiting side sleeps), and writers and readers queue as dedicated classes at the pair's pace (crate::model::autotune::lock_outcome, within 5 % of a discrete-event simulation)".to_string());
    n
}

/// The cover table's note on its netperf SCTP_STREAM_MANY rows (`sc`: base, patch5, auto-tuned).
fn sctp_note(sc: &[StatePrediction]) -> String {
    let f = |x: f64| crate::report::sig(x, 3);
    format!(
        "netperf SCTP_STREAM_MANY (rows added with the table visible): the model's 32 pairs per zone saturate its lock ({} % contention, a {}x gain from patch 3) where the table's lock is lightly loaded: the pairs sleep between sends, which the model has no term for (literature-lkp)",
        f(100.0 * sc[0].contention),
        f(sc[0].ns_per_unit / sc[1].ns_per_unit),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sctp_rows_count_over_a_run_of_fixed_duration() {
        // The evidence for CountBasis::FixedDuration in the transcribed table: in every patched
        // SCTP row the zone allocations rise exactly as the perf does (one zone allocation per
        // page moved), and free_high over perf is the kernel rule's 1/8 per block. Tolerances:
        // the table prints 3-4 significant digits (0.1 % on alloc_zone / perf); free_high is
        // printed as 13.2-13.7 (0.4 %) and a run starts and ends mid-cycle of the 8-block
        // drain, as in the model's own 3 % test of the rule.
        let cases = cover_cases().unwrap();
        let (lo, hi) = count_over_perf(&cases, Bench::Sctp, |m| m.alloc_zone).unwrap();
        assert!(lo > 0.998 && hi < 1.002, "{lo}-{hi}");
        let (lo, hi) = count_over_perf(&cases, Bench::Sctp, |m| m.free_high).unwrap();
        assert!(lo > 0.97 / 8.0 && hi < 1.03 / 8.0, "{lo}-{hi}");
        assert_eq!(Bench::Sctp.count_basis(), CountBasis::FixedDuration);
        assert_eq!(Bench::Kbuild.count_basis(), CountBasis::FixedWork);
    }

    #[test]
    fn breakeven_finds_the_scale_of_a_decreasing_function_or_says_none() {
        // 1 / k equals 4 at k = 0.25; 8 halvings of 6 octaves leave it within 2 %.
        let k = breakeven(|k| Ok(1.0 / k), 4.0, 1.0 / 16.0, 4.0)
            .unwrap()
            .unwrap();
        assert!((k / 0.25 - 1.0).abs() < 0.02, "{k}");
        // 100 is above f(1/16) = 16: not bracketed.
        assert_eq!(
            breakeven(|k| Ok(1.0 / k), 100.0, 1.0 / 16.0, 4.0).unwrap(),
            None
        );
    }
}
