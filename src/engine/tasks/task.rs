//! One transformer task: an input partition number with its producer and its store (TRX-30,
//! TRX-31, TRX-33). In the per-instance shape (KIP-447, TRX-40) a task has no producer of its
//! own: the instance's one producer ([`SharedProducer`]) writes every task's transaction.

use std::collections::BTreeMap;

use tracing::Instrument as _;

use super::checkpoint::{judge, now_ms, Expected, Position};
use super::TaskRunner;
use crate::engine::bounds::{CLOSE_TIMEOUT, RESTORE_BATCH_RECORDS, TASK_TRANSACTION_TIMEOUT};
use crate::engine::buggify;
use crate::engine::settings::Guarantee;
use crate::engine::txn::{abort_open, TxnState};
use crate::error::Error;
use crate::kafka::read::{read_extents, BorrowedReader, ReadError, READ_STALL_MAX};
use crate::kafka::{Consumer, Extent, LogEnd, Producer, ProducerConfig, TopicPartition};
use crate::observer::Observer;
use crate::stage::Transformer;
use crate::state::StateStore;
use crate::wire::{self, RecordRef};

/// A started task: its producer fenced every earlier owner, its store holds the changelog.
pub(super) struct Task {
    pub(super) partition: i32,
    /// The task's own producer; `None` in the per-instance shape, where the instance's
    /// [`SharedProducer`] writes for every task.
    pub(super) producer: Option<Box<dyn Producer>>,
    pub(super) store: Box<dyn StateStore>,
    /// Whether `producer` has a transaction open (an abandoned batch leaves it open).
    pub(super) txn: TxnState,
    /// The next offset this task last committed per input partition: offsets only move forward.
    pub(super) committed: BTreeMap<TopicPartition, i64>,
}

/// The part of a task its transactions use, borrowed apart from its store ([`TaskStore`]): a
/// batch commits through it while the next batch reads the store.
pub(super) struct TaskTxn<'a> {
    pub(super) partition: i32,
    pub(super) producer: &'a Option<Box<dyn Producer>>,
    pub(super) txn: &'a mut TxnState,
}

/// The part of a task a batch's preparation uses: its store, read for the baselines.
pub(super) struct TaskStore<'a> {
    pub(super) partition: i32,
    pub(super) store: &'a mut Box<dyn StateStore>,
}

impl Task {
    /// The task split into its transaction part and its store part.
    fn split(&mut self) -> (TaskTxn<'_>, TaskStore<'_>) {
        let Task { partition, producer, store, txn, .. } = self;
        (TaskTxn { partition: *partition, producer, txn }, TaskStore { partition: *partition, store })
    }

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
    /// closes the store (TRX-33). The store keeps its files, with the checkpoint of its last
    /// batch, for the next owner on this host (STO-05); it holds only committed state, so an
    /// abandoned batch left nothing in it. `cause` says why, for the abort's log line.
    pub(super) async fn stop(mut self, cause: &str) -> Result<(), Error> {
        if let Some(producer) = &self.producer {
            abort_open(&**producer, &mut self.txn, &cause).await;
            if tokio::time::timeout(CLOSE_TIMEOUT, producer.close()).await.is_err() {
                tracing::warn!(partition = self.partition, "closing the task producer timed out");
            }
        }
        drop(self.store);
        Ok(())
    }
}

impl<S: Transformer> TaskRunner<S> {
    /// The first two steps of TRX-31 for task `partition`: its producer (whose
    /// `init_transactions` fences the previous owner and aborts its open transaction), then its
    /// store. The third, the restore, follows with [`TaskRunner::restore_tasks`] once every task of
    /// the assignment fenced: restoring before the fence could miss the previous owner's last
    /// commit.
    #[tracing::instrument(name = "task.start", skip(self), fields(transactional_id = tracing::field::Empty))]
    pub(super) async fn fence_task(&self, partition: i32) -> Result<Task, Error> {
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
        let store = self.stores.open(&settings.application_id, partition)?;
        Ok(Task { partition, producer: Some(producer), store, txn: TxnState::default(), committed: BTreeMap::new() })
    }

    /// A task of the per-instance shape (TRX-43) before its restore: no producer to fence (the
    /// previous owner's transactions are fenced by the group generation), only its store.
    pub(super) fn open_shared_task(&self, partition: i32) -> Result<Task, Error> {
        let store = self.stores.open(&self.settings.application_id, partition)?;
        Ok(Task { partition, producer: None, store, txn: TxnState::default(), committed: BTreeMap::new() })
    }

    /// Replays the changelog partitions of `tasks` into their stores (STO-11, STO-13), all
    /// through `consumer` (one client per assignment, not one per task): one lookup of every
    /// partition's extent, then one read of the partitions that hold something. Each is read
    /// to its last stable offset, or with [`LogEnd::HighWatermark`] to its high watermark
    /// (TRX-43). The extents are looked up here, so the caller calls this after every fence
    /// the ends must include. A partition whose log is empty up to that end is not read at
    /// all. Values go in as bytes, decoded on first read.
    ///
    /// A store holding a reusable copy (STO-05: its checkpoint names this task and a position
    /// the changelog still holds, recent enough) is read only from that position; a copy that
    /// cannot be used is wiped, with a log line that says why, and restored in full. Every
    /// store then records the restore's end as its checkpoint.
    #[tracing::instrument(name = "tasks.restore", skip_all, fields(partitions = tasks.len(), read = tracing::field::Empty, records = tracing::field::Empty))]
    pub(super) async fn restore_tasks(
        &self,
        consumer: &mut dyn Consumer,
        tasks: &mut [Task],
        end: LogEnd,
    ) -> Result<(), Error> {
        buggify::point("task.before_restore").await;
        let topic = self.settings.changelog_topic();
        // The restore consumer has the changelog's metadata already (it connected with it).
        let partitions = consumer.partition_count(&topic).await?.unwrap_or(0);
        self.changelog_partitions.store(partitions, std::sync::atomic::Ordering::Relaxed);
        let changelogs: Vec<TopicPartition> = tasks.iter().map(|t| TopicPartition::new(&topic, t.partition)).collect();
        // Before the lookup: every record at or after the ends found is appended after it.
        let now = now_ms();
        let extents = consumer.extents(&changelogs, end).instrument(tracing::debug_span!("tasks.extents")).await?;
        let ends: BTreeMap<i32, i64> = changelogs.iter().zip(&extents).map(|(tp, e)| (tp.partition, e.end)).collect();
        let mut ranges = BTreeMap::new();
        for ((changelog, extent), task) in changelogs.into_iter().zip(extents).zip(tasks.iter_mut()) {
            let start = self.reuse_from(task, extent, now, partitions)?;
            ranges.insert(changelog, Extent { start, end: extent.end });
        }
        let extents = ranges;
        tracing::Span::current().record("read", extents.values().filter(|e| !e.is_empty()).count());
        let mut replay = Replay {
            stores: tasks.iter_mut().map(|t| (t.partition, (t.store.as_mut() as &mut dyn StateStore, 0))).collect(),
        };
        let read = read_extents(consumer, &extents, READ_STALL_MAX, RESTORE_BATCH_RECORDS, &mut replay).await;
        let stores = replay.stores;
        let summary = match read {
            Ok(summary) => summary,
            Err(ReadError::Kafka(e)) => return Err(e.into()),
            Err(ReadError::Callback(e)) => return Err(e),
        };
        tracing::Span::current().record("records", summary.records);
        for (partition, (store, restored)) in stores {
            // The store now reflects its changelog up to the end read: its checkpoint.
            let position = Position {
                application_id: self.settings.application_id.clone(),
                changelog: topic.clone(),
                partition,
                partitions,
                next_offset: ends[&partition],
                since_ms: now,
            };
            store.apply_at(&[], &position.encode())?;
            self.observer.state_restored(partition, restored);
            tracing::debug!(partition, restored, "task restored");
        }
        Ok(())
    }

    /// Where task `task`'s restore starts on a changelog partition spanning `extent`: its
    /// store's checkpoint when the copy may be reused (STO-05), else the log start, after
    /// wiping whatever copy the store held.
    fn reuse_from(&self, task: &mut Task, extent: Extent, now: i64, partitions: u32) -> Result<i64, Error> {
        let Some(checkpoint) = task.store.checkpoint()? else {
            return Ok(extent.start);
        };
        let changelog = self.settings.changelog_topic();
        let expected = Expected {
            application_id: &self.settings.application_id,
            changelog: &changelog,
            partition: task.partition,
            partitions,
        };
        let max_age = i64::try_from(self.settings.local_state_max_age.as_millis()).unwrap_or(i64::MAX);
        match judge(&checkpoint, &expected, extent, now, max_age) {
            Ok(from) => {
                tracing::info!(
                    partition = task.partition,
                    from,
                    to = extent.end,
                    "local state reused: restoring the changelog's tail"
                );
                Ok(from)
            }
            Err(reason) => {
                tracing::warn!(partition = task.partition, %reason, "local state discarded: restoring the changelog in full");
                task.store.wipe()?;
                Ok(extent.start)
            }
        }
    }
}

/// A restore's side of the changelog read: each poll's records, by reference, into their
/// tasks' stores, with a count per task.
struct Replay<'a> {
    stores: BTreeMap<i32, (&'a mut dyn StateStore, usize)>,
}

impl BorrowedReader for Replay<'_> {
    type Error = Error;

    fn expect(&mut self, _: u64) {}

    /// One [`StateStore::restore`] per run of a partition's records (a poll's records come in
    /// runs per partition); neither key nor value is copied on the way.
    fn records(&mut self, records: &[RecordRef<'_>]) -> Result<(), Error> {
        let mut rest = records;
        while let Some(first) = rest.first() {
            let partition = first.partition;
            let run = rest.iter().take_while(|r| r.partition == partition).count();
            let (records, tail) = rest.split_at(run);
            rest = tail;
            let changes = records
                .iter()
                .map(|record| {
                    let key = wire::decode_key_str(record.key).map_err(|source| Error::CorruptState {
                        partition,
                        key: String::from_utf8_lossy(record.key.unwrap_or_default()).into_owned(),
                        source,
                    })?;
                    // A tombstone (an absent, empty or `{}` value) removes the key.
                    Ok((key, record.value.filter(|value| !wire::is_tombstone(Some(value)))))
                })
                .collect::<Result<Vec<(&str, Option<&[u8]>)>, Error>>()?;
            let (store, restored) = self.stores.get_mut(&partition).expect("a record of a partition being restored");
            store.restore(&changes)?;
            *restored += records.len();
        }
        Ok(())
    }
}

/// The instance's one transactional producer in the per-instance shape (KIP-447, TRX-40): it
/// outlives rebalances and writes one transaction per batch for all the live tasks.
pub(super) struct SharedProducer {
    pub(super) producer: Box<dyn Producer>,
    /// Whether `producer` has a transaction open (an abandoned batch leaves it open).
    pub(super) txn: TxnState,
}

impl SharedProducer {
    /// Aborts a transaction an abandoned batch left open, then closes the producer.
    pub(super) async fn close(mut self, cause: &str) {
        abort_open(&*self.producer, &mut self.txn, &cause).await;
        if tokio::time::timeout(CLOSE_TIMEOUT, self.producer.close()).await.is_err() {
            tracing::warn!("closing the instance producer timed out");
        }
    }
}

/// The live tasks of a runner, by partition, and the instance's producer in the per-instance
/// shape.
#[derive(Default)]
pub(super) struct Tasks {
    pub(super) live: BTreeMap<i32, Task>,
    pub(super) shared: Option<SharedProducer>,
}

impl Tasks {
    /// Every live task split in two (see [`TaskTxn`]), and the instance's producer.
    pub(super) fn split(&mut self) -> (Vec<TaskTxn<'_>>, BTreeMap<i32, TaskStore<'_>>, Option<&mut SharedProducer>) {
        let (txns, stores) = self.live.values_mut().map(Task::split).map(|(t, s)| (t, (s.partition, s))).unzip();
        (txns, stores, self.shared.as_mut())
    }

    /// Stops every task (TRX-33, TRX-36): never retained across a rebalance. Reports
    /// `tasks_assigned(0)` when there were any.
    pub(super) async fn stop_all(&mut self, observer: &dyn Observer, cause: &str) -> Result<(), Error> {
        // The instance's transaction spans the tasks: aborted with them (kept open, it would
        // commit nothing of theirs, and hold the LSO of what it wrote).
        if let Some(shared) = &mut self.shared {
            abort_open(&*shared.producer, &mut shared.txn, &cause).await;
        }
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
