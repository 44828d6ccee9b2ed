//! The transformer runner: tasks, one transaction per task per batch, rebalances (TRX-01..38).
//!
//! Work is split into tasks, one per input partition number (spanning that partition of every
//! input topic; the Range assignor co-assigns them). A task owns a transactional producer with
//! the static id `{application_id}-{partition}` — starting it fences whoever held the task
//! before — and a state store restored from changelog partition `partition`.
//!
//! The main loop is sequential: start pending tasks → poll → apply rebalance events → drain
//! config topics → process the batch. Processing a batch commits one transaction per task
//! holding its outputs, its state changes (one final write per key) and its input offsets, so
//! a record's effects become visible exactly once, or — after a crash, a fence or a revocation —
//! not at all and the next owner redoes them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::try_join_all;

use crate::config_topics::{ConfigHooks, ConfigTopics};
use crate::configs::ConfigStore;
use crate::error::Error;
use crate::kafka::read::{read_to_end, ReadError};
use crate::kafka::{
    Consumer, ConsumerConfig, DeliveryFuture, GroupMetadata, Kafka, NewTopic, Producer, ProducerConfig, ProducerRecord,
    Rebalance, TopicCreation, TopicPartition,
};
use crate::message::{IncomingMessage, Message};
use crate::observer::Observer;
use crate::record::{Config, State};
use crate::stage::{BoxError, Output, Transformer};
use crate::state::{StateStore, StateStores};
use crate::wire::{self, InvalidMessagePolicy, RawRecord};

/// Timeout of the main loop's fetch (KNOB: 1000 ms).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(1_000);

/// Everything a runner is configured with.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub application_id: String,
    pub client_id: String,
    pub max_poll_records: usize,
    pub compression: crate::kafka::Compression,
    pub replication_factor: i16,
    pub session_timeout: Duration,
    pub guarantee: Guarantee,
}

/// The processing guarantee of a transformer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Guarantee {
    /// One Kafka transaction per task per batch: outputs, state and input offsets commit
    /// together or not at all (the default, and the point of this library).
    #[default]
    ExactlyOnce,
    /// No transactions: outputs and changelog records are sent idempotently, and the input
    /// offsets are committed once every record of the batch is acknowledged. A crash replays
    /// the uncommitted tail, so outputs may repeat. Meant for measuring what exactly-once costs,
    /// and for stages whose outputs are idempotent anyway.
    AtLeastOnce,
}

impl Settings {
    pub(crate) fn changelog_topic(&self) -> String {
        format!("{}-changelog", self.application_id)
    }
}

/// One task: an input partition number with its producer and its store.
struct Task {
    partition: i32,
    producer: Box<dyn Producer>,
    store: Box<dyn StateStore>,
}

/// The stage's hooks as the decoders and the config machinery take them.
struct Hooks<'a, S>(&'a S);

impl<S: Transformer> ConfigHooks for Hooks<'_, S> {
    fn enriches(&self) -> bool {
        self.0.enriches_configs()
    }
    fn enrich(&self, config: Config) -> impl std::future::Future<Output = Result<Config, BoxError>> + Send {
        self.0.enrich_config(config)
    }
    fn policy(&self) -> &dyn InvalidMessagePolicy {
        self
    }
}

impl<S: Transformer> InvalidMessagePolicy for Hooks<'_, S> {
    fn on_invalid_message(&self, error: &wire::InvalidMessageError) -> wire::InvalidMessageAction {
        self.0.on_invalid_message(error)
    }
}

/// The transformer runner.
pub(crate) struct Runner<S> {
    pub stage: Arc<S>,
    pub settings: Settings,
    pub kafka: Arc<dyn Kafka>,
    pub observer: Arc<dyn Observer>,
    pub stores: Arc<dyn StateStores>,
}

/// Offline topic validation (LIFE-11).
fn validate_topics(inputs: &[String], configs: &[String]) -> Result<(), Error> {
    if inputs.is_empty() {
        return Err(Error::Invalid("a transformer needs at least one input topic".into()));
    }
    let inputs: BTreeSet<&String> = inputs.iter().collect();
    let both: Vec<&String> =
        configs.iter().filter(|t| inputs.contains(t)).collect::<BTreeSet<_>>().into_iter().collect();
    if !both.is_empty() {
        return Err(Error::Invalid(format!("topics cannot be both input and config topics: {both:?}")));
    }
    Ok(())
}

impl<S: Transformer> Runner<S> {
    /// Runs until `shutdown` resolves (clean stop) or an error (LIFE-20..23).
    pub(crate) async fn run(&self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
        self.stage.setup().await.map_err(|source| Error::Hook { hook: "setup".into(), source })?;
        let result = self.run_stage(shutdown).await;
        let teardown = self.stage.teardown().await.map_err(|source| Error::Hook { hook: "teardown".into(), source });
        result.and(teardown)
    }

    /// Startup validation against the broker (LIFE-13, LIFE-14, LIFE-15); returns the task count.
    async fn check_topics(&self, inputs: &[String], configs: &[String]) -> Result<u32, Error> {
        let admin = self.kafka.admin()?;
        let mut counts = BTreeMap::new();
        for topic in inputs {
            let count = admin.partition_count(topic).await?.ok_or_else(|| {
                crate::kafka::KafkaError::new(
                    crate::kafka::KafkaErrorKind::UnknownTopic,
                    "startup",
                    "input topic does not exist",
                )
                .with_context(topic.clone())
            })?;
            counts.insert(topic.clone(), count);
        }
        let distinct: BTreeSet<u32> = counts.values().copied().collect();
        if distinct.len() > 1 {
            return Err(Error::Invalid(format!("input topics must have equal partition counts: {counts:?}")));
        }
        let partitions = *distinct.iter().next().expect("at least one input topic");
        let changelog = self.settings.changelog_topic();
        let spec = NewTopic::new(&changelog, partitions).replication(self.settings.replication_factor).compacted();
        // A freshly created changelog is not described again (LIFE-14, USR-08).
        if admin.create_topic(&spec).await? == TopicCreation::AlreadyExists {
            let existing = admin.partition_count(&changelog).await?;
            if existing != Some(partitions) {
                return Err(Error::Invalid(format!(
                    "changelog {changelog} has {existing:?} partitions but the input topics have {partitions}: \
                     repartitioning requires a state migration"
                )));
            }
        }
        for topic in configs {
            if admin.partition_count(topic).await?.is_none() {
                return Err(crate::kafka::KafkaError::new(
                    crate::kafka::KafkaErrorKind::UnknownTopic,
                    "startup",
                    "config topic does not exist",
                )
                .with_context(topic.clone())
                .into());
            }
        }
        Ok(partitions)
    }

    async fn run_stage(&self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
        let inputs = self.stage.input_topics();
        let config_topics = self.stage.config_topics();
        validate_topics(&inputs, &config_topics)?;
        self.check_topics(&inputs, &config_topics).await?;
        let hooks = Hooks(&*self.stage);
        // The config store is bootstrapped before subscribing: a failing bootstrap crashes
        // without rebalance churn (CFG-24).
        let mut configs =
            ConfigTopics::bootstrap(&*self.kafka, &self.settings.client_id, &config_topics, &hooks, &*self.observer)
                .await?;
        let mut consumer = self.kafka.consumer(ConsumerConfig {
            session_timeout: self.settings.session_timeout,
            ..ConsumerConfig::member(&self.settings.client_id, &self.settings.application_id)
        })?;
        consumer.subscribe(&inputs).await?;
        let mut state = LoopState { tasks: BTreeMap::new(), pending: BTreeSet::new() };
        let result = {
            let main = self.main_loop(consumer.as_mut(), &mut configs, &mut state, &inputs);
            tokio::pin!(main);
            tokio::pin!(shutdown);
            tokio::select! {
                biased;
                () = &mut shutdown => Ok(()),
                result = &mut main => result,
            }
        };
        // Torn down explicitly: stopping the consumer runs no revocation (TRX-36).
        let teardown = self.teardown(&mut state.tasks).await;
        let closed = consumer.close().await.map_err(Error::from);
        let config_closed = configs.close().await;
        result.and(teardown).and(closed).and(config_closed)
    }

    async fn main_loop(
        &self,
        consumer: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        state: &mut LoopState,
        inputs: &[String],
    ) -> Result<(), Error> {
        let hooks = Hooks(&*self.stage);
        loop {
            if !state.pending.is_empty() {
                let pending = std::mem::take(&mut state.pending);
                self.start_tasks(consumer, &pending, &mut state.tasks, inputs).await?;
            }
            let polled = consumer.poll(self.settings.max_poll_records, POLL_TIMEOUT).await?;
            for event in polled.rebalances {
                match event {
                    Rebalance::Revoked { partitions } => {
                        tracing::info!(revoked = partitions.len(), "partitions revoked: tearing down every task");
                        self.teardown(&mut state.tasks).await?;
                        state.pending.clear();
                    }
                    Rebalance::Assigned { partitions, generation } => {
                        // Bookkeeping only (TRX-32): the partitions arrive paused.
                        state.pending = partitions.iter().map(|p| p.partition).collect();
                        tracing::info!(generation, tasks = ?state.pending, "partitions assigned");
                    }
                }
            }
            crate::buggify::point("loop.after_poll").await;
            configs.drain(&hooks, &*self.observer).await?;
            // Records of partitions without a live task are dropped uncommitted: their next
            // owner processes them (TRX-02, TRX-35).
            let records: Vec<RawRecord> =
                polled.records.into_iter().filter(|r| state.tasks.contains_key(&r.partition)).collect();
            if !records.is_empty() {
                let Some(metadata) = consumer.group_metadata() else {
                    // The member lost its membership (evicted after a pause or a partition) and
                    // has not been told yet: nothing it holds may commit. Drop the batch and the
                    // tasks; the rejoin brings a fresh assignment from the committed offsets.
                    tracing::warn!("group membership lost: dropping the batch and every task");
                    self.teardown(&mut state.tasks).await?;
                    continue;
                };
                let offsets = self.process_batch(records, &mut state.tasks, configs.store(), &metadata, inputs).await?;
                if self.settings.guarantee == Guarantee::AtLeastOnce {
                    consumer.commit_offsets(&offsets).await?;
                }
            }
        }
    }

    /// Starts tasks concurrently (TRX-31): fence, restore, then resume their partitions.
    async fn start_tasks(
        &self,
        consumer: &mut dyn Consumer,
        pending: &BTreeSet<i32>,
        tasks: &mut BTreeMap<i32, Task>,
        inputs: &[String],
    ) -> Result<(), Error> {
        let started = try_join_all(pending.iter().map(|&p| self.start_task(p))).await?;
        for task in started {
            let partitions: Vec<TopicPartition> =
                inputs.iter().map(|t| TopicPartition::new(t, task.partition)).collect();
            // Position from the offsets committed *now*, after the fence: a zombie that
            // committed between the assignment and the fence moved them, and its changes are
            // in the restored state, so its records must not be processed again. (A client
            // that looked the offsets up at assignment time would be behind.)
            let committed = consumer.committed(&partitions).await?;
            for (partition, offset) in partitions.iter().zip(committed) {
                if let Some(offset) = offset {
                    consumer.seek(partition, offset).await?;
                }
            }
            tasks.insert(task.partition, task);
            consumer.resume(&partitions)?;
        }
        self.observer.tasks_assigned(tasks.len());
        Ok(())
    }

    async fn start_task(&self, partition: i32) -> Result<Task, Error> {
        let settings = &self.settings;
        let client_id = format!("{}-{partition}", settings.client_id);
        let mut config = match settings.guarantee {
            Guarantee::ExactlyOnce => {
                ProducerConfig::transactional(client_id, format!("{}-{partition}", settings.application_id))
            }
            Guarantee::AtLeastOnce => ProducerConfig::idempotent(client_id),
        };
        config.compression = settings.compression;
        let producer = self.kafka.producer(config)?;
        crate::buggify::point("task.before_fence").await;
        if settings.guarantee == Guarantee::ExactlyOnce {
            // Fences the previous owner and aborts its open transaction before the restore
            // reads the changelog, so the restore can never see a zombie's half-written batch.
            producer.init_transactions().await?;
        }
        crate::buggify::point("task.before_restore").await;
        let mut store = self.stores.open(&settings.application_id, partition)?;
        let restored = self.restore(partition, store.as_mut()).await?;
        self.observer.state_restored(partition, restored);
        tracing::debug!(partition, restored, "task started");
        Ok(Task { partition, producer, store })
    }

    /// Replays changelog partition `partition` to its LSO into `store` (STO-11, STO-13).
    async fn restore(&self, partition: i32, store: &mut dyn StateStore) -> Result<usize, Error> {
        let client_id = format!("{}-restore-{partition}", self.settings.client_id);
        let mut consumer = self.kafka.consumer(ConsumerConfig::groupless(client_id))?;
        let changelog = TopicPartition::new(self.settings.changelog_topic(), partition);
        let read = read_to_end(consumer.as_mut(), &[changelog], |record| -> Result<(), Error> {
            let key = wire::decode_key(record.key.as_deref()).map_err(|source| Error::CorruptState {
                partition,
                key: String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned(),
                source,
            })?;
            if wire::is_tombstone(record.value.as_deref()) {
                store.delete(&key)?;
            } else {
                store.put(&key, record.value.as_deref().expect("not a tombstone"))?;
            }
            Ok(())
        })
        .await;
        consumer.close().await?;
        match read {
            Ok(summary) => Ok(summary.records as usize),
            Err(ReadError::Kafka(e)) => Err(e.into()),
            Err(ReadError::Callback(e)) => Err(e),
        }
    }

    /// Stops every task and wipes its store (TRX-33): never retained across a rebalance.
    async fn teardown(&self, tasks: &mut BTreeMap<i32, Task>) -> Result<(), Error> {
        if tasks.is_empty() {
            return Ok(());
        }
        for (_, mut task) in std::mem::take(tasks) {
            task.producer.close().await;
            task.store.wipe()?;
        }
        self.observer.tasks_assigned(0);
        Ok(())
    }

    /// Decodes, processes and commits one fetched batch (TRX-10..23); returns the next offset of
    /// every input partition it covered.
    async fn process_batch(
        &self,
        records: Vec<RawRecord>,
        tasks: &mut BTreeMap<i32, Task>,
        configs: &ConfigStore,
        metadata: &GroupMetadata,
        inputs: &[String],
    ) -> Result<Vec<(TopicPartition, i64)>, Error> {
        let started = tokio::time::Instant::now();
        let batch = self.parse(records, inputs)?;
        let size = batch.values().map(|b| b.messages.len()).sum();
        let work = tasks
            .iter_mut()
            .filter_map(|(p, task)| batch.get(p).map(|b| (task, b)))
            .map(|(task, task_batch)| self.run_task_batch(task, task_batch, configs, metadata));
        try_join_all(work).await?;
        self.observer.batch_processed(size, started.elapsed());
        Ok(batch.values().flat_map(|b| b.offsets.iter().map(|(tp, o)| (tp.clone(), *o))).collect())
    }

    /// The parse loop, before any transaction (TRX-14): every record through the policy, grouped
    /// by task; offsets include skipped records (TRX-11).
    fn parse(&self, records: Vec<RawRecord>, inputs: &[String]) -> Result<BTreeMap<i32, TaskBatch>, Error> {
        let policy = Hooks(&*self.stage);
        let mut batch: BTreeMap<i32, TaskBatch> = BTreeMap::new();
        for record in records {
            self.observer.message_in_bytes(&record.topic, record.size_bytes());
            let task = batch.entry(record.partition).or_default();
            let tp = TopicPartition::new(&*record.topic, record.partition);
            let next = task.offsets.entry(tp).or_insert(record.offset + 1);
            *next = (*next).max(record.offset + 1);
            if let Some(msg) = wire::decode_input(&record, &policy, &*self.observer)? {
                let order = inputs.iter().position(|t| *t == msg.topic).unwrap_or(usize::MAX);
                task.messages.push((order, msg));
            }
        }
        Ok(batch)
    }

    /// Runs one task's share of a batch and commits it in one transaction.
    async fn run_task_batch(
        &self,
        task: &mut Task,
        batch: &TaskBatch,
        configs: &ConfigStore,
        metadata: &GroupMetadata,
    ) -> Result<(), Error> {
        // Bucket by state key; within a bucket, input_topics order, then offset order (TRX-03).
        let mut buckets: BTreeMap<String, Vec<&(usize, IncomingMessage)>> = BTreeMap::new();
        for entry in &batch.messages {
            buckets.entry(self.stage.extract_state_key(&entry.1)).or_default().push(entry);
        }
        let mut baselines = Vec::with_capacity(buckets.len());
        for (key, msgs) in &mut buckets {
            msgs.sort_by_key(|(order, msg)| (*order, msg.offset));
            baselines.push(self.load_state(task, key)?);
        }
        let results = try_join_all(
            buckets.iter().zip(baselines).map(|((_, msgs), baseline)| self.run_bucket(msgs, baseline, configs)),
        )
        .await?;
        let mut outputs = Vec::new();
        let mut changes = Vec::new();
        for ((key, _), result) in buckets.iter().zip(results) {
            outputs.extend(result.outputs);
            if let Some(state) = result.changed {
                changes.push((key.clone(), state));
            }
        }
        self.commit(task, outputs, changes, &batch.offsets, metadata).await
    }

    fn load_state(&self, task: &mut Task, key: &str) -> Result<State, Error> {
        match task.store.get(key)? {
            None => Ok(State::new()),
            Some(bytes) => wire::decode_value(Some(&bytes)).map(State::wrap).map_err(|source| Error::CorruptState {
                partition: task.partition,
                key: key.to_owned(),
                source,
            }),
        }
    }

    /// Runs one bucket's records serially, each on a private copy of the running state
    /// (TRX-04); returns the outputs and the final state if it differs from the baseline
    /// (TRX-20).
    async fn run_bucket(
        &self,
        msgs: &[&(usize, IncomingMessage)],
        baseline: State,
        configs: &ConfigStore,
    ) -> Result<BucketResult, Error> {
        let mut current = baseline.clone();
        let mut last_set: Option<State> = None;
        let mut outputs = Vec::new();
        for (_, msg) in msgs {
            self.observer.message_in(&msg.topic);
            let mut out = Output::new(configs, &*self.observer);
            let started = tokio::time::Instant::now();
            let result = self.stage.transform(msg.clone(), current.clone(), &mut out).await;
            self.observer.message_processed(started.elapsed());
            result.map_err(|source| Error::Transform {
                topic: msg.topic.clone(),
                partition: msg.partition,
                offset: msg.offset,
                source,
            })?;
            let (messages, state) = out.into_parts();
            outputs.extend(messages);
            if let Some(state) = state {
                current = state.clone();
                last_set = Some(state);
            }
        }
        let changed = last_set.filter(|s| *s != baseline);
        Ok(BucketResult { outputs, changed })
    }

    /// One transaction: outputs, state changes (changelog + local store), input offsets.
    async fn commit(
        &self,
        task: &mut Task,
        outputs: Vec<Message>,
        changes: Vec<(String, State)>,
        offsets: &BTreeMap<TopicPartition, i64>,
        metadata: &GroupMetadata,
    ) -> Result<(), Error> {
        let producer = &*task.producer;
        let transactional = self.settings.guarantee == Guarantee::ExactlyOnce;
        if transactional {
            producer.begin_transaction().await?;
        }
        let mut deliveries: Vec<DeliveryFuture> = Vec::with_capacity(outputs.len() + changes.len());
        for message in outputs {
            let record = self.output_record(&message)?;
            self.observer.message_out_bytes(
                &record.topic,
                record.key.as_ref().map_or(0, Bytes::len) + record.value.as_ref().map_or(0, Bytes::len),
            );
            deliveries.push(producer.send(record).await?);
        }
        let changelog = self.settings.changelog_topic();
        for (key, state) in changes {
            let value = if state.is_empty() {
                task.store.delete(&key)?;
                None
            } else {
                let bytes = state.encode().map_err(|source| Error::Encode {
                    what: format!("the state of key {key:?} in task {}", task.partition),
                    source,
                })?;
                self.observer.state_record_bytes(bytes.len());
                task.store.put(&key, &bytes)?;
                Some(Bytes::from(bytes))
            };
            let record = ProducerRecord {
                topic: changelog.clone(),
                partition: Some(task.partition),
                key: Some(Bytes::from(key.into_bytes())),
                value,
                headers: Vec::new(),
                timestamp_ms: None,
            };
            deliveries.push(producer.send(record).await?);
        }
        if transactional {
            let offsets: Vec<(TopicPartition, i64)> = offsets.iter().map(|(tp, o)| (tp.clone(), *o)).collect();
            producer.send_offsets_to_transaction(&offsets, metadata).await?;
        }
        // Every delivery before the commit: a failed one aborts instead of committing a hole
        // (at-least-once: before the offsets are committed).
        for delivery in deliveries {
            delivery.await?;
        }
        crate::buggify::point("task.before_commit").await;
        if transactional {
            producer.commit_transaction().await?;
            self.observer.transaction_committed();
        }
        Ok(())
    }

    fn output_record(&self, message: &Message) -> Result<ProducerRecord, Error> {
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
}

struct LoopState {
    tasks: BTreeMap<i32, Task>,
    pending: BTreeSet<i32>,
}

/// One task's part of a batch: decoded messages (with their input-topic order) and the next
/// offset per input partition.
#[derive(Default)]
struct TaskBatch {
    messages: Vec<(usize, IncomingMessage)>,
    offsets: BTreeMap<TopicPartition, i64>,
}

struct BucketResult {
    outputs: Vec<Message>,
    changed: Option<State>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn life_11_offline_validation() {
        let err = validate_topics(&[], &[]).unwrap_err().to_string();
        assert!(err.contains("at least one"), "{err}");
        let err =
            validate_topics(&["b".into(), "a".into()], &["b".into(), "a".into(), "c".into()]).unwrap_err().to_string();
        assert!(err.contains("both input and config") && err.contains(r#"["a", "b"]"#), "{err}");
        assert!(validate_topics(&["in".into()], &["cfg".into()]).is_ok());
    }
}
