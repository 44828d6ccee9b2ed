//! The counter application the tests run as `app`: its topics and fed inputs, the application,
//! and what a refused run must show (its error, its time, nothing committed).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flechtwerk::kafka::{
    ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, NewTopic, ProducerConfig, ProducerRecord, TopicPartition,
};
use flechtwerk::testing::read_topic;
use flechtwerk::Flechtwerk;
use flechtwerk_sim::stages::counter;

use crate::acls::{transformer_acls, Grant};
use crate::{captured, plaintext, unique, REFUSAL_BOUND};

pub(crate) struct Counter {
    pub(crate) app: String,
    input: String,
    pub(crate) output: String,
    configs: String,
    pub(crate) per_key: BTreeMap<String, i64>,
}

impl Counter {
    fn changelog(&self) -> String {
        format!("{}-changelog", self.app)
    }

    pub(crate) fn acls(&self) -> Vec<Grant> {
        transformer_acls(&self.app, &[&self.input], &[&self.configs], &[&self.output])
    }
}

/// Topics created and inputs fed over PLAINTEXT (as the super user): the application's
/// principal needs none of that.
pub(crate) async fn prepare(what: &str, inputs: usize, keys: usize) -> Counter {
    let app = unique(what);
    let counter = Counter {
        input: format!("{app}-in"),
        output: format!("{app}-out"),
        configs: format!("{app}-configs"),
        app,
        per_key: BTreeMap::new(),
    };
    let kafka = plaintext();
    let admin = kafka.admin().expect("admin");
    for (topic, compact) in [(&counter.input, false), (&counter.output, false), (&counter.configs, true)] {
        let mut spec = NewTopic::new(topic.as_str(), 2).replication(1);
        if compact {
            spec = spec.compacted();
        }
        admin.create_topic(&spec).await.expect("create topic");
    }
    let mut counter = counter;
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{}-feeder", counter.app))).expect("feeder");
    let mut deliveries = Vec::new();
    for i in 0..inputs {
        let key = format!("key-{}", i % keys);
        *counter.per_key.entry(key.clone()).or_default() += 1;
        let record = ProducerRecord::new(&counter.input, key, format!(r#"{{"i":{i}}}"#));
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for delivery in deliveries {
        delivery.await.expect("fed");
    }
    producer.close().await;
    counter
}

pub(crate) fn application(app: &Counter, kafka: Arc<dyn Kafka>) -> Flechtwerk {
    Flechtwerk::builder()
        .application_id(&app.app)
        .client_id("pod-0")
        .kafka(kafka)
        .replication_factor(1)
        .session_timeout(Duration::from_secs(6))
        .build(counter(&app.input, &app.output, Some(&app.configs)))
        .expect("build")
}

/// Runs the application expecting it to fail: its error and how long it took.
pub(crate) async fn run_refused(counter: &Counter, kafka: Arc<dyn Kafka>) -> (flechtwerk::Error, Duration) {
    let app = application(counter, kafka);
    let started = Instant::now();
    let outcome = tokio::time::timeout(REFUSAL_BOUND * 2, app.run()).await;
    let took = started.elapsed();
    match outcome {
        Ok(Err(error)) => (error, took),
        Ok(Ok(never)) => match never {},
        Err(_) => panic!("run() did not end within {:?}: a hang or a retry loop", REFUSAL_BOUND * 2),
    }
}

pub(crate) fn kafka_error(error: &flechtwerk::Error) -> &KafkaError {
    match error {
        flechtwerk::Error::Kafka(e) => e,
        other => panic!("expected a Kafka error, got {other:?}"),
    }
}

/// Nothing of the application committed: no output, no changelog record, no group offset.
pub(crate) async fn nothing_committed(counter: &Counter) {
    let kafka = plaintext();
    let outputs = read_topic(&*kafka, &format!("{}-check", counter.app), &counter.output).await.expect("read");
    assert!(outputs.is_empty(), "outputs committed: {}", outputs.len());
    match read_topic(&*kafka, &format!("{}-check", counter.app), &counter.changelog()).await {
        Ok(changes) => assert!(changes.is_empty(), "changelog records committed: {}", changes.len()),
        Err(e) => assert_eq!(e.kind(), KafkaErrorKind::UnknownTopic, "{e}"),
    }
    let mut group = kafka.consumer(ConsumerConfig::member(format!("{}-check", counter.app), &counter.app)).expect("c");
    let committed = group
        .committed(&[TopicPartition::new(&counter.input, 0), TopicPartition::new(&counter.input, 1)])
        .await
        .expect("committed offsets");
    assert_eq!(committed, vec![None, None], "input offsets committed");
    group.close().await.expect("close");
}

pub(crate) fn report(case: &str, error: &flechtwerk::Error, took: Duration) {
    // Shown with --nocapture (scripts/test prints it): the text a user sees, and the time.
    println!("REFUSED {case} after {:.1} s: {error}", took.as_secs_f64());
    if std::env::var_os("SECURE_TEST_DUMP_LOGS").is_some() {
        let logs = String::from_utf8_lossy(&captured().lock().expect("capture").clone()).into_owned();
        println!("  ({} captured lines)", logs.lines().count());
        for line in logs.lines().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("FAIL")) {
            println!("  {line}");
        }
    }
}
