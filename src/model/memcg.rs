//! memcg charge batching (thread 001): the per-CPU charge stock, the socket accounting that
//! feeds it, and the contended page_counter cache lines of the cgroup hierarchy.
//!
//! # Mechanism (kernel 6.0-rc1 / 6.0, `mm/memcontrol.c`, `net/core/sock.c`, `include/net/sock.h`)
//! - **Socket accounting** (after `4890b686f408`, "net: keep sk->sk_forward_alloc as small as
//!   possible", 6.0-rc1): `sk_wmem_schedule(sk, size)` / `sk_rmem_schedule()` charge
//!   `sk_mem_pages(size)` (resp. of `size − sk_forward_alloc`) pages through
//!   `__sk_mem_schedule()` → `__sk_mem_raise_allocated()` → `mem_cgroup_charge_skmem()` when
//!   the forward allocation does not cover `size`; every `sk_mem_uncharge()` ends in
//!   `sk_mem_reclaim()`, which returns all whole pages (`forward_alloc ≥ PAGE_SIZE`) through
//!   `__sk_mem_reduce_allocated()` → `mem_cgroup_uncharge_skmem()`. So each freed skb is one
//!   uncharge call of about its truesize in pages. [`SendfileFlow::cpu_ops`] replays these rules
//!   for netperf TCP_SENDFILE over loopback and yields the charge/uncharge calls each CPU makes.
//! - **Per-CPU stock** (`mm/memcontrol.c` 6.0): `try_charge_memcg()` → `consume_stock()` takes
//!   `n` pages from this CPU's `memcg_stock` if it caches this memcg, holds ≥ n and
//!   `n ≤ MEMCG_CHARGE_BATCH`; otherwise it charges `batch = max(MEMCG_CHARGE_BATCH, n)` with
//!   `page_counter_try_charge()` (a **charge walk**) and `refill_stock(batch − n)`.
//!   `mem_cgroup_uncharge_skmem()` → `refill_stock(n)`; once the stock exceeds
//!   `MEMCG_CHARGE_BATCH`, `drain_stock()` → `page_counter_uncharge()` returns the **whole**
//!   stock (an **uncharge walk**). Both calls also `mod_memcg_state(MEMCG_SOCK, ±n)` →
//!   `memcg_rstat_updated()`, whose per-CPU `stats_updates` adds `|n|` and, once it exceeds
//!   `MEMCG_CHARGE_BATCH`, does one `atomic_add` on the global `stats_flush_threshold` (a
//!   **flush**; 6.0 has no `atomic_read` guard, that came in 6.1). [`simulate_stock`] runs this
//!   code deterministically.
//! - **Walks**: `page_counter_try_charge()` / `page_counter_cancel()` go up the hierarchy
//!   (`for (c = counter; c; c = c->parent)`), root included (`mem_cgroup_css_alloc()` parents
//!   every counter to the parent memcg's). The lines and transfers: [`counter_lines`], with
//!   every field at its byte offset in `struct mem_cgroup` ([`RC1_MEMORY_OFFSET_BYTES`]: in
//!   6.0-rc1 `usage` shares a line with the limits, and the two xchg'd protection counters
//!   share the next with `watermark` and `parent`).
//!
//! # Equations
//! - Per payload page, CPU role `r` (sender, receiver) makes `w_c,r` charge walks, `w_u,r`
//!   uncharge walks and `f_r` flushes ([`simulate_stock`] over the cycle of calls of
//!   [`SendfileFlow::cpu_ops`], steady state).
//! - Line `i` costs `c_i`, `u_i`, `φ_i` transfers per charge walk, uncharge walk, flush
//!   ([`counter_lines`]; in program order: [`walk_visits`]); a transfer costs `σ · x̄` (`x̄`
//!   the mean idle transfer from a random busy CPU on another core,
//!   [`mean_core_transfer_ns`]; `σ` the free parameter `transfer_scale`).
//! - **SMT siblings share transfers.** The threads of a core share its L1D: a thread that needs
//!   a line its sibling is queued for or fetching is served by the same transfer (a load merges
//!   into the sibling's outstanding miss; a locked RMW is assumed to run on the core's copy
//!   before the core answers the next core's snoop), and the two go on
//!   through the rest of the walk together. So a line is a FCFS queue of *cores*, and how much
//!   work one transfer does grows with the queue: at batch 32 the siblings of the CPUs queued at
//!   the busiest line are often queued too, at 64 less often. With `a` busy threads per core
//!   ([`active_threads_per_core`]), at its first transfer on line `i` in a walk an unpaired
//!   CPU finds a sibling there with `p_i = 1 − (1 − Q_i/(n−1))^(a−1)`.
//! - Closed network, approximate mean value analysis (arrival theorem; each line a FCFS
//!   exponential station of service `σ x̄`, the fixed work a delay of `Z = t₀` ns per payload
//!   page), for `n = 1..N` CPUs: an unpaired transfer waits `R_i = σ x̄ (1 + G_i(n−1))`
//!   (`G_i` the queued and in-service transfers); joining a sibling, `R_i/2`, paying none;
//!   paired, `R_i`, paying half; `X(n) = n / (Z + Σ_i resp_i)`, `Q_i = X resp_i`, `G_i` the
//!   same with a paired CPU counted half (`shared_mva`). With `a = 1` it is exact MVA (product
//!   form). The cycle of one CPU per payload page, averaged over the two roles, is
//!   `t₀ + Σ_i resp_i(N)`.
//!   A discrete-event simulation of the same assumptions checks it (`tests/memcg_smt.rs`:
//!   within 1.1 % on the five charged runs of thread 001, gain 60.3 % vs 61.4 % when written).
//! - One netperf instance = one sender + one receiver CPU, each handling every payload page:
//!   throughput per instance `4096 · 8 / (t₀ + Σ_i resp_i)` bit/ns. In the root memcg no line
//!   is visited: `4096 · 8 / t₀`.
//!
//! # Assumptions and validity
//! - All sockets in one leaf memcg, one CPU per netperf and per netserver process
//!   (`N = min(2 × instances, CPUs)`), CPUs spread evenly over the sockets; no reclaim, no
//!   `memory.high` throttling, protected usage constant (`low`/`min` far below usage).
//! - Loopback: the data skb is delivered in the sender CPU's softirq (its `sk_rmem` charge runs
//!   there); netserver frees it (`sk_rmem` uncharge on the receiver CPU). The wmem uncharge of
//!   an acknowledged skb runs on the receiver CPU (the ACK's softirq, `tcp_ack()`) when the
//!   sender socket is not owned, on the sender CPU (socket backlog, `release_sock()`) when it
//!   is: the fraction on the sender is the physical parameter `ack_uncharge_on_sender`
//!   (default 0; thread 001 does not say, see [`SendfileFlow`]).
//! - skbs carry one loopback MSS (65 464 bytes) of page frags; truesize overhead per skb
//!   [`SKB_OVERHEAD_BYTES`]; every 10 KiB `sendfile()` is one `sk_wmem_schedule()` per skb
//!   it touches.
//! - Exponential service at each line. Siblings meet at a line independently of where they
//!   met before (the analysis), except that a pair stays together to the end of the walk.
//!   Busy CPUs fill one thread per core first, then siblings (the scheduler's idle-core
//!   preference). For more than 2 threads per core the pairing equations are an extension
//!   that no simulation checks.
//! - Valid for `B ≥ 1`, depth 1..=64; at `B → ∞` the throughput tends to `1/t₀`.
//!
//! # References
//! - `mm/memcontrol.c` (6.0): `try_charge_memcg()` (including the `memory.high` loop after a
//!   charge walk), `consume_stock()`, `refill_stock()`, `drain_stock()`,
//!   `mem_cgroup_charge_skmem()`, `mem_cgroup_uncharge_skmem()`, `memcg_rstat_updated()`.
//! - `mm/page_counter.c` (6.0-rc1 and 6.0): `page_counter_try_charge()`, `page_counter_cancel()`,
//!   `propagate_protected_usage()`; `include/linux/page_counter.h` (field layout).
//! - `net/core/sock.c` (6.0): `__sk_mem_schedule()`, `__sk_mem_raise_allocated()`,
//!   `__sk_mem_reduce_allocated()`, `__sk_mem_reclaim()`; `include/net/sock.h`:
//!   `sk_wmem_schedule()`, `sk_rmem_schedule()`, `sk_mem_uncharge()`, `sk_mem_reclaim()`;
//!   `net/ipv4/tcp.c` `do_tcp_sendpages()`, `tcp_stream_alloc_skb()`; `tcp_wmem_free_skb()`.
//! - `include/linux/memcontrol.h`: `MEMCG_CHARGE_BATCH` 32 (≤ 6.0-rc1), 64 (6.0, commit
//!   1813e51eece0, thread 001).
//! - Shakeel Butt, "[PATCH v2 0/3] memcg: optimize charge codepath" (2022-08): the workload in
//!   the root memcg and with each patch alone.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fit::{FitModel, InputSpec, ParamSpec, TargetSpec};
use crate::hw::machine::Machine;
use crate::model::lines::{active_threads_per_core, mean_core_transfer_ns, shared_mva, Episode};

/// Label for errors about inputs built in code.
const INPUT: &str = "memcg model";

/// The page size, defined once in [`crate::kernel::layout::PAGE_BYTES`].
pub use crate::kernel::layout::PAGE_BYTES;

/// `PAGE_SIZE` as an integer, bytes.
const PAGE: i64 = 4096;

/// netperf `-m 10K`: bytes per `sendfile()` call (thread 001's command line).
pub const MESSAGE_BYTES: u32 = 10 * 1024;

/// Payload bytes of one loopback skb: the MSS of `lo` (MTU 65 536 − 40 IPv6 − 20 TCP − 12
/// timestamp option = 65 464). `tcp_xmit_size_goal()` (6.0) returns `max(size_goal, mss_now)`
/// and the GSO limit (65 536 − 1 − `MAX_TCP_HEADER`) is below one MSS, so every skb is one MSS;
/// Nagle holds a partial one while data is in flight. 65 464 bytes span 16–17 page frags
/// (≤ `MAX_SKB_FRAGS` 17).
pub const SKB_PAYLOAD_BYTES: u32 = 65_464;

/// truesize of an skb beyond its payload, bytes: `SKB_TRUESIZE()` of the head that
/// `tcp_stream_alloc_skb()` allocates (`MAX_TCP_HEADER` plus `skb_shared_info` → a 1 KiB
/// kmalloc) plus the 256-byte aligned `struct sk_buff`. Approximate (config-dependent by ±256).
pub const SKB_OVERHEAD_BYTES: u32 = 1280;

/// skbs in one replayed cycle of the flow ([`SendfileFlow::cpu_ops`]): long enough that the
/// forward-allocation remainders repeat and a random ACK placement averages out.
pub const FLOW_CYCLE_SKBS: u32 = 512;

/// Cycles run before counting in [`MemcgModel::estimate`] (the stock reaches steady state).
const WARMUP_CYCLES: u32 = 1;

/// Cycles counted in [`MemcgModel::estimate`].
const COUNT_CYCLES: u32 = 4;

/// One call into the memcg stock of a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StockOp {
    /// `mem_cgroup_charge_skmem(memcg, n)`.
    Charge(u32),
    /// `mem_cgroup_uncharge_skmem(memcg, n)`.
    Uncharge(u32),
}

/// What a CPU's stock did over the counted cycles of [`simulate_stock`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StockCounts {
    /// Cycles counted.
    pub cycles: u64,
    /// Pages charged by the calls.
    pub pages_charged: u64,
    /// Pages uncharged by the calls.
    pub pages_uncharged: u64,
    /// `page_counter_try_charge()` walks.
    pub charge_walks: u64,
    /// Pages those walks charged.
    pub charge_walk_pages: u64,
    /// `drain_stock()` → `page_counter_uncharge()` walks.
    pub uncharge_walks: u64,
    /// Pages those walks returned.
    pub uncharge_walk_pages: u64,
    /// `atomic_add()`s on `stats_flush_threshold`.
    pub flushes: u64,
}

/// Runs the 6.0 per-CPU stock code on a repeated cycle of calls: `warmup_cycles` uncounted,
/// then `cycles` counted. Kernel rules (`mm/memcontrol.c`, 6.0; `B = batch_pages`):
/// - charge `n`: `consume_stock()` succeeds iff `n ≤ B` and `stock ≥ n` (stock −= n);
///   otherwise one charge walk of `max(B, n)` pages and `refill_stock(max(B, n) − n)`; then
///   `memcg_rstat_updated(n)`;
/// - uncharge `n`: `memcg_rstat_updated(n)`, then `refill_stock(n)`;
/// - `refill_stock(m)`: stock += m; if stock > B, one uncharge walk of the whole stock, stock 0;
/// - `memcg_rstat_updated(n)`: `x += n`; if `x > B`, one flush and `x = 0`.
///
/// One memcg only (the stock never switches `cached`). Errors: `batch_pages` 0, a call of 0
/// pages, an empty cycle, `cycles` 0.
pub fn simulate_stock(
    batch_pages: u32,
    ops: &[StockOp],
    warmup_cycles: u32,
    cycles: u32,
) -> Result<StockCounts> {
    if batch_pages == 0 {
        return Err(Error::invalid(INPUT, "batch_pages", "must be ≥ 1"));
    }
    if ops.is_empty() || cycles == 0 {
        return Err(Error::invalid(
            INPUT,
            "ops",
            "need a non-empty cycle of calls and ≥ 1 counted cycle",
        ));
    }
    if ops
        .iter()
        .any(|o| matches!(o, StockOp::Charge(0) | StockOp::Uncharge(0)))
    {
        return Err(Error::invalid(INPUT, "ops", "a call of 0 pages"));
    }
    let b = u64::from(batch_pages);
    let mut stock: u64 = 0;
    let mut x: u64 = 0;
    let mut c = StockCounts::default();
    for cycle in 0..(u64::from(warmup_cycles) + u64::from(cycles)) {
        let count = cycle >= u64::from(warmup_cycles);
        for op in ops {
            match *op {
                StockOp::Charge(n) => {
                    let n = u64::from(n);
                    if n <= b && stock >= n {
                        stock -= n;
                    } else {
                        let batch = b.max(n);
                        if count {
                            c.charge_walks += 1;
                            c.charge_walk_pages += batch;
                        }
                        refill(&mut stock, batch - n, b, count, &mut c);
                    }
                    rstat(&mut x, n, b, count, &mut c);
                    if count {
                        c.pages_charged += n;
                    }
                }
                StockOp::Uncharge(n) => {
                    let n = u64::from(n);
                    rstat(&mut x, n, b, count, &mut c);
                    refill(&mut stock, n, b, count, &mut c);
                    if count {
                        c.pages_uncharged += n;
                    }
                }
            }
        }
        if count {
            c.cycles += 1;
        }
    }
    Ok(c)
}

/// `refill_stock()` (6.0): add, drain the whole stock once it exceeds the batch.
fn refill(stock: &mut u64, m: u64, b: u64, count: bool, c: &mut StockCounts) {
    *stock += m;
    if *stock > b {
        if count {
            c.uncharge_walks += 1;
            c.uncharge_walk_pages += *stock;
        }
        *stock = 0;
    }
}

/// `memcg_rstat_updated()` (6.0): per-CPU `stats_updates`, one global atomic per batch.
fn rstat(x: &mut u64, n: u64, b: u64, count: bool, c: &mut StockCounts) {
    *x += n;
    if *x > b {
        if count {
            c.flushes += 1;
        }
        *x = 0;
    }
}

/// The calls each CPU of one netperf instance makes, over [`FLOW_CYCLE_SKBS`] skbs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuOps {
    /// The netperf (sender) CPU: `sk_wmem` charges, the receiving socket's `sk_rmem` charges
    /// (loopback softirq), and the wmem uncharges that run on it.
    pub sender: Vec<StockOp>,
    /// The netserver (receiver) CPU: `sk_rmem` uncharges and the wmem uncharges that run on it.
    pub receiver: Vec<StockOp>,
    /// Payload pages the cycle carries (bytes / 4096).
    pub payload_pages: f64,
}

/// netperf TCP_SENDFILE over loopback as the memcg sees it (thread 001: `-m 10K`, IPv6 `::1`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SendfileFlow {
    /// Bytes per `sendfile()` ([`MESSAGE_BYTES`]).
    pub message_bytes: u32,
    /// Payload bytes per skb ([`SKB_PAYLOAD_BYTES`]).
    pub skb_payload_bytes: u32,
    /// truesize overhead per skb ([`SKB_OVERHEAD_BYTES`]).
    pub skb_overhead_bytes: u32,
    /// Fraction (0..=1) of acknowledged skbs whose wmem uncharge runs on the sender CPU (the
    /// ACK found the sender socket owned by netperf and went to its backlog) rather than on the
    /// receiver CPU (`tcp_ack()` in the softirq of the ACK netserver sent). Not derivable from
    /// thread 001: it depends on how often each process holds its socket lock.
    pub ack_uncharge_on_sender: f64,
}

impl SendfileFlow {
    /// Thread 001's flow with all wmem uncharges on the receiver CPU.
    pub fn thread_001() -> SendfileFlow {
        SendfileFlow {
            message_bytes: MESSAGE_BYTES,
            skb_payload_bytes: SKB_PAYLOAD_BYTES,
            skb_overhead_bytes: SKB_OVERHEAD_BYTES,
            ack_uncharge_on_sender: 0.0,
        }
    }

    /// Replays the socket accounting for `skbs` skbs (6.0-rc1 rules, module doc):
    /// - sender socket: per skb, `sk_wmem_schedule(truesize of the head)`, then per
    ///   `sendfile()` chunk that lands in it `sk_wmem_schedule(chunk)`; each charges
    ///   `ceil(size / 4096)` pages when `sk_forward_alloc < size`, then `sk_mem_charge(size)`;
    /// - full skb delivered (sender CPU): `sk_rmem_schedule(truesize)` charges
    ///   `ceil((truesize − fwd) / 4096)` pages when positive;
    /// - netserver frees it: `sk_mem_uncharge(truesize)` on the receiving socket, reclaiming
    ///   `floor(fwd / 4096)` pages (receiver CPU);
    /// - its ACK frees the sender's skb: `sk_mem_uncharge(truesize)` on the sending socket, on
    ///   the sender CPU with probability `ack_uncharge_on_sender` per skb (independent draws
    ///   from a fixed-seed generator, so the result is reproducible), else on the receiver CPU.
    ///
    /// Errors: sizes 0, `skbs` 0, the fraction outside 0..=1.
    pub fn cpu_ops(&self, skbs: u32) -> Result<CpuOps> {
        if self.message_bytes == 0 || self.skb_payload_bytes == 0 || skbs == 0 {
            return Err(Error::invalid(
                INPUT,
                "flow",
                "message_bytes, skb_payload_bytes and skbs must be ≥ 1",
            ));
        }
        let f = self.ack_uncharge_on_sender;
        if !(0.0..=1.0).contains(&f) {
            return Err(Error::invalid(
                INPUT,
                "ack_uncharge_on_sender",
                format!("must be in 0..=1, got {f}"),
            ));
        }
        let payload = i64::from(self.skb_payload_bytes);
        let truesize = payload + i64::from(self.skb_overhead_bytes);
        let mut sender = Vec::new();
        let mut receiver = Vec::new();
        let mut fwd_w: i64 = 0;
        let mut fwd_r: i64 = 0;
        let mut msg_left = i64::from(self.message_bytes);
        // Fixed-seed splitmix64: which ACKs run on the sender is random (independent per skb)
        // but reproducible; a regular pattern would resonate with the 16/17-page skbs.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..skbs {
            // Head of a new skb (tcp_stream_alloc_skb + tcp_skb_entail).
            schedule(&mut fwd_w, i64::from(self.skb_overhead_bytes), &mut sender);
            let mut skb_left = payload;
            while skb_left > 0 {
                let chunk = msg_left.min(skb_left);
                schedule(&mut fwd_w, chunk, &mut sender);
                msg_left -= chunk;
                skb_left -= chunk;
                if msg_left == 0 {
                    msg_left = i64::from(self.message_bytes);
                }
            }
            // Delivery in the sender CPU's softirq: sk_rmem_schedule(truesize) charges the delta.
            let delta = truesize - fwd_r;
            if delta > 0 {
                let p = (delta + PAGE - 1) / PAGE;
                fwd_r += p * PAGE;
                sender.push(StockOp::Charge(pages_u32(p)));
            }
            fwd_r -= truesize;
            // netserver frees it.
            uncharge(&mut fwd_r, truesize, &mut receiver);
            // The ACK frees the sender's copy.
            if unit_draw(&mut seed) < f {
                uncharge(&mut fwd_w, truesize, &mut sender);
            } else {
                uncharge(&mut fwd_w, truesize, &mut receiver);
            }
        }
        Ok(CpuOps {
            sender,
            receiver,
            payload_pages: f64::from(skbs) * payload as f64 / PAGE_BYTES as f64,
        })
    }
}

/// `sk_wmem_schedule(size)` + `sk_mem_charge(size)` (6.0-rc1).
fn schedule(fwd: &mut i64, size: i64, out: &mut Vec<StockOp>) {
    if size > *fwd {
        let p = (size + PAGE - 1) / PAGE;
        *fwd += p * PAGE;
        out.push(StockOp::Charge(pages_u32(p)));
    }
    *fwd -= size;
}

/// `sk_mem_uncharge(size)` → `sk_mem_reclaim()` (6.0-rc1): return all whole pages.
fn uncharge(fwd: &mut i64, size: i64, out: &mut Vec<StockOp>) {
    *fwd += size;
    if *fwd >= PAGE {
        let p = *fwd / PAGE;
        *fwd -= p * PAGE;
        out.push(StockOp::Uncharge(pages_u32(p)));
    }
}

/// splitmix64 step mapped to [0, 1).
fn unit_draw(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Page counts here come from skb sizes (≤ a few hundred pages).
fn pages_u32(p: i64) -> u32 {
    u32::try_from(p.max(0)).unwrap_or(u32::MAX)
}

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
/// [`simulate_stock`], not per walk). The same transfers in program order: [`walk_visits`].
pub fn counter_lines(depth: u32, code: CounterCode) -> Vec<CounterLine> {
    walk_structure(depth, code).0
}

/// The transfers of [`counter_lines`] in program order, one entry per transfer (the order
/// decides when two SMT siblings can share a transfer, see [`MemcgModel::estimate`]).
pub fn walk_visits(depth: u32, code: CounterCode) -> WalkVisits {
    walk_structure(depth, code).1
}

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = [
    "fixed_ns_per_page",
    "transfer_scale",
    "ack_uncharge_on_sender",
];

/// Parameters held at their defaults unless freed.
pub const DEFAULT_FIXED: [&str; 1] = ["ack_uncharge_on_sender"];

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
    /// Mean idle line transfer between cores, ns ([`mean_core_transfer_ns`]).
    pub transfer_ns: f64,
    /// Busy threads per busy core ([`active_threads_per_core`]): 2 when both SMT siblings
    /// charge, 1 without SMT or with fewer busy CPUs than cores.
    pub threads_per_core: f64,
    /// The page_counter code.
    pub code: CounterCode,
    /// The shared lines a walk touches ([`counter_lines`]).
    pub lines: Vec<CounterLine>,
    /// The transfers of a walk in program order ([`walk_visits`]).
    pub visits: WalkVisits,
    /// The socket flow; its `ack_uncharge_on_sender` is replaced by the parameter of that name.
    pub flow: SendfileFlow,
}

/// One shared line's queue at one batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineEstimate {
    /// The line.
    pub name: String,
    /// Transfers per visit (mean over the charge walks, uncharge walks and flushes that visit it).
    pub transfers_per_walk: f64,
    /// Service time of one visit, ns.
    pub service_ns: f64,
    /// Mean response of one visit (wait + service), ns.
    pub response_ns: f64,
    /// Utilisation (share of time a transfer of this line is under way).
    pub utilisation: f64,
    /// Share of this line's transfers a CPU did not pay because its SMT sibling's transfer
    /// served it.
    pub sibling_shared: f64,
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
    /// Busy threads per busy core (2: both SMT siblings charge).
    pub threads_per_core: f64,
    /// Share of all counter-line transfers a CPU did not pay because its SMT sibling's
    /// transfer served it (0 without SMT).
    pub sibling_shared: f64,
    /// Hierarchy walks per payload page per CPU (mean of sender and receiver).
    pub walks_per_page: f64,
    /// Charge walks per payload page, sender CPU and receiver CPU.
    pub charge_walks_per_page: [f64; 2],
    /// Uncharge walks per payload page, sender CPU and receiver CPU.
    pub uncharge_walks_per_page: [f64; 2],
    /// `stats_flush_threshold` flushes per payload page per CPU (mean of the two).
    pub flushes_per_page: f64,
    /// Pages moved per walk (charge and uncharge walks together; `B` plus the drain overshoot).
    pub pages_per_walk: f64,
    /// Service time of one visit of the busiest line, ns.
    pub line_service_ns: f64,
    /// Mean response (wait + service) of one visit of the busiest line, ns.
    pub line_response_ns: f64,
    /// Utilisation of the busiest line.
    pub line_utilisation: f64,
    /// Probability a visit finds the busiest line busy (arrival theorem: its utilisation with
    /// one CPU fewer).
    pub line_p_contended: f64,
    /// Every line.
    pub lines: Vec<LineEstimate>,
}

/// Index of the busiest line (highest utilisation); `None` when there are no lines.
fn busiest_index(lines: &[LineEstimate]) -> Option<usize> {
    lines
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation))
        .map(|(i, _)| i)
}

impl MemcgEstimate {
    /// The busiest line (highest utilisation), the one `line_*` describe.
    pub fn busiest_line(&self) -> Option<&LineEstimate> {
        busiest_index(&self.lines).map(|i| &self.lines[i])
    }
}

impl MemcgModel {
    /// Builds the model: `instances` netperf pairs on `machine`, `cgroup_depth` levels, 6.0-rc1
    /// page_counter code, thread 001's flow.
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
            transfer_ns: mean_core_transfer_ns(machine, charging)?,
            threads_per_core: active_threads_per_core(machine, charging),
            code: CounterCode::Rc1,
            lines: counter_lines(cgroup_depth, CounterCode::Rc1),
            visits: walk_visits(cgroup_depth, CounterCode::Rc1),
            flow: SendfileFlow::thread_001(),
        })
    }

    /// The same model with another page_counter code.
    pub fn with_code(mut self, code: CounterCode) -> MemcgModel {
        self.code = code;
        self.lines = counter_lines(self.cgroup_depth, code);
        self.visits = walk_visits(self.cgroup_depth, code);
        self
    }

    /// The same model with another socket flow.
    pub fn with_flow(mut self, flow: SendfileFlow) -> MemcgModel {
        self.flow = flow;
        self
    }

    /// Throughput per instance in the root memcg (no charging), Mbit/s, with parameters in
    /// [`PARAM_NAMES`] order.
    pub fn root_throughput_mbps(&self, params: &[f64]) -> Result<f64> {
        let t0 = check_params(params)?[0];
        Ok(1e9 / t0 * PAGE_BYTES as f64 * 8.0 / 1e6)
    }

    /// Steady-state stock counts of the sender and receiver CPU at `batch_pages`, with
    /// `ack_uncharge_on_sender` = `f`, and the payload pages they cover. The window is at least
    /// `COUNT_CYCLES` (4) flow cycles and at least 8 batches of pages, after a warm-up of at least
    /// 2 batches.
    pub fn stock_counts(&self, batch_pages: u32, f: f64) -> Result<([StockCounts; 2], f64)> {
        let flow = SendfileFlow {
            ack_uncharge_on_sender: f,
            ..self.flow
        };
        let ops = flow.cpu_ops(FLOW_CYCLE_SKBS)?;
        let b = f64::from(batch_pages);
        let per_cycle = ops.payload_pages.max(1.0);
        let warm = WARMUP_CYCLES.max((2.0 * b / per_cycle).ceil() as u32);
        let count = COUNT_CYCLES.max((8.0 * b / per_cycle).ceil() as u32);
        let mut out = [StockCounts::default(); 2];
        for (slot, role) in out.iter_mut().zip([&ops.sender, &ops.receiver]) {
            if !role.is_empty() {
                *slot = simulate_stock(batch_pages, role, warm, count)?;
            }
        }
        Ok((out, ops.payload_pages * f64::from(count)))
    }

    /// Per payload page: (charge walks, uncharge walks, flushes) of the sender and receiver
    /// CPU at `batch_pages`, with `ack_uncharge_on_sender` = `f` ([`MemcgModel::stock_counts`]).
    pub fn stock_rates(&self, batch_pages: u32, f: f64) -> Result<[[f64; 3]; 2]> {
        let (counts, pages) = self.stock_counts(batch_pages, f)?;
        Ok(counts.map(|c| {
            [
                c.charge_walks as f64 / pages,
                c.uncharge_walks as f64 / pages,
                c.flushes as f64 / pages,
            ]
        }))
    }

    /// Estimates throughput and terms at `batch_pages` with parameters in [`PARAM_NAMES`] order.
    pub fn estimate(&self, params: &[f64], batch_pages: u32) -> Result<MemcgEstimate> {
        let [t0, scale, f] = check_params(params)?;
        if batch_pages == 0 {
            return Err(Error::invalid(INPUT, "batch_pages", "must be ≥ 1"));
        }
        let (counts, pages) = self.stock_counts(batch_pages, f)?;
        let rates = counts.map(|c| {
            [
                c.charge_walks as f64 / pages,
                c.uncharge_walks as f64 / pages,
                c.flushes as f64 / pages,
            ]
        });
        // Mean over the two CPU roles, per payload page.
        let cw = 0.5 * (rates[0][0] + rates[1][0]);
        let uw = 0.5 * (rates[0][1] + rates[1][1]);
        let fl = 0.5 * (rates[0][2] + rates[1][2]);
        let x = scale * self.transfer_ns;
        // Visits (walks or flushes touching the line) per payload page of each line.
        let visits: Vec<f64> = self
            .lines
            .iter()
            .map(|l| {
                (if l.charge_transfers > 0.0 { cw } else { 0.0 })
                    + (if l.uncharge_transfers > 0.0 { uw } else { 0.0 })
                    + (if l.flush_transfers > 0.0 { fl } else { 0.0 })
            })
            .collect();
        let transfers: Vec<f64> = self
            .lines
            .iter()
            .map(|l| cw * l.charge_transfers + uw * l.uncharge_transfers + fl * l.flush_transfers)
            .collect();
        let roles: Vec<Vec<Episode>> = rates
            .iter()
            .map(|r| {
                vec![
                    Episode {
                        rate: r[0],
                        visits: &self.visits.charge,
                    },
                    Episode {
                        rate: r[1],
                        visits: &self.visits.uncharge,
                    },
                    Episode {
                        rate: r[2],
                        visits: &self.visits.flush,
                    },
                ]
            })
            .collect();
        let n = self.charging_cpus;
        let sol = shared_mva(n, self.threads_per_core, t0, x, &roles, self.lines.len());
        let total_r: f64 = sol.resp.iter().sum();
        let total_d: f64 = sol.service.iter().sum();
        let cycle = t0 + total_r;
        let x_total = f64::from(n) / cycle; // payload pages per ns, all CPUs
        let lines: Vec<LineEstimate> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let v = visits[i];
                let (svc, resp, tpv) = if v > 0.0 {
                    (sol.service[i] / v, sol.resp[i] / v, transfers[i] / v)
                } else {
                    (0.0, 0.0, l.transfers_per_walk)
                };
                let shared = if transfers[i] > 0.0 {
                    (1.0 - sol.service[i] / (x * transfers[i])).max(0.0)
                } else {
                    0.0
                };
                LineEstimate {
                    name: l.name.clone(),
                    transfers_per_walk: tpv,
                    service_ns: svc,
                    response_ns: resp,
                    utilisation: x_total * sol.service[i],
                    sibling_shared: shared,
                }
            })
            .collect();
        let busiest = busiest_index(&lines);
        let (ls, lr, lu, lp) = match busiest {
            Some(i) => (
                lines[i].service_ns,
                lines[i].response_ns,
                lines[i].utilisation,
                sol.x_prev * sol.service[i],
            ),
            None => (0.0, 0.0, 0.0, 0.0),
        };
        let all_transfers: f64 = transfers.iter().sum();
        let sibling_shared = if all_transfers > 0.0 {
            (1.0 - total_d / (x * all_transfers)).max(0.0)
        } else {
            0.0
        };
        let walks = cw + uw;
        let walked: u64 = counts
            .iter()
            .map(|c| c.charge_walk_pages + c.uncharge_walk_pages)
            .sum();
        let nwalks: u64 = counts
            .iter()
            .map(|c| c.charge_walks + c.uncharge_walks)
            .sum();
        let walk_pages = if nwalks == 0 {
            0.0
        } else {
            walked as f64 / nwalks as f64
        };
        Ok(MemcgEstimate {
            batch_pages,
            levels: self.cgroup_depth + 1,
            throughput_mbps: 1e9 / cycle * PAGE_BYTES as f64 * 8.0 / 1e6,
            ns_per_page: cycle,
            fixed_ns_per_page: t0,
            counter_service_ns_per_page: total_d,
            counter_wait_ns_per_page: (total_r - total_d).max(0.0),
            threads_per_core: self.threads_per_core,
            sibling_shared,
            walks_per_page: walks,
            charge_walks_per_page: [rates[0][0], rates[1][0]],
            uncharge_walks_per_page: [rates[0][1], rates[1][1]],
            flushes_per_page: fl,
            pages_per_walk: walk_pages,
            line_service_ns: ls,
            line_response_ns: lr,
            line_utilisation: lu,
            line_p_contended: lp.min(1.0),
            lines,
        })
    }

    /// Default parameter values in [`PARAM_NAMES`] order.
    pub fn default_params(&self) -> Vec<f64> {
        self.params().iter().map(|p| p.default).collect()
    }
}

/// Checks the parameters: three, time and scale finite and > 0, the fraction in 0..=1.
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
    for (name, x) in PARAM_NAMES.iter().zip(v).take(2) {
        if !(x.is_finite() && x > 0.0) {
            return Err(Error::invalid(
                INPUT,
                *name,
                format!("must be > 0, got {x}"),
            ));
        }
    }
    if !(0.0..=1.0).contains(&v[2]) {
        return Err(Error::invalid(
            INPUT,
            PARAM_NAMES[2],
            format!("must be in 0..=1, got {}", v[2]),
        ));
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
            ParamSpec::new(PARAM_NAMES[2], "fraction", 0.0)
                .with_bounds(0.0, 1.0)
                .with_provenance("assumed: 0 = every wmem uncharge of an ACKed skb runs on the receiver CPU (tcp_ack in the ACK's softirq); 1 = all on the sender CPU (socket backlog); thread 001 does not say")
                .with_description("fraction of acknowledged skbs whose sk_wmem uncharge runs on the sender CPU"),
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
        let p = [1000.0, 3.0, 0.0];
        let mut last = 0.0;
        for b in [8, 16, 32, 64, 128, 256, 1024] {
            let e = model.estimate(&p, b).unwrap();
            assert!(e.throughput_mbps >= last);
            last = e.throughput_mbps;
        }
        let limit = 1e9 / 1000.0 * PAGE_BYTES as f64 * 8.0 / 1e6;
        assert!(last < limit && last > 0.9 * limit);
    }
}

#[cfg(test)]
mod stock_tests {
    use super::*;
    use StockOp::{Charge, Uncharge};

    #[test]
    fn charges_below_the_batch_walk_once_per_batch() {
        // Charge 3 at B = 32: walk (32), stock 29, then 9 consumes (29 → 2), walk, ...
        // Over 32 calls = 96 pages exactly 3 walks of 32 pages.
        let c = simulate_stock(32, &[Charge(3); 32], 0, 1).unwrap();
        assert_eq!(c.charge_walks, 3);
        assert_eq!(c.charge_walk_pages, 96);
        assert_eq!(c.uncharge_walks, 0);
        // stats: 3 per call, atomic when > 32: after 11 calls (33), 11, 11 → 2 flushes + 10
        // calls left over (30, not > 32).
        assert_eq!(c.flushes, 2);
    }

    #[test]
    fn charges_above_the_batch_walk_every_call() {
        // n = 40 > B = 32: consume_stock() refuses, batch = max(32, 40) = 40, nothing left over.
        let c = simulate_stock(32, &[Charge(40)], 0, 10).unwrap();
        assert_eq!(c.charge_walks, 10);
        assert_eq!(c.charge_walk_pages, 400);
        // n = 40 < B = 64: walk of 64, stock 24; 24 < 40 → walk, stock 48; consume → 8; ...
        // 64 pages per walk in steady state: 5 walks for 8 calls (320 pages).
        let c = simulate_stock(64, &[Charge(40); 8], 0, 1).unwrap();
        assert_eq!(c.charge_walks, 5);
        assert_eq!(c.uncharge_walks, 0);
    }

    #[test]
    fn uncharges_drain_the_whole_stock_past_the_batch() {
        // 17-page uncharges: 17, 34 > 32 → drain 34; so one walk of 34 pages per 2 calls.
        let c = simulate_stock(32, &[Uncharge(17); 2], 1, 5).unwrap();
        assert_eq!(c.uncharge_walks, 5);
        assert_eq!(c.uncharge_walk_pages, 170);
        // B = 64: 17, 34, 51, 68 > 64 → drain 68: one walk per 4 calls.
        let c = simulate_stock(64, &[Uncharge(17); 4], 1, 5).unwrap();
        assert_eq!(c.uncharge_walks, 5);
        assert_eq!(c.uncharge_walk_pages, 340);
        // An uncharge of exactly B does not drain (stock > B is needed).
        let c = simulate_stock(32, &[Uncharge(32)], 0, 1).unwrap();
        assert_eq!(c.uncharge_walks, 0);
    }

    #[test]
    fn a_cpu_that_charges_and_uncharges_reuses_its_stock() {
        // +16 / −16 alternating at B = 32: the first charge walks (stock 16), then the stock
        // oscillates 32 ↔ 16 and never walks again.
        let c = simulate_stock(32, &[Charge(16), Uncharge(16)], 1, 100).unwrap();
        assert_eq!(c.charge_walks + c.uncharge_walks, 0);
        // +17 / −17 at B = 32: walk 32 (stock 15), −17 → 32, +17 → 15, ...: no walks either.
        let c = simulate_stock(32, &[Charge(17), Uncharge(17)], 1, 100).unwrap();
        assert_eq!(c.charge_walks + c.uncharge_walks, 0);
        // +3 ×6, −18: stock runs down by 18 then back; B = 16 (< 18): the −18 always drains.
        let c = simulate_stock(
            16,
            &[
                Charge(3),
                Charge(3),
                Charge(3),
                Charge(3),
                Charge(3),
                Charge(3),
                Uncharge(18),
            ],
            1,
            10,
        )
        .unwrap();
        assert_eq!(c.uncharge_walks, 10);
        assert_eq!(c.charge_walks, 20);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(simulate_stock(0, &[Charge(1)], 0, 1).is_err());
        assert!(simulate_stock(32, &[], 0, 1).is_err());
        assert!(simulate_stock(32, &[Charge(0)], 0, 1).is_err());
        assert!(simulate_stock(32, &[Charge(1)], 0, 0).is_err());
    }

    #[test]
    fn flow_of_thread_001() {
        let ops = SendfileFlow::thread_001().cpu_ops(FLOW_CYCLE_SKBS).unwrap();
        // Each skb carries 65 464 bytes: 15.98 payload pages.
        approx::assert_relative_eq!(
            ops.payload_pages,
            f64::from(FLOW_CYCLE_SKBS) * 65464.0 / 4096.0
        );
        let charged: u32 = ops
            .sender
            .iter()
            .map(|o| match o {
                Charge(n) => *n,
                Uncharge(_) => 0,
            })
            .sum();
        let uncharged: u32 = ops
            .receiver
            .iter()
            .map(|o| match o {
                Uncharge(n) => *n,
                Charge(_) => 0,
            })
            .sum();
        // Sender charges wmem + rmem, receiver returns both: what is charged comes back (up to
        // the two sockets' forward allocations, < 3 pages each). At least 2 × (1 + 1280/65464)
        // pages per payload page; more, because sk_wmem_schedule() charges sk_mem_pages() of
        // the whole 10 KiB chunk (3 pages) whenever the forward allocation falls short, and the
        // surplus comes back only when the ACK frees the skb.
        assert!(charged.abs_diff(uncharged) <= 6, "{charged} vs {uncharged}");
        let per = f64::from(charged) / ops.payload_pages;
        assert!(per > 2.0 * (1.0 + 1280.0 / 65464.0) && per < 2.3, "{per}");
        // Uncharges are per freed skb: its 16.3 pages of truesize plus the socket's whole pages
        // of forward allocation (< 1 page for rmem; up to 3 for wmem).
        assert!(ops
            .receiver
            .iter()
            .all(|o| matches!(o, Uncharge(n) if (16..=19).contains(n))));
        // All wmem uncharges on the sender: the receiver keeps only the rmem ones.
        let f1 = SendfileFlow {
            ack_uncharge_on_sender: 1.0,
            ..SendfileFlow::thread_001()
        }
        .cpu_ops(FLOW_CYCLE_SKBS)
        .unwrap();
        assert_eq!(f1.receiver.len(), FLOW_CYCLE_SKBS as usize);
        assert!(SendfileFlow {
            ack_uncharge_on_sender: 1.5,
            ..SendfileFlow::thread_001()
        }
        .cpu_ops(8)
        .is_err());
    }

    #[test]
    fn split_roles_halve_the_walks_when_the_batch_doubles() {
        // Pure roles (f = 0): the sender only charges (walks of exactly B), the receiver only
        // uncharges (walks of B plus an overshoot below one skb): doubling B halves the walks
        // to within the overshoot's share.
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let model = MemcgModel::new(&m, 36, 3).unwrap();
        let a = model.stock_rates(32, 0.0).unwrap();
        let b = model.stock_rates(64, 0.0).unwrap();
        assert_eq!(a[0][1], 0.0);
        assert_eq!(a[1][0], 0.0);
        approx::assert_relative_eq!(a[0][0] / b[0][0], 2.0, max_relative = 0.02);
        approx::assert_relative_eq!(a[1][1] / b[1][1], 2.0, max_relative = 0.1);
        // Sender: one walk per 32 pages charged (2.0-2.3 pages per payload page).
        assert!(a[0][0] * 32.0 > 2.0 && a[0][0] * 32.0 < 2.3, "{:?}", a[0]);
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

    #[test]
    fn root_memcg_is_the_fixed_work_alone() {
        let m = Machine::builtin("memcg-72cpu").unwrap();
        let model = MemcgModel::new(&m, 36, 3).unwrap();
        let r = model.root_throughput_mbps(&[1510.4, 1.0, 0.0]).unwrap();
        approx::assert_relative_eq!(r, 21694.8, max_relative = 1e-4);
        let e = model.estimate(&[1510.4, 1.0, 0.0], 1 << 20).unwrap();
        assert!(e.throughput_mbps <= r && e.throughput_mbps > 0.99 * r);
    }
}
