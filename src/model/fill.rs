//! The fill of a list in a run of finite length.
//!
//! A steady state holds the lists at their steady size; a run that starts with less on them
//! first grows them, and every page a list grows by comes from the buddy allocator. On a VM
//! whose free memory the hypervisor drops (free page reporting), such a page costs the host's
//! backing on its first touch ([`crate::hw::machine::Memory::backing_ns_per_page`]), on top of
//! the steady cost of moving it. A run of `T` seconds that must grow the lists by `F` pages at
//! `t` ns each, moving pages at `c` ns each otherwise, moves
//!
//! - `N = (T - F·t) / c` pages if the fill ends within the run (`F·(c + t) <= T`), and
//! - `N = T / (c + t)` pages if it does not: every page of the run is a fill page.
//!
//! Its rate is `N / T`, or `T / N` ns per page. The steady state is `T -> infinity`.

use serde::Serialize;

/// A run of finite length: what [`run_fill`] needs besides the steady state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunSpec {
    /// The run's length, s.
    pub seconds: f64,
    /// Pages on the lists when it starts.
    pub start_pages: f64,
    /// What the host adds per page the lists grow by, ns (0: bare metal, or not measured).
    pub backing_ns_per_page: f64,
}

/// One run's fill.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunFill {
    /// Pages the lists grow by from the run's start to their steady size.
    pub fill_pages: f64,
    /// What the host adds per fill page, ns.
    pub backing_ns_per_page: f64,
    /// The run's length, s.
    pub run_s: f64,
    /// Steady cost per page, ns.
    pub steady_ns_per_page: f64,
    /// The run's mean cost per page, ns.
    pub run_ns_per_page: f64,
    /// Share of the run's time spent on the host's backing.
    pub backing_share: f64,
    /// Whether the lists reached their steady size within the run.
    pub filled: bool,
}

/// The mean cost per page of a run of `run_s` seconds that grows the lists by `fill_pages`
/// pages at `backing_ns` each over the steady `steady_ns` per page. Non-finite or non-positive
/// inputs give the steady state (no fill).
pub fn run_fill(steady_ns: f64, fill_pages: f64, backing_ns: f64, run_s: f64) -> RunFill {
    let f = if fill_pages.is_finite() {
        fill_pages.max(0.0)
    } else {
        0.0
    };
    let t = if backing_ns.is_finite() {
        backing_ns.max(0.0)
    } else {
        0.0
    };
    let steady = RunFill {
        fill_pages: f,
        backing_ns_per_page: t,
        run_s,
        steady_ns_per_page: steady_ns,
        run_ns_per_page: steady_ns,
        backing_share: 0.0,
        filled: true,
    };
    if !(steady_ns.is_finite() && steady_ns > 0.0 && run_s.is_finite() && run_s > 0.0)
        || f * t <= 0.0
    {
        return steady;
    }
    let run_ns = run_s * 1e9;
    let (pages, filled) = if f * (steady_ns + t) <= run_ns {
        ((run_ns - f * t) / steady_ns, true)
    } else {
        (run_ns / (steady_ns + t), false)
    };
    let backing_time = if filled { f * t } else { pages * t };
    RunFill {
        run_ns_per_page: run_ns / pages,
        backing_share: backing_time / run_ns,
        filled,
        ..steady
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn no_fill_or_no_backing_is_the_steady_state() {
        assert_eq!(run_fill(800.0, 0.0, 9000.0, 1.0).run_ns_per_page, 800.0);
        assert_eq!(run_fill(800.0, 1e5, 0.0, 1.0).run_ns_per_page, 800.0);
        assert_eq!(
            run_fill(800.0, f64::NAN, 9000.0, 1.0).run_ns_per_page,
            800.0
        );
        assert_eq!(run_fill(800.0, 1e5, 9000.0, 0.0).run_ns_per_page, 800.0);
    }

    #[test]
    fn a_fill_that_ends_in_the_run_adds_its_time_once() {
        // 10,000 pages at 9 us: 90 ms of a 1-s run; the rest moves at 800 ns per page.
        let r = run_fill(800.0, 1e4, 9000.0, 1.0);
        assert!(r.filled);
        let pages = (1e9 - 9e7) / 800.0;
        assert_relative_eq!(r.run_ns_per_page, 1e9 / pages, max_relative = 1e-12);
        assert_relative_eq!(r.backing_share, 0.09, max_relative = 1e-12);
    }

    #[test]
    fn a_fill_longer_than_the_run_is_the_whole_run() {
        // 300,000 pages at 9.8 us each would take 3 s: a 1-s run is all fill.
        let r = run_fill(800.0, 3e5, 9000.0, 1.0);
        assert!(!r.filled);
        assert_relative_eq!(r.run_ns_per_page, 9800.0, max_relative = 1e-12);
        // Continuous at the boundary: F (c + t) = T.
        let f = 1e9 / 9800.0;
        let a = run_fill(800.0, f * (1.0 - 1e-9), 9000.0, 1.0).run_ns_per_page;
        let b = run_fill(800.0, f * (1.0 + 1e-9), 9000.0, 1.0).run_ns_per_page;
        assert_relative_eq!(a, b, max_relative = 1e-6);
    }

    #[test]
    fn longer_runs_approach_the_steady_state() {
        let c = 800.0;
        let mut last = f64::INFINITY;
        for s in [1.0, 2.0, 4.0, 8.0, 64.0, 1e6] {
            let x = run_fill(c, 3e4, 9000.0, s).run_ns_per_page;
            assert!(x < last && x >= c);
            last = x;
        }
        assert_relative_eq!(last, c, max_relative = 1e-6);
    }
}
