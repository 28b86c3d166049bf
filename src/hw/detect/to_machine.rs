//! The flat rows view of a detection, and the complete [`Machine`] built from it.

use super::vendor::typical;
use super::{Detected, DetectedCache, Field, Row, Status};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::{
    CacheLevel, Clock, Cpu, Latencies, Machine, Memory, Policy, Sharing, Topology,
};
use crate::hw::provenance::Sourced;

fn level_name(c: &DetectedCache) -> String {
    match c.kind.as_str() {
        "data" => format!("L{}d", c.level),
        "instruction" => format!("L{}i", c.level),
        _ => format!("L{}", c.level),
    }
}

pub(super) fn row<T: Serialize>(name: impl Into<String>, unit: &'static str, f: &Field<T>) -> Row {
    Row {
        name: name.into(),
        value: f
            .value
            .as_ref()
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or(serde_json::Value::Null),
        unit,
        status: f.status,
        source: f.source.clone(),
    }
}

impl Detected {
    /// The flat view: one row per field, names as in machine files (`topology.sockets`,
    /// `cache.L2.size_kib`, `latency_ns.l2_hit`, ...).
    pub fn rows(&self) -> Vec<Row> {
        let mut r = vec![
            row("cpu.model", "", &self.cpu_model),
            row("cpu.vendor", "", &self.vendor),
            row("cpu.microarchitecture", "", &self.microarchitecture),
            row("cpus", "", &self.cpus),
            row("topology.sockets", "", &self.sockets),
            row("topology.cores_per_socket", "", &self.cores_per_socket),
            row("topology.threads_per_core", "", &self.threads_per_core),
            row("topology.numa_nodes", "", &self.numa_nodes),
            row(
                "topology.llc_domains_per_socket",
                "",
                &self.llc_domains_per_socket,
            ),
            row("memory.total_mib", "MiB", &self.mem_total_mib),
            row("memory.node_mib", "MiB", &self.node_mib),
            row("memory.below_4g_mib", "MiB", &self.below_4g_mib),
            row(
                "memory.reserved_mib_per_node",
                "MiB",
                &self.reserved_mib_per_node,
            ),
        ];
        for c in &self.caches {
            let p = format!("cache.{}", level_name(c));
            r.push(row(format!("{p}.size_kib"), "KiB", &c.size_kib));
            r.push(row(format!("{p}.line_bytes"), "bytes", &c.line_bytes));
            r.push(row(format!("{p}.ways"), "", &c.ways));
            r.push(row(format!("{p}.shared_cpus"), "CPUs", &c.shared_cpus));
            r.push(row(format!("{p}.instances"), "", &c.instances));
            r.push(row(format!("{p}.shared_by"), "", &c.shared_by));
            r.push(row(format!("{p}.policy"), "", &c.policy));
        }
        r.push(row("clock.base_ghz", "GHz", &self.base_ghz));
        r.push(row("clock.max_ghz", "GHz", &self.max_ghz));
        for (n, f) in &self.latency_ns {
            r.push(row(format!("latency_ns.{n}"), "ns", f));
        }
        r
    }

    /// A complete, validated [`Machine`] for the detected host: detected and derived values as
    /// they are, every missing value filled with one labelled `"assumed: missing from sysfs,
    /// typical value for <vendor>"`. Returns the machine and the dotted names of the fields
    /// filled by assumption (all latencies and the LLC policy at least).
    ///
    /// An error, saying what is missing, when the root lacks what a machine cannot be described
    /// without ([`Detected::missing_essentials`]): detection then does not invent a machine. The
    /// machine returned loads again from its TOML. Whether the cost models can use it (its cache
    /// hierarchy builds) is checked above this layer, by the commands that offer it
    /// (`pcpmodel detect`, `pcpmodel measure`).
    pub fn to_machine(&self) -> Result<(Machine, Vec<String>)> {
        let missing = self.missing_essentials();
        if !missing.is_empty() {
            return Err(Error::Unsupported(format!(
                "{}: not enough to describe a machine: {}",
                self.root,
                missing.join("; ")
            )));
        }
        let (m, assumed) = self.build_machine()?;
        let label = format!("detected from {}", self.root);
        Machine::from_toml_str(&m.to_toml_string()?, &label)?;
        Ok((m, assumed))
    }

    /// What the root lacks that a machine cannot be described without: the CPUs, the cache
    /// hierarchy (an L2 and a level beyond it), the memory, and anything that should be a
    /// directory but is not. Empty for a usable root.
    pub fn missing_essentials(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.cpus.value.is_none() {
            v.push("the CPUs (no sys/devices/system/cpu/cpuN and no proc/cpuinfo)".to_string());
        }
        let data: Vec<&DetectedCache> = self
            .caches
            .iter()
            .filter(|c| c.kind != "instruction")
            .collect();
        if data.is_empty() {
            v.push("the caches (no sys/devices/system/cpu/cpuN/cache/indexN)".to_string());
        } else if !data.iter().any(|c| c.level == 2) {
            v.push("the L2 cache (no cache/indexN with level 2)".to_string());
        } else if !data.iter().any(|c| c.level > 2) {
            v.push("a cache level beyond L2 (no cache/indexN with level 3)".to_string());
        }
        if self.mem_total_mib.value.is_none() && self.node_mib.value.is_none() {
            v.push(
                "the memory (no proc/meminfo MemTotal, no nodeN/meminfo, no proc/zoneinfo)"
                    .to_string(),
            );
        }
        for u in &self.unreadable {
            v.push(format!(
                "{u} is not a directory, so the cache level it describes could not be read"
            ));
        }
        v
    }

    /// Values that were read or derived but are implausible for real hardware, in words: a
    /// reservation of more than a quarter of a node, memory below 4 GiB above node 0's.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let (Some(r), Some(nodes)) = (self.reserved_mib_per_node.value, &self.node_mib.value) {
            if let Some(&smallest) = nodes.iter().min() {
                if smallest > 0 && r * 4 > smallest {
                    w.push(format!(
                        "memory.reserved_mib_per_node: {r} MiB is {:.0} % of the smallest node ({smallest} MiB); firmware, the kernel image and crashkernel take a few percent: memory may be ballooned, offline or hot-removed, so the zone sizes (and the kernel's pcp->high) derived from it are those of this moment",
                        100.0 * r as f64 / smallest as f64
                    ));
                }
            }
        }
        if let (Some(b), Some(nodes)) = (self.below_4g_mib.value, &self.node_mib.value) {
            if nodes.first().is_some_and(|&n0| b > n0) {
                w.push(format!(
                    "memory.below_4g_mib: {b} MiB below 4 GiB is more than node 0's {} MiB",
                    nodes[0]
                ));
            }
        }
        w
    }

    pub(super) fn build_machine(&self) -> Result<(Machine, Vec<String>)> {
        let mut assumed: Vec<String> = Vec::new();
        let vendor = self
            .vendor
            .value
            .clone()
            .unwrap_or_else(|| "unknown".into());
        let ty = typical(&vendor);
        let label = format!("detected from {}", self.root);

        // Takes a field's value, or fills it with an assumption and records the field name.
        fn fill<T: Clone>(
            f: &Field<T>,
            name: &str,
            default: T,
            why: String,
            assumed: &mut Vec<String>,
        ) -> Sourced<T> {
            match &f.value {
                Some(v) if f.status != Status::Missing => {
                    Sourced::new(v.clone(), f.machine_source())
                }
                _ => {
                    assumed.push(name.to_string());
                    Sourced::new(default, why)
                }
            }
        }
        let miss = |what: &str| {
            format!(
                "assumed: missing from sysfs ({what}), typical value for {}",
                ty.what
            )
        };

        let cpus = self.cpus.value.unwrap_or(1).max(1);
        let sockets = fill(
            &self.sockets,
            "topology.sockets",
            1,
            miss("no package ids; one socket"),
            &mut assumed,
        );
        let threads = fill(
            &self.threads_per_core,
            "topology.threads_per_core",
            1,
            miss("no SMT information; no SMT"),
            &mut assumed,
        );
        let cores = fill(
            &self.cores_per_socket,
            "topology.cores_per_socket",
            (cpus / sockets.value.max(1) / threads.value.max(1)).max(1),
            miss("no core ids; CPUs / sockets / threads"),
            &mut assumed,
        );
        let numa_nodes = fill(
            &self.numa_nodes,
            "topology.numa_nodes",
            1,
            miss("no NUMA nodes; one node"),
            &mut assumed,
        );
        let llc_domains = fill(
            &self.llc_domains_per_socket,
            "topology.llc_domains_per_socket",
            1,
            miss("no LLC sharing; one LLC per socket"),
            &mut assumed,
        );
        let nodes = numa_nodes.value.max(1) as u64;
        let total = self.mem_total_mib.value.unwrap_or(16384);
        let node_mib = fill(
            &self.node_mib,
            "memory.node_mib",
            vec![(total / nodes).max(1); nodes as usize],
            miss("no per-node memory; MemTotal split evenly"),
            &mut assumed,
        );
        let node0 = node_mib.value.first().copied().unwrap_or(0);
        let smallest = node_mib.value.iter().copied().min().unwrap_or(0);
        let below_4g = fill(
            &self.below_4g_mib,
            "memory.below_4g_mib",
            node0.min(2048),
            miss("no /proc/zoneinfo; 2 GiB below the 32-bit PCI window, at most node 0"),
            &mut assumed,
        );
        let mut reserved = fill(
            &self.reserved_mib_per_node,
            "memory.reserved_mib_per_node",
            64.min(smallest / 2),
            miss("no /proc/zoneinfo; 64 MiB of kernel image and firmware reservations"),
            &mut assumed,
        );
        if reserved.value >= smallest {
            // A node that is mostly unmanaged (ballooned or offline memory): keep the machine
            // valid and say so.
            reserved = Sourced::new(
                smallest.saturating_sub(1),
                format!(
                    "{} (clamped below the smallest node, {smallest} MiB)",
                    reserved.source
                ),
            );
        }
        // sizeof(struct page) is never exposed; not counted as a missing measurement.
        let struct_page = Sourced::new(
            64,
            "assumed: not exposed by sysfs; sizeof(struct page) is 64 bytes on 64-bit kernels with default configs",
        );

        // Caches: data and unified levels, plus instruction caches for completeness.
        let mut caches = Vec::new();
        let data_levels: Vec<&DetectedCache> = self.caches.iter().collect();
        let outermost = data_levels
            .iter()
            .filter(|c| c.kind != "instruction")
            .map(|c| c.level)
            .max();
        let l2_kib = self
            .caches
            .iter()
            .find(|c| c.level == 2 && c.kind != "instruction")
            .and_then(|c| c.size_kib.value)
            .unwrap_or(0);
        for c in &data_levels {
            let p = format!("cache.{}", level_name(c));
            let typical_kib = match c.level {
                1 => 32,
                2 => 1024,
                _ => 32768,
            };
            let size = fill(
                &c.size_kib,
                &format!("{p}.size_kib"),
                typical_kib,
                miss("no size"),
                &mut assumed,
            );
            let line = fill(
                &c.line_bytes,
                &format!("{p}.line_bytes"),
                64,
                miss("no line size"),
                &mut assumed,
            );
            let ways = fill(
                &c.ways,
                &format!("{p}.ways"),
                if c.level == 1 { 8 } else { 16 },
                miss("no associativity"),
                &mut assumed,
            );
            let shared_by = fill(
                &c.shared_by,
                &format!("{p}.shared_by"),
                if c.level <= 2 {
                    Sharing::Core
                } else {
                    Sharing::LlcDomain
                },
                miss("no shared_cpu_list; L1/L2 private, L3 per LLC domain"),
                &mut assumed,
            );
            let (pol, why) = if Some(c.level) == outermost && c.level > 1 {
                match vendor.as_str() {
                    "amd" => (Policy::Victim, "inclusivity; AMD Zen L3 is a victim cache"),
                    "intel" if l2_kib >= 1024 => (
                        Policy::Victim,
                        "inclusivity; Intel parts with an L2 of 1 MiB or more (Skylake-SP and later servers) have a non-inclusive victim LLC",
                    ),
                    "intel" => (
                        Policy::Inclusive,
                        "inclusivity; Intel parts with a small L2 (client parts, Broadwell and older servers) have an inclusive LLC",
                    ),
                    _ => (Policy::NonInclusive, "inclusivity; non-inclusive assumed"),
                }
            } else {
                (
                    Policy::Private,
                    "inclusivity; inner level treated as core-private",
                )
            };
            let policy = fill(
                &c.policy,
                &format!("{p}.policy"),
                pol,
                miss(why),
                &mut assumed,
            );
            caches.push(CacheLevel {
                level: c.level,
                kind: c.kind.clone(),
                size_kib: size,
                line_bytes: line,
                ways,
                shared_by,
                policy,
            });
        }
        if !caches
            .iter()
            .any(|c| c.level == 2 && c.kind != "instruction")
        {
            // Without an L2 the cache models cannot run: assume the vendor's typical levels.
            for (level, kind, kib, shared, pol) in [
                (1u8, "data", 32u64, Sharing::Core, Policy::Private),
                (2, "unified", 1024, Sharing::Core, Policy::Private),
                (
                    3,
                    "unified",
                    32768,
                    Sharing::LlcDomain,
                    if vendor == "intel" {
                        Policy::Victim
                    } else {
                        Policy::NonInclusive
                    },
                ),
            ] {
                if caches
                    .iter()
                    .any(|c| c.level == level && c.kind != "instruction")
                {
                    continue;
                }
                let p = format!("cache.L{level}");
                assumed.push(format!("{p} (whole level)"));
                let why = miss("no such cache level in sysfs");
                caches.push(CacheLevel {
                    level,
                    kind: kind.into(),
                    size_kib: Sourced::new(kib, why.clone()),
                    line_bytes: Sourced::new(64, why.clone()),
                    ways: Sourced::new(if level == 1 { 8 } else { 16 }, why.clone()),
                    shared_by: Sourced::new(shared, why.clone()),
                    policy: Sourced::new(pol, why),
                });
            }
            caches.sort_by_key(|c| c.level);
        }

        // Latencies: always assumed; only those the topology needs.
        let mut lat = |name: &str, v: f64| -> Sourced<f64> {
            assumed.push(format!("latency_ns.{name}"));
            Sourced::new(v, miss("latencies are not in sysfs or /proc"))
        };
        let multi_socket = sockets.value > 1;
        let latency_ns = Latencies {
            l2_hit: lat("l2_hit", ty.l2_hit),
            llc_hit: lat("llc_hit", ty.llc_hit),
            c2c_smt: lat("c2c_smt", ty.c2c_smt),
            c2c_same_llc: lat("c2c_same_llc", ty.c2c_same_llc),
            c2c_cross_llc: (llc_domains.value > 1).then(|| lat("c2c_cross_llc", ty.c2c_cross_llc)),
            c2c_cross_socket: multi_socket.then(|| lat("c2c_cross_socket", ty.c2c_cross_socket)),
            dram_local: lat("dram_local", ty.dram_local),
            dram_remote: multi_socket.then(|| lat("dram_remote", ty.dram_remote)),
        };

        let base = fill(
            &self.base_ghz,
            "clock.base_ghz",
            2.5,
            miss("no clock information"),
            &mut assumed,
        );
        let max_ghz = match (&self.max_ghz.value, self.max_ghz.status) {
            (Some(v), s) if s != Status::Missing && *v >= base.value => {
                Some(Sourced::new(*v, self.max_ghz.machine_source()))
            }
            _ => None,
        };

        let model = fill(
            &self.cpu_model,
            "cpu.model",
            "unknown CPU".to_string(),
            miss("no model name"),
            &mut assumed,
        );
        let uarch = fill(
            &self.microarchitecture,
            "cpu.microarchitecture",
            "unknown".to_string(),
            miss("family/model not in pcpmodel's table"),
            &mut assumed,
        );
        let mut unknown = vec![
            "Every latency: sysfs and /proc give none (values are typical for the vendor)."
                .to_string(),
            "The inclusion policy of the LLC: not in sysfs.".to_string(),
        ];
        if self.node_mib.status == Status::Derived && self.node_mib.source.contains("MemTotal") {
            unknown.push(
                "Installed RAM: MemTotal under-counts it by the memmap and reservations.".into(),
            );
        }
        let m = Machine {
            name: "detected".into(),
            description: format!(
                "Host detected from {} ({})",
                self.root,
                self.cpu_model.value.as_deref().unwrap_or("unknown CPU")
            ),
            cpu: Cpu {
                model,
                vendor: if ["intel", "amd", "arm"].contains(&vendor.as_str()) {
                    vendor.clone()
                } else {
                    "unknown".into()
                },
                microarchitecture: uarch,
            },
            topology: Topology {
                sockets,
                cores_per_socket: cores,
                threads_per_core: threads,
                numa_nodes,
                llc_domains_per_socket: llc_domains,
            },
            memory: Memory {
                node_mib,
                below_4g_mib: below_4g,
                reserved_mib_per_node: reserved,
                struct_page_bytes: struct_page,
                normal_managed_pages: self
                    .normal_managed_pages
                    .value
                    .clone()
                    .filter(|v| Some(v.len()) == self.node_mib.value.as_ref().map(Vec::len))
                    .map(|v| Sourced::new(v, self.normal_managed_pages.machine_source())),
                dma32_managed_pages: self
                    .dma32_managed_pages
                    .value
                    .map(|v| Sourced::new(v, self.dma32_managed_pages.machine_source())),
                backing_ns_per_page: None,
            },
            caches,
            latency_ns,
            clock: Clock {
                base_ghz: base,
                max_ghz,
            },
            reuse_ns_per_page: None,
            work_ns_per_page: Default::default(),
            unknown,
        };
        m.validate(&label).map_err(|e| locate_in_sysfs(&m, e))?;
        Ok((m, assumed))
    }
}

/// An [`Error::Invalid`] about a field of a detected machine, re-labelled with the sysfs or proc
/// file the field was read from (its provenance), so the user sees which file holds the
/// impossible value. Other errors, and fields that were derived or assumed, pass through.
fn locate_in_sysfs(m: &Machine, e: Error) -> Error {
    let Error::Invalid {
        file,
        field,
        message,
    } = e
    else {
        return e;
    };
    let json = serde_json::to_value(m).unwrap_or_default();
    let mut node = &json;
    for part in field.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        node = &node[key];
        if let Some(i) = index {
            node = &node[i];
        }
    }
    match node["source"].as_str() {
        Some(src) if src.starts_with("detected") => Error::Invalid {
            file: src.to_string(),
            field,
            message,
        },
        _ => Error::Invalid {
            file,
            field,
            message,
        },
    }
}
