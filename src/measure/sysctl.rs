//! Safe changes of a sysctl (vm.percpu_pagelist_high_fraction): the original value is written
//! back on every exit path the process controls, and a journal on disk lets the next run write
//! it back after one it does not (SIGKILL, a power cut).
//!
//! - [`SysctlGuard::acquire`] first replays a journal left by a run that died, then checks the
//!   file is writable (as root for `/proc/sys`), reads the original value and records it in the
//!   journal (written and fsynced before the first change).
//! - [`SysctlGuard::set`] writes a value; [`SysctlGuard::restore`] writes the original back and
//!   removes the journal. It is idempotent and safe to call from another thread (the binary's
//!   SIGINT/SIGTERM handler calls it); `Drop` calls it too, so a normal end, an early `?` return
//!   and a panic that unwinds all restore.
//!
//! Journal format (text): `path=<sysctl file>` and `original=<value>` lines, plus `pid=` for
//! people.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// The real sysctl file.
pub const HIGH_FRACTION_PATH: &str = "/proc/sys/vm/percpu_pagelist_high_fraction";
/// Default journal file.
pub const DEFAULT_JOURNAL: &str = "/var/tmp/pcpmodel-sysctl.journal";

/// A sysctl changed under guard.
#[derive(Debug)]
pub struct SysctlGuard {
    path: PathBuf,
    journal: PathBuf,
    original: String,
    /// (the file may hold a value other than `original`, restored: no further `set`).
    state: Mutex<(bool, bool)>,
}

/// What a journal held and whether it was replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The sysctl file named in the journal.
    pub path: PathBuf,
    /// The original value written back.
    pub original: String,
}

pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
    Error::io(path.display().to_string(), e)
}

/// Replays a journal left by a run that did not restore (SIGKILL): writes the original value back
/// and removes the journal. `Ok(None)` when there is no journal.
pub fn recover(journal: &Path) -> Result<Option<Recovered>> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(journal, e)),
    };
    let label = journal.display().to_string();
    let mut path = None;
    let mut original = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with("pid=") {
            continue;
        }
        match line.split_once('=') {
            Some(("path", v)) => path = Some(PathBuf::from(v)),
            Some(("original", v)) => original = Some(v.to_string()),
            _ => {
                return Err(Error::parse(
                    &label,
                    i + 1,
                    "journal",
                    format!("unexpected line '{line}'"),
                ))
            }
        }
    }
    let (Some(path), Some(original)) = (path, original) else {
        return Err(Error::parse(
            &label,
            0,
            "journal",
            "needs path= and original= lines",
        ));
    };
    if original.trim().parse::<u64>().is_err() {
        return Err(Error::parse(
            &label,
            0,
            "original",
            format!("'{original}' is not a number"),
        ));
    }
    std::fs::write(&path, format!("{original}\n")).map_err(|e| io(&path, e))?;
    std::fs::remove_file(journal).map_err(|e| io(journal, e))?;
    Ok(Some(Recovered { path, original }))
}

impl SysctlGuard {
    /// Takes charge of the sysctl file `path`, journalling its value in `journal`. Returns the
    /// guard and what an earlier run's journal restored, if anything.
    ///
    /// Refuses (with the reason) when the file is missing, not writable, or under /proc/sys and
    /// the process is not root.
    pub fn acquire(path: &Path, journal: &Path) -> Result<(SysctlGuard, Option<Recovered>)> {
        let recovered = recover(journal)?;
        if !path.exists() {
            return Err(Error::Unsupported(format!(
                "{} does not exist (this kernel has no such sysctl; \
                 vm.percpu_pagelist_high_fraction needs Linux >= 5.14)",
                path.display()
            )));
        }
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if path.starts_with("/proc/sys") && euid != 0 {
            return Err(Error::Unsupported(format!(
                "changing {} needs root (effective uid is {euid}): run as root, or use \
                 --dry-run to see the plan",
                path.display()
            )));
        }
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(path) {
            return Err(Error::Unsupported(format!(
                "{} is not writable ({e}): a container may mount /proc/sys read-only; use \
                 --dry-run to see the plan",
                path.display()
            )));
        }
        let original = std::fs::read_to_string(path)
            .map_err(|e| io(path, e))?
            .trim()
            .to_string();
        if original.parse::<u64>().is_err() {
            return Err(Error::parse(
                path.display().to_string(),
                1,
                "value",
                format!("'{original}' is not a number"),
            ));
        }
        let text = format!(
            "path={}\noriginal={original}\npid={}\n",
            path.display(),
            std::process::id()
        );
        {
            use std::io::Write;
            let mut f = std::fs::File::create(journal).map_err(|e| io(journal, e))?;
            f.write_all(text.as_bytes()).map_err(|e| io(journal, e))?;
            f.sync_all().map_err(|e| io(journal, e))?;
        }
        Ok((
            SysctlGuard {
                path: path.to_path_buf(),
                journal: journal.to_path_buf(),
                original,
                state: Mutex::new((false, false)),
            },
            recovered,
        ))
    }

    /// The value found when the guard was acquired.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// The sysctl file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `value` to the sysctl. Refused once [`SysctlGuard::restore`] has run (a signal
    /// handler restoring from another thread must not be undone by the sweep's next point).
    pub fn set(&self, value: u64) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.1 {
            return Err(Error::Unsupported(format!(
                "{} was already restored (interrupted): not changing it again",
                self.path.display()
            )));
        }
        state.0 = true;
        std::fs::write(&self.path, format!("{value}\n")).map_err(|e| io(&self.path, e))
    }

    /// Writes the original value back and removes the journal (idempotent).
    pub fn restore(&self) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 = true;
        if state.0 {
            std::fs::write(&self.path, format!("{}\n", self.original))
                .map_err(|e| io(&self.path, e))?;
            state.0 = false;
        }
        remove_journal(&self.journal)
    }
}

/// Removes a journal; one already gone is fine (restoring is idempotent).
pub(crate) fn remove_journal(journal: &Path) -> Result<()> {
    match std::fs::remove_file(journal) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(journal, e)),
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "Error: could not restore {} to {}: {e}",
                self.path.display(),
                self.original
            );
        }
    }
}

/// Load average (1 min) and runnable tasks (`procs_running` in /proc/stat).
pub fn busy() -> Option<(f64, u32)> {
    let la: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let running = stat
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())?;
    Some((la, running))
}

/// Free page reporting of a virtual machine (`virtio_balloon`; `mm/page_reporting.c`): the
/// guest hands free buddy blocks of `order` and up to the hypervisor, which drops them, and the
/// guest's next touch of such a page faults in the host (microseconds per 4 KiB page). A sweep
/// whose large highs spread a loop's pages over many buddy blocks pays that on top of the
/// caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreePageReporting {
    /// `page_reporting_order`: the smallest block order reported.
    pub order: u32,
    /// KiB reported so far, where the kernel counts it.
    pub reported_kib: Option<u64>,
}

/// Free page reporting as `sys_root` (normally `/sys`) shows it: None when the kernel has no
/// `page_reporting` module parameters (no reporting device, or not built in).
pub fn free_page_reporting(sys_root: &std::path::Path) -> Option<FreePageReporting> {
    let dir = sys_root.join("module/page_reporting/parameters");
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let order = u32::try_from(read("page_reporting_order")?).ok()?;
    Some(FreePageReporting {
        order,
        reported_kib: read("reported_kib"),
    })
}

impl FreePageReporting {
    /// Whether blocks the buddy allocator can hold are reported (an order above the largest,
    /// `MAX_PAGE_ORDER` 10 on x86-64, switches reporting off).
    pub fn active(&self) -> bool {
        self.order <= 10
    }

    /// One line for a sweep's header and warning.
    pub fn describe(&self) -> String {
        format!(
            "free page reporting on (page_reporting_order {}{}): free buddy blocks of {} KiB and up go back to the hypervisor and fault in the host when touched again, which large highs pay on top of the caches (tools/page_reporting_ab.sh shows how much)",
            self.order,
            self.reported_kib
                .map_or(String::new(), |k| format!(", {} MiB reported so far", k >> 10)),
            4u64 << self.order
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_page_reporting_is_read_from_the_module_parameters() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(free_page_reporting(d.path()), None);
        let p = d.path().join("module/page_reporting/parameters");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("page_reporting_order"), "9\n").unwrap();
        let r = free_page_reporting(d.path()).unwrap();
        assert_eq!(r.order, 9);
        assert_eq!(r.reported_kib, None);
        assert!(r.active());
        assert!(r.describe().contains("2048 KiB and up"), "{}", r.describe());
        std::fs::write(p.join("reported_kib"), "69178648\n").unwrap();
        let r = free_page_reporting(d.path()).unwrap();
        assert!(
            r.describe().contains("67557 MiB reported"),
            "{}",
            r.describe()
        );
        // Above the largest buddy order nothing is reported.
        std::fs::write(p.join("page_reporting_order"), "11").unwrap();
        assert!(!free_page_reporting(d.path()).unwrap().active());
        // Unreadable values are no reporting, not an error.
        std::fs::write(p.join("page_reporting_order"), "x").unwrap();
        assert_eq!(free_page_reporting(d.path()), None);
    }

    #[test]
    fn restores_on_drop_and_removes_journal() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("frac");
        let j = dir.path().join("journal");
        std::fs::write(&f, "0\n").unwrap();
        {
            let (g, rec) = SysctlGuard::acquire(&f, &j).unwrap();
            assert!(rec.is_none());
            assert!(j.exists(), "journal written before the first change");
            g.set(64).unwrap();
            assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "64");
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "0");
        assert!(!j.exists());
    }

    #[test]
    fn restores_on_panic() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("frac");
        let j = dir.path().join("journal");
        std::fs::write(&f, "12\n").unwrap();
        let (f2, j2) = (f.clone(), j.clone());
        let r = std::panic::catch_unwind(move || {
            let (g, _) = SysctlGuard::acquire(&f2, &j2).unwrap();
            g.set(100).unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "12");
        assert!(!j.exists());
    }

    #[test]
    fn journal_recovers_after_a_lost_guard() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("frac");
        let j = dir.path().join("journal");
        std::fs::write(&f, "0\n").unwrap();
        let (g, _) = SysctlGuard::acquire(&f, &j).unwrap();
        g.set(8).unwrap();
        std::mem::forget(g); // what SIGKILL does: no destructor runs
        assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "8");
        let rec = recover(&j).unwrap().unwrap();
        assert_eq!(rec.original, "0");
        assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "0");
        assert!(!j.exists());
    }

    #[test]
    fn refuses_missing_or_unwritable() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("journal");
        let e = SysctlGuard::acquire(&dir.path().join("nope"), &j).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let bad = dir.path().join("garbage");
        std::fs::write(&bad, "x\n").unwrap();
        let e = SysctlGuard::acquire(&bad, &j).unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
    }
}
