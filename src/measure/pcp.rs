//! The real kernel under a workload at several pcp->high settings.
