//! The MQTT → Kafka bridge stage (STG-30..33, MQ-01..53): relays messages from an MQTT v5
//! broker into Kafka and acknowledges each MQTT message only after the Kafka transaction that
//! carries it committed.
//!
//! A user writes one function, [`MqttExtractor::relay`] (or passes a closure to
//! [`mqtt_extractor`]): one MQTT message in, at most one Kafka message out. Everything else is
//! the framework's:
//!
//! - **Which filters are subscribed follows the config topic.** Every config entry names one
//!   MQTT topic filter in its `topic` field ([`TOPIC`]). Every replica subscribes every active
//!   config's filter as a shared subscription, `$share/{application_id}/{filter}`, so the MQTT
//!   broker splits the traffic between the replicas; tombstoning, suspending or re-pointing a
//!   config unsubscribes its filter at the next cycle (MQ-20..23).
//! - **Acknowledged after Kafka has it.** A poll drains up to `drain_limit` messages of its
//!   filter, relays each, sends the results in one Kafka transaction and commits it; the MQTT
//!   acknowledgements go out at the top of the next poll of that filter, which runs only after
//!   the commit (MQ-30..34). If the transaction aborts, nothing of it is acknowledged: the
//!   messages go back to the head of the buffer in arrival order and the next cycle sends them
//!   again (MQ-35/36).
//! - **Poison never stalls the bridge.** A payload that is not a JSON object, or a relay that
//!   fails or panics, is acknowledged, counted (`flechtwerk_mqtt_messages_dropped_total`,
//!   reason `poison`) and logged; a relay returning `None` is a counted `filtered` drop
//!   (MQ-32/33).
//!
//! The delivery guarantee: within a process lifetime every message reaches Kafka exactly once;
//! across a crash (or a reconnect) between a commit and the acknowledgements, the broker
//! redelivers the unacknowledged messages, so across crashes it is at least once (MQ-38).
//! `docs/concepts/mqtt.md` in the repository has the operational contract (broker
//! requirements, the handover window, the outage budget).
//!
//! ```
//! use flechtwerk::stage::mqtt_extractor;
//! use flechtwerk::Message;
//!
//! // Every reading goes to Kafka keyed by its MQTT topic; heartbeats are dropped.
//! let bridge = mqtt_extractor(["device-configs"]).relay(|_config, topic, payload| {
//!     if topic.ends_with("/heartbeat") {
//!         return Ok(None);
//!     }
//!     Ok(Some(Message::new("readings", topic, payload)))
//! });
//! # let _ = bridge;
//! ```
//!
//! The application handle needs the broker: `Flechtwerk::builder().mqtt(MqttBrokerConfig::new(
//! broker))`, where `broker` is the `rumqttc` adapter (feature `mqtt`) in production or the
//! simulated broker in tests. The stage is stateless by contract (EXT-54): the MQTT broker,
//! not Kafka, decides which replica gets which message, so nothing could fence a stale writer.

mod bridge;
mod connection;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::EnrichConfig;
use crate::error::BoxError;
use crate::message::Message;
use crate::mqtt::{Mqtt, QoS};
use crate::record::attribute::{Attribute, STR};
use crate::record::{Config, Event};
use crate::wire::{InvalidMessageAction, InvalidMessageError};

pub(crate) use bridge::Bridge;

/// The config field naming a config's MQTT topic filter (required, a string). Two configs must
/// not declare the same or overlapping filters: they would share a view, and the broker would
/// deliver every matching message twice (MQ-51).
pub const TOPIC: Attribute<String> = Attribute::new("topic", &STR);

/// The `topic` label of a `stale` drop: a message no active config's filter matches (the
/// concrete topic would make the label's cardinality unbounded, MET-05).
pub const UNMATCHED: &str = "(unmatched)";

/// Default of [`MqttExtractor::drain_limit`].
pub const DRAIN_LIMIT_DEFAULT: usize = 1000;

/// The MQTT broker of an application and the bridge's session settings (Python's
/// `MqttBrokerConfig`; KNOB `qos`, `session_expiry`).
#[derive(Clone)]
pub struct MqttBrokerConfig {
    pub(crate) broker: Arc<dyn Mqtt>,
    pub(crate) qos: QoS,
    pub(crate) session_expiry: Duration,
    pub(crate) reconnect_grace: Duration,
}

impl MqttBrokerConfig {
    /// The broker (an adapter of the [`Mqtt`] port) with the defaults: subscriptions at QoS 1,
    /// a session expiry of 24 hours, a reconnect grace of 30 seconds.
    pub fn new(broker: Arc<dyn Mqtt>) -> Self {
        MqttBrokerConfig {
            broker,
            qos: QoS::AtLeastOnce,
            session_expiry: Duration::from_secs(24 * 3600),
            reconnect_grace: Duration::from_secs(30),
        }
    }

    /// The QoS of every subscription (default 1). At QoS 0 the broker neither keeps nor
    /// redelivers anything: at most once.
    pub fn qos(mut self, qos: QoS) -> Self {
        self.qos = qos;
        self
    }

    /// How long the broker keeps the session, and the messages queued for it, while this
    /// instance is away (sent in every CONNECT, MQ-02; default 24 h). With one replica it is
    /// the outage budget, together with the broker's queue limit (MQ-53).
    pub fn session_expiry(mut self, expiry: Duration) -> Self {
        self.session_expiry = expiry;
        self
    }

    /// How long a dropped connection may stay down before the run fails with "MQTT
    /// disconnected" (default 30 s). The client reconnects by itself meanwhile; the bridge
    /// keeps relaying what it had buffered and re-subscribes every filter once it is back.
    /// Zero fails the run at the first drain after a drop, as the Python implementation does
    /// (MQ-04, MQ-05).
    pub fn reconnect_grace(mut self, grace: Duration) -> Self {
        self.reconnect_grace = grace;
        self
    }
}

impl std::fmt::Debug for MqttBrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttBrokerConfig")
            .field("broker", &self.broker.broker())
            .field("qos", &self.qos)
            .field("session_expiry", &self.session_expiry)
            .field("reconnect_grace", &self.reconnect_grace)
            .finish()
    }
}

/// An MQTT → Kafka bridge stage (STG-30): only [`config_topics`](Self::config_topics) and
/// [`relay`](Self::relay) are required. See the [module](self) docs.
pub trait MqttExtractor: Send + Sync + 'static {
    /// The config topics: one entry per MQTT topic filter ([`TOPIC`]).
    fn config_topics(&self) -> Vec<String>;

    /// One MQTT message in, at most one Kafka message out (MQ-31..33). `topic` is the concrete
    /// publish topic (not the filter), `payload` the payload decoded as a JSON object.
    /// `Ok(None)` drops the message (acknowledged, counted `filtered`); an error (or a panic)
    /// drops it as poison (acknowledged, counted `poison`, logged). Connection failures never
    /// reach it.
    fn relay(&self, config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError>;

    /// Messages taken per poll and filter (default 1000, KNOB `drain_limit`): they go to Kafka
    /// in one transaction.
    fn drain_limit(&self) -> usize {
        DRAIN_LIMIT_DEFAULT
    }

    /// The enricher of config records on their way into the store (default: none).
    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        None
    }

    /// Decides about an undecodable *config* record (default: raise). MQTT payloads never reach
    /// it: an undecodable payload is a poison drop.
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        let _ = error;
        InvalidMessageAction::Raise
    }

    /// Runs once before the MQTT connection opens.
    fn setup(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Runs once on shutdown, after the MQTT connection closed.
    fn teardown(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }
}

type RelayFn = dyn Fn(&Config, &str, Event) -> Result<Option<Message>, BoxError> + Send + Sync;
type InvalidFn = dyn Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync;

/// Starts the short form of an MQTT bridge stage (Python's `MqttExtractor.of` /
/// `@mqtt_extractor`, STG-31): give the config topics, then the relay as a closure.
pub fn mqtt_extractor<I, T>(config_topics: I) -> MqttExtractorBuilder
where
    I: IntoIterator<Item = T>,
    T: Into<String>,
{
    MqttExtractorBuilder {
        config_topics: config_topics.into_iter().map(Into::into).collect(),
        drain_limit: DRAIN_LIMIT_DEFAULT,
        enrich_config: None,
        on_invalid_message: None,
    }
}

/// Builder of a closure-based [`MqttExtractor`] (see [`mqtt_extractor`]).
pub struct MqttExtractorBuilder {
    config_topics: Vec<String>,
    drain_limit: usize,
    enrich_config: Option<Box<dyn EnrichConfig>>,
    on_invalid_message: Option<Box<InvalidFn>>,
}

impl MqttExtractorBuilder {
    /// Messages taken per poll and filter (default 1000).
    pub fn drain_limit(mut self, limit: usize) -> Self {
        self.drain_limit = limit;
        self
    }

    /// Enriches every config record on its way into the store.
    pub fn enrich_config(mut self, f: impl Fn(Config) -> Result<Config, BoxError> + Send + Sync + 'static) -> Self {
        self.enrich_config = Some(Box::new(f));
        self
    }

    /// Replaces the default invalid-message policy (raise) for config records.
    pub fn on_invalid_message(
        mut self,
        f: impl Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync + 'static,
    ) -> Self {
        self.on_invalid_message = Some(Box::new(f));
        self
    }

    /// Finishes the stage with its relay.
    pub fn relay(
        self,
        f: impl Fn(&Config, &str, Event) -> Result<Option<Message>, BoxError> + Send + Sync + 'static,
    ) -> FnMqttExtractor {
        FnMqttExtractor { builder: self, relay: Box::new(f) }
    }
}

/// An [`MqttExtractor`] made of closures (see [`mqtt_extractor`]).
pub struct FnMqttExtractor {
    builder: MqttExtractorBuilder,
    relay: Box<RelayFn>,
}

impl MqttExtractor for FnMqttExtractor {
    fn config_topics(&self) -> Vec<String> {
        self.builder.config_topics.clone()
    }

    fn relay(&self, config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError> {
        (self.relay)(config, topic, payload)
    }

    fn drain_limit(&self) -> usize {
        self.builder.drain_limit
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.builder.enrich_config.as_deref()
    }

    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        match &self.builder.on_invalid_message {
            Some(f) => f(error),
            None => InvalidMessageAction::Raise,
        }
    }
}

#[cfg(test)]
mod tests;
