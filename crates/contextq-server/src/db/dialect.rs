//! The SQL that differs between SQLite and PostgreSQL, in one place per database: [`Dialect`]
//! names each piece a domain operation needs, `sqlite` and `postgres` write it, each in its
//! engine's syntax, side by side. Domain code (`store`, `audit`, `auth`) asks
//! [`super::Db::dialect`] and never matches on [`super::Backend`]. A new query that the two
//! engines spell differently is one method here and its two texts there; one they spell alike
//! stays in the domain module (`$N` parameters, `RETURNING` and `ON CONFLICT` are common).

use contextq_api::search::Query;

use super::Backend;
use super::bind::{Bind, Statement};

mod postgres;
mod sqlite;

pub(crate) use sqlite::MERGE_ALL;

/// A document of the search index: context `id` of `tenant_id`, with the values the dialect
/// made of its terms ([`Dialect::index_values`]); `fresh`: created in this batch, nothing to
/// replace.
pub(crate) struct IndexDoc<'a> {
    pub tenant_id: &'a str,
    pub id: &'a str,
    pub values: Vec<String>,
    pub fresh: bool,
}

/// A search as the dialects see it: the tenant, the checked query, the external-id prefix.
pub(crate) struct Search<'a> {
    pub tenant_id: &'a str,
    pub query: &'a Query,
    pub prefix: Option<&'a str>,
}

/// The candidates' statement: its columns, `FROM` list and filter, and at most `max` rows.
pub(crate) struct Select<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub filter: &'a str,
    pub max: usize,
}

/// Binds a value to the statement being written and gives its placeholder (`$n`).
pub(crate) type Placeholder<'a> = &'a mut dyn FnMut(Bind) -> String;

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
    fn json_rows(&self, query: &str, columns: &[&str]) -> String {
        let row = self.json_array(&columns.join(", "));
        format!("SELECT {} AS rows FROM ({query}) j", self.json_agg(&row))
    }

    /// A JSON array (as text) of one object per row of the enclosing `FROM`, with `fields`
    /// (`(name, SQL expression)`).
    fn json_objects(&self, fields: &[(&str, &str)]) -> String {
        let pairs: Vec<String> = fields
            .iter()
            .map(|(name, expr)| format!("'{name}', {expr}"))
            .collect();
        self.json_agg(&self.json_object(&pairs.join(", ")))
    }

    /// The JSON array of these comma-separated SQL values.
    fn json_array(&self, values: &str) -> String;

    /// The JSON object of these comma-separated `'name', value` pairs.
    fn json_object(&self, pairs: &str) -> String;

    /// The JSON array (as text, `[]` for no rows) of `element` over the rows of the `FROM`.
    fn json_agg(&self, element: &str) -> String;

    /// An activity log row's `detail.externalId`, as text ordered bytewise.
    fn detail_external_id(&self) -> &'static str;

    /// The insert of an audit row (values: tenant, tenant_seq, key, action, entity type and
    /// id, detail, created_at, prev_hash, hash, mac), its global `seq` numbered.
    fn insert_activity(&self) -> &'static str;

    /// The insert of `rows` audit rows (each with [`Dialect::insert_activity`]'s values, in
    /// turn: `$1..$11` the first row's, `$12..$22` the second's), their global `seq` numbered
    /// in the order given.
    fn insert_activities(&self, rows: usize) -> String;

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

    /// The values the search index stores for a document of `tenant_id` with these path and
    /// content terms (`contextq_api::search::index_terms`): made apart from
    /// [`Dialect::index_put`] so that a write can make them before it takes the write lock.
    fn index_values(&self, tenant_id: &str, path: &[String], content: &[String]) -> Vec<String>;

    /// The statements that make the search index hold `doc`, replacing what it held.
    fn index_put(&self, doc: IndexDoc<'_>) -> Vec<Statement>;

    /// The statements that take context `id` out of the search index.
    fn index_remove(&self, id: &str) -> Vec<Statement>;

    /// The statements that take every context of a tenant out of the search index (before
    /// its contexts are deleted).
    fn index_remove_tenant(&self, tenant_id: &str) -> Vec<Statement>;

    /// A search's candidates and their rank.
    fn search_from(&self, search: &Search<'_>, p: Placeholder<'_>) -> SearchFrom;

    /// The join that gives each candidate `c` its workspace `w` (to keep to a key's
    /// workspaces), without letting the planner start from the workspaces.
    fn search_workspace_join(&self) -> &'static str;

    /// The statement of at most `max` candidates: `select`'s columns, from and filter.
    fn search_candidates(
        &self,
        search: &Search<'_>,
        select: Select<'_>,
        p: Placeholder<'_>,
    ) -> String;

    /// The prefix that makes a statement its plan, and the plan's column.
    fn explain(&self) -> (&'static str, &'static str);

    /// `column` in a condition that must filter the rows another index yields, never choose
    /// an index of its own: SQLite without statistics reads a range of `column`'s index and
    /// sorts it when that range is the whole table; PostgreSQL needs the column bare to
    /// estimate the range from its statistics (an expression is guessed at 0.5%, and a plan
    /// built on that guess reads the whole table once statistics exist).
    fn filter_only(&self, column: &str) -> String;
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
