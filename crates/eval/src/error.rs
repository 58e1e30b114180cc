//! Errors of the evaluation harness: unreadable files and invalid benchmark records.

use std::path::PathBuf;

/// Why a benchmark file could not be read or accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The file could not be opened or read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not well-formed JSON of the expected shape.
    #[error("parsing {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's complaint (with line and column).
        source: serde_json::Error,
    },
    /// A record breaks a rule of the benchmark format: names the record and the field.
    #[error("{dataset} record {record:?}: field `{field}`: {reason}")]
    InvalidRecord {
        /// Which benchmark ("longmemeval", "locomo").
        dataset: &'static str,
        /// The record (question id, conversation id, or index when the id itself is bad).
        record: String,
        /// The field, with its path inside the record (e.g. `haystack_dates[3]`).
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl DatasetError {
    pub(crate) fn invalid(
        dataset: &'static str,
        record: impl Into<String>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> DatasetError {
        DatasetError::InvalidRecord {
            dataset,
            record: record.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}
