//! The writes of one transaction: [`Batch`] (statements with the row counts they must change),
//! on PostgreSQL one statement of data-modifying CTEs with the counts checked in the database,
//! on SQLite bound and checked statement by statement (module `direct`), and [`BatchError`].
//!
//! A write is two round trips on PostgreSQL because the simple protocol sends many statements
//! at once (`BEGIN`, the lock, the read; the batch and `COMMIT`); it cannot bind values, so a
//! statement is `PREPARE`d once per connection and `EXECUTE`d with its values as literals
//! (module `writers`), or, past a size, inlined whole ([`inline`]): a text becomes a
//! dollar-quoted literal with a random tag it does not contain, so no character of it is ever
//! interpreted. On SQLite the values are bound, each statement prepared once per connection.
//! The property test `tests/integration/write_batch.rs` round-trips arbitrary strings through
//! both databases.

use super::Backend;
pub use super::bind::{Bind, Statement};
use super::dialect::Dialect;

/// The writes of one transaction, decided before any is made, committed by [`super::Write::commit`]:
/// one round trip on PostgreSQL (the statements become one statement of data-modifying CTEs,
/// [`Batch::into_postgres`]), one step on SQLite's direct connection.
/// Each statement uses its own `$1..$n`; each may say how many rows it must change, and the
/// batch fails (and the transaction with it) when one changes another number.
#[derive(Debug, Default)]
pub struct Batch {
    statements: Vec<(String, Vec<Bind>, Option<u64>)>,
    /// Statements each dialect writes its own way (the search index: an FTS5 table on SQLite,
    /// a `tsvector` table on PostgreSQL), run after every common statement, group after group
    /// in the order added; they may change any number of rows. Last so that no statement that
    /// opens a statement savepoint (a multi-row insert, an `INSERT ... SELECT`) comes after the
    /// index's terms: at each one FTS5 writes the terms it holds to a new segment. The index's
    /// own statements write one row each for the same reason (`store::search`), which is what
    /// removed a segment per file from a bulk upsert (docs/costs.md counts it); this order keeps
    /// a later change to the other statements from bringing it back.
    dialects: Vec<Dialects>,
}

/// A group of statements each dialect writes its own way, with its own values, made only for
/// the database the batch commits to (the search index's terms and `tsvector` are work worth
/// doing once). Their values must never hold NUL ([`Batch::has_nul`] does not see them).
pub struct Dialects(Box<dyn FnOnce(&'static dyn Dialect) -> Vec<Statement> + Send>);

impl Dialects {
    /// The statements `make` writes in the dialect it is given.
    pub(crate) fn new(
        make: impl FnOnce(&'static dyn Dialect) -> Vec<Statement> + Send + 'static,
    ) -> Self {
        Dialects(Box::new(make))
    }

    /// The statements for `backend`.
    pub fn statements(self, backend: Backend) -> Vec<Statement> {
        (self.0)(backend.dialect())
    }
}

impl std::fmt::Debug for Dialects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dialects(..)")
    }
}

/// Whether `e` is the failure [`Batch::into_postgres`] provokes when a statement changed
/// another number of rows than it had to: division by zero (22012).
pub(super) fn is_failed_check(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some("22012"))
}

/// Whether a text value contains NUL (U+0000).
pub fn has_nul(binds: &[Bind]) -> bool {
    binds.iter().any(|b| match b {
        Bind::Text(t) | Bind::OptText(Some(t)) => t.contains('\0'),
        _ => false,
    })
}

/// `sql` with each `$n` replaced by the `n`th value as a SQL literal of `backend`: integers in
/// decimal, `NULL`, and text: on PostgreSQL dollar-quoted with a random tag that the text does
/// not contain (so no character of it is ever interpreted: no escaping to get wrong); on
/// SQLite in single quotes with each `'` doubled (SQLite's only escape: a backslash is an
/// ordinary character). Values never contain NUL ([`has_nul`] is refused before).
pub fn inline(sql: &str, binds: &[Bind], backend: Backend) -> String {
    each_parameter(sql, |n| {
        binds.get(n.wrapping_sub(1)).map(|b| literal(b, backend))
    })
}

/// `sql` with each parameter `$n` written as `replace(n)` says; where it says `None`, and for a
/// `$` without digits, the text is left as it is.
fn each_parameter(sql: &str, replace: impl Fn(usize) -> Option<String>) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
            digits.push(d);
            chars.next();
        }
        match digits.parse::<usize>().ok().and_then(&replace) {
            Some(text) => out.push_str(&text),
            None => {
                out.push('$');
                out.push_str(&digits);
            }
        }
    }
    out
}

/// Each value of `binds` as a SQL literal of `backend` ([`inline`]'s), separated by commas:
/// the arguments of an `EXECUTE`.
pub fn literals(binds: &[Bind], backend: Backend) -> String {
    binds
        .iter()
        .map(|b| literal(b, backend))
        .collect::<Vec<_>>()
        .join(", ")
}

fn literal(b: &Bind, backend: Backend) -> String {
    let text = |t: &str| match backend {
        Backend::Sqlite => format!("'{}'", t.replace('\'', "''")),
        Backend::Postgres => dollar_quoted(t),
    };
    fn dollar_quoted(t: &str) -> String {
        loop {
            let tag = format!("cq{:016x}", fastrand::u64(..));
            if !t.contains(&tag) {
                return format!("${tag}${t}${tag}$");
            }
        }
    }
    match b {
        Bind::Text(t) | Bind::OptText(Some(t)) => text(t),
        Bind::OptText(None) | Bind::OptInt(None) => "NULL".to_string(),
        Bind::Int(i) | Bind::OptInt(Some(i)) => i.to_string(),
    }
}

/// A statement of a [`Batch`] changed another number of rows than it had to. The batch is
/// checked as a whole in the database (one query), so which statement is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a statement of a write changed another number of rows than it had to (rows each had to change: {expected:?})"
)]
pub struct BatchMismatch {
    /// Rows each statement had to change, in order (`None`: any number).
    pub expected: Vec<Option<u64>>,
}

/// What a [`Batch`] can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The database failed.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A statement changed an unexpected number of rows.
    #[error(transparent)]
    Mismatch(#[from] BatchMismatch),
}

impl Batch {
    /// Adds an `INSERT`, `UPDATE` or `DELETE` (without `RETURNING`) that must change `expect`
    /// rows (`None`: any number).
    pub fn push(&mut self, sql: impl Into<String>, binds: Vec<Bind>, expect: Option<u64>) {
        self.statements.push((sql.into(), binds, expect));
    }

    /// Adds statements each dialect writes its own way, run after every common statement of
    /// the batch (so they must not depend on what a common statement writes, nor a common
    /// statement on them), in the order their groups were added. Only for batches committed by
    /// a write ([`super::Write`]), not [`Batch::run_in`].
    pub fn push_dialects(&mut self, group: Dialects) {
        self.dialects.push(group);
    }

    /// The statements for `backend`, in order: the common ones, then the dialect's own.
    fn flatten(self, backend: Backend) -> Vec<(String, Vec<Bind>, Option<u64>)> {
        let mut out = self.statements;
        for group in self.dialects {
            out.extend(
                group
                    .statements(backend)
                    .into_iter()
                    .map(|(sql, binds)| (sql, binds, None)),
            );
        }
        out
    }

    /// Runs the statements one at a time, bound (not inlined), on `conn`, inside a transaction
    /// the caller began ([`crate::db::Db::begin_write`]); a statement that changes another number
    /// of rows than it had to fails the run, and the caller's transaction is then rolled back
    /// when dropped. For writes off the request path (provisioning), where round trips do not
    /// matter and statements must see each other's rows.
    pub async fn run_in(self, conn: &mut sqlx::AnyConnection) -> Result<(), BatchError> {
        debug_assert!(self.dialects.is_empty(), "dialect statements in run_in");
        let expected: Vec<Option<u64>> = self.statements.iter().map(|s| s.2).collect();
        for (sql, binds, expect) in self.statements {
            let done = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
                .execute(&mut *conn)
                .await?;
            if expect.is_some_and(|n| n != done.rows_affected()) {
                return Err(BatchError::Mismatch(BatchMismatch { expected }));
            }
        }
        Ok(())
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty() && self.dialects.is_empty()
    }

    /// Whether a text value of the batch contains NUL (U+0000), which PostgreSQL cannot store
    /// and the contract refuses on every database (the common statements: a [`Dialects`]
    /// group's values are made from them and hold none).
    pub fn has_nul(&self) -> bool {
        self.statements.iter().any(|(_, binds, _)| has_nul(binds))
    }

    /// The rows each common statement must change (`None`: any number), in order.
    pub fn expected(&self) -> Vec<Option<u64>> {
        self.statements.iter().map(|s| s.2).collect()
    }

    /// The common statements: each with its values (`$1..$n` of its own) and the rows it must
    /// change.
    pub fn statements(&self) -> &[(String, Vec<Bind>, Option<u64>)] {
        &self.statements
    }

    /// SQLite's statements, owned (SQLite runs them one at a time, each prepared once per
    /// connection and checked as it runs: module `direct`).
    pub fn into_statements(self) -> Vec<(String, Vec<Bind>, Option<u64>)> {
        self.flatten(Backend::Sqlite)
    }

    /// PostgreSQL: the batch as one statement of data-modifying CTEs, `WITH s0 AS (...
    /// RETURNING 1), ... SELECT 1 / (CASE WHEN <each count is right> THEN 1 ELSE 0 END)`
    /// (division by zero otherwise), with its values (each statement's `$n` renumbered after
    /// the previous statements' values, so that the text is the same for every batch of one
    /// shape: prepared once per connection, module `writers`), and the rows each statement had
    /// to change.
    pub fn into_postgres(self) -> (String, Vec<Bind>, Vec<Option<u64>>) {
        let expects = self.expected();
        let statements = self.flatten(Backend::Postgres);
        let mut ctes = Vec::new();
        let mut checks = Vec::new();
        let mut all = Vec::new();
        for (index, (sql, binds, expect)) in statements.into_iter().enumerate() {
            let offset = all.len();
            let count = binds.len();
            let renumbered = each_parameter(&sql, |n| {
                (1..=count).contains(&n).then(|| format!("${}", offset + n))
            });
            all.extend(binds);
            ctes.push(format!("s{index} AS ({renumbered} RETURNING 1)"));
            if let Some(n) = expect {
                checks.push(format!("(SELECT COUNT(*) FROM s{index}) = {n}"));
            }
        }
        if ctes.is_empty() {
            return ("SELECT 1".into(), all, expects);
        }
        if checks.is_empty() {
            checks.push("TRUE".into());
        }
        let sql = format!(
            "WITH {} SELECT 1 / (CASE WHEN {} THEN 1 ELSE 0 END)",
            ctes.join(", "),
            checks.join(" AND ")
        );
        (sql, all, expects)
    }
}

/// Binds `binds` in order.
pub fn bind_all<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    binds: Vec<Bind>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for b in binds {
        query = match b {
            Bind::Text(v) => query.bind(v),
            Bind::OptText(v) => query.bind(v),
            Bind::Int(v) => query.bind(v),
            Bind::OptInt(v) => query.bind(v),
        };
    }
    query
}

/// `$from, $from+1, ..., $from+n-1`.
pub fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($1, .., $columns), ($columns+1, ..), ..`: `rows` rows of values.
pub fn value_rows(rows: usize, columns: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(rows * columns * 6);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 1..=columns {
            let sep = if c == 1 { "" } else { ", " };
            let _ = write!(out, "{sep}${}", r * columns + c);
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_become_one_checked_query() {
        let mut batch = Batch::default();
        batch.push(
            "UPDATE t SET a = $1 WHERE id = $2",
            vec![Bind::Int(1), Bind::Text("x".into())],
            Some(1),
        );
        batch.push("DELETE FROM u WHERE id = $1", vec![Bind::Int(9)], None);
        assert_eq!(batch.expected(), vec![Some(1), None]);
        assert_eq!(batch.statements()[1].1, vec![Bind::Int(9)]);
        let (sql, binds, expects) = batch.into_postgres();
        assert_eq!(
            sql,
            "WITH s0 AS (UPDATE t SET a = $1 WHERE id = $2 RETURNING 1), \
             s1 AS (DELETE FROM u WHERE id = $3 RETURNING 1) \
             SELECT 1 / (CASE WHEN (SELECT COUNT(*) FROM s0) = 1 THEN 1 ELSE 0 END)"
        );
        assert_eq!(
            binds,
            vec![Bind::Int(1), Bind::Text("x".into()), Bind::Int(9)]
        );
        assert_eq!(expects, vec![Some(1), None]);
        assert_eq!(
            Batch::default().into_postgres(),
            ("SELECT 1".to_string(), vec![], vec![])
        );
    }

    #[test]
    fn rows_of_values_are_numbered_on() {
        assert_eq!(value_rows(1, 3), "($1, $2, $3)");
        assert_eq!(value_rows(2, 2), "($1, $2), ($3, $4)");
        assert_eq!(value_rows(0, 2), "");
    }

    #[test]
    fn values_are_inlined_as_literals() {
        let binds = [
            Bind::Int(-7),
            Bind::OptText(None),
            Bind::Text("it's $$ a $cq$ trap \\ $1".into()),
            Bind::OptInt(Some(3)),
        ];
        let sql = inline(
            "x = $1 AND y = $2 AND z = $3 AND w = $4",
            &binds,
            Backend::Postgres,
        );
        assert!(sql.starts_with("x = -7 AND y = NULL AND z = $cq"), "{sql}");
        assert!(sql.contains("$it's $$ a $cq$ trap \\ $1$cq"), "{sql}");
        assert!(sql.ends_with(" AND w = 3"), "{sql}");
        assert_eq!(
            inline(
                "x = $1 AND y = $2 AND z = $3 AND w = $4 AND v = $10",
                &binds,
                Backend::Sqlite
            ),
            "x = -7 AND y = NULL AND z = 'it''s $$ a $cq$ trap \\ $1' AND w = 3 AND v = $10"
        );
        assert_eq!(placeholders(3, 2), "$3, $4");
    }
}
