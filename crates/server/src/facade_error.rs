//! The API error of a facade error: the facade's [`RequestFailure`] decides the status, in one
//! match; bad input names the field to blame (`turns[2].time`, `options.rerank.depth`, `query`),
//! and a storage failure is 507 on a full disk, 503 while the ledger refuses writes until a
//! restart or its database server is out of reach, else 500.

use std::error::Error;

use evicortex::front_end::{BadInputKind, BlamedField, RequestFailure};
use evicortex::{ErrorClass, StorageCondition};

use crate::ApiError;

/// The API error for `err` (any error of the `evicortex` facade, or one wrapping it).
pub fn facade_error(err: &(dyn Error + 'static)) -> ApiError {
    let failure = RequestFailure::of(err);
    let message = failure.message;
    match failure.class {
        ErrorClass::BadInput => {
            let field = failure.field.map(|field| match field {
                BlamedField::Request(field) => field,
                BlamedField::Setting(field) => format!("options.{field}"),
                BlamedField::Settings => "options".to_owned(),
            });
            match failure.kind {
                Some(BadInputKind::Conflict) => ApiError::Conflict { field, message },
                Some(BadInputKind::NotFound) => ApiError::NotFound { field: None, message },
                Some(BadInputKind::ReadOnly) => ApiError::Unavailable { message },
                None => ApiError::invalid(field.unwrap_or_else(|| "body".to_owned()), message),
            }
        }
        ErrorClass::Integrity => ApiError::Integrity { message },
        ErrorClass::ModelMissing => ApiError::Unavailable { message },
        _ => match StorageCondition::of(err) {
            Some(StorageCondition::DiskFull) => ApiError::InsufficientStorage { message },
            Some(StorageCondition::WritesRefused | StorageCondition::DatabaseUnavailable) => {
                ApiError::Unavailable { message }
            }
            None => ApiError::Storage { message },
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use axum::http::StatusCode;
    use evicortex::{AppendError, StorageError};

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
