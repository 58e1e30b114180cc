//! The API error of a facade error: its [`ErrorClass`] decides the status, in one match; bad input
//! names the field to blame (`turns[2].time`, `options.rerank.depth`, `query`), and a storage
//! failure is 507 on a full disk, 503 while the ledger refuses writes until a restart, else 500.

use std::error::Error;

use evicortex::{AppendError, CompileError, EraseError, ErrorClass, StorageCondition};

use crate::ApiError;

/// The API error for `err` (any error of the `evicortex` facade, or one wrapping it).
pub fn facade_error(err: &(dyn Error + 'static)) -> ApiError {
    let message = err.to_string();
    match ErrorClass::of(err) {
        Some(ErrorClass::BadInput) => bad_input(err, message),
        Some(ErrorClass::Integrity) => ApiError::Integrity { message },
        Some(ErrorClass::ModelMissing) => ApiError::Unavailable { message },
        Some(ErrorClass::Io | ErrorClass::Internal) | Some(_) | None => {
            match StorageCondition::of(err) {
                Some(StorageCondition::DiskFull) => ApiError::InsufficientStorage { message },
                Some(StorageCondition::WritesRefused) => ApiError::Unavailable { message },
                None => ApiError::Storage { message },
            }
        }
    }
}

/// The 4xx of a caller's mistake: a conflict with what is stored is 409, a target that matches
/// nothing is 404 (said the same way whether or not it exists in another namespace), a store
/// opened read-only is 503, anything else 422 naming the field.
fn bad_input(err: &(dyn Error + 'static), message: String) -> ApiError {
    if let Some(e) = err.downcast_ref::<AppendError>() {
        return match e {
            AppendError::InvalidTurn { index, field, reason } => {
                ApiError::invalid(format!("turns[{index}].{field}"), reason)
            }
            AppendError::Conflict { index, field, .. } => {
                ApiError::Conflict { field: Some(format!("turns[{index}].{field}")), message }
            }
            AppendError::Erased { index, .. } => {
                ApiError::Conflict { field: Some(format!("turns[{index}]")), message }
            }
            AppendError::ReadOnly { .. } | AppendError::ReadOnlyReplica { .. } => {
                ApiError::Unavailable { message }
            }
            _ => ApiError::invalid("turns", message),
        };
    }
    if let Some(EraseError::Ledger(e)) = err.downcast_ref::<EraseError>() {
        use evicortex::LedgerEraseError as L;
        return match e {
            L::NotFound { target } => ApiError::NotFound {
                field: None,
                message: format!("nothing to erase: {target} matches no record"),
            },
            L::NotATurn { turn_id, namespace } => ApiError::NotFound {
                field: None,
                message: format!(
                    "nothing to erase: {} matches no record",
                    evicortex::EraseTarget::Record(namespace.clone(), *turn_id)
                ),
            },
            L::ReadOnly { .. } | L::ReadOnlyReplica { .. } => ApiError::Unavailable { message },
            _ => ApiError::invalid("body", message),
        };
    }
    if let Some(e) = err.downcast_ref::<CompileError>() {
        let field = match e.field() {
            Some(field) if field == "query" => field,
            Some(field) => format!("options.{field}"),
            None => "options".to_owned(),
        };
        return ApiError::invalid(field, message);
    }
    ApiError::invalid("body", message)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use axum::http::StatusCode;
    use evicortex::StorageError;

    use super::*;

    fn sqlite(code: std::ffi::c_int) -> StorageError {
        StorageError::Sqlite {
            path: PathBuf::from("ledger.sqlite"),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        }
    }

    #[test]
    fn a_full_disk_is_507_a_refusing_ledger_503_other_storage_failures_500() {
        let status = |e: &(dyn Error + 'static)| facade_error(e).status();
        assert_eq!(status(&sqlite(rusqlite::ffi::SQLITE_FULL)), StatusCode::INSUFFICIENT_STORAGE);
        let poisoned = StorageError::Poisoned {
            path: PathBuf::from("ledger.sqlite"),
            cause: "disk I/O error".to_owned(),
        };
        assert_eq!(status(&poisoned), StatusCode::SERVICE_UNAVAILABLE);
        assert!(facade_error(&poisoned).to_string().contains("restart the server"));
        // As the append path returns it: wrapped transparently, so `source()` skips it.
        let wrapped = AppendError::Storage(StorageError::Poisoned {
            path: PathBuf::from("ledger.sqlite"),
            cause: "disk I/O error".to_owned(),
        });
        assert_eq!(status(&wrapped), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            status(&AppendError::Storage(sqlite(rusqlite::ffi::SQLITE_FULL))),
            StatusCode::INSUFFICIENT_STORAGE
        );
        assert_eq!(status(&sqlite(rusqlite::ffi::SQLITE_IOERR)), StatusCode::INTERNAL_SERVER_ERROR);
        let enospc = StorageError::Io {
            op: "writing",
            path: PathBuf::from("vector-index/x.hnsw"),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        assert_eq!(status(&enospc), StatusCode::INSUFFICIENT_STORAGE);
    }
}
