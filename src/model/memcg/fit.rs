//! The memcg model as a [`FitModel`]: parameter names, their checks and specs.

use crate::error::{Error, Result};
use crate::fit::{FitModel, InputSpec, ParamSpec, TargetSpec};

use super::model::MemcgModel;
use super::INPUT;

/// Parameter names in model order.
pub const PARAM_NAMES: [&str; 3] = [
    "fixed_ns_per_page",
    "transfer_scale",
    "ack_uncharge_on_sender",
];

/// Parameters held at their defaults unless freed.
pub const DEFAULT_FIXED: [&str; 1] = ["ack_uncharge_on_sender"];

/// Checks the parameters: three, time and scale finite and > 0, the fraction in 0..=1.
pub(super) fn check_params(params: &[f64]) -> Result<[f64; 3]> {
    let v = match params {
        [a, b, c] => [*a, *b, *c],
        _ => {
            return Err(Error::invalid(
                INPUT,
                "params",
                format!("expected 3 parameters, got {}", params.len()),
            ))
        }
    };
    for (name, x) in PARAM_NAMES.iter().zip(v).take(2) {
        if !(x.is_finite() && x > 0.0) {
            return Err(Error::invalid(
                INPUT,
                *name,
                format!("must be > 0, got {x}"),
            ));
        }
    }
    if !(0.0..=1.0).contains(&v[2]) {
        return Err(Error::invalid(
            INPUT,
            PARAM_NAMES[2],
            format!("must be in 0..=1, got {}", v[2]),
        ));
    }
    Ok(v)
}

impl FitModel for MemcgModel {
    fn name(&self) -> &str {
        "memcg-netperf"
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new(PARAM_NAMES[0], "ns", 2000.0)
                .with_bounds(50.0, 1e6)
                .with_provenance("assumed: start value; CPU time per payload page outside memcg charging (TCP, copy-free sendfile, loopback), fitted")
                .with_description("fixed work per payload page per CPU, ns"),
            ParamSpec::new(PARAM_NAMES[1], "x", 1.0)
                .with_bounds(0.1, 64.0)
                .with_provenance("assumed: 1 = a transfer on a hammered line costs the machine file's idle core-to-core latency; fitted when freed")
                .with_description("cost of one transfer on a contended counter line over the idle mean core-to-core transfer"),
            ParamSpec::new(PARAM_NAMES[2], "fraction", 0.0)
                .with_bounds(0.0, 1.0)
                .with_provenance("assumed: 0 = every wmem uncharge of an ACKed skb runs on the receiver CPU (tcp_ack in the ACK's softirq); 1 = all on the sender CPU (socket backlog); thread 001 does not say")
                .with_description("fraction of acknowledged skbs whose sk_wmem uncharge runs on the sender CPU"),
        ]
    }

    fn inputs(&self) -> Vec<InputSpec> {
        vec![InputSpec::new("memcg_charge_batch_pages", "pages")]
    }

    fn target(&self) -> TargetSpec {
        TargetSpec::new("throughput_mbps", "Mbit/s")
    }

    fn predict(&self, params: &[f64], x: &[f64]) -> Result<f64> {
        let b = x.first().copied().unwrap_or(f64::NAN);
        if !(b.is_finite() && b >= 1.0 && b <= f64::from(u32::MAX)) {
            return Err(Error::invalid(
                INPUT,
                "memcg_charge_batch_pages",
                format!("must be a whole number ≥ 1, got {b}"),
            ));
        }
        Ok(self.estimate(params, b.round() as u32)?.throughput_mbps)
    }
}
