//! The tracefs settings a recording changes, under guard: every file's value is journalled (on
//! disk, fsynced) before the first change and written back on every exit path the process
//! controls (normal end, an error, a panic that unwinds, SIGINT/SIGTERM through the binary's
//! handler); after one it does not (SIGKILL), `--recover` replays the journal.
//!
//! Journal format (text): `set <file>\t<original value>` lines in the order of the changes,
//! `mounted <dir>` when the recording mounted tracefs itself, `pid=` for people. Restoring
//! goes backwards: events off before the buffer size, the mount last.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

use crate::measure::sysctl::{io, remove_journal};

/// The value a tracefs file holds, as it can be written back: `buffer_size_kb` prints
/// `7 (expanded: 1408)` before the buffer was first used, of which the first number is the
/// setting.
pub fn settable_value(text: &str) -> String {
    text.split_whitespace().next().unwrap_or("").to_string()
}

/// What the guard changed and the journal holds.
#[derive(Debug, Default)]
struct State {
    /// (file, original value) in the order they were changed.
    changed: Vec<(PathBuf, String)>,
    /// The tracefs mount the recording made.
    mounted: Option<PathBuf>,
    /// Restored: no further change.
    restored: bool,
}

/// tracefs settings changed under guard.
#[derive(Debug)]
pub struct TracefsGuard {
    journal: PathBuf,
    state: Mutex<State>,
}

/// What a journal restored.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// (file, value written back).
    pub restored: Vec<(PathBuf, String)>,
    /// The tracefs mount removed, if the run had made one.
    pub unmounted: Option<PathBuf>,
}

fn journal_text(s: &State) -> String {
    let mut t = format!("pid={}\n", std::process::id());
    if let Some(m) = &s.mounted {
        t.push_str(&format!("mounted {}\n", m.display()));
    }
    for (p, v) in &s.changed {
        t.push_str(&format!("set {}\t{v}\n", p.display()));
    }
    t
}

fn write_journal(journal: &Path, s: &State) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(journal).map_err(|e| io(journal, e))?;
    f.write_all(journal_text(s).as_bytes())
        .map_err(|e| io(journal, e))?;
    f.sync_all().map_err(|e| io(journal, e))
}

/// Unmounts the tracefs mount at `dir`.
pub fn unmount(dir: &Path) -> Result<()> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Unsupported(format!("{}: a path with a NUL byte", dir.display())))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::umount(c.as_ptr()) } != 0 {
        return Err(io(dir, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Mounts tracefs at `dir` (root). Used when neither /sys/kernel/tracing nor
/// /sys/kernel/debug/tracing holds it.
pub fn mount_tracefs(dir: &Path) -> Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let d = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Unsupported(format!("{}: a path with a NUL byte", dir.display())))?;
    let (src, fstype) = (c("nodev"), c("tracefs"));
    // SAFETY: every pointer is a valid NUL-terminated string or null (no mount data).
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            d.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(Error::Unsupported(format!(
            "cannot mount tracefs at {}: {} (recording needs root and a kernel with tracefs)",
            dir.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Replays a journal left by a recording that did not restore: writes every original value
/// back (last change first), unmounts tracefs if that run mounted it, removes the journal.
/// `Ok(None)` when there is no journal.
pub fn recover(journal: &Path) -> Result<Option<Recovered>> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(journal, e)),
    };
    let label = journal.display().to_string();
    let mut s = State::default();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("set ") {
            let (p, v) = rest.split_once('\t').ok_or_else(|| {
                Error::parse(&label, i + 1, "set", "expected `set <file>\\t<value>`")
            })?;
            s.changed.push((PathBuf::from(p), v.to_string()));
        } else if let Some(m) = line.strip_prefix("mounted ") {
            s.mounted = Some(PathBuf::from(m));
        } else if line.starts_with("pid=") || line.trim().is_empty() {
        } else {
            return Err(Error::parse(
                &label,
                i + 1,
                "line",
                format!("'{line}' is not a journal line (set, mounted, pid=)"),
            ));
        }
    }
    let restored = s.changed.iter().rev().cloned().collect::<Vec<_>>();
    restore_state(&mut s)?;
    remove_journal(journal)?;
    Ok(Some(Recovered {
        restored,
        unmounted: s.mounted.take(),
    }))
}

/// Writes every original back, last change first, then unmounts; the first error is returned
/// after trying every file.
fn restore_state(s: &mut State) -> Result<()> {
    let mut first = None;
    for (p, v) in s.changed.iter().rev() {
        if let Err(e) = std::fs::write(p, format!("{v}\n")) {
            first.get_or_insert(io(p, e));
        }
    }
    if let Some(m) = &s.mounted {
        if let Err(e) = unmount(m) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

impl TracefsGuard {
    /// Replays an earlier run's journal, then starts a new one at `journal` (empty: nothing
    /// changed yet). `mounted` is a tracefs mount this run made, to be removed at the end.
    pub fn acquire(journal: &Path, mounted: Option<PathBuf>) -> Result<(Self, Option<Recovered>)> {
        let recovered = recover(journal)?;
        let s = State {
            mounted,
            ..State::default()
        };
        write_journal(journal, &s)?;
        Ok((
            TracefsGuard {
                journal: journal.to_path_buf(),
                state: Mutex::new(s),
            },
            recovered,
        ))
    }

    /// Writes `value` to the tracefs file `path`, journalling the file's value first (once per
    /// file). Refused after [`TracefsGuard::restore`].
    pub fn set(&self, path: &Path, value: &str) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.restored {
            return Err(Error::Unsupported(format!(
                "tracefs was already restored (interrupted): not changing {}",
                path.display()
            )));
        }
        if !s.changed.iter().any(|(p, _)| p == path) {
            let original = settable_value(&std::fs::read_to_string(path).map_err(|e| io(path, e))?);
            s.changed.push((path.to_path_buf(), original));
            write_journal(&self.journal, &s)?;
        }
        std::fs::write(path, format!("{value}\n")).map_err(|e| io(path, e))
    }

    /// Writes the journalled original of `path` back now and forgets it, so that the end of
    /// the run leaves the file as whatever runs meanwhile sets it (a sysctl the recording
    /// changes only for a moment, which the recorded command may set itself). A file never set
    /// is left alone.
    pub fn put_back(&self, path: &Path) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = s.changed.iter().position(|(p, _)| p == path) else {
            return Ok(());
        };
        let (p, v) = s.changed[i].clone();
        std::fs::write(&p, format!("{v}\n")).map_err(|e| io(&p, e))?;
        s.changed.remove(i);
        write_journal(&self.journal, &s)
    }

    /// Writes every original value back, unmounts a mount this run made and removes the
    /// journal (idempotent; safe from the signal thread).
    pub fn restore(&self) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.restored {
            return Ok(());
        }
        s.restored = true;
        restore_state(&mut s)?;
        remove_journal(&self.journal)
    }
}

impl Drop for TracefsGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("Error: could not restore tracefs: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pcpmodel-tfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn restore_writes_originals_back_and_a_journal_replays_them() {
        let d = tmp("g");
        let (on, buf) = (d.join("tracing_on"), d.join("buffer_size_kb"));
        std::fs::write(&on, "0\n").unwrap();
        std::fs::write(&buf, "7 (expanded: 1408)\n").unwrap();
        let j = d.join("journal");
        {
            let (g, rec) = TracefsGuard::acquire(&j, None).unwrap();
            assert!(rec.is_none());
            g.set(&buf, "16384").unwrap();
            g.set(&on, "1").unwrap();
            g.set(&on, "0").unwrap();
            assert_eq!(std::fs::read_to_string(&buf).unwrap(), "16384\n");
            // A copy of the journal as a SIGKILL would leave it.
            std::fs::copy(&j, d.join("killed")).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&on).unwrap().trim(), "0");
        assert_eq!(std::fs::read_to_string(&buf).unwrap().trim(), "7");
        assert!(!j.exists());
        std::fs::write(&buf, "99\n").unwrap();
        let r = recover(&d.join("killed")).unwrap().unwrap();
        assert_eq!(r.restored.len(), 2);
        assert_eq!(std::fs::read_to_string(&buf).unwrap().trim(), "7");
        assert!(recover(&d.join("killed")).unwrap().is_none());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_bad_journal_line_is_located() {
        let d = tmp("bad");
        let j = d.join("j");
        std::fs::write(&j, "pid=1\nset /x\n").unwrap();
        let e = recover(&j).unwrap_err().to_string();
        assert!(e.contains(":2") && e.contains("set"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }
}
