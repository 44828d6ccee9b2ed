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

use flechtwerk::kafka::TopicPartition;

use super::protocol::{
    BrokerError, BrokerId, CoordinatorKey, ErrorCode, FetchedPartition, Reply, Request, Response, Route,
};

/// How long a client waits for one response before it considers the request lost
/// (`request.timeout.ms`, shortened: the simulated network has no queues to wait behind), unless
/// the cluster sets another (`Cluster::set_request_timeout`, a simulation build's).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The request timeout of one cluster's clients, shared by its transports and its fault plan
/// (a request held *past* the timeout is held past this one); [`REQUEST_TIMEOUT`] by default.
#[derive(Clone, Debug)]
pub struct RequestTimeout(Arc<std::sync::atomic::AtomicU64>);

impl Default for RequestTimeout {
    fn default() -> Self {
        RequestTimeout(Arc::new(std::sync::atomic::AtomicU64::new(REQUEST_TIMEOUT.as_millis() as u64)))
    }
}

impl RequestTimeout {
    /// The current timeout.
    pub fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Sets the timeout (for requests sent from now on).
    pub fn set(&self, timeout: Duration) {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.0.store(millis, std::sync::atomic::Ordering::SeqCst);
    }
}

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

/// A way to the brokers for one client: one connection per broker.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request` to `broker`; `None` when no response arrived within
    /// [`REQUEST_TIMEOUT`] (the request or the response was lost, or the broker is down). The
    /// request may have been handled.
    fn call(&self, broker: BrokerId, request: Request) -> BoxFuture<'_, Option<Response>>;
}

/// Opens one transport per client (under madsim: an endpoint on the calling node).
pub trait Connector: Send + Sync + 'static {
    /// A transport for the client named `client_id`.
    fn connect(&self, client_id: &str) -> Arc<dyn Transport>;

    /// How many brokers the cluster has (its bootstrap list): with one, every request goes to
    /// it and no lookup is needed.
    fn brokers(&self) -> u32 {
        1
    }
}

/// A boxed, sendable future (what a transport returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client's connections: its transport, name, and what it knows of the cluster.
#[derive(Clone)]
pub(crate) struct Conn {
    transport: Arc<dyn Transport>,
    client_id: String,
    routes: Arc<Routes>,
}

/// What a client knows of the cluster, as librdkafka's metadata cache: partition leaders (from
/// Metadata) and coordinators (from FindCoordinator), each dropped when a broker says it no
/// longer serves it (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, ...) or does not answer.
struct Routes {
    brokers: u32,
    leaders: Mutex<BTreeMap<TopicPartition, BrokerId>>,
    coordinators: Mutex<BTreeMap<CoordinatorKey, BrokerId>>,
    /// The bootstrap broker asked for metadata; the next one after a failure.
    bootstrap: Mutex<BrokerId>,
}

impl Routes {
    fn any(&self) -> BrokerId {
        *self.bootstrap.lock().expect("routes lock")
    }

    fn next_bootstrap(&self) {
        let mut bootstrap = self.bootstrap.lock().expect("routes lock");
        *bootstrap = (*bootstrap + 1) % self.brokers as BrokerId;
    }

    fn forget(&self, route: &Route) {
        match route {
            Route::Any | Route::Leaders => self.next_bootstrap(),
            Route::Leader(partition) => {
                self.leaders.lock().expect("routes lock").remove(partition);
            }
            Route::Coordinator(key) => {
                self.coordinators.lock().expect("routes lock").remove(key);
            }
        }
    }
}

/// Drops a route when dropped armed: a request that got no answer, or a refusal, or whose
/// caller stopped waiting.
struct Forget<'a> {
    routes: &'a Routes,
    route: &'a Route,
    armed: bool,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.routes.forget(self.route);
        }
    }
}

/// Whether a broker's refusal means the client's routing is stale.
fn stale_route(error: &BrokerError) -> bool {
    matches!(
        error.code,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::UnknownTopicOrPartition
    )
}

fn unexpected(operation: &'static str, reply: &Reply) -> KafkaError {
    KafkaError::new(KafkaErrorKind::Other, operation, format!("unexpected reply {reply:?}"))
}

impl Conn {
    pub(crate) fn new(transport: Arc<dyn Transport>, client_id: &str, brokers: u32) -> Self {
        let routes = Routes {
            brokers: brokers.max(1),
            leaders: Mutex::default(),
            coordinators: Mutex::default(),
            bootstrap: Mutex::new(0),
        };
        Conn { transport, client_id: client_id.to_owned(), routes: Arc::new(routes) }
    }

    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// One attempt, to the broker that serves the request (looked up first if unknown);
    /// `None` also when the lookup failed.
    pub(crate) async fn once(&self, request: Request) -> Option<Response> {
        if self.routes.brokers == 1 {
            return self.transport.call(0, request).await;
        }
        let route = request.route();
        if route == Route::Leaders {
            return self.fetch_by_leader(request).await;
        }
        let broker = self.destination(&route).await?;
        // A caller that gives up first (a heartbeat waits less than the request timeout) counts
        // as no answer too: librdkafka marks a broker that stops answering down and looks its
        // leaderships and coordinators up again.
        let mut unanswered = Forget { routes: &self.routes, route: &route, armed: true };
        let response = self.transport.call(broker, request).await;
        match &response {
            None => {}
            Some(Err(error)) if stale_route(error) => {}
            Some(_) => unanswered.armed = false,
        }
        response
    }

    /// The broker serving `route`, from the cache or asked of a bootstrap broker.
    async fn destination(&self, route: &Route) -> Option<BrokerId> {
        match route {
            Route::Any | Route::Leaders => Some(self.routes.any()),
            Route::Leader(partition) => self.leader(partition).await,
            Route::Coordinator(key) => {
                if let Some(&broker) = self.routes.coordinators.lock().expect("routes lock").get(key) {
                    return Some(broker);
                }
                let asked = self.routes.any();
                // Unanswered or abandoned, the lookup asks the next bootstrap broker next time.
                let mut unanswered = Forget { routes: &self.routes, route: &Route::Any, armed: true };
                match self.transport.call(asked, Request::FindCoordinator(key.clone())).await {
                    Some(Ok(Reply::Coordinator(broker))) => {
                        unanswered.armed = false;
                        self.routes.coordinators.lock().expect("routes lock").insert(key.clone(), broker);
                        Some(broker)
                    }
                    _ => None,
                }
            }
        }
    }

    /// A partition's leader, from the cache or a Metadata request for its topic.
    async fn leader(&self, partition: &TopicPartition) -> Option<BrokerId> {
        if let Some(&broker) = self.routes.leaders.lock().expect("routes lock").get(partition) {
            return Some(broker);
        }
        let asked = self.routes.any();
        let mut unanswered = Forget { routes: &self.routes, route: &Route::Any, armed: true };
        match self.transport.call(asked, Request::Metadata { topic: partition.topic.clone() }).await {
            Some(Ok(Reply::Metadata(Some(leaders)))) => {
                unanswered.armed = false;
                let mut cache = self.routes.leaders.lock().expect("routes lock");
                for (p, leader) in leaders.iter().enumerate() {
                    if let Some(leader) = leader {
                        cache.insert(TopicPartition::new(partition.topic.as_str(), p as i32), *leader);
                    }
                }
                usize::try_from(partition.partition).ok().and_then(|p| leaders.get(p).copied().flatten())
            }
            Some(Ok(_)) => {
                unanswered.armed = false;
                None
            }
            _ => None,
        }
    }

    /// A fetch of partitions led by several brokers: one fetch per leader, concurrently, as
    /// librdkafka fetches from each broker; the answers merged in the requested order and cut
    /// to `max_records`. A partition whose leader is unknown or did not answer gets an error
    /// (the consumer tries it again on its next poll).
    async fn fetch_by_leader(&self, request: Request) -> Option<Response> {
        let Request::Fetch { partitions, max_records } = request else { unreachable!("only fetches route to leaders") };
        let mut by_leader: BTreeMap<BrokerId, Vec<(TopicPartition, i64)>> = BTreeMap::new();
        for (partition, position) in &partitions {
            // A partition without a known leader is answered NOT_LEADER below.
            if let Some(leader) = self.leader(partition).await {
                by_leader.entry(leader).or_default().push((partition.clone(), *position));
            }
        }
        let calls = by_leader.into_iter().map(|(leader, wanted)| async move {
            let request = Request::Fetch { partitions: wanted.clone(), max_records };
            (wanted, self.transport.call(leader, request).await)
        });
        let mut answers: BTreeMap<TopicPartition, FetchedPartition> = BTreeMap::new();
        let failed = |partition: &TopicPartition, position: i64, error: BrokerError| FetchedPartition {
            partition: partition.clone(),
            records: Vec::new(),
            next_offset: position,
            error: Some(error),
        };
        for (wanted, response) in futures::future::join_all(calls).await {
            match response {
                Some(Ok(Reply::Fetched(fetched))) => {
                    for answer in fetched {
                        if answer.error.as_ref().is_some_and(stale_route) {
                            self.routes.forget(&Route::Leader(answer.partition.clone()));
                        }
                        answers.insert(answer.partition.clone(), answer);
                    }
                }
                other => {
                    let error = match other {
                        Some(Err(error)) => error,
                        _ => BrokerError::new(ErrorCode::RequestTimedOut, "no fetch response"),
                    };
                    for (partition, position) in wanted {
                        self.routes.forget(&Route::Leader(partition.clone()));
                        answers.insert(partition.clone(), failed(&partition, position, error.clone()));
                    }
                }
            }
        }
        let mut budget = max_records;
        let mut merged = Vec::with_capacity(partitions.len());
        for (partition, position) in partitions {
            let mut answer = answers.remove(&partition).unwrap_or_else(|| {
                let error = BrokerError::new(ErrorCode::NotLeaderOrFollower, format!("{partition}: leader unknown"));
                failed(&partition, position, error)
            });
            if answer.records.len() > budget {
                answer.next_offset = answer.records[budget].offset;
                answer.records.truncate(budget);
            }
            budget -= answer.records.len();
            merged.push(answer);
        }
        Some(Ok(Reply::Fetched(merged)))
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
                None => "no response within the request timeout".to_owned(),
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

    /// How many brokers the cluster has.
    pub fn brokers(&self) -> u32 {
        self.connector.brokers()
    }

    /// The replication factor a production deployment would give its topics on this cluster:
    /// 3, or every broker of a smaller one.
    pub fn replication_factor(&self) -> i16 {
        self.brokers().min(3) as i16
    }

    /// What every consumer made by this factory (and its clones) handed out, poll by poll.
    pub fn poll_log(&self) -> &PollLog {
        &self.polls
    }

    fn conn(&self, client_id: &str) -> Conn {
        Conn::new(self.connector.connect(client_id), client_id, self.connector.brokers())
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
