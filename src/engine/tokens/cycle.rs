//! Poll cycles (EXT-01..04): the active set, one poll per active config, tokens in parallel and
//! each token's configs one after another, then the wait until the next cycle.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use futures::FutureExt as _;

use super::page::{SharedState, TokenPage};
use super::Entries;
use crate::engine::bounds::RETRIED_CYCLES_MAX;
use crate::engine::config_topics::SharedStore;
use crate::engine::records::panic_error;
use crate::engine::stop::Stop;
use crate::engine::txn::{abort_open, Txn, TxnState};
use crate::error::Error;
use crate::kafka::Producer;
use crate::observer::Observer;
use crate::record::{Config, State};
use crate::stage::{Extractor, Page};

/// A held ownership token: its producer (`{application_id}-{token}`, fenced at grant) and
/// whether a page of it is open.
pub(in crate::engine) struct Token {
    pub(in crate::engine) token: i32,
    pub(in crate::engine) producer: Box<dyn Producer>,
    pub(in crate::engine) txn: TxnState,
}

/// What the cycles of one assignment share with the runner.
pub(in crate::engine) struct CycleContext<S> {
    pub(in crate::engine) stage: Arc<S>,
    pub(in crate::engine) observer: Arc<dyn Observer>,
    pub(in crate::engine) store: SharedState,
    pub(in crate::engine) configs: SharedStore,
    pub(in crate::engine) entries: Arc<Mutex<Entries>>,
    pub(in crate::engine) changelog: String,
    pub(in crate::engine) poll_interval: Duration,
    /// The broker-dispatched loop: every write of state fails, "stateless by contract" (EXT-54).
    pub(in crate::engine) stateless: bool,
    /// The broker-dispatched loop: a page aborted by an abortable Kafka error (the producer
    /// stays usable, the abort went through) does not end the run; the next cycle polls again,
    /// and the stage re-sends what the aborted page held (MQ-35). Bounded by
    /// [`RETRIED_CYCLES_MAX`] failing cycles in a row.
    pub(in crate::engine) retry_aborted_pages: bool,
}

/// One active config of a cycle.
struct Active {
    key: String,
    state_key: String,
    token: i32,
    config: Config,
}

/// Runs cycles on `tokens` until `cancel` is raised (then `Ok`) or a cycle fails; gives the
/// tokens back either way, with no page open (a cancelled poll's page is aborted here, EXT-36).
pub(in crate::engine) async fn run_cycles<S: Extractor>(
    ctx: Arc<CycleContext<S>>,
    mut tokens: Vec<Token>,
    cancel: Stop,
) -> (Vec<Token>, Result<(), Error>) {
    let mut failed_in_a_row = 0;
    loop {
        for token in &mut tokens {
            token.txn.clear_abort_failed();
        }
        let outcome = tokio::select! {
            biased;
            () = cancel.raised() => None,
            result = cycle(&ctx, &mut tokens) => Some(result),
        };
        // Concurrently: each abort is bounded by ABORT_TIMEOUT, and a replica holding several
        // tokens must still stop within the shutdown's budget (bounds.rs).
        futures::future::join_all(
            tokens.iter_mut().map(|token| abort_open(&*token.producer, &mut token.txn, &"the poll was cancelled")),
        )
        .await;
        match outcome {
            None => return (tokens, Ok(())),
            Some(Err(error)) => {
                let aborted_cleanly = tokens.iter().all(|t| !t.txn.abort_failed());
                failed_in_a_row += 1;
                if ctx.retry_aborted_pages
                    && aborted_cleanly
                    && is_abortable(&error)
                    && failed_in_a_row <= RETRIED_CYCLES_MAX
                {
                    tracing::warn!(%error, failed_in_a_row, "a page aborted: the next cycle polls again");
                } else {
                    return (tokens, Err(error));
                }
            }
            Some(Ok(())) => failed_in_a_row = 0,
        }
        // From the end of the cycle (EXT-03): the interval, or the stage's wakeup.
        let wakeup = async {
            match ctx.stage.wakeup() {
                Some(wakeup) => wakeup.wait().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = cancel.raised() => return (tokens, Ok(())),
            () = tokio::time::sleep(ctx.poll_interval) => {}
            () = wakeup => {}
        }
    }
}

/// A Kafka error that aborted the transaction and left the producer usable.
fn is_abortable(error: &Error) -> bool {
    matches!(error, Error::Kafka(e) if e.is_abortable())
}

/// One cycle: reconcile, poll every active config, report.
async fn cycle<S: Extractor>(ctx: &CycleContext<S>, tokens: &mut [Token]) -> Result<(), Error> {
    let held: Vec<i32> = tokens.iter().map(|t| t.token).collect();
    let active = active_set(ctx, &held).await?;
    let by_key: BTreeMap<String, Config> = active.iter().map(|a| (a.key.clone(), a.config.clone())).collect();
    ctx.stage
        .on_active_configs(&by_key)
        .await
        .map_err(|source| Error::Hook { hook: "on_active_configs".into(), source })?;
    ctx.observer.active_configs(active.len());
    if active.is_empty() {
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    let polls = tokens.iter_mut().map(|token| {
        let mine: Vec<&Active> = active.iter().filter(|a| a.token == token.token).collect();
        async move {
            let mut results = Vec::new();
            for config in mine {
                results.push((config.key.clone(), poll_one(ctx, token, config).await));
            }
            results
        }
    });
    let mut results: Vec<(String, Result<(), Error>)> = join_all(polls).await.into_iter().flatten().collect();
    ctx.observer.poll_cycle(started.elapsed());
    // The first error in entry order (EXT-01).
    results.sort_by(|a, b| a.0.cmp(&b.0));
    match results.into_iter().find_map(|(_, r)| r.err()) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The active configs of the held tokens: not suspended, owned by their state key's token
/// (EXT-32, CFG-32), in wire-key order, each a private copy of the stored config (EXT-18).
async fn active_set<S: Extractor>(ctx: &CycleContext<S>, held: &[i32]) -> Result<Vec<Active>, Error> {
    // The store first: a drain updates the entries under its write lock, so these entries are
    // the store's (CFG-30).
    let store = ctx.configs.read().await;
    let owned: Vec<(String, String, i32)> = {
        let entries = ctx.entries.lock().expect("entries lock");
        entries
            .map
            .iter()
            .filter(|(_, e)| !e.suspended)
            .filter_map(|(key, e)| {
                let token = i32::try_from(crate::token::token_for(&e.state_key, entries.tokens)).expect("a token fits");
                held.contains(&token).then(|| (key.clone(), e.state_key.clone(), token))
            })
            .collect()
    };
    let mut active = Vec::with_capacity(owned.len());
    for (key, state_key, token) in owned {
        // A config deleted since the entries were updated is simply not polled.
        if let Some(config) = store.get(&key)? {
            active.push(Active { key, state_key, token, config });
        }
    }
    Ok(active)
}

/// One poll of one config on its token (EXT-10..18): state read fresh, pages committed as the
/// stage marks them, the trailing page committed, the open page aborted on failure.
async fn poll_one<S: Extractor>(ctx: &CycleContext<S>, token: &mut Token, active: &Active) -> Result<(), Error> {
    let state = load_state(ctx, &active.state_key)?;
    let mut sink = TokenPage {
        txn: Txn::new(&*token.producer, &mut token.txn, &*ctx.observer),
        observer: &*ctx.observer,
        store: &ctx.store,
        configs: &ctx.configs,
        changelog: &ctx.changelog,
        state_key: &active.state_key,
        baseline: state.clone(),
        pending: false,
        failed: false,
        stateless: ctx.stateless,
    };
    let started = tokio::time::Instant::now();
    let polled = {
        let mut page = Page::new(&active.key, &active.state_key, &mut sink);
        // A panicking poll fails like an error (its page aborts), instead of unwinding through
        // the runner past its cleanup.
        AssertUnwindSafe(ctx.stage.poll(active.config.clone(), state, &mut page))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(panic_error("poll", panic)))
    };
    let result = match polled {
        Ok(()) => sink.finish_trailing().await,
        Err(source) => Err(match source.downcast::<Error>() {
            // The page's own failure, returned by the stage as it came.
            Ok(error) => *error,
            Err(source) => Error::Poll { key: active.key.clone(), source },
        }),
    };
    ctx.observer.message_processed(started.elapsed());
    if let Err(error) = &result {
        let cause = error.to_string();
        drop(sink);
        abort_open(&*token.producer, &mut token.txn, &cause).await;
    }
    result
}

fn load_state<S>(ctx: &CycleContext<S>, state_key: &str) -> Result<State, Error> {
    let bytes = ctx.store.lock().expect("state store lock").get(state_key)?;
    match bytes {
        None => Ok(State::new()),
        Some(bytes) => crate::wire::decode_value(Some(&bytes)).map(State::wrap).map_err(|source| Error::CorruptState {
            partition: -1,
            key: state_key.to_owned(),
            source,
        }),
    }
}
