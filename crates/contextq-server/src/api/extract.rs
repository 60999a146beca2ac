//! What handlers take from a request: the [`Caller`] (from the bearer key), a JSON body whose
//! errors are the contract's, and `If-Match`.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use contextq_api::{ErrorCode, Scope, valid_key_format};
use serde::de::DeserializeOwned;

use super::{ApiError, AppState};

/// The caller, from a valid, active key. Tenancy comes from the key, never from the request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's tenant.
    pub tenant_id: String,
    /// The key's id (recorded in the audit log).
    pub key_id: String,
    /// What the key may do.
    pub scopes: Vec<Scope>,
    /// The key is an inspector sign-in session (Sign out revokes it).
    pub ui_session: bool,
    /// The workspaces (slugs) the key reaches; `None`: every workspace of its tenant.
    pub workspaces: Option<Vec<String>>,
    /// `ContextQ-Restored-From: N`: the write restores version N (extension `restore-marks`).
    pub restored_from: Option<i64>,
}

impl Caller {
    /// Refuses with 403 unless the key has `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this API key lacks the {} scope", scope.as_str()),
            ))
        }
    }

    /// Whether the key reaches the workspace `slug`.
    pub fn reaches(&self, slug: &str) -> bool {
        self.workspaces
            .as_ref()
            .is_none_or(|w| w.iter().any(|x| x == slug))
    }

    /// A read in `slug`: "not found" (404, as for a workspace that does not exist) unless the
    /// key reaches it, so a limited key learns nothing of the others.
    pub fn read_in(&self, slug: &str) -> Result<(), ApiError> {
        if self.reaches(slug) {
            Ok(())
        } else {
            Err(ApiError::from(crate::store::Error::WorkspaceNotFound {
                slug: slug.to_string(),
            }))
        }
    }

    /// A write in `slug`: 403 unless the key reaches it.
    pub fn write_in(&self, slug: &str) -> Result<(), ApiError> {
        match &self.workspaces {
            Some(w) if !w.iter().any(|x| x == slug) => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "this API key is limited to the workspaces {}: it may not write in {slug:?}; nothing was changed",
                    w.join(", ")
                ),
            )),
            _ => Ok(()),
        }
    }

    /// 403 for a request that spans workspaces when the key is limited to some.
    pub fn require_every_workspace(&self, what: &str) -> Result<(), ApiError> {
        match &self.workspaces {
            Some(w) => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "this API key is limited to the workspaces {}: {what} spans every workspace; use a key of the whole tenant",
                    w.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// The data layer's actor for this caller.
    pub fn actor(&self) -> crate::store::Actor<'_> {
        crate::store::Actor {
            tenant_id: &self.tenant_id,
            key_id: Some(&self.key_id),
            keyed: None,
            restored_from: self.restored_from,
        }
    }

    /// [`Caller::actor`] for a request sent with an `Idempotency-Key` (when `keyed`).
    pub fn actor_keyed<'a>(
        &'a self,
        keyed: Option<&'a crate::store::outcome::Keyed<'a>>,
    ) -> crate::store::Actor<'a> {
        crate::store::Actor {
            keyed,
            ..self.actor()
        }
    }
}

/// Where the request log ([`crate::router`]) finds the id of the key a request used, once the
/// key was looked up (never the key itself).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyIdSlot(pub(crate) std::sync::Arc<std::sync::OnceLock<String>>);

/// Where the request log finds why a known key was refused (`revoked`, `expired`, ...).
#[derive(Debug, Clone, Default)]
pub(crate) struct RefusalSlot(pub(crate) std::sync::Arc<std::sync::OnceLock<&'static str>>);

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, message)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let refuse = |reason: &'static str, message: &str| {
            state.metrics.unauthorized(reason);
            unauthorized(message)
        };
        // `X-Api-Key` is what Anthropic's SDKs may send instead (the Memory Stores door).
        let key = match (
            parts.headers.get(header::AUTHORIZATION),
            parts.headers.get("x-api-key"),
        ) {
            (Some(v), _) => v
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or_else(|| refuse("malformed", "use Authorization: Bearer <key>"))?,
            (None, Some(v)) => v
                .to_str()
                .map(str::trim)
                .map_err(|_| refuse("malformed", "X-Api-Key: the key, as text"))?,
            (None, None) => {
                return Err(refuse(
                    "missing",
                    "missing Authorization: Bearer <key> (or X-Api-Key: <key>)",
                ));
            }
        };
        if !valid_key_format(key) {
            return Err(refuse(
                "malformed",
                "malformed API key: expected sk_live_ followed by 40 lowercase hex characters",
            ));
        }
        let hash = crate::auth::hash_key(key);
        let record = match state.key_cache.get(&hash) {
            Some(record) => record,
            None => {
                let ticket = state.key_cache.ticket();
                let Some(record) = crate::store::tenants::key_by_hash(&state.db, &hash).await?
                else {
                    // The same answer whatever the reason; the log and the metric say which
                    // (a known key by its id, so an operator sees which agent still uses it).
                    let reason = match crate::store::tenants::refused_key(&state.db, &hash).await {
                        Ok(Some((key_id, reason))) => {
                            if let Some(slot) = parts.extensions.get::<KeyIdSlot>() {
                                let _ = slot.0.set(key_id);
                            }
                            reason
                        }
                        _ => "unknown",
                    };
                    if let Some(slot) = parts.extensions.get::<RefusalSlot>() {
                        let _ = slot.0.set(reason);
                    }
                    return Err(refuse(reason, "unknown or revoked API key"));
                };
                state.key_cache.put(hash, record.clone(), ticket);
                // Last use, to within the cache's lifetime: best effort, in the background (the
                // request never waits for a write); a read-only server changes nothing.
                if !state.config.read_only
                    && crate::store::tenants::last_use_due(record.last_used_at.as_deref())
                {
                    let (db, key_id) = (state.db.clone(), record.key_id.clone());
                    tokio::spawn(async move {
                        if let Err(e) = crate::store::tenants::touch_key(&db, &key_id).await {
                            tracing::debug!(error = %e, "cannot record a key's last use");
                        }
                    });
                }
                record
            }
        };
        if let Some(slot) = parts.extensions.get::<KeyIdSlot>() {
            let _ = slot.0.set(record.key_id.clone());
        }
        // Checked on every request, cached or not.
        if record.expired(&crate::db::now()) {
            if let Some(slot) = parts.extensions.get::<RefusalSlot>() {
                let _ = slot.0.set("expired");
            }
            return Err(refuse("expired", "expired API key"));
        }
        let restored_from = match parts.headers.get(contextq_api::RESTORED_FROM_HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::BadRequest,
                            "ContextQ-Restored-From must be the number of the version restored (1 or more)",
                        )
                    })?,
            ),
        };
        // The body extractor, which runs after, reserves its room in this tenant's share.
        parts.extensions.insert(BodyOwner(record.tenant_id.clone()));
        Ok(Caller {
            tenant_id: record.tenant_id,
            key_id: record.key_id,
            scopes: record.scopes,
            ui_session: record.ui_session,
            workspaces: record.workspaces,
            restored_from,
        })
    }
}

/// An extractor of a caller whose key has a scope, on a server that accepts changes. Like every
/// extractor of the request's head, it runs before the body extractor, so a key without the
/// scope is refused (403) before any byte of the body is read.
macro_rules! scoped_caller {
    ($(#[$doc:meta])* $name:ident, $scope:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name(pub Caller);

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &AppState,
            ) -> Result<Self, ApiError> {
                let caller = Caller::from_request_parts(parts, state).await?;
                caller.require($scope)?;
                refuse_when_read_only(state)?;
                Ok($name(caller))
            }
        }
    };
}

scoped_caller!(
    /// A caller whose key has the `write` scope, checked before the body is read.
    Writer,
    Scope::Write
);

scoped_caller!(
    /// A caller whose key has the `admin` scope, checked before the body is read.
    Admin,
    Scope::Admin
);

/// 403 for a write on a server that serves read-only ([`ServerConfig::read_only`](super::ServerConfig::read_only)).
fn refuse_when_read_only(state: &AppState) -> Result<(), ApiError> {
    if state.config.read_only {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "this server is read-only (started with --read-only): nothing was changed",
        ));
    }
    Ok(())
}

/// Which body limit of [`ServerConfig`](super::ServerConfig) a request body falls under.
pub trait BodyLimit {
    /// The largest body of this kind `config` allows, in bytes.
    fn max_body_bytes(config: &super::ServerConfig) -> usize;
}

impl BodyLimit for contextq_api::bodies::BulkUpsert {
    fn max_body_bytes(config: &super::ServerConfig) -> usize {
        config.max_bulk_body_bytes
    }
}

macro_rules! single_body {
    ($($t:ty),*) => {$(
        impl BodyLimit for $t {
            fn max_body_bytes(config: &super::ServerConfig) -> usize {
                config.max_body_bytes
            }
        }
    )*};
}
single_body!(
    contextq_api::bodies::UpdateContext,
    contextq_api::bodies::EditContext,
    contextq_api::bodies::RenameContext,
    contextq_api::bodies::DeletePrefix,
    contextq_api::bodies::RenamePrefix,
    contextq_api::bodies::CreateWorkspace,
    contextq_api::history::RedactRequest,
    contextq_api::memory_stores::CreateStore,
    contextq_api::memory_stores::UpdateStore,
    contextq_api::memory_stores::CreateMemory,
    contextq_api::memory_stores::UpdateMemory
);

/// A JSON body whose errors are the contract's (400 bad JSON, 413 too large), read within its
/// route's limit ([`BodyLimit`]) and within the server's budget of bodies in flight
/// ([`ServerConfig::body_budget_bytes`](super::ServerConfig::body_budget_bytes)): a declared
/// `Content-Length` past the limit is refused before a byte is read; the body's room in the
/// budget (its declared length, or the route's limit when it has none) is reserved before it is
/// read and held, in the [`BodyPermit`], until the handler is done with it.
#[derive(Debug)]
pub struct JsonBody<T>(pub T, pub BodyPermit);

/// The tenant a request's body counts against ([`BodyBudget`]); set by [`Caller`].
#[derive(Debug, Clone)]
struct BodyOwner(String);

/// Room in the budget of bodies in flight and in its tenant's share; given back when dropped.
#[derive(Debug)]
pub struct BodyPermit {
    /// Dropped first: the tenant's share, then the global room.
    _share: Option<SharePermit>,
    _global: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A tenant's reserved units; the tenant's entry leaves the map when its last body is done.
#[derive(Debug)]
struct SharePermit {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    tenant: String,
    budget: std::sync::Arc<BodyBudget>,
}

impl Drop for SharePermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.budget.forget_idle(&self.tenant);
    }
}

fn too_slow(rate: u64) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body arrived too slowly: send it at {rate} bytes a second or faster (after the first {} s)",
            BODY_GRACE.as_secs()
        ),
    )
}

/// How long a body may take before [`ServerConfig::min_body_rate`](super::ServerConfig::min_body_rate)
/// applies: 5 s.
pub const BODY_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads `body` whole, within `limit` bytes, at least at `rate` bytes a second on average after
/// [`BODY_GRACE`] (byte `n` must have arrived `BODY_GRACE + n / rate` after the start; a body
/// trickled a byte at a time is cut with 408 instead of holding its room until the request
/// timeout). `rate` 0: no minimum.
async fn read_body(
    body: axum::body::Body,
    limit: usize,
    rate: u64,
) -> Result<axum::body::Bytes, ApiError> {
    use http_body_util::BodyExt;
    let started = tokio::time::Instant::now();
    let mut body = body;
    let mut bytes = Vec::new();
    loop {
        let next = body.frame();
        let frame = if rate == 0 {
            next.await
        } else {
            let due = BODY_GRACE
                + std::time::Duration::from_secs_f64((bytes.len() as f64 + 1.0) / rate as f64);
            tokio::time::timeout_at(started + due, next)
                .await
                .map_err(|_| too_slow(rate))?
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| {
            ApiError::new(
                ErrorCode::BadRequest,
                format!("the request body could not be read: {e}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(too_large(limit));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes.into())
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("request body too large: this endpoint takes at most {limit} bytes"),
    )
}

impl<T: DeserializeOwned + BodyLimit> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let limit = T::max_body_bytes(&state.config);
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large(limit));
        }
        let room = declared.map_or(limit, |n| n as usize);
        let owner = req.extensions().get::<BodyOwner>().map(|o| o.0.clone());
        let permit = state.body_budget.reserve(room, owner.as_deref()).await;
        let bytes = read_body(req.into_body(), limit, state.config.min_body_rate).await?;
        serde_json::from_slice(&bytes)
            .map(|value| JsonBody(value, permit))
            .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("invalid JSON body: {e}")))
    }
}

/// The server's budget of request bodies in flight, in KiB-sized units of a semaphore, and each
/// tenant's share of it ([`ServerConfig::body_share_bytes`](super::ServerConfig::body_share_bytes)):
/// a body takes room in its tenant's share first, then in the budget, so one tenant's bodies
/// never hold more than its share and other tenants' writes go on. Bodies without a tenant
/// (`POST /ui/session`) share one anonymous share.
#[derive(Debug)]
pub struct BodyBudget {
    units: std::sync::Arc<tokio::sync::Semaphore>,
    total: u32,
    share: u32,
    /// The shares of tenants with bodies in flight (an entry leaves with its last body).
    shares:
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>>,
}

impl BodyBudget {
    /// A budget of `bytes` (at least 1 KiB), each tenant's share `share_bytes` of it (at most
    /// the budget).
    pub fn new(bytes: usize, share_bytes: usize) -> BodyBudget {
        let total = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .max(1);
        let share = u32::try_from(share_bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, total);
        BodyBudget {
            units: std::sync::Arc::new(tokio::sync::Semaphore::new(total as usize)),
            total,
            share,
            shares: Default::default(),
        }
    }

    /// Waits until `bytes` fit in `tenant`'s share and in the budget, and reserves them. A body
    /// larger than a share (or the budget) waits for all of it (so it runs alone rather than
    /// never).
    pub async fn reserve(
        self: &std::sync::Arc<Self>,
        bytes: usize,
        tenant: Option<&str>,
    ) -> BodyPermit {
        let units = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total);
        let tenant = tenant.unwrap_or("").to_string();
        let semaphore = self
            .shares
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(tenant.clone())
            .or_insert_with(|| {
                std::sync::Arc::new(tokio::sync::Semaphore::new(self.share as usize))
            })
            .clone();
        // The semaphores are never closed.
        let share = SharePermit {
            permit: semaphore
                .acquire_many_owned(units.min(self.share))
                .await
                .ok(),
            tenant,
            budget: self.clone(),
        };
        let global = self.units.clone().acquire_many_owned(units).await.ok();
        BodyPermit {
            _share: Some(share),
            _global: global,
        }
    }

    /// Drops `tenant`'s share once no body of it is in flight (nobody else holds its
    /// semaphore and all of it is free).
    fn forget_idle(&self, tenant: &str) {
        let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = shares.get(tenant)
            && std::sync::Arc::strong_count(s) == 1
            && s.available_permits() == self.share as usize
        {
            shares.remove(tenant);
        }
    }

    /// Tenants with a share in use (for tests and metrics).
    pub fn tenants_in_flight(&self) -> usize {
        self.shares.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// `If-Match: "<version>"` (weak `W/` accepted; `*` means any version).
pub fn if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let bad = |m: String| ApiError::new(ErrorCode::BadRequest, m);
    let text = v
        .to_str()
        .map_err(|_| bad("If-Match is not ASCII".into()))?
        .trim();
    if text == "*" {
        return Ok(None);
    }
    text.trim_start_matches("W/")
        .trim_matches('"')
        .parse::<i64>()
        .map(Some)
        .map_err(|_| bad(format!("If-Match must be \"<version>\", got {text:?}")))
}
