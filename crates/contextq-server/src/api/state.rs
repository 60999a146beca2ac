//! [`ServerConfig`] (the server's settings, with their documented defaults) and [`AppState`]
//! (what every handler shares).

use std::sync::Arc;
use std::time::Duration;

use crate::auth::KeyCache;
use crate::db::Db;
use crate::listen::ConnectionLimits;

use super::BodyBudget;

/// Server settings, with documented defaults; built from `Default` with its setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Largest body of a one-context request (`PUT /api/contexts/:id`, a text edit, a workspace
    /// create), in bytes; 413 above. Default [`DEFAULT_MAX_BODY_BYTES`]: 2 MiB + 64 KiB, room for
    /// 1 MiB of content whose JSON escapes at most double it (quotes, newlines, tabs) and every
    /// other field at its limit.
    pub max_body_bytes: usize,
    /// Largest body of `POST /api/contexts/bulk-upsert`, in bytes; 413 above (send fewer items
    /// per request). Default [`DEFAULT_MAX_BULK_BODY_BYTES`]: 8 MiB.
    pub max_bulk_body_bytes: usize,
    /// Request bodies in flight at once, in bytes, over all connections (default
    /// [`DEFAULT_BODY_BUDGET_BYTES`]: 64 MiB). A body reserves its declared length (or its
    /// route's limit when it declares none) before it is read and holds it until its request is
    /// answered; one that does not fit waits, within the request timeout. This is what bounds
    /// the server's memory under a burst of large writes.
    pub body_budget_bytes: usize,
    /// Each tenant's share of the budget, in bytes (default [`DEFAULT_BODY_SHARE_BYTES`]:
    /// 16 MiB; at most the budget): one tenant's bodies in flight never hold more, so a tenant
    /// that floods or trickles large bodies makes only itself wait.
    pub body_share_bytes: usize,
    /// Slowest a request body may arrive, in bytes a second on average after its first
    /// `extract::BODY_GRACE` (5 s); a slower one is cut with 408 (default
    /// [`DEFAULT_MIN_BODY_RATE`]: 4 KiB/s; 0: no minimum).
    pub min_body_rate: u64,
    /// Longest a request may take, reading its body included (default 30 s; then 408).
    pub request_timeout: Duration,
    /// Header read and idle timeouts and the connection cap ([`ConnectionLimits`]).
    pub connections: ConnectionLimits,
    /// Serve read-only (default false): every request that needs the `write` or `admin` scope
    /// is refused with 403 in the envelope, whatever its key, and nothing is changed.
    pub read_only: bool,
    /// How long a key lookup is trusted without asking the database again (default
    /// [`KeyCache::TTL`]: 5 s). A revocation clears every server's cache at once (PostgreSQL's
    /// notification, SQLite's signal file); this bounds how long a server that missed it keeps
    /// a key, and is the interval at which each key in use costs one query.
    pub key_cache_ttl: Duration,
}

/// Default [`ServerConfig::max_body_bytes`]: 2 MiB + 64 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = (2 << 20) + (64 << 10);
/// Default [`ServerConfig::max_bulk_body_bytes`]: 8 MiB.
pub const DEFAULT_MAX_BULK_BODY_BYTES: usize = 8 << 20;
/// Default [`ServerConfig::body_budget_bytes`]: 64 MiB.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 64 << 20;
/// Default [`ServerConfig::body_share_bytes`]: 16 MiB (two of the largest bulk bodies).
pub const DEFAULT_BODY_SHARE_BYTES: usize = 16 << 20;
/// Default [`ServerConfig::min_body_rate`]: 4 KiB a second.
pub const DEFAULT_MIN_BODY_RATE: u64 = 4 << 10;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_bulk_body_bytes: DEFAULT_MAX_BULK_BODY_BYTES,
            body_budget_bytes: DEFAULT_BODY_BUDGET_BYTES,
            body_share_bytes: DEFAULT_BODY_SHARE_BYTES,
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            request_timeout: Duration::from_secs(30),
            connections: ConnectionLimits::default(),
            read_only: false,
            key_cache_ttl: KeyCache::TTL,
        }
    }
}

contextq_api::setters!(ServerConfig {
    max_body_bytes: usize,
    max_bulk_body_bytes: usize,
    body_budget_bytes: usize,
    body_share_bytes: usize,
    min_body_rate: u64,
    request_timeout: Duration,
    connections: ConnectionLimits,
    read_only: bool,
    key_cache_ttl: Duration,
});

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// Recent key lookups.
    pub key_cache: Arc<KeyCache>,
    /// Settings.
    pub config: Arc<ServerConfig>,
    /// Room for request bodies in flight ([`ServerConfig::body_budget_bytes`]).
    pub body_budget: Arc<BodyBudget>,
    /// One-time sign-in tokens of the inspector ([`crate::ui`]).
    pub sign_in: Arc<crate::auth::SignInTokens>,
    /// What `/metrics` reports ([`crate::metrics`]).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `/ready`'s last probe ([`super::ready`]).
    pub readiness: Arc<super::ready::Readiness>,
    /// Memory Stores read recently (a create through the door reads nothing before its write).
    pub known_stores: Arc<crate::store::memory_stores::KnownStores>,
}

impl AppState {
    /// State over `db` with `config`. On PostgreSQL this starts listening for key revocations
    /// ([`crate::auth::watch_revocations`]; call it inside a Tokio runtime), so that a cached
    /// key lookup is never used after its key was revoked.
    pub fn new(db: Db, config: ServerConfig) -> Self {
        let key_cache = Arc::new(KeyCache::for_db(&db).ttl(config.key_cache_ttl));
        crate::auth::watch_revocations(&db, &key_cache);
        AppState {
            db,
            key_cache,
            body_budget: Arc::new(BodyBudget::new(
                config.body_budget_bytes,
                config.body_share_bytes,
            )),
            config: Arc::new(config),
            sign_in: Arc::default(),
            metrics: Arc::default(),
            readiness: Arc::default(),
            known_stores: Arc::default(),
        }
    }
}
