//! The search index (extension `search`, docs/search.md): each context's current path and
//! content as the terms `contextq_api::search` defines, written in the same transaction as every
//! write of the context (so a write is searchable when acknowledged and a delete is gone at
//! once), and the ranked search over it.
//!
//! Each engine keeps the index its own way, its SQL in `db::dialect` (SQLite: a contentless
//! FTS5 table ranked by BM25; PostgreSQL: a `tsvector` column under a GIN index ranked by
//! `ts_rank_cd`). On both the tenant is a term of the document (`t_<tenant id>`, which no query
//! term can be: `_` separates terms), so a search reads only its tenant's postings, never
//! another tenant's rows. This module puts a search together: its scopes, its page, its
//! snippets.

use contextq_api::search::{
    MAX_CONTENT_TERMS, MAX_PATH_TERMS, MAX_RANKED, Query, SearchHit, SearchPage, index_terms,
};
use sqlx::AnyConnection;

use super::{Error, Result};
use crate::db::{Bind, Db, Dialect, Dialects, IndexDoc, Row, Search, SearchFrom, Select};

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

    /// The values `db`'s index stores for them in `tenant_id` (its dialect's
    /// [`Dialect::index_values`]: the joined texts, or the `tsvector`), made now rather than
    /// when the write's batch is committed, which is under the write lock.
    pub(crate) fn made_for(self, db: &Db, tenant_id: &str) -> Indexed {
        let dialect = db.dialect();
        Indexed::Made {
            dialect,
            values: dialect.index_values(tenant_id, &self.path, &self.content),
        }
    }
}

/// What a write indexes for one context: its terms, or the values a dialect made of them.
pub(crate) enum Indexed {
    Terms(Terms),
    /// [`Terms::made_for`]: for the database whose dialect this is (a batch is committed where
    /// it was made).
    Made {
        dialect: &'static dyn Dialect,
        values: Vec<String>,
    },
}

impl From<Terms> for Indexed {
    fn from(terms: Terms) -> Self {
        Indexed::Terms(terms)
    }
}

/// The statements that make the index hold `terms` for context `id`, replacing what it held:
/// added to a write's batch.
pub(crate) fn put(tenant_id: &str, id: &str, terms: impl Into<Indexed>) -> Dialects {
    put_as(tenant_id, id, terms.into(), false)
}

/// [`put`] for a context created in this batch: nothing of it to replace (on SQLite, no delete
/// before the insert).
pub(crate) fn put_new(tenant_id: &str, id: &str, terms: impl Into<Indexed>) -> Dialects {
    put_as(tenant_id, id, terms.into(), true)
}

fn put_as(tenant_id: &str, id: &str, indexed: Indexed, fresh: bool) -> Dialects {
    let (tenant_id, id) = (tenant_id.to_string(), id.to_string());
    Dialects::new(move |d| {
        let (d, values) = match indexed {
            Indexed::Terms(t) => (d, d.index_values(&tenant_id, &t.path, &t.content)),
            Indexed::Made { dialect, values } => (dialect, values),
        };
        d.index_put(IndexDoc {
            tenant_id: &tenant_id,
            id: &id,
            values,
            fresh,
        })
    })
}

/// The statements that take context `id` out of the index: added to a write's batch.
pub(crate) fn remove(id: &str) -> Dialects {
    let id = id.to_string();
    Dialects::new(move |d| d.index_remove(&id))
}

/// Takes every context of a tenant out of the index (the tenant's deletion), before its
/// contexts are deleted, in the caller's transaction.
pub(crate) async fn remove_tenant(
    conn: &mut AnyConnection,
    dialect: &dyn Dialect,
    tenant_id: &str,
) -> Result<()> {
    for (sql, binds) in dialect.index_remove_tenant(tenant_id) {
        crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Indexes every context that is not yet (migration 13 on a database of an earlier release), a
/// page at a time, in the migration's transaction.
pub(crate) async fn backfill(conn: &mut AnyConnection, dialect: &dyn Dialect) -> Result<u64> {
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
            let terms = Terms::of(&path, &content);
            let doc = IndexDoc {
                tenant_id: &tenant,
                id: &id,
                values: dialect.index_values(&tenant, &terms.path, &terms.content),
                fresh: false,
            };
            for (sql, binds) in dialect.index_put(doc) {
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
    let (sql, binds) = ranking(db.dialect(), tenant_id, q, workspace);
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
    dialect: &dyn Dialect,
    tenant_id: &str,
    q: &SearchQuery,
    workspace_id: Option<String>,
) -> (String, Vec<Bind>) {
    let search = Search {
        tenant_id,
        query: &q.query,
        prefix: q.prefix.as_deref(),
    };
    let mut binds: Vec<Bind> = Vec::new();
    let mut p = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    let SearchFrom {
        matches,
        rank,
        mut from,
    } = dialect.search_from(&search, &mut p);
    let tenant = p(Bind::Text(tenant_id.to_string()));
    let mut filter = format!("{matches} AND c.tenant_id = {tenant}");
    if let Some(id) = workspace_id {
        filter.push_str(&format!(" AND c.workspace_id = {}", p(Bind::Text(id))));
    }
    // Each candidate's workspace is looked up only to keep to a key's workspaces; the page's
    // slugs come with its content.
    if let Some(slugs) = &q.within {
        from.push_str(dialect.search_workspace_join());
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
    let select = Select {
        columns: &columns,
        from: &from,
        filter: &filter,
        max: MAX_RANKED,
    };
    let candidates = dialect.search_candidates(&search, select, &mut p);
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
    let (sql, binds) = ranking(db.dialect(), tenant_id, q, workspace);
    let (prefix, column) = db.dialect().explain();
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
    use crate::db::Backend;

    /// A bulk upsert makes the index's values before the write lock ([`Terms::made_for`]);
    /// every other write lets the batch make them: both must write the same statements.
    #[test]
    fn values_made_early_are_the_values_made_late() {
        let (path, content) = (
            "/memories/a/b.md",
            "Deploys go out on Tuesdays; café ok, it's \\ $1 'q'",
        );
        for backend in [Backend::Sqlite, Backend::Postgres] {
            for fresh in [false, true] {
                let late = put_as("t1", "ctx_1", Terms::of(path, content).into(), fresh);
                let terms = Terms::of(path, content);
                let dialect = backend.dialect();
                let early = Indexed::Made {
                    dialect,
                    values: dialect.index_values("t1", &terms.path, &terms.content),
                };
                let early = put_as("t1", "ctx_1", early, fresh);
                let (late, early) = (late.statements(backend), early.statements(backend));
                assert!(!late.is_empty());
                assert_eq!(late, early, "{backend:?}, fresh {fresh}");
            }
        }
    }
}
