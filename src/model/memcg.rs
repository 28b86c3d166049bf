//! memcg charge batching (thread 001): the per-CPU charge stock and the contended page_counter
//! cache lines of the cgroup hierarchy.
//!
//! # Mechanism (kernel 6.0, `mm/memcontrol.c`)
//! `try_charge_memcg()` first calls `consume_stock()`: if this CPU's `memcg_stock` holds enough
//! pre-charged pages of the same memcg the charge is per-CPU and cheap. Otherwise it charges
//! `batch = max(MEMCG_CHARGE_BATCH, nr_pages)` with `page_counter_try_charge()`, which walks the
//! hierarchy (`for (c = counter; c; c = c->parent)`) doing `atomic_long_add_return()` on each
//! level's `usage`, and `refill_stock()` keeps the surplus. Uncharges (`mem_cgroup_uncharge_skmem()`
//! → `refill_stock()`) grow the stock; once it exceeds `MEMCG_CHARGE_BATCH`, `drain_stock()` →
//! `page_counter_uncharge()` walks the hierarchy again. So every `B = MEMCG_CHARGE_BATCH` pages
//! moved through a CPU's stock cost one walk of `L` levels (the cgroup depth plus the root's
//! counter: `mem_cgroup_css_alloc()` parents every counter to the parent memcg's, root included).
//!
//! # Equations
//! - A CPU moves `k` pages through its stock per payload page (charge on one side, uncharge on the
//!   other: see [`STOCK_PAGES_PER_PAYLOAD_PAGE`]), so between two walks it processes `B/k` payload
//!   pages of fixed work `t₀` ns each: think time per walk `Z_w = (B/k) t₀`.
//! - A walk visits a set of shared cache lines ([`counter_lines`]): each level's `usage` line,
//!   the protected level's second line (`low_usage`), and the global `stats_flush_threshold` of
//!   `memcg_rstat_updated()`, whose per-CPU trigger is also `MEMCG_CHARGE_BATCH`. Line `i` costs
//!   `n_i` transfers per walk, derived from the code under contention (every separate access to
//!   the line after another CPU has taken it is a transfer; plain loads that follow each other
//!   share one miss; a locked RMW is serialising). Its service time per visit is
//!   `s_i = n_i · σ · x̄`: `x̄` the mean idle core-to-core transfer from a random other CPU
//!   ([`mean_transfer_ns`]), `σ` (free parameter `transfer_scale`) how much longer a transfer
//!   takes on a line that all CPUs hammer (default 1: the idle latency).
//! - Each line is a FIFO server visited once per walk by each of the `N` charging CPUs, solved
//!   with the finite-source queue of [`crate::model::lock`] (M/M/1//N), its think time being the
//!   rest of the loop `Z_i = Z_w + Σ_{j≠i} R_j`, iterated to a fixed point in the responses `R_i`.
//! - Payload pages per CPU per second `x = (B/k) / (Z_w + Σ R_i)`; one netperf instance = one
//!   sender + one receiver CPU, each handling every payload page, so the instance's throughput is
//!   `x · 4096 · 8` bit/s. In the root memcg no line is visited: throughput `4096 · 8 / t₀`.
//!
//! # Assumptions and validity
//! - All charging CPUs share one leaf memcg (thread 001: 36 netperf/netserver pairs in one
//!   three-level hierarchy, top level with `memory.min` and `memory.low` set); no reclaim, no
//!   `memory.high` throttling (usage below limits; `low`/`min` far below usage, so the protected
//!   usage never changes).
//! - The CPUs are busy (`N = min(2 × instances, CPUs)`), spread evenly over the sockets.
//! - Exponential service at each line (the lock module's M/M/1//N); `k` independent of `B`;
//!   the overshoot of `refill_stock()`'s drain above `B` is ignored.
//! - Valid for `B ≥ 1`, depth ≥ 1; at `B → ∞` the throughput tends to `1/t₀`.
//!
//! # References
//! - `mm/memcontrol.c` (6.0): `try_charge_memcg()` (including the `memory.high` loop after a
//!   charge walk), `consume_stock()`, `refill_stock()`, `drain_stock()`,
//!   `mem_cgroup_charge_skmem()`, `mem_cgroup_uncharge_skmem()`, `memcg_rstat_updated()`.
//! - `mm/page_counter.c` (6.0-rc1 and 6.0): `page_counter_try_charge()`, `page_counter_cancel()`,
//!   `propagate_protected_usage()`; `include/linux/page_counter.h` (field layout).
//! - `include/linux/memcontrol.h`: `MEMCG_CHARGE_BATCH` 32 (≤ 6.0-rc1), 64 (6.0, commit
//!   1813e51eece0, thread 001).
//! - Shakeel Butt, "[PATCH v2 0/3] memcg: optimize charge codepath" (2022-08, the cover letter of
//!   thread 001's series): the same workload in the root memcg and with each patch alone.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::{FitModel, InputSpec, ParamSpec, TargetSpec};
use crate::machine::Machine;
use crate::model::lock::machine_repairman;

/// Label for errors about inputs built in code.
const INPUT: &str = "memcg model";

/// Bytes in one payload page.
pub const PAGE_BYTES: f64 = 4096.0;

/// Pages each CPU moves through its charge stock per payload page (default of the physical
/// parameter `stock_pages_per_payload_page`).
///
/// Derived, not fitted: over loopback the sender CPU charges the sending socket's `sk_wmem` and,
/// in the softirq that delivers the skb on the same CPU, the receiving socket's `sk_rmem`; the
/// receiver CPU uncharges both (rmem in `recvmsg`, wmem when it sends the ACK that frees the
/// sender's skb). Since 6.0-rc1 (`4890b686f408`, "net: keep sk->sk_forward_alloc as small as
/// possible") sockets no longer keep forward-allocated pages, so every page goes through
/// `mem_cgroup_charge_skmem()` / `mem_cgroup_uncharge_skmem()`. skb truesize overhead is ignored.
pub const STOCK_PAGES_PER_PAYLOAD_PAGE: f64 = 2.0;

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
    /// Cache-line transfers per walk (mean of a charge walk and an uncharge walk).
    pub transfers_per_walk: f64,
}

/// The shared lines a walk touches and the transfers each costs, derived from the code.
///
/// `depth` levels below the root; the top level (level 1) carries `memory.min`/`memory.low`
/// (thread 001). Counting rule (heavy contention: the line leaves right after each access,
/// because the next requester is already waiting): a locked RMW is one transfer; the plain
/// loads that follow it on the same line are one more (they miss together); loads of a line
/// nobody writes are free.
///
/// `usage` line of a level, 6.0-rc1 layout (`page_counter_try_charge()`, 6.0-rc1):
/// - charge walk: `atomic_long_add_return(usage)` 1; loads of `max`, `min`, `min_usage`, `low`
///   after it 1; the `memory.high` loop of `try_charge_memcg()` re-reads `usage` and `high` of
///   every level 1 (3). Protected level: `atomic_long_xchg(min_usage)` +1 and the load of `low`
///   after it +1 (5). Root: RMW, `max`, the `memory.high` re-read (3; no propagation,
///   `!c->parent`).
/// - uncharge walk (`page_counter_cancel()`): `atomic_long_sub_return(usage)` 1; loads in
///   `propagate_protected_usage()` 1 (2); protected level: xchg of `min_usage` +1, load of `low`
///   +1 (4); root: the RMW only (1).
/// - second line (`elow`, `low_usage`, `watermark`, `parent`): written only at the protected
///   level, by `atomic_long_xchg(low_usage)` 1, then the loads of `watermark`/`parent` 1 (2 per
///   walk, charge and uncharge alike); read-only elsewhere.
///
/// Patch (A): the xchgs go (the protected usage never changes: `low` is far below `usage`), so
/// the protected level costs what the others do and its second line is read-only.
/// Patch (B): `usage` alone: charge = RMW + the `memory.high` re-read (2), uncharge = RMW (1);
/// the protection counters and `watermark` share a second line, written at the protected level
/// by the two xchgs (charge: xchg, xchg, `watermark` load = 3; uncharge: 2) unless (A) removes
/// them; the limits and `parent` sit on a read-only third line.
///
/// `stats_flush_threshold` (`memcg_rstat_updated()`, 6.0): one `atomic_add` each time a CPU's
/// |MEMCG_SOCK| updates pass `MEMCG_CHARGE_BATCH` pages, i.e. once per walk: 1.
pub fn counter_lines(depth: u32, code: CounterCode) -> Vec<CounterLine> {
    let mut out = Vec::new();
    let split = code.split_layout();
    let xchg = !code.fewer_atomics();
    for level in (0..=depth).rev() {
        let root = level == 0;
        let protected = level == 1;
        let (charge, uncharge) = if split {
            (2.0, 1.0)
        } else if root {
            // RMW + max load + memory.high re-read; cancel: RMW only.
            (3.0, 1.0)
        } else {
            let extra = if protected && xchg { 2.0 } else { 0.0 };
            (3.0 + extra, 2.0 + extra)
        };
        let what = if root {
            "root".to_string()
        } else if protected {
            format!("level {level} (protected)")
        } else {
            format!("level {level}")
        };
        out.push(CounterLine {
            name: format!("{what} usage"),
            transfers_per_walk: 0.5 * (charge + uncharge),
        });
        if protected && xchg {
            out.push(CounterLine {
                name: format!("{what} protection counters"),
                transfers_per_walk: if split { 2.5 } else { 2.0 },
            });
        }
    }
    out.push(CounterLine {
        name: "stats_flush_threshold".to_string(),
        transfers_per_walk: 1.0,
    });
    out
}

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = [
    "fixed_ns_per_page",
    "transfer_scale",
    "stock_pages_per_payload_page",
];

/// Parameters held at their defaults unless freed.
pub const DEFAULT_FIXED: [&str; 1] = ["stock_pages_per_payload_page"];

/// Mean core-to-core transfer time, ns, from a random other CPU when `active_cpus` CPUs spread
/// evenly over the machine's sockets: SMT siblings at `c2c_smt`, same socket at `c2c_same_llc`
/// (or `c2c_cross_llc` for the other LLC domains of the socket), other sockets at
/// `c2c_cross_socket`.
pub fn mean_transfer_ns(machine: &Machine, active_cpus: u32) -> Result<f64> {
    let t = &machine.topology;
    let sockets = f64::from(t.sockets.value.max(1));
    let tpc = f64::from(t.threads_per_core.value.max(1));
    let per_socket_all = f64::from(t.cores_per_socket.value) * tpc;
    let n = f64::from(active_cpus);
    if active_cpus < 2 {
        return Ok(machine.latency_ns.c2c_smt.value);
    }
    let per_socket = (n / sockets).min(per_socket_all).max(1.0);
    let others = n - 1.0;
    let smt = (tpc - 1.0).min(per_socket - 1.0).max(0.0);
    let same_socket = (per_socket - 1.0 - smt).max(0.0);
    let cross = (others - smt - same_socket).max(0.0);
    let lat = &machine.latency_ns;
    let domains = f64::from(t.llc_domains_per_socket.value.max(1));
    let same_llc = match &lat.c2c_cross_llc {
        Some(x) if domains > 1.0 => (lat.c2c_same_llc.value + (domains - 1.0) * x.value) / domains,
        _ => lat.c2c_same_llc.value,
    };
    let cross_ns = match &lat.c2c_cross_socket {
        Some(x) => x.value,
        None if cross > 0.0 => {
            return Err(Error::invalid(
                &machine.name,
                "latency_ns.c2c_cross_socket",
                "needed for a multi-socket machine",
            ))
        }
        None => 0.0,
    };
    Ok((smt * lat.c2c_smt.value + same_socket * same_llc + cross * cross_ns) / others)
}

/// The memcg charge model of one machine and workload shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemcgModel {
    /// Machine name.
    pub machine: String,
    /// CPUs charging the memcg (busy CPUs).
    pub charging_cpus: u32,
    /// netperf instances (pairs of sender and receiver).
    pub instances: u32,
    /// cgroup depth below the root (thread 001: 3).
    pub cgroup_depth: u32,
    /// Mean idle core-to-core line transfer, ns ([`mean_transfer_ns`]).
    pub transfer_ns: f64,
    /// The page_counter code.
    pub code: CounterCode,
    /// The shared lines a walk touches ([`counter_lines`]).
    pub lines: Vec<CounterLine>,
}

/// One shared line's queue at one batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineEstimate {
    /// The line.
    pub name: String,
    /// Transfers per walk.
    pub transfers_per_walk: f64,
    /// Service time of one visit, ns.
    pub service_ns: f64,
    /// Mean response (wait + service), ns.
    pub response_ns: f64,
    /// Utilisation.
    pub utilisation: f64,
}

/// One estimate with its terms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemcgEstimate {
    /// MEMCG_CHARGE_BATCH, pages.
    pub batch_pages: u32,
    /// Counter levels walked (depth + root).
    pub levels: u32,
    /// netperf throughput per instance, Mbit/s.
    pub throughput_mbps: f64,
    /// CPU ns per payload page, total.
    pub ns_per_page: f64,
    /// Fixed work per payload page, ns.
    pub fixed_ns_per_page: f64,
    /// Counter-line service (the transfers themselves) per payload page, ns.
    pub counter_service_ns_per_page: f64,
    /// Waiting for counter lines held by other CPUs, per payload page, ns.
    pub counter_wait_ns_per_page: f64,
    /// Hierarchy walks per payload page per CPU.
    pub walks_per_page: f64,
    /// Service time of one visit of the busiest line, ns.
    pub line_service_ns: f64,
    /// Mean response (wait + service) at the busiest line, ns.
    pub line_response_ns: f64,
    /// Utilisation of the busiest line.
    pub line_utilisation: f64,
    /// Probability a visit finds the busiest line owned by another CPU's pending access.
    pub line_p_contended: f64,
    /// Every line.
    pub lines: Vec<LineEstimate>,
}

impl MemcgModel {
    /// Builds the model: `instances` netperf pairs on `machine`, `cgroup_depth` levels, 6.0-rc1
    /// page_counter code.
    pub fn new(machine: &Machine, instances: u32, cgroup_depth: u32) -> Result<MemcgModel> {
        let cpus = machine.cpus();
        if instances == 0 {
            return Err(Error::invalid(INPUT, "instances", "must be ≥ 1"));
        }
        if cgroup_depth == 0 || cgroup_depth > 64 {
            return Err(Error::invalid(
                INPUT,
                "cgroup_depth",
                format!("must be 1..=64, got {cgroup_depth}"),
            ));
        }
        let charging = instances.saturating_mul(2).min(cpus).max(1);
        Ok(MemcgModel {
            machine: machine.name.clone(),
            charging_cpus: charging,
            instances,
            cgroup_depth,
            transfer_ns: mean_transfer_ns(machine, charging)?,
            code: CounterCode::Rc1,
            lines: counter_lines(cgroup_depth, CounterCode::Rc1),
        })
    }

    /// The same model with another page_counter code.
    pub fn with_code(mut self, code: CounterCode) -> MemcgModel {
        self.code = code;
        self.lines = counter_lines(self.cgroup_depth, code);
        self
    }

    /// Throughput per instance in the root memcg (no charging), Mbit/s, with parameters in
    /// [`PARAM_NAMES`] order.
    pub fn root_throughput_mbps(&self, params: &[f64]) -> Result<f64> {
        let t0 = check_params(params)?[0];
        Ok(1e9 / t0 * PAGE_BYTES * 8.0 / 1e6)
    }

    /// Estimates throughput and terms at `batch_pages` with parameters in [`PARAM_NAMES`] order.
    pub fn estimate(&self, params: &[f64], batch_pages: u32) -> Result<MemcgEstimate> {
        let [t0, scale, k] = check_params(params)?;
        if batch_pages == 0 {
            return Err(Error::invalid(INPUT, "batch_pages", "must be ≥ 1"));
        }
        let levels = self.cgroup_depth + 1;
        let b = f64::from(batch_pages);
        let z_walk = b / k * t0;
        let n = self.charging_cpus;
        let svc: Vec<f64> = self
            .lines
            .iter()
            .map(|l| l.transfers_per_walk * scale * self.transfer_ns)
            .collect();
        // Fixed point in the responses R_i of the lines in tandem.
        let mut r = svc.clone();
        let mut sols = Vec::with_capacity(svc.len());
        for _ in 0..400 {
            let total: f64 = r.iter().sum();
            sols.clear();
            let mut done = true;
            for (i, s) in svc.iter().enumerate() {
                let sol = machine_repairman(n, z_walk + total - r[i], *s)?;
                let new = sol.response_ns_mean;
                if (new - r[i]).abs() > 1e-10 * new.max(1.0) {
                    done = false;
                }
                sols.push(sol);
            }
            for (ri, sol) in r.iter_mut().zip(&sols) {
                *ri = 0.5 * (*ri + sol.response_ns_mean);
            }
            if done {
                break;
            }
        }
        let walks_per_page = k / b;
        let total_r: f64 = r.iter().sum();
        let total_s: f64 = svc.iter().sum();
        let cycle = z_walk + total_r;
        let pages_per_ns = (b / k) / cycle;
        let lines: Vec<LineEstimate> = self
            .lines
            .iter()
            .zip(svc.iter().zip(r.iter().zip(&sols)))
            .map(|(l, (s, (ri, sol)))| LineEstimate {
                name: l.name.clone(),
                transfers_per_walk: l.transfers_per_walk,
                service_ns: *s,
                response_ns: *ri,
                utilisation: sol.utilisation,
            })
            .collect();
        let busiest = sols
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation))
            .map(|(i, _)| i);
        let (ls, lr, lu, lp) = match busiest {
            Some(i) => (svc[i], r[i], sols[i].utilisation, sols[i].p_contended),
            None => (0.0, 0.0, 0.0, 0.0),
        };
        Ok(MemcgEstimate {
            batch_pages,
            levels,
            throughput_mbps: pages_per_ns * 1e9 * PAGE_BYTES * 8.0 / 1e6,
            ns_per_page: 1.0 / pages_per_ns,
            fixed_ns_per_page: t0,
            counter_service_ns_per_page: walks_per_page * total_s,
            counter_wait_ns_per_page: walks_per_page * (total_r - total_s).max(0.0),
            walks_per_page,
            line_service_ns: ls,
            line_response_ns: lr,
            line_utilisation: lu,
            line_p_contended: lp,
            lines,
        })
    }

    /// Default parameter values in [`PARAM_NAMES`] order.
    pub fn default_params(&self) -> Vec<f64> {
        self.params().iter().map(|p| p.default).collect()
    }
}

/// Checks the parameters: three, each finite and > 0.
fn check_params(params: &[f64]) -> Result<[f64; 3]> {
    let v = match params {
        [a, b, c] => [*a, *b, *c],
        _ => {
            return Err(Error::invalid(
                INPUT,
                "params",
                format!("expected 3 parameters, got {}", params.len()),
            ))
        }
    };
    for (name, x) in PARAM_NAMES.iter().zip(v) {
        if !(x.is_finite() && x > 0.0) {
            return Err(Error::invalid(
                INPUT,
                *name,
                format!("must be > 0, got {x}"),
            ));
        }
    }
    Ok(v)
}

impl FitModel for MemcgModel {
    fn name(&self) -> &str {
        "memcg-netperf"
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new(PARAM_NAMES[0], "ns", 2000.0)
                .with_bounds(50.0, 1e6)
                .with_provenance("assumed: start value; CPU time per payload page outside memcg charging (TCP, copy-free sendfile, loopback), fitted")
                .with_description("fixed work per payload page per CPU, ns"),
            ParamSpec::new(PARAM_NAMES[1], "x", 1.0)
                .with_bounds(0.1, 64.0)
                .with_provenance("assumed: 1 = a transfer on a hammered line costs the machine file's idle core-to-core latency; fitted when freed")
                .with_description("cost of one transfer on a contended counter line over the idle mean core-to-core transfer"),
            ParamSpec::new(PARAM_NAMES[2], "pages", STOCK_PAGES_PER_PAYLOAD_PAGE)
                .with_bounds(0.25, 64.0)
                .with_provenance("derived: loopback TCP charges sk_wmem and sk_rmem on the sender CPU and uncharges both on the receiver CPU (6.0-rc1 keeps no forward alloc)")
                .with_description("pages each CPU moves through its charge stock per payload page"),
        ]
    }

    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("memcg_charge_batch_pages", "pages")]
    }

    fn target(&self) -> TargetSpec {
        TargetSpec::new("throughput_mbps", "Mbit/s")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let b = x.first().copied().unwrap_or(f64::NAN);
        if !(b.is_finite() && b >= 1.0 && b <= f64::from(u32::MAX)) {
            return Err(Error::invalid(
                INPUT,
                "memcg_charge_batch_pages",
                format!("must be a whole number ≥ 1, got {b}"),
            ));
        }
        Ok(self.estimate(params, b.round() as u32)?.throughput_mbps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn larger_batch_is_never_slower_and_flattens() {
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let model = MemcgModel::new(&m, 36, 3).unwrap();
        let p = [1000.0, 3.0, 2.0];
        let mut last = 0.0;
        for b in [8, 16, 32, 64, 128, 256, 1024] {
            let e = model.estimate(&p, b).unwrap();
            assert!(e.throughput_mbps >= last);
            last = e.throughput_mbps;
        }
        let limit = 1e9 / 1000.0 * PAGE_BYTES * 8.0 / 1e6;
        assert!(last < limit && last > 0.9 * limit);
    }

    #[test]
    fn transfer_mix_between_smt_and_cross_socket() {
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let x = mean_transfer_ns(&m, 72).unwrap();
        assert!(x > 47.0 && x < 125.0, "{x}");
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    #[test]
    fn derived_lines_of_thread_001() {
        let l = counter_lines(3, CounterCode::Rc1);
        // 4 usage lines, the protected level's second line, stats_flush_threshold.
        assert_eq!(l.len(), 6);
        let top = l
            .iter()
            .find(|x| x.name == "level 1 (protected) usage")
            .unwrap();
        approx::assert_relative_eq!(top.transfers_per_walk, 4.5);
        let both = counter_lines(3, CounterCode::Both);
        assert_eq!(both.len(), 5);
        assert!(both.iter().all(|x| x.transfers_per_walk <= 1.5));
    }

    #[test]
    fn root_memcg_is_the_fixed_work_alone() {
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let model = MemcgModel::new(&m, 36, 3).unwrap();
        let r = model.root_throughput_mbps(&[1510.4, 1.0, 2.0]).unwrap();
        approx::assert_relative_eq!(r, 21694.8, max_relative = 1e-4);
        let e = model.estimate(&[1510.4, 1.0, 2.0], 1 << 20).unwrap();
        assert!(e.throughput_mbps < r && e.throughput_mbps > 0.99 * r);
    }
}
