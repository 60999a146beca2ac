//! API key material: generation, hashing, and a short-lived cache of lookups.
//!
//! A key is `sk_live_` + 40 lowercase hex (160 random bits from the OS; the format is
//! [`contextq_api::key`]). Only its SHA-256 is stored; the key itself is shown once, at creation.
//! Nothing here logs or formats a full key ([`contextq_api::mask_secret`] gives `sk_live_…abcd`).
//! Keys are looked up in [`crate::store::tenants`]; the HTTP side of authentication (the
//! `Authorization` header, the lookup through this cache, scopes, 401/403) is in [`crate::api`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// When it stops working (RFC 3339 UTC, as [`crate::db::now`] writes it); `None`: never.
    pub expires_at: Option<String>,
    /// Minted by the inspector's sign-in (Sign out revokes it).
    pub ui_session: bool,
    /// The workspaces (slugs) it reaches; `None`: every workspace of its tenant.
    pub workspaces: Option<Vec<String>>,
    /// When it was last recorded as used (RFC 3339); `None`: never.
    pub last_used_at: Option<String>,
}

impl KeyRecord {
    /// Whether the key has expired at `now` (RFC 3339 UTC with milliseconds, as stored).
    pub fn expired(&self, now: &str) -> bool {
        self.expires_at.as_deref().is_some_and(|at| at <= now)
    }
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
/// the cache's TTL ([`crate::ServerConfig::key_cache_ttl`], default [`KeyCache::TTL`]).
#[derive(Debug, Default)]
pub struct KeyCache {
    inner: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, KeyRecord)>>,
    trusted: std::sync::atomic::AtomicBool,
    clears: std::sync::atomic::AtomicU64,
    /// SQLite: the revocation signal file and its content when the cache was last filled.
    signal: Option<(std::path::PathBuf, std::sync::Mutex<Option<Signal>>)>,
    /// How long a lookup is trusted (`None`: [`KeyCache::TTL`]).
    ttl: Option<std::time::Duration>,
}

/// One version of the signal file: its content, a random nonce written by each revocation (so
/// two revocations within one clock tick, or of one length, are still two).
type Signal = String;

/// Reads the signal file, never through a symbolic link (`None`: absent, a link, unreadable).
fn signal_of(path: &std::path::Path) -> Option<Signal> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        rustix::fs::OFlags::NOFOLLOW.bits() as i32,
    );
    let mut text = String::new();
    options
        .open(path)
        .ok()?
        .take(256)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Rewrites the revocation signal file of `db` (SQLite), after a revocation committed: a new
/// private file (0600, created exclusively, so no link is followed) with a fresh random nonce,
/// renamed over the old one (a rename replaces a link at that path, it never writes through it).
pub(crate) fn signal_revocation(db: &crate::Db) {
    if let Some(path) = db.revocations_file()
        && let Err(e) = write_signal(&path)
    {
        tracing::warn!(error = %e, file = %path.display(), "cannot signal a key revocation; other servers notice it within the key cache's TTL");
    }
}

fn write_signal(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let nonce = hex::encode(nonce);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{nonce}"));
    let tmp = std::path::PathBuf::from(tmp);
    let mut file = crate::private_file::create_new(&tmp)?;
    let written = file
        .write_all(format!("{nonce}\n").as_bytes())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// How long a sign-in token is valid: 10 minutes.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);

/// One-time sign-in tokens, each for one API key.
#[derive(Debug, Default)]
pub struct SignInTokens {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl SignInTokens {
    /// Most tokens outstanding at once; issuing one more forgets the oldest.
    pub const MAX_OUTSTANDING: usize = 1024;

    /// A new token for `api_key` (256 bits from the OS), valid once for [`TOKEN_TTL`] (and
    /// while fewer than [`SignInTokens::MAX_OUTSTANDING`] newer ones were issued).
    pub fn issue(&self, api_key: &str) -> String {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the OS random number generator is available");
        let token = hex::encode(bytes);
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
        if tokens.len() >= Self::MAX_OUTSTANDING
            && let Some(oldest) = tokens
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(t, _)| t.clone())
        {
            tokens.remove(&oldest);
        }
        tokens.insert(token.clone(), (api_key.to_string(), Instant::now()));
        token
    }

    /// Tokens outstanding (expired ones are dropped at the next issue).
    pub fn outstanding(&self) -> usize {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The key of `token`, once: the token is gone afterwards (and when expired).
    pub fn redeem(&self, token: &str) -> Option<String> {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        let (key, at) = tokens.remove(token)?;
        (at.elapsed() < TOKEN_TTL).then_some(key)
    }
}

/// The PostgreSQL channel a revocation notifies.
pub const REVOCATIONS_CHANNEL: &str = "contextq_key_revocations";

impl KeyCache {
    /// How long a lookup is trusted unless the cache is given its own TTL ([`KeyCache::ttl`]).
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

    /// This cache, trusting a lookup for `ttl` ([`crate::ServerConfig::key_cache_ttl`]).
    pub fn ttl(mut self, ttl: std::time::Duration) -> KeyCache {
        self.ttl = Some(ttl);
        self
    }

    /// A lookup of the key with this hash, if the cache is trusted and the lookup younger than
    /// its TTL ([`KeyCache::TTL`] unless set).
    pub fn get(&self, hash: &str) -> Option<KeyRecord> {
        if !self.is_trusted() || !self.signal_unchanged() {
            return None;
        }
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash)
            .filter(|(at, _)| at.elapsed() < self.ttl.unwrap_or(Self::TTL))
            .map(|(_, a)| a.clone())
    }

    /// On SQLite, clears the cache if the signal file changed since it was last seen; whether
    /// it was unchanged.
    fn signal_unchanged(&self) -> bool {
        let Some((path, seen)) = &self.signal else {
            return true;
        };
        let now = signal_of(path);
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        if *seen == now {
            return true;
        }
        *seen = now;
        drop(seen);
        self.clear();
        false
    }

    /// The generation to give [`KeyCache::put`]: take it before looking a key up.
    pub fn ticket(&self) -> u64 {
        self.signal_unchanged();
        self.clears()
    }

    /// Remembers a lookup made since `ticket`, unless the cache was cleared (a revocation was
    /// heard) or, on SQLite, a revocation was signalled in between: the lookup may predate it.
    pub fn put(&self, hash: String, record: KeyRecord, ticket: u64) {
        if !self.is_trusted() || !self.signal_unchanged() {
            return;
        }
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if self.clears() != ticket {
            return;
        }
        if map.len() > 10_000 {
            map.clear();
        }
        map.insert(hash, (std::time::Instant::now(), record));
    }

    /// Forgets every lookup, and starts a new generation (under the map's lock, so that a
    /// [`KeyCache::put`] sees either the old map and generation or the new ones).
    pub fn clear(&self) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.clear();
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
    if db.dialect().revocation_notice().is_none() {
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

    fn record() -> KeyRecord {
        KeyRecord {
            key_id: "k".into(),
            tenant_id: "t".into(),
            scopes: vec![contextq_api::Scope::Read],
            expires_at: None,
            ui_session: false,
            workspaces: None,
            last_used_at: None,
        }
    }

    fn trusted() -> KeyCache {
        let cache = KeyCache::default();
        cache.set_trusted(true);
        cache
    }

    #[test]
    fn a_lookup_older_than_a_clear_is_not_cached() {
        let cache = trusted();
        let ticket = cache.ticket();
        // A revocation is heard while the lookup is in flight.
        cache.clear();
        cache.put("h".into(), record(), ticket);
        assert_eq!(cache.get("h"), None);
        // A lookup started after it is.
        let ticket = cache.ticket();
        cache.put("h".into(), record(), ticket);
        assert_eq!(cache.get("h"), Some(record()));
    }

    #[cfg(unix)]
    #[test]
    fn every_signal_is_seen_and_the_file_is_private_and_never_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db-revocations");
        let cache = KeyCache {
            trusted: true.into(),
            signal: Some((path.clone(), std::sync::Mutex::new(None))),
            ..Default::default()
        };
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100 {
            // A lookup in flight when a revocation is signalled is not cached.
            let ticket = cache.ticket();
            write_signal(&path).unwrap();
            cache.put("h".into(), record(), ticket);
            assert_eq!(cache.get("h"), None);
            // Many signals within one clock tick are all distinct.
            assert!(seen.insert(signal_of(&path).unwrap()));
        }
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A link planted at the path is never read through, and a signal replaces it instead
        // of writing to its target.
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "theirs").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert_eq!(signal_of(&path), None);
        write_signal(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn sign_in_tokens_are_bounded() {
        let tokens = SignInTokens::default();
        let first = tokens.issue("sk_live_x");
        for _ in 0..10_000 {
            tokens.issue("sk_live_x");
        }
        assert_eq!(tokens.outstanding(), SignInTokens::MAX_OUTSTANDING);
        assert_eq!(tokens.redeem(&first), None, "the oldest was forgotten");
    }

    #[test]
    fn keys() {
        let k = generate_key();
        assert!(contextq_api::valid_key_format(&k), "{k}");
        assert_ne!(k, generate_key());
        assert_eq!(hash_key("x").len(), 64);
    }
}
