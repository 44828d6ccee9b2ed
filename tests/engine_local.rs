//! Engine acceptance scenarios on the in-process simulated cluster (no broker needed). The same
//! scenarios run against a real broker in `tests/engine_rdkafka.rs`.

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

#[tokio::test]
async fn it_eos_1_commit_makes_all_three_sides_visible() {
    common::eos_commit_makes_all_three_sides_visible(&harness("eos1")).await;
}

#[tokio::test]
async fn it_eos_2_failed_batch_makes_nothing_visible() {
    common::eos_failed_batch_makes_nothing_visible(&harness("eos2")).await;
}

#[tokio::test]
async fn it_eos_2_failure_after_begin_aborts_at_once() {
    common::failure_after_begin_aborts_at_once(&harness("eos2b")).await;
}

#[tokio::test]
async fn shutdown_mid_transaction_aborts() {
    common::shutdown_mid_transaction_aborts(&harness("stopmid")).await;
}

#[tokio::test]
async fn life_22_dropped_run_future_cleans_up() {
    common::dropped_run_future_cleans_up(&harness("dropped")).await;
}

#[tokio::test]
async fn it_inv_1_skipped_offset_commits() {
    common::invalid_skipped_offset_commits(&harness("inv1")).await;
}

#[tokio::test]
async fn it_cfg_1_bootstrap_across_topics() {
    common::config_bootstrap_across_topics(&harness("cfg1")).await;
}

#[tokio::test]
async fn it_cfg_2_join_and_live_update() {
    common::config_join_and_live_update(&harness("cfg2")).await;
}

#[tokio::test]
async fn it_lb_3_two_instances_hand_over_state() {
    common::two_instances_hand_over_state(&harness("lb3")).await;
}

#[tokio::test]
async fn sto_05_07_state_beyond_the_store_cache() {
    common::state_beyond_the_store_cache(&harness("cache")).await;
}

#[tokio::test]
async fn trx_02_every_poll_its_own_batch_as_in_python() {
    common::batches_gather_polls_while_a_commit_waits(&harness("onepoll").with_batches(5, 5)).await;
}

#[tokio::test]
async fn trx_45_batches_gather_polls_while_a_commit_waits() {
    common::batches_gather_polls_while_a_commit_waits(&harness("gather").with_batches(5, 20)).await;
}

#[tokio::test]
async fn life_21_trx_45_stop_while_gathering_commits_both_batches() {
    common::stop_while_gathering_commits_the_gathered_batch(&harness("stopgather").with_batches(5, 40)).await;
}

#[tokio::test]
async fn trx_20_one_state_write_per_key_and_batch() {
    common::one_state_write_per_key_and_batch(&harness("trx20")).await;
}

#[tokio::test]
async fn trx_21_empty_state_deletes_only_what_exists() {
    common::empty_state_deletes_only_what_exists(&harness("trx21")).await;
}

#[tokio::test]
async fn trx_14_default_policy_raises_before_any_transaction() {
    common::default_policy_raises_before_any_transaction(&harness("trx14")).await;
}

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

#[tokio::test]
async fn it_cfg_3_missing_config_topic_fails_startup() {
    common::missing_config_topic_fails_startup(&harness("itcfg")).await;
}

#[tokio::test]
async fn life_14_err_05_unequal_input_partition_counts() {
    common::unequal_input_partition_counts_fail_startup(&harness("life14")).await;
}

#[tokio::test]
async fn life_14_err_06_changelog_partition_count_must_match() {
    common::changelog_partition_count_must_match(&harness("life14")).await;
}

#[tokio::test]
async fn sto_03_corrupt_state_crashes_with_a_named_error() {
    common::corrupt_state_crashes_with_a_named_error(&harness("sto03")).await;
}

#[tokio::test]
async fn sto_13_non_utf8_changelog_key_crashes_the_restore() {
    common::non_utf8_changelog_key_crashes_the_restore(&harness("sto13")).await;
}

#[tokio::test]
async fn it_rst_2_3_4_restore_replays_the_changelog() {
    common::restore_replays_the_changelog(&harness("itrst")).await;
}

#[tokio::test]
async fn inv_21_input_metrics_split() {
    common::input_metrics_split(&harness("inv21")).await;
}

#[tokio::test]
async fn trx_23_trx_30_life_04_cfg_17_identities_and_state_per_partition() {
    common::identities_and_state_per_partition(&harness("trx23")).await;
}

#[tokio::test]
async fn stg_03_trait_stage_enriches_configs() {
    common::trait_stage_enriches_configs(&harness("stg03")).await;
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

#[tokio::test]
async fn cfg_30_state_keys_come_from_configs_before_enrichment() {
    common::extractor::state_keys_come_from_configs_before_enrichment(&harness("cfg30keys")).await;
}

#[tokio::test]
async fn ext_10_pages_commit_at_state_boundaries() {
    common::extractor::pages_commit_at_state_boundaries(&harness("ext10pages")).await;
}

#[tokio::test]
async fn ext_14_a_failed_poll_aborts_only_its_open_page() {
    common::extractor::a_failed_poll_aborts_only_its_open_page(&harness("ext14a")).await;
}

#[tokio::test]
async fn it_ext_1_two_extractors_split_and_hand_over() {
    common::extractor::two_extractors_split_and_hand_over(&harness("itext1")).await;
}

#[tokio::test]
async fn it_ext_2_unequal_config_partition_counts_are_refused() {
    common::extractor::unequal_config_partition_counts_are_refused(&harness("itext2")).await;
}

#[tokio::test]
async fn cfg_32_suspended_and_deleted_configs_are_not_polled() {
    common::extractor::suspended_and_deleted_configs_are_not_polled(&harness("cfg32suspended")).await;
}

#[tokio::test]
async fn ext_40_replicas_beyond_the_tokens_are_standbys() {
    common::extractor::replicas_beyond_the_tokens_are_standbys(&harness("ext40replicas")).await;
}

#[tokio::test]
async fn ext_20_a_restart_resumes_from_the_committed_cursor() {
    common::extractor::a_restart_resumes_from_the_committed_cursor(&harness("ext20a")).await;
}

#[tokio::test]
async fn ext_43_a_misaligned_changelog_restores_past_other_tokens_open_pages() {
    common::extractor::a_misaligned_changelog_restores_past_other_tokens_open_pages(&harness("ext43")).await;
}

#[tokio::test]
async fn ext_38_ext_43_a_waiting_restore_lets_the_rebalance_fence_what_it_waits_for() {
    common::extractor::a_waiting_restore_lets_the_rebalance_fence_what_it_waits_for(&harness("ext38")).await;
}

/// TRX-40, TRX-44: the per-instance shape (one producer, one transaction per batch) commits
/// outputs, changelog and offsets together.
#[tokio::test]
async fn trx_44_per_instance_commit_makes_all_three_sides_visible() {
    common::eos_commit_makes_all_three_sides_visible(&harness("eos2-eos1").with_producers(Producers::PerInstance))
        .await;
}

/// TRX-42, TRX-43: tasks handed between two per-instance producers (different transactional
/// ids: nothing fences by id) continue every count from the restored changelog.
#[tokio::test]
async fn trx_42_trx_43_per_instance_two_instances_hand_over_state() {
    common::two_instances_hand_over_state(&harness("eos2-lb3").with_producers(Producers::PerInstance)).await;
}

/// TRX-43: the per-instance restore (to the high watermark) replays the changelog.
#[tokio::test]
async fn trx_43_per_instance_restore_replays_the_changelog() {
    common::restore_replays_the_changelog(&harness("eos2-rst").with_producers(Producers::PerInstance)).await;
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
