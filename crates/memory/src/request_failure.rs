//! What a door tells its caller about a failed request, from any facade error: its class, the
//! finer kind of bad input (a conflict, a target that matches nothing, a read-only store), the
//! input field to blame and what is wrong with it. The HTTP API turns it into a status and an
//! `{error, field}` body, MCP into a tool error of the same body, Python into an exception.

use std::error::Error;

use crate::{AnswerError, AppendError, CompileError, CompileOptionsError, EraseError, ErrorClass};

/// A finer kind of bad input, where the doors tell it apart (HTTP 409, 404, 503).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BadInputKind {
    /// A turn conflicts with what is stored (its position holds another text, or it was erased).
    Conflict,
    /// An erasure target matches nothing in the namespace (said the same way whether or not it
    /// exists in another one).
    NotFound,
    /// The store was opened read-only (or is a replica): it takes no writes.
    ReadOnly,
}

/// The input a failure blames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlamedField {
    /// A field of the request itself: `turns[2].time`, `query`, `budget`.
    Request(String),
    /// A field of the compile configuration (`rrf_k`, `rerank.depth`), which the servers take
    /// in `options` and Python as keyword settings.
    Setting(String),
    /// The compile configuration as a whole.
    Settings,
}

/// A failed request as every door reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFailure {
    /// Its class ([`ErrorClass::of`]; `Internal` when no cause is a facade error).
    pub class: ErrorClass,
    /// The finer kind of bad input, where there is one.
    pub kind: Option<BadInputKind>,
    /// The input to blame, when one is.
    pub field: Option<BlamedField>,
    /// What is wrong, to be said beside the field: a refused turn's reason alone (the field
    /// names the turn), else the error's text.
    pub message: String,
}

impl RequestFailure {
    /// The failure `err` (any facade error, or one wrapping it) reports.
    pub fn of(err: &(dyn Error + 'static)) -> RequestFailure {
        let class = ErrorClass::of(err).unwrap_or(ErrorClass::Internal);
        // Bad input says what is wrong in its own words; a failure of the machinery carries its
        // causes (a database's own message sits under its client's "db error").
        let message =
            if class == ErrorClass::BadInput { err.to_string() } else { error_chain(err) };
        let mut failure = RequestFailure { class, kind: None, field: None, message };
        if let Some(e) = err.downcast_ref::<AppendError>() {
            failure.blame_append(e);
        } else if let Some(EraseError::Ledger(e)) = err.downcast_ref::<EraseError>() {
            use evicortex_ledger::EraseError as L;
            failure.kind = match e {
                L::NotFound { .. } | L::NotATurn { .. } => Some(BadInputKind::NotFound),
                L::ReadOnly { .. } | L::ReadOnlyReplica { .. } => Some(BadInputKind::ReadOnly),
                _ => None,
            };
            if let L::NotATurn { turn_id, namespace } = e {
                let target = evicortex_ledger::EraseTarget::Record(namespace.clone(), *turn_id);
                failure.message = format!("nothing to erase: {target} matches no record");
            }
        } else if let Some(e) = err.downcast_ref::<CompileError>() {
            failure.field = match e.field() {
                Some(field) => Some(request_or_setting(field)),
                None if class == ErrorClass::BadInput => Some(BlamedField::Settings),
                None => None,
            };
        } else if let Some(e) = err.downcast_ref::<AnswerError>() {
            failure.field = e.field().map(request_or_setting);
        } else if let Some(e) = err.downcast_ref::<CompileOptionsError>() {
            failure.field = e.field().map(BlamedField::Setting);
        }
        failure
    }

    fn blame_append(&mut self, e: &AppendError) {
        let (kind, field) = match e {
            AppendError::InvalidTurn { index, field, reason } => {
                self.message = reason.clone();
                (None, format!("turns[{index}].{field}"))
            }
            AppendError::Conflict { index, field, .. } => {
                (Some(BadInputKind::Conflict), format!("turns[{index}].{field}"))
            }
            AppendError::Erased { index, .. } => {
                (Some(BadInputKind::Conflict), format!("turns[{index}]"))
            }
            AppendError::ReadOnly { .. } | AppendError::ReadOnlyReplica { .. } => {
                self.kind = Some(BadInputKind::ReadOnly);
                return;
            }
            _ if self.class == ErrorClass::BadInput => (None, "turns".to_owned()),
            _ => return,
        };
        self.kind = kind;
        self.field = Some(BlamedField::Request(field));
    }
}

/// The error and its causes, as the CLI prints them (`a: b: c`), without repeating a cause
/// whose text the message already includes.
pub fn error_chain(err: &(dyn Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        let said = e.to_string();
        if !message.contains(&said) {
            message = format!("{message}: {said}");
        }
        cause = e.source();
    }
    message
}

/// The question, the budget and the tokenizer are fields of a compile or answer request; any
/// other field a compile names is a setting of its configuration.
fn request_or_setting(field: String) -> BlamedField {
    match field.as_str() {
        "query" | "budget" | "tokenizer" => BlamedField::Request(field),
        _ => BlamedField::Setting(field),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_turn_blames_its_field_and_a_refused_setting_its_path() {
        let turn = AppendError::InvalidTurn { index: 2, field: "time", reason: "no offset".into() };
        let failure = RequestFailure::of(&turn);
        assert_eq!(failure.class, ErrorClass::BadInput);
        assert_eq!(failure.field, Some(BlamedField::Request("turns[2].time".into())));
        assert_eq!(failure.message, "no offset");
        let setting = CompileOptionsError::Unknown { paths: vec!["lexical.top_k".into()] };
        let failure = RequestFailure::of(&setting);
        assert_eq!(failure.class, ErrorClass::BadInput, "refused settings are bad input");
        assert_eq!(failure.field, Some(BlamedField::Setting("lexical.top_k".into())));
        let question = RequestFailure::of(&CompileError::EmptyQuestion);
        assert_eq!(question.field, Some(BlamedField::Request("query".into())));
    }

    #[test]
    fn a_storage_failure_says_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("ERROR: canceling statement due to statement timeout")]
        struct Server;
        #[derive(Debug, thiserror::Error)]
        #[error("db error")]
        struct Client(#[source] Server);
        let storage = evicortex_ledger::StorageError::Database {
            server: "postgres://db".into(),
            op: "appending",
            source: Box::new(Client(Server)),
        };
        let failure = RequestFailure::of(&AppendError::Storage(storage));
        assert_eq!(
            failure.message,
            "PostgreSQL ledger at postgres://db: appending: db error: ERROR: canceling statement \
             due to statement timeout"
        );
    }
}
