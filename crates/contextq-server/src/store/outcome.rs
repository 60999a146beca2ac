//! Outcomes of keyed writes (extension `idempotency`): a write sent with an `Idempotency-Key`
//! records, in its own transaction, the digest of its request and the answer it got, and a
//! repeat of the same request is answered with that outcome whatever happened since (another
//! writer, a delete, a re-create). So a client that lost an answer learns what its request did
//! by sending it again, instead of guessing from the current state.
//!
//! What is recorded is the API's answer (status and body) without file contents: the API layer
//! says what to record ([`Keyed::answer`], [`Keyed::refusal`]) and rebuilds contents on a
//! replay. Refusals that follow from the request and the state it met (404, 409, 412, an edit
//! that cannot apply, quota) are outcomes too; failures of the moment (a database error, rows
//! changed under the write) are not, and a repeat runs again.
//!
//! Bounds: a record is replayed for [`REPLAY_WINDOW`]; each keyed write prunes its tenant's
//! records beyond the newest [`KEPT_PER_TENANT`] (one indexed range, never a scan).

use std::time::Duration;

use super::{Error, Result};
use crate::db::{Batch, Bind, Row};

/// How long a recorded outcome answers a repeat: one hour.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(3600);

/// Records a tenant keeps at most; older ones are pruned by its next keyed write.
pub const KEPT_PER_TENANT: i64 = 10_000;

/// A recorded answer: its status, body (`Null` for an empty body) and `ETag` version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Recorded {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body, without file contents.
    pub body: serde_json::Value,
    /// The version its `ETag` named, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<i64>,
}

/// What records the outcome of one answer: `Some` to record it, `None` to leave it (a failure
/// of the moment). The answer is the operation's result, given as `&dyn Any` because one write
/// path serves every operation; the API layer knows its type.
pub type Answer<'a> = &'a (dyn Fn(&dyn std::any::Any) -> Option<Recorded> + Send + Sync);

/// What records a refusal (the same rule as [`Answer`]).
pub type Refusal<'a> = &'a (dyn Fn(&Error) -> Option<Recorded> + Send + Sync);

/// A write's `Idempotency-Key`, the digest of the request it stands for, and what to record.
#[derive(Clone, Copy)]
pub struct Keyed<'a> {
    /// The key (1 to 128 visible ASCII characters).
    pub key: &'a str,
    /// The digest of the request (method, path and query, `If-Match`, body).
    pub request_sha256: &'a str,
    /// The answer of a success.
    pub answer: Answer<'a>,
    /// The answer of a refusal.
    pub refusal: Refusal<'a>,
}

impl std::fmt::Debug for Keyed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyed")
            .field("key", &self.key)
            .field("request_sha256", &self.request_sha256)
            .finish_non_exhaustive()
    }
}

/// A write's read statement with the key's earlier outcome and the tenant's newest record
/// number beside its columns (one statement still: the read becomes a subquery).
pub(crate) fn with_prior(read: (String, Vec<Bind>), key: &str) -> (String, Vec<Bind>) {
    let (sql, mut binds) = read;
    binds.push(Bind::Text(key.to_string()));
    let sql = format!(
        "SELECT r.*, o.request_sha256 AS outcome_sha256, o.status AS outcome_status, \
         o.answer AS outcome_answer, o.created_at AS outcome_at, \
         (SELECT MAX(m.n) FROM write_outcomes m WHERE m.tenant_id = $1) AS outcome_max_n \
         FROM ({sql}) r LEFT JOIN write_outcomes o ON o.tenant_id = $1 AND o.key = ${}",
        binds.len()
    );
    (sql, binds)
}

/// The key's earlier outcome, as [`with_prior`] read it.
#[derive(Debug)]
pub(crate) struct Prior {
    /// The outcome, when one is recorded within [`REPLAY_WINDOW`]: its request's digest and
    /// answer.
    pub earlier: Option<(String, Recorded)>,
    /// The tenant's newest record number (0: none).
    pub max_n: i64,
}

impl Prior {
    pub(crate) fn from_row(row: &Row) -> Result<Prior> {
        let max_n = row.try_get::<Option<i64>, _>("outcome_max_n")?.unwrap_or(0);
        let at: Option<String> = row.try_get("outcome_at")?;
        let earlier = match at {
            Some(at) if at >= cutoff() => {
                let sha: String = row.try_get("outcome_sha256")?;
                let status: i64 = row.try_get("outcome_status")?;
                let answer: String = row.try_get("outcome_answer")?;
                let recorded: Recorded = serde_json::from_str(&answer)
                    .map_err(|e| Error::Corrupt(format!("a recorded outcome: {e}")))?;
                if i64::from(recorded.status) != status {
                    return Err(Error::Corrupt(format!(
                        "a recorded outcome's status {status} is not its answer's"
                    )));
                }
                Some((sha, recorded))
            }
            _ => None,
        };
        Ok(Prior { earlier, max_n })
    }

    /// What a repeat of `keyed` gets: the recorded outcome ([`Error::Replayed`]), or a refusal
    /// when the key stood for another request; `Ok` when there is nothing to repeat.
    pub(crate) fn replay(self, keyed: &Keyed<'_>) -> Result<i64> {
        match self.earlier {
            None => Ok(self.max_n),
            Some((sha, _)) if sha != keyed.request_sha256 => Err(Error::Invalid(format!(
                "Idempotency-Key {:?} was used within the last hour for another request \
                 (another path, body or If-Match); send a new key with each request",
                keyed.key
            ))),
            Some((_, recorded)) => Err(Error::Replayed(recorded)),
        }
    }
}

/// The oldest record time that still replays.
fn cutoff() -> String {
    (chrono::Utc::now() - chrono::Duration::from_std(REPLAY_WINDOW).expect("an hour fits"))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Adds to `batch` the record of `keyed`'s outcome `recorded` (record number `max_n + 1`) and
/// the pruning of the tenant's records beyond [`KEPT_PER_TENANT`].
pub(crate) fn record(
    batch: &mut Batch,
    tenant_id: &str,
    keyed: &Keyed<'_>,
    recorded: &Recorded,
    max_n: i64,
) {
    let n = max_n + 1;
    batch.push(
        "DELETE FROM write_outcomes WHERE tenant_id = $1 AND n <= $2",
        vec![
            Bind::Text(tenant_id.to_string()),
            Bind::Int(n - KEPT_PER_TENANT),
        ],
        None,
    );
    // A record of the same key past the window is replaced.
    batch.push(
        "INSERT INTO write_outcomes (tenant_id, key, n, request_sha256, status, answer, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, key) DO UPDATE SET \
         n = excluded.n, request_sha256 = excluded.request_sha256, status = excluded.status, \
         answer = excluded.answer, created_at = excluded.created_at",
        vec![
            Bind::Text(tenant_id.to_string()),
            Bind::Text(keyed.key.to_string()),
            Bind::Int(n),
            Bind::Text(keyed.request_sha256.to_string()),
            Bind::Int(i64::from(recorded.status)),
            Bind::Text(serde_json::to_string(recorded).unwrap_or_default()),
            Bind::Text(crate::db::now()),
        ],
        Some(1),
    );
}
