//! Maps an error to the exit code that says what failed. A command that adds an error type
//! adds one `downcast_ref` line here.

use evicortex::ErrorClass;

/// Bad input or usage, detected by the CLI itself (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit code for `err`: the first cause in its chain that says what it is.
pub fn code_for(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(code) = crate::commands::embed::exit_code(cause) {
            return code;
        }
        let class = if cause.downcast_ref::<UsageError>().is_some() {
            Some(ErrorClass::BadInput)
        } else if let Some(e) = cause.downcast_ref::<evicortex::IngestError>() {
            Some(e.class())
        } else if let Some(e) = cause.downcast_ref::<evicortex::OpenError>() {
            Some(e.class())
        } else if let Some(e) = cause.downcast_ref::<evicortex::AppendError>() {
            Some(e.class())
        } else if let Some(e) = cause.downcast_ref::<evicortex::EraseError>() {
            Some(e.class())
        } else if let Some(e) = cause.downcast_ref::<evicortex::ExportError>() {
            Some(e.class())
        } else if let Some(e) = cause.downcast_ref::<evicortex::CompileError>() {
            e.class()
        } else if let Some(e) = cause.downcast_ref::<evicortex::ReadError>() {
            Some(ErrorClass::of_read(e))
        } else if let Some(e) = cause.downcast_ref::<evicortex::VerifyError>() {
            Some(ErrorClass::of_verify(e))
        } else if let Some(e) = cause.downcast_ref::<evicortex::MigrateError>() {
            Some(ErrorClass::of_migrate(e))
        } else if let Some(e) = cause.downcast_ref::<evicortex_server::KeyStoreError>() {
            Some(e.class())
        } else if cause.downcast_ref::<evicortex_core::IdError>().is_some() {
            Some(ErrorClass::BadInput)
        } else if cause.downcast_ref::<std::io::Error>().is_some() {
            Some(ErrorClass::Io)
        } else {
            None
        };
        if let Some(class) = class {
            return match class {
                ErrorClass::BadInput => 2,
                ErrorClass::Io => 3,
                ErrorClass::Integrity => 4,
                ErrorClass::Internal => 1,
            };
        }
    }
    1
}
