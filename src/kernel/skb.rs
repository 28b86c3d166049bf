//! How a write on an AF_UNIX stream socket becomes page allocations: the skbs
//! `unix_stream_sendmsg()` builds and the orders `alloc_skb_with_frags()` allocates their frags
//! in. Kernel formulas, x86-64 with 4 KiB pages.
//!
//! ```text
//! unix_stream_sendmsg()                                    (net/unix/af_unix.c, 4.5+)
//!   while (sent < len):
//!     size = min(len - sent, (sk_sndbuf >> 1) - 64)
//!     size = min(size, SKB_MAX_HEAD(0) + UNIX_SKB_FRAGS_SZ)   "allow fallback to order-0"
//!     data_len = max(0, size - SKB_MAX_HEAD(0))
//!     data_len = min(size, PAGE_ALIGN(data_len))
//!     sock_alloc_send_pskb(sk, size - data_len, data_len, ..., get_order(UNIX_SKB_FRAGS_SZ))
//! alloc_skb_with_frags(header_len, data_len, order = 3, ...)  (net/core/skbuff.c)
//!   while (data_len):
//!     while (order && PAGE_ALIGN(data_len) < (PAGE_SIZE << order)) order--
//!     page = alloc_pages(..., order)                     (order 0: alloc_page())
//!     data_len -= min(data_len, PAGE_SIZE << order)
//! ```
//!
//! The linear part (`size - data_len` bytes) is kmalloc'ed (slab), not a page allocation. The
//! reader frees the frags in index order when it has copied an skb out (`consume_skb()` ->
//! `skb_release_data()`).
//!
//! Checked on this project's host (kernel 6.18, kmem:mm_page_alloc / mm_page_free
//! tracepoints, `tools/trace_pcp_flow.py`): 64 KiB writes on a socketpair allocate one page of
//! each order 3, 2, 1 and 0 per write on the writer's CPU and free the same on the reader's.

use crate::kernel::version::KernelVersion;

/// `PAGE_SIZE`, bytes.
pub const PAGE_SIZE: u64 = 4096;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64 (17 frags, 6.x), bytes.
pub const SKB_SHARED_INFO_BYTES: u64 = 320;
/// `SKB_MAX_HEAD(0)` = `SKB_WITH_OVERHEAD(PAGE_SIZE)`: the linear part that fits one page.
pub const SKB_MAX_HEAD0: u64 = PAGE_SIZE - SKB_SHARED_INFO_BYTES;
/// `UNIX_SKB_FRAGS_SZ` = `PAGE_SIZE << get_order(32768)`, bytes.
pub const UNIX_SKB_FRAGS_SZ: u64 = 32768;
/// `get_order(UNIX_SKB_FRAGS_SZ)`: the highest frag order AF_UNIX asks for.
pub const UNIX_FRAG_ORDER: u8 = 3;
/// A socket's default send buffer, `net.core.wmem_default` (`SK_WMEM_MAX`), bytes.
pub const WMEM_DEFAULT: u64 = 212_992;
/// `SOCK_MIN_SNDBUF` on x86-64 (2 x (2048 + sizeof(struct sk_buff))): the smallest send
/// buffer a socket has, bytes.
pub const SOCK_MIN_SNDBUF: u64 = 4608;
/// The largest send buffer (`sk_sndbuf` is an int), bytes.
pub const SNDBUF_MAX: u64 = i32::MAX as u64;

fn page_align(x: u64) -> u64 {
    x.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

/// Orders of the frag pages `alloc_skb_with_frags()` allocates for `data_len` bytes, largest
/// first, starting at `max_order` (assuming every allocation succeeds at its order).
pub fn alloc_skb_with_frags_orders(data_len: u64, max_order: u8) -> Vec<u8> {
    let mut orders = Vec::new();
    let mut left = data_len;
    let mut order = max_order.min(10);
    while left > 0 {
        while order > 0 && page_align(left) < (PAGE_SIZE << order) {
            order -= 1;
        }
        orders.push(order);
        left -= left.min(PAGE_SIZE << order);
    }
    orders
}

/// Orders of the frag pages of one `write()` of `len` bytes on an AF_UNIX stream socket whose
/// send buffer is `sndbuf` bytes, skb after skb (4.5+). Empty when every skb fits its linear
/// part, or when `sndbuf` leaves no room (the kernel's minimum send buffer is 4608 bytes).
pub fn unix_stream_write_orders(len: u64, sndbuf: u64) -> Vec<u8> {
    let per_skb = ((sndbuf >> 1).saturating_sub(64)).min(SKB_MAX_HEAD0 + UNIX_SKB_FRAGS_SZ);
    let mut orders = Vec::new();
    if per_skb == 0 {
        return orders;
    }
    let mut sent = 0;
    while sent < len {
        let size = (len - sent).min(per_skb);
        let data_len = size.saturating_sub(SKB_MAX_HEAD0);
        let data_len = size.min(page_align(data_len));
        orders.extend(alloc_skb_with_frags_orders(data_len, UNIX_FRAG_ORDER));
        sent += size;
    }
    orders
}

/// `SKB_FRAG_PAGE_ORDER` (`get_order(32768)`): the order of the pages `sk_page_frag_refill()`
/// gives a socket's page frag (include/linux/skbuff.h).
pub const SKB_FRAG_PAGE_ORDER: u8 = 3;

/// Order-`SKB_FRAG_PAGE_ORDER` pages one UDP datagram of `payload` bytes takes, on average, from
/// its socket's page frag, over a device with scatter-gather (loopback): `__ip_append_data()`
/// puts only the headers in the linear part when the datagram is larger than `SKB_MAX_ALLOC`
/// (16 KiB less the shared info) and copies the payload into the socket's page frag, whose
/// 32 KiB pages consecutive datagrams share (`sk_page_frag_refill()`); so a page is freed once
/// every datagram holding part of it is. Smaller datagrams are copied into the linear part:
/// no page (a kmalloc).
pub fn udp_datagram_frag_pages(payload: u64) -> f64 {
    let max_alloc = (PAGE_SIZE << 2) - SKB_SHARED_INFO_BYTES;
    if payload + UDP_IP_HEADERS_BYTES < max_alloc {
        return 0.0;
    }
    payload as f64 / (PAGE_SIZE << SKB_FRAG_PAGE_ORDER) as f64
}

/// IPv4 and UDP headers, bytes (20 + 8).
pub const UDP_IP_HEADERS_BYTES: u64 = 28;

/// A DATA chunk's headers, `sizeof(struct sctp_chunkhdr) + sizeof(struct sctp_datahdr)`
/// (include/linux/sctp.h), bytes.
pub const SCTP_DATA_CHUNK_HEADER_BYTES: u64 = 16;
/// `KMALLOC_MAX_CACHE_SIZE` with SLUB and 4 KiB pages (`1 << (PAGE_SHIFT + 1)`): a larger
/// kmalloc() goes to the page allocator (`kmalloc_large()`), bytes.
pub const KMALLOC_MAX_CACHE_SIZE: u64 = 2 * PAGE_SIZE;
/// `SMP_CACHE_BYTES` on x86-64: `SKB_DATA_ALIGN()` rounds to it, bytes.
pub const SMP_CACHE_BYTES: u64 = 64;

/// The page order of the linear skb an SCTP DATA chunk of `payload` bytes is built in, or
/// `None` when its head fits a kmalloc slab cache (no page allocation).
///
/// ```text
/// _sctp_make_chunk()                     (net/sctp/sm_make_chunk.c)
///   chunklen = SCTP_PAD4(sizeof(chunk header) + paylen)    paylen = sizeof(datahdr) + payload
///   alloc_skb(chunklen)
/// __alloc_skb() -> kmalloc_reserve()     (net/core/skbuff.c)
///   SKB_DATA_ALIGN(size) + SKB_DATA_ALIGN(sizeof(struct skb_shared_info))
///   > KMALLOC_MAX_CACHE_SIZE: kmalloc_large() -> alloc_pages(get_order(size))
/// ```
/// A 10 KiB send (lkp-tests' `send_size: 10K`) is order 2; netperf's default 16 KiB send
/// (the socket's send buffer) is order 3.
pub fn sctp_data_chunk_order(payload: u64) -> Option<u8> {
    // Saturating: a payload near u64::MAX gives the largest order, not an overflow.
    let chunk = SCTP_DATA_CHUNK_HEADER_BYTES
        .saturating_add(payload)
        .div_ceil(4)
        .saturating_mul(4);
    let head = chunk
        .div_ceil(SMP_CACHE_BYTES)
        .saturating_mul(SMP_CACHE_BYTES)
        .saturating_add(SKB_SHARED_INFO_BYTES);
    if head <= KMALLOC_MAX_CACHE_SIZE {
        return None;
    }
    // get_order(): the smallest order whose 2^order pages hold the head.
    let pages = head.div_ceil(PAGE_SIZE);
    Some((u64::BITS - (pages - 1).leading_zeros()) as u8)
}

/// `net.core.skb_defer_max`'s default (`sysctl_skb_defer_max`, net/core/sysctl_net_core.c,
/// 5.19+): skbs a CPU may queue on another CPU's `defer_list` before it frees them itself.
pub const SKB_DEFER_MAX_DEFAULT: u32 = 64;

/// The first kernel with deferred skb freeing (`skb_attempt_defer_free()`, commit
/// 68822bdf76f1 "net: generalize skb freeing deferral to per-cpu lists", 5.19, with the
/// `net.core.skb_defer_max` sysctl): TCP's receive path (`tcp_eat_recv_skb()`) hands a consumed
/// skb back to the CPU that allocated it (`skb->alloc_cpu`).
pub const TCP_DEFER_VERSION: KernelVersion = KernelVersion::new(5, 19);

/// The first kernel whose UDP receive path defers (`skb_consume_udp()` calls
/// `skb_attempt_defer_free()`, "udp: use skb_attempt_defer_free()", 6.18 net-next). Seen on
/// this project's 6.18 host: with the default `skb_defer_max` every order-3 frag of a UDP
/// loopback stream is freed on the sender's CPU (data/host/flows/udp-defer64-*.json).
pub const UDP_DEFER_VERSION: KernelVersion = KernelVersion::new(6, 18);

/// The socket a producer-consumer workload moves its pages through (workload field
/// `op.socket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Socket {
    /// UDP (`skb_consume_udp()` frees a read datagram).
    Udp,
    /// TCP (`tcp_eat_recv_skb()` frees a read segment).
    Tcp,
    /// AF_UNIX stream (`consume_skb()` in the reader: never deferred).
    Unix,
    /// SCTP (`sctp_ulpevent_free()` / `kfree_skb()` in the reader: never deferred).
    Sctp,
}

impl Socket {
    /// Lower-case name, as the workload file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Socket::Udp => "udp",
            Socket::Tcp => "tcp",
            Socket::Unix => "unix",
            Socket::Sctp => "sctp",
        }
    }

    /// The first kernel whose receive path hands this socket's consumed skbs back to the
    /// allocating CPU, or None when it never does.
    pub fn defers_from(self) -> Option<KernelVersion> {
        match self {
            Socket::Tcp => Some(TCP_DEFER_VERSION),
            Socket::Udp => Some(UDP_DEFER_VERSION),
            Socket::Unix | Socket::Sctp => None,
        }
    }
}

/// Which CPU frees the pages of a received skb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FreeSite {
    /// The receiving CPU frees what it read (`consume_skb()` there).
    Receiver,
    /// The receiving CPU queues the skb on the allocating CPU's `defer_list`, which frees it
    /// (`skb_defer_free_flush()` in that CPU's softirq): the sender allocates and frees.
    Sender,
}

/// Who frees a received skb's pages on `kernel` with `net.core.skb_defer_max = defer_max`,
/// and why (one line naming the kernel rule). `skb_attempt_defer_free()` frees on the current
/// CPU when `skb_defer_max` is 0 ("nodefer"); a full defer list (`defer_count >= defer_max`)
/// also frees locally, which a sender that flushes its list at every softirq keeps rare (0 of
/// 17,790 frees on this host's UDP trace).
pub fn free_site(socket: Socket, kernel: KernelVersion, defer_max: u32) -> (FreeSite, String) {
    match socket.defers_from() {
        None => (
            FreeSite::Receiver,
            format!(
                "{} sockets free a read skb on the reading CPU on every kernel (no skb_attempt_defer_free())",
                socket.as_str()
            ),
        ),
        Some(v) if kernel < v => (
            FreeSite::Receiver,
            format!(
                "{} defers skb freeing to the allocating CPU from {v}; kernel {kernel} frees on the reading CPU",
                socket.as_str()
            ),
        ),
        Some(v) if defer_max == 0 => (
            FreeSite::Receiver,
            format!(
                "net.core.skb_defer_max = 0: skb_attempt_defer_free() frees on the reading CPU (the {} deferral of {v}+ is off)",
                socket.as_str()
            ),
        ),
        Some(v) => (
            FreeSite::Sender,
            format!(
                "{} on {kernel} (deferral since {v}), net.core.skb_defer_max = {defer_max}: skb_attempt_defer_free() hands each read skb back to the CPU that allocated it, so the sender frees its own pages",
                socket.as_str()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deferral by socket, version and sysctl: TCP from 5.19, UDP from 6.18, AF_UNIX and
    /// SCTP never; `skb_defer_max = 0` turns it off.
    #[test]
    fn free_site_follows_socket_version_and_sysctl() {
        let k = KernelVersion::new;
        let d = SKB_DEFER_MAX_DEFAULT;
        assert_eq!(free_site(Socket::Udp, k(6, 18), d).0, FreeSite::Sender);
        assert_eq!(free_site(Socket::Udp, k(6, 17), d).0, FreeSite::Receiver);
        assert_eq!(free_site(Socket::Udp, k(6, 18), 0).0, FreeSite::Receiver);
        assert_eq!(free_site(Socket::Tcp, k(5, 19), d).0, FreeSite::Sender);
        assert_eq!(free_site(Socket::Tcp, k(5, 18), d).0, FreeSite::Receiver);
        assert_eq!(free_site(Socket::Unix, k(6, 18), d).0, FreeSite::Receiver);
        assert_eq!(free_site(Socket::Sctp, k(6, 18), d).0, FreeSite::Receiver);
    }

    /// lmbench's 64 KiB write: a 36544-byte skb with one order-3 frag, then 28992 bytes whose
    /// 7 frag pages go as orders 2, 1 and 0; what the host's tracepoints show per write.
    #[test]
    fn a_64k_datagram_takes_two_frag_pages_and_a_small_one_none() {
        // 65507 B of payload over 32 KiB frag pages: just under 2 pages per datagram.
        let p = udp_datagram_frag_pages(65_507);
        assert!((p - 65_507.0 / 32_768.0).abs() < 1e-12 && p < 2.0);
        assert_eq!(udp_datagram_frag_pages(1_472), 0.0);
    }

    #[test]
    fn a_64k_write_is_one_page_of_each_order() {
        assert_eq!(
            unix_stream_write_orders(65536, WMEM_DEFAULT),
            vec![3, 2, 1, 0]
        );
        let pages: u64 = unix_stream_write_orders(65536, WMEM_DEFAULT)
            .iter()
            .map(|o| 1u64 << o)
            .sum();
        assert_eq!(pages, 15);
    }

    /// Frags cover the data: the pages allocated hold every byte beyond the linear part, and
    /// the orders never rise within an skb.
    #[test]
    fn frags_cover_the_data_and_descend() {
        for len in [1u64, 3000, 4096, 10_000, 32768, 36544, 65536, 1 << 20] {
            let o = alloc_skb_with_frags_orders(len, 3);
            let bytes: u64 = o.iter().map(|&k| PAGE_SIZE << k).sum();
            assert!(bytes >= len && bytes < len + PAGE_SIZE * 8, "{len}: {o:?}");
            assert!(o.windows(2).all(|w| w[0] >= w[1]), "{len}: {o:?}");
        }
        // Small writes fit the linear part: no page allocated.
        assert!(unix_stream_write_orders(3000, WMEM_DEFAULT).is_empty());
        assert!(unix_stream_write_orders(65536, 0).is_empty());
    }

    /// lkp-tests' 10 KiB send is a 10624-byte head (order 2); netperf's default 16 KiB send a
    /// 16768-byte one (order 3, the workload file's derivation); a 4 KiB send stays in slab.
    #[test]
    fn sctp_chunk_heads_by_send_size() {
        assert_eq!(sctp_data_chunk_order(10240), Some(2));
        assert_eq!(sctp_data_chunk_order(16384), Some(3));
        assert_eq!(sctp_data_chunk_order(4096), None);
        // Past kmalloc-8k the head needs more than 8 KiB, so order 2 is the smallest order a
        // chunk ever takes from the page allocator: the first payload out of slab is order 2.
        let edge = (1..8192u64)
            .rev()
            .find(|&p| sctp_data_chunk_order(p).is_none())
            .expect("some payload fits");
        assert_eq!(sctp_data_chunk_order(edge + 1), Some(2));
        assert_eq!(edge, 8192 - 320 - 16);
        // get_order() at the power-of-two edges, and no overflow at the top.
        assert_eq!(sctp_data_chunk_order(4 * 4096 - 336), Some(2));
        assert_eq!(sctp_data_chunk_order(4 * 4096 - 335), Some(3));
        assert_eq!(sctp_data_chunk_order(u64::MAX), Some(52));
    }
}
