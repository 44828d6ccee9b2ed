//! The stage API: what a user writes.
//!
//! A stage is a small piece of user code the framework runs with exactly-once semantics. The
//! shapes share the hooks below; each shape has its trait and a closure builder:
//!
//! - [`Transformer`] / [`transformer`]: a partitioned, keyed input stream → output messages and
//!   per-key state, one Kafka transaction per task per batch.
//!
//! Hooks every shape has (STG-01..08): config topics read into the global store, the state key
//! of a record, an optional [`EnrichConfig`] applied to every config record on its way into the
//! store, the one [`on_invalid_message`](Transformer::on_invalid_message) policy, and setup /
//! teardown.

mod enrich;
mod transformer;

pub use enrich::EnrichConfig;
pub use transformer::{transformer, FnTransformer, Output, Transformer, TransformerBuilder};

pub use crate::error::BoxError;
