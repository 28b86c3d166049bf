//! `pcpmodel zoneinfo`: check a `/proc/zoneinfo` against the kernel's formulas. Exit 0 when
//! every recomputed value matches, 1 when one does not.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pcpmodel::kernel::zoneinfo::{
    check_zoneinfo, parse_cpulist, read_zoneinfo, CheckOptions, CheckStatus, CpusPerNode,
};
use pcpmodel::kernel::KernelVersion;
use pcpmodel::output::report::{Format, Report, Table};
use serde_json::json;

use super::args::ThpArg;

const PROC_ZONEINFO: &str = "/proc/zoneinfo";

/// Arguments of `pcpmodel zoneinfo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The zoneinfo file (default /proc/zoneinfo).
    pub file: Option<PathBuf>,
    /// Kernel version that wrote the file: 6.18, 6.18.44 or that kernel's `uname -r` release
    /// string, e.g. 6.18.44-generic (default: the running kernel, /proc/sys/kernel/osrelease).
    #[arg(long)]
    pub kernel: Option<String>,
    /// CPUs per NUMA node, 1 to 8192 (the kernel's NR_CPUS limit on x86-64; default: this
    /// host's /sys/devices/system/node/nodeN/cpulist, else the number of CPUs).
    #[arg(long, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::CPUS))]
    pub cpus_per_node: Option<u32>,
    /// THP mode when min_free_kbytes was computed (default: try the khugepaged raise and the
    /// sqrt rule, and report which one matches).
    #[arg(long, value_enum)]
    pub thp: Option<ThpArg>,
    /// vm.percpu_pagelist_high_fraction in effect (5.14+).
    #[arg(long, default_value_t = 0, value_parser = super::args::bounded::<u32>(&pcpmodel::bounds::PAGELIST_FRACTION))]
    pub percpu_pagelist_high_fraction: u32,
    /// vm.watermark_scale_factor in effect.
    #[arg(long, default_value_t = 10, value_parser = super::args::bounded::<u64>(&pcpmodel::bounds::WATERMARK_SCALE_FACTOR))]
    pub watermark_scale_factor: u64,
}

/// CPUs per node of this host from sysfs; None when sysfs has no node directories.
fn host_cpus_per_node(root: &Path) -> anyhow::Result<Option<Vec<u32>>> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Ok(None);
    };
    let mut nodes: Vec<(u32, u32)> = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(id) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path().join("cpulist");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let cpus = parse_cpulist(&text, &path.display().to_string())?;
        nodes.push((id, cpus.len() as u32));
    }
    if nodes.is_empty() {
        return Ok(None);
    }
    let max = nodes.iter().map(|(id, _)| *id).max().unwrap_or(0) as usize;
    let mut v = vec![0; max + 1];
    for (id, n) in nodes {
        v[id as usize] = n;
    }
    Ok(Some(v))
}

/// Builds the check report and says whether everything matched.
pub fn report(args: &Args) -> anyhow::Result<(Report, bool)> {
    let path = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(PROC_ZONEINFO));
    let info = read_zoneinfo(&path)?;
    let is_host = path == Path::new(PROC_ZONEINFO);
    let mut notes = Vec::new();

    let version = match &args.kernel {
        Some(k) => super::args::kernel_release_flag(k, "--kernel")?,
        None => {
            let p = "/proc/sys/kernel/osrelease";
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading {p} (give --kernel X.Y)"))?;
            let v = KernelVersion::parse_release_labeled(&text, p)?;
            notes.push(format!(
                "kernel {v} from {p} ('{}'){}",
                text.trim(),
                if is_host {
                    ""
                } else {
                    ": the running kernel; pass --kernel for a file from another machine"
                }
            ));
            v
        }
    };
    let cpus_per_node = match args.cpus_per_node {
        Some(n) => CpusPerNode::Uniform(n),
        None => {
            let root = Path::new("/sys/devices/system/node");
            let suffix = if is_host {
                ""
            } else {
                " (this host's; pass --cpus-per-node for a file from another machine)"
            };
            match host_cpus_per_node(root)? {
                Some(v) => {
                    notes.push(format!(
                        "CPUs per node {v:?} from {}/nodeN/cpulist{suffix}",
                        root.display()
                    ));
                    CpusPerNode::PerNode(v)
                }
                None => {
                    let n = std::thread::available_parallelism()
                        .map(|n| n.get() as u32)
                        .unwrap_or(1);
                    notes.push(format!("{n} CPUs on one node (no NUMA sysfs){suffix}"));
                    CpusPerNode::Uniform(n)
                }
            }
        }
    };
    let mut opts = CheckOptions::new(version, cpus_per_node.clone());
    opts.thp = args.thp.map(Into::into);
    pcpmodel::bounds::PAGELIST_FRACTION
        .check_flag(
            "--percpu-pagelist-high-fraction",
            f64::from(args.percpu_pagelist_high_fraction),
        )
        .map_err(anyhow::Error::msg)?;
    pcpmodel::bounds::WATERMARK_SCALE_FACTOR
        .check_flag(
            "--watermark-scale-factor",
            args.watermark_scale_factor as f64,
        )
        .map_err(anyhow::Error::msg)?;
    opts.percpu_pagelist_high_fraction = args.percpu_pagelist_high_fraction;
    opts.watermark_scale_factor = args.watermark_scale_factor;
    let check = check_zoneinfo(&info, &opts)?;
    let ok = check.all_match();

    let mut table = Table::new([
        "node",
        "zone",
        "quantity",
        "cpus",
        "file (pages)",
        "recomputed (pages)",
        "result",
    ])
    .titled(format!(
        "{}: kernel {} ({}), min_free_kbytes {} ({})",
        info.source,
        version,
        version.era(),
        check
            .min_free
            .min_free_kbytes
            .map_or("given".to_string(), |k| k.to_string()),
        check.min_free.rule.name()
    ));
    for r in &check.rows {
        table.push([
            r.node.to_string(),
            r.zone.name().to_string(),
            r.quantity.to_string(),
            r.cpus.clone().unwrap_or_else(|| "-".to_string()),
            r.file.to_string(),
            r.recomputed.to_string(),
            r.status.word().to_string(),
        ]);
    }
    notes.push(format!(
        "min_free_kbytes rule: {} ({})",
        check.min_free.rule.name(),
        check.min_free.detail
    ));
    notes.extend(check.notes.iter().cloned());
    let explained: Vec<_> = check
        .rows
        .iter()
        .filter(|r| r.status == CheckStatus::LiveExplained || r.explanation.is_some())
        .collect();
    for r in &explained {
        notes.push(format!(
            "node {} {} cpus {}: pcp->high {} pages ({}): {}",
            r.node,
            r.zone.name(),
            r.cpus.as_deref().unwrap_or("-"),
            r.file,
            r.status.word(),
            r.explanation.as_deref().unwrap_or("")
        ));
    }
    let n_explained = explained
        .iter()
        .filter(|r| r.status == CheckStatus::LiveExplained)
        .count();
    notes.push(if ok && n_explained > 0 {
        format!(
            "all {} values match ({n_explained} live value(s) outside the current bounds, \
             explained above)",
            check.rows.len()
        )
    } else if ok {
        format!("all {} values match", check.rows.len())
    } else {
        format!(
            "{} of {} values do not match",
            check.mismatches(),
            check.rows.len()
        )
    });
    let json = json!({
        "file": info.source,
        "kernel": version.to_string(),
        "era": version.era().range(),
        "format": check.format,
        "cpus_per_node": cpus_per_node,
        "min_free_kbytes": check.min_free.min_free_kbytes,
        "min_free": check.min_free,
        "all_match": ok,
        "mismatches": check.mismatches(),
        "live_explained": n_explained,
        "rows": check.rows,
        "notes": notes,
    });
    Ok((
        Report {
            json,
            tables: vec![table],
            notes,
        },
        ok,
    ))
}

/// Runs `pcpmodel zoneinfo`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let (report, ok) = report(&args)?;
    super::print_report(&report, format);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
