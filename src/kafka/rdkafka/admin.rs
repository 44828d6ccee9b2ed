//! Topic administration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic as RdNewTopic, TopicReplication};
use rdkafka::bindings as rdsys;
use rdkafka::error::RDKafkaErrorCode as Code;

use super::consumer::partition_count;
use super::errors::{code_error, code_kind, rd_error, Retry, READ_RETRY_BUDGET};
use super::log::{forward_log_or_error, LogContext};
use super::security::blocking_unless_refused;
use super::{drop_off_runtime, TOPIC_VISIBLE_MAX};
use crate::kafka::{Admin, KafkaError, KafkaErrorKind, KafkaResult, NewTopic, TopicCreation};

pub(super) struct RdAdmin {
    pub(super) admin: Option<Arc<AdminClient<LogContext>>>,
    /// Stops the thread that pumps the client's main queue.
    pub(super) pump: Arc<AtomicBool>,
}

/// rdkafka's `AdminClient` never polls librdkafka's main queue, where the client's log lines and
/// errors wait (rdkafka sets `log.queue`): without this thread an admin client would log nothing
/// and its refusals (wrong password, untrusted certificate) would only show as timeouts. The
/// thread ends within 100 ms of `stop`, dropping its handle of the client.
pub(super) fn pump_main_queue(admin: Arc<AdminClient<LogContext>>, stop: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new().name("flechtwerk-admin-events".into()).spawn(move || {
        let context = admin.inner().context().clone();
        // SAFETY: the queue handle is ours until destroyed below, and the client outlives it
        // (this thread holds it); each event is destroyed after its last use.
        unsafe {
            let queue = rdsys::rd_kafka_queue_get_main(admin.inner().native_ptr());
            while !stop.load(Ordering::Relaxed) {
                let event = rdsys::rd_kafka_queue_poll(queue, 100);
                if event.is_null() {
                    continue;
                }
                forward_log_or_error(event, &context);
                rdsys::rd_kafka_event_destroy(event);
            }
            rdsys::rd_kafka_queue_destroy(queue);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread for the admin client's events: its logs are lost");
    }
}

impl RdAdmin {
    pub(super) fn admin(&self) -> Arc<AdminClient<LogContext>> {
        self.admin.clone().expect("an admin client is only taken on drop")
    }

    pub(super) async fn metadata(&self, topic: &str, settle: Duration) -> KafkaResult<Option<(u32, bool)>> {
        let admin = self.admin();
        let topic = topic.to_owned();
        let refusal = admin.inner().context().refusal.clone();
        blocking_unless_refused(&refusal, "partition_count", move || partition_count(admin.inner(), &topic, settle))
            .await
    }
}

impl Drop for RdAdmin {
    fn drop(&mut self) {
        self.pump.store(true, Ordering::Relaxed);
        if let Some(admin) = self.admin.take() {
            drop_off_runtime(admin);
        }
    }
}

/// The time one topic-creation attempt may take before it is given up and retried (within
/// [`READ_RETRY_BUDGET`]): several attempts fit, so one sent to a broker that went down is not
/// the budget's end.
const CREATE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

#[async_trait]
impl Admin for RdAdmin {
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation> {
        let partitions = i32::try_from(topic.partitions).map_err(|_| {
            KafkaError::new(KafkaErrorKind::Other, "create_topic", "too many partitions")
                .with_context(topic.name.clone())
        })?;
        let mut spec =
            RdNewTopic::new(&topic.name, partitions, TopicReplication::Fixed(i32::from(topic.replication_factor)));
        for (key, value) in &topic.configs {
            spec = spec.set(key, value);
        }
        let admin = self.admin();
        let refusal = admin.inner().context().refusal.clone();
        if let Some(refused) = refusal.get() {
            return Err(refused);
        }
        // A creation is retried through a failover like a read (a request to a paused broker
        // times out, the controller moves): creating a topic is idempotent, and one created by
        // an attempt whose answer was lost comes back as TopicAlreadyExists below.
        //
        // librdkafka sends a creation to the broker its metadata last named as the controller
        // (in KRaft any live broker, which forwards it): if that broker went down, the request
        // waits for it until it times out, and so would a retry. So an attempt gets a slice of
        // the budget, and after a failed one a metadata request (to a broker that is up)
        // refreshes that choice (the nemesis found a replica ending after two 30 s attempts at
        // a dead broker while two others were up).
        let mut retry = Retry::within(READ_RETRY_BUDGET);
        let outcome = loop {
            let slice = retry.remaining().min(CREATE_ATTEMPT_TIMEOUT).max(Duration::from_secs(1));
            let options = AdminOptions::new().operation_timeout(Some(slice)).request_timeout(Some(slice));
            let results = tokio::select! {
                biased;
                results = admin.create_topics([&spec], &options) => results,
                refused = refusal.wait() => return Err(refused),
            };
            let error = match results {
                Ok(results) => match results.into_iter().next() {
                    Some(Err((_, code))) if code_kind(code) == KafkaErrorKind::Retriable => {
                        code_error("create_topic", code, topic.name.clone())
                    }
                    // Fewer live brokers than the replication factor: a broker down (fenced by
                    // the controller) heals; a cluster that small gives up after the budget.
                    Some(Err((_, Code::InvalidReplicationFactor))) => KafkaError::new(
                        KafkaErrorKind::Retriable,
                        "create_topic",
                        "fewer live brokers than the replication factor (INVALID_REPLICATION_FACTOR)",
                    )
                    .with_context(topic.name.clone()),
                    Some(outcome) => break outcome,
                    None => {
                        return Err(KafkaError::new(KafkaErrorKind::Other, "create_topic", "no result")
                            .with_context(topic.name.clone()))
                    }
                },
                Err(e) => rd_error("create_topic", &e, None).with_context(topic.name.clone()),
            };
            let pause = retry.after(error, "a topic creation")?;
            // Fresh metadata names a live controller for the next attempt; its own failure
            // changes nothing (the attempt after it fails or not on its own).
            let _ = tokio::time::timeout(retry.remaining(), self.metadata(&topic.name, Duration::ZERO)).await;
            tokio::time::sleep(pause).await;
        };
        match outcome {
            Ok(_) => {
                // Fresh metadata must show it to every client from now on, with leaders.
                let deadline = Instant::now() + TOPIC_VISIBLE_MAX;
                loop {
                    if let Some((_, true)) = self.metadata(&topic.name, Duration::ZERO).await? {
                        return Ok(TopicCreation::Created);
                    }
                    if Instant::now() >= deadline {
                        return Err(KafkaError::new(
                            KafkaErrorKind::Retriable,
                            "create_topic",
                            format!("created, but not visible with leaders within {TOPIC_VISIBLE_MAX:?}"),
                        )
                        .with_context(topic.name.clone()));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            // Created by someone else, maybe a moment ago (replicas of one application starting
            // together all create its changelog): on a cluster of several brokers the one this
            // client asks next may not have the topic in its metadata yet, and the caller's next
            // look would find it missing (the nemesis found replicas ending with "the
            // extractor's changelog has no partitions"). Wait until the metadata shows it; its
            // leaders may be anywhere, a broker of it may be down.
            Err((_, Code::TopicAlreadyExists)) => {
                let deadline = Instant::now() + TOPIC_VISIBLE_MAX;
                while self.metadata(&topic.name, Duration::ZERO).await?.is_none() {
                    if Instant::now() >= deadline {
                        return Err(KafkaError::new(
                            KafkaErrorKind::Retriable,
                            "create_topic",
                            format!("it already exists, but is not in the metadata within {TOPIC_VISIBLE_MAX:?}"),
                        )
                        .with_context(topic.name.clone()));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(TopicCreation::AlreadyExists)
            }
            // A principal without Create on a topic an operator created beforehand: the broker
            // refuses the creation whether the topic exists or not. An existing topic the
            // principal may describe is adopted, as an existing topic is (LIFE-15).
            Err((_, code @ (Code::TopicAuthorizationFailed | Code::ClusterAuthorizationFailed))) => {
                match self.metadata(&topic.name, Duration::ZERO).await {
                    Ok(Some(_)) => Ok(TopicCreation::AlreadyExists),
                    _ => Err(code_error("create_topic", code, topic.name.clone())),
                }
            }
            Err((_, code)) => Err(code_error("create_topic", code, topic.name.clone())),
        }
    }

    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>> {
        Ok(self.metadata(topic, Duration::from_secs(5)).await?.map(|(count, _)| count))
    }
}
