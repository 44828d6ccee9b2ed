//! Topic administration.

use async_trait::async_trait;
use flechtwerk::kafka::{Admin, KafkaResult, NewTopic, TopicCreation};

use super::{unexpected, Conn, API_TIMEOUT};
use crate::cluster::protocol::{Reply, Request};

/// The admin client.
pub(crate) struct SimAdmin {
    conn: Conn,
}

impl SimAdmin {
    pub(crate) fn new(conn: Conn) -> Self {
        SimAdmin { conn }
    }
}

/// The partition count of `topic` through `conn` (shared with consumers and producers).
pub(crate) async fn partition_count(conn: &Conn, operation: &'static str, topic: &str) -> KafkaResult<Option<u32>> {
    let request = Request::Metadata { topic: topic.to_owned() };
    match conn.call(operation, topic, request, API_TIMEOUT).await? {
        Reply::Metadata(leaders) => Ok(leaders.map(|l| l.len() as u32)),
        other => Err(unexpected(operation, &other)),
    }
}

#[async_trait]
impl Admin for SimAdmin {
    /// Like Kafka's admin client, a retry after a lost response reports `AlreadyExists`.
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation> {
        let request = Request::CreateTopic(topic.clone());
        match self.conn.call("create_topic", &topic.name, request, API_TIMEOUT).await? {
            Reply::TopicCreated(creation) => Ok(creation),
            other => Err(unexpected("create_topic", &other)),
        }
    }

    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>> {
        partition_count(&self.conn, "partition_count", topic).await
    }
}
