//! The secret guard: finds credential-shaped strings in text Claude asks to store, so that the
//! memory tool can refuse to write them (on by default; [`crate::MemoryTool::secret_guard`]).
//!
//! Memory outlives a conversation and is read back into later ones, by other agents and people:
//! a key pasted into a chat and "remembered" leaks further than the chat did. The guard checks
//! the text a command writes (`create`'s `file_text`, `str_replace`'s `new_str`, `insert`'s
//! `insert_text`) against [`PATTERNS`], a documented list of formats with distinctive prefixes
//! or structure, chosen so that ordinary prose and code do not match. It is a guard against
//! mistakes and naive poisoning, not a data-loss-prevention system: a secret split across two
//! commands, encoded, or without a known shape is not found.

use std::sync::OnceLock;

use regex::Regex;

/// What the guard looks for: a name for the message, and the pattern.
pub const PATTERNS: &[(&str, &str)] = &[
    (
        "a private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("a ContextQ API key", r"\bsk_live_[0-9a-f]{40}\b"),
    (
        "an Anthropic API key",
        r"\bsk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_\-]{20,}",
    ),
    (
        "an OpenAI API key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}",
    ),
    (
        "a Stripe secret key",
        r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}\b",
    ),
    (
        "an AWS access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    ),
    (
        "an AWS secret access key",
        r"(?i)aws_?secret_?access_?key\W{0,5}[A-Za-z0-9/+=]{40}\b",
    ),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    (
        "a GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
    ),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    (
        "a JSON Web Token",
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
    ),
    (
        "a URL with a password",
        r"\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]{3,}@[^\s/]+",
    ),
];

fn compiled() -> &'static [(&'static str, Regex)] {
    static COMPILED: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        PATTERNS
            .iter()
            .map(|(name, re)| (*name, Regex::new(re).expect("a valid secret pattern")))
            .collect()
    })
}

/// A credential-shaped string found in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// What it looks like (e.g. "an Anthropic API key").
    pub kind: &'static str,
    /// The 1-based line it starts on.
    pub line: usize,
}

/// The first credential-shaped string in `text`, if any.
pub fn find(text: &str) -> Option<Finding> {
    compiled()
        .iter()
        .filter_map(|(kind, re)| re.find(text).map(|m| (m.start(), *kind)))
        .min_by_key(|(start, _)| *start)
        .map(|(start, kind)| Finding {
            kind,
            line: text[..start].matches('\n').count() + 1,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_documented_format() {
        let cases = [
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...",
                "a private key",
            ),
            ("-----BEGIN RSA PRIVATE KEY-----", "a private key"),
            ("-----BEGIN PRIVATE KEY-----", "a private key"),
            (
                "key: sk_live_0123456789abcdef0123456789abcdef01234567",
                "a ContextQ API key",
            ),
            (
                "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                "an Anthropic API key",
            ),
            (
                "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd",
                "an OpenAI API key",
            ),
            ("rk_live_51HqAbCdEfGhIjKlMnOpQrSt", "a Stripe secret key"),
            ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "an AWS secret access key",
            ),
            (
                "AIzaSyA-1234567890abcdefghijklmnopqrstu",
                "a Google API key",
            ),
            ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "a GitHub token"),
            ("glpat-AbCdEfGhIj0123456789", "a GitLab token"),
            ("xoxb-123456789012-abcdefghij", "a Slack token"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "a JSON Web Token",
            ),
            (
                "DATABASE_URL=postgres://app:hunter22@db.internal:5432/app",
                "a URL with a password",
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(find(text).map(|f| f.kind), Some(kind), "{text}");
        }
    }

    #[test]
    fn names_the_line_and_the_first_finding() {
        let text =
            "notes\nmore\nAKIAIOSFODNN7EXAMPLE and ghp_0123456789abcdefghijklmnopqrstuvwxyz\n";
        assert_eq!(
            find(text),
            Some(Finding {
                kind: "an AWS access key id",
                line: 3
            })
        );
    }

    #[test]
    fn ordinary_text_and_code_pass() {
        for text in [
            "The user prefers Rust and uses sk_live_ keys from ContextQ (never store them).",
            "Use postgres://localhost/app for tests; the password is in the vault.",
            "https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/memory-tool",
            "-----BEGIN PUBLIC KEY-----",
            "let task = ask_for_the_sk_key(); // sk-ant- prefix documented",
            "AKIA is the prefix of AWS access key ids",
            "git@github.com:anthropics/claude-code.git",
            "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
            "",
        ] {
            assert_eq!(find(text), None, "{text}");
        }
    }
}
