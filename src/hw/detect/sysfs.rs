//! Small readers of sysfs and /proc files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Reads a file, trimmed; `Ok(None)` when it does not exist.
pub(super) fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path.display().to_string(), e)),
    }
}

fn parse_num<T: std::str::FromStr>(path: &Path, field: &str, text: &str) -> Result<T> {
    text.trim().parse::<T>().map_err(|_| {
        Error::parse(
            path.display().to_string(),
            1,
            field,
            format!("'{}' is not a number", text.trim()),
        )
    })
}

/// Reads a number from a one-value file; `Ok(None)` when the file does not exist.
pub(super) fn read_num<T: std::str::FromStr>(path: &Path, field: &str) -> Result<Option<T>> {
    match read_opt(path)? {
        Some(s) => parse_num(path, field, &s).map(Some),
        None => Ok(None),
    }
}

/// Parses a kernel CPU or node list such as `0-5,12-17` (empty string = empty list).
pub fn parse_cpulist(text: &str, file: &str, field: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let bad = || {
            Error::parse(
                file,
                1,
                field,
                format!("'{part}' is not an entry of a kernel list such as 0-5,12-17 (ranges up to 65536 ids)"),
            )
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.trim().parse().map_err(|_| bad())?;
                let b: u32 = b.trim().parse().map_err(|_| bad())?;
                if b < a || b - a > 1 << 16 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}

/// Parses a sysfs cache size such as `32K`, `1280K`, `48M` into KiB.
pub fn parse_size_kib(text: &str, file: &str) -> Result<u64> {
    let t = text.trim();
    let bad = || Error::parse(file, 1, "size", format!("'{t}' is not a cache size"));
    let (num, mult) = match t.chars().last() {
        Some('K') | Some('k') => (&t[..t.len() - 1], 1),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1024),
        Some('G') | Some('g') => (&t[..t.len() - 1], 1024 * 1024),
        Some(c) if c.is_ascii_digit() => {
            return t.parse::<u64>().map(|b| b / 1024).map_err(|_| bad())
        }
        _ => return Err(bad()),
    };
    num.trim()
        .parse::<u64>()
        .map_err(|_| bad())?
        .checked_mul(mult)
        .ok_or_else(bad)
}

/// Numbered subdirectories `<prefix>N` of `dir`, sorted by N.
pub(super) fn numbered_dirs(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir.display().to_string(), e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|s| s.parse::<u32>().ok())
        {
            if entry.path().is_dir() {
                out.push((n, entry.path()));
            }
        }
    }
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// `key : value` lines of /proc/cpuinfo for the first processor block, plus the processor count.
pub(super) fn read_cpuinfo(path: &Path) -> Result<Option<(BTreeMap<String, String>, u32)>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    let mut first = BTreeMap::new();
    let mut processors = 0u32;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "processor" {
            processors += 1;
        }
        first.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    Ok(Some((first, processors)))
}

/// `Key: N kB` of a meminfo file (also `Node N Key: N kB`), in kB.
pub(super) fn meminfo_kb(path: &Path, key: &str) -> Result<Option<u64>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    for (i, line) in text.lines().enumerate() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k.split_whitespace().last() == Some(key) {
            let num = v.split_whitespace().next().unwrap_or("");
            let kb = num.parse::<u64>().map_err(|_| {
                Error::parse(
                    path.display().to_string(),
                    i + 1,
                    key,
                    format!("'{}' is not a number of kB", v.trim()),
                )
            })?;
            // The kernel prints pages x 4 KiB: no count of memory exceeds what the machine can
            // address (bounds::TOTAL_MIB, 52 physical address bits). 0 is valid: a node
            // without memory prints `MemTotal: 0 kB`.
            let max = crate::bounds::TOTAL_MIB;
            if kb / 1024 > max.hi as u64 {
                return Err(Error::parse(
                    path.display().to_string(),
                    i + 1,
                    key,
                    format!("{kb} kB is more than {} MiB: {}", max.hi as u64, max.why),
                ));
            }
            return Ok(Some(kb));
        }
    }
    Ok(None)
}

/// Present and managed pages per (node, zone) from /proc/zoneinfo.
#[derive(Debug, Default)]
pub(super) struct ZonePages {
    pub(super) present: u64,
    pub(super) managed: u64,
}

pub(super) fn read_zoneinfo(path: &Path) -> Result<Option<BTreeMap<(u32, String), ZonePages>>> {
    let Some(text) = read_opt(path)? else {
        return Ok(None);
    };
    let file = path.display().to_string();
    let mut zones: BTreeMap<(u32, String), ZonePages> = BTreeMap::new();
    let mut current: Option<(u32, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            if let Some((n, z)) = rest.split_once(',') {
                let node: u32 = n.trim().parse().map_err(|_| {
                    Error::parse(
                        &file,
                        i + 1,
                        "Node",
                        format!("'{}' is not a node id", n.trim()),
                    )
                })?;
                let zone = z
                    .trim()
                    .strip_prefix("zone")
                    .unwrap_or(z)
                    .trim()
                    .to_string();
                zones.entry((node, zone.clone())).or_default();
                current = Some((node, zone));
            }
            continue;
        }
        let mut it = t.split_whitespace();
        let (Some(key), Some(val), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if key != "present" && key != "managed" {
            continue;
        }
        let Some(cur) = &current else { continue };
        let v: u64 = val
            .parse()
            .map_err(|_| Error::parse(&file, i + 1, key, format!("'{val}' is not a page count")))?;
        if let Some(z) = zones.get_mut(cur) {
            if key == "present" {
                z.present = v;
            } else {
                z.managed = v;
            }
        }
    }
    Ok(Some(zones))
}
