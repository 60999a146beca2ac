//! What handlers take from a request: the [`Caller`] (from the bearer key), a JSON body whose
//! errors are the contract's, and `If-Match`.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
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

    /// The data layer's actor for this caller.
    pub fn actor(&self) -> crate::store::Actor<'_> {
        crate::store::Actor {
            tenant_id: &self.tenant_id,
            key_id: Some(&self.key_id),
        }
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, message)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <key>"))?;
        let key = header
            .strip_prefix("Bearer ")
            .map(str::trim)
            .ok_or_else(|| unauthorized("use Authorization: Bearer <key>"))?;
        if !valid_key_format(key) {
            return Err(unauthorized(
                "malformed API key: expected sk_live_ followed by 40 lowercase hex characters",
            ));
        }
        let hash = crate::auth::hash_key(key);
        let record = match state.key_cache.get(&hash) {
            Some(record) => record,
            None => {
                let record = crate::store::tenants::key_by_hash(&state.db, &hash)
                    .await?
                    .ok_or_else(|| unauthorized("unknown or revoked API key"))?;
                state.key_cache.put(hash, record.clone());
                record
            }
        };
        Ok(Caller {
            tenant_id: record.tenant_id,
            key_id: record.key_id,
            scopes: record.scopes,
        })
    }
}

/// A caller whose key has the `write` scope. Like every extractor of the request's head, it runs
/// before the body extractor, so a key without the scope is refused (403) before any byte of
/// the body is read.
#[derive(Debug)]
pub struct Writer(pub Caller);

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(Scope::Write)?;
        Ok(Writer(caller))
    }
}

/// A caller whose key has the `admin` scope, checked before the body is read (see [`Writer`]).
#[derive(Debug)]
pub struct Admin(pub Caller);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(Scope::Admin)?;
        Ok(Admin(caller))
    }
}

/// A JSON body whose errors are the contract's (400 bad JSON, 413 too large).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body too large")
            } else {
                ApiError::new(ErrorCode::BadRequest, e.body_text())
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("invalid JSON body: {e}")))
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
