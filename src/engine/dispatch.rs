//! The broker-dispatched extractor loop (EXT-50..56): the loop of the MQTT bridge.
//!
//! An external broker (MQTT, with shared subscriptions) already decides which replica gets which
//! message, so this loop takes no Kafka lease: no membership consumer, no rebalance, no token
//! space, no changelog, no restore, no standby (EXT-50). It bootstraps the config store, then
//! runs the token runner's poll cycles on ONE synthetic token (a one-token space: every active
//! config is polled) with ONE transactional producer, `{application_id}-{client_id}`, and a
//! store that refuses every write: the stage is stateless by contract (EXT-51, EXT-54). Pages
//! are the token runner's pages, committed through the same `Txn`, so a page's messages commit
//! together or not at all, and a config's next poll starts only after its previous poll's last
//! page committed (the re-entry contract the MQTT acknowledgements rely on, EXT-56).
//!
//! The main loop surfaces a failed cycle, waits [`CONFIG_DRAIN_INTERVAL`], and drains the config
//! topics (EXT-52). Unlike the token runner, a page that aborted on an abortable Kafka error
//! (a failed delivery; the abort went through and the producer stays usable) does not end the
//! run: the stage puts the page's MQTT messages back at the head of their buffer (MQ-35), and the
//! next cycle sends them again. A reconnect of the whole process would cost more: every message
//! in flight at the MQTT broker would be redelivered.

use std::sync::{Arc, Mutex};

use super::tokens::cycle::{run_cycles, CycleContext, Token};
use super::tokens::page::SharedState;
use super::tokens::{bootstrap_configs, drained_entries, Cycles, Entries};
use crate::engine::bounds::{CONFIG_DRAIN_INTERVAL, PAGE_TRANSACTION_TIMEOUT};
use crate::engine::config_topics::ConfigTopics;
use crate::engine::hooks::Hooks;
use crate::engine::lifecycle;
use crate::engine::settings::Settings;
use crate::engine::stop::Stop;
use crate::engine::txn::TxnState;
use crate::error::Error;
use crate::kafka::{Kafka, KafkaError, KafkaErrorKind, ProducerConfig};
use crate::observer::Observer;
use crate::record::Config;
use crate::stage::Extractor;
use crate::state::{StateError, StateStore};

/// The dispatched runner.
pub(crate) struct DispatchRunner<S> {
    pub(crate) stage: Arc<S>,
    pub(crate) settings: Settings,
    pub(crate) kafka: Arc<dyn Kafka>,
    pub(crate) observer: Arc<dyn Observer>,
}

/// The store of a stateless stage: reads find nothing, writes are refused (EXT-54). The page
/// refuses a state write before it reaches the store; this is the second line.
struct Stateless;

impl StateStore for Stateless {
    fn get(&mut self, _key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }

    fn put(&mut self, key: &str, _value: &[u8]) -> Result<(), StateError> {
        Err(StateError::new(-1, format!("write of {key:?}: an MQTT stage is stateless by contract")))
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        Err(StateError::new(-1, format!("delete of {key:?}: an MQTT stage is stateless by contract")))
    }

    fn wipe(&mut self) -> Result<(), StateError> {
        Ok(())
    }
}

impl<S: Extractor> DispatchRunner<S> {
    /// Runs until `stop` is raised (clean stop) or an error. The stage's setup runs first and its
    /// teardown last, after an error too.
    pub(crate) async fn run(&self, stop: &Stop) -> Result<(), Error> {
        lifecycle::hooked(self.stage.setup(), self.run_stage(stop), || self.stage.teardown()).await
    }

    /// Offline validation (LIFE-11, LIFE-12), and the config topics exist (LIFE-13).
    async fn validate(&self, topics: &[String]) -> Result<(), Error> {
        if topics.is_empty() {
            return Err(Error::Invalid("an extractor needs at least one config topic".into()));
        }
        match self.settings.poll_interval {
            Some(interval) if !interval.is_zero() => {}
            _ => return Err(Error::Invalid("an extractor needs a positive poll_interval".into())),
        }
        let admin = self.kafka.admin()?;
        for topic in topics {
            if admin.partition_count(topic).await?.is_none() {
                return Err(KafkaError::new(KafkaErrorKind::UnknownTopic, "startup", "config topic does not exist")
                    .with_context(topic.clone())
                    .into());
            }
        }
        Ok(())
    }

    async fn run_stage(&self, stop: &Stop) -> Result<(), Error> {
        let topics = self.stage.config_topics();
        // Raced against the stop like the bootstrap (its admin reads retry through a failover).
        let Some(validated) = stop.unless_raised(self.validate(&topics)).await else { return Ok(()) };
        validated?;
        let stage = &*self.stage;
        let policy = |error: &crate::wire::InvalidMessageError| stage.on_invalid_message(error);
        let state_key = |key: &str, config: &Config| stage.extract_state_key(key, config);
        let hooks = Hooks { enricher: stage.config_enricher(), policy: &policy, state_key: Some(&state_key) };
        // One token in a one-token space: `token_for(anything, 1)` is 0, every config is owned.
        let bootstrap =
            bootstrap_configs(&*self.kafka, &self.settings.client_id, stage, &*self.observer, &topics, hooks, 1, stop);
        let Some(bootstrapped) = bootstrap.await else { return Ok(()) };
        let (mut configs, entries) = bootstrapped?;
        let started = match stop.unless_raised(self.start_producer()).await {
            None => None,
            Some(started) => Some(started?),
        };
        let mut cycles = None;
        let result = match started {
            None => Ok(()),
            Some(token) => {
                let ctx = Arc::new(CycleContext {
                    stage: Arc::clone(&self.stage),
                    observer: Arc::clone(&self.observer),
                    store: Arc::new(Mutex::new(Box::new(Stateless) as Box<dyn StateStore>)) as SharedState,
                    configs: Arc::clone(configs.store()),
                    entries: Arc::clone(&entries),
                    changelog: String::new(),
                    poll_interval: self.settings.poll_interval.expect("validated"),
                    stateless: true,
                    retry_aborted_pages: true,
                });
                let cancel = Stop::new();
                let cycles_run = run_cycles(ctx, vec![token], cancel.clone());
                // The stage's code runs in the cycles: they carry the application's secret context.
                #[cfg(feature = "secrets")]
                let cycles_run = crate::secrets::carry(cycles_run);
                let handle = tokio::spawn(cycles_run);
                cycles = Some(Cycles { cancel, handle });
                self.main_loop(&mut configs, hooks, &entries, &mut cycles, stop).await
            }
        };
        let stopped = self.stop_cycles(&mut cycles).await;
        let config_closed = configs.close().await;
        result.and(stopped).and(config_closed)
    }

    /// The instance's producer: its `init_transactions` fences this client id's previous
    /// incarnation and aborts its open page (the ids of two replicas differ: it fences nothing
    /// else).
    async fn start_producer(&self) -> Result<Token, Error> {
        let settings = &self.settings;
        let mut config = ProducerConfig::transactional(
            settings.client_id.clone(),
            format!("{}-{}", settings.application_id, settings.client_id),
        );
        config.compression = settings.compression;
        config.transaction_timeout = PAGE_TRANSACTION_TIMEOUT;
        let producer = self.kafka.producer(config)?;
        producer.init_transactions().await?;
        Ok(Token { token: 0, producer, txn: TxnState::default() })
    }

    async fn main_loop(
        &self,
        configs: &mut ConfigTopics,
        hooks: Hooks<'_>,
        entries: &Arc<Mutex<Entries>>,
        cycles: &mut Option<Cycles>,
        stop: &Stop,
    ) -> Result<(), Error> {
        loop {
            // Cycles end on their own only by failing: their error ends the run.
            if cycles.as_ref().is_some_and(|c| c.handle.is_finished()) {
                let result = self.stop_cycles(cycles).await;
                assert!(result.is_err(), "poll cycles end on their own only with an error");
                return result;
            }
            tokio::select! {
                biased;
                () = stop.raised() => return Ok(()),
                () = tokio::time::sleep(CONFIG_DRAIN_INTERVAL) => {}
            }
            configs
                .drain(hooks, &*self.observer, |store, applied| {
                    drained_entries(&*self.stage, &*self.observer, entries, store, applied)
                })
                .await?;
        }
    }

    /// Teardown (EXT-55): cancels the cycles (a poll in flight aborts its page), closes the
    /// producer, reports no active configs. A failed cycle's error surfaces here.
    async fn stop_cycles(&self, cycles: &mut Option<Cycles>) -> Result<(), Error> {
        let Some(running) = cycles.take() else {
            return Ok(());
        };
        let result = running.stop().await;
        self.observer.active_configs(0);
        result
    }
}
