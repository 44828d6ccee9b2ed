//! The Observer port: every event the metrics are built from (MET-06).
//!
//! Runners call these hooks; adapters turn them into metrics. The default implementation of
//! every hook does nothing, so an adapter implements only what it exports. The test kit
//! (feature `testing`) has a recording observer that keeps every call; [`FanOut`] feeds several
//! observers at once.
//!
//! An exporter of metrics (the Prometheus adapter, feature `prometheus`: [`prometheus`]) plugs
//! into an application through [`MetricsConfig`]: the application builds one
//! [`MetricsInstance`] of it (its own metrics, labelled with its `metrics_labels`), feeds it
//! every event, and serves it while it runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

#[cfg(feature = "prometheus")]
pub mod prometheus;

/// A read-only view of the config store, as an observer sees it after a bootstrap or a drain
/// (the store itself lives a layer above the ports; simulations digest it through this).
pub trait ConfigView {
    /// Entries in the store.
    fn len(&self) -> usize;
    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The wire footprint: UTF-8 key bytes plus canonical JSON value bytes over every entry
    /// (`flechtwerk_config_store_bytes`, Python's `ConfigStore.nbytes`). The default sums
    /// [`for_each_entry`](Self::for_each_entry); the config store keeps it current in O(1).
    fn wire_bytes(&self) -> usize {
        let mut bytes = 0;
        self.for_each_entry(&mut |key, value| bytes += key.len() + value.len());
        bytes
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

/// Feeds every event to each of its observers, in order (the application's metrics and a
/// user's own observer, say).
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::observer::{FanOut, Observer};
/// use flechtwerk::testing::{Observed, RecordingObserver};
/// let (a, b) = (RecordingObserver::default(), RecordingObserver::default());
/// let both = FanOut::new(vec![Arc::new(a.clone()), Arc::new(b.clone())]);
/// both.transaction_committed();
/// assert_eq!(a.events(), b.events());
/// ```
#[derive(Clone, Default)]
pub struct FanOut {
    observers: Vec<Arc<dyn Observer>>,
}

impl FanOut {
    /// An observer feeding `observers`.
    pub fn new(observers: Vec<Arc<dyn Observer>>) -> Self {
        FanOut { observers }
    }
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut").field("observers", &self.observers.len()).finish()
    }
}

macro_rules! fan_out {
    ($($hook:ident($($arg:ident: $ty:ty),*);)*) => {
        impl Observer for FanOut {
            $(fn $hook(&self, $($arg: $ty),*) {
                for observer in &self.observers {
                    observer.$hook($($arg),*);
                }
            })*
        }
    };
}

fan_out! {
    message_in(topic: &str);
    message_in_bytes(topic: &str, bytes: usize);
    message_invalid(topic: &str, outcome: InvalidOutcome);
    message_out(topic: &str);
    message_out_bytes(topic: &str, bytes: usize);
    message_processed(elapsed: Duration);
    batch_processed(size: usize, elapsed: Duration);
    transaction_committed();
    poll_cycle(elapsed: Duration);
    active_configs(count: usize);
    config_message_in(topic: &str);
    config_store_entries(count: usize);
    config_store_restored(count: usize);
    config_store_updated(store: &dyn ConfigView);
    state_restored(partition: i32, count: usize);
    state_record_bytes(bytes: usize);
    tasks_assigned(count: usize);
    tokens_assigned(count: usize);
    mqtt_buffered(topic: &str, count: usize);
    mqtt_connected();
    mqtt_disconnected();
    mqtt_message_dropped(topic: &str, reason: &str);
    mqtt_message_in(topic: &str);
}

/// How an application exports metrics: the builder's `metrics(...)` takes one (the Prometheus
/// adapter's `Metrics::serve(address)`), and makes one [`MetricsInstance`] of it per
/// application.
pub trait MetricsConfig: Send + Sync {
    /// The metrics of one application: `labels` (the application's `metrics_labels`, in the
    /// caller's order) lead the label names of every metric; `max_poll_records` tops the
    /// `batch_size` ladder (MET-03). An error says why the labels cannot be used.
    fn instance(
        &self,
        labels: &[(String, String)],
        max_poll_records: usize,
    ) -> Result<Arc<dyn MetricsInstance>, String>;
}

/// The metrics of one application instance: the observer that feeds them, their exposition,
/// and the endpoint that serves them.
pub trait MetricsInstance: Send + Sync {
    /// The observer the engine feeds.
    fn observer(&self) -> Arc<dyn Observer>;
    /// The exposition of every metric as a scrape would see it now.
    fn render(&self) -> String;
    /// The configured address of the endpoint, if it serves one.
    fn address(&self) -> Option<&str>;
    /// Starts serving on the configured address (binding fails with the OS error, LIFE-17).
    /// `Ok(None)` when this instance serves nothing. The endpoint stops with
    /// [`MetricsServer::stop`].
    fn serve(&self) -> BoxFuture<'static, std::io::Result<Option<Box<dyn MetricsServer>>>>;
}

/// A running metrics endpoint.
pub trait MetricsServer: Send {
    /// Where it listens (the bound port when the configured one was 0).
    fn local_addr(&self) -> SocketAddr;
    /// Stops serving: the listener and every open connection are closed, and the port is free
    /// again, when the returned future completes.
    fn stop(self: Box<Self>) -> BoxFuture<'static, ()>;
}
