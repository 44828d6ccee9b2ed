//! `Flechtwerk`: the one application-facing handle (LIFE-01..05).
//!
//! Everything is injected through the builder; nothing is read from the environment. Building
//! the handle has no side effects: no connection is made until [`Flechtwerk::run`].
//!
//! ```no_run
//! # async fn demo(kafka: std::sync::Arc<dyn flechtwerk::kafka::Kafka>) -> Result<(), flechtwerk::Error> {
//! use flechtwerk::stage::transformer;
//! use flechtwerk::{Flechtwerk, Message};
//!
//! let echo = transformer(["in"]).transform(|msg, _state, out| {
//!     out.send(Message::new("out", msg.key.as_str(), msg.value));
//!     Ok(())
//! });
//! let app = Flechtwerk::builder()
//!     .application_id("echo")
//!     .client_id("pod-0") // unique per instance, stable across restarts
//!     .kafka(kafka)
//!     .build(echo)?;
//! app.run_until(async { /* e.g. wait for SIGTERM */ }).await
//! # }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::engine::bounds::{MAX_POLL_RECORDS_DEFAULT, SESSION_TIMEOUT_DEFAULT, SESSION_TIMEOUT_MIN};
use crate::engine::bridge::Bridge;
use crate::engine::settings::{Guarantee, Producers, Settings};
use crate::engine::stop::Stop;
use crate::engine::{dispatch, tasks, tokens};
use crate::error::Error;
use crate::kafka::{Compression, FetchLimits, Kafka};
use crate::observer::{FanOut, MetricsConfig, MetricsInstance, NoopObserver, Observer};
use crate::stage::{Extractor, MqttBrokerConfig, MqttExtractor, Transformer};
use crate::state::StateStores;

/// A configured application: one stage, its Kafka, its observer and state stores.
///
/// `run` / `run_until` may be called again after a run ended, never twice at once (one
/// instance, one set of clients; a second concurrent call fails with [`Error::Invalid`]).
///
/// The crate root has the whole tour (a stage run on the in-process cluster until its outputs
/// are out); here a run stopped at once:
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::kafka::{Kafka, NewTopic};
/// use flechtwerk::stage::transformer;
/// use flechtwerk::Flechtwerk;
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = Arc::new(LocalCluster::new());
/// kafka.admin()?.create_topic(&NewTopic::new("in", 1)).await?;
/// let stage = transformer(["in"]).transform(|_msg, _state, _out| Ok(()));
/// let app = Flechtwerk::builder().application_id("noop").client_id("pod-0").kafka(kafka).build(stage)?;
/// app.run_until(async {}).await?; // starts, stops cleanly at once
/// app.run_until(async {}).await?; // and may run again
/// # Ok(())
/// # }
/// ```
pub struct Flechtwerk {
    runner: Arc<dyn RunHandle>,
    running: Arc<AtomicBool>,
    metrics: Option<Arc<dyn MetricsInstance>>,
    /// Where the metrics endpoint listens while a run serves it.
    metrics_address: Arc<Mutex<Option<SocketAddr>>>,
    /// The keyring and event sink the secret codecs use during a run.
    #[cfg(feature = "secrets")]
    secrets: Arc<crate::secrets::SecretContext>,
    /// Where `keyring_key_loaded` goes at the start of a run.
    #[cfg(feature = "secrets")]
    observer: Arc<dyn Observer>,
}

/// A runner, whatever the stage's shape.
trait Run: Send + Sync {
    fn run<'a>(&'a self, stop: &'a Stop) -> BoxFuture<'a, Result<(), Error>>;
}

impl<S: Transformer> Run for tasks::TaskRunner<S> {
    fn run<'a>(&'a self, stop: &'a Stop) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(tasks::TaskRunner::run(self, stop))
    }
}

impl<S: Extractor> Run for tokens::TokenRunner<S> {
    fn run<'a>(&'a self, stop: &'a Stop) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(tokens::TokenRunner::run(self, stop))
    }
}

impl<S: Extractor> Run for dispatch::DispatchRunner<S> {
    fn run<'a>(&'a self, stop: &'a Stop) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(dispatch::DispatchRunner::run(self, stop))
    }
}

/// What [`FlechtwerkBuilder::build`] accepts: a stage of either shape, which chooses its runner
/// (STG-24). `M` tells the shapes apart; it is inferred.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// use flechtwerk::stage::{extractor, transformer};
/// use flechtwerk::Flechtwerk;
///
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// let echo = transformer(["in"]).transform(|_, _, _| Ok(()));
/// let ticker = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
/// let builder = || Flechtwerk::builder().application_id("app").client_id("pod-0").kafka(kafka.clone());
/// builder().build(echo)?; // a transformer
/// builder().poll_interval(Duration::from_secs(1)).build(ticker)?; // an extractor
/// # Ok::<(), flechtwerk::Error>(())
/// ```
pub trait IntoRunner<M>: sealed::Sealed<M> {
    #[doc(hidden)]
    fn into_runner(self, parts: RunnerParts) -> Result<Arc<dyn RunHandle>, Error>;

    /// The Kafka topics the stage reads: its input topics (a transformer's; none for the other
    /// shapes) and its config topics. For test harnesses that check a test's set-up against the
    /// stage before running it.
    #[doc(hidden)]
    fn read_topics(&self) -> (Vec<String>, Vec<String>);
}

/// The runner of a built stage (opaque).
#[doc(hidden)]
#[allow(private_bounds)]
pub trait RunHandle: Run {}
impl<T: Run> RunHandle for T {}

/// Everything but the stage (opaque: built by [`FlechtwerkBuilder`]).
#[doc(hidden)]
pub struct RunnerParts {
    settings: Settings,
    kafka: Arc<dyn Kafka>,
    observer: Arc<dyn Observer>,
    stores: Arc<dyn StateStores>,
    mqtt: Option<MqttBrokerConfig>,
}

/// The transformer shape (see [`IntoRunner`]).
#[doc(hidden)]
pub enum TransformerShape {}
/// The extractor shape (see [`IntoRunner`]).
#[doc(hidden)]
pub enum ExtractorShape {}
/// The MQTT bridge shape (see [`IntoRunner`]): the broker-dispatched loop (STG-24, EXT-50).
#[doc(hidden)]
pub enum MqttShape {}

mod sealed {
    pub trait Sealed<M> {}
    impl<S: crate::stage::Transformer> Sealed<super::TransformerShape> for S {}
    impl<S: crate::stage::Extractor> Sealed<super::ExtractorShape> for S {}
    impl<S: crate::stage::MqttExtractor> Sealed<super::MqttShape> for S {}
}

impl<S: Transformer> IntoRunner<TransformerShape> for S {
    fn into_runner(self, parts: RunnerParts) -> Result<Arc<dyn RunHandle>, Error> {
        let RunnerParts { settings, kafka, observer, stores, mqtt: _ } = parts;
        Ok(Arc::new(tasks::TaskRunner {
            stage: Arc::new(self),
            settings,
            kafka,
            observer,
            stores,
            positions: Default::default(),
            changelog_partitions: Default::default(),
        }))
    }

    fn read_topics(&self) -> (Vec<String>, Vec<String>) {
        (self.input_topics(), self.config_topics())
    }
}

impl<S: Extractor> IntoRunner<ExtractorShape> for S {
    fn into_runner(self, parts: RunnerParts) -> Result<Arc<dyn RunHandle>, Error> {
        let RunnerParts { settings, kafka, observer, stores, mqtt: _ } = parts;
        check_poll_interval(&settings)?;
        Ok(Arc::new(tokens::TokenRunner { stage: Arc::new(self), settings, kafka, observer, stores }))
    }

    fn read_topics(&self) -> (Vec<String>, Vec<String>) {
        (Vec::new(), self.config_topics())
    }
}

impl<S: MqttExtractor> IntoRunner<MqttShape> for S {
    fn into_runner(self, parts: RunnerParts) -> Result<Arc<dyn RunHandle>, Error> {
        let RunnerParts { settings, kafka, observer, stores: _, mqtt } = parts;
        check_poll_interval(&settings)?;
        let mqtt = mqtt.ok_or_else(|| {
            Error::Invalid("no MQTT broker configured: pass mqtt(MqttBrokerConfig::new(...)) to the builder".into())
        })?;
        // The client id names the persistent session; the application id is the share group
        // (LIFE-40).
        let bridge =
            Bridge::new(self, mqtt, settings.client_id.clone(), settings.application_id.clone(), observer.clone())?;
        Ok(Arc::new(dispatch::DispatchRunner { stage: Arc::new(bridge), settings, kafka, observer }))
    }

    fn read_topics(&self) -> (Vec<String>, Vec<String>) {
        (Vec::new(), self.config_topics())
    }
}

fn check_poll_interval(settings: &Settings) -> Result<(), Error> {
    match settings.poll_interval {
        Some(interval) if !interval.is_zero() => Ok(()),
        _ => Err(Error::Invalid("an extractor needs a positive poll_interval".into())),
    }
}

/// Builder of a [`Flechtwerk`] handle: [`application_id`](Self::application_id),
/// [`client_id`](Self::client_id) and [`kafka`](Self::kafka) are required, and by the stage an
/// extractor needs a [`poll_interval`](Self::poll_interval) and an MQTT bridge its
/// [`mqtt`](Self::mqtt) broker's settings; every other setting has a default.
/// [`build`](Self::build) checks them and connects to nothing.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use flechtwerk::stage::transformer;
/// use flechtwerk::{Flechtwerk, Guarantee};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
/// let app = Flechtwerk::builder()
///     .application_id("counter")
///     .client_id("pod-0")
///     .kafka(Arc::new(LocalCluster::new()))
///     .max_poll_records(200)
///     .session_timeout(Duration::from_secs(30))
///     .guarantee(Guarantee::ExactlyOnce)
///     .build(stage)?;
/// # let _ = app;
/// # Ok::<(), flechtwerk::Error>(())
/// ```
pub struct FlechtwerkBuilder {
    application_id: Option<String>,
    client_id: Option<String>,
    kafka: Option<Arc<dyn Kafka>>,
    max_poll_records: usize,
    /// `None`: not set, four times `max_poll_records`.
    max_batch_records: Option<usize>,
    compression: Compression,
    replication_factor: i16,
    session_timeout: Duration,
    guarantee: Guarantee,
    /// `None`: not set, [`FetchLimits::stage`] of `max_poll_records`.
    fetch_limits: Option<Option<FetchLimits>>,
    producers: Producers,
    poll_interval: Option<Duration>,
    observer: Option<Arc<dyn Observer>>,
    metrics: Option<Arc<dyn MetricsConfig>>,
    metrics_labels: Vec<(String, String)>,
    stores: Arc<dyn StateStores>,
    local_state_max_age: Duration,
    mqtt: Option<MqttBrokerConfig>,
    #[cfg(feature = "secrets")]
    keyring: Option<crate::secrets::Keyring>,
}

impl Flechtwerk {
    /// Starts a builder.
    ///
    /// ```
    /// use flechtwerk::Flechtwerk;
    /// let builder = Flechtwerk::builder().application_id("counter").client_id("pod-0");
    /// # let _ = builder;
    /// ```
    pub fn builder() -> FlechtwerkBuilder {
        FlechtwerkBuilder {
            application_id: None,
            client_id: None,
            kafka: None,
            max_poll_records: MAX_POLL_RECORDS_DEFAULT,
            max_batch_records: None,
            compression: Compression::Zstd,
            replication_factor: -1,
            session_timeout: SESSION_TIMEOUT_DEFAULT,
            guarantee: Guarantee::ExactlyOnce,
            fetch_limits: None,
            producers: Producers::PerTask,
            poll_interval: None,
            observer: None,
            metrics: None,
            metrics_labels: Vec::new(),
            stores: crate::state::default_stores(),
            local_state_max_age: crate::engine::settings::LOCAL_STATE_MAX_AGE_DEFAULT,
            mqtt: None,
            #[cfg(feature = "secrets")]
            keyring: None,
        }
    }
}

impl FlechtwerkBuilder {
    /// The application id: consumer group, changelog prefix (`{id}-changelog`), transactional
    /// id prefix (`{id}-{partition}`). Required.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn application_id(mut self, id: impl Into<String>) -> Self {
        self.application_id = Some(id.into());
        self
    }

    /// The instance identity: distinct per instance and unchanged across its restarts; it
    /// prefixes every Kafka client id. Required.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// // e.g. the pod's name in a StatefulSet: distinct per instance, stable across restarts
    /// let app = Flechtwerk::builder().application_id("counter").client_id("counter-0").kafka(kafka).build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The Kafka cluster (the librdkafka adapter in production, a simulated cluster in tests).
    /// Required.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// // in production: Arc::new(flechtwerk::kafka::rdkafka::RdKafka::new("broker:9092"))
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn kafka(mut self, kafka: Arc<dyn Kafka>) -> Self {
        self.kafka = Some(kafka);
        self
    }

    /// Records per poll (default 500): bounds a poll's memory, and with
    /// [`max_batch_records`](Self::max_batch_records) a batch's.
    ///
    /// In exactly-once mode every batch is a transaction per task, with its round trips to the
    /// transaction and group coordinators; with one poll of 500 small records per batch those
    /// dominate, and exactly-once ran at 0.41× of at-least-once's rate on the side-by-side bench
    /// (docs/performance.md). Batches that gather the polls made during a commit (the default,
    /// up to four times this) or bigger polls spread them; bigger polls cost more memory (the
    /// consumer buffers about two per partition) and a longer wait before a batch's outputs are
    /// visible when the input is slow.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .max_poll_records(100)
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn max_poll_records(mut self, records: usize) -> Self {
        self.max_poll_records = records;
        self
    }

    /// Lets one batch gather up to `records` records from several polls (default: four times
    /// [`max_poll_records`](Self::max_poll_records); equal to it, every poll is its own batch, as
    /// in Python flechtwerk). Must be at least `max_poll_records`.
    ///
    /// The engine polls the next batch while the batch before it commits (TRX-02). It keeps
    /// polling until that commit finished, and every poll made meanwhile joins the same next
    /// batch, up to `records` records (TRX-45): the next transaction per task then holds all of
    /// them, and its round trips to the transaction and group coordinators are paid once for the
    /// lot instead of once per poll. A batch grows only while the commit before it takes (the
    /// records it gathers would otherwise wait for batches of their own); when the input is
    /// idle, nothing waits. Exactly-once is unchanged: each batch is still one transaction per
    /// task with its outputs, its state changes (one write per key, TRX-20) and its offsets.
    ///
    /// On the side-by-side bench (docs/performance.md, "Exactly-once against at-least-once"), at
    /// `max_poll_records` 500, gathering up to 1 000 records took exactly-once from 0.41× of
    /// at-least-once's rate (one poll per batch in both) to 0.80–0.91× (both gathering), 2.4×
    /// its own rate before; up to 2 000 (the default) to 0.83–1.17× (four series), with ~6 MiB
    /// more peak memory (still below Python flechtwerk's); 4 000 and more held more memory
    /// again.
    ///
    /// The metrics count batches, not polls (MET-03): `flechtwerk_batch_size` observes each
    /// committed batch once, with all the records it gathered, on Python's ladder (topped by
    /// `max_poll_records`, so a fleet of both shares its bounds; a gathered batch above it counts
    /// in `+Inf`); `flechtwerk_transactions_committed_total` counts one transaction per task per
    /// batch. Beside a Python fleet, where every poll is a batch, both read lower and the sizes
    /// higher for the same input unless `records` equals `max_poll_records`
    /// (docs/operations.md).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka.clone())
    ///     .max_poll_records(500)
    ///     .max_batch_records(500) // every poll its own transaction, as Python flechtwerk does
    ///     .build(stage)?;
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// // Fewer than a poll's records is refused.
    /// let invalid = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .max_poll_records(500)
    ///     .max_batch_records(100);
    /// assert!(matches!(invalid.build(stage), Err(flechtwerk::Error::Invalid(m)) if m.contains("max_batch_records")));
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn max_batch_records(mut self, records: usize) -> Self {
        self.max_batch_records = Some(records);
        self
    }

    /// Compression of every produced batch (default zstd).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::kafka::Compression;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .compression(Compression::Lz4)
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Replication factor of the changelog topic the framework creates (default -1: the
    /// broker's default).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .replication_factor(3)
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn replication_factor(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }

    /// How long the group waits for a silent instance before reassigning its tasks.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use std::time::Duration;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .session_timeout(Duration::from_secs(30))
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The processing guarantee (default: exactly-once).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::Guarantee;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .guarantee(Guarantee::AtLeastOnce)
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn guarantee(mut self, guarantee: Guarantee) -> Self {
        self.guarantee = guarantee;
        self
    }

    /// Bounds on what a transformer's consumer fetches and buffers ahead of its polls (default
    /// [`FetchLimits::stage`] of `max_poll_records`: a few batches ahead, not a whole backlog);
    /// `None` leaves the Kafka adapter's own defaults (librdkafka buffers up to 64 MiB ahead).
    /// Memory and pacing only: which records a poll returns does not change.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::kafka::FetchLimits;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .fetch_limits(Some(FetchLimits { partition_bytes: 1 << 20, ..FetchLimits::stage(500) }))
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn fetch_limits(mut self, limits: Option<FetchLimits>) -> Self {
        self.fetch_limits = Some(limits);
        self
    }

    /// Who owns a transformer's transactional producers (default: [`Producers::PerTask`], one
    /// per task, as Python flechtwerk). [`Producers::PerInstance`] is Kafka Streams'
    /// exactly-once v2 shape: one producer and one transaction per batch for all the instance's
    /// tasks, fenced by the group generation (not wire-compatible with Python; every instance
    /// of the application must use it, each with its own stable `client_id`). Ignored by
    /// extractors and in at-least-once mode.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::Producers;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .producers(Producers::PerInstance)
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn producers(mut self, producers: Producers) -> Self {
        self.producers = producers;
        self
    }

    /// An observer receiving every metric event (default: none). With [`metrics`](Self::metrics)
    /// on as well, both receive every event.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::testing::{Observed, RecordingObserver}; // feature `testing`
    /// let observer = RecordingObserver::default();
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .observer(Arc::new(observer.clone()))
    ///     .build(stage)?;
    /// assert!(observer.events().is_empty()); // nothing happens before a run
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Metrics on (default: off, no metric exists and nothing is served): with the Prometheus
    /// adapter (feature `prometheus`), `metrics(Metrics::serve("127.0.0.1:9464"))` keeps every
    /// `flechtwerk_*` metric in this application's own registry and serves it at `/metrics` on
    /// that address while the application runs. A port that is taken fails the run at startup
    /// (LIFE-17).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics; // feature `prometheus`
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .metrics(Metrics::serve("127.0.0.1:9464"))
    ///     .build(stage)?;
    /// assert!(app.render_metrics().is_some());
    /// # }
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn metrics(mut self, metrics: impl MetricsConfig + 'static) -> Self {
        self.metrics = Some(Arc::new(metrics));
        self
    }

    /// Labels on every metric (KNOB `metrics_labels`): their names lead every family's label
    /// names, in the order given, their values are on every sample; e.g. `[("app", "counter"),
    /// ("pod", "pod-0")]`. They tell instances, applications and stages apart in one Prometheus.
    /// Names must be Prometheus label names and not the metrics' own (`topic`, `outcome`,
    /// `partition`, `reason`, `kid`, `scope`, `le`); checked by `build`. Without
    /// [`metrics`](Self::metrics) there are no metrics to label.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # #[cfg(feature = "prometheus")] {
    /// use flechtwerk::observer::prometheus::Metrics;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .metrics_labels([("app", "counter"), ("pod", "pod-0")])
    ///     .metrics(Metrics::serve("127.0.0.1:9464"))
    ///     .build(stage)?;
    /// # }
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn metrics_labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.metrics_labels = labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        self
    }

    /// Where task state lives (default: RocksDB under a fresh temp directory with the `rocksdb`
    /// feature, else memory).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use flechtwerk::state::InMemoryStores;
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .state_stores(Arc::new(InMemoryStores::for_instance()))
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn state_stores(mut self, stores: Arc<dyn StateStores>) -> Self {
        self.stores = stores;
        self
    }

    /// How old a task's local copy of its state may be and still be reused (STO-05; default
    /// 12 hours). A copy records the changelog position it reflects and when it was last
    /// brought there; a task that starts on a copy older than this discards it and restores
    /// its changelog in full. The bound guards against the log cleaner: a compacted changelog
    /// keeps a delete (tombstone) only for the topic's `delete.retention.ms` (Kafka's default:
    /// 24 hours), so a copy that missed a delete older than that would keep the deleted state.
    /// Keep it below the changelog's `delete.retention.ms`, with a margin for clock skew
    /// between this host and the brokers; `Duration::ZERO` never reuses a copy.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .local_state_max_age(Duration::from_secs(3600))
    ///     .build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn local_state_max_age(mut self, age: Duration) -> Self {
        self.local_state_max_age = age;
        self
    }

    /// Extractors: the wait between poll cycles, measured from the end of one cycle to the start
    /// of the next (EXT-03); required, and positive (LIFE-12). A stage's wakeup ends the wait
    /// early. Transformers ignore it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// use std::time::Duration;
    /// let ticker = flechtwerk::stage::extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// let app = Flechtwerk::builder()
    ///     .application_id("counter")
    ///     .client_id("pod-0")
    ///     .kafka(kafka)
    ///     .poll_interval(Duration::from_secs(5))
    ///     .build(ticker)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// The MQTT broker of an MQTT bridge stage ([`MqttExtractor`]), with the session settings
    /// (KNOB `mqtt`). The client id names the persistent MQTT session and the application id is
    /// the shared-subscription group. Other stages ignore it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
    /// use flechtwerk::{Flechtwerk, Message};
    /// let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// // The simulated broker here; `mqtt::rumqttc::RumqttcBroker` (feature `mqtt`) in production.
    /// let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// let adapter = Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
    /// let bridge = || mqtt_extractor(["devices"]).relay(|_, topic, payload| Ok(Some(Message::new("readings", topic, payload))));
    /// let builder = || {
    ///     let builder = Flechtwerk::builder().application_id("bridge").client_id("pod-0").kafka(kafka.clone());
    ///     builder.poll_interval(std::time::Duration::from_millis(100))
    /// };
    /// let Err(no_broker) = builder().build(bridge()) else { panic!("an MQTT bridge needs a broker") };
    /// assert!(no_broker.to_string().contains("no MQTT broker configured"));
    /// let app = builder().mqtt(MqttBrokerConfig::new(adapter)).build(bridge())?;
    /// # let _ = app;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn mqtt(mut self, mqtt: MqttBrokerConfig) -> Self {
        self.mqtt = Some(mqtt);
        self
    }

    /// The keyring of the application's secret attributes (feature `secrets`; Python's
    /// `Flechtwerk.of(keyring=...)`). The library reads no key file: the application builds the
    /// keyring from wherever it keeps it ([`Keyring::from_json`](crate::secrets::Keyring::from_json)
    /// of a mounted secret, say) and hands it in here.
    ///
    /// Every encrypted or signed attribute read or written by the stage's code during a run uses
    /// it, and reports its `secret_decrypted` / `secret_plaintext_read` events to this
    /// application's observer; each run starts by reporting `keyring_key_loaded(kid)` for every
    /// kid (SEC-06). The keyring is bound to the application's run, not installed in the
    /// process: two applications in one process may hold different keyrings, and code outside a
    /// run uses [`install_keyring`](crate::secrets::install_keyring). Without a keyring, the
    /// stage's secret attributes fail with [`KeyringError::NotInstalled`](crate::secrets::KeyringError::NotInstalled)
    /// (unless the process installed one).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// use flechtwerk::secrets::Keyring;
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// // In production: Keyring::from_json(&std::fs::read_to_string("/run/secrets/keyring.json")?)?
    /// let keyring = Keyring::builder().generate_oct("k-2026").primary("k-2026").build()?;
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).keyring(keyring).build(stage)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "secrets")]
    pub fn keyring(mut self, keyring: crate::secrets::Keyring) -> Self {
        self.keyring = Some(keyring);
        self
    }

    /// Builds the handle for `stage`, a [`Transformer`], an [`Extractor`] or an
    /// [`MqttExtractor`]. No connection is made here.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// // An invalid setting fails here, before anything runs.
    /// let invalid = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka.clone()).max_poll_records(0);
    /// assert!(matches!(invalid.build(stage), Err(flechtwerk::Error::Invalid(_))));
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).build(stage)?;
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn build<S: IntoRunner<M>, M>(self, stage: S) -> Result<Flechtwerk, Error> {
        let required = |what: &str| Error::Invalid(format!("Flechtwerk needs {what}"));
        if self.max_poll_records == 0 {
            return Err(Error::Invalid("max_poll_records must be at least 1".into()));
        }
        let max_batch_records = self.max_batch_records.unwrap_or(self.max_poll_records.saturating_mul(4));
        if max_batch_records < self.max_poll_records {
            return Err(Error::Invalid(format!(
                "max_batch_records ({max_batch_records}) must be at least max_poll_records ({})",
                self.max_poll_records
            )));
        }
        let application_id = self.application_id.ok_or_else(|| required("an application_id"))?;
        let client_id = self.client_id.ok_or_else(|| required("a client_id"))?;
        if application_id.is_empty() || client_id.is_empty() {
            return Err(Error::Invalid("application_id and client_id must not be empty".into()));
        }
        let kafka = self.kafka.ok_or_else(|| required("a Kafka cluster (kafka(...))"))?;
        if self.session_timeout < SESSION_TIMEOUT_MIN {
            return Err(Error::Invalid(format!(
                "session_timeout must be at least {SESSION_TIMEOUT_MIN:?} (members heartbeat every third of it)"
            )));
        }
        let metrics = match &self.metrics {
            // The batch_size ladder is Python's, topped by max_poll_records, at every
            // max_batch_records: a fleet of both exposes one set of bounds (MET-03); a batch that
            // gathered more records than one poll's cap lands in +Inf only.
            Some(config) => Some(config.instance(&self.metrics_labels, self.max_poll_records).map_err(Error::Invalid)?),
            None => None,
        };
        let observer: Arc<dyn Observer> = match (&metrics, self.observer) {
            (None, None) => Arc::new(NoopObserver),
            (None, Some(observer)) => observer,
            (Some(metrics), None) => metrics.observer(),
            (Some(metrics), Some(observer)) => Arc::new(FanOut::new(vec![metrics.observer(), observer])),
        };
        #[cfg(feature = "secrets")]
        let secrets = Arc::new(crate::secrets::SecretContext {
            keyring: self.keyring.map(Arc::new),
            events: Some(Arc::new(crate::observer::SecretEventsOf(Arc::clone(&observer)))),
        });
        #[cfg(feature = "secrets")]
        let secret_observer = Arc::clone(&observer);
        let parts = RunnerParts {
            settings: Settings {
                application_id,
                client_id,
                max_poll_records: self.max_poll_records,
                max_batch_records,
                compression: self.compression,
                replication_factor: self.replication_factor,
                session_timeout: self.session_timeout,
                guarantee: self.guarantee,
                fetch_limits: self.fetch_limits.unwrap_or(Some(FetchLimits::stage(self.max_poll_records))),
                producers: self.producers,
                poll_interval: self.poll_interval,
                local_state_max_age: self.local_state_max_age,
            },
            kafka,
            observer,
            stores: self.stores,
            mqtt: self.mqtt,
        };
        let runner = stage.into_runner(parts)?;
        Ok(Flechtwerk {
            runner,
            running: Arc::new(AtomicBool::new(false)),
            metrics,
            metrics_address: Arc::new(Mutex::new(None)),
            #[cfg(feature = "secrets")]
            secrets,
            #[cfg(feature = "secrets")]
            observer: secret_observer,
        })
    }
}

impl Flechtwerk {
    /// The exposition of this application's metrics as a scrape sees it now (text format
    /// 0.0.4); `None` with metrics off.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).build(stage)?;
    /// assert_eq!(app.render_metrics(), None); // metrics are off unless `metrics(...)` turns them on
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn render_metrics(&self) -> Option<String> {
        self.metrics.as_ref().map(|metrics| metrics.render())
    }

    /// Where the metrics endpoint listens, while a run serves it (the bound port when the
    /// configured one was 0).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::{stage::transformer, Flechtwerk};
    /// # let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let app = Flechtwerk::builder().application_id("counter").client_id("pod-0").kafka(kafka).build(stage)?;
    /// assert_eq!(app.metrics_address(), None); // nothing served: metrics off, and not running
    /// # Ok::<(), flechtwerk::Error>(())
    /// ```
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        *self.metrics_address.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs the stage until an error: validates the topics, bootstraps the config store, joins
    /// the group and processes. It never returns `Ok`; stop it with
    /// [`run_until`](Self::run_until) for a clean shutdown.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use flechtwerk::kafka::{Kafka, NewTopic};
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::Flechtwerk;
    /// use flechtwerk_sim::cluster::LocalCluster;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let kafka = Arc::new(LocalCluster::new());
    /// kafka.admin()?.create_topic(&NewTopic::new("in", 1)).await?;
    /// let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// let app = Flechtwerk::builder().application_id("app").client_id("pod-0").kafka(kafka).build(stage)?;
    /// // Runs until dropped: a timeout (or a `select!`) that drops it stops the run cleanly.
    /// let ran = tokio::time::timeout(Duration::from_millis(200), app.run()).await;
    /// assert!(ran.is_err(), "still running when the timeout dropped it");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run(&self) -> Result<std::convert::Infallible, Error> {
        self.run_until(std::future::pending()).await?;
        unreachable!("a pending shutdown never resolves")
    }

    /// Runs until `shutdown` resolves, then stops cleanly; or until an error.
    ///
    /// A clean stop lets the in-flight batch commit (within a grace of 10 s; past it the batch
    /// is abandoned and its transactions aborted), stops every task (aborting any transaction
    /// still open, closing its producer, wiping its store), closes the consumers, which leaves
    /// the group at once, and runs the stage's teardown. An error takes the same path after
    /// aborting the transaction it interrupted, and is returned.
    ///
    /// **Cancel-safe.** The run itself is a task on the current tokio runtime; this future only
    /// drives and watches it. Dropping this future (a `select!` that took another branch, a
    /// timeout) raises the same stop signal as `shutdown` does: the run winds down in the
    /// background exactly as above, so no transaction is left open to hold back readers, no
    /// group membership lingers until its session times out, and the stage's teardown runs.
    /// What no library can guarantee is a wind-down after the runtime itself stops (the end of
    /// `main`) or a crash: then the next owner's fence aborts the open transactions and the
    /// group's session timeout reassigns the tasks, which is also what a restart relies on.
    ///
    /// Must be called from within a tokio runtime (or the simulation's). A panic in stage code
    /// fails the batch like an error ([`Error::Transform`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use flechtwerk::kafka::{Kafka, NewTopic};
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::Flechtwerk;
    /// use flechtwerk_sim::cluster::LocalCluster;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let kafka = Arc::new(LocalCluster::new());
    /// kafka.admin()?.create_topic(&NewTopic::new("in", 1)).await?;
    /// let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// let app = Flechtwerk::builder().application_id("app").client_id("pod-0").kafka(kafka).build(stage)?;
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let running = tokio::spawn(async move { app.run_until(async { stopped.await.unwrap_or(()) }).await });
    /// // ... later, on SIGTERM say:
    /// stop.send(()).unwrap();
    /// running.await??; // Ok: stopped cleanly
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(Error::Invalid("this Flechtwerk is already running".into()));
        }
        // The metrics endpoint first: a port that is taken fails the start (LIFE-17).
        let server = match &self.metrics {
            Some(metrics) => match metrics.serve().await {
                Ok(server) => server,
                Err(source) => {
                    self.running.store(false, Ordering::Release);
                    let address = metrics.address().unwrap_or_default().to_owned();
                    return Err(Error::Metrics { address, source });
                }
            },
            None => None,
        };
        let metrics_address = Arc::clone(&self.metrics_address);
        *metrics_address.lock().unwrap_or_else(|p| p.into_inner()) = server.as_ref().map(|s| s.local_addr());
        let stop = Stop::new();
        let runner = Arc::clone(&self.runner);
        let running = Arc::clone(&self.running);
        let run_stop = stop.clone();
        #[cfg(feature = "secrets")]
        if let Some(keyring) = &self.secrets.keyring {
            // SEC-06: the keyring's kids, once per run (the keyring_keys_loaded gauge).
            keyring.kids().for_each(|kid| self.observer.keyring_key_loaded(kid));
        }
        let run = async move {
            let result = runner.run(&run_stop).await;
            // The endpoint lives exactly as long as the run: stopped (its port free again)
            // however the run ends, a dropped `run_until` future included.
            if let Some(server) = server {
                server.stop().await;
            }
            *metrics_address.lock().unwrap_or_else(|p| p.into_inner()) = None;
            running.store(false, Ordering::Release);
            result
        };
        // The stage's code runs inside: its secret attributes find the application's keyring
        // and report to its observer, on whatever thread polls the run.
        #[cfg(feature = "secrets")]
        let run = crate::secrets::bind(Some(Arc::clone(&self.secrets)), run);
        let mut handle = tokio::spawn(run);
        // Dropping this future raises the stop signal; the run winds down on its own.
        let _stop_on_drop = StopOnDrop(stop.clone());
        tokio::pin!(shutdown);
        let joined = tokio::select! {
            biased;
            joined = &mut handle => joined,
            () = &mut shutdown => {
                stop.raise();
                handle.await
            }
        };
        match joined {
            Ok(result) => result,
            // An engine assertion: the panic hook printed it; the caller's task fails with it.
            Err(error) if error.is_panic() => panic!("the flechtwerk run panicked: {error}"),
            Err(error) => Err(Error::Invalid(format!("the run was cancelled by its runtime: {error}"))),
        }
    }
}

/// Raises a stop signal when dropped.
struct StopOnDrop(Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{Admin, Consumer, KafkaResult, Producer, ProducerConfig};
    use crate::stage::transformer;

    /// A Kafka that is never called: building a handle makes no connection (LIFE-02).
    struct Unreachable;

    impl Kafka for Unreachable {
        fn consumer(&self, _: crate::kafka::ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
            unreachable!("build() must not connect")
        }
        fn producer(&self, _: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
            unreachable!("build() must not connect")
        }
        fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
            unreachable!("build() must not connect")
        }
    }

    fn builder() -> FlechtwerkBuilder {
        Flechtwerk::builder().application_id("app").client_id("pod-0").kafka(Arc::new(Unreachable))
    }

    fn stage() -> impl Transformer {
        transformer(["in"]).transform(|_, _, _| Ok(()))
    }

    fn invalid(builder: FlechtwerkBuilder) -> String {
        match builder.build(stage()) {
            Err(Error::Invalid(message)) => message,
            Err(other) => panic!("not an Invalid error: {other:?}"),
            Ok(_) => panic!("built"),
        }
    }

    #[test]
    fn life_02_building_connects_to_nothing() {
        assert!(builder().build(stage()).is_ok());
    }

    #[test]
    fn err_33_max_poll_records_must_be_positive() {
        assert!(invalid(builder().max_poll_records(0)).contains("max_poll_records"));
        assert!(builder().max_poll_records(1).build(stage()).is_ok());
    }

    #[test]
    fn identity_and_kafka_are_required() {
        assert!(invalid(Flechtwerk::builder().client_id("c").kafka(Arc::new(Unreachable))).contains("application_id"));
        assert!(invalid(Flechtwerk::builder().application_id("a").kafka(Arc::new(Unreachable))).contains("client_id"));
        assert!(invalid(Flechtwerk::builder().application_id("a").client_id("c")).contains("Kafka"));
        assert!(invalid(builder().application_id("")).contains("must not be empty"));
    }

    #[test]
    fn session_timeout_has_a_floor() {
        let message = invalid(builder().session_timeout(Duration::from_millis(500)));
        assert!(message.contains("session_timeout"), "{message}");
        assert!(builder().session_timeout(SESSION_TIMEOUT_MIN).build(stage()).is_ok());
    }
}
