//! What every layer of `db` passes around, below the batch and the dialects: a value bound to a
//! statement ([`Bind`]) and a statement with its values ([`Statement`]).

/// A value bound to a statement (of a [`super::Batch`], a read, a dialect's statement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// `TEXT`.
    Text(String),
    /// `TEXT` or `NULL`.
    OptText(Option<String>),
    /// `BIGINT`.
    Int(i64),
    /// `BIGINT` or `NULL`.
    OptInt(Option<i64>),
}

/// One statement and its values (`$1..$n`): a dialect's, or one of a [`super::Dialects`] group.
pub type Statement = (String, Vec<Bind>);
