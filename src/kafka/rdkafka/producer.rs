//! The producer: transactional or idempotent, deliveries as futures that fail instead of
//! hanging.

#[allow(unused_imports)]
use super::*;

pub(super) type RdFutureProducer = FutureProducer<LogContext>;

pub(super) struct RdProducer {
    pub(super) producer: Mutex<Option<Arc<RdFutureProducer>>>,
    pub(super) transactional_id: Option<String>,
    /// `transactional id …` or `client …`, for errors.
    pub(super) context: String,
    /// The transaction timeout: bounds every blocking producer call.
    pub(super) timeout: Duration,
    /// Turns true once the producer is closed: pending delivery futures fail then.
    pub(super) closed: tokio::sync::watch::Sender<bool>,
    /// The client's refusal slot (its context is out of reach inside rdkafka's FutureProducer).
    pub(super) refusal: Arc<Refusal>,
    /// Held by a blocking transactional call until librdkafka returns, even when the caller's
    /// future was dropped: the next call (an abort after a cancelled `send_offsets_to_transaction`,
    /// say) waits for it instead of failing with `_CONFLICT` and leaving the transaction open.
    pub(super) in_call: Arc<tokio::sync::Mutex<()>>,
}

impl RdProducer {
    pub(super) fn handle(&self, operation: &'static str) -> KafkaResult<Arc<RdFutureProducer>> {
        lock(&self.producer).clone().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Fatal, operation, "the producer is closed")
                .with_context(self.context.clone())
        })
    }

    /// Runs a blocking transactional call and classifies its error.
    pub(super) async fn transactional(
        &self,
        operation: &'static str,
        call: impl FnOnce(&RdFutureProducer) -> Result<(), RdError> + Send + 'static,
    ) -> KafkaResult<()> {
        let producer = self.handle(operation)?;
        let context = self.context.clone();
        let refusal = self.refusal.clone();
        let in_call = self.in_call.clone().lock_owned().await;
        blocking_unless_refused(&refusal, operation, move || {
            let _in_call = in_call;
            call(&producer)
                .map_err(|e| rd_error(operation, &e, producer.client().fatal_error()).with_context(context.clone()))
        })
        .await
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
        self.transactional("init_transactions", move |p| p.init_transactions(timeout)).await
    }

    async fn begin_transaction(&self) -> KafkaResult<()> {
        // Local state change only: no broker round trip, nothing blocks.
        let producer = self.handle("begin_transaction")?;
        producer.begin_transaction().map_err(|e| {
            rd_error("begin_transaction", &e, producer.client().fatal_error()).with_context(self.context.clone())
        })
    }

    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture> {
        let producer = self.handle("send")?;
        let destination = match record.partition {
            Some(p) => format!("{}/{p}", record.topic),
            None => record.topic.clone(),
        };
        let context = format!("{}, {destination}", self.context);
        let headers = (!record.headers.is_empty()).then(|| {
            record.headers.iter().fold(OwnedHeaders::new_with_capacity(record.headers.len()), |headers, h| {
                headers.insert(RdHeader { key: &h.key, value: h.value.as_deref() })
            })
        });
        let give_up = Instant::now() + self.timeout;
        let delivery = loop {
            let mut rd = FutureRecord::<[u8], [u8]>::to(&record.topic);
            if let Some(key) = &record.key {
                rd = rd.key(key);
            }
            if let Some(value) = &record.value {
                rd = rd.payload(value);
            }
            if let Some(partition) = record.partition {
                rd = rd.partition(partition);
            }
            if let Some(timestamp) = record.timestamp_ms {
                rd = rd.timestamp(timestamp);
            }
            if let Some(headers) = &headers {
                rd = rd.headers(headers.clone());
            }
            let queue_full = match producer.send_result(rd) {
                Ok(delivery) => break delivery,
                Err((RdError::MessageProduction(Code::QueueFull), _)) if Instant::now() < give_up => true,
                Err((e, _)) => {
                    return Err(rd_error("send", &e, producer.client().fatal_error()).with_context(context));
                }
            };
            debug_assert!(queue_full);
            // librdkafka's queue is full: its own thread drains it as the broker acknowledges.
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let weak = Arc::downgrade(&producer);
        let refusal = self.refusal.clone();
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
                refused = refused => return Err(refused.with_context(context)),
            };
            match outcome {
                Some(Ok(Ok(delivered))) => {
                    refusal.mark_connected();
                    Ok(Delivered { partition: delivered.partition, offset: delivered.offset })
                }
                Some(Ok(Err((error, _message)))) => Err(delivery_error(&error, &weak, transactional, context)),
                Some(Err(_)) | None => Err(KafkaError::new(
                    KafkaErrorKind::Fatal,
                    "send",
                    "the producer was closed before the broker confirmed the record",
                )
                .with_context(context)),
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

    async fn flush(&self) -> KafkaResult<()> {
        let timeout = self.timeout;
        self.transactional("flush", move |p| p.flush(timeout)).await
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
