//! Speed and size targets of issue 34: `pcpmodel replay` of a 10-second flow in <= 1 s, and the
//! flow file of a 10-second UDP stream <= 20 MB. Replays the committed host flow
//! `data/host/flows/udp-10s-2026-12-06.flow.gz` (10.1 s of a UDP stream on the project's
//! 2-vCPU VM) at its recorded setting and at two others, and prints the wall time of each and
//! the file's size, compressed and as text.
//!
//! `cargo run --release --example replay_time`

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use pcpmodel::measure::replay::{replay_file, ReplaySettings};

/// The targets.
const TARGET_S: f64 = 1.0;
const TARGET_BYTES: f64 = 20e6;

fn main() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/host/flows/udp-10s-2026-12-06.flow.gz");
    let gz = std::fs::metadata(&path).expect("the committed flow").len();
    let mut text = 0u64;
    let mut d = flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = d.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        text += n as u64;
    }
    println!(
        "flow file: {:.3} MB gzipped ({:.1} MB as text); target <= {:.0} MB: {}",
        gz as f64 / 1e6,
        text as f64 / 1e6,
        TARGET_BYTES / 1e6,
        if (gz as f64) <= TARGET_BYTES {
            "met"
        } else {
            "MISSED"
        }
    );
    let mut worst: f64 = 0.0;
    for (label, s) in [
        ("recorded setting", ReplaySettings::default()),
        (
            "fraction 1000",
            ReplaySettings {
                fraction: Some(1000),
                ..ReplaySettings::default()
            },
        ),
        (
            "pcp->high 252",
            ReplaySettings {
                high: Some(252),
                ..ReplaySettings::default()
            },
        ),
    ] {
        let t = Instant::now();
        let r = replay_file(&path, &s).expect("replay");
        let dt = t.elapsed().as_secs_f64();
        worst = worst.max(dt);
        println!(
            "replay at {label:16}: {dt:.3} s ({:.1} s recorded, {} allocations)",
            r.seconds,
            r.quantity("allocations").map_or(0.0, |q| q.replayed)
        );
    }
    println!(
        "slowest replay: {worst:.3} s (target <= {TARGET_S} s: {})",
        if worst <= TARGET_S { "met" } else { "MISSED" }
    );
}
