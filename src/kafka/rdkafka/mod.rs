//! The production Kafka adapter on librdkafka (feature `rdkafka`): [`RdKafka`] builds the
//! port's consumers, producers and admin clients from bootstrap servers plus optional extra
//! librdkafka settings. Everything is injected; nothing is read from the environment.
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
//! new partitions before anything of them can be fetched, and queues a [`Rebalance`] event that
//! the next [`Consumer::poll`] returns. Nothing in the callback waits for the engine.
//!
//! Poll is cancellation-safe: records a cancelled poll had already taken from librdkafka stay
//! buffered for the next poll (or are rewound when their partition is paused, sought or
//! reassigned), so dropping a poll future never loses a record.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::FutureExt;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic as RdNewTopic, TopicReplication};
use rdkafka::client::Client;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _, ConsumerContext, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode as Code};
use rdkafka::message::{BorrowedMessage, Header as RdHeader, Headers as _, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::{
    Admin, Consumer, ConsumerConfig, Delivered, DeliveryFuture, GroupMetadata, Kafka, KafkaError, KafkaErrorKind,
    KafkaResult, NewTopic, OffsetReset, Polled, Producer, ProducerConfig, ProducerRecord, Rebalance, StartOffset,
    TopicCreation, TopicPartition,
};
use crate::wire::{Header, RawRecord};

/// Upper bound of one blocking metadata, offset or seek request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

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
#[derive(Clone, Debug)]
pub struct RdKafka {
    bootstrap_servers: String,
    settings: BTreeMap<String, String>,
}

impl RdKafka {
    /// Clients of the cluster at `bootstrap_servers` (`host:port[,host:port...]`).
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        RdKafka { bootstrap_servers: bootstrap_servers.into(), settings: BTreeMap::new() }
    }

    /// Like [`new`](Self::new), with extra librdkafka settings applied to every client (security,
    /// timeouts, `debug`, ...). Refuses the [`RESERVED_SETTINGS`].
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
        Ok(RdKafka { bootstrap_servers: bootstrap_servers.into(), settings })
    }

    fn client_config(&self, client_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in &self.settings {
            config.set(key, value);
        }
        config.set("bootstrap.servers", &self.bootstrap_servers).set("client.id", client_id);
        config
    }
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

impl Kafka for RdKafka {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        let mut rd = self.client_config(&config.client_id);
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
        let context = ConsumerCtx { log: LogContext::new(&config.client_id), events: Mutex::new(Vec::new()) };
        let consumer: BaseConsumer<ConsumerCtx> = rd
            .create_with_context(context)
            .map_err(|e| rd_error("create consumer", &e, None).with_context(config.client_id.clone()))?;
        Ok(Box::new(RdConsumer {
            shared: Some(Arc::new(Shared { consumer, buffer: Mutex::new(Buffer::default()) })),
            client_id: config.client_id,
            group_id: config.group_id,
            offset_reset: config.offset_reset,
            assigned: BTreeSet::new(),
            paused: BTreeSet::new(),
            known: BTreeMap::new(),
            joined: false,
        }))
    }

    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        let mut rd = self.client_config(&config.client_id);
        rd.set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("compression.type", config.compression.as_str())
            .set("allow.auto.create.topics", "false");
        if let Some(id) = &config.transactional_id {
            rd.set("transactional.id", id).set("transaction.timeout.ms", millis(config.transaction_timeout));
        }
        let context_label = match &config.transactional_id {
            Some(id) => format!("transactional id {id}"),
            None => format!("client {}", config.client_id),
        };
        let producer: FutureProducer<LogContext> = rd
            .create_with_context(LogContext::new(&config.client_id))
            .map_err(|e| rd_error("create producer", &e, None).with_context(context_label.clone()))?;
        let (closed, _) = tokio::sync::watch::channel(false);
        Ok(Box::new(RdProducer {
            producer: Mutex::new(Some(Arc::new(producer))),
            transactional_id: config.transactional_id,
            context: context_label,
            timeout: config.transaction_timeout,
            closed,
        }))
    }

    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        let client_id = "flechtwerk-admin";
        let mut rd = self.client_config(client_id);
        rd.set("allow.auto.create.topics", "false");
        let admin: AdminClient<LogContext> =
            rd.create_with_context(LogContext::new(client_id)).map_err(|e| rd_error("create admin", &e, None))?;
        Ok(Box::new(RdAdmin { admin: Some(Arc::new(admin)) }))
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

// ---------------------------------------------------------------------------------------------
// Errors

fn is_fenced_code(code: Code) -> bool {
    matches!(code, Code::Fenced | Code::ProducerFenced | Code::InvalidProducerEpoch)
}

/// Classification of a bare librdkafka or broker error code.
fn code_kind(code: Code) -> KafkaErrorKind {
    match code {
        c if is_fenced_code(c) => KafkaErrorKind::Fenced,
        Code::UnknownTopicOrPartition | Code::UnknownTopic | Code::UnknownPartition | Code::UnknownTopicId => {
            KafkaErrorKind::UnknownTopic
        }
        Code::Fatal => KafkaErrorKind::Fatal,
        Code::OperationTimedOut
        | Code::MessageTimedOut
        | Code::RequestTimedOut
        | Code::TimedOutQueue
        | Code::BrokerTransportFailure
        | Code::AllBrokersDown
        | Code::Resolve
        | Code::QueueFull
        | Code::Retry
        | Code::InProgress
        | Code::PreviousInProgress
        | Code::Interrupted
        | Code::WaitingForCoordinator
        | Code::CoordinatorLoadInProgress
        | Code::CoordinatorNotAvailable
        | Code::NotCoordinator
        | Code::LeaderNotAvailable
        | Code::NotLeaderForPartition
        | Code::BrokerNotAvailable
        | Code::ReplicaNotAvailable
        | Code::NetworkException
        | Code::NotEnoughReplicas
        | Code::NotEnoughReplicasAfterAppend
        | Code::KafkaStorageError
        | Code::FencedLeaderEpoch
        | Code::UnknownLeaderEpoch
        | Code::OffsetNotAvailable
        | Code::ConcurrentTransactions
        | Code::RebalanceInProgress
        | Code::UnstableOffsetCommit
        | Code::ThrottlingQuotaExceeded => KafkaErrorKind::Retriable,
        _ => KafkaErrorKind::Other,
    }
}

/// Classification of an rdkafka error. `fatal` is the client's fatal error, if it has one (a
/// transactional call after a fatal error reports `_FATAL`; the cause tells whether it was a
/// fence).
fn classify(error: &RdError, fatal: Option<Code>) -> KafkaErrorKind {
    let fenced_cause = fatal.is_some_and(is_fenced_code);
    match error {
        RdError::Transaction(e) => {
            let code = e.code();
            if is_fenced_code(code) || (fenced_cause && (e.is_fatal() || code == Code::Fatal)) {
                KafkaErrorKind::Fenced
            } else if e.is_fatal() || code == Code::Fatal {
                KafkaErrorKind::Fatal
            } else if e.txn_requires_abort() {
                KafkaErrorKind::Abortable
            } else if e.is_retriable() {
                KafkaErrorKind::Retriable
            } else if code_kind(code) == KafkaErrorKind::UnknownTopic {
                KafkaErrorKind::UnknownTopic
            } else if code == Code::State {
                // An API call in the wrong state: a bug of the caller, not of the transaction.
                KafkaErrorKind::Other
            } else {
                // librdkafka: an error with none of the flags set is to be treated as fatal.
                KafkaErrorKind::Fatal
            }
        }
        RdError::Flush(Code::OperationTimedOut) => KafkaErrorKind::Retriable,
        RdError::MessageConsumptionFatal(code) => {
            if is_fenced_code(*code) {
                KafkaErrorKind::Fenced
            } else {
                KafkaErrorKind::Fatal
            }
        }
        other => match other.rdkafka_error_code() {
            Some(Code::Fatal) if fenced_cause => KafkaErrorKind::Fenced,
            Some(code) => code_kind(code),
            None => KafkaErrorKind::Other,
        },
    }
}

/// A port error from an rdkafka error in `operation`. `fatal` is the client's fatal error, if
/// any (see [`classify`]).
fn rd_error(operation: &'static str, error: &RdError, fatal: Option<(Code, String)>) -> KafkaError {
    let kind = classify(error, fatal.as_ref().map(|(code, _)| *code));
    rd_error_as(kind, operation, error, fatal)
}

/// A port error of `kind` from an rdkafka error.
fn rd_error_as(
    kind: KafkaErrorKind,
    operation: &'static str,
    error: &RdError,
    fatal: Option<(Code, String)>,
) -> KafkaError {
    let mut message = match error {
        RdError::Transaction(e) => format!("{} ({})", e.string(), e.name()),
        other => other.to_string(),
    };
    if let Some((code, reason)) = &fatal {
        if !message.contains(reason.as_str()) {
            message.push_str(&format!("; fatal error {code:?}: {reason}"));
        }
    }
    let broker_code = fatal
        .as_ref()
        .map(|(code, _)| *code as i32)
        .filter(|c| *c > 0)
        .or_else(|| error.rdkafka_error_code().map(|c| c as i32).filter(|c| *c > 0));
    let error = KafkaError::new(kind, operation, message);
    match broker_code {
        Some(code) => error.with_code(code),
        None => error,
    }
}

fn code_error(operation: &'static str, code: Code, context: impl Into<String>) -> KafkaError {
    let error = KafkaError::new(code_kind(code), operation, code.to_string()).with_context(context);
    if (code as i32) > 0 {
        error.with_code(code as i32)
    } else {
        error
    }
}

/// Runs a blocking librdkafka call on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    operation: &'static str,
    call: impl FnOnce() -> KafkaResult<T> + Send + 'static,
) -> KafkaResult<T> {
    tokio::task::spawn_blocking(call).await.map_err(|e| {
        KafkaError::new(KafkaErrorKind::Fatal, operation, format!("blocking librdkafka call failed: {e}"))
    })?
}

/// Drops a librdkafka client off the runtime: closing it blocks (leave group, purge, join).
fn drop_off_runtime<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(move || drop(value));
        }
        Err(_) => drop(value),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Logging

/// Routes librdkafka's log lines and global errors to `tracing`.
#[derive(Clone)]
struct LogContext {
    client: Arc<str>,
}

impl LogContext {
    fn new(client_id: &str) -> Self {
        LogContext { client: client_id.into() }
    }
}

impl ClientContext for LogContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let client = &*self.client;
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", client, facility, "{message}");
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", client, facility, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", client, facility, "{message}");
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", client, facility, "{message}"),
        }
    }

    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = &*self.client, %error, "{reason}");
    }
}

// ---------------------------------------------------------------------------------------------
// Consumer

/// The consumer's context: logging, and the rebalance callback.
struct ConsumerCtx {
    log: LogContext,
    /// Assignment changes the callback saw, in order, not yet moved into the poll buffer.
    events: Mutex<Vec<Rebalance>>,
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.log(level, facility, message);
    }

    fn error(&self, error: RdError, reason: &str) {
        self.log.error(error, reason);
    }
}

fn port_partitions(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    let mut partitions: Vec<TopicPartition> =
        tpl.elements().iter().map(|e| TopicPartition::new(e.topic(), e.partition())).collect();
    partitions.sort();
    partitions
}

fn rd_partitions<'a>(partitions: impl IntoIterator<Item = &'a TopicPartition>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(&p.topic, p.partition);
    }
    tpl
}

/// The member's generation and member id, from librdkafka's group metadata.
fn member_identity(consumer: &BaseConsumer<ConsumerCtx>) -> Option<(i32, String)> {
    use rdkafka::bindings as rd;
    // SAFETY: the metadata object is a copy owned by us until destroyed below; the member id
    // string lives inside it and is copied out before.
    unsafe {
        let metadata = rd::rd_kafka_consumer_group_metadata(consumer.client().native_ptr());
        if metadata.is_null() {
            return None;
        }
        let generation = rd::rd_kafka_consumer_group_metadata_generation_id(metadata);
        let member = rd::rd_kafka_consumer_group_metadata_member_id(metadata);
        let member =
            if member.is_null() { String::new() } else { CStr::from_ptr(member).to_string_lossy().into_owned() };
        rd::rd_kafka_consumer_group_metadata_destroy(metadata);
        Some((generation, member))
    }
}

/// librdkafka's application positions (next offset to return) of `tpl`'s partitions; `None`
/// where it has none (nothing returned since the last assign or seek).
fn rd_positions(consumer: &BaseConsumer<ConsumerCtx>, tpl: &TopicPartitionList) -> Vec<Option<i64>> {
    let probe = tpl.clone();
    // SAFETY: `probe` is a valid list we own; rd_kafka_position only writes offsets into it.
    unsafe { rdkafka::bindings::rd_kafka_position(consumer.client().native_ptr(), probe.ptr()) };
    probe
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        })
        .collect()
}

impl ConsumerContext for ConsumerCtx {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, error: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        let partitions = port_partitions(tpl);
        match error {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if let Err(e) = consumer.assign(tpl) {
                    tracing::error!(client = &*self.log.client, error = %e, ?partitions, "assigning partitions failed");
                    return;
                }
                // Port contract: new partitions arrive paused. Pausing here, inside the callback,
                // comes before any fetch of them can reach the application.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::error!(client = &*self.log.client, error = %e, ?partitions, "pausing new partitions failed");
                }
                let generation = member_identity(consumer).map_or(-1, |(generation, _)| generation);
                tracing::debug!(client = &*self.log.client, ?partitions, generation, "partitions assigned");
                lock(&self.events).push(Rebalance::Assigned { partitions, generation });
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                tracing::debug!(client = &*self.log.client, ?partitions, "partitions revoked");
                lock(&self.events).push(Rebalance::Revoked { partitions });
                if let Err(e) = consumer.unassign() {
                    tracing::error!(client = &*self.log.client, error = %e, "unassigning partitions failed");
                }
            }
            other => {
                tracing::warn!(client = &*self.log.client, error = ?other, "rebalance error: dropping the assignment");
                let held = consumer.assignment().map(|tpl| port_partitions(&tpl)).unwrap_or_default();
                if let Err(e) = consumer.unassign() {
                    tracing::error!(client = &*self.log.client, error = %e, "unassigning partitions failed");
                }
                if !held.is_empty() {
                    lock(&self.events).push(Rebalance::Revoked { partitions: held });
                }
            }
        }
    }
}

/// One thing a poll hands out, in the order librdkafka produced them.
enum Item {
    Rebalance(Rebalance),
    Record(RawRecord),
}

/// What blocking polls took from librdkafka and the engine has not been given yet.
#[derive(Default)]
struct Buffer {
    items: VecDeque<Item>,
    /// Interned topic names.
    topics: BTreeMap<String, Arc<str>>,
    /// Partitions to seek back to these offsets before the next fetch (buffered records dropped
    /// because their partition was paused).
    rewinds: Vec<(TopicPartition, i64)>,
}

impl Buffer {
    fn take_events(&mut self, ctx: &ConsumerCtx) -> bool {
        let mut events = lock(&ctx.events);
        let any = !events.is_empty();
        self.items.extend(events.drain(..).map(Item::Rebalance));
        any
    }

    fn push_record(&mut self, message: &BorrowedMessage<'_>) {
        let topic = match self.topics.get(message.topic()) {
            Some(topic) => topic.clone(),
            None => {
                let topic: Arc<str> = message.topic().into();
                self.topics.insert(message.topic().to_owned(), topic.clone());
                topic
            }
        };
        let headers = message
            .headers()
            .map(|headers| {
                headers
                    .iter()
                    .map(|h| Header { key: h.key.to_owned(), value: h.value.map(Bytes::copy_from_slice) })
                    .collect()
            })
            .unwrap_or_default();
        self.items.push_back(Item::Record(RawRecord {
            topic,
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: message.key().map(Bytes::copy_from_slice),
            value: message.payload().map(Bytes::copy_from_slice),
            headers,
        }));
    }

    /// Whether the next hand-out is complete: `max` records, or records followed by a
    /// rebalance (which must wait for the poll after).
    fn settled(&self, max: usize) -> bool {
        let mut records = 0;
        for item in &self.items {
            match item {
                Item::Rebalance(_) if records > 0 => return true,
                Item::Rebalance(_) => {}
                Item::Record(_) => {
                    records += 1;
                    if records >= max {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn first_buffered(&self, partition: &TopicPartition) -> Option<i64> {
        self.items.iter().find_map(|item| match item {
            Item::Record(r) if r.partition == partition.partition && *r.topic == *partition.topic => Some(r.offset),
            _ => None,
        })
    }

    fn drop_records_of(&mut self, partition: &TopicPartition) {
        self.items.retain(|item| {
            !matches!(item, Item::Record(r) if r.partition == partition.partition && *r.topic == *partition.topic)
        });
    }
}

struct Shared {
    consumer: BaseConsumer<ConsumerCtx>,
    /// Serializes blocking polls, and holds what a cancelled poll took.
    buffer: Mutex<Buffer>,
}

impl Shared {
    fn ctx(&self) -> &ConsumerCtx {
        self.consumer.context()
    }

    /// Seeks partitions whose buffered records were dropped back to the first of them.
    fn apply_rewinds(&self, buffer: &mut Buffer) {
        for (partition, offset) in std::mem::take(&mut buffer.rewinds) {
            let mut tpl = TopicPartitionList::new();
            if tpl.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(offset)).is_ok() {
                if let Err(e) = self.consumer.seek_partitions(tpl, REQUEST_TIMEOUT) {
                    tracing::error!(client = &*self.ctx().log.client, %partition, offset, error = %e, "rewind failed");
                }
            }
        }
    }

    /// Polls librdkafka into the buffer: waits up to `timeout` for the first item, then takes
    /// what is immediately available, up to `max` records.
    fn fill(&self, max: usize, timeout: Duration, watched: &TopicPartitionList) -> KafkaResult<()> {
        let mut buffer = lock(&self.buffer);
        self.apply_rewinds(&mut buffer);
        let deadline = Instant::now() + timeout;
        let before = if watched.count() > 0 { rd_positions(&self.consumer, watched) } else { Vec::new() };
        buffer.take_events(self.ctx());
        while buffer.items.is_empty() {
            // A zero timeout still takes what librdkafka already fetched: one short poll. (Not a
            // zero one: rd_kafka_consumer_poll(0) was measured to return nothing, call after call,
            // for a record already in a resumed partition's fetch queue; 1 ms returns it.)
            let left = deadline.saturating_duration_since(Instant::now());
            let got = self.consumer.poll(left.min(POLL_SLICE).max(POLL_MIN));
            buffer.take_events(self.ctx());
            match got {
                Some(Ok(message)) => buffer.push_record(&message),
                Some(Err(e)) => self.consume_error(e)?,
                None => {
                    // A transaction marker advances a position without a record: report "nothing
                    // arrived" now rather than at the timeout, so a reader sees its end promptly.
                    if buffer.items.is_empty() && !before.is_empty() && rd_positions(&self.consumer, watched) != before
                    {
                        return Ok(());
                    }
                }
            }
            if left.is_zero() {
                break;
            }
        }
        while !buffer.settled(max) {
            let got = self.consumer.poll(Duration::ZERO);
            let rebalanced = buffer.take_events(self.ctx());
            match got {
                Some(Ok(message)) => buffer.push_record(&message),
                Some(Err(e)) => self.consume_error(e)?,
                None if rebalanced => {}
                None => break,
            }
        }
        Ok(())
    }

    fn consume_error(&self, error: RdError) -> KafkaResult<()> {
        match error {
            RdError::MessageConsumptionFatal(_) => {
                let fatal = self.consumer.client().fatal_error();
                Err(rd_error("poll", &error, fatal).with_context(self.ctx().log.client.to_string()))
            }
            RdError::PartitionEOF(_) => Ok(()),
            other => {
                // Transient: librdkafka retries by itself (broker down, leader moved, ...).
                tracing::warn!(client = &*self.ctx().log.client, error = %other, "consumer error");
                Ok(())
            }
        }
    }
}

/// A consumer on librdkafka. See the module docs for its threading.
struct RdConsumer {
    shared: Option<Arc<Shared>>,
    client_id: String,
    group_id: Option<String>,
    offset_reset: OffsetReset,
    /// The assignment as the engine knows it (events handed out, manual assigns).
    assigned: BTreeSet<TopicPartition>,
    /// Partitions the engine paused (and new ones, which arrive paused).
    paused: BTreeSet<TopicPartition>,
    /// Positions librdkafka cannot tell (after an assign or a seek, before the first record).
    known: BTreeMap<TopicPartition, i64>,
    /// Whether an assignment has been handed out (group metadata exists from then on).
    joined: bool,
}

impl RdConsumer {
    fn shared(&self, operation: &'static str) -> KafkaResult<Arc<Shared>> {
        self.shared.clone().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Fatal, operation, "the consumer is closed").with_context(self.context())
        })
    }

    fn context(&self) -> String {
        match &self.group_id {
            Some(group) => format!("client {}, group {group}", self.client_id),
            None => format!("client {}", self.client_id),
        }
    }

    /// Hands out buffered items: leading rebalances, then up to `max` records up to the next
    /// rebalance. Records of paused partitions are dropped and rewound instead.
    fn take(&mut self, shared: &Shared, max: usize) -> Polled {
        let mut polled = Polled::default();
        // A cancelled poll may still be filling the buffer: then nothing is ready yet.
        let Ok(mut buffer) = shared.buffer.try_lock() else { return polled };
        if !self.paused.is_empty() {
            let mut rewinds: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            buffer.items.retain(|item| match item {
                Item::Record(r) => {
                    let partition = TopicPartition::new(&*r.topic, r.partition);
                    if self.paused.contains(&partition) {
                        rewinds.entry(partition).or_insert(r.offset);
                        false
                    } else {
                        true
                    }
                }
                Item::Rebalance(_) => true,
            });
            for (partition, offset) in rewinds {
                self.known.insert(partition.clone(), offset);
                buffer.rewinds.push((partition, offset));
            }
        }
        while let Some(item) = buffer.items.front() {
            match item {
                Item::Rebalance(_) if !polled.records.is_empty() => break,
                Item::Record(_) if polled.records.len() >= max => break,
                _ => {}
            }
            match buffer.items.pop_front() {
                Some(Item::Rebalance(event)) => {
                    match &event {
                        Rebalance::Assigned { partitions, .. } => {
                            self.joined = true;
                            for p in partitions {
                                self.known.remove(p);
                                self.assigned.insert(p.clone());
                                self.paused.insert(p.clone());
                            }
                        }
                        Rebalance::Revoked { partitions } => {
                            for p in partitions {
                                self.known.remove(p);
                                self.assigned.remove(p);
                                self.paused.remove(p);
                            }
                        }
                    }
                    polled.rebalances.push(event);
                }
                Some(Item::Record(record)) => polled.records.push(record),
                None => break,
            }
        }
        polled
    }
}

impl Drop for RdConsumer {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            drop_off_runtime(shared);
        }
    }
}

#[async_trait]
impl Consumer for RdConsumer {
    async fn subscribe(&mut self, topics: &[String]) -> KafkaResult<()> {
        let shared = self.shared("subscribe")?;
        if self.group_id.is_none() {
            return Err(KafkaError::new(KafkaErrorKind::Other, "subscribe", "a group-less consumer cannot subscribe")
                .with_context(self.context()));
        }
        let topics = topics.to_vec();
        let context = self.context();
        blocking("subscribe", move || {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            shared.consumer.subscribe(&names).map_err(|e| rd_error("subscribe", &e, None).with_context(context))
        })
        .await
    }

    async fn assign(&mut self, partitions: &[(TopicPartition, StartOffset)]) -> KafkaResult<()> {
        let shared = self.shared("assign")?;
        let partitions = partitions.to_vec();
        let context = self.context();
        let starts = blocking("assign", move || {
            // Resolve every start to a concrete offset, so positions are known before the first
            // record (a reader compares them with captured ends).
            let mut starts = BTreeMap::new();
            for (partition, start) in &partitions {
                let offset = match start {
                    StartOffset::At(offset) => *offset,
                    StartOffset::Beginning | StartOffset::End => {
                        let (low, high) = shared
                            .consumer
                            .fetch_watermarks(&partition.topic, partition.partition, REQUEST_TIMEOUT)
                            .map_err(|e| rd_error("assign", &e, None).with_context(partition.to_string()))?;
                        if *start == StartOffset::Beginning {
                            low
                        } else {
                            high
                        }
                    }
                };
                starts.insert(partition.clone(), offset);
            }
            let mut tpl = TopicPartitionList::new();
            for (partition, offset) in &starts {
                tpl.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(*offset))
                    .map_err(|e| rd_error("assign", &e, None).with_context(partition.to_string()))?;
            }
            let mut buffer = lock(&shared.buffer);
            buffer.items.retain(|item| matches!(item, Item::Rebalance(_)));
            buffer.rewinds.clear();
            shared.consumer.assign(&tpl).map_err(|e| rd_error("assign", &e, None).with_context(context.clone()))?;
            // librdkafka keeps a partition's pause across assignments; a manual assign fetches.
            shared.consumer.resume(&tpl).map_err(|e| rd_error("assign", &e, None).with_context(context))?;
            Ok(starts)
        })
        .await?;
        self.assigned = starts.keys().cloned().collect();
        self.paused.clear();
        self.known = starts;
        Ok(())
    }

    async fn poll(&mut self, max_records: usize, timeout: Duration) -> KafkaResult<Polled> {
        let shared = self.shared("poll")?;
        let max = max_records.max(1);
        let watched = rd_partitions(self.assigned.iter().filter(|p| !self.paused.contains(*p)));
        let filler = shared.clone();
        let context = self.context();
        blocking("poll", move || filler.fill(max, timeout, &watched).map_err(|e| e.with_context(context))).await?;
        Ok(self.take(&shared, max))
    }

    fn pause(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()> {
        let shared = self.shared("pause")?;
        shared
            .consumer
            .pause(&rd_partitions(partitions))
            .map_err(|e| rd_error("pause", &e, None).with_context(self.context()))?;
        self.paused.extend(partitions.iter().cloned());
        Ok(())
    }

    fn resume(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()> {
        let shared = self.shared("resume")?;
        shared
            .consumer
            .resume(&rd_partitions(partitions))
            .map_err(|e| rd_error("resume", &e, None).with_context(self.context()))?;
        for p in partitions {
            self.paused.remove(p);
        }
        Ok(())
    }

    async fn seek(&mut self, partition: &TopicPartition, offset: i64) -> KafkaResult<()> {
        let shared = self.shared("seek")?;
        let target = partition.clone();
        blocking("seek", move || {
            let mut buffer = lock(&shared.buffer);
            buffer.drop_records_of(&target);
            buffer.rewinds.retain(|(p, _)| *p != target);
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&target.topic, target.partition, Offset::Offset(offset))
                .map_err(|e| rd_error("seek", &e, None).with_context(target.to_string()))?;
            let result = shared
                .consumer
                .seek_partitions(tpl, REQUEST_TIMEOUT)
                .map_err(|e| rd_error("seek", &e, None).with_context(target.to_string()))?;
            for element in result.elements() {
                if let Err(e) = element.error() {
                    return Err(rd_error("seek", &e, None).with_context(target.to_string()));
                }
            }
            Ok(())
        })
        .await?;
        self.known.insert(partition.clone(), offset);
        Ok(())
    }

    async fn position(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        let shared = self.shared("position")?;
        if !self.assigned.contains(partition) {
            return Err(KafkaError::new(KafkaErrorKind::Other, "position", "the partition is not assigned")
                .with_context(partition.to_string()));
        }
        let target = partition.clone();
        let known = self.known.get(partition).copied();
        let offset_reset = self.offset_reset;
        let position = blocking("position", move || {
            let buffer = lock(&shared.buffer);
            if let Some(offset) = buffer.first_buffered(&target) {
                return Ok(offset);
            }
            if let Some(offset) = buffer.rewinds.iter().find(|(p, _)| *p == target).map(|(_, o)| *o) {
                return Ok(offset);
            }
            drop(buffer);
            if let Some(Some(offset)) = rd_positions(&shared.consumer, &rd_partitions([&target])).first() {
                return Ok(*offset);
            }
            if let Some(offset) = known {
                return Ok(offset);
            }
            // A group partition before its first record: the committed offset, else the reset.
            let committed = shared
                .consumer
                .committed_offsets(rd_partitions([&target]), REQUEST_TIMEOUT)
                .map_err(|e| rd_error("position", &e, None).with_context(target.to_string()))?;
            if let Some(Offset::Offset(offset)) = committed.elements().first().map(|e| e.offset()) {
                return Ok(offset);
            }
            let (low, high) = shared
                .consumer
                .fetch_watermarks(&target.topic, target.partition, REQUEST_TIMEOUT)
                .map_err(|e| rd_error("position", &e, None).with_context(target.to_string()))?;
            Ok(match offset_reset {
                OffsetReset::Earliest => low,
                OffsetReset::Latest => high,
            })
        })
        .await?;
        Ok(position)
    }

    async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> KafkaResult<()> {
        let shared = self.shared("commit_offsets")?;
        if self.group_id.is_none() {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "commit_offsets",
                "a group-less consumer cannot commit",
            )
            .with_context(self.context()));
        }
        let mut tpl = TopicPartitionList::new();
        for (partition, offset) in offsets {
            tpl.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(*offset))
                .map_err(|e| rd_error("commit_offsets", &e, None).with_context(partition.to_string()))?;
        }
        let context = self.context();
        blocking("commit_offsets", move || {
            shared
                .consumer
                .commit(&tpl, CommitMode::Sync)
                .map_err(|e| rd_error("commit_offsets", &e, None).with_context(context))
        })
        .await
    }

    async fn committed(&mut self, partitions: &[TopicPartition]) -> KafkaResult<Vec<Option<i64>>> {
        let shared = self.shared("committed")?;
        if self.group_id.is_none() {
            return Err(KafkaError::new(KafkaErrorKind::Other, "committed", "a group-less consumer has no offsets")
                .with_context(self.context()));
        }
        let wanted = partitions.to_vec();
        let context = self.context();
        blocking("committed", move || {
            let result = shared
                .consumer
                .committed_offsets(rd_partitions(&wanted), REQUEST_TIMEOUT)
                .map_err(|e| rd_error("committed", &e, None).with_context(context))?;
            Ok(wanted
                .iter()
                .map(|p| match result.find_partition(&p.topic, p.partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) => Some(offset),
                    _ => None,
                })
                .collect())
        })
        .await
    }

    async fn end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        let shared = self.shared("end_offset")?;
        let target = partition.clone();
        blocking("end_offset", move || {
            // Under read_committed, ListOffsets(latest) answers the last stable offset.
            shared
                .consumer
                .fetch_watermarks(&target.topic, target.partition, REQUEST_TIMEOUT)
                .map(|(_, high)| high)
                .map_err(|e| rd_error("end_offset", &e, None).with_context(target.to_string()))
        })
        .await
    }

    async fn partition_count(&mut self, topic: &str) -> KafkaResult<Option<u32>> {
        let shared = self.shared("partition_count")?;
        let topic = topic.to_owned();
        blocking("partition_count", move || {
            partition_count(shared.consumer.client(), &topic, Duration::from_secs(5)).map(|t| t.map(|(n, _)| n))
        })
        .await
    }

    fn group_metadata(&self) -> Option<GroupMetadata> {
        let group_id = self.group_id.clone()?;
        if !self.joined {
            return None;
        }
        let shared = self.shared.as_ref()?;
        let (generation, member_id) = member_identity(&shared.consumer)?;
        let native = shared.consumer.group_metadata()?;
        Some(GroupMetadata { group_id, generation, member_id, native: Some(Arc::new(native)) })
    }

    async fn close(&mut self) -> KafkaResult<()> {
        let Some(shared) = self.shared.take() else { return Ok(()) };
        self.assigned.clear();
        self.paused.clear();
        self.known.clear();
        // Dropping the last handle closes the consumer: revoke, leave the group, destroy. A
        // cancelled poll still running holds another handle and closes it when it returns.
        blocking("close", move || {
            drop(shared);
            Ok(())
        })
        .await
    }
}

/// Partition count of `topic` and whether every partition has a leader, from fresh metadata;
/// `None` when the topic does not exist. Retries briefly while metadata is incomplete.
fn partition_count<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    settle: Duration,
) -> KafkaResult<Option<(u32, bool)>> {
    let deadline = Instant::now() + settle;
    loop {
        let metadata = client
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .map_err(|e| rd_error("partition_count", &e, None).with_context(topic.to_owned()))?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else { return Ok(None) };
        let partitions = found.partitions();
        match found.error().map(Code::from) {
            Some(Code::UnknownTopicOrPartition | Code::UnknownTopic) => return Ok(None),
            None if !partitions.is_empty() => {
                let led = partitions.iter().all(|p| p.leader() >= 0 && p.error().is_none());
                return Ok(Some((partitions.len() as u32, led)));
            }
            Some(code) if code_kind(code) != KafkaErrorKind::Retriable => {
                return Err(code_error("partition_count", code, topic));
            }
            _ if Instant::now() >= deadline => {
                // Exists, but no partition is visible yet.
                return Ok(if partitions.is_empty() { None } else { Some((partitions.len() as u32, false)) });
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Producer

type RdFutureProducer = FutureProducer<LogContext>;

struct RdProducer {
    producer: Mutex<Option<Arc<RdFutureProducer>>>,
    transactional_id: Option<String>,
    /// `transactional id …` or `client …`, for errors.
    context: String,
    /// The transaction timeout: bounds every blocking producer call.
    timeout: Duration,
    /// Turns true once the producer is closed: pending delivery futures fail then.
    closed: tokio::sync::watch::Sender<bool>,
}

impl RdProducer {
    fn handle(&self, operation: &'static str) -> KafkaResult<Arc<RdFutureProducer>> {
        lock(&self.producer).clone().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Fatal, operation, "the producer is closed")
                .with_context(self.context.clone())
        })
    }

    /// Runs a blocking transactional call and classifies its error.
    async fn transactional(
        &self,
        operation: &'static str,
        call: impl FnOnce(&RdFutureProducer) -> Result<(), RdError> + Send + 'static,
    ) -> KafkaResult<()> {
        let producer = self.handle(operation)?;
        let context = self.context.clone();
        blocking(operation, move || {
            call(&producer)
                .map_err(|e| rd_error(operation, &e, producer.client().fatal_error()).with_context(context.clone()))
        })
        .await
    }
}

fn delivery_error(
    error: &RdError,
    producer: &Weak<RdFutureProducer>,
    transactional: bool,
    context: String,
) -> KafkaError {
    let fatal = producer.upgrade().and_then(|p| p.client().fatal_error());
    let mut kind = classify(error, fatal.as_ref().map(|(code, _)| *code));
    // Inside a transaction, any failed delivery dooms it: abort, unless the producer is done for.
    if transactional && matches!(kind, KafkaErrorKind::Retriable | KafkaErrorKind::Other) {
        kind = KafkaErrorKind::Abortable;
    }
    rd_error_as(kind, "send", error, fatal).with_context(context)
}

impl Drop for RdProducer {
    fn drop(&mut self) {
        if let Some(producer) = lock(&self.producer).take() {
            drop_off_runtime(producer);
        }
    }
}

#[async_trait]
impl Producer for RdProducer {
    fn transactional_id(&self) -> Option<&str> {
        self.transactional_id.as_deref()
    }

    async fn init_transactions(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("init_transactions", move |p| p.init_transactions(timeout)).await
    }

    async fn begin_transaction(&self) -> KafkaResult<()> {
        // Local state change only: no broker round trip, nothing blocks.
        let producer = self.handle("begin_transaction")?;
        producer.begin_transaction().map_err(|e| {
            rd_error("begin_transaction", &e, producer.client().fatal_error()).with_context(self.context.clone())
        })
    }

    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture> {
        let producer = self.handle("send")?;
        let destination = match record.partition {
            Some(p) => format!("{}/{p}", record.topic),
            None => record.topic.clone(),
        };
        let context = format!("{}, {destination}", self.context);
        let headers = (!record.headers.is_empty()).then(|| {
            record.headers.iter().fold(OwnedHeaders::new_with_capacity(record.headers.len()), |headers, h| {
                headers.insert(RdHeader { key: &h.key, value: h.value.as_deref() })
            })
        });
        let give_up = Instant::now() + self.timeout;
        let delivery = loop {
            let mut rd = FutureRecord::<[u8], [u8]>::to(&record.topic);
            if let Some(key) = &record.key {
                rd = rd.key(key);
            }
            if let Some(value) = &record.value {
                rd = rd.payload(value);
            }
            if let Some(partition) = record.partition {
                rd = rd.partition(partition);
            }
            if let Some(timestamp) = record.timestamp_ms {
                rd = rd.timestamp(timestamp);
            }
            if let Some(headers) = &headers {
                rd = rd.headers(headers.clone());
            }
            let queue_full = match producer.send_result(rd) {
                Ok(delivery) => break delivery,
                Err((RdError::MessageProduction(Code::QueueFull), _)) if Instant::now() < give_up => true,
                Err((e, _)) => {
                    return Err(rd_error("send", &e, producer.client().fatal_error()).with_context(context));
                }
            };
            debug_assert!(queue_full);
            // librdkafka's queue is full: its own thread drains it as the broker acknowledges.
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let weak = Arc::downgrade(&producer);
        drop(producer);
        let transactional = self.transactional_id.is_some();
        let mut closed = self.closed.subscribe();
        Ok(async move {
            let outcome = tokio::select! {
                biased;
                outcome = delivery => Some(outcome),
                _ = closed.wait_for(|closed| *closed) => None,
            };
            match outcome {
                Some(Ok(Ok(delivered))) => Ok(Delivered { partition: delivered.partition, offset: delivered.offset }),
                Some(Ok(Err((error, _message)))) => Err(delivery_error(&error, &weak, transactional, context)),
                Some(Err(_)) | None => Err(KafkaError::new(
                    KafkaErrorKind::Fatal,
                    "send",
                    "the producer was closed before the broker confirmed the record",
                )
                .with_context(context)),
            }
        }
        .boxed())
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()> {
        let native = group.native.clone().ok_or_else(|| {
            KafkaError::new(
                KafkaErrorKind::Other,
                "send_offsets_to_transaction",
                "group metadata without librdkafka's handle: it must come from an rdkafka consumer",
            )
            .with_context(format!("{}, group {}", self.context, group.group_id))
        })?;
        if !native.as_ref().is::<ConsumerGroupMetadata>() {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "send_offsets_to_transaction",
                "group metadata of another Kafka adapter",
            )
            .with_context(format!("{}, group {}", self.context, group.group_id)));
        }
        let mut tpl = TopicPartitionList::new();
        for (partition, offset) in offsets {
            tpl.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(*offset))
                .map_err(|e| rd_error("send_offsets_to_transaction", &e, None).with_context(partition.to_string()))?;
        }
        let timeout = self.timeout;
        self.transactional("send_offsets_to_transaction", move |p| {
            let metadata = native.as_ref().downcast_ref::<ConsumerGroupMetadata>().expect("checked above");
            p.send_offsets_to_transaction(&tpl, metadata, timeout)
        })
        .await
    }

    async fn commit_transaction(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("commit_transaction", move |p| p.commit_transaction(timeout)).await
    }

    async fn abort_transaction(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("abort_transaction", move |p| p.abort_transaction(timeout)).await
    }

    async fn flush(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("flush", move |p| p.flush(timeout)).await
    }

    async fn close(&self) {
        let producer = lock(&self.producer).take();
        if let Some(producer) = producer {
            // Dropping purges what is unsent (failing its deliveries) and joins librdkafka.
            let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
        }
        self.closed.send_replace(true);
    }
}

// ---------------------------------------------------------------------------------------------
// Admin

struct RdAdmin {
    admin: Option<Arc<AdminClient<LogContext>>>,
}

impl RdAdmin {
    fn admin(&self) -> Arc<AdminClient<LogContext>> {
        self.admin.clone().expect("an admin client is only taken on drop")
    }

    async fn metadata(&self, topic: &str, settle: Duration) -> KafkaResult<Option<(u32, bool)>> {
        let admin = self.admin();
        let topic = topic.to_owned();
        blocking("partition_count", move || partition_count(admin.inner(), &topic, settle)).await
    }
}

impl Drop for RdAdmin {
    fn drop(&mut self) {
        if let Some(admin) = self.admin.take() {
            drop_off_runtime(admin);
        }
    }
}

#[async_trait]
impl Admin for RdAdmin {
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation> {
        let partitions = i32::try_from(topic.partitions).map_err(|_| {
            KafkaError::new(KafkaErrorKind::Other, "create_topic", "too many partitions")
                .with_context(topic.name.clone())
        })?;
        let mut spec =
            RdNewTopic::new(&topic.name, partitions, TopicReplication::Fixed(i32::from(topic.replication_factor)));
        for (key, value) in &topic.configs {
            spec = spec.set(key, value);
        }
        let options =
            AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT)).request_timeout(Some(REQUEST_TIMEOUT));
        let admin = self.admin();
        let results = admin
            .create_topics([&spec], &options)
            .await
            .map_err(|e| rd_error("create_topic", &e, None).with_context(topic.name.clone()))?;
        let outcome = results.into_iter().next().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Other, "create_topic", "no result").with_context(topic.name.clone())
        })?;
        match outcome {
            Ok(_) => {
                // Fresh metadata must show it to every client from now on, with leaders.
                let deadline = Instant::now() + TOPIC_VISIBLE_MAX;
                loop {
                    if let Some((_, true)) = self.metadata(&topic.name, Duration::ZERO).await? {
                        return Ok(TopicCreation::Created);
                    }
                    if Instant::now() >= deadline {
                        return Err(KafkaError::new(
                            KafkaErrorKind::Retriable,
                            "create_topic",
                            format!("created, but not visible with leaders within {TOPIC_VISIBLE_MAX:?}"),
                        )
                        .with_context(topic.name.clone()));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            Err((_, Code::TopicAlreadyExists)) => Ok(TopicCreation::AlreadyExists),
            // Some brokers (crabka, see docs/kafka-broker.md) check a replication factor of -1
            // before existence: an existing topic is still success.
            Err((_, Code::InvalidReplicationFactor))
                if topic.replication_factor == -1 && self.metadata(&topic.name, Duration::ZERO).await?.is_some() =>
            {
                Ok(TopicCreation::AlreadyExists)
            }
            Err((_, code)) => Err(code_error("create_topic", code, topic.name.clone())),
        }
    }

    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>> {
        Ok(self.metadata(topic, Duration::from_secs(5)).await?.map(|(count, _)| count))
    }
}

#[cfg(test)]
mod tests {
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
