//! Config topics at run time: the bootstrap at startup and the drain every loop (CFG-10..26).
//!
//! A group-less `read_committed` consumer of its own, with bounded fetching, reads every
//! partition of every config topic from the beginning to the ends captured at startup
//! (compacting while it reads) and is closed; a second group-less consumer, with the client's
//! default settings, is assigned every partition at those ends: each main-loop iteration drains
//! whatever arrived since, outside any transaction. No offset is ever committed for a config topic (CFG-17); every boot re-reads
//! the topics through the same `enrich_config`, which is why an enriched store cannot diverge
//! from what a fresh boot builds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument as _;

use crate::configs::{decode_config_update, ConfigBootstrap, ConfigStore};
use crate::engine::bounds::{BOOTSTRAP_BATCH_RECORDS, DRAIN_RECORDS_MAX};
use crate::engine::hooks::Hooks;
use crate::error::{BoxError, Error};
use crate::kafka::read::{read_to_end_borrowed, BorrowedReader, ReadError};
use crate::kafka::{Consumer, ConsumerConfig, FetchLimits, Kafka, StartOffset, TopicPartition};
use crate::observer::Observer;
use crate::record::Config;
use crate::wire::{InvalidMessagePolicy, PolicyError, RecordRef};

/// The config store, shared: the loop that drains it writes it (briefly, between its own
/// reads), stage code reads it — a transformer's batch under one read guard (one consistent
/// snapshot per batch, CFG-24), an extractor's polls per lookup (CFG-25).
pub(crate) type SharedStore = Arc<tokio::sync::RwLock<ConfigStore>>;

/// The config store and the consumer that keeps it current.
pub(crate) struct ConfigTopics {
    consumer: Option<Box<dyn Consumer>>,
    store: SharedStore,
    /// The state keys the bootstrap derived before enrichment; taken once by the runner.
    state_keys: BootstrapStateKeys,
}

/// The state keys a bootstrap derived before enrichment (CFG-30), for the runner's entries.
#[derive(Debug, Default)]
pub(crate) struct BootstrapStateKeys {
    /// `None`: derived for no key (the stage has no enricher, so the store holds every value as
    /// decoded, or the hooks derive no state keys). `Some`: derived for every stored key; held
    /// only where the state key is not the wire key, to keep a big store's boot small.
    derived: Option<BTreeMap<String, String>>,
}

impl BootstrapStateKeys {
    /// The state key derived for stored key `key` (taken out), or `None` when the bootstrap
    /// derived none: the stored value is then the value as decoded.
    pub(crate) fn take(&mut self, key: &str) -> Option<String> {
        let derived = self.derived.as_mut()?;
        Some(derived.remove(key).unwrap_or_else(|| key.to_owned()))
    }
}

/// A config record a drain applied, in the order applied (a key may repeat).
pub(crate) struct Applied {
    /// Its topic.
    pub(crate) topic: Arc<str>,
    /// Its wire key.
    pub(crate) key: String,
    /// Its value's state key, computed between the decode and the enrichment when the hooks
    /// have [`Hooks::state_key`]; `None` for a deletion, or without that hook.
    pub(crate) state_key: Option<String>,
}

fn enrich_error(key: &str, source: BoxError) -> Error {
    Error::Hook { hook: format!("enrich_config for config key {key:?}"), source }
}

/// The config as the store keeps it: enriched when the stage has an enricher.
async fn enriched(hooks: Hooks<'_>, key: &str, config: Config) -> Result<Config, Error> {
    match hooks.enricher {
        Some(enricher) => enricher.enrich_config(config).await.map_err(|e| enrich_error(key, e)),
        None => Ok(config),
    }
}

/// The bootstrap's side of the read: every record offered by reference.
struct Offer<'a> {
    bootstrap: &'a mut ConfigBootstrap,
    policy: &'a dyn InvalidMessagePolicy,
    observer: &'a dyn Observer,
}

impl BorrowedReader for Offer<'_> {
    type Error = PolicyError;

    /// Sizes the index for every offset to be read, before the first record: an upper bound
    /// of the keys (a topic the broker has compacted holds little more), so the index never
    /// rehashes during the read.
    fn expect(&mut self, offsets: u64) {
        self.bootstrap.reserve(offsets);
    }

    fn records(&mut self, records: &[RecordRef<'_>]) -> Result<(), PolicyError> {
        records.iter().try_for_each(|record| self.bootstrap.offer_borrowed(*record, self.policy, self.observer))
    }
}

impl ConfigTopics {
    /// No config topics: an empty store, no consumer.
    pub(crate) fn none() -> Self {
        ConfigTopics { consumer: None, store: Arc::default(), state_keys: BootstrapStateKeys::default() }
    }

    /// Reads `topics` to the ends captured now into a fresh store (CFG-10..16).
    #[tracing::instrument(name = "config.bootstrap", skip_all, fields(topics = ?topics, entries = tracing::field::Empty))]
    pub(crate) async fn bootstrap(
        kafka: &dyn Kafka,
        client_id: &str,
        topics: &[String],
        hooks: Hooks<'_>,
        observer: &dyn Observer,
    ) -> Result<Self, Error> {
        if topics.is_empty() {
            return Ok(Self::none());
        }
        // The one-shot read has a consumer of its own with bounded fetching: everything it
        // reads is kept, so whatever the client buffers besides is the boot's overhead (about
        // 0.4x the wire at librdkafka's defaults). The drain's consumer keeps the defaults.
        // Both carry Python's config client id, `{client_id}-config` (LIFE-04): one after the
        // other, never at once.
        let mut reader = kafka.consumer(
            ConsumerConfig::groupless(format!("{client_id}-config")).with_fetch_limits(FetchLimits::BOOTSTRAP),
        )?;
        let mut partitions = Vec::new();
        for topic in topics {
            // Existence was checked at startup (LIFE-13); a topic without partitions adds none.
            let count = reader.partition_count(topic).await?.unwrap_or(0);
            partitions.extend((0..count as i32).map(|p| TopicPartition::new(topic, p)));
        }
        let enriching = hooks.enricher.is_some();
        let mut bootstrap =
            if enriching { ConfigBootstrap::new() } else { ConfigBootstrap::new().without_enrichment() };
        // Records by reference: each key and value is copied once, into the store.
        let mut offer = Offer { bootstrap: &mut bootstrap, policy: hooks.policy, observer };
        let read = read_to_end_borrowed(reader.as_mut(), &partitions, BOOTSTRAP_BATCH_RECORDS, &mut offer).await;
        let ends = match read {
            Ok(read) => read.ends,
            Err(ReadError::Kafka(e)) => return Err(e.into()),
            Err(ReadError::Callback(e)) => return Err(e.into()),
        };
        let (live_bytes, dead_bytes, index_bytes) = bootstrap.footprint();
        tracing::debug!(live_bytes, dead_bytes, index_bytes, "config topics read to their ends");
        let closing = tokio::time::Instant::now();
        if let Err(error) = reader.close().await {
            // Everything was read; a client that fails to close cannot change the store.
            tracing::warn!(%error, "closing the config bootstrap's consumer failed");
        }
        tracing::debug!(took = ?closing.elapsed(), "config bootstrap's consumer closed");
        // The drain continues exactly at the captured ends (CFG-16).
        let mut consumer = kafka.consumer(ConsumerConfig::groupless(format!("{client_id}-config")))?;
        let starts: Vec<(TopicPartition, StartOffset)> =
            ends.into_iter().map(|(partition, end)| (partition, StartOffset::At(end))).collect();
        consumer.assign(&starts).await?;
        // Without an enricher the store holds each value as decoded, so a state key derived
        // from it later is the one derived before enrichment; with one, it is derived here.
        let mut state_keys = BootstrapStateKeys::default();
        let store = if enriching {
            Self::apply_survivors(bootstrap, hooks, observer, &mut state_keys).await?
        } else {
            bootstrap.finish_unenriched(hooks.policy, observer)?
        };
        tracing::Span::current().record("entries", store.len());
        observer.config_store_restored(store.len());
        observer.config_store_entries(store.len());
        observer.config_store_updated(&store);
        Ok(ConfigTopics { consumer: Some(consumer), store: Arc::new(tokio::sync::RwLock::new(store)), state_keys })
    }

    /// Decodes, enriches and stores each survivor (the path of an enriching stage), with its
    /// state key derived in between when the hooks derive one (CFG-30).
    async fn apply_survivors(
        mut bootstrap: ConfigBootstrap,
        hooks: Hooks<'_>,
        observer: &dyn Observer,
        state_keys: &mut BootstrapStateKeys,
    ) -> Result<ConfigStore, Error> {
        state_keys.derived = hooks.state_key.map(|_| BTreeMap::new());
        while let Some(survivor) = bootstrap.next_survivor() {
            let Some(map) = crate::mediation::decode_value_with(&survivor.record, hooks.policy, observer)? else {
                continue; // skipped: the key stays absent (INV-12)
            };
            let config = Config::wrap(map);
            if let (Some(state_key), Some(derived)) = (hooks.state_key, state_keys.derived.as_mut()) {
                let state_key = state_key(&survivor.key, &config);
                if state_key != survivor.key {
                    derived.insert(survivor.key.clone(), state_key);
                }
            }
            let config = enriched(hooks, &survivor.key, config).await?;
            bootstrap
                .put(&survivor.key, &config)
                .map_err(|e| PolicyError::substitute_not_encodable(&survivor.record, e))?;
        }
        Ok(bootstrap.finish())
    }

    /// The store.
    pub(crate) fn store(&self) -> &SharedStore {
        &self.store
    }

    /// The state keys the bootstrap derived before enrichment (CFG-30); none after the first
    /// call.
    pub(crate) fn take_bootstrap_state_keys(&mut self) -> BootstrapStateKeys {
        std::mem::take(&mut self.state_keys)
    }

    /// Applies everything that arrived since the last drain, without waiting (CFG-20). Records
    /// are decoded and enriched first (each value's state key derived in between, CFG-30); the
    /// store is locked only to apply them, and `applied` runs under the same lock with each
    /// record applied, in order (a key may repeat): whatever it derives from the store changes
    /// with the store, atomically for every reader.
    pub(crate) async fn drain(
        &mut self,
        hooks: Hooks<'_>,
        observer: &dyn Observer,
        applied: impl FnOnce(&ConfigStore, Vec<Applied>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        let polled = consumer.poll(DRAIN_RECORDS_MAX, Duration::ZERO).await?;
        if polled.records.is_empty() {
            return Ok(());
        }
        // A span only for a drain that has records (an empty one runs every loop).
        let span = tracing::info_span!("config.drain", records = polled.records.len(), applied = tracing::field::Empty);
        let count = self.apply_drained(&polled.records, hooks, observer, applied).instrument(span.clone()).await?;
        span.record("applied", count);
        Ok(())
    }

    /// Applies drained records under the store's write lock, then `applied`; returns how many
    /// were applied.
    async fn apply_drained(
        &mut self,
        records: &[crate::wire::RawRecord],
        hooks: Hooks<'_>,
        observer: &dyn Observer,
        applied: impl FnOnce(&ConfigStore, Vec<Applied>) -> Result<(), Error>,
    ) -> Result<usize, Error> {
        let mut updates = Vec::new();
        for record in records {
            let Some((key, value)) = decode_config_update(record, hooks.policy, observer)? else {
                continue; // skipped: the previous value stays (INV-12)
            };
            let (config, state_key) = match value {
                None => (None, None),
                Some(map) => {
                    let config = Config::wrap(map);
                    let state_key = hooks.state_key.map(|state_key| state_key(&key, &config));
                    (Some(enriched(hooks, &key, config).await?), state_key)
                }
            };
            updates.push((record, key, config, state_key));
        }
        if updates.is_empty() {
            return Ok(0);
        }
        let mut store = self.store.write().await;
        let mut keys = Vec::with_capacity(updates.len());
        for (record, key, config, state_key) in updates {
            match config {
                None => {
                    store.delete(&key);
                }
                Some(config) => {
                    store.put(&key, &config).map_err(|e| PolicyError::substitute_not_encodable(record, e))?;
                }
            }
            observer.config_message_in(&record.topic);
            keys.push(Applied { topic: Arc::clone(&record.topic), key, state_key });
        }
        observer.config_store_entries(store.len());
        observer.config_store_updated(&*store);
        let count = keys.len();
        applied(&store, keys)?;
        Ok(count)
    }

    /// Releases the consumer.
    pub(crate) async fn close(&mut self) -> Result<(), Error> {
        if let Some(mut consumer) = self.consumer.take() {
            consumer.close().await?;
        }
        Ok(())
    }
}
