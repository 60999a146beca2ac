//! The migrations: one list (version, description, file name), each backend's SQL file of that
//! name (`migrations/sqlite`, `migrations/postgres`), or one file for both in `migrations/common`
//! where the dialects agree, applied in order at start in one transaction under one lock.
//!
//! A common file names the two types the dialects spell differently, and nothing else is
//! substituted:
//! - `{{text_c}}`, text compared byte by byte: PostgreSQL's `TEXT COLLATE "C"` (its default
//!   collation sorts by locale), SQLite's plain `TEXT` (already binary; it knows no "C").
//! - `{{bigint}}`: PostgreSQL's `BIGINT` (so that every integer decodes as `i64`), SQLite's
//!   `INTEGER` (an `INTEGER PRIMARY KEY` is the rowid there).
//!
//! Not sqlx's `migrate!`/`Migrator`: a migrator reads one folder, while ours are one list of two
//! dialects whose versions must never differ; it records checksums in `_sqlx_migrations`, which
//! would make the databases of release 0.1.0 (recorded in `schema_migrations`) look unmigrated;
//! and it takes its lock outside the transaction that applies, whereas two servers starting on
//! one database here serialise on the same transaction that migrates (SQLite `BEGIN IMMEDIATE`,
//! PostgreSQL an advisory transaction lock). The runner is 40 lines.

use std::borrow::Cow;

use sqlx::Row;

use super::{Backend, Db, now};
use crate::error::{Error, Result};

struct Migration {
    version: i64,
    description: &'static str,
    sql: Sql,
}

/// A migration's SQL: one file per dialect, or one for both.
enum Sql {
    PerBackend {
        sqlite: &'static str,
        postgres: &'static str,
    },
    Common(&'static str),
}

/// The tokens of a common file and what each stands for in (SQLite, PostgreSQL).
const TYPES: [(&str, &str, &str); 2] = [
    ("{{text_c}}", "TEXT", "TEXT COLLATE \"C\""),
    ("{{bigint}}", "INTEGER", "BIGINT"),
];

impl Migration {
    fn sql(&self, backend: Backend) -> Cow<'static, str> {
        match (&self.sql, backend) {
            (Sql::PerBackend { sqlite, .. }, Backend::Sqlite) => Cow::Borrowed(sqlite),
            (Sql::PerBackend { postgres, .. }, Backend::Postgres) => Cow::Borrowed(postgres),
            (Sql::Common(sql), backend) => Cow::Owned(TYPES.iter().fold(
                sql.to_string(),
                |sql, (token, sqlite, postgres)| match backend {
                    Backend::Sqlite => sql.replace(token, sqlite),
                    Backend::Postgres => sql.replace(token, postgres),
                },
            )),
        }
    }
}

/// One migration: its version, description, and the file of that name in each backend's
/// folder, or (`common`) the one file for both.
macro_rules! migration {
    ($version:literal, $description:literal, $file:literal) => {
        Migration {
            version: $version,
            description: $description,
            sql: Sql::PerBackend {
                sqlite: include_str!(concat!("../../migrations/sqlite/", $file)),
                postgres: include_str!(concat!("../../migrations/postgres/", $file)),
            },
        }
    };
    ($version:literal, $description:literal, common $file:literal) => {
        Migration {
            version: $version,
            description: $description,
            sql: Sql::Common(include_str!(concat!("../../migrations/common/", $file))),
        }
    };
}

/// Every migration, in order.
const MIGRATIONS: &[Migration] = &[
    migration!(1, "init", common "0001_init.sql"),
    migration!(
        2,
        "per-tenant audit chains, idempotency keys",
        "0002_tenant_chains.sql"
    ),
    migration!(3, "keyed audit log", common "0003_audit_mac.sql"),
    migration!(4, "context versions", common "0004_versions.sql"),
    migration!(
        5,
        "version counters, idempotency keys bound to their request, expiring keys, the legacy chain anchored",
        common "0005_version_counters.sql"
    ),
    migration!(
        6,
        "tenant counts on the audit head, prunable versions flagged",
        common "0006_usage_counts.sql"
    ),
    migration!(7, "renames recorded in versions", common "0007_renames.sql"),
    migration!(8, "keys limited to workspaces, last use of keys", common "0008_key_workspaces.sql"),
    migration!(9, "redacted versions", common "0009_redaction.sql"),
    migration!(10, "inspector sessions bound to their key", common "0010_session_parents.sql"),
    migration!(11, "outcomes of keyed writes", common "0011_write_outcomes.sql"),
    migration!(12, "key names", common "0012_key_names.sql"),
    migration!(13, "full-text search", "0013_search.sql"),
    migration!(
        14,
        "a bounded GIN pending list",
        "0014_search_pending_list.sql"
    ),
    migration!(15, "restores marked in versions", common "0015_restore_marks.sql"),
    migration!(
        16,
        "tables keyed by text without rowids",
        "0016_keyed_tables.sql"
    ),
    migration!(
        17,
        "search index merged between writes",
        "0017_index_merges_between_writes.sql"
    ),
    migration!(
        18,
        "memory stores: workspace profiles, versions by workspace, redactions by key",
        common "0018_memory_stores.sql"
    ),
    migration!(
        19,
        "search index: a bulk write's terms flushed once",
        "0019_index_flushes_once_a_write.sql"
    ),
];

/// The migration after whose SQL every existing context is indexed for search (in Rust: the
/// terms are `contextq_api::search`'s).
const SEARCH_INDEX: i64 = 13;

/// The schema version this server migrates to (its last migration).
pub fn latest_schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

impl Db {
    pub(super) async fn migrate(&self) -> Result<()> {
        let migrations = MIGRATIONS;
        // One transaction under one lock: two servers starting together on one database do not
        // race (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock held to commit).
        let mut tx = self.begin_write().await?;
        if self.backend() == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(7301452)")
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        for m in migrations {
            let done = sqlx::query("SELECT version FROM schema_migrations WHERE version = $1")
                .bind(m.version)
                .fetch_optional(&mut *tx)
                .await?;
            if done.is_some() {
                continue;
            }
            sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql(self.backend()).into_owned()))
                .execute(&mut *tx)
                .await
                .map_err(|e| Error::Migration(m.version, e))?;
            if m.version == SEARCH_INDEX {
                let n = crate::store::search::backfill(&mut tx, self.backend().dialect())
                    .await
                    .map_err(|e| match e {
                        crate::store::Error::Database(e) => Error::Migration(m.version, e),
                        e => Error::Migration(m.version, sqlx::Error::Protocol(e.to_string())),
                    })?;
                tracing::info!(contexts = n, "indexed existing contexts for search");
            }
            sqlx::query(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)",
            )
            .bind(m.version)
            .bind(m.description)
            .bind(now())
            .execute(&mut *tx)
            .await?;
            tracing::info!(version = m.version, "applied migration {}", m.description);
        }
        tx.commit().await?;
        Ok(())
    }

    /// The latest applied migration.
    pub async fn schema_version(&self) -> Result<i64, sqlx::Error> {
        let row = sqlx::query("SELECT MAX(version) AS v FROM schema_migrations")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<Option<i64>, _>("v")?.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_files_render_to_each_dialect() {
        for m in MIGRATIONS {
            let (sqlite, postgres) = (m.sql(Backend::Sqlite), m.sql(Backend::Postgres));
            assert!(
                !sqlite.contains("{{") && !postgres.contains("{{"),
                "{}",
                m.version
            );
            assert!(!sqlite.contains("COLLATE \"C\""), "{}", m.version);
            if let Sql::Common(sql) = m.sql {
                assert_eq!(
                    postgres.matches("COLLATE \"C\"").count(),
                    sql.matches(TYPES[0].0).count()
                );
                assert!(!postgres.contains("INTEGER"), "{}", m.version);
            }
        }
        // Versions strictly increase: a migration is never applied out of order.
        assert!(MIGRATIONS.windows(2).all(|w| w[0].version < w[1].version));
    }
}
