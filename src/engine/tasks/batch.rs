//! One fetched batch: decoded before any transaction, run per state key, committed in one
//! transaction per task (TRX-03..23), or in one transaction for all tasks through the
//! instance's producer (per-instance shape, TRX-44).
//!
//! A batch goes through three steps, which the main loop pipelines (TRX-02): it is
//! [prepared](TaskRunner::prepare_batch) (parsed, run, encoded: no transaction yet), then
//! [committed](TaskRunner::commit_batch), then [completed](TaskRunner::complete_batch) (its state
//! changes go into the stores, its offsets into the tasks' records). While batch N commits, the
//! loop polls and prepares batch N+1; N+1 reads the state N leaves behind from N's prepared
//! changes (not yet in the stores, which follow only committed changes), and commits only after
//! N completed.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use bytes::Bytes;
use futures::future::try_join_all;
use futures::FutureExt as _;

use super::checkpoint::{now_ms, Position};
use super::task::{SharedProducer, TaskStore, TaskTxn, Tasks};
use super::TaskRunner;
use crate::configs::ConfigStore;
use crate::engine::budget::Budget;
use crate::engine::buggify;
use crate::engine::records::{changelog_record, output_record, panic_error, record_bytes};
use crate::engine::txn::Txn;
use crate::error::Error;
use crate::kafka::{GroupMetadata, ProducerRecord, RevocationGate, RevocationHold, TopicPartition};
use crate::message::{IncomingMessage, Message};
use crate::record::State;
use crate::stage::{Output, Transformer};
use crate::state::StateStore;
use crate::wire::RawRecord;

/// One task's part of a batch: decoded messages in bucket order, and the next offset of every
/// input partition it read (skipped records included, TRX-11).
#[derive(Default)]
pub(super) struct TaskBatch {
    /// (input topic index, message): the index orders a bucket's records (TRX-03).
    messages: Vec<(usize, IncomingMessage)>,
    /// Next offset per input topic index.
    offsets: BTreeMap<usize, i64>,
}

/// What one bucket (a state key's records) produced.
struct BucketResult {
    outputs: Vec<Message>,
    /// The final state, when it differs from the baseline (TRX-20).
    changed: Option<State>,
    /// Whether the baseline held a state (a tombstone only deletes what exists, TRX-21).
    existed: bool,
}

/// One task's share of a batch, processed and encoded, not yet written.
struct Prepared {
    outputs: Vec<ProducerRecord>,
    /// Sorted by key (one per key): the next batch looks its baselines up here first.
    changes: Vec<StateChange>,
    /// The next offset of every input partition of the task's share.
    offsets: Vec<(TopicPartition, i64)>,
}

impl Prepared {
    /// A later poll's share of the same task, gathered into this one (TRX-45).
    fn gather(&mut self, later: Prepared) {
        self.outputs.extend(later.outputs);
        self.changes = gather_changes(std::mem::take(&mut self.changes), later.changes);
        for (partition, next) in later.offsets {
            match self.offsets.iter_mut().find(|(known, _)| *known == partition) {
                Some((_, offset)) => *offset = (*offset).max(next),
                None => self.offsets.push((partition, next)),
            }
        }
    }
}

/// Two sorted runs of state changes as one, sorted by key: a key changed by both keeps
/// `later`'s change (its baseline was `earlier`'s), and whether it existed before `earlier`; a
/// key that did not exist before and that `later` deletes has no change left (TRX-21: nothing
/// to delete).
fn gather_changes(earlier: Vec<StateChange>, later: Vec<StateChange>) -> Vec<StateChange> {
    if earlier.is_empty() {
        return later;
    }
    let mut gathered = Vec::with_capacity(earlier.len() + later.len());
    let mut earlier = earlier.into_iter().peekable();
    let mut later = later.into_iter().peekable();
    loop {
        let order = match (earlier.peek(), later.peek()) {
            (Some(e), Some(l)) => e.key.cmp(&l.key),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => return gathered,
        };
        match order {
            std::cmp::Ordering::Less => gathered.extend(earlier.next()),
            std::cmp::Ordering::Greater => gathered.extend(later.next()),
            std::cmp::Ordering::Equal => {
                let existed = earlier.next().is_some_and(|change| change.existed);
                let change = later.next().map(|change| StateChange { existed, ..change });
                gathered.extend(change.filter(|change| change.existed || change.value.is_some()));
            }
        }
    }
}

/// A state change ready for the changelog: the key, and the value bytes (`None` deletes). The
/// bytes are shared between the changelog record and the local store's write.
pub(super) struct StateChange {
    key: String,
    value: Option<Bytes>,
    /// Whether the key held a state before the batch (before its first poll, in a gathered
    /// batch): a delete of a key that held none writes nothing (TRX-21).
    existed: bool,
}

/// A batch processed and encoded, its transactions not yet begun: what the main loop commits
/// while it prepares the next one.
pub(super) struct PreparedBatch {
    tasks: BTreeMap<i32, Prepared>,
    /// The group member the batch was fetched as: its offsets commit with this generation.
    metadata: GroupMetadata,
    /// Every poll the batch holds (one, unless it gathered several, TRX-45): the records it
    /// handed to the stage (records the invalid-message policy skipped, and records of
    /// partitions without a live task, not counted) and when its preparation started. The
    /// observer sees the batch once, as committed: all its polls' records, from the first
    /// poll's start (MET-03).
    polls: Vec<(usize, tokio::time::Instant)>,
    /// Held once the batch gathers a further poll (TRX-46): a revocation that poll serves waits
    /// until this batch committed, as it waits for the batch committing meanwhile.
    hold: Option<RevocationHold>,
}

impl PreparedBatch {
    /// Records the batch handed to the stage (skipped ones not counted).
    pub(super) fn size(&self) -> usize {
        self.polls.iter().map(|(size, _)| size).sum()
    }

    /// Whether `metadata` is the group member this batch was fetched as (same generation).
    pub(super) fn fetched_as(&self, metadata: &GroupMetadata) -> bool {
        self.metadata.generation == metadata.generation && self.metadata.member_id == metadata.member_id
    }

    /// Holds revocations back until this batch completed (once; further calls keep the hold).
    pub(super) fn hold_revocations(&mut self, gate: &RevocationGate) {
        self.hold.get_or_insert_with(|| gate.hold());
    }

    /// The batch's own hold of the revocation gate, if it took one, to drop once the batch
    /// completed (in at-least-once mode, after its offsets were committed).
    pub(super) fn take_hold(&mut self) -> Option<RevocationHold> {
        self.hold.take()
    }

    /// Gathers `later`, prepared from a later poll of the same member (reading this batch's
    /// changes as its baselines), into this batch (TRX-45): its outputs after this batch's, per
    /// task; its state changes replacing this batch's of the same key; its offsets beyond this
    /// batch's.
    pub(super) fn gather(&mut self, later: PreparedBatch) {
        assert!(self.fetched_as(&later.metadata), "a batch gathers only polls of the member it was fetched as");
        for (partition, prepared) in later.tasks {
            match self.tasks.entry(partition) {
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(prepared);
                }
                std::collections::btree_map::Entry::Occupied(mut entry) => entry.get_mut().gather(prepared),
            }
        }
        self.polls.extend(later.polls);
    }

    /// The outputs of every task, moved out for the transactions (the changes stay: the next
    /// batch reads them while this one commits).
    pub(super) fn take_outputs(&mut self) -> BTreeMap<i32, Vec<ProducerRecord>> {
        self.tasks.iter_mut().map(|(&p, prepared)| (p, std::mem::take(&mut prepared.outputs))).collect()
    }

    /// The state changes of task `partition`, sorted by key (empty when it had no share).
    pub(super) fn changes(&self, partition: i32) -> &[StateChange] {
        self.tasks.get(&partition).map_or(&[], |p| &p.changes[..])
    }
}

impl<S: Transformer> TaskRunner<S> {
    /// Decodes and processes one fetched batch and encodes everything it writes (TRX-10..23),
    /// beginning no transaction. `ahead` are the batches whose state changes are not in the
    /// stores yet, newest first (the batch gathered so far, the batch committing meanwhile): a
    /// key's baseline is its change in the first that has one, else the store's value.
    #[tracing::instrument(
        name = "batch.prepare",
        skip_all,
        fields(records = records.len(), generation = metadata.generation, processed = tracing::field::Empty)
    )]
    pub(super) async fn prepare_batch(
        &self,
        records: Vec<RawRecord>,
        stores: &mut BTreeMap<i32, TaskStore<'_>>,
        ahead: &[&PreparedBatch],
        configs: &ConfigStore,
        metadata: GroupMetadata,
        inputs: &[String],
    ) -> Result<PreparedBatch, Error> {
        let started = tokio::time::Instant::now();
        let mut batch = self.parse(records, inputs)?;
        let size = batch.values().map(|b| b.messages.len()).sum();
        tracing::Span::current().record("processed", size);
        // Each task's share is handed over (moved, not cloned): the transform receives the
        // decoded messages themselves. The tasks' shares run concurrently.
        let budget = &Budget::default();
        let work = stores.iter_mut().filter_map(|(p, task)| batch.remove(p).map(|b| (task, b))).map(
            |(task, task_batch)| async move {
                let offsets = task_offsets(inputs, task.partition, &task_batch);
                let overlays: Vec<&[StateChange]> = ahead.iter().map(|batch| batch.changes(task.partition)).collect();
                let (outputs, changes) =
                    self.prepare_task_batch(task, &overlays, task_batch, configs, inputs, budget).await?;
                Ok::<_, Error>((task.partition, Prepared { outputs, changes, offsets }))
            },
        );
        let tasks = try_join_all(work).await?.into_iter().collect();
        Ok(PreparedBatch { tasks, metadata, polls: vec![(size, started)], hold: None })
    }

    /// Writes a prepared batch: one transaction per task, concurrently (TRX-10), or with the
    /// instance's producer one transaction for all (TRX-44). `outputs` are the batch's, taken
    /// out of it. A failing task drops the others' futures mid-transaction; their open
    /// transactions are aborted when the tasks stop.
    pub(super) async fn commit_batch(
        &self,
        tasks: Vec<TaskTxn<'_>>,
        shared: Option<&mut SharedProducer>,
        mut outputs: BTreeMap<i32, Vec<ProducerRecord>>,
        batch: &PreparedBatch,
    ) -> Result<(), Error> {
        self.positions.lock().expect("positions lock").clear();
        if let Some(shared) = shared {
            let offsets: Vec<(TopicPartition, i64)> =
                batch.tasks.values().flat_map(|p| p.offsets.iter().cloned()).collect();
            let writes: Vec<(i32, Vec<ProducerRecord>, &[StateChange])> = batch
                .tasks
                .iter()
                .map(|(&p, prepared)| (p, outputs.remove(&p).unwrap_or_default(), &prepared.changes[..]))
                .collect();
            return self.commit_shared(shared, writes, &offsets, &batch.metadata).await;
        }
        let work = tasks.into_iter().filter_map(|task| {
            let prepared = batch.tasks.get(&task.partition)?;
            let task_outputs = outputs.remove(&task.partition).unwrap_or_default();
            Some(self.commit(task, task_outputs, &prepared.changes, &prepared.offsets, &batch.metadata))
        });
        try_join_all(work).await?;
        Ok(())
    }

    /// After a batch committed: the stores take its state changes, the tasks its offsets.
    /// Returns the offsets committed.
    /// A store takes its task's changes together with the changelog position after them, as
    /// the commit delivered it (STO-05).
    pub(super) fn complete_batch(
        &self,
        tasks: &mut Tasks,
        batch: PreparedBatch,
    ) -> Result<Vec<(TopicPartition, i64)>, Error> {
        let mut committed = Vec::new();
        let ends = std::mem::take(&mut *self.positions.lock().expect("positions lock"));
        let partitions = self.changelog_partitions.load(std::sync::atomic::Ordering::Relaxed);
        for (partition, Prepared { changes, offsets, .. }) in batch.tasks {
            let task = tasks.live.get_mut(&partition).expect("a batch's tasks stay live until it completed");
            let position = ends.get(&partition).map(|&(next_offset, since_ms)| Position {
                application_id: self.settings.application_id.clone(),
                changelog: self.settings.changelog_topic(),
                partition,
                partitions,
                next_offset,
                since_ms,
            });
            apply_changes(&mut task.store, changes, position)?;
            task.committed(&offsets);
            committed.extend(offsets);
        }
        // One observation per committed batch, in both producer shapes and however many polls it
        // gathered (MET-03): its records, and the time since its first poll's preparation began.
        if let Some(&(_, started)) = batch.polls.first() {
            let size = batch.polls.iter().map(|(size, _)| size).sum();
            self.observer.batch_processed(size, started.elapsed());
        }
        Ok(committed)
    }

    /// The parse loop, before any transaction (TRX-14): every record through the policy, grouped
    /// by task.
    fn parse(&self, records: Vec<RawRecord>, inputs: &[String]) -> Result<BTreeMap<i32, TaskBatch>, Error> {
        let stage = &*self.stage;
        let policy = |error: &crate::wire::InvalidMessageError| stage.on_invalid_message(error);
        let mut batch: BTreeMap<i32, TaskBatch> = BTreeMap::new();
        for record in records {
            self.observer.message_in_bytes(&record.topic, record.size_bytes());
            let order = inputs
                .iter()
                .position(|t| **t == *record.topic)
                .unwrap_or_else(|| panic!("a record of {}, which is not an input topic", record.topic));
            let task = batch.entry(record.partition).or_default();
            let next = task.offsets.entry(order).or_insert(record.offset + 1);
            *next = (*next).max(record.offset + 1);
            if let Some(msg) = crate::mediation::decode_input(&record, &policy, &*self.observer)? {
                task.messages.push((order, msg));
            }
        }
        Ok(batch)
    }

    /// Processes one task's share of a batch: runs its buckets and encodes everything it
    /// writes, before any transaction begins (an unencodable output or state, NaN say, fails the
    /// batch without opening one). `overlays` hold the task's changes not in its store yet,
    /// newest first, each sorted by key. Returns the outputs and the state changes, sorted by
    /// key.
    async fn prepare_task_batch(
        &self,
        task: &mut TaskStore<'_>,
        overlays: &[&[StateChange]],
        batch: TaskBatch,
        configs: &ConfigStore,
        inputs: &[String],
        budget: &Budget,
    ) -> Result<(Vec<ProducerRecord>, Vec<StateChange>), Error> {
        // Bucket by state key; within a bucket, input_topics order, then offset order (TRX-03).
        let mut buckets: BTreeMap<String, Vec<(usize, IncomingMessage)>> = BTreeMap::new();
        for entry in batch.messages {
            buckets.entry(self.stage.extract_state_key(&entry.1)).or_default().push(entry);
        }
        let mut baselines = Vec::with_capacity(buckets.len());
        for (key, msgs) in &mut buckets {
            msgs.sort_by_key(|(order, msg)| (*order, msg.offset));
            baselines.push(load_state(task, overlays, key)?);
        }
        let mut keys = Vec::with_capacity(buckets.len());
        let results = try_join_all(buckets.into_iter().zip(baselines).map(|((key, msgs), baseline)| {
            keys.push(key);
            self.run_bucket(msgs, baseline, configs, inputs, budget)
        }))
        .await?;
        let mut outputs = Vec::new();
        let mut changes = Vec::new();
        for (key, result) in keys.into_iter().zip(results) {
            outputs.extend(result.outputs);
            if let Some(state) = result.changed {
                changes.push(self.encode_change(task.partition, key, state, result.existed)?);
            }
        }
        let outputs = outputs.iter().map(output_record).collect::<Result<Vec<_>, Error>>()?;
        Ok((outputs, changes))
    }

    fn encode_change(&self, partition: i32, key: String, state: State, existed: bool) -> Result<StateChange, Error> {
        if state.is_empty() {
            // The baseline was not empty (else nothing changed): a tombstone (TRX-21).
            return Ok(StateChange { key, value: None, existed });
        }
        let bytes = state.encode().map_err(|source| Error::Encode {
            what: format!("the state of key {key:?} in task {partition}"),
            source,
        })?;
        Ok(StateChange { key, value: Some(Bytes::from(bytes)), existed })
    }

    /// Runs one bucket's records serially, each on a private copy of the running state
    /// (TRX-04); returns the outputs and the final state if it differs from the baseline
    /// (TRX-20).
    async fn run_bucket(
        &self,
        msgs: Vec<(usize, IncomingMessage)>,
        baseline: State,
        configs: &ConfigStore,
        inputs: &[String],
        budget: &Budget,
    ) -> Result<BucketResult, Error> {
        // The state the last transform set (`None`: none set one yet, the baseline holds).
        // Each transform gets its own copy (TRX-04): one clone per record, none otherwise.
        let mut last_set: Option<State> = None;
        let mut outputs = Vec::new();
        for (order, msg) in msgs {
            budget.spend().await;
            self.observer.message_in(&msg.topic);
            let mut out = Output::new(configs, &*self.observer);
            let (partition, offset) = (msg.partition, msg.offset);
            let current = last_set.as_ref().unwrap_or(&baseline).clone();
            let started = tokio::time::Instant::now();
            // A panicking transform fails the batch like an error does (its transaction aborts),
            // instead of unwinding through the runner past its cleanup.
            let result = AssertUnwindSafe(self.stage.transform(msg, current, &mut out))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| Err(panic_error("transform", panic)));
            self.observer.message_processed(started.elapsed());
            // The message moved into the transform: its topic is input topic `order`.
            result.map_err(|source| Error::Transform { topic: inputs[order].clone(), partition, offset, source })?;
            let (messages, state) = out.into_parts();
            outputs.extend(messages);
            if let Some(state) = state {
                last_set = Some(state);
            }
        }
        let changed = last_set.filter(|s| *s != baseline);
        Ok(BucketResult { outputs, changed, existed: !baseline.is_empty() })
    }

    /// One transaction (TRX-10): outputs, state changes (changelog partition = the task's), input
    /// offsets. In at-least-once mode the same records without a transaction.
    #[tracing::instrument(
        name = "transaction",
        skip_all,
        fields(
            partition = task.partition,
            transactional_id = task.producer.as_ref().and_then(|p| p.transactional_id()).unwrap_or_default(),
            outputs = outputs.len(),
            state_changes = changes.len(),
        )
    )]
    async fn commit(
        &self,
        task: TaskTxn<'_>,
        outputs: Vec<ProducerRecord>,
        changes: &[StateChange],
        offsets: &[(TopicPartition, i64)],
        metadata: &GroupMetadata,
    ) -> Result<(), Error> {
        let changelog = self.settings.changelog_topic();
        let producer = &**task.producer.as_ref().expect("the per-task shape: every task has its producer");
        let txn = Txn::new(producer, task.txn, &*self.observer);
        // At least once: no transaction, so no offsets in it (the group commits them).
        let offsets = producer.transactional_id().is_some().then_some((offsets, metadata));
        self.fill_and_commit(txn, &changelog, [(task.partition, outputs, changes)], offsets).await
    }

    /// The per-instance shape's one transaction (TRX-44): every task's outputs and state
    /// changes (changelog partition = the task's), then the input offsets of all of them, sent
    /// with the group metadata.
    #[tracing::instrument(
        name = "transaction",
        skip_all,
        fields(transactional_id = shared.producer.transactional_id().unwrap_or_default(), offsets = offsets.len())
    )]
    async fn commit_shared(
        &self,
        shared: &mut SharedProducer,
        writes: Vec<(i32, Vec<ProducerRecord>, &[StateChange])>,
        offsets: &[(TopicPartition, i64)],
        metadata: &GroupMetadata,
    ) -> Result<(), Error> {
        let changelog = self.settings.changelog_topic();
        let txn = Txn::new(&*shared.producer, &mut shared.txn, &*self.observer);
        let offsets = (!offsets.is_empty()).then_some((offsets, metadata));
        self.fill_and_commit(txn, &changelog, writes, offsets).await
    }

    /// Fills one transaction, in both shapes: each task's outputs and state changes, then the
    /// input offsets with the group's metadata (when given); then commits it, or aborts it if
    /// anything failed (TRX-10, TRX-44).
    async fn fill_and_commit<'c>(
        &self,
        mut txn: Txn<'_>,
        changelog: &str,
        writes: impl IntoIterator<Item = (i32, Vec<ProducerRecord>, &'c [StateChange])>,
        offsets: Option<(&[(TopicPartition, i64)], &GroupMetadata)>,
    ) -> Result<(), Error> {
        // Every changelog record of this transaction is appended after this moment: the time
        // a store's checkpoint carries for the copy's age (STO-05).
        let since_ms = now_ms();
        txn.track(changelog);
        let filled = async {
            for (partition, outputs, changes) in writes {
                self.send_task_writes(&mut txn, changelog, partition, outputs, changes).await?;
            }
            if let Some((offsets, metadata)) = offsets {
                txn.send_offsets(offsets, metadata).await?;
            }
            buggify::point("task.before_commit").await;
            Ok(())
        }
        .await;
        txn.finish(filled).await?;
        let ends = txn.take_tracked_ends().into_iter().map(|(partition, end)| (partition, (end, since_ms)));
        self.positions.lock().expect("positions lock").extend(ends);
        Ok(())
    }

    /// One task's share of a transaction, in both shapes: its outputs, then its state changes
    /// to its changelog partition.
    async fn send_task_writes(
        &self,
        txn: &mut Txn<'_>,
        changelog: &str,
        partition: i32,
        outputs: Vec<ProducerRecord>,
        changes: &[StateChange],
    ) -> Result<(), Error> {
        for record in outputs {
            self.observer.message_out_bytes(&record.topic, record_bytes(&record));
            txn.send(record).await?;
        }
        for change in changes {
            if let Some(bytes) = &change.value {
                self.observer.state_record_bytes(bytes.len());
            }
            txn.send(changelog_record(changelog, Some(partition), &change.key, change.value.clone())).await?;
        }
        Ok(())
    }
}

/// The local store follows the changelog only once the transaction committed: a store never
/// holds a state that no reader can see. All of the batch's changes in one write, with the
/// changelog position after them when the commit delivered one (STO-05).
fn apply_changes(
    store: &mut Box<dyn StateStore>,
    changes: Vec<StateChange>,
    position: Option<Position>,
) -> Result<(), Error> {
    let writes: Vec<(&str, Option<&[u8]>)> =
        changes.iter().map(|change| (change.key.as_str(), change.value.as_deref())).collect();
    match position {
        Some(position) => store.apply_at(&writes, &position.encode())?,
        None => store.apply(&writes)?,
    }
    Ok(())
}

/// Per changelog partition a commit wrote: the offset after its last changelog record, and the
/// time before its first was sent (milliseconds since the epoch).
pub(super) type ChangelogEnds = BTreeMap<i32, (i64, i64)>;

/// The next offsets of one task's batch, as the group commits them.
fn task_offsets(inputs: &[String], partition: i32, batch: &TaskBatch) -> Vec<(TopicPartition, i64)> {
    batch.offsets.iter().map(|(&order, &next)| (TopicPartition::new(&inputs[order], partition), next)).collect()
}

/// A key's baseline: its change in the first of `overlays` that has one (the changes not in the
/// store yet, newest first, each sorted by key), else its value in the task's store.
fn load_state(task: &mut TaskStore<'_>, overlays: &[&[StateChange]], key: &str) -> Result<State, Error> {
    let decode =
        |bytes: Option<&[u8]>| match bytes {
            None => Ok(State::new()),
            Some(bytes) => crate::wire::decode_value(Some(bytes))
                .map(State::wrap)
                .map_err(|source| Error::CorruptState { partition: task.partition, key: key.to_owned(), source }),
        };
    for overlay in overlays {
        if let Ok(found) = overlay.binary_search_by(|change| change.key.as_str().cmp(key)) {
            return decode(overlay[found].value.as_deref());
        }
    }
    decode(task.store.get(key)?.as_deref())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// A change: the value (`None` deletes), whether the key existed before.
    type Change = (Option<Vec<u8>>, bool);
    /// A poll's changes by key.
    type Poll = BTreeMap<String, Change>;

    fn changes(map: &Poll) -> Vec<StateChange> {
        map.iter()
            .map(|(key, (value, existed))| StateChange {
                key: key.clone(),
                value: value.clone().map(Bytes::from),
                existed: *existed,
            })
            .collect()
    }

    fn as_map(changes: &[StateChange]) -> Vec<(String, Change)> {
        changes.iter().map(|c| (c.key.clone(), (c.value.as_ref().map(|v| v.to_vec()), c.existed))).collect()
    }

    /// Changes as a poll makes them: a delete only of a key that held a state (TRX-21).
    fn a_poll() -> impl Strategy<Value = Poll> {
        let value = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3));
        let change = (value, any::<bool>()).prop_map(|(value, existed)| {
            let existed = existed || value.is_none();
            (value, existed)
        });
        proptest::collection::btree_map("[a-e]{1,2}", change, 0..8)
    }

    proptest! {
        /// TRX-45, TRX-21: gathering two polls' changes is applying them in turn: sorted by
        /// key, one per key, the later poll's where both changed a key, existing before when it
        /// existed before the earlier one; a key that did not exist before the batch and is
        /// deleted in the end leaves no change (no tombstone for nothing).
        #[test]
        fn trx_45_gathered_changes_are_the_later_over_the_earlier(earlier in a_poll(), later in a_poll()) {
            let mut model = earlier.clone();
            for (key, (value, existed)) in &later {
                let existed = earlier.get(key).map_or(*existed, |(_, before)| *before);
                if value.is_none() && !existed {
                    model.remove(key);
                } else {
                    model.insert(key.clone(), (value.clone(), existed));
                }
            }
            let gathered = gather_changes(changes(&earlier), changes(&later));
            prop_assert_eq!(as_map(&gathered), model.into_iter().collect::<Vec<_>>());
        }

        /// TRX-45, TRX-11: a task's gathered share: outputs in poll order, each input
        /// partition's next offset the furthest either poll reached.
        #[test]
        fn trx_45_gathered_share_keeps_output_order_and_furthest_offsets(
            first in proptest::collection::btree_map(0..3i32, 0..100i64, 0..3),
            second in proptest::collection::btree_map(0..3i32, 0..100i64, 0..3),
            outputs in (0..4usize, 0..4usize),
        ) {
            let share = |offsets: &BTreeMap<i32, i64>, from: usize, count: usize| Prepared {
                outputs: (from..from + count).map(|i| ProducerRecord::new("out", i.to_string(), "{}")).collect(),
                changes: Vec::new(),
                offsets: offsets.iter().map(|(&p, &next)| (TopicPartition::new("in", p), next)).collect(),
            };
            let mut gathered = share(&first, 0, outputs.0);
            gathered.gather(share(&second, outputs.0, outputs.1));
            let keys: Vec<String> =
                gathered.outputs.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).collect();
            prop_assert_eq!(keys, (0..outputs.0 + outputs.1).map(|i| i.to_string()).collect::<Vec<_>>());
            let mut want = first.clone();
            for (p, next) in &second {
                let entry = want.entry(*p).or_insert(*next);
                *entry = (*entry).max(*next);
            }
            let mut got: Vec<(i32, i64)> = gathered.offsets.iter().map(|(tp, next)| (tp.partition, *next)).collect();
            got.sort_unstable();
            prop_assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        }
    }
}
