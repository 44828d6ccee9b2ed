//! What one seed produced, and the summary over many.

use std::collections::BTreeMap;
use std::time::Duration;

/// The outcome of one seeded run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Hash of the run's event trace.
    pub trace_hash: u64,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Violated properties, each named and explained. Empty when the run passed.
    pub violations: Vec<String>,
    /// The rendered trace (kept for failing seeds).
    pub trace: String,
    /// The trace's events (kept with the rendered trace), for the timeline.
    pub events: Vec<crate::trace::Event>,
}

/// Totals over many seeds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Total simulated time.
    pub simulated: Duration,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Failing seeds with their violations.
    pub failures: Vec<(u64, Vec<String>)>,
}

impl Summary {
    /// Folds one seed's report in.
    pub fn add(&mut self, report: &SeedReport) {
        self.seeds += 1;
        self.simulated += report.simulated;
        for (kind, n) in &report.faults {
            *self.faults.entry(kind.clone()).or_default() += n;
        }
        if !report.violations.is_empty() {
            self.failures.push((report.seed, report.violations.clone()));
        }
    }
}
