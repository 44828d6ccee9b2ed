//! The Observer port: every event the metrics are built from (MET-06).
//!
//! Runners call these hooks; adapters turn them into metrics. The default implementation of
//! every hook does nothing, so an adapter implements only what it exports. The test kit
//! (feature `testing`) has a recording observer that keeps every call.

use std::time::Duration;

/// A read-only view of the config store, as an observer sees it after a bootstrap or a drain
/// (the store itself lives a layer above the ports; simulations digest it through this).
pub trait ConfigView {
    /// Entries in the store.
    fn len(&self) -> usize;
    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` with every key and its canonical JSON bytes, in no particular order.
    fn for_each_entry(&self, f: &mut dyn FnMut(&str, &[u8]));
    /// A sorted copy of every entry (key → canonical JSON bytes).
    fn to_map(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut entries = std::collections::BTreeMap::new();
        self.for_each_entry(&mut |key, value| {
            entries.insert(key.to_owned(), value.to_vec());
        });
        entries
    }
}

/// What `on_invalid_message` decided for one record (the `outcome` label of
/// `flechtwerk_messages_invalid_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InvalidOutcome {
    /// The error propagated: the stage crashes.
    Raised,
    /// The record was skipped (its offset still commits).
    Skipped,
    /// A substitute value was used.
    Substituted,
}

impl InvalidOutcome {
    /// The metric label value: `raised`, `skipped` or `substituted`.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidOutcome::Raised => "raised",
            InvalidOutcome::Skipped => "skipped",
            InvalidOutcome::Substituted => "substituted",
        }
    }
}

/// Receives the framework's events. All hooks default to no-ops.
///
/// Hooks are synchronous and must not block: they run on the engine's tasks.
#[allow(unused_variables)]
pub trait Observer: Send + Sync {
    /// A transformer record dispatched to `transform`, or an applied extractor config record.
    fn message_in(&self, topic: &str) {}
    /// Size (key + value bytes) of a raw input record, before decoding.
    fn message_in_bytes(&self, topic: &str, bytes: usize) {}
    /// One call of `on_invalid_message`, by outcome.
    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {}
    /// A message emitted by a stage.
    fn message_out(&self, topic: &str) {}
    /// Size (key + value bytes) of a produced record.
    fn message_out_bytes(&self, topic: &str, bytes: usize) {}
    /// One `transform` call or extractor poll, with its duration.
    fn message_processed(&self, elapsed: Duration) {}
    /// One transformer batch (records after the parse loop) and its duration, commits included.
    fn batch_processed(&self, size: usize, elapsed: Duration) {}
    /// One committed task transaction or extractor page.
    fn transaction_committed(&self) {}
    /// One extractor poll cycle with at least one active config.
    fn poll_cycle(&self, elapsed: Duration) {}
    /// Active configs of this replica.
    fn active_configs(&self, count: usize) {}
    /// A drained (not bootstrapped) config record that was applied.
    fn config_message_in(&self, topic: &str) {}
    /// Config store size, after the bootstrap and after a drain that applied records.
    fn config_store_entries(&self, count: usize) {}
    /// Entries the bootstrap loaded.
    fn config_store_restored(&self, count: usize) {}
    /// The config store after the bootstrap and after every drain that applied records: a
    /// read-only view for observers that check or digest the table (simulations do).
    fn config_store_updated(&self, store: &dyn ConfigView) {}
    /// Changelog records replayed into a transformer task's store.
    fn state_restored(&self, partition: i32, count: usize) {}
    /// Size of a changelog record written for a state put (not deletes, not restore).
    fn state_record_bytes(&self, bytes: usize) {}
    /// Live transformer tasks.
    fn tasks_assigned(&self, count: usize) {}
    /// Held extractor ownership tokens.
    fn tokens_assigned(&self, count: usize) {}
    /// Messages left buffered for an MQTT filter.
    fn mqtt_buffered(&self, topic: &str, count: usize) {}
    /// A successful MQTT (re)connect.
    fn mqtt_connected(&self) {}
    /// An unexpected MQTT disconnect.
    fn mqtt_disconnected(&self) {}
    /// An MQTT message dropped, by reason (`filtered`, `poison`, `unsubscribed`, `stale`).
    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {}
    /// An MQTT message routed into a subscription.
    fn mqtt_message_in(&self, topic: &str) {}
}

/// The observer that observes nothing (metrics off).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopObserver;

impl Observer for NoopObserver {}
