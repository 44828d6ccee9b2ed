//! The event trace of one simulation run, and its hash.
//!
//! Events carry simulated time and a description built only from deterministic data (no task
//! ids, no addresses), so the same seed yields the same trace, byte for byte.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One traced event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Simulated time since the start of the run.
    pub at: Duration,
    /// What happened.
    pub what: String,
}

/// A shared, append-only event log.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an event at simulated time `at`.
    pub fn record_at(&self, at: Duration, what: impl Into<String>) {
        self.events.lock().expect("trace lock").push(Event { at, what: what.into() });
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().expect("trace lock").clone()
    }

    /// FNV-1a (64-bit) over every event's time and text: stable across processes and builds.
    pub fn hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for event in self.events.lock().expect("trace lock").iter() {
            let mut line = String::with_capacity(event.what.len() + 24);
            writeln!(line, "{}|{}", event.at.as_nanos(), event.what).expect("write to String");
            for byte in line.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// The trace as text, one event per line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for event in self.events.lock().expect("trace lock").iter() {
            writeln!(out, "{:>12.6}s  {}", event.at.as_secs_f64(), event.what).expect("write to String");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_depends_on_time_and_text_only() {
        let a = Trace::new();
        let b = Trace::new();
        for t in [&a, &b] {
            t.record_at(Duration::from_millis(5), "x");
            t.record_at(Duration::from_millis(7), "y");
        }
        assert_eq!(a.hash(), b.hash());
        b.record_at(Duration::from_millis(9), "z");
        assert_ne!(a.hash(), b.hash());
        let c = Trace::new();
        c.record_at(Duration::from_millis(6), "x");
        c.record_at(Duration::from_millis(7), "y");
        assert_ne!(a.hash(), c.hash());
    }
}
