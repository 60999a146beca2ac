//! The SQL that differs between SQLite and PostgreSQL, in one place per database: [`Dialect`]
//! names each piece a domain operation needs, `sqlite` and `postgres` write it, each in its
//! engine's syntax, side by side. Domain code (`store`, `audit`, `auth`) asks
//! [`super::Db::dialect`] and never matches on [`super::Backend`]. A new query that the two
//! engines spell differently is one method here and its two texts there; one they spell alike
//! stays in the domain module (`$N` parameters, `RETURNING` and `ON CONFLICT` are common).

use contextq_api::search::Query;

use super::{Backend, Bind, batch::Statement};

mod postgres;
mod sqlite;

pub(crate) use sqlite::MERGE_ALL;

/// What a search reads its candidates from, and how it ranks them: the parts of the ranking
/// statement an engine writes its own way (`store::search` puts them together).
pub(crate) struct SearchFrom {
    /// Conditions that join the index's matches to their contexts (`TRUE` when `from` does).
    pub matches: String,
    /// The score of a candidate (higher first).
    pub rank: String,
    /// The `FROM` list: the index's matches, then `contexts c`.
    pub from: String,
}

/// The SQL one engine writes its own way. Every method is pure (text and values, no I/O).
pub(crate) trait Dialect: Send + Sync {
    /// The SQL function giving the 1-based position of a text in another (0: not in it).
    fn position_fn(&self) -> &'static str;

    /// `query`'s rows as one row with one text column, `rows`: a JSON array holding each row
    /// as an array of `columns` (`[]` when there is none). A listing of many small rows comes
    /// back as one value instead of one message per row from sqlx's SQLite worker thread.
    fn json_rows(&self, query: &str, columns: &[&str]) -> String;

    /// A JSON array (as text) of one object per row of the enclosing `FROM`, with `fields`
    /// (`(name, SQL expression)`).
    fn json_objects(&self, fields: &[(&str, &str)]) -> String;

    /// An activity log row's `detail.externalId`, as text ordered bytewise.
    fn detail_external_id(&self) -> &'static str;

    /// The insert of an audit row (values: tenant, tenant_seq, key, action, entity type and
    /// id, detail, created_at, prev_hash, hash, mac), its global `seq` numbered.
    fn insert_activity(&self) -> &'static str;

    /// The statement that locks the tenant's (`$1`) chain head (`audit_heads`) until the
    /// transaction ends, and returns no rows: the first of every write ([`super::Db::begin_with_read`]).
    fn lock_head(&self) -> &'static str;

    /// The chain heads not yet sealed with a MAC, locked for the caller's transaction.
    fn unsealed_heads(&self) -> &'static str;

    /// What follows a query to lock the rows it read of table alias `alias` until commit
    /// (nothing where the transaction already holds the database's one write lock).
    fn lock_rows_of(&self, alias: &str) -> String;

    /// The statement that tells other servers a key was revoked (`$1`: the channel), if the
    /// engine can notify ([`crate::auth::watch_revocations`] listens); `None`: they notice by
    /// the signal file and the key cache's TTL.
    fn revocation_notice(&self) -> Option<&'static str>;

    /// The statements that make the search index hold `path` and `content` (terms of
    /// `contextq_api::search::index_terms`) for context `id` of `tenant_id`, replacing what it
    /// held (`fresh`: the context is created in this batch, nothing to replace).
    fn index_put(
        &self,
        tenant_id: &str,
        id: &str,
        path: &[String],
        content: &[String],
        fresh: bool,
    ) -> Vec<Statement>;

    /// The statements that take context `id` out of the search index.
    fn index_remove(&self, id: &str) -> Vec<Statement>;

    /// The statements that take every context of a tenant out of the search index (before
    /// its contexts are deleted).
    fn index_remove_tenant(&self, tenant_id: &str) -> Vec<Statement>;

    /// A search's candidates and their rank; `p` binds a value and gives its placeholder.
    fn search_from(
        &self,
        tenant_id: &str,
        query: &Query,
        prefix: Option<&str>,
        p: &mut dyn FnMut(Bind) -> String,
    ) -> SearchFrom;

    /// The join that gives each candidate `c` its workspace `w` (to keep to a key's
    /// workspaces), without letting the planner start from the workspaces.
    fn search_workspace_join(&self) -> &'static str;

    /// The statement of at most `max` candidates: `columns` of `from` where `filter` holds.
    fn search_candidates(
        &self,
        tenant_id: &str,
        query: &Query,
        candidates: (&str, &str, &str),
        max: usize,
        p: &mut dyn FnMut(Bind) -> String,
    ) -> String;

    /// The prefix that makes a statement its plan, and the plan's column.
    fn explain(&self) -> (&'static str, &'static str);
}

impl Backend {
    /// The SQL of this engine.
    pub(crate) fn dialect(self) -> &'static dyn Dialect {
        match self {
            Backend::Sqlite => &sqlite::Sqlite,
            Backend::Postgres => &postgres::Postgres,
        }
    }
}

/// The term that makes a tenant's documents its own in the search index (`t_<tenant id>`,
/// which no query term can be: `_` separates terms).
pub(crate) fn scope_term(tenant_id: &str) -> String {
    format!("t_{tenant_id}")
}
