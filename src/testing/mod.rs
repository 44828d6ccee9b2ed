//! The test kit (feature `testing`): what a test of a stage, an adapter or the simulator needs
//! beyond the user's surface.
//!
//! - [`RecordingObserver`]: keeps every observer call, in order (TST-04).
//! - [`conformance`]: the client-level scenarios every [`Kafka`] adapter
//!   must pass, run against the simulated cluster and against Apache Kafka.
//! - [`read_topic`] and [`read_to_end`]: read partitions to the ends captured at entry, the way
//!   the engine's bootstrap and restore do.
//! - The config store's bootstrap and the decode mediation, for benches and fuzz targets.

pub mod conformance;
mod recording;

pub use recording::{Observed, RecordingObserver};

pub use crate::configs::arena::{CHUNK_BYTES, MIN_CHUNK_BYTES};
pub use crate::configs::bootstrap::{decode_config_update, ConfigBootstrap, Survivor};
pub use crate::json::check_canonical_object;
pub use crate::kafka::read::{read_to_end, ReadError, ReadToEnd, READ_STALL_MAX};
pub use crate::mediation::{decode_input, decode_key_with, decode_value_with, mediate};

use crate::kafka::{ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, TopicPartition};
use crate::wire::RawRecord;

/// Reads every committed record of `topic` (all partitions) up to the ends captured now, with a
/// fresh group-less consumer that is closed afterwards; records sorted by (partition, offset).
/// For tools, checks and tests; a topic that does not exist is [`KafkaErrorKind::UnknownTopic`].
///
/// ```
/// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
/// use flechtwerk::testing::read_topic;
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = LocalCluster::new();
/// kafka.admin()?.create_topic(&NewTopic::new("out", 2)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("writer"))?;
/// for key in ["a", "b", "c"] {
///     producer.send(ProducerRecord::new("out", key, "{}")).await?.await?;
/// }
/// let records = read_topic(&kafka, "checker", "out").await?;
/// assert_eq!(records.len(), 3);
/// assert!(read_topic(&kafka, "checker", "missing").await.is_err());
/// # Ok(())
/// # }
/// ```
pub async fn read_topic(kafka: &dyn Kafka, client_id: &str, topic: &str) -> Result<Vec<RawRecord>, KafkaError> {
    let mut consumer = kafka.consumer(ConsumerConfig::groupless(client_id))?;
    let partitions = consumer.partition_count(topic).await?.ok_or_else(|| {
        KafkaError::new(KafkaErrorKind::UnknownTopic, "read_topic", "topic does not exist").with_context(topic)
    })?;
    let tps: Vec<TopicPartition> = (0..partitions as i32).map(|p| TopicPartition::new(topic, p)).collect();
    let mut records = Vec::new();
    let read = read_to_end(consumer.as_mut(), &tps, |r| {
        records.push(r);
        Ok::<(), std::convert::Infallible>(())
    })
    .await;
    consumer.close().await?;
    match read {
        Ok(_) => {}
        Err(ReadError::Kafka(e)) => return Err(e),
        Err(ReadError::Callback(never)) => match never {},
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}

/// Runs `f` with `observer` receiving the secret codecs' events (`secret_decrypted`,
/// `secret_plaintext_read`, ...) on this thread, as an application's run sends them to its
/// observer (feature `secrets`). A `keyring` given is used before the process's, as in
/// [`with_keyring`](crate::secrets::with_keyring).
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::attribute::{encrypted, Attribute, STR};
/// use flechtwerk::secrets::Keyring;
/// use flechtwerk::testing::{with_secret_observer, Observed, RecordingObserver};
/// use flechtwerk::Config;
///
/// const API_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR));
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let recorder = RecordingObserver::default();
/// let read = with_secret_observer(Arc::new(recorder.clone()), Some(&keyring), || {
///     Config::new().with(&API_KEY, "hunter2".to_owned())?.require(&API_KEY)
/// })?;
/// assert_eq!(read, "hunter2");
/// assert_eq!(recorder.events(), [Observed::SecretDecrypted { scope: "".into(), kid: "k1".into() }]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "secrets")]
pub fn with_secret_observer<R>(
    observer: std::sync::Arc<dyn crate::observer::Observer>,
    keyring: Option<&crate::secrets::Keyring>,
    f: impl FnOnce() -> R,
) -> R {
    let context = crate::secrets::SecretContext {
        keyring: keyring.map(|k| std::sync::Arc::new(k.clone())),
        events: Some(std::sync::Arc::new(crate::observer::SecretEventsOf(observer))),
    };
    crate::secrets::enter(context, f)
}
