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
///
/// ```
/// # use std::sync::Arc;
/// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
/// # let adapter: Arc<dyn flechtwerk::mqtt::Mqtt> =
/// #     Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
/// use std::time::Duration;
/// use flechtwerk::mqtt::QoS;
/// use flechtwerk::stage::MqttBrokerConfig;
/// // `adapter`: the rumqttc adapter in production, the simulated broker here.
/// let config = MqttBrokerConfig::new(adapter).qos(QoS::AtLeastOnce).session_expiry(Duration::from_secs(3600));
/// assert!(format!("{config:?}").contains("session_expiry: 3600s"));
/// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let adapter: Arc<dyn flechtwerk::mqtt::Mqtt> =
    /// #     Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
    /// use flechtwerk::stage::MqttBrokerConfig;
    /// let config = MqttBrokerConfig::new(adapter);
    /// assert!(format!("{config:?}").contains("qos: AtLeastOnce")); // the defaults: QoS 1, 24 h, 30 s
    /// assert!(format!("{config:?}").contains("reconnect_grace: 30s"));
    /// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let adapter: Arc<dyn flechtwerk::mqtt::Mqtt> =
    /// #     Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
    /// use flechtwerk::mqtt::QoS;
    /// use flechtwerk::stage::MqttBrokerConfig;
    /// let config = MqttBrokerConfig::new(adapter).qos(QoS::AtMostOnce); // fire and forget
    /// assert!(format!("{config:?}").contains("qos: AtMostOnce"));
    /// ```
    pub fn qos(mut self, qos: QoS) -> Self {
        self.qos = qos;
        self
    }

    /// How long the broker keeps the session, and the messages queued for it, while this
    /// instance is away (sent in every CONNECT, MQ-02; default 24 h). With one replica it is
    /// the outage budget, together with the broker's queue limit (MQ-53).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let adapter: Arc<dyn flechtwerk::mqtt::Mqtt> =
    /// #     Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
    /// use std::time::Duration;
    /// use flechtwerk::stage::MqttBrokerConfig;
    /// // One replica, and an outage budget of two hours.
    /// let config = MqttBrokerConfig::new(adapter).session_expiry(Duration::from_secs(2 * 3600));
    /// assert!(format!("{config:?}").contains("session_expiry: 7200s"));
    /// ```
    pub fn session_expiry(mut self, expiry: Duration) -> Self {
        self.session_expiry = expiry;
        self
    }

    /// How long a dropped connection may stay down before the run fails with "MQTT
    /// disconnected" (default 30 s). The client reconnects by itself meanwhile; the bridge
    /// keeps relaying what it had buffered and re-subscribes every filter once it is back.
    /// Zero fails the run at the first drain after a drop, as the Python implementation does
    /// (MQ-04, MQ-05).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let adapter: Arc<dyn flechtwerk::mqtt::Mqtt> =
    /// #     Arc::new(flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0)));
    /// use std::time::Duration;
    /// use flechtwerk::stage::MqttBrokerConfig;
    /// let config = MqttBrokerConfig::new(adapter).reconnect_grace(Duration::ZERO); // fail at once, as Python does
    /// assert!(format!("{config:?}").contains("reconnect_grace: 0ns"));
    /// ```
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
///
/// ```
/// use flechtwerk::attribute::{Attribute, FLOAT};
/// use flechtwerk::stage::{BoxError, MqttExtractor};
/// use flechtwerk::{Config, Event, Message};
/// const CELSIUS: Attribute<f64> = Attribute::new("celsius", &FLOAT);
/// const FAHRENHEIT: Attribute<f64> = Attribute::new("fahrenheit", &FLOAT);
///
/// /// Converts temperature readings on their way into Kafka.
/// struct Thermometers;
/// impl MqttExtractor for Thermometers {
///     fn config_topics(&self) -> Vec<String> {
///         vec!["thermometers".into()]
///     }
///     fn relay(&self, _config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError> {
///         let fahrenheit = payload.require(&CELSIUS)? * 9.0 / 5.0 + 32.0;
///         Ok(Some(Message::new("temperatures", topic, Event::new().with(&FAHRENHEIT, fahrenheit)?)))
///     }
/// }
///
/// let reading = Event::new().with(&CELSIUS, 100.0)?;
/// let out = Thermometers.relay(&Config::new(), "site/7/temp", reading)?.expect("relayed");
/// assert_eq!(out.topic(), "temperatures");
/// // A reading without `celsius` is an error: the bridge acknowledges it and counts it as poison.
/// assert!(Thermometers.relay(&Config::new(), "site/7/temp", Event::new()).is_err());
/// # Ok::<(), BoxError>(())
/// ```
pub trait MqttExtractor: Send + Sync + 'static {
    /// The config topics: one entry per MQTT topic filter ([`TOPIC`]).
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
    /// assert_eq!(bridge.config_topics(), ["device-configs"]);
    /// ```
    fn config_topics(&self) -> Vec<String>;

    /// One MQTT message in, at most one Kafka message out (MQ-31..33). `topic` is the concrete
    /// publish topic (not the filter), `payload` the payload decoded as a JSON object.
    /// `Ok(None)` drops the message (acknowledged, counted `filtered`); an error (or a panic)
    /// drops it as poison (acknowledged, counted `poison`, logged). Connection failures never
    /// reach it.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// use flechtwerk::{Config, Event, Message};
    /// // Heartbeats are dropped (counted as `filtered`), everything else goes to Kafka.
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_config, topic, payload| {
    ///     Ok((!topic.ends_with("/heartbeat")).then(|| Message::new("readings", topic, payload)))
    /// });
    /// assert!(bridge.relay(&Config::new(), "site/7/heartbeat", Event::new())?.is_none());
    /// assert_eq!(bridge.relay(&Config::new(), "site/7/readings", Event::new())?.unwrap().topic(), "readings");
    /// # Ok::<(), flechtwerk::stage::BoxError>(())
    /// ```
    fn relay(&self, config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError>;

    /// Messages taken per poll and filter (default 1000, KNOB `drain_limit`): they go to Kafka
    /// in one transaction.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
    /// assert_eq!(bridge.drain_limit(), flechtwerk::stage::mqtt::DRAIN_LIMIT_DEFAULT);
    /// ```
    fn drain_limit(&self) -> usize {
        DRAIN_LIMIT_DEFAULT
    }

    /// The enricher of config records on their way into the store (default: none).
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
    /// assert!(bridge.config_enricher().is_none());
    /// ```
    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        None
    }

    /// Decides about an undecodable *config* record (default: raise). MQTT payloads never reach
    /// it: an undecodable payload is a poison drop.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, Part, RawRecord};
    /// let bridge = mqtt_extractor(["device-configs"])
    ///     .on_invalid_message(|_| InvalidMessageAction::Skip) // a broken config row is not applied
    ///     .relay(|_, _, _| Ok(None));
    /// let record = RawRecord {
    ///     topic: Arc::from("device-configs"), partition: 0, offset: 0, timestamp_ms: None,
    ///     key: Some("site-7".into()), value: Some("{".into()), headers: vec![],
    /// };
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{"[..])).unwrap_err());
    /// assert_eq!(bridge.on_invalid_message(&error), InvalidMessageAction::Skip);
    /// ```
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        let _ = error;
        InvalidMessageAction::Raise
    }

    /// Runs once before the MQTT connection opens.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
    /// assert!(futures::executor::block_on(bridge.setup()).is_ok()); // the default does nothing
    /// ```
    fn setup(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Runs once on shutdown, after the MQTT connection closed.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
    /// assert!(futures::executor::block_on(bridge.teardown()).is_ok()); // the default does nothing
    /// ```
    fn teardown(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }
}

type RelayFn = dyn Fn(&Config, &str, Event) -> Result<Option<Message>, BoxError> + Send + Sync;
type InvalidFn = dyn Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync;

/// Starts the short form of an MQTT bridge stage (Python's `MqttExtractor.of` /
/// `@mqtt_extractor`, STG-31): give the config topics, then the relay as a closure.
///
/// ```
/// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
/// use flechtwerk::{Config, Event};
/// let bridge = mqtt_extractor(["device-configs"])
///     .drain_limit(100)
///     .relay(|_config, topic, payload| Ok(Some(flechtwerk::Message::new("readings", topic, payload))));
/// assert_eq!(bridge.drain_limit(), 100);
/// assert!(bridge.relay(&Config::new(), "site/7/readings", Event::new())?.is_some());
/// # Ok::<(), flechtwerk::stage::BoxError>(())
/// ```
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
///
/// ```
/// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
/// let builder = mqtt_extractor(["device-configs"]).drain_limit(50);
/// let bridge = builder.relay(|_, _, _| Ok(None)); // the relay finishes it
/// assert_eq!(bridge.drain_limit(), 50);
/// ```
pub struct MqttExtractorBuilder {
    config_topics: Vec<String>,
    drain_limit: usize,
    enrich_config: Option<Box<dyn EnrichConfig>>,
    on_invalid_message: Option<Box<InvalidFn>>,
}

impl MqttExtractorBuilder {
    /// Messages taken per poll and filter (default 1000).
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// // Smaller transactions: at most 10 messages per poll and filter.
    /// let bridge = mqtt_extractor(["device-configs"]).drain_limit(10).relay(|_, _, _| Ok(None));
    /// assert_eq!(bridge.drain_limit(), 10);
    /// ```
    pub fn drain_limit(mut self, limit: usize) -> Self {
        self.drain_limit = limit;
        self
    }

    /// Enriches every config record on its way into the store.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::Config;
    /// const SITE: Attribute<String> = Attribute::new("site", &STR);
    /// let bridge = mqtt_extractor(["device-configs"])
    ///     .enrich_config(|config: Config| Ok(config.with(&SITE, "lyon".to_owned())?))
    ///     .relay(|_, _, _| Ok(None));
    /// let enriched = futures::executor::block_on(bridge.config_enricher().unwrap().enrich_config(Config::new()))?;
    /// assert_eq!(enriched.get(&SITE)?.as_deref(), Some("lyon"));
    /// # Ok::<(), flechtwerk::stage::BoxError>(())
    /// ```
    pub fn enrich_config(mut self, f: impl Fn(Config) -> Result<Config, BoxError> + Send + Sync + 'static) -> Self {
        self.enrich_config = Some(Box::new(f));
        self
    }

    /// Replaces the default invalid-message policy (raise) for config records.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, Part, RawRecord};
    /// let bridge = mqtt_extractor(["device-configs"])
    ///     .on_invalid_message(|error| match error.part() {
    ///         Part::Key => InvalidMessageAction::Raise,
    ///         Part::Value => InvalidMessageAction::Skip,
    ///     })
    ///     .relay(|_, _, _| Ok(None));
    /// let record = RawRecord {
    ///     topic: Arc::from("device-configs"), partition: 0, offset: 0, timestamp_ms: None,
    ///     key: Some("site-7".into()), value: Some("[]".into()), headers: vec![],
    /// };
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"[]"[..])).unwrap_err());
    /// assert_eq!(bridge.on_invalid_message(&error), InvalidMessageAction::Skip);
    /// ```
    pub fn on_invalid_message(
        mut self,
        f: impl Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync + 'static,
    ) -> Self {
        self.on_invalid_message = Some(Box::new(f));
        self
    }

    /// Finishes the stage with its relay.
    ///
    /// ```
    /// use flechtwerk::stage::{mqtt_extractor, MqttExtractor};
    /// use flechtwerk::{Config, Event, Message};
    /// let bridge = mqtt_extractor(["device-configs"]).relay(|_config, topic, payload| {
    ///     Ok(Some(Message::new("readings", topic, payload)))
    /// });
    /// let out = bridge.relay(&Config::new(), "site/7/readings", Event::new())?.unwrap();
    /// assert_eq!(out.topic(), "readings");
    /// # Ok::<(), flechtwerk::stage::BoxError>(())
    /// ```
    pub fn relay(
        self,
        f: impl Fn(&Config, &str, Event) -> Result<Option<Message>, BoxError> + Send + Sync + 'static,
    ) -> FnMqttExtractor {
        FnMqttExtractor { builder: self, relay: Box::new(f) }
    }
}

/// An [`MqttExtractor`] made of closures (see [`mqtt_extractor`]).
///
/// ```
/// use flechtwerk::stage::{mqtt_extractor, FnMqttExtractor, MqttExtractor};
/// let bridge: FnMqttExtractor = mqtt_extractor(["device-configs"]).relay(|_, _, _| Ok(None));
/// assert_eq!(bridge.config_topics(), ["device-configs"]);
/// ```
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
