//! The extractor stage: polls an external source once per config entry per cycle, emitting
//! messages in pages, with its `State` as the resume cursor (STG-20..24, EXT-01..44).
//!
//! The semantics (pages, commit boundaries, resumption) are on the [`Extractor`] trait.
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

/// Where a poll sends its messages and commits its cursor (see [`Extractor`]).
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT, STR};
/// use flechtwerk::stage::{BoxError, Extractor, Page};
/// use flechtwerk::{Config, Event, Message, State};
///
/// const SINCE: Attribute<i64> = Attribute::new("since", &INT);
/// const URL: Attribute<String> = Attribute::new("url", &STR);
///
/// /// One page per poll: everything since the cursor, then the cursor moves.
/// struct Changes;
///
/// impl Extractor for Changes {
///     fn config_topics(&self) -> Vec<String> {
///         vec!["sources".into()]
///     }
///
///     async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
///         let since = state.get(&SINCE)?.unwrap_or(0);
///         let _url = config.require(&URL)?; // where a real source would be asked
///         let changes = [since + 1, since + 2]; // a real source: fetch(url, since).await?
///         for change in changes {
///             page.send(Message::new("changes", page.key(), Event::new().with(&SINCE, change)?)).await?;
///         }
///         state.set(&SINCE, since + 2)?;
///         page.commit(state).await?; // the two changes and the new cursor: one transaction
///         Ok(())
///     }
/// }
/// # let _ = Changes;
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::stage::{BoxError, Page};
    /// # use flechtwerk::{Event, Message};
    /// async fn announce(page: &mut Page<'_>) -> Result<(), BoxError> {
    ///     // Outputs keyed like the config: one key per source, in order.
    ///     let key = page.key().to_owned();
    ///     page.send(Message::new("announcements", key, Event::new())).await?;
    ///     Ok(())
    /// }
    /// # let _ = announce;
    /// ```
    pub fn key(&self) -> &str {
        self.key
    }

    /// Its state key (by default the wire key; see [`Extractor::extract_state_key`]).
    ///
    /// ```
    /// # use flechtwerk::stage::{BoxError, Page};
    /// # use flechtwerk::{Event, Message};
    /// use flechtwerk::attribute::{Attribute, STR};
    /// const OWNER: Attribute<String> = Attribute::new("owner", &STR);
    ///
    /// async fn tagged(page: &mut Page<'_>) -> Result<(), BoxError> {
    ///     // The state key decides ownership: outputs say which shard of the source they came from.
    ///     let value = Event::new().with(&OWNER, page.state_key().to_owned())?;
    ///     page.send(Message::new("out", page.key(), value)).await?;
    ///     Ok(())
    /// }
    /// # let _ = tagged;
    /// ```
    pub fn state_key(&self) -> &str {
        self.state_key
    }

    /// Hands a message to the producer now, inside the page's transaction (begun by the first
    /// message). It becomes visible when the page commits. An error here means the page will
    /// abort: return it from `poll`.
    ///
    /// ```
    /// # use flechtwerk::stage::{BoxError, Page};
    /// # use flechtwerk::{Event, Message};
    /// async fn send_all(page: &mut Page<'_>, items: Vec<Event>) -> Result<(), BoxError> {
    ///     for item in items {
    ///         page.send(Message::new("items", page.key(), item)).await?; // `?`: the page aborts
    ///     }
    ///     Ok(())
    /// }
    /// # let _ = send_all;
    /// ```
    pub async fn send(&mut self, message: Message) -> Result<(), Error> {
        self.sink.send(message).await
    }

    /// A commit boundary (EXT-10): everything sent since the last boundary, and `state` if it
    /// differs from the last committed state, commit as one transaction; every delivery is
    /// confirmed first (EXT-13). An empty state deletes the config's state (EXT-24). Returns
    /// once the transaction committed; an error means it aborted.
    ///
    /// ```
    /// # use flechtwerk::stage::{BoxError, Page};
    /// # use flechtwerk::attribute::{Attribute, INT};
    /// # use flechtwerk::State;
    /// const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
    ///
    /// async fn checkpoint(page: &mut Page<'_>, cursor: i64) -> Result<(), BoxError> {
    ///     // Everything sent so far and the new cursor commit together; a restart resumes here.
    ///     page.commit(State::new().with(&CURSOR, cursor)?).await?;
    ///     Ok(())
    /// }
    /// # let _ = checkpoint;
    /// ```
    pub async fn commit(&mut self, state: State) -> Result<(), Error> {
        self.sink.commit(state).await
    }

    /// A config from the global config store (any key, any replica's), read now: two reads in
    /// one long poll may see different values (CFG-25).
    ///
    /// ```
    /// # use flechtwerk::stage::{BoxError, Page};
    /// # use flechtwerk::attribute::{Attribute, STR};
    /// const TOKEN: Attribute<String> = Attribute::new("token", &STR);
    ///
    /// // Shared credentials live in a config entry of their own, "credentials".
    /// async fn credentials(page: &Page<'_>) -> Result<Option<String>, BoxError> {
    ///     Ok(match page.config("credentials").await? {
    ///         Some(config) => config.get(&TOKEN)?,
    ///         None => None,
    ///     })
    /// }
    /// # let _ = credentials;
    /// ```
    pub async fn config(&self, key: &str) -> Result<Option<Config>, ConfigStoreError> {
        self.sink.config(key).await
    }
}

/// A stage's wakeup (STG-22): setting it ends the runner's wait between cycles at once, so
/// `poll_interval` becomes an upper bound. A set before the wait is not lost.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::stage::{BoxError, Extractor, Page, Wakeup};
/// use flechtwerk::{Config, State};
///
/// /// Polls every `poll_interval`, and at once when a webhook says there is news.
/// struct Inbox {
///     wakeup: Arc<Wakeup>,
/// }
///
/// impl Extractor for Inbox {
///     fn config_topics(&self) -> Vec<String> {
///         vec!["inboxes".into()]
///     }
///     async fn poll(&self, _config: Config, _state: State, _page: &mut Page<'_>) -> Result<(), BoxError> {
///         Ok(())
///     }
///     fn wakeup(&self) -> Option<&Wakeup> {
///         Some(&self.wakeup)
///     }
/// }
///
/// let wakeup = Arc::new(Wakeup::new());
/// let inbox = Inbox { wakeup: wakeup.clone() };
/// // In the webhook's handler:
/// wakeup.set();
/// # let _ = inbox;
/// ```
#[derive(Debug, Default)]
pub struct Wakeup {
    notify: Notify,
}

impl Wakeup {
    /// A wakeup that is not set.
    ///
    /// ```
    /// let wakeup = flechtwerk::stage::Wakeup::new();
    /// # let _ = wakeup;
    /// ```
    pub fn new() -> Self {
        Wakeup::default()
    }

    /// Sets it: the runner's current or next wait between cycles ends at once.
    ///
    /// ```
    /// let wakeup = flechtwerk::stage::Wakeup::new();
    /// wakeup.set();
    /// wakeup.set(); // sets do not add up: the next wait ends once
    /// ```
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
///
/// The runner calls [`Extractor::poll`] with a config, the config's current state (its cursor)
/// and a [`Page`]. Python's `poll` is an async generator with two kinds of yield; here they are
/// the page's two methods:
///
/// - [`Page::send`] hands a message to the transactional producer at once (EXT-12); the first
///   one begins the page's transaction.
/// - [`Page::commit`] is a commit boundary (EXT-10): the messages sent since the last boundary
///   and the state, if it differs from the last committed one, commit together as one
///   transaction. An unchanged state with nothing sent opens nothing (EXT-11).
///
/// Messages sent after the last boundary commit as a page of their own when `poll` returns
/// `Ok`. If `poll` fails (or the runner cancels it on a rebalance), the open page aborts and
/// the error ends the run; pages committed before stay committed (EXT-14). A restarted or
/// handed-over config resumes from the last committed state: nothing emitted twice, nothing
/// skipped — provided that `poll` is idempotent at the source (asking again from a cursor gives
/// the same items) and that a page closes within the transaction timeout (10 minutes, EXT-17).
///
///
/// ```
/// use std::collections::BTreeMap;
/// use flechtwerk::attribute::{Attribute, INT, STR};
/// use flechtwerk::stage::{BoxError, Extractor, Page};
/// use flechtwerk::{Config, Event, Message, State};
///
/// const CITY: Attribute<String> = Attribute::new("city", &STR);
/// const READING: Attribute<i64> = Attribute::new("reading", &INT);
///
/// /// One weather reading per configured station and cycle.
/// struct Weather;
///
/// impl Extractor for Weather {
///     fn config_topics(&self) -> Vec<String> {
///         vec!["stations".into()]
///     }
///
///     async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
///         let reading = state.get(&READING)?.unwrap_or(0) + 1; // a real source: fetch(city).await?
///         let value = Event::new().with(&CITY, config.require(&CITY)?)?.with(&READING, reading)?;
///         page.send(Message::new("weather", page.key(), value)).await?;
///         state.set(&READING, reading)?;
///         page.commit(state).await?;
///         Ok(())
///     }
///
///     // Stations of one city share a state (and so an owner).
///     fn extract_state_key(&self, key: &str, config: &Config) -> String {
///         config.get(&CITY).ok().flatten().unwrap_or_else(|| key.to_owned())
///     }
///
///     async fn on_active_configs(&self, active: &BTreeMap<String, Config>) -> Result<(), BoxError> {
///         println!("polling {} stations", active.len());
///         Ok(())
///     }
/// }
///
/// let station = Config::new().with(&CITY, "Lyon".to_owned())?;
/// assert_eq!(Weather.extract_state_key("station-7", &station), "Lyon");
/// # Ok::<(), BoxError>(())
/// ```
pub trait Extractor: Send + Sync + 'static {
    /// The config topics: one entry per thing to poll (a tenant, a feed, a device). They must
    /// share one partition count, the ownership-token space (EXT-31).
    ///
    /// ```
    /// use flechtwerk::stage::{extractor, Extractor};
    /// let stage = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// assert_eq!(stage.config_topics(), ["feeds"]);
    /// ```
    fn config_topics(&self) -> Vec<String>;

    /// Polls one config: emits messages and commits cursors through `page` (see the
    /// [`Extractor`] docs). `config` is a private copy of the entry; `state` is its state as
    /// last committed, read when the poll starts (empty when there is none). Polls of configs
    /// on one ownership token run one after another; tokens run concurrently (EXT-04).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::stage::{BoxError, Extractor, Page};
    /// use flechtwerk::testing::read_topic;
    /// use flechtwerk::{Config, Event, Flechtwerk, Message, State};
    ///
    /// /// One heartbeat per configured feed and cycle.
    /// struct Heartbeat;
    /// impl Extractor for Heartbeat {
    ///     fn config_topics(&self) -> Vec<String> {
    ///         vec!["feeds".into()]
    ///     }
    ///     async fn poll(&self, _config: Config, state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
    ///         page.send(Message::new("beats", page.key(), Event::new())).await?;
    ///         page.commit(state).await?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let kafka: Arc<dyn Kafka> = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// kafka.admin()?.create_topic(&NewTopic::new("feeds", 1).compacted()).await?;
    /// kafka.admin()?.create_topic(&NewTopic::new("beats", 1)).await?;
    /// let producer = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// producer.send(ProducerRecord::new("feeds", "feed-1", r#"{"url":"https://a.example"}"#)).await?.await?;
    /// let app = Flechtwerk::builder()
    ///     .application_id("beats")
    ///     .client_id("pod-0")
    ///     .kafka(kafka.clone())
    ///     .poll_interval(Duration::from_millis(10))
    ///     .build(Heartbeat)?;
    /// app.run_until(async {
    ///     while read_topic(&*kafka, "reader", "beats").await.map_or(0, |r| r.len()) < 2 {
    ///         tokio::time::sleep(Duration::from_millis(20)).await;
    ///     }
    /// })
    /// .await?;
    /// let beats = read_topic(&*kafka, "reader", "beats").await?;
    /// assert!(beats.iter().all(|beat| beat.key.as_deref() == Some(&b"feed-1"[..])));
    /// # Ok(())
    /// # }
    /// ```
    fn poll(
        &self,
        config: Config,
        state: State,
        page: &mut Page<'_>,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The state key of a config entry (default: its wire key, STG-04). Ownership follows it:
    /// the entry belongs to token `token_for(state_key, N)` (EXT-32). It sees the config as
    /// decoded from its record, **before** [`config_enricher`](Self::config_enricher) ran (the
    /// store and [`poll`](Self::poll) see the enriched one), as Python flechtwerk's does
    /// (CFG-30): a Rust and a Python instance of one application then agree on every config's
    /// owner and state whatever the enricher adds.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::stage::{extractor, Extractor};
    /// use flechtwerk::Config;
    /// const ACCOUNT: Attribute<String> = Attribute::new("account", &STR);
    /// // Feeds of one account share a state, and so an owner.
    /// let stage = extractor(["feeds"])
    ///     .extract_state_key(|key, config| config.get(&ACCOUNT).ok().flatten().unwrap_or_else(|| key.to_owned()))
    ///     .poll(|_key, _config, _state| Ok(vec![]));
    /// let feed = Config::new().with(&ACCOUNT, "acme".to_owned())?;
    /// assert_eq!(stage.extract_state_key("feed-1", &feed), "acme");
    /// assert_eq!(stage.extract_state_key("feed-2", &Config::new()), "feed-2");
    /// # Ok::<(), flechtwerk::stage::BoxError>(())
    /// ```
    fn extract_state_key(&self, key: &str, config: &Config) -> String {
        let _ = config;
        key.to_owned()
    }

    /// The enricher of config records on their way into the store (default: none). See
    /// [`EnrichConfig`].
    ///
    /// ```
    /// use flechtwerk::stage::{extractor, Extractor};
    /// let stage = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// assert!(stage.config_enricher().is_none()); // no `enrich_config` given
    /// ```
    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        None
    }

    /// Decides about an undecodable config record (default: raise, STG-05).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::stage::{extractor, Extractor};
    /// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, Part, RawRecord};
    /// let stage = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// let record = RawRecord {
    ///     topic: Arc::from("feeds"), partition: 0, offset: 3, timestamp_ms: None,
    ///     key: Some("feed-1".into()), value: Some("{oops".into()), headers: vec![],
    /// };
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{oops"[..])).unwrap_err());
    /// assert_eq!(stage.on_invalid_message(&error), InvalidMessageAction::Raise); // the default
    /// ```
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        let _ = error;
        InvalidMessageAction::Raise
    }

    /// Reconciliation (STG-23, EXT-41): called at the top of every cycle with the complete set
    /// of active configs this replica owns (keyed by wire key), and once with an empty set when
    /// the replica becomes a standby. Must be idempotent: it may come without any change.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use std::sync::Mutex;
    /// use flechtwerk::stage::{BoxError, Extractor, Page};
    /// use flechtwerk::{Config, State};
    /// /// Keeps one open subscription per active feed.
    /// #[derive(Default)]
    /// struct Feeds(Mutex<Vec<String>>);
    /// impl Extractor for Feeds {
    ///     fn config_topics(&self) -> Vec<String> {
    ///         vec!["feeds".into()]
    ///     }
    ///     async fn poll(&self, _: Config, _: State, _: &mut Page<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    ///     async fn on_active_configs(&self, active: &BTreeMap<String, Config>) -> Result<(), BoxError> {
    ///         *self.0.lock().unwrap() = active.keys().cloned().collect(); // reconcile: idempotent
    ///         Ok(())
    ///     }
    /// }
    /// let feeds = Feeds::default();
    /// let active = BTreeMap::from([("feed-1".to_owned(), Config::new())]);
    /// futures::executor::block_on(feeds.on_active_configs(&active))?;
    /// futures::executor::block_on(feeds.on_active_configs(&BTreeMap::new()))?; // now a standby
    /// assert!(feeds.0.lock().unwrap().is_empty());
    /// # Ok::<(), BoxError>(())
    /// ```
    fn on_active_configs(
        &self,
        active: &BTreeMap<String, Config>,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = active;
        async { Ok(()) }
    }

    /// The stage's wakeup, if it has one (STG-22).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::stage::{extractor, Extractor, Wakeup};
    /// let plain = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// assert!(plain.wakeup().is_none()); // polls on the interval only
    /// let wakeup = Arc::new(Wakeup::new());
    /// wakeup.set(); // what a webhook handler would do; the runner then polls at once
    /// ```
    fn wakeup(&self) -> Option<&Wakeup> {
        None
    }

    /// Runs once before polling starts (STG-02).
    ///
    /// ```
    /// use flechtwerk::stage::{extractor, Extractor};
    /// let stage = extractor(["feeds"]).poll(|_key, _config, _state| Ok(vec![]));
    /// assert!(futures::executor::block_on(stage.setup()).is_ok()); // the default does nothing
    /// ```
    fn setup(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Runs once on shutdown, including after an error (STG-02).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use flechtwerk::stage::{BoxError, Extractor, Page};
    /// use flechtwerk::{Config, State};
    /// struct Client(AtomicBool);
    /// impl Extractor for Client {
    ///     fn config_topics(&self) -> Vec<String> {
    ///         vec!["feeds".into()]
    ///     }
    ///     async fn poll(&self, _: Config, _: State, _: &mut Page<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    ///     async fn teardown(&self) -> Result<(), BoxError> {
    ///         self.0.store(false, Ordering::SeqCst); // e.g. log out of the source's API
    ///         Ok(())
    ///     }
    /// }
    /// let client = Client(AtomicBool::new(true));
    /// futures::executor::block_on(client.teardown())?; // the runner calls it once on shutdown
    /// assert!(!client.0.load(Ordering::SeqCst));
    /// # Ok::<(), BoxError>(())
    /// ```
    fn teardown(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }
}

/// One thing a closure extractor's poll returns, in order (Python's two yields).
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT};
/// use flechtwerk::stage::Emit;
/// use flechtwerk::{Event, Message, State};
///
/// const N: Attribute<i64> = Attribute::new("n", &INT);
///
/// // Two pages: each a message, then its commit boundary.
/// let emitted = vec![
///     Emit::Message(Message::new("out", "k", Event::new().with(&N, 1)?)),
///     Emit::State(State::new().with(&N, 1)?),
///     Emit::Message(Message::new("out", "k", Event::new().with(&N, 2)?)),
///     Emit::State(State::new().with(&N, 2)?),
/// ];
/// assert_eq!(emitted.len(), 4);
/// # Ok::<(), flechtwerk::attribute::AttributeError>(())
/// ```
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
///
/// ```
/// use flechtwerk::stage::{extractor, Extractor, ExtractorBuilder};
///
/// let builder: ExtractorBuilder = extractor(["feeds"]).extract_state_key(|key, _config| key.to_lowercase());
/// let stage = builder.poll(|_key, _config, _state| Ok(vec![]));
/// assert_eq!(stage.config_topics(), ["feeds"]);
/// ```
pub struct ExtractorBuilder {
    config_topics: Vec<String>,
    extract_state_key: Option<Box<StateKeyFn>>,
    enrich_config: Option<Box<dyn EnrichConfig>>,
    on_invalid_message: Option<Box<InvalidFn>>,
}

impl ExtractorBuilder {
    /// Replaces the default state key (the config's wire key). The function sees each config as
    /// decoded, before [`enrich_config`](Self::enrich_config) (CFG-30).
    ///
    /// ```
    /// use flechtwerk::stage::{extractor, Extractor};
    /// use flechtwerk::Config;
    ///
    /// // "acme/orders" and "acme/invoices" share one cursor and one owner: "acme".
    /// let stage = extractor(["feeds"])
    ///     .extract_state_key(|key, _config| key.split('/').next().unwrap_or(key).to_owned())
    ///     .poll(|_key, _config, _state| Ok(vec![]));
    /// assert_eq!(stage.extract_state_key("acme/orders", &Config::new()), "acme");
    /// ```
    pub fn extract_state_key(mut self, f: impl Fn(&str, &Config) -> String + Send + Sync + 'static) -> Self {
        self.extract_state_key = Some(Box::new(f));
        self
    }

    /// Enriches every config record on its way into the store.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::stage::{extractor, Extractor};
    ///
    /// const NAME: Attribute<String> = Attribute::new("name", &STR);
    ///
    /// let stage = extractor(["feeds"])
    ///     .enrich_config(|config| {
    ///         let name = config.require(&NAME)?.trim().to_lowercase();
    ///         Ok(config.with(&NAME, name)?)
    ///     })
    ///     .poll(|_key, _config, _state| Ok(vec![]));
    /// assert!(stage.config_enricher().is_some());
    /// ```
    pub fn enrich_config(mut self, f: impl Fn(Config) -> Result<Config, BoxError> + Send + Sync + 'static) -> Self {
        self.enrich_config = Some(Box::new(f));
        self
    }

    /// Replaces the default invalid-message policy (raise) for config records.
    ///
    /// ```
    /// use flechtwerk::stage::extractor;
    /// use flechtwerk::wire::InvalidMessageAction;
    ///
    /// // A broken config row is skipped (and counted) instead of stopping the replica.
    /// let stage = extractor(["feeds"])
    ///     .on_invalid_message(|_error| InvalidMessageAction::Skip)
    ///     .poll(|_key, _config, _state| Ok(vec![]));
    /// # let _ = stage;
    /// ```
    pub fn on_invalid_message(
        mut self,
        f: impl Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync + 'static,
    ) -> Self {
        self.on_invalid_message = Some(Box::new(f));
        self
    }

    /// Finishes the stage with its poll.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::stage::{extractor, Emit, FnExtractor};
    /// use flechtwerk::{Event, Message};
    ///
    /// const PAGE: Attribute<i64> = Attribute::new("page", &INT);
    ///
    /// // Each cycle: one message per config, and the cursor.
    /// let pager: FnExtractor = extractor(["feeds"]).poll(|key, _config, mut state| {
    ///     let page = state.get(&PAGE)?.unwrap_or(0) + 1;
    ///     state.set(&PAGE, page)?;
    ///     Ok(vec![Emit::Message(Message::new("pages", key, Event::new().with(&PAGE, page)?)), Emit::State(state)])
    /// });
    /// # let _ = pager;
    /// ```
    pub fn poll(
        self,
        f: impl Fn(&str, Config, State) -> Result<Vec<Emit>, BoxError> + Send + Sync + 'static,
    ) -> FnExtractor {
        FnExtractor { builder: self, poll: Box::new(f) }
    }
}

/// An [`Extractor`] made of closures (see [`extractor`]).
///
/// ```
/// use flechtwerk::stage::{extractor, Extractor, FnExtractor};
///
/// fn quiet(topic: &str) -> FnExtractor {
///     extractor([topic]).poll(|_key, _config, _state| Ok(vec![]))
/// }
/// assert_eq!(quiet("feeds").config_topics(), ["feeds"]);
/// ```
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
