//! Scenario `late-requests`: transactional requests that reach the broker after their client
//! gave up on them.
//!
//! A Kafka client that gets no response within its request timeout closes the connection and
//! retries on a new one; a request still travelling on the old connection must never be handled
//! after the retry, or a `TxnOffsetCommit` of one transaction lands in the producer's next one
//! and rewinds the group's offsets (seed 62457 of `counter` found exactly that, before the
//! simulated network modelled connections). Each seed runs transactions back to back, each
//! writing one output record `n` and committing input offset `n`, while a share of the
//! producer's `TxnOffsetCommit`, `Produce` and `EndTxn` requests is held past the timeout, and
//! transactions stay open for a while so that late copies arrive in a later one.
//!
//! Properties: after every commit the group's committed offset is that transaction's `n` (never
//! an earlier one); at the end the `read_committed` output is exactly `1..=n`, once each, in
//! order.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{
    Consumer, ConsumerConfig, Kafka, NewTopic, Producer, ProducerConfig, ProducerRecord, Rebalance, TopicPartition,
};
use flechtwerk::testing::read_topic;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::protocol::RequestKind;
use crate::cluster::{Cluster, KafkaClient, RequestFaults};
use crate::runner::{Ctx, Scenario};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "late-requests",
    about: "transactions whose offset commits, produces and EndTxn reach the broker after the client retried them",
    faults: &["kafka-hold-request"],
    run: |ctx| Box::pin(run(ctx)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

const INPUT: &str = "late-input";
const OUTPUT: &str = "late-output";
const GROUP: &str = "late-group";
const TRANSACTIONS: i64 = 12;

async fn run(ctx: Ctx) {
    let cluster = Cluster::start(&ctx);
    // At most 30 %: a dozen holds of one request in a row would exhaust the client's retry budget
    // (the commit outcome is then unknown to it), or outlast the transaction timeout.
    let hold = thread_rng().gen_range(0.05..0.3);
    let held = RequestFaults { hold_past_timeout: hold, delay_max: Duration::from_secs(4), ..RequestFaults::default() };
    ctx.event(format!("late-requests: {TRANSACTIONS} transactions, {:.0}% of their requests held", hold * 100.0));
    let kafka = cluster.kafka();
    let node = Handle::current().create_node().name("producer").ip(cluster.client_ip()).build();
    let faults = cluster.faults().clone();
    let task_ctx = ctx.clone();
    let outcome = node
        .spawn(async move {
            let admin = kafka.admin().map_err(|e| e.to_string())?;
            for topic in [INPUT, OUTPUT] {
                admin.create_topic(&NewTopic::new(topic, 1)).await.map_err(|e| e.to_string())?;
            }
            // Only the producer's transactional requests are held: group membership and reads
            // stay clean, so every verdict is about the late requests.
            faults.update(|f| {
                for kind in [RequestKind::TxnOffsetCommit, RequestKind::Produce, RequestKind::EndTxn] {
                    f.by_kind.insert(kind, held.clone());
                }
            });
            let result = transactions(&kafka, &task_ctx).await;
            faults.update(|f| f.by_kind.clear());
            // Let every held copy arrive before the final checks.
            sleep(Duration::from_secs(15)).await;
            result?;
            check_output(&kafka).await
        })
        .await
        .expect("the producer node is never killed");
    if let Err(violation) = outcome {
        ctx.violation(violation);
    }
}

/// Joins the group as the owner of the input partition and returns the member.
async fn member(kafka: &KafkaClient, tp: &TopicPartition) -> Result<Box<dyn Consumer>, String> {
    let mut member = kafka.consumer(ConsumerConfig::member("member", GROUP)).map_err(|e| e.to_string())?;
    member.subscribe(&[INPUT.to_owned()]).await.map_err(|e| e.to_string())?;
    for _ in 0..300 {
        let polled = member.poll(10, Duration::from_millis(200)).await.map_err(|e| e.to_string())?;
        if polled
            .rebalances
            .iter()
            .any(|r| matches!(r, Rebalance::Assigned { partitions, .. } if partitions.contains(tp)))
        {
            return Ok(member);
        }
    }
    Err("the member was never assigned the input partition".into())
}

async fn transactions(kafka: &KafkaClient, ctx: &Ctx) -> Result<(), String> {
    let tp = TopicPartition::new(INPUT, 0);
    let mut member = member(kafka, &tp).await?;
    let metadata = member.group_metadata().ok_or("an assigned member has no group metadata")?;
    let producer = kafka.producer(ProducerConfig::transactional("producer", "late-txn")).map_err(|e| e.to_string())?;
    producer.init_transactions().await.map_err(|e| e.to_string())?;
    let mut n = 1;
    while n <= TRANSACTIONS {
        match transaction(&*producer, &tp, &metadata, n).await {
            Ok(()) => {
                let committed = member.committed(std::slice::from_ref(&tp)).await.map_err(|e| e.to_string())?;
                if committed != vec![Some(n)] {
                    return Err(format!("after committing transaction {n}, the group's offset is {committed:?}"));
                }
                ctx.event(format!("late-requests: transaction {n} committed"));
                n += 1;
            }
            Err(e) if e.is_fatal() => return Err(format!("transaction {n}: {e}")),
            Err(e) => {
                ctx.event(format!("late-requests: transaction {n} failed ({e}); aborting and retrying"));
                producer.abort_transaction().await.map_err(|e| format!("abort of transaction {n}: {e}"))?;
            }
        }
        sleep(Duration::from_millis(thread_rng().gen_range(0..6_000))).await;
    }
    producer.close().await;
    Ok(())
}

/// One transaction: output `n`, offset `n`, open for a while before the commit.
async fn transaction(
    producer: &dyn Producer,
    tp: &TopicPartition,
    metadata: &flechtwerk::kafka::GroupMetadata,
    n: i64,
) -> Result<(), flechtwerk::kafka::KafkaError> {
    producer.begin_transaction().await?;
    let delivery = producer.send(ProducerRecord::new(OUTPUT, "k", n.to_string().into_bytes())).await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), n)], metadata).await?;
    delivery.await?;
    sleep(Duration::from_millis(thread_rng().gen_range(0..4_000))).await;
    producer.commit_transaction().await
}

async fn check_output(kafka: &KafkaClient) -> Result<(), String> {
    let records = read_topic(kafka, "checker", OUTPUT).await.map_err(|e| e.to_string())?;
    let got: Vec<Option<Bytes>> = records.into_iter().map(|r| r.value).collect();
    let want: Vec<Option<Bytes>> = (1..=TRANSACTIONS).map(|n| Some(Bytes::from(n.to_string()))).collect();
    if got != want {
        return Err(format!("read_committed output {got:?}, expected 1..={TRANSACTIONS} once each"));
    }
    Ok(())
}
