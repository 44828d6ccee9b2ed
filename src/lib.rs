//! # flechtwerk
//!
//! Kafka stream processing with real Kafka transactions for exactly-once delivery.
//!
//! Users write small stages; the framework runs them with exactly-once semantics through
//! rebalances, producer fencing and crash-restarts. The same engine code runs in production
//! (tokio, librdkafka) and in seeded deterministic simulations (madsim, the `flechtwerk-sim`
//! crate) that inject faults and check exactly-once properties.
//!
//! This crate is built in layers; what exists today:
//!
//! - [`json`]: canonical JSON, byte-identical to the Python implementation's wire format.
//! - [`attribute`] and [`record`]: typed attributes with exact-type codecs; [`Record`],
//!   [`Event`], [`State`], [`Config`].
//! - [`message`]: [`Message`] (what a stage emits) and [`IncomingMessage`] (what it reads).
//! - [`wire`]: strict decoding and the one invalid-message hook (raise, skip, substitute).
//! - [`configs`]: the config store, compacted by wire key, sized for a million entries.
//! - [`token_for`]: Kafka's default partitioner, bit for bit, for ownership tokens.
//! - [`observer`]: the Observer port every metric is built from.
//! - [`kafka`]: the Kafka port (consumer, transactional producer, admin), its conformance suite,
//!   and the production adapter on librdkafka (feature `rdkafka`).
//!
//! The framework reads no environment variables and has no CLI: everything is injected.

#![warn(missing_docs)]

mod app;
pub mod attribute;
mod buggify;
mod config_topics;
pub mod configs;
mod error;
pub mod json;
pub mod kafka;
pub mod message;
pub mod observer;
pub mod record;
pub mod stage;
pub mod state;
mod token;
mod transformer;
pub mod wire;

pub use app::{Flechtwerk, FlechtwerkBuilder, MAX_POLL_RECORDS_DEFAULT};
pub use configs::ConfigStore;
pub use error::Error;
pub use message::{IncomingMessage, IntoPayload, Message, Payload};
pub use record::{Config, Event, Record, State};
pub use stage::{transformer, Output, Transformer};
pub use token::{murmur2, token_for};
pub use transformer::Guarantee;
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
