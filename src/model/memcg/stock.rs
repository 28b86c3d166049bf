//! The per-CPU memcg charge stock (`consume_stock()`/`refill_stock()`, stats flushing) and the
//! netperf sendfile flow whose socket charges and uncharges feed it.

use crate::error::{Error, Result};
use serde::Serialize;

use super::{INPUT, MESSAGE_BYTES, PAGE, PAGE_BYTES, SKB_OVERHEAD_BYTES, SKB_PAYLOAD_BYTES};

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
    check_ops(ops, cycles)?;
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

/// `memcg_rstat_updated()` (6.0): per-CPU `stats_updates` (of all memcgs together), one global
/// atomic per batch.
pub(super) fn rstat(x: &mut u64, n: u64, b: u64, count: bool, c: &mut StockCounts) {
    *x += n;
    if *x > b {
        if count {
            c.flushes += 1;
        }
        *x = 0;
    }
}

/// The calls each CPU of one netperf instance makes, over `FLOW_CYCLE_SKBS` skbs.
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
pub(super) fn unit_draw(state: &mut u64) -> f64 {
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

/// The checks every stock replay makes of its cycle of calls: not empty, at least one counted
/// cycle, no call of 0 pages.
pub(super) fn check_ops(ops: &[StockOp], cycles: u32) -> Result<()> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::FLOW_CYCLE_SKBS;
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
        // Upper bound: the lower one plus at most one 3-page chunk surplus per skb of 16
        // payload pages (2.04 + 3/16 ≈ 2.23), rounded up to 2.3.
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
}
