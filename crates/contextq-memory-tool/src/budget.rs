//! How much one answer to Claude may hold ([`AnswerBudget`]): a directory `view` and a file
//! `view` without `view_range` are cut at a whole line past their budget and end with one line
//! that says what was left out and how to see it; within the budget they are exactly the
//! reference tool's answers. Why these defaults: docs/protocol.md, "Answers that fit".

/// Default [`AnswerBudget::listing_entries`]: 1,000 entries.
pub const DEFAULT_LISTING_ENTRIES: usize = 1_000;
/// Default [`AnswerBudget::listing_chars`]: 40,000 characters (about 10,000 tokens).
pub const DEFAULT_LISTING_CHARS: usize = 40_000;
/// Default [`AnswerBudget::read_chars`]: 100,000 characters (about 25,000 tokens).
pub const DEFAULT_READ_CHARS: usize = 100_000;

/// The most one answer may hold; 0 turns a limit off. Built from `Default` (or
/// [`AnswerBudget::UNLIMITED`]) with its setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnswerBudget {
    /// Entries of a directory listing (rows below the directory's own line); default
    /// [`DEFAULT_LISTING_ENTRIES`].
    pub listing_entries: usize,
    /// Characters of a directory listing, its header and note included; default
    /// [`DEFAULT_LISTING_CHARS`].
    pub listing_chars: usize,
    /// Characters of a file `view` without `view_range`, header and note included; default
    /// [`DEFAULT_READ_CHARS`]. A `view_range` read is never cut.
    pub read_chars: usize,
}

impl Default for AnswerBudget {
    fn default() -> Self {
        AnswerBudget {
            listing_entries: DEFAULT_LISTING_ENTRIES,
            listing_chars: DEFAULT_LISTING_CHARS,
            read_chars: DEFAULT_READ_CHARS,
        }
    }
}

impl AnswerBudget {
    /// No limit: every answer is the reference tool's, whatever its size.
    pub const UNLIMITED: AnswerBudget = AnswerBudget {
        listing_entries: 0,
        listing_chars: 0,
        read_chars: 0,
    };

    /// Whether `n` is within `limit` (0: no limit).
    pub(crate) fn within(limit: usize, n: usize) -> bool {
        limit == 0 || n <= limit
    }
}

contextq_api::setters!(AnswerBudget {
    /// 0: no limit.
    listing_entries: usize,
    /// 0: no limit.
    listing_chars: usize,
    /// 0: no limit.
    read_chars: usize,
});
