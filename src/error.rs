//! The one error a running application ends with.

use crate::configs::ConfigStoreError;
use crate::json::EncodeError;
use crate::kafka::KafkaError;
use crate::mqtt::MqttError;
use crate::state::StateError;
use crate::wire::{DecodeError, PolicyError};

/// An error from stage code (`transform`, hooks): any error type.
///
/// ```
/// use flechtwerk::stage::{transformer, BoxError};
///
/// fn parse_amount(text: &str) -> Result<i64, BoxError> {
///     Ok(text.trim().parse::<i64>()?) // any error converts with `?`
/// }
/// let stage = transformer(["in"]).transform(|msg, _state, _out| {
///     parse_amount(&msg.key)?;
///     Ok(())
/// });
/// # let _ = stage;
/// assert!(parse_amount("12").is_ok());
/// assert!(parse_amount("twelve").is_err());
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why [`Flechtwerk::run`](crate::Flechtwerk::run) stopped, or a handle could not be built.
///
/// The framework has no retry loops ("let it crash", LIFE-23): any error ends the run, and
/// recovery is a restart, which replays the changelog and aborts whatever transaction was open.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
/// use flechtwerk::stage::transformer;
/// use flechtwerk::{Error, Flechtwerk};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = Arc::new(LocalCluster::new());
/// kafka.admin()?.create_topic(&NewTopic::new("in", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("feeder"))?;
/// producer.send(ProducerRecord::new("in", "k", "{}")).await?.await?;
///
/// // A stage that fails on its first record: the run ends with the record's position and the
/// // stage's error as the source; nothing of the batch was committed.
/// let failing = transformer(["in"]).transform(|_msg, _state, _out| Err("boom".into()));
/// let app = Flechtwerk::builder().application_id("fails").client_id("pod-0").kafka(kafka).build(failing)?;
/// match app.run_until(std::future::pending()).await {
///     Err(Error::Transform { topic, partition, offset, source }) => {
///         assert_eq!((topic.as_str(), partition, offset), ("in", 0, 0));
///         assert_eq!(source.to_string(), "boom");
///     }
///     other => panic!("unexpected: {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting or the topic layout is invalid (messages keep the Python implementation's
    /// fragments, ERR-01..06 and ERR-33).
    #[error("{0}")]
    Invalid(String),
    /// Kafka failed.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The MQTT client failed.
    #[error(transparent)]
    Mqtt(#[from] MqttError),
    /// An undecodable record the policy did not skip, or a decision that cannot be carried out.
    #[error(transparent)]
    InvalidMessage(Box<PolicyError>),
    /// `transform` failed on a record.
    #[error("transform failed on the record at {topic}/{partition}/{offset}")]
    Transform {
        /// Topic of the record.
        topic: String,
        /// Partition of the record.
        partition: i32,
        /// Offset of the record.
        offset: i64,
        /// The stage's error.
        #[source]
        source: BoxError,
    },
    /// An extractor's `poll` failed for a config (its open page aborted; pages committed before
    /// stay committed, EXT-14).
    #[error("poll failed for config {key:?}")]
    Poll {
        /// The config's wire key.
        key: String,
        /// The stage's error.
        #[source]
        source: BoxError,
    },
    /// A stage hook (setup, teardown, enrich_config) failed.
    #[error("{hook} failed")]
    Hook {
        /// Which hook, with context (`enrich_config for config key "k"`).
        hook: String,
        /// The stage's error.
        #[source]
        source: BoxError,
    },
    /// A stage broke the engine's contract with it (the stage's bug, not the data's).
    #[error(transparent)]
    Contract(#[from] ContractViolation),
    /// The config store holds an undecodable value (a framework bug, CFG-04).
    #[error(transparent)]
    Config(#[from] ConfigStoreError),
    /// The local state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// A stored or changelog state does not decode: framework-owned bytes are corrupt
    /// (STO-03, STO-13). Reset the affected state.
    #[error("corrupt state for key {key:?} of task {partition} (reset the state to recover)")]
    CorruptState {
        /// The task (input partition).
        partition: i32,
        /// The state key (lossily decoded if the key itself is the corrupt part).
        key: String,
        /// Why it does not decode.
        #[source]
        source: DecodeError,
    },
    /// The metrics endpoint could not be served: its port is taken, say (LIFE-17). A startup
    /// error, not a warning.
    #[error("cannot serve metrics on {address}")]
    Metrics {
        /// The configured address.
        address: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A message or state holds a value JSON cannot carry (NaN, infinity).
    #[error("cannot encode {what}")]
    Encode {
        /// What was being encoded (`a message to topic "out"`, `the state of key "k"`).
        what: String,
        /// Why.
        #[source]
        source: EncodeError,
    },
}

/// How a stage broke the engine's contract ([`Error::Contract`]).
///
/// ```
/// use flechtwerk::ContractViolation;
/// let violation = ContractViolation::PageUsedAfterFailure { state_key: "feed".into() };
/// assert!(violation.to_string().contains("failed earlier"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractViolation {
    /// A poll of an MQTT stage wrote state (EXT-54): the MQTT broker, not Kafka, decides which
    /// replica gets a message, so nothing would fence a stale writer.
    #[error(
        "poll of {state_key:?} wrote state, but an MQTT stage is stateless by contract: the MQTT broker, not \
         Kafka, decides which replica gets a message, so nothing fences a stale writer (EXT-54); a source that \
         keeps a cursor is an `Extractor`"
    )]
    StateInStatelessStage {
        /// The state key (the config's key) of the poll.
        state_key: String,
    },
    /// A page was used after one of its sends or commits failed: nothing more goes into its
    /// transaction, which the runner aborts (EXT-14).
    #[error("the page of state key {state_key:?} failed earlier: return that error from poll")]
    PageUsedAfterFailure {
        /// The state key (the config's key) of the poll.
        state_key: String,
    },
}

impl From<PolicyError> for Error {
    fn from(error: PolicyError) -> Self {
        Error::InvalidMessage(Box::new(error))
    }
}
