//! The RocksDB adapter of the [`StateStore`] port (production only: simulation builds never link
//! RocksDB, they use [`InMemoryStores`](super::InMemoryStores)).
//!
//! It calls RocksDB's C API through the small wrapper in `ffi` and links the system
//! `librocksdb` (found by `build.rs`; docs/reference/build.md says which package provides it): nothing is compiled from
//! C++ source and no bindings are generated.
//!
//! Task `p` of application `a` keeps its state at `<root>/<a>/state/<p>/state.db`. A new
//! database is created by the first write: until then reads return nothing and deletes do
//! nothing, so a stage that never writes state (a stateless transformer, or one that only looks
//! values up) never creates a file (STO-05). [`StateStore::wipe`] closes it and removes its
//! files, and the next write creates a new, empty one in the same place (STO-06).
//!
//! The store is a cache of the task's changelog partition, and it outlives its owner: each
//! batch of changes goes in with a [`Checkpoint`] (the changelog position it reflects) in the
//! same write batch, under a key no state key can be (it is not UTF-8). When the task starts
//! again, [`StateStore::checkpoint`] opens what an earlier owner left and reads that
//! checkpoint; the engine restores only the changelog's tail from there, or wipes the copy when
//! it cannot be used (STO-05). Files RocksDB cannot open (a half-written directory, damage), or
//! a database without a checkpoint (written by an older version), are discarded, as before,
//! by the first write. It is tuned for speed rather than durability:
//!
//! - **No write-ahead log, no fsync.** The changelog, written in the task's Kafka transaction, is
//!   the durable copy. A crash loses the writes still in the memtables; what survives is a
//!   prefix of the write batches (one column family, memtables flushed in order), each with the
//!   checkpoint of its own position, so the copy is only further behind. A restore's write
//!   batches carry no checkpoint (the restore's end is recorded once it is done): a crash
//!   during a restore leaves the copy ahead of its checkpoint by changes the changelog holds
//!   after that position, which the next restore replays again. Dropping the store (a clean
//!   stop) writes the cache and flushes the memtables.
//! - **Small write buffers** (4 MiB, at most two): a process runs a store per task, and the
//!   memtables are most of each store's memory. Without a WAL they are also what RocksDB flushes
//!   when a store is closed, so small buffers keep wipes (and so rebalances) cheap.
//! - **Few, small info logs** and a bounded number of open table files per store.
//! - **A small cache in front of it** (256 KiB per store by default,
//!   [`RocksDbStores::cache_bytes`]; reads through, writes back): a
//!   transformer reads and writes each key once per batch, mostly the same keys batch after
//!   batch, and RocksDB's read and write paths (a skip list search through every version the
//!   memtable holds of the key) cost ~7 000–8 000 instructions per key (issue #14). RocksDB
//!   takes the cache's changes in one write batch whenever the cache is full, so a working set
//!   that fits the cache costs a hash lookup per read and per write. A full cache is emptied
//!   whole (clean entries too): a working set just over the budget misses on most reads, as
//!   before the cache. The budget is approximate (a fixed cost per entry stands for the map's
//!   own memory).

// All of the adapter's unsafe code is in `ffi`, each block with its SAFETY comment.
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use self::ffi::{Db, LogLevel, Options, ReadOptions, WriteBatch, WriteOptions};
use super::{Checkpoint, StateError, StateStore, StateStores};

#[allow(unsafe_code)]
mod ffi;

/// Opens each task's [`RocksDbStateStore`] under one root directory.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::state::RocksDbStores;
///
/// // A fixed directory per replica (a pod's volume): a restarted replica meets its old files and
/// // restores only the changelog's tail on top of them (STO-05).
/// let stores = Arc::new(RocksDbStores::new("/var/lib/click-counter"));
/// // Flechtwerk::builder()....state_stores(stores)
/// ```
#[derive(Clone, Debug)]
pub struct RocksDbStores {
    root: PathBuf,
    cache_bytes: usize,
}

impl RocksDbStores {
    /// Stores under `root`: task `p` of application `a` at `<root>/<a>/state/<p>/state.db`.
    ///
    /// ```
    /// # use flechtwerk::state::RocksDbStores;
    /// let stores = RocksDbStores::new("/data");
    /// assert_eq!(stores.path("app", 3), std::path::Path::new("/data/app/state/3/state.db"));
    /// ```
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RocksDbStores { root: root.into(), cache_bytes: CACHE_BYTES }
    }

    /// The budget of each store's cache in front of RocksDB (default 256 KiB per task; the
    /// module documentation describes the cache). A stage whose tasks each keep more state
    /// than that, read and written batch after batch, runs faster with a budget that holds its
    /// working set; a process with very many tasks may want less. The budget is approximate
    /// (keys and values, plus a fixed cost per entry for the map's own memory); `0` writes every
    /// change through at once and keeps nothing.
    ///
    /// ```
    /// use flechtwerk::state::{RocksDbStores, StateStores};
    ///
    /// let root = std::env::temp_dir().join(format!("cache-bytes-doc-{}", std::process::id()));
    /// let stores = RocksDbStores::new(&root).cache_bytes(4 << 20); // 4 MiB per task
    /// let mut store = stores.open("app", 0)?;
    /// store.put("k", b"{}")?;
    /// assert_eq!(store.get("k")?.as_deref(), Some(&b"{}"[..]));
    /// store.wipe()?;
    /// # std::fs::remove_dir_all(&root).ok();
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Stores in a fresh directory under the system temp dir, unique to this application
    /// instance (process id, instance counter, clock), so that a process never meets another
    /// one's files. A restarted process starts empty and restores its tasks in full; give
    /// [`RocksDbStores::new`] a fixed directory to reuse state across restarts.
    ///
    /// ```
    /// use flechtwerk::state::{RocksDbStores, StateStores};
    ///
    /// let stores = RocksDbStores::for_instance();
    /// let mut store = stores.open("app", 0)?;
    /// store.put("k", b"{}")?; // creates the database
    /// assert_eq!(store.get("k")?.as_deref(), Some(&b"{}"[..]));
    /// store.wipe()?; // and removes its files
    /// # Ok::<(), flechtwerk::state::StateError>(())
    /// ```
    pub fn for_instance() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let unique = format!(
            "flechtwerk-{}-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        );
        RocksDbStores::new(std::env::temp_dir().join(unique))
    }

    /// The directory of the database of task `partition` of `application_id`.
    ///
    /// ```
    /// # use flechtwerk::state::RocksDbStores;
    /// assert!(RocksDbStores::new("/data").path("app", 0).ends_with("app/state/0/state.db"));
    /// ```
    pub fn path(&self, application_id: &str, partition: i32) -> PathBuf {
        self.root.join(application_id).join("state").join(partition.to_string()).join("state.db")
    }

    /// The store of task `partition` of `application_id` (not opened yet: STO-05).
    fn store(&self, application_id: &str, partition: i32) -> Result<RocksDbStateStore, StateError> {
        // The application id becomes a directory name: it must not climb out of (or spread
        // over) the root.
        let mut components = Path::new(application_id).components();
        let single = matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(name)), None) if name == application_id
        );
        if !single {
            return Err(StateError::new(
                partition,
                format!("application id {application_id:?} is not a valid directory name"),
            ));
        }
        Ok(RocksDbStateStore::new(self.path(application_id, partition), partition, self.cache_bytes))
    }
}

impl StateStores for RocksDbStores {
    fn open(&self, application_id: &str, partition: i32) -> Result<Box<dyn StateStore>, StateError> {
        Ok(Box::new(self.store(application_id, partition)?))
    }
}

/// One task's state in a RocksDB database, created by the first write or opened by
/// [`StateStore::checkpoint`] when an earlier owner left one.
///
/// Until something is written (or a copy is opened) the store is empty without a database:
/// reads return nothing and deletes do nothing, so a stage that only reads (a stateless
/// transformer's baseline lookups) never creates a file. Dropping the store writes its cache,
/// flushes and closes the database and leaves its files for the next owner of the task.
///
/// The store is [`Send`] (the [`StateStore`] port requires it): a RocksDB database may be used
/// from any thread, and the store's C objects have no thread affinity (see the `SAFETY`
/// comments of its `ffi` module). It is not `Sync`; the engine never shares a task's store.
///
/// ```
/// use flechtwerk::state::{RocksDbStores, StateStore, StateStores};
///
/// let mut store = RocksDbStores::for_instance().open("app", 1)?;
/// assert_eq!(store.get("k")?, None); // no database yet
/// store.put("k", br#"{"n":1}"#)?;
/// store.wipe()?;
/// # Ok::<(), flechtwerk::state::StateError>(())
/// ```
pub struct RocksDbStateStore {
    path: PathBuf,
    partition: i32,
    db: Option<Db>,
    read: ReadOptions,
    write: WriteOptions,
    /// Reused by every [`StateStore::apply`].
    batch: WriteBatch,
    /// The latest values of keys read or written lately, writes not yet in RocksDB included.
    cache: Cache,
    /// The checkpoint of the latest [`StateStore::apply_at`], not written yet: it goes into
    /// RocksDB with the cache's changes, which include every change it covers.
    checkpoint: Option<Vec<u8>>,
    /// Set when writing the cache's changes into RocksDB failed: they are lost, so every call
    /// fails until the store is wiped (the engine restores a task's store from its changelog).
    failed: bool,
    /// Tests: the next write-back fails (as a full disk would make it).
    #[cfg(test)]
    fail_next_write: bool,
}

/// Most bytes a store's [`Cache`] holds by default (keys, values and a fixed cost per entry)
/// before its changes go into RocksDB ([`RocksDbStores::cache_bytes`] sets another): enough for
/// a thousand or more small states per task, little beside RocksDB's own memtables (up to
/// 2 × 4 MiB per store) even at hundreds of tasks per process.
pub(crate) const CACHE_BYTES: usize = 256 << 10;

/// The store's latest values, absent keys included (`None`), in front of RocksDB: reads
/// through (a miss reads RocksDB and keeps the answer), writes back (a write changes only the
/// cache and marks the key dirty). Once it holds more than its budget, its dirty keys go into
/// RocksDB in one write batch and it is emptied. A hit is always the store's current value:
/// every write passes through it, and nothing else writes the database.
#[derive(Debug)]
struct Cache {
    entries: HashMap<Box<str>, Cached>,
    bytes: usize,
    budget: usize,
}

#[derive(Debug)]
struct Cached {
    value: Option<Box<[u8]>>,
    /// Written since the last flush: RocksDB does not have it yet.
    dirty: bool,
}

impl Cache {
    fn new(budget: usize) -> Self {
        Cache { entries: HashMap::new(), bytes: 0, budget }
    }

    /// What an entry counts against the budget: its bytes and, roughly, the rest (the map's
    /// slot and control byte, the two allocations of key and value). The budget is approximate.
    fn cost(key: &str, value: Option<&[u8]>) -> usize {
        key.len() + value.map_or(0, <[u8]>::len) + 128
    }

    fn get(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.entries.get(key).map(|cached| cached.value.as_deref().map(<[u8]>::to_vec))
    }

    fn set(&mut self, key: &str, value: Option<&[u8]>, dirty: bool) {
        let cost = Self::cost(key, value);
        if let Some(old) = self.entries.get_mut(key) {
            self.bytes = self.bytes - Self::cost(key, old.value.as_deref()) + cost;
            old.value = value.map(Box::from);
            old.dirty |= dirty;
        } else {
            self.bytes += cost;
            self.entries.insert(key.into(), Cached { value: value.map(Box::from), dirty });
        }
    }

    fn is_full(&self) -> bool {
        self.bytes > self.budget
    }

    /// Empties the cache and gives its table's memory back (a store that once held many small
    /// entries does not keep room for them for the rest of its life).
    fn clear(&mut self) {
        self.entries.clear();
        self.entries.shrink_to_fit();
        self.bytes = 0;
    }
}

impl std::fmt::Debug for RocksDbStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbStateStore")
            .field("path", &self.path)
            .field("partition", &self.partition)
            .field("open", &self.db.is_some())
            .finish()
    }
}

impl RocksDbStateStore {
    fn new(path: PathBuf, partition: i32, cache_bytes: usize) -> Self {
        let mut write = WriteOptions::new();
        write.disable_wal(true);
        write.set_sync(false);
        RocksDbStateStore {
            path,
            partition,
            db: None,
            read: ReadOptions::new(),
            write,
            batch: WriteBatch::new(),
            cache: Cache::new(cache_bytes),
            checkpoint: None,
            failed: false,
            #[cfg(test)]
            fail_next_write: false,
        }
    }

    fn options() -> Options {
        let mut options = Options::new();
        options.create_if_missing(true);
        options.set_use_fsync(false);
        options.set_write_buffer_size(4 << 20);
        options.set_max_write_buffer_number(2);
        options.set_max_open_files(64);
        options.set_log_level(LogLevel::Warn);
        options.set_keep_log_file_num(1);
        options.set_max_log_file_size(1 << 20);
        options
    }

    /// Opens the database an earlier owner left, if any, and reads its checkpoint. `None`, with
    /// a log line saying why, when there is none to reuse: the files are then left for the
    /// first write to discard.
    fn open_copy(&self) -> Option<(Db, Vec<u8>)> {
        if std::fs::symlink_metadata(&self.path).is_err() {
            return None;
        }
        let mut options = Self::options();
        options.create_if_missing(false);
        let db = match Db::open(&options, &self.path) {
            Ok(db) => db,
            Err(error) => {
                tracing::warn!(
                    partition = self.partition, path = %self.path.display(), %error,
                    "local state discarded: its files cannot be opened (a half-written or damaged directory)"
                );
                return None;
            }
        };
        match db.get(&self.read, CHECKPOINT_KEY) {
            Ok(Some(checkpoint)) => Some((db, checkpoint)),
            Ok(None) => {
                tracing::warn!(
                    partition = self.partition, path = %self.path.display(),
                    "local state discarded: it records no changelog position"
                );
                None
            }
            Err(error) => {
                tracing::warn!(
                    partition = self.partition, path = %self.path.display(), %error,
                    "local state discarded: its changelog position cannot be read"
                );
                None
            }
        }
    }

    fn error(&self, what: &str, source: impl std::error::Error + Send + Sync + 'static) -> StateError {
        StateError::new(self.partition, format!("{what} {}", self.path.display())).with_source(source)
    }

    /// The open database, opening an empty one on first use (by a write).
    fn db(&mut self) -> Result<&Db, StateError> {
        if self.db.is_none() {
            self.db = Some(self.open_empty()?);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }

    fn open_empty(&self) -> Result<Db, StateError> {
        let options = Self::options();
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| self.error("creating the parent of", e))?;
        }
        if std::fs::symlink_metadata(&self.path).is_ok() {
            // Files left by an earlier owner (a crash, or a drop, skips the wipe): never
            // trusted, since the store is restored from the changelog. RocksDB's DestroyDB takes
            // the database's lock first, so a store still open elsewhere is an error here and
            // keeps its files; it deletes without reading them, so damaged leftovers go too.
            Db::destroy(&options, &self.path).map_err(|e| self.error("discarding the leftover database", e))?;
            // Whatever DestroyDB does not know as a RocksDB file.
            self.remove_files()?;
        }
        Db::open(&options, &self.path).map_err(|e| self.error("opening", e))
    }

    fn remove_files(&self) -> Result<(), StateError> {
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.error("removing", e)),
            _ => Ok(()),
        }
    }
}

impl RocksDbStateStore {
    /// Refuses every call after a failed flush (see `failed`).
    fn check(&self) -> Result<(), StateError> {
        if self.failed {
            return Err(StateError::new(
                self.partition,
                format!("{}: an earlier write failed, the store must be wiped", self.path.display()),
            ));
        }
        Ok(())
    }

    /// Once the cache is over its budget: its dirty keys into RocksDB (one write batch), then
    /// empty it.
    fn flush_if_full(&mut self) -> Result<(), StateError> {
        if !self.cache.is_full() {
            return Ok(());
        }
        self.write_back()
    }

    /// The cache's dirty keys into RocksDB, with the pending checkpoint, in one write batch;
    /// then the cache is empty.
    fn write_back(&mut self) -> Result<(), StateError> {
        if self.db.is_none() {
            // Nothing was ever written: every write opens the database first, and reads of an
            // unopened store are not cached.
            debug_assert!(self.cache.entries.values().all(|cached| !cached.dirty), "dirty entries without a database");
            self.cache.clear();
            return Ok(());
        }
        self.batch.clear();
        let mut dirty = 0;
        for (key, cached) in self.cache.entries.iter().filter(|(_, cached)| cached.dirty) {
            dirty += 1;
            match &cached.value {
                Some(value) => self.batch.put(key.as_bytes(), value),
                None => self.batch.delete(key.as_bytes()),
            }
        }
        // The checkpoint rides the same write as the changes it covers (every one of them is in
        // the cache or already in RocksDB).
        if let Some(checkpoint) = &self.checkpoint {
            dirty += 1;
            self.batch.put(CHECKPOINT_KEY, checkpoint);
        }
        self.write_batch(dirty)?;
        self.cache.clear();
        self.checkpoint = None;
        Ok(())
    }

    /// Writes `batch`, which the caller filled with `entries` changes, into the open database
    /// and empties it; a failure marks the store failed (see `failed`).
    fn write_batch(&mut self, entries: usize) -> Result<(), StateError> {
        #[cfg(test)]
        if std::mem::take(&mut self.fail_next_write) {
            self.batch.clear();
            self.failed = true;
            return Err(StateError::new(self.partition, "a planted write failure"));
        }
        let db = self.db.as_ref().expect("a batch is written into an open database");
        let result = if entries > 0 { db.write(&self.write, &mut self.batch) } else { Ok(()) };
        self.batch.clear();
        if let Err(e) = result {
            self.failed = true;
            return Err(self.error("writing", e));
        }
        Ok(())
    }
}

/// Where the checkpoint is kept: bytes no state key can be (keys are UTF-8 strings; `0xff`
/// never occurs in UTF-8).
const CHECKPOINT_KEY: &[u8] = b"\xff\xffflechtwerk.checkpoint";

impl Drop for RocksDbStateStore {
    /// A clean close: the cache's changes and the checkpoint into RocksDB, the memtables into
    /// table files, so the next owner finds the store as this one left it. Failures are logged
    /// only: the next owner then finds an older checkpoint, or none.
    fn drop(&mut self) {
        if self.db.is_none() || self.failed {
            return;
        }
        if let Err(error) = self.write_back() {
            tracing::warn!(partition = self.partition, %error, "writing the state store at its close failed");
            return;
        }
        if let Some(Err(error)) = self.db.as_ref().map(Db::flush) {
            tracing::warn!(partition = self.partition, %error, "flushing the state store at its close failed");
        }
    }
}

impl StateStore for RocksDbStateStore {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.check()?;
        // Not opened (or wiped since): this owner wrote nothing, so there is nothing to read,
        // and reading creates no database (STO-05).
        let Some(db) = &self.db else {
            return Ok(None);
        };
        if let Some(hit) = self.cache.get(key) {
            return Ok(hit);
        }
        let value = db.get(&self.read, key.as_bytes()).map_err(|e| self.error("reading", e))?;
        self.cache.set(key, value.as_deref(), false);
        self.flush_if_full()?;
        Ok(value)
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.check()?;
        // The first write opens the database (STO-05), even though its value waits in the cache.
        self.db()?;
        self.cache.set(key, Some(value), true);
        self.flush_if_full()
    }

    /// A batch's state changes go into the cache; RocksDB takes them, many batches' worth in
    /// one write batch, once the cache is full (issue #14: a `put` per key was a third of the
    /// instructions per record of the counter stage, one write batch per task and batch still
    /// ~7 000 instructions per changed key, most of them the memtable's skip list growing by a
    /// version of the key per batch).
    fn apply(&mut self, changes: &[(&str, Option<&[u8]>)]) -> Result<(), StateError> {
        self.check()?;
        // Nothing to store, or only deletes before anything was written: no database needed.
        if changes.is_empty() || (self.db.is_none() && changes.iter().all(|(_, value)| value.is_none())) {
            return Ok(());
        }
        self.db()?;
        // Flushed as it fills, so one batch of large values does not hold the cache far over its
        // budget (the later changes go into the emptied cache, in order).
        for (key, value) in changes {
            self.cache.set(key, *value, true);
            self.flush_if_full()?;
        }
        Ok(())
    }

    /// Restored changes go past the cache into RocksDB, one write batch per call: a restore
    /// replays the whole state, which through the cache would cost a copy of every key and
    /// value and a write batch per 256 KiB. Whatever the cache holds goes into RocksDB first,
    /// so no cached value hides a restored one.
    fn restore(&mut self, changes: &[(&str, Option<&[u8]>)]) -> Result<(), StateError> {
        self.check()?;
        if changes.is_empty() || (self.db.is_none() && changes.iter().all(|(_, value)| value.is_none())) {
            return Ok(());
        }
        if !self.cache.entries.is_empty() {
            self.write_back()?;
        }
        self.db()?;
        self.batch.clear();
        for (key, value) in changes {
            match value {
                Some(value) => self.batch.put(key.as_bytes(), value),
                None => self.batch.delete(key.as_bytes()),
            }
        }
        self.write_batch(changes.len())
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        self.check()?;
        // Not opened: nothing to delete, and no database to create for it.
        if self.db.is_none() {
            return Ok(());
        }
        self.cache.set(key, None, true);
        self.flush_if_full()
    }

    fn checkpoint(&mut self) -> Result<Option<Checkpoint>, StateError> {
        self.check()?;
        if self.db.is_none() {
            let Some((db, checkpoint)) = self.open_copy() else {
                return Ok(None);
            };
            self.db = Some(db);
            return Ok(Some(Checkpoint::from_bytes(checkpoint)));
        }
        if let Some(pending) = &self.checkpoint {
            return Ok(Some(Checkpoint::from_bytes(pending.clone())));
        }
        let db = self.db.as_ref().expect("checked above");
        let stored = db.get(&self.read, CHECKPOINT_KEY).map_err(|e| self.error("reading the checkpoint of", e))?;
        Ok(stored.map(Checkpoint::from_bytes))
    }

    fn apply_at(&mut self, changes: &[(&str, Option<&[u8]>)], checkpoint: &Checkpoint) -> Result<(), StateError> {
        self.check()?;
        // Nothing to store before anything was written: no database, and no checkpoint (the
        // next owner restores the changelog in full, which holds no state of this store).
        if self.db.is_none() && changes.iter().all(|(_, value)| value.is_none()) {
            return Ok(());
        }
        self.db()?;
        // The changes first (a write back in their middle keeps the earlier checkpoint, which
        // covers less: only further behind), then the checkpoint that covers them all.
        for (key, value) in changes {
            self.cache.set(key, *value, true);
            self.flush_if_full()?;
        }
        self.checkpoint = Some(checkpoint.as_bytes().to_vec());
        Ok(())
    }

    fn wipe(&mut self) -> Result<(), StateError> {
        // The cache's changes are dropped with the files: the next owner starts empty.
        self.cache.clear();
        self.checkpoint = None;
        self.failed = false;
        // Unopened: nothing was created, nothing to remove (STO-05).
        match self.db.take() {
            Some(db) => {
                drop(db);
                self.remove_files()
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct TempRoot(PathBuf);

    impl TempRoot {
        fn new(name: &str) -> Self {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("flechtwerk-rocksdb-{name}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            TempRoot(dir)
        }
    }

    impl Drop for TempRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sto_05_opened_lazily() {
        let root = TempRoot::new("lazy");
        let stores = RocksDbStores::new(&root.0);
        let mut store = stores.open("app", 3).unwrap();
        assert!(!root.0.exists(), "open alone must not create files");
        store.wipe().unwrap();
        assert!(!root.0.exists(), "wipe of an unopened store is a no-op");
        drop(store);
        assert!(!root.0.exists());

        let mut store = stores.open("app", 3).unwrap();
        assert_eq!(store.get("k").unwrap(), None);
        assert!(!root.0.exists(), "a read alone must not create files");
        store.put("k", b"1").unwrap();
        assert!(root.0.join("app/state/3/state.db").is_dir(), "the first write opens the database");
    }

    /// A stateless transformer reads a baseline and deletes nothing it wrote: no database, no
    /// directory (STO-05), however often it does so, and wiping and dropping leave none either.
    #[test]
    fn sto_05_reads_and_deletes_alone_create_nothing() {
        let root = TempRoot::new("stateless");
        let stores = RocksDbStores::new(&root.0);
        let mut store = stores.open("app", 0).unwrap();
        for i in 0..100 {
            assert_eq!(store.get(&format!("k{i}")).unwrap(), None);
            store.delete(&format!("k{i}")).unwrap();
        }
        assert!(!root.0.exists(), "get/delete on a never-written store must not open RocksDB");
        store.wipe().unwrap();
        drop(store);
        assert!(!root.0.exists());
    }

    /// `apply` (one write batch) stores and removes like `put` and `delete` one at a time:
    /// in order, deletes of a never-written store create nothing (STO-05), and the result reads
    /// back the same as after the same changes one by one.
    #[test]
    fn sto_05_apply_is_put_and_delete_in_one_write() {
        let root = TempRoot::new("apply");
        let stores = RocksDbStores::new(&root.0);
        let mut store = stores.open("app", 0).unwrap();
        store.apply(&[]).unwrap();
        store.apply(&[("gone", None), ("never", None)]).unwrap();
        assert!(!root.0.exists(), "deletes alone must not open RocksDB");
        store
            .apply(&[("a", Some(b"1".as_slice())), ("b", Some(b"2".as_slice())), ("a", Some(b"3".as_slice()))])
            .unwrap();
        store.apply(&[("b", None), ("c", Some(b"".as_slice()))]).unwrap();
        let mut one_by_one = stores.open("other", 0).unwrap();
        for (key, value) in [("a", Some("1")), ("b", Some("2")), ("a", Some("3")), ("b", None), ("c", Some(""))] {
            match value {
                Some(value) => one_by_one.put(key, value.as_bytes()).unwrap(),
                None => one_by_one.delete(key).unwrap(),
            }
        }
        for key in ["a", "b", "c", "gone", "never"] {
            assert_eq!(store.get(key).unwrap(), one_by_one.get(key).unwrap(), "{key}");
        }
        assert_eq!(store.get("a").unwrap().as_deref(), Some(b"3".as_slice()), "the later write of a key wins");
        assert_eq!(store.get("c").unwrap().as_deref(), Some(b"".as_slice()));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Put(usize, Vec<u8>),
        Delete(usize),
        Apply(Vec<(usize, Option<Vec<u8>>)>),
        Restore(Vec<(usize, Option<Vec<u8>>)>),
        Get(usize),
        Wipe,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let key = 0..40usize;
        // Values up to 16 KiB: 40 keys of them overflow the read cache now and then.
        let value = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..16),
            proptest::collection::vec(any::<u8>(), 0..16_384)
        ];
        prop_oneof![
            4 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Put(k, v)),
            2 => key.clone().prop_map(Op::Delete),
            4 => proptest::collection::vec((key.clone(), proptest::option::of(value.clone())), 0..6).prop_map(Op::Apply),
            2 => proptest::collection::vec((key.clone(), proptest::option::of(value)), 0..6).prop_map(Op::Restore),
            6 => key.prop_map(Op::Get),
            1 => Just(Op::Wipe),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// The cache never answers anything but what the store holds: every read, after any mix
        /// of puts, deletes, batches (a key twice in one included), restored batches (past the
        /// cache, over keys it holds), wipes, and flushes of the cache into RocksDB (a budget of
        /// 0 flushes at every call, 4 KiB every few, the real one now and then), equals a plain
        /// map's answer (STO-05..07 through the cache).
        #[test]
        fn reads_through_the_cache_are_the_stores_values(
            ops in proptest::collection::vec(op(), 1..60),
            budget in proptest::prop_oneof![
                proptest::prelude::Just(0usize),
                proptest::prelude::Just(4_096),
                proptest::prelude::Just(CACHE_BYTES)
            ],
        ) {
            let root = TempRoot::new("cache");
            let mut store = RocksDbStateStore::new(root.0.join("state.db"), 0, budget);
            let mut model: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
            let name = |k: usize| format!("key-{k}");
            for op in ops {
                let restore = matches!(op, Op::Restore(_));
                match op {
                    Op::Put(k, v) => {
                        store.put(&name(k), &v).unwrap();
                        model.insert(name(k), v);
                    }
                    Op::Delete(k) => {
                        store.delete(&name(k)).unwrap();
                        model.remove(&name(k));
                    }
                    Op::Apply(changes) | Op::Restore(changes) => {
                        let names: Vec<String> = changes.iter().map(|(k, _)| name(*k)).collect();
                        let batch: Vec<(&str, Option<&[u8]>)> =
                            names.iter().zip(&changes).map(|(n, (_, v))| (n.as_str(), v.as_deref())).collect();
                        if restore {
                            store.restore(&batch).unwrap();
                        } else {
                            store.apply(&batch).unwrap();
                        }
                        for (n, (_, v)) in names.iter().zip(&changes) {
                            match v {
                                Some(v) => model.insert(n.clone(), v.clone()),
                                None => model.remove(n),
                            };
                        }
                    }
                    Op::Get(k) => {
                        let read = store.get(&name(k)).unwrap();
                        proptest::prop_assert_eq!(read.as_ref(), model.get(&name(k)));
                    }
                    Op::Wipe => {
                        store.wipe().unwrap();
                        model.clear();
                    }
                }
            }
            for k in 0..40 {
                let read = store.get(&name(k)).unwrap();
                proptest::prop_assert_eq!(read.as_ref(), model.get(&name(k)), "key {}", k);
            }
        }
    }

    /// A copy of a store's directory taken while it is open: what a crash (SIGKILL) at that
    /// moment leaves on disk, since without a WAL the process writes nothing RocksDB would
    /// need after it dies.
    fn crash_copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name();
            if name.to_string_lossy() == "LOCK" {
                continue;
            }
            // A file may vanish meanwhile (a background compaction deleting its inputs).
            let _ = std::fs::copy(entry.path(), to.join(name));
        }
    }

    fn checkpoint_of(n: u64) -> Checkpoint {
        Checkpoint::from_bytes(n.to_string().into_bytes())
    }

    fn number_of(checkpoint: &Checkpoint) -> usize {
        std::str::from_utf8(checkpoint.as_bytes()).unwrap().parse().unwrap()
    }

    type Batch = Vec<(usize, Option<Vec<u8>>)>;

    /// `batch` as the store's changes (`key-<k>`), handed to `write`.
    fn with_changes(batch: &Batch, write: impl FnOnce(&[(&str, Option<&[u8]>)])) {
        let names: Vec<String> = batch.iter().map(|(k, _)| format!("key-{k}")).collect();
        let changes: Vec<(&str, Option<&[u8]>)> =
            names.iter().zip(batch).map(|(n, (_, v))| (n.as_str(), v.as_deref())).collect();
        write(&changes);
    }

    fn apply_batch(store: &mut dyn StateStore, batch: &Batch, checkpoint: Option<&Checkpoint>) {
        with_changes(batch, |changes| match checkpoint {
            Some(checkpoint) => store.apply_at(changes, checkpoint).unwrap(),
            None => store.apply(changes).unwrap(),
        });
    }

    fn restore_batch(store: &mut dyn StateStore, batch: &Batch) {
        with_changes(batch, |changes| store.restore(changes).unwrap());
    }

    fn apply_to_model(model: &mut std::collections::BTreeMap<String, Vec<u8>>, batch: &Batch) {
        for (k, v) in batch {
            match v {
                Some(v) => model.insert(format!("key-{k}"), v.clone()),
                None => model.remove(&format!("key-{k}")),
            };
        }
    }

    fn batches() -> impl proptest::strategy::Strategy<Value = Vec<Batch>> {
        use proptest::prelude::*;
        let value = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..16),
            proptest::collection::vec(any::<u8>(), 0..8_192)
        ];
        proptest::collection::vec(proptest::collection::vec((0..30usize, proptest::option::of(value)), 0..8), 1..40)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// STO-05: for any sequence of batches (each applied with the checkpoint of its number)
        /// and a crash after any of them, the copy the crash leaves reports a checkpoint `n`
        /// (or none) and replaying batches `n+1..` on it gives exactly the committed state:
        /// a copy is only ever behind, never ahead, never torn between a batch and its
        /// checkpoint. After a clean close the copy is the committed state itself. A run of the
        /// batches may be a restore instead (STO-11: [`StateStore::restore`] past the cache,
        /// then the restore's end as the checkpoint, as the engine does after a reused copy's
        /// batches): a crash inside it leaves the copy's content ahead of its checkpoint by
        /// restored changes only, and replaying from the checkpoint still gives the state.
        #[test]
        fn sto_05_a_reopened_copy_is_a_committed_prefix(
            batches in batches(),
            crash_after in 0usize..40,
            owned in 0usize..40,
            restored in 0usize..40,
            budget in proptest::prop_oneof![
                proptest::prelude::Just(0usize),
                proptest::prelude::Just(4_096),
                proptest::prelude::Just(CACHE_BYTES)
            ],
        ) {
            let root = TempRoot::new("prefix");
            let path = root.0.join("live/state.db");
            let crashed = root.0.join("crashed/state.db");
            let crash_after = crash_after % batches.len();
            // Batches `first..end` are restored; the others applied as a task's batches are.
            let first = owned % (batches.len() + 1);
            let end = first + restored % (batches.len() - first + 1);
            let mut store = RocksDbStateStore::new(path.clone(), 0, budget);
            let mut model = std::collections::BTreeMap::new();
            for (n, batch) in batches.iter().enumerate() {
                if (first..end).contains(&n) {
                    restore_batch(&mut store, batch);
                    if n + 1 == end {
                        store.apply_at(&[], &checkpoint_of(end as u64)).unwrap();
                    }
                } else {
                    apply_batch(&mut store, batch, Some(&checkpoint_of(n as u64 + 1)));
                }
                apply_to_model(&mut model, batch);
                if n == crash_after && path.exists() {
                    crash_copy(&path, &crashed);
                }
            }
            drop(store); // a clean close
            let mut reopened = RocksDbStateStore::new(path.clone(), 0, budget);
            let checkpoint = reopened.checkpoint().unwrap();
            if path.exists() {
                proptest::prop_assert_eq!(checkpoint.as_ref().map(number_of), Some(batches.len()));
            }
            for k in 0..30 {
                let key = format!("key-{k}");
                let read = reopened.get(&key).unwrap();
                proptest::prop_assert_eq!(read.as_ref(), model.get(&key), "{}", key);
            }
            if crashed.exists() {
                let mut copy = RocksDbStateStore::new(crashed, 0, budget);
                let from = copy.checkpoint().unwrap().map_or(0, |c| number_of(&c));
                proptest::prop_assert!(from <= crash_after + 1, "a copy ahead of the crash: {} > {}", from, crash_after + 1);
                if from == 0 {
                    copy.wipe().unwrap();
                }
                for batch in &batches[from..] {
                    apply_batch(&mut copy, batch, None);
                }
                for k in 0..30 {
                    let key = format!("key-{k}");
                    let read = copy.get(&key).unwrap();
                    proptest::prop_assert_eq!(read.as_ref(), model.get(&key), "{} from {}", key, from);
                }
            }
        }
    }

    /// STO-05: a clean close keeps the copy and its checkpoint; the next owner reads both. A
    /// store that never called `checkpoint` still starts empty (its first write discards the
    /// files), and a wipe removes them.
    #[test]
    fn sto_05_a_clean_close_keeps_the_copy() {
        let root = TempRoot::new("keep");
        let stores = RocksDbStores::new(&root.0);
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.checkpoint().unwrap(), None, "nothing on disk");
        assert!(!root.0.exists(), "asking creates nothing");
        store.apply_at(&[("a", Some(b"1".as_slice())), ("b", Some(b"2".as_slice()))], &checkpoint_of(7)).unwrap();
        store.apply_at(&[("b", None)], &checkpoint_of(8)).unwrap();
        assert_eq!(store.checkpoint().unwrap(), Some(checkpoint_of(8)), "the pending checkpoint");
        drop(store);
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.checkpoint().unwrap(), Some(checkpoint_of(8)));
        assert_eq!(store.get("a").unwrap().as_deref(), Some(b"1".as_slice()));
        assert_eq!(store.get("b").unwrap(), None);
        drop(store);
        let mut fresh = stores.open("app", 0).unwrap();
        fresh.put("c", b"3").unwrap();
        assert_eq!(fresh.get("a").unwrap(), None, "not asked for its checkpoint: the copy was discarded");
        drop(fresh);
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.checkpoint().unwrap(), None, "a plain write records no checkpoint");
        assert_eq!(store.get("c").unwrap(), None, "a copy without a checkpoint is not read");
    }

    /// STO-05: a damaged copy (a torn write: a table file cut short, the manifest gone) is
    /// reported as none and discarded by the first write; a database an older version wrote
    /// (no checkpoint) likewise.
    #[test]
    fn sto_05_torn_or_unmarked_copies_are_discarded() {
        let root = TempRoot::new("torn");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 0);
        let mut store = stores.open("app", 0).unwrap();
        for i in 0..20_000 {
            store.apply_at(&[(format!("k-{i}").as_str(), Some([b'v'; 100].as_slice()))], &checkpoint_of(i)).unwrap();
        }
        drop(store);
        let manifests: Vec<PathBuf> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("MANIFEST"))
            .collect();
        assert!(!manifests.is_empty());
        for manifest in manifests {
            std::fs::remove_file(manifest).unwrap();
        }
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.checkpoint().unwrap(), None, "torn");
        assert_eq!(store.get("k-1").unwrap(), None);
        store.put("fresh", b"1").unwrap();
        assert_eq!(store.get("k-1").unwrap(), None, "the first write discarded the damaged copy");
        drop(store);
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.checkpoint().unwrap(), None, "written without a checkpoint");
    }

    /// Every store gets the budget its stores were given; `0` keeps nothing in the cache.
    #[test]
    fn stores_hand_their_cache_budget_to_every_store() {
        let root = TempRoot::new("budget");
        assert_eq!(RocksDbStores::new(&root.0).store("app", 0).unwrap().cache.budget, CACHE_BYTES);
        let mut store = RocksDbStores::new(&root.0).cache_bytes(0).store("app", 1).unwrap();
        assert_eq!(store.cache.budget, 0);
        store.put("k", b"1").unwrap();
        assert!(store.cache.entries.is_empty(), "written through at once");
        assert_eq!(store.get("k").unwrap().as_deref(), Some(b"1".as_slice()), "read back from RocksDB");
        assert!(store.cache.entries.is_empty());
        let mut store = RocksDbStores::new(&root.0).cache_bytes(1 << 20).store("app", 2).unwrap();
        store.put("k", b"1").unwrap();
        assert_eq!(store.cache.entries.len(), 1, "kept while under the budget");
    }

    /// A failed write-back loses the cache's changes, so the store refuses every call (reads
    /// included: they could answer from RocksDB without those changes) until it is wiped; after
    /// the wipe it works again, empty.
    #[test]
    fn a_failed_write_back_refuses_every_call_until_the_wipe() {
        let root = TempRoot::new("failed");
        // A budget of 0: every write is written back at once.
        let mut store = RocksDbStateStore::new(root.0.join("state.db"), 0, 0);
        store.put("kept", b"1").unwrap();
        store.fail_next_write = true;
        let error = store.put("lost", b"2").unwrap_err();
        assert!(error.to_string().contains("planted"), "{error}");
        for refused in [
            store.get("kept").map(|_| ()),
            store.put("k", b"3"),
            store.delete("kept"),
            store.apply(&[("k", Some(b"4".as_slice()))]),
        ] {
            let error = refused.unwrap_err().to_string();
            assert!(error.contains("must be wiped"), "{error}");
        }
        store.wipe().unwrap();
        assert_eq!(store.get("kept").unwrap(), None, "the wipe leaves an empty store");
        store.put("k", b"5").unwrap();
        assert_eq!(store.get("k").unwrap().as_deref(), Some(b"5".as_slice()));
    }

    #[test]
    fn sto_06_wipe_then_reuse() {
        let root = TempRoot::new("wipe");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 0);
        let mut store = stores.open("app", 0).unwrap();
        store.put("k1", b"{\"a\":1}").unwrap();
        assert!(path.is_dir());
        store.wipe().unwrap();
        assert!(!path.exists(), "wipe removes the files");
        assert_eq!(store.get("k1").unwrap(), None);
        store.delete("k1").unwrap();
        assert!(!path.exists(), "reads and deletes after a wipe open nothing");
        store.put("k2", b"{}").unwrap();
        assert!(path.is_dir(), "the next write opens a new database in the same place");
        assert_eq!(store.get("k2").unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(store.get("k1").unwrap(), None);
    }

    #[test]
    fn sto_07_absent_keys() {
        let root = TempRoot::new("absent");
        let mut store = RocksDbStores::new(&root.0).open("app", 1).unwrap();
        assert_eq!(store.get("absent").unwrap(), None);
        store.delete("absent").unwrap();
        store.put("k", b"1").unwrap();
        store.delete("k").unwrap();
        store.delete("k").unwrap();
        assert_eq!(store.get("k").unwrap(), None);
    }

    #[test]
    fn round_trip_of_many_keys() {
        let root = TempRoot::new("many");
        let mut store = RocksDbStores::new(&root.0).open("app", 2).unwrap();
        let value = |i: u32| format!("{{\"n\":{i},\"s\":\"größe-{i}\"}}").into_bytes();
        for i in 0..5_000 {
            store.put(&format!("key-{i}"), &value(i)).unwrap();
        }
        for i in (0..5_000).step_by(3) {
            store.delete(&format!("key-{i}")).unwrap();
        }
        store.put("", b"empty key").unwrap();
        store.put("ключ", b"").unwrap();
        store.put("key-1", b"overwritten").unwrap();
        for i in 2..5_000 {
            let got = store.get(&format!("key-{i}")).unwrap();
            assert_eq!(got, (i % 3 != 0).then(|| value(i)), "key-{i}");
        }
        assert_eq!(store.get("key-1").unwrap().as_deref(), Some(&b"overwritten"[..]));
        assert_eq!(store.get("").unwrap().as_deref(), Some(&b"empty key"[..]));
        assert_eq!(store.get("ключ").unwrap().as_deref(), Some(&b""[..]));
    }

    #[test]
    fn tasks_live_in_separate_directories() {
        let root = TempRoot::new("tasks");
        let stores = RocksDbStores::new(&root.0);
        let mut a = stores.open("app", 0).unwrap();
        let mut b = stores.open("app", 1).unwrap();
        a.put("k", b"a").unwrap();
        b.put("k", b"b").unwrap();
        assert_eq!(a.get("k").unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"b"[..]));
        assert!(root.0.join("app/state/0/state.db").is_dir());
        assert!(root.0.join("app/state/1/state.db").is_dir());
        a.wipe().unwrap();
        assert!(!root.0.join("app/state/0/state.db").exists());
        assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"b"[..]));
    }

    /// Values bigger than the write buffer, and bytes that are not UTF-8, round-trip.
    #[test]
    fn round_trip_of_large_and_binary_values() {
        let root = TempRoot::new("large");
        let mut store = RocksDbStores::new(&root.0).open("app", 0).unwrap();
        let large: Vec<u8> = (0..6 << 20).map(|i: u32| (i % 251) as u8).collect();
        let binary = [0u8, 255, 0, 128, 1];
        store.put("large", &large).unwrap();
        store.put("binary", &binary).unwrap();
        for i in 0..20_000 {
            store.put(&format!("filler-{i}"), &[b'x'; 100]).unwrap(); // flushes memtables to files
        }
        assert_eq!(store.get("large").unwrap().as_deref(), Some(&large[..]));
        assert_eq!(store.get("binary").unwrap().as_deref(), Some(&binary[..]));
        assert_eq!(store.get("filler-19999").unwrap().as_deref(), Some(&[b'x'; 100][..]));
    }

    #[test]
    fn leftover_files_are_discarded() {
        let root = TempRoot::new("leftover");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 0);
        let mut store = stores.open("app", 0).unwrap();
        store.put("stale", b"1").unwrap();
        for i in 0..20_000 {
            store.put(&format!("stale-{i}"), &[b's'; 100]).unwrap(); // some in table files
        }
        drop(store); // a crash: no wipe
        assert!(path.join("CURRENT").is_file());
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.get("stale").unwrap(), None, "a new owner starts empty");
        store.put("fresh", b"2").unwrap();
        assert_eq!(store.get("stale").unwrap(), None, "opening discarded the leftovers");
        assert_eq!(store.get("stale-19999").unwrap(), None);
        assert_eq!(store.get("fresh").unwrap().as_deref(), Some(&b"2"[..]));
    }

    /// Leftovers RocksDB could not open (a crash mid-write, a stray file) are discarded too:
    /// they are deleted, never read.
    #[test]
    fn damaged_leftovers_are_discarded() {
        let root = TempRoot::new("damaged");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 0);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("CURRENT"), b"MANIFEST-000042\n").unwrap(); // a missing manifest
        std::fs::write(path.join("000007.sst"), b"not a table").unwrap();
        std::fs::write(path.join("notes.txt"), b"not RocksDB's").unwrap();
        let mut store = stores.open("app", 0).unwrap();
        store.put("k", b"v").unwrap();
        assert_eq!(store.get("k").unwrap().as_deref(), Some(&b"v"[..]));
        assert!(!path.join("notes.txt").exists() && !path.join("000007.sst").exists());
    }

    #[test]
    fn same_task_open_twice_is_an_error() {
        let root = TempRoot::new("locked");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 0);
        let mut first = stores.open("app", 0).unwrap();
        first.put("k", b"1").unwrap();
        let files = |path: &Path| {
            let mut names: Vec<_> = std::fs::read_dir(path)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|name| !name.starts_with("LOG")) // RocksDB rolls the info log on open
                .collect();
            names.sort();
            names
        };
        let before = files(&path);
        let mut second = stores.open("app", 0).unwrap();
        assert_eq!(second.get("k").unwrap(), None, "unopened: nothing written by this owner");
        let err = second.put("k", b"2").unwrap_err();
        assert!(err.to_string().contains("discarding the leftover database"), "{err}");
        let source = std::error::Error::source(&err).expect("RocksDB's message").to_string();
        assert!(source.contains("lock"), "{source}");
        assert_eq!(files(&path), before, "the open database keeps its files");
        assert_eq!(first.get("k").unwrap().as_deref(), Some(&b"1"[..]));
        first.put("k2", b"3").unwrap();
    }

    /// Where the database should be there is a file: a named error, no panic, and the file
    /// is left alone.
    #[test]
    fn unusable_path_is_a_state_error() {
        let root = TempRoot::new("file");
        let stores = RocksDbStores::new(&root.0);
        let path = stores.path("app", 4);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"a file").unwrap();
        let mut store = stores.open("app", 4).unwrap();
        let err = store.put("k", b"v").unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("state store of task 4: "), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        let source = std::error::Error::source(&err).expect("the cause").to_string();
        assert!(source.starts_with("RocksDB: "), "{source}");
        assert_eq!(std::fs::read(&path).unwrap(), b"a file");
        assert_eq!(store.get("k").unwrap(), None);
        store.wipe().unwrap();

        // The parent is a file: creating the directories fails.
        let blocked = RocksDbStores::new(path.join("below"));
        let err = blocked.open("app", 4).unwrap().put("k", b"v").unwrap_err();
        assert!(err.to_string().contains("creating the parent of"), "{err}");
        assert!(std::error::Error::source(&err).is_some());

        // A path RocksDB cannot be given.
        let err = RocksDbStores::new("/tmp/nul\0byte").open("app", 4).unwrap().put("k", b"v").unwrap_err();
        assert!(std::error::Error::source(&err).unwrap().to_string().contains("NUL"), "{err}");
    }

    /// The port requires `Send`: a store opened on one thread is used, wiped and dropped
    /// (closing RocksDB) on others.
    #[test]
    fn store_moves_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<RocksDbStateStore>();
        assert_send::<RocksDbStores>();
        let root = TempRoot::new("threads");
        let mut store = RocksDbStores::new(&root.0).open("app", 0).unwrap();
        store.put("k", b"main").unwrap();
        let mut store = std::thread::spawn(move || {
            assert_eq!(store.get("k").unwrap().as_deref(), Some(&b"main"[..]));
            store.put("k", b"worker").unwrap();
            store
        })
        .join()
        .unwrap();
        assert_eq!(store.get("k").unwrap().as_deref(), Some(&b"worker"[..]));
        std::thread::spawn(move || {
            store.wipe().unwrap();
            store.put("after", b"wipe").unwrap();
            drop(store);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn application_id_must_be_one_directory_name() {
        let root = TempRoot::new("appid");
        let stores = RocksDbStores::new(&root.0);
        for bad in ["", ".", "..", "a/b", "/abs", "../up"] {
            assert!(stores.open(bad, 0).is_err(), "{bad:?}");
        }
        assert!(stores.open("orders-v2.1", 0).is_ok());
    }
}
