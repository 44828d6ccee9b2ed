//! Proptest properties over fault schedules, shaped as a user writes them: "for any schedule of
//! rebalances and crash-restarts, every replica's config store equals the config topic's
//! compaction and the stage is exactly-once" (the harness's differential oracle and structural
//! checks, [`Chaos::run_seed`] on a schedule that proptest draws with
//! [`Chaos::schedule_strategy`]). And the same property against a planted stage bug, to show
//! it fails and that proptest shrinks the failing schedule to a small one.
//!
//! Runs only in simulation builds: `RUSTFLAGS="--cfg madsim" cargo test -p flechtwerk-sim --test
//! chaos_properties`. `PROPTEST_CASES=50` runs more schedules. Cost: both tests together 1.5 s
//! in a release build, 20 s in the debug build of `scripts/test` (2 cores, other builds running).

#![cfg(madsim)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::{Event, Message};
use flechtwerk_sim::chaos::{Chaos, Input};
use flechtwerk_sim::harness::faults::FaultSchedule;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};

const AMOUNT: Attribute<i64> = Attribute::new("amount", &INT);
const SUM: Attribute<i64> = Attribute::new("sum", &INT);
const CURRENCY: Attribute<String> = Attribute::optional("currency", &STR);

/// The stage: per account, the running sum of the amounts, with the account's currency from the
/// config topic.
fn running_sum() -> FnTransformer {
    transformer(["amounts"]).config_topics(["accounts"]).transform(|msg, mut state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let sum = state.get(&SUM)?.unwrap_or(0) + amount;
        state.set(&SUM, sum)?;
        let currency = out.configs().get(&msg.key)?.and_then(|c| c.get(&CURRENCY).ok().flatten());
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, sum)?.with(&CURRENCY, currency)?));
        out.set_state(state);
        Ok(())
    })
}

/// The test: two replicas under rebalances and crash-restarts (the `rebalances` profile), a
/// short period and few inputs so that one case costs two short simulations.
fn chaos(stage: impl Fn() -> FnTransformer + Send + Sync + 'static) -> Chaos {
    Chaos::transformer(stage)
        .input("amounts", 4)
        .output("sums", 4)
        .config("accounts", 2)
        .configs((0..10).map(|a| Input::new("accounts", format!("acct-{a}"), r#"{"currency":"EUR"}"#)))
        .inputs(80, |rng, i| {
            Input::new("amounts", format!("acct-{}", rng.below(12)), format!(r#"{{"amount":{}}}"#, i % 7 + 1))
        })
        .profile("rebalances")
        .replicas(2)
        .period(Duration::from_secs(10))
}

/// Few cases for CI (each case: a chaos run and its reference run); a fixed proptest seed, so a
/// CI failure replays locally; no regression files written into the source tree.
fn config(cases: u32) -> Config {
    Config { cases, max_shrink_iters: 64, rng_seed: RngSeed::Fixed(11), failure_persistence: None, ..Config::default() }
}

/// The property: a schedule's run has no violation (oracle, offsets, config stores = compaction).
fn holds(test: &Chaos, schedule: &FaultSchedule) -> Result<(), TestCaseError> {
    let violations = test.run_seed(0, schedule, false);
    prop_assert!(
        violations.is_empty(),
        "{} faults:\n{schedule}\nviolations:\n{}",
        schedule.len(),
        violations.join("\n")
    );
    Ok(())
}

#[test]
fn for_any_schedule_of_rebalances_config_stores_equal_compaction_and_outputs_are_exactly_once() {
    let test = chaos(running_sum);
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(8);
    let mut runner = TestRunner::new(config(cases));
    if let Err(e) = runner.run(&test.schedule_strategy(), |schedule| holds(&test, &schedule)) {
        panic!("{e}");
    }
}

/// Planted bug: the sum lives in the stage's memory instead of its `State`, so a crash-restart
/// or a handover loses it.
fn in_memory_sum() -> FnTransformer {
    let sums: Arc<Mutex<BTreeMap<String, i64>>> = Arc::default();
    transformer(["amounts"]).config_topics(["accounts"]).transform(move |msg, _state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let mut sums = sums.lock().expect("sums lock");
        let sum = sums.entry(msg.key.clone()).or_default();
        *sum += amount;
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, *sum)?));
        Ok(())
    })
}

#[test]
fn the_property_fails_for_a_stage_keeping_its_sum_in_memory_and_shrinks_to_a_small_schedule() {
    let test = chaos(in_memory_sum);
    let mut runner = TestRunner::new(config(4));
    match runner.run(&test.schedule_strategy(), |schedule| holds(&test, &schedule)) {
        Err(TestError::Fail(why, minimal)) => {
            assert!(minimal.len() <= 2, "proptest shrank to {} faults:\n{minimal}\n{why}", minimal.len());
            // The minimal schedule fails when replayed.
            assert!(!test.run_seed(0, &minimal, false).is_empty(), "the minimal schedule passes:\n{minimal}");
            eprintln!("in-memory sum: proptest's minimal schedule ({} faults):\n{minimal}\n{why}", minimal.len());
        }
        other => panic!("the property held for the planted bug: {other:?}"),
    }
}

/// The accounts the histories below write.
fn accounts() -> Vec<String> {
    (0..6).map(|a| format!("acct-{a}")).collect()
}

fn currencies() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![Just("EUR"), Just("USD"), Just("GBP")]
        .prop_map(|c| format!(r#"{{"currency":"{c}"}}"#).into_bytes())
        .boxed()
}

fn sums() -> BoxedStrategy<Vec<u8>> {
    (0i64..1000).prop_map(|s| format!(r#"{{"sum":{s}}}"#).into_bytes()).boxed()
}

/// CFG-01, CFG-12, STO-11 under faults: for any config history (puts in canonical and other
/// spellings, the three deletes), any changelog a previous deployment left and anything the log
/// cleaner made of it, and any schedule of rebalances and crash-restarts: every replica's config
/// store is the compaction of the config topic, and the run restored from the cleaned changelog
/// equals its reference restored from the whole one.
#[test]
fn for_any_config_history_and_any_compaction_of_the_changelog_stores_and_restores_are_exact() {
    use flechtwerk_sim::chaos::compaction::{changelog_history, config_history, Cleaner};
    let test = chaos(running_sum).configs(Vec::new());
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(6);
    let strategy = (
        config_history(&["accounts"], &accounts(), currencies(), 0..30),
        changelog_history(&accounts(), sums(), 0..40),
        Cleaner::strategy(),
        test.schedule_strategy(),
    );
    let mut runner = TestRunner::new(config(cases));
    let outcome = runner.run(&strategy, |(configs, history, cleaner, schedule)| {
        let test = chaos(running_sum).configs(configs).restored_from(history.clone(), cleaner.clean(&history));
        holds(&test, &schedule)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// The restore property can fail: a "cleaner" that drops each key's last write (no log cleaner
/// does) leaves the chaos run a state the reference never had, and the oracle says where.
#[test]
fn a_cleaner_dropping_the_last_write_of_a_key_is_caught_by_the_oracle() {
    use flechtwerk_sim::chaos::compaction::StateWrite;
    let write =
        |key: &str, sum: i64| StateWrite { key: key.into(), value: Some(format!(r#"{{"sum":{sum}}}"#).into_bytes()) };
    let full = vec![write("acct-1", 5), write("acct-2", 7), write("acct-1", 40)];
    let wrong = full[..2].to_vec();
    let violations = chaos(running_sum).restored_from(full, wrong).run_seed(0, &FaultSchedule::none(), false);
    assert!(violations.iter().any(|v| v.contains("acct-1")), "{violations:?}");
}
