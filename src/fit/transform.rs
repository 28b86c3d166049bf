//! Bounded parameters: the map between a physical parameter and LM's unbounded internal coordinate.

use super::ParamSpec;

#[derive(Debug, Clone, Copy)]
pub(super) enum Transform {
    Identity,
    Lower(f64),
    Upper(f64),
    Both(f64, f64),
}

fn logistic(u: f64) -> f64 {
    if u >= 0.0 {
        1.0 / (1.0 + (-u).exp())
    } else {
        let e = u.exp();
        e / (1.0 + e)
    }
}

impl Transform {
    pub(super) fn of(spec: &ParamSpec) -> Transform {
        match (spec.lower.is_finite(), spec.upper.is_finite()) {
            (true, true) => Transform::Both(spec.lower, spec.upper),
            (true, false) => Transform::Lower(spec.lower),
            (false, true) => Transform::Upper(spec.upper),
            (false, false) => Transform::Identity,
        }
    }

    pub(super) fn to_physical(self, u: f64) -> f64 {
        match self {
            Transform::Identity => u,
            Transform::Lower(lo) => lo + u.exp(),
            Transform::Upper(hi) => hi - u.exp(),
            Transform::Both(lo, hi) => {
                let p = if u >= 0.0 {
                    hi - (hi - lo) * logistic(-u)
                } else {
                    lo + (hi - lo) * logistic(u)
                };
                p.clamp(lo, hi)
            }
        }
    }

    pub(super) fn dphys_du(self, u: f64) -> f64 {
        match self {
            Transform::Identity => 1.0,
            Transform::Lower(_) => u.exp(),
            Transform::Upper(_) => -u.exp(),
            Transform::Both(lo, hi) => (hi - lo) * logistic(u) * logistic(-u),
        }
    }

    /// Inverse; `p` must be strictly inside the bounds (see [`interior`]).
    pub(super) fn to_internal(self, p: f64) -> f64 {
        match self {
            Transform::Identity => p,
            Transform::Lower(lo) => (p - lo).max(f64::MIN_POSITIVE).ln(),
            Transform::Upper(hi) => (hi - p).max(f64::MIN_POSITIVE).ln(),
            Transform::Both(lo, hi) => {
                let a = (p - lo).max(f64::MIN_POSITIVE);
                let b = (hi - p).max(f64::MIN_POSITIVE);
                (a / b).ln()
            }
        }
    }
}

/// Moves a start value off a bound: the internal coordinate of a bound is infinite.
pub(super) fn interior(spec: &ParamSpec, p: f64) -> f64 {
    let (lo, hi) = (spec.lower, spec.upper);
    let nudge = if (hi - lo).is_finite() {
        1e-6 * (hi - lo)
    } else {
        let s = p.abs().max(if lo.is_finite() { lo.abs() } else { 0.0 });
        let s = s.max(if hi.is_finite() { hi.abs() } else { 0.0 });
        if s > 0.0 {
            1e-3 * s
        } else {
            1e-3
        }
    };
    if p <= lo {
        lo + nudge
    } else if p >= hi {
        hi - nudge
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn transforms_round_trip_and_derivatives() {
        let ts = [
            (Transform::Identity, 3.5),
            (Transform::Lower(2.0), 2.5),
            (Transform::Upper(-1.0), -7.0),
            (Transform::Both(1.0, 5.0), 4.999),
            (Transform::Both(1.0, 5.0), 1.001),
        ];
        for (t, p) in ts {
            let u = t.to_internal(p);
            assert_relative_eq!(t.to_physical(u), p, max_relative = 1e-12);
            let h = 1e-6;
            let num = (t.to_physical(u + h) - t.to_physical(u - h)) / (2.0 * h);
            assert_relative_eq!(t.dphys_du(u), num, max_relative = 1e-6);
        }
        // Saturation stays within the bounds.
        assert_eq!(Transform::Both(1.0, 5.0).to_physical(1e6), 5.0);
        assert_eq!(Transform::Both(1.0, 5.0).to_physical(-1e6), 1.0);
    }
}
