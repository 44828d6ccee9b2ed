//! What every runner does around its main loop, in one place: the stage's setup and teardown
//! hooks around the run (STG-02), start-up work raced against the stop ([`Stop::unless_raised`]),
//! the changelog created or adopted, and clients closed within [`CLOSE_TIMEOUT`].
//!
//! The transformer ([`super::tasks`]), the token-sharded extractor ([`super::tokens`]) and the
//! dispatched extractor of the MQTT bridge ([`super::dispatch`]) start and end through
//! these functions, so a rule of the lifecycle is written once.
//!
//! [`Stop::unless_raised`]: super::stop::Stop::unless_raised

use std::future::Future;
use std::time::Duration;

use super::bounds::{CLOSE_TIMEOUT, EXISTING_TOPIC_RETRY, EXISTING_TOPIC_VISIBLE_MAX};
use crate::error::{BoxError, Error};
use crate::kafka::{Admin, KafkaError, KafkaErrorKind, KafkaResult, NewTopic, TopicCreation};

/// Runs the stage's `setup` hook, then `run`, then its `teardown` hook, also after `run` failed
/// (STG-02); a failed setup skips both. The run's error comes first; a teardown's failure is the
/// result only when the run succeeded.
pub(crate) async fn hooked<Teardown>(
    setup: impl Future<Output = Result<(), BoxError>>,
    run: impl Future<Output = Result<(), Error>>,
    teardown: impl FnOnce() -> Teardown,
) -> Result<(), Error>
where
    Teardown: Future<Output = Result<(), BoxError>>,
{
    setup.await.map_err(|source| Error::Hook { hook: "setup".into(), source })?;
    let result = run.await;
    let teardown = teardown().await.map_err(|source| Error::Hook { hook: "teardown".into(), source });
    result.and(teardown)
}

/// Closes a client within [`CLOSE_TIMEOUT`]: a close that takes longer is logged and given up
/// (`None`; librdkafka finishes it in the background), so a shutdown stays within its budget.
pub(crate) async fn close_bounded<T>(what: &str, close: impl Future<Output = T>) -> Option<T> {
    let closed = tokio::time::timeout(CLOSE_TIMEOUT, close).await.ok();
    if closed.is_none() {
        tracing::warn!(client = what, timeout = ?CLOSE_TIMEOUT, "closing timed out");
    }
    closed
}

/// A changelog (or any topic the runner owns) created with `spec`, or the one that exists:
/// whether this call created it, and its partition count (`spec`'s when created: a fresh topic
/// is not described again, LIFE-14, USR-08).
///
/// A topic the broker reports as existing can still be missing from the metadata of the broker
/// the next look asks: replicas starting together all create their application's changelog, and
/// on a cluster of several brokers each answers metadata from its own copy of the cluster state,
/// which a broker that just restarted or was paused brings up to date a moment later. So an
/// existing topic that the metadata does not show yet is looked for again, every
/// [`EXISTING_TOPIC_RETRY`], within [`EXISTING_TOPIC_VISIBLE_MAX`], before it is an error.
pub(crate) async fn create_or_adopt(admin: &dyn Admin, spec: &NewTopic) -> Result<(TopicCreation, u32), Error> {
    if admin.create_topic(spec).await? == TopicCreation::Created {
        return Ok((TopicCreation::Created, spec.partitions));
    }
    let partitions = existing_partitions(admin, &spec.name).await?;
    Ok((TopicCreation::AlreadyExists, partitions))
}

async fn existing_partitions(admin: &dyn Admin, topic: &str) -> KafkaResult<u32> {
    let mut waited = Duration::ZERO;
    loop {
        match admin.partition_count(topic).await? {
            Some(partitions) if partitions > 0 => return Ok(partitions),
            _ if waited >= EXISTING_TOPIC_VISIBLE_MAX => {
                return Err(KafkaError::new(
                    KafkaErrorKind::Retriable,
                    "startup",
                    format!(
                        "the broker says it exists, but no metadata within {EXISTING_TOPIC_VISIBLE_MAX:?} shows its \
                         partitions"
                    ),
                )
                .with_context(topic.to_owned()))
            }
            _ => {
                tracing::info!(topic, "the topic exists, but the metadata does not show it yet: looking again");
                tokio::time::sleep(EXISTING_TOPIC_RETRY).await;
                waited += EXISTING_TOPIC_RETRY;
            }
        }
    }
}
