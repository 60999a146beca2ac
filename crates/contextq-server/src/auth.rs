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

/// A short-lived cache of key lookups (by hash), so that a request costs one query less, used
/// only while this process hears of every revocation at once.
///
/// On PostgreSQL, [`watch_revocations`] holds a `LISTEN` connection on [`REVOCATIONS_CHANNEL`]
/// and clears the cache on every notification (each revocation, key deletion and tenant deletion
/// notifies in its own transaction, so on commit); while that connection is down the cache is
/// not trusted and every request looks its key up. On SQLite, whose admin commands are other
/// processes on the same file, each revocation rewrites a signal file next to the database
/// after it commits ([`crate::Db::revocations_file`]); a cached lookup is used only while that
/// file's metadata is unchanged (one `stat` per request, no query). Either way a revoked key is
/// refused by the next request it makes on any server, once the revocation has committed and
/// been signalled (milliseconds on PostgreSQL, microseconds on SQLite); entries also expire after
/// [`KeyCache::TTL`].
#[derive(Debug, Default)]
pub struct KeyCache {
    inner: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, KeyRecord)>>,
    trusted: std::sync::atomic::AtomicBool,
    clears: std::sync::atomic::AtomicU64,
    /// SQLite: the revocation signal file and its metadata when the cache was last filled.
    signal: Option<(std::path::PathBuf, std::sync::Mutex<Option<Signal>>)>,
}

/// What identifies one version of the signal file.
type Signal = (Option<std::time::SystemTime>, u64, u64);

fn signal_of(path: &std::path::Path) -> Option<Signal> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.modified().ok(), m.len(), ino))
}

/// Rewrites the revocation signal file of `db` (SQLite), after a revocation committed.
pub(crate) fn signal_revocation(db: &crate::Db) {
    if let Some(path) = db.revocations_file() {
        let stamp = format!(
            "{}\n",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        if let Err(e) = std::fs::write(&path, stamp) {
            tracing::warn!(error = %e, file = %path.display(), "cannot signal a key revocation; other servers notice it within the key cache's TTL");
        }
    }
}

/// The PostgreSQL channel a revocation notifies.
pub const REVOCATIONS_CHANNEL: &str = "contextq_key_revocations";

impl KeyCache {
    /// How long a lookup is trusted.
    pub const TTL: std::time::Duration = std::time::Duration::from_secs(5);

    /// A cache for `db`: on SQLite, trusted while its revocation signal file is unchanged; on
    /// PostgreSQL, untrusted until [`watch_revocations`] listens.
    pub fn for_db(db: &crate::Db) -> KeyCache {
        match db.revocations_file() {
            Some(path) => {
                let seen = signal_of(&path);
                KeyCache {
                    trusted: true.into(),
                    signal: Some((path, std::sync::Mutex::new(seen))),
                    ..Default::default()
                }
            }
            None => KeyCache::default(),
        }
    }

    /// A lookup of the key with this hash, if the cache is trusted and the lookup younger than
    /// [`KeyCache::TTL`].
    pub fn get(&self, hash: &str) -> Option<KeyRecord> {
        if !self.is_trusted() {
            return None;
        }
        if let Some((path, seen)) = &self.signal {
            let now = signal_of(path);
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen != now {
                *seen = now;
                drop(seen);
                self.clear();
                return None;
            }
        }
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|(at, _)| at.elapsed() < Self::TTL)
            .map(|(_, a)| a.clone())
    }

    /// Remembers a lookup.
    pub fn put(&self, hash: String, record: KeyRecord) {
        if !self.is_trusted() {
            return;
        }
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 10_000 {
            map.clear();
        }
        map.insert(hash, (std::time::Instant::now(), record));
    }

    /// Forgets every lookup.
    pub fn clear(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.clears
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many times the cache was cleared (a revocation heard, the listener lost).
    pub fn clears(&self) -> u64 {
        self.clears.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether lookups are used: only while revocations are heard.
    pub fn is_trusted(&self) -> bool {
        self.trusted.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set_trusted(&self, trusted: bool) {
        self.clear();
        self.trusted
            .store(trusted, std::sync::atomic::Ordering::SeqCst);
    }
}

/// On PostgreSQL, listens for revocations for as long as `cache` is in use (a task on the
/// current runtime, reconnecting after a second when the connection is lost); the cache is
/// trusted only while listening. Does nothing on SQLite or outside a runtime (the cache then
/// stays untrusted: every request looks its key up).
pub fn watch_revocations(db: &crate::Db, cache: &std::sync::Arc<KeyCache>) {
    if db.backend() != crate::Backend::Postgres {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let url = db.url().to_string();
    let weak = std::sync::Arc::downgrade(cache);
    runtime.spawn(async move {
        loop {
            match sqlx::postgres::PgListener::connect(&url).await {
                Ok(mut listener) => {
                    if listener.listen(REVOCATIONS_CHANNEL).await.is_ok() {
                        let Some(cache) = weak.upgrade() else { return };
                        cache.set_trusted(true);
                        drop(cache);
                        // `Ok(None)`: the connection was lost (notifications may have been
                        // missed): stop trusting, and connect again.
                        while let Ok(Some(_)) = listener.try_recv().await {
                            let Some(cache) = weak.upgrade() else { return };
                            cache.clear();
                        }
                    }
                    let Some(cache) = weak.upgrade() else { return };
                    cache.set_trusted(false);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for key revocations; looking keys up on every request");
                }
            }
            if weak.strong_count() == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
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
