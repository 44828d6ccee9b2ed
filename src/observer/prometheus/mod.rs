//! The Prometheus observer (feature `prometheus`): every `flechtwerk_*` metric of the Python
//! implementation (0.17), named, typed, labelled and bucketed as it names, types, labels and
//! buckets them, so Rust and Python instances share dashboards (MET-01..06).
//!
//! Turn it on in the builder; the application then serves `/metrics` on that address while it
//! runs (and only then):
//!
//! ```no_run
//! # async fn demo(kafka: std::sync::Arc<dyn flechtwerk::kafka::Kafka>) -> Result<(), flechtwerk::Error> {
//! use flechtwerk::observer::prometheus::Metrics;
//! use flechtwerk::{transformer, Flechtwerk, Message};
//!
//! let echo = transformer(["in"]).transform(|msg, _state, out| {
//!     out.send(Message::new("out", msg.key.as_str(), msg.value));
//!     Ok(())
//! });
//! let app = Flechtwerk::builder()
//!     .application_id("echo")
//!     .client_id("pod-0")
//!     .kafka(kafka)
//!     .metrics_labels([("app", "echo"), ("pod", "pod-0")])
//!     .metrics(Metrics::serve("127.0.0.1:9464"))
//!     .build(echo)?;
//! app.run_until(async { /* e.g. wait for SIGTERM */ }).await
//! # }
//! ```
//!
//! What it shares with Python 0.17 (pinned by `tests/metrics.rs` against the package's own
//! exposition, `tests/golden/python_metrics_exposition.txt`): the family names, types and help
//! texts, the label names (the caller's `metrics_labels` keys first, in the caller's order, then
//! the family's own), the bucket ladders, running maxima kept per observer instance, families
//! that appear only once their first event happened, and the text format down to the float
//! formatting (`1.048576e+06`) and the label order of a sample (sorted by name, `le` among them).
//!
//! Where it differs, on purpose:
//!
//! - **The registry is the application's own**, not the process-global one: two applications in
//!   one process never share a metric, and the endpoint serves only `flechtwerk_*` families (no
//!   `python_*`/`process_*` collectors).
//! - **No `*_created` series.** prometheus_client adds a `<name>_created` gauge (the child's
//!   creation time) next to every counter and histogram; no dashboard or alert of ours reads it.
//! - **Text format 0.0.4 only**; prometheus_client also negotiates OpenMetrics with a Prometheus
//!   server. The stored series are the same either way.
//! - **Empty `metrics_labels` work** (the families then have only their own labels); Python 0.17
//!   crashes at the first event of a family without a label of its own.
//! - **Families in name order** within a scrape, samples in label-value order (Python: the order
//!   of first use). Scrapers do not care.
//! - **The endpoint binds the configured address** (Python: `0.0.0.0`, always), `/metrics` only.
//! - **No keyring or secret families** (`keyring_keys_loaded`, `secret_*`): this port has no
//!   keyring or field encryption, so no hook feeds them.
//! - `flechtwerk_config_store_bytes` is fed by the `config_store_updated` hook (the store's
//!   [`ConfigView::wire_bytes`]); Python has a hook of
//!   its own for it, called at the same two places.

mod ladders;
mod server;
pub mod text;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use foldhash::fast::FixedState;
use futures::future::BoxFuture;
use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

pub use self::ladders::{batch_size_buckets, BATCH_CAP_MAX, BYTE_BUCKETS, DURATION_BUCKETS};
use self::server::Server;
use super::{ConfigView, InvalidOutcome, MetricsConfig, MetricsInstance, MetricsServer, Observer};

/// The label names the families use themselves (and Python's keyring and secret families):
/// `metrics_labels` may not take them.
pub const RESERVED_LABELS: [&str; 7] = ["topic", "outcome", "partition", "reason", "kid", "scope", "le"];

/// Metrics on, served at `address` (`"127.0.0.1:9464"`, `"[::]:9464"`, `"0.0.0.0:9464"` for
/// every interface): what the builder's `metrics(...)` takes.
///
/// The address is bound when the application's run starts: a port taken is a startup error
/// (LIFE-17), and the endpoint stops, freeing the port, when the run ends. Port 0 binds a free
/// port ([`Flechtwerk::metrics_address`](crate::Flechtwerk::metrics_address) tells which).
///
/// ```
/// use flechtwerk::observer::prometheus::Metrics;
/// use flechtwerk::observer::MetricsConfig;
/// let labels = [("pod".to_owned(), "pod-0".to_owned())];
/// let metrics = Metrics::unserved().instance(&labels, 500)?;
/// metrics.observer().tokens_assigned(2);
/// assert!(metrics.render().contains(r#"flechtwerk_tokens_assigned{pod="pod-0"} 2"#));
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct Metrics {
    address: Option<String>,
}

impl Metrics {
    /// Metrics served at `address` while the application runs.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::{stage::transformer, Flechtwerk};
    /// let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .metrics(Metrics::serve("127.0.0.1:0")) // bound when the run starts
    ///     .build(transformer(["in"]).transform(|_, _, _| Ok(())))?;
    /// assert!(app.render_metrics().is_some());
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn serve(address: impl Into<String>) -> Self {
        Metrics { address: Some(address.into()) }
    }

    /// Metrics kept but not served: read them with
    /// [`Flechtwerk::render_metrics`](crate::Flechtwerk::render_metrics) (tests, or an
    /// application that serves them itself).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::observer::prometheus::Metrics;
    /// use flechtwerk::{stage::transformer, Flechtwerk};
    /// let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .metrics(Metrics::unserved())
    ///     .build(transformer(["in"]).transform(|_, _, _| Ok(())))?;
    /// assert!(app.render_metrics().is_some()); // read them while it runs
    /// assert_eq!(app.metrics_address(), None); // nothing served
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn unserved() -> Self {
        Metrics { address: None }
    }
}

impl MetricsConfig for Metrics {
    fn instance(&self, labels: &[(String, String)], batch_cap: usize) -> Result<Arc<dyn MetricsInstance>, String> {
        let observer = PrometheusObserver::new(labels, batch_cap)?;
        Ok(Arc::new(Instance { observer: Arc::new(observer), address: self.address.clone() }))
    }
}

/// One application's metrics: its observer, and where it is served.
struct Instance {
    observer: Arc<PrometheusObserver>,
    address: Option<String>,
}

impl MetricsInstance for Instance {
    fn observer(&self) -> Arc<dyn Observer> {
        self.observer.clone()
    }

    fn render(&self) -> String {
        self.observer.render()
    }

    fn address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    fn serve(&self) -> BoxFuture<'static, std::io::Result<Option<Box<dyn MetricsServer>>>> {
        let address = self.address.clone();
        let observer = self.observer.clone();
        Box::pin(async move {
            let Some(address) = address else {
                return Ok(None);
            };
            let render: server::Render = Arc::new(move || observer.render());
            let server = Server::start(&address, render).await?;
            Ok(Some(Box::new(server) as Box<dyn MetricsServer>))
        })
    }
}

/// Checks `metrics_labels`: Prometheus label names (`[a-zA-Z_][a-zA-Z0-9_]*`, no leading `__`),
/// each once, none of the families' own ([`RESERVED_LABELS`]).
///
/// ```
/// use flechtwerk::observer::prometheus::validate_labels;
/// let label = |name: &str| vec![(name.to_owned(), "x".to_owned())];
/// assert!(validate_labels(&label("pod")).is_ok());
/// assert!(validate_labels(&label("2pod")).is_err()); // not a Prometheus label name
/// assert!(validate_labels(&label("__pod")).is_err()); // reserved by Prometheus
/// assert!(validate_labels(&label("topic")).is_err()); // the metrics' own label
/// ```
pub fn validate_labels(labels: &[(String, String)]) -> Result<(), String> {
    for (i, (name, _)) in labels.iter().enumerate() {
        let mut chars = name.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("metrics_labels: {name:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"));
        }
        if name.starts_with("__") {
            return Err(format!("metrics_labels: {name:?}: names starting with __ are reserved by Prometheus"));
        }
        if RESERVED_LABELS.contains(&name.as_str()) {
            return Err(format!(
                "metrics_labels: {name:?} is a label of the framework's own metrics (reserved: {RESERVED_LABELS:?})"
            ));
        }
        if labels[..i].iter().any(|(other, _)| other == name) {
            return Err(format!("metrics_labels: {name:?} is given twice"));
        }
    }
    Ok(())
}

/// A vec family and its label names.
fn names<'a>(labels: &'a [(String, String)], own: &[&'a str]) -> Vec<&'a str> {
    labels.iter().map(|(name, _)| name.as_str()).chain(own.iter().copied()).collect()
}

/// The families of Python 0.17's `flechtwerk.metrics.Metrics` that a hook feeds, with their
/// help texts. All are registered at once; a family shows in a scrape once it has a child,
/// which it gets at its first event (as Python's lazily built families appear).
struct Families {
    messages_in: IntCounterVec,
    messages_invalid: IntCounterVec,
    messages_out: IntCounterVec,
    message_in_bytes: HistogramVec,
    message_in_max_bytes: IntGaugeVec,
    message_out_bytes: HistogramVec,
    message_out_max_bytes: IntGaugeVec,
    message_processing_seconds: HistogramVec,
    batch_size: HistogramVec,
    batch_processing_seconds: HistogramVec,
    transactions_committed: IntCounterVec,
    active_configs: IntGaugeVec,
    poll_cycle_seconds: HistogramVec,
    config_messages_in: IntCounterVec,
    config_store_bytes: IntGaugeVec,
    config_store_entries: IntGaugeVec,
    config_store_restored: IntCounterVec,
    state_restored: IntCounterVec,
    state_record_bytes: HistogramVec,
    state_record_max_bytes: IntGaugeVec,
    tasks_assigned: IntGaugeVec,
    tokens_assigned: IntGaugeVec,
    mqtt_buffered: IntGaugeVec,
    mqtt_connects: IntCounterVec,
    mqtt_disconnects: IntCounterVec,
    mqtt_dropped: IntCounterVec,
    mqtt_messages_in: IntCounterVec,
    keyring_keys_loaded: IntGaugeVec,
    secret_plaintext_reads: IntCounterVec,
    secret_decrypts: IntCounterVec,
    secret_unsigned_reads: IntCounterVec,
    secret_verifications: IntCounterVec,
}

impl Families {
    fn new(registry: &Registry, labels: &[(String, String)], batch_cap: usize) -> prometheus::Result<Self> {
        fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> prometheus::Result<C> {
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        }
        let counter = |name: &str, help: &str, own: &[&str]| {
            register(registry, IntCounterVec::new(Opts::new(name, help), &names(labels, own))?)
        };
        let gauge = |name: &str, help: &str, own: &[&str]| {
            register(registry, IntGaugeVec::new(Opts::new(name, help), &names(labels, own))?)
        };
        let histogram = |name: &str, help: &str, own: &[&str], buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            register(registry, HistogramVec::new(opts, &names(labels, own))?)
        };
        let topic = &["topic"][..];
        Ok(Families {
            messages_in: counter(
                "flechtwerk_messages_in_total",
                "Input messages consumed and dispatched to user code",
                topic,
            )?,
            messages_invalid: counter(
                "flechtwerk_messages_invalid_total",
                "Records whose key or value could not be decoded, by what on_invalid_message did with them",
                &["outcome", "topic"],
            )?,
            messages_out: counter(
                "flechtwerk_messages_out_total",
                "Output messages yielded by user code (i.e. produced to Kafka)",
                topic,
            )?,
            message_in_bytes: histogram(
                "flechtwerk_message_in_bytes",
                "Serialized size (key + value) of one consumed record (bytes)",
                topic,
                &BYTE_BUCKETS,
            )?,
            message_in_max_bytes: gauge(
                "flechtwerk_message_in_max_bytes",
                "Largest consumed record since process start (high-water mark, bytes)",
                topic,
            )?,
            message_out_bytes: histogram(
                "flechtwerk_message_out_bytes",
                "Serialized size (key + value) of one produced record (bytes)",
                topic,
                &BYTE_BUCKETS,
            )?,
            message_out_max_bytes: gauge(
                "flechtwerk_message_out_max_bytes",
                "Largest produced record since process start (high-water mark, bytes)",
                topic,
            )?,
            message_processing_seconds: histogram(
                "flechtwerk_message_processing_seconds",
                "Time spent in a single transform()/poll() dispatch (a transformer's transaction is outside; \
                 an extractor's per-page sends and commits are inside)",
                &[],
                &DURATION_BUCKETS,
            )?,
            batch_size: histogram(
                "flechtwerk_batch_size",
                "Records returned by a single getmany() call (capped at max_poll_records)",
                &[],
                &batch_size_buckets(batch_cap),
            )?,
            batch_processing_seconds: histogram(
                "flechtwerk_batch_processing_seconds",
                "Wall time to fully process a batch (incl. Kafka transaction commit)",
                &[],
                &DURATION_BUCKETS,
            )?,
            transactions_committed: counter(
                "flechtwerk_transactions_committed_total",
                "Kafka transactions successfully committed",
                &[],
            )?,
            active_configs: gauge(
                "flechtwerk_active_configs",
                "Currently-active (non-suspended) configs being polled",
                &[],
            )?,
            poll_cycle_seconds: histogram(
                "flechtwerk_poll_cycle_seconds",
                "Wall time for one poll cycle across all active configs",
                &[],
                &DURATION_BUCKETS,
            )?,
            config_messages_in: counter(
                "flechtwerk_config_messages_in_total",
                "Records consumed from config topics into the per-process config store",
                topic,
            )?,
            config_store_bytes: gauge(
                "flechtwerk_config_store_bytes",
                "Wire size of the config store (UTF-8 keys plus encoded values) \u{2014} the store lives in RAM on \
                 every instance, so this is the gauge for its size contract",
                &[],
            )?,
            config_store_entries: gauge(
                "flechtwerk_config_store_entries",
                "Entries currently held in the config store (latest config per wire key)",
                &[],
            )?,
            config_store_restored: counter(
                "flechtwerk_config_store_restored_entries_total",
                "Entries surviving the startup bootstrap of the config store",
                &[],
            )?,
            state_restored: counter(
                "flechtwerk_state_restored_entries_total",
                "Changelog records replayed into the local state store on task initialization",
                &["partition"],
            )?,
            state_record_bytes: histogram(
                "flechtwerk_state_record_bytes",
                "Serialized size of one state changelog record, observed at every write (bytes)",
                &[],
                &BYTE_BUCKETS,
            )?,
            state_record_max_bytes: gauge(
                "flechtwerk_state_record_max_bytes",
                "Largest state changelog record since process start (high-water mark, bytes)",
                &[],
            )?,
            tasks_assigned: gauge(
                "flechtwerk_tasks_assigned",
                "Tasks (input partitions) currently owned and initialized by this instance",
                &[],
            )?,
            tokens_assigned: gauge(
                "flechtwerk_tokens_assigned",
                "Ownership tokens (config-partition leases) currently held by this extractor instance \u{2014} 0 \
                 means hot standby",
                &[],
            )?,
            mqtt_buffered: gauge(
                "flechtwerk_mqtt_buffered_messages",
                "MQTT messages left buffered for a subscription after the last drain",
                topic,
            )?,
            mqtt_connects: counter(
                "flechtwerk_mqtt_connects_total",
                "Successful MQTT (re)connects \u{2014} more than one per process lifetime means session churn",
                &[],
            )?,
            mqtt_disconnects: counter(
                "flechtwerk_mqtt_disconnects_total",
                "Unexpected MQTT disconnects (clean shutdown is not counted)",
                &[],
            )?,
            mqtt_dropped: counter(
                "flechtwerk_mqtt_messages_dropped_total",
                "MQTT messages dropped without forwarding (filtered: relay returned None; poison: relay raised)",
                &["reason", "topic"],
            )?,
            mqtt_messages_in: counter(
                "flechtwerk_mqtt_messages_in_total",
                "MQTT messages routed into a subscription's buffer",
                topic,
            )?,
            // The secret families (feature `secrets`): `kid` and `scope` are bounded, kids by
            // the keyring's size, scopes by the attributes declared (empty: unscoped).
            keyring_keys_loaded: gauge(
                "flechtwerk_keyring_keys_loaded",
                "Keys present in the installed keyring (1 per kid) \u{2014} makes 'every reader has the new key' \
                 checkable fleet-wide",
                &["kid"],
            )?,
            secret_plaintext_reads: counter(
                "flechtwerk_secret_plaintext_reads_total",
                "Reads of a secret value that took the legacy-plaintext branch \u{2014} should reach zero before \
                 ending the migration",
                &["scope"],
            )?,
            secret_decrypts: counter(
                "flechtwerk_secret_decrypts_total",
                "Successful secret decryptions, by scope and kid \u{2014} 'decrypts under the old kid are flat' \
                 gates a rotation",
                &["scope", "kid"],
            )?,
            secret_unsigned_reads: counter(
                "flechtwerk_secret_unsigned_reads_total",
                "Reads of a signed value that took the unsigned branch \u{2014} should reach zero before ending \
                 the migration",
                &["scope"],
            )?,
            secret_verifications: counter(
                "flechtwerk_secret_verifications_total",
                "Successful signature verifications, by scope and signer kid \u{2014} 'verifications under the \
                 old kid are flat' gates a signer rotation",
                &["scope", "kid"],
            )?,
        })
    }
}

/// A child of a family for this observer's label values, made at its first use (when the family
/// first shows in a scrape) and kept, so the hot path does no label lookup.
struct Lazy<M> {
    child: OnceLock<M>,
}

impl<M: Clone> Lazy<M> {
    const fn new() -> Self {
        Lazy { child: OnceLock::new() }
    }

    /// The child; `values` (the label values) are asked for only the first time.
    fn get<'v, B: MetricVecBuilder<M = M>>(&self, family: &MetricVec<B>, values: impl FnOnce() -> Vec<&'v str>) -> &M {
        self.child.get_or_init(|| family.with_label_values(&values()))
    }
}

/// A running maximum and the gauge that shows it (MET-04): the gauge is set only when an
/// observation exceeds every earlier one (and 0 never does), as Python's `*_max_bytes` are.
#[derive(Default)]
struct RunningMax {
    seen: AtomicU64,
    update: Mutex<()>,
}

impl RunningMax {
    fn observe<'a>(&self, value: u64, gauge: impl FnOnce() -> &'a IntGauge) {
        if value <= self.seen.load(Ordering::Relaxed) {
            return;
        }
        // Rare (a new maximum): serialized, so the gauge never goes back to a smaller maximum.
        let _guard = self.update.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if value > self.seen.load(Ordering::Relaxed) {
            self.seen.store(value, Ordering::Relaxed);
            gauge().set(value as i64);
        }
    }
}

/// Topics kept in [`Topics::slots`], found by a scan without a lock; more go to the map.
const TOPIC_SLOTS: usize = 16;

/// The children of every topic seen, by topic. Topics are few (a stage's inputs, outputs and
/// config topics) and only ever added, so the first [`TOPIC_SLOTS`] live in write-once slots
/// that a hook scans without taking a lock; the rest (many MQTT filters, say) in a map.
struct Topics {
    slots: [OnceLock<TopicMetrics>; TOPIC_SLOTS],
    /// Slots filled (each filled before this count covers it).
    used: AtomicUsize,
    /// Serializes adding a topic.
    adding: Mutex<()>,
    overflow: RwLock<HashMap<Box<str>, TopicMetrics, FixedState>>,
}

/// The children of one topic (a Kafka topic, or an MQTT subscription filter).
struct TopicMetrics {
    name: Box<str>,
    values: Vec<String>,
    messages_in: Lazy<IntCounter>,
    messages_out: Lazy<IntCounter>,
    in_bytes: Lazy<Histogram>,
    in_max: Lazy<IntGauge>,
    in_running_max: RunningMax,
    out_bytes: Lazy<Histogram>,
    out_max: Lazy<IntGauge>,
    out_running_max: RunningMax,
    config_messages_in: Lazy<IntCounter>,
    mqtt_messages_in: Lazy<IntCounter>,
    mqtt_buffered: Lazy<IntGauge>,
}

impl TopicMetrics {
    fn values(&self) -> Vec<&str> {
        self.values.iter().map(String::as_str).collect()
    }
}

/// The observer that turns every hook into its `flechtwerk_*` metric, in a registry of its own.
///
/// Usually made by the builder (`metrics(...)`); on its own it is an [`Observer`] whose
/// exposition [`render`](Self::render) returns:
///
/// ```
/// use flechtwerk::observer::prometheus::PrometheusObserver;
/// use flechtwerk::observer::Observer;
///
/// let labels = [("app".to_owned(), "demo".to_owned())];
/// let observer = PrometheusObserver::new(&labels, 500)?;
/// observer.message_in("clicks");
/// assert!(observer.render().contains(r#"flechtwerk_messages_in_total{app="demo",topic="clicks"} 1.0"#));
/// # Ok::<(), String>(())
/// ```
pub struct PrometheusObserver {
    registry: Registry,
    families: Families,
    /// The `metrics_labels` values, in label order.
    values: Vec<String>,
    topics: Topics,
    message_processing_seconds: Lazy<Histogram>,
    batch_size: Lazy<Histogram>,
    batch_processing_seconds: Lazy<Histogram>,
    transactions_committed: Lazy<IntCounter>,
    active_configs: Lazy<IntGauge>,
    poll_cycle_seconds: Lazy<Histogram>,
    config_store_bytes: Lazy<IntGauge>,
    config_store_entries: Lazy<IntGauge>,
    config_store_restored: Lazy<IntCounter>,
    state_record_bytes: Lazy<Histogram>,
    state_record_max: Lazy<IntGauge>,
    state_running_max: RunningMax,
    tasks_assigned: Lazy<IntGauge>,
    tokens_assigned: Lazy<IntGauge>,
    mqtt_connects: Lazy<IntCounter>,
    mqtt_disconnects: Lazy<IntCounter>,
}

impl std::fmt::Debug for PrometheusObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusObserver").field("label_values", &self.values).finish_non_exhaustive()
    }
}

impl PrometheusObserver {
    /// An observer whose metrics carry `labels` (name, value) first, in this order, then their
    /// own labels; `batch_cap`, the most records one poll returns (an application passes its
    /// `max_poll_records`, as Python does; a gathered batch above it counts in +Inf), tops the `batch_size` ladder (MET-03). Fails on labels
    /// [`validate_labels`] refuses, or a `batch_cap` outside `1..=2^53`.
    ///
    /// ```
    /// use flechtwerk::observer::prometheus::PrometheusObserver;
    /// use flechtwerk::observer::Observer;
    /// let observer = PrometheusObserver::new(&[("app".into(), "counter".into())], 500)?;
    /// observer.message_out("click-counts");
    /// assert!(observer.render().contains(r#"flechtwerk_messages_out_total{app="counter",topic="click-counts"} 1"#));
    /// assert!(PrometheusObserver::new(&[], 0).is_err()); // a batch ladder needs a top
    /// # Ok::<(), String>(())
    /// ```
    pub fn new(labels: &[(String, String)], batch_cap: usize) -> Result<Self, String> {
        validate_labels(labels)?;
        if !(1..=BATCH_CAP_MAX).contains(&batch_cap) {
            return Err(format!("a batch cap of {batch_cap} cannot top a batch_size ladder (1..=2^53)"));
        }
        let registry = Registry::new();
        let families = Families::new(&registry, labels, batch_cap).map_err(|e| format!("metrics: {e}"))?;
        Ok(PrometheusObserver {
            registry,
            families,
            values: labels.iter().map(|(_, value)| value.clone()).collect(),
            topics: Topics {
                slots: std::array::from_fn(|_| OnceLock::new()),
                used: AtomicUsize::new(0),
                adding: Mutex::new(()),
                overflow: RwLock::new(HashMap::with_hasher(FixedState::default())),
            },
            message_processing_seconds: Lazy::new(),
            batch_size: Lazy::new(),
            batch_processing_seconds: Lazy::new(),
            transactions_committed: Lazy::new(),
            active_configs: Lazy::new(),
            poll_cycle_seconds: Lazy::new(),
            config_store_bytes: Lazy::new(),
            config_store_entries: Lazy::new(),
            config_store_restored: Lazy::new(),
            state_record_bytes: Lazy::new(),
            state_record_max: Lazy::new(),
            state_running_max: RunningMax::default(),
            tasks_assigned: Lazy::new(),
            tokens_assigned: Lazy::new(),
            mqtt_connects: Lazy::new(),
            mqtt_disconnects: Lazy::new(),
        })
    }

    /// The registry holding this observer's families (to gather them, or to register more
    /// collectors beside them).
    ///
    /// ```
    /// use flechtwerk::observer::prometheus::PrometheusObserver;
    /// use flechtwerk::observer::Observer;
    /// let observer = PrometheusObserver::new(&[], 500)?;
    /// observer.transaction_committed();
    /// let names: Vec<String> = observer.registry().gather().iter().map(|f| f.get_name().to_owned()).collect();
    /// assert!(names.contains(&"flechtwerk_transactions_committed_total".to_owned()));
    /// # Ok::<(), String>(())
    /// ```
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The exposition, text format 0.0.4 ([`text::CONTENT_TYPE`]), as a scrape sees it.
    ///
    /// ```
    /// use flechtwerk::observer::prometheus::PrometheusObserver;
    /// use flechtwerk::observer::Observer;
    /// let observer = PrometheusObserver::new(&[], 500)?;
    /// observer.config_store_entries(1000);
    /// assert!(observer.render().contains("flechtwerk_config_store_entries 1000.0"));
    /// # Ok::<(), String>(())
    /// ```
    pub fn render(&self) -> String {
        text::encode(&self.registry.gather())
    }

    fn label_values(&self) -> Vec<&str> {
        self.values.iter().map(String::as_str).collect()
    }

    /// The label values with the family's own after them.
    fn with<'a>(&'a self, own: &[&'a str]) -> Vec<&'a str> {
        let mut values = self.label_values();
        values.extend_from_slice(own);
        values
    }

    /// Runs `f` on the children of `topic` (made at the topic's first event).
    fn topic<R>(&self, topic: &str, f: impl FnOnce(&TopicMetrics) -> R) -> R {
        let topics = &self.topics;
        let used = topics.used.load(Ordering::Acquire);
        for slot in &topics.slots[..used] {
            let metrics = slot.get().expect("a counted slot is filled");
            if *metrics.name == *topic {
                return f(metrics);
            }
        }
        if used == TOPIC_SLOTS {
            if let Some(metrics) = topics.overflow.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
                return f(metrics);
            }
        }
        let _adding = topics.adding.lock().unwrap_or_else(|p| p.into_inner());
        let used = topics.used.load(Ordering::Acquire);
        // Added meanwhile?
        for slot in &topics.slots[..used] {
            let metrics = slot.get().expect("a counted slot is filled");
            if *metrics.name == *topic {
                return f(metrics);
            }
        }
        if used < TOPIC_SLOTS {
            let metrics = topics.slots[used].get_or_init(|| self.new_topic(topic));
            topics.used.store(used + 1, Ordering::Release);
            return f(metrics);
        }
        let mut overflow = topics.overflow.write().unwrap_or_else(|p| p.into_inner());
        f(overflow.entry(Box::from(topic)).or_insert_with(|| self.new_topic(topic)))
    }

    fn new_topic(&self, topic: &str) -> TopicMetrics {
        let mut values = self.values.clone();
        values.push(topic.to_owned());
        TopicMetrics {
            name: Box::from(topic),
            values,
            messages_in: Lazy::new(),
            messages_out: Lazy::new(),
            in_bytes: Lazy::new(),
            in_max: Lazy::new(),
            in_running_max: RunningMax::default(),
            out_bytes: Lazy::new(),
            out_max: Lazy::new(),
            out_running_max: RunningMax::default(),
            config_messages_in: Lazy::new(),
            mqtt_messages_in: Lazy::new(),
            mqtt_buffered: Lazy::new(),
        }
    }

    fn counter<'a>(&'a self, lazy: &'a Lazy<IntCounter>, family: &IntCounterVec) -> &'a IntCounter {
        lazy.get(family, || self.label_values())
    }

    fn gauge<'a>(&'a self, lazy: &'a Lazy<IntGauge>, family: &IntGaugeVec) -> &'a IntGauge {
        lazy.get(family, || self.label_values())
    }

    fn histogram<'a>(&'a self, lazy: &'a Lazy<Histogram>, family: &HistogramVec) -> &'a Histogram {
        lazy.get(family, || self.label_values())
    }
}

impl Observer for PrometheusObserver {
    fn message_in(&self, topic: &str) {
        self.topic(topic, |t| t.messages_in.get(&self.families.messages_in, || t.values()).inc());
    }

    fn message_in_bytes(&self, topic: &str, bytes: usize) {
        self.topic(topic, |t| {
            t.in_bytes.get(&self.families.message_in_bytes, || t.values()).observe(bytes as f64);
            t.in_running_max.observe(bytes as u64, || t.in_max.get(&self.families.message_in_max_bytes, || t.values()));
        });
    }

    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {
        self.families.messages_invalid.with_label_values(&self.with(&[outcome.as_str(), topic])).inc();
    }

    fn message_out(&self, topic: &str) {
        self.topic(topic, |t| t.messages_out.get(&self.families.messages_out, || t.values()).inc());
    }

    fn message_out_bytes(&self, topic: &str, bytes: usize) {
        self.topic(topic, |t| {
            t.out_bytes.get(&self.families.message_out_bytes, || t.values()).observe(bytes as f64);
            t.out_running_max
                .observe(bytes as u64, || t.out_max.get(&self.families.message_out_max_bytes, || t.values()));
        });
    }

    fn message_processed(&self, elapsed: Duration) {
        self.histogram(&self.message_processing_seconds, &self.families.message_processing_seconds)
            .observe(elapsed.as_secs_f64());
    }

    fn batch_processed(&self, size: usize, elapsed: Duration) {
        self.histogram(&self.batch_size, &self.families.batch_size).observe(size as f64);
        self.histogram(&self.batch_processing_seconds, &self.families.batch_processing_seconds)
            .observe(elapsed.as_secs_f64());
    }

    fn transaction_committed(&self) {
        self.counter(&self.transactions_committed, &self.families.transactions_committed).inc();
    }

    fn poll_cycle(&self, elapsed: Duration) {
        self.histogram(&self.poll_cycle_seconds, &self.families.poll_cycle_seconds).observe(elapsed.as_secs_f64());
    }

    fn active_configs(&self, count: usize) {
        self.gauge(&self.active_configs, &self.families.active_configs).set(count as i64);
    }

    fn config_message_in(&self, topic: &str) {
        self.topic(topic, |t| t.config_messages_in.get(&self.families.config_messages_in, || t.values()).inc());
    }

    fn config_store_entries(&self, count: usize) {
        self.gauge(&self.config_store_entries, &self.families.config_store_entries).set(count as i64);
    }

    fn config_store_restored(&self, count: usize) {
        self.counter(&self.config_store_restored, &self.families.config_store_restored).inc_by(count as u64);
    }

    fn config_store_updated(&self, store: &dyn ConfigView) {
        self.gauge(&self.config_store_bytes, &self.families.config_store_bytes).set(store.wire_bytes() as i64);
    }

    fn state_restored(&self, partition: i32, count: usize) {
        let partition = partition.to_string();
        self.families.state_restored.with_label_values(&self.with(&[&partition])).inc_by(count as u64);
    }

    fn state_record_bytes(&self, bytes: usize) {
        self.histogram(&self.state_record_bytes, &self.families.state_record_bytes).observe(bytes as f64);
        self.state_running_max
            .observe(bytes as u64, || self.gauge(&self.state_record_max, &self.families.state_record_max_bytes));
    }

    fn tasks_assigned(&self, count: usize) {
        self.gauge(&self.tasks_assigned, &self.families.tasks_assigned).set(count as i64);
    }

    fn tokens_assigned(&self, count: usize) {
        self.gauge(&self.tokens_assigned, &self.families.tokens_assigned).set(count as i64);
    }

    fn mqtt_buffered(&self, topic: &str, count: usize) {
        self.topic(topic, |t| t.mqtt_buffered.get(&self.families.mqtt_buffered, || t.values()).set(count as i64));
    }

    fn mqtt_connected(&self) {
        self.counter(&self.mqtt_connects, &self.families.mqtt_connects).inc();
    }

    fn mqtt_disconnected(&self) {
        self.counter(&self.mqtt_disconnects, &self.families.mqtt_disconnects).inc();
    }

    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {
        self.families.mqtt_dropped.with_label_values(&self.with(&[reason, topic])).inc();
    }

    fn mqtt_message_in(&self, topic: &str) {
        self.topic(topic, |t| t.mqtt_messages_in.get(&self.families.mqtt_messages_in, || t.values()).inc());
    }

    fn keyring_key_loaded(&self, kid: &str) {
        self.families.keyring_keys_loaded.with_label_values(&self.with(&[kid])).set(1);
    }

    fn secret_plaintext_read(&self, scope: &str) {
        self.families.secret_plaintext_reads.with_label_values(&self.with(&[scope])).inc();
    }

    fn secret_decrypted(&self, scope: &str, kid: &str) {
        self.families.secret_decrypts.with_label_values(&self.with(&[scope, kid])).inc();
    }

    fn secret_unsigned_read(&self, scope: &str) {
        self.families.secret_unsigned_reads.with_label_values(&self.with(&[scope])).inc();
    }

    fn secret_verified(&self, scope: &str, kid: &str) {
        self.families.secret_verifications.with_label_values(&self.with(&[scope, kid])).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn demo() -> PrometheusObserver {
        PrometheusObserver::new(&labels(&[("app", "demo")]), 500).unwrap()
    }

    /// The sample lines of `family` (its own name and its `_bucket`/`_count`/`_sum` lines).
    fn samples(text: &str, family: &str) -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                let name = l.split(['{', ' ']).next().unwrap();
                name == family || name.strip_prefix(family).is_some_and(|s| ["_bucket", "_count", "_sum"].contains(&s))
            })
            .map(str::to_owned)
            .collect()
    }

    fn bounds(text: &str, family: &str) -> Vec<String> {
        samples(text, family)
            .iter()
            .filter(|l| l.starts_with(&format!("{family}_bucket")))
            .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn met_01_duration_ladder() {
        let observer = demo();
        observer.message_processed(Duration::from_millis(3));
        observer.batch_processed(1, Duration::from_secs(700));
        observer.poll_cycle(Duration::from_secs(1));
        let text = observer.render();
        let expected =
            "0.005 0.01 0.025 0.05 0.075 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0 30.0 60.0 120.0 300.0 600.0 +Inf";
        for family in [
            "flechtwerk_message_processing_seconds",
            "flechtwerk_batch_processing_seconds",
            "flechtwerk_poll_cycle_seconds",
        ] {
            assert_eq!(bounds(&text, family).join(" "), expected, "{family}");
        }
        // 700 s lands in +Inf only.
        assert!(text.contains("flechtwerk_batch_processing_seconds_bucket{app=\"demo\",le=\"600.0\"} 0.0\n"));
        assert!(text.contains("flechtwerk_batch_processing_seconds_bucket{app=\"demo\",le=\"+Inf\"} 1.0\n"));
    }

    #[test]
    fn met_02_byte_ladder_in_exponent_form_above_1e6() {
        let observer = demo();
        observer.message_in_bytes("in", 1_014_623);
        observer.message_in_bytes("in", 5_000_000);
        observer.message_out_bytes("out", 10);
        observer.state_record_bytes(10);
        let text = observer.render();
        let expected = "256.0 1024.0 4096.0 16384.0 65536.0 131072.0 262144.0 393216.0 524288.0 655360.0 786432.0 \
                        917504.0 1.048576e+06 2.097152e+06 4.194304e+06 +Inf";
        for family in ["flechtwerk_message_in_bytes", "flechtwerk_message_out_bytes", "flechtwerk_state_record_bytes"] {
            assert_eq!(bounds(&text, family).join(" "), expected, "{family}");
        }
        // 1 014 623 lands in 1.048576e+06, not in 917504.0; 5 000 000 only in +Inf.
        for (le, count) in [("917504.0", "0.0"), ("1.048576e+06", "1.0"), ("4.194304e+06", "1.0"), ("+Inf", "2.0")] {
            let line = format!("flechtwerk_message_in_bytes_bucket{{app=\"demo\",le=\"{le}\",topic=\"in\"}} {count}\n");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert!(text.contains("flechtwerk_message_in_bytes_sum{app=\"demo\",topic=\"in\"} 6.014623e+06\n"));
    }

    #[test]
    fn met_03_batch_size_ladder_follows_the_cap() {
        assert_eq!(batch_size_buckets(100), [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 99.0, 100.0]);
        assert_eq!(batch_size_buckets(500), [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 499.0, 500.0]);
        assert_eq!(batch_size_buckets(2), [1.0, 2.0]);
        assert_eq!(batch_size_buckets(3), [1.0, 2.0, 3.0]);
        assert_eq!(batch_size_buckets(51), [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 51.0]);
        let observer = PrometheusObserver::new(&[], 100).unwrap();
        observer.batch_processed(100, Duration::ZERO);
        assert_eq!(
            bounds(&observer.render(), "flechtwerk_batch_size").join(" "),
            "1.0 2.0 5.0 10.0 25.0 50.0 99.0 100.0 +Inf"
        );
        // A batch that gathered several polls (TRX-45) is above the poll cap: +Inf only.
        observer.batch_processed(350, Duration::ZERO);
        let text = observer.render();
        assert!(text.contains("flechtwerk_batch_size_bucket{le=\"100.0\"} 1.0\n"), "{text}");
        assert!(text.contains("flechtwerk_batch_size_bucket{le=\"+Inf\"} 2.0\n"), "{text}");
        assert!(text.contains("flechtwerk_batch_size_sum 450.0\n"), "{text}");
        assert!(PrometheusObserver::new(&[], 0).is_err());
        assert!(PrometheusObserver::new(&[], BATCH_CAP_MAX + 1).is_err());
        assert!(PrometheusObserver::new(&[], BATCH_CAP_MAX).is_ok());
    }

    /// The 1-2.5-5 sequence (Python: m * 10**e // 10 for m in (10, 25, 50)).
    fn one_two_five(below: u128) -> Vec<f64> {
        let mut steps = Vec::new();
        for e in 0..20u32 {
            for m in [10u128, 25, 50] {
                let step = m * 10u128.pow(e) / 10;
                if step < below {
                    steps.push(step as f64);
                }
            }
        }
        steps
    }

    proptest! {
        /// MET-03 for any cap: strictly increasing, ends in cap − 1 and cap, and below them
        /// exactly the 1-2.5-5 steps under cap − 1.
        #[test]
        fn met_03_ladder_for_any_cap(cap in prop_oneof![1usize..2_000, 1usize..=BATCH_CAP_MAX]) {
            let ladder = batch_size_buckets(cap);
            prop_assert!(ladder.windows(2).all(|w| w[0] < w[1]), "{ladder:?}");
            prop_assert_eq!(ladder[ladder.len() - 1], cap as f64);
            prop_assert_eq!(ladder[ladder.len() - 2], (cap - 1) as f64);
            prop_assert_eq!(&ladder[..ladder.len() - 2], &one_two_five(cap as u128 - 1)[..]);
            prop_assert!(ladder.iter().all(|b| b.fract() == 0.0));
            // Every cap builds a registrable histogram.
            prop_assert!(PrometheusObserver::new(&[], cap).is_ok());
        }
    }

    #[test]
    fn met_04_running_maxima_per_topic_and_per_observer() {
        let observer = demo();
        let read = |o: &PrometheusObserver, family: &str, topic: Option<&str>| -> Option<String> {
            let text = o.render();
            let labels = match topic {
                Some(t) => format!("{{app=\"demo\",topic=\"{t}\"}}"),
                None => "{app=\"demo\"}".to_owned(),
            };
            samples(&text, family)
                .into_iter()
                .find_map(|l| l.strip_prefix(&format!("{family}{labels} ")).map(str::to_owned))
        };
        let mut seen = Vec::new();
        for n in [100, 50, 200] {
            observer.message_in_bytes("a", n);
            seen.push(read(&observer, "flechtwerk_message_in_max_bytes", Some("a")).unwrap());
        }
        assert_eq!(seen, ["100.0", "100.0", "200.0"]);
        // Per topic: another topic starts from nothing.
        observer.message_in_bytes("b", 7);
        assert_eq!(read(&observer, "flechtwerk_message_in_max_bytes", Some("b")).as_deref(), Some("7.0"));
        assert_eq!(read(&observer, "flechtwerk_message_in_max_bytes", Some("a")).as_deref(), Some("200.0"));
        // 0 never exceeds the start: no gauge for a topic that only saw empty records (Python's `n > max.get(topic, 0)`).
        observer.message_out_bytes("c", 0);
        assert_eq!(read(&observer, "flechtwerk_message_out_max_bytes", Some("c")), None);
        observer.message_out_bytes("c", 3);
        observer.message_out_bytes("c", 2);
        assert_eq!(read(&observer, "flechtwerk_message_out_max_bytes", Some("c")).as_deref(), Some("3.0"));
        for n in [100, 50, 200, 10] {
            observer.state_record_bytes(n);
        }
        assert_eq!(read(&observer, "flechtwerk_state_record_max_bytes", None).as_deref(), Some("200.0"));
        // Per observer instance: a second observer keeps its own maxima.
        let other = demo();
        other.message_in_bytes("a", 5);
        assert_eq!(read(&other, "flechtwerk_message_in_max_bytes", Some("a")).as_deref(), Some("5.0"));
        assert_eq!(read(&observer, "flechtwerk_message_in_max_bytes", Some("a")).as_deref(), Some("200.0"));
    }

    #[test]
    fn met_04_running_max_under_concurrent_writers_ends_at_the_maximum() {
        let observer = Arc::new(demo());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let observer = observer.clone();
                std::thread::spawn(move || {
                    for n in 0..2_000 {
                        observer.message_in_bytes("in", n * 4 + t);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(observer.render().contains("flechtwerk_message_in_max_bytes{app=\"demo\",topic=\"in\"} 7999.0\n"));
    }

    #[test]
    fn metrics_labels_lead_in_the_callers_order_and_samples_sort_by_name() {
        let observer = PrometheusObserver::new(&labels(&[("zone", "eu"), ("app", "x"), ("pod", "p-0")]), 500).unwrap();
        observer.message_in("in");
        observer.message_in_bytes("in", 300);
        observer.transaction_committed();
        // The families' label names: the caller's, in the caller's order, then the family's own.
        let families = observer.registry().gather();
        let desc = |name: &str| {
            let family = families.iter().find(|f| f.name() == name).unwrap();
            family.get_metric()[0].get_label().iter().map(|l| l.name().to_owned()).collect::<Vec<_>>()
        };
        // (Label pairs come sorted by name out of a registry; the declared order is in the desc.)
        assert_eq!(desc("flechtwerk_messages_in_total"), ["app", "pod", "topic", "zone"]);
        let declared = observer.families.messages_in.desc()[0].variable_labels.clone();
        assert_eq!(declared, ["zone", "app", "pod", "topic"]);
        let declared = observer.families.messages_invalid.desc()[0].variable_labels.clone();
        assert_eq!(declared, ["zone", "app", "pod", "outcome", "topic"]);
        // The exposition sorts a sample's labels by name, `le` among them, as prometheus_client does.
        let text = observer.render();
        assert!(text.contains("flechtwerk_messages_in_total{app=\"x\",pod=\"p-0\",topic=\"in\",zone=\"eu\"} 1.0\n"));
        assert!(text.contains(
            "flechtwerk_message_in_bytes_bucket{app=\"x\",le=\"1024.0\",pod=\"p-0\",topic=\"in\",zone=\"eu\"} 1.0\n"
        ));
        assert!(text.contains("flechtwerk_transactions_committed_total{app=\"x\",pod=\"p-0\",zone=\"eu\"} 1.0\n"));
    }

    #[test]
    fn empty_metrics_labels_work() {
        // Python 0.17 crashes here (`.labels()` on a family without label names).
        let observer = PrometheusObserver::new(&[], 500).unwrap();
        observer.tasks_assigned(2);
        observer.message_in("in");
        observer.batch_processed(3, Duration::from_millis(1));
        let text = observer.render();
        assert!(text.contains("\nflechtwerk_tasks_assigned 2.0\n"), "{text}");
        assert!(text.contains("\nflechtwerk_messages_in_total{topic=\"in\"} 1.0\n"));
        assert!(text.contains("\nflechtwerk_batch_size_bucket{le=\"5.0\"} 1.0\n"));
        assert!(text.contains("\nflechtwerk_batch_size_sum 3.0\n"));
    }

    #[test]
    fn metrics_labels_are_checked() {
        let refused = |pairs: &[(&str, &str)]| PrometheusObserver::new(&labels(pairs), 500).unwrap_err();
        assert!(refused(&[("topic", "x")]).contains("reserved"));
        assert!(refused(&[("le", "x")]).contains("reserved"));
        assert!(refused(&[("app", "a"), ("app", "b")]).contains("twice"));
        assert!(refused(&[("my-app", "x")]).contains("not a Prometheus label name"));
        assert!(refused(&[("1app", "x")]).contains("not a Prometheus label name"));
        assert!(refused(&[("", "x")]).contains("not a Prometheus label name"));
        assert!(refused(&[("__name", "x")]).contains("reserved by Prometheus"));
        // Any value goes, escaped in the exposition.
        let observer = PrometheusObserver::new(&labels(&[("app", "a\"b\\c\nd"), ("_x9", "")]), 500).unwrap();
        observer.mqtt_connected();
        assert!(observer.render().contains(r#"flechtwerk_mqtt_connects_total{_x9="",app="a\"b\\c\nd"} 1.0"#));
    }

    #[test]
    fn families_appear_at_their_first_event() {
        let observer = demo();
        assert_eq!(observer.render(), "", "no family before any event");
        observer.tasks_assigned(0);
        assert!(observer.render().starts_with("# HELP flechtwerk_tasks_assigned "));
        assert!(!observer.render().contains("flechtwerk_messages_invalid_total"));
        observer.message_invalid("in", InvalidOutcome::Skipped);
        let text = observer.render();
        assert!(text.contains("flechtwerk_messages_invalid_total{app=\"demo\",outcome=\"skipped\",topic=\"in\"} 1.0\n"));
        // The other families of a topic stay out until their own events.
        observer.message_in("in");
        assert!(!observer.render().contains("flechtwerk_message_in_bytes"));
    }

    #[test]
    fn many_topics_from_many_threads() {
        // More topics than the lock-free slots: the rest go to the map; added concurrently.
        let observer = Arc::new(demo());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let observer = observer.clone();
                std::thread::spawn(move || {
                    for round in 0..3 {
                        for t in 0..(TOPIC_SLOTS * 3) {
                            observer.message_in(&format!("topic-{t}"));
                            observer.message_out_bytes(&format!("topic-{t}"), round * 10 + t);
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let text = observer.render();
        for t in 0..(TOPIC_SLOTS * 3) {
            let line = format!("flechtwerk_messages_in_total{{app=\"demo\",topic=\"topic-{t}\"}} 12.0\n");
            assert!(text.contains(&line), "{line}");
            let max = format!("flechtwerk_message_out_max_bytes{{app=\"demo\",topic=\"topic-{t}\"}} {}.0\n", 20 + t);
            assert!(text.contains(&max), "{max}");
        }
        assert_eq!(text.matches("# TYPE flechtwerk_messages_in_total counter").count(), 1);
    }

    #[test]
    fn two_observers_never_share_a_metric() {
        let (a, b) = (demo(), demo());
        a.message_in("in");
        a.message_in("in");
        b.message_in("in");
        assert!(a.render().contains("flechtwerk_messages_in_total{app=\"demo\",topic=\"in\"} 2.0\n"));
        assert!(b.render().contains("flechtwerk_messages_in_total{app=\"demo\",topic=\"in\"} 1.0\n"));
    }

    #[test]
    fn every_hook_feeds_its_family() {
        struct Store;
        impl ConfigView for Store {
            fn len(&self) -> usize {
                2
            }
            fn for_each_entry(&self, f: &mut dyn FnMut(&str, &[u8])) {
                f("k1", b"{}");
                f("key-2", b"{\"a\":1}");
            }
        }
        let observer = demo();
        observer.active_configs(5);
        observer.config_message_in("configs");
        observer.config_store_entries(2);
        observer.config_store_restored(7);
        observer.config_store_updated(&Store);
        observer.state_restored(3, 12);
        observer.state_restored(3, 4);
        observer.tokens_assigned(3);
        observer.mqtt_buffered("sensors/+/temp", 17);
        observer.mqtt_disconnected();
        observer.mqtt_message_dropped("(unmatched)", "stale");
        observer.mqtt_message_in("sensors/+/temp");
        let text = observer.render();
        for line in [
            "flechtwerk_active_configs{app=\"demo\"} 5.0",
            "flechtwerk_config_messages_in_total{app=\"demo\",topic=\"configs\"} 1.0",
            "flechtwerk_config_store_entries{app=\"demo\"} 2.0",
            "flechtwerk_config_store_restored_entries_total{app=\"demo\"} 7.0",
            // (2 + 2) + (5 + 7): keys plus values, as Python's ConfigStore.nbytes weighs them.
            "flechtwerk_config_store_bytes{app=\"demo\"} 16.0",
            "flechtwerk_state_restored_entries_total{app=\"demo\",partition=\"3\"} 16.0",
            "flechtwerk_tokens_assigned{app=\"demo\"} 3.0",
            "flechtwerk_mqtt_buffered_messages{app=\"demo\",topic=\"sensors/+/temp\"} 17.0",
            "flechtwerk_mqtt_disconnects_total{app=\"demo\"} 1.0",
            "flechtwerk_mqtt_messages_dropped_total{app=\"demo\",reason=\"stale\",topic=\"(unmatched)\"} 1.0",
            "flechtwerk_mqtt_messages_in_total{app=\"demo\",topic=\"sensors/+/temp\"} 1.0",
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
    }
}
