//! Host detection on the fixture trees (tests/fixtures/sysfs/, written by
//! tools/make_sysfs_fixtures.py), on hand-made broken trees, on the real host, and the
//! `pcpmodel detect` command.

use std::path::{Path, PathBuf};

use approx::assert_abs_diff_eq;
use assert_cmd::Command;
use pcpmodel::hw::detect::{detect, parse_cpulist, parse_size_kib, Status};
use pcpmodel::hw::machine::{Policy, Sharing};
use pcpmodel::{Error, Machine};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

const AMD: &str = "amd-ryzen9-5900x";
const INTEL: &str = "intel-xeon-gold-5222-2s";

#[test]
fn cpulist_and_size_parsers() {
    assert_eq!(
        parse_cpulist("0-2,8,10-11", "f", "x").expect("ok"),
        vec![0, 1, 2, 8, 10, 11]
    );
    assert_eq!(parse_cpulist("", "f", "x").expect("ok"), Vec::<u32>::new());
    assert_eq!(parse_cpulist("5\n", "f", "x").expect("ok"), vec![5]);
    for bad in ["a", "3-1", "1-", "0,,x"] {
        match parse_cpulist(bad, "f", "cpulist") {
            Err(Error::Parse { file, field, .. }) => {
                assert_eq!((file.as_str(), field.as_str()), ("f", "cpulist"))
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(parse_size_kib("32K", "f").expect("ok"), 32);
    assert_eq!(parse_size_kib("1280K", "f").expect("ok"), 1280);
    assert_eq!(parse_size_kib("48M", "f").expect("ok"), 49152);
    assert!(parse_size_kib("big", "f").is_err());
    assert!(parse_size_kib("", "f").is_err());
}

#[test]
fn amd_fixture_two_l3_domains() {
    let d = detect(&fixture(AMD)).expect("detect");
    assert_eq!(
        d.cpu_model.value.as_deref(),
        Some("AMD Ryzen 9 5900X 12-Core Processor")
    );
    assert_eq!(d.vendor.value.as_deref(), Some("amd"));
    assert_eq!(d.microarchitecture.value.as_deref(), Some("Zen 3"));
    assert_eq!(d.cpus.value, Some(24));
    assert_eq!(d.sockets.value, Some(1));
    assert_eq!(d.cores_per_socket.value, Some(12));
    assert_eq!(d.threads_per_core.value, Some(2));
    assert_eq!(d.numa_nodes.value, Some(1));
    assert_eq!(d.llc_domains_per_socket.value, Some(2));
    assert_eq!(d.llc_domains_per_socket.status, Status::Derived);
    let l3 = d.caches.iter().find(|c| c.level == 3).expect("L3");
    assert_eq!(l3.size_kib.value, Some(32768));
    assert_eq!(l3.shared_cpus.value, Some(12));
    assert_eq!(l3.instances.value, Some(2));
    assert_eq!(l3.shared_by.value, Some(Sharing::LlcDomain));
    // Inclusivity and latencies: never in sysfs.
    assert_eq!(l3.policy.status, Status::Missing);
    assert!(d
        .latency_ns
        .iter()
        .all(|(_, f)| f.status == Status::Missing));
    // No zoneinfo in this tree: node memory from node meminfo, below-4G missing.
    assert_eq!(d.node_mib.value, Some(vec![32049]));
    assert_eq!(d.node_mib.status, Status::Derived);
    assert_eq!(d.below_4g_mib.status, Status::Missing);
    // No cpufreq, no GHz in the model name: cpu MHz.
    assert_eq!(d.base_ghz.status, Status::Derived);
    assert_abs_diff_eq!(d.base_ghz.value.expect("clock"), 3.7, epsilon = 1e-9);
    assert_eq!(d.max_ghz.status, Status::Missing);

    let (m, assumed) = d.to_machine().expect("machine");
    assert_eq!(m.cpus(), 24);
    assert_eq!(m.llc_domains(), 2);
    assert_eq!(m.llc_bytes_per_domain(), 32 << 20);
    assert_eq!(m.l2_bytes(), 512 << 10);
    assert_eq!(m.llc().map(|c| c.policy.value), Some(Policy::Victim));
    assert!(m.latency_ns.c2c_cross_llc.is_some());
    assert!(m.latency_ns.c2c_cross_socket.is_none());
    for f in [
        "cache.L3.policy",
        "latency_ns.l2_hit",
        "latency_ns.c2c_cross_llc",
        "latency_ns.dram_local",
        "memory.below_4g_mib",
        "memory.reserved_mib_per_node",
    ] {
        assert!(assumed.iter().any(|a| a == f), "{f} not in {assumed:?}");
    }
    assert!(
        !assumed.iter().any(|a| a.starts_with("topology.")),
        "{assumed:?}"
    );
    // Every assumed value says so, and names the vendor.
    let l = &m.latency_ns.dram_local.source;
    assert!(l.starts_with("assumed: missing from sysfs"), "{l}");
    assert!(l.contains("typical value for amd"), "{l}");
    assert!(m.topology.sockets.source.starts_with("detected:"));
}

#[test]
fn intel_fixture_two_sockets_smt2() {
    let d = detect(&fixture(INTEL)).expect("detect");
    assert_eq!(d.vendor.value.as_deref(), Some("intel"));
    assert_eq!(
        d.microarchitecture.value.as_deref(),
        Some("Cascade Lake-SP")
    );
    assert_eq!(
        (
            d.cpus.value,
            d.sockets.value,
            d.cores_per_socket.value,
            d.threads_per_core.value
        ),
        (Some(16), Some(2), Some(4), Some(2))
    );
    assert_eq!(d.numa_nodes.value, Some(2));
    assert_eq!(d.llc_domains_per_socket.value, Some(1));
    // From /proc/zoneinfo: present pages per node, DMA + DMA32, unmanaged less memmap.
    assert_eq!(d.node_mib.value, Some(vec![49152, 49152]));
    assert_eq!(d.below_4g_mib.value, Some((3998 + 486400) * 4 / 1024));
    assert_eq!(d.reserved_mib_per_node.value, Some(106));
    assert_eq!(d.base_ghz.status, Status::Detected);
    assert_abs_diff_eq!(d.base_ghz.value.expect("base"), 3.8, epsilon = 1e-9);
    assert_abs_diff_eq!(d.max_ghz.value.expect("max"), 3.9, epsilon = 1e-9);
    let l2 = d.caches.iter().find(|c| c.level == 2).expect("L2");
    assert_eq!(l2.policy.value, Some(Policy::Private));

    let (m, assumed) = d.to_machine().expect("machine");
    assert_eq!(m.cpus(), 16);
    // The zone layout takes the kernel's own managed counts from the fixture's zoneinfo, not
    // a derivation from MiB sizes (which moves the default pcp->high by the rounding).
    let zi = std::fs::read_to_string(fixture(INTEL).join("proc/zoneinfo")).unwrap();
    let managed_of = |node: u32, zone: &str| -> u64 {
        let head = format!("Node {node}, zone");
        let mut lines = zi
            .lines()
            .skip_while(|l| !(l.starts_with(&head) && l.trim_end().ends_with(zone)));
        lines
            .find_map(|l| {
                l.trim()
                    .strip_prefix("managed")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap()
    };
    let layout = pcpmodel::kernel::layout::zone_layout(&m).unwrap();
    for node in [0, 1] {
        let normal = layout
            .zones
            .iter()
            .find(|z| z.node == node && z.kind.name() == "Normal")
            .unwrap();
        assert_eq!(
            normal.managed_pages,
            managed_of(node, "Normal"),
            "node {node}"
        );
    }
    let dma32 = layout
        .zones
        .iter()
        .find(|z| z.kind.name() == "DMA32")
        .unwrap();
    assert_eq!(dma32.managed_pages, managed_of(0, "DMA32"));
    assert_eq!(m.cpus_per_node(), 8);
    assert_eq!(m.memory.node_mib.value, vec![49152, 49152]);
    assert_eq!(m.llc().map(|c| c.size_kib.value), Some(16896));
    // Intel with a 1 MiB L2: the victim-LLC assumption.
    assert_eq!(m.llc().map(|c| c.policy.value), Some(Policy::Victim));
    assert!(m.latency_ns.c2c_cross_socket.is_some());
    assert!(m.latency_ns.dram_remote.is_some());
    assert!(m.latency_ns.c2c_cross_llc.is_none());
    assert!(assumed.iter().any(|a| a == "latency_ns.c2c_cross_socket"));
    assert!(
        !assumed.iter().any(|a| a.starts_with("memory.node")),
        "{assumed:?}"
    );
    assert!(m
        .latency_ns
        .l2_hit
        .source
        .contains("typical value for intel"));
}

/// Writes `files` (path relative to root, contents) into a fresh temporary tree.
/// The machines detected from the fixtures are usable by the cost models (their cache hierarchy
/// builds); `pcpmodel detect` makes the same check before offering a machine.
#[test]
fn fixture_machines_are_modelled() {
    for name in [AMD, INTEL] {
        let d = detect(&fixture(name)).expect("detect");
        let (m, _) = d.to_machine().expect("machine");
        pcpmodel::model::cache::check_modelled(&m).expect("modelled");
    }
}

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (p, text) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

#[test]
fn sparse_tree_marks_missing_and_fills_by_assumption() {
    // Caches only: no topology, no nodes, no /proc.
    let mut files = Vec::new();
    let idx = [
        ("index0", "1", "Data", "32K", "0-1"),
        ("index1", "2", "Unified", "1024K", "0-1"),
        ("index2", "3", "Unified", "16384K", "0-3"),
    ];
    let mut owned = Vec::new();
    for cpu in 0..4 {
        for (i, level, ty, size, shared) in idx {
            let sib = if level == "3" {
                shared.to_string()
            } else if cpu < 2 {
                "0-1".to_string()
            } else {
                "2-3".to_string()
            };
            let base = format!("sys/devices/system/cpu/cpu{cpu}/cache/{i}");
            owned.push((format!("{base}/level"), level.to_string()));
            owned.push((format!("{base}/type"), ty.to_string()));
            owned.push((format!("{base}/size"), size.to_string()));
            owned.push((format!("{base}/shared_cpu_list"), sib));
        }
    }
    for (p, t) in &owned {
        files.push((p.as_str(), t.as_str()));
    }
    // Without any memory file the tree cannot describe a machine: an error saying so, not a
    // machine with invented memory (issue 10, S11).
    let bare = tree(&files);
    let e = detect(bare.path())
        .expect("detect")
        .to_machine()
        .expect_err("no memory information");
    assert!(e.to_string().contains("the memory"), "{e}");
    files.push(("proc/meminfo", "MemTotal:       16384000 kB\n"));
    let dir = tree(&files);
    let d = detect(dir.path()).expect("detect");
    assert_eq!(d.cpus.value, Some(4));
    assert_eq!(d.sockets.status, Status::Missing);
    assert_eq!(d.threads_per_core.status, Status::Derived);
    assert_eq!(d.threads_per_core.value, Some(2));
    assert_eq!(d.cpu_model.status, Status::Missing);
    assert_eq!(d.vendor.status, Status::Missing);
    assert_eq!(d.mem_total_mib.status, Status::Detected);
    let l1 = &d.caches[0];
    assert_eq!(l1.ways.status, Status::Missing);
    assert_eq!(l1.line_bytes.status, Status::Missing);

    let (m, assumed) = d.to_machine().expect("machine from a sparse tree");
    assert_eq!(m.topology.sockets.value, 1);
    assert_eq!(m.topology.cores_per_socket.value, 2);
    assert_eq!(m.cpus(), 4);
    for f in [
        "topology.sockets",
        "cpu.model",
        "memory.below_4g_mib",
        "cache.L1d.ways",
        "cache.L1d.line_bytes",
        "clock.base_ghz",
    ] {
        assert!(assumed.iter().any(|a| a == f), "{f} not in {assumed:?}");
    }
    assert!(m
        .topology
        .sockets
        .source
        .starts_with("assumed: missing from sysfs"));
}

#[test]
fn malformed_files_are_parse_errors_naming_file_and_field() {
    let dir = tree(&[
        ("sys/devices/system/cpu/cpu0/cache/index0/level", "1"),
        ("sys/devices/system/cpu/cpu0/cache/index0/type", "Data"),
        ("sys/devices/system/cpu/cpu0/cache/index0/size", "lots"),
    ]);
    match detect(dir.path()) {
        Err(Error::Parse { file, field, .. }) => {
            assert!(file.ends_with("cpu0/cache/index0/size"), "{file}");
            assert_eq!(field, "size");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    let dir = tree(&[
        (
            "sys/devices/system/cpu/cpu0/topology/physical_package_id",
            "0",
        ),
        ("sys/devices/system/cpu/cpu0/topology/core_id", "zero"),
    ]);
    match detect(dir.path()) {
        Err(Error::Parse { file, field, .. }) => {
            assert!(file.ends_with("core_id"), "{file}");
            assert_eq!(field, "core_id");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    let dir = tree(&[(
        "proc/zoneinfo",
        "Node 0, zone   Normal\n  pages free 5\n        present  lots\n",
    )]);
    match detect(dir.path()) {
        Err(Error::Parse {
            file, line, field, ..
        }) => {
            assert!(file.ends_with("zoneinfo"), "{file}");
            assert_eq!((line, field.as_str()), (3, "present"));
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn host_detects_and_gives_a_valid_machine() {
    let root = Path::new("/");
    if !root.join("sys/devices/system/cpu").is_dir() {
        eprintln!("skipped: no /sys/devices/system/cpu on this host");
        return;
    }
    let d = detect(root).expect("detect host");
    let n = d.cpus.value.expect("host CPUs");
    assert!(n >= 1);
    let (m, assumed) = d.to_machine().expect("host machine");
    m.validate("host").expect("valid");
    assert!(assumed.iter().any(|a| a == "latency_ns.dram_local"));
    eprintln!(
        "host: {} CPUs, {} x {} x {}, L2 {} KiB, LLC {} KiB x {} domain(s)",
        n,
        m.topology.sockets.value,
        m.topology.cores_per_socket.value,
        m.topology.threads_per_core.value,
        m.l2_bytes() / 1024,
        m.llc_bytes_per_domain() / 1024,
        m.llc_domains()
    );
}

// ----- CLI --------------------------------------------------------------------------------

fn pcpmodel() -> Command {
    Command::cargo_bin("pcpmodel").expect("binary built")
}

#[test]
fn cli_detect_table_on_fixture() {
    let out = pcpmodel()
        .args(["detect", "--root"])
        .arg(fixture(AMD))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for s in [
        "field",
        "status",
        "how",
        "topology.llc_domains_per_socket",
        "inclusivity is not in sysfs",
        "missing",
        "derived",
        "detected",
        "KiB",
        "latency_ns.c2c_same_llc",
    ] {
        assert!(text.contains(s), "{s} not in:\n{text}");
    }
}

#[test]
fn cli_detect_json_on_fixture() {
    let out = pcpmodel()
        .args(["detect", "--format", "json", "--root"])
        .arg(fixture(INTEL))
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(v["topology.sockets"]["value"], 2);
    assert_eq!(v["topology.sockets"]["status"], "detected");
    assert!(v["topology.sockets"]["source"].is_string());
    assert_eq!(v["cache.L3.policy"]["status"], "missing");
    assert!(v["cache.L3.policy"]["value"].is_null());
    assert_eq!(v["memory.node_mib"]["value"][1], 49152);
    let m: Machine = serde_json::from_value(v["machine"].clone()).expect("machine");
    m.validate("json").expect("valid");
    assert_eq!(m.cpus(), 16);
    assert!(v["assumed"]
        .as_array()
        .expect("list")
        .iter()
        .any(|a| a == "latency_ns.dram_remote"));
}

#[test]
fn cli_detect_toml_is_a_machine_file() {
    let out = pcpmodel()
        .args(["detect", "--toml", "--root"])
        .arg(fixture(AMD))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let m = Machine::from_toml_str(&text, "detected.toml").expect("valid machine file");
    assert_eq!(m.llc_domains(), 2);
    // And it is usable as a machine path.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("host.toml");
    std::fs::write(&p, &text).expect("write");
    pcpmodel()
        .args(["machine", "show"])
        .arg(&p)
        .assert()
        .success()
        .stdout(predicates::str::contains("assumed: missing from sysfs"));
}

#[test]
fn cli_detect_host_and_csv() {
    if !Path::new("/sys/devices/system/cpu").is_dir() {
        eprintln!("skipped: no /sys/devices/system/cpu on this host");
        return;
    }
    pcpmodel().arg("detect").assert().success();
    let out = pcpmodel()
        .args(["detect", "--format", "csv"])
        .assert()
        .success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(csv.starts_with("field,value,unit,status,how"), "{csv}");
}

#[test]
fn cli_detect_nonexistent_root_is_an_error() {
    pcpmodel()
        .args(["detect", "--root", "/no/such/root/for/pcpmodel"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("/no/such/root/for/pcpmodel"));
}

#[test]
fn cli_detect_empty_root_is_an_error_saying_what_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An empty tree: everything missing. The table (here JSON) still shows what was found, and
    // the command fails (exit 2) naming what a machine cannot be described without, instead of
    // a machine made entirely of assumptions (issue 10, S11).
    let out = pcpmodel()
        .args(["detect", "--format", "json", "--root"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the CPUs"));
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(v["cpus"]["status"], "missing");
    assert!(v["machine"].is_null());
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// Issue 35: a host whose /proc/cpuinfo says `cpu MHz : 2445.412` was shown a clock of
/// `2.4454119999999997` GHz (2445.412 / 1000 in binary). cpuinfo prints the clock to the kHz, so
/// the GHz value has six decimals and must print as such in the table and the machine TOML.
#[test]
fn cli_detect_prints_the_cpuinfo_clock_without_binary_noise() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture(AMD), dir.path());
    let cpuinfo = dir.path().join("proc/cpuinfo");
    let text = std::fs::read_to_string(&cpuinfo).expect("cpuinfo");
    assert!(text.contains("cpu MHz\t: 3700.000"), "fixture changed");
    std::fs::write(&cpuinfo, text.replace("3700.000", "2445.412")).expect("write");
    for args in [
        &["detect"][..],
        &["detect", "--toml"][..],
        &["detect", "--format", "json"][..],
    ] {
        let out = pcpmodel()
            .args(args)
            .arg("--root")
            .arg(dir.path())
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(stdout.contains("2.445412"), "{args:?}:\n{stdout}");
        assert!(!stdout.contains("2.44541199"), "{args:?}:\n{stdout}");
    }
}
