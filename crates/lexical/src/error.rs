//! Errors of the lexical index.

/// Why the lexical index refused an operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LexicalError {
    /// A BM25 parameter out of range.
    #[error("bm25 parameter {field} = {value} is out of range")]
    InvalidParam {
        /// `k1` or `b`.
        field: &'static str,
        /// The value given.
        value: f32,
    },
    /// The document key is already in the index.
    #[error("document {key} is already indexed")]
    DuplicateKey {
        /// The key, as debug text.
        key: String,
    },
    /// The key to replace is not in the index.
    #[error("document {key} is not indexed")]
    UnknownKey {
        /// The key, as debug text.
        key: String,
    },
    /// The text given as a document's current one is not what the index holds for it.
    #[error("document {key}: the text given as its indexed one does not match the index")]
    StaleDocument {
        /// The key, as debug text.
        key: String,
    },
    /// The covered ledger position would move backwards.
    #[error("index covers the ledger up to {covered}, refusing to move back to {requested}")]
    CoverageBackwards {
        /// What the index covers.
        covered: evicortex_core::TurnId,
        /// What was asked for.
        requested: evicortex_core::TurnId,
    },
    /// The index grew past what a row id can address.
    #[error("lexical index is full at {rows} documents")]
    Full {
        /// Documents held.
        rows: usize,
    },
}
