//! # flechtwerk
//!
//! Kafka stream processing with real Kafka transactions for exactly-once delivery.
//!
//! Users write small stages; the framework runs them with exactly-once semantics through
//! rebalances, producer fencing and crash-restarts. The same engine code runs in production
//! (tokio, librdkafka) and in seeded deterministic simulations (madsim, the `flechtwerk-sim`
//! crate) that inject faults and check exactly-once properties.
//!
//! ## A five-minute tour
//!
//! A stage that counts clicks per user and labels every count with the user's plan, read from
//! a config topic, run on the in-process simulated cluster of `flechtwerk-sim` (no broker, no
//! setup; this example is a doctest and runs as written).
//!
//! **1. Attributes** are typed handles on a record's JSON fields, each with its codec; records
//! are read and written only through them ([`attribute`]).
//!
//! **2. A stage.** A [`transformer`] gets each input [`IncomingMessage`], a private copy of its
//! key's [`State`], and an [`Output`] that sends [`Message`]s, sets the new state, and reads the
//! config topics' [`ConfigStore`] (every instance holds all of it). Everything a batch emits
//! commits in one Kafka transaction with its input offsets and its state changes, or not at all.
//!
//! **3. A Kafka.** Anything implementing [`kafka::Kafka`]: the simulated cluster here, the
//! librdkafka adapter in production.
//!
//! **4. The application**: [`Flechtwerk::builder`], everything injected (the library reads no
//! environment variable and no file), then [`run_until`](Flechtwerk::run_until) a shutdown
//! signal.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use flechtwerk::attribute::{Attribute, INT, STR};
//! use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
//! use flechtwerk::stage::transformer;
//! use flechtwerk::testing::read_topic; // the test kit: feature `testing`
//! use flechtwerk::{wire, Event, Flechtwerk, Message};
//! use flechtwerk_sim::cluster::LocalCluster;
//!
//! // 1. Attributes.
//! const COUNT: Attribute<i64> = Attribute::new("count", &INT);
//! const PLAN: Attribute<String> = Attribute::optional("plan", &STR); // may be null
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), flechtwerk::stage::BoxError> {
//! // 2. The stage: input topic `clicks`, config topic `plans`, output topic `click-counts`.
//! let click_counter = transformer(["clicks"]).config_topics(["plans"]).transform(|msg, mut state, out| {
//!     let count = state.get(&COUNT)?.unwrap_or(0) + 1;
//!     state.set(&COUNT, count)?;
//!     let plan = match out.configs().get(&msg.key)? {
//!         Some(config) => config.get(&PLAN)?,
//!         None => None,
//!     };
//!     let value = Event::new().with(&COUNT, count)?.with(&PLAN, plan)?;
//!     out.send(Message::new("click-counts", msg.key.as_str(), value));
//!     out.set_state(state);
//!     Ok(())
//! });
//!
//! // 3. The in-process simulated cluster, its topics, and some data: ada's plan, three clicks.
//! let kafka: Arc<dyn Kafka> = Arc::new(LocalCluster::new());
//! let admin = kafka.admin()?;
//! admin.create_topic(&NewTopic::new("clicks", 2)).await?;
//! admin.create_topic(&NewTopic::new("click-counts", 2)).await?;
//! admin.create_topic(&NewTopic::new("plans", 1).compacted()).await?;
//! let producer = kafka.producer(ProducerConfig::idempotent("tour-feeder"))?;
//! producer.send(ProducerRecord::new("plans", "ada", r#"{"plan":"pro"}"#)).await?.await?;
//! for user in ["ada", "bob", "ada"] {
//!     producer.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
//! }
//! producer.close().await;
//!
//! // 4. The application, run until its three counts are out.
//! let app = Flechtwerk::builder()
//!     .application_id("click-counter") // the consumer group, changelog and transactional ids
//!     .client_id("pod-0") // unique per instance, stable across its restarts
//!     .kafka(kafka.clone())
//!     .build(click_counter)?;
//! let counted = async {
//!     while read_topic(&*kafka, "tour-reader", "click-counts").await.map_or(0, |r| r.len()) < 3 {
//!         tokio::time::sleep(Duration::from_millis(50)).await;
//!     }
//! };
//! app.run_until(counted).await?; // a clean stop: the open transaction (if any) aborts
//!
//! // What was committed: per user, the counts in order, with the plan joined in.
//! let mut seen = Vec::new();
//! for record in read_topic(&*kafka, "tour-reader", "click-counts").await? {
//!     let value = Event::wrap(wire::decode_value(record.value.as_deref())?);
//!     seen.push((wire::decode_key(record.key.as_deref())?, value.require(&COUNT)?, value.get(&PLAN)?));
//! }
//! seen.sort();
//! assert_eq!(
//!     seen,
//!     [("ada".into(), 1, Some("pro".into())), ("ada".into(), 2, Some("pro".into())), ("bob".into(), 1, None)]
//! );
//! # Ok(())
//! # }
//! ```
//!
//! **5. Production** differs in one line, the Kafka: the librdkafka adapter (feature `rdkafka`)
//! and a broker's address. Run as many instances as you like with distinct client ids: they
//! share the input partitions, and the framework keeps exactly-once through their rebalances,
//! crashes and restarts.
//!
//! ```no_run
//! # #[cfg(feature = "rdkafka")]
//! # async fn production(click_counter: flechtwerk::stage::FnTransformer) -> Result<(), flechtwerk::Error> {
//! use std::sync::Arc;
//! use flechtwerk::kafka::rdkafka::RdKafka;
//! use flechtwerk::Flechtwerk;
//!
//! let app = Flechtwerk::builder()
//!     .application_id("click-counter")
//!     .client_id("pod-0")
//!     .kafka(Arc::new(RdKafka::new("127.0.0.1:9092")))
//!     .build(click_counter)?;
//! app.run_until(async { /* your shutdown signal, e.g. SIGTERM */ }).await
//! # }
//! ```
//!
//! **6. Chaos-test it**: the `flechtwerk-sim` crate runs stages on a simulated cluster under
//! seeded fault schedules (crashes, zombies, lost requests, late markers, broker restarts) and
//! checks exactly-once on the broker's own log; a failing seed replays exactly.
//!
//! Next: `docs/guides/getting-started.md` in the repository walks from an empty crate to a stage
//! on a broker; `docs/concepts/` explains exactly-once and config topics.
//!
//! ## The user's surface
//!
//! - [`Flechtwerk`] and its [`FlechtwerkBuilder`]: one application instance, everything
//!   injected (the framework reads no environment variables and has no CLI).
//! - [`stage`]: the stage traits and their closure builders ([`Transformer`], [`transformer`],
//!   [`Extractor`], [`extractor`], and the MQTT bridge: [`MqttExtractor`], [`mqtt_extractor`]).
//! - [`Record`], [`Event`], [`State`], [`Config`] with typed [`attribute`]s, and [`json`]:
//!   canonical JSON, byte-identical to the Python implementation's wire format.
//! - [`Message`] (what a stage emits) and [`IncomingMessage`] (what it reads).
//! - [`ConfigStore`]: the config topics, compacted by key, readable from every stage.
//! - [`wire`]: the decode rules and the one invalid-message hook's types.
//! - The ports a deployment plugs adapters into: [`kafka`] (librdkafka with feature `rdkafka`),
//!   [`mqtt`] (rumqttc with feature `mqtt`), [`state`] (RocksDB with feature `rocksdb`),
//!   [`observer`].
//! - [`Error`], and [`token_for`] (Kafka's partitioner, for ownership tokens).
//!
//! The test kit (a recording observer, the Kafka conformance suite, read helpers) is behind the
//! `testing` feature. `docs/architecture.md` in the repository describes the layers.
//!
//! ## Cargo features
//!
//! - `rocksdb` (default): task state in RocksDB, linked from the system's `librocksdb` (install
//!   `librocksdb-dev` or your system's equivalent to build). Without it, state lives in memory.
//! - `rdkafka`: the production Kafka adapter, `kafka::rdkafka::RdKafka` (librdkafka, built
//!   from source: needs `make` and a C/C++ compiler).
//! - `prometheus`: every `flechtwerk_*` metric served at `/metrics`
//!   ([`FlechtwerkBuilder::metrics`]).
//! - `testing`: the test kit, `flechtwerk::testing`.
//! - `mqtt`: reserved; enables nothing yet.

#![warn(missing_docs, unreachable_pub)]

// Layer 1, the wire model: JSON, records, messages, raw Kafka records and the decode rules.
pub mod json;
mod message;
mod record;
mod token;
pub mod wire;
// Layer 2, the ports (and their adapters, each behind its feature).
pub mod kafka;
pub mod mqtt;
pub mod observer;
#[cfg(feature = "secrets")]
pub mod secrets;
pub mod state;
// Layer 3: the config store, and decoding through the invalid-message hook. (Where a private
// module has `pub` items, they are the test kit's: `testing` re-exports them.)
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod configs;
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod mediation;
// Layer 4: the stage API and the engine.
mod engine;
mod error;
pub mod stage;
// Layer 5: the application handle.
mod app;
// The test kit.
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use app::{Flechtwerk, FlechtwerkBuilder, IntoRunner};
#[cfg(feature = "secrets")]
pub use configs::{scan_config_topics, ScanEntry, ScanError};
pub use configs::{ConfigStore, ConfigStoreError};
pub use engine::bounds::MAX_POLL_RECORDS_DEFAULT;
pub use engine::{Guarantee, Producers};
pub use error::{ContractViolation, Error};
pub use message::{IncomingMessage, IntoPayload, IntoValue, Message, Payload};
pub use record::attribute;
pub use record::{Config, Event, Record, State};
pub use stage::{extractor, mqtt_extractor, transformer, Extractor, MqttExtractor, Output, Page, Transformer};
pub use token::{murmur2, token_for};
pub use wire::{InvalidMessageAction, InvalidMessageError};

/// Canonical JSON bytes of a record: what every Flechtwerk writer puts on the wire (ATTR-43).
///
/// ```
/// use flechtwerk::{encode_json, json, Event};
/// let json::Value::Object(map) = json::parse(r#"{"b": 2, "a": "Müller", "c": 1e16}"#)? else { unreachable!() };
/// assert_eq!(encode_json(&Event::wrap(map))?, r#"{"a":"Müller","b":2,"c":1e+16}"#.as_bytes());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_json(record: &Record) -> Result<Vec<u8>, json::EncodeError> {
    record.encode()
}
