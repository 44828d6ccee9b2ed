//! The Rust side: the stages this binary runs as `--child` (the counter, the forwarder, the
//! config-store reader, the paging extractor, the secrets scenario's ledger), with the observer
//! whose lines the parent reads and the `forget` mutant's state stores.

use std::sync::Arc;
use std::time::Duration;

use flechtwerk::observer::{ConfigView, Observer};
use flechtwerk::stage::{BoxError, EnrichConfig};
use flechtwerk::state::{StateError, StateStore, StateStores};
use flechtwerk::{transformer, Config, Event, Extractor, Flechtwerk, Message, Page, State, Transformer};

use crate::child_support;
use crate::{hex, kafka, mutant, ACCOUNT, CURSORS, FEED, IMPL, ITEMS, ITEM_PAUSE, PAGE_ITEMS, SEEN, SEQ};

/// Prints what the parent watches: task counts, restored entries, the config store.
struct Printer;

impl Observer for Printer {
    fn tasks_assigned(&self, count: usize) {
        println!("tasks {count}");
    }
    fn tokens_assigned(&self, count: usize) {
        println!("tokens {count}");
    }
    fn state_restored(&self, partition: i32, count: usize) {
        println!("restored {partition} {count}");
    }
    fn config_store_updated(&self, store: &dyn ConfigView) {
        let entries: Vec<String> =
            store.to_map().iter().map(|(k, v)| format!("{}={}", hex(k.as_bytes()), hex(v))).collect();
        println!("store {}", entries.join(","));
    }
}

/// The `forget` mutant's state: nothing is kept, so nothing restored is ever seen.
struct Forgetful;

impl StateStore for Forgetful {
    fn get(&mut self, _key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }
    fn put(&mut self, _key: &str, _value: &[u8]) -> Result<(), StateError> {
        Ok(())
    }
    fn delete(&mut self, _key: &str) -> Result<(), StateError> {
        Ok(())
    }
    fn wipe(&mut self) -> Result<(), StateError> {
        Ok(())
    }
}

impl StateStores for Forgetful {
    fn open(&self, _application_id: &str, _partition: i32) -> Result<Box<dyn StateStore>, StateError> {
        Ok(Box::new(Forgetful))
    }
}

/// `benches/python/counter_app.py`'s stage in Rust: the key's state gets `seen` += 1 (from 0),
/// and one output under the same key carries the input value with `seen` added (a tombstone
/// input: only `seen`).
fn counter(input: &str, output: &str) -> impl Transformer + use<> {
    let output = output.to_owned();
    transformer([input]).transform(move |msg, mut state, out| {
        let seen = state.get(&SEEN)?.unwrap_or(0) + 1;
        state.set(&SEEN, seen)?;
        let value = msg.value.unwrap_or_default().with(&SEEN, seen)?;
        out.send(Message::new(output.as_str(), msg.key.as_str(), value));
        out.set_state(state);
        Ok(())
    })
}

/// `tests/python/migration.py forward` in Rust: every input forwarded under its key (a tombstone
/// stays one). The `quoted-key` mutant JSON-quotes the key.
fn forwarder(input: &str, output: &str) -> impl Transformer + use<> {
    let output = output.to_owned();
    let quoted = mutant() == "quoted-key";
    transformer([input]).transform(move |msg, _state, out| {
        let key = if quoted { format!("\"{}\"", msg.key) } else { msg.key };
        out.send(Message::new(output.as_str(), key.as_str(), msg.value));
        Ok(())
    })
}

/// The paging extractor of the extractor cut-over, the same stage as `migration.py extractor`.
struct Pager {
    configs: String,
    output: String,
    enricher: Box<dyn EnrichConfig>,
}

impl Pager {
    fn new(configs: &str, output: &str) -> Self {
        // What the directory lookup of a real enricher would do: rewrite the account. The state
        // key must not see it (CFG-30).
        let enrich = |config: Config| -> Result<Config, BoxError> {
            Ok(match config.get(&ACCOUNT)? {
                Some(account) => config.with(&ACCOUNT, format!("directory:{account}"))?,
                None => config,
            })
        };
        Pager { configs: configs.to_owned(), output: output.to_owned(), enricher: Box::new(enrich) }
    }
}

impl Extractor for Pager {
    fn config_topics(&self) -> Vec<String> {
        vec![self.configs.clone()]
    }

    async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let (feed, items) = (config.require(&FEED)?, config.require(&ITEMS)?);
        let key = format!("feed-{feed}");
        let mut cursors = state.get(&CURSORS)?.unwrap_or_default();
        let cursor = cursors.get(&key).copied().unwrap_or(0);
        let last = (cursor + PAGE_ITEMS).min(items);
        if last <= cursor {
            return Ok(());
        }
        for seq in cursor + 1..=last {
            let value = Event::new().with(&FEED, feed)?.with(&SEQ, seq)?.with(&IMPL, "rust".to_owned())?;
            page.send(Message::new(self.output.as_str(), key.as_str(), value)).await?;
            tokio::time::sleep(ITEM_PAUSE).await;
        }
        cursors.insert(key, last);
        state.set(&CURSORS, cursors)?;
        page.commit(state).await?;
        Ok(())
    }

    fn extract_state_key(&self, key: &str, config: &Config) -> String {
        config.get(&ACCOUNT).ok().flatten().unwrap_or_else(|| key.to_owned())
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        Some(&*self.enricher)
    }
}

/// `tests/python/migration.py secrets` in Rust: the ledger of the secrets scenario. Each input
/// `{"i": i}` joins its account's config, whose `api_key` is sealed for scope `vendor`; the
/// account's state holds `seen` and the sealed `ledger` text `ledger:<key>:<total>`; the output
/// carries the total, a proof over the decrypted API key and the total, and the kids of the
/// state and config tokens read. The `plain-secret` mutant writes the ledger in plaintext (and
/// tolerates reading one back).
#[cfg(feature = "secrets")]
fn ledger(input: &str, output: &str, configs: &str) -> impl Transformer + use<> {
    use flechtwerk::attribute::{encrypted, Attribute, STR};

    use crate::secrets::{proof, token_kid, API_KEY, CONFIG_KID, LEDGER, PROOF, STATE_KID, TOTAL};
    use crate::I;

    const PLAIN_LEDGER: Attribute<String> = Attribute::new("ledger", &STR);
    const TOLERANT_LEDGER: Attribute<String> =
        Attribute::new("ledger", &encrypted(STR).scope("ledger").read_plaintext());
    let plain = mutant() == "plain-secret";
    let output = output.to_owned();
    transformer([input]).config_topics([configs]).transform(move |msg, mut state, out| {
        let config = out.configs().get(&msg.key)?.ok_or_else(|| format!("no config for {:?}", msg.key))?;
        // Both reads decrypt, whoever sealed the token: Python's codec or ours, either key.
        let api_key = config.require(&API_KEY)?;
        let previous = state.get(if plain { &TOLERANT_LEDGER } else { &LEDGER })?;
        let i = msg.value.as_ref().ok_or("a tombstone input")?.require(&I)?;
        let mut total = i;
        if let Some(previous) = previous {
            let prefix = format!("ledger:{}:", msg.key);
            let carried = previous.strip_prefix(&prefix).ok_or("the ledger belongs to another key")?;
            total += carried.parse::<i64>()?;
        }
        let seen = state.get(&SEEN)?.unwrap_or(0) + 1;
        let value = Event::new()
            .with(&I, i)?
            .with(&SEEN, seen)?
            .with(&TOTAL, total)?
            .with(&PROOF, proof(&api_key, total))?
            .with(&IMPL, "rust".to_owned())?
            .with(&STATE_KID, token_kid(state.raw().get("ledger"))?)?
            .with(&CONFIG_KID, token_kid(config.raw().get("api_key"))?)?;
        out.send(Message::new(output.as_str(), msg.key.as_str(), value));
        state.set(&SEEN, seen)?;
        let text = format!("ledger:{}:{total}", msg.key);
        state.set(if plain { &PLAIN_LEDGER } else { &LEDGER }, text)?;
        out.set_state(state);
        Ok(())
    })
}

/// `--child secrets APP CLIENT INPUT OUTPUT CONFIG-TOPIC KEYRING-FILE`: the ledger, with the
/// keyring the file holds (read here: the library reads no file), until SIGTERM or a crash. The
/// `wrong-key` mutant replaces the file's keys by fresh ones under the same kids.
#[cfg(feature = "secrets")]
async fn secrets_child(args: &[String]) {
    let [app, client, input, output, configs, keyring] = args else { panic!("secrets child arguments: {args:?}") };
    let text = std::fs::read_to_string(keyring).unwrap_or_else(|e| panic!("read {keyring}: {e}"));
    let mut keyring = flechtwerk::secrets::Keyring::from_json(&text).expect("a valid keyring file");
    if mutant() == "wrong-key" {
        let kids: Vec<String> = keyring.kids().map(str::to_owned).collect();
        let mut other = flechtwerk::secrets::Keyring::builder();
        for kid in &kids {
            other = other.generate_oct(kid);
        }
        keyring = other.primary(keyring.primary()).build().expect("a keyring");
    }
    let app = builder(app, client).keyring(keyring).build(ledger(input, output, configs)).expect("valid settings");
    child_support::run_until_sigterm(app).await;
}

fn builder(app: &str, client: &str) -> flechtwerk::FlechtwerkBuilder {
    // The child's logs go to its log file with its output (`RUST_LOG`, e.g. `flechtwerk=debug`,
    // to see a scenario's engine; warnings by default).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    Flechtwerk::builder()
        .application_id(app)
        .client_id(client)
        .kafka(kafka())
        .replication_factor(1)
        .observer(Arc::new(Printer))
}

/// `--child counter|forward|config-store APP CLIENT INPUT OUTPUT-OR-CONFIG-TOPIC`, `--child
/// extractor APP CLIENT CONFIG-TOPIC OUTPUT` or `--child secrets ...` (see [`secrets_child`]):
/// runs the stage until SIGTERM (then stops cleanly, exit 0) or a crash (exit 3).
pub(crate) async fn child(args: &[String]) {
    #[cfg(feature = "secrets")]
    if args.first().map(String::as_str) == Some("secrets") {
        return secrets_child(&args[1..]).await;
    }
    let [role, app, client, input, topic] = args else { panic!("child arguments: {args:?}") };
    let mut builder = builder(app, client);
    if role == "extractor" {
        // As the Python extractor is run (`migration.py`): a cycle every 100 ms.
        builder = builder.poll_interval(Duration::from_millis(100));
    }
    if role == "counter" && mutant() == "forget" {
        builder = builder.state_stores(Arc::new(Forgetful));
    }
    let app = match role.as_str() {
        "counter" => builder.build(counter(input, topic)),
        "forward" => builder.build(forwarder(input, topic)),
        "extractor" => builder.build(Pager::new(input, topic)),
        "config-store" => builder.build(
            transformer([input.as_str()]).config_topics([topic.as_str()]).transform(|_msg, _state, _out| Ok(())),
        ),
        other => panic!("unknown child role {other}"),
    }
    .expect("valid settings");
    child_support::run_until_sigterm(app).await;
}
