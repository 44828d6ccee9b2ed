//! Engine acceptance scenarios against a real Kafka-protocol broker through librdkafka: the
//! same list of tests as `tests/engine_local.rs`, written once in `tests/common/engine_tests.rs`
//! (the scenarios themselves are in `tests/common`). Needs `--features rdkafka` and a broker at
//! `KAFKA_BOOTSTRAP` (`scripts/test` starts one).

#![cfg(all(feature = "rdkafka", not(madsim)))]

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::Harness;
use flechtwerk::kafka::rdkafka::RdKafka;

fn harness(test: &str) -> Harness {
    // RUST_LOG=info (or flechtwerk=debug,librdkafka=debug) shows the engine's and librdkafka's logs.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    assert!(
        !bootstrap.is_empty(),
        "KAFKA_BOOTSTRAP is not set: run through scripts/test, or `scripts/kafka start` and export what it prints"
    );
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    Harness::new(Arc::new(RdKafka::new(bootstrap)), format!("engine-{test}-{nanos:x}"), 1)
}

// The scenarios both backends run (`tests/common/engine_tests.rs`).
engine_tests!(harness, flavor = "multi_thread", worker_threads = 2);

/// The client ids of `group`'s members as the broker lists them (DescribeGroups).
async fn group_members(group: String) -> Vec<String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    tokio::task::spawn_blocking(move || {
        let client: BaseConsumer =
            rdkafka::ClientConfig::new().set("bootstrap.servers", &bootstrap).create().expect("a describing client");
        let list = client.fetch_group_list(Some(&group), Duration::from_secs(10)).expect("DescribeGroups");
        list.groups().iter().flat_map(|g| g.members()).map(|m| m.client_id().to_owned()).collect()
    })
    .await
    .expect("the describing thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn life_21_a_clean_stop_leaves_the_group() {
    common::a_clean_stop_leaves_the_group(&harness("life21"), group_members).await;
}
