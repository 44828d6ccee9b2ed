//! Scenario `extractor`: the token-sharded extractor under chaos.
//!
//! 2–3 replicas of a paging extractor read a simulated external source: per config key, a
//! numbered sequence of items that keeps growing while it is polled. Each poll pages through
//! the items after its cursor (1–5 items a page, several pages a poll), sending every item and
//! committing the cursor at the end of each page. The source has faults of its own: slow pages
//! and errors in the middle of a page (the page aborts, the replica restarts). Meanwhile a
//! config writer adds config entries, suspends and resumes some, and deletes some (tombstones),
//! and the fault schedule of the `counter` scenario runs (crash-restarts, replicas added and
//! removed, zombies, request faults, failing transactions, late markers, partitions, broker
//! restarts). The changelog has one partition per token (as the runner creates it) in half the
//! seeds, one partition in 40 % and one more than the tokens in 10 %: misaligned with the token
//! space (EXT-43) in about 37 % of the seeds. In half the seeds the changelog's markers land up
//! to 3 s late all through the fault period, not only in late-marker windows. In half the
//! seeds the feeds of one account share a state (CFG-30): each config names its account,
//! `extract_state_key` returns it (so an account's feeds have one owner and one state, a map of
//! per-feed cursors), and the configs are enriched on their way into the store by a directory
//! lookup that rewrites the account to its current display name — renamed now and then while
//! the faults run. The state key must come from the config as written: one derived from the
//! enriched config would move a feed to another state key (and token) at every rename.
//!
//! Properties, checked on the broker's own log after quiescence:
//! - per config key, the emitted sequence numbers in `read_committed` output are exactly 1..n
//!   in order — no gap, no repeat — and for every config still active at the end, n is the
//!   source's size (everything extracted, nothing twice);
//! - cursors never regress in the changelog, and a poll is only ever handed a cursor that some
//!   page committed (never one of an aborted page);
//! - no two owners interleave output for one key: each owner (a replica's token grant) emits
//!   one contiguous run of the key's output;
//! - where feeds share a state, every poll's state key is the account the config was written
//!   with, and the config it is handed is the enriched one;
//! - a poll only polls configs of its cycle's active set, and an active set never holds a config
//!   that the replica's store had already suspended or deleted;
//! - after quiescence every token has exactly one holder, and standbys poll nothing;
//! - same seed, same trace hash (`--check-determinism`).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::attribute::{dict, Attribute, INT, STR};
use flechtwerk::kafka::{Kafka, ProducerConfig, ProducerRecord};
use flechtwerk::observer::{ConfigView, Observer};
use flechtwerk::stage::{BoxError, EnrichConfig};
use flechtwerk::wire::RawRecord;
use flechtwerk::{Config, Event, Extractor, Flechtwerk, Message, Page, State};
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::{Cluster, KafkaClient, MarkerFaults};
use crate::harness::directed::{Aims, HandoverStep};
use crate::harness::disk::SimDisk;
use crate::harness::faults::{Fault, FaultProfile, FaultSchedule};
use crate::harness::replicas::{error_kind, Launch, ReplicaEnv, ReplicaObserver, ReplicaView, Replicas};
use crate::harness::{topic, truth};
use crate::runner::{Ctx, Scenario};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "extractor",
    about: "token-sharded paging extractor over a growing, faulty source, configs added/suspended/deleted, every fault kind",
    faults: &[
        "crash-restart", "add-replica", "remove-replica", "pause", "network-partition", "broker-restart",
        "request-chaos", "fail-transactions", "late-markers", "kafka-drop-request", "kafka-hold-request",
        "kafka-delay-request", "kafka-error", "kafka-drop-response", "kafka-delay-response", "kafka-marker-delay",
        "buggify", "source-error", "slow-page", "broker-crash", "broker-pause", "broker-isolate", "leader-move",
        "lagging-failover", "zombie-wake", "failing-page-commit",
    ],
    run: |ctx| Box::pin(run(ctx, false)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

/// The scenario with Kafka's request timeout (30 s, not the simulator's 5 s) and its directed
/// zombies frozen right after they wrote a page's changelog record, that write held in the
/// network until the next holder's fence wakes them ([`Aims::held_write`]).
pub static SCENARIO_HELD_WRITES: Scenario = Scenario {
    name: "extractor-held-writes",
    about: "the extractor scenario with Kafka's 30 s request timeout, its zombies frozen with a page's changelog write held in the network until the next holder's fence",
    faults: SCENARIO.faults,
    run: |ctx| Box::pin(run(ctx, true)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

/// Kafka's `request.timeout.ms` default, for [`SCENARIO_HELD_WRITES`]: longer than a zombie's
/// freeze, so its client still waits for the held write's answer when it wakes.
const KAFKA_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

const APP: &str = "extractor";
const CONFIGS: &str = "extractor-configs";
const OUTPUT: &str = "extractor-output";
/// The replicas' group session timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// Replicas alive at most at once.
const REPLICAS_MAX: usize = 4;
/// Directed zombies per seed at most: a token holder frozen mid-page, woken at the next
/// holder's fence, restore or first commit (`harness::directed`).
const ZOMBIE_WAKES: u32 = 2;
/// Failing-commit windows per seed at most, each open until it failed a page at its commit,
/// after its messages were sent, while the cycle polls the token's other configs
/// (`harness::directed`).
const FAILING_PAGE_COMMITS: u32 = 3;
/// How long the replicas get to extract everything once the faults stop.
const QUIESCENCE_MAX: Duration = Duration::from_secs(600);

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
const OWNER: Attribute<String> = Attribute::new("owner", &STR);
/// A config's account (shared-state seeds): its state key as written, its display name once
/// enriched.
const ACCOUNT: Attribute<String> = Attribute::new("account", &STR);
/// Per-feed cursors in the state an account's feeds share.
const CURSORS: Attribute<BTreeMap<String, i64>> = Attribute::new("cursors", &dict(INT));

/// The account feed `k` is written with, when `accounts` accounts share the feeds.
fn account_of(k: u32, accounts: u32) -> String {
    format!("acct-{}", k % accounts)
}

/// The enricher of shared-state seeds: looks each config's account up in a directory whose
/// display names change while the faults run (a rename bumps the version).
#[derive(Clone, Default)]
struct Directory {
    version: Arc<AtomicU64>,
}

impl Directory {
    fn display_name(account: &str, version: u64) -> String {
        format!("{account} (directory v{version})")
    }
}

impl EnrichConfig for Directory {
    fn enrich_config(
        &self,
        config: Config,
    ) -> Pin<Box<dyn std::future::Future<Output = Result<Config, BoxError>> + Send + '_>> {
        let version = self.version.load(Ordering::SeqCst);
        Box::pin(async move {
            match config.get(&ACCOUNT)? {
                Some(account) => Ok(config.with(&ACCOUNT, Directory::display_name(&account, version))?),
                None => Ok(config),
            }
        })
    }
}

/// The simulated external source: per config key, items 1..=size.
#[derive(Clone, Default)]
struct Source {
    sizes: Arc<Mutex<BTreeMap<String, i64>>>,
}

impl Source {
    fn size(&self, key: &str) -> i64 {
        self.sizes.lock().expect("source lock").get(key).copied().unwrap_or(0)
    }

    fn grow(&self, key: &str, by: i64) {
        *self.sizes.lock().expect("source lock").entry(key.to_owned()).or_default() += by;
    }
}

/// What the replicas did, for the checks.
#[derive(Default)]
struct Journal {
    /// (replica, key, cursor handed to poll).
    handed: Vec<(String, String, i64)>,
    /// (replica, key) polls with the replica's active set of the cycle.
    polls_outside_active: Vec<String>,
    /// Active sets that held a config the replica's store had suspended or deleted.
    stale_active: Vec<String>,
    /// Polls while the replica held no token.
    standby_polls: Vec<String>,
    /// Shared-state seeds: polls whose state key was not the account as written, or whose
    /// config was not the enriched one (CFG-30).
    wrong_state: Vec<String>,
}

/// Per replica: its latest active set, and its store's suspended/absent keys.
#[derive(Default)]
struct ReplicaSide {
    active: BTreeSet<String>,
    /// Keys the store holds and does not suspend.
    pollable: Option<BTreeSet<String>>,
}

/// The paging extractor of one replica.
struct Pager {
    name: String,
    source: Source,
    view: Arc<ReplicaView>,
    journal: Arc<Mutex<Journal>>,
    side: Arc<Mutex<ReplicaSide>>,
    /// Probability that a page fails in its middle (the source errs).
    error_rate: f64,
    /// Shared-state seeds: how many accounts share the feeds, and the enricher.
    shared: Option<(u32, Directory)>,
}

impl Pager {
    /// Shared-state seeds: what is wrong with a poll's state key or config (CFG-30), if anything.
    fn wrong_state(&self, key: &str, state_key: &str, config: &Config) -> Option<String> {
        let (accounts, _) = self.shared.as_ref()?;
        let feed: u32 = key.strip_prefix("feed-")?.parse().ok()?;
        let account = account_of(feed, *accounts);
        if state_key != account {
            return Some(format!("{}: {key} (account {account}) polled under state key {state_key:?}", self.name));
        }
        match config.get(&ACCOUNT) {
            Ok(Some(name)) if name.starts_with(&format!("{account} (directory v")) => None,
            other => Some(format!("{}: {key} polled with a config not enriched: account {other:?}", self.name)),
        }
    }
}

impl Extractor for Pager {
    fn config_topics(&self) -> Vec<String> {
        vec![CONFIGS.to_owned()]
    }

    async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let key = page.key().to_owned();
        // Shared-state seeds: the account's feeds keep their cursors in one map.
        let mut cursors = match self.shared {
            Some(_) => Some(state.get(&CURSORS)?.unwrap_or_default()),
            None => None,
        };
        let mut cursor = match &cursors {
            Some(cursors) => cursors.get(&key).copied().unwrap_or(0),
            None => state.get(&CURSOR)?.unwrap_or(0),
        };
        {
            let mut journal = self.journal.lock().expect("journal lock");
            journal.handed.push((self.name.clone(), key.clone(), cursor));
            if let Some(wrong) = self.wrong_state(&key, page.state_key(), &config) {
                journal.wrong_state.push(wrong);
            }
            if !self.side.lock().expect("side lock").active.contains(&key) {
                journal.polls_outside_active.push(format!("{} polled {key} outside its active set", self.name));
            }
            if self.view.tokens.load(Ordering::SeqCst) == 0 {
                journal.standby_polls.push(format!("{} polled {key} holding no token", self.name));
            }
        }
        let owner = format!("{}:{}", self.name, self.view.grants.load(Ordering::SeqCst));
        for _ in 0..thread_rng().gen_range(1..4) {
            let available = self.source.size(&key);
            if available <= cursor {
                break;
            }
            let last = available.min(cursor + thread_rng().gen_range(1..=5));
            for seq in cursor + 1..=last {
                let value = Event::new().with(&SEQ, seq)?.with(&OWNER, owner.clone())?;
                page.send(Message::new(OUTPUT, key.as_str(), value)).await?;
                if thread_rng().gen_bool(self.error_rate) {
                    return Err(format!("the source failed in the middle of a page of {key}").into());
                }
            }
            if thread_rng().gen_bool(0.05) {
                // A slow page: the transaction stays open meanwhile.
                sleep(Duration::from_millis(thread_rng().gen_range(100..3_000))).await;
            }
            cursor = last;
            match &mut cursors {
                Some(cursors) => {
                    cursors.insert(key.clone(), cursor);
                    state.set(&CURSORS, cursors.clone())?;
                }
                None => state.set(&CURSOR, cursor)?,
            }
            page.commit(state.clone()).await?;
        }
        Ok(())
    }

    fn extract_state_key(&self, key: &str, config: &Config) -> String {
        match self.shared {
            Some(_) => config.get(&ACCOUNT).ok().flatten().unwrap_or_else(|| key.to_owned()),
            None => key.to_owned(),
        }
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.shared.as_ref().map(|(_, directory)| directory as &dyn EnrichConfig)
    }

    async fn on_active_configs(&self, active: &BTreeMap<String, Config>) -> Result<(), BoxError> {
        let mut side = self.side.lock().expect("side lock");
        let keys: BTreeSet<String> = active.keys().cloned().collect();
        if let Some(pollable) = &side.pollable {
            for key in keys.difference(pollable) {
                self.journal
                    .lock()
                    .expect("journal lock")
                    .stale_active
                    .push(format!("{}: {key} active although its store suspends or lacks it", self.name));
            }
        }
        side.active = keys;
        Ok(())
    }
}

/// Observes a replica for the harness, and tracks which keys its store lets it poll.
struct PagerObserver {
    inner: ReplicaObserver,
    side: Arc<Mutex<ReplicaSide>>,
}

impl Observer for PagerObserver {
    fn tokens_assigned(&self, count: usize) {
        self.inner.tokens_assigned(count);
    }

    fn config_store_updated(&self, store: &dyn ConfigView) {
        self.inner.config_store_updated(store);
        let pollable = store
            .to_map()
            .into_iter()
            .filter(|(_, bytes)| !bytes.windows(16).any(|w| w == b"\"suspended\":true"))
            .map(|(key, _)| key)
            .collect();
        self.side.lock().expect("side lock").pollable = Some(pollable);
    }
}

/// Maintains the config topic: keys added over time, some suspended and resumed, some deleted.
async fn write_configs(
    kafka: KafkaClient,
    ctx: Ctx,
    keys: u32,
    accounts: Option<u32>,
    writes: usize,
    period: Duration,
) {
    let producer = kafka.producer(ProducerConfig::idempotent("config-writer")).expect("producer");
    let gap_max = (period.as_millis() as u64 / writes.max(1) as u64).max(2);
    let mut deliveries = Vec::new();
    let write = |key: String, value: Option<Bytes>| {
        ctx.event(format!("config writer: {key}: {:?}", value.as_deref().map(String::from_utf8_lossy)));
        ProducerRecord { value, ..ProducerRecord::new(CONFIGS, key, Vec::new()) }
    };
    // Shared-state seeds: every config names its account.
    let account = |k: u32| match accounts {
        Some(accounts) => format!(r#","account":"{}""#, account_of(k, accounts)),
        None => String::new(),
    };
    // Every key starts active.
    for k in 0..keys {
        let record = write(format!("feed-{k}"), Some(Bytes::from(format!(r#"{{"feed":{k}{}}}"#, account(k)))));
        if let Ok(delivery) = producer.send(record).await {
            deliveries.push(delivery);
        }
    }
    for _ in 0..writes {
        sleep(Duration::from_millis(thread_rng().gen_range(1..gap_max))).await;
        let k = thread_rng().gen_range(0..keys);
        let value = match thread_rng().gen_range(0..10) {
            0 => None,
            1 => Some(Bytes::from(format!(r#"{{"feed":{k}{},"suspended":true}}"#, account(k)))),
            _ => Some(Bytes::from(format!(r#"{{"feed":{k}{}}}"#, account(k)))),
        };
        let record = write(format!("feed-{k}"), value);
        if let Ok(delivery) = producer.send(record).await {
            deliveries.push(delivery);
        }
    }
    for delivery in deliveries {
        let _ = delivery.await;
    }
    producer.close().await;
    ctx.event("config writer: done");
}

/// Grows the source while the faults run, and (shared-state seeds) renames the directory's
/// accounts now and then.
async fn grow(source: Source, keys: u32, period: Duration, directory: Option<Directory>) {
    let end = madsim::time::Instant::now() + period;
    while madsim::time::Instant::now() < end {
        source.grow(&format!("feed-{}", thread_rng().gen_range(0..keys)), thread_rng().gen_range(1..4));
        if let Some(directory) = &directory {
            if thread_rng().gen_bool(0.05) {
                directory.version.fetch_add(1, Ordering::SeqCst);
            }
        }
        sleep(Duration::from_millis(thread_rng().gen_range(20..300))).await;
    }
}

/// The config topic's compaction: per key, `Some(true)` active, `Some(false)` suspended, `None`
/// deleted.
fn config_states(cluster: &Cluster) -> BTreeMap<String, Option<bool>> {
    let mut states = BTreeMap::new();
    for record in truth::committed_records(cluster, CONFIGS) {
        let state = match record.value.as_deref() {
            None | Some(b"") | Some(b"{}") => None,
            Some(bytes) => Some(!bytes.windows(16).any(|w| w == b"\"suspended\":true")),
        };
        states.insert(key_of(&record), state);
    }
    states
}

fn key_of(record: &RawRecord) -> String {
    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned()
}

fn decoded(record: &RawRecord) -> Option<Event> {
    flechtwerk::wire::decode_value(record.value.as_deref()).ok().map(Event::wrap)
}

/// The per-feed cursors a changelog record holds: the feed's own (its key is the feed's), or
/// the map of an account's feeds (its key is the account's).
fn changelog_cursors(record: &RawRecord) -> Vec<(String, i64)> {
    let Some(state) = decoded(record) else { return Vec::new() };
    if let Ok(Some(cursors)) = state.get(&CURSORS) {
        return cursors.into_iter().collect();
    }
    state.get(&CURSOR).ok().flatten().map(|cursor| (key_of(record), cursor)).into_iter().collect()
}

/// Per key, the committed outputs' (seq, owner) in output order.
fn outputs_per_key(cluster: &Cluster) -> BTreeMap<String, Vec<(i64, String)>> {
    let mut per_key: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for record in truth::committed_records(cluster, OUTPUT) {
        if let Some(v) = decoded(&record) {
            let (Ok(seq), Ok(owner)) = (v.require(&SEQ), v.require(&OWNER)) else { continue };
            per_key.entry(key_of(&record)).or_default().push((seq, owner));
        }
    }
    per_key
}

fn extracted_everything(cluster: &Cluster, source: &Source, wanted: &BTreeMap<String, Option<bool>>) -> bool {
    let outputs = outputs_per_key(cluster);
    let caught_up = wanted.iter().filter(|(_, w)| **w == Some(true)).all(|(key, _)| {
        outputs.get(key).map_or(0, |o| o.iter().map(|(s, _)| *s).max().unwrap_or(0)) >= source.size(key)
    });
    caught_up
        && truth::no_open_transactions(cluster, OUTPUT)
        && truth::no_open_transactions(cluster, &format!("{APP}-changelog"))
}

/// One run: set-up, the replicas under the fault schedule while the config writer and the
/// source grow, quiescence (everything extracted, the group settled), the checks.
async fn run(ctx: Ctx, held_writes: bool) {
    let profile = FaultProfile {
        session_timeout: SESSION_TIMEOUT,
        transaction_timeout: Duration::from_secs(600),
        pause_past_transaction_timeout: 0.02,
        zombie_wakes: ZOMBIE_WAKES,
        failing_page_commits: FAILING_PAGE_COMMITS,
        ..FaultProfile::everything()
    };
    if thread_rng().gen_bool(profile.buggify) {
        madsim::buggify::enable();
        ctx.event("buggify on");
    }
    let cluster = Cluster::start(&ctx);
    if held_writes {
        cluster.set_request_timeout(KAFKA_REQUEST_TIMEOUT);
        ctx.event(format!("request timeout {KAFKA_REQUEST_TIMEOUT:?}; zombies frozen with their changelog write held"));
    }
    let plan = draw_plan(&ctx, &cluster, &profile, held_writes);
    let directory = Directory::default();
    // The changelog is created here, uncompactable within a run (its segment never rolls): the
    // cursor checks read its whole history. The engine adopts it.
    let changelog = topic(format!("{APP}-changelog"), plan.changelog_partitions, true).config("segment.ms", "86400000");
    let topics = vec![topic(CONFIGS, plan.partitions, true), topic(OUTPUT, 2, false), changelog];
    crate::harness::setup(&cluster, topics, Vec::new()).await;

    let source = Source::default();
    for k in 0..plan.keys {
        source.grow(&format!("feed-{k}"), thread_rng().gen_range(1..20));
    }
    let journal: Arc<Mutex<Journal>> = Arc::default();
    let disk = SimDisk::default();
    let launch = launch(&plan, &source, &journal, &directory);
    let mut replicas = Replicas::start(&cluster, &ctx, &disk, launch, plan.replica_count, REPLICAS_MAX);
    replicas.aim_directions(Aims { held_write: held_writes, ..aims(&plan, &source) });
    if plan.slow_changelog {
        ctx.event("changelog markers late all through the fault period");
        replicas.set_baseline_markers(MarkerFaults {
            delay: 0.5,
            delay_max: Duration::from_secs(3),
            only_targets_containing: Some("-changelog/".to_owned()),
            ..MarkerFaults::default()
        });
    }
    let writer = Handle::current().create_node().name("config-writer").ip(cluster.client_ip()).build();
    let writing = writer.spawn(write_configs(
        cluster.kafka(),
        ctx.clone(),
        plan.keys,
        plan.accounts,
        plan.config_writes,
        plan.period,
    ));
    let grower = Handle::current().create_node().name("source").build();
    let growing = grower.spawn(grow(source.clone(), plan.keys, plan.period, plan.shared.then(|| directory.clone())));

    replicas.run_faults(&plan.schedule, vec![writing, growing]).await;

    // What the config topic really says (a write the faults refused never happened).
    let wanted = config_states(&cluster);
    await_extracted(&ctx, &cluster, &source, &wanted).await;
    await_settled_group(&ctx, &cluster, &replicas, plan.partitions).await;
    check(&ctx, &cluster, &source, &wanted, &replicas, &journal, plan.partitions as usize);
}

/// What one seed draws for its run: the replicas, the configs and their token space, the
/// source's faults, the fault period and schedule, whether feeds share their account's state.
struct Plan {
    replica_count: usize,
    keys: u32,
    config_writes: usize,
    /// Tokens: the config topic's partitions.
    partitions: u32,
    changelog_partitions: u32,
    error_rate: f64,
    period: Duration,
    /// The changelog's markers land late all through the fault period.
    slow_changelog: bool,
    /// Feeds share their account's state, with an enricher (CFG-30).
    shared: bool,
    /// The accounts whose states the feeds share (`shared` seeds).
    accounts: Option<u32>,
    schedule: FaultSchedule,
}

/// Draws the seed's plan and traces it.
fn draw_plan(ctx: &Ctx, cluster: &Cluster, profile: &FaultProfile, held_writes: bool) -> Plan {
    let (
        replica_count,
        keys,
        config_writes,
        partitions,
        changelog_partitions,
        error_rate,
        period,
        slow_changelog,
        shared,
    ) = {
        let mut rng = thread_rng();
        let partitions = [1u32, 2, 4][rng.gen_range(0..3)];
        // Mostly the layout the runner creates (one changelog partition per token); otherwise
        // a changelog made elsewhere (a Python fleet's has the broker default, 1), whose shared
        // partitions make restores wait for other tokens' open pages (EXT-43).
        let changelog_partitions = match rng.gen_range(0..10) {
            0..=4 => partitions,
            5..=8 => 1,
            _ => partitions + 1,
        };
        (
            rng.gen_range(2..=3usize),
            rng.gen_range(3..12u32),
            rng.gen_range(5..30usize),
            partitions,
            changelog_partitions,
            [0.0, 0.01, 0.03][rng.gen_range(0..3)],
            Duration::from_secs(rng.gen_range(8..30)),
            // Half the seeds: the changelog's markers land late all through the fault period,
            // not only in windows, so pages of several tokens are often completing at once —
            // on a shared changelog partition one of them holds the LSO below the others'
            // committed cursors (EXT-43), and a handover often meets its predecessor's last
            // page still completing (EXT-37).
            rng.gen_bool(0.5),
            // Half the seeds: feeds share their account's state, with an enricher (CFG-30).
            rng.gen_bool(0.5),
        )
    };
    // About three feeds per account.
    let accounts = shared.then(|| (keys / 3).max(1));
    let schedule = profile.on_brokers(cluster.brokers()).generate(&mut thread_rng(), period);
    // The directed episodes after every earlier draw: the seed's faults stay those it drew. The
    // zombies start with the faults (each waits for a replica holding tokens and for the one
    // before it to end), not at their drawn times: a zombie armed late meets the end of the
    // fault period before its takeover.
    //
    // With held writes, every zombie wakes at the fence: the window between the next holder's
    // grant and its fence is the one the held write is for (at a restore the held lookup would
    // see the write, at a first commit the fence has long aborted the zombie's page). And the
    // fence is held 100–400 ms, not seconds: the woken zombie lands its write and commit within
    // about 40 ms, then rejoins the group, and the rebalance that starts takes the grant back
    // (eager) when the next holder learns of it at a heartbeat — a fence held longer than that
    // ends the grant before its first page, and what the restore read never matters.
    let directed = profile.directed(&mut thread_rng(), period).into_iter().map(|mut timed| {
        if let Fault::ZombieWake { step, hold, .. } = &mut timed.fault {
            timed.at = Duration::ZERO;
            if held_writes {
                *step = HandoverStep::Fence;
                *hold = Duration::from_millis(thread_rng().gen_range(100..400));
            }
        }
        timed
    });
    let schedule = schedule.merged(directed.collect());
    ctx.event(format!(
        "extractor: {replica_count} replicas, {keys} configs over {partitions} tokens ({changelog_partitions} changelog \
         partitions), {config_writes} config writes, \
         source error rate {error_rate}, {}, {} faults over {period:?}:\n{schedule}",
        match accounts {
            Some(accounts) => format!("feeds sharing the states of {accounts} accounts, enriched"),
            None => "a state per feed".to_owned(),
        },
        schedule.len()
    ));
    Plan {
        replica_count,
        keys,
        config_writes,
        partitions,
        changelog_partitions,
        error_rate,
        period,
        slow_changelog,
        shared,
        accounts,
        schedule,
    }
}

/// How the directed episodes are aimed: token zombies (frozen before a page's changelog record,
/// spared by the other faults, outlasting the fault period), and in the shared-state seeds
/// failing commits only for pages of a feed that another feed of its account follows in the
/// token's cycle (wire-key order), which then has new items (the source grows), so the cycle
/// polls a feed of the failed page's state key next (blind to a state kept from the aborted
/// page, EXT-21/25).
fn aims(plan: &Plan, source: &Source) -> Aims {
    let Some(accounts) = plan.accounts else {
        return Aims { token_zombies: true, ..Aims::default() };
    };
    let keys = plan.keys;
    // The feeds after `key` in wire-key order that share its account.
    let followers = move |key: &str| -> Vec<String> {
        let Some(k) = key.strip_prefix("feed-").and_then(|k| k.parse::<u32>().ok()) else { return Vec::new() };
        (0..keys)
            .filter(|&j| j % accounts == k % accounts)
            .map(|j| format!("feed-{j}"))
            .filter(|later| later.as_str() > key)
            .collect()
    };
    let grown = source.clone();
    let followed = followers;
    Aims {
        token_zombies: true,
        held_write: false,
        page_aim: Some(Arc::new(move |key: &str, _state_key: &str| !followed(key).is_empty())),
        page_failed: Some(Arc::new(move |key: &str, _state_key: &str| {
            for later in followers(key) {
                grown.grow(&later, 2);
            }
        })),
    }
}

/// The replicas' launch: each start builds a paging extractor over the shared source, its
/// polls journaled for the checks.
fn launch(plan: &Plan, source: &Source, journal: &Arc<Mutex<Journal>>, directory: &Directory) -> Launch {
    let (error_rate, accounts) = (plan.error_rate, plan.accounts);
    let (source, journal, directory) = (source.clone(), journal.clone(), directory.clone());
    Arc::new(move |env: ReplicaEnv| {
        let (source, journal, directory) = (source.clone(), journal.clone(), directory.clone());
        Box::pin(async move {
            let side: Arc<Mutex<ReplicaSide>> = Arc::default();
            let stage = Pager {
                name: env.name.clone(),
                source,
                view: env.view.clone(),
                journal,
                side: side.clone(),
                error_rate,
                shared: accounts.map(|accounts| (accounts, directory)),
            };
            let observer = PagerObserver { inner: env.observer(), side };
            let app = Flechtwerk::builder()
                .application_id(APP)
                .client_id(&env.name)
                .kafka(Arc::new(env.kafka.clone()))
                .session_timeout(SESSION_TIMEOUT)
                .poll_interval(Duration::from_millis(thread_rng().gen_range(100..1_000)))
                .replication_factor(env.kafka.replication_factor())
                .observer(Arc::new(observer))
                .state_stores(Arc::new(env.stores.clone()))
                .build(stage)
                .map_err(|e| e.to_string())?;
            app.run_until(env.stop_requested()).await.map_err(|error| error_kind(&error))
        })
    })
}

/// Quiescence: waits, at most [`QUIESCENCE_MAX`], until every active config's items are all
/// extracted and no transaction is open on the output or the changelog.
async fn await_extracted(ctx: &Ctx, cluster: &Cluster, source: &Source, wanted: &BTreeMap<String, Option<bool>>) {
    let deadline = ctx.now() + QUIESCENCE_MAX;
    while !extracted_everything(cluster, source, wanted) && ctx.now() < deadline {
        sleep(Duration::from_secs(1)).await;
    }
}

/// The group settles: every token has one holder (a replica back from a fault may still be
/// rejoining), and one more cycle's worth, so every last reconcile sees the final configs.
/// Settled: the group is stable with exactly the live replicas (a crashed incarnation's
/// member is evicted only at its session timeout, and that rebalances once more).
async fn await_settled_group(ctx: &Ctx, cluster: &Cluster, replicas: &Replicas, partitions: u32) {
    let deadline = ctx.now() + Duration::from_secs(120);
    let alive = replicas.alive().count();
    let settled = |replicas: &Replicas| {
        let members = cluster.inspect(|b| {
            b.group(APP).filter(|g| g.state == crate::cluster::broker::GroupState::Stable).map(|g| g.members.len())
        });
        members == Some(alive)
            && replicas.alive().map(|r| r.view.tokens.load(Ordering::SeqCst)).sum::<usize>() == partitions as usize
    };
    // Settled for a whole session timeout and a bit: a heartbeat delayed by buggify before it
    // was turned off can still evict a member right after the group looked stable.
    let mut stable_since = None;
    while ctx.now() < deadline {
        if settled(replicas) {
            let since = *stable_since.get_or_insert(ctx.now());
            if ctx.now() - since >= SESSION_TIMEOUT + Duration::from_secs(2) {
                break;
            }
        } else {
            stable_since = None;
        }
        sleep(Duration::from_millis(500)).await;
    }
}

/// The checks after quiescence, each family in turn, on the broker's own log and the polls'
/// journal.
fn check(
    ctx: &Ctx,
    cluster: &Cluster,
    source: &Source,
    wanted: &BTreeMap<String, Option<bool>>,
    replicas: &Replicas,
    journal: &Mutex<Journal>,
    tokens: usize,
) {
    let outputs = outputs_per_key(cluster);
    check_outputs(ctx, &outputs);
    check_extracted(ctx, &outputs, source, wanted, replicas);
    let journal = journal.lock().expect("journal lock");
    check_cursors(ctx, cluster, &journal);
    // EXT-01, EXT-41: a replica polls only the configs of the active set it last reported
    // through on_active_configs, and only while it holds tokens; CFG-30: under the state key
    // extract_state_key gave the config, with the config enriched.
    for v in journal
        .polls_outside_active
        .iter()
        .chain(&journal.stale_active)
        .chain(&journal.standby_polls)
        .chain(&journal.wrong_state)
        .take(5)
    {
        ctx.violation(v.clone());
    }
    let held: usize = replicas.alive().map(|r| r.view.tokens.load(Ordering::SeqCst)).sum();
    if held != tokens {
        ctx.violation(format!("after quiescence the replicas hold {held} tokens of {tokens}"));
    }
    ctx.event(format!(
        "end: {} keys with output, {} items, {} polls",
        outputs.len(),
        outputs.values().map(Vec::len).sum::<usize>(),
        journal.handed.len()
    ));
}

/// Per key, the emitted sequence numbers are exactly 1..n in order, and each owner emits one
/// contiguous run (no two owners interleave).
fn check_outputs(ctx: &Ctx, outputs: &BTreeMap<String, Vec<(i64, String)>>) {
    for (key, emitted) in outputs {
        // EXT-18: each poll starts from the state read fresh from the store (a stale one repeats
        // items), as every page's outputs are committed with its cursor.
        let seqs: Vec<i64> = emitted.iter().map(|(s, _)| *s).collect();
        let want: Vec<i64> = (1..=seqs.len() as i64).collect();
        if seqs != want {
            let repeats = seqs.len() - seqs.iter().collect::<BTreeSet<_>>().len();
            ctx.violation(format!(
                "exactly-once: {key} emitted {} items, not 1..n in order ({repeats} repeats; first 20: {:?})",
                seqs.len(),
                &emitted[..emitted.len().min(20)]
            ));
        }
        // Each owner emits one contiguous run.
        let mut seen = BTreeSet::new();
        let mut previous: Option<&String> = None;
        for (_, owner) in emitted {
            if previous != Some(owner) {
                if !seen.insert(owner.clone()) {
                    ctx.violation(format!("{key}: owner {owner} emitted again after another owner (interleaving)"));
                    break;
                }
                previous = Some(owner);
            }
        }
    }
}

/// Every config still active at the end had all of its source's items extracted.
fn check_extracted(
    ctx: &Ctx,
    outputs: &BTreeMap<String, Vec<(i64, String)>>,
    source: &Source,
    wanted: &BTreeMap<String, Option<bool>>,
    replicas: &Replicas,
) {
    for (key, state) in wanted {
        if *state == Some(true) {
            let got = outputs.get(key).map_or(0, |o| o.len() as i64);
            let size = source.size(key);
            if got != size {
                let views: Vec<String> = replicas
                    .alive()
                    .map(|r| {
                        let view = r.view.configs.lock().expect("view lock");
                        let value =
                            view.as_ref().and_then(|c| c.get(key)).map(|b| String::from_utf8_lossy(b).into_owned());
                        format!("{}={value:?}", r.name)
                    })
                    .collect();
                ctx.violation(format!(
                    "{key} is active but {got} of its {size} items were extracted (stores: {views:?})"
                ));
            }
        }
    }
}

/// Changelog cursors never regress, and every cursor a poll was handed was committed by some
/// page (never one of an aborted page).
fn check_cursors(ctx: &Ctx, cluster: &Cluster, journal: &Journal) {
    let mut committed: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for record in truth::committed_records(cluster, &format!("{APP}-changelog")) {
        for (key, cursor) in changelog_cursors(&record) {
            if last.get(&key).is_some_and(|previous| cursor < *previous) {
                ctx.violation(format!("cursor of {key} regressed in the changelog: {} then {cursor}", last[&key]));
            }
            last.insert(key.clone(), cursor);
            committed.entry(key).or_default().insert(cursor);
        }
    }
    // EXT-23: a page that failed or aborted leaves the stored state as it was, so no poll is
    // handed a cursor that no page committed.
    for (replica, key, cursor) in &journal.handed {
        if *cursor != 0 && !committed.get(key).is_some_and(|c| c.contains(cursor)) {
            ctx.violation(format!("{replica} was handed cursor {cursor} of {key}, which no page committed"));
        }
    }
}
