//! What SQLite does for one database file, counted inside SQLite (test support for the cost
//! table, docs/costs.md): statements run, rows written, bytes of values bound.
//!
//! [`install`] registers an automatic extension, so every SQLite connection this process opens
//! afterwards (sqlx's and the direct rusqlite connection: one bundled library) reports each
//! statement it finishes through `sqlite3_trace_v2`; the counts are kept per database file, so
//! tests running beside each other in one process do not mix. The count is SQLite's own, not
//! the server's idea of it: a statement the server forgets to count is still counted.

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
    /// Rows inserted, updated or deleted (SQLite's `total_changes`: by the server's statements,
    /// by triggers and by the search index's own statements).
    pub rows_written: u64,
    /// Bytes of the values bound to the server's statements, as SQL literals (a text's quotes and
    /// doubled quotes included): what the server copied into SQLite.
    pub bytes_bound: u64,
}

impl std::ops::Sub for SqliteCounts {
    type Output = SqliteCounts;

    fn sub(self, before: SqliteCounts) -> SqliteCounts {
        SqliteCounts {
            statements: self.statements - before.statements,
            index_statements: self.index_statements - before.index_statements,
            checkpoints: self.checkpoints - before.checkpoints,
            rows_written: self.rows_written - before.rows_written,
            bytes_bound: self.bytes_bound - before.bytes_bound,
        }
    }
}

/// Counts by database file (SQLite's full path name).
static COUNTS: LazyLock<Mutex<HashMap<String, SqliteCounts>>> = LazyLock::new(Default::default);

/// Each open connection's `total_changes` when it last finished a statement.
static CHANGES: LazyLock<Mutex<HashMap<usize, i64>>> = LazyLock::new(Default::default);

/// Starts counting on every SQLite connection opened from now on (idempotent).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `entry` has the signature SQLite calls an automatic extension with.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(entry)) };
        assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_auto_extension failed");
    });
}

/// The counts of the database at `path` so far (zero before its first statement).
pub fn counts(path: &Path) -> SqliteCounts {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts
        .get(path.to_string_lossy().as_ref())
        .copied()
        .unwrap_or_default()
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
            (ffi::SQLITE_TRACE_PROFILE | ffi::SQLITE_TRACE_CLOSE) as c_uint,
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
    if mask != ffi::SQLITE_TRACE_PROFILE as c_uint {
        return 0;
    }
    let stmt = p as *mut ffi::sqlite3_stmt;
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
    c.rows_written += written;
    match kind {
        Kind::Server => {
            c.statements += 1;
            c.bytes_bound += bytes as u64;
        }
        Kind::Index => c.index_statements += 1,
        Kind::Checkpoint => c.checkpoints += 1,
    }
    0
}

/// Who a statement is for.
enum Kind {
    /// One the server prepared.
    Server,
    /// One FTS5 runs on the search index's shadow tables (it names them `'main'.'…'`) inside
    /// the server's.
    Index,
    /// The background checkpoint's: it runs on a timer, not per request.
    Checkpoint,
}

impl Kind {
    fn of(sql: &[u8]) -> Kind {
        if sql.starts_with(b"PRAGMA wal_checkpoint") {
            Kind::Checkpoint
        } else if sql.windows(7).any(|w| w == b"'main'.") {
            Kind::Index
        } else {
            Kind::Server
        }
    }
}
