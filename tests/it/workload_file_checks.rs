//! A user's workload file: every class of bad input the workload mutation harness
//! (tools/mutate.py, kind `workload`) and a new user's first files found is refused
//! when the file is read, with the file, the line and the dotted field, and never reaches a
//! prediction (a NaN, an internal queue error, another kind's message). One test per class.

use crate::common;

/// A minimal alloc-loop file (the shape of the README's schema), valid as it stands.
const MINIMAL: &str = r#"name = "my-loop"
kind = "alloc-loop"
description = "my loop"
source = "assumed: me"
default_machine = "icelake-server"
reference_kernel = "6.6"
[op]
what = "one page"
order = { value = 0, source = "assumed: x" }
alloc_pages = { value = 1, source = "assumed: x" }
free_pages = { value = 1, source = "assumed: x" }
freed_by = { value = "same", source = "assumed: x" }
touch_bytes_per_page = { value = 4096, source = "assumed: x" }
work = { ns = { value = 100, source = "assumed: x" } }
[tasks]
count = { value = 4, source = "assumed: x" }
nodes = { value = "one", source = "assumed: x" }
mode = { value = "process", source = "assumed: x" }
"#;

/// Writes `text` as `w.toml` in `dir` and runs `pcpmodel <args> --workload FILE` there:
/// (exit code, stderr).
fn run_in(dir: &std::path::Path, text: &str, args: &[&str]) -> (i32, String) {
    std::fs::write(dir.join("w.toml"), text).unwrap();
    let args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--workload", "w.toml"])
        .collect();
    let (code, _, err) = common::run(&args, dir);
    (code, err)
}

fn run(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    run_in(dir.path(), text, &["predict"])
}

/// Exit 2 and an error that names `w.toml:<line>: <field>`.
fn refused_at(text: &str, line: usize, field: &str) -> String {
    let (code, err) = run(text);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("w.toml:{line}: {field}:")),
        "wanted w.toml:{line}: {field}: in {err}"
    );
    err
}

fn with_params(lines: &str) -> String {
    format!("{MINIMAL}[params]\n{lines}\n")
}

#[test]
fn the_minimal_file_runs() {
    let (code, err) = run(MINIMAL);
    assert_eq!(code, 0, "{err}");
}

/// A clock of 1e-310 GHz once printed `inf` and `NaN` with exit 0: params are range-checked at
/// load (CLOCK_GHZ, 0.1..=10 GHz), with the line.
#[test]
fn alloc_loop_params_are_range_checked_when_read() {
    let cycles = MINIMAL.replace("{ ns = { value = 100", "{ cycles = { value = 100");
    for v in ["1e-310", "0", "4294967296"] {
        let text =
            format!("{cycles}[params]\nclock_ghz = {{ value = {v}, source = \"assumed: x\" }}\n");
        refused_at(&text, 20, "params.clock_ghz");
    }
    // A share of 0 left the refills no think time: the queue's own error, unlocated.
    refused_at(
        &with_params("alloc_work_share = { value = 0, source = \"assumed: x\" }"),
        20,
        "params.alloc_work_share",
    );
    refused_at(
        &with_params("probe_ns = { value = 1e12, source = \"assumed: x\" }"),
        20,
        "params.probe_ns",
    );
}

/// Work per operation is the think time: 0 is refused at load with its line; a work that the
/// fast-path changes between kernels eat says so instead of "needs work > 0".
#[test]
fn work_must_leave_think_time() {
    refused_at(
        &MINIMAL.replace("value = 100,", "value = 0,"),
        14,
        "op.work.ns",
    );
    // A work with neither ns nor cycles (`work = []` or `{}` once parsed as no work at all).
    for empty in ["[ ]", "{ }"] {
        let text = MINIMAL.replace("{ ns = { value = 100, source = \"assumed: x\" } }", empty);
        refused_at(&text, 14, "op.work");
    }
    let tiny = MINIMAL.replace(
        "work = { ns = { value = 100, source = \"assumed: x\" } }",
        "work = { cycles = { value = 10, source = \"assumed: x\" }, kernel = \"4.14\" }",
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run_in(dir.path(), &tiny, &["predict", "--kernel", "6.18"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fast-path changes"), "{err}");
}

/// default_machine must load, and a path is relative to the workload file, not to the
/// directory the command runs in.
#[test]
fn default_machine_is_checked_and_relative_to_the_file() {
    refused_at(
        &MINIMAL.replace("\"icelake-server\"", "\"icelake\""),
        5,
        "default_machine",
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/models/icelake-server.toml"),
        dir.path().join("mine.toml"),
    )
    .unwrap();
    let text = MINIMAL.replace("\"icelake-server\"", "\"mine.toml\"");
    let (code, err) = run_in(dir.path(), &text, &["predict"]);
    assert_eq!(code, 0, "{err}");
    // Run from another directory: the path still resolves against the file's.
    let file = dir.path().join("w.toml");
    let (code, _, err) = common::run(
        &["predict", "--workload", file.to_str().unwrap()],
        &std::env::temp_dir(),
    );
    assert_eq!(code, 0, "{err}");
}

/// `thread` marks a built-in thread workload: an unknown thread, or a thread of another kind
/// (whose tables validate would run on this model), is refused.
#[test]
fn thread_must_be_a_seed_thread_of_the_same_kind() {
    refused_at(&format!("thread = \"999\"\n{MINIMAL}"), 1, "thread");
    refused_at(
        &MINIMAL.replace(
            "kind = \"alloc-loop\"\n",
            "kind = \"alloc-loop\"\nthread = \"001\"\n",
        ),
        3,
        "thread",
    );
}

/// Sources need "kind: what" (a bare "spec" was accepted while a bare "fitted" was not);
/// aliases are one word each, like the name.
#[test]
fn sources_and_aliases_are_checked() {
    refused_at(
        &MINIMAL.replace(
            "order = { value = 0, source = \"assumed: x\" }",
            "order = { value = 0, source = \"spec\" }",
        ),
        9,
        "op.order",
    );
    refused_at(
        &MINIMAL.replace(
            "description =",
            "aliases = [\"\", \"two words\"]\ndescription =",
        ),
        3,
        "aliases",
    );
}

/// Bytes moved per page beyond 1 MiB are no physical page use.
#[test]
fn touch_bytes_are_bounded() {
    refused_at(
        &MINIMAL.replace(
            "touch_bytes_per_page = { value = 4096",
            "touch_bytes_per_page = { value = 1e9",
        ),
        13,
        "op.touch_bytes_per_page",
    );
}

/// Structural mistakes are named for what they are: an array of tables, a missing table or
/// key (under its table), a bare number where a sourced value belongs, a bad key inside an
/// inline table, a node span the tool does accept.
#[test]
fn structural_mistakes_get_plain_messages() {
    let err = refused_at(&MINIMAL.replace("[tasks]", "[[tasks]]"), 15, "tasks");
    assert!(err.contains("array of tables"), "{err}");
    let no_op = {
        let i = MINIMAL.find("[op]").unwrap();
        let j = MINIMAL.find("[tasks]").unwrap();
        format!("{}{}", &MINIMAL[..i], &MINIMAL[j..])
    };
    refused_at(&no_op, 1, "op");
    refused_at(
        &MINIMAL.replace(
            "order = { value = 0, source = \"assumed: x\" }",
            "order = { value = 0 }",
        ),
        9,
        "op.order.source",
    );
    let err = refused_at(
        &MINIMAL.replace(
            "order = { value = 0, source = \"assumed: x\" }",
            "order = 0",
        ),
        9,
        "order",
    );
    assert!(!err.contains("struct"), "{err}");
    refused_at(
        &MINIMAL.replace(
            "source = \"assumed: x\" } }",
            "source = \"assumed: x\", basis = \"guessed\" } }",
        ),
        14,
        "work.ns.basis",
    );
    let err = refused_at(
        &MINIMAL.replace("\"one\", source", "\"two\", source"),
        17,
        "tasks.nodes",
    );
    assert!(err.contains("cores"), "{err}");
}

/// The kernel keeps only orders 0-3 and 9 on the PCP lists (pcp_allowed_order()): a
/// producer-consumer flow at another order is refused rather than modelled as if its pages
/// went through the lists (orders 1-3 before 5.13 carry the kernel timeline's "not modelled"
/// note instead: tests/kernel_changes.rs).
#[test]
fn producer_consumer_refuses_orders_off_the_pcp_lists() {
    for order in ["4", "5", "8", "10", "0", "3", "9"] {
        let (code, _, err) = common::run(
            &["predict", "--workload", "lmbench-af-unix", "--order", order],
            &std::env::temp_dir(),
        );
        if ["0", "3", "9"].contains(&order) {
            assert_eq!(code, 0, "order {order}: {err}");
        } else {
            assert_eq!(code, 2, "order {order}");
            assert!(err.contains("pcp_allowed_order"), "{err}");
        }
    }
}

/// The schema example in models/workloads/README.md is a file that loads and predicts (it once
/// put `unknown` after [params] and carried fields its kind refuses).
#[test]
fn the_readme_schema_example_loads() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/workloads/README.md"
    ))
    .unwrap();
    let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let (code, err) = run(&readme[start..end]);
    assert_eq!(code, 0, "{err}");
}

/// A life's frees (params.life_free_share, alloc_run_pages, life_free_run_pages) describe a task that frees
/// its own pages in phases: without op.phase_pages nothing would read them, so they are refused
/// with their line; a share of 1 leaves nothing for the exit; runs too fine to step are refused
/// before any stepping (2^20 runs at most), not left to run for hours.
#[test]
fn a_life_needs_phases_a_share_below_one_and_steppable_runs() {
    refused_at(
        &with_params("life_free_share = { value = 0.5, source = \"assumed: x\" }"),
        20,
        "params.life_free_share",
    );
    let phased = MINIMAL.replace(
        "[tasks]",
        "phase_pages = { value = 100000000, source = \"assumed: x\" }\n[tasks]",
    );
    let err = refused_at(
        &format!("{phased}[params]\nlife_free_share = {{ value = 1, source = \"assumed: x\" }}\n"),
        21,
        "params.life_free_share",
    );
    assert!(err.contains("0..=0.99"), "{err}");
    let err = refused_at(
        &format!(
            "{phased}[params]\nlife_free_share = {{ value = 0.5, source = \"assumed: x\" }}\nalloc_run_pages = {{ value = 1, source = \"assumed: x\" }}\n"
        ),
        22,
        "params.alloc_run_pages",
    );
    assert!(err.contains("1048576"), "{err}");
    // Runs of a thousand pages over the same phase are 100 000 runs: fine.
    let (code, err) = run(&format!(
        "{phased}[params]\nlife_free_share = {{ value = 0.5, source = \"assumed: x\" }}\nalloc_run_pages = {{ value = 1000, source = \"assumed: x\" }}\n"
    ));
    assert_eq!(code, 0, "{err}");
}
