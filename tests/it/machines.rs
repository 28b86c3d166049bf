//! The machine catalogue: every file in models/ loads and validates, impossible machines are
//! rejected naming file and field, the core-to-core latencies in the files are recomputed from
//! the third-party matrices, and the `machines` / `machine show` commands work.

use std::path::{Path, PathBuf};

use approx::assert_abs_diff_eq;
use assert_cmd::Command;
use pcpmodel::hw::machine::{Policy, BUILTIN};
use pcpmodel::{Error, Machine};

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn icelake_text() -> String {
    std::fs::read_to_string(models_dir().join("icelake-server.toml")).expect("models/ readable")
}

/// Replaces exactly one occurrence of `from` in `text`.
fn patch(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "pattern {from:?} must occur once"
    );
    text.replacen(from, to, 1)
}

/// Expects an error naming `label` and a field that starts with `field`: `Error::Parse` with the
/// field's line, or `Error::Invalid` when the field has no line of its own.
fn expect_invalid(text: &str, field: &str) -> String {
    match Machine::from_toml_str(text, "bad.toml") {
        Err(Error::Invalid {
            file,
            field: f,
            message,
        })
        | Err(Error::Parse {
            file,
            field: f,
            message,
            ..
        }) => {
            assert_eq!(file, "bad.toml");
            assert!(
                f.starts_with(field),
                "expected field {field}, got {f}: {message}"
            );
            format!("{f}: {message}")
        }
        other => panic!("expected Invalid({field}), got {other:?}"),
    }
}

// ----- the catalogue ----------------------------------------------------------------------

#[test]
fn every_file_in_models_loads_validates_and_is_builtin() {
    let mut n = 0;
    for entry in std::fs::read_dir(models_dir()).expect("models/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        n += 1;
        let m = Machine::from_path(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        assert_eq!(m.name, stem, "name field must equal the file name");
        let b = Machine::builtin(stem).unwrap_or_else(|e| panic!("{stem} not built in: {e}"));
        assert_eq!(b, m);
        // Round trip through the TOML writer.
        let again = Machine::from_toml_str(&m.to_toml_string().expect("serialise"), "rt")
            .expect("round trip");
        assert_eq!(again, m);
    }
    assert_eq!(
        n,
        BUILTIN.len(),
        "every models/*.toml is in BUILTIN and back"
    );
    assert!(n >= 7);
}

#[test]
fn fixed_names_exist() {
    for name in [
        "icelake-server",
        "skylake-desktop",
        "epyc-7w83",
        "xeon-8260",
        "broadwell-2s",
        "memcg-72cpu",
        "kunpeng-920",
    ] {
        Machine::builtin(name).unwrap_or_else(|e| panic!("{e}"));
    }
    let e = Machine::builtin("nope").unwrap_err().to_string();
    assert!(e.contains("icelake-server"), "{e}");
}

#[test]
fn icelake_server_matches_seed_004() {
    let m = Machine::builtin("icelake-server").expect("built in");
    assert_eq!(m.cpus(), 128);
    assert_eq!(m.cores(), 64);
    assert_eq!(m.cpus_per_node(), 64);
    assert_eq!(m.llc_domains(), 2);
    assert_eq!(m.l2_pages(), 320); // "1.25MiB L2 = 320 pages"
    assert_eq!(m.llc_pages_per_domain(), 12288); // "48MiB LLC = 12288 pages"
    assert_eq!(m.l2_bytes(), 1280 * 1024);
    assert_eq!(m.llc_bytes_per_domain(), 48 << 20);
    assert_eq!(m.total_mib(), 131072); // "128G memory"
    assert_eq!(m.memory.node_mib.value, vec![65536, 65536]);
    assert_eq!(m.memory.below_4g_mib.value, 2048);
    assert_eq!(m.memory.reserved_mib_per_node.value, 64);
    assert_eq!(m.memory.struct_page_bytes.value, 64);
    assert_eq!(m.llc().map(|c| c.policy.value), Some(Policy::Victim));
    assert_eq!(m.cache(1).map(|c| c.size_kib.value), Some(48));
    assert!(m.cache(4).is_none());
}

#[test]
fn other_seed_machines_have_their_stated_shapes() {
    let s = Machine::builtin("skylake-desktop").expect("built in");
    assert_eq!(
        (s.cpus(), s.l2_pages(), s.llc_pages_per_domain()),
        (8, 64, 2048)
    );
    assert_eq!(s.llc().map(|c| c.policy.value), Some(Policy::Inclusive));
    let e = Machine::builtin("epyc-7w83").expect("built in");
    assert_eq!(
        (e.cores(), e.llc_domains(), e.cores_per_llc_domain()),
        (64, 8, 8)
    );
    assert_eq!(e.llc_bytes_per_domain(), 32 << 20);
    assert_eq!(e.topology.numa_nodes.value, 1);
    let x = Machine::builtin("xeon-8260").expect("built in");
    assert_eq!((x.cpus(), x.topology.numa_nodes.value), (96, 2));
    assert_eq!(x.llc().map(|c| c.size_kib.value), Some(36608)); // 35.75 MiB
    let b = Machine::builtin("broadwell-2s").expect("built in");
    assert_eq!(b.cpus(), 88);
    assert_eq!(b.llc().map(|c| c.policy.value), Some(Policy::Inclusive));
    let m = Machine::builtin("memcg-72cpu").expect("built in");
    assert_eq!(m.cpus(), 72);
    assert!(!m.unknown.is_empty());
    for (path, src) in m.sources() {
        assert!(src.starts_with("assumed:"), "{path}: {src}");
    }
    let k = Machine::builtin("kunpeng-920").expect("built in");
    assert!(k.cpus() >= 90, "seed 003 runs 90 tasks");
    assert!(!k.unknown.is_empty());
    for (path, src) in k.sources() {
        assert!(src.starts_with("assumed:"), "{path}: {src}");
    }
}

// ----- impossible machines ----------------------------------------------------------------

#[test]
fn llc_smaller_than_l2_is_rejected() {
    let t = patch(
        &icelake_text(),
        "size_kib = { value = 49152,",
        "size_kib = { value = 1024,",
    );
    let msg = expect_invalid(&t, "cache[2].size_kib");
    assert!(msg.contains("smaller"), "{msg}");
}

#[test]
fn zero_cores_is_rejected() {
    let t = patch(
        &icelake_text(),
        "cores_per_socket = { value = 32,",
        "cores_per_socket = { value = 0,",
    );
    expect_invalid(&t, "topology.cores_per_socket");
}

#[test]
fn negative_nan_and_zero_latencies_are_rejected() {
    for bad in ["-80.0", "nan", "0.0", "inf"] {
        let t = patch(
            &icelake_text(),
            "dram_local = { value = 80.0,",
            &format!("dram_local = {{ value = {bad},"),
        );
        expect_invalid(&t, "latency_ns.dram_local");
    }
}

#[test]
fn bad_source_prefix_is_rejected() {
    let t = patch(
        &icelake_text(),
        "l2_hit = { value = 4.7, source = \"assumed:",
        "l2_hit = { value = 4.7, source = \"guess:",
    );
    let msg = expect_invalid(&t, "latency_ns.l2_hit.source");
    assert!(msg.contains("spec"), "lists the valid kinds: {msg}");
    let t = patch(
        &icelake_text(),
        "l2_hit = { value = 4.7, source = \"assumed:",
        "l2_hit = { value = 4.7, source = \"assumed",
    );
    expect_invalid(&t, "latency_ns.l2_hit.source");
    let t = patch(
        &icelake_text(),
        "source = 'seed 004: \"dram",
        "source = 'seed: \"dram",
    );
    expect_invalid(&t, "latency_ns.dram_local.source");
}

#[test]
fn other_impossible_machines_are_rejected() {
    let ice = icelake_text();
    let cases: &[(&str, &str, &str)] = &[
        ("sockets = { value = 2,", "sockets = { value = 0,", "topology.sockets"),
        (
            "threads_per_core = { value = 2,",
            "threads_per_core = { value = 0,",
            "topology.threads_per_core",
        ),
        ("numa_nodes = { value = 2,", "numa_nodes = { value = 0,", "topology.numa_nodes"),
        ("numa_nodes = { value = 2,", "numa_nodes = { value = 3,", "topology.numa_nodes"),
        (
            "llc_domains_per_socket = { value = 1,",
            "llc_domains_per_socket = { value = 0,",
            "topology.llc_domains_per_socket",
        ),
        (
            "node_mib = { value = [65536, 65536],",
            "node_mib = { value = [131072],",
            "memory.node_mib",
        ),
        (
            "below_4g_mib = { value = 2048,",
            "below_4g_mib = { value = 70000,",
            "memory.below_4g_mib",
        ),
        (
            "node_mib = { value = [65536, 65536],",
            "node_mib = { value = [1024, 65536],",
            "memory.below_4g_mib",
        ),
        (
            "line_bytes = { value = 64, source = \"spec: 64-byte lines on all Intel x86 caches\" }\nways = { value = 20,",
            "line_bytes = { value = 48, source = \"spec: 64-byte lines on all Intel x86 caches\" }\nways = { value = 20,",
            "cache[1].line_bytes",
        ),
        ("level = 2", "level = 4", "cache[2].level"),
        (
            "l2_hit = { value = 4.7,",
            "l2_hit = { value = 25.0,",
            "latency_ns.llc_hit",
        ),
        (
            "llc_hit = { value = 20.0,",
            "llc_hit = { value = 90.0,",
            "latency_ns.dram_local",
        ),
        (
            "dram_remote = { value = 140.0,",
            "dram_remote = { value = 60.0,",
            "latency_ns.dram_remote",
        ),
        (
            "c2c_cross_socket = { value = 110.88,",
            "c2c_cross_socket = { value = 30.0,",
            "latency_ns.c2c_cross_socket",
        ),
        (
            "base_ghz = { value = 2.6,",
            "base_ghz = { value = -1.0,",
            "clock.base_ghz",
        ),
        ("max_ghz = { value = 3.4,", "max_ghz = { value = 2.0,", "clock.max_ghz"),
        ("vendor = \"intel\"", "vendor = \"via\"", "cpu.vendor"),
    ];
    for (from, to, field) in cases {
        expect_invalid(&patch(&ice, from, to), field);
    }
}

#[test]
fn cross_socket_and_cross_llc_latencies_required_iff_topology_has_them() {
    // One socket but a cross-socket latency.
    let sky = std::fs::read_to_string(models_dir().join("skylake-desktop.toml")).expect("read");
    let t = patch(
        &sky,
        "dram_local = {",
        "c2c_cross_socket = { value = 100.0, source = \"assumed: x\" }\ndram_local = {",
    );
    expect_invalid(&t, "latency_ns.c2c_cross_socket");
    // Two sockets without one.
    let ice = icelake_text();
    let start = ice.find("c2c_cross_socket =").expect("present");
    let end = start + ice[start..].find('\n').expect("line end") + 1;
    let t = format!("{}{}", &ice[..start], &ice[end..]);
    expect_invalid(&t, "latency_ns.c2c_cross_socket");
    // Several LLC domains without a cross-LLC latency.
    let epyc = std::fs::read_to_string(models_dir().join("epyc-7w83.toml")).expect("read");
    let start = epyc.find("c2c_cross_llc =").expect("present");
    let end = start + epyc[start..].find('\n').expect("line end") + 1;
    let t = format!("{}{}", &epyc[..start], &epyc[end..]);
    expect_invalid(&t, "latency_ns.c2c_cross_llc");
    // One LLC domain with one.
    let t = patch(
        &sky,
        "dram_local = {",
        "c2c_cross_llc = { value = 100.0, source = \"assumed: x\" }\ndram_local = {",
    );
    expect_invalid(&t, "latency_ns.c2c_cross_llc");
}

#[test]
fn inclusive_llc_must_hold_the_inner_caches() {
    let sky = std::fs::read_to_string(models_dir().join("skylake-desktop.toml")).expect("read");
    // 4 cores x (32 + 256) KiB = 1152 KiB > 1024 KiB.
    let t = patch(
        &sky,
        "size_kib = { value = 8192,",
        "size_kib = { value = 1024,",
    );
    let msg = expect_invalid(&t, "cache[2].size_kib");
    assert!(msg.contains("inclusive"), "{msg}");
}

#[test]
fn malformed_toml_is_a_parse_error_with_line() {
    let t = patch(&icelake_text(), "[memory]", "[memory\n");
    match Machine::from_toml_str(&t, "bad.toml") {
        Err(Error::Parse { file, line, .. }) => {
            assert_eq!(file, "bad.toml");
            let expect = t.lines().position(|l| l == "[memory").expect("line") + 1;
            assert_eq!(line, expect);
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    let t = patch(&icelake_text(), "cores_per_socket =", "cores_per_sockt =");
    match Machine::from_toml_str(&t, "bad.toml") {
        Err(Error::Parse { line, message, .. }) => {
            assert!(line > 0);
            assert!(message.contains("cores_per_sockt"), "{message}");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

// ----- core-to-core derivation ------------------------------------------------------------

/// The third-party core-to-core matrices, copied into the project with their README
/// (data/core-to-core/README.md gives their source).
fn matrix(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/core-to-core")
        .join(name)
}

/// A lower-triangular core-to-core CSV (no header, empty upper cells) as `(i, j, ns)` pairs
/// with `i > j`, and the CPU count.
fn load_matrix(path: &Path) -> (usize, Vec<(usize, usize, f64)>) {
    let text = std::fs::read_to_string(path).expect("matrix readable");
    let mut pairs = Vec::new();
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        n = i + 1;
        for (j, cell) in line.split(',').enumerate() {
            let cell = cell.trim();
            if cell.is_empty() {
                continue;
            }
            let v: f64 = cell.parse().expect("number");
            assert!(
                j < i,
                "{}: value above the diagonal at {i},{j}",
                path.display()
            );
            pairs.push((i, j, v));
        }
    }
    (n, pairs)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// The block structure of a matrix: latency levels are separated where sorted pair latencies
/// jump by more than 30 %; at each threshold, CPUs joined by faster pairs form groups (SMT
/// pairs, LLC domains, sockets). Returns, for each level, each CPU's group id and the group
/// sizes, plus the pair latencies classified by the innermost level whose group holds both.
struct Blocks {
    group_sizes: Vec<Vec<usize>>,
    groups: Vec<Vec<usize>>,
    by_level: Vec<Vec<f64>>,
}

fn blocks(n: usize, pairs: &[(usize, usize, f64)]) -> Blocks {
    let mut sorted: Vec<f64> = pairs.iter().map(|p| p.2).collect();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let thresholds: Vec<f64> = sorted
        .windows(2)
        .filter(|w| w[1] / w[0] > 1.3)
        .map(|w| (w[0] * w[1]).sqrt())
        .collect();
    let mut groups = Vec::new();
    let mut group_sizes = Vec::new();
    for &t in &thresholds {
        let mut parent: Vec<usize> = (0..n).collect();
        for &(i, j, v) in pairs {
            if v < t {
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                parent[a] = b;
            }
        }
        let g: Vec<usize> = (0..n).map(|i| find(&mut parent, i)).collect();
        let mut sizes: Vec<usize> = {
            let mut count = std::collections::BTreeMap::new();
            for &r in &g {
                *count.entry(r).or_insert(0usize) += 1;
            }
            count.into_values().collect()
        };
        sizes.sort_unstable();
        sizes.dedup();
        group_sizes.push(sizes);
        groups.push(g);
    }
    let mut by_level = vec![Vec::new(); thresholds.len() + 1];
    for &(i, j, v) in pairs {
        let k = groups
            .iter()
            .position(|g| g[i] == g[j])
            .unwrap_or(thresholds.len());
        by_level[k].push(v);
    }
    Blocks {
        group_sizes,
        groups,
        by_level,
    }
}

fn latency(m: &Machine, name: &str) -> f64 {
    m.latency_ns
        .named()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.value)
        .unwrap_or_else(|| panic!("{} has no {name}", m.name))
}

/// Tolerance for the recomputed medians: the files hold them rounded to 0.01 ns.
const C2C_TOL_NS: f64 = 0.006;

#[test]
fn icelake_c2c_recomputed_from_xeon_8358_matrix() {
    let (n, pairs) = load_matrix(&matrix("xeon-platinum-8358-2s.csv"));
    assert_eq!(n, 64);
    assert_eq!(pairs.len(), 64 * 63 / 2);
    let mut b = blocks(n, &pairs);
    // One jump: two groups of 32 = two sockets of 32 cores, no SMT pairs measured.
    assert_eq!(b.group_sizes, vec![vec![32]]);
    assert!((0..32).all(|i| b.groups[0][i] == b.groups[0][0]));
    assert!((32..64).all(|i| b.groups[0][i] == b.groups[0][32]));
    assert_eq!(b.by_level[0].len(), 2 * 32 * 31 / 2);
    assert_eq!(b.by_level[1].len(), 32 * 32);
    let same = median(&mut b.by_level[0]);
    let cross = median(&mut b.by_level[1]);
    eprintln!("xeon-platinum-8358-2s: same socket {same:.3} ns, cross socket {cross:.3} ns");
    let m = Machine::builtin("icelake-server").expect("built in");
    assert_abs_diff_eq!(latency(&m, "c2c_same_llc"), same, epsilon = C2C_TOL_NS);
    assert_abs_diff_eq!(latency(&m, "c2c_cross_socket"), cross, epsilon = C2C_TOL_NS);
    // Published medians (nviennot/core-to-core-latency README): about 51 and 108 ns.
    assert_abs_diff_eq!(same, 51.0, epsilon = 2.0);
    assert_abs_diff_eq!(cross, 108.0, epsilon = 5.0);
}

#[test]
fn epyc_c2c_recomputed_from_epyc_7763_matrix() {
    let (n, pairs) = load_matrix(&matrix("epyc-7763-2s.csv"));
    assert_eq!(n, 256);
    let mut b = blocks(n, &pairs);
    // Three jumps: SMT pairs (2 CPUs), CCDs (8 cores x 2 threads), sockets (64 x 2).
    assert_eq!(b.group_sizes, vec![vec![2], vec![16], vec![128]]);
    // Siblings are i and i + 128; a CCD is 8 consecutive CPUs and their siblings.
    assert!((0..128).all(|i| b.groups[0][i] == b.groups[0][i + 128]));
    assert!((0..8).all(|i| b.groups[1][i] == b.groups[1][0]));
    assert_ne!(b.groups[1][0], b.groups[1][8]);
    assert_eq!(b.by_level[0].len(), 128);
    let smt = median(&mut b.by_level[0]);
    let same_ccd = median(&mut b.by_level[1]);
    let cross_ccd = median(&mut b.by_level[2]);
    let cross_socket = median(&mut b.by_level[3]);
    eprintln!(
        "epyc-7763-2s: SMT {smt:.3} ns, same CCD {same_ccd:.3} ns, cross CCD {cross_ccd:.3} ns, \
         cross socket {cross_socket:.3} ns ({} / {} / {} / {} pairs)",
        b.by_level[0].len(),
        b.by_level[1].len(),
        b.by_level[2].len(),
        b.by_level[3].len()
    );
    let m = Machine::builtin("epyc-7w83").expect("built in");
    assert_abs_diff_eq!(latency(&m, "c2c_smt"), smt, epsilon = C2C_TOL_NS);
    assert_abs_diff_eq!(latency(&m, "c2c_same_llc"), same_ccd, epsilon = C2C_TOL_NS);
    assert_abs_diff_eq!(
        latency(&m, "c2c_cross_llc"),
        cross_ccd,
        epsilon = C2C_TOL_NS
    );
    assert!(cross_socket > cross_ccd);
}

// ----- CLI --------------------------------------------------------------------------------

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").expect("binary built")
}

#[test]
fn cli_machines_table_json_csv() {
    let out = pcpmodel().arg("machines").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for name in [
        "icelake-server",
        "skylake-desktop",
        "epyc-7w83",
        "kunpeng-920",
    ] {
        assert!(text.contains(name), "{text}");
    }
    assert!(text.contains("2 x 32 x 2"), "{text}");
    assert!(text.contains("(ns)"), "units in headers: {text}");

    let out = pcpmodel()
        .args(["machines", "--format", "json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    let arr = v.as_array().expect("array");
    assert_eq!(arr.len(), BUILTIN.len());
    let ice = arr
        .iter()
        .find(|m| m["name"] == "icelake-server")
        .expect("icelake-server listed");
    assert_eq!(ice["cpus"], 128);
    assert_eq!(ice["l2_kib"], 1280);
    assert_eq!(ice["llc_policy"], "victim");

    let out = pcpmodel()
        .args(["--format", "csv", "machines"])
        .assert()
        .success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        csv.lines().next().unwrap_or("").starts_with("name,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), BUILTIN.len() + 1);
}

#[test]
fn cli_machine_show_builtin_and_file() {
    let out = pcpmodel()
        .args(["machine", "show", "icelake-server"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("memory.node_mib"), "{text}");
    assert!(text.contains("latency_ns.c2c_cross_socket"), "{text}");
    assert!(text.contains("MiB"), "{text}");
    assert!(text.contains("seed 004"), "{text}");

    let out = pcpmodel()
        .args(["machine", "show", "epyc-7w83", "--format", "json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    // The JSON is the Machine itself: it parses back.
    let m: Machine = serde_json::from_value(v).expect("json is a Machine");
    assert_eq!(m, Machine::builtin("epyc-7w83").expect("built in"));

    let path = models_dir().join("skylake-desktop.toml");
    pcpmodel()
        .args(["machine", "show"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicates::str::contains("skylake-desktop"));
}

#[test]
fn cli_machine_show_errors_exit_2() {
    pcpmodel()
        .args(["machine", "show", "no-such-machine"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("icelake-server"));

    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    let t = patch(
        &icelake_text(),
        "size_kib = { value = 49152,",
        "size_kib = { value = 1024,",
    );
    std::fs::write(&bad, t).expect("write");
    pcpmodel()
        .args(["machine", "show"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bad.toml"))
        .stderr(predicates::str::contains("cache[2].size_kib"));
}

#[test]
fn a_type_error_names_the_line_and_the_key() {
    let text = pcpmodel::hw::machine::BUILTIN
        .iter()
        .find(|b| b.name == "icelake-server")
        .unwrap()
        .toml
        .replacen(
            "cores_per_socket = { value = 32",
            "cores_per_socket = { value = -3",
            1,
        );
    let line = text
        .lines()
        .position(|l| l.starts_with("cores_per_socket"))
        .unwrap()
        + 1;
    let e = pcpmodel::Machine::from_toml_str(&text, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("bad.toml:{line}: cores_per_socket:")),
        "{e}"
    );
}

/// A machine file may carry measured reuse costs per level; each is bounded like a latency
/// (negative, NaN and infinite refused with the field named), needs a source, and an unknown
/// key inside the table is refused. Without the table the latencies price reuse, as before.
#[test]
fn reuse_costs_load_and_bad_ones_are_rejected() {
    let table = |v: &str| {
        format!(
            "{}\n[reuse_ns_per_page]\nprivate = {{ value = 105.0, source = \"measured: test\" }}\nllc = {{ value = 70.0, source = \"measured: test\" }}\ndram = {{ value = {v}, source = \"measured: test\" }}\n",
            icelake_text()
        )
    };
    let m = Machine::from_toml_str(&table("340.0"), "ok.toml").unwrap();
    assert_eq!(m.reuse_ns_per_page.as_ref().unwrap().dram.value, 340.0);
    for bad in ["-1.0", "nan", "inf", "1e9"] {
        expect_invalid(&table(bad), "reuse_ns_per_page.dram");
    }
    let extra = table("340.0").replace("llc = {", "l3 = {");
    assert!(Machine::from_toml_str(&extra, "bad.toml").is_err());
    assert!(Machine::from_toml_str(&icelake_text(), "ice.toml")
        .unwrap()
        .reuse_ns_per_page
        .is_none());
}
