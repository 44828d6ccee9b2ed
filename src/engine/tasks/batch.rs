//! One fetched batch: decoded before any transaction, run per state key, committed in one
//! transaction per task (TRX-03..23), or in one transaction for all tasks through the
//! instance's producer (per-instance shape, TRX-44).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use bytes::Bytes;
use futures::future::try_join_all;
use futures::FutureExt as _;

use super::task::{SharedProducer, Task, Tasks};
use super::Runner;
use crate::configs::ConfigStore;
use crate::engine::buggify;
use crate::engine::txn::Txn;
use crate::error::{BoxError, Error};
use crate::kafka::{GroupMetadata, ProducerRecord, TopicPartition};
use crate::message::{IncomingMessage, Message};
use crate::record::State;
use crate::stage::{Output, Transformer};
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
}

/// One task's share of a batch, processed and encoded, not yet written.
struct Prepared {
    outputs: Vec<ProducerRecord>,
    changes: Vec<StateChange>,
}

/// A state change ready for the changelog: the key, and the value bytes (`None` deletes). The
/// bytes are shared between the changelog record and the local store's write.
struct StateChange {
    key: String,
    value: Option<Bytes>,
}

impl<S: Transformer> Runner<S> {
    /// Decodes, processes and commits one fetched batch (TRX-10..23); returns the next offset of
    /// every input partition it covered.
    #[tracing::instrument(
        name = "batch",
        skip_all,
        fields(records = records.len(), generation = metadata.generation, processed = tracing::field::Empty)
    )]
    pub(super) async fn process_batch(
        &self,
        records: Vec<RawRecord>,
        tasks: &mut Tasks,
        configs: &ConfigStore,
        metadata: &GroupMetadata,
        inputs: &[String],
    ) -> Result<Vec<(TopicPartition, i64)>, Error> {
        let started = tokio::time::Instant::now();
        let mut batch = self.parse(records, inputs)?;
        let size = batch.values().map(|b| b.messages.len()).sum();
        tracing::Span::current().record("processed", size);
        if let Some(shared) = &mut tasks.shared {
            let committed = self.run_shared_batch(&mut tasks.live, shared, batch, configs, metadata, inputs).await?;
            self.observer.batch_processed(size, started.elapsed());
            return Ok(committed);
        }
        // Each task's share is handed over (moved, not cloned): the transform receives the
        // decoded messages themselves.
        let work = tasks.live.iter_mut().filter_map(|(p, task)| batch.remove(p).map(|b| (task, b))).map(
            |(task, task_batch)| {
                let offsets = task_offsets(inputs, task.partition, &task_batch);
                self.run_task_batch(task, task_batch, offsets, configs, metadata, inputs)
            },
        );
        // A failing task drops the others' futures mid-transaction; their open transactions
        // are aborted when the tasks stop.
        let committed = try_join_all(work).await?;
        self.observer.batch_processed(size, started.elapsed());
        Ok(committed.into_iter().flatten().collect())
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

    /// Runs one task's share of a batch and commits it in one transaction; returns the offsets
    /// it committed.
    #[tracing::instrument(
        name = "task.batch",
        level = "debug",
        skip_all,
        fields(partition = task.partition, messages = batch.messages.len())
    )]
    async fn run_task_batch(
        &self,
        task: &mut Task,
        batch: TaskBatch,
        offsets: Vec<(TopicPartition, i64)>,
        configs: &ConfigStore,
        metadata: &GroupMetadata,
        inputs: &[String],
    ) -> Result<Vec<(TopicPartition, i64)>, Error> {
        let Prepared { outputs, changes } = self.prepare_task_batch(task, batch, configs, inputs).await?;
        self.commit(task, outputs, &changes, &offsets, metadata).await?;
        apply_changes(task, changes)?;
        task.committed(&offsets);
        Ok(offsets)
    }

    /// The per-instance shape (TRX-44): every task's share is processed (concurrently, as in
    /// the per-task shape), then one transaction of the instance's producer carries all their
    /// outputs, changelog records and input offsets — the offsets in one call, with the
    /// consumer's group metadata, so the coordinator accepts all or none (TRX-42). Only once
    /// it committed do the tasks' stores follow. Returns the offsets committed.
    async fn run_shared_batch(
        &self,
        live: &mut BTreeMap<i32, Task>,
        shared: &mut SharedProducer,
        mut batch: BTreeMap<i32, TaskBatch>,
        configs: &ConfigStore,
        metadata: &GroupMetadata,
        inputs: &[String],
    ) -> Result<Vec<(TopicPartition, i64)>, Error> {
        let work = live.iter_mut().filter_map(|(p, task)| batch.remove(p).map(|b| (task, b))).map(
            |(task, task_batch)| async move {
                let offsets = task_offsets(inputs, task.partition, &task_batch);
                let prepared = self.prepare_task_batch(task, task_batch, configs, inputs).await?;
                Ok::<_, Error>((task, prepared, offsets))
            },
        );
        let mut prepared = try_join_all(work).await?;
        let offsets: Vec<(TopicPartition, i64)> =
            prepared.iter().flat_map(|(_, _, offsets)| offsets.iter().cloned()).collect();
        // The outputs move into the transaction; the changes stay for the stores.
        let writes: Vec<(i32, Vec<ProducerRecord>, &[StateChange])> = prepared
            .iter_mut()
            .map(|(task, p, _)| (task.partition, std::mem::take(&mut p.outputs), &p.changes[..]))
            .collect();
        self.commit_shared(shared, writes, &offsets, metadata).await?;
        for (task, Prepared { changes, .. }, task_offsets) in prepared {
            apply_changes(task, changes)?;
            task.committed(&task_offsets);
        }
        Ok(offsets)
    }

    /// Processes one task's share of a batch: runs its buckets and encodes everything it
    /// writes, before any transaction begins (an unencodable output or state, NaN say, fails the
    /// batch without opening one).
    async fn prepare_task_batch(
        &self,
        task: &mut Task,
        batch: TaskBatch,
        configs: &ConfigStore,
        inputs: &[String],
    ) -> Result<Prepared, Error> {
        // Bucket by state key; within a bucket, input_topics order, then offset order (TRX-03).
        let mut buckets: BTreeMap<String, Vec<(usize, IncomingMessage)>> = BTreeMap::new();
        for entry in batch.messages {
            buckets.entry(self.stage.extract_state_key(&entry.1)).or_default().push(entry);
        }
        let mut baselines = Vec::with_capacity(buckets.len());
        for (key, msgs) in &mut buckets {
            msgs.sort_by_key(|(order, msg)| (*order, msg.offset));
            baselines.push(load_state(task, key)?);
        }
        let mut keys = Vec::with_capacity(buckets.len());
        let results = try_join_all(buckets.into_iter().zip(baselines).map(|((key, msgs), baseline)| {
            keys.push(key);
            self.run_bucket(msgs, baseline, configs, inputs)
        }))
        .await?;
        let mut outputs = Vec::new();
        let mut changes = Vec::new();
        for (key, result) in keys.into_iter().zip(results) {
            outputs.extend(result.outputs);
            if let Some(state) = result.changed {
                changes.push(self.encode_change(task.partition, key, state)?);
            }
        }
        let outputs = outputs.iter().map(output_record).collect::<Result<Vec<_>, Error>>()?;
        Ok(Prepared { outputs, changes })
    }

    fn encode_change(&self, partition: i32, key: String, state: State) -> Result<StateChange, Error> {
        if state.is_empty() {
            // The baseline was not empty (else nothing changed): a tombstone (TRX-21).
            return Ok(StateChange { key, value: None });
        }
        let bytes = state.encode().map_err(|source| Error::Encode {
            what: format!("the state of key {key:?} in task {partition}"),
            source,
        })?;
        Ok(StateChange { key, value: Some(Bytes::from(bytes)) })
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
    ) -> Result<BucketResult, Error> {
        // The state the last transform set (`None`: none set one yet, the baseline holds).
        // Each transform gets its own copy (TRX-04): one clone per record, none otherwise.
        let mut last_set: Option<State> = None;
        let mut outputs = Vec::new();
        for (order, msg) in msgs {
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
                .unwrap_or_else(|panic| Err(panic_error(panic)));
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
        Ok(BucketResult { outputs, changed })
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
        task: &mut Task,
        outputs: Vec<ProducerRecord>,
        changes: &[StateChange],
        offsets: &[(TopicPartition, i64)],
        metadata: &GroupMetadata,
    ) -> Result<(), Error> {
        let changelog = self.settings.changelog_topic();
        let producer = &**task.producer.as_ref().expect("the per-task shape: every task has its producer");
        let mut txn = Txn::new(producer, &mut task.txn, &*self.observer);
        let filled = async {
            self.send_task_writes(&mut txn, &changelog, task.partition, outputs, changes).await?;
            if producer.transactional_id().is_some() {
                txn.send_offsets(offsets, metadata).await?;
            }
            buggify::point("task.before_commit").await;
            Ok(())
        }
        .await;
        txn.finish(filled).await?;
        Ok(())
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
        let mut txn = Txn::new(&*shared.producer, &mut shared.txn, &*self.observer);
        let filled = async {
            for (partition, outputs, changes) in writes {
                self.send_task_writes(&mut txn, &changelog, partition, outputs, changes).await?;
            }
            if !offsets.is_empty() {
                txn.send_offsets(offsets, metadata).await?;
            }
            buggify::point("task.before_commit").await;
            Ok(())
        }
        .await;
        txn.finish(filled).await?;
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
            let record = ProducerRecord {
                topic: changelog.to_owned(),
                partition: Some(partition),
                key: Some(Bytes::copy_from_slice(change.key.as_bytes())),
                value: change.value.clone(),
                headers: Vec::new(),
                timestamp_ms: None,
            };
            txn.send(record).await?;
        }
        Ok(())
    }
}

/// The local store follows the changelog only once the transaction committed: a store never
/// holds a state that no reader can see. All of the batch's changes in one write.
fn apply_changes(task: &mut Task, changes: Vec<StateChange>) -> Result<(), Error> {
    let writes: Vec<(&str, Option<&[u8]>)> =
        changes.iter().map(|change| (change.key.as_str(), change.value.as_deref())).collect();
    task.store.apply(&writes)?;
    Ok(())
}

/// The next offsets of one task's batch, as the group commits them.
fn task_offsets(inputs: &[String], partition: i32, batch: &TaskBatch) -> Vec<(TopicPartition, i64)> {
    batch.offsets.iter().map(|(&order, &next)| (TopicPartition::new(&inputs[order], partition), next)).collect()
}

fn load_state(task: &mut Task, key: &str) -> Result<State, Error> {
    match task.store.get(key)? {
        None => Ok(State::new()),
        Some(bytes) => crate::wire::decode_value(Some(&bytes)).map(State::wrap).map_err(|source| Error::CorruptState {
            partition: task.partition,
            key: key.to_owned(),
            source,
        }),
    }
}

fn output_record(message: &Message) -> Result<ProducerRecord, Error> {
    let encode_error = |source| Error::Encode { what: format!("a message to topic {:?}", message.topic()), source };
    Ok(ProducerRecord {
        topic: message.topic().to_owned(),
        partition: None,
        key: Some(message.encode_key().map_err(encode_error)?),
        value: message.encode_value().map_err(encode_error)?,
        headers: Vec::new(),
        timestamp_ms: message.timestamp_ms(),
    })
}

fn record_bytes(record: &ProducerRecord) -> usize {
    record.key.as_ref().map_or(0, Bytes::len) + record.value.as_ref().map_or(0, Bytes::len)
}

/// A stage panic as an error: its message, when it has one.
fn panic_error(panic: Box<dyn std::any::Any + Send>) -> BoxError {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("transform panicked: {message}").into()
}
