//! The host's CPUs as sysfs describes them, pinning threads to them, and the LLC's inclusive bit
//! from CPUID.

use std::path::Path;

use super::Inclusivity;
use crate::error::{Error, Result};
use crate::hw::detect::parse_cpulist;

// ----- affinity --------------------------------------------------------------------------------

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET bounds-checks the index.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error::Unsupported(format!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// The calling thread's allowed CPUs.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: sched_getaffinity fills a zeroed set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// Restores the calling thread's affinity to `cpus` (best effort).
pub fn set_allowed_cpus(cpus: &[u32]) {
    // SAFETY: as in pin_current_thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Switches the calling thread to SCHED_FIFO priority 1 (`on`) or back to SCHED_OTHER.
pub fn set_fifo(on: bool) -> std::result::Result<(), std::io::Error> {
    let param = libc::sched_param {
        sched_priority: i32::from(on),
    };
    let policy = if on {
        libc::SCHED_FIFO
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: a valid sched_param for the policy; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

// ----- topology --------------------------------------------------------------------------------

/// One online CPU as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCpu {
    /// Logical CPU number.
    pub cpu: u32,
    /// physical_package_id.
    pub package: i64,
    /// SMT siblings (thread_siblings_list), including itself.
    pub siblings: Vec<u32>,
    /// CPUs sharing its last-level cache, including itself.
    pub llc: Vec<u32>,
    /// NUMA node.
    pub node: u32,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Online CPUs from sysfs below `root` (`/` for the host).
pub fn host_cpus(root: &Path) -> Result<Vec<HostCpu>> {
    let online_rel = "sys/devices/system/cpu/online";
    let online = read(root, online_rel).ok_or_else(|| {
        Error::io(
            root.join(online_rel).display().to_string(),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let cpus = parse_cpulist(&online, online_rel, "online")?;
    let mut nodes: Vec<(u32, Vec<u32>)> = Vec::new();
    for n in 0..1024u32 {
        if let Some(t) = read(root, &format!("sys/devices/system/node/node{n}/cpulist")) {
            nodes.push((
                n,
                parse_cpulist(&t, "node cpulist", "cpulist").unwrap_or_default(),
            ));
        }
    }
    let mut out = Vec::new();
    for cpu in cpus {
        let base = format!("sys/devices/system/cpu/cpu{cpu}");
        let package = read(root, &format!("{base}/topology/physical_package_id"))
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let siblings = read(root, &format!("{base}/topology/thread_siblings_list"))
            .and_then(|t| parse_cpulist(&t, "thread_siblings_list", "siblings").ok())
            .unwrap_or_else(|| vec![cpu]);
        let mut llc = vec![cpu];
        let mut best_level = 0;
        for i in 0..8 {
            let Some(level) = read(root, &format!("{base}/cache/index{i}/level"))
                .and_then(|t| t.trim().parse::<u32>().ok())
            else {
                continue;
            };
            let kind = read(root, &format!("{base}/cache/index{i}/type")).unwrap_or_default();
            if level > best_level && kind.trim() != "Instruction" {
                if let Some(l) = read(root, &format!("{base}/cache/index{i}/shared_cpu_list"))
                    .and_then(|t| parse_cpulist(&t, "shared_cpu_list", "llc").ok())
                {
                    best_level = level;
                    llc = l;
                }
            }
        }
        let node = nodes
            .iter()
            .find(|(_, l)| l.contains(&cpu))
            .map_or(0, |(n, _)| *n);
        out.push(HostCpu {
            cpu,
            package,
            siblings,
            llc,
            node,
        });
    }
    Ok(out)
}

/// The pair classes of a topology, innermost first, each with up to `per_class` CPU pairs.
pub fn pair_classes(cpus: &[HostCpu], per_class: usize) -> Vec<(&'static str, Vec<(u32, u32)>)> {
    let names = ["smt", "same_llc", "cross_llc", "cross_socket"];
    let mut classes: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 4];
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            let k = if a.siblings.contains(&b.cpu) {
                0
            } else if a.llc.contains(&b.cpu) {
                1
            } else if a.package == b.package {
                2
            } else {
                3
            };
            // Spread the sample: skip pairs that reuse a CPU already in the class when possible.
            if classes[k].len() < per_class
                && !classes[k]
                    .iter()
                    .any(|&(x, y)| x == a.cpu || y == b.cpu || x == b.cpu || y == a.cpu)
            {
                classes[k].push((a.cpu, b.cpu));
            }
        }
    }
    names
        .into_iter()
        .zip(classes)
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

// ----- CPUID -----------------------------------------------------------------------------------

/// The LLC's inclusive bit from CPUID's deterministic cache parameters.
pub fn llc_inclusive_cpuid() -> Inclusivity {
    #[cfg(target_arch = "x86_64")]
    {
        #![allow(unused_unsafe)] // __cpuid_count is safe from Rust 1.87, unsafe before
        use std::arch::x86_64::__cpuid_count;
        // SAFETY: CPUID exists on every x86_64 CPU; leaves are checked against the maximum.
        let (max_basic, vendor_amd, max_ext, topoext) = unsafe {
            let l0 = __cpuid_count(0, 0);
            let amd = l0.ebx == 0x6874_7541 || l0.ebx == 0x6f67_7948; // "Auth", "Hygo"
            let e0 = __cpuid_count(0x8000_0000, 0);
            let topoext =
                e0.eax >= 0x8000_0001 && (__cpuid_count(0x8000_0001, 0).ecx >> 22) & 1 == 1;
            (l0.eax, amd, e0.eax, topoext)
        };
        let leaf = if vendor_amd {
            if max_ext < 0x8000_001D || !topoext {
                return Inclusivity {
                    inclusive: None,
                    how: "CPUID 0x8000001D (cache topology) not offered by this CPU".into(),
                };
            }
            0x8000_001Du32
        } else {
            if max_basic < 4 {
                return Inclusivity {
                    inclusive: None,
                    how: "CPUID leaf 4 not offered by this CPU".into(),
                };
            }
            4
        };
        let mut best: Option<(u32, u32, u32)> = None; // (level, subleaf, edx)
        for sub in 0..16 {
            // SAFETY: as above.
            let r = unsafe { __cpuid_count(leaf, sub) };
            let kind = r.eax & 0x1f;
            if kind == 0 {
                break;
            }
            let level = (r.eax >> 5) & 7;
            if (kind == 1 || kind == 3) && best.is_none_or(|(l, _, _)| level > l) {
                best = Some((level, sub, r.edx));
            }
        }
        match best {
            Some((level, sub, edx)) => {
                let bit = (edx >> 1) & 1 == 1;
                Inclusivity {
                    inclusive: Some(bit),
                    how: format!(
                        "CPUID leaf {leaf:#x} subleaf {sub} (L{level}), EDX bit 1 (inclusive) = {}",
                        u8::from(bit)
                    ),
                }
            }
            None => Inclusivity {
                inclusive: None,
                how: format!("CPUID leaf {leaf:#x} lists no data cache"),
            },
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Inclusivity {
            inclusive: None,
            how: "not an x86 CPU: no CPUID inclusive bit; unknown".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_classes_from_topology() {
        let cpu = |cpu, package, siblings: Vec<u32>, llc: Vec<u32>| HostCpu {
            cpu,
            package,
            siblings,
            llc,
            node: package as u32,
        };
        // 2 sockets x 2 LLCs x 1 core x 2 threads.
        let cpus: Vec<HostCpu> = (0..8)
            .map(|c| {
                let core = c / 2;
                cpu(
                    c,
                    i64::from(c / 4),
                    vec![core * 2, core * 2 + 1],
                    vec![core * 2, core * 2 + 1],
                )
            })
            .collect();
        let classes = pair_classes(&cpus, 1);
        let names: Vec<&str> = classes.iter().map(|c| c.0).collect();
        assert_eq!(names, ["smt", "cross_llc", "cross_socket"]);
        assert_eq!(classes[0].1, [(0, 1)]);
        assert_eq!(classes[1].1, [(0, 2)]);
        assert_eq!(classes[2].1, [(0, 4)]);
    }
}
