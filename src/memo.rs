//! A memo of deterministic computations, keyed by their inputs.
//!
//! Fits, calibrations and simulations that `validate`, `predict` and the sweeps ask for again
//! and again keep their results in a [`Memo`], usually a `static` one (per process); each site
//! says why it memoises and what its key holds. The lock is not held while a value is computed,
//! so a computation may itself read other memos (or this one), and two threads that miss the
//! same key at once both compute it (the values are deterministic, so either is kept). Errors
//! are never stored: a failed computation is retried on the next call. A poisoned lock turns
//! the memo off (computations run, nothing is read or stored) rather than panicking.

use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::Hash;
use std::sync::Mutex;

/// Values computed from keys, kept for later calls with an equal key.
pub struct Memo<K, V> {
    /// None until the first value is stored (a `HashMap` cannot be built in a `const fn`).
    map: Mutex<Option<HashMap<K, V>>>,
    /// Entries kept before the memo is emptied (`usize::MAX`: no limit).
    cap: usize,
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    /// An empty memo without a size limit; usable in a `static`.
    pub const fn new() -> Memo<K, V> {
        Memo::with_cap(usize::MAX)
    }

    /// An empty memo emptied whenever it would grow past `cap` entries (so a long sweep over
    /// ever new keys cannot grow it without bound); usable in a `static`.
    pub const fn with_cap(cap: usize) -> Memo<K, V> {
        Memo {
            map: Mutex::new(None),
            cap,
        }
    }

    /// The value stored for `key`, or `compute()`'s, stored.
    pub fn get_or_compute(&self, key: K, compute: impl FnOnce() -> V) -> V {
        match self.get_or_try(key, || Ok::<V, Infallible>(compute())) {
            Ok(v) => v,
            Err(e) => match e {},
        }
    }

    /// The value stored for `key`, or `compute()`'s when it succeeds, stored; an error is
    /// returned and not stored.
    pub fn get_or_try<E>(&self, key: K, compute: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        if let Some(v) = self.lookup(&key) {
            return Ok(v);
        }
        let v = compute()?;
        if let Ok(mut m) = self.map.lock() {
            let m = m.get_or_insert_with(HashMap::new);
            if m.len() >= self.cap {
                m.clear();
            }
            m.entry(key).or_insert_with(|| v.clone());
        }
        Ok(v)
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.as_ref().map(HashMap::len))
            .unwrap_or(0)
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lookup(&self, key: &K) -> Option<V> {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.as_ref().and_then(|m| m.get(key).cloned()))
    }
}

impl<K: Hash + Eq, V: Clone> Default for Memo<K, V> {
    fn default() -> Memo<K, V> {
        Memo::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;
    use std::cell::Cell;

    #[test]
    fn computes_once_per_key() {
        static MEMO: Memo<u32, String> = Memo::new();
        let calls = Cell::new(0);
        let f = |k: u32| {
            MEMO.get_or_compute(k, || {
                calls.set(calls.get() + 1);
                format!("v{k}")
            })
        };
        assert_eq!(f(1), "v1");
        assert_eq!(f(1), "v1");
        assert_eq!(f(2), "v2");
        assert_eq!(f(1), "v1");
        assert_eq!(calls.get(), 2);
        assert_eq!(MEMO.len(), 2);
    }

    #[test]
    fn errors_are_not_cached() {
        let memo: Memo<&str, f64> = Memo::new();
        let calls = Cell::new(0);
        let r: Result<f64, String> = memo.get_or_try("a", || {
            calls.set(calls.get() + 1);
            Err("failed".to_string())
        });
        assert_eq!(r, Err("failed".to_string()));
        assert!(memo.is_empty());
        let ok = |v: f64| {
            memo.get_or_try("a", || {
                calls.set(calls.get() + 1);
                Ok::<f64, String>(v)
            })
        };
        assert_eq!(ok(1.5), Ok(1.5));
        // Stored now: a second success is not computed.
        assert_eq!(ok(2.5), Ok(1.5));
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn computation_may_use_the_memo() {
        let memo: Memo<u32, u64> = Memo::new();
        let v = memo.get_or_compute(2, || memo.get_or_compute(1, || 10) + 1);
        assert_eq!((v, memo.len()), (11, 2));
    }

    #[test]
    fn cap_empties_the_memo() {
        let memo: Memo<u32, u32> = Memo::with_cap(2);
        for k in 0..3 {
            memo.get_or_compute(k, || k * 10);
        }
        // The third entry emptied the two before it.
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.get_or_compute(2, || 99), 20);
        assert_eq!(memo.get_or_compute(0, || 7), 7);
    }
}
