//! The catalogue of compiled-in measurement tables (`data/*.csv`, `data/literature/*.csv`,
//! `data/lkp/*.csv`).

use super::{csv_error, reader};
use crate::error::Result;
/// One compiled-in table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableInfo {
    /// Name used on the command line (`pcpmodel data NAME`): the file stem.
    pub name: &'static str,
    /// Seed thread number (`000`..`004`), or `000-004` for tables drawn from several.
    pub thread: &'static str,
    /// Path of the CSV file relative to the crate root, e.g. `data/004_netperf_pcp_high.csv`.
    pub file: &'static str,
    /// One line for people.
    pub description: &'static str,
    /// The CSV text (header row first).
    pub csv_text: &'static str,
}

impl TableInfo {
    /// Number of data rows (records after the header).
    pub fn row_count(&self) -> Result<usize> {
        let mut rdr = reader(self.csv_text);
        let mut n = 0;
        for rec in rdr.records() {
            rec.map_err(|e| csv_error(self.file, &e, None))?;
            n += 1;
        }
        Ok(n)
    }

    /// The header row (column names with units).
    pub fn columns(&self) -> Result<Vec<String>> {
        let mut rdr = reader(self.csv_text);
        let h = rdr.headers().map_err(|e| csv_error(self.file, &e, None))?;
        Ok(h.iter().map(str::to_string).collect())
    }

    /// Every data row as strings, in file order.
    pub fn rows(&self) -> Result<Vec<Vec<String>>> {
        let mut rdr = reader(self.csv_text);
        let mut out = Vec::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| csv_error(self.file, &e, None))?;
            out.push(rec.iter().map(str::to_string).collect());
        }
        Ok(out)
    }

    /// The rows as a JSON array of objects keyed by column name. Cells that parse as numbers
    /// become JSON numbers, `true`/`false` become booleans, empty cells become `null`.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let cols = self.columns()?;
        let rows = self.rows()?;
        let arr = rows
            .into_iter()
            .map(|r| {
                let mut obj = serde_json::Map::new();
                for (c, v) in cols.iter().zip(r) {
                    obj.insert(c.clone(), json_cell(&v));
                }
                serde_json::Value::Object(obj)
            })
            .collect();
        Ok(serde_json::Value::Array(arr))
    }
}

fn json_cell(v: &str) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::Value::Null;
    }
    if v == "true" || v == "false" {
        return serde_json::Value::Bool(v == "true");
    }
    if let Ok(i) = v.parse::<i64>() {
        return serde_json::Value::from(i);
    }
    if let Ok(u) = v.parse::<u64>() {
        return serde_json::Value::from(u);
    }
    // Only plain decimals become numbers: "2.40" yes, "inf", "NaN", "1e3" stay text.
    if v.chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
    {
        if let Some(n) = v.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return serde_json::Value::Number(n);
        }
    }
    serde_json::Value::String(v.to_string())
}

macro_rules! table {
    ($name:literal, $thread:literal, $desc:literal) => {
        TableInfo {
            name: $name,
            thread: $thread,
            file: concat!("data/", $name, ".csv"),
            description: $desc,
            csv_text: include_str!(concat!("../../data/", $name, ".csv")),
        }
    };
}

/// Every compiled-in table, in thread order.
pub const TABLES: &[TableInfo] = &[
    table!(
        "000_funclatency_summary",
        "000",
        "rmqueue_bulk() funclatency runs: machine, nodes, pcp_batch_scale_max, printed avg/total/count"
    ),
    table!(
        "000_funclatency_epyc-7w83_1node_scale5",
        "000",
        "rmqueue_bulk() latency histogram, EPYC 7W83 KVM guest, 1 node, pcp_batch_scale_max 5"
    ),
    table!(
        "000_funclatency_epyc-7w83_1node_scale0",
        "000",
        "rmqueue_bulk() latency histogram, EPYC 7W83 KVM guest, 1 node, pcp_batch_scale_max 0"
    ),
    table!(
        "000_funclatency_xeon-8260_2node_scale5",
        "000",
        "rmqueue_bulk() latency histogram, Xeon 8260, 2 nodes, pcp_batch_scale_max 5"
    ),
    table!(
        "000_funclatency_xeon-8260_1node_scale5",
        "000",
        "rmqueue_bulk() latency histogram, Xeon 8260, node 0 via cpuset, pcp_batch_scale_max 5"
    ),
    table!(
        "000_funclatency_xeon-8260_1node_scale0",
        "000",
        "rmqueue_bulk() latency histogram, Xeon 8260, node 0 via cpuset, pcp_batch_scale_max 0"
    ),
    table!(
        "001_memcg_charge_batch",
        "001",
        "netperf TCP_SENDFILE throughput, 36 instances on 72 CPUs, MEMCG_CHARGE_BATCH 32 vs 64"
    ),
    table!(
        "001_memcg_cover_letter_v2",
        "001",
        "the series' v2 cover letter: the same netperf workload in the root memcg and with each patch alone"
    ),
    table!(
        "002_numa_stat_cycles",
        "002",
        "CPU cycles per page alloc+free, page_bench01/03, vm.numa_stat 1 vs 0, 2-socket Broadwell"
    ),
    table!(
        "003_perf_lock",
        "003",
        "perf lock contention rows, page_fault1 (90 tasks, 64K mTHP) and shell8, without/with high-order PCP"
    ),
    table!(
        "003_shell8_score",
        "003",
        "stated unixbench shell8 score change with high-order pages on PCP lists"
    ),
    table!(
        "004_netperf_pcp_high",
        "004",
        "netperf score vs pcp->high, 2-socket Icelake server and 4-core Skylake desktop"
    ),
    table!(
        "004_regression",
        "004",
        "the regression in thread 004's subject: f26b3fa046 (free_high) vs its parent on the Icelake server"
    ),
    table!(
        "hardware_facts",
        "000-004",
        "hardware and setup facts stated in the threads, each with its verbatim quote"
    ),
    table!(
        "literature/danieljordan_2018-01_pcp_batch310_high1860_will-it-scale_page_fault1",
        "literature",
        "will-it-scale page_fault1 pgf/s, E5-2699 v4 2S, 4.15-rc2 vs pcp batch 310/high 1860 (Daniel Jordan 2018)"
    ),
    table!(
        "literature/halbuer_2023-02_rmqueue_bulk_zone_lock_alloc_latency_vs_cores",
        "literature",
        "in-kernel bulk allocation ns per allocation vs cores 1..24, Xeon Gold 6252, order 0 and 9, default vs check moved out of zone->lock (Halbuer 2023)"
    ),
    table!(
        "literature/huang_pcp_autotune_series_2023_cover_tables",
        "literature",
        "PCP high auto-tuning series cover tables: kbuild, netperf SCTP, lmbench UNIX; lock%, free_high, zone allocations (Huang Ying 2023)"
    ),
    table!(
        "literature/huang_pcp_series_2023_patch_changelog_prose_numbers",
        "literature",
        "numbers from the changelogs of the PCP auto-tuning patches (Huang Ying 2023, prose)"
    ),
    table!(
        "literature/kemiwang_2017-08_numa_counter_threshold_page_bench03_broadwell",
        "literature",
        "page_bench03 cycles per page vs NUMA counter threshold 32..65533, 88 threads Broadwell (Kemi Wang 2017)"
    ),
    table!(
        "literature/nikhil_dhama_amd_2025_free_high_multi_benchmark",
        "literature",
        "free_high threshold batch+high_min/2 vs v6.6 across benchmarks, 2-socket AMD (Nikhil Dhama 2025)"
    ),
    table!(
        "literature/nikhil_dhama_amd_2025_free_high_threshold_iperf3_sweep",
        "literature",
        "iperf3 score and free_high events vs the free_high trigger threshold (Nikhil Dhama 2025)"
    ),
    table!(
        "lkp/lkp_netperf_sctp_stream_many_10k_icelake_2022",
        "literature",
        "kernel test robot: netperf SCTP_STREAM_MANY 10K sends on lkp-icl-2sp4 (2 x Xeon 8358), 1 and 64 pairs, parent kernels of two 2022 networking reports (independent checks, not from the literature folder)"
    ),
    table!(
        "literature/nviennot_core_to_core_latency_readme_summary",
        "literature",
        "core-to-core CAS ping-pong latency by CPU, median ns (nviennot/core-to-core-latency README)"
    ),
    table!(
        "literature/nviennot_core_to_core_latency_i7-6700K_matrix",
        "literature",
        "core-to-core latency matrix of a Core i7-6700K, ns (nviennot/core-to-core-latency)"
    ),
];
