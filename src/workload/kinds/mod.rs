//! The kinds: one file per way of combining the mechanisms of `src/model/`.

pub mod alloc_loop;
pub mod high_order_fault;
pub mod memcg_charge;
pub mod numa_stat;
pub mod producer_consumer;
