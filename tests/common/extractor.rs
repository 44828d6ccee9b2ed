//! Extractor acceptance scenarios, written once against the Kafka port: run on the in-process
//! simulated cluster (`tests/engine_local.rs`) and on Apache Kafka (`tests/engine_rdkafka.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::observer::Observer;
use flechtwerk::stage::{extractor, BoxError, Emit};
use flechtwerk::wire::RawRecord;
use flechtwerk::{token_for, Config, ContractViolation, Error, Event, Extractor, Message, Page, State};

use super::{wait_for, Harness, Probe};

const N: Attribute<i64> = Attribute::new("n", &INT);
const COUNT: Attribute<i64> = Attribute::new("count", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
const KEY: Attribute<String> = Attribute::new("key", &STR);
const OWNER: Attribute<String> = Attribute::new("owner", &STR);

fn value(record: &RawRecord) -> Event {
    Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).unwrap())
}

fn key(record: &RawRecord) -> String {
    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned()
}

/// A probe that also tracks tokens and records polls per config.
#[derive(Default)]
pub struct ExtractorProbe {
    pub inner: Probe,
    pub tokens: AtomicUsize,
    pub transactions: AtomicUsize,
}

impl Observer for ExtractorProbe {
    fn tokens_assigned(&self, count: usize) {
        self.tokens.store(count, Ordering::SeqCst);
        self.inner.recording.tokens_assigned(count);
    }
    fn transaction_committed(&self) {
        self.transactions.fetch_add(1, Ordering::SeqCst);
    }
    fn active_configs(&self, count: usize) {
        self.inner.recording.active_configs(count);
    }
    fn config_store_updated(&self, store: &dyn flechtwerk::observer::ConfigView) {
        self.inner.config_store_updated(store);
    }
}

/// EXT-10, EXT-11, EXT-21: every state is a commit boundary — the messages since the previous
/// boundary and a changed state commit as one transaction; an unchanged state with nothing sent
/// opens none; messages after the last boundary commit as a trailing page.
pub async fn pages_commit_at_state_boundaries(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed", Some(br#"{"on":true}"#))]).await;
    let polls = Arc::new(AtomicUsize::new(0));
    let (out, counter) = (output.clone(), polls.clone());
    let stage = extractor([configs.as_str()]).poll(move |key, _config, state| {
        // Only the first poll emits; later cycles see the committed cursor and emit nothing.
        if counter.fetch_add(1, Ordering::SeqCst) > 0 || state.get(&CURSOR)?.is_some() {
            return Ok(vec![Emit::State(state)]);
        }
        let msg = |n: i64| -> Result<Emit, BoxError> {
            Ok(Emit::Message(Message::new(out.as_str(), key, Event::new().with(&N, n)?)))
        };
        let cursor = |c: i64| -> Result<Emit, BoxError> { Ok(Emit::State(State::new().with(&CURSOR, c)?)) };
        Ok(vec![msg(1)?, cursor(1)?, cursor(1)?, msg(2)?, msg(3)?, cursor(2)?, msg(4)?])
    });
    let probe = Arc::new(ExtractorProbe::default());
    let app = h.name("ext10");
    let running = h.start(&app, "pod-0", stage, probe.clone());
    let outputs = h.read_until(&output, |r| r.len() >= 4).await;
    wait_for("two more cycles", || polls.load(Ordering::SeqCst) >= 3).await;
    running.stop().await.unwrap();
    let ns: Vec<i64> = outputs.iter().map(|r| value(r).require(&N).unwrap()).collect();
    assert_eq!(ns, vec![1, 2, 3, 4]);
    assert_eq!(probe.transactions.load(Ordering::SeqCst), 3, "msg+cursor 1 / 2 msgs+cursor 2 / trailing msg");
    let changelog = h.read(&format!("{app}-changelog")).await;
    let cursors: Vec<i64> = changelog.iter().map(|r| value(r).require(&CURSOR).unwrap()).collect();
    assert_eq!(cursors, vec![1, 2], "one changelog write per changed state");
}

/// A stage that emits a page, then a message, then fails (EXT-14).
struct FailsMidPoll {
    output: String,
}

impl Extractor for FailsMidPoll {
    fn config_topics(&self) -> Vec<String> {
        vec![self.output.replace("-output", "-configs")]
    }
    async fn poll(&self, _config: Config, state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let cursor = state.get(&CURSOR)?.unwrap_or(0);
        page.send(Message::new(self.output.as_str(), "k", Event::new().with(&N, cursor + 1)?)).await?;
        page.commit(State::new().with(&CURSOR, cursor + 1)?).await?;
        page.send(Message::new(self.output.as_str(), "k", Event::new().with(&N, cursor + 2)?)).await?;
        Err("boom".into())
    }
}

/// EXT-14, EXT-23: a poll that fails after a committed page and an open one: the committed page
/// stays, the open page aborts at once (its topic's LSO not held), the run ends with the
/// stage's error naming the config.
pub async fn a_failed_poll_aborts_only_its_open_page(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed", Some(br#"{"on":true}"#))]).await;
    let app = h.name("ext14");
    let error = h
        .start(&app, "pod-0", FailsMidPoll { output: output.clone() }, Arc::new(Probe::default()))
        .ended()
        .await
        .expect_err("the poll fails");
    assert!(matches!(&error, Error::Poll { key, .. } if key == "feed"), "{error:?}");
    h.produce(&output, &[(Some(0), "after", Some(b"{}"))]).await;
    let outputs = h.read_within(&output, super::AFTER_ABORT_VISIBLE_MAX, |r| r.iter().any(|x| key(x) == "after")).await;
    let seen: Vec<String> =
        outputs.iter().map(|r| format!("{}:{:?}", key(r), value(r).get(&N).ok().flatten())).collect();
    assert_eq!(seen, vec!["k:Some(1)".to_owned(), "after:None".to_owned()], "the aborted page stays invisible");
    let changelog = h.read(&format!("{app}-changelog")).await;
    assert_eq!(changelog.len(), 1, "only the committed page's cursor");
}

/// A poll that swallows its page's failed send (a record over the producer's 1,000,000 bytes)
/// and commits the page anyway.
struct ReusesAFailedPage {
    output: String,
}

const BLOB: Attribute<String> = Attribute::new("blob", &STR);

impl Extractor for ReusesAFailedPage {
    fn config_topics(&self) -> Vec<String> {
        vec![self.output.replace("-output", "-configs")]
    }
    async fn poll(&self, _config: Config, _state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        page.send(Message::new(self.output.as_str(), "k", Event::new().with(&N, 1)?)).await?;
        let huge = Event::new().with(&BLOB, "x".repeat(1_100_000))?;
        let failed = page.send(Message::new(self.output.as_str(), "k", huge)).await;
        assert!(failed.is_err(), "a record over message.max.bytes is refused");
        page.commit(State::new().with(&CURSOR, 1)?).await?;
        Ok(())
    }
}

/// EXT-14: a page whose send failed refuses to be used again, with a named contract
/// violation; its transaction aborts, nothing of it is visible.
pub async fn a_page_used_after_its_failure_is_a_contract_violation(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed", Some(br#"{"on":true}"#))]).await;
    let app = h.name("ext14reuse");
    let error = h
        .start(&app, "pod-0", ReusesAFailedPage { output: output.clone() }, Arc::new(Probe::default()))
        .ended()
        .await
        .expect_err("the poll fails");
    // The page's own error comes back as the engine's, not wrapped as the stage's.
    assert!(
        matches!(&error, Error::Contract(ContractViolation::PageUsedAfterFailure { state_key }) if state_key == "feed"),
        "{error:?}"
    );
    h.produce(&output, &[(Some(0), "after", Some(b"{}"))]).await;
    let outputs = h.read_within(&output, super::AFTER_ABORT_VISIBLE_MAX, |r| r.iter().any(|x| key(x) == "after")).await;
    let keys: Vec<String> = outputs.iter().map(key).collect();
    assert_eq!(keys, vec!["after".to_owned()], "the failed page's messages stay invisible");
}

/// The counter poll of IT-EXT-1: one output `{count, key, owner}` then the state, per cycle.
fn counting(configs: &str, output: &str, owner: &str) -> impl Extractor + use<> {
    let (output, owner) = (output.to_owned(), owner.to_owned());
    extractor([configs]).poll(move |key, _config, mut state| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        state.set(&COUNT, count)?;
        let value = Event::new().with(&COUNT, count)?.with(&KEY, key.to_owned())?.with(&OWNER, owner.clone())?;
        Ok(vec![Emit::Message(Message::new(output.as_str(), key, value)), Emit::State(state)])
    })
}

/// Two config keys whose tokens (of 2) are 0 and 1.
fn keys_for_both_tokens() -> (String, String) {
    let mut zero = None;
    let mut one = None;
    for i in 0.. {
        let candidate = format!("tenant-{i}");
        match token_for(&candidate, 2) {
            0 if zero.is_none() => zero = Some(candidate),
            1 if one.is_none() => one = Some(candidate),
            _ => {}
        }
        if let (Some(a), Some(b)) = (&zero, &one) {
            return (a.clone(), b.clone());
        }
    }
    unreachable!()
}

/// Per key, the counts in output order, and the owner stamps in order.
fn counts_and_owners(records: &[RawRecord]) -> BTreeMap<String, (Vec<i64>, Vec<String>)> {
    let mut by_key: BTreeMap<String, (Vec<i64>, Vec<String>)> = BTreeMap::new();
    for r in records {
        let v = value(r);
        let entry = by_key.entry(v.require(&KEY).unwrap()).or_default();
        entry.0.push(v.require(&COUNT).unwrap());
        let owner = v.require(&OWNER).unwrap();
        if entry.1.last() != Some(&owner) {
            entry.1.push(owner);
        }
    }
    by_key
}

/// IT-EXT-1, EXT-25, EXT-32: two sharded extractors split the configs by token and hand over
/// state exactly once. The config topic has 2 partitions, both configs are written to partition
/// 0 (ownership follows the state key, not the record's partition). The changelog is
/// pre-created with 1 partition, deliberately unaligned as in the acceptance scenario (EXT-43:
/// the runner adopts it and restores to the high watermark).
/// Per key, counts are 1..n with no gap and no repeat, and the owner stamp changes at most
/// twice (no dual ownership).
pub async fn two_extractors_split_and_hand_over(h: &Harness) {
    let configs = h.topic("configs", 2, true).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("ext1");
    let changelog_spec =
        flechtwerk::kafka::NewTopic::new(format!("{app}-changelog"), 1).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&changelog_spec).await.unwrap();
    let (k0, k1) = keys_for_both_tokens();
    h.produce(
        &configs,
        &[(Some(0), k0.as_str(), Some(br#"{"on":true}"#)), (Some(0), k1.as_str(), Some(br#"{"on":true}"#))],
    )
    .await;
    let count_of = |records: &[RawRecord], k: &str| counts_and_owners(records).get(k).map_or(0, |c| c.0.len());

    let probe_a = Arc::new(ExtractorProbe::default());
    let a = h.start(&app, "pod-a", counting(&configs, &output, "a"), probe_a.clone());
    wait_for("A holds both tokens", || probe_a.tokens.load(Ordering::SeqCst) == 2).await;
    let phase1 = h.read_until(&output, |r| count_of(r, &k0) >= 2 && count_of(r, &k1) >= 2).await;
    let probe_b = Arc::new(ExtractorProbe::default());
    let b = h.start(&app, "pod-b", counting(&configs, &output, "b"), probe_b.clone());
    wait_for("tokens split 1/1", || {
        probe_a.tokens.load(Ordering::SeqCst) == 1 && probe_b.tokens.load(Ordering::SeqCst) == 1
    })
    .await;
    let (n0, n1) = (count_of(&phase1, &k0), count_of(&phase1, &k1));
    let phase2 = h.read_until(&output, |r| count_of(r, &k0) >= n0 + 3 && count_of(r, &k1) >= n1 + 3).await;
    a.stop().await.unwrap();
    wait_for("B holds both tokens", || probe_b.tokens.load(Ordering::SeqCst) == 2).await;
    let (n0, n1) = (count_of(&phase2, &k0), count_of(&phase2, &k1));
    let outputs = h.read_until(&output, |r| count_of(r, &k0) >= n0 + 3 && count_of(r, &k1) >= n1 + 3).await;
    b.stop().await.unwrap();
    for (k, (counts, owners)) in counts_and_owners(&outputs) {
        let want: Vec<i64> = (1..=counts.len() as i64).collect();
        assert_eq!(counts, want, "{k}: counts must be 1..n");
        assert!(owners.len() <= 3, "{k}: owners {owners:?}: at most two handovers");
    }
}

/// CFG-30: an extractor's state key is derived from a config as decoded, before
/// `enrich_config` (as Python's `extract_state_key(msg)` sees the record's value), both for the
/// configs the bootstrap reads and for those a drain applies; the poll sees the enriched config.
/// The enricher here overwrites the very field the state key is made of, so a state key taken
/// from the store would be "enriched" for every config.
pub async fn state_keys_come_from_configs_before_enrichment(h: &Harness) {
    const ACCOUNT: Attribute<String> = Attribute::new("account", &STR);
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed-a", Some(br#"{"account":"acme"}"#))]).await;
    let out = output.clone();
    let stage = extractor([configs.as_str()])
        .enrich_config(|config| Ok(config.with(&ACCOUNT, "enriched".to_owned())?))
        .extract_state_key(|key, config| config.get(&ACCOUNT).ok().flatten().unwrap_or_else(|| key.to_owned()))
        .poll(move |key, config, state| {
            // One output and one state per config; the state names the config that wrote it, so
            // two configs sharing a state (as under one wrong key) write it twice.
            if state.get(&KEY)?.as_deref() == Some(key) {
                return Ok(vec![Emit::State(state)]);
            }
            let seen = Event::new().with(&OWNER, config.require(&ACCOUNT)?)?;
            let state = State::new().with(&CURSOR, 1)?.with(&KEY, key.to_owned())?;
            Ok(vec![Emit::Message(Message::new(out.as_str(), key, seen)), Emit::State(state)])
        });
    let app = h.name("cfg30");
    let changelog = format!("{app}-changelog");
    let running = h.start(&app, "pod-0", stage, Arc::new(Probe::default()));
    // Its first output follows the changelog's creation (LIFE-16) and comes with its first state.
    h.read_until(&output, |r| !r.is_empty()).await;
    h.produce(&configs, &[(Some(0), "feed-b", Some(br#"{"account":"beta"}"#))]).await;
    let outputs = h.read_until(&output, |r| r.len() >= 2).await;
    let states = h.read_until(&changelog, |r| r.len() >= 2).await;
    running.stop().await.unwrap();
    let state_keys: BTreeSet<String> = states.iter().map(key).collect();
    assert_eq!(
        state_keys,
        BTreeSet::from(["acme".to_owned(), "beta".to_owned()]),
        "states under the accounts as written (bootstrap: acme, drain: beta), not as enriched"
    );
    for record in &outputs {
        assert_eq!(value(record).require(&OWNER).unwrap(), "enriched", "the poll sees the enriched config");
    }
    let polled: BTreeSet<String> = outputs.iter().map(key).collect();
    assert_eq!(polled, BTreeSet::from(["feed-a".to_owned(), "feed-b".to_owned()]));
}

/// IT-EXT-2, EXT-31, ERR-07: config topics with unequal partition counts are refused by the
/// sharded loop, naming the token space.
pub async fn unequal_config_partition_counts_are_refused(h: &Harness) {
    let a = h.topic("configs-a", 3, true).await;
    let b = h.topic("configs-b", 2, true).await;
    let stage = extractor([a.as_str(), b.as_str()]).poll(|_, _, _| Ok(Vec::new()));
    let error = h.start(&h.name("ext2"), "pod-0", stage, Arc::new(Probe::default())).ended().await.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("equal partition counts") && text.contains("ownership-token space"), "{text}");
}

/// A stage that records what it polls and what `on_active_configs` sees.
struct Recorder {
    configs: String,
    polled: Arc<Mutex<BTreeSet<String>>>,
    reconciled: Arc<Mutex<Vec<BTreeSet<String>>>>,
}

impl Extractor for Recorder {
    fn config_topics(&self) -> Vec<String> {
        vec![self.configs.clone()]
    }
    async fn poll(&self, _config: Config, _state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        self.polled.lock().unwrap().insert(page.key().to_owned());
        Ok(())
    }
    async fn on_active_configs(&self, active: &BTreeMap<String, Config>) -> Result<(), BoxError> {
        self.reconciled.lock().unwrap().push(active.keys().cloned().collect());
        Ok(())
    }
}

/// CFG-31, CFG-32, EXT-41: a suspended config stays in the store but is neither polled nor
/// active; a tombstone (or `{}`) removes an entry; `on_active_configs` sees the active set.
pub async fn suspended_and_deleted_configs_are_not_polled(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    h.produce(
        &configs,
        &[
            (Some(0), "live", Some(br#"{"on":true}"#)),
            (Some(0), "paused", Some(br#"{"suspended":true}"#)),
            (Some(0), "doomed", Some(br#"{"on":true}"#)),
        ],
    )
    .await;
    let polled = Arc::new(Mutex::new(BTreeSet::new()));
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    let stage = Recorder { configs: configs.clone(), polled: polled.clone(), reconciled: reconciled.clone() };
    let running = h.start(&h.name("cfg32"), "pod-0", stage, Arc::new(Probe::default()));
    wait_for("live and doomed polled", || polled.lock().unwrap().len() >= 2).await;
    h.produce(&configs, &[(Some(0), "doomed", None)]).await;
    let deleted = || reconciled.lock().unwrap().last().is_some_and(|a| !a.contains("doomed"));
    wait_for("doomed gone from the active set", deleted).await;
    polled.lock().unwrap().clear();
    wait_for("another cycle", || !polled.lock().unwrap().is_empty()).await;
    running.stop().await.unwrap();
    assert_eq!(*polled.lock().unwrap(), BTreeSet::from(["live".to_owned()]));
    assert!(reconciled.lock().unwrap().iter().all(|set| !set.contains("paused")), "a suspended config is never active");
}

/// EXT-40, TRX-37: replicas beyond the token space are hot standbys: no tokens, no cycle, one
/// reconcile with nothing; they take over when a holder leaves.
pub async fn replicas_beyond_the_tokens_are_standbys(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed", Some(br#"{"on":true}"#))]).await;
    let app = h.name("ext40");
    let probe_a = Arc::new(ExtractorProbe::default());
    let a = h.start(&app, "pod-a", counting(&configs, &output, "a"), probe_a.clone());
    wait_for("A holds the token", || probe_a.tokens.load(Ordering::SeqCst) == 1).await;
    let probe_b = Arc::new(ExtractorProbe::default());
    let b = h.start(&app, "pod-b", counting(&configs, &output, "b"), probe_b.clone());
    wait_for("B is a standby", || {
        probe_b.inner.recording.events().contains(&flechtwerk::testing::Observed::TokensAssigned { count: 0 })
    })
    .await;
    let before = h.read_until(&output, |r| r.len() >= 3).await.len();
    assert_eq!(probe_b.tokens.load(Ordering::SeqCst), 0);
    a.stop().await.unwrap();
    wait_for("B takes over", || probe_b.tokens.load(Ordering::SeqCst) == 1).await;
    let outputs = h.read_until(&output, |r| r.len() >= before + 3).await;
    b.stop().await.unwrap();
    let (counts, owners) = counts_and_owners(&outputs).remove("feed").unwrap();
    assert_eq!(counts, (1..=counts.len() as i64).collect::<Vec<_>>());
    assert_eq!(owners, vec!["a".to_owned(), "b".to_owned()]);
}

/// EXT-20, EXT-25: a restarted extractor resumes from its committed cursor.
pub async fn a_restart_resumes_from_the_committed_cursor(h: &Harness) {
    let configs = h.topic("configs", 1, true).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "feed", Some(br#"{"on":true}"#))]).await;
    let app = h.name("ext20");
    let first = h.start(&app, "pod-0", counting(&configs, &output, "first"), Arc::new(Probe::default()));
    let before = h.read_until(&output, |r| r.len() >= 3).await;
    first.stop().await.unwrap();
    let before = h.read(&output).await.len().max(before.len());
    let second = h.start(&app, "pod-0", counting(&configs, &output, "second"), Arc::new(Probe::default()));
    let outputs = h.read_until(&output, |r| r.len() >= before + 3).await;
    second.stop().await.unwrap();
    let (counts, _) = counts_and_owners(&outputs).remove("feed").unwrap();
    assert_eq!(counts, (1..=counts.len() as i64).collect::<Vec<_>>(), "the cursor continues");
    let _ = Duration::ZERO;
}

/// EXT-43: a changelog whose partition count is not the token space (as a Python fleet
/// creates it: the broker's default) is adopted, and a restore on it is still complete: when
/// another token's page is open on a shared partition *before* this token's last cursor, the
/// restore reads to the high watermark and waits for that page, instead of stopping at its LSO
/// and missing the cursor (which the `extractor` simulation showed re-emits committed items).
pub async fn a_misaligned_changelog_restores_past_other_tokens_open_pages(h: &Harness) {
    use flechtwerk::kafka::{NewTopic, ProducerConfig, ProducerRecord};
    let configs = h.topic("configs", 2, true).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("ext43");
    let changelog = format!("{app}-changelog");
    let admin = h.kafka.admin().unwrap();
    admin.create_topic(&NewTopic::new(&changelog, 1).replication(h.replication).compacted()).await.unwrap();
    h.produce(&configs, &[(Some(0), "b", Some(br#"{"on":true}"#))]).await;
    let record = |key: &'static str, cursor: i64| ProducerRecord {
        partition: Some(0),
        ..ProducerRecord::new(changelog.clone(), key, format!(r#"{{"cursor":{cursor}}}"#))
    };
    // Another token's holder, mid-commit: its changelog record is in the shared partition,
    // undecided. It is none of this application's token producers, so no fence decides it.
    let other = h.kafka.producer(ProducerConfig::transactional(h.name("other"), h.name("other-txn"))).unwrap();
    other.init_transactions().await.unwrap();
    other.begin_transaction().await.unwrap();
    other.send(record("elsewhere", 1)).await.unwrap().await.unwrap();
    // After it, b's previous holder committed b's cursor 5.
    let token = token_for("b", 2);
    let previous = h.kafka.producer(ProducerConfig::transactional(h.name("prev"), format!("{app}-{token}"))).unwrap();
    previous.init_transactions().await.unwrap();
    previous.begin_transaction().await.unwrap();
    previous.send(record("b", 5)).await.unwrap().await.unwrap();
    previous.commit_transaction().await.unwrap();
    previous.close().await;

    let out = output.clone();
    let stage = extractor([configs.as_str()]).poll(move |key, _config, state| {
        let cursor = state.get(&CURSOR)?.unwrap_or(0) + 1;
        Ok(vec![
            Emit::Message(Message::new(out.as_str(), key, Event::new().with(&N, cursor)?)),
            Emit::State(State::new().with(&CURSOR, cursor)?),
        ])
    });
    let probe = Arc::new(ExtractorProbe::default());
    let running = h.start(&app, "pod-0", stage, probe.clone());
    // Tokens granted (the restore begins right after the fence); while the other page is open,
    // the restore waits: nothing is polled.
    wait_for("tokens granted", || probe.tokens.load(Ordering::SeqCst) == 2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(h.read(&output).await.is_empty(), "polled before the restore could see b's last cursor");
    other.abort_transaction().await.unwrap();
    other.close().await;
    let outputs = h.read_until(&output, |r| !r.is_empty()).await;
    running.stop().await.unwrap();
    let first = value(&outputs[0]).require(&N).unwrap();
    assert_eq!(first, 6, "b continues after its committed cursor 5 (a restore stopped at the LSO restarts at 1)");
}

/// EXT-38, EXT-43: a restore that waits for another token's open page must not hold up the
/// rebalance that fences it. The changelog has 1 partition for 2 tokens; both tokens' previous
/// holders left a page open on it, and the holder of one token is still a group member. The
/// replica gets the other token, fences it (aborting that page), and its restore waits for the
/// remaining page. Then the last holder leaves the group: only a rebalance in which the waiting
/// replica takes part can give it that token, whose fence ends the wait. A restore run in the
/// main loop never lets it take part (the page stays open until its transaction times out, 90 s
/// here); ours runs beside the membership, is cancelled by the revoke, and starts again after
/// the fence.
pub async fn a_waiting_restore_lets_the_rebalance_fence_what_it_waits_for(h: &Harness) {
    use flechtwerk::kafka::{ConsumerConfig, NewTopic, ProducerConfig, ProducerRecord};
    use std::sync::atomic::AtomicBool;
    let configs = h.topic("configs", 2, true).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("ext38");
    let changelog = format!("{app}-changelog");
    let admin = h.kafka.admin().unwrap();
    admin.create_topic(&NewTopic::new(&changelog, 1).replication(h.replication).compacted()).await.unwrap();
    let (k0, k1) = keys_for_both_tokens();
    h.produce(
        &configs,
        &[(Some(0), k0.as_str(), Some(br#"{"on":true}"#)), (Some(0), k1.as_str(), Some(br#"{"on":true}"#))],
    )
    .await;
    // The holder of both tokens until now: a group member, kept alive by a task until `leave`.
    let mut holder = h.kafka.consumer(ConsumerConfig::member(h.name("holder"), &app)).unwrap();
    holder.subscribe(std::slice::from_ref(&configs)).await.unwrap();
    let assigned = Arc::new(AtomicUsize::new(0));
    let leave = Arc::new(AtomicBool::new(false));
    let pump = {
        let (assigned, leave) = (assigned.clone(), leave.clone());
        tokio::spawn(async move {
            while !leave.load(Ordering::SeqCst) {
                let polled = holder.poll(100, Duration::from_millis(100)).await.unwrap();
                for event in polled.rebalances {
                    if let flechtwerk::kafka::Rebalance::Assigned { partitions, .. } = event {
                        assigned.store(partitions.len(), Ordering::SeqCst);
                    }
                }
            }
            holder.close().await.unwrap();
        })
    };
    wait_for("the holder holds both tokens", || assigned.load(Ordering::SeqCst) == 2).await;
    // Its open pages, one per token: cursor 3 committed, cursor 9 undecided.
    let mut pages = Vec::new();
    for (token, key) in [(0, &k0), (1, &k1)] {
        let mut config = ProducerConfig::transactional(h.name(&format!("page-{token}")), format!("{app}-{token}"));
        config.transaction_timeout = Duration::from_secs(90);
        let producer = h.kafka.producer(config).unwrap();
        producer.init_transactions().await.unwrap();
        for (cursor, commit) in [(3, true), (9, false)] {
            producer.begin_transaction().await.unwrap();
            let record = ProducerRecord {
                partition: Some(0),
                ..ProducerRecord::new(changelog.clone(), key.clone(), format!(r#"{{"cursor":{cursor}}}"#))
            };
            producer.send(record).await.unwrap().await.unwrap();
            if commit {
                producer.commit_transaction().await.unwrap();
            }
        }
        pages.push(producer);
    }

    let out = output.clone();
    let stage = extractor([configs.as_str()]).poll(move |key, _config, state| {
        let cursor = state.get(&CURSOR)?.unwrap_or(0) + 1;
        Ok(vec![
            Emit::Message(Message::new(out.as_str(), key, Event::new().with(&N, cursor)?)),
            Emit::State(State::new().with(&CURSOR, cursor)?),
        ])
    });
    let probe = Arc::new(ExtractorProbe::default());
    let running = h.start(&app, "pod-0", stage, probe.clone());
    // The split: one token each; ours fenced its page, its restore waits for the holder's.
    wait_for("one token each", || probe.tokens.load(Ordering::SeqCst) == 1 && assigned.load(Ordering::SeqCst) == 1)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(h.read(&output).await.is_empty(), "polled while the restore could not see every cursor");
    leave.store(true, Ordering::SeqCst);
    pump.await.unwrap();
    let outputs = h
        .read_within(&output, Duration::from_secs(45), |r| {
            let keys: BTreeSet<_> = r.iter().map(|r| r.key.clone()).collect();
            keys.len() == 2
        })
        .await;
    running.stop().await.unwrap();
    let mut first = BTreeMap::new();
    for record in &outputs {
        first.entry(record.key.clone()).or_insert_with(|| value(record).require(&N).unwrap());
    }
    assert_eq!(
        first.len(),
        2,
        "both tokens polled within 45 s of the holder leaving (a restore blocking the rebalance waits 90 s): {outputs:?}"
    );
    assert!(first.values().all(|&n| n == 4), "each key resumes after its committed cursor 3: {first:?}");
    drop(pages);
}
