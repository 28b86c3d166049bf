//! [`Machine::validate`]: rejects machines that cannot exist, and the provenance check of every
//! value's source string.

use crate::bounds;
use crate::error::{Error, Result};
use crate::hw::provenance::SOURCE_KINDS;

use super::schema::{CacheLevel, Machine, Policy, Sharing};

impl Machine {
    // ----- validation ---------------------------------------------------------------------

    /// Every sourced value with its dotted field path (`latency_ns.dram_local`), for validation
    /// and for `pcpmodel machine show`.
    pub fn sources(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = Vec::new();
        out.push(("cpu.model".into(), &self.cpu.model.source));
        out.push((
            "cpu.microarchitecture".into(),
            &self.cpu.microarchitecture.source,
        ));
        let t = &self.topology;
        out.push(("topology.sockets".into(), &t.sockets.source));
        out.push((
            "topology.cores_per_socket".into(),
            &t.cores_per_socket.source,
        ));
        out.push((
            "topology.threads_per_core".into(),
            &t.threads_per_core.source,
        ));
        out.push(("topology.numa_nodes".into(), &t.numa_nodes.source));
        out.push((
            "topology.llc_domains_per_socket".into(),
            &t.llc_domains_per_socket.source,
        ));
        let m = &self.memory;
        out.push(("memory.node_mib".into(), &m.node_mib.source));
        out.push(("memory.below_4g_mib".into(), &m.below_4g_mib.source));
        out.push((
            "memory.reserved_mib_per_node".into(),
            &m.reserved_mib_per_node.source,
        ));
        out.push((
            "memory.struct_page_bytes".into(),
            &m.struct_page_bytes.source,
        ));
        for (i, c) in self.caches.iter().enumerate() {
            let p = format!("cache[{i}]");
            out.push((format!("{p}.size_kib"), &c.size_kib.source));
            out.push((format!("{p}.line_bytes"), &c.line_bytes.source));
            out.push((format!("{p}.ways"), &c.ways.source));
            out.push((format!("{p}.shared_by"), &c.shared_by.source));
            out.push((format!("{p}.policy"), &c.policy.source));
        }
        for (name, s) in self.latency_ns.named() {
            out.push((format!("latency_ns.{name}"), &s.source));
        }
        if let Some(r) = &self.reuse_ns_per_page {
            for (name, s) in r.named() {
                out.push((format!("reuse_ns_per_page.{name}"), &s.source));
            }
            if let Some(s) = &r.llc_kib {
                out.push(("reuse_ns_per_page.llc_kib".to_string(), &s.source));
            }
        }
        if let Some(s) = &m.backing_ns_per_page {
            out.push(("memory.backing_ns_per_page".into(), &s.source));
        }
        for (name, s) in &self.work_ns_per_page {
            out.push((format!("work_ns_per_page.{name}"), &s.source));
        }
        out.push(("clock.base_ghz".into(), &self.clock.base_ghz.source));
        if let Some(x) = &self.clock.max_ghz {
            out.push(("clock.max_ghz".into(), &x.source));
        }
        out
    }

    /// Checks that the machine is physically possible; `label` names the file in errors.
    ///
    /// Rejected, each with [`Error::Invalid`] naming `label` and the dotted field:
    /// - an empty name; a vendor other than `intel`, `amd`, `arm`, `unknown`;
    /// - zero sockets, cores, threads, NUMA nodes or LLC domains; NUMA nodes that do not divide
    ///   the CPUs evenly or fit neither inside nor across sockets; LLC domains that do not divide
    ///   the cores of a socket;
    /// - `node_mib` with a length other than `numa_nodes` or a zero entry; `below_4g_mib` above
    ///   4096 or above node 0's memory; reservations that eat a whole node; a zero
    ///   `struct page`;
    /// - no caches, no L2, levels out of order, a zero size / way count, a line size that is not
    ///   a power of two, an unknown kind, an L1 not private to a core, an outer level smaller
    ///   than an inner one, an inclusive level smaller than the inner caches it must hold;
    /// - a latency that is negative, zero, NaN or infinite; `l2_hit < llc_hit < dram_local`
    ///   violated; SMT transfer slower than a same-LLC transfer; a cross-LLC or cross-socket
    ///   transfer faster than a same-LLC one; remote DRAM faster than local;
    ///   `c2c_cross_socket` and `dram_remote` present unless there are several sockets (and
    ///   `c2c_cross_socket` missing when there are); `c2c_cross_llc` present iff
    ///   `llc_domains_per_socket > 1`;
    /// - a clock that is not positive and finite, a max clock below base;
    /// - a source string not of the form `"<kind>: <details>"` with a kind from
    ///   [`crate::hw::provenance::SOURCE_KINDS`].
    pub fn validate(&self, label: &str) -> Result<()> {
        let bad = |field: &str, msg: String| Err(Error::invalid(label, field, msg));

        if let Ok(v) = serde_json::to_value(self) {
            crate::input::check_text_fields(label, &v)?;
        }
        // Sources first: a value with an unknown provenance is not trusted further.
        for (path, s) in self.sources() {
            check_source(label, &path, s)?;
        }

        if self.name.trim().is_empty() {
            return bad("name", "must not be empty".into());
        }
        if !["intel", "amd", "arm", "unknown"].contains(&self.cpu.vendor.as_str()) {
            return bad(
                "cpu.vendor",
                format!(
                    "'{}' is not one of intel, amd, arm, unknown",
                    self.cpu.vendor
                ),
            );
        }

        // Topology.
        let t = &self.topology;
        for (f, v, r) in [
            ("topology.sockets", t.sockets.value, bounds::SOCKETS),
            (
                "topology.cores_per_socket",
                t.cores_per_socket.value,
                bounds::CORES_PER_SOCKET,
            ),
            (
                "topology.threads_per_core",
                t.threads_per_core.value,
                bounds::THREADS_PER_CORE,
            ),
            (
                "topology.numa_nodes",
                t.numa_nodes.value,
                bounds::NUMA_NODES,
            ),
            (
                "topology.llc_domains_per_socket",
                t.llc_domains_per_socket.value,
                bounds::LLC_DOMAINS_PER_SOCKET,
            ),
        ] {
            r.check(label, f, f64::from(v))?;
        }
        let (sockets, cores, nodes, llcs) = (
            t.sockets.value,
            t.cores_per_socket.value,
            t.numa_nodes.value,
            t.llc_domains_per_socket.value,
        );
        let cpus = u64::from(sockets) * u64::from(cores) * u64::from(t.threads_per_core.value);
        bounds::CPUS.check(label, "topology.cores_per_socket", cpus as f64)?;
        if u64::from(nodes) > cpus || cpus % u64::from(nodes) != 0 {
            return bad(
                "topology.numa_nodes",
                format!("{nodes} NUMA nodes do not divide the {cpus} CPUs evenly"),
            );
        }
        if nodes % sockets != 0 && sockets % nodes != 0 {
            return bad(
                "topology.numa_nodes",
                format!(
                    "{nodes} NUMA nodes on {sockets} sockets: a node must lie inside one socket \
                     or span whole sockets"
                ),
            );
        }
        if cores % llcs != 0 {
            return bad(
                "topology.llc_domains_per_socket",
                format!("{llcs} LLC domains do not divide the {cores} cores of a socket"),
            );
        }

        // Memory.
        let m = &self.memory;
        if m.node_mib.value.len() != nodes as usize {
            return bad(
                "memory.node_mib",
                format!(
                    "has {} entries but topology.numa_nodes is {nodes}",
                    m.node_mib.value.len()
                ),
            );
        }
        if let Some(i) = m.node_mib.value.iter().position(|&x| x == 0) {
            return bad(
                "memory.node_mib",
                format!("node {i} has no memory (machine files describe nodes with memory)"),
            );
        }
        for (i, &v) in m.node_mib.value.iter().enumerate() {
            if let Some(msg) = bounds::NODE_MIB.problem(v as f64) {
                return bad("memory.node_mib", format!("node {i}: {msg}"));
            }
        }
        let total: u64 = m
            .node_mib
            .value
            .iter()
            .fold(0u64, |a, &v| a.saturating_add(v));
        bounds::TOTAL_MIB.check(label, "memory.node_mib", total as f64)?;
        let node0 = m.node_mib.value.first().copied().unwrap_or(0);
        if m.below_4g_mib.value > 4096 {
            return bad(
                "memory.below_4g_mib",
                format!(
                    "{} MiB is more than the 4096 MiB below 4 GiB",
                    m.below_4g_mib.value
                ),
            );
        }
        if m.below_4g_mib.value > node0 {
            return bad(
                "memory.below_4g_mib",
                format!(
                    "{} MiB below 4 GiB is more than node 0's {node0} MiB",
                    m.below_4g_mib.value
                ),
            );
        }
        let smallest = m.node_mib.value.iter().copied().min().unwrap_or(0);
        if m.reserved_mib_per_node.value >= smallest {
            return bad(
                "memory.reserved_mib_per_node",
                format!(
                    "{} MiB reserved per node leaves nothing of the smallest node ({smallest} MiB)",
                    m.reserved_mib_per_node.value
                ),
            );
        }
        bounds::STRUCT_PAGE_BYTES.check(
            label,
            "memory.struct_page_bytes",
            m.struct_page_bytes.value as f64,
        )?;

        self.validate_caches(label)?;
        // The zones the kernel would lay out: a memory description that leaves a zone empty or
        // a node too small is refused here, at load, not later by the commands that need zones.
        crate::kernel::layout::zone_layout(self).map_err(|e| match e {
            Error::Invalid { field, message, .. } => Error::invalid(label, field, message),
            other => other,
        })?;
        self.validate_latencies(label)?;

        // Clock.
        let base = self.clock.base_ghz.value;
        bounds::CLOCK_GHZ.check(label, "clock.base_ghz", base)?;
        if let Some(max) = &self.clock.max_ghz {
            bounds::CLOCK_GHZ.check(label, "clock.max_ghz", max.value)?;
            if max.value < base {
                return bad(
                    "clock.max_ghz",
                    format!("{} GHz is below the base clock {base} GHz", max.value),
                );
            }
        }
        Ok(())
    }

    fn validate_caches(&self, label: &str) -> Result<()> {
        let bad = |field: String, msg: String| Err(Error::invalid(label, field, msg));
        if self.caches.is_empty() {
            return bad(
                "cache".into(),
                "a machine needs at least one cache level".into(),
            );
        }
        let mut prev_level = 0u8;
        // The largest data-holding instance seen at an inner level, and its index.
        let mut inner_max: Option<(usize, u64)> = None;
        let mut level_max: Option<(usize, u64)> = None;
        for (i, c) in self.caches.iter().enumerate() {
            let p = format!("cache[{i}]");
            if c.level == 0 || c.level > 4 {
                return bad(
                    format!("{p}.level"),
                    format!("level {} is not 1..=4", c.level),
                );
            }
            if c.level < prev_level {
                return bad(
                    format!("{p}.level"),
                    format!(
                        "caches must be listed innermost first: L{} after L{prev_level}",
                        c.level
                    ),
                );
            }
            if !["data", "instruction", "unified"].contains(&c.kind.as_str()) {
                return bad(
                    format!("{p}.kind"),
                    format!("'{}' is not one of data, instruction, unified", c.kind),
                );
            }
            bounds::CACHE_KIB.check(label, &format!("{p}.size_kib"), c.size_kib.value as f64)?;
            bounds::CACHE_WAYS.check(label, &format!("{p}.ways"), c.ways.value as f64)?;
            let line = c.line_bytes.value;
            bounds::CACHE_LINE_BYTES.check(label, &format!("{p}.line_bytes"), line as f64)?;
            if !line.is_power_of_two() {
                return bad(
                    format!("{p}.line_bytes"),
                    format!("{line} is not a power of two"),
                );
            }
            // At least one set: ways x line <= capacity.
            if c.ways.value.saturating_mul(line) > c.size_bytes() {
                return bad(
                    format!("{p}.ways"),
                    format!(
                        "{} ways of {line}-byte lines need {} bytes, more than the {} KiB of the \
                         cache (a cache has at least one set)",
                        c.ways.value,
                        c.ways.value.saturating_mul(line),
                        c.size_kib.value
                    ),
                );
            }
            if c.level == 1 && c.shared_by.value != Sharing::Core {
                return bad(
                    format!("{p}.shared_by"),
                    "an L1 cache is private to a core".into(),
                );
            }
            if c.level == 1 && c.policy.value != Policy::Private {
                return bad(
                    format!("{p}.policy"),
                    "an L1 cache has policy 'private'".into(),
                );
            }
            if c.shared_by.value == Sharing::Socket
                && self.topology.llc_domains_per_socket.value > 1
            {
                return bad(
                    format!("{p}.shared_by"),
                    "shared by a whole socket, but the socket has several LLC domains".into(),
                );
            }
            if !c.holds_data() {
                prev_level = c.level;
                continue;
            }
            if c.level > prev_level {
                // Entering a new level: the previous level's largest instance becomes "inner".
                if let Some(lm) = level_max {
                    inner_max = Some(match inner_max {
                        Some(im) if im.1 >= lm.1 => im,
                        _ => lm,
                    });
                }
                level_max = None;
            }
            let size = c.size_bytes();
            if let Some((j, inner)) = inner_max {
                if size < inner {
                    return bad(
                        format!("{p}.size_kib"),
                        format!(
                            "L{} ({} KiB) is smaller than the inner cache[{j}] ({} KiB)",
                            c.level,
                            c.size_kib.value,
                            inner / 1024
                        ),
                    );
                }
            }
            if c.policy.value == Policy::Inclusive {
                let held = self.inner_bytes_held(c);
                if size < held {
                    return bad(
                        format!("{p}.size_kib"),
                        format!(
                            "inclusive L{} ({} KiB) cannot hold the {} KiB of inner caches it \
                             covers",
                            c.level,
                            c.size_kib.value,
                            held / 1024
                        ),
                    );
                }
            }
            level_max = Some(match level_max {
                Some(lm) if lm.1 >= size => lm,
                _ => (i, size),
            });
            prev_level = c.level;
        }
        if self.l2().is_none() {
            return bad(
                "cache".into(),
                "no level-2 data or unified cache (the PCP cache model needs one)".into(),
            );
        }
        // One data-holding cache per level, levels without gaps: the model looks a level up by
        // its number and would silently use the first of two.
        let mut seen: Vec<u8> = Vec::new();
        for (i, c) in self.caches.iter().enumerate() {
            if !c.holds_data() {
                continue;
            }
            if seen.contains(&c.level) {
                return bad(
                    format!("cache[{i}].level"),
                    format!(
                        "a second data or unified L{} (one per level; describe the one a core sees)",
                        c.level
                    ),
                );
            }
            if let Some(&last) = seen.last() {
                if c.level != last + 1 {
                    return bad(
                        format!("cache[{i}].level"),
                        format!(
                            "L{} follows L{last}: a level is missing in between",
                            c.level
                        ),
                    );
                }
            }
            seen.push(c.level);
        }
        // The last level is the one the cores of an LLC domain share (the model's LLC: where a
        // line another core evicted or wrote is found, by the level's policy).
        let (i, llc) = self
            .llc_index()
            .map(|i| (i, &self.caches[i]))
            .expect("validated: an L2 exists");
        if llc.level < 3 {
            return bad(
                "cache".into(),
                "no shared last-level cache beyond L2 (the model needs one: where a line another \
                 core left is found)"
                    .into(),
            );
        }
        if llc.shared_by.value == Sharing::Core {
            return bad(
                format!("cache[{i}].shared_by"),
                format!(
                    "the last-level cache L{} is private to a core here; the model's LLC is shared \
                     by the cores of an LLC domain (llc_domain or socket)",
                    llc.level
                ),
            );
        }
        for (i, c) in self.caches.iter().enumerate() {
            if c.shared_by.value != Sharing::Core && c.policy.value == Policy::Private {
                return bad(
                    format!("cache[{i}].policy"),
                    format!(
                        "L{} is shared ({}) but has policy 'private', which is for core-private \
                         levels: give inclusive, non_inclusive or victim",
                        c.level,
                        serde_json::to_string(&c.shared_by.value).unwrap_or_default()
                    ),
                );
            }
        }
        Ok(())
    }

    /// Bytes of inner data caches (levels below `outer`) covered by one instance of `outer`.
    fn inner_bytes_held(&self, outer: &CacheLevel) -> u64 {
        let cores = u64::from(match outer.shared_by.value {
            Sharing::Core => 1,
            Sharing::LlcDomain => self.cores_per_llc_domain(),
            Sharing::Socket => self.topology.cores_per_socket.value,
        });
        self.caches
            .iter()
            .filter(|c| c.level < outer.level && c.holds_data())
            .map(|c| c.size_bytes())
            .sum::<u64>()
            .saturating_mul(cores)
    }

    fn validate_latencies(&self, label: &str) -> Result<()> {
        let bad = |field: &str, msg: String| Err(Error::invalid(label, field, msg));
        let l = &self.latency_ns;
        for (name, s) in l.named() {
            bounds::LATENCY_NS.check(label, &format!("latency_ns.{name}"), s.value)?;
        }
        if let Some(s) = &self.memory.backing_ns_per_page {
            bounds::BACKING_NS_PER_PAGE.check(label, "memory.backing_ns_per_page", s.value)?;
        }
        if let Some(r) = &self.reuse_ns_per_page {
            for (name, s) in r.named() {
                bounds::REUSE_NS_PER_PAGE.check(
                    label,
                    &format!("reuse_ns_per_page.{name}"),
                    s.value,
                )?;
            }
            if let Some(s) = &r.llc_kib {
                let nominal = self.llc().map_or(0.0, |c| c.size_kib.value as f64);
                if !(s.value.is_finite() && s.value > 0.0 && s.value <= nominal) {
                    return bad(
                        "reuse_ns_per_page.llc_kib",
                        format!(
                            "{}: the LLC capacity a reuse measurement shows must be above 0 and at most the LLC's size, {nominal} KiB",
                            s.value
                        ),
                    );
                }
            }
        }
        for (name, s) in &self.work_ns_per_page {
            let field = format!("work_ns_per_page.{name}");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return bad(
                    &field,
                    format!("'{name}' is not a workload name (lower-case letters, digits and '-')"),
                );
            }
            bounds::WORK_NS_PER_PAGE.check(label, &field, s.value)?;
        }
        if l.l2_hit.value >= l.llc_hit.value {
            return bad(
                "latency_ns.llc_hit",
                format!(
                    "LLC hit ({} ns) must be slower than L2 hit ({} ns)",
                    l.llc_hit.value, l.l2_hit.value
                ),
            );
        }
        if l.llc_hit.value >= l.dram_local.value {
            return bad(
                "latency_ns.dram_local",
                format!(
                    "local DRAM ({} ns) must be slower than an LLC hit ({} ns)",
                    l.dram_local.value, l.llc_hit.value
                ),
            );
        }
        if l.c2c_smt.value > l.c2c_same_llc.value {
            return bad(
                "latency_ns.c2c_smt",
                format!(
                    "SMT-sibling transfer ({} ns) slower than a same-LLC transfer ({} ns)",
                    l.c2c_smt.value, l.c2c_same_llc.value
                ),
            );
        }
        let sockets = self.topology.sockets.value;
        let llcs = self.topology.llc_domains_per_socket.value;
        match (&l.c2c_cross_llc, llcs > 1) {
            (None, true) => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    format!("required: {llcs} LLC domains per socket"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    "given, but there is one LLC domain per socket".into(),
                )
            }
            (Some(x), true) if x.value < l.c2c_same_llc.value => {
                return bad(
                    "latency_ns.c2c_cross_llc",
                    format!(
                        "cross-LLC transfer ({} ns) faster than a same-LLC one ({} ns)",
                        x.value, l.c2c_same_llc.value
                    ),
                )
            }
            _ => {}
        }
        match (&l.c2c_cross_socket, sockets > 1) {
            (None, true) => {
                return bad(
                    "latency_ns.c2c_cross_socket",
                    format!("required: {sockets} sockets"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.c2c_cross_socket",
                    "given, but there is one socket".into(),
                )
            }
            (Some(x), true) => {
                let floor = l
                    .c2c_cross_llc
                    .as_ref()
                    .map_or(l.c2c_same_llc.value, |c| c.value.max(l.c2c_same_llc.value));
                if x.value < floor {
                    return bad(
                        "latency_ns.c2c_cross_socket",
                        format!(
                            "cross-socket transfer ({} ns) faster than a transfer inside the \
                             socket ({floor} ns)",
                            x.value
                        ),
                    );
                }
            }
            _ => {}
        }
        match (
            &l.dram_remote,
            sockets > 1 || self.topology.numa_nodes.value > 1,
        ) {
            (None, true) if sockets > 1 => {
                return bad(
                    "latency_ns.dram_remote",
                    format!("required: {sockets} sockets"),
                )
            }
            (Some(_), false) => {
                return bad(
                    "latency_ns.dram_remote",
                    "given, but there is one socket and one NUMA node".into(),
                )
            }
            (Some(x), true) if x.value <= l.dram_local.value => {
                return bad(
                    "latency_ns.dram_remote",
                    format!(
                        "remote DRAM ({} ns) must be slower than local DRAM ({} ns)",
                        x.value, l.dram_local.value
                    ),
                )
            }
            _ => {}
        }
        Ok(())
    }
}

/// Checks that a source string reads `"<kind>: <details>"` with a known kind.
fn check_source(label: &str, path: &str, source: &str) -> Result<()> {
    let field = format!("{path}.source");
    let Some((head, details)) = source.split_once(':') else {
        return Err(Error::invalid(
            label,
            field,
            format!(
                "'{source}' is not of the form \"<kind>: <details>\" (kinds: {})",
                SOURCE_KINDS.join(", ")
            ),
        ));
    };
    let head = head.trim();
    // "seed" alone is not enough: it must say which thread ("seed 004").
    let known = SOURCE_KINDS.iter().any(|k| {
        (head == *k && *k != "seed")
            || (*k == "seed"
                && head
                    .strip_prefix("seed ")
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())))
    });
    if !known || source.starts_with(char::is_whitespace) {
        return Err(Error::invalid(
            label,
            field,
            format!(
                "'{head}' is not a source kind; use one of {} (seed as \"seed NNN\")",
                SOURCE_KINDS.join(", ")
            ),
        ));
    }
    if details.trim().is_empty() {
        return Err(Error::invalid(
            label,
            field,
            format!("'{source}' says nothing after the kind"),
        ));
    }
    Ok(())
}
