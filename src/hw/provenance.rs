//! Values that carry where they came from.
//!
//! Every physical number in a machine file is a [`Sourced`] value: `{ value = 48, source = "..." }`.
//! The source string starts with one of the [`SOURCE_KINDS`] prefixes so that a reader (and the
//! validator) can tell a vendor specification from a measurement, a seed-thread quote, a
//! derivation or an assumption.

use serde::{Deserialize, Serialize};

/// Allowed prefixes of a source string, in the form `"<kind>: <details>"`.
///
/// - `spec`: vendor specification (datasheet, ark.intel.com, AMD product page).
/// - `seed NNN`: a quote from one of the five source threads (`seed 004: "..."`).
/// - `measured`: a third-party measurement (e.g. the core-to-core matrices in data/core-to-core).
/// - `derived`: computed from other sourced values; the string says how.
/// - `assumed`: no source; the string says why the value is reasonable.
/// - `detected`: read from the running host (sysfs, /proc).
pub const SOURCE_KINDS: &[&str] = &["spec", "seed", "measured", "derived", "assumed", "detected"];

/// A value with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sourced<T> {
    /// The value, in the unit named by the field that holds it.
    pub value: T,
    /// Where the value comes from: `"<kind>: <details>"`, kind one of [`SOURCE_KINDS`].
    pub source: String,
}

impl<T> Sourced<T> {
    /// A new sourced value.
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Sourced {
            value,
            source: source.into(),
        }
    }

    /// The provenance kind (the part before the first ':'), if the source is well formed.
    pub fn kind(&self) -> Option<&str> {
        // "kind: what": a bare kind word says where the value came from but not what it is.
        let (head, _) = self.source.split_once(':')?;
        let head = head.trim();
        SOURCE_KINDS
            .iter()
            .find(|k| head == **k || (**k == "seed" && head.starts_with("seed ")))
            .copied()
    }
}

impl<T: Copy> Sourced<T> {
    /// The bare value.
    pub fn get(&self) -> T {
        self.value
    }
}
