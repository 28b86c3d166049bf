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
//! - Each level's counter line is a FIFO server visited once per walk by each of the `N` CPUs
//!   that charge (all of the cgroup's CPUs). Its service time is the cache-line transfer a visit
//!   costs: `s = τ · x̄`, `τ` transfers per visit (free parameter `transfers_per_visit`), `x̄` the
//!   mean core-to-core transfer from a random other CPU of the machine ([`mean_transfer_ns`]:
//!   SMT sibling, same socket, other socket weighted by how many CPUs are there).
//! - The `L` lines form a tandem; each is solved with the finite-source queue of
//!   [`crate::model::lock`] (M/M/1//N, exact for one line) with the think time of the rest of the
//!   loop, `Z_line = Z_w + (L − 1) R`, iterated to a fixed point in the response `R` per line.
//! - Walk cost `L·R`; payload pages per CPU per second `x = (B/k) / (Z_w + L R)`; one netperf
//!   instance = one sender + one receiver CPU, each handling every payload page, so the instance's
//!   throughput is `x · 4096 · 8` bit/s.
//!
//! # Assumptions and validity
//! - All charging CPUs share one leaf memcg (thread 001: 36 netperf/netserver pairs in one
//!   three-level hierarchy); no reclaim, no `memory.high` throttling (usage below limits).
//! - The CPUs are busy (`N = min(2 × instances, CPUs)`), spread evenly over the sockets.
//! - Exponential service at each line (the lock module's M/M/1//N); `k` independent of `B`.
//! - Valid for `B ≥ 1`, depth ≥ 1; at `B → ∞` the throughput tends to `1/t₀`.
//!
//! # References
//! - `mm/memcontrol.c` (6.0): `try_charge_memcg()`, `consume_stock()`, `refill_stock()`,
//!   `drain_stock()`, `mem_cgroup_charge_skmem()`, `mem_cgroup_uncharge_skmem()`.
//! - `mm/page_counter.c` (6.0): `page_counter_try_charge()`, `page_counter_cancel()`,
//!   `propagate_protected_usage()`.
//! - `include/linux/memcontrol.h`: `MEMCG_CHARGE_BATCH` 32 (≤ 6.0-rc1), 64 (6.0, commit
//!   1813e51eece0, thread 001).

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

/// Default cache-line transfers per visit of one counter level (physical parameter
/// `transfers_per_visit`).
///
/// Derived from `page_counter_try_charge()` in 6.0-rc1: one `atomic_long_add_return()` on
/// `usage` (1 transfer); the `memory.high` loop of `try_charge_memcg()` re-reads every level's
/// `usage` after a charge walk (≈ 0.5 per visit over charge and uncharge walks); and at the
/// level with `memory.min`/`memory.low` set (thread 001's top level) `propagate_protected_usage()`
/// does `atomic_long_xchg()` on `min_usage` and on `low_usage`, which sits on the struct's second
/// cache line (≈ 0.5 per visit averaged over the levels). About 2.
pub const TRANSFERS_PER_VISIT_DERIVED: f64 = 2.0;

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = [
    "fixed_ns_per_page",
    "transfers_per_visit",
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
    /// Mean core-to-core line transfer, ns ([`mean_transfer_ns`]).
    pub transfer_ns: f64,
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
    /// Counter-line service (the transfer itself) per payload page, ns.
    pub counter_service_ns_per_page: f64,
    /// Waiting for counter lines held by other CPUs, per payload page, ns.
    pub counter_wait_ns_per_page: f64,
    /// Hierarchy walks per payload page per CPU.
    pub walks_per_page: f64,
    /// Service time of one counter line visit, ns.
    pub line_service_ns: f64,
    /// Mean response (wait + service) at one counter line, ns.
    pub line_response_ns: f64,
    /// Utilisation of each counter line.
    pub line_utilisation: f64,
    /// Probability a visit finds the line owned by another CPU's pending RMW.
    pub line_p_contended: f64,
}

impl MemcgModel {
    /// Builds the model: `instances` netperf pairs on `machine`, `cgroup_depth` levels.
    pub fn new(machine: &Machine, instances: u32, cgroup_depth: u32) -> Result<MemcgModel> {
        let cpus = machine.topology.sockets.value
            * machine.topology.cores_per_socket.value
            * machine.topology.threads_per_core.value;
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
        })
    }

    /// Estimates throughput and terms at `batch_pages` with parameters in [`PARAM_NAMES`] order.
    pub fn estimate(&self, params: &[f64], batch_pages: u32) -> Result<MemcgEstimate> {
        let [t0, tau, k] = match params {
            [a, b, c] => [*a, *b, *c],
            _ => {
                return Err(Error::invalid(
                    INPUT,
                    "params",
                    format!("expected 3 parameters, got {}", params.len()),
                ))
            }
        };
        for (name, v) in PARAM_NAMES.iter().zip([t0, tau, k]) {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    INPUT,
                    *name,
                    format!("must be > 0, got {v}"),
                ));
            }
        }
        if batch_pages == 0 {
            return Err(Error::invalid(INPUT, "batch_pages", "must be ≥ 1"));
        }
        let levels = self.cgroup_depth + 1;
        let l = f64::from(levels);
        let b = f64::from(batch_pages);
        let s = tau * self.transfer_ns;
        let z_walk = b / k * t0;
        let n = self.charging_cpus;
        // Fixed point in the per-line response R.
        let mut r = s;
        let mut sol = machine_repairman(n, z_walk + (l - 1.0) * r, s)?;
        for _ in 0..200 {
            sol = machine_repairman(n, z_walk + (l - 1.0) * r, s)?;
            let new = sol.response_ns_mean;
            let done = (new - r).abs() <= 1e-10 * new.max(1.0);
            r = 0.5 * (r + new);
            if done {
                break;
            }
        }
        let walks_per_page = k / b;
        let cycle = z_walk + l * r;
        let pages_per_ns = (b / k) / cycle;
        let ns_per_page = 1.0 / pages_per_ns;
        Ok(MemcgEstimate {
            batch_pages,
            levels,
            throughput_mbps: pages_per_ns * 1e9 * PAGE_BYTES * 8.0 / 1e6,
            ns_per_page,
            fixed_ns_per_page: t0,
            counter_service_ns_per_page: walks_per_page * l * s,
            counter_wait_ns_per_page: walks_per_page * l * (r - s).max(0.0),
            walks_per_page,
            line_service_ns: s,
            line_response_ns: r,
            line_utilisation: sol.utilisation,
            line_p_contended: sol.p_contended,
        })
    }

    /// Default parameter values in [`PARAM_NAMES`] order.
    pub fn default_params(&self) -> Vec<f64> {
        self.params().iter().map(|p| p.default).collect()
    }
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
            ParamSpec::new(PARAM_NAMES[1], "transfers", TRANSFERS_PER_VISIT_DERIVED)
                .with_bounds(1.0, 64.0)
                .with_provenance("derived: page_counter_try_charge() 6.0-rc1: 1 RMW on usage + re-read by the memory.high loop + xchg of min_usage/low_usage at the protected level, about 2 per visit")
                .with_description("cache-line transfers one visit of a counter level costs"),
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
        let p = [1000.0, 8.0, 2.0];
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
