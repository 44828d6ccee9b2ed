//! A small safe wrapper over RocksDB's C API (`rocksdb/c.h`), linked against the system
//! librocksdb by `build.rs`. Every `unsafe` block of the RocksDB adapter is in this module.
//!
//! The declarations are written by hand from `c.h` (checked against RocksDB 7.8.3, Debian 12's
//! `librocksdb-dev`; every function used here has been in the C API, unchanged, since long
//! before 7.x), so no bindgen and no libclang are needed to build. Only what the adapter uses is
//! declared. Ownership rules of the C API that the wrapper relies on:
//!
//! - `*_create` returns an object owned by the caller, freed by the matching `*_destroy`; each
//!   wrapper type owns one and destroys it on drop.
//! - `rocksdb_open` copies its options: they can be destroyed right after it returns.
//! - An error is reported through `char** errptr`: on failure RocksDB stores a `strdup`ed
//!   message there (freeing any message already there), which the caller frees with
//!   `rocksdb_free`. [`check`] copies it into an [`Error`] and frees it.
//! - `rocksdb_get_pinned` returns null for an absent key, or a pinnable slice owned by the
//!   caller (freed by `rocksdb_pinnableslice_destroy`) whose value lives as long as the slice.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::fmt;
use std::path::Path;
use std::ptr::{self, NonNull};

/// Opaque C types (`typedef struct rocksdb_t rocksdb_t;` etc.): only ever behind pointers.
macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        #[allow(non_camel_case_types)]
        struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    rocksdb_t,
    rocksdb_options_t,
    rocksdb_readoptions_t,
    rocksdb_writeoptions_t,
    rocksdb_pinnableslice_t,
    rocksdb_writebatch_t,
    rocksdb_flushoptions_t
);

// The library itself is linked by build.rs (`cargo:rustc-link-lib=dylib=rocksdb`), which finds it
// without any environment variable.
unsafe extern "C" {
    fn rocksdb_options_create() -> *mut rocksdb_options_t;
    fn rocksdb_options_destroy(options: *mut rocksdb_options_t);
    fn rocksdb_options_set_create_if_missing(options: *mut rocksdb_options_t, value: c_uchar);
    fn rocksdb_options_set_use_fsync(options: *mut rocksdb_options_t, value: c_int);
    fn rocksdb_options_set_write_buffer_size(options: *mut rocksdb_options_t, value: usize);
    fn rocksdb_options_set_max_write_buffer_number(options: *mut rocksdb_options_t, value: c_int);
    fn rocksdb_options_set_max_open_files(options: *mut rocksdb_options_t, value: c_int);
    fn rocksdb_options_set_info_log_level(options: *mut rocksdb_options_t, value: c_int);
    fn rocksdb_options_set_keep_log_file_num(options: *mut rocksdb_options_t, value: usize);
    fn rocksdb_options_set_max_log_file_size(options: *mut rocksdb_options_t, value: usize);

    fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
    fn rocksdb_readoptions_destroy(options: *mut rocksdb_readoptions_t);

    fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
    fn rocksdb_writeoptions_destroy(options: *mut rocksdb_writeoptions_t);
    fn rocksdb_writeoptions_set_sync(options: *mut rocksdb_writeoptions_t, value: c_uchar);
    fn rocksdb_writeoptions_disable_WAL(options: *mut rocksdb_writeoptions_t, disable: c_int);

    fn rocksdb_open(options: *const rocksdb_options_t, name: *const c_char, errptr: *mut *mut c_char)
        -> *mut rocksdb_t;
    fn rocksdb_close(db: *mut rocksdb_t);
    fn rocksdb_destroy_db(options: *const rocksdb_options_t, name: *const c_char, errptr: *mut *mut c_char);

    fn rocksdb_get_pinned(
        db: *mut rocksdb_t,
        options: *const rocksdb_readoptions_t,
        key: *const c_char,
        keylen: usize,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_pinnableslice_t;
    fn rocksdb_pinnableslice_value(slice: *const rocksdb_pinnableslice_t, vlen: *mut usize) -> *const c_char;
    fn rocksdb_pinnableslice_destroy(slice: *mut rocksdb_pinnableslice_t);

    fn rocksdb_free(ptr: *mut c_void);

    fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
    fn rocksdb_writebatch_destroy(batch: *mut rocksdb_writebatch_t);
    fn rocksdb_writebatch_clear(batch: *mut rocksdb_writebatch_t);
    fn rocksdb_writebatch_put(
        batch: *mut rocksdb_writebatch_t,
        key: *const c_char,
        klen: usize,
        val: *const c_char,
        vlen: usize,
    );
    fn rocksdb_writebatch_delete(batch: *mut rocksdb_writebatch_t, key: *const c_char, klen: usize);
    fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
    fn rocksdb_flushoptions_destroy(options: *mut rocksdb_flushoptions_t);
    fn rocksdb_flushoptions_set_wait(options: *mut rocksdb_flushoptions_t, wait: c_uchar);
    fn rocksdb_flush(db: *mut rocksdb_t, options: *const rocksdb_flushoptions_t, errptr: *mut *mut c_char);

    fn rocksdb_write(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        batch: *mut rocksdb_writebatch_t,
        errptr: *mut *mut c_char,
    );
}

/// An error reported by RocksDB (its status message), or a path it cannot be given.
#[derive(Debug)]
pub(super) struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RocksDB: {}", self.0)
    }
}

impl std::error::Error for Error {}

/// Turns the `errptr` of a call into a result, freeing the message.
fn check(err: *mut c_char) -> Result<(), Error> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null `errptr` after a call is a NUL-terminated string that RocksDB allocated
    // with strdup and handed to us; it is read once here, then freed with rocksdb_free (the C
    // API's free) and never used again.
    let message = unsafe {
        let message = CStr::from_ptr(err).to_string_lossy().into_owned();
        rocksdb_free(err.cast());
        message
    };
    Err(Error(message))
}

/// A path as the C string RocksDB takes.
fn c_path(path: &Path) -> Result<CString, Error> {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes =
        path.to_str().ok_or_else(|| Error(format!("path {} is not UTF-8", path.display())))?.as_bytes().to_vec();
    CString::new(bytes).map_err(|_| Error(format!("path {} contains a NUL byte", path.display())))
}

/// A non-null pointer from a `*_create` function. They allocate with C++ `new`, which aborts
/// rather than return null, so null would be a broken library.
fn created<T>(ptr: *mut T, what: &str) -> NonNull<T> {
    NonNull::new(ptr).unwrap_or_else(|| panic!("{what} returned null"))
}

/// RocksDB's info-log level (`InfoLogLevel` in `rocksdb/env.h`).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // the levels RocksDB has, not all used
pub(super) enum LogLevel {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
    Fatal = 4,
    Header = 5,
}

/// Database options (`rocksdb_options_t`), destroyed on drop.
pub(super) struct Options(NonNull<rocksdb_options_t>);

impl Options {
    pub(super) fn new() -> Self {
        // SAFETY: no arguments; the returned object is ours until destroyed in `drop`.
        Options(created(unsafe { rocksdb_options_create() }, "rocksdb_options_create"))
    }

    pub(super) fn create_if_missing(&mut self, value: bool) {
        // SAFETY: `self.0` is a live options object we own exclusively (`&mut self`).
        unsafe { rocksdb_options_set_create_if_missing(self.0.as_ptr(), c_uchar::from(value)) }
    }

    pub(super) fn set_use_fsync(&mut self, value: bool) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_use_fsync(self.0.as_ptr(), c_int::from(value)) }
    }

    pub(super) fn set_write_buffer_size(&mut self, bytes: usize) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_write_buffer_size(self.0.as_ptr(), bytes) }
    }

    pub(super) fn set_max_write_buffer_number(&mut self, count: c_int) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_max_write_buffer_number(self.0.as_ptr(), count) }
    }

    pub(super) fn set_max_open_files(&mut self, count: c_int) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_max_open_files(self.0.as_ptr(), count) }
    }

    pub(super) fn set_log_level(&mut self, level: LogLevel) {
        // SAFETY: as in `create_if_missing`; the value is one of InfoLogLevel's.
        unsafe { rocksdb_options_set_info_log_level(self.0.as_ptr(), level as c_int) }
    }

    pub(super) fn set_keep_log_file_num(&mut self, count: usize) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_keep_log_file_num(self.0.as_ptr(), count) }
    }

    pub(super) fn set_max_log_file_size(&mut self, bytes: usize) {
        // SAFETY: as in `create_if_missing`.
        unsafe { rocksdb_options_set_max_log_file_size(self.0.as_ptr(), bytes) }
    }
}

impl Drop for Options {
    fn drop(&mut self) {
        // SAFETY: created by rocksdb_options_create, destroyed exactly once, here.
        unsafe { rocksdb_options_destroy(self.0.as_ptr()) }
    }
}

/// Read options (`rocksdb_readoptions_t`, the defaults), destroyed on drop.
pub(super) struct ReadOptions(NonNull<rocksdb_readoptions_t>);

impl ReadOptions {
    pub(super) fn new() -> Self {
        // SAFETY: no arguments; the returned object is ours until destroyed in `drop`.
        ReadOptions(created(unsafe { rocksdb_readoptions_create() }, "rocksdb_readoptions_create"))
    }
}

impl Drop for ReadOptions {
    fn drop(&mut self) {
        // SAFETY: created by rocksdb_readoptions_create, destroyed exactly once, here.
        unsafe { rocksdb_readoptions_destroy(self.0.as_ptr()) }
    }
}

/// Write options (`rocksdb_writeoptions_t`), destroyed on drop.
pub(super) struct WriteOptions(NonNull<rocksdb_writeoptions_t>);

impl WriteOptions {
    pub(super) fn new() -> Self {
        // SAFETY: no arguments; the returned object is ours until destroyed in `drop`.
        WriteOptions(created(unsafe { rocksdb_writeoptions_create() }, "rocksdb_writeoptions_create"))
    }

    pub(super) fn disable_wal(&mut self, disable: bool) {
        // SAFETY: `self.0` is a live write-options object we own exclusively (`&mut self`).
        unsafe { rocksdb_writeoptions_disable_WAL(self.0.as_ptr(), c_int::from(disable)) }
    }

    pub(super) fn set_sync(&mut self, sync: bool) {
        // SAFETY: as in `disable_wal`.
        unsafe { rocksdb_writeoptions_set_sync(self.0.as_ptr(), c_uchar::from(sync)) }
    }
}

impl Drop for WriteOptions {
    fn drop(&mut self) {
        // SAFETY: created by rocksdb_writeoptions_create, destroyed exactly once, here.
        unsafe { rocksdb_writeoptions_destroy(self.0.as_ptr()) }
    }
}

/// A batch of writes applied at once by [`Db::write`] (`rocksdb_writebatch_t`), destroyed on
/// drop. The batch copies every key and value it is given; it is reused after a `clear`.
pub(super) struct WriteBatch(NonNull<rocksdb_writebatch_t>);

impl WriteBatch {
    pub(super) fn new() -> Self {
        // SAFETY: no arguments; the returned object is ours until destroyed in `drop`.
        WriteBatch(created(unsafe { rocksdb_writebatch_create() }, "rocksdb_writebatch_create"))
    }

    pub(super) fn clear(&mut self) {
        // SAFETY: a live batch we own exclusively (`&mut self`).
        unsafe { rocksdb_writebatch_clear(self.0.as_ptr()) }
    }

    pub(super) fn put(&mut self, key: &[u8], value: &[u8]) {
        // SAFETY: a live batch we own exclusively; key and value are valid for their lengths
        // during the call (the batch copies them).
        unsafe {
            rocksdb_writebatch_put(self.0.as_ptr(), key.as_ptr().cast(), key.len(), value.as_ptr().cast(), value.len())
        }
    }

    pub(super) fn delete(&mut self, key: &[u8]) {
        // SAFETY: as in `put`.
        unsafe { rocksdb_writebatch_delete(self.0.as_ptr(), key.as_ptr().cast(), key.len()) }
    }
}

impl Drop for WriteBatch {
    fn drop(&mut self) {
        // SAFETY: created by rocksdb_writebatch_create, destroyed exactly once, here.
        unsafe { rocksdb_writebatch_destroy(self.0.as_ptr()) }
    }
}

// SAFETY: a write batch is a plain C++ object (a string of encoded operations) with no thread
// affinity: it may move to another thread and be used or destroyed there. Not `Sync`: every
// use takes `&mut self` or is a `Db::write` by its single owner.
unsafe impl Send for WriteBatch {}

// SAFETY: the options objects are plain C++ structs (settings, and shared_ptrs to thread-safe
// RocksDB objects such as the default Env) with no thread affinity, so the owning pointer may
// move to another thread and be destroyed there. Not `Sync`: setters take `&mut self`, and
// nothing needs to share them.
unsafe impl Send for Options {}
// SAFETY: as for `Options` (a plain `ReadOptions` struct, only read by RocksDB).
unsafe impl Send for ReadOptions {}
// SAFETY: as for `Options` (a plain `WriteOptions` struct, only read by RocksDB).
unsafe impl Send for WriteOptions {}

/// An open database (`rocksdb_t`), closed on drop.
pub(super) struct Db(NonNull<rocksdb_t>);

// SAFETY: a RocksDB `DB` may be used from any thread ("A DB is safe for concurrent access from
// multiple threads without external synchronization", rocksdb/db.h), and `rocksdb_t` is a plain
// holder of the `DB*`; so a `Db` may move to another thread and be closed there. `Sync` is not
// claimed because nothing needs it: a store is used by one task at a time (`StateStore: Send`).
unsafe impl Send for Db {}

impl Db {
    /// Opens (with `create_if_missing`, creates) the database in directory `path`. Fails if
    /// another open database, in this process or another, holds its lock.
    pub(super) fn open(options: &Options, path: &Path) -> Result<Db, Error> {
        let name = c_path(path)?;
        let mut err = ptr::null_mut();
        // SAFETY: `options` is live and only read (RocksDB copies it); `name` is a
        // NUL-terminated string that outlives the call; `err` is a valid out-pointer holding null.
        let db = unsafe { rocksdb_open(options.0.as_ptr(), name.as_ptr(), &mut err) };
        check(err)?;
        NonNull::new(db).map(Db).ok_or_else(|| Error("rocksdb_open returned neither a database nor an error".into()))
    }

    /// Deletes the database's files in `path` (RocksDB's `DestroyDB`) without opening it. It
    /// takes the database's lock first, so a database still open anywhere is an error and
    /// keeps its files.
    pub(super) fn destroy(options: &Options, path: &Path) -> Result<(), Error> {
        let name = c_path(path)?;
        let mut err = ptr::null_mut();
        // SAFETY: as in `open`: live options only read, a NUL-terminated name, a null out-pointer.
        unsafe { rocksdb_destroy_db(options.0.as_ptr(), name.as_ptr(), &mut err) };
        check(err)
    }

    /// The value stored under `key`, copied out.
    pub(super) fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let mut err = ptr::null_mut();
        // SAFETY: `self.0` is an open database (closed only in `drop`); `options` is live and only
        // read; `key` is valid for `key.len()` bytes for the call; `err` is a null out-pointer.
        let slice = unsafe {
            rocksdb_get_pinned(self.0.as_ptr(), options.0.as_ptr(), key.as_ptr().cast(), key.len(), &mut err)
        };
        check(err)?;
        let Some(slice) = NonNull::new(slice) else {
            return Ok(None); // absent
        };
        // SAFETY: `slice` is a live pinnable slice we own. The value pointer and length it
        // returns stay valid until the slice is destroyed, which happens after copying them
        // (an empty value may come with any pointer, so it is not dereferenced). The slice is
        // destroyed exactly once.
        let value = unsafe {
            let mut len = 0usize;
            let data = rocksdb_pinnableslice_value(slice.as_ptr(), &mut len);
            let value = if len == 0 { Vec::new() } else { std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec() };
            rocksdb_pinnableslice_destroy(slice.as_ptr());
            value
        };
        Ok(Some(value))
    }

    /// Applies every write of `batch` at once (atomically, in one pass through the write path).
    pub(super) fn write(&self, options: &WriteOptions, batch: &mut WriteBatch) -> Result<(), Error> {
        let mut err = ptr::null_mut();
        // SAFETY: an open database, live options only read, a live batch we own exclusively
        // (RocksDB reads it during the call and keeps nothing of it), a null out-pointer.
        unsafe { rocksdb_write(self.0.as_ptr(), options.0.as_ptr(), batch.0.as_ptr(), &mut err) };
        check(err)
    }

    /// Writes the memtables into table files and waits until they are there: without a WAL,
    /// what a crash keeps is what was flushed (a prefix of the writes, in order).
    pub(super) fn flush(&self) -> Result<(), Error> {
        // SAFETY: no arguments; the returned object is ours until destroyed below.
        let options = created(unsafe { rocksdb_flushoptions_create() }, "rocksdb_flushoptions_create");
        let mut err = ptr::null_mut();
        // SAFETY: an open database; `options` is live, set before use, only read by the flush,
        // and destroyed exactly once after it; a null out-pointer.
        unsafe {
            rocksdb_flushoptions_set_wait(options.as_ptr(), 1);
            rocksdb_flush(self.0.as_ptr(), options.as_ptr(), &mut err);
            rocksdb_flushoptions_destroy(options.as_ptr());
        }
        check(err)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: opened by rocksdb_open, closed exactly once, here; nothing borrowed from it
        // (pinned slices are destroyed inside `get`) outlives it.
        unsafe { rocksdb_close(self.0.as_ptr()) }
    }
}
