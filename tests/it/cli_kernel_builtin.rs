//! Issue-2 acceptance on the built-in machine files (not fixtures): thread 004's "capped at 421".

use crate::common::json;

fn normal0(v: &serde_json::Value) -> &serde_json::Value {
    v["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["node"] == 0 && z["zone"] == "Normal")
        .expect("node 0 Normal zone")
}

#[test]
fn icelake_server_on_5_18_is_capped_near_421() {
    // Seed 004: "The server machine has 128 cpus but only 128G memory, which makes the pcp->high
    // capped at 421". Tolerance +/-1 page: the thread does not give the managed page counts.
    let v = json(&["kernel", "--machine", "icelake-server", "--kernel", "5.18"]);
    let high = normal0(&v)["pcp_high_pages"].as_u64().unwrap();
    assert!((420..=422).contains(&high), "pcp->high {high}");
}

#[test]
fn icelake_server_on_6_18_prints_high_min_and_high_max() {
    let v = json(&["kernel", "--machine", "icelake-server", "--kernel", "6.18"]);
    let z = normal0(&v);
    let lo = z["pcp_high_min_pages"].as_u64().unwrap();
    let hi = z["pcp_high_max_pages"].as_u64().unwrap();
    assert!((420..=422).contains(&lo), "high_min {lo}");
    // high_max = (managed / 8) / 64 CPUs.
    let managed = z["managed_pages"].as_u64().unwrap();
    assert_eq!(hi, managed / 8 / 64);
}

#[test]
fn every_builtin_machine_configures_on_every_era() {
    let machines = json(&["machines"]);
    for m in machines.as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        for k in ["5.10", "5.18", "6.6", "6.18", "6.19"] {
            let v = json(&["kernel", "--machine", name, "--kernel", k]);
            assert!(!v["zones"].as_array().unwrap().is_empty(), "{name} {k}");
        }
    }
}
