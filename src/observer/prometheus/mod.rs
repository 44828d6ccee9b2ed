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
//!   [`ConfigView::wire_bytes`](crate::observer::ConfigView::wire_bytes)); Python has a hook of
//!   its own for it, called at the same two places.

mod ladders;
mod server;
pub mod text;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use foldhash::fast::FixedState;
use futures::future::BoxFuture;
use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{Counter, CounterVec, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, Opts, Registry};

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
#[derive(Clone, Debug)]
pub struct Metrics {
    address: Option<String>,
}

impl Metrics {
    /// Metrics served at `address` while the application runs.
    pub fn serve(address: impl Into<String>) -> Self {
        Metrics { address: Some(address.into()) }
    }

    /// Metrics kept but not served: read them with
    /// [`Flechtwerk::render_metrics`](crate::Flechtwerk::render_metrics) (tests, or an
    /// application that serves them itself).
    pub fn unserved() -> Self {
        Metrics { address: None }
    }
}

impl MetricsConfig for Metrics {
    fn instance(
        &self,
        labels: &[(String, String)],
        max_poll_records: usize,
    ) -> Result<Arc<dyn MetricsInstance>, String> {
        let observer = PrometheusObserver::new(labels, max_poll_records)?;
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
    messages_in: CounterVec,
    messages_invalid: CounterVec,
    messages_out: CounterVec,
    message_in_bytes: HistogramVec,
    message_in_max_bytes: GaugeVec,
    message_out_bytes: HistogramVec,
    message_out_max_bytes: GaugeVec,
    message_processing_seconds: HistogramVec,
    batch_size: HistogramVec,
    batch_processing_seconds: HistogramVec,
    transactions_committed: CounterVec,
    active_configs: GaugeVec,
    poll_cycle_seconds: HistogramVec,
    config_messages_in: CounterVec,
    config_store_bytes: GaugeVec,
    config_store_entries: GaugeVec,
    config_store_restored: CounterVec,
    state_restored: CounterVec,
    state_record_bytes: HistogramVec,
    state_record_max_bytes: GaugeVec,
    tasks_assigned: GaugeVec,
    tokens_assigned: GaugeVec,
    mqtt_buffered: GaugeVec,
    mqtt_connects: CounterVec,
    mqtt_disconnects: CounterVec,
    mqtt_dropped: CounterVec,
    mqtt_messages_in: CounterVec,
}

impl Families {
    fn new(registry: &Registry, labels: &[(String, String)], max_poll_records: usize) -> prometheus::Result<Self> {
        fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> prometheus::Result<C> {
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        }
        let counter = |name: &str, help: &str, own: &[&str]| {
            register(registry, CounterVec::new(Opts::new(name, help), &names(labels, own))?)
        };
        let gauge =
            |name: &str, help: &str, own: &[&str]| register(registry, GaugeVec::new(Opts::new(name, help), &names(labels, own))?);
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
                &batch_size_buckets(max_poll_records),
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
    fn observe<'a>(&self, value: u64, gauge: impl FnOnce() -> &'a Gauge) {
        if value <= self.seen.load(Ordering::Relaxed) {
            return;
        }
        // Rare (a new maximum): serialized, so the gauge never goes back to a smaller maximum.
        let _guard = self.update.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if value > self.seen.load(Ordering::Relaxed) {
            self.seen.store(value, Ordering::Relaxed);
            gauge().set(value as f64);
        }
    }
}

/// The children of one topic (a Kafka topic, or an MQTT subscription filter).
struct TopicMetrics {
    values: Vec<String>,
    messages_in: Lazy<Counter>,
    messages_out: Lazy<Counter>,
    in_bytes: Lazy<Histogram>,
    in_max: Lazy<Gauge>,
    in_running_max: RunningMax,
    out_bytes: Lazy<Histogram>,
    out_max: Lazy<Gauge>,
    out_running_max: RunningMax,
    config_messages_in: Lazy<Counter>,
    mqtt_messages_in: Lazy<Counter>,
    mqtt_buffered: Lazy<Gauge>,
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
    topics: RwLock<HashMap<Box<str>, TopicMetrics, FixedState>>,
    message_processing_seconds: Lazy<Histogram>,
    batch_size: Lazy<Histogram>,
    batch_processing_seconds: Lazy<Histogram>,
    transactions_committed: Lazy<Counter>,
    active_configs: Lazy<Gauge>,
    poll_cycle_seconds: Lazy<Histogram>,
    config_store_bytes: Lazy<Gauge>,
    config_store_entries: Lazy<Gauge>,
    config_store_restored: Lazy<Counter>,
    state_record_bytes: Lazy<Histogram>,
    state_record_max: Lazy<Gauge>,
    state_running_max: RunningMax,
    tasks_assigned: Lazy<Gauge>,
    tokens_assigned: Lazy<Gauge>,
    mqtt_connects: Lazy<Counter>,
    mqtt_disconnects: Lazy<Counter>,
}

impl std::fmt::Debug for PrometheusObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusObserver").field("label_values", &self.values).finish_non_exhaustive()
    }
}

impl PrometheusObserver {
    /// An observer whose metrics carry `labels` (name, value) first, in this order, then their
    /// own labels; `max_poll_records` tops the `batch_size` ladder (MET-03). Fails on labels
    /// [`validate_labels`] refuses, or a `max_poll_records` outside `1..=2^53`.
    pub fn new(labels: &[(String, String)], max_poll_records: usize) -> Result<Self, String> {
        validate_labels(labels)?;
        if !(1..=BATCH_CAP_MAX).contains(&max_poll_records) {
            return Err(format!("max_poll_records {max_poll_records} cannot top a batch_size ladder (1..=2^53)"));
        }
        let registry = Registry::new();
        let families = Families::new(&registry, labels, max_poll_records).map_err(|e| format!("metrics: {e}"))?;
        Ok(PrometheusObserver {
            registry,
            families,
            values: labels.iter().map(|(_, value)| value.clone()).collect(),
            topics: RwLock::new(HashMap::with_hasher(FixedState::default())),
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
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The exposition, text format 0.0.4 ([`text::CONTENT_TYPE`]), as a scrape sees it.
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
        if let Some(metrics) = self.topics.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
            return f(metrics);
        }
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let metrics = topics.entry(Box::from(topic)).or_insert_with(|| {
            let mut values = self.values.clone();
            values.push(topic.to_owned());
            TopicMetrics {
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
        });
        f(metrics)
    }

    fn counter<'a>(&'a self, lazy: &'a Lazy<Counter>, family: &CounterVec) -> &'a Counter {
        lazy.get(family, || self.label_values())
    }

    fn gauge<'a>(&'a self, lazy: &'a Lazy<Gauge>, family: &GaugeVec) -> &'a Gauge {
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
        self.gauge(&self.active_configs, &self.families.active_configs).set(count as f64);
    }

    fn config_message_in(&self, topic: &str) {
        self.topic(topic, |t| t.config_messages_in.get(&self.families.config_messages_in, || t.values()).inc());
    }

    fn config_store_entries(&self, count: usize) {
        self.gauge(&self.config_store_entries, &self.families.config_store_entries).set(count as f64);
    }

    fn config_store_restored(&self, count: usize) {
        self.counter(&self.config_store_restored, &self.families.config_store_restored).inc_by(count as f64);
    }

    fn config_store_updated(&self, store: &dyn ConfigView) {
        self.gauge(&self.config_store_bytes, &self.families.config_store_bytes).set(store.wire_bytes() as f64);
    }

    fn state_restored(&self, partition: i32, count: usize) {
        let partition = partition.to_string();
        self.families.state_restored.with_label_values(&self.with(&[&partition])).inc_by(count as f64);
    }

    fn state_record_bytes(&self, bytes: usize) {
        self.histogram(&self.state_record_bytes, &self.families.state_record_bytes).observe(bytes as f64);
        self.state_running_max
            .observe(bytes as u64, || self.gauge(&self.state_record_max, &self.families.state_record_max_bytes));
    }

    fn tasks_assigned(&self, count: usize) {
        self.gauge(&self.tasks_assigned, &self.families.tasks_assigned).set(count as f64);
    }

    fn tokens_assigned(&self, count: usize) {
        self.gauge(&self.tokens_assigned, &self.families.tokens_assigned).set(count as f64);
    }

    fn mqtt_buffered(&self, topic: &str, count: usize) {
        self.topic(topic, |t| t.mqtt_buffered.get(&self.families.mqtt_buffered, || t.values()).set(count as f64));
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
}
