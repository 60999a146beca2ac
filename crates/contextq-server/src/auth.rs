//! API key material: generation, hashing, and a short-lived cache of lookups.
//!
//! A key is `sk_live_` + 40 lowercase hex (160 random bits from the OS; the format is
//! [`contextq_api::key`]). Only its SHA-256 is stored; the key itself is shown once, at creation.
//! Nothing here logs or formats a full key ([`contextq_api::mask_secret`] gives `sk_live_…abcd`).
//! The HTTP side of authentication (the `Authorization` header, scopes, 401/403) is in
//! [`crate::api`].

use sha2::{Digest, Sha256};

use crate::db::Db;
use crate::store::tenants::{self, KeyRecord};

/// A new random key.
pub fn generate_key() -> String {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).expect("the OS random number generator is available");
    format!("{}{}", contextq_api::KEY_PREFIX, hex::encode(bytes))
}

/// The stored form of a key: lowercase hex SHA-256.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The active key `key` (format already checked), from the cache or the database.
pub async fn authenticate(
    db: &Db,
    cache: &KeyCache,
    key: &str,
) -> crate::store::Result<Option<KeyRecord>> {
    let hash = hash_key(key);
    if let Some(found) = cache.get(&hash) {
        return Ok(Some(found));
    }
    let found = tenants::key_by_hash(db, &hash).await?;
    if let Some(record) = &found {
        cache.put(hash, record.clone());
    }
    Ok(found)
}

/// A short-lived cache of key lookups (by hash), so that a request costs one query less.
///
/// Entries live [`KeyCache::TTL`]: a key revoked on the database keeps working that long on a
/// server that looked it up just before.
#[derive(Debug, Default)]
pub struct KeyCache {
    inner: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, KeyRecord)>>,
}

impl KeyCache {
    /// How long a lookup is trusted.
    pub const TTL: std::time::Duration = std::time::Duration::from_secs(5);

    fn get(&self, hash: &str) -> Option<KeyRecord> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|(at, _)| at.elapsed() < Self::TTL)
            .map(|(_, a)| a.clone())
    }

    fn put(&self, hash: String, record: KeyRecord) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 10_000 {
            map.clear();
        }
        map.insert(hash, (std::time::Instant::now(), record));
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
        assert!(contextq_api::valid_key_format(&k), "{k}");
        assert_ne!(k, generate_key());
        assert_eq!(hash_key("x").len(), 64);
    }
}
