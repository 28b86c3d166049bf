//! `pcpmodel kernel`: what the kernel configures on a machine (every zone's watermarks, batch,
//! and high or high_min / high_max), from the kernel's own formulas.

use std::process::ExitCode;

use clap::ValueEnum;
use pcpmodel::kernel::{configure, KernelOptions, KernelVersion, PcpHigh, ThpMode};
use pcpmodel::report::{Format, Report, Table};
use pcpmodel::Machine;
use serde_json::json;

/// THP mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThpArg {
    /// `always`: khugepaged raises min_free_kbytes.
    Always,
    /// `madvise`: khugepaged raises min_free_kbytes.
    Madvise,
    /// `never`: no raise.
    Never,
}

impl From<ThpArg> for ThpMode {
    fn from(t: ThpArg) -> ThpMode {
        match t {
            ThpArg::Always => ThpMode::Always,
            ThpArg::Madvise => ThpMode::Madvise,
            ThpArg::Never => ThpMode::Never,
        }
    }
}

/// Arguments of `pcpmodel kernel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Built-in machine name or path to a machine TOML file.
    #[arg(long)]
    pub machine: String,
    /// Kernel version, e.g. 5.18 or 6.18.44 (default 6.18).
    #[arg(long, default_value = "6.18")]
    pub kernel: String,
    /// vm.percpu_pagelist_high_fraction (5.14+): 0 (default) or >= 8.
    #[arg(long, default_value_t = 0)]
    pub percpu_pagelist_high_fraction: u32,
    /// vm.percpu_pagelist_fraction (<= 5.13): 0 (default) or >= 8.
    #[arg(long, default_value_t = 0)]
    pub percpu_pagelist_fraction: u32,
    /// THP mode (always and madvise let khugepaged raise min_free_kbytes).
    #[arg(long, value_enum, default_value_t = ThpArg::Always)]
    pub thp: ThpArg,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..6 (6.7+, default 5; 6.6 only with the stable backport).
    #[arg(long)]
    pub pcp_batch_scale_max: Option<u8>,
    /// vm.watermark_scale_factor (default 10).
    #[arg(long, default_value_t = 10)]
    pub watermark_scale_factor: u64,
    /// vm.min_free_kbytes set by hand (default: computed as at boot).
    #[arg(long)]
    pub min_free_kbytes: Option<u64>,
}

/// Builds the report of `pcpmodel kernel`.
pub fn report(args: &Args) -> anyhow::Result<Report> {
    let machine = Machine::resolve(&args.machine)?;
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
        // --pcp-batch-scale-max is checked by the kernel module (0..6, and which versions).
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
    let version = KernelVersion::parse_labeled(&args.kernel, "--kernel")?;
    let options = KernelOptions {
        thp: args.thp.into(),
        percpu_pagelist_high_fraction: args.percpu_pagelist_high_fraction,
        percpu_pagelist_fraction: args.percpu_pagelist_fraction,
        pcp_batch_scale_max: args.pcp_batch_scale_max,
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
    let json = json!({
        "machine": machine.name,
        "kernel": version.to_string(),
        "era": version.era().range(),
        "min_free_kbytes": cfg.min_free.min_free_kbytes,
        "min_free": cfg.min_free,
        "pcp_batch_scale_max": cfg.pcp_batch_scale_max,
        "options": cfg.options,
        "zones": rows,
        "notes": cfg.notes,
    });
    let mut notes = cfg.notes.clone();
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
        tables: vec![table],
        notes,
    })
}

/// Runs `pcpmodel kernel`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let report = report(&args)?;
    super::emit(&report, format)
}
