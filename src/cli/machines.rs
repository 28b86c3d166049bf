//! `pcpmodel machines` and `pcpmodel machine show`.

use std::process::ExitCode;

use pcpmodel::hw::machine::{Machine, Sharing};
use pcpmodel::output::report::{sig, Format, Report, Table};
use serde_json::json;

/// Arguments of `pcpmodel machines`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {}

/// Arguments of `pcpmodel machine`.
#[derive(Debug, clap::Args)]
pub struct MachineArgs {
    #[command(subcommand)]
    pub action: MachineAction,
}

/// `pcpmodel machine <action>`.
#[derive(Debug, clap::Subcommand)]
pub enum MachineAction {
    /// Show a machine: every value with its unit and source.
    Show {
        /// Built-in machine name or path to a machine TOML file.
        machine: String,
    },
}

fn ns(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| sig(v, 3))
}

/// Runs `pcpmodel machines`.
pub fn list(_args: ListArgs, format: Format) -> anyhow::Result<ExitCode> {
    let machines = Machine::all_builtin()?;
    let mut t = Table::new([
        "name",
        "CPU",
        "sockets x cores x threads",
        "CPUs",
        "NUMA nodes",
        "memory (GiB)",
        "L2 (KiB)",
        "LLC (MiB) x domains",
        "LLC policy",
        "c2c same LLC (ns)",
        "c2c cross LLC (ns)",
        "c2c cross socket (ns)",
        "DRAM (ns)",
    ]);
    let mut arr = Vec::new();
    for m in &machines {
        let topo = &m.topology;
        let l = &m.latency_ns;
        let llc = m.llc();
        let llc_kib = llc.map_or(0, |c| c.size_kib.value);
        let policy = llc.map_or("-", |c| c.policy.value.as_str());
        t.push([
            m.name.clone(),
            m.cpu.model.value.clone(),
            format!(
                "{} x {} x {}",
                topo.sockets.value, topo.cores_per_socket.value, topo.threads_per_core.value
            ),
            m.cpus().to_string(),
            topo.numa_nodes.value.to_string(),
            sig(m.total_mib() as f64 / 1024.0, 3),
            m.l2().map_or(0, |c| c.size_kib.value).to_string(),
            format!("{} x {}", sig(llc_kib as f64 / 1024.0, 4), m.llc_domains()),
            policy.to_string(),
            ns(Some(l.c2c_same_llc.value)),
            ns(l.c2c_cross_llc.as_ref().map(|s| s.value)),
            ns(l.c2c_cross_socket.as_ref().map(|s| s.value)),
            ns(Some(l.dram_local.value)),
        ]);
        arr.push(json!({
            "name": m.name,
            "description": m.description,
            "cpu": m.cpu.model.value,
            "vendor": m.cpu.vendor,
            "microarchitecture": m.cpu.microarchitecture.value,
            "sockets": topo.sockets.value,
            "cores_per_socket": topo.cores_per_socket.value,
            "threads_per_core": topo.threads_per_core.value,
            "cpus": m.cpus(),
            "numa_nodes": topo.numa_nodes.value,
            "llc_domains_per_socket": topo.llc_domains_per_socket.value,
            "total_mib": m.total_mib(),
            "l2_kib": m.l2().map(|c| c.size_kib.value),
            "llc_kib": llc.map(|c| c.size_kib.value),
            "llc_policy": policy,
            "c2c_smt_ns": l.c2c_smt.value,
            "c2c_same_llc_ns": l.c2c_same_llc.value,
            "c2c_cross_llc_ns": l.c2c_cross_llc.as_ref().map(|s| s.value),
            "c2c_cross_socket_ns": l.c2c_cross_socket.as_ref().map(|s| s.value),
            "dram_local_ns": l.dram_local.value,
            "dram_remote_ns": l.dram_remote.as_ref().map(|s| s.value),
            "unknown": m.unknown,
        }));
    }
    let report = Report {
        json: serde_json::Value::Array(arr),
        tables: vec![t],
        notes: vec![
            "c2c = one-way cache-line transfer time (core-to-core ping-pong); '-' = not applicable."
                .into(),
            "Every value has a source: `pcpmodel machine show NAME`.".into(),
        ],
    };
    super::emit(&report, format)
}

/// The rows of `machine show`: field, value, unit, source.
fn show_table(m: &Machine) -> Table {
    let mut t = Table::new(["field", "value", "unit", "source"]);
    let mut push = |field: &str, value: String, unit: &str, source: &str| {
        t.push([
            field.to_string(),
            value,
            unit.to_string(),
            source.to_string(),
        ]);
    };
    push(
        "cpu.model",
        m.cpu.model.value.clone(),
        "",
        &m.cpu.model.source,
    );
    push("cpu.vendor", m.cpu.vendor.clone(), "", "");
    push(
        "cpu.microarchitecture",
        m.cpu.microarchitecture.value.clone(),
        "",
        &m.cpu.microarchitecture.source,
    );
    let topo = &m.topology;
    for (f, s) in [
        ("topology.sockets", &topo.sockets),
        ("topology.cores_per_socket", &topo.cores_per_socket),
        ("topology.threads_per_core", &topo.threads_per_core),
        ("topology.numa_nodes", &topo.numa_nodes),
        (
            "topology.llc_domains_per_socket",
            &topo.llc_domains_per_socket,
        ),
    ] {
        push(f, s.value.to_string(), "", &s.source);
    }
    let mem = &m.memory;
    push(
        "memory.node_mib",
        mem.node_mib
            .value
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        "MiB",
        &mem.node_mib.source,
    );
    push(
        "memory.below_4g_mib",
        mem.below_4g_mib.value.to_string(),
        "MiB",
        &mem.below_4g_mib.source,
    );
    push(
        "memory.reserved_mib_per_node",
        mem.reserved_mib_per_node.value.to_string(),
        "MiB",
        &mem.reserved_mib_per_node.source,
    );
    push(
        "memory.struct_page_bytes",
        mem.struct_page_bytes.value.to_string(),
        "bytes",
        &mem.struct_page_bytes.source,
    );
    for (i, c) in m.caches.iter().enumerate() {
        let p = format!("cache[{i}]");
        push(
            &format!("{p}.level"),
            format!("L{} {}", c.level, c.kind),
            "",
            "",
        );
        push(
            &format!("{p}.size_kib"),
            c.size_kib.value.to_string(),
            "KiB",
            &c.size_kib.source,
        );
        push(
            &format!("{p}.line_bytes"),
            c.line_bytes.value.to_string(),
            "bytes",
            &c.line_bytes.source,
        );
        push(
            &format!("{p}.ways"),
            c.ways.value.to_string(),
            "",
            &c.ways.source,
        );
        push(
            &format!("{p}.shared_by"),
            c.shared_by.value.as_str().to_string(),
            "",
            &c.shared_by.source,
        );
        push(
            &format!("{p}.policy"),
            c.policy.value.as_str().to_string(),
            "",
            &c.policy.source,
        );
    }
    for (name, s) in m.latency_ns.named() {
        push(
            &format!("latency_ns.{name}"),
            s.value.to_string(),
            "ns",
            &s.source,
        );
    }
    push(
        "clock.base_ghz",
        m.clock.base_ghz.value.to_string(),
        "GHz",
        &m.clock.base_ghz.source,
    );
    if let Some(x) = &m.clock.max_ghz {
        push("clock.max_ghz", x.value.to_string(), "GHz", &x.source);
    }
    t
}

/// A short derived summary for people: CPUs, pages per cache.
fn derived_table(m: &Machine) -> Table {
    let mut t = Table::new(["derived", "value", "unit"]).titled("Derived counts");
    t.push(["CPUs", &m.cpus().to_string(), ""]);
    t.push(["CPUs per NUMA node", &m.cpus_per_node().to_string(), ""]);
    t.push(["LLC domains (machine)", &m.llc_domains().to_string(), ""]);
    t.push([
        "cores per LLC domain",
        &m.cores_per_llc_domain().to_string(),
        "",
    ]);
    t.push(["L2 per core", &m.l2_pages().to_string(), "4 KiB pages"]);
    t.push([
        "LLC per domain",
        &m.llc_pages_per_domain().to_string(),
        "4 KiB pages",
    ]);
    t.push(["memory", &m.total_mib().to_string(), "MiB"]);
    t
}

/// The `machine show` report for one machine (also used by `detect`'s table output).
pub fn show_report(m: &Machine) -> anyhow::Result<Report> {
    let mut notes = vec![format!("{}: {}", m.name, m.description)];
    if m.llc()
        .is_some_and(|c| c.shared_by.value == Sharing::LlcDomain)
    {
        notes.push(format!(
            "LLC shared by the {} cores of one LLC domain; {} domain(s) per socket.",
            m.cores_per_llc_domain(),
            m.topology.llc_domains_per_socket.value
        ));
    }
    if !m.unknown.is_empty() {
        notes.push("Not known:".into());
        notes.extend(m.unknown.iter().map(|u| format!("  - {u}")));
    }
    Ok(Report {
        json: serde_json::to_value(m)?,
        tables: vec![
            show_table(m).titled(format!("Machine {}", m.name)),
            derived_table(m),
        ],
        notes,
    })
}

/// Runs `pcpmodel machine show`.
pub fn show(args: MachineArgs, format: Format) -> anyhow::Result<ExitCode> {
    match args.action {
        MachineAction::Show { machine } => {
            let m = Machine::resolve(&machine)?;
            super::emit(&show_report(&m)?, format)
        }
    }
}
