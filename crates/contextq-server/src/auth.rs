//! API key material: generation, hashing, and a short-lived cache of lookups.
//!
//! A key is `sk_live_` + 40 lowercase hex (160 random bits from the OS; the format is
//! [`contextq_api::key`]). Only its SHA-256 is stored; the key itself is shown once, at creation.
//! Nothing here logs or formats a full key ([`contextq_api::mask_secret`] gives `sk_live_…abcd`).
//! Keys are looked up in [`crate::store::tenants`]; the HTTP side of authentication (the
//! `Authorization` header, the lookup through this cache, scopes, 401/403) is in [`crate::api`].

use sha2::{Digest, Sha256};

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

/// What a valid, active key stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// The key's id (recorded in the audit log).
    pub key_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// What it may do.
    pub scopes: Vec<contextq_api::Scope>,
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

    /// A lookup of the key with this hash, if it is younger than [`KeyCache::TTL`].
    pub fn get(&self, hash: &str) -> Option<KeyRecord> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|(at, _)| at.elapsed() < Self::TTL)
            .map(|(_, a)| a.clone())
    }

    /// Remembers a lookup.
    pub fn put(&self, hash: String, record: KeyRecord) {
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
