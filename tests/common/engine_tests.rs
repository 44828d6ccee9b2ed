//! The engine's acceptance tests, written once for every backend: `engine_tests!(harness)` in a
//! test binary expands to one test per scenario of `tests/common`, each on `harness("<name>")`,
//! the binary's constructor of a [`Harness`](super::Harness) on its cluster
//! (`tests/engine_local.rs`: the in-process simulated cluster; `tests/engine_rdkafka.rs`: a
//! broker through librdkafka). A test for one backend only stays in its binary.
//!
//! The names pin behaviour IDs (`trx_45_...` pins TRX-45; docs/behaviours.md): keep a test's name
//! when changing it. `scripts/behaviour-index` lists each test under every binary that expands
//! the list.

/// One `#[tokio::test]` per scenario, on the runtime the tokens after `harness` ask for (none:
/// tokio's default for tests; `flavor = "multi_thread", worker_threads = 2` for the broker's
/// binary).
#[macro_export]
macro_rules! engine_tests {
    ($harness:ident $(, $($runtime:tt)+)?) => {
        #[tokio::test($($($runtime)+)?)]
        async fn it_eos_1_commit_makes_all_three_sides_visible() {
            common::eos_commit_makes_all_three_sides_visible(&$harness("eos1")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_eos_2_failed_batch_makes_nothing_visible() {
            common::eos_failed_batch_makes_nothing_visible(&$harness("eos2")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_eos_2_failure_after_begin_aborts_at_once() {
            common::failure_after_begin_aborts_at_once(&$harness("eos2b")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn shutdown_mid_transaction_aborts() {
            common::shutdown_mid_transaction_aborts(&$harness("stopmid")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn life_22_dropped_run_future_cleans_up() {
            common::dropped_run_future_cleans_up(&$harness("dropped")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_inv_1_skipped_offset_commits() {
            common::invalid_skipped_offset_commits(&$harness("inv1")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_cfg_1_bootstrap_across_topics() {
            common::config_bootstrap_across_topics(&$harness("cfg1")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_cfg_2_join_and_live_update() {
            common::config_join_and_live_update(&$harness("cfg2")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_lb_3_two_instances_hand_over_state() {
            common::two_instances_hand_over_state(&$harness("lb3")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn sto_05_07_state_beyond_the_store_cache() {
            common::state_beyond_the_store_cache(&$harness("cache")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_02_every_poll_its_own_batch_as_in_python() {
            common::batches_gather_polls_while_a_commit_waits(&$harness("onepoll").with_batches(5, 5)).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_45_batches_gather_polls_while_a_commit_waits() {
            common::batches_gather_polls_while_a_commit_waits(&$harness("gather").with_batches(5, 20)).await;
        }

        /// TRX-44: the per-instance shape gathers and observes its batches the same way.
        #[tokio::test($($($runtime)+)?)]
        async fn trx_45_per_instance_batches_gather_polls_while_a_commit_waits() {
            common::batches_gather_polls_while_a_commit_waits(
                &$harness("gather2").with_batches(5, 20).with_producers(flechtwerk::Producers::PerInstance),
            )
            .await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn life_21_trx_45_stop_while_gathering_commits_both_batches() {
            common::stop_while_gathering_commits_the_gathered_batch(&$harness("stopgather").with_batches(5, 40)).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_20_one_state_write_per_key_and_batch() {
            common::one_state_write_per_key_and_batch(&$harness("trx20")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_21_empty_state_deletes_only_what_exists() {
            common::empty_state_deletes_only_what_exists(&$harness("trx21")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_14_default_policy_raises_before_any_transaction() {
            common::default_policy_raises_before_any_transaction(&$harness("trx14")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_cfg_3_missing_config_topic_fails_startup() {
            common::missing_config_topic_fails_startup(&$harness("itcfg")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn life_14_err_05_unequal_input_partition_counts() {
            common::unequal_input_partition_counts_fail_startup(&$harness("life14")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn life_14_err_06_changelog_partition_count_must_match() {
            common::changelog_partition_count_must_match(&$harness("life14")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn sto_03_corrupt_state_crashes_with_a_named_error() {
            common::corrupt_state_crashes_with_a_named_error(&$harness("sto03")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn sto_13_non_utf8_changelog_key_crashes_the_restore() {
            common::non_utf8_changelog_key_crashes_the_restore(&$harness("sto13")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_rst_2_3_4_restore_replays_the_changelog() {
            common::restore_replays_the_changelog(&$harness("itrst")).await;
        }

        // RocksDB stores exist natively only (the simulation's disk is sim/src/harness/disk.rs).
        #[cfg(not(madsim))]
        #[tokio::test($($($runtime)+)?)]
        async fn sto_05_a_restart_reuses_local_state() {
            common::restart_reuses_local_state(&$harness("sto05reuse")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn inv_21_input_metrics_split() {
            common::input_metrics_split(&$harness("inv21")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn trx_23_trx_30_life_04_cfg_17_identities_and_state_per_partition() {
            common::identities_and_state_per_partition(&$harness("trx23")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn stg_03_trait_stage_enriches_configs() {
            common::trait_stage_enriches_configs(&$harness("stg03")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn cfg_30_state_keys_come_from_configs_before_enrichment() {
            common::extractor::state_keys_come_from_configs_before_enrichment(&$harness("cfg30keys")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_10_pages_commit_at_state_boundaries() {
            common::extractor::pages_commit_at_state_boundaries(&$harness("ext10pages")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_14_a_failed_poll_aborts_only_its_open_page() {
            common::extractor::a_failed_poll_aborts_only_its_open_page(&$harness("ext14a")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_14_a_page_used_after_its_failure_is_a_contract_violation() {
            common::extractor::a_page_used_after_its_failure_is_a_contract_violation(&$harness("ext14reuse")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_ext_1_two_extractors_split_and_hand_over() {
            common::extractor::two_extractors_split_and_hand_over(&$harness("itext1")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn it_ext_2_unequal_config_partition_counts_are_refused() {
            common::extractor::unequal_config_partition_counts_are_refused(&$harness("itext2")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn cfg_32_suspended_and_deleted_configs_are_not_polled() {
            common::extractor::suspended_and_deleted_configs_are_not_polled(&$harness("cfg32suspended")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_40_replicas_beyond_the_tokens_are_standbys() {
            common::extractor::replicas_beyond_the_tokens_are_standbys(&$harness("ext40replicas")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_20_a_restart_resumes_from_the_committed_cursor() {
            common::extractor::a_restart_resumes_from_the_committed_cursor(&$harness("ext20a")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_43_a_misaligned_changelog_restores_past_other_tokens_open_pages() {
            common::extractor::a_misaligned_changelog_restores_past_other_tokens_open_pages(&$harness("ext43")).await;
        }

        #[tokio::test($($($runtime)+)?)]
        async fn ext_38_ext_43_a_waiting_restore_lets_the_rebalance_fence_what_it_waits_for() {
            common::extractor::a_waiting_restore_lets_the_rebalance_fence_what_it_waits_for(&$harness("ext38")).await;
        }

        /// TRX-40, TRX-44: the per-instance shape (one producer, one transaction per batch) commits
        /// outputs, changelog and offsets together.
        #[tokio::test($($($runtime)+)?)]
        async fn trx_44_per_instance_commit_makes_all_three_sides_visible() {
            common::eos_commit_makes_all_three_sides_visible(
                &$harness("eos2-eos1").with_producers(flechtwerk::Producers::PerInstance),
            )
            .await;
        }

        /// TRX-42, TRX-43: tasks handed between two per-instance producers (different transactional
        /// ids: nothing fences by id) continue every count from the restored changelog.
        #[tokio::test($($($runtime)+)?)]
        async fn trx_42_trx_43_per_instance_two_instances_hand_over_state() {
            common::two_instances_hand_over_state(
                &$harness("eos2-lb3").with_producers(flechtwerk::Producers::PerInstance),
            )
            .await;
        }

        /// TRX-43: the per-instance restore (to the high watermark) replays the changelog.
        #[tokio::test($($($runtime)+)?)]
        async fn trx_43_per_instance_restore_replays_the_changelog() {
            common::restore_replays_the_changelog(
                &$harness("eos2-rst").with_producers(flechtwerk::Producers::PerInstance),
            )
            .await;
        }
    };
}
