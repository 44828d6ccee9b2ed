//! Engine acceptance scenarios on the in-process simulated cluster (no broker needed). The list
//! both backends run is written once in `tests/common/engine_tests.rs` (the same tests run
//! against a real broker in `tests/engine_rdkafka.rs`); below it, the tests that need the
//! simulated cluster's fault plan or a local store directory.

mod common;

use std::sync::Arc;

use common::Harness;
use flechtwerk::Producers;
use std::time::Duration;

use flechtwerk_sim::cluster::{BrokerConfig, FaultPlan, LocalCluster, MarkerFaults};

fn harness(test: &str) -> Harness {
    // RUST_LOG=debug shows the engine's logs.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    Harness::new(Arc::new(LocalCluster::new()), format!("local-{test}"), 1)
}

// The scenarios both backends run (`tests/common/engine_tests.rs`).
engine_tests!(harness);

#[tokio::test]
async fn trx_31_handover_while_the_changelog_marker_is_late() {
    let plan = FaultPlan::new();
    let cluster = LocalCluster::with_config(BrokerConfig::default(), Some(plan.clone()));
    let h = Harness::new(Arc::new(cluster), "local-trx31", 1);
    common::handover_while_the_changelog_marker_is_late(&h, |late| {
        plan.update(|f| {
            f.markers = if late {
                MarkerFaults {
                    delay: 1.0,
                    delay_min: Duration::from_secs(8),
                    delay_max: Duration::from_secs(9),
                    only_targets_containing: Some("-changelog/".to_owned()),
                    ..MarkerFaults::default()
                }
            } else {
                MarkerFaults::default()
            }
        })
    })
    .await;
}

/// STG-42, STO-05: a stage that never sets state creates no store file: with RocksDB stores in a
/// fresh directory, a stateless run leaves the directory without any database.
#[cfg(all(feature = "rocksdb", not(madsim)))]
#[tokio::test]
async fn stg_42_a_stateless_stage_opens_no_store() {
    use common::Probe;
    use flechtwerk::stage::transformer;
    use flechtwerk::state::RocksDbStores;
    use flechtwerk::{Flechtwerk, Message};

    let h = harness("stg42");
    let input = h.topic("input", 2, false).await;
    let output = h.topic("output", 2, false).await;
    let root = std::env::temp_dir().join(format!("flechtwerk-stg42-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    h.produce(&input, &[(Some(0), "a", Some(b"{}")), (Some(1), "b", Some(b"{}"))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).transform(move |msg, _state, o| {
        o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
        Ok(())
    });
    let app = Flechtwerk::builder()
        .application_id(h.name("stg42"))
        .client_id("pod-0")
        .kafka(h.kafka.clone())
        .replication_factor(1)
        .session_timeout(Duration::from_secs(6))
        .observer(Arc::new(Probe::default()))
        .state_stores(Arc::new(RocksDbStores::new(&root)))
        .build(stage)
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        app.run_until(async {
            let _ = stopped.await;
        })
        .await
    });
    h.read_until(&output, |r| r.len() >= 2).await;
    // While the tasks live (a stop wipes whatever they created).
    let created: Vec<_> = walk(&root);
    let _ = stop.send(());
    run.await.unwrap().unwrap();
    assert!(created.iter().all(|p| p.is_dir()), "a stateless stage created files: {created:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(all(feature = "rocksdb", not(madsim)))]
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            found.extend(walk(&path));
            found.push(path);
        }
    }
    found
}

/// TRX-43: in the per-instance shape nothing fences the previous owner's producer by id; the
/// new owner's restore reads to the changelog's high watermark, so it waits for the late marker
/// of the previous owner's last commit instead of stopping in front of it.
#[tokio::test]
async fn trx_43_per_instance_handover_while_the_changelog_marker_is_late() {
    let plan = FaultPlan::new();
    let cluster = LocalCluster::with_config(BrokerConfig::default(), Some(plan.clone()));
    let h = Harness::new(Arc::new(cluster), "local-eos2-trx31", 1).with_producers(Producers::PerInstance);
    common::handover_while_the_changelog_marker_is_late(&h, |late| {
        plan.update(|f| {
            f.markers = if late {
                MarkerFaults {
                    delay: 1.0,
                    delay_min: Duration::from_secs(8),
                    delay_max: Duration::from_secs(9),
                    only_targets_containing: Some("-changelog/".to_owned()),
                    ..MarkerFaults::default()
                }
            } else {
                MarkerFaults::default()
            }
        })
    })
    .await;
}
