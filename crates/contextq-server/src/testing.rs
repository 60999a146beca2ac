//! Test support shared by this workspace's test suites (feature `test-util`): a fresh database
//! per test on SQLite or PostgreSQL, and [`database_tests!`](crate::database_tests), which
//! declares each database test once per database so that a test run names, test by test, the
//! databases it ran on (`sqlite::name`, `postgres::name`).
//!
//! PostgreSQL tests run when the crate's tests were built with `CONTEXTQ_TEST_DATABASE_URL` set
//! (an admin URL such as `postgres://postgres:postgres@127.0.0.1:5432/postgres`; every test gets
//! a database of its own); otherwise they are listed as ignored, with the reason. A crate using
//! the macro needs the three-line build script that turns the variable into the
//! `contextq_postgres` cfg (see this crate's `build.rs`).

use crate::db::{Backend, create_postgres_database};

/// The environment variable with a PostgreSQL admin URL for tests.
pub const DATABASE_URL_VAR: &str = "CONTEXTQ_TEST_DATABASE_URL";

/// A database of its own for one test: a temporary SQLite file (removed on drop) or a new
/// PostgreSQL database.
#[derive(Debug)]
pub struct TestDatabase {
    /// Its URL, for [`crate::Db::connect`] or a server's `--database-url`.
    pub url: String,
    /// Which backend it is.
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

impl TestDatabase {
    /// A fresh, empty database on `backend`.
    ///
    /// # Panics
    /// When it cannot be made (a test helper: the panic names the cause), in particular for
    /// PostgreSQL when [`DATABASE_URL_VAR`] is not set.
    pub async fn fresh(backend: Backend) -> TestDatabase {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite:{}", dir.path().join("contextq.db").display());
                TestDatabase {
                    url,
                    backend,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres => {
                let admin = std::env::var(DATABASE_URL_VAR)
                    .ok()
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| {
                        panic!("{DATABASE_URL_VAR} is not set: the PostgreSQL tests need an admin URL such as postgres://postgres:postgres@127.0.0.1:5432/postgres")
                    });
                let name = format!("cqtest_{:016x}", fastrand::u64(..));
                let url = create_postgres_database(&admin, &name)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("cannot create a test database with {DATABASE_URL_VAR}: {e}")
                    });
                TestDatabase {
                    url,
                    backend,
                    _dir: None,
                }
            }
        }
    }
}

/// Declares each named `async fn name(backend: Backend)` as two tests, `sqlite::name` and
/// `postgres::name` (ignored, saying why, unless the crate was built with
/// `CONTEXTQ_TEST_DATABASE_URL` set). Each runs on a multi-threaded runtime.
///
/// ```ignore
/// async fn round_trip(backend: Backend) { /* ... */ }
/// contextq_server::database_tests!(round_trip);
/// ```
#[macro_export]
macro_rules! database_tests {
    ($($name:ident),* $(,)?) => {
        /// The database tests on SQLite (a temporary file each).
        mod sqlite {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Sqlite).await
                }
            )*
        }
        /// The database tests on PostgreSQL (a new database each).
        mod postgres {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(contextq_postgres),
                    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
                )]
                async fn $name() {
                    super::$name($crate::Backend::Postgres).await
                }
            )*
        }
    };
}
