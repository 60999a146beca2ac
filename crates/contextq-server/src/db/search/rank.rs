//! SQLite: `cq_rank(context_fts, n)`, the FTS5 ranking function of a search, computed from the
//! matched document alone. FTS5's own `bm25` weighs each term by how many rows of the whole
//! table hold it and normalises by the table's average length: in a table shared by every
//! tenant, a tenant's scores would tell it whether other tenants hold a word (docs/search.md,
//! "Ranking"). This is BM25's term-frequency and length parts without those statistics: for
//! each of the query's `n` phrases (the first `n` of the expression; the tenant and path-anchor
//! phrases after them are not scored), in the path (weight 4) and the content (weight 1),
//! `tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / typical_len))`.
//!
//! FTS5 offers ranking functions only through its C API, which rusqlite does not wrap: this is
//! the crate's one module with `unsafe` code, each block with what makes it sound.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use rusqlite::ffi;

/// BM25's usual constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// (column, weight, typical length in terms): the path and the content; column 0 (the tenant
/// term) is not scored.
const COLUMNS: [(c_int, f64, f64); 2] = [(1, 4.0, 8.0), (2, 1.0, 300.0)];

/// The score of one document from its counts: `tf[phrase][k]` occurrences of each phrase in
/// `COLUMNS[k]`, `len[k]` that column's length in terms.
pub(crate) fn score(tf: &[[u32; 2]], len: [i64; 2]) -> f64 {
    let mut total = 0.0;
    for counts in tf {
        for (k, (_, weight, typical)) in COLUMNS.iter().enumerate() {
            let f = f64::from(counts[k]);
            if f > 0.0 {
                let norm = 1.0 - B + B * (len[k].max(0) as f64) / typical;
                total += weight * f * (K1 + 1.0) / (f + K1 * norm);
            }
        }
    }
    total
}

/// Registers `cq_rank` on `conn` (once per connection).
pub(super) fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: `conn.handle()` is the open connection's handle, used on this thread only while
    // `conn` is borrowed. The statement is prepared, stepped and finalized here; the pointer
    // bound to it (`api`) outlives the statement. `fts5(?1)` writes the `fts5_api` pointer of
    // this connection, which lives as long as the connection; `xCreateFunction` copies the name
    // and keeps the function pointer, which is a `'static` fn.
    unsafe {
        let db = conn.handle();
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            std::ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, "preparing SELECT fts5(?1)"));
        }
        let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        if api.is_null() || (*api).iVersion < 2 {
            return Err(failure(ffi::SQLITE_ERROR, "this SQLite has no FTS5 API"));
        }
        let Some(create) = (*api).xCreateFunction else {
            return Err(failure(ffi::SQLITE_ERROR, "FTS5 has no xCreateFunction"));
        };
        let rc = create(
            api,
            c"cq_rank".as_ptr(),
            std::ptr::null_mut(),
            Some(cq_rank),
            None,
        );
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, "registering cq_rank"));
        }
    }
    Ok(())
}

fn failure(rc: c_int, what: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(what.to_string()))
}

/// The FTS5 extension function (see the module's documentation).
///
/// # Safety
/// Called by FTS5 only, with its extension API, the current row's context, the function's
/// result context and `n_val` argument values, all valid for the call.
unsafe extern "C" fn cq_rank(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: the pointers are FTS5's, valid for this call (see above); `values` holds `n_val`
    // values; every out-parameter is a local.
    unsafe {
        let api = &*api;
        let (Some(phrase_count), Some(inst_count), Some(inst), Some(column_size)) =
            (api.xPhraseCount, api.xInstCount, api.xInst, api.xColumnSize)
        else {
            ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_ERROR);
            return;
        };
        let phrases = phrase_count(fts).max(0);
        let scored = if n_val >= 1 {
            ffi::sqlite3_value_int(*values).clamp(0, phrases)
        } else {
            phrases
        } as usize;
        let mut tf = vec![[0u32; 2]; scored];
        let mut n: c_int = 0;
        let rc = inst_count(fts, &mut n);
        if rc != ffi::SQLITE_OK {
            ffi::sqlite3_result_error_code(ctx, rc);
            return;
        }
        for i in 0..n {
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            let rc = inst(fts, i, &mut phrase, &mut column, &mut offset);
            if rc != ffi::SQLITE_OK {
                ffi::sqlite3_result_error_code(ctx, rc);
                return;
            }
            if let (Some(counts), Some(k)) = (
                tf.get_mut(phrase.max(0) as usize),
                COLUMNS.iter().position(|(c, _, _)| *c == column),
            ) {
                counts[k] += 1;
            }
        }
        let mut len = [0i64; 2];
        for (k, (column, _, _)) in COLUMNS.iter().enumerate() {
            let mut size: c_int = 0;
            let rc = column_size(fts, *column, &mut size);
            if rc != ffi::SQLITE_OK {
                ffi::sqlite3_result_error_code(ctx, rc);
                return;
            }
            len[k] = i64::from(size);
        }
        ffi::sqlite3_result_double(ctx, score(&tf, len));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_occurrences_score_more_a_path_more_than_content_and_length_dampens() {
        let once = score(&[[0, 1]], [4, 100]);
        assert!(score(&[[0, 3]], [4, 100]) > once);
        assert!(score(&[[1, 0]], [4, 100]) > once);
        assert!(score(&[[0, 1]], [4, 1000]) < once);
        assert_eq!(score(&[[0, 0]], [4, 100]), 0.0);
    }
}
