//! One Kafka transaction of an owner: a transformer task's batch, an extractor token's page.
//!
//! The rules every transaction of the engine follows, written once:
//!
//! - **Begun lazily** (EXT-11): by the first record sent or the first offsets added, so nothing
//!   to write opens nothing.
//! - **Every delivery awaited before the commit** (EXT-13, USR-06): a record the broker did not
//!   take fails the transaction instead of committing around a hole.
//! - **Aborted on every error path**: an error after the transaction began aborts it at once
//!   (bounded by [`ABORT_TIMEOUT`]), and the original error is what the caller sees. Until the
//!   abort, the open transaction holds back the last stable offset of every partition it wrote,
//!   so every `read_committed` reader of the outputs and the changelog would stall.
//! - **At most one open transaction per producer**: the owner's [`TxnState`] records whether
//!   one is open, so a future dropped mid-transaction (a cancelled run, an abandoned batch)
//!   still leaves a trace that the owner's teardown acts on ([`abort_open`]).
//!
//! Without a transactional producer (at-least-once mode) the same code sends idempotently and
//! awaits every delivery; there is nothing to begin, commit or abort.

use std::collections::BTreeMap;

use super::bounds::ABORT_TIMEOUT;
use crate::error::Error;
use crate::kafka::{DeliveryFuture, GroupMetadata, Producer, ProducerRecord, TopicPartition};
use crate::observer::Observer;

/// Whether an owner's producer has a transaction open. Lives with the owner (the task, the
/// token), outliving any one [`Txn`].
#[derive(Debug, Default)]
pub(crate) struct TxnState {
    open: bool,
    /// The last abort failed or timed out: the producer may be unusable (a fenced producer, a
    /// commit whose outcome is unknown).
    abort_failed: bool,
}

impl TxnState {
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Whether the last abort of this owner failed (reset by [`TxnState::clear_abort_failed`]).
    pub(crate) fn abort_failed(&self) -> bool {
        self.abort_failed
    }

    pub(crate) fn clear_abort_failed(&mut self) {
        self.abort_failed = false;
    }
}

/// One transaction in the making.
pub(crate) struct Txn<'a> {
    producer: &'a dyn Producer,
    state: &'a mut TxnState,
    transactional: bool,
    observer: &'a dyn Observer,
    deliveries: Vec<DeliveryFuture>,
    /// The topic whose delivered offsets are tracked (a transformer's changelog, whose
    /// positions the stores record: STO-05), if any.
    tracked: Option<String>,
    /// The deliveries of the tracked topic's records.
    changelog: Vec<DeliveryFuture>,
    /// Per partition of the tracked topic, the offset after the last record delivered.
    changelog_ends: BTreeMap<i32, i64>,
}

impl<'a> Txn<'a> {
    /// A transaction on `producer` (transactional when it has a transactional id).
    pub(crate) fn new(producer: &'a dyn Producer, state: &'a mut TxnState, observer: &'a dyn Observer) -> Self {
        assert!(!state.open, "one open transaction per producer: the previous one was neither committed nor aborted");
        let transactional = producer.transactional_id().is_some();
        Txn {
            producer,
            state,
            transactional,
            observer,
            deliveries: Vec::new(),
            tracked: None,
            changelog: Vec::new(),
            changelog_ends: BTreeMap::new(),
        }
    }

    async fn begin_if_needed(&mut self) -> Result<(), Error> {
        if self.transactional && !self.state.open {
            // Marked open before the call: if it fails half-way, the abort is still tried.
            self.state.open = true;
            self.producer.begin_transaction().await?;
        }
        Ok(())
    }

    /// Hands a record to the producer (beginning the transaction if needed); its delivery is
    /// awaited at the commit.
    pub(crate) async fn send(&mut self, record: ProducerRecord) -> Result<(), Error> {
        self.begin_if_needed().await?;
        let tracked = self.tracked.as_deref() == Some(record.topic.as_str());
        let delivery = self.producer.send(record).await?;
        if tracked {
            self.changelog.push(delivery);
        } else {
            self.deliveries.push(delivery);
        }
        Ok(())
    }

    /// Tracks the delivered offsets of `topic`'s records (see [`Txn::take_tracked_ends`]).
    pub(crate) fn track(&mut self, topic: &str) {
        self.tracked = Some(topic.to_owned());
    }

    /// Per partition of the tracked topic, the offset after the last of its records delivered
    /// in this transaction (taken: the next transaction starts empty).
    pub(crate) fn take_tracked_ends(&mut self) -> BTreeMap<i32, i64> {
        std::mem::take(&mut self.changelog_ends)
    }

    /// Sends every pending record at once and awaits every delivery, recording the tracked
    /// topic's offsets. At once, not after the client's batching delay (librdkafka's
    /// `linger.ms`, 5 ms by default, which every commit used to wait out): the writes are
    /// complete, and the commit waits for their deliveries anyway.
    async fn deliver_all(&mut self) -> Result<(), Error> {
        let deliveries = std::mem::take(&mut self.deliveries);
        let changelog = std::mem::take(&mut self.changelog);
        if deliveries.is_empty() && changelog.is_empty() {
            return Ok(());
        }
        self.producer.flush().await?;
        for delivery in deliveries {
            delivery.await?;
        }
        for delivery in changelog {
            let delivered = delivery.await?;
            let end = self.changelog_ends.entry(delivered.partition).or_insert(0);
            *end = (*end).max(delivered.offset + 1);
        }
        Ok(())
    }

    /// Adds the group's offsets to the transaction: they commit with it, or not at all. The
    /// records sent so far are delivered meanwhile: the offsets' two round trips (to the
    /// transaction coordinator, then to the group coordinator) and the records' own overlap
    /// instead of following each other, and the commit finds them delivered.
    pub(crate) async fn send_offsets(
        &mut self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> Result<(), Error> {
        assert!(self.transactional, "offsets ride a transaction only with a transactional producer");
        self.begin_if_needed().await?;
        let producer = self.producer;
        let (delivered, added) =
            futures::join!(self.deliver_all(), producer.send_offsets_to_transaction(offsets, group));
        delivered?;
        added?;
        Ok(())
    }

    /// Awaits every delivery, then commits (when a transaction is open). Returns whether a
    /// transaction committed.
    async fn commit(&mut self) -> Result<bool, Error> {
        self.deliver_all().await?;
        crate::engine::buggify::point("txn.before_commit").await;
        if !self.state.open {
            return Ok(false);
        }
        self.producer.commit_transaction().await?;
        self.state.open = false;
        self.observer.transaction_committed();
        Ok(true)
    }

    /// The one exit of a transaction: commits what `filled` (the result of writing it) left, or
    /// aborts and returns the error. Returns whether a transaction committed. Afterwards no
    /// transaction is open, and the same `Txn` can write the next one (an extractor's pages).
    pub(crate) async fn finish(&mut self, filled: Result<(), Error>) -> Result<bool, Error> {
        let result = match filled {
            Ok(()) => self.commit().await,
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            // Pending deliveries resolve with the abort; nobody waits for them.
            self.deliveries.clear();
            self.changelog.clear();
            self.changelog_ends.clear();
            abort_open(self.producer, &mut *self.state, &error).await;
            return Err(error);
        }
        result
    }
}

/// Aborts the open transaction of `producer`, if any, within [`ABORT_TIMEOUT`]; `cause` is why
/// (logged). Best effort: a fenced producer cannot abort, and the coordinator aborts the
/// transaction anyway (at the next owner's fence, or at the transaction timeout).
pub(crate) async fn abort_open(producer: &dyn Producer, state: &mut TxnState, cause: &(dyn std::fmt::Display + Sync)) {
    if !state.open {
        return;
    }
    state.open = false;
    let id = producer.transactional_id().unwrap_or_default().to_owned();
    match tokio::time::timeout(ABORT_TIMEOUT, producer.abort_transaction()).await {
        Ok(Ok(())) => tracing::info!(transactional_id = %id, %cause, "transaction aborted"),
        Ok(Err(error)) => {
            state.abort_failed = true;
            tracing::warn!(transactional_id = %id, %cause, %error, "abort failed: the coordinator aborts it later")
        }
        Err(_) => {
            state.abort_failed = true;
            tracing::warn!(
            transactional_id = %id,
            %cause,
            timeout = ?ABORT_TIMEOUT,
            "abort timed out: the coordinator aborts it later"
            )
        }
    }
}
