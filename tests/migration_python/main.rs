//! Live migration between Python flechtwerk 0.17.0 and this library, on Apache Kafka, with the
//! real Python implementation (docs/compatibility.md, "Migrating from Python"). Seven scenarios
//! run side by side, each on its own topics and `application_id`:
//!
//! - **cut-over, stopped** and **cut-over, killed**: a Python counter application
//!   (`benches/python/counter_app.py`) processes part of a paced input; it is stopped (SIGTERM,
//!   a clean shutdown) or SIGKILLed while one of its transactions is open; a Rust instance of an
//!   equivalent stage with the same `application_id` takes over (fences Python's producers,
//!   restores the changelog Python wrote, continues from the committed offsets: LIFE-03's shared
//!   names, TRX-31's fence-then-restore); later it is
//!   stopped or killed the same way and a Python instance takes the application back. The
//!   committed output must count every key exactly 1..n, each count attached to the key's n-th
//!   input, and the changelog must end at n. The killed run also checks that the kill landed
//!   mid-transaction (an output or changelog partition's last stable offset below its high
//!   watermark once the process is dead) and that the successor aborted that transaction by
//!   fencing it, well before the 60 s transaction timeout could have.
//! - **rolling replacement**: two Python replicas, each replaced in turn by a Rust replica while
//!   the input flows (start the Rust replica, wait until a mixed group of Python and Rust members
//!   all hold tasks, stop the Python one). Same output check.
//! - **config topics**: a Python and a Rust stage each write a config topic from the same
//!   commands (puts, the three tombstone forms, non-canonical JSON, Unicode, a keyless record);
//!   every key's records are byte-identical in both topics, and the config store Python builds
//!   from either topic equals the one the Rust engine builds (after its bootstrap, and after it
//!   drained a second round of commands while running).
//!
//! - **extractor cut-over**: a Python paging extractor (`tests/python/migration.py extractor`)
//!   pages through 12 feeds of a deterministic source, one transaction per page, its cursors in
//!   the changelog; it is SIGKILLed mid-page, a Rust instance of the same extractor (the child
//!   `extractor`) takes over its tokens (fences Python's token producers, restores Python's
//!   cursors), is SIGKILLed mid-page in turn, and Python finishes. The feeds of an account share
//!   one state, keyed by the account the config was written with, while both sides enrich the
//!   configs with a rewritten account (CFG-30: a Rust state key taken from the enriched config
//!   would find no cursor and repeat pages). Every feed's committed output must be exactly 1..n
//!   in order, the changelog's last state per account must hold every feed's last cursor, and
//!   the changelog must have no key but the accounts.
//! - **extractor rolling replacement**: two Python extractor replicas, each replaced in turn by a
//!   Rust replica while they extract (mixed groups of both sharing the tokens). Same checks.
//! - **secrets** (feature `secrets`): a Python ledger (`tests/python/migration.py secrets`) whose
//!   config field and state field are `ENCRYPTED`, under a keyring file made with Python's
//!   `flechtctl`, is taken over by the Rust one and back (clean stops), each opening the state
//!   tokens the other sealed; then a Python and a Rust replica share the tasks while the key is
//!   rotated with both implementations' `flechtctl` (a new key, rolled out; made the primary,
//!   rolled out; the configs re-sealed and written back; the old key removed, rolled out). Every
//!   output's count, running total and proof over the decrypted values must be right, no topic
//!   may hold a plaintext, and the old keyring must refuse the new tokens by name.
//!
//! Each cut-over's output, written by Python and Rust in turn, is read back by a Python consumer
//! through the package's own decoder (`tests/python/migration.py read`): the same records and
//! bytes as the Rust reader sees.
//!
//! Needs `--features rdkafka`, a broker at `KAFKA_BOOTSTRAP` and the Python reference:
//! `PYTHON_REF` (else `scripts/python-ref` is run to find or install it). One binary, several
//! roles: without arguments it is the test; the Rust instances it starts are this binary with
//! `--child ...`. Every child's stdout and stderr are kept in a log file under the temp dir,
//! named in the failure message.
//!
//! `FLECHTWERK_MIGRATION_SCENARIOS=stop,kill,rolling,configs,extractor,extractor-rolling,secrets`
//! runs a subset. Planted bugs (`FLECHTWERK_MIGRATION_MUTANT`, for showing the checks can fail;
//! the results are in docs/compatibility.md): `app-id` (the Rust instances use another
//! `application_id`), `forget` (the Rust stage's state store forgets everything: a stage that
//! does not restore), `quoted-key` (the Rust config writer JSON-quotes its keys), `plain-secret`
//! (the Rust ledger writes its sealed state field in plaintext), `wrong-key` (the Rust ledger
//! holds other keys under the keyring file's kids).
//!
//! One file per subject:
//! - `cutover.rs`: the cut-overs, stopped and killed (and how a switch is made and a fence timed);
//! - `rolling.rs`: the rolling replacement;
//! - `configs.rs`: the config topics;
//! - `extractor_cutover.rs` and `extractor_rolling.rs`: the extractor's cut-over and rolling
//!   replacement, on the topics, Python replicas and checks of `extraction.rs`;
//! - `secrets.rs`: the secrets scenario;
//! - `process.rs`: the child processes and what their output reports;
//! - `children.rs`: the Rust side, the stages this binary runs as `--child`;
//! - `topics.rs`: topics, the paced feed, committed progress, open transactions;
//! - `checks.rs`: the checks of a counter's output and changelog, and the Python reader's view;
//! - this file: the environment, the constants, the scenarios' setup, and the scenario table.

mod checks;
#[path = "../child_support/mod.rs"]
mod child_support;
mod children;
mod configs;
mod cutover;
mod extraction;
mod extractor_cutover;
mod extractor_rolling;
mod process;
#[path = "../python_support/mod.rs"]
mod python_support;
mod rolling;
#[cfg(feature = "secrets")]
mod secrets;
mod topics;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::attribute::{dict, Attribute, INT, STR};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::Kafka;

use crate::children::child;
use crate::configs::configs;
use crate::cutover::{cutover, Switch};
use crate::extractor_cutover::extractor_cutover;
use crate::extractor_rolling::extractor_rolling;
use crate::process::Proc;
pub(crate) use crate::python_support::{python_ref, repo};
use crate::rolling::rolling;

/// The count, in the state and in every output value, as `benches/python/counter_app.py` names it.
const SEEN: Attribute<i64> = Attribute::new("seen", &INT);
/// The input's index, in every input value (and so in every output value).
const I: Attribute<i64> = Attribute::new("i", &INT);

const PARTITIONS: u32 = 4;

/// The extractor scenarios' records, as `tests/python/migration.py` names them: a config's feed
/// number, item count and account, an output's feed, sequence number and implementation, the
/// state's cursors (per feed key, in the state its account's feeds share).
const FEED: Attribute<i64> = Attribute::new("feed", &INT);
const ITEMS: Attribute<i64> = Attribute::new("items", &INT);
const ACCOUNT: Attribute<String> = Attribute::new("account", &STR);
const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const IMPL: Attribute<String> = Attribute::new("impl", &STR);
const CURSORS: Attribute<BTreeMap<String, i64>> = Attribute::new("cursors", &dict(INT));
/// Feeds (configs) of the extractor scenarios, over `ACCOUNTS` accounts.
const FEEDS: i64 = 12;
const ACCOUNTS: i64 = 4;
/// Items per feed in the cut-over and in the rolling replacement (a config's `items`).
const CUTOVER_ITEMS: i64 = 300;
const ROLLING_ITEMS: i64 = 400;
/// Items per page (one page per poll), as in `migration.py`.
const PAGE_ITEMS: i64 = 5;
/// A pause after each item, so that a page's transaction stays open long enough to be killed in.
const ITEM_PAUSE: Duration = Duration::from_millis(10);
/// Inputs of one counter scenario, over `KEYS` keys (key-k gets inputs k, k + KEYS, ...).
const INPUTS: usize = 20_000;
const KEYS: usize = 1_000;
/// The feed: `CHUNK` inputs every `PACE` (500 inputs/s at most, so 40 s at least), held back
/// by `LEAD` when the consumers fall behind, so every switch happens while input flows.
const CHUNK: usize = 100;
const PACE: Duration = Duration::from_millis(200);
/// How far the feed may run ahead of the committed input (see `feed`).
const LEAD: usize = 3_000;
/// The transaction timeout of both implementations' task producers (aiokafka's default and
/// ours): a transaction aborted earlier than this after the kill was aborted by a fence.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// What the killed run allows from the kill to the abort of the victim's open transaction: the
/// victim's session timeout (10 s in both) plus a rebalance and the successor's task start, far
/// below the transaction timeout.
const FENCE_MAX: Duration = Duration::from_secs(45);
/// Kill attempts before the killed run gives up finding an open transaction to kill into.
const KILL_ATTEMPTS: usize = 12;
/// How long a frozen victim's transaction must stay open before the kill (see `switch_off`).
const FROZEN_SETTLE: Duration = Duration::from_secs(1);
/// Upper bound for any one phase (a group to settle, a backlog to drain).
const PHASE_MAX: Duration = Duration::from_secs(150);

fn bootstrap() -> String {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    assert!(!bootstrap.is_empty(), "KAFKA_BOOTSTRAP is not set: run through scripts/test");
    bootstrap
}

fn mutant() -> String {
    std::env::var("FLECHTWERK_MIGRATION_MUTANT").unwrap_or_default()
}

fn kafka() -> Arc<dyn Kafka> {
    Arc::new(RdKafka::new(bootstrap()))
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
}

/// Runs a future to completion on this thread's runtime (the scenarios are threads).
fn block<F: std::future::Future>(future: F) -> F::Output {
    RUNTIME.with(|rt| rt.block_on(future))
}

fn wait_until(what: &str, max: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + max;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {max:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Setup {
    python: PathBuf,
    logs: PathBuf,
    prefix: String,
}

impl Setup {
    fn python_counter(&self, name: &str, app: &str, client: &str) -> Proc {
        let (input, output) = (format!("{}-in", self.prefix), format!("{}-out", self.prefix));
        Proc::python(
            name,
            &self.python,
            "benches/python/counter_app.py",
            &["--bootstrap", &bootstrap(), "--input", &input, "--output", &output, "--app", app, "--client", client],
            &self.logs,
        )
    }

    fn rust_counter(&self, name: &str, app: &str, client: &str) -> Proc {
        let app = if mutant() == "app-id" { format!("{app}-mutant") } else { app.to_owned() };
        let (input, output) = (format!("{}-in", self.prefix), format!("{}-out", self.prefix));
        Proc::rust(name, &["counter", &app, client, &input, &output], &self.logs)
    }

    /// The group whose offsets show a Rust counter's progress (another one under `app-id`).
    fn rust_group(&self, app: &str) -> String {
        if mutant() == "app-id" {
            format!("{app}-mutant")
        } else {
            app.to_owned()
        }
    }
}

fn parent() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    let run = format!("migration-{nanos:x}");
    let logs = std::env::temp_dir().join(&run);
    std::fs::create_dir_all(&logs).expect("log dir");
    let python = python_ref();
    let mutant = mutant();
    if !mutant.is_empty() {
        println!("migration: planted bug {mutant:?}: this run must fail");
    }
    println!("migration: Python {} , logs in {}", python.display(), logs.display());
    // One log directory per scenario: the cut-overs name their processes alike.
    let setup = |name: &str| {
        let logs = logs.join(name);
        std::fs::create_dir_all(&logs).expect("scenario log dir");
        Setup { python: python.clone(), logs, prefix: format!("{run}-{name}") }
    };
    type Scenario = Box<dyn FnOnce() -> String + Send>;
    let scenarios: Vec<(&str, Scenario)> = vec![
        (
            "stop",
            Box::new({
                let s = setup("stop");
                move || cutover(s, Switch::Stop)
            }),
        ),
        (
            "kill",
            Box::new({
                let s = setup("kill");
                move || cutover(s, Switch::Kill)
            }),
        ),
        (
            "rolling",
            Box::new({
                let s = setup("rolling");
                move || rolling(s)
            }),
        ),
        (
            "configs",
            Box::new({
                let s = setup("configs");
                move || configs(s)
            }),
        ),
        (
            "extractor",
            Box::new({
                let s = setup("extractor");
                move || extractor_cutover(s)
            }),
        ),
        (
            "extractor-rolling",
            Box::new({
                let s = setup("extractor-rolling");
                move || extractor_rolling(s)
            }),
        ),
        #[cfg(feature = "secrets")]
        (
            "secrets",
            Box::new({
                let s = setup("secrets");
                move || crate::secrets::secrets(s)
            }),
        ),
    ];
    if cfg!(not(feature = "secrets")) {
        println!("migration: the secrets scenario needs the feature secrets (not built here)");
    }
    // `FLECHTWERK_MIGRATION_SCENARIOS=stop,kill,rolling,configs,extractor,extractor-rolling,secrets`
    // (a comma-separated subset) runs only those: for running one planted bug against the scenario
    // that should catch it.
    let only = std::env::var("FLECHTWERK_MIGRATION_SCENARIOS").unwrap_or_default();
    let only: Vec<&str> = only.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let scenarios: Vec<(&str, Scenario)> =
        scenarios.into_iter().filter(|(name, _)| only.is_empty() || only.contains(name)).collect();
    assert!(
        !scenarios.is_empty(),
        "FLECHTWERK_MIGRATION_SCENARIOS={only:?} names no scenario (stop, kill, rolling, configs, extractor, extractor-rolling, \
         secrets with the feature secrets)"
    );
    let started = Instant::now();
    let handles: Vec<_> = scenarios.into_iter().map(|(name, f)| (name, std::thread::spawn(f))).collect();
    let mut failed = Vec::new();
    for (name, handle) in handles {
        match handle.join() {
            Ok(summary) => println!("migration: {summary}"),
            Err(_) => failed.push(name),
        }
    }
    assert!(failed.is_empty(), "migration scenarios failed: {failed:?} (logs in {})", logs.display());
    let hung = crate::process::HUNG_PYTHON_STOPS.lock().unwrap().clone();
    if !hung.is_empty() {
        println!(
            "migration: Python replicas hung on a clean stop and were SIGKILLed (docs/compatibility.md hazard 10): {}",
            hung.join("; ")
        );
    }
    println!("migration: all scenarios passed in {:.0} s", started.elapsed().as_secs_f64());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--child") => {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            runtime.block_on(child(&args[1..]));
        }
        // cargo test passes harness flags (e.g. --nocapture); they mean nothing here.
        _ => parent(),
    }
}
