//! The cache hierarchy: levels, sizes and who shares them.

use super::sysfs::{numbered_dirs, parse_cpulist, parse_size_kib, read_num, read_opt};
use super::{disp, DetectedCache, Field};

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::hw::machine::{Policy, Sharing};

/// The cache levels of the first online CPU, with instance counts over all CPUs. Sharing and
/// policy are filled in by [`classify_caches`].
pub(super) fn detect_caches(cpu_dirs: &[(u32, PathBuf)]) -> Result<Vec<DetectedCache>> {
    // --- Caches of the first online CPU, and instance counts over all CPUs.
    let mut caches = Vec::new();
    if let Some((first_id, first)) = cpu_dirs.first() {
        for (k, idx_dir) in numbered_dirs(&first.join("cache"), "index")? {
            let index = format!("index{k}");
            let level_p = idx_dir.join("level");
            let Some(level) = read_num::<u8>(&level_p, "level")? else {
                continue;
            };
            let kind = match read_opt(&idx_dir.join("type"))?.as_deref() {
                Some("Data") => "data",
                Some("Instruction") => "instruction",
                Some("Unified") => "unified",
                Some(other) => {
                    return Err(Error::parse(
                        disp(&idx_dir.join("type")),
                        1,
                        "type",
                        format!("'{other}' is not Data, Instruction or Unified"),
                    ))
                }
                None => "unified",
            };
            let base = format!("/sys/devices/system/cpu/cpu{first_id}/cache/{index}");
            let size_p = idx_dir.join("size");
            // The kernel shows level, size and coherency_line_size only when they are not 0
            // (cache_default_attrs_is_visible(), drivers/base/cacheinfo.c): a 0 there is not a
            // value it writes. ways_of_associativity may be 0 (fully associative).
            let hidden_when_zero = |path: &std::path::Path, field: &str| {
                Error::parse(
                    disp(path),
                    1,
                    field,
                    format!("0 is not a {field} the kernel shows: it hides the file when the value is 0 (drivers/base/cacheinfo.c)"),
                )
            };
            if level == 0 {
                return Err(hidden_when_zero(&level_p, "level"));
            }
            let size_kib = match read_opt(&size_p)? {
                Some(s) => {
                    let kib = parse_size_kib(&s, &disp(&size_p))?;
                    if kib == 0 && s.trim().trim_end_matches(['K', 'k', 'M', 'm', 'G', 'g']) == "0"
                    {
                        return Err(hidden_when_zero(&size_p, "size"));
                    }
                    Field::detected(kib, format!("{base}/size"))
                }
                None => Field::missing(format!("no {base}/size")),
            };
            let ways = match read_num::<u64>(
                &idx_dir.join("ways_of_associativity"),
                "ways_of_associativity",
            )? {
                Some(w) if w > 0 => Field::detected(w, format!("{base}/ways_of_associativity")),
                // 0 means fully associative or unknown to the kernel.
                _ => Field::missing(format!("no usable {base}/ways_of_associativity")),
            };
            let line_bytes =
                match read_num::<u64>(&idx_dir.join("coherency_line_size"), "coherency_line_size")?
                {
                    Some(0) => {
                        return Err(hidden_when_zero(
                            &idx_dir.join("coherency_line_size"),
                            "coherency_line_size",
                        ))
                    }
                    Some(l) => Field::detected(l, format!("{base}/coherency_line_size")),
                    None => Field::missing(format!("no {base}/coherency_line_size")),
                };
            let shared_p = idx_dir.join("shared_cpu_list");
            let (shared_cpus, instances) = match read_opt(&shared_p)? {
                Some(s) => {
                    let n = parse_cpulist(&s, &disp(&shared_p), "shared_cpu_list")?.len() as u32;
                    let mut sets: BTreeSet<Vec<u32>> = BTreeSet::new();
                    for (_, d) in cpu_dirs {
                        let p = d.join("cache").join(&index).join("shared_cpu_list");
                        if let Some(s) = read_opt(&p)? {
                            sets.insert(parse_cpulist(&s, &disp(&p), "shared_cpu_list")?);
                        }
                    }
                    (
                        Field::detected(n, format!("{base}/shared_cpu_list")),
                        Field::derived(
                            sets.len() as u32,
                            format!("distinct cpuN/cache/{index}/shared_cpu_list over all CPUs"),
                        ),
                    )
                }
                None => (
                    Field::missing(format!("no {base}/shared_cpu_list")),
                    Field::missing(format!("no cpuN/cache/{index}/shared_cpu_list")),
                ),
            };
            caches.push(DetectedCache {
                index,
                level,
                kind: kind.to_string(),
                size_kib,
                line_bytes,
                ways,
                shared_cpus,
                instances,
                shared_by: Field::missing("not yet derived"),
                policy: Field::missing("not yet derived"),
            });
        }
    }
    caches.sort_by_key(|c| c.level);

    Ok(caches)
}

/// Derives who shares each cache level and which levels are core-private; returns the LLC
/// domains per socket.
pub(super) fn classify_caches(
    caches: &mut [DetectedCache],
    tpc: u32,
    sockets: Option<u32>,
) -> Field<u32> {
    // Sharing and policy of each level; LLC domains.
    let outermost = caches
        .iter()
        .filter(|c| c.kind != "instruction")
        .map(|c| c.level)
        .max();
    for c in caches.iter_mut() {
        c.shared_by = match c.shared_cpus.value {
            Some(n) if n <= tpc => Field::derived(
                Sharing::Core,
                format!("shared by {n} CPU(s), no more than the {tpc} thread(s) of a core"),
            ),
            Some(n) => Field::derived(
                Sharing::LlcDomain,
                format!("shared by {n} CPUs, more than one core"),
            ),
            None => Field::missing("no shared_cpu_list"),
        };
        c.policy = if c.shared_by.value == Some(Sharing::Core) && Some(c.level) != outermost {
            Field::derived(
                Policy::Private,
                "core-private level (its relation to the outer level is that level's policy)",
            )
        } else {
            Field::missing("inclusivity is not in sysfs")
        };
    }
    let llc = caches
        .iter()
        .rfind(|c| c.kind != "instruction" && Some(c.level) == outermost);
    match (llc.and_then(|c| c.instances.value), sockets) {
        (Some(i), Some(s)) if s > 0 && i >= s && i % s == 0 => Field::derived(
            i / s,
            format!(
                "{i} distinct L{} shared_cpu_list over all CPUs / {s} socket(s)",
                llc.map_or(0, |c| c.level)
            ),
        ),
        _ => Field::missing("no LLC shared_cpu_list (or it does not split evenly over sockets)"),
    }
}
