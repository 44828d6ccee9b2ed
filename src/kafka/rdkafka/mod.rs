//! The production Kafka adapter on librdkafka (feature `rdkafka`): [`RdKafka`] builds the
//! port's consumers, producers and admin clients from bootstrap servers, a typed [`Security`]
//! (TLS, SASL; docs/security.md) and optional extra librdkafka settings. Everything is injected;
//! nothing is read from the environment.
//!
//! Refusals: librdkafka only logs a failed authentication or TLS handshake and reconnects
//! forever; the adapter fails every call waiting on that client with a
//! [`KafkaErrorKind::Authentication`] error instead, and a broker's authorization error with
//! [`KafkaErrorKind::Authorization`] (naming the resource and the missing permission), also in
//! a consumer's poll, and also when the broker refuses a topic's partition to a transaction
//! (which librdkafka only logs before it purges the transaction's records).
//!
//! Fixed choices (the port's contract depends on them, so extra settings cannot change them):
//! consumers read `read_committed`, never auto-commit, join with eager Range assignment and never
//! auto-create topics; producers are idempotent, place keyed records with Kafka's murmur2
//! (`partitioner=murmur2_random`, as the Java client does) and compress per
//! [`ProducerConfig::compression`]. librdkafka's log lines go to `tracing` (target
//! `librdkafka`), never to stdout or stderr.
//!
//! Threads: every librdkafka call that can block (poll, metadata, offsets, transactions, flush,
//! closing a client) runs on tokio's blocking pool, never on a runtime worker. A consumer's
//! rebalance callback runs inside its poll, on that blocking thread: it assigns, **pauses** the
//! new partitions before anything of them can be fetched, and queues a [`Rebalance`](crate::kafka::Rebalance) event that
//! the next [`Consumer::poll`] returns. Nothing in the callback waits for the engine.
//! [`Consumer::resume`] also sends the resumed partitions' leaders a request it does not wait
//! for: librdkafka's own resume leaves a broker thread that idled while its partitions were
//! paused asleep for up to a second before it fetches them again.
//!
//! Poll is cancellation-safe: records a cancelled poll had already taken from librdkafka stay
//! buffered for the next poll (or are rewound when their partition is paused, sought or
//! reassigned), so dropping a poll future never loses a record.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::admin::AdminClient;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::BaseProducer;

use super::{
    Admin, Consumer, ConsumerConfig, FetchLimits, Kafka, KafkaError, KafkaErrorKind, KafkaResult, OffsetReset,
    Producer, ProducerConfig,
};

mod admin;
mod consumer;
mod errors;
mod log;
mod producer;
mod security;

use admin::{pump_main_queue, RdAdmin};
use consumer::{Buffer, ConsumerCtx, RdConsumer, Shared};
use errors::rd_error;
use log::LogContext;
use producer::{DeliveryContext, RdFutureProducer, RdProducer};
use security::{is_secret_setting, is_security_setting};

pub use security::{builtin_features, SaslMechanism, Secret, Security};

/// Upper bound of one blocking metadata, offset or seek request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the request that wakes resumed partitions' fetchers may take (nothing waits for it).
const WAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A blocking poll waits in slices of this length, checking in between whether a transaction
/// marker moved a position (markers are consumed silently and would otherwise let a poll sleep
/// its whole timeout at the end of a partition).
const POLL_SLICE: Duration = Duration::from_millis(100);
/// Shortest wait of a poll's first call into librdkafka (see `Shared::fill`).
const POLL_MIN: Duration = Duration::from_millis(1);

/// How long a created topic may take to show up in metadata with a leader for every partition.
const TOPIC_VISIBLE_MAX: Duration = Duration::from_secs(30);

/// Settings the adapter owns: the port's guarantees (read_committed, manual offsets,
/// Java-compatible placement, eager Range, no auto-creation) or values taken from the client
/// configs. [`RdKafka::with_settings`] refuses them.
///
/// ```
/// use std::collections::BTreeMap;
/// use flechtwerk::kafka::rdkafka::{RdKafka, RESERVED_SETTINGS};
///
/// assert!(RESERVED_SETTINGS.contains(&"isolation.level"));
/// let settings = BTreeMap::from([("isolation.level".to_owned(), "read_uncommitted".to_owned())]);
/// assert!(RdKafka::with_settings("localhost:9092", settings).is_err());
/// ```
pub const RESERVED_SETTINGS: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "group.id",
    "group.protocol",
    "transactional.id",
    "transaction.timeout.ms",
    "isolation.level",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "auto.offset.reset",
    "session.timeout.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "allow.auto.create.topics",
    "enable.idempotence",
    "partitioner",
    "compression.type",
    "compression.codec",
];

/// The production [`Kafka`]: clients on librdkafka.
///
/// Connection security is typed: [`with_security`](Self::with_security) takes a [`Security`]
/// (TLS, SASL, the CA, a client certificate; passwords as [`Secret`]s). Raw librdkafka
/// settings ([`with_settings`](Self::with_settings)) are for everything else; security settings
/// among them (`security.protocol`, `sasl.*`, `ssl.*`) are refused once a typed `Security` is
/// given, so there is never a question which one wins. `Debug` never prints a secret.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::kafka::rdkafka::RdKafka;
/// use flechtwerk::stage::transformer;
/// use flechtwerk::Flechtwerk;
///
/// let kafka = Arc::new(RdKafka::new("kafka-1:9092,kafka-2:9092"));
/// let app = Flechtwerk::builder()
///     .application_id("click-counter")
///     .client_id("pod-0")
///     .kafka(kafka)
///     .build(transformer(["clicks"]).transform(|_, _, _| Ok(())))?;
/// // app.run().await connects; building connects to nothing.
/// # Ok::<(), flechtwerk::Error>(())
/// ```
#[derive(Clone)]
pub struct RdKafka {
    bootstrap_servers: String,
    settings: BTreeMap<String, String>,
    security: Option<Security>,
}

impl fmt::Debug for RdKafka {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings: BTreeMap<&str, &str> = self
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), if is_secret_setting(k) { "[redacted]" } else { v.as_str() }))
            .collect();
        f.debug_struct("RdKafka")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("settings", &settings)
            .field("security", &self.security)
            .finish()
    }
}

impl RdKafka {
    /// Clients of the cluster at `bootstrap_servers` (`host:port[,host:port...]`), plaintext
    /// until [`with_security`](Self::with_security) says otherwise.
    ///
    /// ```
    /// # use flechtwerk::kafka::rdkafka::RdKafka;
    /// let kafka = RdKafka::new("127.0.0.1:9092");
    /// assert!(format!("{kafka:?}").contains("127.0.0.1:9092"));
    /// ```
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        RdKafka { bootstrap_servers: bootstrap_servers.into(), settings: BTreeMap::new(), security: None }
    }

    /// Like [`new`](Self::new), with extra librdkafka settings applied to every client
    /// (timeouts, `client.rack`, `debug`, ...). Refuses the [`RESERVED_SETTINGS`]. Security
    /// settings are accepted here only as long as no typed [`Security`] is given; prefer
    /// [`with_security`](Self::with_security).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use flechtwerk::kafka::rdkafka::RdKafka;
    ///
    /// let settings = BTreeMap::from([("client.rack".to_owned(), "eu-west-1a".to_owned())]);
    /// let kafka = RdKafka::with_settings("127.0.0.1:9092", settings)?;
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    pub fn with_settings(
        bootstrap_servers: impl Into<String>,
        settings: BTreeMap<String, String>,
    ) -> KafkaResult<Self> {
        if let Some(key) = settings.keys().find(|k| RESERVED_SETTINGS.contains(&k.as_str())) {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "configure",
                format!("`{key}` is set by the Kafka adapter and cannot be overridden"),
            ));
        }
        Ok(RdKafka { bootstrap_servers: bootstrap_servers.into(), settings, security: None })
    }

    /// Connects every client as `security` says. Refused (an error naming the setting) when
    /// the raw settings already hold a security setting, and when this build of librdkafka
    /// lacks what `security` needs (the `rdkafka-plaintext` feature has no TLS).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    ///
    /// let password = Secret::new("from your secret store");
    /// let kafka = RdKafka::new("kafka-1:9094").with_security(
    ///     Security::sasl_ssl(SaslMechanism::ScramSha512, "orders", password).with_ca_file("/etc/kafka/ca.pem"),
    /// )?;
    /// assert!(!format!("{kafka:?}").contains("from your secret store"));
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    pub fn with_security(mut self, security: Security) -> KafkaResult<Self> {
        if let Some(key) = self.settings.keys().find(|k| is_security_setting(k)) {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "configure",
                format!("`{key}` is a security setting: give it through `Security`, not as a raw setting"),
            ));
        }
        security.settings()?;
        self.security = Some(security);
        Ok(self)
    }

    fn client_config(&self, client_id: &str) -> KafkaResult<ClientConfig> {
        let mut config = ClientConfig::new();
        for (key, value) in &self.settings {
            config.set(key, value);
        }
        if let Some(security) = &self.security {
            for (key, value) in security.settings()? {
                config.set(key, value);
            }
        }
        config.set("bootstrap.servers", &self.bootstrap_servers).set("client.id", client_id);
        // rdkafka takes librdkafka's log level from `tracing` when the client is created; below
        // Info librdkafka would not even hand over the lines that tell a refused connection.
        if (config.log_level as i32) < (RDKafkaLogLevel::Info as i32) {
            config.set_log_level(RDKafkaLogLevel::Info);
        }
        Ok(config)
    }

    /// Whether clients speak TLS (typed or raw `security.protocol`).
    fn tls(&self) -> bool {
        match &self.security {
            Some(security) => security.uses_tls(),
            None => self.settings.get("security.protocol").is_some_and(|p| p.to_ascii_lowercase().contains("ssl")),
        }
    }
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

impl Kafka for RdKafka {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        let mut rd = self.client_config(&config.client_id)?;
        // librdkafka can only assign partitions with a group handle. A group-less consumer gets a
        // private group id it never joins and never commits to.
        let group_id = config.group_id.clone().unwrap_or_else(|| groupless_group_id(&config.client_id));
        if !self.settings.contains_key("heartbeat.interval.ms") {
            // librdkafka's 3 s default must stay below the session timeout.
            let heartbeat = (config.session_timeout / 3).min(Duration::from_secs(3)).max(Duration::from_millis(100));
            rd.set("heartbeat.interval.ms", millis(heartbeat));
        }
        rd.set("group.id", &group_id)
            .set("group.protocol", "classic")
            .set("partition.assignment.strategy", "range")
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("allow.auto.create.topics", "false")
            .set(
                "auto.offset.reset",
                match config.offset_reset {
                    OffsetReset::Earliest => "earliest",
                    OffsetReset::Latest => "latest",
                },
            )
            .set("session.timeout.ms", millis(config.session_timeout))
            .set("max.poll.interval.ms", millis(config.max_poll_interval));
        if let Some(limits) = config.fetch_limits {
            apply_fetch_limits(&mut rd, &limits, &self.settings);
        }
        // The same client as `read_uncommitted`, built on first use: the high watermark.
        let mut uncommitted = rd.clone();
        uncommitted.set("isolation.level", "read_uncommitted");
        let context = ConsumerCtx::new(&config.client_id, self.tls(), &self.bootstrap_servers);
        let consumer: BaseConsumer<ConsumerCtx> = rd
            .create_with_context(context)
            .map_err(|e| rd_error("create consumer", &e, None).with_context(config.client_id.clone()))?;
        Ok(Box::new(RdConsumer {
            shared: Some(Arc::new(Shared {
                consumer: std::mem::ManuallyDrop::new(consumer),
                closed: Mutex::new(None),
                groupless: config.group_id.is_none(),
                buffer: Mutex::new(Buffer::default()),
                uncommitted: Mutex::new((uncommitted, None)),
                tls: self.tls(),
            })),
            client_id: config.client_id,
            group_id: config.group_id,
            offset_reset: config.offset_reset,
            assigned: BTreeSet::new(),
            paused: BTreeSet::new(),
            known: BTreeMap::new(),
            joined: false,
            prefetch: None,
        }))
    }

    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        let mut rd = self.client_config(&config.client_id)?;
        rd.set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("compression.type", config.compression.as_str())
            .set("allow.auto.create.topics", "false");
        if let Some(id) = &config.transactional_id {
            rd.set("transactional.id", id).set("transaction.timeout.ms", millis(config.transaction_timeout));
            // A transaction that follows a commit closely is refused by the coordinator with
            // CONCURRENT_TRANSACTIONS until the previous one's markers are written: librdkafka
            // retries AddOffsetsToTxn after `retry.backoff.ms`, 100 ms by default, where its
            // AddPartitionsToTxn (and Java's client) wait 20 ms. Traced on the counter stage: 3
            // of 16 transactions waited ~90 ms for that retry. 20 ms first, doubling up to
            // librdkafka's 1 s ceiling, for every retry of the producer (idempotent, so a
            // produce retried sooner is still written once).
            if !self.settings.contains_key("retry.backoff.ms") {
                rd.set("retry.backoff.ms", TRANSACTIONAL_RETRY_BACKOFF_MS);
            }
        }
        let context_label = match &config.transactional_id {
            Some(id) => format!("transactional id {id}"),
            None => format!("client {}", config.client_id),
        };
        let log = LogContext::new(&config.client_id, self.tls(), &self.bootstrap_servers);
        let refusal = log.refusal.clone();
        let txn_refusals = log.txn_refusals.clone();
        let producer: BaseProducer<DeliveryContext> = rd
            .create_with_context(DeliveryContext { log })
            .map_err(|e| rd_error("create producer", &e, None).with_context(context_label.clone()))?;
        let producer = RdFutureProducer::new(producer, &config.client_id).map_err(|e| {
            KafkaError::new(KafkaErrorKind::Fatal, "create producer", format!("starting its delivery thread: {e}"))
                .with_context(context_label.clone())
        })?;
        let (closed, _) = tokio::sync::watch::channel(false);
        Ok(Box::new(RdProducer {
            producer: Mutex::new(Some(Arc::new(producer))),
            transactional_id: config.transactional_id,
            context: context_label.into(),
            timeout: config.transaction_timeout,
            closed,
            refusal,
            txn_refusals,
            in_call: Arc::new(tokio::sync::Mutex::new(())),
        }))
    }

    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        let client_id = "flechtwerk-admin";
        let mut rd = self.client_config(client_id)?;
        rd.set("allow.auto.create.topics", "false");
        let admin: AdminClient<LogContext> = rd
            .create_with_context(LogContext::new(client_id, self.tls(), &self.bootstrap_servers))
            .map_err(|e| rd_error("create admin", &e, None))?;
        let admin = Arc::new(admin);
        let pump = Arc::new(AtomicBool::new(false));
        pump_main_queue(admin.clone(), pump.clone());
        Ok(Box::new(RdAdmin { admin: Some(admin), pump }))
    }
}

/// `retry.backoff.ms` of a transactional producer (unless the settings give one).
const TRANSACTIONAL_RETRY_BACKOFF_MS: &str = "20";

/// `fetch.queue.backoff.ms` of a consumer with [`FetchLimits`].
const FETCH_QUEUE_BACKOFF_BOUNDED_MS: &str = "2";

/// librdkafka's `message.max.bytes` default: `fetch.max.bytes` may not be below it.
const MESSAGE_MAX_BYTES_DEFAULT: usize = 1_000_000;

/// Bounded fetching for one consumer (see [`FetchLimits`]). These win over the same settings
/// given to [`RdKafka::with_settings`], which apply to every client: the limits are chosen for
/// this consumer's read alone.
fn apply_fetch_limits(rd: &mut ClientConfig, limits: &FetchLimits, settings: &BTreeMap<String, String>) {
    // librdkafka refuses a `fetch.max.bytes` below `message.max.bytes`.
    let message_max =
        settings.get("message.max.bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(MESSAGE_MAX_BYTES_DEFAULT);
    let response = limits.response_bytes.max(message_max);
    rd.set("fetch.max.bytes", response.to_string())
        .set("max.partition.fetch.bytes", limits.partition_bytes.max(1).to_string())
        .set("queued.max.messages.kbytes", limits.buffered_bytes.div_ceil(1024).max(1).to_string())
        .set("queued.min.messages", limits.buffered_records.max(1).to_string())
        // A partition whose queue is over a bound waits this long before its next fetch
        // (default 1 s, which at bounds this small stalls the read about once per fetch).
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_BOUNDED_MS);
    // A user's `receive.message.max.bytes` must leave room for a whole response.
    if settings
        .get("receive.message.max.bytes")
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|r| r < response + 512)
    {
        rd.set("receive.message.max.bytes", (response + 512).to_string());
    }
}

/// A group id nobody else uses, for a group-less consumer (see [`RdKafka::consumer`]).
fn groupless_group_id(client_id: &str) -> String {
    // Production-only adapter: a process-wide counter is fine here (it never runs under madsim).
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!(
        "flechtwerk-groupless-{client_id}-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a blocking librdkafka call on tokio's blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    operation: &'static str,
    call: impl FnOnce() -> KafkaResult<T> + Send + 'static,
) -> KafkaResult<T> {
    tokio::task::spawn_blocking(call).await.map_err(|e| {
        KafkaError::new(KafkaErrorKind::Fatal, operation, format!("blocking librdkafka call failed: {e}"))
    })?
}

/// Drops a librdkafka client off the runtime: closing it blocks (leave group, purge, join).
pub(super) fn drop_off_runtime<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(move || drop(value));
        }
        Err(_) => drop(value),
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// [`lock`] for a mutex held exclusively (a `Drop`): its contents, poisoned or not.
pub(super) fn inner_mut<T>(mutex: &mut Mutex<T>) -> &mut T {
    mutex.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode as Code};

    use super::errors::{classify, code_kind, retry_read_within};
    use super::*;
    use crate::kafka::Compression;

    #[test]
    fn fenced_codes_classify_as_fenced() {
        for code in [Code::Fenced, Code::ProducerFenced, Code::InvalidProducerEpoch] {
            assert_eq!(code_kind(code), KafkaErrorKind::Fenced, "{code:?}");
            assert_eq!(classify(&RdError::MessageProduction(code), None), KafkaErrorKind::Fenced);
        }
        // A call after a fatal fence reports _FATAL; the cause decides.
        assert_eq!(
            classify(&RdError::MessageProduction(Code::Fatal), Some(Code::ProducerFenced)),
            KafkaErrorKind::Fenced
        );
        assert_eq!(classify(&RdError::MessageProduction(Code::Fatal), None), KafkaErrorKind::Fatal);
        // A delivery purged because its producer was fenced: the client's fatal error decides
        // (found by the conformance scenario broker-restart against Apache Kafka).
        assert_eq!(classify(&RdError::MessageProduction(Code::PurgeQueue), Some(Code::Fenced)), KafkaErrorKind::Fenced);
        assert_eq!(classify(&RdError::MessageProduction(Code::PurgeQueue), Some(Code::Fatal)), KafkaErrorKind::Fatal);
    }

    #[test]
    fn other_codes() {
        assert_eq!(code_kind(Code::UnknownTopicOrPartition), KafkaErrorKind::UnknownTopic);
        assert_eq!(code_kind(Code::CoordinatorNotAvailable), KafkaErrorKind::Retriable);
        assert_eq!(classify(&RdError::Flush(Code::OperationTimedOut), None), KafkaErrorKind::Retriable);
        assert_eq!(code_kind(Code::InvalidConfig), KafkaErrorKind::Other);
        let e = rd_error("send", &RdError::MessageProduction(Code::ProducerFenced), None);
        assert_eq!((e.kind(), e.code()), (KafkaErrorKind::Fenced, Some(90)));
        let e = rd_error("commit_transaction", &RdError::MessageProduction(Code::Fenced), None);
        assert_eq!((e.kind(), e.code()), (KafkaErrorKind::Fenced, None));
    }

    #[test]
    fn failover_codes_are_retriable() {
        // Issue 40: a read during a broker failover ended with DestroyBroker classified Other.
        for code in [
            Code::DestroyBroker,
            Code::UnknownBroker,
            Code::NodeUpdate,
            Code::WaitCache,
            Code::ISRInsufficient,
            Code::NotController,
            Code::NotLeaderForPartition,
            Code::LeaderNotAvailable,
            Code::BrokerTransportFailure,
            Code::AllBrokersDown,
        ] {
            assert_eq!(code_kind(code), KafkaErrorKind::Retriable, "{code:?}");
            let e = rd_error("end_offset", &RdError::MetadataFetch(code), None);
            assert!(e.is_retriable(), "{e}");
        }
        // The client itself being destroyed is no failover: nothing to wait for.
        assert_eq!(code_kind(Code::BrokerDestroy), KafkaErrorKind::Other);
    }

    /// An admin request's own error is classified by its code (rdkafka gives `AdminOp` none): a
    /// topic creation that timed out against a paused broker is retried, not fatal (the nemesis
    /// met `create_topic failed: Admin operation error: OperationTimedOut` as kind `Other`).
    #[test]
    fn admin_errors_are_classified_by_their_code() {
        use rdkafka::error::KafkaError as RdError;
        assert_eq!(errors::classify(&RdError::AdminOp(Code::OperationTimedOut), None), KafkaErrorKind::Retriable);
        assert_eq!(errors::classify(&RdError::AdminOp(Code::NotController), None), KafkaErrorKind::Retriable);
        assert_eq!(
            errors::classify(&RdError::AdminOp(Code::TopicAuthorizationFailed), None),
            KafkaErrorKind::Authorization
        );
    }

    #[test]
    fn a_read_retries_transient_errors_and_stops_at_others() {
        let transient = || KafkaError::new(KafkaErrorKind::Retriable, "end_offset", "DestroyBroker");
        let mut calls = 0;
        let read = retry_read_within(Duration::from_secs(10), |_| {
            calls += 1;
            if calls < 3 {
                Err(transient())
            } else {
                Ok(42)
            }
        });
        assert_eq!((read, calls), (Ok(42), 3));

        let mut calls = 0;
        let read: KafkaResult<i64> = retry_read_within(Duration::from_secs(10), |_| {
            calls += 1;
            Err(KafkaError::new(KafkaErrorKind::UnknownTopic, "end_offset", "gone"))
        });
        assert_eq!((read.unwrap_err().kind(), calls), (KafkaErrorKind::UnknownTopic, 1));

        // A budget that runs out names itself and keeps the last error's kind and context.
        let started = Instant::now();
        let mut calls = 0;
        let read: KafkaResult<i64> = retry_read_within(Duration::from_millis(300), |timeout| {
            calls += 1;
            assert!(timeout <= Duration::from_millis(300));
            Err(transient().with_context("t/0"))
        });
        let error = read.unwrap_err();
        assert!(error.is_retriable() && error.context() == Some("t/0"), "{error}");
        assert!(error.to_string().contains(&format!("retry budget exhausted: still failing after {calls} attempts")));
        assert!(calls >= 3 && started.elapsed() < Duration::from_secs(2), "{calls} calls");
    }

    #[test]
    fn reserved_settings_are_refused() {
        let mut settings = BTreeMap::new();
        settings.insert("isolation.level".to_string(), "read_uncommitted".to_string());
        assert!(RdKafka::with_settings("localhost:9092", settings).is_err());
        let mut settings = BTreeMap::new();
        settings.insert("socket.timeout.ms".to_string(), "10000".to_string());
        assert!(RdKafka::with_settings("localhost:9092", settings).is_ok());
    }

    #[tokio::test]
    async fn clients_build_without_a_broker() {
        let kafka = RdKafka::new("127.0.0.1:1");
        let producer = kafka.producer(ProducerConfig::transactional("p", "t")).expect("zstd, murmur2 and txn settings");
        producer.close().await;
        // zlib and zstd are vendored: a build that silently lost either refuses the codec here.
        for compression in [Compression::Gzip, Compression::Zstd, Compression::Lz4, Compression::Snappy] {
            let config = ProducerConfig { compression, ..ProducerConfig::idempotent("p") };
            kafka.producer(config).unwrap_or_else(|e| panic!("{compression:?}: {e}")).close().await;
        }
        let mut consumer = kafka.consumer(ConsumerConfig::groupless("c")).expect("consumer settings");
        assert!(consumer.group_metadata().is_none());
        consumer.close().await.expect("close");
        drop(kafka.admin().expect("admin settings"));
    }
}
