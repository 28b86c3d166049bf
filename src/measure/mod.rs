//! Measuring the running host: load-to-use and core-to-core latencies ([`latency`]), the
//! safe handling of the sysctl a sweep changes ([`sysctl`]), and the real kernel's behaviour
//! under a workload at several pcp->high settings ([`pcp`]), and a host loop's work per page with
//! every line local ([`work`]).
//!
//! Everything here touches the host (mmap, sched_setaffinity, /proc/sys); nothing here is used by
//! the models. The command-line side (`pcpmodel measure ...`) adds the progress bar and the signal
//! handling.

pub mod backing;
pub mod compare;
pub mod flow_workload;
pub mod latency;
pub mod pcp;
pub mod record;
pub mod replay;
pub mod reuse;
pub mod sysctl;
pub mod trace;
pub mod work;

use serde::Serialize;

/// Median and spread of repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Number of repeats.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// First quartile (linear interpolation between order statistics).
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
}

impl Spread {
    /// Summarises samples; `None` for an empty slice or one holding a NaN.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let pos = p * (v.len() - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
        };
        Some(Spread {
            n: v.len(),
            median: q(0.5),
            q1: q(0.25),
            q3: q(0.75),
            min: v[0],
            max: v[v.len() - 1],
        })
    }

    /// Interquartile range relative to the median, percent.
    pub fn iqr_pct(&self) -> f64 {
        100.0 * (self.q3 - self.q1) / self.median
    }

    /// `n=7, IQR 10.1-10.3, min 10.0, max 10.5` with `digits` decimals, for provenance strings.
    pub fn describe(&self, digits: usize, unit: &str) -> String {
        format!(
            "n={}, median {:.d$} {unit}, IQR {:.d$}-{:.d$}, min {:.d$}, max {:.d$}",
            self.n,
            self.median,
            self.q1,
            self.q3,
            self.min,
            self.max,
            d = digits
        )
    }
}

/// A fresh read-write anonymous mapping of `len` bytes at an address the kernel picks, with
/// `flags` added to `MAP_ANONYMOUS` (`MAP_PRIVATE` or `MAP_SHARED`, `MAP_POPULATE`...); the
/// caller unmaps it. `what` names it in the error.
pub(crate) fn map_anonymous(
    len: usize,
    flags: libc::c_int,
    what: &str,
) -> crate::error::Result<*mut libc::c_void> {
    // SAFETY: a new mapping that overlaps nothing (no MAP_FIXED); checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(crate::error::Error::Unsupported(format!(
            "{what}: mmap of {} MiB failed: {}",
            len >> 20,
            std::io::Error::last_os_error()
        )));
    }
    Ok(p)
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
pub fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    civil_date(secs / 86_400)
}

/// `YYYY-MM-DD` of a day count since 1970-01-01 (Howard Hinnant's civil_from_days).
pub fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_quartiles() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.n, s.median, s.q1, s.q3, s.min, s.max),
            (5, 3.0, 2.0, 4.0, 1.0, 5.0)
        );
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_723), "2024-01-01");
        assert_eq!(civil_date(19_782), "2024-02-29");
    }
}
