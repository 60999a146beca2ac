//! API keys: `sk_live_` followed by 40 lowercase hex digits. A key is a secret: [`ApiKey`] shows
//! only its masked form (`sk_live_…abcd`) in `Debug` and `Display`, and [`mask_secret`] masks
//! any credential the same way, so that no log line, error or debug print carries one.

use crate::error::Error;

/// The prefix of every key.
pub const KEY_PREFIX: &str = "sk_live_";

/// Hex digits after [`KEY_PREFIX`].
pub const KEY_HEX_DIGITS: usize = 40;

/// Whether `key` is `sk_live_` followed by 40 lowercase hex digits.
pub fn valid_key_format(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX).is_some_and(|hex| {
        hex.len() == KEY_HEX_DIGITS
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A credential masked for display: its first two `_`/`-`-separated parts (the kind of key,
/// never secret: `sk_live_`, `sk-ant-`) and its last four characters, e.g. `sk_live_…abcd`.
/// Anything shorter than 12 characters is shown as `…` only.
pub fn mask_secret(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 12 {
        return "…".to_string();
    }
    let mut separators = 0;
    let mut head = 0;
    for (i, c) in chars.iter().enumerate().take(chars.len() - 4) {
        if *c == '_' || *c == '-' {
            separators += 1;
            if separators == 2 {
                head = i + 1;
                break;
            }
        }
    }
    let head: String = chars[..head].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

/// A ContextQ API key whose format was checked. `Debug` and `Display` show `sk_live_…abcd`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Checks the format (surrounding whitespace is ignored); the error shows the key masked.
    pub fn new(key: impl Into<String>) -> Result<ApiKey, Error> {
        let key = key.into().trim().to_string();
        if valid_key_format(&key) {
            Ok(ApiKey(key))
        } else {
            Err(Error::InvalidKey {
                masked: mask_secret(&key),
            })
        }
    }

    /// The key itself: for the `Authorization` header (or a hash) only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `sk_live_…abcd`.
    pub fn masked(&self) -> String {
        mask_secret(&self.0)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({})", self.masked())
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.masked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk_live_0123456789abcdef0123456789abcdef0123abcd";

    #[test]
    fn format() {
        assert!(valid_key_format(KEY));
        assert!(!valid_key_format(
            "sk_live_0123456789ABCDEF0123456789abcdef0123abcd"
        ));
        assert!(!valid_key_format(
            "sk_test_0123456789abcdef0123456789abcdef0123abcd"
        ));
        assert!(!valid_key_format("sk_live_0123"));
        assert!(!valid_key_format(&format!("{KEY}0")));
    }

    #[test]
    fn masking_never_shows_the_secret() {
        assert_eq!(mask_secret(KEY), "sk_live_…abcd");
        assert_eq!(
            mask_secret("sk-ant-api03-SECRETSECRET-wxyz"),
            "sk-ant-…wxyz"
        );
        assert_eq!(mask_secret("short"), "…");
        assert_eq!(mask_secret("nosepARATORSatall1234"), "…1234");
        let k = ApiKey::new(format!("  {KEY}\n")).unwrap();
        assert_eq!(format!("{k:?}"), "ApiKey(sk_live_…abcd)");
        assert_eq!(k.to_string(), "sk_live_…abcd");
        assert_eq!(k.expose(), KEY);
        let err = ApiKey::new(KEY.to_uppercase()).unwrap_err().to_string();
        assert!(
            err.contains("…ABCD") && !err.contains("0123456789"),
            "{err}"
        );
    }
}
