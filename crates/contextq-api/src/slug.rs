//! Workspace slugs: 1 to 63 characters of `a-z`, `0-9` and `-`, starting with a letter or digit.

/// Longest slug.
pub const MAX_SLUG_BYTES: usize = 63;

/// Whether `slug` is `[a-z0-9][a-z0-9-]{0,62}`.
pub fn valid_slug(slug: &str) -> bool {
    let b = slug.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_SLUG_BYTES
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule() {
        for ok in ["a", "acme", "team-1", "9lives", &"x".repeat(63)] {
            assert!(valid_slug(ok), "{ok}");
        }
        for bad in ["", "-a", "Acme", "a b", "a_b", "é", &"x".repeat(64)] {
            assert!(!valid_slug(bad), "{bad}");
        }
    }
}
