//! The Observer port: every event the metrics are built from (MET-06).
//!
//! Runners call these hooks; adapters turn them into metrics. The default implementation of
//! every hook does nothing, so an adapter implements only what it exports. The test kit
//! (feature `testing`) has a recording observer that keeps every call; [`FanOut`] feeds several
//! observers at once.
//!
//! An exporter of metrics (the Prometheus adapter: module `observer::prometheus`, feature
//! `prometheus`) plugs into an application through [`MetricsConfig`]: the application builds
//! one [`MetricsInstance`] of it (its own metrics, labelled with its `metrics_labels`), feeds
//! it every event, and serves it while it runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

#[cfg(feature = "prometheus")]
pub mod prometheus;

/// A read-only view of the config store, as an observer sees it after a bootstrap or a drain
/// (the store itself lives a layer above the ports; simulations digest it through this).
///
/// ```
/// use std::collections::HashMap;
/// use flechtwerk::observer::ConfigView;
///
/// // A view over a plain map, as a test double for an observer that digests the store.
/// struct Table(HashMap<String, Vec<u8>>);
/// impl ConfigView for Table {
///     fn len(&self) -> usize {
///         self.0.len()
///     }
///     fn for_each_entry(&self, f: &mut dyn FnMut(&str, &[u8])) {
///         self.0.iter().for_each(|(key, value)| f(key, value));
///     }
/// }
/// let table = Table(HashMap::from([("ada".to_owned(), br#"{"plan":"pro"}"#.to_vec())]));
/// assert_eq!(table.wire_bytes(), 3 + 14); // key bytes plus value bytes
/// assert!(!table.is_empty());
/// ```
pub trait ConfigView {
    /// Entries in the store.
    ///
    /// ```
    /// use flechtwerk::observer::ConfigView;
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"plan":"pro"}"#)?;
    /// let view: &dyn ConfigView = &store;
    /// assert_eq!(view.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn len(&self) -> usize;
    /// Whether the store is empty.
    ///
    /// ```
    /// use flechtwerk::observer::ConfigView;
    /// let store = flechtwerk::ConfigStore::new();
    /// assert!(ConfigView::is_empty(&store));
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The wire footprint: UTF-8 key bytes plus canonical JSON value bytes over every entry
    /// (`flechtwerk_config_store_bytes`, Python's `ConfigStore.nbytes`). The default sums
    /// [`for_each_entry`](Self::for_each_entry); the config store keeps it current in O(1).
    ///
    /// ```
    /// use flechtwerk::observer::ConfigView;
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"plan":"pro"}"#)?;
    /// assert_eq!(store.wire_bytes(), "ada".len() + r#"{"plan":"pro"}"#.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn wire_bytes(&self) -> usize {
        let mut bytes = 0;
        self.for_each_entry(&mut |key, value| bytes += key.len() + value.len());
        bytes
    }
    /// Calls `f` with every key and its canonical JSON bytes, in no particular order.
    ///
    /// ```
    /// use flechtwerk::observer::ConfigView;
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"plan":"pro"}"#)?;
    /// store.put_bytes("bob", br#"{"plan":"free"}"#)?;
    /// let mut keys = Vec::new();
    /// store.for_each_entry(&mut |key, _value| keys.push(key.to_owned()));
    /// keys.sort();
    /// assert_eq!(keys, ["ada", "bob"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn for_each_entry(&self, f: &mut dyn FnMut(&str, &[u8]));
    /// A sorted copy of every entry (key → canonical JSON bytes).
    ///
    /// ```
    /// use flechtwerk::observer::ConfigView;
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"plan": "pro"}"#)?;
    /// // Values are canonical JSON: no spaces.
    /// assert_eq!(store.to_map()["ada"], br#"{"plan":"pro"}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
///
/// ```
/// use flechtwerk::observer::InvalidOutcome;
/// let outcomes = [InvalidOutcome::Raised, InvalidOutcome::Skipped, InvalidOutcome::Substituted];
/// assert_eq!(outcomes.map(InvalidOutcome::as_str), ["raised", "skipped", "substituted"]);
/// ```
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
    ///
    /// ```
    /// use flechtwerk::observer::InvalidOutcome;
    /// assert_eq!(InvalidOutcome::Skipped.as_str(), "skipped");
    /// ```
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
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use flechtwerk::observer::Observer;
///
/// // An observer implements only the hooks it needs; the others do nothing.
/// #[derive(Default)]
/// struct Commits(AtomicUsize);
/// impl Observer for Commits {
///     fn transaction_committed(&self) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// let commits = Commits::default();
/// commits.transaction_committed(); // the engine calls it once per committed transaction
/// commits.message_in("clicks"); // a hook it does not implement: a no-op
/// assert_eq!(commits.0.load(Ordering::Relaxed), 1);
/// // Plug it in with `Flechtwerk::builder().observer(Arc::new(commits))`.
/// ```
#[allow(unused_variables)]
pub trait Observer: Send + Sync {
    /// A transformer record dispatched to `transform`, or an applied extractor config record.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Topics(Mutex<Vec<String>>);
    /// impl Observer for Topics {
    ///     fn message_in(&self, topic: &str) {
    ///         self.0.lock().unwrap().push(topic.to_owned());
    ///     }
    /// }
    /// let topics = Topics::default();
    /// topics.message_in("clicks");
    /// assert_eq!(*topics.0.lock().unwrap(), ["clicks"]);
    /// ```
    fn message_in(&self, topic: &str) {}
    /// Size (key + value bytes) of a raw input record, before decoding.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct BytesIn(AtomicUsize);
    /// impl Observer for BytesIn {
    ///     fn message_in_bytes(&self, _topic: &str, bytes: usize) {
    ///         self.0.fetch_add(bytes, Ordering::Relaxed);
    ///     }
    /// }
    /// let bytes_in = BytesIn::default();
    /// bytes_in.message_in_bytes("clicks", 120);
    /// bytes_in.message_in_bytes("clicks", 80);
    /// assert_eq!(bytes_in.0.load(Ordering::Relaxed), 200);
    /// ```
    fn message_in_bytes(&self, topic: &str, bytes: usize) {}
    /// One call of `on_invalid_message`, by outcome.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::{InvalidOutcome, Observer};
    /// #[derive(Default)]
    /// struct Skipped(AtomicUsize);
    /// impl Observer for Skipped {
    ///     fn message_invalid(&self, _topic: &str, outcome: InvalidOutcome) {
    ///         if outcome == InvalidOutcome::Skipped {
    ///             self.0.fetch_add(1, Ordering::Relaxed);
    ///         }
    ///     }
    /// }
    /// let skipped = Skipped::default();
    /// skipped.message_invalid("clicks", InvalidOutcome::Skipped);
    /// skipped.message_invalid("clicks", InvalidOutcome::Raised);
    /// assert_eq!(skipped.0.load(Ordering::Relaxed), 1);
    /// ```
    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {}
    /// A message emitted by a stage.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Emitted(AtomicUsize);
    /// impl Observer for Emitted {
    ///     fn message_out(&self, _topic: &str) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    /// let emitted = Emitted::default();
    /// emitted.message_out("click-counts");
    /// assert_eq!(emitted.0.load(Ordering::Relaxed), 1);
    /// ```
    fn message_out(&self, topic: &str) {}
    /// Size (key + value bytes) of a produced record.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Largest(AtomicUsize);
    /// impl Observer for Largest {
    ///     fn message_out_bytes(&self, _topic: &str, bytes: usize) {
    ///         self.0.fetch_max(bytes, Ordering::Relaxed);
    ///     }
    /// }
    /// let largest = Largest::default();
    /// largest.message_out_bytes("click-counts", 40);
    /// largest.message_out_bytes("click-counts", 25);
    /// assert_eq!(largest.0.load(Ordering::Relaxed), 40);
    /// ```
    fn message_out_bytes(&self, topic: &str, bytes: usize) {}
    /// One `transform` call or extractor poll, with its duration.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use std::time::Duration;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Slowest(Mutex<Duration>);
    /// impl Observer for Slowest {
    ///     fn message_processed(&self, elapsed: Duration) {
    ///         let mut slowest = self.0.lock().unwrap();
    ///         *slowest = (*slowest).max(elapsed);
    ///     }
    /// }
    /// let slowest = Slowest::default();
    /// slowest.message_processed(Duration::from_micros(30));
    /// slowest.message_processed(Duration::from_micros(10));
    /// assert_eq!(*slowest.0.lock().unwrap(), Duration::from_micros(30));
    /// ```
    fn message_processed(&self, elapsed: Duration) {}
    /// One committed transformer batch: its records after the parse loop (every poll it
    /// gathered, TRX-45) and its duration from its first poll's preparation to its commit, commits
    /// included. Once per batch in both producer shapes (MET-03).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Records(AtomicUsize);
    /// impl Observer for Records {
    ///     fn batch_processed(&self, size: usize, _elapsed: Duration) {
    ///         self.0.fetch_add(size, Ordering::Relaxed);
    ///     }
    /// }
    /// let records = Records::default();
    /// records.batch_processed(500, Duration::from_millis(12));
    /// records.batch_processed(3, Duration::from_millis(2));
    /// assert_eq!(records.0.load(Ordering::Relaxed), 503);
    /// ```
    fn batch_processed(&self, size: usize, elapsed: Duration) {}
    /// One committed task transaction or extractor page.
    ///
    /// ```
    /// use flechtwerk::observer::Observer;
    /// use flechtwerk::testing::{Observed, RecordingObserver};
    /// let observer = RecordingObserver::default();
    /// observer.transaction_committed();
    /// assert_eq!(observer.events(), [Observed::TransactionCommitted]);
    /// ```
    fn transaction_committed(&self) {}
    /// One extractor poll cycle with at least one active config.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Cycles(AtomicUsize);
    /// impl Observer for Cycles {
    ///     fn poll_cycle(&self, _elapsed: Duration) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    /// let cycles = Cycles::default();
    /// cycles.poll_cycle(Duration::from_millis(4));
    /// assert_eq!(cycles.0.load(Ordering::Relaxed), 1);
    /// ```
    fn poll_cycle(&self, elapsed: Duration) {}
    /// Active configs of this replica.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// // A gauge: the last value wins.
    /// #[derive(Default)]
    /// struct Active(AtomicUsize);
    /// impl Observer for Active {
    ///     fn active_configs(&self, count: usize) {
    ///         self.0.store(count, Ordering::Relaxed);
    ///     }
    /// }
    /// let active = Active::default();
    /// active.active_configs(7);
    /// active.active_configs(5);
    /// assert_eq!(active.0.load(Ordering::Relaxed), 5);
    /// ```
    fn active_configs(&self, count: usize) {}
    /// A drained (not bootstrapped) config record that was applied.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Drained(AtomicUsize);
    /// impl Observer for Drained {
    ///     fn config_message_in(&self, _topic: &str) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    /// let drained = Drained::default();
    /// drained.config_message_in("plans");
    /// assert_eq!(drained.0.load(Ordering::Relaxed), 1);
    /// ```
    fn config_message_in(&self, topic: &str) {}
    /// Config store size, after the bootstrap and after a drain that applied records.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Entries(AtomicUsize);
    /// impl Observer for Entries {
    ///     fn config_store_entries(&self, count: usize) {
    ///         self.0.store(count, Ordering::Relaxed);
    ///     }
    /// }
    /// let entries = Entries::default();
    /// entries.config_store_entries(1_000);
    /// assert_eq!(entries.0.load(Ordering::Relaxed), 1_000);
    /// ```
    fn config_store_entries(&self, count: usize) {}
    /// Entries the bootstrap loaded.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Restored(AtomicUsize);
    /// impl Observer for Restored {
    ///     fn config_store_restored(&self, count: usize) {
    ///         self.0.store(count, Ordering::Relaxed);
    ///     }
    /// }
    /// let restored = Restored::default();
    /// restored.config_store_restored(42);
    /// assert_eq!(restored.0.load(Ordering::Relaxed), 42);
    /// ```
    fn config_store_restored(&self, count: usize) {}
    /// The config store after the bootstrap and after every drain that applied records: a
    /// read-only view for observers that check or digest the table (simulations do).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::{ConfigView, Observer};
    /// // Keeps the last digest of the table: here simply its sorted keys.
    /// #[derive(Default)]
    /// struct Digest(Mutex<Vec<String>>);
    /// impl Observer for Digest {
    ///     fn config_store_updated(&self, store: &dyn ConfigView) {
    ///         *self.0.lock().unwrap() = store.to_map().into_keys().collect();
    ///     }
    /// }
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("bob", b"{}")?;
    /// store.put_bytes("ada", b"{}")?;
    /// let digest = Digest::default();
    /// digest.config_store_updated(&store);
    /// assert_eq!(*digest.0.lock().unwrap(), ["ada", "bob"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn config_store_updated(&self, store: &dyn ConfigView) {}
    /// Changelog records replayed into a transformer task's store.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use std::collections::BTreeMap;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Replayed(Mutex<BTreeMap<i32, usize>>);
    /// impl Observer for Replayed {
    ///     fn state_restored(&self, partition: i32, count: usize) {
    ///         *self.0.lock().unwrap().entry(partition).or_default() += count;
    ///     }
    /// }
    /// let replayed = Replayed::default();
    /// replayed.state_restored(0, 10);
    /// replayed.state_restored(3, 2);
    /// assert_eq!(replayed.0.lock().unwrap()[&0], 10);
    /// ```
    fn state_restored(&self, partition: i32, count: usize) {}
    /// Size of a changelog record written for a state put (not deletes, not restore).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct ChangelogBytes(AtomicUsize);
    /// impl Observer for ChangelogBytes {
    ///     fn state_record_bytes(&self, bytes: usize) {
    ///         self.0.fetch_add(bytes, Ordering::Relaxed);
    ///     }
    /// }
    /// let written = ChangelogBytes::default();
    /// written.state_record_bytes(64);
    /// written.state_record_bytes(16);
    /// assert_eq!(written.0.load(Ordering::Relaxed), 80);
    /// ```
    fn state_record_bytes(&self, bytes: usize) {}
    /// Live transformer tasks.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Tasks(AtomicUsize);
    /// impl Observer for Tasks {
    ///     fn tasks_assigned(&self, count: usize) {
    ///         self.0.store(count, Ordering::Relaxed);
    ///     }
    /// }
    /// let tasks = Tasks::default();
    /// tasks.tasks_assigned(4); // after a rebalance: four partitions, four tasks
    /// assert_eq!(tasks.0.load(Ordering::Relaxed), 4);
    /// ```
    fn tasks_assigned(&self, count: usize) {}
    /// Held extractor ownership tokens.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Tokens(AtomicUsize);
    /// impl Observer for Tokens {
    ///     fn tokens_assigned(&self, count: usize) {
    ///         self.0.store(count, Ordering::Relaxed);
    ///     }
    /// }
    /// let tokens = Tokens::default();
    /// tokens.tokens_assigned(2);
    /// assert_eq!(tokens.0.load(Ordering::Relaxed), 2);
    /// ```
    fn tokens_assigned(&self, count: usize) {}
    /// A key of the application's keyring, once per kid when a run starts (feature `secrets`; the
    /// `keyring_keys_loaded` gauge).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<String>>);
    /// impl Observer for Seen {
    ///     fn keyring_key_loaded(&self, kid: &str) {
    ///         self.0.lock().unwrap().push(kid.to_owned());
    ///     }
    /// }
    /// let observer = Seen::default();
    /// observer.keyring_key_loaded("k-2026");
    /// assert_eq!(*observer.0.lock().unwrap(), ["k-2026"]);
    /// ```
    fn keyring_key_loaded(&self, kid: &str) {}
    /// A plaintext value read by an encrypted attribute that tolerates one (`read_plaintext`), by
    /// the attribute's scope.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<String>>);
    /// impl Observer for Seen {
    ///     fn secret_plaintext_read(&self, scope: &str) {
    ///         self.0.lock().unwrap().push(scope.to_owned());
    ///     }
    /// }
    /// let observer = Seen::default();
    /// observer.secret_plaintext_read("db");
    /// assert_eq!(*observer.0.lock().unwrap(), ["db"]);
    /// ```
    fn secret_plaintext_read(&self, scope: &str) {}
    /// A `flenc:` value decrypted, by the attribute's scope and the token's kid.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<String>>);
    /// impl Observer for Seen {
    ///     fn secret_decrypted(&self, scope: &str, kid: &str) {
    ///         self.0.lock().unwrap().push(format!("{scope}/{kid}"));
    ///     }
    /// }
    /// let observer = Seen::default();
    /// observer.secret_decrypted("db", "k-2026");
    /// assert_eq!(*observer.0.lock().unwrap(), ["db/k-2026"]);
    /// ```
    fn secret_decrypted(&self, scope: &str, kid: &str) {}
    /// An unsigned value read by a signed attribute that tolerates one (`read_unsigned`).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<String>>);
    /// impl Observer for Seen {
    ///     fn secret_unsigned_read(&self, scope: &str) {
    ///         self.0.lock().unwrap().push(scope.to_owned());
    ///     }
    /// }
    /// let observer = Seen::default();
    /// observer.secret_unsigned_read("payouts");
    /// assert_eq!(*observer.0.lock().unwrap(), ["payouts"]);
    /// ```
    fn secret_unsigned_read(&self, scope: &str) {}
    /// A `flsig:` value verified, by the attribute's scope and the signer's kid.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<String>>);
    /// impl Observer for Seen {
    ///     fn secret_verified(&self, scope: &str, kid: &str) {
    ///         self.0.lock().unwrap().push(format!("{scope}/{kid}"));
    ///     }
    /// }
    /// let observer = Seen::default();
    /// observer.secret_verified("payouts", "sig-1");
    /// assert_eq!(*observer.0.lock().unwrap(), ["payouts/sig-1"]);
    /// ```
    fn secret_verified(&self, scope: &str, kid: &str) {}
    /// Messages left buffered for an MQTT filter.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use std::collections::HashMap;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Buffered(Mutex<HashMap<String, usize>>);
    /// impl Observer for Buffered {
    ///     fn mqtt_buffered(&self, topic: &str, count: usize) {
    ///         self.0.lock().unwrap().insert(topic.to_owned(), count);
    ///     }
    /// }
    /// let buffered = Buffered::default();
    /// buffered.mqtt_buffered("sensors/+/temp", 12);
    /// assert_eq!(buffered.0.lock().unwrap()["sensors/+/temp"], 12);
    /// ```
    fn mqtt_buffered(&self, topic: &str, count: usize) {}
    /// A successful MQTT (re)connect.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use flechtwerk::observer::Observer;
    /// // Connection health: up after a connect, down after an unexpected disconnect.
    /// #[derive(Default)]
    /// struct Up(AtomicBool);
    /// impl Observer for Up {
    ///     fn mqtt_connected(&self) {
    ///         self.0.store(true, Ordering::Relaxed);
    ///     }
    ///     fn mqtt_disconnected(&self) {
    ///         self.0.store(false, Ordering::Relaxed);
    ///     }
    /// }
    /// let up = Up::default();
    /// up.mqtt_connected();
    /// assert!(up.0.load(Ordering::Relaxed));
    /// ```
    fn mqtt_connected(&self) {}
    /// An unexpected MQTT disconnect.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Drops(AtomicUsize);
    /// impl Observer for Drops {
    ///     fn mqtt_disconnected(&self) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    /// let drops = Drops::default();
    /// drops.mqtt_disconnected();
    /// assert_eq!(drops.0.load(Ordering::Relaxed), 1);
    /// ```
    fn mqtt_disconnected(&self) {}
    /// An MQTT message dropped, by reason (`filtered`, `poison`, `unsubscribed`, `stale`).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Poison(Mutex<Vec<String>>);
    /// impl Observer for Poison {
    ///     fn mqtt_message_dropped(&self, topic: &str, reason: &str) {
    ///         if reason == "poison" {
    ///             self.0.lock().unwrap().push(topic.to_owned());
    ///         }
    ///     }
    /// }
    /// let poison = Poison::default();
    /// poison.mqtt_message_dropped("sensors/7/temp", "poison");
    /// poison.mqtt_message_dropped("sensors/8/temp", "filtered");
    /// assert_eq!(*poison.0.lock().unwrap(), ["sensors/7/temp"]);
    /// ```
    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {}
    /// An MQTT message routed into a subscription.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use flechtwerk::observer::Observer;
    /// #[derive(Default)]
    /// struct Routed(AtomicUsize);
    /// impl Observer for Routed {
    ///     fn mqtt_message_in(&self, _topic: &str) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    /// let routed = Routed::default();
    /// routed.mqtt_message_in("sensors/7/temp");
    /// assert_eq!(routed.0.load(Ordering::Relaxed), 1);
    /// ```
    fn mqtt_message_in(&self, topic: &str) {}
}

/// The observer that observes nothing (metrics off).
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::observer::{NoopObserver, Observer};
/// let observer: Arc<dyn Observer> = Arc::new(NoopObserver);
/// observer.transaction_committed(); // does nothing, costs nothing
/// ```
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
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::observer::{FanOut, Observer};
    /// use flechtwerk::testing::{Observed, RecordingObserver};
    /// let recorder = RecordingObserver::default();
    /// let both = FanOut::new(vec![Arc::new(recorder.clone()), Arc::new(flechtwerk::observer::NoopObserver)]);
    /// both.tasks_assigned(3);
    /// assert_eq!(recorder.events(), [Observed::TasksAssigned { count: 3 }]);
    /// ```
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
    keyring_key_loaded(kid: &str);
    secret_plaintext_read(scope: &str);
    secret_decrypted(scope: &str, kid: &str);
    secret_unsigned_read(scope: &str);
    secret_verified(scope: &str, kid: &str);
    mqtt_buffered(topic: &str, count: usize);
    mqtt_connected();
    mqtt_disconnected();
    mqtt_message_dropped(topic: &str, reason: &str);
    mqtt_message_in(topic: &str);
}

/// How an application exports metrics: the builder's `metrics(...)` takes one (the Prometheus
/// adapter's `Metrics::serve(address)`), and makes one [`MetricsInstance`] of it per
/// application.
///
/// ```
/// # #[cfg(feature = "prometheus")] {
/// use flechtwerk::observer::prometheus::Metrics; // feature `prometheus`
/// use flechtwerk::observer::MetricsConfig;
/// let labels = [("app".to_owned(), "counter".to_owned())];
/// let metrics = Metrics::unserved().instance(&labels, 500)?;
/// metrics.observer().transaction_committed();
/// assert!(metrics.render().contains(r#"flechtwerk_transactions_committed_total{app="counter"} 1"#));
/// # }
/// # Ok::<(), String>(())
/// ```
pub trait MetricsConfig: Send + Sync {
    /// The metrics of one application: `labels` (the application's `metrics_labels`, in the
    /// caller's order) lead the label names of every metric; `batch_cap`, the most records one
    /// poll returns (the application's `max_poll_records`, as in Python), tops the `batch_size` ladder
    /// (MET-03). An error says why the labels cannot be used.
    ///
    /// ```
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::observer::MetricsConfig;
    /// // `topic` is a label of the metrics' own: refused as an application label.
    /// let labels = [("topic".to_owned(), "x".to_owned())];
    /// assert!(Metrics::unserved().instance(&labels, 500).is_err());
    /// assert!(Metrics::unserved().instance(&[], 500).is_ok());
    /// # }
    /// ```
    fn instance(&self, labels: &[(String, String)], batch_cap: usize) -> Result<Arc<dyn MetricsInstance>, String>;
}

/// The metrics of one application instance: the observer that feeds them, their exposition,
/// and the endpoint that serves them.
///
/// ```
/// # #[cfg(feature = "prometheus")] {
/// use flechtwerk::observer::prometheus::Metrics;
/// use flechtwerk::observer::MetricsConfig;
/// let metrics = Metrics::serve("127.0.0.1:0").instance(&[], 500)?;
/// assert_eq!(metrics.address(), Some("127.0.0.1:0"));
/// metrics.observer().tasks_assigned(4);
/// assert!(metrics.render().contains("flechtwerk_tasks_assigned 4"));
/// # }
/// # Ok::<(), String>(())
/// ```
pub trait MetricsInstance: Send + Sync {
    /// The observer the engine feeds.
    ///
    /// ```
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::observer::MetricsConfig;
    /// let metrics = Metrics::unserved().instance(&[], 500)?;
    /// let observer = metrics.observer(); // what the engine feeds
    /// observer.message_in("clicks");
    /// assert!(metrics.render().contains(r#"flechtwerk_messages_in_total{topic="clicks"} 1"#));
    /// # }
    /// # Ok::<(), String>(())
    /// ```
    fn observer(&self) -> Arc<dyn Observer>;
    /// The exposition of every metric as a scrape would see it now.
    ///
    /// ```
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::observer::MetricsConfig;
    /// let metrics = Metrics::unserved().instance(&[], 500)?;
    /// metrics.observer().active_configs(3);
    /// assert!(metrics.render().contains("# TYPE flechtwerk_active_configs gauge"));
    /// # }
    /// # Ok::<(), String>(())
    /// ```
    fn render(&self) -> String;
    /// The configured address of the endpoint, if it serves one.
    ///
    /// ```
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::observer::MetricsConfig;
    /// assert_eq!(Metrics::unserved().instance(&[], 500)?.address(), None);
    /// assert_eq!(Metrics::serve("0.0.0.0:9464").instance(&[], 500)?.address(), Some("0.0.0.0:9464"));
    /// # }
    /// # Ok::<(), String>(())
    /// ```
    fn address(&self) -> Option<&str>;
    /// Starts serving on the configured address (binding fails with the OS error, LIFE-17).
    /// `Ok(None)` when this instance serves nothing. The endpoint stops with
    /// [`MetricsServer::stop`].
    ///
    /// ```
    /// use flechtwerk::observer::MetricsConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// let metrics = Metrics::serve("127.0.0.1:0").instance(&[], 500)?; // port 0: any free port
    /// let server = metrics.serve().await?.expect("an address was configured");
    /// assert_ne!(server.local_addr().port(), 0);
    /// server.stop().await;
    /// assert!(Metrics::unserved().instance(&[], 500)?.serve().await?.is_none());
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    fn serve(&self) -> BoxFuture<'static, std::io::Result<Option<Box<dyn MetricsServer>>>>;
}

/// A running metrics endpoint.
///
/// ```
/// use flechtwerk::observer::MetricsConfig;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # #[cfg(feature = "prometheus")] {
/// use flechtwerk::observer::prometheus::Metrics;
/// let server = Metrics::serve("127.0.0.1:0").instance(&[], 500)?.serve().await?.unwrap();
/// let address = server.local_addr();
/// server.stop().await;
/// std::net::TcpListener::bind(address)?; // the port is free again
/// # }
/// # Ok(())
/// # }
/// ```
pub trait MetricsServer: Send {
    /// Where it listens (the bound port when the configured one was 0).
    ///
    /// ```
    /// use flechtwerk::observer::MetricsConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// let server = Metrics::serve("127.0.0.1:0").instance(&[], 500)?.serve().await?.unwrap();
    /// assert!(server.local_addr().ip().is_loopback());
    /// server.stop().await;
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    fn local_addr(&self) -> SocketAddr;
    /// Stops serving: the listener and every open connection are closed, and the port is free
    /// again, when the returned future completes.
    ///
    /// ```
    /// use flechtwerk::observer::MetricsConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// let server = Metrics::serve("127.0.0.1:0").instance(&[], 500)?.serve().await?.unwrap();
    /// let address = server.local_addr();
    /// server.stop().await;
    /// assert!(std::net::TcpStream::connect(address).is_err()); // nobody listens any more
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    fn stop(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// An observer as the sink of the secret codecs' events (feature `secrets`).
#[cfg(feature = "secrets")]
pub(crate) struct SecretEventsOf(pub(crate) Arc<dyn Observer>);

#[cfg(feature = "secrets")]
impl crate::secrets::SecretEvents for SecretEventsOf {
    fn decrypted(&self, scope: &str, kid: &str) {
        self.0.secret_decrypted(scope, kid);
    }
    fn plaintext_read(&self, scope: &str) {
        self.0.secret_plaintext_read(scope);
    }
    fn verified(&self, scope: &str, kid: &str) {
        self.0.secret_verified(scope, kid);
    }
    fn unsigned_read(&self, scope: &str) {
        self.0.secret_unsigned_read(scope);
    }
}
