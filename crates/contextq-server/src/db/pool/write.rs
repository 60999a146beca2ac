//! A write transaction: [`Write`] (begun with its read by [`Db::begin_with_read`], committed
//! with one checked batch by [`Write::commit`]) on SQLite's direct connection or a PostgreSQL
//! write connection, and [`Reader`], a connection held for reads.

use super::*;

/// A write transaction opened by its read (see [`Db::begin_with_read`]); finished by
/// [`Write::commit`] with the batch of its changes, or by [`Write::abort`].
///
/// On PostgreSQL a write connection inside a transaction begun by hand: if it is dropped
/// before commit or rollback (a panic, a cancelled request), it is closed, not reused, so that
/// the database rolls the transaction back and no other request ever runs inside it. On SQLite the
/// direct connection with this process's writer slot: dropped early, it rolls back before the
/// slot is released.
#[derive(Debug)]
pub struct Write {
    pub(super) conn: WriteConn,
    /// Not yet committed nor rolled back.
    pub(super) open: bool,
    pub(super) commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The connection a [`Write`] runs on.
#[derive(Debug)]
pub(super) enum WriteConn {
    /// PostgreSQL: a write connection (module `writers`).
    Postgres(Writer),
    /// SQLite: the direct connection, with this process's writer slot (`None` while a job on
    /// the connection's thread carries it).
    Sqlite {
        slot: Option<Slot>,
        direct: std::sync::Arc<DirectConnection>,
    },
}

/// The connection a [`Write`] or a [`Reader`] holds.
#[derive(Debug)]
pub(super) enum Held {
    /// A pooled connection (PostgreSQL; SQLite reads while a write holds the slot).
    Pooled(sqlx::pool::PoolConnection<Any>),
    /// SQLite: the write connection, in the writer slot (held until the write or read ends).
    Slot(tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>),
}

impl Held {
    pub(super) fn get(&mut self) -> &mut sqlx::AnyConnection {
        match self {
            Held::Pooled(c) => c,
            Held::Slot(slot) => slot.as_mut().expect("the slot holds a connection"),
        }
    }
}

/// A connection for reads ([`Db::reader`]); `&mut *reader` is an executor.
#[derive(Debug)]
pub struct Reader(pub(super) Held);

impl std::ops::Deref for Reader {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Held::Pooled(c) => c,
            Held::Slot(slot) => slot.as_ref().expect("the slot holds a connection"),
        }
    }
}

impl std::ops::DerefMut for Reader {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get()
    }
}

impl Drop for Write {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        match &mut self.conn {
            // Not marked reusable: closed, and the database rolls the transaction back.
            WriteConn::Postgres(_) => {}
            // Ended before the slot is released (a job that carries the slot ends its own).
            WriteConn::Sqlite {
                slot: Some(_),
                direct,
            } => direct.rollback(),
            WriteConn::Sqlite { slot: None, .. } => {}
        }
    }
}

impl Write {
    /// Round trip 2 of a write: every statement of `batch`, each checked for the rows it had to
    /// change, and `COMMIT`: on PostgreSQL in one query ([`Batch::into_postgres`]); on SQLite
    /// statement by statement on the direct connection, on the calling thread when the commit
    /// does not flush to disk, on the connection's thread when it does. Nothing is committed
    /// when a check fails or the database refuses a statement.
    pub async fn commit(mut self, batch: Batch) -> Result<(), BatchError> {
        let writer = match &mut self.conn {
            WriteConn::Sqlite { slot, direct } => {
                let expected = batch.expected();
                let direct = direct.clone();
                let taken = slot.take().expect("an open write holds the slot");
                return match direct
                    .commit(taken, batch.into_statements(), self.commits.clone())
                    .await
                {
                    // Committed, or rolled back by the failure: ended either way.
                    Ok(()) => {
                        self.open = false;
                        Ok(())
                    }
                    Err(CommitError::Mismatch) => {
                        self.open = false;
                        Err(BatchError::Mismatch(BatchMismatch { expected }))
                    }
                    Err(CommitError::Database(e)) => {
                        self.open = false;
                        Err(BatchError::Database(e))
                    }
                };
            }
            WriteConn::Postgres(writer) => writer,
        };
        let (sql, binds, expects) = batch.into_postgres();
        // `Err((true, e))`: the batch and its COMMIT were sent; `(false, e)`: not yet (preparing
        // sends nothing that commits), so a failure there leaves nothing applied.
        let sent = async {
            let statement = writer
                .statement(&sql, &binds)
                .await
                .map_err(|e| (false, e))?;
            let query = format!("{}{statement}; COMMIT", writer.take_evicted());
            sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                .execute(writer.connection())
                .await
                .map_err(|e| (true, e))
        }
        .await;
        match sent {
            Ok(_) => {
                writer.set_reusable(true);
                self.open = false;
                self.commits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err((sent, e)) => {
                if crate::db::outage::is_unavailable(&e) {
                    self.dead();
                } else {
                    self.rollback().await;
                }
                if is_failed_check(&e) {
                    Err(BatchError::Mismatch(BatchMismatch { expected: expects }))
                } else if sent {
                    // The batch ends with its COMMIT: a lost connection leaves it unknown.
                    Err(BatchError::Database(crate::db::outage::outcome_unknown(e)))
                } else {
                    Err(BatchError::Database(e))
                }
            }
        }
    }

    /// PostgreSQL, after a failure that says the database is unavailable: the connection is
    /// closed with every idle one (no `ROLLBACK` is sent to a connection that is gone; a
    /// standby after a failover ends the transaction when the connection closes).
    pub(super) fn dead(&mut self) {
        if let WriteConn::Postgres(writer) = &mut self.conn {
            writer.dead();
        }
        self.open = false;
    }

    /// Ends the transaction without changing anything (a refused write).
    pub async fn abort(mut self) {
        self.rollback().await;
    }

    /// Ends a transaction that will not commit; a connection that cannot even do that is
    /// closed instead of returned to the pool.
    pub(super) async fn rollback(&mut self) {
        match &mut self.conn {
            WriteConn::Sqlite { direct, .. } => {
                direct.rollback();
                self.open = false;
            }
            WriteConn::Postgres(writer) => {
                match sqlx::raw_sql("ROLLBACK").execute(writer.connection()).await {
                    Ok(_) => {
                        writer.set_reusable(true);
                        self.open = false;
                    }
                    Err(e) => tracing::warn!(error = %e, "rollback failed; closing the connection"),
                }
            }
        }
    }
}

impl Db {
    /// Round trip 1 of a write: begins the transaction, runs `lock` (a statement that takes
    /// the write's row locks and returns no rows), then `read` (which reads what the write
    /// needs), both with `binds`, and gives the first row of `read`. On PostgreSQL it is one
    /// simple-protocol query on a write connection (module `writers`): `lock` inlined, `read`
    /// `EXECUTE`d (prepared on that connection first when it is not yet, one more round trip),
    /// and `read` runs after `lock` was granted, with a snapshot of its own (READ COMMITTED), so
    /// it sees every write committed before the lock. On SQLite, `BEGIN IMMEDIATE` is the lock (one writer;
    /// `lock` is not sent), taken after this process's writer slot, so that writers queue
    /// fairly instead of polling SQLite's lock; `read` runs bound, prepared once, on the
    /// direct connection: on the calling thread when the lock is free, on the connection's
    /// thread (waiting up to the busy timeout) when another process holds it.
    pub async fn begin_with_read(
        &self,
        lock: &str,
        read: &str,
        binds: Vec<Bind>,
    ) -> Result<(Write, Option<Row>), sqlx::Error> {
        if let Some(direct) = &self.direct {
            let slot = self.writer.clone().lock_owned().await;
            let (row, slot) = direct.begin_with_read(slot, read, binds).await?;
            let write = Write {
                conn: WriteConn::Sqlite {
                    slot: Some(slot),
                    direct: direct.clone(),
                },
                open: true,
                commits: self.commits.clone(),
            };
            return Ok((write, row));
        }
        let writers = self
            .writers
            .as_ref()
            .expect("PostgreSQL has write connections");
        let mut retried = false;
        loop {
            let mut writer = writers.acquire().await?;
            let was_idle = writer.was_idle();
            let row = async {
                let read = writer.statement(read, &binds).await?;
                let query = format!(
                    "{}BEGIN; {}; {read}",
                    writer.take_evicted(),
                    inline(lock, &binds, Backend::Postgres),
                );
                let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                    .fetch_all(writer.connection())
                    .await?;
                rows.first().map(Row::from_any).transpose()
            }
            .await;
            let mut write = Write {
                conn: WriteConn::Postgres(writer),
                open: true,
                commits: self.commits.clone(),
            };
            match row {
                Ok(row) => return Ok((write, row)),
                Err(e) if crate::db::outage::is_unavailable(&e) => {
                    write.dead();
                    // A connection that died while idle (the database restarted or failed
                    // over since): nothing was sent that commits, so the write starts again
                    // once on a new connection instead of answering 503.
                    if was_idle && !retried && matches!(e, sqlx::Error::Io(_)) {
                        retried = true;
                        continue;
                    }
                    return Err(e);
                }
                Err(e) => {
                    write.rollback().await;
                    return Err(e);
                }
            }
        }
    }
}
