//! `pcpmodel kernel`: what the kernel configures on a machine (every zone's watermarks, batch,
//! and high or high_min / high_max), from the kernel's own formulas; which PCP changes the
//! kernel has (`kernel changes`, `kernel --host`).

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::kernel::changes::{self, Change, Direction};
use pcpmodel::kernel::{
    configure, detect_features, FeatureSet, KernelOptions, KernelVersion, PcpHigh,
};
use pcpmodel::output::report::{Format, Report, Table};
use pcpmodel::Machine;
use serde_json::json;

use super::args::ThpArg;

/// Arguments of `pcpmodel kernel`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    /// `changes`: the PCP commits that differ between two kernels.
    #[command(subcommand)]
    pub sub: Option<Sub>,
    /// Built-in machine name or path to a machine TOML file (optional with --host).
    #[arg(long, required_unless_present = "host")]
    pub machine: Option<String>,
    /// Kernel version, e.g. 5.18 or 6.18.44 (default 6.18, or the host's with --host).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Report the PCP features of a host (zoneinfo fields, vm sysctls, kernel config, version)
    /// and which changes it has; with --machine, configure that machine for the host's kernel.
    #[arg(long)]
    pub host: bool,
    /// Root of the host tree read by --host (`proc/...`, `boot/...` below it); `/` is this
    /// host.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// vm.percpu_pagelist_high_fraction (5.14+): 0 (default) or >= 8.
    #[arg(long, default_value_t = 0, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PAGELIST_FRACTION))]
    pub percpu_pagelist_high_fraction: u32,
    /// vm.percpu_pagelist_fraction (<= 5.13): 0 (default) or >= 8.
    #[arg(long, default_value_t = 0, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PAGELIST_FRACTION))]
    pub percpu_pagelist_fraction: u32,
    /// THP mode (always and madvise let khugepaged raise min_free_kbytes).
    #[arg(long, value_enum, default_value_t = ThpArg::Always)]
    pub thp: ThpArg,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..6 (6.7+, default 5; 6.6 only with the stable backport).
    /// `--pcp-batch-scale-max` is accepted as an alias.
    #[arg(long = "scale-max", alias = "pcp-batch-scale-max", value_parser = super::args::bounded::<u8>(&pcpmodel::bounds::PCP_BATCH_SCALE_MAX))]
    pub pcp_batch_scale_max: Option<u8>,
    /// vm.watermark_scale_factor (default 10).
    #[arg(long, default_value_t = 10, value_parser = super::args::bounded::<u64>(&pcpmodel::bounds::WATERMARK_SCALE_FACTOR))]
    pub watermark_scale_factor: u64,
    /// vm.min_free_kbytes set by hand (default: computed as at boot).
    #[arg(long, value_parser = super::args::bounded::<u64>(&pcpmodel::bounds::MIN_FREE_KBYTES))]
    pub min_free_kbytes: Option<u64>,
}

/// Subcommands of `pcpmodel kernel`.
#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// The PCP-relevant commits that differ between two kernels (commit id, subject, first
    /// mainline version, effect, whether the model implements it). Without --from: every
    /// change up to --to.
    Changes(ChangesArgs),
}

/// Arguments of `pcpmodel kernel changes`.
#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// The older kernel, e.g. 5.12 (default: before the first change in the table, 4.13).
    #[arg(long)]
    pub from: Option<String>,
    /// The newer kernel, e.g. 6.18 (default: the newest code read, 6.19).
    #[arg(long)]
    pub to: Option<String>,
    /// Only the changes that touch this predict workload (netperf-udp, mmap-fill,
    /// memcg-netperf, page-bench, page-fault1).
    #[arg(long)]
    pub workload: Option<String>,
}

fn change_row(c: &Change, direction: Option<Direction>) -> (Vec<String>, serde_json::Value) {
    let dir = match direction {
        Some(Direction::Added) => "added",
        Some(Direction::Removed) => "removed",
        None => "present",
    };
    let cells = vec![
        c.version.to_string(),
        if c.version_verified {
            "yes"
        } else {
            "inferred"
        }
        .to_string(),
        c.commit_text().to_string(),
        c.subject.to_string(),
        c.area.name().to_string(),
        dir.to_string(),
        c.status().to_string(),
        if c.implemented_in.is_empty() {
            "-".to_string()
        } else {
            c.implemented_in.join(", ")
        },
    ];
    let json = json!({
        "key": c.key,
        "commit": c.commit,
        "commit_verified": c.commit.is_some(),
        "id_source": c.id_source,
        "subject": c.subject,
        "version": c.version.to_string(),
        "version_verified": c.version_verified,
        "version_note": c.version_note,
        "area": c.area,
        "direction": dir,
        "effect": c.effect,
        "status": c.status(),
        "implemented_in": c.implemented_in,
        "affects": c.affects,
        "model_note": c.model_note,
        "feature": c.feature,
    });
    (cells, json)
}

fn changes_table(title: String) -> Table {
    Table::new([
        "first version",
        "version verified",
        "commit",
        "subject",
        "area",
        "change",
        "model",
        "implemented in",
    ])
    .titled(title)
}

/// Builds the report of `pcpmodel kernel changes`.
pub fn changes_report(a: &ChangesArgs) -> anyhow::Result<Report> {
    let from = match &a.from {
        Some(s) => KernelVersion::parse_labeled(s, "--from")?,
        None => KernelVersion::new(4, 13),
    };
    let to = match &a.to {
        Some(s) => KernelVersion::parse_labeled(s, "--to")?,
        None => KernelVersion::new(6, 19),
    };
    if let Some(w) = &a.workload {
        if !changes::WORKLOADS.contains(&w.as_str()) {
            anyhow::bail!(
                "--workload '{w}': not a predict workload (one of {})",
                changes::WORKLOADS.join(", ")
            );
        }
    }
    let list: Vec<_> = changes::changes_between(from, to)
        .into_iter()
        .filter(|(_, c)| a.workload.as_deref().is_none_or(|w| c.affects.contains(&w)))
        .collect();
    let mut table = changes_table(format!(
        "PCP changes between kernel {from} and {to}{}: {} commits",
        a.workload
            .as_deref()
            .map_or(String::new(), |w| format!(" touching {w}")),
        list.len()
    ));
    let mut rows = Vec::new();
    for (d, c) in &list {
        let (cells, j) = change_row(c, Some(*d));
        table.push(cells);
        rows.push(j);
    }
    let not_implemented = list.iter().filter(|(_, c)| !c.implemented()).count();
    let notes = vec![
        format!(
            "{} of {} changes are implemented somewhere in the crate, {} are not modelled; \
             `--format json` gives each change's effect, id source and model note",
            list.len() - not_implemented,
            list.len(),
            not_implemented
        ),
        "commit '(unverified)': no mainline id was verified (only linux-next / mm-tree ids, \
             which rebase); 'inferred' versions come from posting dates and merge windows (see \
         version_note)"
            .to_string(),
    ];
    Ok(Report {
        json: json!({
            "from": from.to_string(),
            "to": to.to_string(),
            "workload": a.workload,
            "changes": rows,
        }),
        tables: vec![table],
        notes,
    })
}

/// Builds the report of `pcpmodel kernel --host` (features only, no machine).
pub fn host_tables(fs: &FeatureSet) -> (Vec<Table>, serde_json::Value, Vec<String>) {
    let mut feats = Table::new(["feature", "present", "evidence", "source"]).titled(format!(
        "PCP features of the host under {} (release {})",
        fs.root,
        fs.release.as_deref().unwrap_or("unknown")
    ));
    for f in &fs.features {
        feats.push([
            f.feature.name().to_string(),
            if f.present { "yes" } else { "no" }.to_string(),
            f.evidence.name().to_string(),
            f.source.clone(),
        ]);
    }
    let mut ch = Table::new(["commit", "key", "present", "evidence", "version says"])
        .titled("PCP changes on the host (a host feature overrides the version)");
    let yn = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    for c in &fs.changes {
        ch.push([
            c.commit.unwrap_or("(unverified)").to_string(),
            c.key.to_string(),
            yn(c.present).to_string(),
            c.evidence.map_or("-", |e| e.name()).to_string(),
            yn(c.version_says).to_string(),
        ]);
    }
    let mut notes = fs.notes.clone();
    notes.push(format!(
        "auto-tuned pcp->high: {}; CONFIG_PCP_BATCH_SCALE_MAX: {}",
        yn(fs.auto_tuning),
        fs.pcp_batch_scale_max
            .map_or("not read".to_string(), |n| n.to_string())
    ));
    (
        vec![feats, ch],
        serde_json::to_value(fs).unwrap_or_default(),
        notes,
    )
}

/// Builds the report of `pcpmodel kernel`.
pub fn report(args: &Args) -> anyhow::Result<Report> {
    // Parsed once: a version newer than the modelled ones is warned about once.
    let given = match &args.kernel {
        Some(k) => Some(super::args::kernel_flag(k, "--kernel")?),
        None => None,
    };
    let features = if args.host {
        Some(detect_features(&args.root, given)?)
    } else {
        None
    };
    let Some(machine_name) = &args.machine else {
        let fs = features
            .as_ref()
            .expect("--machine is required without --host");
        let (tables, json, notes) = host_tables(fs);
        return Ok(Report {
            json: json!({ "host": json }),
            tables,
            notes,
        });
    };
    let machine = Machine::resolve(machine_name)?;
    {
        use pcpmodel::bounds;
        let e = anyhow::Error::msg;
        for (flag, v) in [
            (
                "--percpu-pagelist-high-fraction",
                args.percpu_pagelist_high_fraction,
            ),
            ("--percpu-pagelist-fraction", args.percpu_pagelist_fraction),
        ] {
            bounds::PAGELIST_FRACTION
                .check_flag(flag, f64::from(v))
                .map_err(e)?;
        }
        if let Some(s) = args.pcp_batch_scale_max {
            bounds::PCP_BATCH_SCALE_MAX
                .check_flag("--scale-max", f64::from(s))
                .map_err(e)?;
        }
        bounds::WATERMARK_SCALE_FACTOR
            .check_flag(
                "--watermark-scale-factor",
                args.watermark_scale_factor as f64,
            )
            .map_err(e)?;
        if let Some(k) = args.min_free_kbytes {
            bounds::MIN_FREE_KBYTES
                .check_flag("--min-free-kbytes", k as f64)
                .map_err(e)?;
            let total_kb = machine.total_mib().saturating_mul(1024);
            if k >= total_kb {
                anyhow::bail!(
                    "--min-free-kbytes {k}: the watermarks would reserve all of {}'s {total_kb} kB of memory",
                    machine.name
                );
            }
        }
    }
    let version = match (given, &features) {
        (Some(k), _) => k,
        (None, Some(fs)) => fs.version.ok_or_else(|| {
            anyhow::anyhow!(
                "--host: no kernel version under {} (proc/sys/kernel/osrelease): give --kernel",
                fs.root
            )
        })?,
        (None, None) => KernelVersion::DEFAULT,
    };
    let scale = args
        .pcp_batch_scale_max
        .or(features.as_ref().and_then(|f| f.pcp_batch_scale_max));
    let options = KernelOptions {
        thp: args.thp.into(),
        percpu_pagelist_high_fraction: args.percpu_pagelist_high_fraction,
        percpu_pagelist_fraction: args.percpu_pagelist_fraction,
        pcp_batch_scale_max: scale,
        watermark_scale_factor: args.watermark_scale_factor,
        min_free_kbytes: args.min_free_kbytes,
    };
    let cfg = configure(&machine, version, options)?;
    let auto = version.era().auto_tunes_high();

    let mut cols = vec![
        "node",
        "zone",
        "managed (pages)",
        "min (pages)",
        "low (pages)",
        "high (pages)",
        "promo (pages)",
        "batch (pages)",
    ];
    if auto {
        cols.extend(["pcp high_min (pages)", "pcp high_max (pages)"]);
    } else {
        cols.push("pcp high (pages)");
    }
    cols.push("split CPUs");
    let mut table = Table::new(cols).titled(format!(
        "{}: kernel {} ({}), min_free_kbytes {} ({})",
        machine.name,
        version,
        version.era(),
        cfg.min_free.min_free_kbytes,
        cfg.min_free.rule.name()
    ));
    let mut rows = Vec::new();
    for z in &cfg.zones {
        let w = &z.watermarks;
        let promo = w.promo_pages.map_or("-".to_string(), |p| p.to_string());
        let mut cells = vec![
            z.zone.node.to_string(),
            z.zone.kind.name().to_string(),
            z.zone.managed_pages.to_string(),
            w.min_pages.to_string(),
            w.low_pages.to_string(),
            w.high_pages.to_string(),
            promo,
            z.pcp.batch_pages.to_string(),
        ];
        let mut row = json!({
            "node": z.zone.node,
            "zone": z.zone.kind.name(),
            "present_pages": z.zone.present_pages,
            "managed_pages": z.zone.managed_pages,
            "min_pages": w.min_pages,
            "low_pages": w.low_pages,
            "high_pages": w.high_pages,
            "promo_pages": w.promo_pages,
            "batch_pages": z.pcp.batch_pages,
            "split_cpus": z.split_cpus,
        });
        match z.pcp.high {
            PcpHigh::Fixed { high_pages } => {
                cells.push(high_pages.to_string());
                row["pcp_high_pages"] = json!(high_pages);
            }
            PcpHigh::AutoTuned {
                high_min_pages,
                high_max_pages,
            } => {
                cells.push(high_min_pages.to_string());
                cells.push(high_max_pages.to_string());
                row["pcp_high_min_pages"] = json!(high_min_pages);
                row["pcp_high_max_pages"] = json!(high_max_pages);
            }
        }
        cells.push(z.split_cpus.to_string());
        table.push(cells);
        rows.push(row);
    }
    let mut applying = changes_table(format!(
        "PCP changes in kernel {version} (first mainline version <= {version})"
    ));
    let mut applying_json = Vec::new();
    for c in changes::applying(version) {
        let (cells, j) = change_row(c, None);
        applying.push(cells);
        applying_json.push(j);
    }
    let missing: Vec<String> = changes::CHANGES
        .iter()
        .filter(|c| !c.present_in(version))
        .map(|c| format!("{} {} ({})", c.commit_text(), c.subject, c.version))
        .collect();
    let mut json = json!({
        "machine": machine.name,
        "kernel": version.to_string(),
        "changes_applying": applying_json,
        "era": version.era().range(),
        "min_free_kbytes": cfg.min_free.min_free_kbytes,
        "min_free": cfg.min_free,
        "pcp_batch_scale_max": cfg.pcp_batch_scale_max,
        "options": cfg.options,
        "zones": rows,
        "notes": cfg.notes,
    });
    let mut notes = cfg.notes.clone();
    if !missing.is_empty() {
        notes.push(format!(
            "kernel {version} does not have {} later changes: `pcpmodel kernel changes --from \
             {version}` lists them",
            missing.len()
        ));
    }
    let mut tables = vec![table, applying];
    if let Some(fs) = &features {
        let (t, j, n) = host_tables(fs);
        tables.extend(t);
        json["host"] = j;
        notes.extend(n);
    }
    notes.push(format!(
        "machine memory sources: node_mib '{}'; below_4g_mib '{}'; reserved_mib_per_node '{}'; \
         struct_page_bytes '{}'",
        machine.memory.node_mib.source,
        machine.memory.below_4g_mib.source,
        machine.memory.reserved_mib_per_node.source,
        machine.memory.struct_page_bytes.source
    ));
    if auto {
        notes.push(
            "live pcp->high moves between high_min and high_max: use `pcpmodel zoneinfo` to \
             check a real /proc/zoneinfo"
                .to_string(),
        );
    }
    Ok(Report {
        json,
        tables,
        notes,
    })
}

/// Runs `pcpmodel kernel`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let report = match &args.sub {
        Some(Sub::Changes(a)) => changes_report(a)?,
        None => report(&args)?,
    };
    super::emit(&report, format)
}
