//! The chaos harness: replicas of an application under a seeded fault schedule, checked
//! against the simulated broker's truth.
//!
//! - [`faults`]: fault schedules as data, generated from the seed by a profile.
//! - [`replicas`]: replicas under supervisors, and the schedule's executor.
//! - [`directed`]: fault episodes aimed at a moment of a handover, found in the broker's requests.
//! - [`disk`]: task state that survives a node's crash, as a disk does.
//! - [`truth`]: what the broker really holds.
//! - [`mqtt`]: the simulated MQTT broker and the bridge replicas' clients of it, and the checks
//!   of MQTT bridge runs (shared by [`crate::chaos::Chaos::mqtt`] and the `mqtt` scenario).
//!
//! One path for every transformer run: [`crate::chaos::Chaos`] and the `counter` scenario both
//! create their topics with [`setup`], launch replicas with [`replicas::transformer_launch`],
//! run their schedule with [`replicas::Replicas::run_faults`], wait with
//! [`truth::await_quiescence`] and [`replicas::Replicas::await_configs`], and compare config
//! stores with [`truth::config_compaction`] through [`replicas::Replicas::config_mismatches`].

pub mod directed;
pub mod disk;
pub mod faults;
pub mod mqtt;
pub mod replicas;
pub mod truth;

use std::time::Duration;

use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::Cluster;

/// The replicas' group session timeout (fault profiles draw pauses around it).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// The engine's transaction timeout of transformer task producers (some pauses outlast it).
pub const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// The engine's transaction timeout of an MQTT bridge's pages (pauses are drawn around it in
/// bridge runs).
pub const BRIDGE_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(600);
/// Replicas alive at most at once (scale-ups stop there).
pub const REPLICAS_MAX: usize = 4;
/// How long a run gets to commit everything once the faults stop.
pub const QUIESCENCE_MAX: Duration = Duration::from_secs(300);
/// How long the live replicas get to converge on the config topics.
pub const CONFIG_CONVERGENCE_MAX: Duration = Duration::from_secs(60);

/// A topic of the cluster's default replication factor (3, or every broker of a smaller
/// cluster: production's), compacted or not.
pub fn topic(name: impl Into<String>, partitions: u32, compacted: bool) -> NewTopic {
    let new = NewTopic::new(name, partitions);
    if compacted {
        new.compacted()
    } else {
        new
    }
}

/// Creates `topics` in order (each retried until the broker answers: the network is clean
/// during setup), then writes `configs` and waits for each acknowledgement, on a `setup` node
/// that is never killed.
pub async fn setup(cluster: &Cluster, topics: Vec<NewTopic>, configs: Vec<ProducerRecord>) {
    let node = Handle::current().create_node().name("setup").ip(cluster.client_ip()).build();
    let kafka = cluster.kafka();
    node.spawn(async move {
        let admin = kafka.admin().expect("admin");
        for new in topics {
            while admin.create_topic(&new).await.is_err() {
                sleep(Duration::from_millis(100)).await;
            }
        }
        if !configs.is_empty() {
            let producer = kafka.producer(ProducerConfig::idempotent("config-writer")).expect("producer");
            for record in configs {
                let delivery = producer.send(record).await.expect("a calm send");
                delivery.await.expect("configs are written before any fault");
            }
            producer.close().await;
        }
    })
    .await
    .expect("the setup node is never killed");
}
