//! The producer: idempotent always, transactional with a transactional id.
//!
//! `send` resolves the partition (Kafka's default partitioner), queues the record and returns a
//! delivery future; a background sender task drains the queue one batch at a time (one
//! in-flight request per producer, so batches of a partition arrive in order) and retries a
//! batch with the same sequence numbers until the broker acks it, so a lost response never
//! appends twice. The transactional state machine is client-side, like librdkafka's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use flechtwerk::kafka::{
    Delivered, DeliveryFuture, GroupMetadata, KafkaError, KafkaErrorKind, KafkaResult, Producer, ProducerConfig,
    ProducerRecord, TopicPartition,
};
use tokio::sync::{oneshot, Notify};

use super::admin::partition_count;
use super::{unexpected, Conn, DELIVERY_TIMEOUT};
use crate::cluster::protocol::{NewRecord, ProduceRequest, ProducerIdentity, Reply, Request, TxnOffsetCommitRequest};

/// Records per produce request.
pub const BATCH_RECORDS_MAX: usize = 500;

/// Budget of a transactional coordinator call (InitProducerId, offsets, EndTxn), including
/// retries of CONCURRENT_TRANSACTIONS and lost requests.
pub const TRANSACTION_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How often `flush` re-checks the queue while waiting.
const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Kafka's default partitioner for a keyed record: murmur2 of the key bytes, positive, modulo
/// the partition count.
pub fn default_partition(key: &[u8], partitions: u32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    ((flechtwerk::murmur2(key) as u32 & 0x7fff_ffff) % partitions) as i32
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Uninitialized,
    Ready,
    InTransaction,
    Committing,
    Aborting,
}

struct Queued {
    partition: TopicPartition,
    record: NewRecord,
    reply: oneshot::Sender<KafkaResult<Delivered>>,
}

struct State {
    identity: Option<ProducerIdentity>,
    phase: Phase,
    /// Fenced or fatal: every later call fails with it.
    fatal: Option<KafkaError>,
    /// The current transaction cannot commit.
    abortable: Option<KafkaError>,
    /// The broker may hold something of the current transaction.
    touched: bool,
    /// A batch's fate is unknown: sequence numbers need a new epoch (KIP-360 style).
    epoch_bump_needed: bool,
    queue: VecDeque<Queued>,
    in_flight: usize,
    sequences: BTreeMap<TopicPartition, i32>,
    partition_counts: BTreeMap<String, u32>,
    round_robin: u32,
    sender_running: bool,
    closed: bool,
}

struct Shared {
    conn: Conn,
    config: ProducerConfig,
    state: Mutex<State>,
    work: Notify,
    idle: Notify,
}

/// The producer handed to the engine.
pub(crate) struct SimProducer {
    shared: Arc<Shared>,
}

fn invalid_state(operation: &'static str, message: impl Into<String>, id: &str) -> KafkaError {
    KafkaError::new(KafkaErrorKind::Fatal, operation, message).with_context(format!("transactional id {id}"))
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("producer state lock")
    }

    fn context(&self) -> String {
        match &self.config.transactional_id {
            Some(id) => format!("transactional id {id}"),
            None => format!("producer {}", self.conn.client_id()),
        }
    }

    fn txn_id(&self) -> &str {
        self.config.transactional_id.as_deref().unwrap_or_default()
    }

    /// Records a failure of a transactional call: fenced and fatal errors end the producer,
    /// abortable ones the transaction.
    fn note_failure(&self, error: &KafkaError) {
        let mut state = self.state();
        match error.kind() {
            KafkaErrorKind::Fenced | KafkaErrorKind::Fatal => state.fatal = Some(error.clone()),
            KafkaErrorKind::Abortable => state.abortable = Some(error.clone()),
            _ => {}
        }
    }

    /// A new producer session (`bump` false: fences the id's current producer), or a bump of
    /// this producer's own epoch (KIP-360: refused if another session fenced it meanwhile).
    async fn init_producer_id(&self, operation: &'static str, bump: bool) -> KafkaResult<ProducerIdentity> {
        let expected = if bump && self.config.transactional_id.is_some() { self.state().identity } else { None };
        let request = Request::InitProducerId {
            transactional_id: self.config.transactional_id.clone(),
            expected,
            transaction_timeout: self.config.transaction_timeout,
        };
        match self.conn.call(operation, &self.context(), request, TRANSACTION_CALL_TIMEOUT).await {
            Ok(Reply::ProducerId(identity)) => {
                let mut state = self.state();
                state.identity = Some(identity);
                state.sequences.clear();
                state.epoch_bump_needed = false;
                Ok(identity)
            }
            Ok(other) => Err(unexpected(operation, &other)),
            Err(error) => {
                self.note_failure(&error);
                Err(error)
            }
        }
    }

    async fn resolve_partition(&self, record: &ProducerRecord) -> KafkaResult<i32> {
        let cached = self.state().partition_counts.get(&record.topic).copied();
        let count = match cached {
            Some(count) => count,
            None => {
                let count = partition_count(&self.conn, "send", &record.topic).await?.ok_or_else(|| {
                    KafkaError::new(KafkaErrorKind::UnknownTopic, "send", "topic does not exist")
                        .with_context(record.topic.clone())
                })?;
                self.state().partition_counts.insert(record.topic.clone(), count);
                count
            }
        };
        match (record.partition, &record.key) {
            (Some(p), _) if p >= 0 && (p as u32) < count => Ok(p),
            (Some(p), _) => Err(KafkaError::new(
                KafkaErrorKind::UnknownTopic,
                "send",
                format!("partition {p} does not exist ({count} partitions)"),
            )
            .with_context(record.topic.clone())),
            (None, Some(key)) => Ok(default_partition(key, count)),
            (None, None) => {
                let mut state = self.state();
                state.round_robin = state.round_robin.wrapping_add(1);
                Ok((state.round_robin % count) as i32)
            }
        }
    }

    /// Waits until nothing is queued or in flight.
    async fn drained(&self) {
        loop {
            let notified = self.idle.notified();
            {
                let state = self.state();
                if state.queue.is_empty() && state.in_flight == 0 {
                    return;
                }
            }
            let _ = tokio::time::timeout(FLUSH_CHECK_INTERVAL, notified).await;
        }
    }

    fn fail_queued(&self, error: &KafkaError) {
        let queued: Vec<Queued> = self.state().queue.drain(..).collect();
        for q in queued {
            let _ = q.reply.send(Err(error.clone()));
        }
        self.idle.notify_waiters();
    }
}

/// The next batch: the head record's partition, up to [`BATCH_RECORDS_MAX`] of its queued
/// records in order.
fn take_batch(state: &mut State) -> Option<(TopicPartition, Vec<Queued>)> {
    let partition = state.queue.front()?.partition.clone();
    let mut batch = Vec::new();
    let mut rest = VecDeque::with_capacity(state.queue.len());
    for q in state.queue.drain(..) {
        if q.partition == partition && batch.len() < BATCH_RECORDS_MAX {
            batch.push(q);
        } else {
            rest.push_back(q);
        }
    }
    state.queue = rest;
    state.in_flight += batch.len();
    Some((partition, batch))
}

async fn sender(shared: Arc<Shared>) {
    loop {
        let notified = shared.work.notified();
        let next = {
            let mut state = shared.state();
            if state.closed && state.queue.is_empty() {
                state.sender_running = false;
                return;
            }
            take_batch(&mut state)
        };
        match next {
            Some((partition, batch)) => send_batch(&shared, partition, batch).await,
            None => notified.await,
        }
    }
}

async fn send_batch(shared: &Shared, partition: TopicPartition, batch: Vec<Queued>) {
    let transactional = shared.config.transactional_id.is_some();
    let needs_identity = {
        let state = shared.state();
        state.identity.is_none() || (!transactional && state.epoch_bump_needed)
    };
    let result = if needs_identity && !transactional {
        shared.init_producer_id("send", false).await.map(|_| ())
    } else {
        Ok(())
    };
    let result = match result {
        Ok(()) => produce(shared, &partition, &batch).await,
        Err(error) => Err(error),
    };
    let count = batch.len();
    for (i, q) in batch.into_iter().enumerate() {
        let delivered =
            result.clone().map(|base| Delivered { partition: partition.partition, offset: base + i as i64 });
        let _ = q.reply.send(delivered);
    }
    let mut state = shared.state();
    state.in_flight -= count;
    if state.queue.is_empty() && state.in_flight == 0 {
        shared.idle.notify_waiters();
    }
}

/// Sends one batch until acked or failed; returns its base offset.
async fn produce(shared: &Shared, partition: &TopicPartition, batch: &[Queued]) -> KafkaResult<i64> {
    let transactional = shared.config.transactional_id.is_some();
    let (identity, base_sequence) = {
        let state = shared.state();
        if let Some(fatal) = &state.fatal {
            return Err(fatal.clone());
        }
        let identity = state.identity.ok_or_else(|| invalid_state("send", "no producer id", shared.txn_id()))?;
        (identity, state.sequences.get(partition).copied().unwrap_or(0))
    };
    let request = Request::Produce(ProduceRequest {
        producer: identity,
        transactional_id: shared.config.transactional_id.clone(),
        partition: partition.clone(),
        base_sequence,
        records: batch.iter().map(|q| q.record.clone()).collect(),
    });
    let result = shared.conn.call("send", &partition.to_string(), request, DELIVERY_TIMEOUT).await;
    let mut state = shared.state();
    match result {
        Ok(Reply::Produced { base_offset }) => {
            state.sequences.insert(partition.clone(), base_sequence + batch.len() as i32);
            state.touched |= transactional;
            Ok(base_offset)
        }
        Ok(other) => Err(unexpected("send", &other)),
        Err(error) => {
            // Whatever the error, an earlier attempt of this batch (whose response was lost)
            // may be in the log: its sequence numbers are burnt, and the broker may hold the
            // transaction open without the client knowing. Reusing the sequences would make the
            // broker take the next, different batch for a duplicate of this one and drop it
            // (mqtt seed 6836: a Produce answered Fatal after a lost response; the abort
            // skipped EndTxn, the next batch reused sequence 15 and was "deduplicated" into the
            // old, still open transaction). The abort therefore bumps the epoch
            // (InitProducerId, KIP-360), which aborts whatever the coordinator holds open; an
            // EndTxn(abort) instead would be refused (INVALID_TXN_STATE) when nothing arrived.
            state.epoch_bump_needed = true;
            Err(classify_delivery_error(&mut state, error, transactional))
        }
    }
}

/// In a transaction every failed delivery makes the transaction abortable (like librdkafka);
/// fencing ends the producer.
fn classify_delivery_error(state: &mut State, error: KafkaError, transactional: bool) -> KafkaError {
    if error.is_fenced() {
        state.fatal = Some(error.clone());
        return error;
    }
    if !transactional {
        return error;
    }
    let abortable = KafkaError::new(KafkaErrorKind::Abortable, "send", error.to_string());
    let abortable = match error.code() {
        Some(code) => abortable.with_code(code),
        None => abortable,
    };
    let abortable = match error.context() {
        Some(context) => abortable.with_context(context.to_owned()),
        None => abortable,
    };
    state.abortable.get_or_insert_with(|| abortable.clone());
    abortable
}

impl SimProducer {
    pub(crate) fn new(conn: Conn, config: ProducerConfig) -> Self {
        let phase = if config.transactional_id.is_some() { Phase::Uninitialized } else { Phase::Ready };
        let state = State {
            identity: None,
            phase,
            fatal: None,
            abortable: None,
            touched: false,
            epoch_bump_needed: false,
            queue: VecDeque::new(),
            in_flight: 0,
            sequences: BTreeMap::new(),
            partition_counts: BTreeMap::new(),
            round_robin: 0,
            sender_running: false,
            closed: false,
        };
        SimProducer {
            shared: Arc::new(Shared {
                conn,
                config,
                state: Mutex::new(state),
                work: Notify::new(),
                idle: Notify::new(),
            }),
        }
    }

    /// Checks the producer is usable and in `allowed` (transactional producers only).
    fn expect_phase(&self, operation: &'static str, allowed: &[Phase]) -> KafkaResult<()> {
        let shared = &self.shared;
        let Some(id) = &shared.config.transactional_id else {
            return Err(KafkaError::new(KafkaErrorKind::Fatal, operation, "not a transactional producer")
                .with_context(shared.context()));
        };
        let state = shared.state();
        if let Some(fatal) = &state.fatal {
            return Err(fatal.clone());
        }
        if state.closed {
            return Err(invalid_state(operation, "the producer is closed", id));
        }
        if !allowed.contains(&state.phase) {
            return Err(invalid_state(operation, format!("not allowed in state {:?}", state.phase), id));
        }
        Ok(())
    }

    fn set_phase(&self, phase: Phase) {
        self.shared.state().phase = phase;
    }

    async fn end_transaction(&self, operation: &'static str, commit: bool) -> KafkaResult<()> {
        let shared = &self.shared;
        let (touched, identity) = {
            let state = shared.state();
            (state.touched, state.identity)
        };
        if !touched {
            return Ok(());
        }
        let identity = identity.expect("a transaction runs after init_transactions");
        let request = Request::EndTxn { transactional_id: shared.txn_id().to_owned(), producer: identity, commit };
        match shared.conn.call(operation, &shared.context(), request, TRANSACTION_CALL_TIMEOUT).await {
            // transaction.version 2: the coordinator bumped the epoch; the next transaction
            // runs under it, its sequence numbers from 0.
            Ok(Reply::ProducerId(bumped)) => {
                let mut state = shared.state();
                state.identity = Some(bumped);
                state.sequences.clear();
                state.epoch_bump_needed = false;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(error) => {
                shared.note_failure(&error);
                Err(error)
            }
        }
    }

    fn finish_transaction(&self) {
        let mut state = self.shared.state();
        state.phase = Phase::Ready;
        state.touched = false;
        state.abortable = None;
    }
}

impl Drop for SimProducer {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.work.notify_one();
    }
}

#[async_trait]
impl Producer for SimProducer {
    fn transactional_id(&self) -> Option<&str> {
        self.shared.config.transactional_id.as_deref()
    }

    async fn init_transactions(&self) -> KafkaResult<()> {
        self.expect_phase("init_transactions", &[Phase::Uninitialized])?;
        self.shared.init_producer_id("init_transactions", false).await?;
        self.set_phase(Phase::Ready);
        Ok(())
    }

    async fn begin_transaction(&self) -> KafkaResult<()> {
        self.expect_phase("begin_transaction", &[Phase::Ready])?;
        let mut state = self.shared.state();
        state.phase = Phase::InTransaction;
        state.touched = false;
        state.abortable = None;
        Ok(())
    }

    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture> {
        let shared = &self.shared;
        if shared.config.transactional_id.is_some() {
            self.expect_phase("send", &[Phase::InTransaction])?;
            if let Some(abortable) = shared.state().abortable.clone() {
                return Err(abortable);
            }
        } else if shared.state().closed {
            return Err(
                KafkaError::new(KafkaErrorKind::Fatal, "send", "the producer is closed").with_context(shared.context())
            );
        }
        let size = record.key.as_ref().map_or(0, |k| k.len())
            + record.value.as_ref().map_or(0, |v| v.len())
            + record.headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len())).sum::<usize>();
        if size > super::MESSAGE_MAX_BYTES {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "send",
                format!("message size {size} exceeds message.max.bytes {}", super::MESSAGE_MAX_BYTES),
            )
            .with_context(format!("{} {}", record.topic, shared.context())));
        }
        let partition = TopicPartition::new(&record.topic, shared.resolve_partition(&record).await?);
        let (reply, delivery) = oneshot::channel();
        let new = NewRecord {
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp_ms: record.timestamp_ms,
        };
        let start_sender = {
            let mut state = shared.state();
            state.queue.push_back(Queued { partition, record: new, reply });
            !std::mem::replace(&mut state.sender_running, true)
        };
        if start_sender {
            tokio::spawn(sender(shared.clone()));
        }
        shared.work.notify_one();
        let context = shared.context();
        Ok(Box::pin(async move {
            delivery.await.unwrap_or_else(|_| {
                Err(KafkaError::new(KafkaErrorKind::Fatal, "send", "the producer was closed before delivery")
                    .with_context(context))
            })
        }))
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()> {
        self.expect_phase("send_offsets_to_transaction", &[Phase::InTransaction])?;
        let shared = &self.shared;
        let identity = {
            let state = shared.state();
            if let Some(abortable) = &state.abortable {
                return Err(abortable.clone());
            }
            state.identity.expect("initialized")
        };
        let request = Request::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: shared.txn_id().to_owned(),
            producer: identity,
            group: group.group_id.clone(),
            generation: group.generation,
            member_id: group.member_id.clone(),
            offsets: offsets.to_vec(),
        });
        let context = format!("{}, group {}", shared.context(), group.group_id);
        let result = shared.conn.call("send_offsets_to_transaction", &context, request, TRANSACTION_CALL_TIMEOUT).await;
        shared.state().touched = true;
        result.map(|_| ()).inspect_err(|error| shared.note_failure(error))
    }

    async fn commit_transaction(&self) -> KafkaResult<()> {
        self.expect_phase("commit_transaction", &[Phase::InTransaction, Phase::Committing])?;
        if let Some(abortable) = self.shared.state().abortable.clone() {
            return Err(abortable);
        }
        self.set_phase(Phase::Committing);
        self.shared.drained().await;
        let failed = self.shared.state().abortable.clone();
        if let Some(abortable) = failed {
            self.set_phase(Phase::InTransaction);
            return Err(abortable);
        }
        self.end_transaction("commit_transaction", true).await?;
        self.finish_transaction();
        Ok(())
    }

    async fn abort_transaction(&self) -> KafkaResult<()> {
        self.expect_phase("abort_transaction", &[Phase::InTransaction, Phase::Committing, Phase::Aborting])?;
        self.set_phase(Phase::Aborting);
        let purged = KafkaError::new(KafkaErrorKind::Abortable, "send", "purged: the transaction was aborted")
            .with_context(self.shared.context());
        self.shared.fail_queued(&purged);
        self.shared.drained().await;
        self.end_transaction("abort_transaction", false).await?;
        if self.shared.state().epoch_bump_needed {
            self.shared.init_producer_id("abort_transaction", true).await?;
        }
        self.finish_transaction();
        Ok(())
    }

    async fn flush(&self) -> KafkaResult<()> {
        self.shared.drained().await;
        Ok(())
    }

    async fn close(&self) {
        let transactional = self.shared.config.transactional_id.is_some();
        if !transactional {
            let _ = tokio::time::timeout(DELIVERY_TIMEOUT, self.shared.drained()).await;
        }
        self.shared.state().closed = true;
        let closed = KafkaError::new(KafkaErrorKind::Fatal, "send", "the producer was closed")
            .with_context(self.shared.context());
        self.shared.fail_queued(&closed);
        self.shared.work.notify_one();
    }
}
