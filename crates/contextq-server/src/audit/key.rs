//! The audit key: 32 random bytes in a file outside the database, with which every audit row and
//! chain head carries an HMAC-SHA256. Someone who can write the database but not read this file
//! cannot produce a row, a head or a checkpoint that verifies (docs/schema.md says what that does
//! and does not detect).
//!
//! The file holds the key as 64 lowercase hex characters (a trailing newline is allowed). It is
//! created 0600 in a 0700 directory, never overwritten, and refused when other users may read it.

use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// An audit key. `Debug` shows only its fingerprint.
#[derive(Clone)]
pub struct AuditKey([u8; 32]);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey(fingerprint {})", self.fingerprint())
    }
}

impl AuditKey {
    /// A new random key.
    pub fn generate() -> Result<AuditKey> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::Config(format!("no randomness for an audit key: {e}")))?;
        Ok(AuditKey(bytes))
    }

    /// The key in `path`. Refused when the file is missing (create it with
    /// `contextq-server admin init-audit-key`), malformed, or readable by other users.
    pub fn load(path: &Path) -> Result<AuditKey> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(format!(
                "cannot read the audit key file {}: {e} (if this database's log is keyed, give the file it was keyed with: a new key cannot open it; for a log never keyed, `contextq-server admin init-audit-key --audit-key-file {}` creates one)",
                path.display(),
                path.display()
            ))
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(Error::Config(format!(
                    "the audit key file {} may be read by other users (mode {mode:o}): chmod 600 it",
                    path.display()
                )));
            }
        }
        let bytes = hex::decode(text.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                Error::Config(format!(
                    "the audit key file {} must hold 64 hex characters",
                    path.display()
                ))
            })?;
        Ok(AuditKey(bytes))
    }

    /// Creates `path` (0600; missing directories 0700) with a new key. Refused when the file
    /// exists: a key is never replaced, or every MAC made with it would stop verifying.
    pub fn create(path: &Path) -> Result<AuditKey> {
        use std::io::Write as _;
        let key = AuditKey::generate()?;
        let mut file = crate::private_file::create_new(path).map_err(|e| {
            Error::Config(format!(
                "cannot create the audit key file {}: {e}",
                path.display()
            ))
        })?;
        writeln!(file, "{}", hex::encode(key.0))?;
        file.sync_all()?;
        Ok(key)
    }

    /// The key in `path`, created there first when the file does not exist; `true` when it was
    /// created now.
    pub fn load_or_create(path: &Path) -> Result<(AuditKey, bool)> {
        if path.exists() {
            Ok((AuditKey::load(path)?, false))
        } else {
            Ok((AuditKey::create(path)?, true))
        }
    }

    /// A public name of the key: 16 hex characters of a domain-separated SHA-256 of it (stored
    /// in the database and in checkpoints; it tells keys apart and reveals nothing of the key).
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"contextq-audit/key-fingerprint/1");
        h.update(self.0);
        hex::encode(&h.finalize()[..8])
    }

    /// HMAC-SHA256 over length-prefixed `parts` (hex).
    pub fn mac(&self, parts: &[&str]) -> String {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        for part in parts {
            m.update(&(part.len() as u64).to_be_bytes());
            m.update(part.as_bytes());
        }
        hex::encode(m.finalize().into_bytes())
    }

    /// The MAC of a tenant chain's row: its position and its chain hash (which covers every
    /// field and the previous row's hash).
    pub fn row_mac(&self, tenant_id: &str, tenant_seq: i64, hash: &str) -> String {
        self.mac(&[
            "contextq-audit/row/1",
            tenant_id,
            &tenant_seq.to_string(),
            hash,
        ])
    }

    /// The MAC of a tenant's chain head: where it points and from which row its chain is keyed.
    pub fn head_mac(
        &self,
        tenant_id: &str,
        seq: i64,
        last_hash: Option<&str>,
        keyed_from: i64,
    ) -> String {
        self.mac(&[
            "contextq-audit/head/1",
            tenant_id,
            &seq.to_string(),
            last_hash.unwrap_or(""),
            &keyed_from.to_string(),
        ])
    }

    /// The MAC of the frozen global chain's head (rows written before per-tenant chains) as it
    /// was when the log was keyed.
    pub fn legacy_mac(&self, seq: i64, last_hash: Option<&str>) -> String {
        self.mac(&[
            "contextq-audit/legacy-head/1",
            &seq.to_string(),
            last_hash.unwrap_or(""),
        ])
    }

    /// Whether `mac` is `expected`, compared in constant time.
    pub fn same(mac: Option<&str>, expected: &str) -> bool {
        let Some(mac) = mac else { return false };
        let (a, b) = (mac.as_bytes(), expected.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_private_never_replaced_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new").join("audit.key");
        let key = AuditKey::create(&path).unwrap();
        assert_eq!(
            AuditKey::load(&path).unwrap().fingerprint(),
            key.fingerprint()
        );
        assert!(AuditKey::create(&path).is_err(), "a key was replaced");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = AuditKey::load(&path).unwrap_err().to_string();
            assert!(e.contains("chmod 600"), "{e}");
        }
        assert!(!format!("{key:?}").contains(&hex::encode(key.0)));
    }

    #[test]
    fn macs_depend_on_the_key_and_on_every_part() {
        let a = AuditKey([1; 32]);
        let b = AuditKey([2; 32]);
        assert_ne!(a.row_mac("t", 1, "h"), b.row_mac("t", 1, "h"));
        assert_ne!(a.row_mac("t", 1, "h"), a.row_mac("t", 2, "h"));
        assert_ne!(
            a.head_mac("t", 1, Some("h"), 1),
            a.head_mac("t", 1, Some("h"), 2)
        );
        assert!(AuditKey::same(
            Some(&a.row_mac("t", 1, "h")),
            &a.row_mac("t", 1, "h")
        ));
        assert!(!AuditKey::same(None, &a.row_mac("t", 1, "h")));
    }
}
