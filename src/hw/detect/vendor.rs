//! Vendor knowledge: vendor and microarchitecture from /proc/cpuinfo, typical values.

use std::collections::BTreeMap;

pub(super) fn vendor_of(cpuinfo: &BTreeMap<String, String>) -> Option<(&'static str, String)> {
    if let Some(v) = cpuinfo.get("vendor_id") {
        let vendor = match v.as_str() {
            "GenuineIntel" => "intel",
            "AuthenticAMD" | "HygonGenuine" => "amd",
            _ => "unknown",
        };
        return Some((vendor, format!("/proc/cpuinfo vendor_id '{v}'")));
    }
    cpuinfo.get("CPU implementer").map(|imp| {
        (
            "arm",
            format!("/proc/cpuinfo CPU implementer {imp} (an arm64 CPU)"),
        )
    })
}

fn parse_int_auto(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Microarchitecture from x86 family/model/stepping or arm64 implementer/part, for the parts
/// this crate's machines use; `None` when not in the table.
pub(super) fn microarchitecture_of(cpuinfo: &BTreeMap<String, String>) -> Option<(String, String)> {
    let get = |k: &str| cpuinfo.get(k).and_then(|v| parse_int_auto(v));
    if let (Some(imp), Some(part)) = (get("CPU implementer"), get("CPU part")) {
        let name = match (imp, part) {
            (0x48, 0xd01) => "TaiShan v110 (HiSilicon Kunpeng 920)",
            (0x41, 0xd0c) => "Neoverse N1",
            (0x41, 0xd40) => "Neoverse V1",
            (0x41, 0xd49) => "Neoverse N2",
            (0x41, 0xd4f) => "Neoverse V2",
            _ => return None,
        };
        return Some((
            name.to_string(),
            format!("/proc/cpuinfo CPU implementer {imp:#x}, CPU part {part:#x}"),
        ));
    }
    let (family, model) = (get("cpu family")?, get("model")?);
    let stepping = get("stepping").unwrap_or(0);
    let name = match cpuinfo.get("vendor_id").map(String::as_str) {
        Some("GenuineIntel") if family == 6 => match model {
            0x3f => "Haswell-EP",
            0x4f | 0x56 => "Broadwell-EP",
            0x4e | 0x5e => "Skylake (client)",
            0x8e | 0x9e => "Kaby Lake / Coffee Lake (client)",
            0x55 if stepping >= 10 => "Cooper Lake-SP",
            0x55 if stepping >= 5 => "Cascade Lake-SP",
            0x55 => "Skylake-SP",
            0x6a | 0x6c => "Ice Lake-SP",
            0x8f => "Sapphire Rapids",
            0xcf => "Emerald Rapids",
            0xad => "Granite Rapids",
            _ => return None,
        },
        Some("AuthenticAMD") => match (family, model) {
            (0x17, 0x00..=0x2f) => "Zen / Zen+",
            (0x17, _) => "Zen 2",
            (0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => "Zen 4",
            (0x19, _) => "Zen 3",
            (0x1a, _) => "Zen 5",
            _ => return None,
        },
        _ => return None,
    };
    Some((
        name.to_string(),
        format!("/proc/cpuinfo cpu family {family}, model {model}, stepping {stepping}"),
    ))
}

/// Typical latencies used to fill what sysfs cannot give, by vendor (ns).
pub(super) struct Typical {
    pub(super) what: &'static str,
    pub(super) l2_hit: f64,
    pub(super) llc_hit: f64,
    pub(super) c2c_smt: f64,
    pub(super) c2c_same_llc: f64,
    pub(super) c2c_cross_llc: f64,
    pub(super) c2c_cross_socket: f64,
    pub(super) dram_local: f64,
    pub(super) dram_remote: f64,
}

pub(super) fn typical(vendor: &str) -> Typical {
    match vendor {
        // Zen 3 figures: the built-in epyc-7w83 (c2c measured on an EPYC 7763) and published
        // L2/L3/DRAM values; cross-socket from the same EPYC 7763 matrix (median ~304 ns).
        "amd" => Typical {
            what: "amd (Zen 3 class: published L2/L3/DRAM, c2c from the EPYC 7763 matrix)",
            l2_hit: 3.4,
            llc_hit: 13.0,
            c2c_smt: 10.0,
            c2c_same_llc: 25.0,
            c2c_cross_llc: 120.0,
            c2c_cross_socket: 300.0,
            dram_local: 110.0,
            dram_remote: 190.0,
        },
        "arm" => Typical {
            what: "arm (Kunpeng 920 / Neoverse N1 class server)",
            l2_hit: 4.0,
            llc_hit: 35.0,
            c2c_smt: 4.0,
            c2c_same_llc: 45.0,
            c2c_cross_llc: 90.0,
            c2c_cross_socket: 160.0,
            dram_local: 110.0,
            dram_remote: 180.0,
        },
        // Intel Xeon SP figures: seed 004 (LLC ~20 ns, c2c ~50 ns, DRAM 80+ ns) and the
        // Xeon 8358 matrix (cross-socket ~111 ns).
        _ => Typical {
            what: if vendor == "intel" {
                "intel (Xeon Scalable class: seed 004 and the Xeon 8358 matrix)"
            } else {
                "an unknown vendor (Intel Xeon Scalable class figures)"
            },
            l2_hit: 4.7,
            llc_hit: 20.0,
            c2c_smt: 7.0,
            c2c_same_llc: 50.0,
            c2c_cross_llc: 80.0,
            c2c_cross_socket: 110.0,
            dram_local: 85.0,
            dram_remote: 140.0,
        },
    }
}
