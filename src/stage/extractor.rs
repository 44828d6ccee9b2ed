//! The extractor stage: polls an external source once per config entry per cycle, emitting
//! messages in pages, with its `State` as the resume cursor (STG-20..24, EXT-01..44).
//!
//! The runner calls [`Extractor::poll`] with a config, the config's current state (its cursor)
//! and a [`Page`]. Python's `poll` is an async generator with two kinds of yield; here they are
//! the page's two methods:
//!
//! - [`Page::send`] hands a message to the transactional producer at once (EXT-12); the first
//!   one begins the page's transaction.
//! - [`Page::commit`] is a commit boundary (EXT-10): the messages sent since the last boundary
//!   and the state, if it differs from the last committed one, commit together as one
//!   transaction. An unchanged state with nothing sent opens nothing (EXT-11).
//!
//! Messages sent after the last boundary commit as a page of their own when `poll` returns
//! `Ok`. If `poll` fails (or the runner cancels it on a rebalance), the open page aborts and
//! the error ends the run; pages committed before stay committed (EXT-14). A restarted or
//! handed-over config resumes from the last committed state: nothing emitted twice, nothing
//! skipped — provided that `poll` is idempotent at the source (asking again from a cursor gives
//! the same items) and that a page closes within the transaction timeout (10 minutes, EXT-17).
//!
//! ```
//! use flechtwerk::attribute::{Attribute, INT};
//! use flechtwerk::stage::{BoxError, Extractor, Page};
//! use flechtwerk::{Config, Event, Message, State};
//!
//! const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
//!
//! /// Pages through a numbered feed, three items per page.
//! struct Feed;
//!
//! impl Extractor for Feed {
//!     fn config_topics(&self) -> Vec<String> {
//!         vec!["feeds".into()]
//!     }
//!
//!     async fn poll(&self, _config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
//!         let mut cursor = state.get(&CURSOR)?.unwrap_or(0);
//!         while cursor < 9 {
//!             for item in cursor + 1..=cursor + 3 {
//!                 page.send(Message::new("items", page.key(), Event::new().with(&CURSOR, item)?)).await?;
//!             }
//!             cursor += 3;
//!             state.set(&CURSOR, cursor)?;
//!             page.commit(state.clone()).await?; // one transaction: 3 items and the cursor
//!         }
//!         Ok(())
//!     }
//! }
//! # let _ = Feed;
//! ```

use std::collections::BTreeMap;
use std::future::Future;

use futures::future::BoxFuture;
use tokio::sync::Notify;

use super::EnrichConfig;
use crate::configs::ConfigStoreError;
use crate::error::{BoxError, Error};
use crate::message::Message;
use crate::record::{Config, State};
use crate::wire::{InvalidMessageAction, InvalidMessageError};

/// What a page writes through: the engine's side of a [`Page`].
pub(crate) trait PageSink: Send {
    /// Hands a message to the producer (the page's transaction begins if needed).
    fn send(&mut self, message: Message) -> BoxFuture<'_, Result<(), Error>>;
    /// A commit boundary with `state`.
    fn commit(&mut self, state: State) -> BoxFuture<'_, Result<(), Error>>;
    /// A config from the global store, as it is now.
    fn config(&self, key: &str) -> BoxFuture<'_, Result<Option<Config>, ConfigStoreError>>;
}

/// Where a poll sends its messages and commits its cursor (see the [module](self) docs).
pub struct Page<'a> {
    key: &'a str,
    state_key: &'a str,
    sink: &'a mut dyn PageSink,
}

impl<'a> Page<'a> {
    pub(crate) fn new(key: &'a str, state_key: &'a str, sink: &'a mut dyn PageSink) -> Self {
        Page { key, state_key, sink }
    }

    /// The wire key of the config being polled.
    pub fn key(&self) -> &str {
        self.key
    }

    /// Its state key (by default the wire key; see [`Extractor::extract_state_key`]).
    pub fn state_key(&self) -> &str {
        self.state_key
    }

    /// Hands a message to the producer now, inside the page's transaction (begun by the first
    /// message). It becomes visible when the page commits. An error here means the page will
    /// abort: return it from `poll`.
    pub async fn send(&mut self, message: Message) -> Result<(), Error> {
        self.sink.send(message).await
    }

    /// A commit boundary (EXT-10): everything sent since the last boundary, and `state` if it
    /// differs from the last committed state, commit as one transaction; every delivery is
    /// confirmed first (EXT-13). An empty state deletes the config's state (EXT-24). Returns
    /// once the transaction committed; an error means it aborted.
    pub async fn commit(&mut self, state: State) -> Result<(), Error> {
        self.sink.commit(state).await
    }

    /// A config from the global config store (any key, any replica's), read now: two reads in
    /// one long poll may see different values (CFG-25).
    pub async fn config(&self, key: &str) -> Result<Option<Config>, ConfigStoreError> {
        self.sink.config(key).await
    }
}

/// A stage's wakeup (STG-22): setting it ends the runner's wait between cycles at once, so
/// `poll_interval` becomes an upper bound. A set before the wait is not lost.
#[derive(Debug, Default)]
pub struct Wakeup {
    notify: Notify,
}

impl Wakeup {
    /// A wakeup that is not set.
    pub fn new() -> Self {
        Wakeup::default()
    }

    /// Sets it: the runner's current or next wait between cycles ends at once.
    pub fn set(&self) {
        self.notify.notify_one();
    }

    /// Waits until it is set, and clears it.
    pub(crate) async fn wait(&self) {
        self.notify.notified().await;
    }
}

/// A stage that polls an external source per config entry, in pages with a resume cursor
/// (STG-20..23). Only [`config_topics`](Extractor::config_topics) and
/// [`poll`](Extractor::poll) are required.
pub trait Extractor: Send + Sync + 'static {
    /// The config topics: one entry per thing to poll (a tenant, a feed, a device). They must
    /// share one partition count, the ownership-token space (EXT-31).
    fn config_topics(&self) -> Vec<String>;

    /// Polls one config: emits messages and commits cursors through `page` (see the
    /// [module](self) docs). `config` is a private copy of the entry; `state` is its state as
    /// last committed, read when the poll starts (empty when there is none). Polls of configs
    /// on one ownership token run one after another; tokens run concurrently (EXT-04).
    fn poll(
        &self,
        config: Config,
        state: State,
        page: &mut Page<'_>,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The state key of a config entry (default: its wire key, STG-04). Ownership follows it:
    /// the entry belongs to token `token_for(state_key, N)` (EXT-32). It sees the config as the
    /// store holds it (after enrichment).
    fn extract_state_key(&self, key: &str, config: &Config) -> String {
        let _ = config;
        key.to_owned()
    }

    /// The enricher of config records on their way into the store (default: none). See
    /// [`EnrichConfig`].
    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        None
    }

    /// Decides about an undecodable config record (default: raise, STG-05).
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        let _ = error;
        InvalidMessageAction::Raise
    }

    /// Reconciliation (STG-23, EXT-41): called at the top of every cycle with the complete set
    /// of active configs this replica owns (keyed by wire key), and once with an empty set when
    /// the replica becomes a standby. Must be idempotent: it may come without any change.
    fn on_active_configs(
        &self,
        active: &BTreeMap<String, Config>,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = active;
        async { Ok(()) }
    }

    /// The stage's wakeup, if it has one (STG-22).
    fn wakeup(&self) -> Option<&Wakeup> {
        None
    }

    /// Runs once before polling starts (STG-02).
    fn setup(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Runs once on shutdown, including after an error (STG-02).
    fn teardown(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }
}

/// One thing a closure extractor's poll returns, in order (Python's two yields).
#[derive(Clone, Debug, PartialEq)]
pub enum Emit {
    /// A message to send.
    Message(Message),
    /// A commit boundary with this state.
    State(State),
}

type PollFn = dyn Fn(&str, Config, State) -> Result<Vec<Emit>, BoxError> + Send + Sync;
type StateKeyFn = dyn Fn(&str, &Config) -> String + Send + Sync;
type InvalidFn = dyn Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync;

/// Starts the short form of an extractor (Python's `Extractor.of` / `@extractor`): give the
/// config topics, then the poll as a closure `(wire key, config, state) -> Vec<Emit>`. The
/// runner sends and commits what it returns, in order. The closure is synchronous; a stage
/// that awaits I/O implements [`Extractor`] directly.
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT};
/// use flechtwerk::stage::{extractor, Emit};
/// use flechtwerk::{Event, Message};
///
/// const N: Attribute<i64> = Attribute::new("n", &INT);
///
/// let ticker = extractor(["tickers"]).poll(|key, _config, mut state| {
///     let n = state.get(&N)?.unwrap_or(0) + 1;
///     state.set(&N, n)?;
///     Ok(vec![Emit::Message(Message::new("ticks", key, Event::new().with(&N, n)?)), Emit::State(state)])
/// });
/// # let _ = ticker;
/// ```
pub fn extractor<I, T>(config_topics: I) -> ExtractorBuilder
where
    I: IntoIterator<Item = T>,
    T: Into<String>,
{
    ExtractorBuilder {
        config_topics: config_topics.into_iter().map(Into::into).collect(),
        extract_state_key: None,
        enrich_config: None,
        on_invalid_message: None,
    }
}

/// Builder of a closure-based [`Extractor`] (see [`extractor`]).
pub struct ExtractorBuilder {
    config_topics: Vec<String>,
    extract_state_key: Option<Box<StateKeyFn>>,
    enrich_config: Option<Box<dyn EnrichConfig>>,
    on_invalid_message: Option<Box<InvalidFn>>,
}

impl ExtractorBuilder {
    /// Replaces the default state key (the config's wire key).
    pub fn extract_state_key(mut self, f: impl Fn(&str, &Config) -> String + Send + Sync + 'static) -> Self {
        self.extract_state_key = Some(Box::new(f));
        self
    }

    /// Enriches every config record on its way into the store.
    pub fn enrich_config(mut self, f: impl Fn(Config) -> Result<Config, BoxError> + Send + Sync + 'static) -> Self {
        self.enrich_config = Some(Box::new(f));
        self
    }

    /// Replaces the default invalid-message policy (raise) for config records.
    pub fn on_invalid_message(
        mut self,
        f: impl Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync + 'static,
    ) -> Self {
        self.on_invalid_message = Some(Box::new(f));
        self
    }

    /// Finishes the stage with its poll.
    pub fn poll(
        self,
        f: impl Fn(&str, Config, State) -> Result<Vec<Emit>, BoxError> + Send + Sync + 'static,
    ) -> FnExtractor {
        FnExtractor { builder: self, poll: Box::new(f) }
    }
}

/// An [`Extractor`] made of closures (see [`extractor`]).
pub struct FnExtractor {
    builder: ExtractorBuilder,
    poll: Box<PollFn>,
}

impl Extractor for FnExtractor {
    fn config_topics(&self) -> Vec<String> {
        self.builder.config_topics.clone()
    }

    async fn poll(&self, config: Config, state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let emitted = (self.poll)(page.key(), config, state)?;
        for emit in emitted {
            match emit {
                Emit::Message(message) => page.send(message).await?,
                Emit::State(state) => page.commit(state).await?,
            }
        }
        Ok(())
    }

    fn extract_state_key(&self, key: &str, config: &Config) -> String {
        match &self.builder.extract_state_key {
            Some(f) => f(key, config),
            None => key.to_owned(),
        }
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.builder.enrich_config.as_deref()
    }

    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        match &self.builder.on_invalid_message {
            Some(f) => f(error),
            None => InvalidMessageAction::Raise,
        }
    }
}
