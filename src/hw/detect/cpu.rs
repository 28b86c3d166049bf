//! CPU identity, online CPUs, topology and clocks.

use super::sysfs::{numbered_dirs, parse_cpulist, read_num, read_opt};
use super::vendor::{microarchitecture_of, vendor_of};
use super::{disp, CpuDirs, Field};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// CPU model, vendor and microarchitecture from the first /proc/cpuinfo block.
pub(super) fn detect_identity(
    info: &BTreeMap<String, String>,
) -> (Field<String>, Field<String>, Field<String>) {
    // --- CPU identity from /proc/cpuinfo.
    let cpu_model = if let Some(m) = info.get("model name") {
        Field::detected(m.clone(), "/proc/cpuinfo model name")
    } else if let Some((name, how)) =
        microarchitecture_of(info).filter(|_| info.contains_key("CPU implementer"))
    {
        Field::derived(
            name,
            format!("{how} (arm64 /proc/cpuinfo has no model name)"),
        )
    } else {
        Field::missing("no 'model name' in /proc/cpuinfo")
    };
    let vendor = match vendor_of(info) {
        Some((v, how)) => Field::derived(v.to_string(), how),
        None => Field::missing("no vendor_id or CPU implementer in /proc/cpuinfo"),
    };
    let microarchitecture = match microarchitecture_of(info) {
        Some((name, how)) => Field::derived(name, how),
        None => Field::missing(
            "not in sysfs; the CPU family/model in /proc/cpuinfo is not in pcpmodel's table",
        ),
    };

    (cpu_model, vendor, microarchitecture)
}

/// The online CPUs' sysfs directories, and their count (from /proc/cpuinfo's `processors` when
/// sysfs has none).
pub(super) fn detect_cpus(
    cpu_dir: &Path,
    processors: Option<u32>,
) -> Result<(CpuDirs, Field<u32>)> {
    // --- Online CPUs.
    let dirs = numbered_dirs(cpu_dir, "cpu")?;
    let online_path = cpu_dir.join("online");
    let online: Option<BTreeSet<u32>> = match read_opt(&online_path)? {
        Some(s) => Some(
            parse_cpulist(&s, &disp(&online_path), "online")?
                .into_iter()
                .collect(),
        ),
        None => None,
    };
    let cpu_dirs: CpuDirs = dirs
        .into_iter()
        .filter(|(n, _)| online.as_ref().is_none_or(|o| o.contains(n)))
        .collect();
    let cpus = if !cpu_dirs.is_empty() {
        let how = if online.is_some() {
            "cpuN directories listed in /sys/devices/system/cpu/online"
        } else {
            "cpuN directories in /sys/devices/system/cpu"
        };
        Field::detected(cpu_dirs.len() as u32, how)
    } else if let Some(n) = processors.filter(|n| *n > 0) {
        Field::derived(n, "processor entries in /proc/cpuinfo (no cpuN in sysfs)")
    } else {
        Field::missing("no /sys/devices/system/cpu/cpuN and no /proc/cpuinfo")
    };

    Ok((cpu_dirs, cpus))
}

/// A `cpuN/topology` id as the kernel prints it (`%d` of an int, -1 when unknown: read as 0);
/// anything else is not a value a kernel writes there.
fn topology_id(v: i64, path: &Path, field: &str) -> Result<u32> {
    match v {
        -1 => Ok(0),
        0..=0x7fff_ffff => Ok(v as u32),
        _ => Err(Error::parse(
            disp(path),
            1,
            field,
            format!("{v} is not a {field}: the kernel prints an int, -1 when unknown"),
        )),
    }
}

/// Sockets, cores per socket and threads per core from `cpuN/topology`.
pub(super) fn detect_topology(
    cpu_dirs: &[(u32, PathBuf)],
) -> Result<(Field<u32>, Field<u32>, Field<u32>)> {
    // --- Topology.
    let mut packages: BTreeSet<u32> = BTreeSet::new();
    let mut cores: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut max_siblings = 0u32;
    let mut have_topology = !cpu_dirs.is_empty();
    for (_, d) in cpu_dirs {
        let t = d.join("topology");
        let pkg_p = t.join("physical_package_id");
        let core_p = t.join("core_id");
        let (Some(pkg), Some(core)) = (
            read_num::<i64>(&pkg_p, "physical_package_id")?,
            read_num::<i64>(&core_p, "core_id")?,
        ) else {
            have_topology = false;
            break;
        };
        // physical_package_id is -1 on some virtual machines: one package.
        let pkg = topology_id(pkg, &pkg_p, "physical_package_id")?;
        let core = topology_id(core, &core_p, "core_id")?;
        packages.insert(pkg);
        cores.insert((pkg, core));
        let sib_p = t.join("thread_siblings_list");
        if let Some(s) = read_opt(&sib_p)? {
            let n = parse_cpulist(&s, &disp(&sib_p), "thread_siblings_list")?.len() as u32;
            max_siblings = max_siblings.max(n);
        }
    }
    Ok(if have_topology {
        let s = packages.len() as u32;
        let per: Vec<usize> = packages
            .iter()
            .map(|p| cores.iter().filter(|(q, _)| q == p).count())
            .collect();
        let max_per = per.iter().copied().max().unwrap_or(0) as u32;
        let even = per.iter().all(|&c| c as u32 == max_per);
        let cps_how = if even {
            "distinct (physical_package_id, core_id) per package in cpuN/topology".to_string()
        } else {
            format!(
                "largest count of distinct core_id per package in cpuN/topology (uneven: {per:?})"
            )
        };
        let tpc = if max_siblings > 0 {
            Field::detected(
                max_siblings,
                "largest thread_siblings_list in cpuN/topology",
            )
        } else {
            Field::missing("no thread_siblings_list in cpuN/topology")
        };
        (
            Field::detected(s, "distinct physical_package_id in cpuN/topology"),
            if even {
                Field::detected(max_per, cps_how)
            } else {
                Field::derived(max_per, cps_how)
            },
            tpc,
        )
    } else {
        (
            Field::missing("no cpuN/topology/physical_package_id"),
            Field::missing("no cpuN/topology/core_id"),
            Field::missing("no cpuN/topology/thread_siblings_list"),
        )
    })
}

/// Base and maximum clocks.
pub(super) fn detect_clocks(
    cpu_dirs: &[(u32, PathBuf)],
    info: &BTreeMap<String, String>,
) -> Result<(Field<f64>, Field<f64>)> {
    // --- Clocks.
    let (base_ghz, max_ghz) = {
        let freq = cpu_dirs.first().map(|(_, d)| d.join("cpufreq"));
        let khz = |name: &str| -> Result<Option<u64>> {
            match &freq {
                Some(f) => read_num::<u64>(&f.join(name), name),
                None => Ok(None),
            }
        };
        let base = if let Some(k) = khz("base_frequency")? {
            Field::detected(k as f64 / 1e6, "cpuN/cpufreq/base_frequency (kHz)")
        } else if let Some(g) = info.get("model name").and_then(|m| ghz_in_model_name(m)) {
            Field::derived(g, "the '@ x.xxGHz' in /proc/cpuinfo model name")
        } else if let Some(mhz) = info.get("cpu MHz").and_then(|s| s.parse::<f64>().ok()) {
            // cpuinfo prints MHz to the kHz; dividing 2445.412 by 1000 in binary gives
            // 2.4454119999999997, so go through whole kHz (exact) and divide once.
            Field::derived(
                (mhz * 1000.0).round() / 1e6,
                "/proc/cpuinfo 'cpu MHz' (the current or nominal clock, not necessarily the base)",
            )
        } else {
            Field::missing("no cpufreq/base_frequency, no GHz in the model name, no cpu MHz")
        };
        let max = match khz("cpuinfo_max_freq")? {
            Some(k) => Field::detected(k as f64 / 1e6, "cpuN/cpufreq/cpuinfo_max_freq (kHz)"),
            None => Field::missing("no cpuN/cpufreq/cpuinfo_max_freq"),
        };
        (base, max)
    };

    Ok((base_ghz, max_ghz))
}

/// The `2.40` of `Intel(R) Xeon(R) Platinum 8260 CPU @ 2.40GHz`.
fn ghz_in_model_name(model: &str) -> Option<f64> {
    let (_, after) = model.rsplit_once('@')?;
    let t = after.trim();
    let num = t.strip_suffix("GHz").or_else(|| t.strip_suffix("Ghz"))?;
    num.trim().parse().ok().filter(|g: &f64| *g > 0.0)
}
