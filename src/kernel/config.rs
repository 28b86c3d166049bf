//! What the kernel configures on a machine: `min_free_kbytes`, every zone's watermarks, and
//! every zone's pageset batch and high (or high_min / high_max).
//!
//! # Equations
//! The boot sequence, each step a kernel function mirrored in this module's siblings:
//! 1. [`crate::kernel::watermarks::decide_min_free_kbytes`]: sqrt rule,
//!    then khugepaged's raise when THP is `always` or `madvise`.
//! 2. [`crate::kernel::watermarks::setup_per_zone_wmarks`] with the final
//!    `min_free_kbytes`.
//! 3. [`crate::kernel::pageset::zone_set_pageset_high_and_batch`]
//!    for every populated zone, with `cpu_online` = 0.
//!
//! # Assumptions
//! Sysctls at their defaults unless given in [`KernelOptions`]; `min_free_kbytes` computed, not
//! set by hand; the zone layout of [`crate::kernel::layout`] for a [`Machine`].
//!
//! # References
//! mm/page_alloc.c `init_per_zone_wmark_min`, `setup_per_zone_wmarks`, `zone_pcp_update`;
//! mm/khugepaged.c `set_recommended_min_free_kbytes`.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hw::machine::Machine;
use crate::kernel::layout::{zone_layout, ZoneKind, ZoneSpec};
use crate::kernel::ops::{PcpState, DEFAULT_PCP_BATCH_SCALE_MAX, MAX_PCP_BATCH_SCALE_MAX};
use crate::kernel::pageset::{
    zone_set_pageset_high_and_batch, PagesetInputs, PagesetTunables, PcpLimits,
};
use crate::kernel::version::{Era, KernelVersion};
use crate::kernel::watermarks::{
    decide_min_free_kbytes, setup_per_zone_wmarks, MinFreeDecision, MinFreeRule, ThpMode,
    Watermarks, DEFAULT_WATERMARK_SCALE_FACTOR,
};

/// Kernel settings that change the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KernelOptions {
    /// THP mode (decides the khugepaged raise of `min_free_kbytes`).
    pub thp: ThpMode,
    /// `vm.percpu_pagelist_high_fraction` (>= 5.14; 0 or >= 8).
    pub percpu_pagelist_high_fraction: u32,
    /// `vm.percpu_pagelist_fraction` (<= 5.13; 0 or >= 8).
    pub percpu_pagelist_fraction: u32,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` (0..=6; >= 6.7, or 6.6 with the stable backport). None:
    /// the kernel's default (5 from 6.7, absent before).
    pub pcp_batch_scale_max: Option<u8>,
    /// `vm.watermark_scale_factor` (default 10).
    pub watermark_scale_factor: u64,
    /// `vm.min_free_kbytes` set by hand (None: computed at boot).
    pub min_free_kbytes: Option<u64>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            thp: ThpMode::Always,
            percpu_pagelist_high_fraction: 0,
            percpu_pagelist_fraction: 0,
            pcp_batch_scale_max: None,
            watermark_scale_factor: DEFAULT_WATERMARK_SCALE_FACTOR,
            min_free_kbytes: None,
        }
    }
}

impl KernelOptions {
    /// The pageset sysctls.
    pub fn tunables(&self) -> PagesetTunables {
        PagesetTunables {
            percpu_pagelist_high_fraction: self.percpu_pagelist_high_fraction,
            percpu_pagelist_fraction: self.percpu_pagelist_fraction,
        }
    }

    /// Checks every option against `version`; returns the `CONFIG_PCP_BATCH_SCALE_MAX` in
    /// effect (None when the kernel has none).
    pub fn validate(&self, version: KernelVersion) -> Result<Option<u8>> {
        self.tunables().validate(version)?;
        if !(1..=3000).contains(&self.watermark_scale_factor) {
            return Err(Error::invalid(
                "kernel options",
                "vm.watermark_scale_factor",
                format!(
                    "{} is outside the sysctl range 1..3000",
                    self.watermark_scale_factor
                ),
            ));
        }
        match self.pcp_batch_scale_max {
            Some(s) if s > MAX_PCP_BATCH_SCALE_MAX => Err(Error::invalid(
                "kernel options",
                "CONFIG_PCP_BATCH_SCALE_MAX",
                format!("{s} is outside the Kconfig range 0..6"),
            )),
            Some(s)
                if version.has_pcp_batch_scale_max() || version.may_have_scale_max_backport() =>
            {
                Ok(Some(s))
            }
            Some(_) => Err(Error::invalid(
                "kernel options",
                "CONFIG_PCP_BATCH_SCALE_MAX",
                format!(
                    "does not exist in kernel {version} (added in 6.7; backported to 6.6-stable)"
                ),
            )),
            None if version.has_pcp_batch_scale_max() => Ok(Some(DEFAULT_PCP_BATCH_SCALE_MAX)),
            None => Ok(None),
        }
    }
}

/// One zone's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneConfig {
    /// The zone.
    pub zone: ZoneSpec,
    /// Its watermarks (without boost).
    pub watermarks: Watermarks,
    /// Its pagesets' batch and high.
    pub pcp: PcpLimits,
    /// CPUs `zone_highsize()` divides by (node CPUs, or all CPUs for a CPU-less node).
    pub split_cpus: u32,
}

/// The kernel's configuration of a machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelConfig {
    /// Kernel version.
    pub version: KernelVersion,
    /// Its era.
    pub era: Era,
    /// How `min_free_kbytes` was decided.
    pub min_free: MinFreeDecision,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` in effect (None: the kernel has none).
    pub pcp_batch_scale_max: Option<u8>,
    /// The options used.
    pub options: KernelOptions,
    /// Every populated zone.
    pub zones: Vec<ZoneConfig>,
    /// Provenance and caveats, for people.
    pub notes: Vec<String>,
}

impl KernelConfig {
    /// The zone of `kind` on `node`, if populated.
    pub fn zone(&self, node: u32, kind: ZoneKind) -> Option<&ZoneConfig> {
        self.zones
            .iter()
            .find(|z| z.zone.node == node && z.zone.kind == kind)
    }

    /// An empty pageset of the zone of `kind` on `node`, ready to step with
    /// [`PcpState::alloc`] / [`PcpState::free`]. Errors when the zone is not populated.
    pub fn pcp_state(&self, node: u32, kind: ZoneKind) -> Result<PcpState> {
        let z = self.zone(node, kind).ok_or_else(|| {
            Error::invalid(
                "kernel configuration",
                "zone",
                format!("node {node} has no populated {kind} zone"),
            )
        })?;
        PcpState::new(self.version, z.pcp, self.pcp_batch_scale_max)
    }
}

/// Configures the given zones (all zones of the machine, every node). `cpus_per_node[n]` is
/// the CPU count of node `n`; `online_cpus` all CPUs. Zones that are not populated are used for
/// the watermark split but get no entry in [`KernelConfig::zones`].
pub fn configure_zones(
    zones: &[ZoneSpec],
    cpus_per_node: &[u32],
    online_cpus: u32,
    version: KernelVersion,
    options: KernelOptions,
) -> Result<KernelConfig> {
    let scale = options.validate(version)?;
    let mut min_free =
        decide_min_free_kbytes(zones, options.thp, options.watermark_scale_factor, version)?;
    if let Some(given) = options.min_free_kbytes {
        min_free.min_free_kbytes = given;
        min_free.rule = MinFreeRule::Given;
    }
    let wmarks = setup_per_zone_wmarks(
        zones,
        min_free.min_free_kbytes,
        options.watermark_scale_factor,
        version,
    )?;
    let mut out = Vec::new();
    for (z, w) in zones.iter().zip(wmarks) {
        if !z.is_populated() {
            continue;
        }
        let cpus_on_node = cpus_per_node.get(z.node as usize).copied().ok_or_else(|| {
            Error::invalid(
                "kernel configuration",
                "cpus_per_node",
                format!("no CPU count for node {}", z.node),
            )
        })?;
        let pcp = zone_set_pageset_high_and_batch(
            PagesetInputs {
                managed_pages: z.managed_pages,
                low_wmark_pages: w.low_pages,
                cpus_on_node,
                online_cpus,
            },
            options.tunables(),
            version,
        )?;
        out.push(ZoneConfig {
            zone: z.clone(),
            watermarks: w,
            pcp,
            split_cpus: if cpus_on_node == 0 {
                online_cpus
            } else {
                cpus_on_node
            },
        });
    }
    let mut notes = vec![format!(
        "kernel {version} (era {}): formulas of mm/page_alloc.c __setup_per_zone_wmarks, \
         zone_batchsize, zone_highsize, zone_set_pageset_high_and_batch for that range",
        version.era()
    )];
    notes.push(match min_free.rule {
        MinFreeRule::Given => format!(
            "min_free_kbytes {} set by hand (computed would be {} kB)",
            min_free.min_free_kbytes, min_free.sqrt_kbytes
        ),
        _ => format!(
            "min_free_kbytes {} kB by the {} rule: int_sqrt({} lowmem pages * 4 kB * 16) = {} kB \
             (clamp 128..{}), THP {}: khugepaged recommends {} ({} zones <= Normal * 22528 kB, \
             capped at nr_free_buffer_pages/20)",
            min_free.min_free_kbytes,
            min_free.rule.name(),
            min_free.lowmem_pages,
            min_free.sqrt_kbytes,
            version.min_free_kbytes_upper_bound(),
            options.thp.name(),
            min_free
                .thp_recommended_kbytes
                .map_or("nothing".to_string(), |k| format!("{k} kB")),
            min_free.thp_nr_zones,
        ),
    });
    if version.era().auto_tunes_high() {
        notes.push(format!(
            "pcp->high is auto-tuned between high_min and high_max (starts at 0, clamped \
             lazily); CONFIG_PCP_BATCH_SCALE_MAX {}",
            scale.unwrap_or(DEFAULT_PCP_BATCH_SCALE_MAX)
        ));
    } else if let Some(s) = scale {
        notes.push(format!(
            "CONFIG_PCP_BATCH_SCALE_MAX {s} assumed backported (6.6-stable, Aug 2024)"
        ));
    }
    if version.has_free_high() {
        notes.push(
            "free_high present (>= 5.18, f26b3fa04611): high-order frees without allocations \
             drain the PCP"
                .to_string(),
        );
    }
    if version.free_high_threshold_uses_high_min() {
        notes.push(
            "free_high threshold batch + high_min/2 from 6.16 (c544a952ba61; version \
             inferred, not read from a 6.16 tree)"
                .to_string(),
        );
    }
    Ok(KernelConfig {
        version,
        era: version.era(),
        min_free,
        pcp_batch_scale_max: scale,
        options,
        zones: out,
        notes,
    })
}

/// Configures a machine: its zone layout ([`zone_layout`]) through [`configure_zones`].
pub fn configure(
    machine: &Machine,
    version: KernelVersion,
    options: KernelOptions,
) -> Result<KernelConfig> {
    let layout = zone_layout(machine)?;
    let mut cfg = configure_zones(
        &layout.zones,
        &layout.cpus_per_node,
        layout.online_cpus,
        version,
        options,
    )?;
    let mut notes = layout.notes;
    notes.append(&mut cfg.notes);
    cfg.notes = notes;
    Ok(cfg)
}
