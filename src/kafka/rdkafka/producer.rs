//! The producer: transactional or idempotent, deliveries as futures that fail instead of
//! hanging.
//!
//! Delivery reports are served by one thread per producer of our own ([`DeliveryPoller`]), not
//! by rdkafka's `FutureProducer`: its polling thread calls `BaseProducer::poll(100 ms)`, which
//! keeps polling until its deadline and, once less than a millisecond is left, asks librdkafka
//! with a timeout of 0 ms, so every 100 ms ended in a busy loop of up to a millisecond (about
//! 0.5 % of a core per producer, measured as 12–18 % of a 4-partition stage's CPU, and growing
//! with the tasks of an instance). Our thread waits on librdkafka's queue with a whole timeout
//! and is woken at once when the producer closes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::FutureExt;
use rdkafka::bindings as rdsys;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode as Code};
use rdkafka::message::{Header as RdHeader, Message as _, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use rdkafka::{ClientContext, IntoOpaque, Offset, TopicPartitionList};

use super::errors::{classify, rd_error, rd_error_as};
use super::log::{forward_log_or_error, LogContext};
use super::security::{blocking_unless_refused, Refusal, TxnRefusals};
use super::{drop_off_runtime, lock};
use crate::kafka::{
    Delivered, DeliveryFuture, GroupMetadata, KafkaError, KafkaErrorKind, KafkaResult, Producer, ProducerRecord,
    TopicPartition,
};

/// What a delivery report says: the record's partition and offset, or librdkafka's error.
pub(super) type DeliveryOutcome = Result<(i32, i64), RdError>;

/// The producer's context: librdkafka's log lines and errors as for every client, and the
/// delivery of a record to the future waiting for it.
pub(super) struct DeliveryContext {
    pub(super) log: LogContext,
}

impl ClientContext for DeliveryContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.log.log(level, facility, message);
    }

    fn error(&self, error: RdError, reason: &str) {
        self.log.error(error, reason);
    }
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Box<tokio::sync::oneshot::Sender<DeliveryOutcome>>;

    /// Reached through rdkafka's own poll (the purge and flush when the producer is dropped, once
    /// our poller has stopped, see [`RdFutureProducer`]) and through `rd_kafka_flush`, which
    /// serves the queue itself while it waits, beside our poller.
    fn delivery(&self, result: &DeliveryResult<'_>, waiting: Self::DeliveryOpaque) {
        let outcome = match result {
            Ok(message) => Ok((message.partition(), message.offset())),
            Err((error, _)) => Err(error.clone()),
        };
        let _ = waiting.send(outcome);
    }
}

/// librdkafka's main queue of one producer, served by the poller thread.
struct MainQueue(*mut rdsys::rd_kafka_queue_t);

// SAFETY: librdkafka's queue handles are thread-safe (rd_kafka_queue_poll and
// rd_kafka_queue_yield may be called from any thread); the handle is destroyed once, by its
// owner ([`DeliveryPoller::stop`]) after the polling thread has ended.
unsafe impl Send for MainQueue {}
// SAFETY: see above: `rd_kafka_queue_yield` from the closing thread while the poller polls.
unsafe impl Sync for MainQueue {}

/// The thread that serves a producer's delivery reports, log lines and errors.
struct DeliveryPoller {
    queue: Arc<MainQueue>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long the poller waits on librdkafka's queue at a time (it is woken at once to stop).
const DELIVERY_POLL_MS: i32 = 1_000;

impl DeliveryPoller {
    fn start(producer: &BaseProducer<DeliveryContext>, client_id: &str) -> std::io::Result<Self> {
        // SAFETY: the client is alive; the new queue reference is destroyed in `stop`, before
        // the client (the producer's owner stops the poller first).
        let queue = Arc::new(MainQueue(unsafe { rdsys::rd_kafka_queue_get_main(producer.client().native_ptr()) }));
        let stop = Arc::new(AtomicBool::new(false));
        let log = producer.context().log.clone();
        let thread = {
            let (queue, stop) = (queue.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("rdk:dr:{client_id}").chars().take(15).collect())
                .spawn(move || serve(&queue, &stop, &log))?
        };
        Ok(DeliveryPoller { queue, stop, thread: Some(thread) })
    }

    /// Stops the thread (waking it) and waits for it; afterwards rdkafka's own poll serves
    /// what is left.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // SAFETY: the queue handle is alive until destroyed below.
        unsafe { rdsys::rd_kafka_queue_yield(self.queue.0) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
            // SAFETY: the only other user of the handle, the thread, has ended.
            unsafe { rdsys::rd_kafka_queue_destroy(self.queue.0) };
        }
    }
}

/// The poller's loop: one event at a time until stopped.
fn serve(queue: &MainQueue, stop: &AtomicBool, log: &LogContext) {
    while !stop.load(Ordering::Acquire) {
        // SAFETY: the handle outlives this thread (see `DeliveryPoller::stop`).
        let event = unsafe { rdsys::rd_kafka_queue_poll(queue.0, DELIVERY_POLL_MS) };
        if event.is_null() {
            continue;
        }
        // SAFETY: a non-null event from the queue, destroyed once below after its last use.
        unsafe {
            match rdsys::rd_kafka_event_type(event) {
                rdsys::RD_KAFKA_EVENT_DR => deliver(event),
                _ => forward_log_or_error(event, log),
            }
            rdsys::rd_kafka_event_destroy(event);
        }
    }
}

/// Resolves the futures of a delivery report's records.
///
/// # Safety
/// `event` is a live `RD_KAFKA_EVENT_DR` event of a producer whose every record carries a
/// [`DeliveryContext::DeliveryOpaque`] (what [`RdProducer::send`] gives it).
unsafe fn deliver(event: *mut rdsys::rd_kafka_event_t) {
    loop {
        // SAFETY: per the function's contract; the message lives as long as the event.
        let message = unsafe { rdsys::rd_kafka_event_message_next(event) };
        if message.is_null() {
            return;
        }
        // SAFETY: as above; the opaque was made by `IntoOpaque::into_ptr` of the same type and is
        // taken back exactly once (this report is its only delivery).
        let (waiting, outcome) = unsafe {
            let message = &*message;
            let waiting =
                <Box<tokio::sync::oneshot::Sender<DeliveryOutcome>> as IntoOpaque>::from_ptr(message._private);
            let outcome = if message.err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                Ok((message.partition, message.offset))
            } else {
                Err(RdError::MessageProduction(message.err.into()))
            };
            (waiting, outcome)
        };
        let _ = waiting.send(outcome);
    }
}

/// A librdkafka producer and the thread that serves its delivery reports. Dropping it stops
/// the thread first; then rdkafka's producer purges what is unsent, fails its deliveries and
/// joins librdkafka's threads.
pub(super) struct RdFutureProducer {
    poller: DeliveryPoller,
    producer: BaseProducer<DeliveryContext>,
}

impl RdFutureProducer {
    pub(super) fn new(producer: BaseProducer<DeliveryContext>, client_id: &str) -> std::io::Result<Self> {
        let poller = DeliveryPoller::start(&producer, client_id)?;
        Ok(RdFutureProducer { poller, producer })
    }
}

impl std::ops::Deref for RdFutureProducer {
    type Target = BaseProducer<DeliveryContext>;

    fn deref(&self) -> &Self::Target {
        &self.producer
    }
}

impl Drop for RdFutureProducer {
    fn drop(&mut self) {
        self.poller.stop();
    }
}

pub(super) struct RdProducer {
    pub(super) producer: Mutex<Option<Arc<RdFutureProducer>>>,
    pub(super) transactional_id: Option<String>,
    /// `transactional id …` or `client …`, for errors.
    pub(super) context: Arc<str>,
    /// The transaction timeout: bounds every blocking producer call.
    pub(super) timeout: Duration,
    /// Turns true once the producer is closed: pending delivery futures fail then.
    pub(super) closed: tokio::sync::watch::Sender<bool>,
    /// The client's refusal slot (shared with its log context).
    pub(super) refusal: Arc<Refusal>,
    /// The partitions the broker refused to add to the current transaction (shared with the
    /// log context, which reads them from librdkafka's log lines).
    pub(super) txn_refusals: Arc<TxnRefusals>,
    /// Held by a blocking transactional call until librdkafka returns, even when the caller's
    /// future was dropped: the next call (an abort after a cancelled `send_offsets_to_transaction`,
    /// say) waits for it instead of failing with `_CONFLICT` and leaving the transaction open.
    pub(super) in_call: Arc<tokio::sync::Mutex<()>>,
}

impl RdProducer {
    pub(super) fn handle(&self, operation: &'static str) -> KafkaResult<Arc<RdFutureProducer>> {
        lock(&self.producer).clone().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Fatal, operation, "the producer is closed").with_context(&*self.context)
        })
    }

    /// Runs a blocking transactional call and classifies its error. One at a time
    /// ([`RdProducer::in_call`]).
    pub(super) async fn transactional(
        &self,
        operation: &'static str,
        call: impl FnOnce(&RdFutureProducer) -> Result<(), RdError> + Send + 'static,
    ) -> KafkaResult<()> {
        let producer = self.handle(operation)?;
        let in_call = self.in_call.clone().lock_owned().await;
        self.blocking(operation, producer, move |p| {
            let _in_call = in_call;
            call(p)
        })
        .await
        .map_err(|error| name_refused_write(error, &self.txn_refusals, &self.context))
    }

    /// Runs a blocking call of `producer` (this client's handle) and classifies its error.
    async fn blocking(
        &self,
        operation: &'static str,
        producer: Arc<RdFutureProducer>,
        call: impl FnOnce(&RdFutureProducer) -> Result<(), RdError> + Send + 'static,
    ) -> KafkaResult<()> {
        let context = self.context.clone();
        blocking_unless_refused(&self.refusal, operation, move || {
            call(&producer)
                .map_err(|e| rd_error(operation, &e, producer.client().fatal_error()).with_context(&*context))
        })
        .await
    }
}

/// Waits (up to `timeout`) until the client has a broker connection up, with a metadata
/// request naming no topic (brokers only). Best effort: a failure is left to the call that
/// follows, which reports it.
fn await_connection(producer: &RdFutureProducer, timeout: Duration) {
    let mut metadata: *const rdsys::rd_kafka_metadata_t = std::ptr::null();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the client outlives the call; `all_topics` 0 with no topic asks for the brokers
    // only; the metadata librdkafka returns is destroyed here, once.
    unsafe {
        let error = rdsys::rd_kafka_metadata(
            producer.client().native_ptr(),
            0,
            std::ptr::null_mut(),
            &mut metadata,
            timeout_ms,
        );
        if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && !metadata.is_null() {
            rdsys::rd_kafka_metadata_destroy(metadata);
        } else {
            tracing::debug!(?error, "the broker-only metadata request before init_transactions failed");
        }
    }
}

pub(super) fn delivery_error(
    error: &RdError,
    producer: &Weak<RdFutureProducer>,
    transactional: bool,
    context: String,
) -> KafkaError {
    let fatal = producer.upgrade().and_then(|p| p.client().fatal_error());
    let mut kind = classify(error, fatal.as_ref().map(|(code, _)| *code));
    // Inside a transaction, any failed delivery dooms it: abort, unless the producer is done for.
    if transactional && matches!(kind, KafkaErrorKind::Retriable | KafkaErrorKind::Other) {
        kind = KafkaErrorKind::Abortable;
    }
    rd_error_as(kind, "send", error, fatal).with_context(context)
}

/// How long a purged delivery of a transaction waits for the refusal that may have purged it
/// to be recorded ([`TxnRefusals::settle`]): only a purged delivery that someone awaits, which
/// fails its transaction anyway, ever waits, and a refusal's line is recorded within
/// microseconds of the report.
const PURGE_CAUSE_WAIT: Duration = Duration::from_millis(500);

/// `error` of a transactional producer `client`, unless it is what librdkafka made of the
/// broker's refusal to add a partition of the transaction (see [`TxnRefusals`]): a delivery
/// purged from the queue, a record refused while the transaction awaits its abort, an abortable
/// `send_offsets_to_transaction` or `commit_transaction`. Then it is that refusal, named: kind
/// `Authorization`, the refused topic, the missing Write (issue 34). A delivery's own
/// authorization error (Write and Describe both missing: the record fails at its topic's
/// metadata, never reaching the transaction) names its topic already and stays.
fn name_refused_write(error: KafkaError, refusals: &TxnRefusals, client: &str) -> KafkaError {
    let consequence = match error.kind() {
        KafkaErrorKind::Abortable | KafkaErrorKind::Retriable | KafkaErrorKind::Other => true,
        KafkaErrorKind::Authorization => {
            error.operation() != "send" && error.code() == Some(Code::TopicAuthorizationFailed as i32)
        }
        _ => false,
    };
    if !consequence {
        return error;
    }
    match refusals.error(error.operation(), client) {
        Some(refused) => {
            tracing::debug!(%error, %refused, "a consequence of the broker's refusal to add a partition to the transaction");
            refused
        }
        None => error,
    }
}

/// Where a record goes, for an error's context: `<client>, <topic>[/<partition>]`.
struct Destination {
    client: Arc<str>,
    topic: Option<String>,
    partition: Option<i32>,
}

impl Destination {
    fn with_topic(&self, topic: &str) -> String {
        match self.partition {
            Some(p) => format!("{}, {topic}/{p}", self.client),
            None => format!("{}, {topic}", self.client),
        }
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.with_topic(self.topic.as_deref().unwrap_or_default()))
    }
}

impl Drop for RdProducer {
    fn drop(&mut self) {
        if let Some(producer) = lock(&self.producer).take() {
            drop_off_runtime(producer);
        }
    }
}

#[async_trait]
impl Producer for RdProducer {
    fn transactional_id(&self) -> Option<&str> {
        self.transactional_id.as_deref()
    }

    async fn init_transactions(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("init_transactions", move |p| {
            // A new client knows no usable broker until its first connection is up; an
            // init_transactions called before that finds no broker to ask for the coordinator
            // and librdkafka retries on a 500 ms timer (half of the fences of a task start
            // waited for it). A broker-only metadata request waits for that connection, and
            // only for it.
            await_connection(p, timeout);
            p.init_transactions(timeout)
        })
        .await
    }

    async fn begin_transaction(&self) -> KafkaResult<()> {
        // Local state change only: no broker round trip, nothing blocks.
        let producer = self.handle("begin_transaction")?;
        // The partitions refused to the transaction before (aborted by now) are not this one's.
        self.txn_refusals.clear();
        producer.begin_transaction().map_err(|e| {
            rd_error("begin_transaction", &e, producer.client().fatal_error()).with_context(&*self.context)
        })
    }

    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture> {
        let producer = self.handle("send")?;
        // The error context (`<client>, <topic>[/<partition>]`) is built only when an error
        // needs it: formatting it per record was a measurable share of the hot path.
        let destination = Destination { client: self.context.clone(), topic: None, partition: record.partition };
        let headers = (!record.headers.is_empty()).then(|| {
            record.headers.iter().fold(OwnedHeaders::new_with_capacity(record.headers.len()), |headers, h| {
                headers.insert(RdHeader { key: &h.key, value: h.value.as_deref() })
            })
        });
        // Read the clock only once librdkafka's queue is full (not per record).
        let mut give_up: Option<Instant> = None;
        let (reported, delivery) = tokio::sync::oneshot::channel::<DeliveryOutcome>();
        let mut rd = BaseRecord::<[u8], [u8], _>::with_opaque_to(&record.topic, Box::new(reported));
        if let Some(key) = &record.key {
            rd = rd.key(&key[..]);
        }
        if let Some(value) = &record.value {
            rd = rd.payload(&value[..]);
        }
        if let Some(partition) = record.partition {
            rd = rd.partition(partition);
        }
        if let Some(timestamp) = record.timestamp_ms {
            rd = rd.timestamp(timestamp);
        }
        if let Some(headers) = headers {
            rd = rd.headers(headers);
        }
        loop {
            rd = match producer.send(rd) {
                Ok(()) => break,
                Err((RdError::MessageProduction(Code::QueueFull), back))
                    if Instant::now() < *give_up.get_or_insert_with(|| Instant::now() + self.timeout) =>
                {
                    back
                }
                Err((e, _)) => {
                    let error = rd_error("send", &e, producer.client().fatal_error())
                        .with_context(destination.with_topic(&record.topic));
                    return Err(if self.transactional_id.is_some() {
                        name_refused_write(error, &self.txn_refusals, &self.context)
                    } else {
                        error
                    });
                }
            };
            // librdkafka's queue is full: its own thread drains it as the broker acknowledges.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let weak = Arc::downgrade(&producer);
        let refusal = self.refusal.clone();
        let txn_refusals = self.txn_refusals.clone();
        let context = Destination { topic: Some(record.topic), ..destination };
        drop(producer);
        let transactional = self.transactional_id.is_some();
        let mut closed = self.closed.subscribe();
        Ok(async move {
            let refused = refusal.wait();
            let outcome = tokio::select! {
                biased;
                outcome = delivery => Some(outcome),
                _ = closed.wait_for(|closed| *closed) => None,
                // librdkafka would hold the record until its message timeout.
                refused = refused => return Err(refused.with_context(context.to_string())),
            };
            match outcome {
                Some(Ok(Ok((partition, offset)))) => {
                    refusal.mark_connected();
                    Ok(Delivered { partition, offset })
                }
                Some(Ok(Err(error))) => {
                    let purged = matches!(error.rdkafka_error_code(), Some(Code::PurgeQueue | Code::PurgeInflight));
                    let error = delivery_error(&error, &weak, transactional, context.to_string());
                    if !transactional {
                        return Err(error);
                    }
                    if purged {
                        // Purged: perhaps by a refusal whose log line another thread is recording.
                        txn_refusals.settle(PURGE_CAUSE_WAIT).await;
                    }
                    Err(name_refused_write(error, &txn_refusals, &context.client))
                }
                Some(Err(_)) | None => Err(KafkaError::new(
                    KafkaErrorKind::Fatal,
                    "send",
                    "the producer was closed before the broker confirmed the record",
                )
                .with_context(context.to_string())),
            }
        }
        .boxed())
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()> {
        let native = group.native.clone().ok_or_else(|| {
            KafkaError::new(
                KafkaErrorKind::Other,
                "send_offsets_to_transaction",
                "group metadata without librdkafka's handle: it must come from an rdkafka consumer",
            )
            .with_context(format!("{}, group {}", self.context, group.group_id))
        })?;
        if !native.as_ref().is::<ConsumerGroupMetadata>() {
            return Err(KafkaError::new(
                KafkaErrorKind::Other,
                "send_offsets_to_transaction",
                "group metadata of another Kafka adapter",
            )
            .with_context(format!("{}, group {}", self.context, group.group_id)));
        }
        let mut tpl = TopicPartitionList::new();
        for (partition, offset) in offsets {
            tpl.add_partition_offset(&partition.topic, partition.partition, Offset::Offset(*offset))
                .map_err(|e| rd_error("send_offsets_to_transaction", &e, None).with_context(partition.to_string()))?;
        }
        let timeout = self.timeout;
        self.transactional("send_offsets_to_transaction", move |p| {
            let metadata = native.as_ref().downcast_ref::<ConsumerGroupMetadata>().expect("checked above");
            p.send_offsets_to_transaction(&tpl, metadata, timeout)
        })
        .await
    }

    async fn commit_transaction(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("commit_transaction", move |p| p.commit_transaction(timeout)).await
    }

    async fn abort_transaction(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("abort_transaction", move |p| p.abort_transaction(timeout)).await
    }

    /// One `rd_kafka_flush` with the whole timeout: while it runs, librdkafka sends what it holds
    /// back for batching (`linger.ms`, 5 ms by default) at once, and it returns when every
    /// delivery report has been served (by this producer's delivery thread, or by the flush
    /// itself: in librdkafka's callback mode it serves the queue while it waits). rdkafka's `flush`
    /// instead loops on a zero-timeout flush, which leaves the linger in place: a transaction's
    /// commit waited it out every time.
    async fn flush(&self) -> KafkaResult<()> {
        let timeout_ms = i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX);
        // Not a transactional call: it runs beside one (the engine flushes while the offsets are
        // added to the transaction), so it does not queue behind `in_call`.
        self.blocking("flush", self.handle("flush")?, move |p| {
            // SAFETY: the client outlives the call (the handle holds it).
            let code = unsafe { rdsys::rd_kafka_flush(p.client().native_ptr(), timeout_ms) };
            match Code::from(code) {
                Code::NoError => Ok(()),
                error => Err(RdError::Flush(error)),
            }
        })
        .await
    }

    async fn close(&self) {
        let producer = lock(&self.producer).take();
        if let Some(producer) = producer {
            // Dropping purges what is unsent (failing its deliveries) and joins librdkafka.
            let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
        }
        self.closed.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34: what librdkafka makes of a partition refused to the transaction (a purged
    /// delivery, an abortable commit) becomes the named refusal; a delivery's own authorization
    /// error, a fence, and anything while nothing was refused stay as they are.
    #[test]
    fn consequences_of_a_refused_partition_name_it() {
        let client = "transactional id app-0";
        let purged = || {
            KafkaError::new(KafkaErrorKind::Abortable, "send", "Message production error: PurgeQueue")
                .with_context(format!("{client}, app-out"))
        };
        let refusals = TxnRefusals::default();
        assert_eq!(name_refused_write(purged(), &refusals, client), purged(), "nothing refused: unchanged");

        refusals.record(
            "[thrd:main]: sasl_ssl://127.0.0.1:9094/1: Failed to add partition \"app-changelog\" [2] to \
             transaction: Broker: Topic authorization failed",
        );
        let named = name_refused_write(purged(), &refusals, client);
        assert_eq!(named.kind(), KafkaErrorKind::Authorization, "{named}");
        assert_eq!(named.operation(), "send");
        assert_eq!(
            named.context(),
            Some("transactional id app-0, app-changelog"),
            "the refused topic, not the purged one"
        );
        assert!(named.to_string().contains("Write on the topic is missing"), "{named}");

        let commit = KafkaError::new(KafkaErrorKind::Authorization, "commit_transaction", "Failed to add partition(s)")
            .with_code(29)
            .with_context(client);
        let named = name_refused_write(commit, &refusals, client);
        assert_eq!(
            (named.operation(), named.context()),
            ("commit_transaction", Some("transactional id app-0, app-changelog"))
        );

        // Write and Describe both missing: the record's own error names its topic already.
        let own = KafkaError::new(KafkaErrorKind::Authorization, "send", "TopicAuthorizationFailed")
            .with_code(29)
            .with_context(format!("{client}, app-out"));
        assert_eq!(name_refused_write(own.clone(), &refusals, client), own);
        let fenced = KafkaError::new(KafkaErrorKind::Fenced, "send", "fenced");
        assert_eq!(name_refused_write(fenced.clone(), &refusals, client), fenced);
    }
}
