//! Memory paths: the one place where text Claude wrote becomes a location in a store.
//!
//! Every command names paths under `/memories`. [`MemoryPath::parse`] turns such a string into
//! normalised segments, or refuses it with the exact message of the spec. The rules are stricter
//! than both official SDKs on purpose (see `docs/protocol.md`, "Paths"):
//!
//! - the root is compared by segment: `/memoriesX/a` is outside;
//! - a trailing `/` and repeated `/` are normalised away;
//! - `.` and `..` segments are refused outright (even `a/../b`, which would stay inside: a store
//!   never has to resolve anything), as are backslashes, NUL and other control characters, and
//!   percent-escapes that decode to `.`, `/`, `\`, `%` or a control character (`%2e%2e`, `%2f`,
//!   `%252e`);
//! - a segment is at most 255 bytes and a path at most 900 bytes, on every store: one limit,
//!   checked before any request, that every store can hold (a ContextQ's external id of a path,
//!   `tag:workspace/...`, stays within its 1,024 bytes for any tag and workspace);
//! - segments are Unicode NFC (`café` typed either way is one file), and invisible or
//!   direction-changing characters (zero-width spaces and joiners, bidi overrides and isolates,
//!   the byte-order mark) are refused: two paths never look alike while being different files;
//! - a path that resolves to `/memories` itself (`/memories/.`, `/memories/sub/..`) is named as
//!   such by the commands that refuse the root ([`resolves_to_root`]); every other `.` or `..`
//!   is still an escape.
//!
//! A [`MemoryPath`] keeps the text as written (`raw`, used in messages) beside the normalised
//! segments (used for storage and for listing entries).

use std::fmt;

/// The memory root every path must start with.
pub const ROOT: &str = "/memories";

/// Longest accepted path, in bytes, as written: what every store holds (a ContextQ external id,
/// at most 1,024 bytes, is the path below `/memories` with a tag of at most 64 bytes and a
/// workspace of at most 63 in front of it).
pub const MAX_PATH_BYTES: usize = 900;
/// Longest accepted segment, in bytes (the common file-name limit).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Why a path was refused. [`PathError::message`] is the sentence for Claude (built in
/// [`crate::render`]); `Display` is for developers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not `/memories` or beneath it.
    #[error("{0:?} is outside /memories")]
    OutsideRoot(String),
    /// Would escape, or uses a form that could (traversal, encodings, control characters).
    #[error("{0:?} would escape /memories")]
    Escape(String),
    /// Longer than [`MAX_PATH_BYTES`] or with a segment longer than [`MAX_SEGMENT_BYTES`].
    #[error("{0:?} is too long")]
    TooLong(String),
    /// Holds an invisible or direction-changing character ([`invisible`]).
    #[error("{0:?} holds the invisible character U+{1:04X}")]
    Invisible(String, u32),
}

/// Whether `c` is invisible or changes the direction of the text around it: zero-width spaces
/// and joiners, bidi marks, embeddings, overrides and isolates, invisible operators and the
/// byte-order mark. Such characters make two different paths look the same.
pub fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// Whether `raw` names `/memories` itself once `.` and `..` are resolved (`/memories/.`,
/// `/memories/a/..`), without ever leaving it. Such a path is refused like every other `.` or
/// `..`, but the commands that refuse the root say so instead ("Cannot delete the /memories
/// directory itself"), as the references do.
pub fn resolves_to_root(raw: &str) -> bool {
    let Some(rest) = raw.strip_prefix(ROOT) else {
        return false;
    };
    if !(rest.is_empty() || rest.starts_with('/'))
        || raw.chars().any(|c| c == '\\' || c.is_control())
        || has_dangerous_escape(raw)
    {
        return false;
    }
    let mut depth = 0usize;
    for segment in rest.split('/').filter(|s| !s.is_empty()) {
        match segment {
            "." => {}
            ".." if depth == 0 => return false,
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    depth == 0
}

/// A validated path under `/memories`.
///
/// Equality, ordering and hashing use the normalised segments only, so `/memories/a/` and
/// `/memories//a` are the same path.
#[derive(Clone)]
pub struct MemoryPath {
    raw: String,
    segments: Vec<String>,
}

impl MemoryPath {
    /// The root, `/memories`.
    pub fn root() -> Self {
        MemoryPath {
            raw: ROOT.to_string(),
            segments: Vec::new(),
        }
    }

    /// Parses and validates `raw` (see the module docs for the rules).
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong(raw.to_string()));
        }
        // Dangerous characters first: they are an escape attempt wherever they appear, even in
        // a path that is also outside the root.
        if raw.chars().any(|c| c == '\\' || c.is_control()) || has_dangerous_escape(raw) {
            return Err(PathError::Escape(raw.to_string()));
        }
        if let Some(c) = raw.chars().find(|c| invisible(*c)) {
            return Err(PathError::Invisible(raw.to_string(), c as u32));
        }
        let rest = match raw.strip_prefix(ROOT) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => return Err(PathError::OutsideRoot(raw.to_string())),
        };
        let mut segments = Vec::new();
        for segment in rest.split('/').filter(|s| !s.is_empty()) {
            if segment == "." || segment == ".." {
                return Err(PathError::Escape(raw.to_string()));
            }
            if segment.len() > MAX_SEGMENT_BYTES {
                return Err(PathError::TooLong(raw.to_string()));
            }
            segments.push(unicode_normalization::UnicodeNormalization::nfc(segment).collect());
        }
        Ok(MemoryPath {
            raw: raw.to_string(),
            segments,
        })
    }

    /// Builds a path from already-validated segments (each checked again).
    pub fn from_segments<I, S>(segments: I) -> Result<Self, PathError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut text = String::from(ROOT);
        for s in segments {
            text.push('/');
            text.push_str(s.as_ref());
        }
        let parsed = MemoryPath::parse(&text)?;
        Ok(parsed.normalized_copy())
    }

    /// The text as Claude wrote it (used in messages and in a listing's header).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The normalised form: `/memories` or `/memories/a/b`.
    pub fn normalized(&self) -> String {
        let mut s = String::from(ROOT);
        for seg in &self.segments {
            s.push('/');
            s.push_str(seg);
        }
        s
    }

    /// The same path with `raw` replaced by its normalized form.
    pub fn normalized_copy(&self) -> Self {
        MemoryPath {
            raw: self.normalized(),
            segments: self.segments.clone(),
        }
    }

    /// The old spelling of [`MemoryPath::normalized_copy`].
    #[deprecated(
        since = "0.2.0",
        note = "use `normalized_copy` (one spelling: `normalized`)"
    )]
    pub fn normalised_copy(&self) -> Self {
        self.normalized_copy()
    }

    /// The segments below the root (empty for the root).
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The segments below the root joined with `/` (empty for the root).
    pub fn relative(&self) -> String {
        self.segments.join("/")
    }

    /// Whether this is `/memories` itself.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The last segment, if any.
    pub fn name(&self) -> Option<&str> {
        self.segments.last().map(String::as_str)
    }

    /// The parent directory (`None` for the root).
    pub fn parent(&self) -> Option<MemoryPath> {
        if self.is_root() {
            return None;
        }
        let segments = self.segments[..self.segments.len() - 1].to_vec();
        let mut p = MemoryPath {
            raw: String::new(),
            segments,
        };
        p.raw = p.normalized();
        Some(p)
    }

    /// This path with `child` segments appended (each validated).
    pub fn join(&self, child: &str) -> Result<MemoryPath, PathError> {
        MemoryPath::from_segments(
            self.segments
                .iter()
                .map(String::as_str)
                .chain(child.split('/').filter(|s| !s.is_empty())),
        )
    }

    /// Whether `self` is `other` or beneath it, by whole segments (`a/b` is under `a`; `ab` is not).
    pub fn starts_with(&self, other: &MemoryPath) -> bool {
        self.segments.len() >= other.segments.len()
            && self.segments[..other.segments.len()] == other.segments[..]
    }

    /// The segments of `self` below `base`, if `self` is beneath (or equal to) `base`.
    pub fn strip_prefix(&self, base: &MemoryPath) -> Option<&[String]> {
        self.starts_with(base)
            .then(|| &self.segments[base.segments.len()..])
    }

    /// `self` moved from under `from` to under `to` (for directory renames).
    pub fn rebase(&self, from: &MemoryPath, to: &MemoryPath) -> Option<MemoryPath> {
        let rest = self.strip_prefix(from)?;
        let mut segments = to.segments.clone();
        segments.extend(rest.iter().cloned());
        let mut p = MemoryPath {
            raw: String::new(),
            segments,
        };
        p.raw = p.normalized();
        Some(p)
    }
}

/// `%XX` escapes that decode to something that could change how a path is split or resolved.
fn has_dangerous_escape(raw: &str) -> bool {
    raw.as_bytes().windows(3).any(|w| {
        let hex = |b: u8| (b as char).to_digit(16);
        match (w[0], hex(w[1]), hex(w[2])) {
            (b'%', Some(h), Some(l)) => {
                let decoded = (h * 16 + l) as u8;
                matches!(decoded, b'.' | b'/' | b'\\' | b'%') || decoded < 0x20 || decoded == 0x7f
            }
            _ => false,
        }
    })
}

impl PartialEq for MemoryPath {
    fn eq(&self, other: &Self) -> bool {
        self.segments == other.segments
    }
}

impl Eq for MemoryPath {}

impl std::hash::Hash for MemoryPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.segments.hash(state);
    }
}

impl PartialOrd for MemoryPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemoryPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.segments.cmp(&other.segments)
    }
}

impl fmt::Debug for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemoryPath({:?})", self.normalized())
    }
}

impl fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(p: &str) -> String {
        MemoryPath::parse(p).unwrap().normalized()
    }

    #[test]
    fn lookalike_names_are_one_file_or_refused() {
        // NFC and NFD spellings of one name are one path.
        assert_eq!(ok("/memories/caf\u{e9}.md"), ok("/memories/cafe\u{301}.md"));
        assert_eq!(
            MemoryPath::parse("/memories/cafe\u{301}.md").unwrap(),
            MemoryPath::parse("/memories/caf\u{e9}.md").unwrap()
        );
        // German and Japanese names are fine.
        assert_eq!(
            ok("/memories/Stra\u{df}e/\u{65e5}\u{672c}.md"),
            "/memories/Stra\u{df}e/\u{65e5}\u{672c}.md"
        );
        for c in [
            '\u{202e}', '\u{200b}', '\u{200d}', '\u{2066}', '\u{feff}', '\u{00ad}',
        ] {
            let raw = format!("/memories/a{c}b.md");
            assert_eq!(
                MemoryPath::parse(&raw),
                Err(PathError::Invisible(raw.clone(), c as u32)),
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn one_path_limit_that_every_store_holds() {
        let at = format!("/memories/{}", "a/".repeat(444)) + "bc";
        assert_eq!(at.len(), MAX_PATH_BYTES);
        assert!(MemoryPath::parse(&at).is_ok());
        let over = format!("{at}d");
        assert!(matches!(
            MemoryPath::parse(&over),
            Err(PathError::TooLong(_))
        ));
        // The longest external id a ContextQ store makes of it: a 64-byte tag and a 63-byte
        // workspace in front of the path below /memories.
        let external = format!(
            "{}:{}/{}",
            "t".repeat(64),
            "w".repeat(63),
            &at["/memories/".len()..]
        );
        assert!(
            external.len() <= contextq_api::limits::MAX_EXTERNAL_ID_BYTES,
            "{}",
            external.len()
        );
    }

    #[test]
    fn what_resolves_to_the_root_is_known_as_such() {
        for raw in [
            "/memories",
            "/memories/.",
            "/memories/./",
            "/memories/sub/..",
            "/memories/a/b/../..",
            "/memories//.",
        ] {
            assert!(resolves_to_root(raw), "{raw}");
        }
        for raw in [
            "/memories/..",
            "/memories/sub",
            "/memories/a/../b",
            "/memoriesX/.",
            "/memories/%2e",
            "/memories/a\\..",
            // Each reason alone, on a path that would otherwise come back to the root.
            "/memoriesX/..",
            "/memories/\\/..",
            "/memories/\u{1}/..",
            "/memories/%2e/..",
        ] {
            assert!(!resolves_to_root(raw), "{raw}");
        }
        // Still refused as paths: only the commands that refuse the root name them so.
        assert!(MemoryPath::parse("/memories/.").is_err());
    }

    #[test]
    fn a_path_shows_and_orders_as_its_segments() {
        let longest = format!("/memories/{}", "a".repeat(MAX_SEGMENT_BYTES));
        assert!(
            MemoryPath::parse(&longest).is_ok(),
            "a segment of the limit"
        );
        assert!(MemoryPath::parse(&format!("{longest}a")).is_err());
        let p = MemoryPath::parse("/memories//a/b.md").unwrap();
        assert_eq!(p.relative(), "a/b.md");
        assert_eq!(MemoryPath::root().relative(), "");
        assert!(MemoryPath::root().is_root() && !p.is_root());
        assert_eq!(
            p.to_string(),
            "/memories//a/b.md",
            "Display is the path as written"
        );
        assert_eq!(format!("{p:?}"), "MemoryPath(\"/memories/a/b.md\")");
        let q = MemoryPath::parse("/memories/a/c.md").unwrap();
        assert_eq!(p.partial_cmp(&q), Some(std::cmp::Ordering::Less));
        assert!(p < q);
    }

    #[test]
    fn accepts_and_normalises() {
        assert_eq!(ok("/memories"), "/memories");
        assert_eq!(ok("/memories/"), "/memories");
        assert_eq!(ok("/memories//a///b/"), "/memories/a/b");
        assert_eq!(ok("/memories/ünï cödé/📝.md"), "/memories/ünï cödé/📝.md");
        assert_eq!(ok("/memories/100%.md"), "/memories/100%.md");
        assert_eq!(ok("/memories/a%20b"), "/memories/a%20b");
        assert_eq!(ok("/memories/...md"), "/memories/...md");
        assert_eq!(
            MemoryPath::parse("/memories/a/").unwrap().raw(),
            "/memories/a/"
        );
    }

    /// A path the rules refuse.
    fn outside(p: &str) -> Result<MemoryPath, PathError> {
        MemoryPath::parse(p)
    }

    #[test]
    fn refuses_outside_root_by_segment() {
        for p in [
            "/memoriesX/a",
            "/memoriesX",
            "memories/a",
            "",
            "/",
            "/etc/passwd",
            "/Memories",
        ] {
            assert!(
                matches!(outside(p), Err(PathError::OutsideRoot(_))),
                "{p:?}"
            );
        }
        assert_eq!(
            outside("/tmp/x").unwrap_err().message(),
            "Path must start with /memories, got: /tmp/x"
        );
    }

    #[test]
    fn refuses_escapes() {
        for p in [
            "/memories/..",
            "/memories/../etc",
            "/memories/a/../../x",
            "/memories/a/../b",
            "/memories/./a",
            "/memories/%2e%2e/x",
            "/memories/%2E%2e/x",
            "/memories/a%2fb",
            "/memories/a%5cb",
            "/memories/%252e%252e",
            "/memories/a\\..\\b",
            "/memories/a\0b",
            "/memories/a\nb",
            "/memories/a\u{7f}",
            "/memories/a%00",
            "/memories/..%2f..",
        ] {
            assert!(matches!(outside(p), Err(PathError::Escape(_))), "{p:?}");
        }
        assert_eq!(
            MemoryPath::parse("/memories/../x").unwrap_err().message(),
            "Path /memories/../x would escape /memories directory"
        );
    }

    #[test]
    fn limits() {
        let long = format!("/memories/{}", "a".repeat(256));
        assert!(matches!(
            MemoryPath::parse(&long),
            Err(PathError::TooLong(_))
        ));
        let deep = format!("/memories{}", "/a".repeat(3000));
        assert!(matches!(
            MemoryPath::parse(&deep),
            Err(PathError::TooLong(_))
        ));
    }

    #[test]
    fn relations() {
        let a = MemoryPath::parse("/memories/a").unwrap();
        let ab = MemoryPath::parse("/memories/a/b.md").unwrap();
        let abc = MemoryPath::parse("/memories/ab").unwrap();
        assert!(ab.starts_with(&a));
        assert!(!abc.starts_with(&a));
        assert!(a.starts_with(&MemoryPath::root()));
        assert_eq!(ab.parent().unwrap(), a);
        assert_eq!(ab.name(), Some("b.md"));
        let moved = ab
            .rebase(&a, &MemoryPath::parse("/memories/z/y").unwrap())
            .unwrap();
        assert_eq!(moved.normalized(), "/memories/z/y/b.md");
        assert_eq!(a.join("c/d").unwrap().normalized(), "/memories/a/c/d");
        assert!(a.join("..").is_err());
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_ .%-]{1,12}",
            Just("..".to_string()),
            Just(".".to_string()),
            Just("%2e%2e".to_string()),
            Just("%2f".to_string()),
            "\\PC{1,6}",
            Just("a\\b".to_string()),
            Just("\u{0}".to_string()),
        ]
    }

    fn any_path() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just("/memories".to_string()),
                Just("/memoriesX".to_string()),
                Just("memories".to_string()),
                Just("".to_string()),
                Just("/".to_string()),
            ],
            proptest::collection::vec((segment(), prop_oneof![Just("/"), Just("//")]), 0..6),
        )
            .prop_map(|(root, segs)| {
                let mut s = root;
                for (seg, sep) in segs {
                    s.push_str(sep);
                    s.push_str(&seg);
                }
                s
            })
    }

    /// Resolves a path the way a filesystem would, to check that no accepted path escapes.
    fn resolve_like_fs(normalized: &str) -> Option<Vec<String>> {
        let mut stack: Vec<String> = Vec::new();
        for seg in normalized.split('/').filter(|s| !s.is_empty()) {
            // Decode percent-escapes too: a server might.
            let decoded = percent_encoding::percent_decode_str(seg)
                .decode_utf8_lossy()
                .to_string();
            for part in decoded.split(['/', '\\']) {
                match part {
                    "" | "." => {}
                    ".." => {
                        stack.pop()?;
                    }
                    other => stack.push(other.to_string()),
                }
            }
        }
        Some(stack)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testing::proptest_cases(2000)))]

        #[test]
        fn never_escapes_and_is_idempotent(raw in any_path()) {
            if let Ok(p) = MemoryPath::parse(&raw) {
                let n = p.normalized();
                prop_assert!(n == "/memories" || n.starts_with("/memories/"));
                let resolved = resolve_like_fs(&n).expect("resolves");
                prop_assert_eq!(resolved.first().map(String::as_str), Some("memories"));
                let again = MemoryPath::parse(&n).unwrap();
                prop_assert_eq!(again.normalized(), n.clone());
                prop_assert_eq!(&again, &p);
                prop_assert!(!n.contains("//"));
                prop_assert!(!raw.starts_with("/memoriesX"));
            }
        }

        #[test]
        fn memories_x_is_always_outside(rest in "[a-zA-Z0-9_]{1,8}(/[a-z]{1,5}){0,3}") {
            let raw = format!("/memories{rest}");
            prop_assert!(matches!(MemoryPath::parse(&raw), Err(PathError::OutsideRoot(_))));
        }

        #[test]
        fn arbitrary_strings_never_panic(raw in "\\PC{0,64}") {
            let _ = MemoryPath::parse(&raw);
        }
    }
}
