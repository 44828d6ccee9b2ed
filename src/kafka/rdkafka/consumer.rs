//! The consumer: rebalance events, partitions paused in the callback, a cancellation-safe
//! poll, committed offsets and LSO ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::CStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rdkafka::bindings as rdsys;
use rdkafka::client::Client;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _, ConsumerContext};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode as Code};
use rdkafka::message::{BorrowedMessage, Headers as _, Message as _};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::errors::{code_error, code_kind, rd_error, rd_error_as, retry_read};
use super::log::LogContext;
use super::security::{blocking_unless_refused, is_authentication_code, is_authorization_code};
use super::{blocking, drop_off_runtime, inner_mut, lock, POLL_MIN, POLL_SLICE, REQUEST_TIMEOUT, WAKE_TIMEOUT};
use crate::kafka::{
    Consumer, Extent, GroupMetadata, KafkaError, KafkaErrorKind, KafkaResult, LogEnd, OffsetReset, Polled, Rebalance,
    RevocationGate, StartOffset, TopicPartition,
};
use crate::wire::{Header, RawRecord, RecordRef};

/// The consumer's context: logging, and the rebalance callback.
pub(super) struct ConsumerCtx {
    pub(super) log: LogContext,
    /// Assignment changes the callback saw, in order, not yet moved into the poll buffer.
    pub(super) events: Mutex<Vec<Rebalance>>,
    /// The fatal slot: a failure of the rebalance callback, surfaced by the next poll.
    pub(super) failed: Mutex<Option<KafkaError>>,
    /// Revocations wait while it is held ([`Consumer::hold_revocations`]).
    pub(super) gate: Mutex<Option<RevocationGate>>,
}

/// How long a revocation waits for the commits that hold the gate: far beyond any commit's
/// own bound; past it the partitions are given up anyway (and the commit may be refused).
const REVOCATION_WAIT_MAX: Duration = Duration::from_secs(120);

impl ConsumerCtx {
    pub(super) fn new(client_id: &str, tls: bool, bootstrap_servers: &str) -> Self {
        ConsumerCtx {
            log: LogContext::new(client_id, tls, bootstrap_servers),
            events: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
            gate: Mutex::new(None),
        }
    }

    /// Waits, in the rebalance callback, until no commit holds the gate (TRX-33): librdkafka
    /// rejoins the group as soon as the callback gave the partitions up.
    fn wait_for_commits(&self) {
        let Some(gate) = lock(&self.gate).clone() else { return };
        if !gate.is_held() {
            return;
        }
        let started = std::time::Instant::now();
        if gate.wait_released(REVOCATION_WAIT_MAX) {
            tracing::debug!(client = &*self.log.client, waited = ?started.elapsed(), "revocation waited for a commit");
        } else {
            tracing::warn!(
                client = &*self.log.client,
                waited = ?REVOCATION_WAIT_MAX,
                "a commit still holds the revocation back: giving the partitions up anyway"
            );
        }
    }
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.log(level, facility, message);
    }

    fn error(&self, error: RdError, reason: &str) {
        self.log.error(error, reason);
    }
}

pub(super) fn port_partitions(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    let mut partitions: Vec<TopicPartition> =
        tpl.elements().iter().map(|e| TopicPartition::new(e.topic(), e.partition())).collect();
    partitions.sort();
    partitions
}

pub(super) fn rd_partitions<'a>(partitions: impl IntoIterator<Item = &'a TopicPartition>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition(&p.topic, p.partition);
    }
    tpl
}

/// The member's generation and member id, from librdkafka's group metadata.
pub(super) fn member_identity(consumer: &BaseConsumer<ConsumerCtx>) -> Option<(i32, String)> {
    // SAFETY: the metadata object is a copy owned by us until destroyed below; the member id
    // string lives inside it and is copied out before.
    unsafe {
        let metadata = rdsys::rd_kafka_consumer_group_metadata(consumer.client().native_ptr());
        if metadata.is_null() {
            return None;
        }
        let generation = rdsys::rd_kafka_consumer_group_metadata_generation_id(metadata);
        let member = rdsys::rd_kafka_consumer_group_metadata_member_id(metadata);
        let member =
            if member.is_null() { String::new() } else { CStr::from_ptr(member).to_string_lossy().into_owned() };
        rdsys::rd_kafka_consumer_group_metadata_destroy(metadata);
        Some((generation, member))
    }
}

/// librdkafka's application positions (next offset to return) of `tpl`'s partitions; `None`
/// where it has none (nothing returned since the last assign or seek).
pub(super) fn rd_positions(consumer: &BaseConsumer<ConsumerCtx>, tpl: &TopicPartitionList) -> Vec<Option<i64>> {
    let probe = tpl.clone();
    // SAFETY: `probe` is a valid list we own; rd_kafka_position only writes offsets into it.
    unsafe { rdsys::rd_kafka_position(consumer.client().native_ptr(), probe.ptr()) };
    probe
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        })
        .collect()
}

/// What the rebalance callback needs of its client: librdkafka's consumer, or a test double.
pub(super) trait RebalanceClient {
    fn assign(&self, tpl: &TopicPartitionList) -> Result<(), RdError>;
    fn pause(&self, tpl: &TopicPartitionList) -> Result<(), RdError>;
    fn unassign(&self) -> Result<(), RdError>;
    fn assignment(&self) -> Result<TopicPartitionList, RdError>;
    /// Whether librdkafka's group handler has terminated (the consumer is closing).
    fn closed(&self) -> bool;
    /// The generation of the current assignment (-1 when unknown).
    fn generation(&self) -> i32;
}

impl RebalanceClient for BaseConsumer<ConsumerCtx> {
    fn assign(&self, tpl: &TopicPartitionList) -> Result<(), RdError> {
        rdkafka::consumer::Consumer::assign(self, tpl)
    }
    fn pause(&self, tpl: &TopicPartitionList) -> Result<(), RdError> {
        rdkafka::consumer::Consumer::pause(self, tpl)
    }
    fn unassign(&self) -> Result<(), RdError> {
        rdkafka::consumer::Consumer::unassign(self)
    }
    fn assignment(&self) -> Result<TopicPartitionList, RdError> {
        rdkafka::consumer::Consumer::assignment(self)
    }
    fn closed(&self) -> bool {
        BaseConsumer::closed(self)
    }
    fn generation(&self) -> i32 {
        member_identity(self).map_or(-1, |(generation, _)| generation)
    }
}

impl ConsumerCtx {
    /// The rebalance callback's work. librdkafka calls it inside a poll and ignores anything it
    /// returns, so a failure is kept in the fatal slot that the next poll surfaces as an error
    /// (TRX-34, LIFE-23): a member whose assignment failed must never hold partitions that no
    /// task processes.
    pub(super) fn on_rebalance(&self, client: &dyn RebalanceClient, error: RDKafkaRespErr, tpl: &TopicPartitionList) {
        let partitions = port_partitions(tpl);
        if client.closed() {
            // A rebalance event served after the group handler terminated (a close in
            // progress): nothing is assigned any more, and an `assign` or `unassign` now would
            // wait for good for a reply the terminated handler never sends (librdkafka#4884).
            tracing::debug!(
                client = &*self.log.client,
                ?error,
                ?partitions,
                "rebalance event after the consumer closed: ignored"
            );
            return;
        }
        let failed = |what: &str, e: &RdError| {
            tracing::error!(client = &*self.log.client, error = %e, ?partitions, "{what} failed");
            let error = rd_error_as(KafkaErrorKind::Fatal, "rebalance", e, None)
                .with_context(format!("{}: {what} {partitions:?}", self.log.client));
            lock(&self.failed).get_or_insert(error);
        };
        match error {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                if let Err(e) = client.assign(tpl) {
                    return failed("assigning partitions", &e);
                }
                // Port contract: new partitions arrive paused. Pausing here, inside the callback,
                // comes before any fetch of them can reach the application.
                if let Err(e) = client.pause(tpl) {
                    return failed("pausing new partitions", &e);
                }
                let generation = client.generation();
                tracing::debug!(client = &*self.log.client, ?partitions, generation, "partitions assigned");
                lock(&self.events).push(Rebalance::Assigned { partitions, generation });
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.wait_for_commits();
                tracing::debug!(client = &*self.log.client, ?partitions, "partitions revoked");
                lock(&self.events).push(Rebalance::Revoked { partitions: partitions.clone() });
                if let Err(e) = client.unassign() {
                    failed("unassigning partitions", &e);
                }
            }
            other => {
                tracing::warn!(client = &*self.log.client, error = ?other, "rebalance error: dropping the assignment");
                self.wait_for_commits();
                let held = client.assignment().map(|tpl| port_partitions(&tpl)).unwrap_or_default();
                if !held.is_empty() {
                    lock(&self.events).push(Rebalance::Revoked { partitions: held });
                }
                if let Err(e) = client.unassign() {
                    failed("unassigning partitions", &e);
                }
            }
        }
    }

    /// The error a rebalance callback left, if any (taken: it is reported once).
    pub(super) fn take_failure(&self) -> Option<KafkaError> {
        lock(&self.failed).take()
    }
}

impl ConsumerContext for ConsumerCtx {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, error: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        self.on_rebalance(consumer, error, tpl);
    }
}

/// One thing a poll hands out, in the order librdkafka produced them.
pub(super) enum Item {
    Rebalance(Rebalance),
    Record(Held),
}

/// A record as librdkafka handed it: its message, kept (not copied) until the engine is given
/// the record, as an owned [`RawRecord`] ([`Consumer::poll`]) or by reference
/// ([`Consumer::poll_borrowed`], which copies nothing).
pub(super) struct Held {
    /// Borrows the client, which outlives it: messages live only in [`Shared`]'s buffer, and
    /// [`Shared`]'s drop empties the buffer before the client is destroyed.
    message: BorrowedMessage<'static>,
    /// The interned topic name.
    topic: Arc<str>,
}

impl Held {
    /// Keeps `message`.
    ///
    /// # Safety
    /// The message must be dropped before the client it came from (see [`Shared`]'s drop).
    unsafe fn new(message: BorrowedMessage<'_>, topic: Arc<str>) -> Self {
        // SAFETY: only the lifetime changes; the caller keeps the client alive for longer.
        let message = unsafe { std::mem::transmute::<BorrowedMessage<'_>, BorrowedMessage<'static>>(message) };
        Held { message, topic }
    }

    pub(super) fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    pub(super) fn partition(&self) -> i32 {
        self.message.partition()
    }

    pub(super) fn offset(&self) -> i64 {
        self.message.offset()
    }

    pub(super) fn is_of(&self, partition: &TopicPartition) -> bool {
        self.partition() == partition.partition && *self.topic == *partition.topic
    }

    pub(super) fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            topic: &self.topic,
            partition: self.message.partition(),
            offset: self.message.offset(),
            timestamp_ms: self.message.timestamp().to_millis(),
            key: self.message.key(),
            value: self.message.payload(),
        }
    }

    /// The record, copied out of the message (headers included).
    pub(super) fn to_raw(&self) -> RawRecord {
        let headers = self
            .message
            .headers()
            .map(|headers| {
                headers
                    .iter()
                    .map(|h| Header { key: h.key.to_owned(), value: h.value.map(Bytes::copy_from_slice) })
                    .collect()
            })
            .unwrap_or_default();
        RawRecord { headers, ..self.borrowed().to_raw() }
    }
}

/// What blocking polls took from librdkafka and the engine has not been given yet.
#[derive(Default)]
pub(super) struct Buffer {
    pub(super) items: VecDeque<Item>,
    /// Interned topic names.
    pub(super) topics: BTreeMap<String, Arc<str>>,
    /// Partitions to seek back to these offsets before the next fetch (buffered records dropped
    /// because their partition was paused).
    pub(super) rewinds: Vec<(TopicPartition, i64)>,
}

impl Buffer {
    pub(super) fn take_events(&mut self, ctx: &ConsumerCtx) -> bool {
        let mut events = lock(&ctx.events);
        let any = !events.is_empty();
        self.items.extend(events.drain(..).map(Item::Rebalance));
        any
    }

    /// Keeps a message of `shared`'s client (nothing is copied yet).
    pub(super) fn push_record(&mut self, message: BorrowedMessage<'_>) {
        let topic = match self.topics.get(message.topic()) {
            Some(topic) => topic.clone(),
            None => {
                let topic: Arc<str> = message.topic().into();
                self.topics.insert(message.topic().to_owned(), topic.clone());
                topic
            }
        };
        // SAFETY: the buffer lives in `Shared` beside the client, and `Shared`'s drop empties
        // it first.
        self.items.push_back(Item::Record(unsafe { Held::new(message, topic) }));
    }

    /// Whether the next hand-out is complete: `max` records, or records followed by a
    /// rebalance (which must wait for the poll after).
    pub(super) fn settled(&self, max: usize) -> bool {
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

    /// Records buffered after the last rebalance event: while the next hand-out is not settled,
    /// exactly the records it holds.
    pub(super) fn records_after_last_rebalance(&self) -> usize {
        self.items.iter().rev().take_while(|item| matches!(item, Item::Record(_))).count()
    }

    pub(super) fn first_buffered(&self, partition: &TopicPartition) -> Option<i64> {
        self.items.iter().find_map(|item| match item {
            Item::Record(r) if r.is_of(partition) => Some(r.offset()),
            _ => None,
        })
    }

    pub(super) fn drop_records_of(&mut self, partition: &TopicPartition) {
        self.items.retain(|item| !matches!(item, Item::Record(r) if r.is_of(partition)));
    }
}

pub(super) struct Shared {
    /// Dropped (closed) on a thread of its own when the last handle goes: see `Drop`.
    pub(super) consumer: std::mem::ManuallyDrop<BaseConsumer<ConsumerCtx>>,
    /// Told when the consumer has been closed and destroyed ([`Consumer::close`] waits on it).
    pub(super) closed: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// A group-less consumer: librdkafka still looks up the coordinator of its private group,
    /// which a least-privilege principal may not describe; that refusal is no error here.
    pub(super) groupless: bool,
    /// Serializes blocking polls, and holds what a cancelled poll took.
    pub(super) buffer: Mutex<Buffer>,
    /// For [`Consumer::log_end_offset`]: the consumer's settings as `read_uncommitted`, and the
    /// client made of them on first use (librdkafka answers ListOffsets(latest) with the
    /// isolation level of the client that asks).
    pub(super) uncommitted: Mutex<(ClientConfig, Option<BaseConsumer<ConsumerCtx>>)>,
    /// Whether the connection uses TLS (for the refusal rules of a second client).
    pub(super) tls: bool,
}

impl Drop for Shared {
    /// Closes and destroys the client on a detached thread of its own. librdkafka's close can
    /// block for good: a rebalance callback's `assign`/`unassign` that reaches the group handler
    /// after it terminated waits for a reply that never comes (librdkafka#4884; seen here at the
    /// end of the conformance suite against Apache Kafka 4.4, after a broker restart, and for a
    /// member evicted for exceeding max.poll.interval.ms). On a thread of tokio's blocking pool
    /// such a close would also hold up the runtime's shutdown, so the process could not exit;
    /// a detached thread only leaks itself.
    fn drop(&mut self) {
        // Held messages borrow the client: they go first.
        inner_mut(&mut self.buffer).items.clear();
        // SAFETY: taken exactly once, here, and the field is not used after.
        let consumer = unsafe { std::mem::ManuallyDrop::take(&mut self.consumer) };
        let twin = inner_mut(&mut self.uncommitted).1.take();
        let done = inner_mut(&mut self.closed).take();
        let close = move || {
            drop(consumer);
            drop(twin);
            if let Some(done) = done {
                let _ = done.send(());
            }
        };
        // Should the thread not start, the closure is dropped here, and the client with it.
        if let Err(error) = std::thread::Builder::new().name("flechtwerk-close".into()).spawn(close) {
            tracing::warn!(%error, "no thread for closing a consumer: closed in place");
        }
    }
}

impl Shared {
    /// Runs `ask` with the consumer's `read_uncommitted` twin (made on first use, then kept):
    /// the isolation level of the client that asks decides what `latest` answers.
    fn with_uncommitted<T>(
        &self,
        client_id: &str,
        operation: &'static str,
        ask: impl FnOnce(&BaseConsumer<ConsumerCtx>) -> KafkaResult<T>,
    ) -> KafkaResult<T> {
        let mut uncommitted = lock(&self.uncommitted);
        let (config, client) = &mut *uncommitted;
        if client.is_none() {
            let bootstrap = config.get("bootstrap.servers").unwrap_or_default().to_owned();
            let context = ConsumerCtx::new(&format!("{client_id}-watermarks"), self.tls, &bootstrap);
            let created: BaseConsumer<ConsumerCtx> = config
                .create_with_context(context)
                .map_err(|e| rd_error(operation, &e, None).with_context(client_id.to_owned()))?;
            *client = Some(created);
        }
        ask(client.as_ref().expect("created above"))
    }

    pub(super) fn ctx(&self) -> &ConsumerCtx {
        self.consumer.context()
    }

    /// The position of `partition` as far as this client knows it without a request: its first
    /// buffered record, else the offset a rewind will seek it back to, else librdkafka's own
    /// (`rd_kafka_position`). Asked under the buffer's lock (`buffer`), which a fill holds while
    /// it takes records, so the buffer and librdkafka agree.
    pub(super) fn position_at_hand(&self, buffer: &Buffer, partition: &TopicPartition) -> Option<i64> {
        buffer
            .first_buffered(partition)
            .or_else(|| buffer.rewinds.iter().find(|(p, _)| p == partition).map(|(_, o)| *o))
            .or_else(|| rd_positions(&self.consumer, &rd_partitions([partition])).first().copied().flatten())
    }

    /// Seeks partitions whose buffered records were dropped back to the first of them.
    pub(super) fn apply_rewinds(&self, buffer: &mut Buffer) {
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
    pub(super) fn fill(&self, max: usize, timeout: Duration, watched: &TopicPartitionList) -> KafkaResult<()> {
        let mut buffer = lock(&self.buffer);
        self.apply_rewinds(&mut buffer);
        let deadline = Instant::now() + timeout;
        let before = if watched.count() > 0 { rd_positions(&self.consumer, watched) } else { Vec::new() };
        buffer.take_events(self.ctx());
        self.surface_failure()?;
        while buffer.items.is_empty() {
            // A zero timeout still takes what librdkafka already fetched: one short poll. (Not a
            // zero one: rd_kafka_consumer_poll(0) was measured to return nothing, call after call,
            // for a record already in a resumed partition's fetch queue; 1 ms returns it.)
            let left = deadline.saturating_duration_since(Instant::now());
            let got = self.consumer.poll(left.min(POLL_SLICE).max(POLL_MIN));
            buffer.take_events(self.ctx());
            self.surface_failure()?;
            match got {
                Some(Ok(message)) => buffer.push_record(message),
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
        // Counted as items arrive (they are only appended here), not by rescanning the buffer
        // per item: a rescan made this loop quadratic in `max` (16 % of a config bootstrap's
        // CPU at 1 000-record polls).
        let mut records = buffer.records_after_last_rebalance();
        let mut settled = buffer.settled(max);
        while !settled {
            let got = self.consumer.poll(Duration::ZERO);
            let rebalanced = buffer.take_events(self.ctx());
            self.surface_failure()?;
            settled |= rebalanced && records > 0;
            match got {
                Some(Ok(message)) => {
                    buffer.push_record(message);
                    records += 1;
                    settled |= records >= max;
                }
                Some(Err(e)) => self.consume_error(e)?,
                None if rebalanced => {}
                None => break,
            }
        }
        debug_assert!(!settled || buffer.settled(max), "counted as settled, the buffer is not");
        Ok(())
    }

    /// Fails the poll with what the rebalance callback could not do (TRX-34), or with the
    /// cluster's refusal of this client.
    pub(super) fn surface_failure(&self) -> KafkaResult<()> {
        if let Some(refused) = self.ctx().log.refusal.get() {
            return Err(refused);
        }
        self.ctx().take_failure().map_or(Ok(()), Err)
    }

    pub(super) fn consume_error(&self, error: RdError) -> KafkaResult<()> {
        let code = error.rdkafka_error_code();
        match error {
            RdError::MessageConsumptionFatal(_) => {
                let fatal = self.consumer.client().fatal_error();
                Err(rd_error("poll", &error, fatal).with_context(self.ctx().log.client.to_string()))
            }
            RdError::PartitionEOF(_) => Ok(()),
            _ if self.groupless && code == Some(Code::GroupAuthorizationFailed) => {
                tracing::debug!(
                    client = &*self.ctx().log.client,
                    "the private group of a group-less consumer may not be described: ignored"
                );
                Ok(())
            }
            // Missing ACLs and refused authentication end the run: librdkafka would go on
            // retrying (and reporting) them forever.
            _ if code.is_some_and(is_authorization_code) => {
                Err(rd_error("poll", &error, None).with_context(self.ctx().log.client.to_string()))
            }
            _ if code.is_some_and(is_authentication_code) => {
                let refused = self.ctx().log.refusal.get().unwrap_or_else(|| {
                    rd_error_as(KafkaErrorKind::Authentication, "connect", &error, None)
                        .with_context(format!("client {}", self.ctx().log.client))
                });
                Err(refused)
            }
            other => {
                // Transient: librdkafka retries by itself (broker down, leader moved, ...).
                tracing::warn!(client = &*self.ctx().log.client, error = %other, "consumer error");
                Ok(())
            }
        }
    }
}

/// A consumer on librdkafka. See the module docs for its threading.
pub(super) struct RdConsumer {
    pub(super) shared: Option<Arc<Shared>>,
    pub(super) client_id: String,
    pub(super) group_id: Option<String>,
    pub(super) offset_reset: OffsetReset,
    /// The assignment as the engine knows it (events handed out, manual assigns).
    pub(super) assigned: BTreeSet<TopicPartition>,
    /// Partitions the engine paused (and new ones, which arrive paused).
    pub(super) paused: BTreeSet<TopicPartition>,
    /// Positions librdkafka cannot tell (after an assign or a seek, before the first record).
    pub(super) known: BTreeMap<TopicPartition, i64>,
    /// Whether an assignment has been handed out (group metadata exists from then on).
    pub(super) joined: bool,
    /// A fill [`Consumer::poll_borrowed`] started before it lent its records: librdkafka's next
    /// records are taken into the buffer (a blocking thread's work) while the caller looks at
    /// the current ones. Whatever touches the buffer or the assignment next waits for it first
    /// ([`settle_prefetch`](Self::settle_prefetch)) and reports its error.
    pub(super) prefetch: Option<tokio::task::JoinHandle<KafkaResult<()>>>,
}

impl RdConsumer {
    /// Waits for a prefetching fill, if one runs; its error is this call's.
    pub(super) async fn settle_prefetch(&mut self) -> KafkaResult<()> {
        match self.prefetch.take() {
            None => Ok(()),
            Some(fill) => fill.await.map_err(|e| {
                KafkaError::new(KafkaErrorKind::Fatal, "poll", format!("blocking librdkafka call failed: {e}"))
                    .with_context(self.context())
            })?,
        }
    }

    pub(super) fn shared(&self, operation: &'static str) -> KafkaResult<Arc<Shared>> {
        self.shared.clone().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Fatal, operation, "the consumer is closed").with_context(self.context())
        })
    }

    pub(super) fn context(&self) -> String {
        match &self.group_id {
            Some(group) => format!("client {}, group {group}", self.client_id),
            None => format!("client {}", self.client_id),
        }
    }

    /// Fills the buffer (waiting up to `timeout` for a first item) and takes the next hand-out
    /// ([`take_held`](Self::take_held)): its records go to `lend` as librdkafka's messages,
    /// which live no longer than this call; returns what `lend` made of them and the
    /// rebalance events. The one path of [`Consumer::poll`] and [`Consumer::poll_borrowed`].
    async fn poll_held<T>(
        &mut self,
        max_records: usize,
        timeout: Duration,
        prefetch: bool,
        lend: impl FnOnce(&[Held]) -> T + Send,
    ) -> KafkaResult<(T, Vec<Rebalance>)> {
        self.settle_prefetch().await?;
        let shared = self.shared("poll")?;
        let max = max_records.max(1);
        let watched = rd_partitions(self.assigned.iter().filter(|p| !self.paused.contains(*p)));
        // A prefetch may have filled a whole hand-out already: then there is nothing to wait for
        // (unless a rewind is pending: only a fill applies it, before it takes more records).
        let ready = prefetch && {
            let buffer = lock(&shared.buffer);
            buffer.rewinds.is_empty() && buffer.settled(max)
        };
        if !ready {
            let (filler, watched, context) = (shared.clone(), watched.clone(), self.context());
            blocking("poll", move || filler.fill(max, timeout, &watched).map_err(|e| e.with_context(context))).await?;
        }
        // Declared after `shared`, so dropped before it: the messages borrow its client.
        let mut held = Vec::new();
        let rebalances = self.take_held(&shared, max, &mut held);
        if !held.is_empty() || !rebalances.is_empty() {
            shared.ctx().log.refusal.mark_connected();
        }
        if prefetch && !held.is_empty() && rebalances.is_empty() {
            // Take what librdkafka has ready for the next poll while the caller looks at these
            // (a zero timeout: at most a millisecond's wait for a first record).
            let (filler, context) = (shared.clone(), self.context());
            self.prefetch = Some(tokio::task::spawn_blocking(move || {
                filler.fill(max, Duration::ZERO, &watched).map_err(|e| e.with_context(context))
            }));
        }
        Ok((lend(&held), rebalances))
    }

    /// Hands out buffered items: leading rebalances, then up to `max` records up to the next
    /// rebalance, left as librdkafka's messages (appended to `held`); returns the rebalance
    /// events. Records of paused partitions are dropped and rewound instead.
    pub(super) fn take_held(&mut self, shared: &Shared, max: usize, held: &mut Vec<Held>) -> Vec<Rebalance> {
        let mut rebalances = Vec::new();
        // A cancelled poll may still be filling the buffer: then nothing is ready yet.
        let Ok(mut buffer) = shared.buffer.try_lock() else { return rebalances };
        if !self.paused.is_empty() {
            let mut rewinds: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            buffer.items.retain(|item| match item {
                Item::Record(r) => {
                    let partition = TopicPartition::new(&**r.topic(), r.partition());
                    if self.paused.contains(&partition) {
                        rewinds.entry(partition).or_insert(r.offset());
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
        let first = held.len();
        while let Some(item) = buffer.items.front() {
            match item {
                Item::Rebalance(_) if held.len() > first => break,
                Item::Record(_) if held.len() - first >= max => break,
                _ => {}
            }
            match buffer.items.pop_front() {
                Some(Item::Rebalance(event)) => {
                    match &event {
                        Rebalance::Assigned { partitions, .. } => {
                            // Port contract (eager rebalancing): what is revoked is revoked before
                            // anything is assigned, so no partition arrives while still held.
                            assert!(
                                partitions.iter().all(|p| !self.assigned.contains(p)),
                                "{}: {partitions:?} assigned while some are still held ({:?}): a revocation was lost",
                                self.context(),
                                self.assigned
                            );
                            self.joined = true;
                            for p in partitions {
                                self.known.remove(p);
                                self.assigned.insert(p.clone());
                                self.paused.insert(p.clone());
                            }
                        }
                        Rebalance::Revoked { partitions } => {
                            // Only what was assigned is revoked: the engine stops exactly those tasks.
                            assert!(
                                partitions.iter().all(|p| self.assigned.contains(p)),
                                "{}: {partitions:?} revoked, but only {:?} were assigned",
                                self.context(),
                                self.assigned
                            );
                            for p in partitions {
                                self.known.remove(p);
                                self.assigned.remove(p);
                                self.paused.remove(p);
                            }
                        }
                    }
                    rebalances.push(event);
                }
                Some(Item::Record(record)) => held.push(record),
                None => break,
            }
        }
        rebalances
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
        self.settle_prefetch().await?;
        let shared = self.shared("assign")?;
        let partitions = partitions.to_vec();
        let context = self.context();
        let refusal = shared.ctx().log.refusal.clone();
        let starts = blocking_unless_refused(&refusal, "assign", move || {
            // Resolve every start to a concrete offset, so positions are known before the first
            // record (a reader compares them with captured ends).
            let mut starts = BTreeMap::new();
            for (partition, start) in &partitions {
                let offset = match start {
                    StartOffset::At(offset) => *offset,
                    StartOffset::Beginning | StartOffset::End => {
                        let (low, high) = retry_read(|timeout| {
                            shared
                                .consumer
                                .fetch_watermarks(&partition.topic, partition.partition, timeout)
                                .map_err(|e| rd_error("assign", &e, None).with_context(partition.to_string()))
                        })?;
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
            rdkafka::consumer::Consumer::assign(&*shared.consumer, &tpl)
                .map_err(|e| rd_error("assign", &e, None).with_context(context.clone()))?;
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
        let (records, rebalances) =
            self.poll_held(max_records, timeout, false, |held| held.iter().map(Held::to_raw).collect()).await?;
        Ok(Polled { records, rebalances })
    }

    async fn poll_borrowed(
        &mut self,
        max_records: usize,
        timeout: Duration,
        on_records: &mut (dyn for<'s, 'r> FnMut(&'s [RecordRef<'r>]) + Send),
    ) -> KafkaResult<Vec<Rebalance>> {
        let lend = |held: &[Held]| {
            if !held.is_empty() {
                let records: Vec<RecordRef<'_>> = held.iter().map(Held::borrowed).collect();
                on_records(&records);
            }
        };
        let ((), rebalances) = self.poll_held(max_records, timeout, true, lend).await?;
        Ok(rebalances)
    }

    fn pause(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()> {
        let shared = self.shared("pause")?;
        rdkafka::consumer::Consumer::pause(&*shared.consumer, &rd_partitions(partitions))
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
        wake_fetchers(&shared, partitions);
        Ok(())
    }

    async fn seek(&mut self, partition: &TopicPartition, offset: i64) -> KafkaResult<()> {
        self.settle_prefetch().await?;
        let shared = self.shared("seek")?;
        let target = partition.clone();
        let refusal = shared.ctx().log.refusal.clone();
        blocking_unless_refused(&refusal, "seek", move || {
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
        self.settle_prefetch().await?;
        let shared = self.shared("position")?;
        if !self.assigned.contains(partition) {
            return Err(KafkaError::new(KafkaErrorKind::Other, "position", "the partition is not assigned")
                .with_context(partition.to_string()));
        }
        // What the buffer or librdkafka's own state already tells needs no hop to a blocking
        // thread (`rd_kafka_position` sends no request): the common case, asked after every poll
        // of a read to its end. Under the buffer's lock, which a fill holds while it takes
        // records, so the two answers agree; a fill still running (a cancelled poll's) sends
        // this to the blocking path below, as does a client the cluster refused.
        if let (None, Ok(buffer)) = (shared.ctx().log.refusal.get(), shared.buffer.try_lock()) {
            if let Some(offset) = shared.position_at_hand(&buffer, partition) {
                return Ok(offset);
            }
        }
        let target = partition.clone();
        let known = self.known.get(partition).copied();
        let offset_reset = self.offset_reset;
        let refusal = shared.ctx().log.refusal.clone();
        let position = blocking_unless_refused(&refusal, "position", move || {
            if let Some(offset) = shared.position_at_hand(&lock(&shared.buffer), &target) {
                return Ok(offset);
            }
            if let Some(offset) = known {
                return Ok(offset);
            }
            // A group partition before its first record: the committed offset, else the reset.
            let committed = retry_read(|timeout| {
                shared
                    .consumer
                    .committed_offsets(rd_partitions([&target]), timeout)
                    .map_err(|e| rd_error("position", &e, None).with_context(target.to_string()))
            })?;
            if let Some(Offset::Offset(offset)) = committed.elements().first().map(|e| e.offset()) {
                return Ok(offset);
            }
            let (low, high) = retry_read(|timeout| {
                shared
                    .consumer
                    .fetch_watermarks(&target.topic, target.partition, timeout)
                    .map_err(|e| rd_error("position", &e, None).with_context(target.to_string()))
            })?;
            Ok(match offset_reset {
                OffsetReset::Earliest => low,
                OffsetReset::Latest => high,
            })
        })
        .await?;
        Ok(position)
    }

    async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> KafkaResult<()> {
        self.settle_prefetch().await?;
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
        let refusal = shared.ctx().log.refusal.clone();
        blocking_unless_refused(&refusal, "commit_offsets", move || {
            shared
                .consumer
                .commit(&tpl, CommitMode::Sync)
                .map_err(|e| rd_error("commit_offsets", &e, None).with_context(context))
        })
        .await
    }

    async fn committed(&mut self, partitions: &[TopicPartition]) -> KafkaResult<Vec<Option<i64>>> {
        self.settle_prefetch().await?;
        let shared = self.shared("committed")?;
        if self.group_id.is_none() {
            return Err(KafkaError::new(KafkaErrorKind::Other, "committed", "a group-less consumer has no offsets")
                .with_context(self.context()));
        }
        let wanted = partitions.to_vec();
        let context = self.context();
        let refusal = shared.ctx().log.refusal.clone();
        blocking_unless_refused(&refusal, "committed", move || {
            let result = retry_read(|timeout| {
                shared
                    .consumer
                    .committed_offsets(rd_partitions(&wanted), timeout)
                    .map_err(|e| rd_error("committed", &e, None).with_context(context.clone()))
            })?;
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
        let refusal = shared.ctx().log.refusal.clone();
        blocking_unless_refused(&refusal, "end_offset", move || {
            // Under read_committed, ListOffsets(latest) answers the last stable offset.
            high_watermark(&shared.consumer, &target, "end_offset")
        })
        .await
    }

    async fn log_end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        let shared = self.shared("log_end_offset")?;
        let target = partition.clone();
        let refusal = shared.ctx().log.refusal.clone();
        let client_id = self.client_id.clone();
        blocking_unless_refused(&refusal, "log_end_offset", move || {
            shared.with_uncommitted(&client_id, "log_end_offset", |client| {
                high_watermark(client, &target, "log_end_offset")
            })
        })
        .await
    }

    async fn extents(&mut self, partitions: &[TopicPartition], end: LogEnd) -> KafkaResult<Vec<Extent>> {
        let shared = self.shared("extents")?;
        let targets = partitions.to_vec();
        let refusal = shared.ctx().log.refusal.clone();
        let client_id = self.client_id.clone();
        blocking_unless_refused(&refusal, "extents", move || {
            // Two ListOffsets per broker: the log starts, then the ends — the high watermark
            // asked of the read_uncommitted twin (the isolation level of the client that asks
            // decides what `latest` answers).
            let starts = list_offsets(&shared.consumer, &targets, Offset::Beginning, "extents")?;
            let ends = match end {
                LogEnd::Stable => list_offsets(&shared.consumer, &targets, Offset::End, "extents")?,
                LogEnd::HighWatermark => shared.with_uncommitted(&client_id, "extents", |client| {
                    list_offsets(client, &targets, Offset::End, "extents")
                })?,
            };
            Ok(starts.into_iter().zip(ends).map(|(start, end)| Extent { start, end }).collect())
        })
        .await
    }

    async fn partition_count(&mut self, topic: &str) -> KafkaResult<Option<u32>> {
        let shared = self.shared("partition_count")?;
        let topic = topic.to_owned();
        let refusal = shared.ctx().log.refusal.clone();
        blocking_unless_refused(&refusal, "partition_count", move || {
            partition_count(shared.consumer.client(), &topic, Duration::from_secs(5)).map(|t| t.map(|(n, _)| n))
        })
        .await
    }

    fn hold_revocations(&mut self, gate: RevocationGate) {
        if let Some(shared) = &self.shared {
            *lock(&shared.ctx().gate) = Some(gate);
        }
    }

    fn group_metadata(&self) -> Option<GroupMetadata> {
        let group_id = self.group_id.clone()?;
        if !self.joined {
            return None;
        }
        let shared = self.shared.as_ref()?;
        let (generation, member_id) = member_identity(&shared.consumer)?;
        // librdkafka resets the identity on its own thread when the coordinator evicts the
        // member (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, a leave after max.poll.interval.ms),
        // before any rebalance reaches the application. Such an identity is no member's: the
        // group coordinator takes transactional offsets with generation -1 and no member id
        // without checking membership (a group-less client's commit), so it would fence
        // nothing.
        if generation < 0 || member_id.is_empty() {
            return None;
        }
        let native = shared.consumer.group_metadata()?;
        Some(GroupMetadata { group_id, generation, member_id, native: Some(Arc::new(native)) })
    }

    async fn close(&mut self) -> KafkaResult<()> {
        // What a prefetch found no longer matters: the consumer closes either way.
        let _ = self.settle_prefetch().await;
        let Some(shared) = self.shared.take() else { return Ok(()) };
        self.assigned.clear();
        self.paused.clear();
        self.known.clear();
        // Dropping the last handle closes the consumer (revoke, leave the group, destroy) on a
        // thread of its own (see `Shared`'s `Drop`). Another handle may still be out (a cancelled
        // poll still running, the request that woke the fetchers after a resume): the close then
        // starts when that one is dropped. A group member waits for it either way, bounded: a
        // process that exits right after `run()` returned must have left its group (LIFE-21),
        // or the next member's rebalance waits for it until its session expires (seen on 3 of 6
        // clean restarts of the restore bench; `life_21_a_clean_stop_leaves_the_group` found the
        // member still listed after `run()` on its first turn). A group-less consumer has nothing
        // to leave and does not wait (the bootstrap's reader would wait ~0.5 s for the wake-up
        // request its last resume sent). librdkafka's close can block for good: past the bound
        // it goes on in the background and the caller learns it did not finish.
        if Arc::strong_count(&shared) > 1 && shared.groupless {
            // No handle is made from nothing, so a count of one cannot rise again; a count above
            // one may fall meanwhile, and then this drop closes it, unawaited.
            drop(shared);
            return Ok(());
        }
        let (done, closed) = tokio::sync::oneshot::channel();
        *lock(&shared.closed) = Some(done);
        drop(shared);
        match tokio::time::timeout(CLOSE_BOUND, closed).await {
            // A dropped sender: the close thread did not start, and the client was closed in
            // place.
            Ok(_) => Ok(()),
            Err(_) => {
                tracing::warn!(consumer = %self.context(), "closing the consumer did not finish within {CLOSE_BOUND:?}");
                Err(KafkaError::new(
                    KafkaErrorKind::Retriable,
                    "close",
                    format!("librdkafka did not finish closing the consumer within {CLOSE_BOUND:?}"),
                )
                .with_context(self.context()))
            }
        }
    }
}

/// Partition count of `topic` and whether every partition has a leader, from fresh metadata;
/// `None` when the topic does not exist. Retries briefly while metadata is incomplete.
pub(super) fn partition_count<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    settle: Duration,
) -> KafkaResult<Option<(u32, bool)>> {
    let deadline = Instant::now() + settle;
    loop {
        let metadata = retry_read(|timeout| {
            client
                .fetch_metadata(Some(topic), timeout)
                .map_err(|e| rd_error("partition_count", &e, None).with_context(topic.to_owned()))
        })?;
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

/// How long [`Consumer::close`] waits for librdkafka to close a consumer.
const CLOSE_BOUND: Duration = Duration::from_secs(30);

/// The high watermark of `target` as `consumer` sees it (the last stable offset for a
/// read_committed consumer), retrying transient errors within [`READ_RETRY_BUDGET`]. Blocking.
fn high_watermark<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    target: &TopicPartition,
    operation: &'static str,
) -> KafkaResult<i64> {
    retry_read(|timeout| {
        consumer
            .fetch_watermarks(&target.topic, target.partition, timeout)
            .map(|(_, high)| high)
            .map_err(|e| rd_error(operation, &e, None).with_context(target.to_string()))
    })
}

/// `ListOffsets(which)` of every partition of `targets` at once (one request per leader), in
/// their order, retrying transient errors (the whole list's, or one partition's) within
/// [`READ_RETRY_BUDGET`]. Blocking.
fn list_offsets<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    targets: &[TopicPartition],
    which: Offset,
    operation: &'static str,
) -> KafkaResult<Vec<i64>> {
    retry_read(|timeout| {
        let mut tpl = TopicPartitionList::new();
        for target in targets {
            tpl.add_partition_offset(&target.topic, target.partition, which)
                .map_err(|e| rd_error(operation, &e, None).with_context(target.to_string()))?;
        }
        let answered = consumer
            .offsets_for_times(tpl, timeout)
            .map_err(|e| rd_error(operation, &e, None).with_context(format!("{} partitions", targets.len())))?;
        targets
            .iter()
            .map(|target| {
                let element = answered
                    .find_partition(&target.topic, target.partition)
                    .ok_or_else(|| KafkaError::new(KafkaErrorKind::Retriable, operation, "no answer"))?;
                element.error().map_err(|e| rd_error(operation, &e, None).with_context(target.to_string()))?;
                match element.offset() {
                    Offset::Offset(offset) => Ok(offset),
                    other => Err(KafkaError::new(
                        KafkaErrorKind::Retriable,
                        operation,
                        format!("the broker answered {other:?}"),
                    )
                    .with_context(target.to_string())),
                }
            })
            .collect::<KafkaResult<Vec<i64>>>()
    })
}

/// Wakes the broker threads that fetch `partitions`, just resumed, by asking their leaders for
/// the partitions' end offsets (the answer is not needed; nothing waits for it).
///
/// librdkafka resumes a partition by clearing its pause flag only: a broker thread that went
/// idle while every partition it fetches was paused decides again what to fetch on its next
/// wake-up — I/O, an operation for it, or at the latest after 1 s (its fixed idle timeout).
/// Measured on a new application's start-up (`eos_side_by_side`): the fetch went out ~1 s after
/// the tasks resumed in most runs, and the first batch missed the main loop's first poll. Any
/// request for the broker wakes it, and it then fetches the resumed partitions at once. The
/// request holds a handle of the consumer until it is answered (within [`WAKE_TIMEOUT`]): a
/// close just after a resume finishes when the last handle drops, off the runtime either way.
fn wake_fetchers(shared: &Arc<Shared>, partitions: &[TopicPartition]) {
    if partitions.is_empty() {
        return;
    }
    let shared = shared.clone();
    let mut ends = TopicPartitionList::new();
    for partition in partitions {
        // Fails only for an offset librdkafka cannot represent; `End` is one it can.
        let _ = ends.add_partition_offset(&partition.topic, partition.partition, Offset::End);
    }
    let ask = move || {
        if let Err(error) = shared.consumer.offsets_for_times(ends, WAKE_TIMEOUT) {
            tracing::debug!(client = &*shared.ctx().log.client, %error, "waking the fetchers of resumed partitions");
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(ask);
        }
        Err(_) => ask(),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A client whose calls fail as configured.
    #[derive(Default)]
    struct Failing {
        assign: bool,
        pause: bool,
        unassign: bool,
        unassigned: Cell<bool>,
        /// The group handler has terminated: any assign or unassign would hang.
        closed: bool,
        called: Cell<bool>,
    }

    fn failure() -> RdError {
        RdError::Subscription("injected".into())
    }

    impl RebalanceClient for Failing {
        fn assign(&self, _: &TopicPartitionList) -> Result<(), RdError> {
            self.called.set(true);
            if self.assign {
                Err(failure())
            } else {
                Ok(())
            }
        }
        fn pause(&self, _: &TopicPartitionList) -> Result<(), RdError> {
            if self.pause {
                Err(failure())
            } else {
                Ok(())
            }
        }
        fn unassign(&self) -> Result<(), RdError> {
            self.called.set(true);
            self.unassigned.set(true);
            if self.unassign {
                Err(failure())
            } else {
                Ok(())
            }
        }
        fn assignment(&self) -> Result<TopicPartitionList, RdError> {
            Ok(rd_partitions(&[TopicPartition::new("in", 0)]))
        }
        fn closed(&self) -> bool {
            self.closed
        }
        fn generation(&self) -> i32 {
            7
        }
    }

    fn tpl() -> TopicPartitionList {
        rd_partitions(&[TopicPartition::new("in", 0), TopicPartition::new("in", 1)])
    }

    const ASSIGN: RDKafkaRespErr = RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    const REVOKE: RDKafkaRespErr = RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS;

    #[test]
    fn trx_34_a_failed_assign_is_fatal_and_queues_no_assignment() {
        let ctx = ConsumerCtx::new("pod-0", false, "127.0.0.1:9092");
        ctx.on_rebalance(&Failing { assign: true, ..Failing::default() }, ASSIGN, &tpl());
        assert!(lock(&ctx.events).is_empty(), "no partitions are handed to the engine");
        let error = ctx.take_failure().expect("the failure waits for the next poll");
        assert_eq!((error.kind(), error.operation()), (KafkaErrorKind::Fatal, "rebalance"));
        assert!(error.to_string().contains("assigning partitions"), "{error}");
        assert!(ctx.take_failure().is_none(), "reported once");
    }

    #[test]
    fn trx_34_a_failed_pause_is_fatal_too() {
        let ctx = ConsumerCtx::new("pod-0", false, "127.0.0.1:9092");
        ctx.on_rebalance(&Failing { pause: true, ..Failing::default() }, ASSIGN, &tpl());
        assert!(lock(&ctx.events).is_empty());
        assert!(ctx.take_failure().is_some_and(|e| e.to_string().contains("pausing")));
    }

    #[test]
    fn trx_34_a_failed_unassign_still_revokes() {
        let ctx = ConsumerCtx::new("pod-0", false, "127.0.0.1:9092");
        ctx.on_rebalance(&Failing { unassign: true, ..Failing::default() }, REVOKE, &tpl());
        assert_eq!(
            *lock(&ctx.events),
            vec![Rebalance::Revoked { partitions: vec![TopicPartition::new("in", 0), TopicPartition::new("in", 1)] }]
        );
        assert!(ctx.take_failure().is_some());
    }

    #[test]
    fn rebalances_that_work_queue_their_events() {
        let ctx = ConsumerCtx::new("pod-0", false, "127.0.0.1:9092");
        let client = Failing::default();
        ctx.on_rebalance(&client, ASSIGN, &tpl());
        ctx.on_rebalance(&client, REVOKE, &tpl());
        let events = lock(&ctx.events).clone();
        assert!(matches!(&events[0], Rebalance::Assigned { generation: 7, partitions } if partitions.len() == 2));
        assert!(matches!(&events[1], Rebalance::Revoked { .. }));
        assert!(client.unassigned.get());
        assert!(ctx.take_failure().is_none());
    }

    /// A rebalance event served while the consumer closes, after librdkafka's group handler
    /// terminated: an assign or unassign would wait for good for its reply (librdkafka#4884), so
    /// neither is called, and nothing reaches the engine or fails it.
    #[test]
    fn a_rebalance_after_the_group_handler_terminated_calls_nothing() {
        let ctx = ConsumerCtx::new("pod-0", false, "127.0.0.1:9092");
        for event in [ASSIGN, REVOKE, RDKafkaRespErr::RD_KAFKA_RESP_ERR__FATAL] {
            let client = Failing { closed: true, ..Failing::default() };
            ctx.on_rebalance(&client, event, &tpl());
            assert!(!client.called.get(), "{event:?}: no call into the terminated group handler");
        }
        assert!(lock(&ctx.events).is_empty());
        assert!(ctx.take_failure().is_none());
    }

    /// TRX-33: a revocation served while a commit holds the gate waits for it; only then are
    /// the partitions given up (librdkafka rejoins as soon as the callback returns) and the
    /// event queued.
    #[test]
    fn trx_33_a_revocation_waits_for_the_commit_holding_the_gate() {
        let ctx = Arc::new(ConsumerCtx::new("pod-0", false, "127.0.0.1:9092"));
        let gate = RevocationGate::default();
        *lock(&ctx.gate) = Some(gate.clone());
        let commit = gate.hold();
        let revoking = {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                let client = Failing::default();
                ctx.on_rebalance(&client, REVOKE, &tpl());
                client.unassigned.get()
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!revoking.is_finished(), "the revocation waits while the commit holds the gate");
        assert!(lock(&ctx.events).is_empty());
        drop(commit);
        assert!(revoking.join().expect("callback thread"), "unassigned once the commit finished");
        assert!(matches!(&lock(&ctx.events)[..], [Rebalance::Revoked { .. }]));
        // Without a hold out, a revocation does not wait.
        let client = Failing::default();
        ctx.on_rebalance(&client, REVOKE, &tpl());
        assert!(client.unassigned.get());
    }
}
