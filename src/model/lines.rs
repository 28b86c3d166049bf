//! Contended cache lines: how long a CPU waits for a line that other CPUs keep writing, and
//! what SMT siblings save by sharing their core's copy.
//!
//! A line written by many CPUs moves between **cores** (a transfer, the machine file's
//! core-to-core latency between cores, [`mean_core_transfer_ns`]). The threads of one core
//! share its L1D, so a thread that needs a line its sibling is queued for or fetching is
//! served by the same transfer. [`shared_mva`] solves a closed network of such lines by an
//! approximate mean value analysis; with one busy thread per core
//! ([`active_threads_per_core`]) it is exact MVA.
//!
//! Used by [`crate::model::memcg`] (page_counter lines, thread 001) and
//! [`crate::model::vmstat`] (the shared NUMA counters a fold updates, thread 002). Not by the
//! zone->lock models: a spinlock's holds exclude each other whatever core they run on.
//!
//! # References
//! - Intel 64 and IA-32 Architectures Optimization Reference Manual: the two logical
//!   processors of a core share its L1 data cache and fill buffers.
//! - Discrete-event check of the analysis: `tests/it/memcg_smt.rs`.

use crate::error::{Error, Result};
use crate::hw::machine::Machine;

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
    weighted_transfer_ns(machine, smt, same_socket, cross)
}

/// Time to fetch a line that another core of the same LLC domain holds, and whose latest copy
/// has reached the LLC, ns: an LLC hit when the LLC is inclusive (it keeps a copy of every
/// private line), otherwise a transfer from that core (`transfer_ns`: a victim or
/// non-inclusive LLC does not keep a line that moved between cores). Used for a line in
/// another core's private cache ([`crate::model::cache`]) and for the re-reads after the first
/// of a burst ([`crate::model::reader_burst`]).
pub fn from_other_core_ns(machine: &Machine, transfer_ns: f64) -> f64 {
    match machine.llc().map(|c| c.policy.value) {
        Some(crate::hw::machine::Policy::Inclusive) => machine.latency_ns.llc_hit.value,
        _ => transfer_ns,
    }
}

/// Threads per core that run at once when `active_cpus` busy CPUs are spread one per core
/// first (the scheduler prefers idle cores, `select_idle_core()`), then onto SMT siblings:
/// `clamp(active / cores, 1, threads per core)`.
pub fn active_threads_per_core(machine: &Machine, active_cpus: u32) -> f64 {
    let cores = f64::from(machine.cores().max(1));
    let tpc = f64::from(machine.topology.threads_per_core.value.max(1));
    (f64::from(active_cpus) / cores).clamp(1.0, tpc)
}

/// Mean core-to-core transfer time, ns, of a line moving to a CPU from a random busy CPU on
/// **another core**, when `active_cpus` CPUs spread evenly over the sockets with
/// [`active_threads_per_core`] threads on each busy core: same socket at `c2c_same_llc` (or
/// `c2c_cross_llc` for the other LLC domains), other sockets at `c2c_cross_socket`. SMT
/// siblings are left out: they share their core's L1D, so a line never moves between them
/// (see [`shared_mva`]). One busy core: `c2c_smt`.
pub fn mean_core_transfer_ns(machine: &Machine, active_cpus: u32) -> Result<f64> {
    let t = &machine.topology;
    let sockets = f64::from(t.sockets.value.max(1));
    let per_socket_all = f64::from(t.cores_per_socket.value) * f64::from(t.threads_per_core.value);
    let n = f64::from(active_cpus);
    let a = active_threads_per_core(machine, active_cpus);
    let lat = &machine.latency_ns;
    if n - a <= 0.0 {
        return Ok(lat.c2c_smt.value);
    }
    let per_socket = (n / sockets).min(per_socket_all).max(a);
    let same_socket = per_socket - a;
    let cross = (n - per_socket).max(0.0);
    weighted_transfer_ns(machine, 0.0, same_socket, cross)
}

/// Mean transfer, ns, from `smt` SMT siblings (`c2c_smt`), `same_socket` CPUs of the same
/// socket (`c2c_same_llc`, or `c2c_cross_llc` for the socket's other LLC domains) and `cross`
/// CPUs of other sockets (`c2c_cross_socket`, an error if the machine file lacks it).
fn weighted_transfer_ns(machine: &Machine, smt: f64, same_socket: f64, cross: f64) -> Result<f64> {
    let t = &machine.topology;
    let lat = &machine.latency_ns;
    let same_llc = machine.c2c_over_llc_domains_ns(f64::from(t.llc_domains_per_socket.value));
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
    Ok(
        (smt * lat.c2c_smt.value + same_socket * same_llc + cross * cross_ns)
            / (smt + same_socket + cross),
    )
}

/// One kind of transfer sequence a CPU role runs: how often per unit of work, and its
/// transfers in program order (line indices).
pub struct Episode<'a> {
    /// Episodes per unit of work (per payload page, per allocation, ...).
    pub rate: f64,
    /// Its transfers in program order: line indices.
    pub visits: &'a [usize],
}

/// What [`shared_mva`] returns, per unit of work of one CPU (mean over the roles) at `N`.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedSolution {
    /// Time at each line (waiting and transfers), ns.
    pub resp: Vec<f64>,
    /// Transfers this CPU pays at each line (a shared transfer counts half to each sibling), ns.
    pub service: Vec<f64>,
    /// Throughput at `N`, units of work per ns, all CPUs.
    pub x: f64,
    /// Throughput at `N − 1` CPUs (for the arrival theorem).
    pub x_prev: f64,
}

/// Approximate mean value analysis of the counter lines when SMT siblings share transfers.
///
/// Closed network of `n_cpus` CPUs, `a` busy threads per core, a delay of `think_ns` per
/// unit of work (a payload page, an allocation) and FCFS exponential stations (the lines) whose service is one transfer of
/// `x_ns` to a core. Each role (the same number of CPUs each) runs its episodes (walks,
/// flushes) at their rates per payload page, each a sequence of transfers.
///
/// The siblings of a core share its L1D: a thread that needs a line which its sibling is
/// waiting for or fetching is served by the same transfer (its request merges into the
/// sibling's; a locked RMW then runs on the core's copy). After that the two go through the
/// rest of the sequence together, one transfer per step for both. Equations, per population
/// `n` and line `l` (`Q_l` CPUs and `G_l` transfers-in-progress-or-queued at the line, from
/// population `n − 1`, arrival theorem):
/// - at the first transfer of a sequence on line `l`, not yet paired: the sibling is there
///   with `p_l = 1 − (1 − Q_l/(n−1))^(a−1)` (independence); the response is then half the
///   full one (it joins at a random place), else `R_l = x (1 + G_l)`;
/// - paired earlier in the sequence: response `R_l`, half a transfer paid;
/// - `X(n) = n / (Z + Σ_l resp_l)`, `Q_l = X resp_l`, `G_l = X units_l` where a paired CPU
///   counts half a place in the queue.
///
/// With `a = 1` (no SMT, or fewer busy CPUs than cores) it is exact MVA (product form). A
/// discrete-event simulation of the same assumptions checks it (`tests/it/memcg_smt.rs`).
pub fn shared_mva(
    n_cpus: u32,
    a: f64,
    think_ns: f64,
    x_ns: f64,
    roles: &[Vec<Episode>],
    n_lines: usize,
) -> SharedSolution {
    shared_mva_split(n_cpus, a, think_ns, x_ns, roles, &vec![1.0; n_lines])
}

/// [`shared_mva`] where line `l` stands for `1 / share[l]` lines of the same kind, each with
/// `share[l]` of its traffic (e.g. the leaf counters of `M` sibling memcgs that every CPU
/// charges alike: `share = 1/M`). By symmetry every copy has the same queue, so an arrival at
/// the line finds `share[l]` of the queued CPUs and transfers there
/// (`Q_l`, `G_l` scaled by `share[l]`); the episodes' visits name the line once per transfer as
/// before. With every share 1 it is [`shared_mva`] exactly.
pub fn shared_mva_split(
    n_cpus: u32,
    a: f64,
    think_ns: f64,
    x_ns: f64,
    roles: &[Vec<Episode>],
    share: &[f64],
) -> SharedSolution {
    let n_lines = share.len();
    let k = roles.len().max(1) as f64;
    let mut q = vec![0.0; n_lines];
    let mut g = vec![0.0; n_lines];
    let mut resp = vec![0.0; n_lines];
    let mut service = vec![0.0; n_lines];
    let mut x = 0.0;
    let mut x_prev = 0.0;
    let mut units = vec![0.0; n_lines];
    let mut seen = vec![false; n_lines];
    for n in 1..=n_cpus {
        resp.iter_mut().for_each(|v| *v = 0.0);
        service.iter_mut().for_each(|v| *v = 0.0);
        units.iter_mut().for_each(|v| *v = 0.0);
        let others = f64::from(n - 1);
        for ep in roles.iter().flatten().filter(|e| e.rate > 0.0) {
            seen.iter_mut().for_each(|v| *v = false);
            let mut single = 1.0;
            for &l in ep.visits {
                let full = x_ns * (1.0 + g[l]);
                let mut joins = 0.0;
                if !seen[l] {
                    seen[l] = true;
                    if n > 1 && a > 1.0 {
                        let there = (q[l] / others).clamp(0.0, 1.0);
                        // Two threads per core (the common case) raise to the power 1:
                        // the base itself, which is what powf returns, without its cost.
                        let alone = if a == 2.0 {
                            1.0 - there
                        } else {
                            (1.0 - there).powf(a - 1.0)
                        };
                        joins = single * (1.0 - alone);
                        single -= joins;
                    }
                }
                let paired = 1.0 - single - joins;
                resp[l] += ep.rate * (joins * 0.5 * full + (1.0 - joins) * full);
                units[l] += ep.rate * (paired * 0.5 * full + single * full);
                service[l] += ep.rate * x_ns * (paired * 0.5 + single);
            }
        }
        for v in resp
            .iter_mut()
            .chain(service.iter_mut())
            .chain(units.iter_mut())
        {
            *v /= k;
        }
        x_prev = x;
        x = f64::from(n) / (think_ns + resp.iter().sum::<f64>());
        for l in 0..n_lines {
            q[l] = share[l] * (x * resp[l]);
            g[l] = share[l] * (x * units[l]);
        }
    }
    SharedSolution {
        resp,
        service,
        x,
        x_prev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mva_of_one_station_is_the_machine_repairman() {
        // One thread per core: exact MVA. One line visited once per episode, episode rate 1.
        let seq = [0usize];
        let roles = vec![vec![Episode {
            rate: 1.0,
            visits: &seq,
        }]];
        let s = shared_mva(8, 1.0, 100.0, 20.0, &roles, 1);
        let mr = crate::model::lock::machine_repairman(8, 100.0, 20.0).unwrap();
        approx::assert_relative_eq!(s.resp[0], mr.response_ns_mean, max_relative = 1e-9);
        approx::assert_relative_eq!(s.service[0], 20.0, max_relative = 1e-12);
    }

    #[test]
    fn siblings_share_only_when_queued_together() {
        // Two threads per core: at light load almost nothing is shared; at most a CPU joins its
        // sibling's first transfer (pays none) and pays half of the other two (floor 20 of 60);
        // a single CPU never shares.
        let seq = [0usize, 0, 0];
        let roles = vec![vec![Episode {
            rate: 1.0,
            visits: &seq,
        }]];
        let light = shared_mva(8, 2.0, 1e6, 20.0, &roles, 1);
        assert!(light.service[0] > 0.999 * 60.0, "{}", light.service[0]);
        // Light: 8 CPUs x 60 ns per 1 ms episode keep the line 5e-4 busy, so a sibling is queued
        // at about that share of transfers and the service stays within 0.1 % of 60 ns.
        // Heavy: 64 CPUs with 100 ns of think saturate the line, a sibling is queued at nearly
        // every transfer and the service falls near the 20 ns floor (22.7 when written): below
        // 0.9 x 60 says sharing is substantial without fixing how close to the floor.
        let heavy = shared_mva(64, 2.0, 100.0, 20.0, &roles, 1);
        assert!(
            heavy.service[0] < 0.9 * 60.0 && heavy.service[0] >= 20.0,
            "{}",
            heavy.service[0]
        );
        let one = shared_mva(1, 2.0, 100.0, 20.0, &roles, 1);
        approx::assert_relative_eq!(one.resp[0], 60.0, max_relative = 1e-12);
    }

    #[test]
    fn transfer_mix_between_smt_and_cross_socket() {
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let x = mean_transfer_ns(&m, 72).unwrap();
        // A line comes equally from any of the other 71 CPUs: 1 SMT sibling, 34 on the socket
        // (18 cores x 2 threads), 36 across it, at the machine file's latencies.
        let l = &m.latency_ns;
        let (smt, same) = (l.c2c_smt.value, l.c2c_same_llc.value);
        let cross = l.c2c_cross_socket.as_ref().unwrap().value;
        approx::assert_relative_eq!(
            x,
            (smt + 34.0 * same + 36.0 * cross) / 71.0,
            max_relative = 1e-12
        );
        // Between cores only: no SMT sibling in the mix (17 other cores on the socket, 18
        // across), so a little slower.
        let c = mean_core_transfer_ns(&m, 72).unwrap();
        approx::assert_relative_eq!(c, (17.0 * same + 18.0 * cross) / 35.0, max_relative = 1e-12);
        assert!(c > x);
        assert_eq!(active_threads_per_core(&m, 72), 2.0);
        assert_eq!(active_threads_per_core(&m, 36), 1.0);
        assert_eq!(active_threads_per_core(&m, 1000), 2.0);
    }
}
