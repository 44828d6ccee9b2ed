//! # flechtwerk
//!
//! Kafka stream processing with real Kafka transactions for exactly-once delivery.
//!
//! Users write small stages; the framework runs them with exactly-once semantics through
//! rebalances, producer fencing and crash-restarts. The same engine code runs in production
//! (tokio, librdkafka) and in seeded deterministic simulations (madsim, the `flechtwerk-sim`
//! crate) that inject faults and check exactly-once properties.
//!
//! The user's surface:
//!
//! - [`Flechtwerk`] and its [`FlechtwerkBuilder`]: one application instance, everything
//!   injected (the framework reads no environment variables and has no CLI).
//! - [`stage`]: the stage traits and their closure builders ([`Transformer`], [`transformer`]).
//! - [`Record`], [`Event`], [`State`], [`Config`] with typed [`attribute`]s, and [`json`]:
//!   canonical JSON, byte-identical to the Python implementation's wire format.
//! - [`Message`] (what a stage emits) and [`IncomingMessage`] (what it reads).
//! - [`ConfigStore`]: the config topics, compacted by key, readable from every stage.
//! - [`wire`]: the decode rules and the one invalid-message hook's types.
//! - The ports a deployment plugs adapters into: [`kafka`] (librdkafka with feature `rdkafka`),
//!   [`state`] (RocksDB with feature `rocksdb`), [`observer`].
//! - [`Error`], and [`token_for`] (Kafka's partitioner, for ownership tokens).
//!
//! The test kit (a recording observer, the Kafka conformance suite, read helpers) is behind the
//! `testing` feature. `docs/architecture.md` in the repository describes the layers.

#![warn(missing_docs, unreachable_pub)]

// Layer 1, the wire model: JSON, records, messages, raw Kafka records and the decode rules.
pub mod json;
mod message;
mod record;
mod token;
pub mod wire;
// Layer 2, the ports (and their adapters, each behind its feature).
pub mod kafka;
pub mod observer;
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
pub use configs::{ConfigStore, ConfigStoreError};
pub use engine::bounds::MAX_POLL_RECORDS_DEFAULT;
pub use engine::Guarantee;
pub use error::Error;
pub use message::{IncomingMessage, IntoPayload, IntoValue, Message, Payload};
pub use record::attribute;
pub use record::{Config, Event, Record, State};
pub use stage::{extractor, transformer, Extractor, Output, Page, Transformer};
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
