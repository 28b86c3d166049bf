//! The answers the tool exists for: the optimal pcp->high (and the sysctl that gets it) and the
//! explanation of one machine's result against another's.

pub mod explain;
pub mod optimal_high;
