//! The estimator, the notes and the machine file written from a measurement, and the
//! comparison of two runs.

use serde::Serialize;

use super::{C2cRow, LatencyReport, LoadRow, Mode};
use crate::error::Result;
use crate::hw::machine::{Machine, Policy};
use crate::hw::provenance::Sourced;

/// A value from repeated samples, with its confidence interval and the spread of the single
/// trials behind it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The median of the samples (round medians for load-to-use, the dominant mode's windows
    /// for core-to-core), ns.
    pub value: f64,
    /// 95 % confidence interval of that median from order statistics: the samples ranked
    /// n/2 -+ 0.98 sqrt(n) (distribution-free; needs n >= 6 to be narrower than the range).
    pub ci95: (f64, f64),
    /// Half the interval's width relative to the value, percent.
    pub rel_ci_pct: f64,
    /// Samples behind the value.
    pub n: usize,
    /// 10th and 90th percentiles of every single trial (or window), ns.
    pub trials_p10_p90: (f64, f64),
    /// Single trials (or windows) in all.
    pub trials: usize,
}

/// `p` quantile (0..1) of sorted values, linear between order statistics.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn sorted(v: &[f64]) -> Option<Vec<f64>> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(s)
}

impl Estimate {
    /// The estimate from `samples` (its median is the value) and the `trials` behind them.
    pub fn of(samples: &[f64], trials: &[f64]) -> Option<Estimate> {
        let s = sorted(samples)?;
        let t = sorted(trials)?;
        let n = s.len();
        let value = quantile(&s, 0.5);
        let half = 0.98 * (n as f64).sqrt();
        let lo = ((n as f64 / 2.0 - half).floor().max(0.0) as usize).min(n - 1);
        let hi = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
        let ci95 = (s[lo], s[hi]);
        Some(Estimate {
            value,
            ci95,
            rel_ci_pct: 100.0 * (ci95.1 - ci95.0) / (2.0 * value),
            n,
            trials_p10_p90: (quantile(&t, 0.1), quantile(&t, 0.9)),
            trials: t.len(),
        })
    }

    /// `median 5.61 ns (95 % CI 5.58-5.66, +-0.7 %; n=101), trials p10-p90 5.5-5.9 ns (505)`.
    pub fn describe(&self, digits: usize) -> String {
        format!(
            "median {:.d$} ns (95 % CI {:.d$}-{:.d$}, +-{:.1} %; n={}), single trials p10-p90 \
             {:.d$}-{:.d$} ns ({} trials)",
            self.value,
            self.ci95.0,
            self.ci95.1,
            self.rel_ci_pct,
            self.n,
            self.trials_p10_p90.0,
            self.trials_p10_p90.1,
            self.trials,
            d = digits
        )
    }
}

/// The windows of the dominant mode: each window goes to the mode whose median is nearest on a
/// log scale.
pub(super) fn dominant_windows(windows: &[f64], modes: &[Mode]) -> Vec<f64> {
    let Some(dom) = modes.first() else {
        return Vec::new();
    };
    let dist = |w: f64, m: &Mode| (w / m.median).ln().abs();
    windows
        .iter()
        .copied()
        .filter(|&w| modes.iter().all(|m| dist(w, dom) <= dist(w, m)))
        .collect()
}

/// `bimodal: 70 % of windows at 55.1 ns, 30 % at 221.0 ns (two placements ...): ` or
/// `one mode: `, which the estimate follows.
fn mode_text(r: &C2cRow) -> String {
    match r.modes.as_slice() {
        [a, b] => format!(
            "bimodal: {:.0} % of windows at {:.1} ns, {:.0} % at {:.1} ns (two placements of \
             the CPUs), the value is the dominant mode's: ",
            100.0 * a.share,
            a.median,
            100.0 * b.share,
            b.median
        ),
        _ => "one mode: ".into(),
    }
}

/// Notes on how to read a measurement.
pub(super) fn notes(loads: &[LoadRow], c2c: &[C2cRow], virtualized: bool) -> Vec<String> {
    let mut notes = Vec::new();
    for r in loads {
        if r.huge_requested && r.huge_fraction < 0.9 {
            notes.push(format!(
                "{}: only {:.0} % of the buffer got huge pages (THP off or fragmented memory): \
                 its latency includes TLB misses",
                r.level,
                100.0 * r.huge_fraction
            ));
        }
    }
    if !c2c.is_empty() && !c2c.iter().any(|r| r.class == "smt") {
        notes.push("no SMT siblings online: c2c_smt not measured".into());
    }
    if virtualized && !c2c.is_empty() {
        notes.push(
            "Virtual machine: which host cores (SMT siblings, one L3, or two L3s) run these \
             vCPUs is the hypervisor's choice and can change during and between runs; the \
             core-to-core latency is that of the placement seen, not a property of the CPU \
             model."
                .into(),
        );
    }
    for r in c2c {
        if let [a, b] = r.modes.as_slice() {
            notes.push(format!(
                "Core-to-core {} is bimodal: {:.0} % of the windows at {:.1} ns, {:.0} % at \
                 {:.1} ns (the CPUs were placed two ways during the run); the value is the \
                 dominant mode.",
                r.class,
                100.0 * a.share,
                a.median,
                100.0 * b.share,
                b.median
            ));
        }
    }
    notes
}

impl LatencyReport {
    pub(super) fn load(&self, level: &str) -> Option<&LoadRow> {
        self.loads.iter().find(|r| r.level == level)
    }

    pub(super) fn class(&self, class: &str) -> Option<&C2cRow> {
        self.c2c.iter().find(|r| r.class == class)
    }

    /// Writes the measured values into `m` with `measured: pcpmodel measure <date>, ...`
    /// provenance; returns the dotted fields replaced. Fails (naming the field) when the
    /// measured values break the machine's ordering rules (e.g. an LLC latency above DRAM).
    pub fn apply_to(&self, m: &mut Machine) -> Result<Vec<String>> {
        let mut set = Vec::new();
        let load_src = |r: &LoadRow| {
            format!(
                "measured: pcpmodel measure {}, pointer chase over a random cycle of 64-byte \
                 lines in {} KiB ({}; {:.0} % huge pages), {} trials of {} loads per round, {}",
                self.date,
                r.bytes >> 10,
                if r.huge_requested {
                    "MADV_HUGEPAGE"
                } else {
                    "4 KiB pages"
                },
                100.0 * r.huge_fraction,
                r.trials_per_round,
                r.loads,
                r.estimate.describe(2)
            )
        };
        let c2c_src = |r: &C2cRow| {
            format!(
                "measured: pcpmodel measure {}, cache-line ping-pong (lock cmpxchg) between \
                 pinned CPUs {}, one-way = round trip / 2, windows of {} round trips, {}{}",
                self.date,
                r.pairs
                    .iter()
                    .map(|(a, b)| format!("{a}-{b}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                r.round_trips,
                mode_text(r),
                r.estimate.describe(1)
            )
        };
        let lat = &mut m.latency_ns;
        if let Some(r) = self.load("L2") {
            lat.l2_hit = Sourced::new(round2(r.estimate.value), load_src(r));
            set.push("latency_ns.l2_hit".to_string());
        }
        if let Some(r) = self.load("LLC") {
            lat.llc_hit = Sourced::new(round2(r.estimate.value), load_src(r));
            set.push("latency_ns.llc_hit".into());
        }
        if let Some(r) = self.load("DRAM") {
            lat.dram_local = Sourced::new(round2(r.estimate.value), load_src(r));
            set.push("latency_ns.dram_local".into());
        }
        if let Some(r) = self.class("same_llc") {
            lat.c2c_same_llc = Sourced::new(round2(r.value()), c2c_src(r));
            set.push("latency_ns.c2c_same_llc".into());
        }
        if let Some(r) = self.class("smt") {
            lat.c2c_smt = Sourced::new(round2(r.value()), c2c_src(r));
            set.push("latency_ns.c2c_smt".into());
        } else if lat.c2c_smt.value > lat.c2c_same_llc.value {
            lat.c2c_smt = Sourced::new(
                lat.c2c_same_llc.value,
                "derived: no SMT siblings to measure; set to the measured c2c_same_llc (unused \
                 without SMT)",
            );
        }
        if let (Some(r), Some(_)) = (self.class("cross_llc"), &lat.c2c_cross_llc) {
            lat.c2c_cross_llc = Some(Sourced::new(round2(r.value()), c2c_src(r)));
            set.push("latency_ns.c2c_cross_llc".into());
        }
        if let (Some(r), Some(_)) = (self.class("cross_socket"), &lat.c2c_cross_socket) {
            lat.c2c_cross_socket = Some(Sourced::new(round2(r.value()), c2c_src(r)));
            set.push("latency_ns.c2c_cross_socket".into());
        }
        // Remote DRAM: the slowest other node seen from node 0's first CPU.
        let remote = self
            .loads
            .iter()
            .filter(|r| r.level.starts_with("DRAM node ") && r.level != "DRAM node 0")
            .max_by(|a, b| a.estimate.value.total_cmp(&b.estimate.value));
        if let (Some(r), Some(_)) = (remote, &lat.dram_remote) {
            lat.dram_remote = Some(Sourced::new(round2(r.estimate.value), load_src(r)));
            set.push("latency_ns.dram_remote".into());
        }
        if let Some(i) = m.llc_index() {
            let inc = &self.llc_inclusive;
            let policy = &mut m.caches[i].policy;
            match inc.inclusive {
                Some(true) => {
                    *policy = Sourced::new(Policy::Inclusive, format!("detected: {}", inc.how));
                    set.push("cache.policy (LLC)".into());
                }
                Some(false) => {
                    let kept = if policy.value == Policy::Inclusive {
                        Policy::NonInclusive
                    } else {
                        policy.value
                    };
                    *policy = Sourced::new(
                        kept,
                        format!(
                            "detected: {}: not inclusive; victim vs non-inclusive is not in \
                             CPUID, {} kept from the microarchitecture",
                            inc.how,
                            kept.as_str()
                        ),
                    );
                    set.push("cache.policy (LLC)".into());
                }
                None => {}
            }
        }
        // What the measurement settled is no longer unknown: the detector's blanket entries
        // give way to the fields still assumed.
        let measured_latencies = ["l2_hit", "llc_hit", "dram_local", "c2c_same_llc"]
            .iter()
            .all(|f| set.iter().any(|s| s == &format!("latency_ns.{f}")));
        if measured_latencies {
            m.unknown.retain(|u| !u.starts_with("Every latency"));
            let still: Vec<&str> = [
                (
                    "latency_ns.c2c_smt",
                    m.latency_ns.c2c_smt.source.starts_with("assumed"),
                ),
                (
                    "latency_ns.c2c_cross_llc",
                    m.latency_ns
                        .c2c_cross_llc
                        .as_ref()
                        .is_some_and(|x| x.source.starts_with("assumed")),
                ),
                (
                    "latency_ns.dram_remote",
                    m.latency_ns
                        .dram_remote
                        .as_ref()
                        .is_some_and(|x| x.source.starts_with("assumed")),
                ),
            ]
            .iter()
            .filter(|(_, assumed)| *assumed)
            .map(|(f, _)| *f)
            .collect();
            if !still.is_empty() {
                m.unknown.push(format!(
                    "Latencies not measured on this host (typical for the vendor): {}.",
                    still.join(", ")
                ));
            }
        }
        if set.iter().any(|s| s == "cache.policy (LLC)") {
            m.unknown.retain(|u| !u.starts_with("The inclusion policy"));
            if m.llc_index()
                .is_some_and(|i| m.caches[i].policy.value != Policy::Inclusive)
            {
                m.unknown.push(
                    "Victim vs non-inclusive LLC: CPUID says only that it is not inclusive.".into(),
                );
            }
        }
        m.name = "host-measured".into();
        m.description = format!(
            "{} measured by `pcpmodel measure latency --toml` on {}",
            m.cpu.model.value, self.date
        );
        m.validate("measured machine")?;
        Ok(set)
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Two runs agree on a level when they differ by at most this much (issue 14's criterion).
pub const REPEAT_TOLERANCE_PCT: f64 = 10.0;

/// One level of a repeat check.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatRow {
    /// `L1`, ..., or `c2c same_llc`.
    pub what: String,
    /// Values of the two runs, ns.
    pub first: f64,
    /// Second run, ns.
    pub second: f64,
    /// Relative CIs of the two runs, percent.
    pub rel_ci_pct: (f64, f64),
    /// (second - first) / first, percent.
    pub diff_pct: f64,
    /// |diff| <= REPEAT_TOLERANCE_PCT.
    pub within: bool,
}

/// A core-to-core mode seen in one run only (`first`: in run 1): not compared (NaN values).
fn unmatched(class: impl std::fmt::Display, m: &Mode, first: bool) -> RepeatRow {
    let (a, b) = if first { (1, 2) } else { (2, 1) };
    RepeatRow {
        what: format!(
            "c2c {class} mode at {:.0} ns ({:.0} % of run {a}'s windows): not in run {b} (another vCPU placement), not compared",
            m.median,
            100.0 * m.share
        ),
        first: if first { m.median } else { f64::NAN },
        second: if first { f64::NAN } else { m.median },
        rel_ci_pct: (f64::NAN, f64::NAN),
        diff_pct: f64::NAN,
        within: true,
    }
}

/// Compares two runs level by level (the levels and classes both have).
pub fn repeat_check(a: &LatencyReport, b: &LatencyReport) -> Vec<RepeatRow> {
    let row = |what: String, x: &super::Estimate, y: &super::Estimate| {
        let diff_pct = 100.0 * (y.value - x.value) / x.value;
        RepeatRow {
            what,
            first: x.value,
            second: y.value,
            rel_ci_pct: (x.rel_ci_pct, y.rel_ci_pct),
            diff_pct,
            within: diff_pct.abs() <= REPEAT_TOLERANCE_PCT,
        }
    };
    let mut out = Vec::new();
    for x in &a.loads {
        if let Some(y) = b.load(&x.level) {
            out.push(row(x.level.clone(), &x.estimate, &y.estimate));
        }
    }
    for x in &a.c2c {
        let Some(y) = b.class(x.class) else { continue };
        out.push(row(format!("c2c {}", x.class), &x.estimate, &y.estimate));
        out.extend(compare_modes(x.class, &x.modes, &y.modes));
    }
    out
}

/// Each core-to-core placement (mode) of run 1 against the nearest mode of run 2, when either
/// run is bimodal: the dominant mode can flip between runs while each mode repeats. A mode with
/// no counterpart (the nearest differs by the modes' own separation ratio) is a placement the
/// other run never saw: listed, not compared.
fn compare_modes(class: &str, xm: &[Mode], ym: &[Mode]) -> Vec<RepeatRow> {
    let mut out = Vec::new();
    if xm.len() < 2 && ym.len() < 2 {
        return out;
    }
    let sep = super::c2c::MODE_MIN_RATIO.ln();
    let nearest = |m: &Mode, other: &[Mode]| -> Option<Mode> {
        other
            .iter()
            .min_by(|p, q| {
                let d = |o: &&Mode| (o.median / m.median).ln().abs();
                d(p).total_cmp(&d(q))
            })
            .filter(|n| (n.median / m.median).ln().abs() < sep)
            .copied()
    };
    for m in xm {
        out.push(match nearest(m, ym) {
            Some(n) => {
                let diff_pct = 100.0 * (n.median - m.median) / m.median;
                RepeatRow {
                    what: format!(
                        "c2c {class} mode ({:.0} % / {:.0} % of windows)",
                        100.0 * m.share,
                        100.0 * n.share
                    ),
                    first: m.median,
                    second: n.median,
                    rel_ci_pct: (f64::NAN, f64::NAN),
                    diff_pct,
                    within: diff_pct.abs() <= REPEAT_TOLERANCE_PCT,
                }
            }
            None => unmatched(class, m, true),
        });
    }
    for n in ym {
        if nearest(n, xm).is_none() {
            out.push(unmatched(class, n, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_ci_brackets_the_median() {
        let s: Vec<f64> = (1..=101).map(f64::from).collect();
        let e = Estimate::of(&s, &s).unwrap();
        assert_eq!(e.value, 51.0);
        // n = 101: ranks 50.5 -+ 9.85, i.e. the 41st and 61st values (0-based 40 and 61).
        assert_eq!(e.ci95, (41.0, 62.0));
        assert_eq!(e.trials_p10_p90, (11.0, 91.0));
        assert!(Estimate::of(&[], &s).is_none());
    }

    #[test]
    fn dominant_windows_follow_the_nearest_mode() {
        let m = [
            Mode {
                median: 60.0,
                share: 0.7,
            },
            Mode {
                median: 220.0,
                share: 0.3,
            },
        ];
        let w = dominant_windows(&[59.0, 61.0, 100.0, 150.0, 225.0], &m);
        assert_eq!(w, [59.0, 61.0, 100.0]);
    }

    #[test]
    fn a_placement_seen_in_one_run_only_is_not_compared() {
        let m = |median, share| Mode { median, share };
        // Run 1 saw 58 ns (86 %) and 220 ns (14 %); run 2 only 56 ns: the 220 ns placement has
        // no counterpart (56 / 220 is far past the 1.4 separation) and is listed, not failed.
        let rows = compare_modes(
            "same_llc",
            &[m(58.0, 0.86), m(220.0, 0.14)],
            &[m(56.0, 1.0)],
        );
        assert_eq!(rows.len(), 2);
        assert!(rows[0].within && (rows[0].diff_pct + 3.45).abs() < 0.01);
        assert!(rows[1].diff_pct.is_nan() && rows[1].within);
        assert!(rows[1].what.contains("not in run 2"));
        // A mode that moved by 20 % is still the same placement, and fails the 10 % check.
        let rows = compare_modes(
            "same_llc",
            &[m(58.0, 0.7), m(220.0, 0.3)],
            &[m(58.0, 0.8), m(176.0, 0.2)],
        );
        assert!(!rows[1].within);
        // One mode in each run: nothing to add to the value's own row.
        assert!(compare_modes("same_llc", &[m(58.0, 1.0)], &[m(40.0, 1.0)]).is_empty());
    }
}
