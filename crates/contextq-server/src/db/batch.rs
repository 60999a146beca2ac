//! The writes of one transaction as one query: [`Batch`] (statements with the row counts they
//! must change, checked in the database), the values inlined as SQL literals on PostgreSQL
//! ([`inline`]) and bound on SQLite ([`renumber`]), and [`BatchError`].
//!
//! Inlining is what makes a write two round trips on PostgreSQL (the simple protocol sends many
//! statements at once, but cannot bind parameters): a text becomes a dollar-quoted literal with a
//! random tag it does not contain, so no character of it is ever interpreted. SQLite binds the
//! parameters of a query of several statements, so there the values are bound and the query's
//! text is the same for every write of one shape: prepared once per connection instead of parsed
//! at every write (parsing was a fifth of the embedded default's CPU time). The property test
//! `tests/write_batch.rs` round-trips arbitrary strings through both databases.

use super::Backend;

/// A value bound to a statement of a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// `TEXT`.
    Text(String),
    /// `TEXT` or `NULL`.
    OptText(Option<String>),
    /// `BIGINT`.
    Int(i64),
    /// `BIGINT` or `NULL`.
    OptInt(Option<i64>),
}

/// The writes of one transaction, decided before any is made, sent as one query with `COMMIT`
/// ([`Write::commit`], [`Batch::into_checked`]): one round trip on PostgreSQL (the statements
/// become one statement of data-modifying CTEs), one hop to sqlx's worker thread on SQLite.
/// Each statement uses its own `$1..$n`; each may say how many rows it must change, and the
/// batch fails (and the transaction with it) when one changes another number.
#[derive(Debug, Default)]
pub struct Batch {
    statements: Vec<(String, Vec<Bind>, Option<u64>)>,
}

/// Whether `e` is the failure [`Batch::into_checked`] provokes when a statement changed
/// another number of rows than it had to: division by zero on PostgreSQL (22012), malformed
/// JSON from `json('batch check')` on SQLite (which has no statement that raises an error).
pub(super) fn is_failed_check(e: &sqlx::Error, backend: Backend) -> bool {
    match (e, backend) {
        (sqlx::Error::Database(d), Backend::Postgres) => d.code().as_deref() == Some("22012"),
        (sqlx::Error::Database(d), Backend::Sqlite) => d.message().contains("malformed JSON"),
        _ => false,
    }
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

    /// Runs the statements one at a time, bound (not inlined), on `conn`, inside a transaction
    /// the caller began ([`crate::db::Db::begin_write`]); a statement that changes another number
    /// of rows than it had to fails the run, and the caller's transaction is then rolled back
    /// when dropped. For writes off the request path (provisioning), where round trips do not
    /// matter and statements must see each other's rows.
    pub async fn run_in(self, conn: &mut sqlx::AnyConnection) -> Result<(), BatchError> {
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
        self.statements.is_empty()
    }

    /// Whether a text value of the batch contains NUL (U+0000), which PostgreSQL cannot store
    /// and the contract refuses on every database.
    pub fn has_nul(&self) -> bool {
        self.statements.iter().any(|(_, binds, _)| has_nul(binds))
    }

    /// The batch as one query of `backend` that fails unless every statement changed the rows
    /// it had to, its values to bind (`$1..$n` across the whole query), and the rows each
    /// statement had to change.
    ///
    /// PostgreSQL: one statement of data-modifying CTEs, `WITH s0 AS (... RETURNING 1), ...
    /// SELECT 1 / (CASE WHEN <each count is right> THEN 1 ELSE 0 END)` (division by zero
    /// otherwise), the values inlined ([`inline`]; the simple protocol cannot bind), so no
    /// values are returned. SQLite: the statements one after another, their parameters
    /// renumbered into one sequence, each checked by `SELECT CASE WHEN changes() = n THEN 1 ELSE
    /// json('batch check ' || changes()) END`, which raises "malformed JSON" when the count is
    /// wrong (the argument is not constant, so SQLite never evaluates it ahead of the `CASE`).
    /// Bound rather than inlined, the same shape of write is the same text, so sqlx prepares it
    /// once per connection instead of SQLite parsing every write anew.
    pub fn into_checked(self, backend: Backend) -> (String, Vec<Bind>, Vec<Option<u64>>) {
        let expects: Vec<Option<u64>> = self.statements.iter().map(|s| s.2).collect();
        if self.statements.is_empty() {
            return ("SELECT 1".into(), Vec::new(), expects);
        }
        match backend {
            Backend::Postgres => {
                let mut ctes = Vec::new();
                let mut checks = Vec::new();
                for (index, (sql, binds, expect)) in self.statements.into_iter().enumerate() {
                    ctes.push(format!(
                        "s{index} AS ({} RETURNING 1)",
                        inline(&sql, &binds, backend)
                    ));
                    if let Some(n) = expect {
                        checks.push(format!("(SELECT COUNT(*) FROM s{index}) = {n}"));
                    }
                }
                if checks.is_empty() {
                    checks.push("TRUE".into());
                }
                let sql = format!(
                    "WITH {} SELECT 1 / (CASE WHEN {} THEN 1 ELSE 0 END)",
                    ctes.join(", "),
                    checks.join(" AND ")
                );
                (sql, Vec::new(), expects)
            }
            Backend::Sqlite => {
                let mut parts = Vec::new();
                let mut all = Vec::new();
                for (sql, binds, expect) in self.statements {
                    parts.push(renumber(&sql, all.len(), binds.len()));
                    all.extend(binds);
                    if let Some(n) = expect {
                        parts.push(format!(
                            "SELECT CASE WHEN changes() = {n} THEN 1 ELSE json('batch check ' || changes()) END"
                        ));
                    }
                }
                (parts.join("; "), all, expects)
            }
        }
    }
}

/// `sql` with each parameter `$k` (1 <= k <= `count`) written `$(k + offset)`: a statement's
/// own numbering moved into the sequence of a query of several statements. Any other `$`
/// is left as it is, like [`inline`] leaves it.
pub fn renumber(sql: &str, offset: usize, count: usize) -> String {
    each_parameter(sql, |k| {
        (1..=count).contains(&k).then(|| format!("${}", k + offset))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_become_one_checked_query() {
        let batch = || {
            let mut b = Batch::default();
            b.push(
                "UPDATE t SET a = $1 WHERE id = $2",
                vec![Bind::Int(1), Bind::Text("x".into())],
                Some(1),
            );
            b.push("DELETE FROM u WHERE id = $1", vec![Bind::Int(9)], None);
            b
        };
        let (sql, binds, expects) = batch().into_checked(Backend::Postgres);
        assert_eq!(binds, vec![], "PostgreSQL's batch is inlined");
        assert!(
            sql.starts_with("WITH s0 AS (UPDATE t SET a = 1 WHERE id = $cq"),
            "{sql}"
        );
        assert!(
            sql.ends_with(
                "s1 AS (DELETE FROM u WHERE id = 9 RETURNING 1) SELECT 1 / (CASE WHEN (SELECT COUNT(*) FROM s0) = 1 THEN 1 ELSE 0 END)"
            ),
            "{sql}"
        );
        assert_eq!(expects, vec![Some(1), None]);
        let (sql, binds, _) = batch().into_checked(Backend::Sqlite);
        assert_eq!(
            sql,
            "UPDATE t SET a = $1 WHERE id = $2; SELECT CASE WHEN changes() = 1 THEN 1 ELSE json('batch check ' || changes()) END; DELETE FROM u WHERE id = $3"
        );
        assert_eq!(
            binds,
            vec![Bind::Int(1), Bind::Text("x".into()), Bind::Int(9)]
        );
        assert_eq!(
            Batch::default().into_checked(Backend::Sqlite),
            ("SELECT 1".to_string(), vec![], vec![])
        );
    }

    #[test]
    fn renumbering_moves_a_statements_parameters_only() {
        assert_eq!(
            renumber(
                "a = $1 AND b = $2 AND c = $1 AND d = $3 AND e = '$.x' AND f = $",
                4,
                2
            ),
            "a = $5 AND b = $6 AND c = $5 AND d = $3 AND e = '$.x' AND f = $"
        );
        assert_eq!(renumber("x = $10", 0, 10), "x = $10");
        assert_eq!(renumber("x = $10", 2, 10), "x = $12");
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
