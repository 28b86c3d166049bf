//! Assumptions as data: every constant that shapes a prediction and is neither a hardware value
//! (those live in `models/*.toml` with their provenance) nor a kernel constant (those live in
//! [`crate::kernel`], cited to the kernel source).
//!
//! Each entry takes its value from the constant the model uses (never a copy), and says its unit,
//! where it came from, a relative spread (how far it could plausibly be off), and which measured
//! tables were visible while it was chosen. The last field is a statement about history, checked
//! against `git log -S NAME` when the registry was written: a constant introduced in the same
//! commit as, or after, the rows of a table were in `data/` counts as chosen while looking at that
//! table, because nothing shows otherwise. Rows that depend on such a constant are labelled
//! [`crate::validate::Role::Seen`], not held out.

use serde::Serialize;

use crate::model::{fastpath, highorder, hold, netperf, pcp, perflock, zonelock};

/// One assumed constant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assumption {
    /// The constant's name in the code (or `Type::field` for a default parameter).
    pub name: &'static str,
    /// Its value, in `unit`.
    pub value: f64,
    /// Unit.
    pub unit: &'static str,
    /// Where the value came from.
    pub provenance: &'static str,
    /// Relative spread (one standard deviation as a fraction of the value) we would not be
    /// surprised by.
    pub rel_spread: f64,
    /// The seed threads ("000".."004") whose predictions use it.
    pub used_by: &'static [&'static str],
    /// Tables that were visible while the value was chosen (and the commit that introduced it).
    pub chosen_while_seeing: &'static str,
}

/// The validation tables whose data was in the repository when `id` (a constant's name, or
/// `models/FILE.toml:field`) got its current value: `data/assumed-seen.csv`, written from the
/// git history by `tools/assumed_seen.py` (`git log -S`). None for an id the file lacks.
pub fn seen_tables(id: &str) -> Option<(String, Vec<String>)> {
    SEEN_CSV.lines().skip(1).find_map(|l| {
        let mut f = l.splitn(3, ',');
        let (i, commit, tables) = (f.next()?, f.next()?, f.next().unwrap_or(""));
        (i == id).then(|| {
            (
                commit.to_string(),
                tables.split_whitespace().map(str::to_string).collect(),
            )
        })
    })
}

/// `data/assumed-seen.csv`: id, introducing commit, tables visible then.
const SEEN_CSV: &str = include_str!("../data/assumed-seen.csv");

/// One entry of the registry as `pcpmodel assumptions` lists it: an assumed constant of the
/// code or an `assumed` field of a built-in model file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// The constant's name, or `models/FILE.toml:field`.
    pub id: String,
    /// `constant` or `model file`.
    pub kind: &'static str,
    /// Its value when a number.
    pub value: Option<f64>,
    /// Its value as written, when not a number (a name, a list).
    pub value_text: Option<String>,
    /// Unit (empty when the file gives none).
    pub unit: String,
    /// Where the value came from.
    pub source: String,
    /// Relative spread (one standard deviation over the value).
    pub rel_spread: f64,
    /// Where the spread came from.
    pub spread_source: &'static str,
    /// Seed threads or tables whose predictions use it (constants; empty for file fields: the
    /// rows of the workloads and machines that file describes).
    pub used_by: Vec<String>,
    /// The commit that gave the value its current text.
    pub introduced: String,
    /// Validation tables whose data was in the repository then.
    pub seen_tables: Vec<String>,
}

/// Spread of an `assumed` model-file field without one of its own: as wide as the widest the
/// code's assumed constants are given (0.5 to 1.0), the lower end.
pub const FILE_FIELD_REL_SPREAD: f64 = 0.5;

/// Every entry: the constants of [`all`], then every `assumed` field of the built-in machine and
/// workload files.
pub fn registry() -> crate::error::Result<Vec<Entry>> {
    let mut out: Vec<Entry> = all()
        .into_iter()
        .map(|a| {
            let (introduced, seen) = seen_tables(a.name).unwrap_or_default();
            Entry {
                id: a.name.to_string(),
                kind: "constant",
                value: Some(a.value),
                value_text: None,
                unit: a.unit.to_string(),
                source: a.provenance.to_string(),
                rel_spread: a.rel_spread,
                spread_source: "stated with the constant",
                used_by: a.used_by.iter().map(|s| s.to_string()).collect(),
                introduced,
                seen_tables: seen,
            }
        })
        .collect();
    out.extend(file_fields()?);
    Ok(out)
}

/// The `assumed` fields of the built-in model files (`{ value = ..., source = "assumed..." }`).
pub fn file_fields() -> crate::error::Result<Vec<Entry>> {
    let files = crate::hw::machine::BUILTIN
        .iter()
        .map(|b| (format!("models/{}.toml", b.name), b.toml))
        .chain(
            crate::workload::registry::BUILTIN
                .iter()
                .map(|b| (format!("models/workloads/{}.toml", b.name), b.toml)),
        );
    let mut out = Vec::new();
    for (file, text) in files {
        let doc: toml::Table = toml::from_str(text)
            .map_err(|e| crate::error::Error::invalid(&file, "toml", e.to_string()))?;
        let doc = toml::Value::Table(doc);
        let mut found = Vec::new();
        walk("", &doc, &mut found);
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for (path, t) in found {
            let n = counts.entry(path.clone()).or_default();
            let field = if *n == 0 {
                path.clone()
            } else {
                format!("{path}#{n}")
            };
            *n += 1;
            let id = format!("{file}:{field}");
            let (introduced, seen) = seen_tables(&id).unwrap_or_default();
            let v = t.get("value");
            out.push(Entry {
                id,
                kind: "model file",
                value: v.and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64))),
                value_text: v
                    .filter(|v| !(v.is_float() || v.is_integer()))
                    .map(|v| v.to_string()),
                unit: t
                    .get("unit")
                    .and_then(|u| u.as_str())
                    .unwrap_or_default()
                    .to_string(),
                source: t
                    .get("source")
                    .and_then(|s| s.as_str())
                    .unwrap_or_default()
                    .to_string(),
                rel_spread: FILE_FIELD_REL_SPREAD,
                spread_source: "the registry's default for an assumed file field",
                used_by: vec![],
                introduced,
                seen_tables: seen,
            });
        }
    }
    Ok(out)
}

/// Collects `(path, table)` of every table whose `source` starts with `assumed`, in file order
/// of keys as the TOML parser keeps them.
fn walk<'a>(path: &str, v: &'a toml::Value, out: &mut Vec<(String, &'a toml::Table)>) {
    match v {
        toml::Value::Table(t) => {
            if t.get("source")
                .and_then(|s| s.as_str())
                .is_some_and(|s| s.starts_with("assumed"))
            {
                out.push((path.to_string(), t));
                return;
            }
            for (k, x) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(&p, x, out);
            }
        }
        toml::Value::Array(a) => {
            for x in a {
                walk(path, x, out);
            }
        }
        _ => {}
    }
}

/// Every assumed constant, grouped by the thread that uses it.
pub fn all() -> Vec<Assumption> {
    vec![
        Assumption {
            name: "zonelock::PROBE_NS",
            value: zonelock::PROBE_NS,
            unit: "ns",
            provenance: "assumed: BCC funclatency's kprobe + kretprobe cost a few hundred ns each",
            rel_spread: 0.5,
            used_by: &["000"],
            chosen_while_seeing: "thread 000's five histograms (introduced in ec3bfdf, after data/000_* were transcribed)",
        },
        Assumption {
            name: "zonelock::HANDOVER_LINES",
            value: zonelock::HANDOVER_LINES,
            unit: "cache lines",
            provenance: "assumed: lines of struct zone that move to each new lock holder (lock word, free_area heads, counters)",
            rel_spread: 0.5,
            used_by: &["000", "literature"],
            chosen_while_seeing: "thread 000's five histograms (ec3bfdf)",
        },
        Assumption {
            name: "zonelock::CPU_CYCLES_PER_PAGE",
            value: zonelock::CPU_CYCLES_PER_PAGE,
            unit: "cycles",
            provenance: "assumed: list manipulation and flag checks per page under zone->lock, about 60 cycles",
            rel_spread: 0.5,
            used_by: &["000", "literature"],
            chosen_while_seeing: "thread 000's five histograms (ec3bfdf)",
        },
        Assumption {
            name: "autotune::LIVE_HIGH_PACE_NS_PER_PAGE",
            value: crate::model::autotune::LIVE_HIGH_PACE_NS_PER_PAGE,
            unit: "ns per 4 KiB page",
            provenance: "assumed: the order of thread 004's fitted work per page; it paces the stepped live pcp->high of a producer-consumer flow against the vmstat tick, and moves it only above about 2 us per page",
            rel_spread: 1.0,
            used_by: &["004", "literature"],
            chosen_while_seeing: "thread 004's pcp->high table (50fd21b): set to the order of its fitted work",
        },
        Assumption {
            name: "hold::CALL_CYCLES",
            value: hold::CALL_CYCLES,
            unit: "cycles",
            provenance: "assumed: spin_lock_irqsave (uncontended lock cmpxchg, ~20 cycles since Skylake) + spin_unlock_irqrestore (popf, ~20) + the NR_FREE_PAGES per-CPU delta and the call",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Halbuer 2023 (data/literature): the code-composed hold, with its streamed struct pages, was built after the parametrised hold missed Halbuer's growth (issue 11), so those rows are not held out; the value itself comes from the stated source, not from the table",
        },
        Assumption {
            name: "fastpath::LOCKED_RMW_CYCLES",
            value: fastpath::LOCKED_RMW_CYCLES,
            unit: "cycles",
            provenance: "assumed: an uncontended lock cmpxchg on an owned line plus the releasing store, ~18-20 cycles on Intel since Skylake (Agner Fog's instruction tables); the 6.0 pcp->lock adds one per PCP allocation and per free",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Halbuer 2023 (data/literature): added after the one-core row was seen to need about twice the work outside zone->lock that the 4.14 fast path gives; the step and its cost come from the kernel's code and the instruction tables, not from the table",
        },
        Assumption {
            name: "fastpath::IRQ_SAVE_RESTORE_CYCLES",
            value: fastpath::IRQ_SAVE_RESTORE_CYCLES,
            unit: "cycles",
            provenance: "measured (other machine): local_irq_save/restore pair, 37 cycles(tsc) on a Haswell i7-4790K (Jesper Brouer, fbd02630c6e3 'slub: initial bulk free implementation'); 6.2 (5749077415994) removed it from every PCP allocation and free",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "no table moves with it: no built-in workload with op.work.kernel runs a kernel >= 6.2 by default (bulk-alloc's reference is 6.1)",
        },
        Assumption {
            name: "hold::CHECK_CYCLES",
            value: hold::CHECK_CYCLES,
            unit: "cycles",
            provenance: "assumed: check_new_page() on a present line, five loads and their tests, ~12 instructions at ~1.5 per cycle",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Halbuer 2023 (data/literature): the code-composed hold, with its streamed struct pages, was built after the parametrised hold missed Halbuer's growth (issue 11), so those rows are not held out; the value itself comes from the stated source, not from the table",
        },
        Assumption {
            name: "hold::STREAM_MLP",
            value: hold::STREAM_MLP,
            unit: "lines in flight",
            provenance: "spec: the L2's 16 outstanding misses on Skylake-SP / Cascade Lake (Intel optimization manual); used for every machine",
            rel_spread: 0.3,
            used_by: &["literature"],
            chosen_while_seeing: "Halbuer 2023 (data/literature): the code-composed hold, with its streamed struct pages, was built after the parametrised hold missed Halbuer's growth (issue 11), so those rows are not held out; the value itself comes from the stated source, not from the table",
        },
        Assumption {
            name: "hold::TRAIN_MISSES",
            value: hold::TRAIN_MISSES,
            unit: "misses",
            provenance: "assumed: the L2 streamer starts after two misses in ascending order (Intel optimization manual); paid after a hand-over only by refills that read a stream (freshly split or merged-back blocks), not by refills of recently freed, scattered blocks",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Halbuer 2023 (data/literature): the code-composed hold, with its streamed struct pages, was built after the parametrised hold missed Halbuer's growth (issue 11), so those rows are not held out; the value itself comes from the stated source, not from the table",
        },
        Assumption {
            name: "hold::FREE_REMOTE_LINES",
            value: hold::FREE_REMOTE_LINES,
            unit: "cache lines per block freed",
            provenance: "derived from the code (__free_one_page() of 4.x-6.x mm/page_alloc.c): the buddy check, buddy_merge_likely()'s order+1 check and the free list neighbour linked to; merges of bulk frees trade the buddy check for two list neighbours (crate::model::hold docs). Where each line was last written is the caller's line mixture (assumed); with scattered blocks the neighbour is remote only for a drain's first block, the later ones link to the block freed just before (an L2 hit)",
            rel_spread: 0.33,
            used_by: &["literature"],
            chosen_while_seeing: "issue 13 item 2 (the free side of the code-composed hold), built after a sensitivity run of the former FREE_MERGE_LINES on Huang's and Dhama's rows (no row count moved by more than one); the count is read from the code, not from any table",
        },
        Assumption {
            name: "lrulock::HANDOVER_LINES",
            value: crate::model::lrulock::HANDOVER_LINES,
            unit: "cache lines per hold",
            provenance: "counted from the code (struct lruvec's list heads, the lock word, mem_cgroup_per_node's LRU sizes); how many share a line is assumed",
            rel_spread: 0.33,
            used_by: &["literature"],
            chosen_while_seeing: "Daniel Jordan 2018 (data/literature): the LRU lock was added after his absolute rows showed the model above his measured kernels; the count comes from the code, not from the table",
        },
        Assumption {
            name: "lrulock::ADD_CYCLES_PER_PAGE",
            value: crate::model::lrulock::ADD_CYCLES_PER_PAGE,
            unit: "cycles per page",
            provenance: "instruction count of 4.15 __pagevec_lru_add_fn() and its loop: two locked bit ops and a full barrier (Agner Fog's latencies) plus about 60 cycles of loads, tests and stores",
            rel_spread: 0.3,
            used_by: &["literature"],
            chosen_while_seeing: "Daniel Jordan 2018 (data/literature): counted from the code with his rows visible, after zonelock::CPU_CYCLES_PER_PAGE (60) had left the LRU lock half busy at 16 tasks where his kernels say it limits",
        },
        Assumption {
            name: "lrulock::RELEASE_CYCLES_PER_PAGE",
            value: crate::model::lrulock::RELEASE_CYCLES_PER_PAGE,
            unit: "cycles per page",
            provenance: "instruction count of 4.15 release_pages() under the lock: a locked decrement plus about 70 cycles of tests, list and counter updates",
            rel_spread: 0.3,
            used_by: &["literature"],
            chosen_while_seeing: "as lrulock::ADD_CYCLES_PER_PAGE",
        },
        Assumption {
            name: "zonelock::ALLOC_WORK_SHARE",
            value: zonelock::ALLOC_WORK_SHARE,
            unit: "fraction",
            provenance: "assumed: the fault path zeroes and the script writes each page twice; the unmap only drops references",
            rel_spread: 0.2,
            used_by: &["000"],
            chosen_while_seeing: "thread 000's five histograms (ec3bfdf)",
        },
        Assumption {
            name: "zonelock::FREE_MERGE_LINES",
            value: zonelock::FREE_MERGE_LINES,
            unit: "cache lines per page",
            provenance: "assumed: one buddy unlink per merge; its doc comment said 1 while the code used 2 (recorded, not changed)",
            rel_spread: 0.5,
            used_by: &["000"],
            chosen_while_seeing: "thread 000's five histograms (ec3bfdf)",
        },
        Assumption {
            name: "netperf::mlp_lines",
            value: netperf::NetperfParams::with_fitted(0.0, 0.0).mlp_lines,
            unit: "lines in flight",
            provenance: "assumed: line requests one core keeps in flight while writing a reused page (fill buffers)",
            rel_spread: 0.3,
            used_by: &["004"],
            chosen_while_seeing: "thread 004's score table (introduced with the first netperf model, 9176931)",
        },
        Assumption {
            name: "netperf::lock_lines_per_hold",
            value: netperf::NetperfParams::with_fitted(0.0, 0.0).lock_lines_per_hold,
            unit: "cache lines per hold",
            provenance: "assumed: lines that move between the two CPUs per zone->lock hold",
            rel_spread: 0.5,
            used_by: &["004"],
            chosen_while_seeing: "thread 004's score table (9176931)",
        },
        Assumption {
            name: "netperf::STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK",
            value: netperf::STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK,
            unit: "misses per drained block",
            provenance: "assumed: __free_one_page() reads the block's own struct page, its buddy's and the order+1 buddy's (mm/page_alloc.c); the three addresses come from the pfn, so their misses overlap: one latency per block",
            rel_spread: 0.5,
            used_by: &["004"],
            chosen_while_seeing: "the Zen 4 AF_UNIX sweep and A/B runs (data/host/zen4-2026-12-06), thread 004's score table",
        },
        Assumption {
            name: "pcp::CONSUMER_ALLOCS_PER_FREE_004",
            value: pcp::CONSUMER_ALLOCS_PER_FREE_004,
            unit: "allocations per freed block",
            provenance: "measured: the receiving CPU of a UDP loopback stream with net.core.skb_defer_max = 0 on this project's host (kernel 6.18) made 91 page allocations per 11,294 order-3 frees (data/host/flows/trace-udp-defer0-2026-12-04.json); it replaced the value 1 that both machines' fit had chosen (a983d8a)",
            rel_spread: 1.0,
            used_by: &["004"],
            chosen_while_seeing: "thread 004's score table, both machines (in data/ when the host was traced; the value is the trace's count, not a choice among fits)",
        },
        Assumption {
            name: "perflock::BEGIN_AFTER_CLOCK_NS_ASSUMED",
            value: perflock::BEGIN_AFTER_CLOCK_NS_ASSUMED,
            unit: "ns",
            provenance: "assumed: bpf_get_stackid() over about a dozen frames plus the stack map update",
            rel_spread: 0.5,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table, after the gap to the measured wait was known (21eee35)",
        },
        Assumption {
            name: "perflock::END_BEFORE_CLOCK_NS_ASSUMED",
            value: perflock::END_BEFORE_CLOCK_NS_ASSUMED,
            unit: "ns",
            provenance: "assumed: BPF trampoline and the per-CPU timestamp lookup",
            rel_spread: 0.5,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table (21eee35)",
        },
        Assumption {
            name: "perflock::END_LOCAL_AFTER_CLOCK_NS_ASSUMED",
            value: perflock::END_LOCAL_AFTER_CLOCK_NS_ASSUMED,
            unit: "ns",
            provenance: "assumed: lock_stat hash lookup, min/max updates, clearing the timestamp",
            rel_spread: 0.5,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table (21eee35)",
        },
        Assumption {
            name: "highorder::NODE_STORE_GBPS_ASSUMED",
            value: highorder::NODE_STORE_GBPS_ASSUMED,
            unit: "GB/s",
            provenance: "assumed: about 2/3 of a Kunpeng 920 die's 94 GB/s DDR4-2933 peak reachable with stores",
            rel_spread: 0.3,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table (932b8fd)",
        },
        Assumption {
            name: "highorder::CORE_CLEAR_GBPS_ASSUMED",
            value: highorder::CORE_CLEAR_GBPS_ASSUMED,
            unit: "GB/s",
            provenance: "assumed: clear_page() with DC ZVA on an Armv8.2 core",
            rel_spread: 0.3,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table (932b8fd)",
        },
        Assumption {
            name: "highorder::FAULT_OVERHEAD_NS_ASSUMED",
            value: highorder::FAULT_OVERHEAD_NS_ASSUMED,
            unit: "ns",
            provenance: "assumed: exception entry/return, VMA lookup, folio fast path, memcg charge, rmap and 16 PTEs",
            rel_spread: 0.5,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's perf lock table (932b8fd)",
        },
        Assumption {
            name: "t003::SHELL8_ORDER4_SHARE",
            value: crate::validate::t003::SHELL8_ORDER4_SHARE,
            unit: "fraction of allocations",
            provenance: "assumed: shell scripts fork and exec small processes whose anonymous regions are mostly below 64 KiB",
            rel_spread: 1.0,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's shell8 score (31fec61)",
        },
        Assumption {
            name: "memcg-72cpu threads_per_core",
            // Read from the machine file that holds the assumption, not copied here.
            value: crate::hw::machine::Machine::builtin("memcg-72cpu")
                .map_or(f64::NAN, |m| f64::from(m.topology.threads_per_core.value)),
            unit: "threads",
            provenance: "assumed in models/memcg-72cpu.toml: seed 001 says only \"72 CPUs\"; SMT2 decides the held-out gain (+60 % with, +77 % without)",
            rel_spread: 0.5,
            used_by: &["001"],
            chosen_while_seeing: "thread 001's batch 32 and 64 runs and the cover letter's runs (879d831: the SMT mechanism was added while the batch-64 row was watched)",
        },
        Assumption {
            name: "advice::latency_rel_sd",
            value: 0.05,
            unit: "relative sd",
            provenance: "assumed spreads of a latency by provenance: 5 % measured/spec/detected, 10 % derived, 15 % a thread's '~', 20 % assumed",
            rel_spread: 0.5,
            used_by: &["004"],
            chosen_while_seeing: "none (interval width only; no table compares with it)",
        },
        Assumption {
            name: "literature_dhama::PAIRS",
            value: f64::from(crate::validate::literature_dhama::PAIRS),
            unit: "sender/receiver pairs",
            provenance: "assumed: Dhama's sweep table does not say how many pairs ran; his prose places the regression going from 32 to 64",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "the Dhama tables (the validator was written with them)",
        },
        Assumption {
            name: "literature_huang::TICK_PHASES",
            value: f64::from(crate::validate::literature_huang::TICK_PHASES),
            unit: "phases",
            provenance: "assumed: where in its vmstat interval a compiler process starts is unknown; four evenly spaced phases average over it",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "literature_huang::PROCESSES",
            value: f64::from(crate::validate::literature_huang::PROCESSES),
            unit: "processes",
            provenance: "assumed: processes one kbuild flow steps back to back on a CPU (the first quarter warms up)",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "literature_huang::DEFAULT_PHASE_PAGES",
            value: crate::validate::literature_huang::DEFAULT_PHASE_PAGES,
            unit: "pages",
            provenance: "assumed: a compiler process's pages when the workload file gives no op.phase_pages (64 MiB)",
            rel_spread: 1.0,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "literature_huang::DEFAULT_ALLOC_WORK_SHARE",
            value: crate::validate::literature_huang::DEFAULT_ALLOC_WORK_SHARE,
            unit: "fraction of the work",
            provenance: "assumed: a compiler does nearly all its work while its memory grows when the file gives no params.alloc_work_share",
            rel_spread: 0.01,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "literature_huang::PAIR_TICK_NS",
            value: crate::validate::literature_huang::PAIR_TICK_NS,
            unit: "ns",
            provenance: "assumed: the lmbench machines ran the kernel's default vm.stat_interval (1 s)",
            rel_spread: 0.1,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "literature_huang::PAIR_SPAN_NS",
            value: crate::validate::literature_huang::PAIR_SPAN_NS,
            unit: "ns",
            provenance: "assumed: simulated span of the lmbench pair flow, long enough for the live high to settle (the first quarter warms up)",
            rel_spread: 0.5,
            used_by: &["literature"],
            chosen_while_seeing: "Huang's cover tables",
        },
        Assumption {
            name: "numa_fold::CONFIG_CMA_ASSUMED",
            value: if crate::model::numa_fold::CONFIG_CMA_ASSUMED { 1.0 } else { 0.0 },
            unit: "bool (1 = CONFIG_CMA=y)",
            provenance: "assumed: CONFIG_CMA=y, as in the Fedora and Ubuntu x86-64 configurations of 2017; neither thread 002 nor Kemi Wang's series states it",
            rel_spread: 1.0,
            used_by: &["002", "literature"],
            chosen_while_seeing: "thread 002's table and Kemi Wang's",
        },
        Assumption {
            name: "vmstat::EVENTS_PER_LOCAL_ALLOC",
            value: crate::model::vmstat::EVENTS_PER_LOCAL_ALLOC,
            unit: "counter events",
            provenance: "assumed: NUMA_HIT and NUMA_LOCAL per local allocation (zone_statistics())",
            rel_spread: 0.25,
            used_by: &["002", "literature"],
            chosen_while_seeing: "thread 002's table",
        },
        Assumption {
            name: "highorder::SPLITS_PER_OP",
            value: crate::model::highorder::SPLITS_PER_OP,
            unit: "expand() steps per allocation",
            provenance: "assumed: in page_fault1's steady state every order-4 folio is freed again, so splits and merges are about one per operation",
            rel_spread: 0.5,
            used_by: &["003"],
            chosen_while_seeing: "thread 003's tables",
        },
    ]
}

thread_local! {
    /// Values moved away from their defaults on this thread (for sensitivities only).
    static MOVED: std::cell::RefCell<Vec<(&'static str, f64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The value a model uses for the assumed constant `name`: `default` (the constant itself)
/// unless [`with_moved`] moved it on this thread. Models read their assumed constants through
/// this so that a sensitivity can move one without changing any default result.
pub fn value(name: &str, default: f64) -> f64 {
    MOVED.with(|m| {
        m.borrow()
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map_or(default, |&(_, v)| v)
    })
}

/// The constants moved on this thread, as text (a cache key for results that depend on them).
pub fn moved_key() -> String {
    MOVED.with(|m| format!("{:?}", m.borrow()))
}

/// Runs `f` with the assumed constant `name` set to `value` on this thread, then restores it.
pub fn with_moved<T>(name: &'static str, value: f64, f: impl FnOnce() -> T) -> T {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            MOVED.with(|m| {
                m.borrow_mut().pop();
            });
        }
    }
    MOVED.with(|m| m.borrow_mut().push((name, value)));
    let _restore = Restore;
    f()
}

/// Whether a model reads `name` through [`value`] (so a sensitivity can move it). The others
/// are fixed in machine files or in structures built elsewhere; their sensitivities are not
/// computed yet.
pub fn is_movable(name: &str) -> bool {
    MOVABLE.contains(&name)
}

const MOVABLE: [&str; 27] = [
    "autotune::LIVE_HIGH_PACE_NS_PER_PAGE",
    "fastpath::IRQ_SAVE_RESTORE_CYCLES",
    "fastpath::LOCKED_RMW_CYCLES",
    "zonelock::PROBE_NS",
    "hold::CALL_CYCLES",
    "hold::CHECK_CYCLES",
    "hold::STREAM_MLP",
    "hold::TRAIN_MISSES",
    "hold::FREE_REMOTE_LINES",
    "lrulock::HANDOVER_LINES",
    "lrulock::ADD_CYCLES_PER_PAGE",
    "lrulock::RELEASE_CYCLES_PER_PAGE",
    "zonelock::HANDOVER_LINES",
    "zonelock::CPU_CYCLES_PER_PAGE",
    "zonelock::ALLOC_WORK_SHARE",
    "zonelock::FREE_MERGE_LINES",
    "netperf::mlp_lines",
    "netperf::lock_lines_per_hold",
    "netperf::STRUCT_PAGE_MISSES_PER_DRAINED_BLOCK",
    "pcp::CONSUMER_ALLOCS_PER_FREE_004",
    "perflock::BEGIN_AFTER_CLOCK_NS_ASSUMED",
    "perflock::END_BEFORE_CLOCK_NS_ASSUMED",
    "perflock::END_LOCAL_AFTER_CLOCK_NS_ASSUMED",
    "highorder::NODE_STORE_GBPS_ASSUMED",
    "highorder::CORE_CLEAR_GBPS_ASSUMED",
    "highorder::FAULT_OVERHEAD_NS_ASSUMED",
    "t003::SHELL8_ORDER4_SHARE",
];

/// The assumptions a seed thread's predictions use.
pub fn for_thread(thread: &str) -> Vec<Assumption> {
    all()
        .into_iter()
        .filter(|a| a.used_by.contains(&thread))
        .collect()
}

/// One line for people: `name = value unit (spread ±x %; chosen while seeing: ...)`.
pub fn describe(a: &Assumption) -> String {
    format!(
        "{} = {} {} (spread ±{:.0} %; chosen while seeing {})",
        a.name,
        crate::report::sig(a.value, 4),
        a.unit,
        100.0 * a.rel_spread,
        a.chosen_while_seeing
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_assumption_is_finite_with_a_spread_and_a_thread() {
        for a in all() {
            assert!(a.value.is_finite(), "{}", a.name);
            assert!(a.rel_spread > 0.0, "{}", a.name);
            assert!(!a.used_by.is_empty(), "{}", a.name);
            assert!(!a.provenance.is_empty(), "{}", a.name);
        }
        for t in crate::validate::threads().unwrap() {
            if t != "002" {
                assert!(
                    !for_thread(&t).is_empty(),
                    "thread {t} has no assumption listed"
                );
            }
        }
    }
}
