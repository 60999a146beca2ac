//! `GET /ready` within a second whatever the database does: one probe at a time (schema
//! version, audit keying), bounded by [`PROBE_BUDGET`], its result kept for [`FRESH_FOR`]; a
//! request that finds a probe running, or a fresh result, is answered the last result with its
//! age. So a load balancer's probe with a 1-2 s timeout sees a 503 (not a timeout) while the
//! database is gone, and a flood of `/ready` costs the database at most one probe a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// Longest a probe may take; past it the database "does not answer within" it.
pub const PROBE_BUDGET: Duration = Duration::from_millis(800);

/// How long a probe's result answers `/ready` without probing again.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// The last probe and the lock that keeps probes one at a time.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Mutex<Option<(Instant, Vec<String>)>>,
    /// The last probe found no answer from the database.
    silent: std::sync::atomic::AtomicBool,
    probing: tokio::sync::Mutex<()>,
}

impl Readiness {
    /// Whether the last probe found the database answering (true before any probe).
    pub fn database_answered(&self) -> bool {
        !self.silent.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn fresh(&self) -> Option<(Duration, Vec<String>)> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < FRESH_FOR)
            .map(|(at, reasons)| (at.elapsed(), reasons.clone()))
    }

    fn any(&self) -> Option<(Duration, Vec<String>)> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref()
            .map(|(at, reasons)| (at.elapsed(), reasons.clone()))
    }
}

const NO_ANSWER: &str = "the database does not answer";

/// Why the server cannot serve now (empty: it can), asked of the database within
/// [`PROBE_BUDGET`], and whether the database answered at all.
async fn probe(state: &AppState) -> (Vec<String>, bool) {
    let checks = async {
        let mut reasons = Vec::new();
        let latest = crate::db::latest_schema_version();
        match state.db.schema_version().await {
            Ok(v) if v == latest => {}
            Ok(v) => reasons.push(format!(
                "the database is at schema version {v}, this server at {latest}"
            )),
            Err(e) => {
                tracing::debug!(error = %e, "readiness: the database does not answer");
                return (vec![NO_ANSWER.to_string()], false);
            }
        }
        match crate::audit::key_matches(&state.db).await {
            Ok(true) => {}
            Ok(false) => reasons.push(
                "the audit log's key is not the one this server loaded (see docs/schema.md)"
                    .to_string(),
            ),
            Err(e) => {
                tracing::debug!(error = %e, "readiness: cannot read the audit keying");
                reasons.push("cannot read the audit log's keying".to_string());
            }
        }
        (reasons, true)
    };
    match tokio::time::timeout(PROBE_BUDGET, checks).await {
        Ok(probed) => probed,
        Err(_) => (
            vec![format!(
                "{NO_ANSWER} within {} ms",
                PROBE_BUDGET.as_millis()
            )],
            false,
        ),
    }
}

/// `GET /ready`: 200 only when this server can serve: the database answers, its migrations are
/// this server's, and its audit log's key is the one loaded. 503 with the reasons otherwise (a
/// load balancer takes the replica out; `/health` is liveness only). `probeAgeMs` says how old
/// the probe answered is.
pub(crate) async fn ready(state: AppState) -> Response {
    let readiness = &state.readiness;
    let (age, reasons) = match readiness.fresh() {
        Some(fresh) => fresh,
        None => match readiness.probing.try_lock() {
            Ok(_probing) => {
                let (reasons, answered) = probe(&state).await;
                readiness
                    .silent
                    .store(!answered, std::sync::atomic::Ordering::Relaxed);
                *readiness.last.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((Instant::now(), reasons.clone()));
                (Duration::ZERO, reasons)
            }
            // Another request is probing: the last result, or wait for that probe (bounded).
            Err(_) => match readiness.any() {
                Some(last) => last,
                None => {
                    let _waited =
                        tokio::time::timeout(PROBE_BUDGET, readiness.probing.lock()).await;
                    readiness
                        .any()
                        .unwrap_or((Duration::ZERO, vec![format!("{NO_ANSWER} yet")]))
                }
            },
        },
    };
    // The database in use, its password masked: a replica started against the wrong one (an
    // empty SQLite file in its working directory) is told apart at a glance.
    let database = crate::db::redact_url(state.db.url());
    let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    if reasons.is_empty() {
        Json(serde_json::json!({"status": "ready", "schemaVersion": crate::db::latest_schema_version(), "database": database, "probeAgeMs": age}))
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "not ready", "reasons": reasons, "database": database, "probeAgeMs": age})),
        )
            .into_response()
    }
}
