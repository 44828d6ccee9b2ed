//! One poll's pages: the engine's side of [`Page`](crate::stage::Page) (EXT-10..25).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt as _;

use crate::configs::ConfigStoreError;
use crate::engine::config_topics::SharedStore;
use crate::engine::records::{changelog_record, output_record, record_bytes};
use crate::engine::txn::Txn;
use crate::error::{ContractViolation, Error};
use crate::message::Message;
use crate::observer::Observer;
use crate::record::{Config, State};
use crate::stage::PageSink;
use crate::state::StateStore;

/// The extractor's local state: one store for every token of the process (STO-17).
pub(in crate::engine) type SharedState = Arc<Mutex<Box<dyn StateStore>>>;

/// The pages of one poll of one config, on its token's producer.
pub(in crate::engine) struct TokenPage<'a> {
    pub(in crate::engine) txn: Txn<'a>,
    pub(in crate::engine) observer: &'a dyn Observer,
    pub(in crate::engine) store: &'a SharedState,
    pub(in crate::engine) configs: &'a SharedStore,
    pub(in crate::engine) changelog: &'a str,
    pub(in crate::engine) state_key: &'a str,
    /// The state last committed for the key (EXT-21): a commit writes the state only if it
    /// differs.
    pub(in crate::engine) baseline: State,
    /// Messages were sent since the last boundary.
    pub(in crate::engine) pending: bool,
    /// A send or commit failed: the page is doomed, whatever the stage makes of the error.
    pub(in crate::engine) failed: bool,
    /// Writing state is an error (the broker-dispatched loop, EXT-54).
    pub(in crate::engine) stateless: bool,
}

impl TokenPage<'_> {
    /// Commits the messages sent after the last boundary, as a page of their own (EXT-10).
    pub(in crate::engine) async fn finish_trailing(&mut self) -> Result<(), Error> {
        if self.pending {
            self.txn.finish(Ok(())).await?;
            self.pending = false;
        }
        Ok(())
    }

    async fn send_message(&mut self, message: Message) -> Result<(), Error> {
        let record = output_record(&message)?;
        self.observer.message_out(message.topic());
        self.observer.message_out_bytes(&record.topic, record_bytes(&record));
        self.txn.send(record).await?;
        self.pending = true;
        Ok(())
    }

    async fn commit_state(&mut self, state: State) -> Result<(), Error> {
        let changed = state != self.baseline;
        if changed && self.stateless {
            return Err(ContractViolation::StateInStatelessStage { state_key: self.state_key.to_owned() }.into());
        }
        if !changed && !self.pending {
            return Ok(()); // nothing to write: no transaction (EXT-11)
        }
        let value = if !changed {
            None
        } else if state.is_empty() {
            // A delete (EXT-24): the baseline had a value, else nothing would have changed.
            Some(None)
        } else {
            let bytes = state
                .encode()
                .map_err(|source| Error::Encode { what: format!("the state of key {:?}", self.state_key), source })?;
            Some(Some(bytes))
        };
        let filled = match &value {
            None => Ok(()),
            Some(bytes) => {
                if let Some(bytes) = bytes {
                    self.observer.state_record_bytes(bytes.len());
                }
                // Key hashing (no explicit partition), as Python does (EXT-43, STO-09): on a
                // changelog with one partition per token this is the token's own partition; on
                // any other count the restore reads to the high watermark (TokenRunner::restore).
                let value = bytes.as_deref().map(Bytes::copy_from_slice);
                self.txn.send(changelog_record(self.changelog, None, self.state_key, value)).await
            }
        };
        self.txn.finish(filled).await?;
        // The local store follows the changelog once the page committed.
        if let Some(bytes) = value {
            let mut store = self.store.lock().expect("state store lock");
            match bytes {
                Some(bytes) => store.put(self.state_key, &bytes)?,
                None => store.delete(self.state_key)?,
            }
        }
        self.baseline = state;
        self.pending = false;
        Ok(())
    }

    /// A page whose send or commit failed stays failed: whatever the stage does with the
    /// error, nothing more goes into its transaction, which the runner aborts.
    fn check_usable(&self) -> Result<(), Error> {
        if self.failed {
            return Err(ContractViolation::PageUsedAfterFailure { state_key: self.state_key.to_owned() }.into());
        }
        Ok(())
    }

    fn note<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if result.is_err() {
            self.failed = true;
        }
        result
    }
}

impl PageSink for TokenPage<'_> {
    fn send(&mut self, message: Message) -> BoxFuture<'_, Result<(), Error>> {
        async move {
            self.check_usable()?;
            let result = self.send_message(message).await;
            self.note(result)
        }
        .boxed()
    }

    fn commit(&mut self, state: State) -> BoxFuture<'_, Result<(), Error>> {
        async move {
            self.check_usable()?;
            let result = self.commit_state(state).await;
            self.note(result)
        }
        .boxed()
    }

    fn config(&self, key: &str) -> BoxFuture<'_, Result<Option<Config>, ConfigStoreError>> {
        let (key, configs) = (key.to_owned(), Arc::clone(self.configs));
        async move { configs.read().await.get(&key) }.boxed()
    }
}
