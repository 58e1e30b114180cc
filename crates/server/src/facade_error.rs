//! The API error of a facade error: its [`ErrorClass`] decides the status, in one match; bad input
//! names the field to blame (`turns[2].time`, `options.rerank.depth`, `query`).

use std::error::Error;

use evicortex::{AppendError, CompileError, EraseError, ErrorClass};

use crate::ApiError;

/// The API error for `err` (any error of the `evicortex` facade, or one wrapping it).
pub fn facade_error(err: &(dyn Error + 'static)) -> ApiError {
    let message = err.to_string();
    match ErrorClass::of(err) {
        Some(ErrorClass::BadInput) => bad_input(err, message),
        Some(ErrorClass::Integrity) => ApiError::Integrity { message },
        Some(ErrorClass::ModelMissing) => ApiError::Unavailable { message },
        Some(ErrorClass::Io | ErrorClass::Internal) | Some(_) | None => {
            ApiError::Storage { message }
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
            AppendError::ReadOnly { .. } => ApiError::Unavailable { message },
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
            L::WrongNamespace { turn_id, namespace } => ApiError::NotFound {
                field: None,
                message: format!(
                    "nothing to erase: {} matches no record",
                    evicortex::EraseTarget::Record(namespace.clone(), *turn_id)
                ),
            },
            L::ReadOnly { .. } => ApiError::Unavailable { message },
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
