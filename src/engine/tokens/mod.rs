//! The extractor runner: ownership tokens, per-page transactions, standbys (EXT-01..44).
//!
//! Config entries are sharded across the replicas of an application by *ownership tokens*: the
//! config topics' partition numbers (the token space, N), leased through a consumer group on
//! the config topics that never reads (the membership). A replica polls exactly the active
//! configs whose state key hashes onto a token it holds (`token_for(state_key, N)`), so where
//! a config record is written does not matter. Each held token has a transactional producer
//! `{application_id}-{token}`; granting a token starts it, which fences the token's previous
//! holder and aborts its open page. Replicas without tokens are hot standbys: their config
//! store stays current, and they take over on the next rebalance.
//!
//! The main loop pumps the membership, drains the config topics and takes assignments; the
//! poll cycles run beside it as a task of their own (EXT-02), so a long backfill never stops
//! the membership or the config drain. A revocation is the handover barrier (EXT-36): the
//! running cycle is cancelled and waits for its polls to unwind, their open pages are aborted,
//! the token producers are stopped *after* that, and the local store is wiped. A new
//! assignment fences (starting the producers) *before* it restores the entire changelog into
//! the store (EXT-37), so the restore can never miss a previous holder's last page.

pub(super) mod cycle;
pub(super) mod page;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::future::try_join_all;

use self::cycle::{run_cycles, CycleContext, Token};
use self::page::SharedState;
use crate::engine::bounds::{CLOSE_TIMEOUT, PAGE_TRANSACTION_TIMEOUT, POLL_TIMEOUT};
use crate::engine::buggify;
use crate::engine::config_topics::{ConfigTopics, SharedStore};
use crate::engine::hooks::Hooks;
use crate::engine::lifecycle;
use crate::engine::settings::Settings;
use crate::engine::stop::Stop;
use crate::engine::txn::TxnState;
use crate::error::Error;
use crate::kafka::read::{read_to, ReadError};
use crate::kafka::{
    Consumer, ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, NewTopic, OffsetReset, ProducerConfig, Rebalance,
    TopicPartition,
};
use crate::observer::Observer;
use crate::record::Config;
use crate::stage::Extractor;
use crate::state::StateStores;
use crate::wire;

/// The extractor's shared store, as `StateStores` names it: one store for every token.
const SHARED_STORE_PARTITION: i32 = -1;

/// A config entry as the runner tracks it (CFG-30..33).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Ownership follows it (EXT-32).
    state_key: String,
    /// `suspended: true` in the config: kept, but neither polled nor active (CFG-32).
    suspended: bool,
}

/// Every config entry, and the token space.
#[derive(Debug, Default)]
pub(super) struct Entries {
    map: BTreeMap<String, Entry>,
    tokens: u32,
}

impl Entries {
    /// No entries yet, in a token space of `tokens`.
    pub(super) fn new(tokens: u32) -> Self {
        Entries { map: BTreeMap::new(), tokens }
    }
}

/// The extractor runner.
pub(crate) struct TokenRunner<S> {
    pub(crate) stage: Arc<S>,
    pub(crate) settings: Settings,
    pub(crate) kafka: Arc<dyn Kafka>,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) stores: Arc<dyn StateStores>,
}

/// The running cycles of the current assignment.
pub(super) struct Cycles {
    pub(super) cancel: Stop,
    pub(super) handle: tokio::task::JoinHandle<(Vec<Token>, Result<(), Error>)>,
}

impl Cycles {
    /// Cancels the cycles and waits for them to unwind (their open pages aborted), then closes
    /// the token producers. A cycle's failure is the result.
    pub(super) async fn stop(self) -> Result<(), Error> {
        self.cancel.raise();
        let (tokens, result) = match self.handle.await {
            Ok(outcome) => outcome,
            Err(error) => panic!("the poll cycles panicked: {error}"),
        };
        // Concurrently: a shutdown's closes are bounded per token, not per replica (bounds.rs).
        let closes = tokens.iter().map(|token| async move {
            assert!(!token.txn.is_open(), "the cycles abort their open pages before they hand the tokens back");
            let client = format!("the producer of token {}", token.token);
            lifecycle::close_bounded(&client, token.producer.close()).await;
        });
        futures::future::join_all(closes).await;
        result
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid(message.into())
}

impl<S: Extractor> TokenRunner<S> {
    /// Runs until `stop` is raised (clean stop) or an error (LIFE-20..23). The stage's setup runs
    /// first and its teardown last, after an error too (STG-02).
    pub(crate) async fn run(&self, stop: &Stop) -> Result<(), Error> {
        lifecycle::hooked(self.stage.setup(), self.run_stage(stop), || self.stage.teardown()).await
    }

    /// Offline validation (LIFE-11, LIFE-12).
    fn validate(&self, topics: &[String]) -> Result<(), Error> {
        if topics.is_empty() {
            return Err(invalid("an extractor needs at least one config topic"));
        }
        match self.settings.poll_interval {
            Some(interval) if !interval.is_zero() => Ok(()),
            _ => Err(invalid("an extractor needs a positive poll_interval")),
        }
    }

    /// The token space (EXT-31): the one partition count of the config topics, pinned for the
    /// run. Checks existence too (LIFE-13).
    async fn token_space(&self, topics: &[String]) -> Result<u32, Error> {
        let admin = self.kafka.admin()?;
        let mut counts = BTreeMap::new();
        for topic in topics {
            let count = admin.partition_count(topic).await?.ok_or_else(|| {
                Error::from(
                    KafkaError::new(KafkaErrorKind::UnknownTopic, "startup", "config topic does not exist")
                        .with_context(topic.clone()),
                )
            })?;
            counts.insert(topic.clone(), count);
        }
        let distinct: BTreeSet<u32> = counts.values().copied().collect();
        match distinct.iter().next() {
            _ if distinct.len() > 1 => Err(invalid(format!(
                "config topics must have equal partition counts (the ownership-token space): {counts:?}"
            ))),
            Some(0) | None => Err(invalid(format!("no partitions known for the config topics {topics:?}"))),
            Some(&n) => Ok(n),
        }
    }

    /// Creates the changelog if it is missing (LIFE-16: just before use, never by the handle),
    /// with one partition per token, and adopts an existing one of any count (EXT-43: a Python
    /// fleet's changelog has the broker's default count). Returns the partition count.
    ///
    /// Why one partition per token: changelog records are placed by key hashing, and Kafka's
    /// partitioner *is* `token_for`, so with N partitions every token writes only its own
    /// partition. A new holder's fence completes the token's last transaction, and the
    /// restore, which stops at each partition's last stable offset, sees every cursor of the
    /// token at once. With another count, partitions are shared between tokens, and another
    /// token's open page can hold a shared partition's LSO below this token's latest cursors:
    /// such a restore reads to the high watermark instead and waits for those pages (see
    /// [`Self::restore`]). The `extractor` simulation found the miss (docs/simulation.md).
    async fn ensure_changelog(&self, tokens: u32) -> Result<(), Error> {
        let changelog = self.settings.changelog_topic();
        let spec = NewTopic::new(&changelog, tokens).replication(self.settings.replication_factor).compacted();
        let admin = self.kafka.admin()?;
        match lifecycle::create_or_adopt(&*admin, &spec).await?.1 {
            n if n == tokens => Ok(()),
            n => {
                tracing::warn!(
                    changelog = %changelog,
                    partitions = n,
                    tokens,
                    "the extractor's changelog is not aligned with the ownership tokens: every restore waits for \
                     other tokens' open pages on shared partitions (create it with one partition per token)"
                );
                Ok(())
            }
        }
    }

    async fn run_stage(&self, stop: &Stop) -> Result<(), Error> {
        let topics = self.stage.config_topics();
        self.validate(&topics)?;
        // Raced against the stop like the bootstrap: with a broker down these admin reads retry
        // for up to a minute, and a replica stopped meanwhile must still stop within its budget.
        let startup = async {
            let tokens = self.token_space(&topics).await?;
            self.ensure_changelog(tokens).await?;
            Ok::<_, Error>(tokens)
        };
        let Some(tokens) = stop.unless_raised(startup).await else { return Ok(()) };
        let tokens = tokens?;
        let stage = &*self.stage;
        let policy = |error: &crate::wire::InvalidMessageError| stage.on_invalid_message(error);
        let state_key = |key: &str, config: &Config| stage.extract_state_key(key, config);
        let hooks = Hooks { enricher: stage.config_enricher(), policy: &policy, state_key: Some(&state_key) };
        let bootstrap = bootstrap_configs(
            &*self.kafka,
            &self.settings.client_id,
            stage,
            &*self.observer,
            &topics,
            hooks,
            tokens,
            stop,
        );
        let Some(bootstrapped) = bootstrap.await else { return Ok(()) };
        let (mut configs, entries) = bootstrapped?;
        let mut membership = self.kafka.consumer(ConsumerConfig {
            offset_reset: OffsetReset::Latest,
            session_timeout: self.settings.session_timeout,
            ..ConsumerConfig::member(format!("{}-membership", self.settings.client_id), &self.settings.application_id)
        })?;
        let store: SharedState =
            Arc::new(Mutex::new(self.stores.open(&self.settings.application_id, SHARED_STORE_PARTITION)?));
        let mut cycles = None;
        let result = match membership.subscribe(&topics).await {
            Ok(()) => {
                self.main_loop(membership.as_mut(), &mut configs, hooks, &entries, &store, &mut cycles, stop).await
            }
            Err(error) => Err(error.into()),
        };
        // Shutdown runs the barrier explicitly (EXT-44).
        let suspended = self.suspend(&mut cycles, &store).await;
        let closed = lifecycle::close_bounded("the membership consumer", membership.close())
            .await
            .unwrap_or(Ok(()))
            .map_err(Error::from);
        let config_closed = configs.close().await;
        result.and(suspended).and(closed).and(config_closed)
    }

    #[allow(clippy::too_many_arguments)]
    async fn main_loop(
        &self,
        membership: &mut dyn Consumer,
        configs: &mut ConfigTopics,
        hooks: Hooks<'_>,
        entries: &Arc<Mutex<Entries>>,
        store: &SharedState,
        cycles: &mut Option<Cycles>,
        stop: &Stop,
    ) -> Result<(), Error> {
        // Assignments not taken yet; a revocation discards them (EXT-39).
        let mut pending: Option<BTreeSet<i32>> = None;
        loop {
            if stop.is_raised() {
                return Ok(());
            }
            // Cycles end on their own only by failing (EXT-02): their error ends the run.
            if cycles.as_ref().is_some_and(|c| c.handle.is_finished()) {
                let result = self.suspend(cycles, store).await;
                assert!(result.is_err(), "poll cycles end on their own only with an error");
                return result;
            }
            // Liveness of the membership; records never come (its partitions stay paused).
            let polled = tokio::select! {
                biased;
                () = stop.raised() => return Ok(()),
                polled = membership.poll(1, POLL_TIMEOUT) => polled?,
            };
            debug_assert!(polled.records.is_empty(), "membership partitions are never resumed");
            for event in polled.rebalances {
                match event {
                    Rebalance::Revoked { partitions } => {
                        tracing::info!(revoked = partitions.len(), "tokens revoked: suspending");
                        pending = None;
                        self.suspend(cycles, store).await?;
                    }
                    Rebalance::Assigned { partitions, generation } => {
                        // Bookkeeping only (EXT-35): topics merge into partition numbers.
                        let tokens: BTreeSet<i32> = partitions.iter().map(|p| p.partition).collect();
                        tracing::info!(generation, ?tokens, "tokens assigned");
                        pending = Some(tokens);
                    }
                }
            }
            buggify::point("tokens.after_poll").await;
            // The entries change under the store's lock, with the store (CFG-30): a cycle reads
            // both at once.
            configs
                .drain(hooks, &*self.observer, |store, applied| {
                    drained_entries(&*self.stage, &*self.observer, entries, store, applied)
                })
                .await?;
            if let Some(tokens) = pending.take() {
                let take = self.take_assignment(tokens, configs.store(), entries, store, cycles);
                tokio::select! {
                    biased;
                    taken = take => taken?,
                    () = stop.grace_expired() => return Ok(()),
                }
            }
        }
    }

    /// Takes an assignment (EXT-37, EXT-40): whatever ran stops first; then, with tokens, their
    /// producers start (fencing every previous holder) before the entire changelog is restored
    /// into the store, and the cycles start; without tokens this replica is a standby.
    async fn take_assignment(
        &self,
        tokens: BTreeSet<i32>,
        configs: &SharedStore,
        entries: &Arc<Mutex<Entries>>,
        store: &SharedState,
        cycles: &mut Option<Cycles>,
    ) -> Result<(), Error> {
        self.suspend(cycles, store).await?;
        self.observer.tokens_assigned(tokens.len());
        if tokens.is_empty() {
            // A hot standby: no cycle, entries kept warm, one reconcile with nothing (EXT-40).
            self.stage
                .on_active_configs(&BTreeMap::new())
                .await
                .map_err(|source| Error::Hook { hook: "on_active_configs".into(), source })?;
            return Ok(());
        }
        let started = try_join_all(tokens.iter().map(|&token| self.start_token(token))).await?;
        let ctx = Arc::new(CycleContext {
            stage: Arc::clone(&self.stage),
            observer: Arc::clone(&self.observer),
            store: Arc::clone(store),
            configs: Arc::clone(configs),
            entries: Arc::clone(entries),
            changelog: self.settings.changelog_topic(),
            poll_interval: self.settings.poll_interval.expect("validated: extractors have a poll_interval"),
            stateless: false,
            retry_aborted_pages: false,
        });
        let restore = Restore {
            kafka: Arc::clone(&self.kafka),
            changelog: self.settings.changelog_topic(),
            client_id: self.settings.client_id.clone(),
            store: Arc::clone(store),
            tokens: entries.lock().expect("entries lock").tokens,
        };
        // The restore runs in the cycles' task, not here: it can wait long on a changelog shared
        // between tokens (see `Restore::run`), and meanwhile the main loop must keep the
        // membership alive. Were it to wait here, a rebalance that moves the very token whose
        // open page it waits for could never complete: the page would stay open until its
        // transaction timeout (the `extractor` simulation found this deadlock). A revoke
        // cancels the restore like a cycle, and the barrier wipes the store only after the task
        // ended, so a restore never brings revoked tokens back (EXT-38).
        let cancel = Stop::new();
        let task = {
            let cancel = cancel.clone();
            let granted = tokens.clone();
            async move {
                let restored = tokio::select! {
                    biased;
                    () = cancel.raised() => return (started, Ok(())),
                    restored = async {
                        buggify::point("tokens.before_restore").await;
                        restore.run().await
                    } => restored,
                };
                match restored {
                    Ok(records) => {
                        tracing::info!(tokens = ?granted, records, "tokens granted: fenced, changelog restored")
                    }
                    Err(error) => return (started, Err(error)),
                }
                run_cycles(ctx, started, cancel).await
            }
        };
        // The stage's code runs in the cycles: they carry the application's secret context.
        #[cfg(feature = "secrets")]
        let task = crate::secrets::carry(task);
        let handle = tokio::spawn(task);
        *cycles = Some(Cycles { cancel, handle });
        Ok(())
    }

    /// Starts token `token`'s producer: its `init_transactions` fences the previous holder and
    /// aborts its open page.
    async fn start_token(&self, token: i32) -> Result<Token, Error> {
        let settings = &self.settings;
        let mut config =
            ProducerConfig::transactional(settings.token_client_id(token), settings.token_transactional_id(token));
        config.compression = settings.compression;
        config.transaction_timeout = PAGE_TRANSACTION_TIMEOUT;
        let producer = self.kafka.producer(config)?;
        buggify::point("tokens.before_fence").await;
        producer.init_transactions().await?;
        Ok(Token { token, producer, txn: TxnState::default() })
    }

    /// The handover barrier (EXT-36): cancels the running cycles and waits for them to unwind
    /// (their open pages aborted), stops the token producers after that, wipes the store. A
    /// no-op when nothing ran since the last handover. A cycle that had failed surfaces its
    /// error here.
    async fn suspend(&self, cycles: &mut Option<Cycles>, store: &SharedState) -> Result<(), Error> {
        let Some(running) = cycles.take() else {
            return Ok(());
        };
        let result = running.stop().await;
        store.lock().expect("state store lock").wipe()?;
        self.observer.active_configs(0);
        self.observer.tokens_assigned(0);
        result
    }
}

/// A restore of the extractor's changelog into the shared store (EXT-37).
struct Restore {
    kafka: Arc<dyn Kafka>,
    changelog: String,
    client_id: String,
    store: SharedState,
    /// The ownership-token space: a changelog with this many partitions is aligned.
    tokens: u32,
}

impl Restore {
    /// Restores the entire changelog into the store, after the fence (EXT-37, STO-11); returns
    /// the records replayed.
    ///
    /// With one changelog partition per token (the layout this runner creates), every partition
    /// this replica's tokens wrote is written by nobody else, and the fence decided its last
    /// transaction: reading each partition to its last stable offset sees every committed
    /// cursor. With another count (a changelog made elsewhere, e.g. by a Python fleet with the
    /// broker's default count), a partition holds several tokens' cursors, and another token's
    /// open page can hold its LSO below this token's last cursors: then each partition is read
    /// to the high watermark seen after the fence, which waits until the pages open at that
    /// moment are decided (bounded by their transaction timeout).
    async fn run(self) -> Result<u64, Error> {
        let Self { kafka, changelog, client_id, store, tokens } = self;
        let mut consumer = kafka.consumer(ConsumerConfig::groupless(client_id))?;
        let count = consumer.partition_count(&changelog).await?.unwrap_or(0);
        let partitions: Vec<TopicPartition> = (0..i32::try_from(count).expect("a partition count fits"))
            .map(|p| TopicPartition::new(&changelog, p))
            .collect();
        let aligned = count == tokens;
        let mut ends = BTreeMap::new();
        for partition in &partitions {
            let end = if aligned {
                consumer.end_offset(partition).await?
            } else {
                consumer.log_end_offset(partition).await?
            };
            ends.insert(partition.clone(), end);
        }
        let stall_max = PAGE_TRANSACTION_TIMEOUT + POLL_TIMEOUT;
        let read = read_to(consumer.as_mut(), ends, stall_max, |record| -> Result<(), Error> {
            let key = wire::decode_key(record.key.as_deref()).map_err(|source| Error::CorruptState {
                partition: record.partition,
                key: String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned(),
                source,
            })?;
            let mut store = store.lock().expect("state store lock");
            match record.value.as_deref() {
                value if wire::is_tombstone(value) => store.delete(&key)?,
                Some(value) => store.put(&key, value)?,
                None => unreachable!("an absent value is a tombstone"),
            }
            Ok(())
        })
        .await;
        if tokio::time::timeout(CLOSE_TIMEOUT, consumer.close()).await.is_err() {
            tracing::warn!("closing the restore consumer timed out");
        }
        match read {
            Ok(summary) => Ok(summary.records),
            Err(ReadError::Kafka(e)) => Err(e.into()),
            Err(ReadError::Callback(e)) => Err(e),
        }
    }
}

/// The entries of every config the bootstrap stored (CFG-30..33), in either runner.
/// The config bootstrap both extractor runners start with: the config topics read through the
/// stage's hooks, raced against the stop (`None` when the stop came first), then the entries of
/// a space of `tokens` ownership tokens built from the store.
#[allow(clippy::too_many_arguments)]
pub(super) async fn bootstrap_configs<S: Extractor>(
    kafka: &dyn Kafka,
    client_id: &str,
    stage: &S,
    observer: &dyn Observer,
    topics: &[String],
    hooks: Hooks<'_>,
    tokens: u32,
    stop: &Stop,
) -> Option<Result<(ConfigTopics, Arc<Mutex<Entries>>), Error>> {
    let configs = stop.unless_raised(ConfigTopics::bootstrap(kafka, client_id, topics, hooks, observer)).await?;
    let bootstrapped = async {
        let mut configs = configs?;
        let entries = Arc::new(Mutex::new(Entries::new(tokens)));
        bootstrap_entries(stage, observer, &mut configs, &topics[0], &entries).await?;
        Ok((configs, entries))
    };
    Some(bootstrapped.await)
}

async fn bootstrap_entries<S: Extractor>(
    stage: &S,
    observer: &dyn Observer,
    configs: &mut ConfigTopics,
    first_topic: &str,
    entries: &Mutex<Entries>,
) -> Result<(), Error> {
    let mut state_keys = configs.take_bootstrap_state_keys();
    let store = configs.store().read().await;
    let keys = store.keys();
    // Bootstrapped entries count as applied config records (MET `messages_in_total`), under the
    // first config topic: the store does not keep a key's topic.
    for _ in &keys {
        observer.message_in(first_topic);
    }
    let keys = keys
        .into_iter()
        .map(|key| {
            let state_key = state_keys.take(&key);
            (key, state_key)
        })
        .collect();
    update_entries(stage, entries, &store, keys)
}

/// The entries of the configs a drain applied (CFG-30..33), in either runner; called under the
/// store's lock, with the store as the drain left it.
pub(super) fn drained_entries<S: Extractor>(
    stage: &S,
    observer: &dyn Observer,
    entries: &Mutex<Entries>,
    store: &crate::configs::ConfigStore,
    applied: Vec<crate::engine::config_topics::Applied>,
) -> Result<(), Error> {
    for applied in &applied {
        observer.message_in(&applied.topic);
    }
    update_entries(stage, entries, store, last_per_key(applied))
}

/// A drain's applied records as `update_entries` takes them: each key once, with its last
/// record's state key. The store holds every key's last record, so a key the store holds gets
/// the state key of the value it holds (CFG-30), never one left to derive from the enriched
/// store (a delete followed by a put of one key in one drain).
fn last_per_key(applied: Vec<crate::engine::config_topics::Applied>) -> Vec<(String, Option<String>)> {
    let mut last: BTreeMap<String, Option<String>> = BTreeMap::new();
    for applied in applied {
        last.insert(applied.key, applied.state_key);
    }
    last.into_iter().collect()
}

/// Updates the entries of `keys` from the store (CFG-30..33): present → its state key
/// (the one given, derived before enrichment; `None` only where the store holds the value as
/// decoded, which it is then derived from) and its suspension from the stored config; absent
/// (a tombstone, or `{}`) → removed.
fn update_entries<S: Extractor>(
    stage: &S,
    entries: &Mutex<Entries>,
    store: &crate::configs::ConfigStore,
    keys: Vec<(String, Option<String>)>,
) -> Result<(), Error> {
    const SUSPENDED: crate::record::attribute::Attribute<bool> =
        crate::record::attribute::Attribute::optional("suspended", &crate::record::attribute::BOOL);
    let mut updates = Vec::with_capacity(keys.len());
    for (key, state_key) in keys {
        let entry = match store.get(&key)? {
            None => None,
            Some(config) => {
                let suspended = suspended(&config, &SUSPENDED);
                let state_key = state_key.unwrap_or_else(|| stage.extract_state_key(&key, &config));
                Some(Entry { state_key, suspended })
            }
        };
        updates.push((key, entry));
    }
    let mut entries = entries.lock().expect("entries lock");
    for (key, entry) in updates {
        match entry {
            Some(entry) => entries.map.insert(key, entry),
            None => entries.map.remove(&key),
        };
    }
    Ok(())
}

/// Whether a config is suspended: its optional boolean `suspended` is true (CFG-32). A value of
/// another type is not a suspension.
fn suspended(config: &Config, attr: &crate::record::attribute::Attribute<bool>) -> bool {
    config.get(attr).ok().flatten().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::last_per_key;
    use crate::engine::config_topics::Applied;

    fn applied(key: &str, state_key: Option<&str>) -> Applied {
        Applied { topic: Arc::from("configs"), key: key.to_owned(), state_key: state_key.map(str::to_owned) }
    }

    /// CFG-30: a key a drain applied several times takes its last record's state key, so a
    /// delete followed by a put takes the put's (derived before enrichment), and a put followed
    /// by a delete takes none (the store no longer holds the key).
    #[test]
    fn cfg_30_a_drain_keeps_each_keys_last_state_key() {
        let drained = vec![
            applied("a", None),
            applied("a", Some("acme")),
            applied("b", Some("beta")),
            applied("b", None),
            applied("c", Some("one")),
            applied("c", Some("two")),
        ];
        assert_eq!(
            last_per_key(drained),
            vec![
                ("a".to_owned(), Some("acme".to_owned())),
                ("b".to_owned(), None),
                ("c".to_owned(), Some("two".to_owned()))
            ]
        );
    }
}
