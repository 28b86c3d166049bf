//! The engine against zoneinfo fixtures built from the formulas' source at ten kernel
//! versions (tests/fixtures/kernel/zoneinfo/, written by its gen.py: an independent Python
//! re-implementation; each file's `#` header says how it was built and for which kernel).
//!
//! Tolerance: none. Every number in /proc/zoneinfo is an integer the kernel computes with C
//! integer arithmetic, so the check is exact (live 6.7+ `high` values only have to lie in
//! [high_min, high_max] or be 0).

use pcpmodel::kernel::zoneinfo::{check_zoneinfo, parse_zoneinfo, CheckOptions, CpusPerNode};
use pcpmodel::kernel::KernelVersion;

const VERSIONS: [&str; 10] = [
    "4.14", "4.19", "5.4", "5.10", "5.15", "6.1", "6.6", "6.8", "6.12", "6.18",
];

struct Fixture {
    version: KernelVersion,
    cpus_per_node: u32,
    info: pcpmodel::kernel::ZoneInfo,
}

fn fixture(v: &str) -> Fixture {
    let name = format!("zoneinfo-{v}.txt");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kernel/zoneinfo")
        .join(&name);
    let text = std::fs::read_to_string(&path).unwrap();
    let header = |key: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
            .unwrap_or_else(|| panic!("{name}: no '# {key}:' header"))
            .to_string()
    };
    let version = KernelVersion::parse(&header("kernel")).unwrap();
    assert_eq!(version.to_string(), v, "{name}: header and file name agree");
    let cpus_per_node = header("cpus_per_node").parse().unwrap();
    // The header is the fixture's, not zoneinfo's: blank it (keeping line numbers).
    let body: String = text
        .lines()
        .map(|l| if l.starts_with('#') { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    Fixture {
        version,
        cpus_per_node,
        info: parse_zoneinfo(&body, &name).unwrap(),
    }
}

fn check(f: &Fixture, version: KernelVersion) -> pcpmodel::kernel::ZoneinfoCheck {
    let opts = CheckOptions::new(version, CpusPerNode::Uniform(f.cpus_per_node));
    check_zoneinfo(&f.info, &opts).unwrap()
}

#[test]
fn the_engine_matches_fixtures_at_ten_versions() {
    for v in VERSIONS {
        let f = fixture(v);
        let c = check(&f, f.version);
        let bad: Vec<_> = c
            .rows
            .iter()
            .filter(|r| r.status.word() == "MISMATCH")
            .collect();
        assert!(c.all_match(), "kernel {v}: {bad:#?}");
        assert!(
            c.rows.len() > 10,
            "kernel {v}: {} rows checked",
            c.rows.len()
        );
    }
}

#[test]
fn the_fixtures_tell_the_eras_apart() {
    // 4.14: batch 31 / high 186 (512 KiB cap); checked as 4.19 it must fail.
    let f = fixture("4.14");
    let normal = f
        .info
        .zones
        .iter()
        .find(|z| z.kind.name() == "Normal")
        .unwrap();
    assert!(normal
        .pagesets
        .iter()
        .all(|p| p.batch_pages == 31 && p.high_pages == 186));
    assert!(!check(&f, KernelVersion::new(4, 19)).all_match());
    // 5.10 (6 * batch) vs 5.15 (low watermark split): the same file fails the other era.
    assert!(!check(&fixture("5.10"), KernelVersion::new(5, 15)).all_match());
    assert!(!check(&fixture("5.15"), KernelVersion::new(5, 10)).all_match());
    // 6.8's live, auto-tuned highs (0, high_min, grown) fail 6.6's fixed high. (The reverse
    // passes: before 6.13 zoneinfo prints no high_min, and a fixed high equal to high_min is
    // a valid live value.)
    assert!(!check(&fixture("6.8"), KernelVersion::new(6, 6)).all_match());
}
