//! The migrations: one list (version, description, file name), each backend's SQL file of that
//! name (`migrations/sqlite`, `migrations/postgres`), applied in order at start in one
//! transaction under one lock.
//!
//! Not sqlx's `migrate!`/`Migrator`: a migrator reads one folder, while ours are one list of two
//! dialects whose versions must never differ; it records checksums in `_sqlx_migrations`, which
//! would make the databases of release 0.1.0 (recorded in `schema_migrations`) look unmigrated;
//! and it takes its lock outside the transaction that applies, whereas two servers starting on
//! one database here serialise on the same transaction that migrates (SQLite `BEGIN IMMEDIATE`,
//! PostgreSQL an advisory transaction lock). The runner is 40 lines.

use sqlx::Row;

use super::{Backend, Db, now};
use crate::error::{Error, Result};

struct Migration {
    version: i64,
    description: &'static str,
    /// The migration's SQL per backend (the dialects differ, the versions never do).
    sqlite: &'static str,
    postgres: &'static str,
}

impl Migration {
    fn sql(&self, backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => self.sqlite,
            Backend::Postgres => self.postgres,
        }
    }
}

/// One migration: its version, description, and the file of that name in each backend's
/// folder.
macro_rules! migration {
    ($version:literal, $description:literal, $file:literal) => {
        Migration {
            version: $version,
            description: $description,
            sqlite: include_str!(concat!("../../migrations/sqlite/", $file)),
            postgres: include_str!(concat!("../../migrations/postgres/", $file)),
        }
    };
}

/// Every migration, in order; each backend has its own SQL file of the same name.
const MIGRATIONS: &[Migration] = &[
    migration!(1, "init", "0001_init.sql"),
    migration!(
        2,
        "per-tenant audit chains, idempotency keys",
        "0002_tenant_chains.sql"
    ),
    migration!(3, "keyed audit log", "0003_audit_mac.sql"),
    migration!(4, "context versions", "0004_versions.sql"),
    migration!(
        5,
        "version counters, idempotency keys bound to their request, expiring keys, the legacy chain anchored",
        "0005_version_counters.sql"
    ),
    migration!(
        6,
        "tenant counts on the audit head, prunable versions flagged",
        "0006_usage_counts.sql"
    ),
    migration!(7, "renames recorded in versions", "0007_renames.sql"),
];

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
            sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql(self.backend())))
                .execute(&mut *tx)
                .await
                .map_err(|e| Error::Migration(m.version, e))?;
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
