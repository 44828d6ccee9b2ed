//! One transformer task: an input partition number with its producer and its store (TRX-30,
//! TRX-31, TRX-33).

use std::collections::BTreeMap;

use tracing::Instrument as _;

use super::Runner;
use crate::engine::bounds::{CLOSE_TIMEOUT, TASK_TRANSACTION_TIMEOUT};
use crate::engine::buggify;
use crate::engine::settings::Guarantee;
use crate::engine::txn::{abort_open, TxnState};
use crate::error::Error;
use crate::kafka::read::{read_to_end, ReadError};
use crate::kafka::{ConsumerConfig, Producer, ProducerConfig, TopicPartition};
use crate::observer::Observer;
use crate::stage::Transformer;
use crate::state::StateStore;
use crate::wire;

/// A started task: its producer fenced every earlier owner, its store holds the changelog.
pub(super) struct Task {
    pub(super) partition: i32,
    pub(super) producer: Box<dyn Producer>,
    pub(super) store: Box<dyn StateStore>,
    /// Whether `producer` has a transaction open (an abandoned batch leaves it open).
    pub(super) txn: TxnState,
    /// The next offset this task last committed per input partition: offsets only move forward.
    pub(super) committed: BTreeMap<TopicPartition, i64>,
}

impl Task {
    /// Records that `offsets` committed, asserting they never move backwards.
    pub(super) fn committed(&mut self, offsets: &[(TopicPartition, i64)]) {
        for (tp, next) in offsets {
            assert_eq!(tp.partition, self.partition, "task {} committed an offset of {tp}", self.partition);
            let previous = self.committed.insert(tp.clone(), *next);
            assert!(
                previous.is_none_or(|previous| previous <= *next),
                "offsets are monotonic per partition: {tp} went from {previous:?} to {next}"
            );
        }
    }

    /// Stops the task: aborts a transaction an abandoned batch left open, closes the producer,
    /// wipes the store (TRX-33). `cause` says why, for the abort's log line.
    pub(super) async fn stop(mut self, cause: &str) -> Result<(), Error> {
        abort_open(&*self.producer, &mut self.txn, &cause).await;
        if tokio::time::timeout(CLOSE_TIMEOUT, self.producer.close()).await.is_err() {
            tracing::warn!(partition = self.partition, "closing the task producer timed out");
        }
        self.store.wipe()?;
        Ok(())
    }
}

impl<S: Transformer> Runner<S> {
    /// Starts task `partition` in the order TRX-31 fixes: producer (its `init_transactions`
    /// fences the previous owner and aborts its open transaction) → store → restore of
    /// changelog partition `partition` to its last stable offset. Restoring before the fence
    /// could miss the previous owner's last commit.
    #[tracing::instrument(
        name = "task.start",
        skip(self),
        fields(transactional_id = tracing::field::Empty, restored = tracing::field::Empty)
    )]
    pub(super) async fn start_task(&self, partition: i32) -> Result<Task, Error> {
        let settings = &self.settings;
        let client_id = settings.task_client_id(partition);
        let mut config = match settings.guarantee {
            Guarantee::ExactlyOnce => {
                ProducerConfig::transactional(client_id, settings.task_transactional_id(partition))
            }
            Guarantee::AtLeastOnce => ProducerConfig::idempotent(client_id),
        };
        config.compression = settings.compression;
        config.transaction_timeout = TASK_TRANSACTION_TIMEOUT;
        let producer = self.kafka.producer(config)?;
        buggify::point("task.before_fence").await;
        if settings.guarantee == Guarantee::ExactlyOnce {
            let id = settings.task_transactional_id(partition);
            tracing::Span::current().record("transactional_id", id.as_str());
            producer.init_transactions().instrument(tracing::info_span!("task.fence", transactional_id = id)).await?;
        }
        buggify::point("task.before_restore").await;
        let mut store = self.stores.open(&settings.application_id, partition)?;
        let restore_span = tracing::info_span!("task.restore", partition, records = tracing::field::Empty);
        let restored = self.restore(partition, store.as_mut()).instrument(restore_span.clone()).await?;
        restore_span.record("records", restored);
        tracing::Span::current().record("restored", restored);
        self.observer.state_restored(partition, restored);
        tracing::debug!(partition, restored, "task started");
        Ok(Task { partition, producer, store, txn: TxnState::default(), committed: BTreeMap::new() })
    }

    /// Replays changelog partition `partition` to its LSO into `store` (STO-11, STO-13); returns
    /// the records replayed. Values go in as bytes, decoded on first read.
    async fn restore(&self, partition: i32, store: &mut dyn StateStore) -> Result<usize, Error> {
        // The process identity itself, as Python's restore consumers have it (LIFE-04).
        let mut consumer = self.kafka.consumer(ConsumerConfig::groupless(self.settings.client_id.clone()))?;
        let changelog = TopicPartition::new(self.settings.changelog_topic(), partition);
        let read = read_to_end(consumer.as_mut(), &[changelog], |record| -> Result<(), Error> {
            let key = wire::decode_key(record.key.as_deref()).map_err(|source| Error::CorruptState {
                partition,
                key: String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned(),
                source,
            })?;
            match record.value.as_deref() {
                value if wire::is_tombstone(value) => store.delete(&key)?,
                Some(value) => store.put(&key, value)?,
                None => unreachable!("an absent value is a tombstone"),
            }
            Ok(())
        })
        .await;
        if tokio::time::timeout(CLOSE_TIMEOUT, consumer.close()).await.is_err() {
            tracing::warn!(partition, "closing the restore consumer timed out");
        }
        match read {
            Ok(summary) => Ok(usize::try_from(summary.records).expect("a partition's records fit in memory")),
            Err(ReadError::Kafka(e)) => Err(e.into()),
            Err(ReadError::Callback(e)) => Err(e),
        }
    }
}

/// The live tasks of a runner, by partition.
#[derive(Default)]
pub(super) struct Tasks {
    pub(super) live: BTreeMap<i32, Task>,
}

impl Tasks {
    /// Stops every task (TRX-33, TRX-36): never retained across a rebalance. Reports
    /// `tasks_assigned(0)` when there were any.
    pub(super) async fn stop_all(&mut self, observer: &dyn Observer, cause: &str) -> Result<(), Error> {
        if self.live.is_empty() {
            return Ok(());
        }
        // Concurrently: a shutdown's aborts and closes are bounded per task, not per instance.
        let stopped =
            futures::future::join_all(std::mem::take(&mut self.live).into_values().map(|t| t.stop(cause))).await;
        observer.tasks_assigned(0);
        stopped.into_iter().collect()
    }
}
