//! The Observer port: every event the metrics are built from (MET-06).
//!
//! Runners call these hooks; adapters turn them into metrics. The default implementation of
//! every hook does nothing, so an adapter implements only what it exports. [`RecordingObserver`]
//! keeps every call as an [`Observed`] value, for tests and simulations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    fn config_store_updated(&self, store: &crate::configs::ConfigStore) {}
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

/// One recorded observer call; durations are left out so recordings compare across runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Observed {
    MessageIn { topic: String },
    MessageInBytes { topic: String, bytes: usize },
    MessageInvalid { topic: String, outcome: InvalidOutcome },
    MessageOut { topic: String },
    MessageOutBytes { topic: String, bytes: usize },
    MessageProcessed,
    BatchProcessed { size: usize },
    TransactionCommitted,
    PollCycle,
    ActiveConfigs { count: usize },
    ConfigMessageIn { topic: String },
    ConfigStoreEntries { count: usize },
    ConfigStoreRestored { count: usize },
    StateRestored { partition: i32, count: usize },
    StateRecordBytes { bytes: usize },
    TasksAssigned { count: usize },
    TokensAssigned { count: usize },
    MqttBuffered { topic: String, count: usize },
    MqttConnected,
    MqttDisconnected,
    MqttMessageDropped { topic: String, reason: String },
    MqttMessageIn { topic: String },
}

/// An observer that records every call, in order (TST-04).
///
/// ```
/// use flechtwerk::observer::{Observed, Observer, RecordingObserver};
/// let observer = RecordingObserver::default();
/// observer.transaction_committed();
/// assert_eq!(observer.events(), vec![Observed::TransactionCommitted]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct RecordingObserver {
    events: Arc<Mutex<Vec<Observed>>>,
}

impl RecordingObserver {
    /// A copy of everything recorded so far.
    pub fn events(&self) -> Vec<Observed> {
        self.events.lock().expect("observer lock").clone()
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.events.lock().expect("observer lock").clear();
    }

    fn push(&self, event: Observed) {
        self.events.lock().expect("observer lock").push(event);
    }
}

impl Observer for RecordingObserver {
    fn message_in(&self, topic: &str) {
        self.push(Observed::MessageIn { topic: topic.to_owned() });
    }
    fn message_in_bytes(&self, topic: &str, bytes: usize) {
        self.push(Observed::MessageInBytes { topic: topic.to_owned(), bytes });
    }
    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {
        self.push(Observed::MessageInvalid { topic: topic.to_owned(), outcome });
    }
    fn message_out(&self, topic: &str) {
        self.push(Observed::MessageOut { topic: topic.to_owned() });
    }
    fn message_out_bytes(&self, topic: &str, bytes: usize) {
        self.push(Observed::MessageOutBytes { topic: topic.to_owned(), bytes });
    }
    fn message_processed(&self, _elapsed: Duration) {
        self.push(Observed::MessageProcessed);
    }
    fn batch_processed(&self, size: usize, _elapsed: Duration) {
        self.push(Observed::BatchProcessed { size });
    }
    fn transaction_committed(&self) {
        self.push(Observed::TransactionCommitted);
    }
    fn poll_cycle(&self, _elapsed: Duration) {
        self.push(Observed::PollCycle);
    }
    fn active_configs(&self, count: usize) {
        self.push(Observed::ActiveConfigs { count });
    }
    fn config_message_in(&self, topic: &str) {
        self.push(Observed::ConfigMessageIn { topic: topic.to_owned() });
    }
    fn config_store_entries(&self, count: usize) {
        self.push(Observed::ConfigStoreEntries { count });
    }
    fn config_store_restored(&self, count: usize) {
        self.push(Observed::ConfigStoreRestored { count });
    }
    fn state_restored(&self, partition: i32, count: usize) {
        self.push(Observed::StateRestored { partition, count });
    }
    fn state_record_bytes(&self, bytes: usize) {
        self.push(Observed::StateRecordBytes { bytes });
    }
    fn tasks_assigned(&self, count: usize) {
        self.push(Observed::TasksAssigned { count });
    }
    fn tokens_assigned(&self, count: usize) {
        self.push(Observed::TokensAssigned { count });
    }
    fn mqtt_buffered(&self, topic: &str, count: usize) {
        self.push(Observed::MqttBuffered { topic: topic.to_owned(), count });
    }
    fn mqtt_connected(&self) {
        self.push(Observed::MqttConnected);
    }
    fn mqtt_disconnected(&self) {
        self.push(Observed::MqttDisconnected);
    }
    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {
        self.push(Observed::MqttMessageDropped { topic: topic.to_owned(), reason: reason.to_owned() });
    }
    fn mqtt_message_in(&self, topic: &str) {
        self.push(Observed::MqttMessageIn { topic: topic.to_owned() });
    }
}
