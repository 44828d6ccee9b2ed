//! The client adapter: flechtwerk's Kafka port ([`Kafka`], [`Consumer`], [`Producer`],
//! [`Admin`]) over any [`Transport`] to the simulated broker.
//!
//! The clients behave like librdkafka's where the engine can tell: lost requests and retriable
//! errors are retried inside the client (bounded by named budgets), a send resolves when the
//! broker acked it, consumers keep their membership alive with a background heartbeat task,
//! transactional misuse is refused client-side.
//!
//! [`Consumer`]: flechtwerk::kafka::Consumer
//! [`Producer`]: flechtwerk::kafka::Producer
//! [`Admin`]: flechtwerk::kafka::Admin

mod admin;
mod consumer;
mod membership;
mod producer;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::{
    Admin, Consumer, ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, KafkaResult, Producer, ProducerConfig,
};

use super::protocol::{Reply, Request, Response};

/// How long a client waits for one response before it considers the request lost
/// (`request.timeout.ms`, shortened: the simulated network has no queues to wait behind).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest record a producer accepts (librdkafka's `message.max.bytes` default): a larger one
/// is refused by the send itself, before anything reaches the broker, as librdkafka's
/// `produce()` refuses it with MSG_SIZE_TOO_LARGE.
pub const MESSAGE_MAX_BYTES: usize = 1_000_000;

/// Pause between retries of a failed request (`retry.backoff.ms`).
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Budget of admin and metadata calls, including retries (`default.api.timeout.ms`).
pub const API_TIMEOUT: Duration = Duration::from_secs(60);

/// Budget of one produced batch, including retries (`delivery.timeout.ms`).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(120);

/// A way to the broker for one client.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request`; `None` when no response arrived within [`REQUEST_TIMEOUT`] (the request
    /// or the response was lost, or the broker is down). The request may have been handled.
    fn call(&self, request: Request) -> BoxFuture<'_, Option<Response>>;
}

/// Opens one transport per client (under madsim: an endpoint on the calling node).
pub trait Connector: Send + Sync + 'static {
    /// A transport for the client named `client_id`.
    fn connect(&self, client_id: &str) -> Arc<dyn Transport>;
}

/// A boxed, sendable future (what a transport returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client's connection: its transport and name.
#[derive(Clone)]
pub(crate) struct Conn {
    transport: Arc<dyn Transport>,
    client_id: String,
}

fn unexpected(operation: &'static str, reply: &Reply) -> KafkaError {
    KafkaError::new(KafkaErrorKind::Other, operation, format!("unexpected reply {reply:?}"))
}

impl Conn {
    pub(crate) fn new(transport: Arc<dyn Transport>, client_id: &str) -> Self {
        Conn { transport, client_id: client_id.to_owned() }
    }

    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// One attempt.
    pub(crate) async fn once(&self, request: Request) -> Option<Response> {
        self.transport.call(request).await
    }

    /// Retries lost requests and retriable errors until a reply, a non-retriable error, or
    /// `budget` has passed (then a retriable error naming the last failure).
    pub(crate) async fn call(
        &self,
        operation: &'static str,
        context: &str,
        request: Request,
        budget: Duration,
    ) -> KafkaResult<Reply> {
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            let last = match self.once(request.clone()).await {
                Some(Ok(reply)) => return Ok(reply),
                Some(Err(error)) if error.kind != KafkaErrorKind::Retriable => {
                    return Err(error.into_kafka(operation, context))
                }
                Some(Err(error)) => error.to_string(),
                None => format!("no response within {REQUEST_TIMEOUT:?}"),
            };
            if tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
                return Err(KafkaError::new(
                    KafkaErrorKind::Retriable,
                    operation,
                    format!("gave up after {budget:?}; last: {last}"),
                )
                .with_context(context.to_owned()));
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

/// A record as the poll log names it: topic, partition, offset.
pub type RecordId = (String, i32, i64);

/// Which polls handed out which records, for every consumer of one [`KafkaClient`]: a check
/// can tell whether two records could have come from different polls (a batch that gathers
/// polls, TRX-45, runs each poll's records in turn, so an order holds only within a poll).
/// Only polls that returned records are logged; nothing the clients do depends on it.
#[derive(Default)]
pub struct PollLog {
    inner: Mutex<PollLogInner>,
}

#[derive(Default)]
struct PollLogInner {
    /// Polls that returned records so far.
    polls: u64,
    /// Per record, the polls that handed it out, ascending.
    handed_out: BTreeMap<RecordId, Vec<u64>>,
}

impl PollLog {
    fn record(&self, records: &[flechtwerk::wire::RawRecord]) {
        if records.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().expect("poll log lock");
        let poll = inner.polls;
        inner.polls += 1;
        for r in records {
            inner.handed_out.entry((r.topic.to_string(), r.partition, r.offset)).or_default().push(poll);
        }
    }

    /// Whether `later` was handed out, and only ever in a poll that also handed out `earlier`:
    /// then no consumer can have taken the two from different polls.
    pub fn only_together(&self, earlier: &RecordId, later: &RecordId) -> bool {
        let inner = self.inner.lock().expect("poll log lock");
        let Some(later) = inner.handed_out.get(later) else { return false };
        let earlier = inner.handed_out.get(earlier).map(Vec::as_slice).unwrap_or_default();
        later.iter().all(|poll| earlier.binary_search(poll).is_ok())
    }
}

/// The port's factory over a [`Connector`]: what `Cluster::kafka()` (madsim) and
/// `LocalCluster` hand to the engine.
#[derive(Clone)]
pub struct KafkaClient {
    connector: Arc<dyn Connector>,
    polls: Arc<PollLog>,
}

impl KafkaClient {
    /// Clients connecting through `connector`.
    pub fn new(connector: Arc<dyn Connector>) -> Self {
        KafkaClient { connector, polls: Arc::default() }
    }

    /// What every consumer made by this factory (and its clones) handed out, poll by poll.
    pub fn poll_log(&self) -> &PollLog {
        &self.polls
    }

    fn conn(&self, client_id: &str) -> Conn {
        Conn::new(self.connector.connect(client_id), client_id)
    }
}

impl Kafka for KafkaClient {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        Ok(Box::new(consumer::SimConsumer::new(self.conn(&config.client_id), config, self.polls.clone())))
    }

    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        Ok(Box::new(producer::SimProducer::new(self.conn(&config.client_id), config)))
    }

    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        Ok(Box::new(admin::SimAdmin::new(self.conn("admin"))))
    }
}
