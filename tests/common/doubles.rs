//! Test doubles of the Kafka port that wrap a real adapter (the simulated cluster or
//! librdkafka), so the same scenario runs on both.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flechtwerk::kafka::{
    Admin, Consumer, ConsumerConfig, DeliveryFuture, GroupMetadata, Kafka, KafkaResult, NewTopic, Producer,
    ProducerConfig, ProducerRecord, TopicCreation, TopicPartition,
};
use tokio::sync::watch;

/// Every client config a [`Recording`] Kafka was asked for.
#[derive(Clone, Debug, Default)]
pub struct Clients {
    pub consumers: Vec<ConsumerConfig>,
    pub producers: Vec<ProducerConfig>,
    pub admins: usize,
    /// Topics whose partition count an admin client was asked for, in order.
    pub described: Vec<String>,
    /// Topics an admin client was asked to create, in order.
    pub created: Vec<String>,
}

/// A Kafka that records the configs of the clients it builds (LIFE-04, TRX-30).
pub struct Recording {
    pub inner: Arc<dyn Kafka>,
    pub clients: Arc<Mutex<Clients>>,
}

impl Recording {
    pub fn new(inner: Arc<dyn Kafka>) -> Self {
        Recording { inner, clients: Arc::default() }
    }
}

impl Kafka for Recording {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        self.clients.lock().unwrap().consumers.push(config.clone());
        self.inner.consumer(config)
    }
    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        self.clients.lock().unwrap().producers.push(config.clone());
        self.inner.producer(config)
    }
    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        self.clients.lock().unwrap().admins += 1;
        Ok(Box::new(RecordingAdmin { inner: self.inner.admin()?, clients: self.clients.clone() }))
    }
}

struct RecordingAdmin {
    inner: Box<dyn Admin>,
    clients: Arc<Mutex<Clients>>,
}

#[async_trait]
impl Admin for RecordingAdmin {
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation> {
        self.clients.lock().unwrap().created.push(topic.name.clone());
        self.inner.create_topic(topic).await
    }
    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>> {
        self.clients.lock().unwrap().described.push(topic.to_owned());
        self.inner.partition_count(topic).await
    }
}

/// A Kafka whose producers hold the delivery of every record sent to one topic until released:
/// the record is on the broker, inside the open transaction, but the engine cannot commit.
pub struct Holding {
    inner: Arc<dyn Kafka>,
    topic: String,
    released: watch::Sender<bool>,
}

impl Holding {
    pub fn new(inner: Arc<dyn Kafka>, topic: impl Into<String>) -> Self {
        Holding { inner, topic: topic.into(), released: watch::channel(false).0 }
    }

    /// Lets every held and future delivery through.
    pub fn release(&self) {
        self.released.send_replace(true);
    }
}

impl Kafka for Holding {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        self.inner.consumer(config)
    }
    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        Ok(Box::new(HoldingProducer {
            inner: self.inner.producer(config)?,
            topic: self.topic.clone(),
            released: self.released.subscribe(),
        }))
    }
    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        self.inner.admin()
    }
}

struct HoldingProducer {
    inner: Box<dyn Producer>,
    topic: String,
    released: watch::Receiver<bool>,
}

#[async_trait]
impl Producer for HoldingProducer {
    fn transactional_id(&self) -> Option<&str> {
        self.inner.transactional_id()
    }
    async fn init_transactions(&self) -> KafkaResult<()> {
        self.inner.init_transactions().await
    }
    async fn begin_transaction(&self) -> KafkaResult<()> {
        self.inner.begin_transaction().await
    }
    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture> {
        let held = record.topic == self.topic;
        let delivery = self.inner.send(record).await?;
        if !held {
            return Ok(delivery);
        }
        let mut released = self.released.clone();
        Ok(Box::pin(async move {
            let _ = released.wait_for(|r| *r).await;
            delivery.await
        }))
    }
    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()> {
        self.inner.send_offsets_to_transaction(offsets, group).await
    }
    async fn commit_transaction(&self) -> KafkaResult<()> {
        self.inner.commit_transaction().await
    }
    async fn abort_transaction(&self) -> KafkaResult<()> {
        self.inner.abort_transaction().await
    }
    async fn flush(&self) -> KafkaResult<()> {
        self.inner.flush().await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}
