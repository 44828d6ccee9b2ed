//! The chaos harness as a user meets it: a stage of their own (a running sum per account, joined
//! with the account's config), tested under seeded faults with the differential oracle — and two
//! planted bugs that leak exactly-once, which the harness must catch and shrink.
//!
//! Runs only in simulation builds: `RUSTFLAGS="--cfg madsim" cargo test -p flechtwerk-sim --test
//! chaos_user_stage`. `FLECHTWERK_CHAOS_SEEDS=200` runs more seeds; `FLECHTWERK_CHAOS_SEED=7`
//! replays one with its trace.

#![cfg(madsim)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::wire::decode_value;
use flechtwerk::{Event, Message, Record};
use flechtwerk_sim::chaos::{Chaos, Input, Outcome};
use flechtwerk_sim::harness::faults::{Fault, FaultProfile};

const AMOUNT: Attribute<i64> = Attribute::new("amount", &INT);
const SUM: Attribute<i64> = Attribute::new("sum", &INT);
const CURRENCY: Attribute<String> = Attribute::optional("currency", &STR);

/// The stage under test: per account, the running sum of the amounts, with the account's
/// currency from the config topic.
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

/// The test a user writes: topics, configs, an input generator, a profile. Nothing to check by
/// hand: the reference run is the oracle.
fn chaos(stage: impl Fn() -> FnTransformer + Send + Sync + 'static) -> Chaos {
    Chaos::transformer(stage)
        .input("amounts", 4)
        .output("sums", 4)
        .config("accounts", 2)
        .configs((0..10).map(|a| Input::new("accounts", format!("acct-{a}"), r#"{"currency":"EUR"}"#)))
        .inputs(200, |rng, i| {
            Input::new("amounts", format!("acct-{}", rng.below(12)), format!(r#"{{"amount":{}}}"#, i % 7 + 1))
        })
        .profile("everything")
        .replicas(3)
}

/// A property of the stage's own logic, which the oracle cannot see (the reference run executes
/// the same code): each account's last sum is the total of its committed amounts.
fn last_sum_is_the_total(outcome: &Outcome) -> Result<(), String> {
    let field = |bytes: Option<&[u8]>, attribute: &Attribute<i64>| -> Result<Option<i64>, String> {
        let map = decode_value(bytes).map_err(|e| e.to_string())?;
        Record::wrap(map).get(attribute).map_err(|e| e.to_string())
    };
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    for input in outcome.inputs.iter().filter(|r| &*r.topic == "amounts") {
        let account = String::from_utf8_lossy(input.key.as_deref().unwrap_or_default()).into_owned();
        *totals.entry(account).or_default() += field(input.value.as_deref(), &AMOUNT)?.unwrap_or(0);
    }
    for (account, total) in totals {
        let sums = outcome.outputs.get(&("sums".to_owned(), account.clone()));
        let last = match sums.and_then(|values| values.last()) {
            Some(value) => field(value.as_deref(), &SUM)?,
            None => None,
        };
        if last != Some(total) {
            return Err(format!("{account}: the last sum is {last:?}, its amounts add up to {total}"));
        }
    }
    Ok(())
}

#[test]
fn running_sums_are_exactly_once_under_chaos() {
    chaos(running_sum).check(last_sum_is_the_total).seeds(0..12).run();
}

/// Planted bug 3, a plain logic bug: an odd amount's output carries the sum from *before* the
/// update (the state is right). The reference run has the same bug, so the oracle passes every
/// seed; only a property of the stage's own (`.check`) catches it, with no fault at all.
fn stale_sum_on_odd_amounts() -> FnTransformer {
    transformer(["amounts"]).config_topics(["accounts"]).transform(|msg, mut state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let before = state.get(&SUM)?.unwrap_or(0);
        let sum = before + amount;
        state.set(&SUM, sum)?;
        let shown = if amount % 2 == 1 { before } else { sum };
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, shown)?));
        out.set_state(state);
        Ok(())
    })
}

const PROCESSED_AT: Attribute<i64> = Attribute::new("processed_at", &INT);

/// Planted bug 4: the stage stamps its processing time into each output, so two runs of the same
/// inputs never agree, faults or not.
fn stamped_sum() -> FnTransformer {
    transformer(["amounts"]).config_topics(["accounts"]).transform(|msg, mut state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let sum = state.get(&SUM)?.unwrap_or(0) + amount;
        state.set(&SUM, sum)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, sum)?.with(&PROCESSED_AT, now)?));
        out.set_state(state);
        Ok(())
    })
}

/// Drops the `processed_at` field of an output value.
fn without_processed_at(_topic: &str, value: Option<bytes::Bytes>) -> Option<bytes::Bytes> {
    use flechtwerk::json::{self, Value};
    let value = value?;
    let Some(Ok(Value::Object(mut map))) = std::str::from_utf8(&value).ok().map(json::parse) else {
        return Some(value);
    };
    map.remove("processed_at");
    json::to_canonical_bytes(&Value::Object(map)).ok().map(Into::into)
}

#[test]
fn a_stage_stamping_its_processing_time_is_named_non_deterministic() {
    let calm = chaos(stamped_sum).profile("calm").seeds(0..1);
    let failure = calm.try_run().expect_err("two runs never agree on a clock");
    assert!(failure.shrunk.is_empty(), "{failure}");
    assert!(failure.to_string().contains("the stage itself is not deterministic"), "{failure}");
    assert!(failure.violations.iter().any(|v| v.contains("(fields that differ: processed_at)")), "{failure}");
    // The picture of a chaos run alone is all green: the timeline draws the reference run too,
    // and says what the difference means.
    let svg = std::fs::read_to_string(failure.timeline.as_ref().expect("a timeline")).expect("the timeline");
    assert!(svg.contains(r#"id="reference""#) && svg.contains("the stage itself is not deterministic"), "{failure}");
    calm.normalize_outputs(without_processed_at).run();
}

#[test]
fn a_logic_bug_passes_the_oracle_and_fails_the_stages_own_property() {
    let oracle_only = chaos(stale_sum_on_odd_amounts).profile("calm").seeds(0..2);
    assert!(oracle_only.try_run().is_ok(), "the oracle alone cannot see a bug the reference run shares");
    let failure = oracle_only.check(last_sum_is_the_total).try_run().expect_err("the property sees it");
    assert!(failure.violations.iter().any(|v| v.contains("the last sum is")), "{failure}");
}

/// Planted bug 1: the sum lives in the stage's memory instead of its `State`. Any restart or
/// handover loses it, and a retried batch adds twice.
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

/// Planted bug 2: a side effect outside the transaction. The sum is kept in an "external
/// database" shared by every replica (it survives crashes, as a database would), updated when
/// the record is processed — not when its transaction commits. A batch that aborts and is
/// processed again applies its amounts twice.
fn external_side_effect() -> FnTransformer {
    // One simulation runs on one thread (every replica's node included), and each run on a
    // fresh one: a thread-local is a database shared by the run's replicas, and only by them.
    thread_local! {
        static DATABASE: std::cell::RefCell<BTreeMap<String, i64>> = const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    transformer(["amounts"]).config_topics(["accounts"]).transform(move |msg, mut state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let sum = DATABASE.with(|database| {
            let mut database = database.borrow_mut();
            let sum = database.entry(msg.key.clone()).or_default();
            *sum += amount;
            *sum
        });
        state.set(&SUM, sum)?;
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, sum)?));
        out.set_state(state);
        Ok(())
    })
}

/// How many of `seeds` catch a planted bug, and the largest shrunk schedule among the first
/// failures (the harness shrinks each to the fewest faults that still fail).
fn caught(
    stage: impl Fn() -> FnTransformer + Send + Sync + Clone + 'static,
    seeds: std::ops::Range<u64>,
) -> (usize, usize, Vec<String>) {
    let mut caught = 0;
    let mut largest_shrunk = 0;
    let mut examples = Vec::new();
    for seed in seeds.clone() {
        let stage = stage.clone();
        let test = chaos(stage).seeds(seed..seed + 1);
        if let Err(failure) = test.try_run() {
            caught += 1;
            assert!(
                !test.run_seed(seed, &failure.shrunk, false).is_empty(),
                "the shrunk schedule of seed {seed} passes when replayed:\n{failure}"
            );
            assert_replays_the_shrunk_schedule(&failure);
            largest_shrunk = largest_shrunk.max(failure.shrunk.len());
            if examples.len() < 2 {
                examples.push(failure.to_string());
            }
        }
    }
    (caught, largest_shrunk, examples)
}

/// The printed replay line names this test binary and test, the seed, and the positions of the
/// shrunk schedule's faults in the seed's schedule: they select exactly the shrunk schedule.
fn assert_replays_the_shrunk_schedule(failure: &flechtwerk_sim::chaos::Failure) {
    let replay = &failure.replay;
    assert!(replay.starts_with(&format!("FLECHTWERK_CHAOS_SEED={} ", failure.seed)), "{replay}");
    assert!(replay.contains(" --test chaos_user_stage "), "{replay}");
    let test = std::thread::current().name().expect("a test thread").to_owned();
    assert!(replay.ends_with(&format!(" -- --exact {test} --nocapture")), "{replay}");
    let faults = replay.split_whitespace().find_map(|w| w.strip_prefix("FLECHTWERK_CHAOS_FAULTS=")).expect("faults");
    let kept: Vec<usize> =
        if faults == "none" { Vec::new() } else { faults.split(',').map(|n| n.parse().expect("a position")).collect() };
    let dropped: Vec<usize> = (0..failure.schedule.len()).filter(|i| !kept.contains(i)).collect();
    assert_eq!(failure.schedule.without(&dropped), failure.shrunk, "{replay}");
}

#[test]
fn a_stage_keeping_its_sum_in_memory_is_caught_and_shrunk() {
    // Over seeds 0..40 (without shrinking) the oracle catches this bug in 22 (55 %); it was 29
    // (72.5 %) before the task start of 2026-12-01 shifted the schedules' timing. Since tasks
    // reuse their local state (2026-12-07) fewer seeds catch it (3 of seeds 0..11, 8 of 0..19;
    // why, not yet studied). At least a fifth of 20 seeds: a broken oracle catches none.
    let (caught, largest, examples) = caught(in_memory_sum, 0..20);
    assert!(caught >= 4, "the oracle caught the in-memory sum in only {caught} of 20 seeds");
    assert!(largest <= 5, "a shrunk schedule kept {largest} faults:\n{}", examples.join("\n\n"));
    eprintln!("in-memory sum: caught in {caught} of 20 seeds; e.g.\n{}", examples[0]);
}

#[test]
fn a_side_effect_outside_the_transaction_is_caught_and_shrunk() {
    // Seeds 0..40: caught in 23 (57.5 %; 28 before the task start of 2026-12-01).
    let (caught, largest, examples) = caught(external_side_effect, 0..12);
    assert!(caught >= 4, "the oracle caught the external side effect in only {caught} of 12 seeds");
    assert!(largest <= 5, "a shrunk schedule kept {largest} faults:\n{}", examples.join("\n\n"));
    eprintln!("external side effect: caught in {caught} of 12 seeds; e.g.\n{}", examples[0]);
}

/// Rolling deploys: clean restarts alone (`Fault::StopRestart`: the application stopped as on
/// SIGTERM, then started again), the profile a user adds to a preset's weights.
fn rolling(stage: impl Fn() -> FnTransformer + Send + Sync + 'static) -> Chaos {
    chaos(stage).fault_profile(FaultProfile { stop_restart: 1, ..FaultProfile::calm() })
}

#[test]
fn running_sums_are_exactly_once_under_rolling_restarts() {
    rolling(running_sum).seeds(0..12).run();
}

#[test]
fn a_stage_keeping_its_sum_in_memory_is_caught_by_clean_restarts_alone() {
    // Without the restarts the three replicas keep their partitions for the whole run, and the
    // in-memory sum is then exactly right: only a stop that really ends the application (and
    // its memory) and the rebalances it causes can catch it. Seeds 0..12: caught in 12.
    let mut caught = 0;
    for seed in 0..12 {
        if let Err(failure) = rolling(in_memory_sum).seeds(seed..seed + 1).try_run() {
            assert!(
                failure.schedule.faults.iter().all(|timed| matches!(timed.fault, Fault::StopRestart { .. })),
                "only clean restarts were scheduled:\n{failure}"
            );
            caught += 1;
        }
    }
    assert!(caught >= 4, "clean restarts caught the in-memory sum in only {caught} of 12 seeds");
    eprintln!("in-memory sum under clean restarts alone: caught in {caught} of 12 seeds");
    let calm = chaos(in_memory_sum).profile("calm").seeds(0..4).try_run();
    assert!(calm.is_ok(), "without faults the in-memory sum is right: {:?}", calm.err().map(|f| f.to_string()));
}

fn on_the_cluster(fault: &Fault) -> bool {
    matches!(
        fault,
        Fault::BrokerCrash { .. }
            | Fault::BrokerPause { .. }
            | Fault::BrokerIsolate { .. }
            | Fault::LeaderMove { .. }
            | Fault::LaggingFailover { .. }
    )
}

#[test]
fn a_preset_on_three_brokers_fails_over_and_one_broker_keeps_its_old_schedules() {
    // The default cluster has three brokers: the preset's schedules fail brokers over.
    let three = chaos(running_sum);
    let failovers: usize =
        (0..20).map(|seed| three.schedule(seed).faults.iter().filter(|t| on_the_cluster(&t.fault)).count()).sum();
    assert!(failovers >= 20, "20 seeds of `everything` on three brokers drew only {failovers} broker faults");
    // On one broker there is nothing to fail over to: the schedules are the preset's own.
    let one = chaos(running_sum).brokers(1);
    let given = chaos(running_sum).fault_profile(FaultProfile::everything());
    for seed in 0..20 {
        let schedule = one.schedule(seed);
        assert!(schedule.faults.iter().all(|t| !on_the_cluster(&t.fault)), "seed {seed} on one broker:\n{schedule}");
        assert_eq!(schedule.to_string(), given.schedule(seed).to_string(), "seed {seed}");
    }
    // A profile given knob by knob runs as given, also on three brokers.
    let rolling = rolling(running_sum);
    assert!((0..20).all(|seed| rolling.schedule(seed).faults.iter().all(|t| !on_the_cluster(&t.fault))));
    // Both cluster sizes keep the stage exactly-once (and the single broker on both
    // transaction versions, seeds alternating).
    chaos(running_sum).brokers(1).seeds(0..4).run();
}

#[test]
#[should_panic(expected = "set-up: the stage reads input topic \"amounts\", which this test does not create")]
fn a_misspelt_input_topic_is_named_before_the_first_seed() {
    Chaos::transformer(running_sum).input("amount", 4).output("sums", 4).config("accounts", 2).seeds(0..1).run();
}

#[test]
fn a_missing_output_topic_is_named() {
    let failure = Chaos::transformer(running_sum)
        .input("amounts", 4)
        .config("accounts", 2)
        .inputs(20, |_, i| Input::new("amounts", format!("acct-{}", i % 3), r#"{"amount":1}"#))
        .profile("calm")
        .seeds(0..1)
        .try_run()
        .expect_err("nothing can be written to sums");
    let first = &failure.violations[0];
    assert!(first.starts_with("set-up: replicas crashed") && first.contains(".output(name, partitions)"), "{failure}");
    assert!(!failure.to_string().contains("not deterministic"), "{failure}");
}

/// Config changes during the run (issue 37, item 6): account 1 switches currency after 60
/// inputs, account 2's config is deleted after 120, account 11 gets one after 150. Each change is
/// a barrier in both runs, so the oracle stays exact under every fault.
fn with_config_changes(chaos: Chaos) -> Chaos {
    chaos
        .config_change(60, Input::new("accounts", "acct-1", r#"{"currency":"USD"}"#))
        .config_change(120, Input::tombstone("accounts", "acct-2"))
        .config_change(150, Input::new("accounts", "acct-11", r#"{"currency":"GBP"}"#))
}

/// The changes took effect: each changed account's last sum carries its config as of the end.
fn last_sums_carry_the_changed_configs(outcome: &Outcome) -> Result<(), String> {
    for (account, currency) in [("acct-1", Some("USD")), ("acct-2", None), ("acct-11", Some("GBP"))] {
        let sums = outcome.outputs.get(&("sums".to_owned(), account.to_owned()));
        let Some(Some(last)) = sums.and_then(|values| values.last()) else {
            return Err(format!("{account}: no sum committed"));
        };
        let map = decode_value(Some(last)).map_err(|e| e.to_string())?;
        let got = Record::wrap(map).get(&CURRENCY).map_err(|e| e.to_string())?;
        if got.as_deref() != currency {
            return Err(format!("{account}: the last sum's currency is {got:?}, its config says {currency:?}"));
        }
    }
    Ok(())
}

#[test]
fn config_changes_and_deletes_mid_run_are_exactly_once() {
    with_config_changes(chaos(running_sum))
        .check(last_sum_is_the_total)
        .check(last_sums_carry_the_changed_configs)
        .seeds(0..8)
        .run();
}

/// Planted bug 4: the stage keeps each account's currency in process memory once read, so a
/// config change never reaches an account it already served. The reference run (one replica, no
/// restart) has the same stale cache; a replica that restarts under chaos reads the new config,
/// and the oracle sees the difference.
fn currency_cached_in_memory() -> FnTransformer {
    let cache: Arc<Mutex<BTreeMap<String, Option<String>>>> = Arc::default();
    transformer(["amounts"]).config_topics(["accounts"]).transform(move |msg, mut state, out| {
        let amount = msg.value.as_ref().map(|v| v.get(&AMOUNT)).transpose()?.flatten().unwrap_or(0);
        let sum = state.get(&SUM)?.unwrap_or(0) + amount;
        state.set(&SUM, sum)?;
        let mut cache = cache.lock().expect("cache lock");
        let currency = match cache.get(&msg.key) {
            Some(currency) => currency.clone(),
            None => {
                let currency = out.configs().get(&msg.key)?.and_then(|c| c.get(&CURRENCY).ok().flatten());
                cache.insert(msg.key.clone(), currency.clone());
                currency
            }
        };
        out.send(Message::new("sums", msg.key.as_str(), Event::new().with(&SUM, sum)?.with(&CURRENCY, currency)?));
        out.set_state(state);
        Ok(())
    })
}

#[test]
fn a_stage_caching_configs_in_memory_is_caught_when_a_config_changes() {
    let failure = with_config_changes(chaos(currency_cached_in_memory).profile("crashes"))
        .seeds(0..10)
        .try_run()
        .expect_err("a restarted replica reads the new currency, the reference keeps the old one");
    assert!(failure.violations.iter().any(|v| v.contains("outputs of sums/")), "{failure}");
}

#[test]
#[should_panic(expected = "set-up: input #3 (accounts/acct-1) writes config topic \"accounts\"")]
fn a_config_record_fed_as_an_input_is_refused() {
    chaos(running_sum)
        .inputs(10, |_, i| match i {
            3 => Input::tombstone("accounts", "acct-1"),
            _ => Input::new("amounts", "acct-1", r#"{"amount":1}"#),
        })
        .seeds(0..1)
        .run();
}
