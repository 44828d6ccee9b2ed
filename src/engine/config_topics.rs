//! Config topics at run time: the bootstrap at startup and the drain every loop (CFG-10..26).
//!
//! A dedicated group-less `read_committed` consumer is assigned every partition of every config
//! topic, read from the beginning to the ends captured at startup (compacting while it reads),
//! and then left there: each main-loop iteration drains whatever arrived since, outside any
//! transaction. No offset is ever committed for a config topic (CFG-17); every boot re-reads
//! the topics through the same `enrich_config`, which is why an enriched store cannot diverge
//! from what a fresh boot builds.

use std::time::Duration;

use tracing::Instrument as _;

use crate::configs::{decode_config_update, ConfigBootstrap, ConfigStore};
use crate::engine::bounds::DRAIN_RECORDS_MAX;
use crate::engine::hooks::Hooks;
use crate::error::{BoxError, Error};
use crate::kafka::read::{read_to_end, ReadError};
use crate::kafka::{Consumer, ConsumerConfig, Kafka, TopicPartition};
use crate::observer::Observer;
use crate::record::Config;
use crate::wire::PolicyError;

/// The config store and the consumer that keeps it current.
pub(crate) struct ConfigTopics {
    consumer: Option<Box<dyn Consumer>>,
    store: ConfigStore,
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

impl ConfigTopics {
    /// No config topics: an empty store, no consumer.
    pub(crate) fn none() -> Self {
        ConfigTopics { consumer: None, store: ConfigStore::new() }
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
        let mut consumer = kafka.consumer(ConsumerConfig::groupless(format!("{client_id}-config")))?;
        let mut partitions = Vec::new();
        for topic in topics {
            // Existence was checked at startup (LIFE-13); a topic without partitions adds none.
            let count = consumer.partition_count(topic).await?.unwrap_or(0);
            partitions.extend((0..count as i32).map(|p| TopicPartition::new(topic, p)));
        }
        let enriching = hooks.enricher.is_some();
        let mut bootstrap =
            if enriching { ConfigBootstrap::new() } else { ConfigBootstrap::new().without_enrichment() };
        let read =
            read_to_end(consumer.as_mut(), &partitions, |record| bootstrap.offer(&record, hooks.policy, observer))
                .await;
        match read {
            Ok(_) => {}
            Err(ReadError::Kafka(e)) => return Err(e.into()),
            Err(ReadError::Callback(e)) => return Err(e.into()),
        }
        let store = if enriching {
            Self::apply_survivors(bootstrap, hooks, observer).await?
        } else {
            bootstrap.finish_unenriched(hooks.policy, observer)?
        };
        tracing::Span::current().record("entries", store.len());
        observer.config_store_restored(store.len());
        observer.config_store_entries(store.len());
        observer.config_store_updated(&store);
        Ok(ConfigTopics { consumer: Some(consumer), store })
    }

    /// Decodes, enriches and stores each survivor (the path of an enriching stage).
    async fn apply_survivors(
        mut bootstrap: ConfigBootstrap,
        hooks: Hooks<'_>,
        observer: &dyn Observer,
    ) -> Result<ConfigStore, Error> {
        while let Some(survivor) = bootstrap.next_survivor() {
            let Some(map) = crate::mediation::decode_value_with(&survivor.record, hooks.policy, observer)? else {
                continue; // skipped: the key stays absent (INV-12)
            };
            let config = enriched(hooks, &survivor.key, Config::wrap(map)).await?;
            bootstrap
                .put(&survivor.key, &config)
                .map_err(|e| PolicyError::substitute_not_encodable(&survivor.record, e))?;
        }
        Ok(bootstrap.finish())
    }

    /// The store, read-only.
    pub(crate) fn store(&self) -> &ConfigStore {
        &self.store
    }

    /// Applies everything that arrived since the last drain, without waiting (CFG-20). Returns
    /// how many records were applied.
    pub(crate) async fn drain(&mut self, hooks: Hooks<'_>, observer: &dyn Observer) -> Result<usize, Error> {
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(0);
        };
        let polled = consumer.poll(DRAIN_RECORDS_MAX, Duration::ZERO).await?;
        if polled.records.is_empty() {
            return Ok(0);
        }
        // A span only for a drain that has records (an empty one runs every loop).
        let span = tracing::info_span!("config.drain", records = polled.records.len(), applied = tracing::field::Empty);
        let applied = self.apply_drained(&polled.records, hooks, observer).instrument(span.clone()).await?;
        span.record("applied", applied);
        Ok(applied)
    }

    /// Applies drained records; returns how many were applied.
    async fn apply_drained(
        &mut self,
        records: &[crate::wire::RawRecord],
        hooks: Hooks<'_>,
        observer: &dyn Observer,
    ) -> Result<usize, Error> {
        let mut applied = 0;
        for record in records {
            let Some((key, value)) = decode_config_update(record, hooks.policy, observer)? else {
                continue; // skipped: the previous value stays (INV-12)
            };
            match value {
                None => {
                    self.store.delete(&key);
                }
                Some(map) => {
                    let config = enriched(hooks, &key, Config::wrap(map)).await?;
                    self.store.put(&key, &config).map_err(|e| PolicyError::substitute_not_encodable(record, e))?;
                }
            }
            observer.config_message_in(&record.topic);
            applied += 1;
        }
        if applied > 0 {
            observer.config_store_entries(self.store.len());
            observer.config_store_updated(&self.store);
        }
        Ok(applied)
    }

    /// Releases the consumer.
    pub(crate) async fn close(&mut self) -> Result<(), Error> {
        if let Some(mut consumer) = self.consumer.take() {
            consumer.close().await?;
        }
        Ok(())
    }
}
