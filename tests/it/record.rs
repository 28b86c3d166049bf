//! `pcpmodel record` against a fake tracefs and /proc (no root, no tracefs): the flow file it
//! writes reads back with the recorded refills, drains and runs, and every tracefs file it
//! changed holds its value again after a normal end, SIGINT, SIGTERM, and (after `--recover`)
//! SIGKILL.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pcpmodel::measure::record::flow::{FlowLine, FlowReader};

const BIN: &str = env!("CARGO_BIN_EXE_pcpmodel");

const EVENTS: [&str; 5] = [
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_pcpu_drain",
    "mm_page_alloc_zone_locked",
    "mm_page_free_batched",
];

/// A trace of a sender on CPU 0 and a receiver on CPU 1: refills of 2 order-3 blocks, runs of
/// allocations, a free and a drain of 2 blocks, repeated.
fn trace_text(rounds: usize) -> String {
    let mut t = String::from("# tracer: nop\n");
    for i in 0..rounds {
        let ts = 100.0 + i as f64 * 1e-3;
        for _ in 0..2 {
            t.push_str(&format!("          udp-42    [000] ..... {ts:.6}: mm_page_alloc_zone_locked: page=0000000001 pfn=0x1000 order=3 migratetype=0 percpu_refill=1\n"));
        }
        for _ in 0..2 {
            t.push_str(&format!("          udp-42    [000] ..... {ts:.6}: mm_page_alloc: page=0000000001 pfn=0x1000 order=3 migratetype=0 gfp_flags=GFP_KERNEL\n"));
        }
        t.push_str(&format!("         recv-43    [001] ..... {ts:.6}: mm_page_free: page=0000000001 pfn=0x1000 order=3\n"));
        for _ in 0..2 {
            t.push_str(&format!("         recv-43    [001] ..... {ts:.6}: mm_page_pcpu_drain: page=0000000001 pfn=0x1000 order=3 migratetype=0\n"));
        }
    }
    t
}

struct Fake {
    _dir: tempfile::TempDir,
    tracefs: std::path::PathBuf,
    proc: std::path::PathBuf,
    journal: std::path::PathBuf,
    out: std::path::PathBuf,
}

fn fake(events: &[&str]) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("tracing");
    for ev in events {
        let d = t.join("events/kmem").join(ev);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("enable"), "0\n").unwrap();
    }
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(t.join("tracing_on"), "0\n").unwrap();
    std::fs::write(t.join("buffer_size_kb"), "7 (expanded: 1408)\n").unwrap();
    std::fs::write(t.join("trace"), "").unwrap();
    std::fs::write(t.join("trace_pipe"), trace_text(50)).unwrap();
    let p = dir.path().join("proc");
    std::fs::create_dir_all(p.join("sys/kernel")).unwrap();
    std::fs::create_dir_all(p.join("sys/vm")).unwrap();
    std::fs::write(p.join("sys/kernel/osrelease"), "6.18.0\n").unwrap();
    std::fs::write(p.join("sys/vm/percpu_pagelist_high_fraction"), "0\n").unwrap();
    std::fs::write(
        p.join("zoneinfo"),
        include_str!("../fixtures/host-6.18-zoneinfo.txt"),
    )
    .unwrap();
    Fake {
        journal: dir.path().join("journal"),
        out: dir.path().join("x.flow"),
        tracefs: t,
        proc: p,
        _dir: dir,
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// Every file the recording changes holds its original value.
fn assert_restored(f: &Fake) {
    assert_eq!(read(&f.tracefs.join("tracing_on")), "0");
    // buffer_size_kb prints "7 (expanded: 1408)"; the setting is 7.
    assert_eq!(read(&f.tracefs.join("buffer_size_kb")), "7");
    for ev in EVENTS {
        assert_eq!(
            read(&f.tracefs.join("events/kmem").join(ev).join("enable")),
            "0",
            "{ev}"
        );
    }
    assert!(!f.journal.exists(), "journal left behind");
}

fn command(f: &Fake, seconds: &str) -> Command {
    let mut c = Command::new(BIN);
    c.args(["record", "--seconds", seconds, "--buffer-kb", "1024"])
        .arg("--tracefs")
        .arg(&f.tracefs)
        .arg("--proc")
        .arg(&f.proc)
        .arg("--journal")
        .arg(&f.journal)
        .arg("-o")
        .arg(&f.out);
    c
}

fn spawn_long(f: &Fake) -> Child {
    spawn_until(f, &[], &f.tracefs.join("tracing_on"), "1")
}

/// A 60-s recording with `extra` flags, once the file `watch` reads `value`.
fn spawn_until(f: &Fake, extra: &[&str], watch: &Path, value: &str) -> Child {
    let mut c = command(f, "60")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while read(watch) != value {
        assert!(c.try_wait().unwrap().is_none(), "record ended early");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{} never read {value}",
            watch.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    c
}

/// A 0.3-s recording of the fake's trace with `--format json`: it must succeed and restore
/// tracefs; its JSON report.
fn record_json(f: &Fake) -> serde_json::Value {
    let out = command(f, "0.3")
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_restored(f);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_normal_end_restores_and_the_flow_reads_back() {
    let f = fake(&EVENTS);
    let v = record_json(&f);
    let file = std::fs::File::open(&f.out).unwrap();
    let mut r = FlowReader::open(std::io::BufReader::new(file), "x.flow").unwrap();
    let mut drained = Vec::new();
    while let Some(l) = r.next_line().unwrap() {
        if let FlowLine::Drain { lists, .. } = l {
            drained.push(lists.map(|d| d.iter().collect::<Vec<_>>()));
        }
    }
    // Each drain names its list: two order-3 blocks of an unmovable pageblock.
    assert_eq!(drained.len(), 50);
    assert!(drained.iter().all(|d| d == &Some(vec![(3, 0, 16)])));
    assert_eq!(r.meta.kernel, "6.18.0");
    let end = r.end.unwrap();
    // 50 rounds of the trace above: the counts are the trace's, event for event.
    let (c0, c1) = (&end.cpus["0"], &end.cpus["1"]);
    assert_eq!((c0.refills, c0.refill_pages), (50, 50 * 16));
    assert_eq!((c0.allocs, c0.alloc_pages), (100, 100 * 8));
    assert_eq!((c1.frees, c1.drains, c1.drain_pages), (50, 50, 50 * 16));
    assert_eq!(v["end"]["cpus"]["0"]["refills"], 50);
}

#[test]
fn an_interrupt_free_inside_a_drain_is_written_as_a_direct_free() {
    // The receiver drains; a softirq on its CPU frees a page before the task's next event: the
    // task still holds the pcp lock, so the kernel put that page in the buddy allocator.
    let f = fake(&EVENTS);
    let mut t = trace_text(20);
    for i in 0..20 {
        let ts = 200.0 + i as f64 * 1e-3;
        t.push_str(&format!("         recv-43    [001] ..... {ts:.6}: mm_page_free: page=0000000001 pfn=0x1000 order=0\n"));
        t.push_str(&format!("         recv-43    [001] d..1. {ts:.6}: mm_page_pcpu_drain: page=0000000001 pfn=0x1000 order=0 migratetype=1\n"));
        t.push_str(&format!("         recv-43    [001] ..s1. {ts:.6}: mm_page_free: page=0000000002 pfn=0x1001 order=0\n"));
    }
    std::fs::write(f.tracefs.join("trace_pipe"), t).unwrap();
    let v = record_json(&f);
    assert_eq!(v["frees_direct"], 20);
    assert!(v["meta"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e == "mm_page_free_batched"));
    let text = std::fs::read_to_string(&f.out).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("b 1 ")).count(), 20);
    // Every free counts once, to the lists or past them: 20 in the rounds, 40 after them.
    let mut r = FlowReader::open(text.as_bytes(), "x.flow").unwrap();
    while r.next_line().unwrap().is_some() {}
    assert_eq!(r.end.unwrap().cpus["1"].frees, 20 + 40);
}

#[test]
fn sigint_and_sigterm_restore_and_leave_no_partial_file() {
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let f = fake(&EVENTS);
        let c = spawn_long(&f);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "exit 128 + signal");
        assert_restored(&f);
        assert!(!f.out.exists());
        let mut partial = f.out.as_os_str().to_owned();
        partial.push(".partial");
        assert!(!Path::new(&partial).exists());
    }
}

#[test]
fn sigkill_then_recover_restores() {
    let f = fake(&EVENTS);
    let mut c = spawn_long(&f);
    c.kill().unwrap(); // SIGKILL: no handler, no destructor
    c.wait().unwrap();
    assert_eq!(
        read(&f.tracefs.join("tracing_on")),
        "1",
        "SIGKILL leaves tracing on"
    );
    assert!(f.journal.exists(), "and the journal behind");
    recover(&f);
    assert_restored(&f);
}

/// `record --recover` with the fake's journal, which must succeed.
fn recover(f: &Fake) {
    let st = Command::new(BIN)
        .args(["record", "--recover", "--journal"])
        .arg(&f.journal)
        .output()
        .unwrap();
    assert!(st.status.success());
}

/// A kernel without one of the required events: exit 2 naming the event's file, nothing changed.
#[test]
fn a_missing_event_is_refused_with_its_file() {
    let f = fake(&EVENTS[..2]);
    let out = command(&f, "0.1").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mm_page_pcpu_drain/enable"), "{err}");
    assert_eq!(read(&f.tracefs.join("tracing_on")), "0");
    assert!(!f.out.exists());
}

/// The flow's meta after a 0.3-s recording of the fake, with `extra` flags.
fn recorded_meta(f: &Fake, extra: &[&str]) -> pcpmodel::measure::record::flow::FlowMeta {
    let out = command(f, "0.3").args(extra).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::File::open(&f.out).unwrap();
    FlowReader::open(std::io::BufReader::new(file), "x.flow")
        .unwrap()
        .meta
}

#[test]
fn lists_left_over_high_max_by_a_lowered_sysctl_are_settled_before_the_start() {
    // Lowering vm.percpu_pagelist_high_fraction frees nothing: a CPU can hold more than the new
    // high_max until decay_pcp_high() runs. The recording runs it (vm.stat_refresh) first.
    let f = fake(&EVENTS);
    let refresh = f.proc.join("sys/vm/stat_refresh");
    std::fs::write(&refresh, "").unwrap();
    // The fixture (a live host) has one auto-tuned pageset whose high is above its high_min
    // (DMA32 CPU 0: 2,511 over 2,133). With it at high_min, every list within high_max and no
    // high above high_min: nothing to do, nothing written.
    let live = include_str!("../fixtures/host-6.18-zoneinfo.txt");
    let idle_state = live.replacen(
        "              high:     2511\n              batch:    63\n              high_min: 2133",
        "              high:     2133\n              batch:    63\n              high_min: 2133",
        1,
    );
    assert_ne!(idle_state, live);
    std::fs::write(f.proc.join("zoneinfo"), &idle_state).unwrap();
    assert_eq!(recorded_meta(&f, &[]).settled, None);
    assert_eq!(read(&refresh), "");
    // The live fixture: the high left up is decayed toward high_min (a fake /proc decays
    // nothing: one write, no progress, and it says so).
    std::fs::write(f.proc.join("zoneinfo"), live).unwrap();
    let said = recorded_meta(&f, &[]).settled.expect("settled");
    assert_eq!(read(&refresh), "1");
    assert!(
        said.contains("1 auto-tuned pageset(s) had their live high up to 378 pages above high_min"),
        "{said}"
    );
    assert!(said.contains("1 high(s) still above high_min"), "{said}");
    std::fs::write(&refresh, "").unwrap();
    // One Normal pageset at 60,000 pages over its high_max of 48,300.
    let z = &idle_state;
    let at = z
        .find("              count:    0\n              high:     8385")
        .unwrap();
    let over = format!(
        "{}              count:    60000{}",
        &z[..at],
        &z[at + "              count:    0".len()..]
    );
    std::fs::write(f.proc.join("zoneinfo"), over).unwrap();
    // --no-settle starts from the lists as they are.
    assert_eq!(recorded_meta(&f, &["--no-settle"]).settled, None);
    assert_eq!(read(&refresh), "");
    // A fake /proc drains nothing: one write, then the loop stops (no progress) and says so.
    let said = recorded_meta(&f, &[]).settled.expect("settled");
    assert_eq!(read(&refresh), "1");
    assert!(said.contains("11700 pages over their high_max"), "{said}");
    assert!(said.contains("1 vm.stat_refresh write(s)"), "{said}");
    assert!(said.contains("except 1 pageset(s)"), "{said}");
    // The table output says it too.
    let out = command(&f, "0.3").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Before the start:"), "{text}");
}

#[test]
fn a_sysctl_the_recorded_command_sets_is_the_one_the_flow_carries() {
    // `measure pcp --skb-defer-max 0` under `record` sets the sysctl after the recording
    // started and puts it back at its end: the flow ran at 0, which decides who frees.
    let f = fake(&EVENTS);
    let knob = f.proc.join("sys/net/core/skb_defer_max");
    std::fs::create_dir_all(knob.parent().unwrap()).unwrap();
    std::fs::write(&knob, "64\n").unwrap();
    let k = knob.display();
    let out = command(&f, "20")
        .args(["--", "sh", "-c"])
        .arg(format!("echo 0 > {k}; sleep 1; echo 64 > {k}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_restored(&f);
    let file = std::fs::File::open(&f.out).unwrap();
    let mut r = FlowReader::open(std::io::BufReader::new(file), "x.flow").unwrap();
    while r.next_line().unwrap().is_some() {}
    assert_eq!(r.meta.sysctl["net.core.skb_defer_max"], 64);
    assert_eq!(r.sysctl("net.core.skb_defer_max"), Some(0));
    // Untouched by the command: the start value, and no entry in the end line.
    assert_eq!(r.sysctl("vm.percpu_pagelist_high_fraction"), Some(0));
    assert_eq!(r.end.as_ref().unwrap().sysctl_during.len(), 1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("net.core.skb_defer_max was 64 at the start and 0"),
        "{stdout}"
    );
}

#[test]
fn drain_first_drains_at_the_smallest_high_and_puts_the_sysctl_back() {
    // The lists are brought down with the kernel's own decay at the smallest high the sysctl
    // allows: the fraction goes to its largest value for a moment and comes back.
    let f = fake(&EVENTS);
    let fraction = f.proc.join("sys/vm/percpu_pagelist_high_fraction");
    std::fs::write(&fraction, "100\n").unwrap();
    let refresh = f.proc.join("sys/vm/stat_refresh");
    std::fs::write(&refresh, "").unwrap();
    let meta = recorded_meta(&f, &["--drain-first", "--no-settle"]);
    let said = meta
        .drained
        .expect("the flow says how its lists were drained");
    assert!(said.contains("smallest high"), "{said}");
    assert!(said.contains("then 100 again"), "{said}");
    // The decay ran (a fake /proc drains nothing: one write, no progress).
    assert_eq!(read(&refresh), "1");
    assert_eq!(read(&fraction), "100");
    // The flow carries the setting it ran at, not the moment's.
    assert_eq!(
        meta.sysctl.get("vm.percpu_pagelist_high_fraction"),
        Some(&100)
    );
    assert_restored(&f);
    // Without the flag nothing is drained and the meta says nothing.
    assert_eq!(recorded_meta(&f, &[]).drained, None);
}

#[test]
fn drain_first_without_the_decay_is_refused_before_anything_changes() {
    // No vm.stat_refresh (before 6.7 there is no decay_pcp_high()): refused, naming the file.
    let f = fake(&EVENTS);
    let out = command(&f, "0.1").arg("--drain-first").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--drain-first") && err.contains("stat_refresh"),
        "{err}"
    );
    assert_eq!(
        read(&f.proc.join("sys/vm/percpu_pagelist_high_fraction")),
        "0"
    );
    assert_eq!(read(&f.tracefs.join("tracing_on")), "0");
    assert!(!f.journal.exists());
    assert!(!f.out.exists());
}

/// A `record --drain-first` held inside its drain: vm.stat_refresh is a FIFO no one reads, so
/// the decay's write blocks with the sysctl at its largest value, the window a signal or a
/// SIGKILL can find it in.
fn spawn_in_drain(f: &Fake) -> Child {
    let refresh = f.proc.join("sys/vm/stat_refresh");
    let c_path = std::ffi::CString::new(refresh.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let fraction = f.proc.join("sys/vm/percpu_pagelist_high_fraction");
    spawn_until(
        f,
        &["--drain-first", "--no-settle"],
        &fraction,
        "2147483647",
    )
}

#[test]
fn a_signal_inside_the_drain_puts_the_sysctl_back() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let f = fake(&EVENTS);
        let fraction = f.proc.join("sys/vm/percpu_pagelist_high_fraction");
        std::fs::write(&fraction, "100\n").unwrap();
        let c = spawn_in_drain(&f);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(128 + sig), "exit 128 + signal");
        assert_eq!(read(&fraction), "100");
        assert!(!f.journal.exists());
        assert!(!f.out.exists());
    }
}

#[test]
fn a_sigkill_inside_the_drain_leaves_the_sysctl_to_recover() {
    let f = fake(&EVENTS);
    let fraction = f.proc.join("sys/vm/percpu_pagelist_high_fraction");
    let mut c = spawn_in_drain(&f);
    c.kill().unwrap();
    c.wait().unwrap();
    assert_eq!(
        read(&fraction),
        "2147483647",
        "SIGKILL leaves the largest value"
    );
    let journal = std::fs::read_to_string(&f.journal).unwrap();
    assert!(journal.contains(fraction.to_str().unwrap()), "{journal}");
    recover(&f);
    assert_eq!(read(&fraction), "0");
}

#[test]
fn after_the_drain_the_sysctl_is_the_recorded_commands() {
    // The drain puts the sysctl back before tracing starts and forgets it: a command that sets
    // it (a sweep under `record`) keeps its value.
    let f = fake(&EVENTS);
    let fraction = f.proc.join("sys/vm/percpu_pagelist_high_fraction");
    std::fs::write(f.proc.join("sys/vm/stat_refresh"), "").unwrap();
    let set = format!("echo 77 > {}", fraction.display());
    recorded_meta(&f, &["--drain-first", "--", "sh", "-c", &set]);
    assert_eq!(read(&fraction), "77");
    assert_restored(&f);
}
