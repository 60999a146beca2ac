//! SQLite's SQL ([`super::Dialect`]): JSON with `json_group_array`, one writer (no row locks),
//! and the search index as a contentless FTS5 table (`context_fts`, rows numbered by
//! `search_docs.n`) whose deletes are tombstones until a merge; ranked by BM25 (`cq_rank`).

use contextq_api::search::{MAX_PATH_TERMS, Query, index_terms};

use super::{Dialect, IndexDoc, Placeholder, Search, SearchFrom, Select, scope_term};
use crate::db::bind::{Bind, Statement};

/// The statement that merges the index into one segment, leaving no page that held a replaced
/// file's terms (after a redaction; its cost grows with the whole index).
pub(crate) const MERGE_ALL: &str = "INSERT INTO context_fts (context_fts) VALUES ('optimize')";

pub(super) struct Sqlite;

impl Dialect for Sqlite {
    fn position_fn(&self) -> &'static str {
        "instr"
    }

    fn json_array(&self, values: &str) -> String {
        format!("json_array({values})")
    }

    fn json_object(&self, pairs: &str) -> String {
        format!("json_object({pairs})")
    }

    fn json_agg(&self, element: &str) -> String {
        format!("COALESCE(json_group_array({element}), '[]')")
    }

    fn detail_external_id(&self) -> &'static str {
        "json_extract(a.detail, '$.externalId')"
    }

    fn insert_activity(&self) -> &'static str {
        // One writer: the next number is the largest plus one.
        "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
         VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM activity_logs), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    }

    fn insert_activities(&self, rows: usize) -> String {
        // The largest number read once, before any row goes in (SQLite materializes a
        // `SELECT` that reads the table it inserts into), and each row's place added to it.
        use std::fmt::Write as _;
        let mut values = String::with_capacity(rows * 72);
        for r in 0..rows {
            let sep = if r == 0 { "" } else { ", " };
            let _ = write!(values, "{sep}({}", r + 1);
            for c in 1..=11 {
                let _ = write!(values, ", ${}", r * 11 + c);
            }
            values.push(')');
        }
        format!(
            "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
             SELECT m.s + v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8, v.column9, v.column10, v.column11, v.column12 \
             FROM (SELECT COALESCE(MAX(seq), 0) AS s FROM activity_logs) m, (VALUES {values}) v"
        )
    }

    fn lock_head(&self) -> &'static str {
        // `BEGIN IMMEDIATE` already holds the one writer lock; not sent.
        ""
    }

    fn unsealed_heads(&self) -> &'static str {
        "SELECT tenant_id, seq, last_hash FROM audit_heads WHERE mac IS NULL"
    }

    fn lock_rows_of(&self, _alias: &str) -> String {
        String::new()
    }

    fn revocation_notice(&self) -> Option<&'static str> {
        None
    }

    fn index_values(&self, tenant_id: &str, path: &[String], content: &[String]) -> Vec<String> {
        vec![scope_term(tenant_id), path.join(" "), content.join(" ")]
    }

    fn index_put(&self, doc: IndexDoc<'_>) -> Vec<Statement> {
        let fresh = doc.fresh;
        let id = Bind::Text(doc.id.to_string());
        // Each statement inserts or deletes one row (`VALUES`, never `INSERT ... SELECT`): a
        // statement that may write several rows opens a statement savepoint, at which FTS5
        // writes the terms it holds to a new segment (Batch's `dialects`). An existing row is
        // met with its own number, so the insert takes none from AUTOINCREMENT and writes
        // nothing (not even `sqlite_sequence`).
        let mut out = vec![(
            if fresh {
                "INSERT INTO search_docs (context_id) VALUES ($1)"
            } else {
                "INSERT INTO search_docs (n, context_id) \
                 VALUES ((SELECT n FROM search_docs WHERE context_id = $1), $1) \
                 ON CONFLICT DO NOTHING"
            }
            .to_string(),
            vec![id.clone()],
        )];
        if !fresh {
            out.push((
                "DELETE FROM context_fts WHERE rowid = (SELECT n FROM search_docs WHERE context_id = $1)"
                    .into(),
                vec![id.clone()],
            ));
        }
        let mut binds = vec![id];
        binds.extend(doc.values.into_iter().map(Bind::Text));
        out.push((
            "INSERT INTO context_fts (rowid, scope, path, body) \
             VALUES ((SELECT n FROM search_docs WHERE context_id = $1), $2, $3, $4)"
                .into(),
            binds,
        ));
        out
    }

    fn index_remove(&self, id: &str) -> Vec<Statement> {
        let id = Bind::Text(id.to_string());
        vec![
            (
                "DELETE FROM context_fts WHERE rowid = (SELECT n FROM search_docs WHERE context_id = $1)"
                    .into(),
                vec![id.clone()],
            ),
            ("DELETE FROM search_docs WHERE context_id = $1".into(), vec![id]),
        ]
    }

    fn index_remove_tenant(&self, tenant_id: &str) -> Vec<Statement> {
        vec![
            (
                "DELETE FROM context_fts WHERE context_fts MATCH $1".into(),
                vec![Bind::Text(format!("scope : \"{}\"", scope_term(tenant_id)))],
            ),
            (
                "DELETE FROM search_docs WHERE context_id IN (SELECT id FROM contexts WHERE tenant_id = $1)"
                    .into(),
                vec![Bind::Text(tenant_id.to_string())],
            ),
        ]
    }

    fn search_from(&self, search: &Search<'_>, p: Placeholder<'_>) -> SearchFrom {
        let (query, prefix) = (search.query, search.prefix);
        // The query's phrases first: `cq_rank` scores the first n (db::search::rank).
        let mut m = format!(
            "{} AND scope : \"{}\"",
            fts5(query),
            scope_term(search.tenant_id)
        );
        if let Some(anchor) = prefix.and_then(path_anchor) {
            m.push_str(" AND ");
            m.push_str(&anchor);
        }
        SearchFrom {
            matches: format!(
                "context_fts MATCH {} AND s.n = context_fts.rowid AND c.id = s.context_id",
                p(Bind::Text(m))
            ),
            rank: format!("cq_rank(context_fts, {})", query.items().len()),
            from: "context_fts CROSS JOIN search_docs s CROSS JOIN contexts c".to_string(),
        }
    }

    fn search_workspace_join(&self) -> &'static str {
        " CROSS JOIN workspaces w"
    }

    fn search_candidates(&self, _: &Search<'_>, s: Select<'_>, _: Placeholder<'_>) -> String {
        // The newest matches: FTS5 walks its rowids backwards, no sort.
        let Select {
            columns,
            from,
            filter,
            max,
        } = s;
        format!(
            "SELECT {columns} FROM {from} WHERE {filter} ORDER BY context_fts.rowid DESC LIMIT {max}"
        )
    }

    fn explain(&self) -> (&'static str, &'static str) {
        ("EXPLAIN QUERY PLAN", "detail")
    }

    fn filter_only(&self, column: &str) -> String {
        // Unary `+` takes the term out of SQLite's index choices and changes no value.
        format!("+{column}")
    }
}

/// The query as an FTS5 expression over the columns `path` and `body`: each term a
/// double-quoted string (terms hold only letters, digits and marks, never `"`), phrases joined
/// with `+`, items with `AND`.
fn fts5(query: &Query) -> String {
    let items: Vec<String> = query
        .items()
        .iter()
        .map(|i| {
            let phrase: Vec<String> = i
                .iter()
                .map(|t| {
                    format!(
                        "\"{}\"{}",
                        t.term.replace('"', "\"\""),
                        if t.prefix { "*" } else { "" }
                    )
                })
                .collect();
            format!("({})", phrase.join(" + "))
        })
        .collect();
    format!("{{path body}} : ({})", items.join(" AND "))
}

/// The external-id prefix as a phrase that must start the `path` column (its last term a
/// prefix when the prefix ends inside a segment), so that the index itself keeps to the
/// prefix; `None` when it cannot be said exactly (no terms, Chinese or Japanese).
fn path_anchor(prefix: &str) -> Option<String> {
    let terms = index_terms(prefix, MAX_PATH_TERMS);
    if terms.is_empty() || terms.len() > 64 || !prefix.is_ascii() {
        return None;
    }
    let open = prefix.ends_with(|c: char| c.is_ascii_alphanumeric());
    let n = terms.len();
    let phrase: Vec<String> = terms
        .iter()
        .enumerate()
        .map(|(i, t)| format!("\"{t}\"{}", if open && i + 1 == n { "*" } else { "" }))
        .collect();
    Some(format!("path : ^ {}", phrase.join(" + ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_quoted_phrases() {
        let q = Query::parse("near \"ops log\" dep*").unwrap();
        assert_eq!(
            fts5(&q),
            "{path body} : ((\"near\") AND (\"ops\" + \"log\") AND (\"dep\"*))"
        );
        assert_eq!(
            path_anchor("notes/ops").as_deref(),
            Some("path : ^ \"notes\" + \"ops\"*")
        );
        assert_eq!(path_anchor("notes/"), Some("path : ^ \"notes\"".into()));
        assert_eq!(path_anchor("日本/"), None);
    }

    /// A write of many audit rows reads the largest global number once, by a seek to the end of
    /// the key (SQLite's min/max optimization), on a database nobody analysed: never a scan of
    /// every tenant's rows.
    #[tokio::test]
    async fn many_audit_rows_read_the_largest_number_by_a_seek() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("plan.db").display());
        let db = crate::Db::connect(&url, &crate::DbOptions::default())
            .await
            .unwrap();
        let binds = (0..22).map(Bind::Int).collect();
        let plan = db.plan(&Sqlite.insert_activities(2), binds).await;
        assert!(plan.iter().any(|d| d == "SEARCH activity_logs"), "{plan:?}");
        assert!(
            !plan.iter().any(|d| d.starts_with("SCAN activity_logs")),
            "{plan:?}"
        );
        db.close().await;
    }
}
