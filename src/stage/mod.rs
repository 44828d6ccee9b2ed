//! The stage API: what a user writes.
//!
//! A stage is a small piece of user code the framework runs with exactly-once semantics. The
//! shapes share the hooks below; each shape has its trait and a closure builder:
//!
//! - [`Transformer`] / [`transformer`]: a partitioned, keyed input stream → output messages and
//!   per-key state, one Kafka transaction per task per batch.
//! - [`Extractor`] / [`extractor`]: polls an external source per config entry, emitting
//!   messages in pages, one Kafka transaction per page, with a resume cursor as its state.
//!
//! Hooks every shape has (STG-01..08): config topics read into the global store, the state key
//! of a record, an optional [`EnrichConfig`] applied to every config record on its way into the
//! store, the one [`on_invalid_message`](Transformer::on_invalid_message) policy, and setup /
//! teardown.

mod enrich;
mod extractor;
mod transformer;

pub use enrich::EnrichConfig;
pub(crate) use extractor::PageSink;
pub use extractor::{extractor, Emit, Extractor, ExtractorBuilder, FnExtractor, Page, Wakeup};
pub use transformer::{transformer, FnTransformer, Output, Transformer, TransformerBuilder};

pub use crate::error::BoxError;
