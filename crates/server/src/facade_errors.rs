//! Mapping the facade's errors to API errors: bad input to 4xx naming the field, everything
//! else by its [`ErrorClass`].

use evicortex::{AppendError, EraseError, ErrorClass, ReadError, VerifyError};

use crate::ApiError;

/// An append failure. Turn positions become `turns[i]` paths.
pub fn append(err: AppendError) -> ApiError {
    use evicortex_ledger::AppendError as L;
    match &err {
        AppendError::Ledger(L::InvalidTurn { index, field, reason }) => {
            ApiError::invalid(format!("turns[{index}].{field}"), reason)
        }
        AppendError::Ledger(L::Conflict { index, field, .. }) => ApiError::Conflict {
            field: Some(format!("turns[{index}].{field}")),
            message: err.to_string(),
        },
        AppendError::Ledger(L::Erased { index, .. }) => {
            ApiError::Conflict { field: Some(format!("turns[{index}]")), message: err.to_string() }
        }
        AppendError::Ledger(L::ReadOnly { .. }) => {
            ApiError::Unavailable { message: err.to_string() }
        }
        _ => by_class(err.class(), err.to_string()),
    }
}

/// An erase failure. A record of another namespace is reported exactly like a record that does
/// not exist, so an erase reveals nothing about other namespaces.
pub fn erase(err: EraseError) -> ApiError {
    use evicortex_ledger::EraseError as L;
    match &err {
        EraseError::Ledger(L::NotFound { target }) => ApiError::NotFound {
            field: None,
            message: format!("nothing to erase: {target} matches no record"),
        },
        EraseError::Ledger(L::WrongNamespace { turn_id, namespace }) => ApiError::NotFound {
            field: None,
            message: format!(
                "nothing to erase: {} matches no record",
                evicortex::EraseTarget::Record(namespace.clone(), *turn_id)
            ),
        },
        EraseError::Ledger(L::ReadOnly { .. }) => {
            ApiError::Unavailable { message: err.to_string() }
        }
        _ => by_class(err.class(), err.to_string()),
    }
}

/// A read failure.
pub fn read(err: ReadError) -> ApiError {
    by_class(ErrorClass::of_read(&err), err.to_string())
}

/// A verify failure: integrity failures are 500s naming the first bad record.
pub fn verify(err: VerifyError) -> ApiError {
    by_class(ErrorClass::of_verify(&err), err.to_string())
}

fn by_class(class: ErrorClass, message: String) -> ApiError {
    match class {
        ErrorClass::BadInput => ApiError::InvalidField { field: "body".to_owned(), message },
        ErrorClass::Integrity => ApiError::Integrity { message },
        ErrorClass::Io | ErrorClass::Internal => ApiError::Storage { message },
    }
}

/// A compile failure: configuration and query problems are the caller's (422 naming the field);
/// an encoder identity mismatch is an integrity failure.
pub fn compile(err: evicortex::CompileError) -> ApiError {
    use evicortex::CompileError as M;
    use evicortex::compiler::CompileError as C;
    use evicortex_embed::EmbedError as E;
    match &err {
        M::Compile(C::InvalidConfig { field, reason }) => {
            ApiError::invalid(format!("options.{field}"), reason)
        }
        M::Compile(C::MissingDenseInput | C::UnexpectedDenseInput | C::Bm25Mismatch { .. }) => {
            ApiError::invalid("options", &err)
        }
        M::QueryTooLong { .. } | M::Embed(E::Overlength { .. } | E::Tokenizer { .. }) => {
            ApiError::invalid("query", &err)
        }
        M::Embed(E::IdentityMismatch { .. }) => ApiError::Integrity { message: err.to_string() },
        M::EmbeddingCache(cache) if cache.is_integrity_failure() => {
            ApiError::Integrity { message: err.to_string() }
        }
        M::Read(read_err) => by_class(ErrorClass::of_read(read_err), err.to_string()),
        _ => ApiError::Storage { message: err.to_string() },
    }
}
