//! API keys: format, generation, hashing, masking, and the request extractor that turns a
//! bearer key into a tenant and its scopes.
//!
//! A key is `sk_live_` + 40 lowercase hex (160 random bits from the OS). Only its SHA-256 is
//! stored; the key itself is shown once, at creation. Tenancy comes from the key, never from the
//! request. Nothing in this module logs or formats a full key: [`mask_key`] gives `sk_live_…abcd`.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::api::AppState;
use crate::error::ApiError;
use crate::model::Scope;

/// The prefix of every key.
pub const KEY_PREFIX: &str = "sk_live_";

/// Whether `key` is `sk_live_` + 40 lowercase hex.
pub fn valid_key_format(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX).is_some_and(|hex| {
        hex.len() == 40
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A new random key.
pub fn generate_key() -> String {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the OS random number generator is available");
    format!("{KEY_PREFIX}{}", hex::encode(bytes))
}

/// The stored form of a key: lowercase hex SHA-256.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// `sk_live_…abcd`: safe to show and log.
pub fn mask_key(key: &str) -> String {
    let tail: String = key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{KEY_PREFIX}…{tail}")
}

/// The caller, from a valid key.
#[derive(Debug, Clone)]
pub struct Auth {
    /// The key's tenant.
    pub tenant_id: String,
    /// The key's id (recorded in the audit log).
    pub key_id: String,
    /// What the key may do.
    pub scopes: Vec<Scope>,
}

impl Auth {
    /// Refuses with 403 unless the key has `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this API key lacks the {} scope",
                scope.as_str()
            )))
        }
    }
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <key>"))?;
        let key = header
            .strip_prefix("Bearer ")
            .map(str::trim)
            .ok_or_else(|| ApiError::unauthorized("use Authorization: Bearer <key>"))?;
        if !valid_key_format(key) {
            return Err(ApiError::unauthorized(
                "malformed API key: expected sk_live_ followed by 40 lowercase hex characters",
            ));
        }
        let hash = hash_key(key);
        if let Some(auth) = state.key_cache.get(&hash) {
            return Ok(auth);
        }
        let row = sqlx::query(
            "SELECT id, tenant_id, scopes FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash.clone())
        .fetch_optional(state.db.pool())
        .await?
        .ok_or_else(|| ApiError::unauthorized("unknown or revoked API key"))?;
        let scopes = crate::model::parse_scopes(&row.try_get::<String, _>("scopes")?)
            .map_err(|_| ApiError::internal())?;
        let auth = Auth {
            key_id: row.try_get("id")?,
            tenant_id: row.try_get("tenant_id")?,
            scopes,
        };
        state.key_cache.put(hash, auth.clone());
        Ok(auth)
    }
}

/// A short-lived cache of key lookups (by hash), so that a request costs one query less.
///
/// Entries live [`KeyCache::TTL`]; a revoked key stops working within that time on other
/// servers and at once on the server that revoked it (admin commands call [`KeyCache::clear`]).
#[derive(Debug, Default)]
pub struct KeyCache {
    inner: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Auth)>>,
}

impl KeyCache {
    /// How long a lookup is trusted.
    pub const TTL: std::time::Duration = std::time::Duration::from_secs(5);

    fn get(&self, hash: &str) -> Option<Auth> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|(at, _)| at.elapsed() < Self::TTL)
            .map(|(_, a)| a.clone())
    }

    fn put(&self, hash: String, auth: Auth) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 10_000 {
            map.clear();
        }
        map.insert(hash, (std::time::Instant::now(), auth));
    }

    /// Forgets every lookup.
    pub fn clear(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let k = generate_key();
        assert!(valid_key_format(&k), "{k}");
        assert_ne!(k, generate_key());
        assert!(!valid_key_format(
            "sk_live_ABCDEF0123456789abcdef0123456789abcdef01"
        ));
        assert!(!valid_key_format(
            "sk_test_0123456789abcdef0123456789abcdef01234567"
        ));
        assert!(!valid_key_format("sk_live_0123"));
        assert_eq!(hash_key("x").len(), 64);
        let masked = mask_key("sk_live_0123456789abcdef0123456789abcdef0123abcd");
        assert_eq!(masked, "sk_live_…abcd");
    }
}
