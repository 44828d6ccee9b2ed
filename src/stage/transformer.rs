//! The transformer stage: a keyed stream → stream (STG-10..13).
//!
//! A [`Transformer`] turns a partitioned, keyed input stream into output messages and per-key
//! state. The runner hands `transform` the message, a private copy of the key's state, and an
//! [`Output`] through which it emits [`Message`]s and sets the new [`State`] — the two-yield
//! contract of the Python implementation (STG-40): messages out, state kept, nothing else.
//!
//! ```
//! use flechtwerk::attribute::{Attribute, INT};
//! use flechtwerk::stage::{transformer, Output};
//! use flechtwerk::{Event, IncomingMessage, Message, State};
//!
//! const COUNT: Attribute<i64> = Attribute::new("count", &INT);
//!
//! let counter = transformer(["clicks"]).transform(|msg: IncomingMessage, mut state: State, out: &mut Output<'_>| {
//!     let count = state.get(&COUNT)?.unwrap_or(0) + 1;
//!     state.set(&COUNT, count)?;
//!     out.send(Message::new("click-counts", msg.key.as_str(), Event::new().with(&COUNT, count)?));
//!     out.set_state(state);
//!     Ok(())
//! });
//! # let _ = counter;
//! ```

use std::future::Future;

use super::EnrichConfig;
use crate::configs::ConfigStore;
use crate::error::BoxError;
use crate::message::{IncomingMessage, Message};
use crate::observer::Observer;
use crate::record::{Config, State};
use crate::wire::{InvalidMessageAction, InvalidMessageError};

/// Where a transform call puts its results: messages to send (in order) and the key's new state.
///
/// Everything emitted commits atomically with the batch's input offsets in the task's
/// transaction, or not at all.
///
/// ```
/// use flechtwerk::attribute::{Attribute, STR};
/// use flechtwerk::stage::{transformer, Output};
/// use flechtwerk::{Event, IncomingMessage, Message, State};
///
/// const REGION: Attribute<String> = Attribute::new("region", &STR);
///
/// // Routes every input to its region's topic, as the key's config says; remembers the region.
/// let router = transformer(["orders"]).config_topics(["regions"]).transform(
///     |msg: IncomingMessage, mut state: State, out: &mut Output<'_>| {
///         let Some(config) = out.configs().get(&msg.key)? else { return Ok(()) };
///         let region = config.require(&REGION)?;
///         out.send(Message::new(format!("orders-{region}"), msg.key.as_str(), msg.value));
///         state.set(&REGION, region)?;
///         out.set_state(state);
///         Ok(())
///     },
/// );
/// # let _ = router;
/// ```
pub struct Output<'a> {
    configs: &'a ConfigStore,
    observer: &'a dyn Observer,
    messages: Vec<Message>,
    state: Option<State>,
}

impl<'a> Output<'a> {
    pub(crate) fn new(configs: &'a ConfigStore, observer: &'a dyn Observer) -> Self {
        Output { configs, observer, messages: Vec::new(), state: None }
    }

    /// Emits a message. Writing to a config topic is just emitting to it: the row rides the
    /// task's transaction like any other output.
    ///
    /// ```
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::{Event, Message};
    ///
    /// // Fans every input out to two topics, and writes a config row (a config topic is a topic).
    /// let fan_out = transformer(["in"]).transform(|msg, _state, out| {
    ///     out.send(Message::new("audit", msg.key.as_str(), Event::new()));
    ///     out.send(Message::new("out", msg.key.as_str(), msg.value));
    ///     out.send(Message::new("seen-keys", msg.key.as_str(), Event::new()));
    ///     Ok(())
    /// });
    /// # let _ = fan_out;
    /// ```
    pub fn send(&mut self, message: Message) {
        self.observer.message_out(message.topic());
        self.messages.push(message);
    }

    /// Sets the key's state; the last call of a batch wins (one changelog write per key and
    /// batch). An empty state deletes the key's state (STG-43).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::State;
    ///
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    ///
    /// // Counts to three, then forgets the key (an empty state is a deletion).
    /// let to_three = transformer(["in"]).transform(|_msg, mut state, out| {
    ///     let count = state.get(&COUNT)?.unwrap_or(0) + 1;
    ///     if count == 3 {
    ///         out.set_state(State::new());
    ///     } else {
    ///         state.set(&COUNT, count)?;
    ///         out.set_state(state);
    ///     }
    ///     Ok(())
    /// });
    /// # let _ = to_three;
    /// ```
    pub fn set_state(&mut self, state: State) {
        self.state = Some(state);
    }

    /// The config store, read-only: a consistent snapshot for the whole poll's records (CFG-24;
    /// a batch that gathered several polls drained the store before each of them).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, BOOL};
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::Message;
    ///
    /// const MUTED: Attribute<bool> = Attribute::optional("muted", &BOOL);
    ///
    /// // Forwards an input unless its key's config says `"muted": true`.
    /// let filter = transformer(["in"]).config_topics(["settings"]).transform(|msg, _state, out| {
    ///     let muted = match out.configs().get(&msg.key)? {
    ///         Some(config) => config.get(&MUTED)?.unwrap_or(false),
    ///         None => false,
    ///     };
    ///     if !muted {
    ///         out.send(Message::new("out", msg.key.as_str(), msg.value));
    ///     }
    ///     Ok(())
    /// });
    /// # let _ = filter;
    /// ```
    pub fn configs(&self) -> &ConfigStore {
        self.configs
    }

    pub(crate) fn into_parts(self) -> (Vec<Message>, Option<State>) {
        (self.messages, self.state)
    }
}

/// A partitioned, keyed stream → stream stage (STG-10..13).
///
/// Only [`input_topics`](Transformer::input_topics) and [`transform`](Transformer::transform)
/// are required; every hook has the Python implementation's default.
///
/// Implement it directly for a stage that awaits I/O in `transform` or keeps resources (the
/// [`transformer`] closures cover the rest):
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT};
/// use flechtwerk::stage::{BoxError, Output, Transformer};
/// use flechtwerk::wire::{InvalidMessageAction, InvalidMessageError};
/// use flechtwerk::{Event, IncomingMessage, Message, State};
///
/// const TOTAL: Attribute<i64> = Attribute::new("total", &INT);
/// const AMOUNT: Attribute<i64> = Attribute::new("amount", &INT);
///
/// /// Sums payments per account.
/// struct Totals {
///     output: String,
/// }
///
/// impl Transformer for Totals {
///     fn input_topics(&self) -> Vec<String> {
///         vec!["payments".into()]
///     }
///
///     async fn transform(&self, msg: IncomingMessage, mut state: State, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let Some(payment) = msg.value else { return Ok(()) }; // a tombstone: nothing to add
///         let total = state.get(&TOTAL)?.unwrap_or(0) + payment.require(&AMOUNT)?;
///         state.set(&TOTAL, total)?;
///         out.send(Message::new(self.output.as_str(), msg.key.as_str(), Event::new().with(&TOTAL, total)?));
///         out.set_state(state);
///         Ok(())
///     }
///
///     fn on_invalid_message(&self, _error: &InvalidMessageError) -> InvalidMessageAction {
///         InvalidMessageAction::Skip // undecodable payments are counted and skipped
///     }
/// }
///
/// let stage = Totals { output: "totals".into() };
/// assert_eq!(stage.input_topics(), ["payments"]);
/// assert!(stage.config_topics().is_empty());
/// ```
pub trait Transformer: Send + Sync + 'static {
    /// The partitioned input topics. They must share one partition count; the same partition
    /// number of every input topic forms one task.
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// let stage = transformer(["clicks", "views"]).transform(|_, _, _| Ok(()));
    /// assert_eq!(stage.input_topics(), ["clicks", "views"]); // co-partitioned: one task per partition
    /// ```
    fn input_topics(&self) -> Vec<String>;

    /// Config topics read in full into the config store (default: none).
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// let stage = transformer(["clicks"]).config_topics(["plans"]).transform(|_, _, _| Ok(()));
    /// assert_eq!(stage.config_topics(), ["plans"]);
    /// ```
    fn config_topics(&self) -> Vec<String> {
        Vec::new()
    }

    /// Processes one record. `state` is a private copy of the key's current state (empty when
    /// there is none); records of one key run in order, each seeing the state the previous one
    /// set. An error crashes the stage: the batch's transaction never commits (TRX-15).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::stage::{BoxError, Output, Transformer};
    /// use flechtwerk::testing::read_topic;
    /// use flechtwerk::{Flechtwerk, IncomingMessage, Message, State};
    ///
    /// /// Forwards every record under an upper-cased key.
    /// struct Shout;
    /// impl Transformer for Shout {
    ///     fn input_topics(&self) -> Vec<String> {
    ///         vec!["names".into()]
    ///     }
    ///     async fn transform(&self, msg: IncomingMessage, _state: State, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.send(Message::new("shouted", msg.key.to_uppercase(), msg.value));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let kafka: Arc<dyn Kafka> = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// for topic in ["names", "shouted"] {
    ///     kafka.admin()?.create_topic(&NewTopic::new(topic, 1)).await?;
    /// }
    /// let producer = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// producer.send(ProducerRecord::new("names", "ada", "{}")).await?.await?;
    /// let app = Flechtwerk::builder().application_id("shout").client_id("pod-0").kafka(kafka.clone()).build(Shout)?;
    /// app.run_until(async {
    ///     while read_topic(&*kafka, "reader", "shouted").await.map_or(0, |r| r.len()) < 1 {
    ///         tokio::time::sleep(Duration::from_millis(20)).await;
    ///     }
    /// })
    /// .await?;
    /// let out = read_topic(&*kafka, "reader", "shouted").await?;
    /// assert_eq!(out[0].key.as_deref(), Some(&b"ADA"[..]));
    /// # Ok(())
    /// # }
    /// ```
    fn transform(
        &self,
        msg: IncomingMessage,
        state: State,
        out: &mut Output<'_>,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The state key of a record (default: the wire key, STG-04).
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// use flechtwerk::IncomingMessage;
    /// // State per tenant: keys look like `tenant/user`.
    /// let stage = transformer(["clicks"])
    ///     .extract_state_key(|msg| msg.key.split('/').next().unwrap_or_default().to_owned())
    ///     .transform(|_, _, _| Ok(()));
    /// let msg = IncomingMessage {
    ///     key: "acme/ada".into(), value: None, topic: "clicks".into(), partition: 0, offset: 0, timestamp: None,
    /// };
    /// assert_eq!(stage.extract_state_key(&msg), "acme");
    /// ```
    fn extract_state_key(&self, msg: &IncomingMessage) -> String {
        msg.key.clone()
    }

    /// The enricher of config records on their way into the store (default: none, the configs
    /// are stored as they are, STG-03). See [`EnrichConfig`]: returning one is the only way to
    /// enrich, so a stage cannot declare enrichment in one place and forget it in another.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::stage::{transformer, Transformer};
    /// use flechtwerk::Config;
    /// const HOST: Attribute<String> = Attribute::new("host", &STR);
    /// let plain = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// assert!(plain.config_enricher().is_none()); // configs stored as they are
    /// let enriching = transformer(["in"])
    ///     .config_topics(["hosts"])
    ///     .enrich_config(|config: Config| Ok(config.with(&HOST, "a.example".to_owned())?))
    ///     .transform(|_, _, _| Ok(()));
    /// let enricher = enriching.config_enricher().expect("declared");
    /// let enriched = futures::executor::block_on(enricher.enrich_config(Config::new()))?;
    /// assert_eq!(enriched.get(&HOST)?.as_deref(), Some("a.example"));
    /// # Ok::<(), flechtwerk::stage::BoxError>(())
    /// ```
    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        None
    }

    /// Decides about an undecodable record (default: raise, STG-05). Synchronous and
    /// deterministic (INV-43).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::stage::{transformer, Transformer};
    /// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, Part, RawRecord};
    /// let stage = transformer(["in"])
    ///     .on_invalid_message(|_error| InvalidMessageAction::Skip)
    ///     .transform(|_, _, _| Ok(()));
    /// let record = RawRecord {
    ///     topic: Arc::from("in"), partition: 0, offset: 7, timestamp_ms: None,
    ///     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// };
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"not json"[..])).unwrap_err());
    /// assert_eq!(stage.on_invalid_message(&error), InvalidMessageAction::Skip);
    /// ```
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        let _ = error;
        InvalidMessageAction::Raise
    }

    /// Runs once before processing starts (STG-02).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use flechtwerk::stage::{BoxError, Output, Transformer};
    /// use flechtwerk::{IncomingMessage, State};
    /// struct Warm(AtomicBool);
    /// impl Transformer for Warm {
    ///     fn input_topics(&self) -> Vec<String> {
    ///         vec!["in".into()]
    ///     }
    ///     async fn transform(&self, _: IncomingMessage, _: State, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    ///     async fn setup(&self) -> Result<(), BoxError> {
    ///         self.0.store(true, Ordering::SeqCst); // e.g. open a connection pool
    ///         Ok(())
    ///     }
    /// }
    /// let stage = Warm(AtomicBool::new(false));
    /// futures::executor::block_on(stage.setup())?; // the runner calls it once, before the first record
    /// assert!(stage.0.load(Ordering::SeqCst));
    /// # Ok::<(), BoxError>(())
    /// ```
    fn setup(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Runs once on shutdown, including after an error (STG-02).
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// let stage = transformer(["in"]).transform(|_, _, _| Ok(()));
    /// assert!(futures::executor::block_on(stage.teardown()).is_ok()); // the default does nothing
    /// ```
    fn teardown(&self) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }
}

type TransformFn = dyn Fn(IncomingMessage, State, &mut Output<'_>) -> Result<(), BoxError> + Send + Sync;
type StateKeyFn = dyn Fn(&IncomingMessage) -> String + Send + Sync;
type InvalidFn = dyn Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync;

/// Starts the short form of a transformer (Python's `Transformer.of` / `@transformer`): give
/// the input topics, then the transform as a closure. Hooks not given keep their defaults.
///
/// The closure is synchronous; a stage that awaits I/O implements [`Transformer`] directly.
///
/// ```
/// use flechtwerk::stage::{transformer, Transformer};
/// use flechtwerk::Message;
///
/// let upper = transformer(["names"]).transform(|msg, _state, out| {
///     out.send(Message::new("upper-names", msg.key.to_uppercase(), msg.value));
///     Ok(())
/// });
/// assert_eq!(upper.input_topics(), ["names"]);
/// ```
pub fn transformer<I, T>(input_topics: I) -> TransformerBuilder
where
    I: IntoIterator<Item = T>,
    T: Into<String>,
{
    TransformerBuilder {
        input_topics: input_topics.into_iter().map(Into::into).collect(),
        config_topics: Vec::new(),
        extract_state_key: None,
        enrich_config: None,
        on_invalid_message: None,
    }
}

/// Builder of a closure-based [`Transformer`] (see [`transformer`]).
///
/// ```
/// use flechtwerk::stage::{transformer, Transformer, TransformerBuilder};
/// use flechtwerk::wire::InvalidMessageAction;
///
/// let builder: TransformerBuilder = transformer(["in"])
///     .config_topics(["configs"])
///     .on_invalid_message(|_| InvalidMessageAction::Skip);
/// let stage = builder.transform(|_, _, _| Ok(()));
/// assert_eq!(stage.config_topics(), ["configs"]);
/// ```
pub struct TransformerBuilder {
    input_topics: Vec<String>,
    config_topics: Vec<String>,
    extract_state_key: Option<Box<StateKeyFn>>,
    enrich_config: Option<Box<dyn EnrichConfig>>,
    on_invalid_message: Option<Box<InvalidFn>>,
}

impl TransformerBuilder {
    /// Declares config topics.
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// let stage = transformer(["in"]).config_topics(["tenants", "limits"]).transform(|_, _, _| Ok(()));
    /// assert_eq!(stage.config_topics(), ["tenants", "limits"]);
    /// ```
    pub fn config_topics<I: IntoIterator<Item = T>, T: Into<String>>(mut self, topics: I) -> Self {
        self.config_topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// Replaces the default state key (the wire key).
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, Transformer};
    /// use flechtwerk::IncomingMessage;
    ///
    /// // Keys like "tenant-a/user-7" share one state per tenant.
    /// let stage = transformer(["in"])
    ///     .extract_state_key(|msg| msg.key.split('/').next().unwrap_or_default().to_owned())
    ///     .transform(|_, _, _| Ok(()));
    /// let msg = IncomingMessage {
    ///     key: "tenant-a/user-7".into(), value: None, topic: "in".into(), partition: 0, offset: 0, timestamp: None,
    /// };
    /// assert_eq!(stage.extract_state_key(&msg), "tenant-a");
    /// ```
    pub fn extract_state_key(mut self, f: impl Fn(&IncomingMessage) -> String + Send + Sync + 'static) -> Self {
        self.extract_state_key = Some(Box::new(f));
        self
    }

    /// Enriches every config record on its way into the store.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::stage::{transformer, Transformer};
    ///
    /// const HOST: Attribute<String> = Attribute::new("host", &STR);
    /// const URL: Attribute<String> = Attribute::new("url", &STR);
    ///
    /// // Every config gets its URL computed once, on its way into the store.
    /// let stage = transformer(["in"])
    ///     .config_topics(["endpoints"])
    ///     .enrich_config(|config| {
    ///         let url = format!("https://{}/api", config.require(&HOST)?);
    ///         Ok(config.with(&URL, url)?)
    ///     })
    ///     .transform(|_, _, _| Ok(()));
    /// assert!(stage.config_enricher().is_some());
    /// ```
    pub fn enrich_config(mut self, f: impl Fn(Config) -> Result<Config, BoxError> + Send + Sync + 'static) -> Self {
        self.enrich_config = Some(Box::new(f));
        self
    }

    /// Replaces the default invalid-message policy (raise).
    ///
    /// ```
    /// use flechtwerk::stage::transformer;
    /// use flechtwerk::wire::{InvalidMessageAction, Part};
    ///
    /// // Skip records whose value does not decode; an undecodable key still stops the stage.
    /// let lenient = transformer(["in"])
    ///     .on_invalid_message(|error| match error.part() {
    ///         Part::Value => InvalidMessageAction::Skip,
    ///         _ => InvalidMessageAction::Raise,
    ///     })
    ///     .transform(|_, _, _| Ok(()));
    /// # let _ = lenient;
    /// ```
    pub fn on_invalid_message(
        mut self,
        f: impl Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync + 'static,
    ) -> Self {
        self.on_invalid_message = Some(Box::new(f));
        self
    }

    /// Finishes the stage with its transform.
    ///
    /// ```
    /// use flechtwerk::stage::{transformer, FnTransformer};
    /// use flechtwerk::Message;
    ///
    /// let echo: FnTransformer = transformer(["in"]).transform(|msg, _state, out| {
    ///     out.send(Message::new("out", msg.key.as_str(), msg.value));
    ///     Ok(())
    /// });
    /// # let _ = echo;
    /// ```
    pub fn transform(
        self,
        f: impl Fn(IncomingMessage, State, &mut Output<'_>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> FnTransformer {
        FnTransformer { builder: self, transform: Box::new(f) }
    }
}

/// A [`Transformer`] made of closures (see [`transformer`]).
///
/// ```
/// use flechtwerk::stage::{transformer, FnTransformer, Transformer};
///
/// fn echo(input: &str, output: &'static str) -> FnTransformer {
///     transformer([input]).transform(move |msg, _state, out| {
///         out.send(flechtwerk::Message::new(output, msg.key.as_str(), msg.value));
///         Ok(())
///     })
/// }
/// assert_eq!(echo("in", "out").input_topics(), ["in"]);
/// ```
pub struct FnTransformer {
    builder: TransformerBuilder,
    transform: Box<TransformFn>,
}

impl Transformer for FnTransformer {
    fn input_topics(&self) -> Vec<String> {
        self.builder.input_topics.clone()
    }

    fn config_topics(&self) -> Vec<String> {
        self.builder.config_topics.clone()
    }

    async fn transform(&self, msg: IncomingMessage, state: State, out: &mut Output<'_>) -> Result<(), BoxError> {
        (self.transform)(msg, state, out)
    }

    fn extract_state_key(&self, msg: &IncomingMessage) -> String {
        match &self.builder.extract_state_key {
            Some(f) => f(msg),
            None => msg.key.clone(),
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
