//! The stage API: what a user writes.
//!
//! A stage is a small piece of user code the framework runs with exactly-once semantics. The
//! shapes share the hooks below; each shape has its trait and a closure builder:
//!
//! - [`Transformer`] / [`transformer`]: a partitioned, keyed input stream → output messages and
//!   per-key state, one Kafka transaction per task per batch.
//! - [`Extractor`] / [`extractor`]: polls an external source per config entry, emitting
//!   messages in pages, one Kafka transaction per page, with a resume cursor as its state.
//! - [`MqttExtractor`] / [`mqtt_extractor`]: the MQTT → Kafka bridge, relaying each MQTT message
//!   of the configs' topic filters into Kafka and acknowledging it once Kafka has it ([`mqtt`]).
//!
//! Hooks every shape has (STG-01..08): config topics read into the global store, the state key
//! of a record, an optional [`EnrichConfig`] applied to every config record on its way into the
//! store, the one [`on_invalid_message`](Transformer::on_invalid_message) policy, and setup /
//! teardown.
//!
//! ```
//! use flechtwerk::attribute::{Attribute, INT};
//! use flechtwerk::stage::{extractor, transformer, Emit};
//! use flechtwerk::wire::InvalidMessageAction;
//! use flechtwerk::{Event, Message};
//!
//! const N: Attribute<i64> = Attribute::new("n", &INT);
//! // A transformer: every input doubled, undecodable inputs skipped.
//! let doubler = transformer(["numbers"])
//!     .on_invalid_message(|_| InvalidMessageAction::Skip)
//!     .transform(|msg, _state, out| {
//!         let n = msg.value.as_ref().map(|v| v.get(&N)).transpose()?.flatten().unwrap_or(0);
//!         out.send(Message::new("doubled", msg.key.as_str(), Event::new().with(&N, 2 * n)?));
//!         Ok(())
//!     });
//! // An extractor: one message per config entry and poll.
//! let ticker = extractor(["feeds"]).poll(|key, _config, _state| Ok(vec![Emit::Message(Message::new("ticks", key, Event::new()))]));
//! ```

mod enrich;
mod extractor;
pub mod mqtt;
mod transformer;

pub use enrich::EnrichConfig;
pub(crate) use extractor::PageSink;
pub use extractor::{extractor, Emit, Extractor, ExtractorBuilder, FnExtractor, Page, Wakeup};
pub use mqtt::{mqtt_extractor, FnMqttExtractor, MqttBrokerConfig, MqttExtractor, MqttExtractorBuilder};
pub use transformer::{transformer, FnTransformer, Output, Transformer, TransformerBuilder};

pub use crate::error::BoxError;
