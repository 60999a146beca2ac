//! The search index (extension `search`, docs/search.md): each context's current path and
//! content as the terms `contextq_api::search` defines, written in the same transaction as every
//! write of the context (so a write is searchable when acknowledged and a delete is gone at
//! once), and the ranked search over it.
//!
//! SQLite: a contentless FTS5 table (`context_fts`, rows `search_docs.n`) whose deletes are
//! tombstones (a replaced or deleted file's terms stay in their segment, never matched, until a
//! merge rewrites it; a redaction merges everything); ranked by BM25.
//! PostgreSQL: `context_search.doc`, a `tsvector` built from the same terms (path at positions
//! 1-256 weight A, content from 301), a GIN index; ranked by `ts_rank_cd`. On both the tenant is
//! a term of the document (`t_<tenant id>`, which no query term can be: `_` separates terms),
//! so a search reads only its tenant's postings, never another tenant's rows.

use contextq_api::search::{
    FILLER, MAX_CONTENT_TERMS, MAX_PATH_TERMS, MAX_RANKED, Query, SearchHit, SearchPage,
    index_terms,
};
use sqlx::AnyConnection;

use super::{Error, Result};
use crate::db::{Backend, Bind, Db, Dialects, Row};

/// SQLite: the statement that merges the index into one segment, leaving no page that held a
/// replaced file's terms (after a redaction; its cost grows with the whole index).
pub(crate) const MERGE_ALL: &str = "INSERT INTO context_fts (context_fts) VALUES ('optimize')";

/// The term that makes a tenant's documents its own.
fn scope_term(tenant_id: &str) -> String {
    format!("t_{tenant_id}")
}

/// Where a path's terms start in a PostgreSQL document, and its content's.
const PG_PATH_FROM: usize = 1;
const PG_CONTENT_FROM: usize = 301;

/// The `tsvector` text of a document: every term with its positions (`'term':1A,5A`), the
/// scope term without positions. Terms hold letters, digits and marks only; quotes and
/// backslashes are escaped all the same.
fn tsvector(tenant_id: &str, path: &[String], content: &[String]) -> String {
    use std::fmt::Write as _;
    // Positions per term, path ones (weight A) first; one allocation per distinct term.
    let mut positions: std::collections::HashMap<&str, Vec<(usize, bool)>> = Default::default();
    for (terms, from, a) in [
        (path, PG_PATH_FROM, true),
        (content, PG_CONTENT_FROM, false),
    ] {
        for (i, term) in terms.iter().enumerate() {
            if term != FILLER {
                positions
                    .entry(term.as_str())
                    .or_default()
                    .push((from + i, a));
            }
        }
    }
    let mut terms: Vec<(&str, Vec<(usize, bool)>)> = positions.into_iter().collect();
    terms.sort_unstable_by(|x, y| x.0.cmp(y.0));
    let quote = |out: &mut String, t: &str| {
        out.push('\'');
        for c in t.chars() {
            match c {
                '\'' => out.push_str("''"),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        out.push('\'');
    };
    let mut out = String::with_capacity(content.len() * 12 + 64);
    quote(&mut out, &scope_term(tenant_id));
    for (term, at) in terms {
        out.push(' ');
        quote(&mut out, term);
        out.push(':');
        for (k, (pos, a)) in at.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(out, "{pos}{}", if *a { "A" } else { "" });
        }
    }
    out
}

/// The terms the index holds for one context: its path's and its content's. Made before a
/// write takes the database's write lock where the text is known by then (a bulk upsert's
/// items), so that the tokenizing of one write overlaps another's commit instead of waiting
/// for it.
pub(crate) struct Terms {
    path: Vec<String>,
    content: Vec<String>,
}

impl Terms {
    /// The terms of `content` at `path`.
    pub(crate) fn of(path: &str, content: &str) -> Terms {
        Terms {
            path: index_terms(path, MAX_PATH_TERMS),
            content: index_terms(content, MAX_CONTENT_TERMS),
        }
    }
}

/// The statements that make the index hold `terms` for context `id`, replacing what it held:
/// added to a write's batch.
pub(crate) fn put(tenant_id: &str, id: &str, terms: Terms) -> Dialects {
    put_as(tenant_id, id, terms, false)
}

/// [`put`] for a context created in this batch: nothing of it to replace (on SQLite, no delete
/// before the insert).
pub(crate) fn put_new(tenant_id: &str, id: &str, terms: Terms) -> Dialects {
    put_as(tenant_id, id, terms, true)
}

fn put_as(tenant_id: &str, id: &str, terms: Terms, fresh: bool) -> Dialects {
    let (tenant_id, id) = (tenant_id.to_string(), id.to_string());
    Dialects::new(move |backend| {
        let Terms {
            path: path_terms,
            content: content_terms,
        } = terms;
        let id = Bind::Text(id);
        match backend {
            Backend::Sqlite => {
                // Each statement inserts or deletes one row (`VALUES`, never `INSERT ...
                // SELECT`): a statement that may write several rows opens a statement savepoint,
                // at which FTS5 writes the terms it holds to a new segment (Batch's `dialects`).
                // An existing row is met with its own number, so the insert takes none from
                // AUTOINCREMENT and writes nothing (not even `sqlite_sequence`).
                let mut sqlite = vec![(
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
                    sqlite.push((
                        "DELETE FROM context_fts WHERE rowid = (SELECT n FROM search_docs WHERE context_id = $1)"
                            .into(),
                        vec![id.clone()],
                    ));
                }
                sqlite.push((
                    "INSERT INTO context_fts (rowid, scope, path, body) \
                     VALUES ((SELECT n FROM search_docs WHERE context_id = $1), $2, $3, $4)"
                        .into(),
                    vec![
                        id,
                        Bind::Text(scope_term(&tenant_id)),
                        Bind::Text(path_terms.join(" ")),
                        Bind::Text(content_terms.join(" ")),
                    ],
                ));
                sqlite
            }
            Backend::Postgres => vec![(
                "INSERT INTO context_search (context_id, tenant_id, doc) VALUES ($1, $2, $3::tsvector) \
                 ON CONFLICT (context_id) DO UPDATE SET doc = EXCLUDED.doc, tenant_id = EXCLUDED.tenant_id"
                    .into(),
                vec![
                    id,
                    Bind::Text(tenant_id.clone()),
                    Bind::Text(tsvector(&tenant_id, &path_terms, &content_terms)),
                ],
            )],
        }
    })
}

/// The statements that take context `id` out of the index: added to a write's batch.
pub(crate) fn remove(id: &str) -> Dialects {
    let id = Bind::Text(id.to_string());
    Dialects::new(move |backend| {
        match backend {
        Backend::Sqlite => vec![
            (
                "DELETE FROM context_fts WHERE rowid = (SELECT n FROM search_docs WHERE context_id = $1)"
                    .into(),
                vec![id.clone()],
            ),
            ("DELETE FROM search_docs WHERE context_id = $1".into(), vec![id]),
        ],
        Backend::Postgres => vec![(
            "DELETE FROM context_search WHERE context_id = $1".into(),
            vec![id],
        )],
    }
    })
}

/// Takes every context of a tenant out of the index (the tenant's deletion), before its
/// contexts are deleted, in the caller's transaction.
pub(crate) async fn remove_tenant(
    conn: &mut AnyConnection,
    backend: Backend,
    tenant_id: &str,
) -> Result<()> {
    match backend {
        Backend::Sqlite => {
            sqlx::query("DELETE FROM context_fts WHERE context_fts MATCH $1")
                .bind(format!("scope : \"{}\"", scope_term(tenant_id)))
                .execute(&mut *conn)
                .await?;
            sqlx::query(
                "DELETE FROM search_docs WHERE context_id IN (SELECT id FROM contexts WHERE tenant_id = $1)",
            )
            .bind(tenant_id.to_string())
            .execute(&mut *conn)
            .await?;
        }
        Backend::Postgres => {
            sqlx::query("DELETE FROM context_search WHERE tenant_id = $1")
                .bind(tenant_id.to_string())
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

/// Indexes every context that is not yet (migration 13 on a database of an earlier release), a
/// page at a time, in the migration's transaction.
pub(crate) async fn backfill(conn: &mut AnyConnection, backend: Backend) -> Result<u64> {
    let mut after = String::new();
    let mut done = 0;
    loop {
        let rows = sqlx::query(
            "SELECT id, tenant_id, external_id, content FROM contexts WHERE id > $1 ORDER BY id LIMIT 500",
        )
        .bind(after.clone())
        .fetch_all(&mut *conn)
        .await?;
        let rows = Row::from_any_rows(&rows)?;
        let Some(last) = rows.last() else {
            return Ok(done);
        };
        after = last.try_get("id")?;
        for row in &rows {
            let id: String = row.try_get("id")?;
            let tenant: String = row.try_get("tenant_id")?;
            let path: String = row.try_get("external_id")?;
            let content: String = row.try_get("content")?;
            for (sql, binds) in put(&tenant, &id, Terms::of(&path, &content)).statements(backend) {
                crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
                    .execute(&mut *conn)
                    .await?;
            }
            done += 1;
        }
    }
}

/// A search: the checked query and the listing's scopes.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The query.
    pub query: Query,
    /// Only this workspace (by slug).
    pub workspace: Option<String>,
    /// Only these workspaces (slugs; a key limited to them); `None`: every workspace.
    pub within: Option<Vec<String>>,
    /// Only contexts with this tag.
    pub tag: Option<String>,
    /// Only external ids starting with this.
    pub prefix: Option<String>,
    /// Hits of this page (1 to 100).
    pub limit: u32,
    /// Hits skipped (the decoded cursor).
    pub offset: u32,
}

/// Characters of a hit's content read for its snippets (the index holds about the first
/// 100 KB of a file's terms) ...
const SNIPPET_SOURCE_CHARS: usize = 200_000;
/// ... and of all the hits of one answer together: a page of 100 large files reads the first
/// 20,000 characters of each, so that an answer's memory and time stay bounded.
const SNIPPET_ANSWER_CHARS: usize = 2_000_000;

/// Characters read of each of `hits` hits for their snippets.
fn snippet_chars(hits: usize) -> usize {
    SNIPPET_SOURCE_CHARS.min(SNIPPET_ANSWER_CHARS / hits.max(1))
}

/// `GET /api/contexts/search`: the best hits of `q` in the tenant's contexts, ranked, a page.
///
/// It runs on the search slice of the database (`db::search`): refused when the tenant has its
/// limit of searches in flight, stopped at the search's time budget, and stopped when the
/// future is dropped (its client went away). Candidates are found from the full-text index
/// (never from the tenant's contexts: the plan is fixed, whatever the statistics), every scope
/// applied to them, at most [`MAX_RANKED`] of them ranked; the content is read for the page's
/// rows only, and their snippets are made on a blocking thread.
pub async fn search(db: &Db, tenant_id: &str, q: &SearchQuery) -> Result<SearchPage> {
    let workspace = workspace_id(db, tenant_id, q).await?;
    let (sql, binds) = ranking(db.backend(), tenant_id, q, workspace);
    let mut conn = db.begin_search(tenant_id).await.map_err(search_error)?;
    let rows = conn.fetch(sql, binds).await.map_err(search_error)?;
    let matched = match rows.first() {
        Some(row) => row.try_get::<i64, _>("matched")?,
        None => 0,
    };
    let more = rows.len() > q.limit as usize;
    let page: Vec<Row> = rows.into_iter().take(q.limit as usize).collect();
    let chars = snippet_chars(page.len());
    let mut contents: std::collections::HashMap<String, (String, String)> = Default::default();
    if !page.is_empty() {
        let mut binds = vec![Bind::Int(chars as i64)];
        for row in &page {
            binds.push(Bind::Text(row.try_get("id")?));
        }
        let list: Vec<String> = (2..=binds.len()).map(|k| format!("${k}")).collect();
        let sql = format!(
            "SELECT c.id, w.slug AS workspace, substr(c.content, 1, CAST($1 AS INTEGER)) AS content \
             FROM contexts c CROSS JOIN workspaces w WHERE w.id = c.workspace_id AND c.id IN ({})",
            list.join(", ")
        );
        for row in conn.fetch(sql, binds).await.map_err(search_error)? {
            contents.insert(
                row.try_get("id")?,
                (row.try_get("workspace")?, row.try_get("content")?),
            );
        }
    }
    let query = q.query.clone();
    let hits = conn
        .compute(move || -> Result<Vec<SearchHit>> {
            let mut hits = Vec::with_capacity(page.len());
            for row in &page {
                let id: String = row.try_get("id")?;
                // A context deleted between the two statements is no hit.
                let Some((workspace, content)) = contents.remove(&id) else {
                    continue;
                };
                hits.push(SearchHit {
                    snippets: query.snippets(&content),
                    id,
                    external_id: row.try_get("external_id")?,
                    workspace,
                    version: row.try_get("version")?,
                    size_bytes: row.try_get::<i64, _>("size_bytes")?.max(0) as u64,
                    score: row.try_get::<f64, _>("score")?,
                });
            }
            Ok(hits)
        })
        .await
        .map_err(search_error)??;
    let next_cursor = if more {
        contextq_api::search::next_cursor(q.offset, q.limit)
    } else {
        None
    };
    Ok(SearchPage {
        hits,
        next_cursor,
        capped: matched >= MAX_RANKED as i64,
    })
}

/// A refusal or failure of the search slice as the data layer's error.
fn search_error(e: crate::db::search::SearchFailure) -> Error {
    use crate::db::search::SearchFailure as F;
    match e {
        F::Busy { limit } => Error::SearchBusy { limit },
        F::Saturated => Error::SearchesSaturated,
        F::TooBroad { budget } => Error::SearchTooBroad { budget },
        F::Db(e) => fts_error(e),
    }
}

/// PostgreSQL: the query as a `tsquery` that only the tenant's documents can match.
fn pg_scoped(tenant_id: &str, query: &Query) -> String {
    format!("'{}' & ({})", scope_term(tenant_id), query.tsquery())
}

/// The id of the workspace a search names, if any (404 for an unknown one).
async fn workspace_id(db: &Db, tenant_id: &str, q: &SearchQuery) -> Result<Option<String>> {
    match &q.workspace {
        Some(slug) => Ok(Some(super::workspaces::id_of(db, tenant_id, slug).await?)),
        None => Ok(None),
    }
}

/// FTS5 refuses an expression it cannot run (it never should: every term is quoted): a 400.
fn fts_error(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(d) if d.message().contains("fts5") => {
            Error::BadParameter(format!("q: the search could not run ({})", d.message()))
        }
        _ => Error::from(e),
    }
}

/// SQLite: the external-id prefix as a phrase that must start the `path` column (its last term
/// a prefix when the prefix ends inside a segment), so that the index itself keeps to the
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

/// The ranking statement of a search: its rows are the page (`limit + 1` rows from `offset`) of
/// the candidates ranked, each with `matched`, how many candidates there were (at most
/// [`MAX_RANKED`]).
///
/// Candidates are the documents the full-text index yields for the query and the tenant, each
/// joined to its context by key and kept when it passes every scope (workspace, the key's
/// workspaces, prefix, tag), until [`MAX_RANKED`] are found: so `capped` and the page depend
/// on what the caller may see only. The join order is fixed (SQLite `CROSS JOIN`; PostgreSQL a
/// materialized match list and a lateral subquery the planner cannot flatten): the index
/// drives, whatever the statistics say, and no plan reads the tenant's contexts first.
/// SQLite takes the newest matches (FTS5 walks its rowids backwards, no sort), PostgreSQL the
/// first its GIN index yields.
fn ranking(
    backend: Backend,
    tenant_id: &str,
    q: &SearchQuery,
    workspace_id: Option<String>,
) -> (String, Vec<Bind>) {
    let mut binds: Vec<Bind> = Vec::new();
    let mut p = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    let (matches, rank, mut from) = match backend {
        Backend::Sqlite => {
            // The query's phrases first: `cq_rank` scores the first n (db::search::rank).
            let mut m = format!(
                "{} AND scope : \"{}\"",
                q.query.fts5(),
                scope_term(tenant_id)
            );
            if let Some(anchor) = q.prefix.as_deref().and_then(path_anchor) {
                m.push_str(" AND ");
                m.push_str(&anchor);
            }
            (
                format!(
                    "context_fts MATCH {} AND s.n = context_fts.rowid AND c.id = s.context_id",
                    p(Bind::Text(m))
                ),
                format!("cq_rank(context_fts, {})", q.query.items().len()),
                "context_fts CROSS JOIN search_docs s CROSS JOIN contexts c".to_string(),
            )
        }
        Backend::Postgres => {
            let user = p(Bind::Text(q.query.tsquery()));
            // Each match's context by key: a lateral subquery with `OFFSET 0` is never
            // flattened, and with only the key in it no other index can serve it (a tenant
            // condition beside the key let the planner scan the tenant per match).
            (
                "TRUE".to_string(),
                format!(
                    "ts_rank_cd('{{0.25, 0.25, 0.25, 1.0}}', m.doc, {user}::tsquery, 1)::float8"
                ),
                "m CROSS JOIN LATERAL (SELECT id, tenant_id, workspace_id, external_id, version, \
                 size_bytes FROM contexts WHERE id = m.context_id OFFSET 0) c"
                    .to_string(),
            )
        }
    };
    let tenant = p(Bind::Text(tenant_id.to_string()));
    let mut filter = format!("{matches} AND c.tenant_id = {tenant}");
    if let Some(id) = workspace_id {
        filter.push_str(&format!(" AND c.workspace_id = {}", p(Bind::Text(id))));
    }
    // Each candidate's workspace is looked up only to keep to a key's workspaces; the page's
    // slugs come with its content.
    if let Some(slugs) = &q.within {
        from.push_str(match backend {
            Backend::Sqlite => " CROSS JOIN workspaces w",
            Backend::Postgres => {
                " CROSS JOIN LATERAL (SELECT id, slug FROM workspaces \
                 WHERE id = c.workspace_id OFFSET 0) w"
            }
        });
        filter.push_str(" AND w.id = c.workspace_id");
        let list: Vec<String> = slugs.iter().map(|s| p(Bind::Text(s.clone()))).collect();
        filter.push_str(&super::slug_in(&list));
    }
    for (op, bound) in super::external_id_range(q.prefix.as_deref(), None) {
        filter.push_str(&format!(" AND c.external_id {op} {}", p(Bind::Text(bound))));
    }
    if let Some(tag) = &q.tag {
        filter.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM context_tags t WHERE t.context_id = c.id AND t.tag = {})",
            p(Bind::Text(tag.clone()))
        ));
    }
    let columns = format!("c.id, c.external_id, c.version, c.size_bytes, {rank} AS score");
    let candidates = match backend {
        Backend::Sqlite => format!(
            "SELECT {columns} FROM {from} WHERE {filter} \
             ORDER BY context_fts.rowid DESC LIMIT {MAX_RANKED}"
        ),
        Backend::Postgres => {
            let scoped = p(Bind::Text(pg_scoped(tenant_id, &q.query)));
            format!(
                "WITH m AS MATERIALIZED (SELECT context_id, doc FROM context_search \
                 WHERE doc @@ {scoped}::tsquery) \
                 SELECT {columns} FROM {from} WHERE {filter} LIMIT {MAX_RANKED}"
            )
        }
    };
    let sql = format!(
        "WITH k AS MATERIALIZED ({candidates}) \
         SELECT (SELECT COUNT(*) FROM k) AS matched, k.* FROM k \
         ORDER BY k.score DESC, k.external_id LIMIT {} OFFSET {}",
        p(Bind::Int(i64::from(q.limit) + 1)),
        p(Bind::Int(i64::from(q.offset)))
    );
    (sql, binds)
}

/// The plan of a search's ranking statement (`EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN` on
/// PostgreSQL), one line a step, as a search connection plans it: for the tests that hold the
/// plan fixed and for an operator who wants to see it.
pub async fn explain(db: &Db, tenant_id: &str, q: &SearchQuery) -> Result<Vec<String>> {
    let workspace = workspace_id(db, tenant_id, q).await?;
    let (sql, binds) = ranking(db.backend(), tenant_id, q, workspace);
    let (prefix, column) = match db.backend() {
        Backend::Sqlite => ("EXPLAIN QUERY PLAN", "detail"),
        Backend::Postgres => ("EXPLAIN", "QUERY PLAN"),
    };
    let mut conn = db.begin_search(tenant_id).await.map_err(search_error)?;
    let rows = conn
        .fetch(format!("{prefix} {sql}"), binds)
        .await
        .map_err(search_error)?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>(column)?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsvector_holds_positions_weights_and_the_scope() {
        let path = index_terms("notes/OPS-4471.md", MAX_PATH_TERMS);
        let body = index_terms("ops ops it's", MAX_CONTENT_TERMS);
        let v = tsvector("ten_1", &path, &body);
        assert_eq!(
            v,
            "'t_ten_1' '4471':3A 'it':303 'md':4A 'notes':1A 'ops':2A,301,302 's':304"
        );
    }
}
