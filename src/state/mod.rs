//! The StateStore port: a task's local key → state bytes table (STO-01..17).
//!
//! A transformer task owns one store for its partition. The store is a cache of the task's
//! changelog partition: it is restored from the changelog when the task starts, written in the
//! task's transaction (the changelog record rides the same transaction as the outputs and the
//! input offsets), and wiped when the task is torn down. Nothing in it outlives the task, so a
//! store never has to be trusted across a rebalance.
//!
//! Values are canonical JSON bytes; decoding them is the engine's job (a corrupt value is an
//! unrecoverable data error, never a policy question: STO-03).

mod memory;
#[cfg(all(feature = "rocksdb", not(madsim)))]
mod rocksdb;

#[cfg(all(feature = "rocksdb", not(madsim)))]
pub use self::rocksdb::{RocksDbStateStore, RocksDbStores};
pub use memory::{InMemoryStateStore, InMemoryStores};

// The default stores of an application: RocksDB in a fresh directory under the system temp dir
// when the `rocksdb` feature is on (production), memory otherwise (and always in simulations).
#[cfg(not(all(feature = "rocksdb", not(madsim))))]
use self::memory::InMemoryStores as DefaultStores;
#[cfg(all(feature = "rocksdb", not(madsim)))]
use self::rocksdb::RocksDbStores as DefaultStores;

/// The stores an application uses unless the builder is given others.
pub(crate) fn default_stores() -> std::sync::Arc<dyn StateStores> {
    std::sync::Arc::new(DefaultStores::for_instance())
}

/// A failed local state operation.
///
/// ```
/// use flechtwerk::state::StateError;
///
/// let error = StateError::new(3, "disk full").with_source(std::io::Error::other("ENOSPC"));
/// assert!(error.to_string().contains("disk full"));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("state store of task {partition}: {message}")]
pub struct StateError {
    partition: i32,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StateError {
    /// An error in the store of task `partition`.
    ///
    /// ```
    /// # use flechtwerk::state::StateError;
    /// let error = StateError::new(0, "corrupt");
    /// ```
    pub fn new(partition: i32, message: impl Into<String>) -> Self {
        StateError { partition, message: message.into(), source: None }
    }

    /// Attaches the underlying error.
    ///
    /// ```
    /// # use flechtwerk::state::StateError;
    /// use std::error::Error as _;
    /// let error = StateError::new(0, "open failed").with_source(std::io::Error::other("EACCES"));
    /// assert!(error.source().is_some());
    /// ```
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// One task's local state: key → canonical JSON bytes.
///
/// Operations are synchronous: local key-value operations take microseconds, and the engine
/// calls them outside any transform, before and after a batch's concurrent part.
///
/// ```
/// use flechtwerk::state::{InMemoryStores, StateStores};
///
/// let mut store = InMemoryStores::for_instance().open("click-counter", 0)?;
/// store.put("ada", br#"{"count":2}"#)?;
/// assert_eq!(store.get("ada")?.as_deref(), Some(&br#"{"count":2}"#[..]));
/// store.delete("ada")?;
/// assert_eq!(store.get("ada")?, None);
/// # Ok::<(), flechtwerk::state::StateError>(())
/// ```
pub trait StateStore: Send {
    /// The bytes stored under `key`.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// assert_eq!(store.get("absent")?, None);
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Stores `value` under `key`.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.put("ada", br#"{"count":1}"#)?;
    /// assert!(store.get("ada")?.is_some());
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError>;
    /// Removes `key`; removing an absent key is a no-op.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.delete("never-written")?; // a no-op
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn delete(&mut self, key: &str) -> Result<(), StateError>;
    /// Applies `changes` in order: `Some(value)` stores the value under the key, `None` removes
    /// the key. The default is one [`put`](StateStore::put) or [`delete`](StateStore::delete)
    /// per change; a store that can write many at once overrides it (RocksDB: one write
    /// batch). The engine stores a batch's state changes with one call.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.put("grace", b"{}")?;
    /// store.apply(&[("ada", Some(br#"{"count":2}"#.as_slice())), ("grace", None)])?;
    /// assert_eq!(store.get("ada")?.as_deref(), Some(br#"{"count":2}"#.as_slice()));
    /// assert_eq!(store.get("grace")?, None);
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn apply(&mut self, changes: &[(&str, Option<&[u8]>)]) -> Result<(), StateError> {
        for (key, value) in changes {
            match value {
                Some(value) => self.put(key, value)?,
                None => self.delete(key)?,
            }
        }
        Ok(())
    }
    /// Drops everything (and any files): the store is empty afterwards and can be reused.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.put("ada", b"{}")?;
    /// store.wipe()?;
    /// assert_eq!(store.get("ada")?, None);
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn wipe(&mut self) -> Result<(), StateError>;
}

/// Opens a task's store.
///
/// Given to the builder with [`state_stores`](crate::FlechtwerkBuilder::state_stores); the
/// default is RocksDB under the system temp dir (feature `rocksdb`), or memory without it.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::state::InMemoryStores;
/// use flechtwerk::stage::transformer;
/// use flechtwerk::Flechtwerk;
///
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// let app = Flechtwerk::builder()
///     .application_id("click-counter")
///     .client_id("pod-0")
///     .kafka(kafka)
///     .state_stores(Arc::new(InMemoryStores::for_instance()))
///     .build(transformer(["clicks"]).transform(|_, _, _| Ok(())))?;
/// # Ok::<(), flechtwerk::Error>(())
/// ```
pub trait StateStores: Send + Sync {
    /// The (empty) store of task `partition` of `application_id`.
    ///
    /// ```
    /// use flechtwerk::state::{InMemoryStores, StateStores};
    ///
    /// let store = InMemoryStores::for_instance().open("click-counter", 3)?;
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn open(&self, application_id: &str, partition: i32) -> Result<Box<dyn StateStore>, StateError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sto_06_07_wipe_and_absent_keys() {
        let mut store = InMemoryStores.open("app", 3).unwrap();
        assert_eq!(store.get("k1").unwrap(), None);
        store.delete("absent").unwrap();
        store.put("k1", b"{\"a\":1}").unwrap();
        assert_eq!(store.get("k1").unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
        store.wipe().unwrap();
        assert_eq!(store.get("k1").unwrap(), None);
        store.put("k2", b"{}").unwrap();
        assert!(store.get("k2").unwrap().is_some());
    }
}
