//! The client adapter on the in-process cluster (`LocalCluster`), on paused tokio time: the
//! conformance suite, the producer's transactional state machine, group membership.

use std::collections::BTreeSet;
use std::time::Duration;

use flechtwerk::kafka::{
    ConsumerConfig, Kafka, KafkaErrorKind, NewTopic, ProducerConfig, ProducerRecord, Rebalance, TopicPartition,
};
use flechtwerk::testing::conformance::{run_all, Env};
use flechtwerk_sim::cluster::LocalCluster;

#[tokio::test(start_paused = true)]
async fn conformance_suite_passes_on_the_local_cluster() {
    let cluster = LocalCluster::new();
    // No broker process to restart: the in-process broker's state survives by construction, and
    // nothing is in flight between direct calls, so a restart changes nothing a client can see.
    let env = Env::new("local").with_restart(std::sync::Arc::new(|| Box::pin(async {})));
    let verdicts = run_all(&cluster, &env).await;
    let failed: Vec<String> =
        verdicts.iter().filter_map(|(name, v)| v.as_ref().err().map(|e| format!("{name}: {e}"))).collect();
    assert!(failed.is_empty(), "failed scenarios: {failed:#?}\ntrace:\n{}", cluster.trace().render());
}

#[tokio::test(start_paused = true)]
async fn transactional_misuse_is_refused_client_side() {
    let cluster = LocalCluster::new();
    cluster.admin().unwrap().create_topic(&NewTopic::new("t", 1)).await.unwrap();
    let producer = cluster.producer(ProducerConfig::transactional("p", "txn")).unwrap();
    let fatal = |r: Result<(), flechtwerk::kafka::KafkaError>| r.unwrap_err().kind() == KafkaErrorKind::Fatal;
    assert!(fatal(producer.begin_transaction().await), "begin before init");
    producer.init_transactions().await.unwrap();
    assert!(fatal(producer.init_transactions().await), "init twice");
    assert!(fatal(producer.commit_transaction().await), "commit without begin");
    assert!(fatal(producer.abort_transaction().await), "abort without begin");
    let outside = producer.send(ProducerRecord::new("t", "k", "v")).await;
    assert_eq!(outside.err().map(|e| e.kind()), Some(KafkaErrorKind::Fatal), "send outside a transaction");
    producer.begin_transaction().await.unwrap();
    assert!(fatal(producer.begin_transaction().await), "begin twice");
    let delivered = producer.send(ProducerRecord::new("t", "k", "v")).await.unwrap().await.unwrap();
    assert_eq!((delivered.partition, delivered.offset), (0, 0));
    producer.commit_transaction().await.unwrap();
    let plain = cluster.producer(ProducerConfig::idempotent("plain")).unwrap();
    assert!(fatal(plain.begin_transaction().await), "an idempotent producer has no transactions");
    let missing = producer.send(ProducerRecord::new("nope", "k", "v")).await;
    assert!(missing.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_fenced_producer_fails_its_deliveries_and_every_later_call() {
    let cluster = LocalCluster::new();
    cluster.admin().unwrap().create_topic(&NewTopic::new("t", 1)).await.unwrap();
    let zombie = cluster.producer(ProducerConfig::transactional("zombie", "task")).unwrap();
    zombie.init_transactions().await.unwrap();
    zombie.begin_transaction().await.unwrap();
    let successor = cluster.producer(ProducerConfig::transactional("successor", "task")).unwrap();
    successor.init_transactions().await.unwrap();
    let delivery = zombie.send(ProducerRecord::new("t", "k", "late")).await.unwrap().await;
    assert!(delivery.unwrap_err().is_fenced());
    assert!(zombie.commit_transaction().await.unwrap_err().is_fenced());
    assert!(zombie.begin_transaction().await.unwrap_err().is_fenced());
}

async fn poll_events(
    consumer: &mut dyn flechtwerk::kafka::Consumer,
    held: &mut BTreeSet<TopicPartition>,
) -> Vec<String> {
    let polled = consumer.poll(10, Duration::from_millis(200)).await.unwrap();
    let mut events = Vec::new();
    for event in polled.rebalances {
        match event {
            Rebalance::Revoked { partitions } => {
                events.push(format!("revoked {}", partitions.len()));
                partitions.iter().for_each(|p| {
                    held.remove(p);
                });
            }
            Rebalance::Assigned { partitions, generation } => {
                events.push(format!("assigned {} gen {generation}", partitions.len()));
                held.extend(partitions);
            }
        }
    }
    events
}

#[tokio::test(start_paused = true)]
async fn a_member_that_stops_polling_leaves_and_revokes_before_it_rejoins() {
    let cluster = LocalCluster::new();
    cluster.admin().unwrap().create_topic(&NewTopic::new("in", 4)).await.unwrap();
    let config =
        |name: &str| ConsumerConfig { max_poll_interval: Duration::from_secs(20), ..ConsumerConfig::member(name, "g") };
    let topics = ["in".to_owned()];
    let (mut a, mut b) = (cluster.consumer(config("a")).unwrap(), cluster.consumer(config("b")).unwrap());
    a.subscribe(&topics).await.unwrap();
    b.subscribe(&topics).await.unwrap();
    let (mut held_a, mut held_b) = (BTreeSet::new(), BTreeSet::new());
    for _ in 0..100 {
        poll_events(a.as_mut(), &mut held_a).await;
        poll_events(b.as_mut(), &mut held_b).await;
        if held_a.len() == 2 && held_b.len() == 2 {
            break;
        }
    }
    assert_eq!((held_a.len(), held_b.len()), (2, 2));
    // b stops polling: after max.poll.interval its heartbeat task leaves, and a takes over.
    for _ in 0..200 {
        poll_events(a.as_mut(), &mut held_a).await;
        if held_a.len() == 4 {
            break;
        }
    }
    assert_eq!(held_a.len(), 4, "a took b's partitions");
    let mut events = Vec::new();
    for _ in 0..100 {
        events.extend(poll_events(b.as_mut(), &mut held_b).await);
        poll_events(a.as_mut(), &mut held_a).await;
        if events.iter().any(|e| e.starts_with("assigned")) && held_a.len() + held_b.len() == 4 && held_b.len() == 2 {
            break;
        }
    }
    assert_eq!(events.first().map(String::as_str), Some("revoked 2"), "b first revokes what it lost: {events:?}");
    assert!(held_a.is_disjoint(&held_b), "a {held_a:?} b {held_b:?}");
}
