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

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::kafka::{Compression, Kafka};
use crate::observer::{NoopObserver, Observer};
use crate::stage::Transformer;
use crate::state::StateStores;
use crate::transformer::{Guarantee, Runner, Settings};

/// Default cap of records per fetched batch (KNOB `max_poll_records`).
pub const MAX_POLL_RECORDS_DEFAULT: usize = 500;

/// A configured application: one stage, its Kafka, its observer and state stores.
pub struct Flechtwerk<S> {
    runner: Runner<S>,
    metrics_labels: BTreeMap<String, String>,
}

/// Builder of a [`Flechtwerk`] handle.
pub struct FlechtwerkBuilder {
    application_id: Option<String>,
    client_id: Option<String>,
    kafka: Option<Arc<dyn Kafka>>,
    max_poll_records: usize,
    compression: Compression,
    replication_factor: i16,
    session_timeout: Duration,
    guarantee: Guarantee,
    observer: Arc<dyn Observer>,
    stores: Arc<dyn StateStores>,
    metrics_labels: BTreeMap<String, String>,
}

impl Flechtwerk<()> {
    /// Starts a builder.
    pub fn builder() -> FlechtwerkBuilder {
        FlechtwerkBuilder {
            application_id: None,
            client_id: None,
            kafka: None,
            max_poll_records: MAX_POLL_RECORDS_DEFAULT,
            compression: Compression::Zstd,
            replication_factor: -1,
            session_timeout: Duration::from_secs(10),
            guarantee: Guarantee::ExactlyOnce,
            observer: Arc::new(NoopObserver),
            stores: default_stores(),
            metrics_labels: BTreeMap::new(),
        }
    }
}

/// RocksDB in a fresh directory under the system temp dir when the `rocksdb` feature is on
/// (production), memory otherwise (and always in simulations). Task state is ephemeral by
/// design: it is a cache of the changelog, rebuilt whenever a task starts.
fn default_stores() -> Arc<dyn StateStores> {
    #[cfg(all(feature = "rocksdb", not(madsim)))]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let unique = format!(
            "flechtwerk-{}-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        );
        Arc::new(crate::state::RocksDbStores::new(std::env::temp_dir().join(unique)))
    }
    #[cfg(not(all(feature = "rocksdb", not(madsim))))]
    {
        Arc::new(crate::state::InMemoryStores)
    }
}

impl FlechtwerkBuilder {
    /// The application id: consumer group, changelog prefix (`{id}-changelog`), transactional
    /// id prefix (`{id}-{partition}`). Required.
    pub fn application_id(mut self, id: impl Into<String>) -> Self {
        self.application_id = Some(id.into());
        self
    }

    /// The instance identity: distinct per instance and unchanged across its restarts; it
    /// prefixes every Kafka client id. Required.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The Kafka cluster (the librdkafka adapter in production, a simulated cluster in tests).
    /// Required.
    pub fn kafka(mut self, kafka: Arc<dyn Kafka>) -> Self {
        self.kafka = Some(kafka);
        self
    }

    /// Records per fetched batch (default 500): bounds a batch's memory and transaction size.
    pub fn max_poll_records(mut self, records: usize) -> Self {
        self.max_poll_records = records;
        self
    }

    /// Compression of every produced batch (default zstd).
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Replication factor of the changelog topic the framework creates (default -1: the
    /// broker's default).
    pub fn replication_factor(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }

    /// How long the group waits for a silent instance before reassigning its tasks.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The processing guarantee (default: exactly-once).
    pub fn guarantee(mut self, guarantee: Guarantee) -> Self {
        self.guarantee = guarantee;
        self
    }

    /// The observer receiving every metric event (default: none).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Where task state lives (default: RocksDB under a fresh temp directory with the `rocksdb`
    /// feature, else memory).
    pub fn state_stores(mut self, stores: Arc<dyn StateStores>) -> Self {
        self.stores = stores;
        self
    }

    /// Labels stamped on every metric (copied).
    pub fn metrics_labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.metrics_labels = labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        self
    }

    /// Builds the handle for `stage`. No connection is made here.
    pub fn build<S: Transformer>(self, stage: S) -> Result<Flechtwerk<S>, Error> {
        let required = |what: &str| Error::Invalid(format!("Flechtwerk needs {what}"));
        if self.max_poll_records == 0 {
            return Err(Error::Invalid("max_poll_records must be at least 1".into()));
        }
        let application_id = self.application_id.ok_or_else(|| required("an application_id"))?;
        let client_id = self.client_id.ok_or_else(|| required("a client_id"))?;
        if application_id.is_empty() || client_id.is_empty() {
            return Err(Error::Invalid("application_id and client_id must not be empty".into()));
        }
        let kafka = self.kafka.ok_or_else(|| required("a Kafka cluster (kafka(...))"))?;
        Ok(Flechtwerk {
            runner: Runner {
                stage: Arc::new(stage),
                settings: Settings {
                    application_id,
                    client_id,
                    max_poll_records: self.max_poll_records,
                    compression: self.compression,
                    replication_factor: self.replication_factor,
                    session_timeout: self.session_timeout,
                    guarantee: self.guarantee,
                },
                kafka,
                observer: self.observer,
                stores: self.stores,
            },
            metrics_labels: self.metrics_labels,
        })
    }
}

impl<S: Transformer> Flechtwerk<S> {
    /// Runs the stage until an error: validates the topics, bootstraps the config store, joins
    /// the group and processes. It never returns `Ok`; stop it with
    /// [`run_until`](Self::run_until) for a clean shutdown.
    pub async fn run(&self) -> Result<std::convert::Infallible, Error> {
        self.run_until(std::future::pending()).await?;
        unreachable!("a pending shutdown never resolves")
    }

    /// Runs until `shutdown` resolves, then tears every task down and leaves the group; or until
    /// an error, after the same cleanup.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        self.runner.run(shutdown).await
    }

    /// The labels given to the builder.
    pub fn metrics_labels(&self) -> &BTreeMap<String, String> {
        &self.metrics_labels
    }
}
