//! Maps an error to the exit code that says what failed: the facade classifies (see
//! `evicortex::ErrorClass::of`), and this file turns a class into a code, in one match.

use evicortex::ErrorClass;

/// Bad input or usage, detected by the CLI itself (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit code for `err`: that of the first cause in its chain with a known class.
pub fn code_for(err: &anyhow::Error) -> u8 {
    let class = err.chain().find_map(|cause| {
        if cause.downcast_ref::<UsageError>().is_some() {
            return Some(ErrorClass::BadInput);
        }
        if let Some(e) = cause.downcast_ref::<evicortex_server::KeyStoreError>() {
            return Some(e.class());
        }
        ErrorClass::of(cause)
    });
    match class {
        Some(ErrorClass::BadInput) => 2,
        Some(ErrorClass::Io) => 3,
        Some(ErrorClass::Integrity) => 4,
        Some(ErrorClass::ModelMissing) => 5,
        Some(ErrorClass::Internal) | Some(_) | None => 1,
    }
}
