//! The transformer runner: tasks, one transaction per task per batch, rebalances (TRX-01..38).
//!
//! Work is split into tasks, one per input partition number (spanning that partition of every
//! input topic; the Range assignor co-assigns them). A task owns a transactional producer with
//! the static id `{application_id}-{partition}` — starting it fences whoever held the task
//! before — and a state store restored from changelog partition `partition`.
//!
//! The main loop: start pending tasks → poll → apply rebalance events → drain config topics →
//! prepare the batch (run and encode it, no transaction yet) → commit it. Committing a batch
//! writes one transaction per task holding its outputs, its state changes (one final write per
//! key) and its input offsets, so a record's effects become visible exactly once, or — after a
//! crash, a fence or a revocation — not at all and the next owner redoes them.
//!
//! The loop is pipelined: while batch N commits, batch N+1 is polled, the config topics drained
//! and N+1 prepared, its baselines read from N's changes before the stores (which take N's
//! changes only once N committed). N+1's transactions begin only after N completed. A poll that
//! brings rebalance events is handled only after the batch in flight completed, so rebalances
//! still fall between batches; an error of N is returned before anything of N+1 is written,
//! and an error of N+1's preparation only after N completed.
//!
//! With [`Producers::PerInstance`] (KIP-447, TRX-40..44, docs/concepts/exactly-once-v2.md) the
//! instance has one transactional producer instead, `{application_id}-instance-{client_id}`,
//! started before it joins the group and kept across rebalances; a batch commits one
//! transaction for all its tasks, whose offsets carry the consumer's group metadata so that the
//! coordinator refuses them from a stale generation. A task's start then reads the group's
//! offsets first (stable: no transaction of a previous owner still pending), and only then
//! restores, to the changelog's high watermark.
//!
//! Invariants this module asserts where it relies on them: partitions are revoked before new
//! ones are assigned (eager rebalancing), so an assignment never finds live tasks; a task's
//! batch commits (or aborts) before its revocation is handled, because the loop handles
//! rebalance events only between batches, with none in flight; a task's committed offsets only
//! move forward; tasks start only with no batch prepared or in flight.

mod batch;
mod checkpoint;
mod task;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::try_join_all;
use tracing::Instrument as _;

use self::batch::PreparedBatch;
use self::task::{SharedProducer, TaskStore, Tasks};
use crate::engine::bounds::{CLOSE_TIMEOUT, POLL_TIMEOUT, TASK_TRANSACTION_TIMEOUT};
use crate::engine::buggify;
use crate::engine::config_topics::ConfigTopics;
use crate::engine::hooks::Hooks;
use crate::engine::lifecycle;
use crate::engine::settings::{Guarantee, Producers, Settings};
use crate::engine::stop::Stop;
use crate::error::Error;
use crate::kafka::{
    Consumer, ConsumerConfig, FetchLimits, GroupMetadata, Kafka, KafkaError, KafkaErrorKind, LogEnd, NewTopic, Polled,
    ProducerConfig, Rebalance, RevocationGate, TopicPartition,
};
use crate::observer::Observer;
use crate::stage::Transformer;
use crate::state::StateStores;
use crate::wire::RawRecord;

/// The transformer runner.
pub(crate) struct TaskRunner<S> {
    pub(crate) stage: Arc<S>,
    pub(crate) settings: Settings,
    pub(crate) kafka: Arc<dyn Kafka>,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) stores: Arc<dyn StateStores>,
    /// The changelog positions the batch committing now delivered, per task: its commit
    /// fills them, its completion hands them to the stores with the changes (STO-05).
    pub(crate) positions: std::sync::Mutex<batch::ChangelogEnds>,
    /// The changelog's partition count as the last restore found it, which checkpoints record.
    pub(crate) changelog_partitions: std::sync::atomic::AtomicU32,
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

fn unknown_topic(topic: &str, what: &str) -> Error {
    KafkaError::new(KafkaErrorKind::UnknownTopic, "startup", format!("{what} does not exist"))
        .with_context(topic)
        .into()
}

impl<S: Transformer> TaskRunner<S> {
    /// Runs until `stop` is raised (clean stop) or an error (LIFE-20..23). The stage's setup runs
    /// first and its teardown last, after an error too (STG-02).
    pub(crate) async fn run(&self, stop: &Stop) -> Result<(), Error> {
        lifecycle::hooked(self.stage.setup(), self.run_stage(stop), || self.stage.teardown()).await
    }

    /// Startup validation against the broker (LIFE-13, LIFE-14, LIFE-15); returns the task count.
    async fn check_topics(&self, inputs: &[String], configs: &[String]) -> Result<u32, Error> {
        let admin = self.kafka.admin()?;
        let mut counts = BTreeMap::new();
        for topic in inputs {
            let count = admin.partition_count(topic).await?.ok_or_else(|| unknown_topic(topic, "input topic"))?;
            counts.insert(topic.clone(), count);
        }
        let distinct: BTreeSet<u32> = counts.values().copied().collect();
        if distinct.len() > 1 {
            return Err(Error::Invalid(format!("input topics must have equal partition counts: {counts:?}")));
        }
        let partitions = *distinct.iter().next().expect("validated: at least one input topic");
        let changelog = self.settings.changelog_topic();
        let spec = NewTopic::new(&changelog, partitions).replication(self.settings.replication_factor).compacted();
        let (_, existing) = lifecycle::create_or_adopt(&*admin, &spec).await?;
        if existing != partitions {
            return Err(Error::Invalid(format!(
                "changelog {changelog} has {existing} partitions but the input topics have {partitions}: \
                 repartitioning requires a state migration"
            )));
        }
        for topic in configs {
            if admin.partition_count(topic).await?.is_none() {
                return Err(unknown_topic(topic, "config topic"));
            }
        }
        Ok(partitions)
    }

    async fn run_stage(&self, stop: &Stop) -> Result<(), Error> {
        let inputs = self.stage.input_topics();
        let config_topics = self.stage.config_topics();
        validate_topics(&inputs, &config_topics)?;
        // Raced against the stop like the bootstrap: with a broker down these admin reads retry
        // for up to a minute, and an instance stopped meanwhile must still stop within its budget.
        let Some(checked) = stop.unless_raised(self.check_topics(&inputs, &config_topics)).await else {
            return Ok(());
        };
        checked?;
        let stage = &*self.stage;
        let policy = |error: &crate::wire::InvalidMessageError| stage.on_invalid_message(error);
        let hooks = Hooks { enricher: stage.config_enricher(), policy: &policy, state_key: None };
        // The config store is bootstrapped before subscribing: a failing bootstrap crashes
        // without rebalance churn (CFG-24).
        let bootstrap =
            ConfigTopics::bootstrap(&*self.kafka, &self.settings.client_id, &config_topics, hooks, &*self.observer);
        let Some(configs) = stop.unless_raised(bootstrap).await else { return Ok(()) };
        let mut configs = configs?;
        let mut tasks = Tasks::default();
        if self.per_instance() {
            let start = self.start_shared_producer();
            tasks.shared = tokio::select! {
                biased;
                () = stop.raised() => {
                    let closed = configs.close().await;
                    return closed;
                }
                shared = start => match shared {
                    Ok(shared) => Some(shared),
                    Err(error) => {
                        let _ = configs.close().await;
                        return Err(error);
                    }
                },
            };
        }
        let mut consumer = self.kafka.consumer(ConsumerConfig {
            session_timeout: self.settings.session_timeout,
            fetch_limits: self.settings.fetch_limits,
            ..ConsumerConfig::member(&self.settings.client_id, &self.settings.application_id)
        })?;
        let result = match consumer.subscribe(&inputs).await {
            Ok(()) => self.main_loop(consumer.as_mut(), &mut configs, &mut tasks, &inputs, hooks, stop).await,
            Err(error) => Err(error.into()),
        };
        // Torn down explicitly: stopping the consumer runs no revocation (TRX-36). A batch the
        // shutdown abandoned left its transactions open: stopping the tasks aborts them.
        let cause = match &result {
            Ok(()) => "shutdown".to_owned(),
            Err(error) => error.to_string(),
        };
        let stopped = tasks.stop_all(&*self.observer, &cause).await;
        if let Some(shared) = tasks.shared.take() {
            shared.close(&cause).await;
        }
        let closed =
            lifecycle::close_bounded("the consumer", consumer.close()).await.unwrap_or(Ok(())).map_err(Error::from);
        let config_closed = configs.close().await;
        result.and(stopped).and(closed).and(config_closed)
    }

    async fn main_loop(
        &self,
        consumer: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        tasks: &mut Tasks,
        inputs: &[String],
        hooks: Hooks<'_>,
        stop: &Stop,
    ) -> Result<(), Error> {
        let mut pending: BTreeSet<i32> = BTreeSet::new();
        // Held for each commit: a revocation served by the poll that runs meanwhile waits for
        // it (TRX-33), as it waits for the batch lock in the reference.
        let gate = RevocationGate::default();
        consumer.hold_revocations(gate.clone());
        let env = LoopEnv { inputs, hooks, stop, gate: &gate };
        // The batch prepared last, to commit next: it commits while the next one is polled
        // and prepared.
        let mut ready: Option<PreparedBatch> = None;
        // A poll to handle once `ready` completed, between batches: it brought rebalance events
        // while `ready` was being committed (and the next batch polled or gathered).
        let mut deferred: Option<Polled> = None;
        loop {
            // A prepared batch still commits (its transactions are not begun yet; the stop
            // waits for them like it waits for a batch being written).
            if stop.is_raised() && ready.is_none() {
                return Ok(());
            }
            if !pending.is_empty() {
                assert!(ready.is_none(), "tasks start only after the batch before the assignment completed");
                let start = self.start_tasks(consumer, &pending, tasks, inputs);
                tokio::select! {
                    biased;
                    started = start => started?,
                    () = stop.grace_expired() => return Ok(()),
                }
                pending.clear();
            }
            if let Some(batch) = ready.take() {
                // No poll ahead while a poll waits to be handled: it comes first.
                let poll_ahead = deferred.is_none();
                match self.pipelined_step(batch, consumer, configs, tasks, poll_ahead, env).await? {
                    // Abandoned: the tasks' open transactions are aborted when they stop.
                    None | Some(Next::Stopped) => return Ok(()),
                    Some(Next::Ready { batch, deferred: polled }) => {
                        ready = batch;
                        deferred = deferred.or(polled);
                    }
                    Some(Next::MembershipLost) => membership_lost(tasks, &*self.observer).await?,
                }
                continue;
            }
            let polled = match deferred.take() {
                Some(polled) => polled,
                // Poll is cancellation-safe (the port's contract), so a shutdown may interrupt it.
                None => tokio::select! {
                    biased;
                    () = stop.raised() => return Ok(()),
                    polled = consumer.poll(self.settings.max_poll_records, POLL_TIMEOUT) => polled?,
                },
            };
            match self.on_polled(polled, consumer, configs, tasks, &mut pending, env).await? {
                Next::Ready { batch, deferred: polled } => {
                    ready = batch;
                    deferred = polled;
                }
                Next::MembershipLost => membership_lost(tasks, &*self.observer).await?,
                Next::Stopped => return Ok(()),
            }
        }
    }

    /// Commits `batch` while the next batch is polled and prepared (TRX-02; with `poll_ahead`
    /// false, it only commits), holding the revocation gate until the commit finished, so that a
    /// revocation the poll serves waits for it (TRX-33). Returns what the polls brought once
    /// `batch` committed and completed (its changes in the stores, its offsets committed in
    /// at-least-once mode), or `None` when the stop's grace expired first. A poll that brings
    /// rebalance events is handed back unprocessed: they are handled after the commit, between
    /// batches. An error of the commit is returned first; one of the next batch's preparation
    /// after this batch completed.
    async fn pipelined_step(
        &self,
        mut batch: PreparedBatch,
        consumer: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        tasks: &mut Tasks,
        poll_ahead: bool,
        env: LoopEnv<'_>,
    ) -> Result<Option<Next>, Error> {
        let outputs = batch.take_outputs();
        let (txns, mut stores, shared) = tasks.split();
        // Revocations wait until the batch completed (TRX-33, TRX-46): in exactly-once mode
        // until its transactions committed; in at-least-once mode until its offsets are
        // committed too, after the commit (they go out with the current generation).
        let at_least_once = self.settings.guarantee == Guarantee::AtLeastOnce;
        let gathered_hold = batch.take_hold();
        let hold = env.gate.hold();
        let (done, finished) = tokio::sync::oneshot::channel();
        let commit = async {
            let committed = self.commit_batch(txns, shared, outputs, &batch).await;
            let kept = if at_least_once { Some(hold) } else { None };
            let _ = done.send(());
            (committed, kept)
        };
        let ahead = async {
            if !poll_ahead {
                return Ok(Next::Ready { batch: None, deferred: None });
            }
            self.poll_ahead(consumer, configs, &mut stores, &batch, finished, env).await
        };
        let ((committed, kept), next) = tokio::select! {
            biased;
            both = futures::future::join(commit, ahead) => both,
            () = env.stop.grace_expired() => return Ok(None),
        };
        drop(stores);
        committed?;
        let offsets = self.complete_batch(tasks, batch)?;
        if at_least_once {
            consumer.commit_offsets(&offsets).await?;
        }
        drop((kept, gathered_hold));
        next.map(Some)
    }

    /// The next batch, polled and prepared while `ahead` commits: its baselines read `ahead`'s
    /// changes first (they are not in `stores` yet). A poll still waiting when `ahead` finished
    /// (`finished`) is given up, so that `ahead` completes (its metrics, its offsets in
    /// at-least-once mode) without waiting out the poll's timeout on an idle input.
    ///
    /// With [`max_batch_records`](crate::FlechtwerkBuilder::max_batch_records) above
    /// `max_poll_records`, it keeps polling until `ahead` finished, and every poll joins the
    /// same next batch, up to that many records (TRX-45). Each further poll reads the batch
    /// gathered so far first, then `ahead`; before it, the gathered batch holds the revocation
    /// gate (TRX-46): a revocation that poll serves waits until the gathered batch committed
    /// too, so its offsets never go out with a generation the group has left. A poll that
    /// brings rebalance events ends the gathering and is handed back unprocessed, to handle
    /// after the gathered batch completed; one that finds the member no longer the member the
    /// gathered batch was fetched as (evicted: no identity, another generation or member id)
    /// drops the gathered batch ([`Next::MembershipLost`]).
    async fn poll_ahead(
        &self,
        consumer: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        stores: &mut BTreeMap<i32, TaskStore<'_>>,
        ahead: &PreparedBatch,
        mut finished: tokio::sync::oneshot::Receiver<()>,
        env: LoopEnv<'_>,
    ) -> Result<Next, Error> {
        let gathers = self.settings.gathers();
        let mut next: Option<PreparedBatch> = None;
        loop {
            let room = self.settings.max_batch_records.saturating_sub(next.as_ref().map_or(0, PreparedBatch::size));
            if room == 0 {
                break;
            }
            if let Some(gathered) = &mut next {
                // The batch grows only while `ahead` commits: once it finished, a poll that
                // returns at once must not hold the gathered batch back.
                if !matches!(finished.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty)) {
                    break;
                }
                gathered.hold_revocations(env.gate);
            }
            // Poll is cancellation-safe (the port's contract).
            let polled = tokio::select! {
                biased;
                () = env.stop.raised() => break,
                polled = consumer.poll(room.min(self.settings.max_poll_records), POLL_TIMEOUT) => polled?,
                _ = &mut finished => break,
            };
            if !polled.rebalances.is_empty() {
                return Ok(Next::Ready { batch: next, deferred: Some(polled) });
            }
            // The identity the poll's records are prepared (and their offsets committed) with,
            // read once. A gathering batch takes them only from the member it was fetched as
            // (its generation, its id): a member the coordinator evicted meanwhile (librdkafka
            // resets its identity on its own thread, with no rebalance event yet) must not
            // commit what it gathered.
            let member = consumer.group_metadata();
            if next.as_ref().is_some_and(|gathered| !member.as_ref().is_some_and(|m| gathered.fetched_as(m))) {
                return Ok(Next::MembershipLost);
            }
            let prepared = {
                let unstored: Vec<&PreparedBatch> = next.iter().chain([ahead]).collect();
                self.prepare_polled(polled.records, member, configs, stores, &unstored, env).await?
            };
            match prepared {
                Next::Ready { batch: Some(part), .. } => match &mut next {
                    Some(gathered) => gathered.gather(part),
                    None => next = Some(part),
                },
                Next::Ready { batch: None, .. } => {}
                lost => return Ok(lost),
            }
            // One poll's records per batch unless it gathers (an empty poll does not count).
            if !gathers && next.is_some() {
                break;
            }
        }
        if next.is_none() && env.stop.is_raised() {
            return Ok(Next::Stopped);
        }
        Ok(Next::Ready { batch: next, deferred: None })
    }

    /// The records of a poll made a batch: after the config drain, those of partitions without
    /// a live task (no entry in `stores`) are dropped uncommitted: their next owner processes them
    /// (TRX-02, TRX-35); the rest are prepared, reading the changes of `ahead` (batches not in
    /// the stores yet, newest first) first, as the group member `member` (read once the poll
    /// returned; `None`: not a member). Returns [`Next::Ready`] without a deferred poll, or
    /// [`Next::MembershipLost`].
    async fn prepare_polled(
        &self,
        records: Vec<RawRecord>,
        member: Option<GroupMetadata>,
        configs: &mut ConfigTopics,
        stores: &mut BTreeMap<i32, TaskStore<'_>>,
        ahead: &[&PreparedBatch],
        env: LoopEnv<'_>,
    ) -> Result<Next, Error> {
        buggify::point("loop.after_poll").await;
        configs.drain(env.hooks, &*self.observer, |_, _| Ok(())).await?;
        let records: Vec<_> = records.into_iter().filter(|r| stores.contains_key(&r.partition)).collect();
        if records.is_empty() {
            return Ok(Next::Ready { batch: None, deferred: None });
        }
        let Some(metadata) = member else {
            return Ok(Next::MembershipLost);
        };
        // One consistent snapshot of the config store for the whole batch (CFG-24): nothing
        // writes it until the next drain, in this loop.
        let store = configs.store().read().await;
        let batch = self.prepare_batch(records, stores, ahead, &store, metadata, env.inputs).await?;
        Ok(Next::Ready { batch: Some(batch), deferred: None })
    }

    /// A poll handled with no batch in flight: its rebalance events, then its records
    /// ([`TaskRunner::prepare_polled`]). Returns [`Next::Ready`] without a deferred poll,
    /// [`Next::MembershipLost`], or [`Next::Stopped`] when the stop's grace expired during the
    /// preparation.
    async fn on_polled(
        &self,
        polled: Polled,
        consumer: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        tasks: &mut Tasks,
        pending: &mut BTreeSet<i32>,
        env: LoopEnv<'_>,
    ) -> Result<Next, Error> {
        for event in polled.rebalances {
            match event {
                Rebalance::Revoked { partitions } => {
                    tracing::info!(revoked = partitions.len(), "partitions revoked: stopping every task");
                    // Between batches: no task has a transaction open (TRX-33).
                    assert!(
                        tasks.live.values().all(|t| !t.txn.is_open())
                            && tasks.shared.as_ref().is_none_or(|s| !s.txn.is_open()),
                        "a task's batch commits before its revocation is handled"
                    );
                    tasks.stop_all(&*self.observer, "partitions revoked").await?;
                    pending.clear();
                }
                Rebalance::Assigned { partitions, generation } => {
                    assert!(
                        tasks.live.is_empty(),
                        "eager rebalancing: partitions are revoked before new ones are assigned"
                    );
                    // Bookkeeping only (TRX-32): the partitions arrive paused.
                    *pending = partitions.iter().map(|p| p.partition).collect();
                    tracing::info!(generation, tasks = ?pending, "partitions assigned");
                }
            }
        }
        let (_, mut stores, _) = tasks.split();
        let member = consumer.group_metadata();
        let prepared = self.prepare_polled(polled.records, member, configs, &mut stores, &[], env);
        let next = tokio::select! {
            biased;
            next = prepared => next?,
            () = env.stop.grace_expired() => Next::Stopped,
        };
        drop(stores);
        Ok(next)
    }

    /// Starts the tasks of an assignment (TRX-31): every task's fence concurrently, then one
    /// restore of all their changelog partitions, then the seeks and resumes. The restore's
    /// one client is made first and connects while the producers fence.
    #[tracing::instrument(name = "tasks.start", skip_all, fields(tasks = ?pending, generation = tracing::field::Empty))]
    async fn start_tasks(
        &self,
        consumer: &mut dyn Consumer,
        pending: &BTreeSet<i32>,
        tasks: &mut Tasks,
        inputs: &[String],
    ) -> Result<(), Error> {
        if let Some(metadata) = consumer.group_metadata() {
            tracing::Span::current().record("generation", metadata.generation);
        }
        // The process identity itself, as Python's restore consumers have it (LIFE-04); bounded
        // fetching, as the bootstrap's (see `RESTORE_BATCH_RECORDS`).
        let mut restorer = self.kafka.consumer(
            ConsumerConfig::groupless(self.settings.client_id.clone()).with_fetch_limits(FetchLimits::BOOTSTRAP),
        )?;
        let started = if self.per_instance() {
            self.start_shared_tasks(consumer, restorer.as_mut(), pending, inputs).await
        } else {
            self.start_own_tasks(consumer, restorer.as_mut(), pending, inputs).await
        };
        // Closed in the background: the tasks need nothing more of it (its close took ~0.1 s
        // on the start's path).
        let closing = async move {
            if tokio::time::timeout(CLOSE_TIMEOUT, restorer.close()).await.is_err() {
                tracing::warn!("closing the restore consumer timed out");
            }
        };
        tokio::spawn(closing.instrument(tracing::debug_span!("tasks.close_restorer")));
        for task in started? {
            tasks.live.insert(task.partition, task);
        }
        self.observer.tasks_assigned(tasks.live.len());
        Ok(())
    }

    /// The default shape's start (TRX-31): the fences, concurrently, while the restore client
    /// connects; the restore of every task once all have fenced; then each task's partitions
    /// positioned from the offsets committed now and resumed.
    async fn start_own_tasks(
        &self,
        consumer: &mut dyn Consumer,
        restorer: &mut dyn Consumer,
        pending: &BTreeSet<i32>,
        inputs: &[String],
    ) -> Result<Vec<task::Task>, Error> {
        let connect = connect_restorer(restorer, self.settings.changelog_topic());
        let (fenced, ()) = tokio::join!(try_join_all(pending.iter().map(|&p| self.fence_task(p))), connect);
        let mut started = fenced?;
        self.restore_tasks(restorer, &mut started, LogEnd::Stable).await?;
        let partitions: Vec<TopicPartition> =
            started.iter().flat_map(|t| inputs.iter().map(|i| TopicPartition::new(i, t.partition))).collect();
        // Position from the offsets committed *now*, after the fence: a zombie that committed
        // between the assignment and the fence moved them, and its changes are in the
        // restored state, so its records must not be processed again. (A client that looked
        // the offsets up at assignment time would be behind.)
        let committed = consumer.committed(&partitions).await?;
        position(consumer, &partitions, &committed).await?;
        consumer.resume(&partitions)?;
        Ok(started)
    }

    /// Whether this runner writes through one producer per instance (KIP-447).
    fn per_instance(&self) -> bool {
        self.settings.guarantee == Guarantee::ExactlyOnce && self.settings.producers == Producers::PerInstance
    }

    /// The instance's producer (TRX-40, TRX-41): `init_transactions` on the instance's id
    /// fences an earlier incarnation of this instance (a crash-restart) and aborts the
    /// transaction it left open, so its restart is not held up by its own zombie.
    #[tracing::instrument(name = "instance.fence", skip_all, fields(transactional_id = tracing::field::Empty))]
    async fn start_shared_producer(&self) -> Result<SharedProducer, Error> {
        let id = self.settings.instance_transactional_id();
        tracing::Span::current().record("transactional_id", id.as_str());
        let mut config = ProducerConfig::transactional(&self.settings.client_id, id);
        config.compression = self.settings.compression;
        config.transaction_timeout = TASK_TRANSACTION_TIMEOUT;
        let producer = self.kafka.producer(config)?;
        if let Err(error) = producer.init_transactions().await {
            if tokio::time::timeout(CLOSE_TIMEOUT, producer.close()).await.is_err() {
                tracing::warn!("closing the instance producer timed out");
            }
            return Err(error.into());
        }
        Ok(SharedProducer { producer, txn: Default::default() })
    }

    /// Starts tasks of the per-instance shape (TRX-43): the group's offsets of every pending
    /// partition first — read as stable, which waits while a previous owner's transaction
    /// holds offsets of them — then one restore of all their changelog partitions, each to
    /// the high watermark seen after that read, then the seeks and resumes. After the offsets
    /// read stable, no previous owner's transaction can commit: any it still sends offsets
    /// with carries a generation older than this assignment's, which the coordinator refuses,
    /// and a transaction without offsets never commits (TRX-42). Reading to the high watermark
    /// waits until every transaction open below it is decided (a zombie's is aborted at the
    /// latest by its transaction timeout), so no committed change is missed behind a zombie's
    /// open transaction — reading to the LSO would stop in front of it.
    async fn start_shared_tasks(
        &self,
        consumer: &mut dyn Consumer,
        restorer: &mut dyn Consumer,
        pending: &BTreeSet<i32>,
        inputs: &[String],
    ) -> Result<Vec<task::Task>, Error> {
        let partitions: Vec<TopicPartition> =
            pending.iter().flat_map(|&p| inputs.iter().map(move |t| TopicPartition::new(t, p))).collect();
        let connect = connect_restorer(restorer, self.settings.changelog_topic());
        let (committed, ()) = tokio::join!(stable_committed(consumer, &partitions), connect);
        let committed = committed?;
        buggify::point("tasks.after_offsets").await;
        let mut started: Vec<task::Task> =
            pending.iter().map(|&p| self.open_shared_task(p)).collect::<Result<_, _>>()?;
        self.restore_tasks(restorer, &mut started, LogEnd::HighWatermark).await?;
        position(consumer, &partitions, &committed).await?;
        consumer.resume(&partitions)?;
        Ok(started)
    }
}

/// What every step of the main loop reads and none changes.
#[derive(Clone, Copy)]
struct LoopEnv<'a> {
    inputs: &'a [String],
    hooks: Hooks<'a>,
    stop: &'a Stop,
    /// Held for every commit (TRX-33).
    gate: &'a RevocationGate,
}

/// What the main loop does next, after a poll (and, pipelined, after the batch in flight
/// completed).
enum Next {
    /// The stop was raised (or its grace expired): return.
    Stopped,
    /// The next batch to commit, if any, and a poll to handle once it completed (its rebalance
    /// events ended the poll-ahead or the gathering), if any.
    Ready { batch: Option<PreparedBatch>, deferred: Option<Polled> },
    /// The member lost its group membership while a batch was in flight.
    MembershipLost,
}

/// The member lost its membership (evicted after a pause or a partition) and has not been told
/// yet: nothing it holds may commit. The batch is dropped with every task; the rejoin brings a
/// fresh assignment from the committed offsets.
async fn membership_lost(tasks: &mut Tasks, observer: &dyn Observer) -> Result<(), Error> {
    tracing::warn!("group membership lost: dropping the batch and every task");
    tasks.stop_all(observer, "group membership lost").await
}

/// Connects the restore consumer ahead of the restore, while the start's other requests run:
/// a metadata request only (it reads no offsets). A failure is left to the restore to meet.
async fn connect_restorer(restorer: &mut dyn Consumer, changelog: String) {
    if let Err(error) = restorer.partition_count(&changelog).await {
        tracing::debug!(%error, "connecting the restore consumer");
    }
}

/// Positions a task's `partitions` (paused, of the group consumer) where processing resumes:
/// at the offset the group committed, else at the log start (the group consumer resets to the
/// earliest offset), looked up here. Left to the client, librdkafka resets a partition it was
/// just assigned after a 500 ms back-off (the partition's leader is not known yet when it
/// starts fetching), which held back a new application's first batch by half a second.
async fn position(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
    committed: &[Option<i64>],
) -> Result<(), Error> {
    let fresh: Vec<TopicPartition> =
        partitions.iter().zip(committed).filter(|(_, c)| c.is_none()).map(|(p, _)| p.clone()).collect();
    let starts = if fresh.is_empty() { Vec::new() } else { consumer.extents(&fresh, LogEnd::Stable).await? };
    let starts: BTreeMap<&TopicPartition, i64> = fresh.iter().zip(starts).map(|(p, e)| (p, e.start)).collect();
    for (partition, offset) in partitions.iter().zip(committed) {
        let offset = offset.unwrap_or_else(|| starts[partition]);
        consumer.seek(partition, offset).await?;
    }
    Ok(())
}

/// The group's committed offsets of `partitions`, read as stable: a read that stays unstable
/// (a previous owner's transaction holds offsets of them) is retried until that transaction
/// must have been decided — the coordinator aborts it at its transaction timeout at the latest.
async fn stable_committed(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
) -> Result<Vec<Option<i64>>, Error> {
    let deadline = tokio::time::Instant::now() + TASK_TRANSACTION_TIMEOUT + POLL_TIMEOUT;
    loop {
        match consumer.committed(partitions).await {
            Ok(committed) => return Ok(committed),
            Err(error) if error.is_retriable() && tokio::time::Instant::now() < deadline => {
                tracing::info!(%error, "the group's offsets are not stable yet: retrying");
                tokio::time::sleep(POLL_TIMEOUT).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
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
