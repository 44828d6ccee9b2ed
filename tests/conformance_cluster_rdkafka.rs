//! The conformance suite's cluster scenarios (leaders and coordinators moving, brokers killed
//! and frozen) against a three-broker Apache Kafka through the librdkafka adapter: the same
//! verdicts the simulated cluster gives with `--brokers 3`. Needs `--features rdkafka`,
//! `KAFKA_CLUSTER_BOOTSTRAP` and `KAFKA_CLUSTER_COMMAND` (`scripts/kafka start --brokers 3`
//! prints both; `scripts/test` starts the cluster and sets them).

#![cfg(all(feature = "rdkafka", not(madsim)))]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::TopicPartition;
use flechtwerk::testing::conformance::{cluster_scenarios, report, run_cluster, ClusterControl, Env};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The cluster of `scripts/kafka start --brokers 3`: brokers 1 to 3, four partitions per
/// coordinator topic, faults and moves through its command.
struct ScriptedCluster {
    command: String,
    metadata: Arc<BaseConsumer>,
}

impl ScriptedCluster {
    /// Runs `KAFKA_CLUSTER_COMMAND args` to completion; a failure fails the test (a fault that
    /// did not happen would make a verdict meaningless).
    async fn run(&self, args: Vec<String>) {
        let command = self.command.clone();
        let status =
            tokio::task::spawn_blocking(move || Command::new(&command).args(&args).status().map(|s| (s, args)))
                .await
                .expect("the command's thread");
        match status {
            Ok((status, _)) if status.success() => {}
            Ok((status, args)) => panic!("{} {args:?} failed: {status}", self.command),
            Err(error) => panic!("running {}: {error}", self.command),
        }
    }
}

#[async_trait]
impl ClusterControl for ScriptedCluster {
    fn brokers(&self) -> Vec<i32> {
        vec![1, 2, 3]
    }

    fn coordinator_partitions(&self) -> i32 {
        // offsets.topic.num.partitions and transaction.state.log.num.partitions of scripts/kafka
        4
    }

    async fn leader(&self, partition: &TopicPartition) -> Option<i32> {
        let (metadata, topic, number) = (self.metadata.clone(), partition.topic.clone(), partition.partition);
        tokio::task::spawn_blocking(move || {
            let fetched = metadata.fetch_metadata(Some(&topic), Duration::from_secs(5)).ok()?;
            let leader = fetched.topics().first()?.partitions().iter().find(|p| p.id() == number)?.leader();
            (leader >= 0).then_some(leader)
        })
        .await
        .ok()
        .flatten()
    }

    async fn move_leader(&self, partition: &TopicPartition, to: i32) {
        let args = vec!["move-leader".into(), partition.topic.clone(), partition.partition.to_string(), to.to_string()];
        self.run(args).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while self.leader(partition).await != Some(to) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn kill(&self, broker: i32) {
        self.run(vec!["broker".into(), broker.to_string(), "kill".into()]).await;
    }

    async fn start(&self, broker: i32) {
        self.run(vec!["broker".into(), broker.to_string(), "start".into()]).await;
    }

    async fn pause(&self, broker: i32) {
        self.run(vec!["broker".into(), broker.to_string(), "pause".into()]).await;
    }

    async fn resume(&self, broker: i32) {
        self.run(vec!["broker".into(), broker.to_string(), "resume".into()]).await;
    }
}

fn required(name: &str) -> String {
    let value = std::env::var(name).unwrap_or_default();
    assert!(
        !value.is_empty(),
        "{name} is not set: run this test through scripts/test, or start the cluster with \
         `scripts/kafka start --brokers 3` and export the KAFKA_CLUSTER_BOOTSTRAP and \
         KAFKA_CLUSTER_COMMAND it prints"
    );
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scenarios_pass_against_three_brokers() {
    let bootstrap = required("KAFKA_CLUSTER_BOOTSTRAP");
    let command = required("KAFKA_CLUSTER_COMMAND");
    let metadata: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .expect("a metadata client");
    let cluster = ScriptedCluster { command, metadata: Arc::new(metadata) };
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    let prefix = format!("cluster-{}-{nanos:x}", std::process::id());
    let env = Env {
        replication_factor: 3,
        group_settle_max: Duration::from_secs(90),
        read_max: Duration::from_secs(60),
        ..Env::new(&prefix)
    }
    .with_cluster(Arc::new(cluster));
    let kafka = RdKafka::new(bootstrap.clone());
    let verdicts = run_cluster(&kafka, &env).await;

    let failures = report(&cluster_scenarios(), &verdicts);
    assert_eq!(verdicts.len(), cluster_scenarios().len(), "every scenario ran");
    assert!(
        failures.is_empty(),
        "{} of {} cluster scenarios failed against {bootstrap} (prefix {prefix}):\n  {}",
        failures.len(),
        verdicts.len(),
        failures.join("\n  ")
    );
}
