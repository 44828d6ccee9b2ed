//! The RocksDB adapter of the [`StateStore`] port (production only: simulation builds never link
//! RocksDB, they use [`InMemoryStores`](super::InMemoryStores)).
//!
//! Task `p` of application `a` keeps its state at `<root>/<a>/state/<p>/state.db`. The database
//! is opened lazily on first access, so a stage that never touches state never creates a file
//! (STO-05); [`StateStore::wipe`] closes it and removes its files, and the next access opens a
//! new, empty one in the same place (STO-06).
//!
//! The store is a cache of the task's changelog partition, rebuilt from the changelog whenever
//! the task starts, so it is tuned for speed rather than durability:
//!
//! - **No write-ahead log, no fsync.** The changelog, written in the task's Kafka transaction, is
//!   the durable copy. After a crash the local files are never trusted: a database found on disk
//!   at first access is discarded and the state restored from the changelog.
//! - **Small write buffers** (4 MiB, at most two): a process runs a store per task, and the
//!   memtables are most of each store's memory. Without a WAL they are also what RocksDB flushes
//!   when a store is closed, so small buffers keep wipes (and so rebalances) cheap.
//! - **Few, small info logs** and a bounded number of open table files per store.

use std::path::{Component, Path, PathBuf};

use ::rocksdb::{LogLevel, Options, WriteOptions, DB};

use super::{StateError, StateStore, StateStores};

/// Opens each task's [`RocksDbStateStore`] under one root directory.
#[derive(Clone, Debug)]
pub struct RocksDbStores {
    root: PathBuf,
}

impl RocksDbStores {
    /// Stores under `root`: task `p` of application `a` at `<root>/<a>/state/<p>/state.db`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RocksDbStores { root: root.into() }
    }

    /// Stores in a fresh directory under the system temp dir, unique to this application
    /// instance (process id, instance counter, clock), so that a process never meets another
    /// one's files. Task state is a cache of the changelog, rebuilt whenever a task starts.
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
    pub fn path(&self, application_id: &str, partition: i32) -> PathBuf {
        self.root.join(application_id).join("state").join(partition.to_string()).join("state.db")
    }
}

impl StateStores for RocksDbStores {
    fn open(&self, application_id: &str, partition: i32) -> Result<Box<dyn StateStore>, StateError> {
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
        Ok(Box::new(RocksDbStateStore::new(self.path(application_id, partition), partition)))
    }
}

/// One task's state in a RocksDB database, opened on first access.
///
/// Dropping the store closes the database and leaves its files; the next owner of the task
/// discards them on first access.
pub struct RocksDbStateStore {
    path: PathBuf,
    partition: i32,
    db: Option<DB>,
    write: WriteOptions,
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
    fn new(path: PathBuf, partition: i32) -> Self {
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        write.set_sync(false);
        RocksDbStateStore { path, partition, db: None, write }
    }

    fn options() -> Options {
        let mut options = Options::default();
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

    fn error(&self, what: &str, source: impl std::error::Error + Send + Sync + 'static) -> StateError {
        StateError::new(self.partition, format!("{what} {}", self.path.display())).with_source(source)
    }

    /// The open database, opening an empty one on first access.
    fn db(&mut self) -> Result<&DB, StateError> {
        if self.db.is_none() {
            self.db = Some(self.open_empty()?);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }

    fn open_empty(&self) -> Result<DB, StateError> {
        let options = Self::options();
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| self.error("creating the parent of", e))?;
        }
        // Opening takes the database's lock, so a store still open elsewhere is an error here
        // and never has its files removed below.
        let db = DB::open(&options, &self.path).map_err(|e| self.error("opening", e))?;
        let mut iter = db.raw_iterator();
        iter.seek_to_first();
        let leftover = iter.valid();
        iter.status().map_err(|e| self.error("reading", e))?;
        drop(iter);
        if !leftover {
            return Ok(db);
        }
        // Files left by an earlier run (a crash skips the wipe): never trusted, since the store
        // is restored from the changelog.
        drop(db);
        self.remove_files()?;
        DB::open(&options, &self.path).map_err(|e| self.error("opening", e))
    }

    fn remove_files(&self) -> Result<(), StateError> {
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.error("removing", e)),
            _ => Ok(()),
        }
    }
}

impl StateStore for RocksDbStateStore {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let value = self.db()?.get_pinned(key).map(|v| v.map(|v| v.to_vec()));
        value.map_err(|e| self.error("reading", e))
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.db()?;
        let db = self.db.as_ref().expect("opened above");
        db.put_opt(key, value, &self.write).map_err(|e| self.error("writing", e))
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        self.db()?;
        let db = self.db.as_ref().expect("opened above");
        db.delete_opt(key, &self.write).map_err(|e| self.error("writing", e))
    }

    fn wipe(&mut self) -> Result<(), StateError> {
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
        assert!(root.0.join("app/state/3/state.db").is_dir());
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
        assert!(path.is_dir(), "the next access opens a new database in the same place");
        store.put("k2", b"{}").unwrap();
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
        for i in 0..5_000 {
            let got = store.get(&format!("key-{i}")).unwrap();
            assert_eq!(got, (i % 3 != 0).then(|| value(i)), "key-{i}");
        }
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

    #[test]
    fn leftover_files_are_discarded() {
        let root = TempRoot::new("leftover");
        let stores = RocksDbStores::new(&root.0);
        let mut store = stores.open("app", 0).unwrap();
        store.put("stale", b"1").unwrap();
        drop(store); // a crash: no wipe
        let mut store = stores.open("app", 0).unwrap();
        assert_eq!(store.get("stale").unwrap(), None, "a new owner starts empty");
    }

    #[test]
    fn same_task_open_twice_is_an_error() {
        let root = TempRoot::new("locked");
        let stores = RocksDbStores::new(&root.0);
        let mut first = stores.open("app", 0).unwrap();
        first.put("k", b"1").unwrap();
        let mut second = stores.open("app", 0).unwrap();
        let err = second.get("k").unwrap_err();
        assert!(std::error::Error::source(&err).is_some(), "{err}");
        assert_eq!(first.get("k").unwrap().as_deref(), Some(&b"1"[..]), "files untouched");
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
