//! The StateStore port: a task's local key → state bytes table (STO-01..17).
//!
//! A transformer task owns one store for its partition. The store is a cache of the task's
//! changelog partition: the changelog record of a state change rides the task's transaction
//! (with the outputs and the input offsets), and the store takes the change only once that
//! transaction committed, so a store never holds what no reader of the changelog can see.
//!
//! A store that keeps its files across owners ([`RocksDbStores`] on a fixed directory) records,
//! in the same write as each batch of changes, a [`Checkpoint`]: the changelog position its
//! content reflects. A store is never ahead of its changelog, only behind, so the next owner of
//! the task restores only the changelog's tail from that position — after a clean stop and
//! after a crash — unless the engine finds the copy unusable (STO-05; the exactly-once concept
//! page lists when). A store that keeps nothing across owners ([`InMemoryStores`]) reports no
//! checkpoint and is restored in full.
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
    /// Applies `changes` replayed from the task's changelog while the task is restored
    /// (STO-11), as [`apply`](StateStore::apply) does; the default calls it. A restore writes
    /// each key of the state once or a few times, not a working set read again batch after
    /// batch, so a store with a cache in front of its files may write these straight through
    /// (RocksDB: one write batch per call, past its cache). Afterwards a read returns the
    /// restored value, whatever was cached before. Restored changes carry no checkpoint: the
    /// engine records the restore's end with [`apply_at`](StateStore::apply_at) once the
    /// restore is done, so a crash before that leaves a copy whose content is ahead of its
    /// checkpoint by restored changes only, which the next restore from that checkpoint
    /// replays again, in order.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.restore(&[("ada", Some(br#"{"count":1}"#.as_slice())), ("ada", Some(br#"{"count":2}"#.as_slice()))])?;
    /// assert_eq!(store.get("ada")?.as_deref(), Some(br#"{"count":2}"#.as_slice())); // the last one wins
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn restore(&mut self, changes: &[(&str, Option<&[u8]>)]) -> Result<(), StateError> {
        self.apply(changes)
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

    /// The checkpoint recorded with the last write that reached the store's files, if the
    /// store holds a copy left by an earlier owner (or written by this one) that can be reused:
    /// its content then is exactly what it was when that checkpoint was written (or, after a
    /// crash during a [`restore`](StateStore::restore), that plus some of the changes restored
    /// after it, which the changelog holds after the checkpoint's position). `None`
    /// (the default, and a store that keeps nothing across owners) means an empty store, to be
    /// restored from the changelog's start. A store whose files are damaged (a torn write, a
    /// half-written directory) reports `None` and discards them at its first write.
    ///
    /// ```
    /// # use flechtwerk::state::{InMemoryStores, StateStores};
    /// let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// assert_eq!(store.checkpoint()?, None); // memory keeps nothing across owners
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn checkpoint(&mut self) -> Result<Option<Checkpoint>, StateError> {
        Ok(None)
    }

    /// Applies `changes` as [`apply`](StateStore::apply) does and records `checkpoint` in the
    /// same atomic write: whatever survives a crash holds both or neither, and never the
    /// checkpoint without the changes. The default applies the changes and forgets the
    /// checkpoint (a store that keeps nothing across owners).
    ///
    /// ```
    /// # use flechtwerk::state::{Checkpoint, InMemoryStores, StateStores};
    /// # let mut store = InMemoryStores::for_instance().open("app", 0)?;
    /// store.apply_at(&[("ada", Some(br#"{"count":1}"#.as_slice()))], &Checkpoint::from_bytes(b"42".to_vec()))?;
    /// assert!(store.get("ada")?.is_some());
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    fn apply_at(&mut self, changes: &[(&str, Option<&[u8]>)], checkpoint: &Checkpoint) -> Result<(), StateError> {
        let _ = checkpoint;
        self.apply(changes)
    }
}

/// Where a store's content stands in its changelog partition, recorded by the engine with each
/// batch of changes ([`StateStore::apply_at`]) and read back when the task starts
/// ([`StateStore::checkpoint`]). Its bytes are the engine's: a store keeps them as they are
/// (they are small, tens of bytes) and never interprets them.
///
/// ```
/// use flechtwerk::state::Checkpoint;
///
/// let checkpoint = Checkpoint::from_bytes(b"opaque".to_vec());
/// assert_eq!(checkpoint.as_bytes(), b"opaque");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint(Vec<u8>);

impl Checkpoint {
    /// A checkpoint from the bytes a store kept.
    ///
    /// ```
    /// # use flechtwerk::state::Checkpoint;
    /// let checkpoint = Checkpoint::from_bytes(vec![1, 2, 3]);
    /// ```
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Checkpoint(bytes)
    }

    /// The bytes to keep.
    ///
    /// ```
    /// # use flechtwerk::state::Checkpoint;
    /// assert_eq!(Checkpoint::from_bytes(vec![7]).as_bytes(), &[7]);
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
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
    /// The store of task `partition` of `application_id`: empty, or holding an earlier owner's
    /// copy when [`StateStore::checkpoint`] reports one.
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
