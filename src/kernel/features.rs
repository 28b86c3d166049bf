//! Which PCP changes a live host has, from what it shows rather than from its version alone.
//!
//! Distribution kernels carry changes out of version order (backports, reverts), so
//! [`detect_features`] reads, under a root directory laid out like `/` (the host, or a fake
//! tree in tests):
//!
//! | evidence | file | what it shows |
//! |---|---|---|
//! | zoneinfo | `proc/zoneinfo` | `high_min:` / `high_max:` lines (6.13+ format, so auto-tuning), `boost`, `promo` |
//! | sysctl | `proc/sys/vm/{numa_stat, percpu_pagelist_high_fraction, percpu_pagelist_fraction}` | the sysctl exists |
//! | config | `boot/config-<release>` | `CONFIG_PCP_BATCH_SCALE_MAX=n` |
//! | version | `proc/sys/kernel/osrelease` | every change by its first mainline version |
//!
//! Each change of [`crate::kernel::changes::CHANGES`] gets a state: present or absent with the
//! evidence that decided it, or unknown. A feature seen on the host overrides the version, and
//! the disagreement is reported (`version_says`). `proc/config.gz` is gzip-compressed; this
//! crate has no gzip reader, so it is reported as present but not read.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::changes::{Feature, CHANGES};
use crate::kernel::version::KernelVersion;

/// What decided a change's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// A `/proc/zoneinfo` field.
    Zoneinfo,
    /// A `/proc/sys/vm` entry.
    Sysctl,
    /// The kernel config.
    Config,
    /// The kernel version (first mainline version of the change).
    Version,
}

impl Evidence {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::Zoneinfo => "zoneinfo",
            Evidence::Sysctl => "sysctl",
            Evidence::Config => "config",
            Evidence::Version => "version",
        }
    }
}

/// One feature seen (or seen to be missing) on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeatureObservation {
    /// The feature.
    pub feature: Feature,
    /// Whether the host has it.
    pub present: bool,
    /// Which kind of file showed it.
    pub evidence: Evidence,
    /// The file, and what in it.
    pub source: String,
}

/// One change's state on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeState {
    /// The change's key in [`CHANGES`].
    pub key: &'static str,
    /// Commit id, when verified.
    pub commit: Option<&'static str>,
    /// Present (true), absent (false) or unknown (None).
    pub present: Option<bool>,
    /// What decided it (None when unknown).
    pub evidence: Option<Evidence>,
    /// What the version alone says (None without a version).
    pub version_says: Option<bool>,
    /// Where the evidence comes from.
    pub source: String,
}

impl ChangeState {
    /// True when a host feature contradicts the version (a backport or a revert).
    pub fn disagrees_with_version(&self) -> bool {
        matches!((self.present, self.version_says), (Some(a), Some(b)) if a != b)
    }
}

/// What a host shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeatureSet {
    /// The root directory read.
    pub root: String,
    /// `proc/sys/kernel/osrelease`, when readable.
    pub release: Option<String>,
    /// The version (parsed from the release, or given).
    pub version: Option<KernelVersion>,
    /// The kernel config file read, if any.
    pub config_file: Option<String>,
    /// `CONFIG_PCP_BATCH_SCALE_MAX` from the config, when read and set.
    pub pcp_batch_scale_max: Option<u8>,
    /// Auto-tuned `pcp->high` (6.7+): seen from zoneinfo's `high_min` / `high_max`, else by
    /// version, else unknown.
    pub auto_tuning: Option<bool>,
    /// Features seen.
    pub features: Vec<FeatureObservation>,
    /// Every change of [`CHANGES`], oldest first.
    pub changes: Vec<ChangeState>,
    /// What could not be read, and other caveats.
    pub notes: Vec<String>,
}

impl FeatureSet {
    /// The state of the change with `key` (None when unknown or no such key).
    pub fn has(&self, key: &str) -> Option<bool> {
        self.changes
            .iter()
            .find(|c| c.key == key)
            .and_then(|c| c.present)
    }

    /// The observation of `feature`, if any.
    pub fn feature(&self, feature: Feature) -> Option<&FeatureObservation> {
        self.features.iter().find(|f| f.feature == feature)
    }
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path.display().to_string(), e)),
    }
}

/// Reads the features of the host under `root` (see the module documentation). `version`
/// overrides `proc/sys/kernel/osrelease` when given.
///
/// Missing files make their evidence unknown; files that exist but cannot be read or parsed
/// are errors naming the file (and line).
pub fn detect_features(root: &Path, version: Option<KernelVersion>) -> Result<FeatureSet> {
    let mut notes = Vec::new();
    let mut features = Vec::new();
    let label = |rel: &str| root.join(rel).display().to_string();

    // Version.
    let release_path = root.join("proc/sys/kernel/osrelease");
    let release = read_optional(&release_path)?.map(|s| s.trim().to_string());
    let version = match (version, &release) {
        (Some(v), _) => Some(v),
        (None, Some(r)) => Some(KernelVersion::parse_release_labeled(
            r,
            &release_path.display().to_string(),
        )?),
        (None, None) => {
            notes.push(format!(
                "{} not found: no version, changes without a host feature are unknown",
                label("proc/sys/kernel/osrelease")
            ));
            None
        }
    };

    // Sysctls: existence is conclusive only when proc/sys/vm itself is there.
    let vm = root.join("proc/sys/vm");
    if vm.is_dir() {
        let exists = |name: &str| vm.join(name).exists();
        features.push(FeatureObservation {
            feature: Feature::NumaStatSysctl,
            present: exists("numa_stat"),
            evidence: Evidence::Sysctl,
            source: label("proc/sys/vm/numa_stat"),
        });
        let high = exists("percpu_pagelist_high_fraction");
        let old = exists("percpu_pagelist_fraction");
        if high || old {
            features.push(FeatureObservation {
                feature: Feature::PercpuPagelistHighFraction,
                present: high,
                evidence: Evidence::Sysctl,
                source: if high {
                    label("proc/sys/vm/percpu_pagelist_high_fraction")
                } else {
                    label("proc/sys/vm/percpu_pagelist_fraction")
                },
            });
        } else {
            notes.push(format!(
                "{}: neither percpu_pagelist_high_fraction nor percpu_pagelist_fraction",
                vm.display()
            ));
        }
    } else {
        notes.push(format!(
            "{} not found: sysctl features unknown",
            vm.display()
        ));
    }

    // zoneinfo: which lines the format has.
    let zi_path = root.join("proc/zoneinfo");
    let mut auto_tuning = None;
    if let Some(text) = read_optional(&zi_path)? {
        let mut pagesets = false;
        let (mut high_min, mut boost, mut promo) = (false, false, false);
        for line in text.lines() {
            let t = line.trim_start();
            pagesets |= t.starts_with("pagesets");
            high_min |= t.starts_with("high_min:");
            boost |= t.starts_with("boost ");
            promo |= t.starts_with("promo ");
        }
        let zl = zi_path.display().to_string();
        if !text.contains("Node ") {
            return Err(Error::parse(
                zl,
                1,
                "zoneinfo",
                "no 'Node N, zone NAME' line: not a /proc/zoneinfo",
            ));
        }
        if pagesets {
            features.push(FeatureObservation {
                feature: Feature::ZoneinfoHighMinMax,
                present: high_min,
                evidence: Evidence::Zoneinfo,
                source: format!("{zl}: per-CPU 'high_min:' lines"),
            });
            if high_min {
                auto_tuning = Some(true);
            }
        }
        features.push(FeatureObservation {
            feature: Feature::WatermarkBoost,
            present: boost,
            evidence: Evidence::Zoneinfo,
            source: format!("{zl}: 'boost' lines"),
        });
        features.push(FeatureObservation {
            feature: Feature::PromoWatermark,
            present: promo,
            evidence: Evidence::Zoneinfo,
            source: format!("{zl}: 'promo' lines"),
        });
    } else {
        notes.push(format!(
            "{} not found: zoneinfo features unknown",
            zi_path.display()
        ));
    }

    // Kernel config.
    let mut config_file = None;
    let mut pcp_batch_scale_max = None;
    let config_path = release
        .as_ref()
        .map(|r| root.join(format!("boot/config-{r}")));
    let config_text = match &config_path {
        Some(p) => read_optional(p)?,
        None => None,
    };
    if let (Some(text), Some(p)) = (config_text, &config_path) {
        let pl = p.display().to_string();
        let mut found = None;
        for (i, line) in text.lines().enumerate() {
            if let Some(val) = line.trim().strip_prefix("CONFIG_PCP_BATCH_SCALE_MAX=") {
                let n: u8 = val.trim().parse().map_err(|_| {
                    Error::parse(
                        &pl,
                        i + 1,
                        "CONFIG_PCP_BATCH_SCALE_MAX",
                        format!("'{}' is not a number 0..6", val.trim()),
                    )
                })?;
                if n > 6 {
                    return Err(Error::parse(
                        &pl,
                        i + 1,
                        "CONFIG_PCP_BATCH_SCALE_MAX",
                        format!("{n} is outside the Kconfig range 0..6"),
                    ));
                }
                found = Some((n, i + 1));
            }
        }
        features.push(FeatureObservation {
            feature: Feature::PcpBatchScaleMax,
            present: found.is_some(),
            evidence: Evidence::Config,
            source: match found {
                Some((n, line)) => format!("{pl}:{line}: CONFIG_PCP_BATCH_SCALE_MAX={n}"),
                None => format!("{pl}: no CONFIG_PCP_BATCH_SCALE_MAX line"),
            },
        });
        pcp_batch_scale_max = found.map(|(n, _)| n);
        config_file = Some(pl);
    } else {
        let gz = root.join("proc/config.gz");
        if gz.exists() {
            notes.push(format!(
                "{} exists but is gzip-compressed and not read (no gzip reader): place the \
                 uncompressed config at boot/config-<release> to use it",
                gz.display()
            ));
        } else {
            notes.push(match &config_path {
                Some(p) => format!("{} not found: config features unknown", p.display()),
                None => "no release, so no boot/config-<release> to read".to_string(),
            });
        }
    }

    if auto_tuning.is_none() {
        auto_tuning = version.map(|v| v.era().auto_tunes_high());
    }

    // Every change: a host feature first, then the version.
    let changes = CHANGES
        .iter()
        .map(|c| {
            let version_says = version.map(|v| c.present_in(v));
            let seen = c
                .feature
                .and_then(|f| features.iter().find(|o| o.feature == f));
            let seen = match seen {
                Some(o) => Some((o.present, o.evidence, o.source.clone())),
                // zoneinfo's high_min lines (6.13+) show auto-tuning; their absence does not
                // show its absence (6.7 - 6.12 print the old format).
                None if matches!(c.key, "auto-tune-framework" | "auto-tune")
                    && auto_tuning == Some(true)
                    && features
                        .iter()
                        .any(|o| o.feature == Feature::ZoneinfoHighMinMax && o.present) =>
                {
                    Some((
                        true,
                        Evidence::Zoneinfo,
                        format!("{}: per-CPU 'high_min:' lines", zi_path.display()),
                    ))
                }
                None => None,
            };
            match seen {
                Some((present, evidence, source)) => ChangeState {
                    key: c.key,
                    commit: c.commit,
                    present: Some(present),
                    evidence: Some(evidence),
                    version_says,
                    source,
                },
                None => ChangeState {
                    key: c.key,
                    commit: c.commit,
                    present: version_says,
                    evidence: version_says.map(|_| Evidence::Version),
                    version_says,
                    source: match version {
                        Some(v) => format!("kernel {v} vs first mainline version {}", c.version),
                        None => "no version and no host feature".to_string(),
                    },
                },
            }
        })
        .collect::<Vec<_>>();
    for c in changes.iter().filter(|c| c.disagrees_with_version()) {
        notes.push(format!(
            "{}: the host {} it although its version says {} (backport or revert; {})",
            c.key,
            if c.present == Some(true) {
                "has"
            } else {
                "lacks"
            },
            if c.version_says == Some(true) {
                "present"
            } else {
                "absent"
            },
            c.source
        ));
    }

    Ok(FeatureSet {
        root: root.display().to_string(),
        release,
        version,
        config_file,
        pcp_batch_scale_max,
        auto_tuning,
        features,
        changes,
        notes,
    })
}
