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
//!   `mean_core_transfer_ns`; `σ` the free parameter `transfer_scale`).
//! - **SMT siblings share transfers.** The threads of a core share its L1D: a thread that needs
//!   a line its sibling is queued for or fetching is served by the same transfer (a load merges
//!   into the sibling's outstanding miss; a locked RMW is assumed to run on the core's copy
//!   before the core answers the next core's snoop), and the two go on
//!   through the rest of the walk together. So a line is a FCFS queue of *cores*, and how much
//!   work one transfer does grows with the queue: at batch 32 the siblings of the CPUs queued at
//!   the busiest line are often queued too, at 64 less often. With `a` busy threads per core
//!   (`active_threads_per_core`), at its first transfer on line `i` in a walk an unpaired
//!   CPU finds a sibling there with `p_i = 1 − (1 − Q_i/(n−1))^(a−1)`.
//! - Closed network, approximate mean value analysis (arrival theorem; each line a FCFS
//!   exponential station of service `σ x̄`, the fixed work a delay of `Z = t₀` ns per payload
//!   page), for `n = 1..N` CPUs: an unpaired transfer waits `R_i = σ x̄ (1 + G_i(n−1))`
//!   (`G_i` the queued and in-service transfers); joining a sibling, `R_i/2`, paying none;
//!   paired, `R_i`, paying half; `X(n) = n / (Z + Σ_i resp_i)`, `Q_i = X resp_i`, `G_i` the
//!   same with a paired CPU counted half (`shared_mva`). With `a = 1` it is exact MVA (product
//!   form). The cycle of one CPU per payload page, averaged over the two roles, is
//!   `t₀ + Σ_i resp_i(N)`.
//!   A discrete-event simulation of the same assumptions checks it (`tests/it/memcg_smt.rs`:
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

mod counters;
mod fit;
mod model;
mod shared;
mod stock;

pub use counters::{
    counter_lines, walk_visits, CounterCode, CounterLine, WalkVisits, RC1_MEMORY_OFFSET_BYTES,
};
pub use fit::{DEFAULT_FIXED, PARAM_NAMES};
pub use model::{LineEstimate, MemcgEstimate, MemcgModel};
pub use shared::{
    simulate_shared_stock, Interleave, SharedCounts, StockCode, SwitchTerms, NR_MEMCG_STOCK,
};
pub use stock::{simulate_stock, CpuOps, SendfileFlow, StockCounts, StockOp};

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
