//! Topic administration.

#[allow(unused_imports)]
use super::*;

pub(super) struct RdAdmin {
    pub(super) admin: Option<Arc<AdminClient<LogContext>>>,
}

impl RdAdmin {
    pub(super) fn admin(&self) -> Arc<AdminClient<LogContext>> {
        self.admin.clone().expect("an admin client is only taken on drop")
    }

    pub(super) async fn metadata(&self, topic: &str, settle: Duration) -> KafkaResult<Option<(u32, bool)>> {
        let admin = self.admin();
        let topic = topic.to_owned();
        blocking("partition_count", move || partition_count(admin.inner(), &topic, settle)).await
    }
}

impl Drop for RdAdmin {
    fn drop(&mut self) {
        if let Some(admin) = self.admin.take() {
            drop_off_runtime(admin);
        }
    }
}

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
        let options =
            AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT)).request_timeout(Some(REQUEST_TIMEOUT));
        let admin = self.admin();
        let results = admin
            .create_topics([&spec], &options)
            .await
            .map_err(|e| rd_error("create_topic", &e, None).with_context(topic.name.clone()))?;
        let outcome = results.into_iter().next().ok_or_else(|| {
            KafkaError::new(KafkaErrorKind::Other, "create_topic", "no result").with_context(topic.name.clone())
        })?;
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
            Err((_, Code::TopicAlreadyExists)) => Ok(TopicCreation::AlreadyExists),
            Err((_, code)) => Err(code_error("create_topic", code, topic.name.clone())),
        }
    }

    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>> {
        Ok(self.metadata(topic, Duration::from_secs(5)).await?.map(|(count, _)| count))
    }
}
