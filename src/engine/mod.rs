//! The engine: runners that turn a stage into Kafka transactions.
//!
//! - [`settings`]: what a runner is configured with, and the processing [`Guarantee`].
//! - [`bounds`]: every timeout and size bound of the engine, named, with its reason, and the
//!   compile-time checks of how they relate.
//! - [`txn`]: one Kafka transaction of an owner (a transformer task's batch; an extractor
//!   token's page): begun lazily, every delivery awaited before the commit, aborted on every
//!   error path. Both runners commit through it.
//! - [`stop`]: the shutdown signal, and the grace a runner gets to finish in-flight work.
//! - [`records`]: the records the runners write (outputs, changelog records), made once.
//! - [`config_topics`]: the config store at run time (bootstrap at start, drain every loop).
//! - [`hooks`]: the stage's hooks as the decoders and the config machinery take them.
//! - [`lifecycle`]: what every runner does around its main loop (setup and teardown hooks,
//!   start-up raced against the stop, the changelog created or adopted, bounded closes).
//! - [`tasks`]: the transformer runner (one task per input partition number).
//! - [`tokens`]: the extractor runner (ownership tokens, per-page transactions, standbys).
//! - [`bridge`]: the MQTT bridge's runtime (the relay template as an extractor's poll, one MQTT
//!   session shared by per-filter views, acknowledgements only after Kafka committed).
//! - [`dispatch`]: the broker-dispatched extractor runner of the MQTT bridge (no token lease:
//!   one producer per instance; its polls and pages are the token runner's cycles).
//! - [`buggify`]: fault points that only simulations enable; [`budget`]: where a long
//!   preparation yields (the only two files that know about madsim).
//!
//! The engine depends on the ports (Kafka, state, observer), the config store and the wire
//! model, never on an adapter: the same code runs on librdkafka and on the simulated cluster.

pub(crate) mod bounds;
pub(crate) mod bridge;
pub(crate) mod budget;
pub(crate) mod buggify;
pub(crate) mod config_topics;
pub(crate) mod dispatch;
pub(crate) mod hooks;
pub(crate) mod lifecycle;
pub(crate) mod records;
pub(crate) mod settings;
pub(crate) mod stop;
pub(crate) mod tasks;
pub(crate) mod tokens;
pub(crate) mod txn;

pub use settings::{Guarantee, Producers};
