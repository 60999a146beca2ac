//! What SQLite does for one database file, counted inside SQLite (test support for the cost
//! table, docs/costs.md): statements run, rows written, bytes of values bound, flushes.
//!
//! [`install`] registers an automatic extension, so every SQLite connection this process opens
//! afterwards (sqlx's and the direct rusqlite connection: one bundled library) reports each
//! statement it finishes through `sqlite3_trace_v2`, and a VFS (made the default) that passes
//! every call to the platform's and counts the `xSync` calls, the flushes to the disk; the
//! counts are kept per database file, so tests running beside each other in one process do not
//! mix. The count is SQLite's own, not the server's idea of it: a statement or a flush the
//! server forgets to count is still counted.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::Path;
use std::sync::{LazyLock, Mutex, Once};

use rusqlite::ffi;

/// What SQLite did for one database file, since [`install`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SqliteCounts {
    /// The server's statements run to their end or reset (transaction control and pragmas
    /// included; the statements of a trigger are part of the statement that fired it; the
    /// search index's own and the background checkpoint's are counted apart).
    pub statements: u64,
    /// Statements FTS5 ran on the search index's shadow tables, inside the server's.
    pub index_statements: u64,
    /// Background checkpoints (`PRAGMA wal_checkpoint`).
    pub checkpoints: u64,
    /// Statements of the background merge of the search index (module `db::merges`: its
    /// transactions, its FTS5 `merge` commands and the statements FTS5 runs for them). They run
    /// on a timer, so they are counted apart, and so are the rows they write.
    pub merge_statements: u64,
    /// Rows the background merge wrote.
    pub merge_rows_written: u64,
    /// Rows inserted, updated or deleted (SQLite's `total_changes`: by the server's statements,
    /// by triggers and by the search index's own statements).
    pub rows_written: u64,
    /// Bytes of the values bound to the server's statements, as SQL literals (a text's quotes and
    /// doubled quotes included): what the server copied into SQLite.
    pub bytes_bound: u64,
    /// Flushes (`xSync`) of the database file or its write-ahead log that the server's own
    /// statements caused: a commit's, with `synchronous = FULL`.
    pub flushes: u64,
    /// Flushes made by background checkpoints (the log before its pages are copied, the
    /// database file after): they run on a timer, at most a few per interval, not per request.
    pub checkpoint_flushes: u64,
    /// Flushes of a new log header: the first write after a checkpoint that emptied the log
    /// starts it over and flushes its header once. Whether a command is that first write
    /// depends on when the background checkpoint ran, so it is counted apart.
    pub log_restarts: u64,
}

impl std::ops::Sub for SqliteCounts {
    type Output = SqliteCounts;

    fn sub(self, before: SqliteCounts) -> SqliteCounts {
        SqliteCounts {
            statements: self.statements - before.statements,
            index_statements: self.index_statements - before.index_statements,
            checkpoints: self.checkpoints - before.checkpoints,
            merge_statements: self.merge_statements - before.merge_statements,
            merge_rows_written: self.merge_rows_written - before.merge_rows_written,
            rows_written: self.rows_written - before.rows_written,
            bytes_bound: self.bytes_bound - before.bytes_bound,
            flushes: self.flushes - before.flushes,
            checkpoint_flushes: self.checkpoint_flushes - before.checkpoint_flushes,
            log_restarts: self.log_restarts - before.log_restarts,
        }
    }
}

/// Counts by database file (SQLite's full path name).
static COUNTS: LazyLock<Mutex<HashMap<String, SqliteCounts>>> = LazyLock::new(Default::default);

/// The pages each database's log received from the server's statements, in order (a frame's
/// header names its page).
static PAGES: LazyLock<Mutex<HashMap<String, Vec<u32>>>> = LazyLock::new(Default::default);

/// The pages written to the log of the database at `path` so far by the server's statements
/// (not by checkpoints), in order, one entry per frame (not the frames that only pad a commit
/// to the disk's sector): which of them belong to which table or index, [`tables_of`] says.
/// How many a write adds depends on the data (a B-tree splits when its page fills, and keys
/// made at random fill different pages each run), so only a fresh database's are the same
/// from run to run.
pub fn log_pages(path: &Path) -> Vec<u32> {
    let pages = PAGES.lock().unwrap_or_else(|p| p.into_inner());
    pages.get(&file_key(path)).cloned().unwrap_or_default()
}

/// How the counts name the database at `path`: as SQLite does, its full path.
fn file_key(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    path.to_string_lossy().into_owned()
}

/// How many of `pages` belong to each table or index of the database at `path` (SQLite's
/// `dbstat`), most first; pages no table holds now (freed) are under `(free)`.
pub fn tables_of(path: &Path, pages: &[u32]) -> rusqlite::Result<Vec<(String, usize)>> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut stmt = conn.prepare("SELECT pageno, name FROM dbstat")?;
    let owner: HashMap<u32, String> = stmt
        .query_map([], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut counted: HashMap<String, usize> = HashMap::new();
    for page in pages {
        let name = owner.get(page).cloned().unwrap_or_else(|| "(free)".into());
        *counted.entry(name).or_default() += 1;
    }
    let mut counted: Vec<(String, usize)> = counted.into_iter().collect();
    counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(counted)
}

/// Each open connection's `total_changes` when it last finished a statement.
static CHANGES: LazyLock<Mutex<HashMap<usize, i64>>> = LazyLock::new(Default::default);

/// Starts counting on every SQLite connection opened from now on (idempotent).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `entry` has the signature SQLite calls an automatic extension with.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(entry)) };
        assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_auto_extension failed");
        vfs::register();
    });
}

/// The counts of the database at `path` so far (zero before its first statement).
pub fn counts(path: &Path) -> SqliteCounts {
    let counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts.get(&file_key(path)).copied().unwrap_or_default()
}

unsafe extern "C" fn entry(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `db` is the connection being opened; `trace` matches the callback's signature.
    unsafe {
        ffi::sqlite3_trace_v2(
            db,
            (ffi::SQLITE_TRACE_STMT | ffi::SQLITE_TRACE_PROFILE | ffi::SQLITE_TRACE_CLOSE)
                as c_uint,
            Some(trace),
            std::ptr::null_mut(),
        );
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn trace(
    mask: c_uint,
    _ctx: *mut c_void,
    p: *mut c_void,
    _x: *mut c_void,
) -> c_int {
    if mask == ffi::SQLITE_TRACE_CLOSE as c_uint {
        CHANGES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(p as usize));
        return 0;
    }
    let stmt = p as *mut ffi::sqlite3_stmt;
    if mask == ffi::SQLITE_TRACE_STMT as c_uint {
        // SAFETY: for SQLITE_TRACE_STMT, `p` is the statement starting, valid during the call.
        let sql = unsafe { ffi::sqlite3_sql(stmt) };
        // SAFETY: SQLite's text of the statement, NUL-terminated, valid while it is.
        if !sql.is_null() {
            // SAFETY: as above.
            let text = unsafe { CStr::from_ptr(sql) }.to_bytes();
            if text.starts_with(CHECKPOINT) {
                vfs::IN_CHECKPOINT.set(true);
            } else if text.starts_with(MERGE) {
                vfs::IN_MERGE.set(true);
            }
        }
        return 0;
    }
    if mask != ffi::SQLITE_TRACE_PROFILE as c_uint {
        return 0;
    }
    // SAFETY: for SQLITE_TRACE_PROFILE, `p` is the statement that finished, valid during the
    // callback; the strings SQLite returns are read before it goes on, the expanded one freed.
    let (file, kind, bytes, total) = unsafe {
        let db = ffi::sqlite3_db_handle(stmt);
        let name = ffi::sqlite3_db_filename(db, c"main".as_ptr());
        let file = if name.is_null() {
            String::new()
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        };
        let sql = ffi::sqlite3_sql(stmt);
        let sql_len = if sql.is_null() {
            0
        } else {
            CStr::from_ptr(sql).to_bytes().len()
        };
        let kind = if sql.is_null() {
            Kind::Server
        } else {
            Kind::of(CStr::from_ptr(sql).to_bytes())
        };
        let bytes = if ffi::sqlite3_bind_parameter_count(stmt) == 0 {
            0
        } else {
            let expanded = ffi::sqlite3_expanded_sql(stmt);
            if expanded.is_null() {
                0
            } else {
                let n = CStr::from_ptr(expanded).to_bytes().len();
                ffi::sqlite3_free(expanded.cast());
                n.saturating_sub(sql_len)
            }
        };
        (
            file,
            kind,
            bytes,
            (db as usize, ffi::sqlite3_total_changes64(db)),
        )
    };
    if file.is_empty() {
        return 0;
    }
    let written = {
        let mut changes = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
        let last = changes.insert(total.0, total.1).unwrap_or(0);
        (total.1 - last).max(0) as u64
    };
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    let c = counts.entry(file).or_default();
    // The statements FTS5 runs inside a merge's, and the merge's own, are the merge's.
    if vfs::IN_MERGE.get() {
        c.merge_rows_written += written;
        c.merge_statements += 1;
        if matches!(kind, Kind::Merge) {
            vfs::IN_MERGE.set(false);
        }
        return 0;
    }
    c.rows_written += written;
    match kind {
        Kind::Server => {
            c.statements += 1;
            c.bytes_bound += bytes as u64;
        }
        Kind::Index => c.index_statements += 1,
        Kind::Checkpoint => {
            c.checkpoints += 1;
            vfs::IN_CHECKPOINT.set(false);
        }
        // Not reached: a merge's statement sets `IN_MERGE` when it starts.
        Kind::Merge => c.merge_statements += 1,
    }
    0
}

/// How the background merge's statements start (`db::direct::MERGE_MARK`).
const MERGE: &[u8] = crate::db::MERGE_MARK.as_bytes();

/// How the background checkpoint's statement starts.
const CHECKPOINT: &[u8] = b"PRAGMA wal_checkpoint";

/// Who a statement is for.
enum Kind {
    /// One the server prepared.
    Server,
    /// One FTS5 runs on the search index's shadow tables (it names them `'main'.'…'`) inside
    /// the server's.
    Index,
    /// The background checkpoint's: it runs on a timer, not per request.
    Checkpoint,
    /// The background merge of the search index's: on a timer too.
    Merge,
}

impl Kind {
    fn of(sql: &[u8]) -> Kind {
        if sql.starts_with(CHECKPOINT) {
            Kind::Checkpoint
        } else if sql.starts_with(MERGE) {
            Kind::Merge
        } else if sql.windows(7).any(|w| w == b"'main'.") {
            Kind::Index
        } else {
            Kind::Server
        }
    }
}

/// The counting VFS: the platform's, with each file's methods wrapped to count flushes.
mod vfs {
    use std::cell::Cell;
    use std::ffi::{CStr, c_char, c_int, c_void};
    use std::sync::OnceLock;

    use rusqlite::ffi;

    use super::COUNTS;

    thread_local! {
        /// Set while this thread runs a background checkpoint's statement (SQLite runs a
        /// statement, and so its file calls, on the thread that steps it).
        pub(super) static IN_CHECKPOINT: Cell<bool> = const { Cell::new(false) };
        /// Set while this thread runs a statement of the background merge of the search index
        /// (whose commit writes pages to the log, never flushing).
        pub(super) static IN_MERGE: Cell<bool> = const { Cell::new(false) };
    }

    /// The platform's VFS (address), which every call goes on to.
    static REAL: OnceLock<usize> = OnceLock::new();

    /// One open file: the platform's file follows this header, at [`INNER`].
    #[repr(C)]
    struct File {
        base: ffi::sqlite3_file,
        /// The database file this file belongs to (the log's is its database's), leaked for
        /// the file's life and freed at `xClose`.
        database: *mut String,
        is_log: bool,
        /// The last write was a log header (32 bytes at offset 0): the flush that follows it
        /// starts the log over.
        header_written: bool,
    }

    /// Where the platform's file starts (aligned for any C type).
    const INNER: usize = std::mem::size_of::<File>().next_multiple_of(16);

    fn real() -> *mut ffi::sqlite3_vfs {
        *REAL.get().expect("registered") as *mut ffi::sqlite3_vfs
    }

    fn inner(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
        // SAFETY: every file this VFS opens was allocated `INNER` + the platform's size.
        unsafe { f.cast::<u8>().add(INNER).cast() }
    }

    fn methods(f: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
        // SAFETY: an open inner file's methods are the platform's static table.
        unsafe { &*(*inner(f)).pMethods }
    }

    /// Registers the VFS as the default for connections opened from now on (once).
    pub(super) fn register() {
        // SAFETY: the default VFS is a static of SQLite's; ours is leaked, so it outlives every
        // connection, and copies the platform's except where it wraps.
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!real.is_null(), "SQLite has no default VFS");
            REAL.set(real as usize).expect("registered once");
            let mut vfs = *real;
            vfs.szOsFile = (INNER + (*real).szOsFile as usize) as c_int;
            vfs.zName = c"contextq-counting".as_ptr();
            vfs.pNext = std::ptr::null_mut();
            // The platform's other methods read only `mxPathname` and `pAppData` from the VFS
            // they are given, both copied, so they are used as they are.
            vfs.xOpen = Some(open);
            let rc = ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 1);
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_vfs_register failed");
        }
    }

    unsafe extern "C" fn open(
        _vfs: *mut ffi::sqlite3_vfs,
        name: ffi::sqlite3_filename,
        f: *mut ffi::sqlite3_file,
        flags: c_int,
        out_flags: *mut c_int,
    ) -> c_int {
        let real = real();
        // SAFETY: `f` has room for the header and the platform's file (`szOsFile`).
        unsafe {
            let rc = ((*real).xOpen.expect("xOpen"))(real, name, inner(f), flags, out_flags);
            if rc != ffi::SQLITE_OK || (*inner(f)).pMethods.is_null() {
                (*f).pMethods = std::ptr::null();
                return rc;
            }
            let is_log = flags & ffi::SQLITE_OPEN_WAL != 0;
            let file = if name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(name as *const c_char)
                    .to_string_lossy()
                    .into_owned()
            };
            let database = match file.strip_suffix("-wal") {
                Some(db) if is_log => db.to_string(),
                _ => file,
            };
            std::ptr::write(
                f.cast::<File>(),
                File {
                    base: ffi::sqlite3_file { pMethods: &METHODS },
                    database: Box::into_raw(Box::new(database)),
                    is_log,
                    header_written: false,
                },
            );
            ffi::SQLITE_OK
        }
    }

    unsafe extern "C" fn close(f: *mut ffi::sqlite3_file) -> c_int {
        // SAFETY: `f` is one of ours, open; its name was leaked at `open`.
        unsafe {
            let rc = (methods(f).xClose.expect("xClose"))(inner(f));
            drop(Box::from_raw((*f.cast::<File>()).database));
            rc
        }
    }

    unsafe extern "C" fn write(
        f: *mut ffi::sqlite3_file,
        buf: *const c_void,
        amount: c_int,
        offset: i64,
    ) -> c_int {
        // SAFETY: `f` is one of ours, open.
        let database = unsafe {
            let file = &mut *f.cast::<File>();
            file.header_written = file.is_log && offset == 0 && amount == 32;
            (file.is_log && !IN_CHECKPOINT.get() && !IN_MERGE.get())
                .then(|| (*file.database).clone())
        };
        // A frame is its 24-byte header (the page's number first, big-endian), then the page.
        if let Some(database) = database
            && amount == 24
            && offset > 0
        {
            // SAFETY: SQLite passes `amount` readable bytes at `buf`.
            let header = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), 4) };
            let page = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
            let mut pages = super::PAGES.lock().unwrap_or_else(|p| p.into_inner());
            let written = pages.entry(database.clone()).or_default();
            // Padding to the disk's sector repeats the commit's last frame (how many times
            // depends on where the log happened to end).
            if written.last() != Some(&page) {
                written.push(page);
            }
        }
        // SAFETY: as above.
        unsafe { (methods(f).xWrite.expect("xWrite"))(inner(f), buf, amount, offset) }
    }

    unsafe extern "C" fn sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
        // SAFETY: `f` is one of ours, open.
        let (database, restart) = unsafe {
            let file = &mut *f.cast::<File>();
            let restart = std::mem::take(&mut file.header_written);
            ((*file.database).clone(), restart)
        };
        {
            let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
            let c = counts.entry(database).or_default();
            if IN_CHECKPOINT.get() {
                c.checkpoint_flushes += 1;
            } else if restart {
                c.log_restarts += 1;
            } else {
                c.flushes += 1;
            }
        }
        // SAFETY: as above.
        unsafe { (methods(f).xSync.expect("xSync"))(inner(f), flags) }
    }

    /// Declares the pass-through methods: each calls the platform's with the inner file.
    macro_rules! pass {
        ($($name:ident => $field:ident ($($arg:ident : $ty:ty),*) -> $ret:ty;)*) => {$(
            unsafe extern "C" fn $name(f: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
                // SAFETY: `f` is one of ours, open; the arguments are SQLite's, passed on.
                unsafe { (methods(f).$field.expect(stringify!($field)))(inner(f) $(, $arg)*) }
            }
        )*};
    }

    pass! {
        read => xRead(buf: *mut c_void, amount: c_int, offset: i64) -> c_int;
        truncate => xTruncate(size: i64) -> c_int;
        file_size => xFileSize(size: *mut i64) -> c_int;
        lock => xLock(level: c_int) -> c_int;
        unlock => xUnlock(level: c_int) -> c_int;
        check_reserved_lock => xCheckReservedLock(out: *mut c_int) -> c_int;
        file_control => xFileControl(op: c_int, arg: *mut c_void) -> c_int;
        sector_size => xSectorSize() -> c_int;
        device_characteristics => xDeviceCharacteristics() -> c_int;
        shm_map => xShmMap(page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int;
        shm_lock => xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int;
        shm_barrier => xShmBarrier() -> ();
        shm_unmap => xShmUnmap(delete: c_int) -> c_int;
        fetch => xFetch(offset: i64, amount: c_int, out: *mut *mut c_void) -> c_int;
        unfetch => xUnfetch(offset: i64, p: *mut c_void) -> c_int;
    }

    /// The wrapped methods (version 3, as the platform's on Unix).
    static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
        iVersion: 3,
        xClose: Some(close),
        xRead: Some(read),
        xWrite: Some(write),
        xTruncate: Some(truncate),
        xSync: Some(sync),
        xFileSize: Some(file_size),
        xLock: Some(lock),
        xUnlock: Some(unlock),
        xCheckReservedLock: Some(check_reserved_lock),
        xFileControl: Some(file_control),
        xSectorSize: Some(sector_size),
        xDeviceCharacteristics: Some(device_characteristics),
        xShmMap: Some(shm_map),
        xShmLock: Some(shm_lock),
        xShmBarrier: Some(shm_barrier),
        xShmUnmap: Some(shm_unmap),
        xFetch: Some(fetch),
        xUnfetch: Some(unfetch),
    };
}
